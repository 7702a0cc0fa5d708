/* chain.c - the side exit of tinyvm --chain (the dispatcher is stencils/chain.c). */

/* Programs cannot name it: leave JIT code for the
 * dispatcher, which runs block OPERAND0 next and links instruction OPERAND2 of
 * block OPERAND1, the jump that led here, straight to it. The top of stack
 * goes onto the stack, where the next block's first instruction, a pop,
 * finds it. */
OP(side_exit)
{
    *sp++ = tos;
    frame->exit_sp = sp;
    frame->exit_to = (int32_t)OPERAND0;
    frame->exit_from = (int32_t)OPERAND1;
    frame->exit_branch = (int32_t)OPERAND2;
    return 0;
}
