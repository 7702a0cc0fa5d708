/* stencil_op.h - what every stencilgen op template provides, for any VM.
 *
 * A VM's template (the file its manifest names as `template:`, force-included
 * into every op and into the shim) defines its op signature and then includes
 * this file:
 *
 *     #include "myvm.h"
 *     #define STENCIL_RETURN  vm_value                            // what an op returns
 *     #define STENCIL_PARAMS  vm_state *vm, vm_value *sp, vm_value acc // every op's parameters
 *     #define STENCIL_ARGS    vm, sp, acc                          // the same, as arguments
 *     #include "stencil_op.h"   // stencilgen puts it on the include path
 *
 * and may define STENCIL_CC first (default: preserve_none, which leaves every
 * register to arguments and scratch so VM state stays in registers from op to
 * op; regcall on 32-bit x86, which has no preserve_none). An op is then written
 *
 *     OP(add) { acc = *--sp + acc; CONTINUE(); }
 *
 * and compiled as its own translation unit with -DSTENCILGEN_OP=add, which
 * makes _JIT_ENTRY op_add (an alias; on Mach-O, which has none, a function
 * that tail-calls op_add, inlined into it): the stencil is that one function (or,
 * with batched units, the default, in a unit of several ops of one file with
 * -DSTENCILGEN_BATCH, each named by an alias stencilgen adds, and cut out of
 * their object by stencilgen). Holes
 * are references to symbols that exist nowhere; stencilgen turns each
 * relocation against them into a hole the runtime patches:
 *
 *   _JIT_CONTINUE      the next instruction     CONTINUE(): a musttail call of it
 *   _JIT_JUMP_TARGET   this instruction's target JUMP()
 *   _JIT_OPERAND0..3   the instruction's operands STENCIL_OPERAND(n), a uint64_t
 *   any name listed under the manifest's `symbols:` (a C function or object
 *   of the VM, declared as usual)
 *
 * Operands are 64-bit immediates patched into the code (see STENCIL_OPERAND):
 * any value works (on AArch64 Mach-O, which has no relocation for them, they
 * are loaded from GOT slots instead). Ops never touch the frame-pointer
 * register: stencilgen compiles them with -mframe-pointer=reserved and checks
 * every instruction. */
#ifndef STENCIL_OP_H
#define STENCIL_OP_H

#include <stdint.h>

#if !defined(STENCIL_RETURN) || !defined(STENCIL_PARAMS) || !defined(STENCIL_ARGS)
#error "define STENCIL_RETURN, STENCIL_PARAMS and STENCIL_ARGS before including stencil_op.h"
#endif

#if !defined(STENCIL_CC) && defined(__i386__)
/* 32-bit x86 has no preserve_none: regcall passes the first five integer
 * arguments in eax, ecx, edx, edi and esi, so the VM's state still travels in
 * registers from op to op. */
#define STENCIL_CC __attribute__((regcall))
#ifndef STENCIL_ALIAS_PREFIX
#define STENCIL_ALIAS_PREFIX "__regcall3__"
#endif
#elif !defined(STENCIL_CC)
#define STENCIL_CC __attribute__((preserve_none))
#endif
/* An alias names its function as the object does: regcall's functions with a
 * prefix (define it too when defining STENCIL_CC as regcall). */
#ifndef STENCIL_ALIAS_PREFIX
#define STENCIL_ALIAS_PREFIX ""
#endif

/* The type of every op, of JIT code, and of what the shim calls. */
typedef STENCIL_CC STENCIL_RETURN stencil_fn(STENCIL_PARAMS);

/* Hidden: jumps to these become direct PC-relative branches, not GOT loads. */
#define STENCIL_HIDDEN __attribute__((visibility("hidden")))
extern STENCIL_HIDDEN stencil_fn _JIT_CONTINUE;
extern STENCIL_HIDDEN stencil_fn _JIT_JUMP_TARGET;
/* The operands' hole symbols. Referenced directly (not through
 * STENCIL_OPERAND) they are GOT loads under PIC, or narrower immediates with
 * -fno-pic (R_X86_64_32 and the like, range-checked at emit). */
#if defined(_WIN32) && defined(__aarch64__)
/* ARM64 COFF has no GOT and no MOVZ/MOVK relocations: an operand's value is
 * loaded from its import slot, which stencilgen makes a GOT slot. */
#define STENCIL_OPERAND_DECL_ __declspec(dllimport)
#ifndef STENCIL_OPERANDS_IN_GOT
#define STENCIL_OPERANDS_IN_GOT
#endif
#else
#define STENCIL_OPERAND_DECL_
#endif
extern STENCIL_OPERAND_DECL_ char _JIT_OPERAND0[];
extern STENCIL_OPERAND_DECL_ char _JIT_OPERAND1[];
extern STENCIL_OPERAND_DECL_ char _JIT_OPERAND2[];
extern STENCIL_OPERAND_DECL_ char _JIT_OPERAND3[];

/* An operand is a 64-bit immediate in the instruction that uses it (x86-64
 * movabs, AArch64 movz+3 movk): any value fits, no memory is read, and the
 * runtime can re-patch it after emit. The compiler cannot be asked for an
 * absolute 64-bit address in position-independent code, hence the asm.
 * STENCIL_OPERANDS_IN_GOT (or another target) loads each from a GOT slot
 * instead: shorter code, one load more. */
#if defined(__APPLE__) && defined(__aarch64__) && !defined(STENCIL_OPERANDS_IN_GOT)
#define STENCIL_OPERANDS_IN_GOT /* Mach-O has no MOVZ/MOVK relocations */
#endif
#if !defined(STENCIL_OPERANDS_IN_GOT) && (defined(__x86_64__) || defined(__aarch64__))
#ifdef __x86_64__
#define STENCIL_IMM64_(sym) "movabsq $" sym ", %0"
#else
#define STENCIL_IMM64_(sym)                                                              \
    "movz %0, #:abs_g3:" sym "\n\tmovk %0, #:abs_g2_nc:" sym "\n\t"                      \
    "movk %0, #:abs_g1_nc:" sym "\n\tmovk %0, #:abs_g0_nc:" sym
#endif
/* The assembler's name of C's _JIT_OPERANDn (Mach-O prefixes an underscore). */
#define STENCIL_ASM_NAME_(prefix, sym) STENCIL_ASM_NAME2_(prefix, sym)
#define STENCIL_ASM_NAME2_(prefix, sym) #prefix sym
/* Not volatile: two uses in one op may share the register. */
#define STENCIL_OPERAND(n)                                                               \
    __extension__({                                                                      \
        uint64_t stencil_v_;                                                             \
        __asm__(STENCIL_IMM64_(STENCIL_ASM_NAME_(__USER_LABEL_PREFIX__, "_JIT_OPERAND" #n)) \
                : "=r"(stencil_v_));                                                     \
        stencil_v_;                                                                      \
    })
#else
#define STENCIL_OPERAND(n) ((uint64_t)(uintptr_t)_JIT_OPERAND##n)
#endif

/* An operand known to fit in 32 bits, signed: on x86-64 a sign-extended 32-bit
 * immediate (movq $imm32: 3 bytes shorter than movabs, and cheaper to decode;
 * docs/ops.md "Operands" has the figures), an ABS32S hole the runtime
 * range-checks at emit (SR_ERANGE when the value does not fit), so a JIT
 * chooses this form only for values that fit. Elsewhere (COFF and Mach-O
 * have no signed 32-bit absolute relocation), or with
 * STENCIL_OPERANDS_IN_GOT, it is STENCIL_OPERAND(n). The value is an int64_t. */
#if !defined(STENCIL_OPERANDS_IN_GOT) && defined(__x86_64__) && defined(__ELF__)
#define STENCIL_OPERAND32(n)                                                             \
    __extension__({                                                                      \
        int64_t stencil_v_;                                                              \
        __asm__("movq $" STENCIL_ASM_NAME_(__USER_LABEL_PREFIX__, "_JIT_OPERAND" #n) ", %0" \
                : "=r"(stencil_v_));                                                     \
        stencil_v_;                                                                      \
    })
#else
#define STENCIL_OPERAND32(n) ((int64_t)STENCIL_OPERAND(n))
#endif

/* Go on with the next instruction / jump to the target: plain jumps (musttail). */
#define CONTINUE() __attribute__((musttail)) return _JIT_CONTINUE(STENCIL_ARGS)
#define JUMP() __attribute__((musttail)) return _JIT_JUMP_TARGET(STENCIL_ARGS)

/* Cold paths (docs/design.md, "Hot and cold parts"). stencilgen finds an op's
 * cold part itself where no path reaches CONTINUE() or JUMP() (a trap, a call
 * that never returns); STENCIL_COLD() makes the block it is written in cold
 * too, however it ends (a branch weight such as __builtin_expect leaves no
 * trace in the object). It emits no code: a no-op relocation against _JIT_COLD
 * that stencilgen reads as the mark. ELF only (COFF and Mach-O have no such
 * relocation there: the mark is dropped). COLD_EXIT(fn) leaves on a cold path
 * for `fn`, a function of the op's type listed under the manifest's
 * `symbols:`, e.g. a VM's deoptimization or error handler. */
#if defined(__ELF__) && (defined(__x86_64__) || defined(__aarch64__))
#define STENCIL_COLD() __asm__ volatile(".reloc ., BFD_RELOC_NONE, _JIT_COLD")
#else
#define STENCIL_COLD() ((void)0)
#endif
#define COLD_EXIT(fn)                                                                    \
    do {                                                                                 \
        STENCIL_COLD();                                                                  \
        __attribute__((musttail)) return fn(STENCIL_ARGS);                               \
    } while (0)

/* stencilgen finds ops through this annotation (with libclang), which is only
 * present while it looks: in a real compile it would keep every op alive. */
#ifdef STENCILGEN_DISCOVER
#define STENCIL_OP_MARK __attribute__((annotate("stencilgen.op")))
#else
#define STENCIL_OP_MARK
#endif

/* OP(name) or OP(name, VARIANT(axis, first, last), ...): an op, or an op
 * compiled once per combination of its axes' values (docs/ops.md,
 * "Variants"). Discovery reads the axes from annotations; a real compile
 * drops them (an empty GNU attribute is allowed), and stencilgen defines
 * STENCIL_V_<axis> to the variant's value around the op's definition and
 * renames its function to the variant's. */
#define OP(...) STENCIL_OP_(op_##__VA_ARGS__, ) /* pasted first: a name is never expanded */
#define STENCIL_OP_(fn, ...)                                                             \
    static inline STENCIL_OP_MARK __attribute__((unused, __VA_ARGS__)) STENCIL_CC          \
        STENCIL_RETURN fn(STENCIL_PARAMS)
/* VARIANT(axis, first, last); any other form is reported by stencilgen,
 * naming the op, hence the variadic form. */
#ifdef STENCILGEN_DISCOVER
#define VARIANT(...) annotate("stencilgen.variant:" #__VA_ARGS__)
#else
#define VARIANT(...)
#endif
/* The value of the variant's axis `axis`: an integer constant for #if and C,
 * defined inside the op's own definition only (stencilgen makes an undefined
 * one there an error, -Wundef, so a misspelled axis is not silently 0).
 * Discovery, which parses the file once for every variant, sees 0. */
#ifdef STENCILGEN_DISCOVER
#define STENCIL_V(axis) 0
#else
#define STENCIL_V(axis) STENCIL_V_##axis
#endif

#ifdef STENCILGEN_OP
#ifdef __APPLE__
/* Mach-O has no aliases: _JIT_ENTRY tail-calls the op, which is inlined into
 * it (always_inline even at -O0), so its code is the op's own. */
#define STENCIL_CAT_(a, b) a##b
#define STENCIL_CAT(a, b) STENCIL_CAT_(a, b)
static inline __attribute__((always_inline)) STENCIL_CC STENCIL_RETURN
    STENCIL_CAT(op_, STENCILGEN_OP)(STENCIL_PARAMS);
STENCIL_CC STENCIL_RETURN _JIT_ENTRY(STENCIL_PARAMS);
STENCIL_CC STENCIL_RETURN _JIT_ENTRY(STENCIL_PARAMS)
{
    __attribute__((musttail)) return STENCIL_CAT(op_, STENCILGEN_OP)(STENCIL_ARGS);
}
#else
#define STENCIL_STR_(x) #x
#define STENCIL_STR(x) STENCIL_STR_(x)
extern stencil_fn _JIT_ENTRY
    __attribute__((alias(STENCIL_ALIAS_PREFIX "op_" STENCIL_STR(STENCILGEN_OP))));
#endif
#endif

#endif
