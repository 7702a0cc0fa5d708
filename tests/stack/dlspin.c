/* dlspin.c - runs a loop in JIT code through a libstencilrt.so opened with
 * dlopen() and used only through dlsym(), for stencilrt-stack to find the
 * registry in that library's .dynsym (tests/integration/test_stack.py hands
 * it a stripped copy). It does not link stencilrt.
 *
 *     dlspin LIBRARY [SECONDS]
 *
 * Emits "spin" (push N; L: addi -1; dup; jump_if_nonzero L; ret), prints
 * "dlspin: ready pid PID", then runs it from dlspin_loop again and again
 * until SECONDS (default 60) have passed, and exits 0. The stack while it
 * spins: spin's frame, dlspin_loop, main. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "jit_stencils.h"
#include "stencilrt.h"
#include "tinyvm.h"

typedef vm_value shim_fn(vm_frame *frame, vm_value *sp, void *code);

static const sr_stencil_set stencil_set = SR_STENCIL_SET_FROM_HEADER;

/* The loop calls no helper; the runtime needs a value for each symbol. */
static void no_helper(void)
{
    fputs("dlspin: a helper was called\n", stderr);
    abort();
}

static void *need(void *lib, const char *name)
{
    void *p = dlsym(lib, name);
    if (!p) {
        fprintf(stderr, "dlspin: %s: %s\n", name, dlerror());
        exit(1);
    }
    return p;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

__attribute__((noinline)) static int dlspin_loop(shim_fn *shim, void *entry, double seconds)
{
    double end = now() + seconds;
    while (now() < end) {
        vm_frame frame;
        memset(&frame, 0, sizeof frame);
        vm_value stack[16];
        if (shim(&frame, stack, entry) != 0)
            return 1;
    }
    __asm__ volatile("" ::: "memory");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fputs("usage: dlspin LIBRARY [SECONDS]\n", stderr);
        return 2;
    }
    double seconds = argc == 3 ? atof(argv[2]) : 60;
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "dlspin: %s\n", dlerror());
        return 1;
    }
    sr_status (*create)(const sr_stencil_set *, const void *const *, const sr_config *,
                        sr_runtime **);
    sr_status (*emit)(sr_runtime *, const sr_instr *, size_t, const char *, sr_executor **);
    void *(*shim_entry)(const sr_runtime *);
    void *(*entry)(const sr_executor *);
    const char *(*last_error)(void);
    *(void **)&create = need(lib, "sr_runtime_create");
    *(void **)&emit = need(lib, "sr_emit");
    *(void **)&shim_entry = need(lib, "sr_shim_entry");
    *(void **)&entry = need(lib, "sr_executor_entry");
    *(void **)&last_error = need(lib, "sr_last_error");

    const void *symbols[SG_SYM__COUNT];
    for (size_t i = 0; i < SG_SYM__COUNT; i++)
        symbols[i] = (const void *)no_helper;
    sr_runtime *rt;
    sr_executor *ex;
    static const sr_instr spin[] = {{SG_OP_push, 0, {1000000}}, {SG_OP_addi, 0, {(uint64_t)-1}},
                                    {SG_OP_dup, 0, {0}}, {SG_OP_jump_if_nonzero, 1, {0}},
                                    {SG_OP_ret, 0, {0}}};
    if (create(&stencil_set, symbols, NULL, &rt) != SR_OK ||
        emit(rt, spin, sizeof spin / sizeof *spin, "spin", &ex) != SR_OK) {
        fprintf(stderr, "dlspin: %s\n", last_error());
        return 1;
    }
    printf("dlspin: ready pid %d\n", (int)getpid());
    fflush(stdout);
    return dlspin_loop((shim_fn *)shim_entry(rt), entry(ex), seconds);
}
