/* jobs.c - see jobs.h. */
#define _GNU_SOURCE
#include "jobs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache.h"
#include "diag.h"
#include "flags.h"
#include "llvm_bridge.h"
#include "opunit.h"
#include "split.h"
#include "util.h"
#include "verify.h"

static lb_disasm *open_disasm(const sg_target *t)
{
    char err[256];
    lb_disasm *d = lb_disasm_create(t->triple, t->fp_reg, t->fp_writers, err, sizeof err);
    if (!d)
        diag_error("%s", err);
    return d;
}

/* The run's own directory and each target's directories, made when the
 * first compile needs them (a run that compiles nothing writes no file). */
static bool make_run_dirs(sg_run *run)
{
    if (!rundir_open(&run->rundir)) { /* made once, maybe by discovery already */
        diag_error("cannot create the run directory '%s': %s", run->rundir.path,
                   strerror(errno));
        return false;
    }
    for (size_t t = 0; t < run->nresults; t++) {
        const sg_target *target = run->results[t].target;
        char *own = path_join(run->rundir.path, target->triple);
        char *kept = path_join(run->workdir, target->triple);
        bool ok = mkdir_p(own) && mkdir_p(kept);
        if (!ok)
            diag_error("cannot create '%s' or '%s': %s", own, kept, strerror(errno));
        free(own);
        free(kept);
        if (!ok)
            return false;
    }
    return true;
}

/* Which ops compile in this run: those that missed the cache on some target
 * and may stand in a batch (per op: true). */
static bool *ops_to_compile(const sg_run *run, const job_set *js, size_t *count)
{
    bool *must = xcalloc(run->ops.count ? run->ops.count : 1, sizeof *must);
    *count = 0;
    for (size_t i = 0; i < js->count; i++) {
        const job_ref *ref = &js->refs[i]; /* batched: an op, never the shim */
        if (!ref->batched || js->jobs[i].skip || ref->alone[0])
            continue;
        size_t k = (size_t)(ref->op - run->ops.items);
        *count += !must[k];
        must[k] = true;
    }
    return must;
}

/* Ops per batch: --batch-ops, or else enough batches for every -j job to
 * have two, but at least BATCH_MIN ops each: a clang process costs about as
 * much as compiling 15 small ops (docs/build.md, "Batched units"). */
#define BATCH_MIN 16
static size_t batch_size(const sg_run *run, size_t count)
{
    if (run->opt.batch_ops)
        return run->opt.batch_ops;
    size_t parts = 2 * (size_t)(run->opt.jobs > 0 ? run->opt.jobs : 1);
    size_t size = (count + parts - 1) / parts;
    return size < BATCH_MIN ? BATCH_MIN : size;
}

static op_batch *new_batch(sg_run *run, job_set *js, size_t *cap, const sg_op *const *ops,
                           size_t n)
{
    grow_array((void **)&js->batches, cap, js->nbatches + 1, sizeof *js->batches);
    op_batch *b = &js->batches[js->nbatches++];
    *b = (op_batch){.n = n};
    b->members = xcalloc(n, sizeof *b->members);
    memcpy(b->members, ops, n * sizeof *ops);
    b->name = xasprintf("batch_%s", ops[0]->name);
    b->tu_path = xasprintf("%s/tu/%s/unit.c", run->rundir.path, b->name);
    return b;
}

/* The ops that must compile, cut into batches: each file's, in source order,
 * in as few batches of about equal size as `batch_size` allows. The cache
 * keys each op by its own unit, so what a batch held never matters to a
 * later run: a one-op edit compiles one op. */
static void plan_batches(sg_run *run, job_set *js)
{
    size_t count, cap = 0;
    bool *must = ops_to_compile(run, js, &count);
    size_t size = batch_size(run, count);
    long *batch_of = xcalloc(run->ops.count ? run->ops.count : 1, sizeof *batch_of);
    const sg_op **file = xcalloc(run->ops.count ? run->ops.count : 1, sizeof *file);
    for (size_t i = 0; i < run->ops.count;) { /* a file's ops are consecutive */
        size_t end = i, m = 0;
        for (; end < run->ops.count && !strcmp(run->ops.items[end].source,
                                               run->ops.items[i].source); end++) {
            batch_of[end] = -1;
            if (must[end])
                file[m++] = &run->ops.items[end];
        }
        size_t nb = (m + size - 1) / size;
        for (size_t k = 0; k < nb; k++) {
            size_t from = k * m / nb, to = (k + 1) * m / nb;
            new_batch(run, js, &cap, file + from, to - from);
            for (size_t x = from; x < to; x++)
                batch_of[file[x] - run->ops.items] = (long)js->nbatches - 1;
        }
        i = end;
    }
    for (size_t i = 0; i < js->count; i++)
        if (js->refs[i].op)
            js->refs[i].batch = batch_of[js->refs[i].op - run->ops.items];
    free(file);
    free(batch_of);
    free(must);
}

/* A job's command: the shim's, an op's own unit's, or its batch's. */
static char **job_command(sg_run *run, sg_target_result *r, const sg_op *op, bool batch,
                          const char *output, const char *unit)
{
    sg_argv a = {0};
    if (run->opt.launcher)
        argv_add(&a, run->opt.launcher);
    argv_add(&a, run->clang);
    sg_flag_inputs in = run_flag_inputs(run, r);
    if (op && batch)
        flags_batch(&a, &in, op->source);
    else if (op)
        flags_op(&a, &in, op);
    else
        flags_shim(&a, &in);
    argv_add(&a, "-MD");
    argv_add(&a, "-MF");
    argv_addf(&a, "%s.d", output);
    argv_add(&a, "-c");
    argv_add(&a, op ? unit : run->manifest.shim_source);
    argv_add(&a, "-o");
    argv_add(&a, output);
    return argv_finish(&a);
}

static void add_job(job_set *js, sg_run *run, sg_target_result *r, const sg_op *op)
{
    const char *name = op ? op->name : "shim";
    bool batched = op && run->opt.units == SG_UNITS_BATCHED && !r->target->ops_compile_alone;
    char *dir = path_join(run->rundir.path, r->target->triple);
    sg_job job = {0};
    /* A batched op's job keeps its own object name: the cache knows each op
     * by it (its slot), whichever compile makes the op. */
    job.output = xasprintf("%s/%s%s.o", dir, op ? "op_" : "", name);
    job.log = xasprintf("%s.log", job.output);
    job.label = op ? xasprintf("op %s (%s)", name, r->target->triple)
                   : xasprintf("shim %s (%s)", run->manifest.shim_function, r->target->triple);
    /* An op compiles from its own translation unit or its batch's (written
     * only if needed), alone in its directory: a quoted include never finds a
     * sibling unit. A batch is known once the cache has been asked: until
     * then the paths are the op's own (the cache does not hash them). */
    char *tu_path = op ? xasprintf("%s/tu/%s/unit.c", run->rundir.path, op->name) : NULL;
    job.argv = job_command(run, r, op, batched, job.output, tu_path);
    size_t cap = js->cap;
    grow_array((void **)&js->jobs, &js->cap, js->count + 1, sizeof *js->jobs);
    grow_array((void **)&js->refs, &cap, js->count + 1, sizeof *js->refs);
    js->refs[js->count] = (job_ref){.result = r,
                                    .stencil = op ? &r->ops[op - run->ops.items] : &r->shim,
                                    .op = op,
                                    .tu_path = tu_path,
                                    .batch = -1,
                                    .batched = batched};
    js->jobs[js->count++] = job;
    free(dir);
}

void jobs_free(job_set *js)
{
    for (size_t i = 0; i < js->count; i++) {
        inc_unit_free(&js->refs[i].unit);
        free(js->refs[i].deps);
        free(js->refs[i].tu_key);
        free(js->refs[i].tu_path);
        free(js->refs[i].op_label);
        argv_free(js->jobs[i].argv);
        free(js->jobs[i].output);
        free(js->jobs[i].probes);
        free(js->jobs[i].log);
        free(js->jobs[i].label);
    }
    free(js->jobs);
    free(js->refs);
    for (size_t i = 0; i < js->nbatches; i++) {
        free(js->batches[i].members);
        free(js->batches[i].name);
        free(js->batches[i].tu_path);
    }
    free(js->batches);
}

typedef struct done_ctx {
    sg_run *run;
    job_set *js;
    int extract_rc;
    size_t compiles; /* compiler runs that produced an object */
} done_ctx;

static sg_verify_in verify_inputs(const sg_run *run, job_ref *ref, const sg_job *job)
{
    char *entry = ref->batched && !ref->solo ? xasprintf(SPLIT_ENTRY_PREFIX "%s", ref->op->name)
                                             : NULL;
    return (sg_verify_in){.manifest = &run->manifest,
                          .target = ref->result->target,
                          .mt = ref->result->mt,
                          .disasm = ref->result->disasm,
                          .op = ref->op,
                          .label = ref->op_label ? ref->op_label : job->label,
                          .batch_entry = entry,
                          .alone = ref->alone,
                          .alone_size = sizeof ref->alone};
}

static void verify_inputs_free(sg_verify_in *in)
{
    free((char *)in->batch_entry);
}

/* Opened for the first object read: a run that reads none never loads LLVM
 * (llvm_plugin.h). */
static bool have_disasm(done_ctx *ctx, job_ref *ref)
{
    sg_target_result *r = ref->result;
    if (r->disasm || (r->disasm = open_disasm(r->target)))
        return true;
    ref->extract_failed = true;
    ctx->extract_rc = exit_worst(ctx->extract_rc, SG_EXIT_TOOLCHAIN);
    return false;
}

/* Whether the object just read was a batch's that cannot stand for the op
 * (split.h): no failure, the op compiles from its own unit next. Once it has
 * (solo), what its own object fails is its failure. */
static bool compiles_alone_next(const job_ref *ref)
{
    return ref->alone[0] && !ref->solo;
}

static bool verdict(done_ctx *ctx, job_ref *ref, bool ok)
{
    if (ok || compiles_alone_next(ref))
        return ok;
    ref->extract_failed = true;
    ctx->extract_rc = exit_worst(ctx->extract_rc, SG_EXIT_CHECK);
    return false;
}

/* Build the stencil from an object's bytes and run the checks on it. */
static bool process_object(done_ctx *ctx, sg_job *job, const uint8_t *bytes, size_t size)
{
    job_ref *ref = job->user;
    if (!have_disasm(ctx, ref))
        return false;
    sg_verify_in in = verify_inputs(ctx->run, ref, job);
    bool ok = verify_object(bytes, size, &in, ref->stencil, &ref->result->unwind);
    verify_inputs_free(&in);
    return verdict(ctx, ref, ok);
}

/* The same for one op of a batch's object, read once for all its ops. */
static bool process_parsed(done_ctx *ctx, sg_job *job, const objfile *obj)
{
    job_ref *ref = job->user;
    sg_verify_in in = verify_inputs(ctx->run, ref, job);
    bool ok = verify_objfile(obj, &in, ref->stencil, &ref->result->unwind);
    verify_inputs_free(&in);
    return verdict(ctx, ref, ok);
}

/* Store a checked object's results (fresh: the compile's output, NULL for
 * an object taken from the cache); the shim's with its unwind facts. */
static void store_checked(done_ctx *ctx, job_ref *ref, const inc_output *fresh, bool ok)
{
    strbuf unwind = {0};
    if (ok && !ref->op)
        unwind_cache_encode(&unwind, &ref->result->unwind);
    inc_store(&ctx->run->inc, &ref->unit, fresh, ok ? ref->stencil : NULL, ref->deps,
              ref->op ? NULL : &unwind);
    sb_free(&unwind);
}

/* A compiler that reports success must have written both files; anything
 * else is a toolchain failure, never a reason to read an older file. */
static bool read_compiler_output(const sg_job *job, const char *path, const char *what,
                                 uint8_t **data, size_t *size)
{
    if (read_file(path, data, size))
        return true;
    if (errno == ENOENT)
        diag_error("%s: the compiler exited with status 0 but wrote no %s ('%s')", job->label,
                   what, path);
    else
        diag_error("%s: cannot read the %s '%s': %s", job->label, what, path, strerror(errno));
    return false;
}

/* The last object built for each op stays in WORKDIR/<triple>/, and its unit
 * in WORKDIR/tu/<op>/unit.c, for people, tests and benchmarks to inspect; the
 * generator itself never reads them back. */
static void keep_for_inspection(const sg_run *run, const job_set *js, const job_ref *ref,
                                const sg_job *job)
{
    const char *base = strrchr(job->output, '/');
    char *dest = xasprintf("%s/%s%s", run->workdir, ref->result->target->triple, base);
    rename(job->output, dest);
    free(dest);
    if (!ref->op)
        return;
    /* Linked, not moved: every target's job compiles the same unit. */
    const char *name = ref->leader ? js->batches[ref->batch].name : ref->op->name;
    char *unit = xasprintf("%s/tu/%s/unit.c", run->workdir, name);
    char *fresh = xasprintf("%s.%ld", unit, (long)getpid());
    char *dir = path_dirname(unit);
    if (mkdir_p(dir) && link(ref->tu_path, fresh) == 0) {
        rename(fresh, unit);
        unlink(fresh); /* left when unit already was this file (rename does nothing then) */
    }
    free(dir);
    free(fresh);
    free(unit);
}

/* One op's share of a finished compile: its stencil, checked, and stored
 * in the cache (an op its batch cannot stand for is neither: it compiles
 * alone next). */
static bool take_object(done_ctx *ctx, sg_job *job, const sg_job *compile, const objfile *batch,
                        const inc_output *fresh)
{
    const uint8_t *dtext = fresh->deps, *bytes = fresh->object;
    size_t dsize = fresh->deps_size, size = fresh->size;
    job_ref *ref = job->user;
    ref->deps = xstrndup((const char *)dtext, dsize);
    bool ok = batch ? process_parsed(ctx, job, batch) : process_object(ctx, job, bytes, size);
    if (!ok && compiles_alone_next(ref)) {
        free(ref->deps);
        ref->deps = NULL;
        return true;
    }
    if (ref->op)
        ref->result->compiled++;
    /* A rider's own job never ran; its leader stores the object. */
    inc_output out = *fresh;
    out.key_only = job != compile;
    store_checked(ctx, ref, &out, ok);
    return ok;
}

/* A batch's object, read once, for its leader and each of its riders. A
 * rider's failed check is its own (status -1), not its leader's; an object
 * that cannot be read fails them all. */
static bool take_batch(done_ctx *ctx, sg_job *job, const inc_output *fresh)
{
    job_set *js = ctx->js;
    job_ref *ref = job->user;
    objfile obj;
    sg_verify_in in = verify_inputs(ctx->run, ref, job);
    bool read = have_disasm(ctx, ref) && verify_read(fresh->object, fresh->size, &in, &obj);
    verify_inputs_free(&in);
    bool ok = read ? take_object(ctx, job, job, &obj, fresh)
                   : verdict(ctx, ref, false);
    /* Members need not be neighbours: ops between them may have been cached. */
    for (size_t i = (size_t)(ref - js->refs) + 1; i < js->count && js->refs[i].result == ref->result;
         i++) {
        if (!js->refs[i].rides || js->refs[i].batch != ref->batch)
            continue;
        if (read ? !take_object(ctx, &js->jobs[i], job, &obj, fresh)
                 : !verdict(ctx, &js->refs[i], false))
            js->jobs[i].status = -1;
    }
    if (read)
        objfile_free(&obj);
    return ok;
}

/* Runs while other compiles are still going: cache the object, build the
 * stencil; a batch's for each of its ops that had to compile. */
static bool on_compiled(sg_job *job, void *vctx)
{
    done_ctx *ctx = vctx;
    job_ref *ref = job->user;
    if (!ref)
        return true; /* a discovery's preprocess (compile_with_discovery) */
    uint8_t *bytes, *dtext;
    size_t size, dsize;
    char *dfile = xasprintf("%s.d", job->output);
    bool have = read_compiler_output(job, job->output, "object", &bytes, &size);
    if (have && !read_compiler_output(job, dfile, "dependency file", &dtext, &dsize)) {
        free(bytes);
        have = false;
    }
    free(dfile);
    if (!have)
        return false; /* status -1 without extract_failed: exit 3 */
    ctx->compiles++;
    /* The paths the compile looked for and did not find: none listed (clang's
     * executable ran it) leaves the result uncached (incremental.h). */
    uint8_t *absent = NULL;
    size_t asize = 0;
    if (!read_file(job->probes, &absent, &asize))
        absent = NULL;
    inc_output fresh = {&job->started, dtext, dsize, absent, asize, bytes, size, false};
    bool ok = ref->leader ? take_batch(ctx, job, &fresh) : take_object(ctx, job, job, NULL, &fresh);
    free(absent);
    free(dtext);
    free(bytes);
    keep_for_inspection(ctx->run, ctx->js, ref, job);
    return ok;
}

/* Every op's cache key: its own unit's text (the file without the other
 * ops), and its position (the file name as __FILE__ gives it, and the lines)
 * for code that compiles positions in. A batched op is keyed the same way,
 * marked as batched (its entry keeps its batch's object): an edit to one op
 * of a batch misses that op alone, and only it compiles. */
static void key_translation_units(sg_run *run, job_set *js, op_sources *texts)
{
    /* Discovery lists each file's ops together, and an op's unit is cut from
     * its file's ops alone (op_unit_for skips the others): given only those,
     * keying 300 ops compares 300 file names per op instead of 90,000 in all.
     * The whole list if some file's ops were not together after all. */
    const sg_oplist *all = &run->ops;
    size_t *first = xcalloc(all->count ? all->count : 1, sizeof *first);
    size_t *end = xcalloc(all->count ? all->count : 1, sizeof *end);
    bool together = true;
    for (size_t i = 0; i < all->count;) {
        size_t e = i + 1;
        while (e < all->count && !strcmp(all->items[e].source, all->items[i].source))
            e++;
        for (size_t k = 0; k < i && together; k = end[k]) /* the files before */
            together = strcmp(all->items[k].source, all->items[i].source) != 0;
        for (size_t k = i; k < e; k++)
            first[k] = i, end[k] = e;
        i = e;
    }
    for (size_t i = 0; i < js->count; i++) {
        job_ref *ref = &js->refs[i];
        if (!ref->op)
            continue;
        size_t k = (size_t)(ref->op - all->items);
        sg_oplist file = {all->items + first[k], end[k] - first[k], end[k] - first[k]};
        op_unit u = op_unit_for(texts, together ? &file : all, ref->op, false);
        char *rel = manifest_relpath(&run->manifest, ref->op->source);
        ref->position = hash64(rel, strlen(rel) + 1, u.position);
        free(rel);
        if (ref->batched) {
            ref->tu_key = xasprintf("batched\n%s", u.key.data);
            sb_free(&u.key);
        } else {
            ref->tu_key = u.key.data;
        }
        sb_free(&u.unit);
    }
    free(first);
    free(end);
}

/* Write the unit of every op that must compile. A unit that cannot be written
 * fails its op (exit 3): compiling anything else in its place would be wrong. */
static size_t write_translation_units(sg_run *run, job_set *js, op_sources *texts)
{
    size_t failed = 0;
    for (size_t i = 0; i < js->count; i++) {
        job_ref *ref = &js->refs[i];
        sg_job *job = &js->jobs[i];
        if (!ref->op || job->skip)
            continue;
        op_batch *b = ref->leader ? &js->batches[ref->batch] : NULL;
        if (b && b->written)
            continue; /* every target's leader compiles the same unit */
        op_unit u = b ? op_batch_unit_for(texts, &run->ops, b->members, b->n, true)
                      : op_unit_for(texts, &run->ops, ref->op, true);
        if (b)
            b->written = true;
        char *dir = path_dirname(ref->tu_path);
        if (!mkdir_p(dir) || !write_file(ref->tu_path, u.unit.data, u.unit.len)) {
            diag_error("%s: cannot write its translation unit '%s': %s", job->label,
                       ref->tu_path, strerror(errno));
            job->skip = true; /* not compiled, and not a cache hit */
            job->status = -1;
            failed++;
        }
        free(dir);
        sb_free(&u.key);
        sb_free(&u.unit);
    }
    return failed;
}

/* A cache entry stands in for the compile: the job is skipped. */
static bool try_cached(done_ctx *ctx, sg_job *job)
{
    job_ref *ref = job->user;
    sg_run *run = ctx->run;
    uint8_t *obj;
    size_t size;
    inc_unit_init(&run->inc, &ref->unit, ref->result->target->triple, job, ref->tu_key,
                  ref->position, ref->tu_path);
    uint8_t *unwind = NULL;
    size_t unwind_size = 0;
    switch (inc_lookup(&run->inc, &ref->unit, job->label, ref->stencil, &obj, &size,
                       &ref->deps, &unwind, &unwind_size)) {
    case INC_MISS: return false;
    case INC_STENCIL: {
        sg_verify_in in = verify_inputs(run, ref, job);
        verify_name(&in, ref->stencil);
        int shim = ref->op ? 1 : verify_cached_shim(unwind, unwind_size, &in, ref->stencil,
                                                    &ref->result->unwind);
        verify_inputs_free(&in);
        free(unwind);
        if (shim == 0) { /* unusable after all: compile it */
            stencil_free(ref->stencil);
            free(ref->deps);
            ref->deps = NULL;
            return false;
        }
        if (shim < 0) {
            job->status = -1;
            ref->extract_failed = true;
            ctx->extract_rc = exit_worst(ctx->extract_rc, SG_EXIT_CHECK);
        }
        ref->result->stencils_cached++;
        break;
    }
    case INC_OBJECT: {
        bool ok = process_object(ctx, job, obj, size);
        free(obj);
        if (!ok && compiles_alone_next(ref)) { /* a batch's object that cannot stand for it */
            free(ref->deps);
            ref->deps = NULL;
            return false;
        }
        if (!ok)
            job->status = -1;
        else
            store_checked(ctx, ref, NULL, true);
        break;
    }
    }
    job->skip = true;
    if (ref->op)
        ref->result->cached++;
    return true;
}

/* An op its batch cannot stand for compiles from its own unit (its cache
 * entry keeps that unit's object). */
static void compile_alone(sg_run *run, job_set *js, size_t i)
{
    job_ref *ref = &js->refs[i];
    sg_job *job = &js->jobs[i];
    if (run->opt.verbose)
        diag_note_at(ref->op->source, ref->op->line, ref->op->col,
                     "op %s is compiled from its own unit: %s", ref->op->name, ref->alone);
    if (ref->op_label) { /* it led its batch: its job is its own again */
        free(job->label);
        job->label = ref->op_label;
        ref->op_label = NULL;
    }
    ref->leader = ref->rides = false;
    ref->solo = true;
    free(job->output);
    job->output = xasprintf("%s/%s/op_%s.o", run->rundir.path, ref->result->target->triple,
                            ref->op->name);
    free(ref->tu_path);
    ref->tu_path = xasprintf("%s/tu/%s/unit.c", run->rundir.path, ref->op->name);
    ref->unit.tu_path = ref->tu_path; /* the unit is not a dependency to record */
    argv_free(job->argv);
    job->argv = job_command(run, ref->result, ref->op, false, job->output, ref->tu_path);
    job->skip = false;
    job->status = 0;
}

/* A batched op compiles from its batch's unit: the cache must not record
 * that unit as one of its inputs (it is hashed as text). */
static void compile_in_batch(job_ref *ref, const op_batch *b)
{
    free(ref->tu_path);
    ref->tu_path = xstrdup(b->tu_path);
    ref->unit.tu_path = ref->tu_path;
}

/* Per target and batch, the first of its ops that must compile leads: its
 * job compiles the batch's unit, for it and for the other members (riders,
 * whose own jobs do not run). */
static void assign_batch_compiles(sg_run *run, job_set *js)
{
    plan_batches(run, js);
    long *leader = xcalloc(js->nbatches ? js->nbatches : 1, sizeof *leader);
    const sg_target_result *target = NULL;
    for (size_t i = 0; i < js->count; i++) {
        job_ref *ref = &js->refs[i];
        sg_job *job = &js->jobs[i];
        if (ref->result != target) {
            target = ref->result;
            for (size_t b = 0; b < js->nbatches; b++)
                leader[b] = -1;
        }
        if (job->skip || !ref->batched)
            continue;
        if (ref->alone[0]) {
            compile_alone(run, js, i);
            continue;
        }
        compile_in_batch(ref, &js->batches[ref->batch]);
        if (leader[ref->batch] >= 0) {
            ref->rides = job->skip = true;
            continue;
        }
        leader[ref->batch] = (long)i;
        const op_batch *b = &js->batches[ref->batch];
        ref->leader = true;
        ref->op_label = job->label;
        char *rel = manifest_relpath(&run->manifest, b->members[0]->source);
        const sg_op *first = b->members[0], *last = b->members[b->n - 1];
        job->label = first == last ? xasprintf("op %s of %s (%s)", first->name, rel,
                                               target->target->triple)
                                   : xasprintf("ops %s..%s of %s (%s)", first->name, last->name,
                                               rel, target->target->triple);
        free(rel);
        free(job->output);
        job->output = xasprintf("%s/%s/%s.o", run->rundir.path, target->target->triple, b->name);
        argv_free(job->argv);
        job->argv = job_command(run, ref->result, ref->op, true, job->output, ref->tu_path);
    }
    free(leader);
}

/* Each compile lists the paths it looked for and did not find in
 * <object>.probes (lb_clang_main, incremental.h); named once the objects
 * are, and removed first, so that a list is always this compile's. */
static void name_probe_files(sg_job *jobs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (jobs[i].skip)
            continue;
        free(jobs[i].probes);
        jobs[i].probes = xasprintf("%s.probes", jobs[i].output);
        unlink(jobs[i].probes);
    }
}

/* A compile's command as a preprocess for the clang module: the same
 * driver, flags and input, no launcher, no object and no depfile. */
static char **preprocess_command(char *const *argv, bool launcher, const char *clang)
{
    sg_argv a = {0};
    argv_add(&a, clang);
    for (char *const *p = argv + (launcher ? 2 : 1); *p; p++) {
        if (!strcmp(*p, "-MF") || !strcmp(*p, "-o")) {
            if (!p[1])
                break;
            if (!strcmp(*p, "-o")) {
                argv_add(&a, "-o");
                argv_add(&a, "/dev/null");
            }
            p++;
        } else if (strcmp(*p, "-MD") != 0) {
            argv_add(&a, strcmp(*p, "-c") ? *p : "-E");
        }
    }
    return argv_finish(&a);
}

/* Compiles that clang's executable runs (under a launcher, --exec-clang,
 * another clang) cannot list the paths they looked for: a preprocess of each
 * command, by the clang module in forked children, lists them first. Without
 * the module their results are not cached. */
static void probe_executable_compiles(const sg_run *run, sg_job *jobs, size_t n,
                                      const sg_compile_opts *co)
{
    const char *clang = co->in_process ? NULL : lb_clang_path();
    if (!clang)
        return;
    sg_job *pp = xcalloc(n ? n : 1, sizeof *pp);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (jobs[i].skip)
            continue;
        pp[m++] = (sg_job){.argv = preprocess_command(jobs[i].argv, run->opt.launcher != NULL,
                                                      clang),
                           .output = "/dev/null",
                           .log = xasprintf("%s.probes.log", jobs[i].output),
                           .label = jobs[i].label,
                           .probes = jobs[i].probes};
    }
    sg_compile_opts o = *co;
    o.in_process = o.quiet = true;
    o.verbose = o.progress = false;
    o.failed = NULL;
    bool spawn_failed;
    compile_run(pp, m, &o, NULL, NULL, &spawn_failed);
    for (size_t k = 0; k < m; k++) {
        argv_free(pp[k].argv);
        free(pp[k].log);
    }
    free(pp);
}

/* Ops whose batch, once compiled, could not stand for them: compiled from
 * their own units, in a second round. Returns the number of failures. */
static size_t compile_the_alone(sg_run *run, job_set *js, done_ctx *ctx,
                                const sg_compile_opts *co, op_sources *texts, bool *spawn_failed)
{
    size_t n = 0, failures = 0;
    size_t *from = xcalloc(js->count ? js->count : 1, sizeof *from);
    for (size_t i = 0; i < js->count; i++) {
        if (js->refs[i].batch >= 0 && js->refs[i].alone[0] && !js->refs[i].solo) {
            compile_alone(run, js, i);
            from[n++] = i;
        }
    }
    if (n && !make_run_dirs(run)) {
        free(from);
        return n;
    }
    if (n)
        failures = write_translation_units(run, js, texts);
    sg_job *round = xcalloc(n ? n : 1, sizeof *round);
    for (size_t k = 0; k < n; k++)
        round[k] = js->jobs[from[k]]; /* user still points at its ref */
    name_probe_files(round, n);
    if (n)
        probe_executable_compiles(run, round, n, co);
    if (n)
        failures += compile_run(round, n, co, on_compiled, ctx, spawn_failed);
    for (size_t k = 0; k < n; k++)
        js->jobs[from[k]] = round[k];
    free(round);
    free(from);
    return failures;
}

/* The op compiled in batch b whose lines hold `line` (they are in source
 * order), or NULL for the text before the first. */
static const sg_op *op_at_line(const op_batch *b, unsigned line)
{
    const sg_op *found = NULL;
    for (size_t i = 0; i < b->n && b->members[i]->line <= line; i++)
        found = b->members[i];
    return found;
}

/* A batch that does not compile fails all its ops; the compiler's messages
 * point at the source (#line), and a note under them says which op, on which
 * target, each error is in. */
static void note_batch_errors(const sg_job *job, void *data)
{
    const done_ctx *ctx = data;
    const job_ref *ref = job->user;
    if (!ref || !ref->leader || job->status <= 0 || ref->extract_failed)
        return;
    const op_batch *b = &ctx->js->batches[ref->batch];
    uint8_t *log;
    size_t size;
    if (!read_file(job->log, &log, &size))
        return;
    const char *src = b->members[0]->source;
    size_t n = strlen(src);
    for (char *p = (char *)log, *end = p + size; p < end;) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *eol = nl ? nl : end;
        unsigned line, col;
        int used = 0;
        if ((size_t)(eol - p) > n && !memcmp(p, src, n) && p[n] == ':' &&
            sscanf(p + n, ":%u:%u: error:%n", &line, &col, &used) == 2 && used) {
            const sg_op *op = op_at_line(b, line);
            if (op)
                diag_note_at(src, line, col, "this error is in op %s (%s; compiled in one unit "
                             "with %s..%s)", op->name, ref->result->target->triple,
                             b->members[0]->name, b->members[b->n - 1]->name);
        }
        p = eol + 1;
    }
    free(log);
}

/* Whether the run's compiles can run clang's main in a forked child: its clang
 * is the executable the clang module links (the same file, whatever the path
 * given), and no launcher wraps it. */
static bool compiles_in_process(const sg_run *run)
{
    if (run->opt.exec_clang || run->opt.launcher)
        return false;
    const char *own = lb_clang_path();
    char *a = own ? realpath(run->clang, NULL) : NULL, *b = own ? realpath(own, NULL) : NULL;
    bool same = a && b && !strcmp(a, b);
    free(a);
    free(b);
    return same;
}

/* The run's compiles, and beside them the preprocesses that complete the
 * cache records of this run's discoveries (inc_discovery_jobs): both in
 * forked children when the compiles are, else the preprocesses alone first.
 * Returns the compiles' failures. */
static size_t compile_with_discovery(sg_run *run, job_set *js, const sg_compile_opts *co,
                                     done_ctx *ctx, bool *spawn_failed)
{
    sg_job *djobs = NULL;
    size_t nd = run->inc.npending && make_run_dirs(run)
                    ? inc_discovery_jobs(&run->inc, &run->rundir, &djobs) : 0;
    bool together = nd && co->in_process;
    if (nd && !together) {
        sg_compile_opts o = *co;
        o.in_process = o.quiet = true;
        o.progress = false;
        o.failed = NULL;
        bool ignored;
        compile_run(djobs, nd, &o, NULL, NULL, &ignored);
    }
    sg_job *all = js->jobs;
    if (together) {
        all = xcalloc(js->count + nd, sizeof *all);
        memcpy(all, js->jobs, js->count * sizeof *all);
        memcpy(all + js->count, djobs, nd * sizeof *all);
    }
    size_t failures = compile_run(all, js->count + (together ? nd : 0), co, on_compiled, ctx,
                                  spawn_failed);
    if (together) {
        memcpy(js->jobs, all, js->count * sizeof *all);
        memcpy(djobs, all + js->count, nd * sizeof *all);
        size_t theirs = 0; /* not the compiles' failures: those that ran and failed */
        for (size_t i = 0; i < nd; i++)
            theirs += djobs[i].status != 0 && (djobs[i].started.tv_sec || djobs[i].started.tv_nsec);
        failures = failures > theirs ? failures - theirs : 0;
        free(all);
    }
    inc_discover_finish(&run->inc, djobs, nd);
    free(djobs);
    return failures;
}

int jobs_run(sg_run *run, job_set *js)
{
    for (size_t t = 0; t < run->nresults; t++) {
        sg_target_result *r = &run->results[t];
        r->ops = xcalloc(run->ops.count, sizeof *r->ops);
        add_job(js, run, r, NULL);
        for (size_t i = 0; i < run->ops.count; i++)
            add_job(js, run, r, &run->ops.items[i]);
    }
    for (size_t i = 0; i < js->count; i++) /* refs no longer moves */
        js->jobs[i].user = &js->refs[i];
    sg_compile_opts co = {
        .parallel = run->opt.jobs,
        .timeout = run->opt.compile_timeout,
        .verbose = run->opt.verbose >= 2,
        .progress = isatty(2) && !run->opt.verbose,
        .failed = note_batch_errors,
    };
    done_ctx ctx = {run, js, SG_EXIT_OK, 0};
    size_t failures = 0;
    op_sources texts = {0};
    key_translation_units(run, js, &texts);
    for (size_t i = 0; i < js->count; i++)
        if (try_cached(&ctx, &js->jobs[i]))
            failures += js->jobs[i].status != 0;
    assign_batch_compiles(run, js);
    bool must_compile = false;
    for (size_t i = 0; i < js->count; i++)
        must_compile |= !js->jobs[i].skip;
    if (must_compile && !make_run_dirs(run)) {
        op_sources_free(&texts);
        return SG_EXIT_TOOLCHAIN;
    }
    failures += write_translation_units(run, js, &texts);
    co.in_process = run->compiled_in_process = must_compile && compiles_in_process(run);
    /* Once per compiler: the verdict is cached under its identity. */
    if (must_compile && !inc_compiler_verified(&run->inc)) {
        if (compile_check_clang(run->clang, run->rundir.path, &co) != SG_EXIT_OK) {
            op_sources_free(&texts);
            return SG_EXIT_TOOLCHAIN;
        }
        inc_compiler_verdict(&run->inc);
    }
    bool spawn_failed, spawn_failed2 = false;
    name_probe_files(js->jobs, js->count);
    if (must_compile)
        probe_executable_compiles(run, js->jobs, js->count, &co);
    failures += compile_with_discovery(run, js, &co, &ctx, &spawn_failed);
    for (size_t i = 0; i < js->count; i++) /* riders' own failed checks */
        failures += js->refs[i].rides && js->jobs[i].status != 0;
    /* Whatever other ops' checks said, as every op of a per-op build is
     * compiled and checked; not after a compiler timed out or would not start. */
    bool timed_out = false;
    for (size_t i = 0; i < js->count; i++)
        timed_out |= js->jobs[i].timed_out;
    if (!spawn_failed && !timed_out)
        failures += compile_the_alone(run, js, &ctx, &co, &texts, &spawn_failed2);
    spawn_failed |= spawn_failed2;
    op_sources_free(&texts);
    run->compiles = ctx.compiles;
    if (!failures)
        return SG_EXIT_OK;
    /* A compile that failed, timed out or could not start is a toolchain
     * failure; an object we refused is a check failure. */
    bool toolchain_failed = spawn_failed;
    for (size_t i = 0; i < js->count; i++)
        toolchain_failed |= js->jobs[i].status != 0 && !js->refs[i].extract_failed;
    return toolchain_failed ? SG_EXIT_TOOLCHAIN : ctx.extract_rc;
}
