/* The one C function that enters JIT code. Its parameters come in another
 * order than the ops' (code first, then the accumulator), to show the shim's
 * signature is the VM's choice. */
int64_t rvm_shim(void *code, int64_t acc, struct rvm *vm, int64_t *regs)
{
    return ((stencil_fn *)code)(vm, regs, acc);
}
