/* fork_stress.c - fork() while another thread is registering executors.
 *
 *   fork_stress [--forks N] [--child-timeout S] [--big N] [--seed N] [--debug-own-lock]
 *               [--gdb-on-hang] [--print-pids]
 *
 * Thread A emits executors of N (default 20000) instructions back to back and
 * frees them again. sr_emit and sr_executor_free hold the runtime's registry
 * lock while they allocate, write and seal the code and register it (the GDB
 * object names every one of the N instructions): the lock is held for
 * milliseconds per call, back to back, so when the main thread calls fork() the
 * lock is often held by A. The main thread also waits until A is inside
 * sr_emit / sr_executor_free before each fork(). The lock is static in
 * base.c and cannot be observed directly, so the program reports
 *   - how often A was inside sr_emit / sr_executor_free when fork() was called,
 *   - how many fork() calls took far longer than forks without A running, i.e.
 *     waited for the lock in the runtime's prepare handler,
 *   - how often sr_runtime_stats() (which takes the lock) had to wait for it,
 *     sampled at random moments: the fraction of time A holds the lock. The runtime's pthread_atfork handlers must make fork() wait for
 * the lock and hand the child an unlocked, consistent registry.
 *
 * Each child (with an alarm as a backstop) then:
 *   - walks the GDB JIT list (links both ways, ELF images) and checks it names
 *     as many executors as sr_runtime_stats() counts (which takes the lock);
 *   - emits and runs a new executor (registering it), checks its result;
 *   - runs, then frees the executors created before the fork;
 *   - creates, uses and destroys a second runtime;
 *   - destroys the inherited runtime (including A's executors) and checks that
 *     the GDB list is empty;
 * and _exit(0)s. The parent polls waitpid with a timeout: a child that does not
 * exit in time is killed and reported as hung.
 *
 * --print-pids prints the parent's and each child's pid (for tests of the
 * per-process perf files).
 *
 * --gdb-on-hang prints a hung child's backtrace (GDB attaches) before killing it
 * and classifies the hang (see classify_hang): in a sanitized build a hang
 * inside the sanitizer runtime is reported but not counted as a failure.
 *
 * --debug-own-lock is a negative control: A also holds a mutex of this program
 * (no atfork handler) around each call and the child takes it first, so a
 * child forked while A held it deadlocks, as it would in the runtime without
 * its atfork handlers. The parent must report those children as hung.
 *
 * Last stdout line: "fork: key=value ..."; exit 0 iff every check passed. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "stress_common.h"

static int forks = 50;
static double child_timeout = 10;
static size_t big = 20000;
static uint64_t seed = 7;
static int own_lock;
static int gdb_on_hang;
static int print_pids;
static const st_opt options[] = {
    ST_OPT_INT("--forks", &forks), ST_OPT_SECONDS("--child-timeout", &child_timeout),
    ST_OPT_SIZE("--big", &big), ST_OPT_U64("--seed", &seed),
    ST_OPT_FLAG("--debug-own-lock", &own_lock), ST_OPT_FLAG("--gdb-on-hang", &gdb_on_hang),
    ST_OPT_FLAG("--print-pids", &print_pids)};

static sr_runtime *rt;
static st_shim_fn *shim;
static atomic_int in_runtime;
static atomic_int stop;
static atomic_long a_emits, a_frees, a_failures;
static _Atomic double a_emit_seconds; /* total time in sr_emit calls */
static pthread_mutex_t test_lock = PTHREAD_MUTEX_INITIALIZER;

static vm_value run(sr_executor *ex)
{
    vm_frame f;
    memset(&f, 0, sizeof f);
    vm_value stack[1024];
    return shim(&f, stack, sr_executor_entry(ex));
}

typedef struct prog {
    sr_instr code[600];
    size_t n;
    vm_value expect;
    sr_executor *ex;
} prog;

static void random_prog(st_rng *r, prog *p)
{
    st_gen_opts o;
    memset(&o, 0, sizeof o);
    o.max_instrs = 600;
    o.allow_native_mix = 1;
    o.allow_print = 1;
    o.allow_loops = 1;
    p->n = st_gen_program(r, &o, p->code);
    if (st_interpret(NULL, p->code, p->n, NULL, 0, &p->expect) != 0) {
        fputs("FAIL: generator produced an invalid program\n", stderr);
        st_dump_program(p->code, p->n);
        exit(1);
    }
}

/* ---- thread A */

/* In --debug-own-lock, our lock is kept a little past the runtime call: fork()
 * waits for the runtime's registry lock, so without this A could release ours
 * before the child is cloned, and the control would sometimes not deadlock. */
static void release_own_lock(void)
{
    struct timespec linger = {0, 3000000}; /* longer than a fork takes here */
    nanosleep(&linger, NULL);
    pthread_mutex_unlock(&test_lock);
}

/* Emit or free with the in_runtime flag (and, in --debug-own-lock, our lock). */
static sr_status a_emit(const sr_instr *code, size_t n, const char *name, sr_executor **out,
                        double *seconds)
{
    if (own_lock)
        pthread_mutex_lock(&test_lock);
    atomic_store(&in_runtime, 1);
    double t0 = st_now();
    sr_status st = sr_emit(rt, code, n, name, out);
    *seconds = st_now() - t0;
    atomic_store(&in_runtime, 0);
    if (own_lock)
        release_own_lock();
    return st;
}

static void a_free(sr_executor *ex)
{
    if (own_lock)
        pthread_mutex_lock(&test_lock);
    atomic_store(&in_runtime, 1);
    sr_executor_free(ex);
    atomic_store(&in_runtime, 0);
    if (own_lock)
        release_own_lock();
    atomic_fetch_add(&a_frees, 1);
}

/* A emits executors of `big` instructions back to back (keeping the last two
 * alive, freeing the older one before each emission), and runs each. */
static void *thread_a(void *arg)
{
    (void)arg;
    st_rng r = {seed ^ 0xa5a5};
    sr_instr *code = malloc(big * sizeof *code);
    sr_executor *live[2] = {NULL, NULL};
    for (long i = 0; !atomic_load(&stop); i++) {
        vm_value expect;
        size_t n = st_gen_big(&r, big, code, &expect);
        sr_executor **slot = &live[i % 2];
        if (*slot) {
            a_free(*slot);
            *slot = NULL;
        }
        char name[32];
        snprintf(name, sizeof name, "a%ld", i);
        double t;
        if (a_emit(code, n, name, slot, &t) != SR_OK) {
            fprintf(stderr, "FAIL: thread A: sr_emit: %s\n", sr_last_error());
            atomic_fetch_add(&a_failures, 1);
            break;
        }
        double old = atomic_load(&a_emit_seconds);
        while (!atomic_compare_exchange_weak(&a_emit_seconds, &old, old + t)) {
        }
        atomic_fetch_add(&a_emits, 1);
        vm_value got = run(*slot);
        if (got != expect) {
            fprintf(stderr, "FAIL: thread A: executor returned %" PRId64 ", expected %" PRId64
                    "\n", (int64_t)got, (int64_t)expect);
            atomic_fetch_add(&a_failures, 1);
        }
    }
    for (int k = 0; k < 2; k++)
        sr_executor_free(live[k]);
    free(code);
    return NULL;
}

/* ---- the child */

#define CHECK(cond, ...)                                                  \
    do {                                                                  \
        if (!(cond)) {                                                    \
            fprintf(stderr, "FAIL: child %d: ", child_no);                \
            fprintf(stderr, __VA_ARGS__);                                 \
            fputc('\n', stderr);                                          \
            return __LINE__ % 100 + 10;                                   \
        }                                                                 \
    } while (0)

static int gdb_consistent(int child_no, const char *when, size_t *executors)
{
    size_t entries, syms;
    char msg[256];
    CHECK(st_check_gdb_list(&entries, &syms, msg, sizeof msg) == 0, "%s: %s", when, msg);
    sr_stats s = sr_runtime_stats(rt);
    CHECK(entries == s.gdb_entries, "%s: GDB list has %zu entries, sr_runtime_stats %zu", when,
          entries, s.gdb_entries);
    CHECK(syms == s.executors, "%s: GDB objects name %zu executors, sr_runtime_stats %zu", when,
          syms, s.executors);
    *executors = s.executors;
    return 0;
}

static int child_work(int child_no, prog *pre, int npre)
{
    size_t before, after;
    int rc = gdb_consistent(child_no, "after fork", &before);
    if (rc)
        return rc;
    CHECK(before >= (size_t)npre, "%zu executors alive, fewer than the %d created before fork",
          before, npre);

    /* A new executor: registered in the inherited registry. */
    st_rng r = {seed * 31 + (uint64_t)child_no};
    prog p;
    random_prog(&r, &p);
    CHECK(sr_emit(rt, p.code, p.n, "child", &p.ex) == SR_OK, "sr_emit: %s", sr_last_error());
    vm_value got = run(p.ex);
    CHECK(got == p.expect, "new executor returned %" PRId64 ", expected %" PRId64, (int64_t)got,
          (int64_t)p.expect);
    if ((rc = gdb_consistent(child_no, "after emitting", &after)))
        return rc;
    CHECK(after == before + 1, "emitting one executor took the count from %zu to %zu", before,
          after);

    /* The executors created before the fork still run, and can be freed. */
    for (int i = 0; i < npre; i++) {
        got = run(pre[i].ex);
        CHECK(got == pre[i].expect, "pre-fork executor %d returned %" PRId64 ", expected %"
              PRId64, i, (int64_t)got, (int64_t)pre[i].expect);
        sr_executor_free(pre[i].ex);
    }
    sr_executor_free(p.ex);
    if ((rc = gdb_consistent(child_no, "after freeing", &after)))
        return rc;
    CHECK(after == before - (size_t)npre, "freeing %d pre-fork executors + 1 new took the count"
          " from %zu to %zu", npre, before + 1, after);

    /* A second runtime works in the child. */
    sr_runtime *rt2;
    CHECK(sr_runtime_create(&st_stencil_set, st_leaf_symbols, NULL, &rt2) == SR_OK,
          "second sr_runtime_create: %s", sr_last_error());
    sr_executor *ex2;
    random_prog(&r, &p);
    CHECK(sr_emit(rt2, p.code, p.n, "child2", &ex2) == SR_OK, "sr_emit: %s", sr_last_error());
    vm_frame f;
    memset(&f, 0, sizeof f);
    vm_value stack[1024];
    got = ((st_shim_fn *)sr_shim_entry(rt2))(&f, stack, sr_executor_entry(ex2));
    CHECK(got == p.expect, "second runtime: returned %" PRId64 ", expected %" PRId64,
          (int64_t)got, (int64_t)p.expect);
    sr_runtime_destroy(rt2); /* frees ex2 */

    /* Everything inherited, A's executors included, is unregistered. */
    sr_runtime_destroy(rt);
    CHECK(__jit_debug_descriptor.first_entry == NULL,
          "GDB list not empty after destroying every runtime");
    return 0;
}

/* ---- the parent */

/* Where a hung child is stuck, from GDB's backtrace: the innermost frame that
 * is either ours (stencilrt or this program) or the sanitizer runtime's decides.
 * GCC 12's libasan has no fork handlers (they came with LLVM 18, llvm-project
 * PR #75290), so a child forked while another thread held one of its
 * allocator locks can deadlock in malloc/free: not the runtime's fault. */
enum { HUNG_RUNTIME, HUNG_SANITIZER, HUNG_UNKNOWN };
static const char *const hung_names[] = {"in stencilrt or the test", "in the sanitizer runtime",
                                         "somewhere unknown"};

static int classify_hang(int child_no, pid_t pid)
{
    char cmd[200];
    snprintf(cmd, sizeof cmd, "timeout 60 gdb -p %d -batch -nx -ex 'bt 40' </dev/null 2>/dev/null",
             (int)pid);
    fflush(stderr);
    FILE *f = popen(cmd, "r");
    int where = HUNG_UNKNOWN;
    if (!f)
        return where;
    static const char *const ours[] = {"sr_", "jitmem_", "gdbjit_", "ehframe_", "emit_",
                                       "refresh_gdb", "registry_", "child_work",
                                       "gdb_consistent", "random_prog", "run", "main"};
    static const char *const san[] = {"__sanitizer", "__asan", "__lsan", "__ubsan",
                                      "__interceptor_", "___interceptor_"};
    char line[1024];
    int decided = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] != '#')
            continue;
        fprintf(stderr, "    child %d: %s", child_no, line);
        /* "#N  0xADDR in NAME (...)" or "#0  NAME (...)" */
        const char *name = strstr(line, " in ");
        if (name)
            name += 4;
        else
            for (name = line + 1; *name && *name != ' '; name++) {
            }
        while (*name == ' ')
            name++;
        size_t len = strcspn(name, " (");
        for (size_t k = 0; !decided && k < sizeof san / sizeof *san; k++)
            if (!strncmp(name, san[k], strlen(san[k])))
                where = HUNG_SANITIZER, decided = 1;
        for (size_t k = 0; !decided && k < sizeof ours / sizeof *ours; k++)
            if (!strncmp(name, ours[k], strlen(ours[k])) &&
                (ours[k][strlen(ours[k]) - 1] == '_' || len == strlen(ours[k]) ||
                 !strncmp(name, "sr_", 3)))
                where = HUNG_RUNTIME, decided = 1;
    }
    pclose(f);
    fprintf(stderr, "    child %d hung %s\n", child_no, hung_names[where]);
    return where;
}

static int wait_child(pid_t pid, double timeout, int *status)
{
    double end = st_now() + timeout;
    for (;;) {
        pid_t w = waitpid(pid, status, WNOHANG);
        if (w == pid)
            return 1;
        if (w < 0 && errno != EINTR)
            return -1;
        if (st_now() > end)
            return 0;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

int main(int argc, char **argv)
{
    if (ST_PARSE_OPTIONS(argc, argv, options))
        return 2;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (big < 100)
        big = 100;
    sr_config cfg = SR_CONFIG_DEFAULT;
    cfg.arena_size = (size_t)8 << 20; /* A's executors share one arena */
    if (sr_runtime_create(&st_stencil_set, st_leaf_symbols, &cfg, &rt) != SR_OK) {
        fprintf(stderr, "FAIL: sr_runtime_create: %s\n", sr_last_error());
        return 1;
    }
    shim = (st_shim_fn *)sr_shim_entry(rt);
    int failures = 0;

    /* Executors created before any fork; each child frees its copies. */
    enum { NPRE = 3 };
    static prog pre[NPRE];
    st_rng r = {seed};
    for (int i = 0; i < NPRE; i++) {
        random_prog(&r, &pre[i]);
        if (sr_emit(rt, pre[i].code, pre[i].n, "prefork", &pre[i].ex) != SR_OK) {
            fprintf(stderr, "FAIL: sr_emit: %s\n", sr_last_error());
            return 1;
        }
        if (run(pre[i].ex) != pre[i].expect) {
            fprintf(stderr, "FAIL: pre-fork executor %d: wrong result\n", i);
            return 1;
        }
    }

    /* Baseline: fork() latency with no other thread in the runtime. */
    double base_max = 0;
    for (int i = 0; i < 5; i++) {
        double t0 = st_now();
        pid_t pid = fork();
        if (pid == 0)
            _exit(0);
        double t = st_now() - t0;
        base_max = t > base_max ? t : base_max;
        int status;
        if (pid < 0 || wait_child(pid, child_timeout, &status) != 1) {
            fprintf(stderr, "FAIL: baseline fork\n");
            return 1;
        }
    }

    if (print_pids)
        printf("parent pid: %d\n", (int)getpid());
    pthread_t a;
    pthread_create(&a, NULL, thread_a, NULL);
    while (atomic_load(&a_emits) < 2 && !atomic_load(&a_failures))
        sched_yield();

    /* How often is the registry lock busy? sr_runtime_stats takes it; a call
     * that takes over 200 us waited for thread A (uncontended it takes < 1 us). */
    int lock_busy = 0;
    enum { SAMPLES = 200 };
    for (int i = 0; i < SAMPLES; i++) {
        double t0 = st_now();
        (void)sr_runtime_stats(rt);
        lock_busy += st_now() - t0 > 0.0002;
        struct timespec ts = {0, (long)st_below(&r, 500000)};
        nanosleep(&ts, NULL);
    }

    long emits_before = atomic_load(&a_emits);
    int hung = 0, bad_exit = 0, a_inside = 0, waited = 0;
    int hung_where[3] = {0, 0, 0};
    double lat_sum = 0, lat_max = 0, t_start = st_now();
    double wait_threshold = base_max * 2 > base_max + 0.0005 ? base_max * 2 : base_max + 0.0005;
    for (int i = 0; i < forks; i++) {
        /* Fork while A is inside sr_emit / sr_executor_free, most of which
         * runs under the registry lock (wait at most 100 ms for that). */
        for (double until = st_now() + 0.1; !atomic_load(&in_runtime) && st_now() < until;)
            sched_yield();
        a_inside += atomic_load(&in_runtime);
        double t0 = st_now();
        pid_t pid = fork();
        if (pid == 0) {
            alarm((unsigned)(child_timeout + 5)); /* a backstop; the parent kills first */
            if (own_lock)
                pthread_mutex_lock(&test_lock); /* the fork-unsafe lock */
            _exit(child_work(i, pre, NPRE));
        }
        double lat = st_now() - t0;
        if (pid > 0 && print_pids)
            printf("child pid: %d\n", (int)pid);
        if (pid < 0) {
            fprintf(stderr, "FAIL: fork: %s\n", strerror(errno));
            failures++;
            break;
        }
        lat_sum += lat;
        lat_max = lat > lat_max ? lat : lat_max;
        waited += lat > wait_threshold;
        int status = 0;
        int w = wait_child(pid, child_timeout, &status);
        if (w == 0) {
            fprintf(stderr, "FAIL: child %d hung: no exit after %.1f s (killed)\n", i,
                    child_timeout);
            if (gdb_on_hang)
                hung_where[classify_hang(i, pid)]++;
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            hung++;
        } else if (w < 0) {
            fprintf(stderr, "FAIL: waitpid: %s\n", strerror(errno));
            bad_exit++;
        } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            if (WIFSIGNALED(status))
                fprintf(stderr, "FAIL: child %d killed by signal %d%s\n", i, WTERMSIG(status),
                        WTERMSIG(status) == SIGALRM ? " (SIGALRM: it hung)" : "");
            else
                fprintf(stderr, "FAIL: child %d exited %d\n", i, WEXITSTATUS(status));
            bad_exit++;
        }
    }
    double fork_phase = st_now() - t_start;
    long emits_during = atomic_load(&a_emits) - emits_before;
    atomic_store(&stop, 1);
    pthread_join(a, NULL);

    if (emits_during < 1) {
        fprintf(stderr, "FAIL: thread A made no progress while the parent forked\n");
        failures++;
    }
    for (int i = 0; i < NPRE; i++) {
        if (run(pre[i].ex) != pre[i].expect) {
            fprintf(stderr, "FAIL: parent: pre-fork executor %d: wrong result after forks\n", i);
            failures++;
        }
        sr_executor_free(pre[i].ex);
    }
    size_t entries, syms;
    char msg[256];
    if (st_check_gdb_list(&entries, &syms, msg, sizeof msg) != 0) {
        fprintf(stderr, "FAIL: parent: %s\n", msg);
        failures++;
    }
    sr_stats s = sr_runtime_stats(rt);
    if (s.executors != 0 || syms != 0) {
        fprintf(stderr, "FAIL: parent: %zu executors (%zu named in GDB) alive at the end\n",
                s.executors, syms);
        failures++;
    }
    sr_runtime_destroy(rt);
    if (__jit_debug_descriptor.first_entry) {
        fprintf(stderr, "FAIL: parent: GDB list not empty after sr_runtime_destroy\n");
        failures++;
    }
    long a_emit_count = atomic_load(&a_emits);
#if defined(__SANITIZE_ADDRESS__)
    int sanitized = 1;
#else
    int sanitized = 0;
#endif
    /* A hang inside the sanitizer runtime (see classify_hang) is reported, but
     * fails the run only without a sanitizer: the test is about stencilrt. */
    int excused = sanitized ? hung_where[HUNG_SANITIZER] : 0;
    failures += hung - excused + bad_exit + (int)atomic_load(&a_failures);
    printf("fork: forks=%d children_ok=%d hung=%d hung_in_runtime=%d hung_in_sanitizer=%d "
           "hung_unknown=%d bad_exit=%d a_inside_runtime_at_fork=%d "
           "forks_waited=%d lock_busy_samples=%d/%d fork_ms_avg=%.3f fork_ms_max=%.3f fork_ms_baseline_max=%.3f "
           "a_emits=%ld a_emits_during_forks=%ld a_frees=%ld big_instrs=%zu "
           "emit_ms_avg=%.2f fork_phase_s=%.2f failures=%d\n",
           forks, forks - hung - bad_exit, hung, hung_where[HUNG_RUNTIME],
           hung_where[HUNG_SANITIZER], hung_where[HUNG_UNKNOWN], bad_exit, a_inside, waited, lock_busy, SAMPLES,
           forks ? lat_sum / forks * 1e3 : 0, lat_max * 1e3, base_max * 1e3,
           atomic_load(&a_emits), emits_during, atomic_load(&a_frees), big,
           a_emit_count ? atomic_load(&a_emit_seconds) / (double)a_emit_count * 1e3 : 0, fork_phase,
           failures);
    return failures ? 1 : 0;
}
