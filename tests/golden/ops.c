/* ops.c - the golden headers' ops: one of each thing a stencil can hold. */

OP(push_operand) /* an operand hole, then the continuation (removed) */
{
    *sp++ = tos;
    tos = OPERAND0;
    CONTINUE();
}

OP(branch_if_zero) /* a jump-target hole beside the continuation */
{
    vm_value cond = tos;
    tos = *--sp;
    if (cond == 0)
        JUMP();
    CONTINUE();
}

OP(print) /* a call to a run-time symbol */
{
    tos = vm_print(frame, tos);
    CONTINUE();
}

static const vm_value squares[8] = {0, 1, 4, 9, 16, 25, 36, 49};

OP(square_small) /* read-only data and a reference into it */
{
    tos = squares[(uint64_t)tos & 7];
    CONTINUE();
}

OP(trap) /* a string in read-only data, and a call that does not return */
{
    (void)sp;
    (void)tos;
    vm_trap(frame, "trap op reached");
}

OP(ret) /* no hole at all */
{
    (void)frame;
    (void)sp;
    return tos;
}

OP(checked_neg) /* a cold part: the trap path, after every hot part (hotcold_split) */
{
    if (tos == INT64_MIN)
        vm_trap(frame, "negation overflows");
    tos = -tos;
    CONTINUE();
}
