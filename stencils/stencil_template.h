/* stencil_template.h - tinyvm's op template: its op signature, then the op
 * machinery every stencilgen template shares (stencil_op.h). stencilgen
 * force-includes it into every op and into the shim. */
#ifndef TINYVM_STENCIL_TEMPLATE_H
#define TINYVM_STENCIL_TEMPLATE_H

#include "tinyvm.h"

/* The VM's state travels in registers from op to op: the frame, the operand
 * stack pointer and the top of stack. */
#define STENCIL_RETURN vm_value
#define STENCIL_PARAMS vm_frame *frame, vm_value *sp, vm_value tos
#define STENCIL_ARGS frame, sp, tos
#include "stencil_op.h"

#define OPERAND0 ((vm_value)STENCIL_OPERAND(0))
#define OPERAND1 ((vm_value)STENCIL_OPERAND(1))
#define OPERAND2 ((vm_value)STENCIL_OPERAND(2))

#endif
