/* stack.c - operand-stack ops. The top of stack lives in `tos` (a register);
 * the rest is in memory below `sp`. */

/* push OPERAND0 */
OP(push)
{
    *sp++ = tos;
    tos = OPERAND0;
    CONTINUE();
}

OP(pop)
{
    tos = *--sp;
    CONTINUE();
}

OP(dup)
{
    *sp++ = tos;
    CONTINUE();
}

/* push local OPERAND0 */
OP(load)
{
    *sp++ = tos;
    tos = frame->locals[OPERAND0];
    CONTINUE();
}

/* pop into local OPERAND0 */
OP(store)
{
    frame->locals[OPERAND0] = tos;
    tos = *--sp;
    CONTINUE();
}
