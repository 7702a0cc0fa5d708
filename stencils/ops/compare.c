/* compare.c - comparisons push 1 or 0. */

OP(lt)
{
    vm_value a = *--sp;
    tos = a < tos;
    CONTINUE();
}

OP(le)
{
    vm_value a = *--sp;
    tos = a <= tos;
    CONTINUE();
}

OP(eq)
{
    vm_value a = *--sp;
    tos = a == tos;
    CONTINUE();
}
