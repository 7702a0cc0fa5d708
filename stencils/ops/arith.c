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

#ifdef __i386__
/* 32-bit x86 has no 64-bit divide instruction, and the compiler's helper
 * (_alldiv, __divdi3) is no run-time symbol of the VM's: long division, a
 * bit at a time (the ops have checked b != 0 and INT64_MIN / -1). */
static inline uint64_t divide_u64(uint64_t n, uint64_t d, uint64_t *rem)
{
    uint64_t q = 0, r = 0;
    for (int i = 63; i >= 0; i--) {
        r = r << 1 | (n >> i & 1);
        if (r >= d) {
            r -= d;
            q |= (uint64_t)1 << i;
        }
    }
    *rem = r;
    return q;
}

/* C's truncating division and remainder, from the magnitudes' */
static inline vm_value divide_s64(vm_value a, vm_value b, int remainder)
{
    uint64_t r, ua = a < 0 ? 0 - (uint64_t)a : (uint64_t)a;
    uint64_t q = divide_u64(ua, b < 0 ? 0 - (uint64_t)b : (uint64_t)b, &r);
    if (remainder)
        return (vm_value)(a < 0 ? 0 - r : r);
    return (vm_value)((a < 0) != (b < 0) ? 0 - q : q);
}
#define DIVIDE(a, b) divide_s64(a, b, 0)
#define MODULO(a, b) divide_s64(a, b, 1)
#else
#define DIVIDE(a, b) ((a) / (b))
#define MODULO(a, b) ((a) % (b))
#endif

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
    BINARY(DIVIDE(a, b));
    CONTINUE();
}

OP(mod)
{
    if (tos == 0 || (tos == -1 && sp[-1] == INT64_MIN))
        vm_trap(frame, "modulo by zero or overflow");
    BINARY(MODULO(a, b));
    CONTINUE();
}

/* tos += OPERAND0 */
OP(addi)
{
    tos = (vm_value)((uint64_t)tos + (uint64_t)OPERAND0);
    CONTINUE();
}
