/* main.c - tinyvm [--interp|--jit] [--repeat N] [--time] PROGRAM
 * Runs the program's `main` function and prints its result. */
#include <execinfo.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vm.h"

#define OPERAND_STACK 1024

const char *const vm_native_names[NATIVE__COUNT] = {"backtrace", "breakpoint", "trap", "abort"};

vm_value vm_run(struct vm *vm, size_t fn, vm_value argc, const vm_value *args)
{
    vm_frame frame = {.vm = vm, .function = (int32_t)fn};
    vm_value stack[OPERAND_STACK];
    for (vm_value i = 0; i < argc && i < VM_MAX_LOCALS; i++)
        frame.locals[i] = args[i];
    return vm->mode == VM_JIT ? vm_jit_run(&frame, stack) : vm_interpret(&frame, stack);
}

/* Re-entry: a call runs the callee through the shim again (JIT -> C -> JIT). */
vm_value vm_call(vm_frame *caller, vm_value function, vm_value argc, vm_value *args)
{
    return vm_run(caller->vm, (size_t)function, argc, args);
}

vm_value vm_print(vm_frame *frame, vm_value value)
{
    (void)frame;
    printf("%" PRId64 "\n", value);
    return value;
}

__attribute__((noinline)) vm_value tinyvm_breakpoint(vm_value v)
{
    __asm__ volatile("" ::: "memory"); /* a place for debuggers to stop */
    return v;
}

vm_value vm_native(vm_frame *frame, vm_value which, vm_value arg)
{
    (void)frame;
    switch (which) {
    case NATIVE_BACKTRACE: {
        void *pcs[128];
        int n = backtrace(pcs, 128);
        fprintf(stderr, "backtrace: %d frames\n", n);
        backtrace_symbols_fd(pcs, n, 2);
        return n;
    }
    case NATIVE_BREAKPOINT: return tinyvm_breakpoint(arg);
    case NATIVE_TRAP: raise(SIGTRAP); return arg;
    case NATIVE_ABORT: abort();
    default: vm_trap(frame, "unknown native");
    }
}

_Noreturn void vm_trap(vm_frame *frame, const char *why)
{
    fprintf(stderr, "tinyvm: trap in %s: %s\n", frame->vm->functions[frame->function].name, why);
    exit(3);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int usage(void)
{
    fputs("usage: tinyvm [--interp|--jit] [--repeat N] [--time] PROGRAM\n", stderr);
    return 2;
}

int main(int argc, char **argv)
{
    struct vm vm = {.mode = VM_JIT};
    const char *path = NULL;
    long repeat = 1;
    bool timing = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--interp"))
            vm.mode = VM_INTERP;
        else if (!strcmp(argv[i], "--jit"))
            vm.mode = VM_JIT;
        else if (!strcmp(argv[i], "--time"))
            timing = true;
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
    if (vm.mode == VM_JIT && !vm_jit_init(&vm))
        return 1;
    double t0 = now();
    vm_value result = 0;
    for (long r = 0; r < repeat; r++)
        result = vm_run(&vm, main_fn, 0, NULL);
    double t = now() - t0;
    printf("%" PRId64 "\n", result);
    if (timing)
        fprintf(stderr, "time: %.3f ms (%s, %ld run%s)\n", t * 1e3,
                vm.mode == VM_JIT ? "jit" : "interp", repeat, repeat == 1 ? "" : "s");
    if (vm.mode == VM_JIT)
        vm_jit_fini(&vm);
    vm_unload(&vm);
    return 0;
}
