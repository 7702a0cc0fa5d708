/* provider.c - pgstencil as PostgreSQL's JIT provider (jit/jit.h): the three
 * callbacks, the query's JIT context that owns its executors, the timings
 * EXPLAIN (ANALYZE) shows, and pgstencil_stats() for tests and monitoring. */
#include "pgstencil.h"

#include "fmgr.h"
#include "lib/stringinfo.h"
#include "nodes/execnodes.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/resowner_private.h"

PG_MODULE_MAGIC;

/* A query's JIT context (EState's es_jit): the executors of its expressions,
 * freed together when PostgreSQL releases the context (the query's end, or
 * its resource owner's release after an ERROR). */
typedef struct pgs_context {
    JitContext base;
    uint64 id;
    sr_executor **executors;
    size_t n, cap;
} pgs_context;

static uint64 contexts_created;
static size_t contexts_live;

static pgs_context *context_of(EState *estate)
{
    if (estate->es_jit)
        return (pgs_context *)estate->es_jit;
    /* pgstencil neither inlines, optimizes nor compiles tuple deforming:
     * EXPLAIN prints these flags as what the JIT did, so they say false. */
    estate->es_jit_flags &= ~(PGJIT_OPT3 | PGJIT_INLINE | PGJIT_DEFORM);
    ResourceOwnerEnlargeJIT(CurrentResourceOwner);
    pgs_context *ctx = MemoryContextAllocZero(TopMemoryContext, sizeof *ctx);
    ctx->base.flags = estate->es_jit_flags;
    ctx->base.resowner = CurrentResourceOwner;
    ctx->id = contexts_created++;
    ResourceOwnerRememberJIT(CurrentResourceOwner, PointerGetDatum(ctx));
    contexts_live++;
    estate->es_jit = &ctx->base;
    return ctx;
}

static bool pgs_compile_expr(ExprState *state)
{
    if (!pgs_runtime())
        return false;
    pgs_context *ctx = context_of(state->parent->state);
    if (ctx->n == ctx->cap) { /* room first: nothing can fail once the code exists */
        size_t cap = ctx->cap ? 2 * ctx->cap : 8;
        ctx->executors = ctx->executors
                             ? repalloc(ctx->executors, cap * sizeof *ctx->executors)
                             : MemoryContextAlloc(TopMemoryContext, cap * sizeof *ctx->executors);
        ctx->cap = cap;
    }
    char name[64];
    snprintf(name, sizeof name, "evalexpr_%llu_%zu", (unsigned long long)ctx->id, ctx->n);
    const char *error;
    sr_executor *ex = pgs_compile_steps(state, name, &ctx->base.instr, &error);
    if (!ex) {
        ereport(DEBUG1, (errmsg_internal("pgstencil: %s: %s; interpreted", name, error)));
        return false;
    }
    ctx->executors[ctx->n++] = ex;
    pgs_install(state, ex);
    ctx->base.instr.created_functions++;
    return true;
}

static void pgs_release_context(JitContext *context)
{
    pgs_context *ctx = (pgs_context *)context;
    if (ctx->executors) {
        sr_executor_free_batch(ctx->executors, ctx->n);
        pfree(ctx->executors);
        ctx->executors = NULL;
    }
    contexts_live--;
}

/* Called after an ERROR, before the aborted query's resource owner releases
 * its JIT context (pgs_release_context frees the executors). Compilation
 * holds nothing between calls: an ERROR inside one (out of memory in
 * pgs_compile_steps) leaves only palloc'd memory, which its memory context
 * frees. So there is nothing to undo here. */
static void pgs_reset_after_error(void)
{
}

void _PG_jit_provider_init(JitProviderCallbacks *cb)
{
    cb->reset_after_error = pgs_reset_after_error;
    cb->release_context = pgs_release_context;
    cb->compile_expr = pgs_compile_expr;
}

/* pgstencil_stats() returns json: the backend's JIT contexts and its
 * runtime's counters (executors, arenas, registrations), zeros before the
 * first compile. CREATE FUNCTION pgstencil_stats() RETURNS json
 *   AS 'pgstencil' LANGUAGE C; */
PG_FUNCTION_INFO_V1(pgstencil_stats);
Datum pgstencil_stats(PG_FUNCTION_ARGS)
{
    (void)fcinfo;
    sr_stats s = sr_runtime_stats(pgs_runtime_if_created());
    StringInfoData out;
    initStringInfo(&out);
    appendStringInfo(&out,
                     "{\"contexts\": %zu, \"executors\": %zu, \"arenas\": %zu, "
                     "\"frames_registered\": %zu, \"gdb_entries\": %zu}",
                     contexts_live, s.executors, s.arenas, s.frames_registered, s.gdb_entries);
    PG_RETURN_TEXT_P(cstring_to_text(out.data));
}
