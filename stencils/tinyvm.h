/* tinyvm.h - types of the demo VM, shared by its stencils, shim, interpreter and JIT. */
#ifndef TINYVM_H
#define TINYVM_H

#include <stdint.h>

typedef int64_t vm_value;

#define VM_MAX_LOCALS 16

struct vm;

/* One activation of a tinyvm function. */
typedef struct vm_frame {
    vm_value locals[VM_MAX_LOCALS];
    struct vm *vm;
    int32_t function; /* index of the running function */
    /* --chain: where the last side exit left (chain.c); exit_to < 0 after a ret */
    int32_t exit_to, exit_from, exit_branch;
    vm_value *exit_sp;
} vm_frame;

/* Run-time helpers the stencils call (listed under `symbols:` in the manifest). */
vm_value vm_call(vm_frame *caller, vm_value function, vm_value argc, vm_value *args);
vm_value vm_print(vm_frame *frame, vm_value value);
vm_value vm_native(vm_frame *frame, vm_value which, vm_value arg);
_Noreturn void vm_trap(vm_frame *frame, const char *why);

#endif
