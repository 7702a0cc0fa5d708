/* arith.c - integer arithmetic on the two topmost values, with wrap-around
 * semantics (computed unsigned so overflow is defined). */

#define BINARY(expr)         \
    do {                     \
        vm_value a = *--sp;  \
        vm_value b = tos;    \
        tos = (expr);        \
        (void)a;             \
        (void)b;             \
    } while (0)

OP(add)
{
    BINARY((vm_value)((uint64_t)a + (uint64_t)b));
    CONTINUE();
}

OP(sub)
{
    BINARY((vm_value)((uint64_t)a - (uint64_t)b));
    CONTINUE();
}

OP(mul)
{
    BINARY((vm_value)((uint64_t)a * (uint64_t)b));
    CONTINUE();
}

OP(div)
{
    if (tos == 0 || (tos == -1 && sp[-1] == INT64_MIN))
        vm_trap(frame, "division by zero or overflow");
    BINARY(a / b);
    CONTINUE();
}

OP(mod)
{
    if (tos == 0 || (tos == -1 && sp[-1] == INT64_MIN))
        vm_trap(frame, "modulo by zero or overflow");
    BINARY(a % b);
    CONTINUE();
}

/* tos += OPERAND0 */
OP(addi)
{
    tos = (vm_value)((uint64_t)tos + (uint64_t)OPERAND0);
    CONTINUE();
}
