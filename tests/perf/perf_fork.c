/* perf_fork.c - JIT code on both sides of fork(): the child's loads must go to
 * a file of its own (jit-<child>.dump, perf-<child>.map), the parent's file
 * must hold only the parent's. Each side spins SPIN iterations in its JIT code
 * so a profile has samples in both. Prints "parent PID" and "child PID". */
#include <sys/wait.h>
#include <unistd.h>

#include "perfprog.h"

static uint64_t spin_count(int argc, char **argv)
{
    return argc > 1 ? strtoull(argv[1], NULL, 10) : 1000;
}

int main(int argc, char **argv)
{
    uint64_t spin = spin_count(argc, argv);
    sr_runtime *rt = perfprog_runtime();
    sr_executor *before = perfprog_loop(rt, "before_fork", spin);
    if (perfprog_run(rt, before) != (vm_value)spin)
        return 1;
    fflush(stdout);
    pid_t child = fork();
    if (child < 0) {
        perror("fork");
        return 1;
    }
    if (child == 0) {
        sr_executor *mine = perfprog_loop(rt, "in_child", spin);
        int bad = perfprog_run(rt, mine) != (vm_value)spin;
        sr_runtime_destroy(rt);
        _exit(bad);
    }
    int status;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status)) {
        fprintf(stderr, "perf_fork: the child failed\n");
        return 1;
    }
    sr_executor *after = perfprog_loop(rt, "after_fork", spin);
    int bad = perfprog_run(rt, after) != (vm_value)spin;
    sr_runtime_destroy(rt);
    printf("parent %d\nchild %d\n", (int)getpid(), (int)child);
    return bad;
}
