/* calls.c - ops that leave JIT code for C: run-time helpers, and calls of other
 * tinyvm functions, which re-enter JIT code through the shim. */

/* call function OPERAND0 with OPERAND1 arguments (the topmost values) */
OP(call)
{
    *sp++ = tos;
    sp -= OPERAND1;
    tos = vm_call(frame, OPERAND0, OPERAND1, sp);
    CONTINUE();
}

OP(print)
{
    tos = vm_print(frame, tos);
    CONTINUE();
}

/* native helper number OPERAND0 applied to the top of stack */
OP(native)
{
    tos = vm_native(frame, OPERAND0, tos);
    CONTINUE();
}
