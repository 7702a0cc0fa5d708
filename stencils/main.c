/* main.c - tinyvm [--interp|--jit|--chain] [--no-variants] [--list] [--repeat N] [--time]
 *                 [--stats] PROGRAM
 * Runs the program's `main` function and prints its result. --no-variants: the
 * JIT emits the plain ops, not the cached forms (jit.c); --list: the JIT's
 * stencil for every instruction, on stderr. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _WIN32
#include <windows.h>
#endif

#include "vm.h"

static double now(void)
{
#ifdef _WIN32
    LARGE_INTEGER t, hz; /* Windows' monotonic clock */
    QueryPerformanceCounter(&t);
    QueryPerformanceFrequency(&hz);
    return (double)t.QuadPart / (double)hz.QuadPart;
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
#endif
}

#ifdef _WIN32
/* An exception nothing handles (trap.tvm's breakpoint) ends tinyvm with its
 * code as the exit status and one line saying which, as a signal's number
 * does on Linux, instead of starting the system's crash handler (under Wine:
 * winedbg, whose report is long and whose exit status varies). */
static LONG WINAPI unhandled(EXCEPTION_POINTERS *ep)
{
    fprintf(stderr, "tinyvm: unhandled exception 0x%08lx at %p\n",
            (unsigned long)ep->ExceptionRecord->ExceptionCode,
            ep->ExceptionRecord->ExceptionAddress);
    fflush(stderr);
    ExitProcess((UINT)ep->ExceptionRecord->ExceptionCode);
}
#endif

static const char *const mode_names[] = {"interp", "jit", "chain"};

/* --list: the name debuggers give each instruction's code, "<stencil>@<function>[i]". */
static void list_stencils(const struct vm *vm)
{
    for (size_t f = 0; f < vm->nfunctions; f++)
        for (size_t i = 0; i < vm->functions[f].n; i++)
            fprintf(stderr, "%s\n", sr_executor_instr_name(vm->functions[f].executor, i));
}

static int usage(void)
{
    fputs("usage: tinyvm [--interp|--jit|--chain] [--no-variants] [--list] [--repeat N] [--time]\n"
          "              [--stats] PROGRAM\n",
          stderr);
    return 2;
}

int main(int argc, char **argv)
{
#ifdef _WIN32
    SetUnhandledExceptionFilter(unhandled);
#endif
    struct vm vm = {.mode = VM_JIT, .variants = true};
    const char *path = NULL;
    long repeat = 1;
    bool timing = false, stats = false, list = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--interp"))
            vm.mode = VM_INTERP;
        else if (!strcmp(argv[i], "--jit"))
            vm.mode = VM_JIT;
        else if (!strcmp(argv[i], "--chain"))
            vm.mode = VM_CHAIN;
        else if (!strcmp(argv[i], "--no-variants"))
            vm.variants = false;
        else if (!strcmp(argv[i], "--list"))
            list = true;
        else if (!strcmp(argv[i], "--time"))
            timing = true;
        else if (!strcmp(argv[i], "--stats"))
            stats = true;
        else if (!strcmp(argv[i], "--repeat") && i + 1 < argc && (repeat = atol(argv[++i])) > 0)
            continue;
        else if (argv[i][0] != '-' && !path)
            path = argv[i];
        else
            return usage();
    }
    if (!path || repeat < 1)
        return usage();
    if (!vm_load(&vm, path))
        return 1;
    size_t main_fn = vm.nfunctions;
    for (size_t i = 0; i < vm.nfunctions; i++)
        if (!strcmp(vm.functions[i].name, "main"))
            main_fn = i;
    if (main_fn == vm.nfunctions) {
        fprintf(stderr, "%s: error: no function 'main'\n", path);
        return 1;
    }
    if ((vm.mode == VM_JIT && !vm_jit_init(&vm)) || (vm.mode == VM_CHAIN && !vm_chain_init(&vm)))
        return 1;
    if (list && vm.mode == VM_JIT)
        list_stencils(&vm);
    double t0 = now();
    vm_value result = 0;
    for (long r = 0; r < repeat; r++)
        result = vm_run(&vm, main_fn, 0, NULL);
    double t = now() - t0;
    printf("%" PRId64 "\n", result);
    if (timing)
        fprintf(stderr, "time: %.3f ms (%s, %ld run%s)\n", t * 1e3, mode_names[vm.mode], repeat,
                repeat == 1 ? "" : "s");
    if (stats && vm.mode == VM_CHAIN)
        fprintf(stderr, "chain: %zu blocks compiled, %zu jumps linked, %zu side exits taken\n",
                vm.chain.blocks, vm.chain.links, vm.chain.exits);
    if (vm.mode == VM_JIT)
        vm_jit_fini(&vm);
    else if (vm.mode == VM_CHAIN)
        vm_chain_fini(&vm);
    vm_unload(&vm);
    return 0;
}
