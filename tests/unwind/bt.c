/* bt.c - glibc backtrace() called in a helper that JIT code called, through
 * re-entry: main -> glue_run -> shim -> a -> vm_call -> glue_run -> shim -> b
 * -> vm_call -> glue_run -> shim -> c -> vm_native -> backtrace().
 *
 * The frames backtrace() returns must be exactly
 *   vm_native, c (in its `native` instruction), glue_run,
 *   vm_call, b (in its `call` instruction), glue_run,
 *   vm_call, a (in its `call` instruction), glue_run,
 *   main (or, on worker threads, bt_worker), then libc's frames,
 * every JIT return address inside the instruction that made the call and in
 * the executor of that level (from the shadow stack glue_run keeps).
 *
 * Then the same from several threads at once while another thread keeps
 * creating and destroying runtimes (libgcc registrations and
 * deregistrations racing with the lookups).
 *
 * Prints "unwind_bt: PASS" (exit 0) only if every backtrace was right. With
 * STENCILRT_FRAMES=0 the backtraces stop at the first JIT frame: FAIL, exit 1.
 *
 * Built with -DBT_UNWIND_BACKTRACE, the backtraces come from _Unwind_Backtrace
 * called here instead of glibc's backtrace() (which always uses libgcc_s):
 * they then come from whichever unwinder the program is linked against, LLVM's
 * libunwind included (tests/integration/test_llvm_libunwind.py).
 */
#include <dlfcn.h>
#include <execinfo.h>
#include <unwind.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "glue.h"

#define MAX_PCS 128
#define NATIVE_BACKTRACE 7
#define WORKERS 4
#define WORKER_RUNS 3000

enum { F_A, F_B, F_C, F_ONE, NPROGS };

static const char SRC_A[] = /* a(x) = b(x+1) + 100 */
    "    load 0\n"
    "    addi 1\n"
    "    call 1 1\n"
    "    addi 100\n"
    "    ret\n";
static const char SRC_B[] = /* b(x) = c(2x) */
    "    load 0\n"
    "    push 2\n"
    "    mul\n"
    "    call 2 1\n"
    "    ret\n";
static const char SRC_C[] = /* c(x) = x + 3, taking a backtrace */
    "    load 0\n"
    "    native 7\n"
    "    addi 3\n"
    "    ret\n";
static const char SRC_ONE[] = /* one(x) = x - 1, taking a backtrace at depth 1 */
    "    load 0\n"
    "    native 7\n"
    "    addi -1\n"
    "    ret\n";

static struct vm VM;
static glue_prog progs[NPROGS];
static uint32_t op_call, op_native;

enum { R_MAIN, R_WORKER, R_RUN, R_CALL, R_NATIVE, NRANGES };
static uintptr_t rs[NRANGES], re[NRANGES];

static int in_range(int r, uintptr_t pc)
{
    return pc >= rs[r] && pc < re[r];
}

void *bt_worker(void *arg);

/* Per thread: where the chain must end, the last backtrace and its verdict. */
static _Thread_local int root_range = R_MAIN;
static _Thread_local void *last_pcs[MAX_PCS];
static _Thread_local int last_n;
static _Thread_local char last_why[256];
static _Thread_local int last_ok;
static _Thread_local int last_depth;

static const char *describe(uintptr_t ra)
{
    int w = glue_locate(&VM, ra - 1);
    if (w == -2)
        return "shim";
    if (w >= 0)
        return VM.progs[w].name;
    static const char *const names[NRANGES] = {"main", "bt_worker", "glue_run", "vm_call",
                                               "vm_native"};
    for (int r = 0; r < NRANGES; r++)
        if (in_range(r, ra - 1))
            return names[r];
    return "other";
}

/* frames[k] is a return address into executor ex, in an instruction with op. */
static int jit_at(uintptr_t ra, int ex, uint32_t op)
{
    long i = glue_instr_at(&VM, (size_t)ex, ra - 1);
    return i >= 0 && VM.progs[ex].code[i].op == op;
}

#define WHY(...) (snprintf(last_why, sizeof last_why, __VA_ARGS__), 0)

static int check_backtrace(void **pcs, int n)
{
    int d = glue_depth - 1;
    last_depth = d + 1;
    if (d < 0)
        return WHY("no active level");
    if (n >= MAX_PCS)
        return WHY("backtrace filled all %d slots", MAX_PCS);
    int k = 0;
#define PC(i) ((uintptr_t)pcs[i])
    /* Under ASan, backtrace() is the sanitizer's interceptor, whose own frame
     * comes first: skip at most two frames of code that is not ours. */
    while (k < n && k < 2 && !in_range(R_NATIVE, PC(k) - 1) && !strcmp(describe(PC(k)), "other"))
        k++;
    if (k >= n || !in_range(R_NATIVE, PC(k) - 1))
        return WHY("frame %d is not vm_native", k);
    if (++k >= n || !jit_at(PC(k), glue_levels[d].ex, op_native))
        return WHY("frame %d: expected %s's native instruction, got %s (backtrace has %d frames)",
                   k, VM.progs[glue_levels[d].ex].name, k < n ? describe(PC(k)) : "nothing", n);
    if (++k >= n || !in_range(R_RUN, PC(k) - 1))
        return WHY("frame %d: expected glue_run, got %s", k, k < n ? describe(PC(k)) : "nothing");
    for (int j = d - 1; j >= 0; j--) {
        if (++k >= n || !in_range(R_CALL, PC(k) - 1))
            return WHY("frame %d: expected vm_call, got %s", k,
                       k < n ? describe(PC(k)) : "nothing");
        if (++k >= n || !jit_at(PC(k), glue_levels[j].ex, op_call))
            return WHY("frame %d: expected %s's call instruction, got %s", k,
                       VM.progs[glue_levels[j].ex].name, k < n ? describe(PC(k)) : "nothing");
        if (++k >= n || !in_range(R_RUN, PC(k) - 1))
            return WHY("frame %d: expected glue_run, got %s", k,
                       k < n ? describe(PC(k)) : "nothing");
    }
    if (++k >= n || !in_range(root_range, PC(k) - 1))
        return WHY("frame %d: expected %s, got %s", k, root_range == R_MAIN ? "main" : "bt_worker",
                   k < n ? describe(PC(k)) : "nothing");
    if (k + 1 >= n)
        return WHY("the backtrace ends at %s: its callers are missing",
                   root_range == R_MAIN ? "main" : "bt_worker");
    for (int i = k + 1; i < n; i++)
        if (glue_locate(&VM, PC(i) - 1) != -1)
            return WHY("frame %d below the root is JIT code", i);
#undef PC
    return 1;
}

vm_value vm_call(vm_frame *caller, vm_value function, vm_value argc, vm_value *args);
vm_value vm_print(vm_frame *frame, vm_value value);
vm_value vm_native(vm_frame *frame, vm_value which, vm_value arg);

static volatile unsigned long calls_done;

vm_value vm_call(vm_frame *caller, vm_value function, vm_value argc, vm_value *args)
{
    vm_value r = glue_run(caller->vm, (size_t)function, argc, args);
    __atomic_fetch_add(&calls_done, 1, __ATOMIC_RELAXED); /* keeps vm_call's frame */
    return r;
}

vm_value vm_print(vm_frame *frame, vm_value value)
{
    (void)frame;
    return value;
}

#ifdef BT_UNWIND_BACKTRACE
typedef struct collected {
    void **pcs;
    int n, max;
} collected;

static _Unwind_Reason_Code collect(struct _Unwind_Context *ctx, void *arg)
{
    collected *c = arg;
    if (c->n == c->max)
        return _URC_END_OF_STACK;
    c->pcs[c->n++] = (void *)_Unwind_GetIP(ctx);
    return _URC_NO_REASON;
}

/* What glibc's backtrace() returns, from the program's own unwinder: return
 * addresses from this function's caller on (its own frame is dropped). */
__attribute__((noinline)) static int unwinder_backtrace(void **pcs, int max)
{
    void *all[MAX_PCS + 1];
    collected c = {all, 0, MAX_PCS + 1};
    _Unwind_Backtrace(collect, &c);
    int n = c.n > 0 ? c.n - 1 : 0;
    memcpy(pcs, all + 1, (size_t)n * sizeof *pcs);
    __asm__ volatile("" ::: "memory"); /* keep this frame */
    return n < max ? n : max;
}
#define backtrace unwinder_backtrace
#endif

vm_value vm_native(vm_frame *frame, vm_value which, vm_value arg)
{
    if (which != NATIVE_BACKTRACE)
        vm_trap(frame, "unknown native");
    last_n = backtrace(last_pcs, MAX_PCS);
    last_why[0] = 0;
    last_ok = check_backtrace(last_pcs, last_n);
    __asm__ volatile("" ::: "memory"); /* not a tail position for backtrace */
    return arg;
}

_Noreturn void vm_trap(vm_frame *frame, const char *why)
{
    fprintf(stderr, "unwind_bt: trap in %s: %s\n", VM.progs[frame->function].name, why);
    exit(3);
}

static int failures;

static void show(const char *what)
{
    Dl_info info;
    printf("%s: %d frames (depth %d)\n", what, last_n, last_depth);
    for (int i = 0; i < last_n; i++) {
        uintptr_t ra = (uintptr_t)last_pcs[i];
        int w = glue_locate(&VM, ra - 1);
        long ins = w >= 0 ? glue_instr_at(&VM, (size_t)w, ra - 1) : -1;
        if (ins >= 0)
            printf("  #%-2d %#lx JIT %s[%ld] %s\n", i, (unsigned long)ra, VM.progs[w].name, ins,
                   glue_op_name(VM.progs[w].code[ins].op));
        else if (!strcmp(describe(ra), "other") && dladdr(last_pcs[i], &info) &&
                 info.dli_sname)
            printf("  #%-2d %#lx %s\n", i, (unsigned long)ra, info.dli_sname);
        else
            printf("  #%-2d %#lx %s\n", i, (unsigned long)ra, describe(ra));
    }
    printf("%s: %s%s%s\n", what, last_ok ? "ok" : "WRONG", last_ok ? "" : ": ", last_why);
    if (!last_ok)
        failures++;
}

/* ---- threads */

static volatile int stop_churn;
static unsigned long churned;
static int worker_bad[WORKERS];
static char worker_why[WORKERS][320];

void *bt_worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    root_range = R_WORKER;
    for (int i = 0; i < WORKER_RUNS; i++) {
        vm_value x = id * 1000 + i;
        vm_value r = glue_run(&VM, F_A, 1, &x);
        if (r != 2 * (x + 1) + 3 + 100 || !last_ok) {
            if (!worker_bad[id]++)
                snprintf(worker_why[id], sizeof worker_why[id], "run %d: result %lld, %s", i,
                         (long long)r, last_ok ? "backtrace ok" : last_why);
        }
    }
    __asm__ volatile("" ::: "memory"); /* keep bt_worker's frame below the runs */
    return NULL;
}

static void *churn(void *arg)
{
    (void)arg;
    static const char src[] = "    push 41\n    addi 1\n    ret\n";
    glue_prog p;
    glue_asm(&p, "churn", src);
    sr_config cfg = SR_CONFIG_DEFAULT;
    cfg.gdb = 0; /* libgcc registrations only */
    while (!__atomic_load_n(&stop_churn, __ATOMIC_ACQUIRE)) {
        struct vm v;
        if (!glue_init(&v, &p, 1, &cfg, (const void *)vm_call, (const void *)vm_print,
                       (const void *)vm_native, (const void *)vm_trap))
            break;
        vm_value r = glue_run(&v, 0, 0, NULL);
        glue_fini(&v);
        if (r != 42)
            break;
        __atomic_fetch_add(&churned, 1, __ATOMIC_RELEASE);
    }
    if (!__atomic_load_n(&churned, __ATOMIC_ACQUIRE))
        __atomic_store_n(&churned, ~0UL, __ATOMIC_RELEASE); /* failed: do not wait for it */
    glue_asm_free(&p);
    return NULL;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    glue_crash_reporter("unwind_bt");
    op_call = glue_op("call");
    op_native = glue_op("native");
    glue_asm(&progs[F_A], "a", SRC_A);
    glue_asm(&progs[F_B], "b", SRC_B);
    glue_asm(&progs[F_C], "c", SRC_C);
    glue_asm(&progs[F_ONE], "one", SRC_ONE);
    if (!glue_init(&VM, progs, NPROGS, NULL, (const void *)vm_call, (const void *)vm_print,
                   (const void *)vm_native, (const void *)vm_trap))
        return 2;
    sr_config cfg = sr_runtime_config(VM.rt);
    printf("config: frames=%d gdb=%d\n", cfg.frames, cfg.gdb);
    const void *fns[NRANGES] = {(const void *)main, (const void *)bt_worker,
                                (const void *)glue_run, (const void *)vm_call,
                                (const void *)vm_native};
    for (int r = 0; r < NRANGES; r++)
        if (!glue_func_range(fns[r], &rs[r], &re[r])) {
            fprintf(stderr, "unwind_bt: no symbol size for function %d (-rdynamic?)\n", r);
            return 2;
        }

    vm_value x = 5;
    vm_value r1 = glue_run(&VM, F_ONE, 1, &x);
    show("depth 1");
    if (r1 != 4) {
        printf("one(5) = %lld, expected 4\n", (long long)r1);
        failures++;
    }
    vm_value r3 = glue_run(&VM, F_A, 1, &x);
    show("depth 3");
    if (r3 != 2 * (5 + 1) + 3 + 100) {
        printf("a(5) = %lld, expected %d\n", (long long)r3, 2 * (5 + 1) + 3 + 100);
        failures++;
    }
    if (last_depth != 3) {
        printf("the depth-3 backtrace was taken at depth %d\n", last_depth);
        failures++;
    }

    pthread_t churner, workers[WORKERS];
    if (pthread_create(&churner, NULL, churn, NULL) != 0)
        return 2;
    while (!__atomic_load_n(&churned, __ATOMIC_ACQUIRE)) /* overlap for sure */
        usleep(1000);
    for (int i = 0; i < WORKERS; i++)
        if (pthread_create(&workers[i], NULL, bt_worker, (void *)(intptr_t)i) != 0)
            return 2;
    int bad = 0;
    for (int i = 0; i < WORKERS; i++) {
        pthread_join(workers[i], NULL);
        if (worker_bad[i]) {
            printf("thread %d: %d of %d runs wrong; first: %s\n", i, worker_bad[i], WORKER_RUNS,
                   worker_why[i]);
            bad++;
        }
    }
    __atomic_store_n(&stop_churn, 1, __ATOMIC_RELEASE);
    pthread_join(churner, NULL);
    printf("threads: %d workers x %d depth-3 backtraces, %d workers wrong; %lu runtimes "
           "created and destroyed meanwhile\n",
           WORKERS, WORKER_RUNS, bad, churned);
    if (bad || churned == 0 || churned == ~0UL)
        failures++;

    glue_fini(&VM);
    for (int i = 0; i < NPROGS; i++)
        glue_asm_free(&progs[i]);
    printf("unwind_bt: %s\n", failures ? "FAIL" : "PASS");
    return failures ? 1 : 0;
}
