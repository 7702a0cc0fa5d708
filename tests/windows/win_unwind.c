/* win_unwind.c - the Windows x64 unwinder through JIT frames, under Wine.
 *
 *   win_unwind step PROGRAM [ARG]       single-step the program's main with the
 *                                       trap flag; at every PC in JIT code
 *                                       (executors, veneers, the shim) walk the
 *                                       stack with RtlLookupFunctionEntry +
 *                                       RtlVirtualUnwind frame by frame to main
 *   win_unwind backtrace PROGRAM [ARG]  RtlCaptureStackBackTrace from a helper
 *                                       (`native backtrace`) called by JIT code
 *   win_unwind seh PROGRAM [ARG]        RaiseException in a helper (`native
 *                                       trap`), handled by __except in main
 *   win_unwind threads PROGRAM [ARG]    backtrace mode in four threads at once,
 *                                       each emitting and freeing executors
 *   win_unwind memory PROGRAM [--chain] W^X: every page of every executor's
 *                                       and the shim's chunk is execute+read
 *   win_unwind dereg PROGRAM            no function table outlives its code
 *                                       (win_deregistration_check)
 *   win_unwind cold PROGRAM [ARG]       step mode on main(ARG), which must not
 *                                       trap, then on main(0), which must trap
 *                                       from an op's cold part (div by zero):
 *                                       every PC of cold code it runs is walked
 *                                       too, and counted
 *
 * ARG (default 0) is main's local 0. A walk must go JIT frame, vm_run,
 * (vm_call, JIT frame, vm_run)..., main: every JIT frame's caller is vm_run
 * (the shim's caller), the stack pointer grows at every step, and it finds one
 * JIT frame per tinyvm call active. One exception, which is Windows' rule: at
 * an executor's `ret` the unwinder sees an epilog and returns to where it
 * leads, the shim's return address, whose frame (the same tinyvm call) then
 * leads to vm_run. Prints one summary line, and a line per failing PC naming
 * the PC, the op and executor, and the instruction's bytes; exits 1 on any
 * failure. */
#include <windows.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "win_glue.h"

#define MAX_FRAMES 64
#define MAX_REPORTS 20
#define MAX_PCS 65536

static struct vm *vm;
static vm_value main_arg;
static uintptr_t main_start, main_end, run_start, run_end;

/* ---- the helpers JIT code calls */

/* What the last backtrace found, on this thread; `top` is the function a
 * backtrace must reach (main, or a thread's own function). */
static _Thread_local int backtrace_jit_frames = -1, backtrace_depth, backtrace_main;
static _Thread_local USHORT backtrace_frames;
static _Thread_local uintptr_t top_start, top_end;
static _Thread_local bool backtrace_quiet;

static void capture_backtrace(void)
{
    void *pcs[MAX_FRAMES];
    backtrace_frames = RtlCaptureStackBackTrace(0, MAX_FRAMES, pcs, NULL);
    backtrace_depth = win_depth;
    backtrace_jit_frames = 0;
    backtrace_main = 0;
    for (USHORT i = 0; i < backtrace_frames; i++) {
        uintptr_t pc = (uintptr_t)pcs[i];
        win_code c = win_locate(vm, pc - 1); /* a return address: its call is before it */
        backtrace_jit_frames += c.kind != WIN_CODE_NONE;
        backtrace_main |= pc > top_start && pc <= top_end;
        if (!backtrace_quiet)
            printf("  #%u %p %s\n", i, pcs[i], c.instr ? c.instr : c.name ? c.name : "");
    }
}

enum { SEH_CODE = 0xE0005E40 }; /* a customer code (bit 29) of our own */

vm_value vm_native(vm_frame *frame, vm_value which, vm_value arg)
{
    (void)frame;
    if (which == WIN_NATIVE_BACKTRACE)
        capture_backtrace();
    else if (which == WIN_NATIVE_TRAP) {
        ULONG_PTR info[1] = {(ULONG_PTR)arg};
        RaiseException(SEH_CODE, 0, 1, info);
    }
    return arg;
}

vm_value vm_print(vm_frame *frame, vm_value value)
{
    (void)frame; /* no output: a step test must not single-step into the system */
    return value;
}

static volatile bool stepping, trap_expected;
static vm_value first_arg, first_result; /* cold mode's run that does not trap */
static _Noreturn void finish_cold(const char *why, uintptr_t caller);

_Noreturn void vm_trap(vm_frame *frame, const char *why)
{
    (void)frame;
    stepping = false; /* first: stepping into the system below would hang Wine */
    if (trap_expected)
        finish_cold(why, (uintptr_t)__builtin_return_address(0));
    fprintf(stderr, "win_unwind: trap: %s\n", why);
    exit(3);
}

/* ---- ranges of C functions, from their own RUNTIME_FUNCTION */

static void function_range(const void *fn, uintptr_t *start, uintptr_t *end)
{
    DWORD64 base;
    PRUNTIME_FUNCTION f = RtlLookupFunctionEntry((DWORD64)(uintptr_t)fn, &base, NULL);
    if (!f) {
        fprintf(stderr, "win_unwind: no RUNTIME_FUNCTION for %p\n", fn);
        exit(2);
    }
    *start = (uintptr_t)(base + f->BeginAddress);
    *end = (uintptr_t)(base + f->EndAddress);
}

static bool in(uintptr_t pc, uintptr_t start, uintptr_t end)
{
    return pc >= start && pc < end;
}

/* ---- one walk from a context in JIT code to main */

/* Walk from ctx; false with why[] saying where the chain broke. */
static bool walk_to_main(const CONTEXT *ctx, char *why, size_t whylen)
{
    CONTEXT c = *ctx;
    int jit = 0;
    bool caller_must_be_run = false, caller_may_be_shim = false; /* for the next frame */
    for (int k = 0; k < MAX_FRAMES; k++) {
        uintptr_t pc = (uintptr_t)c.Rip;
        win_code code = win_locate(vm, pc);
        bool epilog_return = caller_may_be_shim && pc == win_shim_return(vm);
        if (caller_must_be_run && !epilog_return && !in(pc, run_start, run_end)) {
            snprintf(why, whylen, "frame %d: the JIT frame's caller %#llx is not in vm_run", k,
                     (unsigned long long)pc);
            return false;
        }
        if (in(pc, main_start, main_end)) {
            if (jit == win_depth)
                return true;
            snprintf(why, whylen, "reached main after %d JIT frames, %d tinyvm calls active", jit,
                     win_depth);
            return false;
        }
        caller_must_be_run = code.kind != WIN_CODE_NONE;
        caller_may_be_shim = code.kind == WIN_CODE_EXECUTOR && *(const uint8_t *)pc == 0xc3;
        jit += caller_must_be_run && !epilog_return; /* the same call's frame again */
        DWORD64 base;
        PRUNTIME_FUNCTION f = RtlLookupFunctionEntry((DWORD64)pc, &base, NULL);
        if (!f) {
            snprintf(why, whylen, "frame %d: no RUNTIME_FUNCTION for pc %#llx%s%s", k,
                     (unsigned long long)pc, code.name ? " in " : "", code.name ? code.name : "");
            return false;
        }
        DWORD64 sp = c.Rsp, establisher;
        PVOID data;
        RtlVirtualUnwind(UNW_FLAG_NHANDLER, base, (DWORD64)pc, f, &c, &data, &establisher, NULL);
        if (c.Rsp <= sp) {
            snprintf(why, whylen, "frame %d: unwinding pc %#llx left the stack pointer at %#llx "
                     "(was %#llx)", k, (unsigned long long)pc, (unsigned long long)c.Rsp,
                     (unsigned long long)sp);
            return false;
        }
    }
    snprintf(why, whylen, "no main within %d frames", MAX_FRAMES);
    return false;
}

/* ---- single-stepping */

static size_t checked, checked_shim, checked_ret, checked_veneer, failures, distinct;
static size_t checked_cold, distinct_cold, failures_cold; /* PCs in an executor's cold parts */
static uintptr_t *seen; /* open addressing, MAX_PCS slots */

/* Whether pc is new. */
static bool remember(uintptr_t pc)
{
    for (size_t i = (pc * 0x9E3779B97F4A7C15ull) >> 48, n = 0; n < MAX_PCS;
         i = (i + 1) % MAX_PCS, n++) {
        if (seen[i] == pc)
            return false;
        if (!seen[i]) {
            seen[i] = pc;
            distinct++;
            return true;
        }
    }
    return false;
}

static bool was_seen(uintptr_t pc)
{
    for (size_t i = (pc * 0x9E3779B97F4A7C15ull) >> 48, n = 0; n < MAX_PCS && seen[i];
         i = (i + 1) % MAX_PCS, n++)
        if (seen[i] == pc)
            return true;
    return false;
}

/* At a veneer (`jmp [rip+2]`) Windows sees an epilog and unwinds by popping
 * [rsp]: right only if the veneer was entered by a call from an executor, so
 * [rsp] is that call's return address. NULL when it is, else why not. */
static const char *veneer_entered_by_call(const CONTEXT *ctx)
{
    uintptr_t ret = *(const uintptr_t *)ctx->Rsp, pc = (uintptr_t)ctx->Rip;
    if (win_locate(vm, ret - 1).kind != WIN_CODE_EXECUTOR)
        return "[rsp] is not a return address into an executor";
    const uint8_t *call = (const uint8_t *)ret - 5;
    int32_t rel;
    memcpy(&rel, call + 1, 4);
    if (call[0] != 0xe8 || ret + (intptr_t)rel != pc)
        return "[rsp] follows no call of this veneer (entered by a jump?)";
    return NULL;
}

static void check_step(const CONTEXT *ctx)
{
    uintptr_t pc = (uintptr_t)ctx->Rip;
    win_code code = win_locate(vm, pc);
    if (code.kind == WIN_CODE_NONE)
        return;
    checked++;
    checked_shim += code.kind == WIN_CODE_SHIM;
    checked_veneer += code.kind == WIN_CODE_VENEER;
    /* An executor's ret: Windows unwinds it as an epilog, without its UNWIND_INFO. */
    checked_ret += code.kind == WIN_CODE_EXECUTOR && *(const uint8_t *)pc == 0xc3;
    checked_cold += code.cold;
    distinct_cold += remember(pc) && code.cold;
    char why[256];
    const char *veneer = code.kind == WIN_CODE_VENEER ? veneer_entered_by_call(ctx) : NULL;
    if (veneer)
        snprintf(why, sizeof why, "veneer: %s", veneer);
    else if (walk_to_main(ctx, why, sizeof why))
        return;
    failures_cold += code.cold;
    if (failures++ < MAX_REPORTS) {
        const uint8_t *b = (const uint8_t *)pc;
        const char *what = code.instr ? code.instr : code.kind == WIN_CODE_SHIM ? "shim" : "veneer";
        printf("FAIL pc %#llx %s+%#zx (%s) bytes %02x %02x %02x %02x %02x %02x %02x %02x: %s\n",
               (unsigned long long)pc, code.name, code.offset,
               what, b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7],
               why);
    }
}

static LONG CALLBACK on_exception(EXCEPTION_POINTERS *ep)
{
    if (ep->ExceptionRecord->ExceptionCode != EXCEPTION_SINGLE_STEP)
        return EXCEPTION_CONTINUE_SEARCH;
    check_step(ep->ContextRecord);
    if (stepping)
        ep->ContextRecord->EFlags |= 0x100; /* TF: trap after the next instruction too */
    return EXCEPTION_CONTINUE_EXECUTION;
}

__attribute__((noinline)) static vm_value run_stepped(void)
{
    stepping = true;
    __asm__ volatile("pushfq; orq $0x100, (%%rsp); popfq" ::: "memory", "cc");
    vm_value r = win_run(vm, "main", 1, &main_arg);
    stepping = false;
    return r;
}

static bool start_stepping(void)
{
    seen = calloc(MAX_PCS, sizeof *seen);
    return seen && AddVectoredExceptionHandler(1, on_exception);
}

/* The summary of what was stepped; 1 on any failure. */
static int report_step(vm_value r)
{
    /* Every instruction of every executor was reached: its first PC stepped. */
    size_t instrs = 0, reached = 0;
    for (size_t fn = 0; win_instr(vm, fn, 0); fn++)
        for (size_t i = 0; win_instr(vm, fn, i + 1); i++) {
            instrs++;
            bool hit = was_seen((uintptr_t)win_instr(vm, fn, i));
            reached += hit;
            if (!hit)
                printf("FAIL instruction %zu of function %zu never ran\n", i, fn);
        }
    printf("step: %zu of %zu VM instructions reached\n", reached, instrs);
    failures += instrs - reached;
    printf("step: result %lld, %zu JIT PCs checked (%zu in the shim, %zu at an executor's ret, "
           "%zu in veneers), %zu distinct, %zu failures\n", (long long)r, checked, checked_shim,
           checked_ret, checked_veneer, distinct, failures);
    return failures || !checked ? 1 : 0;
}

static int step(void)
{
    return start_stepping() ? report_step(run_stepped()) : 2;
}

/* Cold mode, at the trap (vm_trap): what was stepped, and where the trap was
 * called from, which must be an op's cold part (`caller` is the return
 * address of its call). Ends the process: nothing can return to JIT code. */
static _Noreturn void finish_cold(const char *why, uintptr_t caller)
{
    win_code from = win_locate(vm, caller - 1);
    int rc = report_step(first_result);
    printf("cold: main(%lld) = %lld; main(0) trapped (%s) from %s in its %s; %zu JIT PCs in "
           "cold parts checked (%zu distinct), %zu failures there\n", (long long)first_arg,
           (long long)first_result, why, from.instr ? from.instr : "no executor",
           from.cold ? "cold part" : "hot part", checked_cold, distinct_cold, failures_cold);
    fflush(stdout);
    exit(rc || !from.cold || !distinct_cold ? 1 : 0);
}

static int cold_mode(void)
{
    if (!start_stepping())
        return 2;
    first_arg = main_arg;
    first_result = run_stepped(); /* main(ARG): every instruction, no trap */
    main_arg = 0;
    trap_expected = true;
    run_stepped(); /* must trap, and finish_cold ends the run */
    printf("cold: FAIL: main(0) did not trap\n");
    return 1;
}

/* ---- the other modes */

static int backtrace_mode(void)
{
    vm_value r = win_run(vm, "main", 1, &main_arg);
    printf("backtrace: result %lld, %u frames, %d JIT frames with %d tinyvm calls active, "
           "main %s\n", (long long)r, backtrace_frames, backtrace_jit_frames, backtrace_depth,
           backtrace_main ? "reached" : "not reached");
    return backtrace_jit_frames > 0 && backtrace_jit_frames == backtrace_depth &&
                   backtrace_main ? 0 : 1;
}

/* The filter runs before anything is unwound: the raise's own context walks
 * to main by the same rules as a single step, so the handler was reached
 * through the JIT frames' unwind information, not by the dispatcher taking
 * a frame it cannot unwind for a leaf (Wine then pops stack slots until one
 * holds a return address, and can land in main with its registers wrong). */
static char seh_walk[256];

static int seh_filter(EXCEPTION_POINTERS *ep, int *caught)
{
    *caught = ep->ExceptionRecord->ExceptionCode == SEH_CODE;
    if (*caught && walk_to_main(ep->ContextRecord, seh_walk, sizeof seh_walk))
        snprintf(seh_walk, sizeof seh_walk, "ok");
    return *caught ? EXCEPTION_EXECUTE_HANDLER : EXCEPTION_CONTINUE_SEARCH;
}

static int seh_mode(void)
{
    int caught = 0, depth = 0;
    vm_value r = 0;
    __try {
        r = win_run(vm, "main", 1, &main_arg);
    } __except (seh_filter(GetExceptionInformation(), &caught)) {
        depth = win_depth; /* what the unwind left: vm_run's decrements were skipped */
    }
    printf("seh: %s (result %lld, %d tinyvm calls were active), walk from the raise: %s\n",
           caught ? "caught in main" : "not raised", (long long)r, depth, seh_walk);
    return caught && !strcmp(seh_walk, "ok") ? 0 : 1;
}

/* The end of code i's chunk: its UNWIND_INFO is the last thing in it. */
static const uint8_t *chunk_end(const uint8_t *code)
{
    DWORD64 base;
    PRUNTIME_FUNCTION f = RtlLookupFunctionEntry((DWORD64)(uintptr_t)code, &base, NULL);
    if (!f)
        return NULL;
    const uint8_t *info = (const uint8_t *)(uintptr_t)(base + f->UnwindData);
    return info + 4 + 2 * (size_t)info[2]; /* header, then CountOfCodes slots */
}

/* Every page of code i's chunk, region by region (VirtualQuery's RegionSize):
 * committed and execute+read. Pages counted into *pages; false if any is not. */
static bool chunk_pages_ok(size_t i, const uint8_t *code, size_t *pages)
{
    const uint8_t *end = chunk_end(code);
    if (!end) {
        printf("FAIL code %zu at %p: no RUNTIME_FUNCTION, so no chunk to check\n", i,
               (const void *)code);
        return false;
    }
    size_t page = 4096;
    const uint8_t *p = (const uint8_t *)((uintptr_t)code / page * page);
    while (p < end) {
        MEMORY_BASIC_INFORMATION mi;
        if (!VirtualQuery(p, &mi, sizeof mi) || !mi.RegionSize) {
            printf("FAIL code %zu: VirtualQuery(%p) failed\n", i, (const void *)p);
            return false;
        }
        const uint8_t *next = (const uint8_t *)mi.BaseAddress + mi.RegionSize;
        if (next > end)
            next = (const uint8_t *)(((uintptr_t)end + page - 1) / page * page);
        *pages += (size_t)(next - p) / page;
        if (mi.State != MEM_COMMIT || mi.Protect != PAGE_EXECUTE_READ) {
            printf("FAIL code %zu: %p..%p: state %#lx protection %#lx (want execute+read)\n", i,
                   (const void *)p, (const void *)next, (unsigned long)mi.State,
                   (unsigned long)mi.Protect);
            return false;
        }
        p = next;
    }
    return true;
}

/* W^X: every page of every executor's chunk and the shim's, to the end of
 * its function table, execute+read; with --chain also after every jump was
 * patched again (each flip back to execute+read). */
static int memory_mode(bool chain)
{
    size_t patched = 0;
    for (int round = 0; round < 1 + chain; round++) {
        if (round)
            patched = win_repatch_jumps(vm);
        size_t ranges = 0, pages = 0, bad = 0;
        for (size_t i = 0; win_jit_code(vm, i); i++, ranges++)
            bad += !chunk_pages_ok(i, win_jit_code(vm, i), &pages);
        printf("memory%s: %zu code ranges, %zu pages, %zu not execute+read\n",
               round ? " after repatching" : "", ranges, pages, bad);
        if (bad || !ranges || pages < ranges || (round && !patched))
            return 1;
    }
    if (chain)
        printf("memory: %zu jumps patched\n", patched);
    return 0;
}

/* Threads: each runs the program's main over and over (its `native
 * backtrace` must see one JIT frame per tinyvm call and reach the thread's
 * own function) while emitting and freeing copies of the program, so
 * function tables come and go under the other threads' unwinding. */
enum { THREADS = 4, THREAD_RUNS = 1000 };

static volatile LONG thread_failures, thread_backtraces;

static DWORD WINAPI thread_main(void *arg)
{
    (void)arg;
    function_range((const void *)thread_main, &top_start, &top_end);
    backtrace_quiet = true;
    for (int i = 0; i < THREAD_RUNS; i++) {
        backtrace_jit_frames = -1;
        win_run(vm, "main", 1, &main_arg);
        win_emit_and_free_copies(vm);
        bool ok = backtrace_jit_frames > 0 && backtrace_jit_frames == backtrace_depth &&
                  backtrace_main;
        InterlockedIncrement(&thread_backtraces);
        if (!ok && InterlockedIncrement(&thread_failures) <= MAX_REPORTS)
            printf("FAIL thread %lu run %d: %d JIT frames, %d tinyvm calls, %s\n",
                   GetCurrentThreadId(), i, backtrace_jit_frames, backtrace_depth,
                   backtrace_main ? "reached its function" : "did not reach its function");
    }
    return 0;
}

static int threads_mode(void)
{
    HANDLE t[THREADS];
    for (int i = 0; i < THREADS; i++)
        if (!(t[i] = CreateThread(NULL, 0, thread_main, NULL, 0, NULL)))
            return 2;
    DWORD waited = WaitForMultipleObjects(THREADS, t, TRUE, 120000); /* bounded: 2 minutes */
    for (int i = 0; i < THREADS; i++)
        CloseHandle(t[i]);
    if (waited == WAIT_TIMEOUT) {
        printf("threads: timed out\n");
        return 1;
    }
    printf("threads: %d threads, %ld backtraces, %ld failures\n", THREADS,
           (long)thread_backtraces, (long)thread_failures);
    return thread_failures || thread_backtraces != THREADS * THREAD_RUNS ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 4 || (strcmp(argv[1], "step") && strcmp(argv[1], "backtrace") &&
                      strcmp(argv[1], "seh") && strcmp(argv[1], "memory") &&
                      strcmp(argv[1], "threads") && strcmp(argv[1], "dereg") &&
                      strcmp(argv[1], "cold"))) {
        fprintf(stderr, "usage: win_unwind step|backtrace|seh|memory|threads|dereg|cold PROGRAM "
                "[ARG]\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IONBF, 0);
    function_range((const void *)main, &main_start, &main_end);
    top_start = main_start, top_end = main_end;
    function_range((const void *)vm_run, &run_start, &run_end);
    main_arg = argc == 4 ? atoll(argv[3]) : 0;
    vm = win_load(argv[2], 1);
    int rc = !strcmp(argv[1], "step")        ? step()
             : !strcmp(argv[1], "backtrace") ? backtrace_mode()
             : !strcmp(argv[1], "memory")    ? memory_mode(argc == 4 && !strcmp(argv[3], "--chain"))
             : !strcmp(argv[1], "threads")   ? threads_mode()
             : !strcmp(argv[1], "dereg")     ? win_deregistration_check(vm)
             : !strcmp(argv[1], "cold")      ? cold_mode()
                                             : seh_mode();
    tvm_unload(vm);
    return rc;
}
