/* Control flow and calls into the VM's C code. */

OP(jmp) { JUMP(); }

OP(jz)                  /* jump when the accumulator is zero */
{
    if (acc == 0)
        JUMP();
    CONTINUE();
}

OP(jlt)                 /* jump when acc < r */
{
    if (acc < REG)
        JUMP();
    CONTINUE();
}

OP(call)                /* acc = function imm (acc), run by the VM's C code */
{
    acc = rvm_call(vm, STENCIL_OPERAND(0), acc);
    CONTINUE();
}

OP(trace)               /* print the native backtrace from C */
{
    acc = rvm_trace(vm, acc);
    CONTINUE();
}

OP(ret)                 /* back to the shim with the accumulator */
{
    (void)vm;           /* every op takes every parameter; ret needs only acc */
    (void)regs;
    return acc;
}
