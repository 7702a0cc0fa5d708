/* churn.c - the target of tests/integration/test_stack.py: threads that emit,
 * run and free executors of the bundled tinyvm stencils on one shared runtime
 * as fast as they can, so code addresses and registry slots are reused all
 * the time, and a log of every executor for the test to check what
 * stencilrt-stack names against.
 *
 *     churn [--threads N] [--seconds S] [--stop-on-stdin] [--log FILE]
 *           [--max-records N] [--iters N]
 *
 * Prints "churn: ready pid PID threads N" once every thread runs, then churns
 * until S seconds have passed (default 10) or, with --stop-on-stdin, stdin
 * gives a line or reaches its end, whichever comes first; then writes the log
 * and prints "churn: done, N executors". Each thread keeps its records in a
 * buffer of its own (--max-records, default 200000); a thread whose buffer is
 * full stops emitting, so every executor that ever existed is in the log.
 *
 * Log lines (times are CLOCK_MONOTONIC ns):
 *     T <thread> <tid>
 *     E <id> <tid> <name> <code start hex> <t_emit> <t_free> <n> <ops> <offsets> <colds>
 * where id is sr_executor_id, t_emit is taken just after sr_emit returned and
 * t_free just before sr_executor_free, ops are n op names and offsets n+1
 * numbers (sr_executor_instr(ex, i) - code start, i = 0..n; offsets[n] is
 * the end of the code, cold parts included), and colds n+1 offsets: the cold
 * part of instruction i is [colds[i], colds[i+1]), as the documented layout
 * places it (each op's size from the header's sg_cold_sizes), all
 * comma-separated.
 *
 * Shapes (each name "<shape>_<thread>_<serial>" is unique in the run, so a
 * stale name is told apart from the right one):
 *     spin  a loop in JIT code
 *     mix   a loop calling a C helper (vm_native -> churn_busy), so C frames
 *           sit above the JIT frame
 *     nest  a loop calling a leaf executor through vm_call (JIT -> C -> shim
 *           -> JIT -> C); the leaf ("leaf_...") is emitted before and freed
 *           after it
 *     trap  a division by zero: div's cold part calls vm_trap, which works in
 *           C (churn_busy) above that cold code, then longjmps out of the
 *           JIT code, so samples see a frame whose PC is in a cold part
 * Each starts with 0..3 `push; pop` pairs, so executors of one shape come in
 * several sizes and every size's memory is reused by other names.
 *
 * The main thread is worker 0, so its stack runs from main (through
 * churn_main); the others run from churn_worker, and a watcher thread from
 * churn_watch. Built without inlining or sibling calls, so every C frame
 * shows: below a JIT frame run_executor, churn_round, churn_worker; above
 * one vm_native -> churn_busy, or vm_call -> run_executor -> the leaf. */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "jit_stencils.h"
#include "stencilrt.h"
#include "tinyvm.h"

#define MAX_THREADS 64
#define MAX_INSTRS 16

typedef vm_value shim_fn(vm_frame *frame, vm_value *sp, void *code);

enum shape { SHAPE_SPIN, SHAPE_MIX, SHAPE_NEST, SHAPE_TRAP, SHAPE_LEAF, SHAPE__COUNT };
static const char *const shape_names[SHAPE__COUNT] = {"spin", "mix", "nest", "trap", "leaf"};

/* One executor, as the emitting thread saw it. */
typedef struct churn_rec {
    uint64_t id, start, t_emit, t_free;
    uint32_t serial;
    uint8_t shape, n;
    uint8_t ops[MAX_INSTRS];
    uint16_t off[MAX_INSTRS + 1];
    uint16_t cold[MAX_INSTRS + 1];
} churn_rec;

/* A worker's state; vm_frame.vm points here (tinyvm.h leaves struct vm to the
 * VM, and this program is its own small VM). */
struct vm {
    int index;
    pid_t tid;
    churn_rec *recs;
    size_t nrecs;
    bool full;
    uint32_t serial;
    uint64_t rng;
    sr_executor *leaf; /* the function `call 0` runs (nest) */
    jmp_buf *trapped;  /* where vm_trap goes on (trap), NULL outside it */
};

/* The registry of this run: set up in main before any worker starts. */
static struct {
    sr_runtime *rt;
    shim_fn *shim;
    int threads;
    size_t max_records;
    vm_value iters;
    atomic_bool stop;
    atomic_int started;
    struct vm workers[MAX_THREADS];
} run;

static const sr_stencil_set stencil_set = SR_STENCIL_SET_FROM_HEADER;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t next_random(struct vm *w) /* splitmix64 */
{
    uint64_t z = (w->rng += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static _Noreturn void die(const char *what, const char *detail)
{
    fprintf(stderr, "churn: %s: %s\n", what, detail);
    exit(1);
}

/* C work above a JIT frame: long enough for samples to land here. */
__attribute__((noinline)) static vm_value churn_busy(vm_value arg)
{
    volatile vm_value acc = arg;
    for (int i = 0; i < 200; i++)
        acc = acc * 3 + 1;
    return acc;
}

static vm_value run_executor(struct vm *w, const sr_executor *ex, vm_value argc,
                             const vm_value *args);

vm_value vm_native(vm_frame *frame, vm_value which, vm_value arg)
{
    (void)frame;
    (void)which;
    vm_value r = churn_busy(arg);
    __asm__ volatile("" ::: "memory"); /* keep this frame: no tail call */
    return r;
}

vm_value vm_call(vm_frame *caller, vm_value function, vm_value argc, vm_value *args)
{
    (void)function; /* nest calls its thread's one leaf */
    vm_value r = run_executor(caller->vm, caller->vm->leaf, argc, args);
    __asm__ volatile("" ::: "memory");
    return r;
}

vm_value vm_print(vm_frame *frame, vm_value value)
{
    (void)frame;
    return value;
}

/* trap's division by zero: C work above the JIT frame, whose return address
 * is in div's cold part, then out of the JIT code to churn_round. */
_Noreturn void vm_trap(vm_frame *frame, const char *why)
{
    struct vm *w = frame->vm;
    if (!w->trapped)
        die("trap", why);
    for (vm_value i = 0; i < run.iters; i++)
        churn_busy(i);
    longjmp(*w->trapped, 1);
}

__attribute__((noinline)) static vm_value run_executor(struct vm *w, const sr_executor *ex,
                                                       vm_value argc, const vm_value *args)
{
    vm_frame frame;
    memset(&frame, 0, sizeof frame);
    frame.vm = w;
    for (vm_value i = 0; i < argc && i < VM_MAX_LOCALS; i++)
        frame.locals[i] = args[i];
    vm_value stack[64];
    vm_value r = run.shim(&frame, stack, sr_executor_entry(ex));
    __asm__ volatile("" ::: "memory");
    return r;
}

/* The program of a shape, after `pad` push/pop pairs; returns its length. */
static size_t build(enum shape s, int pad, vm_value iters, sr_instr *code)
{
    size_t n = 0;
    for (int i = 0; i < pad; i++) {
        code[n++] = (sr_instr){SG_OP_push, 0, {(uint64_t)i}};
        code[n++] = (sr_instr){SG_OP_pop, 0, {0}};
    }
    if (s == SHAPE_TRAP) { /* push 1; push 0; div; ret: div traps */
        code[n++] = (sr_instr){SG_OP_push, 0, {1}};
        code[n++] = (sr_instr){SG_OP_push, 0, {0}};
        code[n++] = (sr_instr){SG_OP_div, 0, {0}};
        code[n++] = (sr_instr){SG_OP_ret, 0, {0}};
        return n;
    }
    if (s == SHAPE_LEAF) { /* load 0; native 0; addi 1; ret */
        code[n++] = (sr_instr){SG_OP_load, 0, {0}};
        code[n++] = (sr_instr){SG_OP_native, 0, {0}};
        code[n++] = (sr_instr){SG_OP_addi, 0, {1}};
        code[n++] = (sr_instr){SG_OP_ret, 0, {0}};
        return n;
    }
    /* push iters; L: [body]; addi -1; dup; jump_if_nonzero L; ret (returns 0) */
    code[n++] = (sr_instr){SG_OP_push, 0, {(uint64_t)iters}};
    uint32_t loop = (uint32_t)n;
    if (s == SHAPE_MIX) { /* dup; native 0; pop */
        code[n++] = (sr_instr){SG_OP_dup, 0, {0}};
        code[n++] = (sr_instr){SG_OP_native, 0, {0}};
        code[n++] = (sr_instr){SG_OP_pop, 0, {0}};
    } else if (s == SHAPE_NEST) { /* dup; call 0 1; pop */
        code[n++] = (sr_instr){SG_OP_dup, 0, {0}};
        code[n++] = (sr_instr){SG_OP_call, 0, {0, 1}};
        code[n++] = (sr_instr){SG_OP_pop, 0, {0}};
    }
    code[n++] = (sr_instr){SG_OP_addi, 0, {(uint64_t)-1}};
    code[n++] = (sr_instr){SG_OP_dup, 0, {0}};
    code[n++] = (sr_instr){SG_OP_jump_if_nonzero, loop, {0}};
    code[n++] = (sr_instr){SG_OP_ret, 0, {0}};
    return n;
}

static void rec_name(const struct vm *w, const churn_rec *r, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s_%d_%" PRIu32, shape_names[r->shape], w->index, r->serial);
}

/* Where each instruction's cold part is: after every hot part, in
 * instruction order (docs/runtime.md, "Hot and cold parts"), ending where
 * the code ends. */
static void note_cold_parts(churn_rec *r)
{
    size_t cold = 0;
    for (unsigned i = 0; i < r->n; i++)
        cold += stencil_set.cold_sizes ? stencil_set.cold_sizes[r->ops[i]] : 0;
    r->cold[0] = (uint16_t)(r->off[r->n] - cold);
    for (unsigned i = 0; i < r->n; i++)
        r->cold[i + 1] = (uint16_t)(r->cold[i] + (stencil_set.cold_sizes
                                                       ? stencil_set.cold_sizes[r->ops[i]] : 0));
}

/* Emit one executor of shape s and note it; NULL when the log is full. */
static sr_executor *emit(struct vm *w, enum shape s, churn_rec **out)
{
    if (w->nrecs == run.max_records) {
        w->full = true;
        return NULL;
    }
    churn_rec *r = &w->recs[w->nrecs++];
    sr_instr code[MAX_INSTRS];
    int pad = (int)(next_random(w) % 4);
    size_t n = build(s, pad, s == SHAPE_SPIN ? run.iters * 20 : run.iters, code);
    *r = (churn_rec){.serial = w->serial++, .shape = (uint8_t)s, .n = (uint8_t)n};
    char name[64];
    rec_name(w, r, name, sizeof name);
    sr_executor *ex;
    if (sr_emit(run.rt, code, n, name, &ex) != SR_OK)
        die("sr_emit", sr_last_error());
    r->t_emit = now_ns();
    r->id = sr_executor_id(ex);
    r->start = (uint64_t)(uintptr_t)sr_executor_entry(ex);
    for (size_t i = 0; i < n; i++)
        r->ops[i] = (uint8_t)code[i].op;
    for (size_t i = 0; i <= n; i++) {
        uint64_t off = (uint64_t)(uintptr_t)sr_executor_instr(ex, i) - r->start;
        if (off > UINT16_MAX)
            die("sr_executor_instr", "an offset past 64 KiB");
        r->off[i] = (uint16_t)off;
    }
    note_cold_parts(r);
    *out = r;
    return ex;
}

static void retire(sr_executor *ex, churn_rec *r)
{
    r->t_free = now_ns();
    sr_executor_free(ex);
}

/* Runs trap's executor, which must end in vm_trap's longjmp. */
__attribute__((noinline)) static void run_trap(struct vm *w, const sr_executor *ex)
{
    jmp_buf here;
    if (setjmp(here) == 0) {
        w->trapped = &here;
        run_executor(w, ex, 0, NULL);
        die("run", "a division by zero did not trap");
    }
    w->trapped = NULL;
}

/* One round: emit a random shape (with its leaf for nest), run it, free it.
 * False when the log is full. */
static bool churn_round(struct vm *w)
{
    enum shape s = (enum shape)(next_random(w) % SHAPE_LEAF);
    churn_rec *leaf_rec = NULL, *rec = NULL;
    if (s == SHAPE_NEST && !(w->leaf = emit(w, SHAPE_LEAF, &leaf_rec)))
        return false;
    sr_executor *ex = emit(w, s, &rec);
    if (ex && s == SHAPE_TRAP) {
        run_trap(w, ex);
        retire(ex, rec);
    } else if (ex) {
        vm_value r = run_executor(w, ex, 0, NULL);
        if (r != 0)
            die("run", "an executor returned a value other than 0");
        retire(ex, rec);
    }
    if (leaf_rec)
        retire(w->leaf, leaf_rec);
    w->leaf = NULL;
    return ex != NULL;
}

__attribute__((noinline)) static void *churn_worker(void *arg)
{
    struct vm *w = arg;
    w->tid = (pid_t)syscall(SYS_gettid);
    atomic_fetch_add(&run.started, 1);
    while (!atomic_load(&run.stop) && churn_round(w))
        ;
    __asm__ volatile("" ::: "memory");
    return NULL;
}

typedef struct watch_opts {
    double seconds;
    bool stop_on_stdin;
} watch_opts;

/* Ends the run after `seconds`, or earlier on a line or the end of stdin. */
static void *churn_watch(void *arg)
{
    const watch_opts *o = arg;
    atomic_fetch_add(&run.started, 1);
    uint64_t deadline = now_ns() + (uint64_t)(o->seconds * 1e9);
    for (uint64_t t = now_ns(); t < deadline; t = now_ns()) {
        struct pollfd p = {.fd = 0, .events = POLLIN};
        int ms = (int)((deadline - t) / 1000000u) + 1;
        int k = poll(&p, o->stop_on_stdin ? 1 : 0, ms);
        if (k < 0 && errno != EINTR)
            die("poll", strerror(errno));
        if (k > 0)
            break;
    }
    atomic_store(&run.stop, true);
    return NULL;
}

static void write_log(const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        die(path, strerror(errno));
    size_t total = 0;
    for (int t = 0; t < run.threads; t++) {
        const struct vm *w = &run.workers[t];
        fprintf(f, "T %d %d\n", w->index, (int)w->tid);
        for (size_t k = 0; k < w->nrecs; k++) {
            const churn_rec *r = &w->recs[k];
            char name[64];
            rec_name(w, r, name, sizeof name);
            fprintf(f, "E %" PRIu64 " %d %s %" PRIx64 " %" PRIu64 " %" PRIu64 " %u ", r->id,
                    (int)w->tid, name, r->start, r->t_emit, r->t_free, (unsigned)r->n);
            for (unsigned i = 0; i < r->n; i++)
                fprintf(f, "%s%s", i ? "," : "", stencil_set.stencils[r->ops[i]].name);
            for (unsigned i = 0; i <= r->n; i++)
                fprintf(f, "%c%u", i ? ',' : ' ', (unsigned)r->off[i]);
            for (unsigned i = 0; i <= r->n; i++)
                fprintf(f, "%c%u", i ? ',' : ' ', (unsigned)r->cold[i]);
            fputc('\n', f);
        }
        total += w->nrecs;
        if (w->full)
            fprintf(stderr, "churn: thread %d stopped early: its log is full (%zu records)\n",
                    t, w->nrecs);
    }
    if (fclose(f) != 0)
        die(path, strerror(errno));
    printf("churn: done, %zu executors\n", total);
}

static int usage(void)
{
    fputs("usage: churn [--threads N] [--seconds S] [--stop-on-stdin] [--log FILE] "
          "[--max-records N] [--iters N]\n", stderr);
    return 2;
}

__attribute__((noinline)) static int churn_main(watch_opts watch, const char *log)
{
    const void *symbols[SG_SYM__COUNT] = {
        [SG_SYM_vm_call] = (const void *)vm_call,
        [SG_SYM_vm_print] = (const void *)vm_print,
        [SG_SYM_vm_native] = (const void *)vm_native,
        [SG_SYM_vm_trap] = (const void *)vm_trap,
    };
    sr_config cfg = SR_CONFIG_DEFAULT;
    cfg.gdb = 0; /* GDB objects only slow the churn down */
    if (sr_runtime_create(&stencil_set, symbols, &cfg, &run.rt) != SR_OK)
        die("sr_runtime_create", sr_last_error());
    run.shim = (shim_fn *)sr_shim_entry(run.rt);
    for (int t = 0; t < run.threads; t++) {
        struct vm *w = &run.workers[t];
        w->index = t;
        w->rng = 0x5eed0000u + (uint64_t)t;
        if (!(w->recs = calloc(run.max_records, sizeof *w->recs)))
            die("calloc", "no memory for the log");
    }
    pthread_t tids[MAX_THREADS], watcher;
    for (int t = 1; t < run.threads; t++)
        if (pthread_create(&tids[t], NULL, churn_worker, &run.workers[t]) != 0)
            die("pthread_create", "failed");
    if (pthread_create(&watcher, NULL, churn_watch, &watch) != 0)
        die("pthread_create", "failed");
    /* Ready once every other worker has its tid (the main thread is worker 0)
     * and the watcher runs: no thread is still being born. */
    for (int spins = 0; atomic_load(&run.started) < run.threads; spins++) {
        if (spins > 10000)
            die("start", "threads did not start within 10 s");
        usleep(1000);
    }
    printf("churn: ready pid %d threads %d\n", (int)getpid(), run.threads);
    fflush(stdout);
    churn_worker(&run.workers[0]);
    for (int t = 1; t < run.threads; t++)
        pthread_join(tids[t], NULL);
    pthread_join(watcher, NULL);
    write_log(log);
    sr_runtime_destroy(run.rt);
    for (int t = 0; t < run.threads; t++)
        free(run.workers[t].recs);
    return 0;
}

int main(int argc, char **argv)
{
    watch_opts watch = {10, false};
    const char *log = "churn.log";
    run.threads = 8;
    run.max_records = 200000;
    run.iters = 100;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--stop-on-stdin")) {
            watch.stop_on_stdin = true;
            continue;
        }
        if (!v)
            return usage();
        i++;
        if (!strcmp(a, "--threads"))
            run.threads = atoi(v);
        else if (!strcmp(a, "--seconds"))
            watch.seconds = atof(v);
        else if (!strcmp(a, "--log"))
            log = v;
        else if (!strcmp(a, "--max-records"))
            run.max_records = (size_t)atol(v);
        else if (!strcmp(a, "--iters"))
            run.iters = atol(v);
        else
            return usage();
    }
    if (run.threads < 1 || run.threads > MAX_THREADS ||
        !(watch.seconds > 0 && watch.seconds <= 3600) || run.max_records < 1 || run.iters < 1 ||
        run.iters > 1000000)
        return usage();
    return churn_main(watch, log);
}
