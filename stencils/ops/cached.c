/* cached.c - tinyvm's ops with top-of-stack caching (docs/ops.md "Variants in
 * tinyvm"): the JIT's forms of the language's ops (stack.c, arith.c, compare.c,
 * control.c, calls.c; same semantics, interp.c's too), each in variants for how
 * many of the topmost stack values it receives in registers (`in`, 0-2) and
 * leaves there (`out`, 0-2). The JIT picks one per instruction at compile time
 * (jit.c, choose_variants). Registers are positional: one cached value is in
 * `tos`; with two, the lower is in `tos` and the top in `tos1`.
 *
 * Each op is written once against a small virtual stack whose depth is a
 * compile-time constant, so clang folds every test away: what remains is the
 * op's work plus the spills (depth above `out`) or reloads (below) that its
 * variant needs. Operands that are indices (locals, functions, counts,
 * natives; loader.c bounds them) are 32-bit immediates; values (push, addi)
 * have a `wide` axis: 0 a 32-bit immediate, 1 a 64-bit one, for values that
 * do not fit (templates/stencil_op.h, STENCIL_OPERAND32). */

/* The virtual stack: vs_[0..vd_-1] cached (vs_[vd_-1] on top), the rest in
 * memory below sp. */
#define VSTACK_BEGIN()                 \
    vm_value vs_[2] = {tos, tos1};     \
    int vd_ = STENCIL_V(in)
#define VPOP() (vd_ > 0 ? vs_[--vd_] : *--sp)
#define VPUSH(value)                                                                       \
    do {                                                                                   \
        vm_value v_ = (value);                                                             \
        if (vd_ == 2) { /* full: the lower goes to memory */                               \
            *sp++ = vs_[0];                                                                \
            vs_[0] = vs_[1];                                                               \
            vd_ = 1;                                                                       \
        }                                                                                  \
        vs_[vd_++] = v_;                                                                   \
    } while (0)
/* Spill from the bottom or reload from memory until `depth` values are cached. */
#define VSTACK_TO(depth)                                                                   \
    do {                                                                                   \
        while (vd_ > (depth)) {                                                            \
            *sp++ = vs_[0];                                                                \
            vs_[0] = vs_[1];                                                               \
            vd_--;                                                                         \
        }                                                                                  \
        while (vd_ < (depth)) {                                                            \
            vs_[1] = vs_[0];                                                               \
            vs_[0] = *--sp;                                                                \
            vd_++;                                                                         \
        }                                                                                  \
    } while (0)
/* Leave `out` values cached, in the registers the next op receives them in. */
#define VSTACK_LEAVE()           \
    do {                         \
        VSTACK_TO(STENCIL_V(out)); \
        tos = vs_[0];            \
        tos1 = vs_[1];           \
    } while (0)

#define INDEX0 STENCIL_OPERAND32(0)
#define INDEX1 STENCIL_OPERAND32(1)
#define VALUE0 (STENCIL_V(wide) ? (vm_value)STENCIL_OPERAND(0) : (vm_value)STENCIL_OPERAND32(0))

/* Binary ops: b on top, a below it (arith.c's BINARY). */
#define CACHED_BINARY(expr)      \
    do {                         \
        VSTACK_BEGIN();          \
        vm_value b = VPOP();     \
        vm_value a = VPOP();     \
        VPUSH(expr);             \
        VSTACK_LEAVE();          \
        CONTINUE();              \
    } while (0)

OP(tos_push, VARIANT(in, 0, 2), VARIANT(out, 0, 2), VARIANT(wide, 0, 1))
{
    VSTACK_BEGIN();
    VPUSH(VALUE0);
    VSTACK_LEAVE();
    CONTINUE();
}

OP(tos_pop, VARIANT(in, 0, 2), VARIANT(out, 0, 2))
{
    VSTACK_BEGIN();
    (void)VPOP();
    VSTACK_LEAVE();
    CONTINUE();
}

OP(tos_dup, VARIANT(in, 0, 2), VARIANT(out, 0, 2))
{
    VSTACK_BEGIN();
    vm_value v = VPOP();
    VPUSH(v);
    VPUSH(v);
    VSTACK_LEAVE();
    CONTINUE();
}

OP(tos_load, VARIANT(in, 0, 2), VARIANT(out, 0, 2))
{
    VSTACK_BEGIN();
    VPUSH(frame->locals[INDEX0]);
    VSTACK_LEAVE();
    CONTINUE();
}

OP(tos_store, VARIANT(in, 0, 2), VARIANT(out, 0, 2))
{
    VSTACK_BEGIN();
    frame->locals[INDEX0] = VPOP();
    VSTACK_LEAVE();
    CONTINUE();
}

OP(tos_add, VARIANT(in, 0, 2), VARIANT(out, 0, 2))
{
    CACHED_BINARY((vm_value)((uint64_t)a + (uint64_t)b));
}

OP(tos_sub, VARIANT(in, 0, 2), VARIANT(out, 0, 2))
{
    CACHED_BINARY((vm_value)((uint64_t)a - (uint64_t)b));
}

OP(tos_mul, VARIANT(in, 0, 2), VARIANT(out, 0, 2))
{
    CACHED_BINARY((vm_value)((uint64_t)a * (uint64_t)b));
}

/* The check reads both operands before the trap, as arith.c's div does. */
OP(tos_div, VARIANT(in, 0, 2), VARIANT(out, 0, 2))
{
    CACHED_BINARY((b == 0 || (b == -1 && a == INT64_MIN))
                      ? (vm_trap(frame, "division by zero or overflow"), 0)
                      : a / b);
}

OP(tos_mod, VARIANT(in, 0, 2), VARIANT(out, 0, 2))
{
    CACHED_BINARY((b == 0 || (b == -1 && a == INT64_MIN))
                      ? (vm_trap(frame, "modulo by zero or overflow"), 0)
                      : a % b);
}

OP(tos_addi, VARIANT(in, 0, 2), VARIANT(out, 0, 2), VARIANT(wide, 0, 1))
{
    VSTACK_BEGIN();
    vm_value v = VPOP();
    VPUSH((vm_value)((uint64_t)v + (uint64_t)VALUE0));
    VSTACK_LEAVE();
    CONTINUE();
}

/* Comparisons, with a third axis `branch`: 0 pushes the result (0 or 1); 1
 * and 2 are the comparison fused with the jump_if_zero (1) or
 * jump_if_nonzero (2) after it, which jumps on the result without making it
 * a value: one compare-and-branch. The JIT gives the fused form the jump's
 * target and puts tos_skip where the jump was (jit.c, fuse_branch); `out` is
 * then the depth both paths leave, as for the jumps below. */
#define CACHED_COMPARE(expr)                                                               \
    do {                                                                                   \
        if (STENCIL_V(branch) == 0)                                                        \
            CACHED_BINARY(expr);                                                           \
        VSTACK_BEGIN();                                                                    \
        vm_value b = VPOP();                                                               \
        vm_value a = VPOP();                                                               \
        VSTACK_LEAVE();                                                                    \
        if ((expr) == (STENCIL_V(branch) == 2))                                            \
            JUMP();                                                                        \
        CONTINUE();                                                                        \
    } while (0)

OP(tos_lt, VARIANT(in, 0, 2), VARIANT(out, 0, 2), VARIANT(branch, 0, 2))
{
    CACHED_COMPARE(a < b);
}

OP(tos_le, VARIANT(in, 0, 2), VARIANT(out, 0, 2), VARIANT(branch, 0, 2))
{
    CACHED_COMPARE(a <= b);
}

OP(tos_eq, VARIANT(in, 0, 2), VARIANT(out, 0, 2), VARIANT(branch, 0, 2))
{
    CACHED_COMPARE(a == b);
}

/* Where a jump fused into the comparison before it was: the comparison's
 * fall-through path goes on through here. */
OP(tos_skip)
{
    CONTINUE();
}

/* Jumps leave `out` values cached on both paths: the JIT gives every jump
 * target of a function one depth. */
OP(tos_jump, VARIANT(in, 0, 2), VARIANT(out, 0, 2))
{
    VSTACK_BEGIN();
    VSTACK_LEAVE();
    JUMP();
}

OP(tos_jump_if_zero, VARIANT(in, 0, 2), VARIANT(out, 0, 2))
{
    VSTACK_BEGIN();
    vm_value cond = VPOP();
    VSTACK_LEAVE();
    if (cond == 0)
        JUMP();
    CONTINUE();
}

OP(tos_jump_if_nonzero, VARIANT(in, 0, 2), VARIANT(out, 0, 2))
{
    VSTACK_BEGIN();
    vm_value cond = VPOP();
    VSTACK_LEAVE();
    if (cond != 0)
        JUMP();
    CONTINUE();
}

OP(tos_ret, VARIANT(in, 0, 2))
{
    VSTACK_BEGIN();
    (void)frame;
    return VPOP();
}

/* The arguments go to memory, where vm_call reads them (calls.c's call). The
 * axis `args` is their count, 0-2, a constant the stack arithmetic folds
 * with the spills; 3 takes it from the operand (any count). */
OP(tos_call, VARIANT(in, 0, 2), VARIANT(out, 0, 2), VARIANT(args, 0, 3))
{
    const vm_value argc = STENCIL_V(args) < 3 ? STENCIL_V(args) : INDEX1;
    VSTACK_BEGIN();
    VSTACK_TO(0);
    sp -= argc;
    VPUSH(vm_call(frame, INDEX0, argc, sp));
    VSTACK_LEAVE();
    CONTINUE();
}

OP(tos_print, VARIANT(in, 0, 2), VARIANT(out, 0, 2))
{
    VSTACK_BEGIN();
    vm_value v = VPOP();
    VPUSH(vm_print(frame, v));
    VSTACK_LEAVE();
    CONTINUE();
}

OP(tos_native, VARIANT(in, 0, 2), VARIANT(out, 0, 2))
{
    VSTACK_BEGIN();
    vm_value v = VPOP();
    VPUSH(vm_native(frame, INDEX0, v));
    VSTACK_LEAVE();
    CONTINUE();
}
