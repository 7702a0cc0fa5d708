/* natives.c - the C functions tinyvm's ops call (the manifest's run-time
 * symbols). The VM's entry into a function, vm_run, is in run.c. */
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

/* Re-entry: a call runs the callee through the shim again (JIT -> C -> JIT).
 * Optimized, a sibling call: vm_run is then the only C frame between two JIT
 * frames (test_gdb's GLUE). */
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
