/* pgstencil.h - pgstencil internals shared by its JIT (jit.c) and its
 * PostgreSQL provider (provider.c). */
#ifndef PGSTENCIL_H
#define PGSTENCIL_H

#include "postgres.h"

#include "executor/execExpr.h"
#include "jit/jit.h"

#include "jit_stencils.h"
#include "stencilrt.h"

/* The shim's C type (shim.c); the executor is passed as a plain code pointer. */
typedef Datum shim_fn(ExprState *state, ExprContext *econtext, bool *isnull, void *code);

/* jit.c */

/* The backend's runtime, created on first use with PostgreSQL's JIT switches
 * (jit_debugging_support: GDB; jit_profiling_support: perf's map) and
 * destroyed at backend exit. NULL after a WARNING when it cannot be created:
 * expressions are then interpreted. */
sr_runtime *pgs_runtime(void);
sr_runtime *pgs_runtime_if_created(void); /* NULL before the first compile */

/* The executor for `state`'s steps, named `name`; NULL with the reason in
 * *error. Reads the steps only: the caller installs it. The time spent
 * choosing stencils goes to instr's generation counter, copying and patching
 * them to its emission counter. */
sr_executor *pgs_compile_steps(ExprState *state, const char *name, JitInstrumentation *instr,
                               const char **error);
/* Makes `ex` (compiled from `state`'s steps) state's evalfunc. */
void pgs_install(ExprState *state, sr_executor *ex);

#endif
