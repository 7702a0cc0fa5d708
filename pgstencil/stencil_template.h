/* stencil_template.h - pgstencil's op template: PostgreSQL's expression
 * evaluation signature, then the op machinery every stencilgen template shares
 * (stencil_op.h). stencilgen force-includes it into every op and into the shim.
 *
 * One instruction per step of an ExprState (pgstencil/jit.c): its operand 0 is
 * the step (ExprEvalStep *), its jump target the step the interpreter would
 * jump to. Ops do what execExprInterp.c does for their ExprEvalOp, reading the
 * step's fields as the interpreter does, so an expression's result is the
 * interpreter's by construction. */
#ifndef PGSTENCIL_STENCIL_TEMPLATE_H
#define PGSTENCIL_STENCIL_TEMPLATE_H

#include "postgres.h"

#include "executor/execExpr.h"
#include "executor/nodeAgg.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "nodes/execnodes.h"
#include "utils/expandeddatum.h"
#include "utils/memutils.h"

/* The arguments of ExprState's evalfunc travel from op to op in registers. */
#define STENCIL_RETURN Datum
#define STENCIL_PARAMS ExprState *state, ExprContext *econtext, bool *isnull
#define STENCIL_ARGS state, econtext, isnull
#include "stencil_op.h"

/* This instruction's step. */
#define STEP ((ExprEvalStep *)(uintptr_t)STENCIL_OPERAND(0))

/* The slot a variant of axis `slot` reads: 0 inner, 1 outer, 2 scan, in
 * ExprEvalOp's order (EEOP_INNER_VAR, EEOP_OUTER_VAR, EEOP_SCAN_VAR). */
#define SLOT_OF(which)                                                                     \
    ((which) == 0 ? econtext->ecxt_innertuple                                              \
                  : (which) == 1 ? econtext->ecxt_outertuple : econtext->ecxt_scantuple)

/* Calls the step's function with its arguments as they stand (the strictness
 * test, if any, done by the caller), setting the step's result. */
static inline __attribute__((always_inline)) void pgs_call_function(ExprEvalStep *op)
{
    FunctionCallInfo fcinfo = op->d.func.fcinfo_data;
    fcinfo->isnull = false;
    *op->resvalue = op->d.func.fn_addr(fcinfo);
    *op->resnull = fcinfo->isnull;
}

#endif
