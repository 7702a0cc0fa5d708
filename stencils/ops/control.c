/* control.c - jumps and returns. A jump's target is another instruction of the
 * same function; the runtime patches _JIT_JUMP_TARGET with its address. */

OP(jump)
{
    JUMP();
}

/* pop; jump if it was zero */
OP(jump_if_zero)
{
    vm_value cond = tos;
    tos = *--sp;
    if (cond == 0)
        JUMP();
    CONTINUE();
}

/* pop; jump if it was not zero */
OP(jump_if_nonzero)
{
    vm_value cond = tos;
    tos = *--sp;
    if (cond != 0)
        JUMP();
    CONTINUE();
}

/* Return the top of stack to the shim's caller. */
OP(ret)
{
    (void)frame;
    (void)sp;
    return tos;
}
