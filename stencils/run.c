/* run.c - the VM's entry into a function. Apart from the natives (natives.c)
 * so that programs that embed tinyvm with natives of their own (the AArch64
 * and Windows test glue, tests/aarch64/a64_glue.c, tests/windows/win_glue.c)
 * enter functions with this same code. */
#include "vm.h"

#define OPERAND_STACK 1024

/* Runs function `fn` in a fresh frame, interpreted or through the shim.
 * noinline: vm_run's own frame is what the unwinding tests find under every
 * JIT frame (test_gdb's GLUE, the AArch64 and Windows glue's checks). A file
 * of its own already keeps callers in other files from inlining it (no LTO);
 * the attribute says it is meant. It costs tinyvm nothing: vm_call
 * (natives.c) reached it by a jump before, as it does now. The interpreter
 * and JIT get pointers into this frame, so their calls are never tail calls
 * and the frame stays under them. */
__attribute__((noinline)) vm_value vm_run(struct vm *vm, size_t fn, vm_value argc,
                                          const vm_value *args)
{
    /* The locals the function names past its arguments start at 0; no code
     * reads the others (loader.c's nlocals). Zeroing all 16 cost every call
     * 16 loads and stores; fib.tvm names one local, its argument. */
    vm_frame frame;
    vm_value stack[OPERAND_STACK];
    vm_value i = 0;
    for (; i < argc && i < VM_MAX_LOCALS; i++)
        frame.locals[i] = args[i];
    for (; i < vm->functions[fn].nlocals; i++)
        frame.locals[i] = 0;
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
