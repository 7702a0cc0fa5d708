/* natives.c - the C functions tinyvm's ops call (the manifest's run-time
 * symbols) and the VM's entry into a function. */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#ifdef _WIN32
#include <windows.h>
#else
#include <execinfo.h>
#endif

#include "vm.h"

#define OPERAND_STACK 1024

const char *const vm_native_names[NATIVE__COUNT] = {"backtrace", "breakpoint", "trap", "abort"};

/* Runs function `fn` in a fresh frame, interpreted or through the shim. */
vm_value vm_run(struct vm *vm, size_t fn, vm_value argc, const vm_value *args)
{
    /* Locals past the arguments start at 0. Copied from a constant, which
     * compiles to eight 16-byte stores: `= {...}` or a loop of zero stores
     * compiles to `rep stos`, and a loop choosing argument or 0 per local to
     * a loop of 16 that was half of a tinyvm call (fib ran 2x faster
     * without it). The builtin, not _FORTIFY_SOURCE's inline memcpy, which
     * debuggers would show as a frame of its own. */
    vm_frame frame;
    vm_value stack[OPERAND_STACK];
    static const vm_value zero[VM_MAX_LOCALS];
    __builtin_memcpy(frame.locals, zero, sizeof zero);
    for (vm_value i = 0; i < argc && i < VM_MAX_LOCALS; i++)
        frame.locals[i] = args[i];
    frame.vm = vm;
    frame.function = (int32_t)fn;
    frame.exit_to = frame.exit_from = frame.exit_branch = 0;
    frame.exit_sp = NULL;
    switch (vm->mode) {
    case VM_JIT: return vm_jit_run(&frame, stack);
    case VM_CHAIN: return vm_chain_run(&frame, stack);
    default: return vm_interpret(&frame, stack);
    }
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
#ifdef _WIN32
        int n = CaptureStackBackTrace(0, 128, pcs, NULL); /* addresses only: no symbols */
        fprintf(stderr, "backtrace: %d frames\n", n);
        for (int i = 0; i < n; i++)
            fprintf(stderr, "[%p]\n", pcs[i]);
#else
        int n = backtrace(pcs, 128);
        fprintf(stderr, "backtrace: %d frames\n", n);
        backtrace_symbols_fd(pcs, n, 2);
#endif
        return n;
    }
    case NATIVE_BREAKPOINT: return tinyvm_breakpoint(arg);
#ifdef _WIN32
    case NATIVE_TRAP: DebugBreak(); return arg; /* ends the process without a debugger */
#else
    case NATIVE_TRAP: raise(SIGTRAP); return arg;
#endif
    case NATIVE_ABORT: abort();
    default: vm_trap(frame, "unknown native");
    }
}

_Noreturn void vm_trap(vm_frame *frame, const char *why)
{
    fprintf(stderr, "tinyvm: trap in %s: %s\n", frame->vm->functions[frame->function].name, why);
    exit(3);
}
