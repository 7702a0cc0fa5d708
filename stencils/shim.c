/* shim.c - the one C function that enters JIT code. Its compiled unwind table
 * is the source of truth for every JIT frame: stencils never move the frame
 * pointer, so the rule in force at the call below describes them all. */

/* Runs the executor at `code` with an empty operand stack `sp`. */
vm_value tinyvm_shim(vm_frame *frame, vm_value *sp, stencil_fn *code);

vm_value tinyvm_shim(vm_frame *frame, vm_value *sp, stencil_fn *code)
{
    return code(TINYVM_ENTRY_ARGS(frame, sp));
}
