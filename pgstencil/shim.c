/* shim.c - the one C function that enters pgstencil's JIT code. Its compiled
 * unwind table is the source of truth for every JIT frame: stencils never move
 * the frame pointer, so the rule in force at the call below describes them all. */

/* Evaluates the expression whose executor is `code` (an ExprState's evalfunc). */
Datum pgstencil_shim(ExprState *state, ExprContext *econtext, bool *isnull, stencil_fn *code);

Datum pgstencil_shim(ExprState *state, ExprContext *econtext, bool *isnull, stencil_fn *code)
{
    return code(state, econtext, isnull);
}
