/* stencil_template.h - tinyvm's op template: its op signature, then the op
 * machinery every stencilgen template shares (stencil_op.h). stencilgen
 * force-includes it into every op and into the shim. */
#ifndef TINYVM_STENCIL_TEMPLATE_H
#define TINYVM_STENCIL_TEMPLATE_H

#include "tinyvm.h"

/* The VM's state travels in registers from op to op: the frame, the operand
 * stack pointer and the top of stack; with the cached ops (ops/cached.c,
 * TINYVM_CACHED_OPS) a second cached value too, above `tos`. The shim enters
 * JIT code with TINYVM_ENTRY_ARGS: one value cached, a 0. */
#define STENCIL_RETURN vm_value
#ifdef TINYVM_CACHED_OPS
/* unused: the plain ops pass tos1 on without a look */
#define STENCIL_PARAMS                                                                     \
    vm_frame *frame, vm_value *sp, vm_value tos, vm_value tos1 __attribute__((unused))
#define STENCIL_ARGS frame, sp, tos, tos1
#define TINYVM_ENTRY_ARGS(frame, sp) frame, sp, 0, 0
#else
#define STENCIL_PARAMS vm_frame *frame, vm_value *sp, vm_value tos
#define STENCIL_ARGS frame, sp, tos
#define TINYVM_ENTRY_ARGS(frame, sp) frame, sp, 0
#endif
#include "stencil_op.h"

#ifdef TINYVM_OPERANDS32 /* every operand a 32-bit immediate: the bench's third form */
#define OPERAND0 ((vm_value)STENCIL_OPERAND32(0))
#define OPERAND1 ((vm_value)STENCIL_OPERAND32(1))
#define OPERAND2 ((vm_value)STENCIL_OPERAND32(2))
#else
#define OPERAND0 ((vm_value)STENCIL_OPERAND(0))
#define OPERAND1 ((vm_value)STENCIL_OPERAND(1))
#define OPERAND2 ((vm_value)STENCIL_OPERAND(2))
#endif

#endif
