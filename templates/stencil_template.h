/* stencil_template.h - the template every tinyvm op (and the shim) is compiled
 * through; stencilgen force-includes it (clang -include).
 *
 * An op is written
 *
 *     OP(add) { tos = *--sp + tos; CONTINUE(); }
 *
 * and compiled as its own translation unit with -DSTENCILGEN_OP=add, which makes
 * _JIT_ENTRY an alias of op_add: the stencil is that one function. The "holes"
 * are references to symbols that exist nowhere (_JIT_CONTINUE, _JIT_OPERAND0,
 * ...); stencilgen turns each relocation against them into a hole the runtime
 * patches. A JIT author adapting this file changes the signature and the VM
 * header; the hole and OP machinery below stays as it is.
 */
#ifndef STENCIL_TEMPLATE_H
#define STENCIL_TEMPLATE_H

#include <stdint.h>

#include "tinyvm.h"

/* The stencil signature. preserve_none leaves every register to arguments and
 * scratch, so VM state stays in registers from stencil to stencil; musttail
 * makes each continuation a plain jump. Stencils never touch the frame-pointer
 * register (stencilgen passes -mframe-pointer=reserved and verifies it). */
#define STENCIL_CC __attribute__((preserve_none))
#define STENCIL_PARAMS vm_frame *frame, vm_value *sp, vm_value tos
#define STENCIL_ARGS frame, sp, tos
typedef STENCIL_CC vm_value stencil_fn(STENCIL_PARAMS);

/* Hidden: jumps to these become direct rel32 branches, not GOT loads. */
#define STENCIL_HIDDEN __attribute__((visibility("hidden")))
extern STENCIL_HIDDEN stencil_fn _JIT_CONTINUE;    /* the next instruction */
extern STENCIL_HIDDEN stencil_fn _JIT_JUMP_TARGET; /* this instruction's branch target */
/* Default visibility: an operand is loaded from a GOT slot the runtime fills,
 * so it can be any 64-bit value. */
extern char _JIT_OPERAND0[];
extern char _JIT_OPERAND1[];

#define OPERAND0 ((vm_value)(intptr_t)_JIT_OPERAND0)
#define OPERAND1 ((vm_value)(intptr_t)_JIT_OPERAND1)

/* Go on with the next instruction / jump to the target. */
#define CONTINUE() __attribute__((musttail)) return _JIT_CONTINUE(STENCIL_ARGS)
#define JUMP() __attribute__((musttail)) return _JIT_JUMP_TARGET(STENCIL_ARGS)

/* stencilgen finds ops through this annotation (with libclang), which is only
 * present while it looks: in a real compile it would keep every op alive. */
#ifdef STENCILGEN_DISCOVER
#define STENCIL_OP_MARK __attribute__((annotate("stencilgen.op")))
#else
#define STENCIL_OP_MARK
#endif

#define OP(name)                                                                         \
    static inline STENCIL_OP_MARK __attribute__((unused)) STENCIL_CC vm_value op_##name( \
        STENCIL_PARAMS)

#ifdef STENCILGEN_OP
#define STENCIL_STR_(x) #x
#define STENCIL_STR(x) STENCIL_STR_(x)
extern stencil_fn _JIT_ENTRY __attribute__((alias("op_" STENCIL_STR(STENCILGEN_OP))));
#endif

#endif
