/* rvm's op template: force-included into every op and into the shim. */
#include "rvm.h"
#define STENCIL_RETURN int64_t                                   /* the accumulator, at ret */
#define STENCIL_PARAMS struct rvm *vm, int64_t *regs, int64_t acc /* every op's parameters */
#define STENCIL_ARGS vm, regs, acc                               /* the same, as arguments */
#include "stencil_op.h"
/* Operand 0 is an immediate or a register number; operand 1 an immediate. */
#define IMM ((int64_t)STENCIL_OPERAND(0))
#define REG (regs[STENCIL_OPERAND(0)])
#define IMM1 ((int64_t)STENCIL_OPERAND(1))
