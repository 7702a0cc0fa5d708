/* lookup_stress.c - sr_lookup_pc from a SIGPROF handler, while other threads
 * emit and free (tests/integration/test_stress.py).
 *
 * Runner threads run long loops in JIT code, each in an executor of its own
 * emitted for the purpose, and note it in a thread-local before entering the
 * shim. A profiling timer interrupts them; the handler asks sr_lookup_pc about
 * the interrupted PC and checks the answer against what it knows:
 *   - a PC inside the running executor's code must be found, naming that
 *     executor and the instruction whose code holds the PC (from
 *     sr_executor_instr, read independently);
 *   - a PC anywhere else (the shim, C code) must not be found.
 * Meanwhile churn threads emit and free small executors as fast as they can,
 * so the tables are replaced and executor records retired under the lookups,
 * and a new arena is made from time to time.
 *
 *   lookup_stress [--seconds S] [--runners N] [--churners N]
 *
 * Prints "lookup: samples=... in_jit=... found=... wrong=..." and
 * "lookup_stress: PASS" (exit 0) when no answer was wrong and enough samples
 * landed in JIT code; FAIL (exit 1) otherwise. With --debug-off-by-one the
 * handler expects the instruction after the right one, so the check is shown
 * to notice a wrong answer. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <ucontext.h>
#include <unistd.h>

#include "stress_common.h"

#define MAX_THREADS 8
#define LOOP_COUNT 3000000

static sr_runtime *rt;
static st_shim_fn *shim;
static double seconds = 3;
static int runners = 2, churners = 2, off_by_one;
static const st_opt options[] = {ST_OPT_SECONDS("--seconds", &seconds),
                                 ST_OPT_INT("--runners", &runners),
                                 ST_OPT_INT("--churners", &churners),
                                 ST_OPT_FLAG("--debug-off-by-one", &off_by_one)};
static atomic_int stop;

static _Thread_local sr_executor *volatile running; /* set around the shim call */
static atomic_ulong samples, in_jit, found, wrong, misses_outside;
static char first_wrong[256];
static atomic_flag wrong_noted = ATOMIC_FLAG_INIT;

static vm_value h_call(vm_frame *f, vm_value fn, vm_value argc, vm_value *args)
{
    (void)f, (void)fn, (void)argc, (void)args;
    return 0;
}
static vm_value h_print(vm_frame *f, vm_value v)
{
    (void)f;
    return v;
}
static vm_value h_native(vm_frame *f, vm_value which, vm_value arg)
{
    (void)f, (void)which;
    return arg;
}
static void h_trap(vm_frame *f, const char *why)
{
    (void)f, (void)why;
    abort();
}

/* Async-signal-safe note of the first wrong answer. */
static void note_wrong(const char *what, uintptr_t pc)
{
    atomic_fetch_add(&wrong, 1);
    if (atomic_flag_test_and_set(&wrong_noted))
        return;
    static const char hex[] = "0123456789abcdef";
    size_t n = 0;
    for (const char *p = what; *p && n < sizeof first_wrong - 24; p++)
        first_wrong[n++] = *p;
    memcpy(first_wrong + n, " at pc 0x", 9);
    n += 9;
    for (int s = 60; s >= 0; s -= 4)
        first_wrong[n++] = hex[(pc >> s) & 15];
    first_wrong[n] = 0;
}

static void on_prof(int sig, siginfo_t *si, void *ucv)
{
    (void)sig, (void)si;
    uintptr_t pc = (uintptr_t)((ucontext_t *)ucv)->uc_mcontext.gregs[REG_RIP];
    sr_executor *ex = running, *got = NULL;
    size_t instr = 0;
    atomic_fetch_add(&samples, 1);
    bool hit = sr_lookup_pc(rt, (const void *)pc, &got, &instr);
    uintptr_t start = ex ? (uintptr_t)sr_executor_entry(ex) : 0;
    if (!ex || pc < start || pc >= start + sr_executor_code_size(ex)) {
        /* Not in the running executor's code (the shim, C code, or a runner
         * between executors): nothing may claim it but another live
         * executor, and runners only run their own. */
        if (hit)
            note_wrong("a PC outside every running executor was found", pc);
        atomic_fetch_add(&misses_outside, 1);
        return;
    }
    atomic_fetch_add(&in_jit, 1);
    if (!hit) {
        note_wrong("a PC in the running executor was not found", pc);
        return;
    }
    size_t want = instr + (size_t)off_by_one;
    if (got != ex || pc < (uintptr_t)sr_executor_instr(ex, want) ||
        pc >= (uintptr_t)sr_executor_instr(ex, want + 1)) {
        note_wrong(got != ex ? "another executor was named" : "the wrong instruction", pc);
        return;
    }
    atomic_fetch_add(&found, 1);
}

/* push N; L: addi -1; dup; jump_if_nonzero L; ret  (returns 0) */
static sr_executor *loop_executor(void)
{
    sr_instr code[5] = {{ST_push, 0, {LOOP_COUNT}}, {ST_addi, 0, {(uint64_t)-1}},
                        {ST_dup, 0, {0}}, {ST_jump_if_nonzero, 1, {0}}, {ST_ret, 0, {0}}};
    sr_executor *ex = NULL;
    if (sr_emit(rt, code, 5, "loop", &ex) != SR_OK) {
        fprintf(stderr, "FAIL: sr_emit: %s\n", sr_last_error());
        exit(1);
    }
    return ex;
}

static void *runner(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        sr_executor *ex = loop_executor();
        vm_frame frame;
        memset(&frame, 0, sizeof frame);
        vm_value stack[16];
        running = ex;
        vm_value v = shim(&frame, stack, sr_executor_entry(ex));
        running = NULL;
        sr_executor_free(ex);
        if (v != 0) {
            fprintf(stderr, "FAIL: the loop returned %lld\n", (long long)v);
            exit(1);
        }
    }
    return NULL;
}

static void *churner(void *arg)
{
    st_rng r = {(uintptr_t)arg * 7919 + 1};
    sr_instr code[64];
    sr_executor *live[32] = {0};
    while (!atomic_load(&stop)) {
        size_t k = st_below(&r, 32), n = 1 + st_below(&r, 60);
        for (size_t i = 0; i + 1 < n; i++)
            code[i] = (sr_instr){ST_push, 0, {st_next(&r)}};
        code[n - 1] = (sr_instr){ST_ret, 0, {0}};
        sr_executor_free(live[k]);
        live[k] = NULL;
        if (sr_emit(rt, code, n, "churn", &live[k]) != SR_OK) {
            fprintf(stderr, "FAIL: sr_emit: %s\n", sr_last_error());
            exit(1);
        }
    }
    for (size_t k = 0; k < 32; k++)
        sr_executor_free(live[k]);
    return NULL;
}

int main(int argc, char **argv)
{
    if (ST_PARSE_OPTIONS(argc, argv, options))
        return 2;
    if (runners < 1 || runners > MAX_THREADS || churners > MAX_THREADS) {
        fprintf(stderr, "lookup_stress: --runners must be 1 to %d, --churners 0 to %d\n",
                MAX_THREADS, MAX_THREADS);
        return 2;
    }
    const void *symbols[4] = {(const void *)h_call, (const void *)h_print,
                              (const void *)h_native, (const void *)h_trap};
    sr_config cfg = SR_CONFIG_DEFAULT;
    cfg.gdb = 0;                  /* GDB's objects only slow the churn down */
    cfg.arena_size = (size_t)256 << 10; /* small arenas: new ones keep coming */
    if (sr_runtime_create(&st_stencil_set, symbols, &cfg, &rt) != SR_OK) {
        fprintf(stderr, "FAIL: sr_runtime_create: %s\n", sr_last_error());
        return 1;
    }
    shim = (st_shim_fn *)sr_shim_entry(rt);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_prof;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGPROF, &sa, NULL);
    struct itimerval tv = {{0, 500}, {0, 500}}; /* every 0.5 ms of CPU time */
    setitimer(ITIMER_PROF, &tv, NULL);

    pthread_t th[2 * MAX_THREADS];
    int nth = 0;
    for (int i = 0; i < runners; i++)
        pthread_create(&th[nth++], NULL, runner, NULL);
    for (int i = 0; i < churners; i++)
        pthread_create(&th[nth++], NULL, churner, (void *)(uintptr_t)(i + 1));
    usleep((useconds_t)(seconds * 1e6));
    atomic_store(&stop, 1);
    for (int i = 0; i < nth; i++)
        pthread_join(th[i], NULL);
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_PROF, &off, NULL);
    sr_stats st = sr_runtime_stats(rt);
    sr_runtime_destroy(rt);

    printf("lookup: samples=%lu in_jit=%lu found=%lu wrong=%lu outside=%lu arenas=%zu\n",
           atomic_load(&samples), atomic_load(&in_jit), atomic_load(&found),
           atomic_load(&wrong), atomic_load(&misses_outside), st.arenas);
    if (atomic_load(&wrong))
        printf("first wrong answer: %s\n", first_wrong);
    int ok = atomic_load(&wrong) == 0 && atomic_load(&in_jit) >= 50;
    puts(ok ? "lookup_stress: PASS" : "lookup_stress: FAIL");
    return !ok;
}
