/* win_glue.c - see win_glue.h. */
#include "win_glue.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <windows.h>

#include "vm.h"

#define VENEER_WINDOW 1024 /* bytes after an executor's code its veneers may take */

_Static_assert((int)WIN_NATIVE_TRAP == (int)NATIVE_TRAP &&
                   (int)WIN_NATIVE_BACKTRACE == (int)NATIVE_BACKTRACE &&
                   (int)WIN_NATIVE_BREAKPOINT == (int)NATIVE_BREAKPOINT,
               "native numbers");

WIN_TLS volatile int win_depth;

/* vm_run is tinyvm's own (stencils/run.c): every call of it is counted in
 * win_depth, here and in win_run. vm_call keeps a frame of its own (the
 * checks expect it between a JIT frame and the vm_run below it). */
__attribute__((noinline)) vm_value vm_call(vm_frame *caller, vm_value function, vm_value argc,
                                           vm_value *args)
{
    win_depth++;
    vm_value v = vm_run(caller->vm, (size_t)function, argc, args);
    win_depth--; /* also makes the call no tail call */
    return v;
}

/* ---- the JIT, with the unwind information as the test asks */

static uint8_t mutated[256];

static void mutate(sr_stencil_set *set, const char *how)
{
    if (strcmp(how, "frame-offset") || set->executor_unwind_info_len > sizeof mutated ||
        set->executor_unwind_info_len < 4) {
        fprintf(stderr, "win_glue: WIN_TEST_MUTATE=%s: unknown, or no UNWIND_INFO to change\n",
                how);
        exit(2);
    }
    memcpy(mutated, set->executor_unwind_info, set->executor_unwind_info_len);
    /* Byte 3: FrameRegister in the low nibble, FrameOffset (x16) in the high. */
    mutated[3] = (uint8_t)(mutated[3] + 0x10);
    set->executor_unwind_info = mutated;
}

static sr_stencil_set stencil_set = SR_STENCIL_SET_FROM_HEADER;

static bool jit_init(struct vm *vm)
{
    const char *how = getenv("WIN_TEST_MUTATE");
    if (how && *how)
        mutate(&stencil_set, how);
    if (!vm_jit_runtime_with(vm, &stencil_set))
        return false;
    /* One sr_emit per function, where tinyvm's vm_jit_init emits one batch:
     * these tests exercise sr_emit's own registration of each executor. */
    for (size_t i = 0; i < vm->nfunctions; i++) {
        vm_function *f = &vm->functions[i];
        if (sr_emit(vm->rt, f->code, f->n, f->name, &f->executor) != SR_OK) {
            fprintf(stderr, "win_glue: cannot compile %s: %s\n", f->name, sr_last_error());
            exit(1);
        }
        f->entry = sr_executor_entry(f->executor);
    }
    return true;
}

struct vm *win_load(const char *path, int jit)
{
    return tvm_load(path, jit, jit_init);
}

vm_value win_run(struct vm *vm, const char *name, vm_value argc, const vm_value *args)
{
    win_depth++;
    vm_value v = tvm_run(vm, name, argc, args);
    win_depth--;
    return v;
}

/* Where executor e's cold parts start: its code is [hot parts][cold parts],
 * so the end of its code less the cold part of each instruction's op. */
static uintptr_t cold_start(const struct vm *vm, const sr_executor *e)
{
    for (size_t k = 0; k < vm->nfunctions; k++) {
        const vm_function *f = &vm->functions[k];
        if (f->executor != e)
            continue;
        uintptr_t at = (uintptr_t)sr_executor_instr(e, f->n);
        for (size_t i = 0; i < f->n && stencil_set.cold_sizes; i++)
            at -= stencil_set.cold_sizes[f->code[i].op];
        return at;
    }
    return UINTPTR_MAX; /* not one of the program's executors (a copy): no cold part known */
}

win_code win_locate(const struct vm *vm, uintptr_t pc)
{
    win_code c = {WIN_CODE_NONE, NULL, NULL, 0, 0};
    if (vm->mode != VM_JIT)
        return c;
    sr_executor *e;
    size_t i;
    if (sr_lookup_pc(vm->rt, (const void *)pc, &e, &i)) {
        c = (win_code){WIN_CODE_EXECUTOR, sr_executor_name(e), sr_executor_instr_name(e, i),
                       pc - (uintptr_t)sr_executor_entry(e), pc >= cold_start(vm, e)};
        return c;
    }
    uintptr_t shim = (uintptr_t)vm->shim - SG_SHIM_ENTRY;
    if (pc >= shim && pc < shim + sg_shim.code_size)
        return (win_code){WIN_CODE_SHIM, "shim", NULL, pc - shim, 0};
    /* Veneers follow an executor's instructions in its chunk (data after
     * them never runs, so a PC there is a veneer's); no module holds them. */
    HMODULE module;
    if (GetModuleHandleExW(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS |
                               GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
                           (LPCWSTR)pc, &module))
        return c;
    for (size_t k = 0; k < vm->nfunctions; k++) {
        const sr_executor *e = vm->functions[k].executor;
        uintptr_t end = (uintptr_t)sr_executor_entry(e) + sr_executor_code_size(e);
        if (pc >= end && pc < end + VENEER_WINDOW)
            return (win_code){WIN_CODE_VENEER, sr_executor_name(e), NULL,
                              pc - (uintptr_t)sr_executor_entry(e), 0};
    }
    return c;
}

const void *win_jit_code(const struct vm *vm, size_t i)
{
    if (vm->mode != VM_JIT || i > vm->nfunctions)
        return NULL;
    return i < vm->nfunctions ? vm->functions[i].entry : (const uint8_t *)vm->shim - SG_SHIM_ENTRY;
}

uintptr_t win_shim_return(const struct vm *vm)
{
    return (uintptr_t)vm->shim - SG_SHIM_ENTRY + SG_SHIM_CALL_OFFSET + SG_SHIM_CALL_SIZE;
}

const void *win_instr(const struct vm *vm, size_t fn, size_t i)
{
    if (vm->mode != VM_JIT || fn >= vm->nfunctions)
        return NULL;
    return sr_executor_instr(vm->functions[fn].executor, i);
}

void win_emit_and_free_copies(struct vm *vm)
{
    for (size_t i = 0; i < vm->nfunctions; i++) {
        sr_executor *e;
        if (sr_emit(vm->rt, vm->functions[i].code, vm->functions[i].n, "copy", &e) != SR_OK) {
            fprintf(stderr, "win_glue: cannot compile a copy of %s: %s\n",
                    vm->functions[i].name, sr_last_error());
            exit(1);
        }
        sr_executor_free(e);
    }
}

/* ---- deregistration: no function table outlives its code */

static int dereg_failures;

static void dereg_expect(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void dereg_expect(bool ok, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("dereg: %s: ", ok ? "ok" : "FAIL");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    dereg_failures += !ok;
}

static bool has_table(const void *pc)
{
    DWORD64 base;
    return RtlLookupFunctionEntry((DWORD64)(uintptr_t)pc, &base, NULL) != NULL;
}

static size_t tables(const struct vm *vm)
{
    return sr_runtime_stats(vm->rt).frames_registered;
}

/* A batch whose second program is bad (an op that does not exist): its first
 * executor was emitted and registered before the failure, and must be gone.
 * The batch's first chunk is `reused`'s: the same size, freed just before. */
static void failed_batch(struct vm *vm, size_t before)
{
    vm_function *f = &vm->functions[0];
    sr_executor *probe;
    if (sr_emit(vm->rt, f->code, f->n, "probe", &probe) != SR_OK) {
        fprintf(stderr, "win_glue: cannot compile a probe: %s\n", sr_last_error());
        exit(1);
    }
    const void *reused = sr_executor_entry(probe);
    sr_executor_free(probe);
    sr_instr bad = {.op = SG_OP__COUNT};
    sr_program progs[2] = {{f->code, f->n, "first"}, {&bad, 1, "bad"}};
    sr_executor *out[2];
    sr_status st = sr_emit_batch(vm->rt, progs, 2, out);
    dereg_expect(st != SR_OK, "the bad batch is refused: %s", st ? sr_last_error() : "emitted");
    dereg_expect(tables(vm) == before, "after the failed batch: %zu function tables (want %zu)",
                 tables(vm), before);
    dereg_expect(!has_table(reused), "after the failed batch: no table at its first chunk %p",
                 reused);
}

int win_deregistration_check(struct vm *vm)
{
    size_t n = vm->nfunctions;
    dereg_expect(tables(vm) == n + 1, "%zu executors and the shim: %zu function tables", n,
                 tables(vm));
    failed_batch(vm, n + 1);
    const void *shim = vm->shim;
    dereg_expect(has_table(shim), "the shim has its table");
    for (size_t i = 0; i < n; i++) {
        vm_function *f = &vm->functions[i];
        dereg_expect(has_table(f->entry), "%s has its table", f->name);
        sr_executor_free(f->executor);
        f->executor = NULL;
        dereg_expect(!has_table(f->entry) && tables(vm) == n - i,
                     "%s freed: %s table at %p, %zu tables (want %zu)", f->name,
                     has_table(f->entry) ? "still a" : "no", f->entry, tables(vm), n - i);
    }
    sr_runtime_destroy(vm->rt);
    vm->rt = NULL;
    vm->mode = VM_INTERP; /* nothing left for tvm_unload to free */
    dereg_expect(!has_table(shim), "runtime destroyed: %s table at the shim %p",
                 has_table(shim) ? "still a" : "no", shim);
    printf("dereg: %d failures\n", dereg_failures);
    return dereg_failures ? 1 : 0;
}

size_t win_repatch_jumps(struct vm *vm)
{
    size_t patched = 0;
    for (size_t fn = 0; fn < vm->nfunctions; fn++) {
        vm_function *f = &vm->functions[fn];
        for (size_t i = 0; i < f->n; i++) {
            sr_status st = sr_patch_jump(f->executor, i, sr_executor_instr(f->executor,
                                                                           f->code[i].target));
            if (st == SR_OK)
                patched++;
            else if (st != SR_EINVAL) { /* SR_EINVAL: an op without a jump target */
                fprintf(stderr, "win_glue: cannot patch %s[%zu]: %s\n", f->name, i,
                        sr_last_error());
                exit(1);
            }
        }
    }
    return patched;
}
