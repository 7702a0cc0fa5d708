/* perf_threads.c - THREADS threads emit, run and free executors at once, in
 * two runtimes, then in a third created after the first two are gone (so the
 * process's perf file is closed and reopened). With STENCILRT_PERF set, every
 * load must reach the file whole. Prints "loads N": the JIT_CODE_LOAD records
 * (perf map lines) expected, one per shim, executor and stencil. */
#include <pthread.h>
#include <string.h>

#include "perfprog.h"

enum { THREADS = 6, PER_THREAD = 8, SPIN = 20000 };

typedef struct job {
    sr_runtime *rt;
    int thread;
    int failures;
} job;

static void *worker(void *arg)
{
    job *j = arg;
    for (int k = 0; k < PER_THREAD; k++) {
        char name[32];
        snprintf(name, sizeof name, "t%d_%d", j->thread, k);
        sr_executor *ex = perfprog_loop(j->rt, name, SPIN);
        j->failures += perfprog_run(j->rt, ex) != SPIN;
        if (k % 3 == 0) /* freed code must not be reused while perf watches */
            sr_executor_free(ex);
    }
    return NULL;
}

/* Run THREADS workers over the given runtimes; returns the failures. */
static int phase(sr_runtime **rts, int nrts, int first_thread)
{
    pthread_t tids[THREADS];
    job jobs[THREADS];
    for (int t = 0; t < THREADS; t++) {
        jobs[t] = (job){rts[t % nrts], first_thread + t, 0};
        if (pthread_create(&tids[t], NULL, worker, &jobs[t]) != 0) {
            perror("pthread_create");
            exit(1);
        }
    }
    int failures = 0;
    for (int t = 0; t < THREADS; t++) {
        pthread_join(tids[t], NULL);
        failures += jobs[t].failures;
    }
    return failures;
}

int main(void)
{
    sr_runtime *rts[2] = {perfprog_runtime(), perfprog_runtime()};
    int failures = phase(rts, 2, 0);
    sr_runtime_destroy(rts[0]);
    sr_runtime_destroy(rts[1]);
    sr_runtime *again = perfprog_runtime();
    failures += phase(&again, 1, THREADS);
    sr_runtime_destroy(again);
    if (failures) {
        fprintf(stderr, "perf_threads: %d executors returned the wrong value\n", failures);
        return 1;
    }
    printf("loads %d\n", 3 + 2 * THREADS * PER_THREAD * (1 + PERFPROG_LOOP_OPS));
    return 0;
}
