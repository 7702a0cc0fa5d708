/* dlhost.c - runs two executors of the bundled tinyvm stencils through a
 * libstencilrt.so opened with dlopen() and used only through dlsym(). It does
 * not link stencilrt: tests/integration/test_gdb.py hands it a stripped copy
 * of the shared library, so GDB can only find the JIT interface
 * (__jit_debug_descriptor, __jit_debug_register_code) in that copy's .dynsym.
 *
 *     dlhost LIBRARY [--once] [--bad-cfi]
 *
 * prints the results (42, then 82) and exits 0. --once stops after the first
 * run (no leaf2). --bad-cfi hands the runtime an executor CFI rule with the
 * save slots of r12 and r13 swapped: a deliberately wrong JIT for the tests'
 * negative control (names and the chain to main stay right, the unwound
 * registers do not).
 *
 * Executors ("call" operands: function index, argument count):
 *     0 leaf: load 0; native 1; addi 1; ret       -> dlhost_breakpoint(arg)
 *     1 root: push 41; call 0 1; print; ret
 * then leaf is freed and function 0 becomes (in the same memory)
 *     0 leaf2: load 0; push 2; mul; native 1; ret
 * and root runs again.
 * Built with -fno-optimize-sibling-calls -fno-inline, so the C frames between
 * JIT frames are exactly: dlhost_breakpoint, vm_native (below the leaf) and
 * run_function, vm_call (between JIT frames), run_function, main (at the end).
 */
#include <dlfcn.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jit_stencils.h"
#include "stencilrt.h"
#include "tinyvm.h"

typedef vm_value shim_fn(vm_frame *frame, vm_value *sp, void *code);

static struct {
    sr_status (*runtime_create)(const sr_stencil_set *, const void *const *, const sr_config *,
                                sr_runtime **);
    void (*runtime_destroy)(sr_runtime *);
    void *(*shim_entry)(const sr_runtime *);
    sr_status (*emit)(sr_runtime *, const sr_instr *, size_t, const char *, sr_executor **);
    void *(*executor_entry)(const sr_executor *);
    void (*executor_free)(sr_executor *);
    void *(*executor_instr)(const sr_executor *, size_t);
    const char *(*last_error)(void);
} api;

static sr_stencil_set stencil_set = SR_STENCIL_SET_FROM_HEADER;

enum { FN_LEAF, FN_ROOT, FN__COUNT };
static void *entries[FN__COUNT];
static shim_fn *shim;

/* What tests/gdb/stepcheck.py reads (the shape of tinyvm's vm_function). */
typedef struct dlhost_function {
    const char *name;
    const sr_instr *code;
    size_t n;
    sr_executor *executor;
} dlhost_function;
dlhost_function dlhost_functions[FN__COUNT];
size_t dlhost_nfunctions = FN__COUNT;
void *dlhost_shim;
/* dlhost_instr[i][k]: the address of instruction k of function i (k == n: the
 * end), for GDB to read (it cannot call into the program on every CPU). */
void **dlhost_instr[FN__COUNT];

/* --bad-cfi: swap the CFA offsets of r12 and r13 (DW_CFA_offset 0x8c, 0x8d). */
static uint8_t bad_cfi[64];

static void break_cfi(void)
{
    const uint8_t *in = stencil_set.executor_cfi;
    size_t n = stencil_set.executor_cfi_len;
    if (n > sizeof bad_cfi) {
        fputs("dlhost: executor CFI too long\n", stderr);
        exit(1);
    }
    memcpy(bad_cfi, in, n);
    size_t r12 = 0, r13 = 0;
    for (size_t i = 0; i < n;) {
        uint8_t op = bad_cfi[i];
        if (op == 0x0c) { /* DW_CFA_def_cfa reg, offset (one-byte ULEBs here) */
            i += 3;
        } else if ((op & 0xc0) == 0x80) { /* DW_CFA_offset | reg, offset */
            if (op == 0x8c)
                r12 = i + 1;
            if (op == 0x8d)
                r13 = i + 1;
            i += 2;
        } else {
            fprintf(stderr, "dlhost: unexpected CFA opcode 0x%02x\n", op);
            exit(1);
        }
    }
    if (!r12 || !r13 || bad_cfi[r12] == bad_cfi[r13]) {
        fputs("dlhost: no r12/r13 rule to swap\n", stderr);
        exit(1);
    }
    uint8_t t = bad_cfi[r12];
    bad_cfi[r12] = bad_cfi[r13];
    bad_cfi[r13] = t;
    stencil_set.executor_cfi = bad_cfi;
}

__attribute__((noinline)) vm_value dlhost_breakpoint(vm_value v)
{
    __asm__ volatile("" ::: "memory"); /* GDB breaks here */
    return v;
}

__attribute__((noinline)) static vm_value run_function(vm_value fn, vm_value argc,
                                                       const vm_value *args)
{
    vm_frame frame = {.function = (int32_t)fn};
    vm_value stack[64];
    for (vm_value i = 0; i < argc && i < VM_MAX_LOCALS; i++)
        frame.locals[i] = args[i];
    vm_value r = shim(&frame, stack, entries[fn]);
    __asm__ volatile("" ::: "memory");
    return r;
}

vm_value vm_call(vm_frame *caller, vm_value function, vm_value argc, vm_value *args)
{
    (void)caller;
    if (function < 0 || function >= FN__COUNT)
        abort();
    vm_value r = run_function(function, argc, args);
    __asm__ volatile("" ::: "memory");
    return r;
}

vm_value vm_print(vm_frame *frame, vm_value value)
{
    (void)frame;
    printf("%" PRId64 "\n", value);
    return value;
}

vm_value vm_native(vm_frame *frame, vm_value which, vm_value arg)
{
    (void)frame;
    (void)which;
    vm_value r = dlhost_breakpoint(arg);
    __asm__ volatile("" ::: "memory");
    return r;
}

_Noreturn void vm_trap(vm_frame *frame, const char *why)
{
    (void)frame;
    fprintf(stderr, "dlhost: trap: %s\n", why);
    exit(3);
}

static bool emit(sr_runtime *rt, int i, dlhost_function f)
{
    if (api.emit(rt, f.code, f.n, f.name, &f.executor) != SR_OK) {
        fprintf(stderr, "dlhost: cannot emit %s: %s\n", f.name, api.last_error());
        return false;
    }
    dlhost_functions[i] = f;
    entries[i] = api.executor_entry(f.executor);
    free(dlhost_instr[i]); /* a function emitted again */
    dlhost_instr[i] = calloc(f.n + 1, sizeof *dlhost_instr[i]);
    if (!dlhost_instr[i]) {
        fprintf(stderr, "dlhost: out of memory\n");
        return false;
    }
    for (size_t k = 0; k <= f.n; k++)
        dlhost_instr[i][k] = api.executor_instr(f.executor, k);
    return true;
}

static void *need(void *lib, const char *name)
{
    void *p = dlsym(lib, name);
    if (!p) {
        fprintf(stderr, "dlhost: %s: %s\n", name, dlerror());
        exit(1);
    }
    return p;
}

int main(int argc, char **argv)
{
    bool once = false;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--once"))
            once = true;
        else if (!strcmp(argv[i], "--bad-cfi"))
            break_cfi();
        else
            argc = 0;
    }
    if (argc < 2) {
        fputs("usage: dlhost LIBRARY [--once] [--bad-cfi]\n", stderr);
        return 2;
    }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "dlhost: %s\n", dlerror());
        return 1;
    }
    *(void **)&api.runtime_create = need(lib, "sr_runtime_create");
    *(void **)&api.runtime_destroy = need(lib, "sr_runtime_destroy");
    *(void **)&api.shim_entry = need(lib, "sr_shim_entry");
    *(void **)&api.emit = need(lib, "sr_emit");
    *(void **)&api.executor_entry = need(lib, "sr_executor_entry");
    *(void **)&api.executor_free = need(lib, "sr_executor_free");
    *(void **)&api.executor_instr = need(lib, "sr_executor_instr");
    *(void **)&api.last_error = need(lib, "sr_last_error");

    const void *symbols[SG_SYM__COUNT] = {
        [SG_SYM_vm_call] = (const void *)vm_call,
        [SG_SYM_vm_print] = (const void *)vm_print,
        [SG_SYM_vm_native] = (const void *)vm_native,
        [SG_SYM_vm_trap] = (const void *)vm_trap,
    };
    sr_runtime *rt;
    if (api.runtime_create(&stencil_set, symbols, NULL, &rt) != SR_OK) {
        fprintf(stderr, "dlhost: %s\n", api.last_error());
        return 1;
    }
    static const sr_instr leaf[] = {
        {SG_OP_load, 0, {0}}, {SG_OP_native, 0, {1}}, {SG_OP_addi, 0, {1}}, {SG_OP_ret, 0, {0}}};
    static const sr_instr root[] = {
        {SG_OP_push, 0, {41}}, {SG_OP_call, 0, {FN_LEAF, 1}}, {SG_OP_print, 0, {0}},
        {SG_OP_ret, 0, {0}}};
    static const sr_instr leaf2[] = {{SG_OP_load, 0, {0}}, {SG_OP_push, 0, {2}},
                                     {SG_OP_mul, 0, {0}}, {SG_OP_native, 0, {1}},
                                     {SG_OP_ret, 0, {0}}};
    const dlhost_function fns[] = {{"leaf", leaf, 4, NULL}, {"root", root, 4, NULL}};
    for (int i = 0; i < FN__COUNT; i++)
        if (!emit(rt, i, fns[i]))
            return 1;
    shim = (shim_fn *)api.shim_entry(rt);
    dlhost_shim = (void *)shim;
    vm_value result = run_function(FN_ROOT, 0, NULL);
    printf("result %" PRId64 "\n", result);
    bool ok = result == 42;

    if (!once) {
        /* Replace leaf by leaf2, in the memory leaf had (first fit): GDB must
         * drop leaf's symbols and show leaf2's. */
        void *old_leaf = entries[FN_LEAF];
        api.executor_free(dlhost_functions[FN_LEAF].executor);
        if (!emit(rt, FN_LEAF, (dlhost_function){"leaf2", leaf2, 5, NULL}))
            return 1;
        result = run_function(FN_ROOT, 0, NULL);
        printf("result %" PRId64 " (leaf2 %s leaf's address)\n", result,
               entries[FN_LEAF] == old_leaf ? "at" : "not at");
        ok = ok && result == 82;
    }
    for (int i = 0; i < FN__COUNT; i++) {
        api.executor_free(dlhost_functions[i].executor);
        free(dlhost_instr[i]);
    }
    api.runtime_destroy(rt);
    dlclose(lib);
    return ok ? 0 : 1;
}
