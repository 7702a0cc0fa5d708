/* jobs.c - see jobs.h. */
#define _GNU_SOURCE
#include "jobs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "batch.h"
#include "diag.h"
#include "flags.h"
#include "hotcold_split.h"
#include "llvm_bridge.h"
#include "memo.h"
#include "opunit.h"
#include "split.h"
#include "util.h"
#include "verify.h"

/* ---- the jobs: one per target for the shim and each op */

static lb_disasm *open_disasm(const gen_target *t)
{
    char err[256];
    lb_disasm *d = lb_disasm_create(t->triple, t->fp_reg, t->fp_writers, err, sizeof err);
    if (!d)
        diag_error("%s", err);
    return d;
}

/* The run's own directory and each target's directories, made when the
 * first compile needs them (a run that compiles nothing writes no file). */
static bool make_run_dirs(gen_run *run)
{
    if (!rundir_open(&run->rundir)) { /* made once, maybe by discovery already */
        diag_error("cannot create the run directory '%s': %s", run->rundir.path,
                   strerror(errno));
        return false;
    }
    for (size_t t = 0; t < run->nresults; t++) {
        const gen_target *target = run->results[t].target;
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

/* Through a launcher, compiles start in the run directory and name its files
 * relative to it (gen_job.dir): the same command in every run, so that
 * ccache and sccache hit on a clean build's. Not when the launcher or clang
 * is named by a relative path, which means the generator's directory. */
static const char *launcher_dir(const gen_run *run)
{
    const char *l = run->opt.launcher;
    if (!l || run->clang[0] != '/' || (l[0] != '/' && strchr(l, '/')))
        return NULL;
    return run->rundir.path;
}

/* The shared part of the command of `op` (NULL: the shim) for `r`, made the
 * first time. Ops come file by file, so the newest is nearly always it. */
static gen_shared_args *shared_args(job_set *js, const gen_run *run, gen_target_result *r,
                                    const gen_op *op, bool batched)
{
    const char *source = op ? op->source : NULL;
    for (size_t i = js->nshared; i-- > 0;) {
        shared_command *c = js->shared[i];
        if (c->result == r && c->batched == batched && !c->source == !source &&
            (!source || !strcmp(c->source, source)))
            return &c->args;
    }
    shared_command *c = xcalloc(1, sizeof *c);
    *c = (shared_command){r, source, batched, {0}};
    c->args.argv = flags_command_shared(run, r, op, batched);
    while (c->args.argv[c->args.n])
        c->args.n++;
    ARRAY_PUSH(js->shared, js->nshared, js->shared_cap, c);
    return &c->args;
}

static void add_job(job_set *js, gen_run *run, gen_target_result *r, const gen_op *op)
{
    const char *name = op ? op->name : "shim";
    bool batched = op && run->opt.units == SG_UNITS_BATCHED;
    char *dir = path_join(run->rundir.path, r->target->triple);
    gen_job job = {0};
    /* A batched op's job keeps its own object name: the cache knows each op
     * by it (its slot), whichever compile makes the op. */
    job.output = xasprintf("%s/%s%s.o", dir, op ? "op_" : "", name);
    job.log = xasprintf("%s.log", job.output);
    job.dir = launcher_dir(run);
    job.label = op ? xasprintf("op %s (%s)", op_display(op), r->target->triple)
                   : xasprintf("shim %s (%s)", run->manifest.shim_function, r->target->triple);
    /* An op compiles from its own translation unit or its batch's (written
     * only if needed), alone in its directory: a quoted include never finds a
     * sibling unit. A batch is known once the cache has been asked: until
     * then the paths are the op's own (the cache does not hash them). */
    char *tu_path = op ? xasprintf("%s/tu/%s/unit.c", run->rundir.path, op->name) : NULL;
    job.shared = shared_args(js, run, r, op, batched);
    job.argv = flags_command_after(job.shared->argv, job.shared->n, run, op, batched, job.output,
                                  tu_path); /* its shared strings stay job.shared's */
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
        free(js->refs[i].tu_file);
        free(js->refs[i].tu_path);
        free(js->refs[i].op_label);
        job_argv_free(&js->jobs[i]);
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
    for (size_t i = 0; i < js->nshared; i++) {
        argv_free(js->shared[i]->args.argv);
        free(js->shared[i]);
    }
    free(js->shared);
}

/* ---- a finished compile: its object checked into stencils, and cached */

typedef struct done_ctx {
    gen_run *run;
    job_set *js;
    int extract_rc;
    size_t compiles; /* compiler runs that produced an object */
} done_ctx;

static gen_verify_in verify_inputs(const gen_run *run, job_ref *ref, const gen_job *job)
{
    char *entry = ref->batched && !ref->solo ? xasprintf(SPLIT_ENTRY_PREFIX "%s", ref->op->name)
                                             : NULL;
    return (gen_verify_in){.manifest = &run->manifest,
                          .target = ref->result->target,
                          .mt = ref->result->mt,
                          .disasm = ref->result->disasm,
                          .op = ref->op,
                          .label = ref->op_label ? ref->op_label : job->label,
                          .command = job->argv,
                          .compiler_version = run->compiler_version,
                          .batch_entry = entry,
                          .alone = ref->alone,
                          .alone_size = sizeof ref->alone};
}

static void verify_inputs_free(gen_verify_in *in)
{
    free((char *)in->batch_entry);
}

/* Opened for the first object read: a run that reads none never loads LLVM
 * (llvm_plugin.h). */
static bool have_disasm(done_ctx *ctx, job_ref *ref)
{
    gen_target_result *r = ref->result;
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

/* A checked op's hot and cold parts laid out (hotcold_split) before it is
 * cached, so a run that compiles nothing needs no disassembler; the cache
 * keys the setting (pipeline.c). */
static void lay_out_parts(const done_ctx *ctx, job_ref *ref)
{
    if (ref->op && !ctx->run->opt.no_hot_cold)
        hotcold_split(ref->stencil, ref->result->target, ref->result->disasm);
}

/* Build the stencil from an object's bytes and run the checks on it. */
static bool process_object(done_ctx *ctx, gen_job *job, const uint8_t *bytes, size_t size)
{
    job_ref *ref = job->user;
    if (!have_disasm(ctx, ref))
        return false;
    gen_verify_in in = verify_inputs(ctx->run, ref, job);
    bool ok = verify_object(bytes, size, &in, ref->stencil, &ref->result->unwind);
    verify_inputs_free(&in);
    if (ok)
        lay_out_parts(ctx, ref);
    return verdict(ctx, ref, ok);
}

/* The same for one op of a batch's object, read once for all its ops. */
static bool process_parsed(done_ctx *ctx, gen_job *job, const objfile *obj)
{
    job_ref *ref = job->user;
    gen_verify_in in = verify_inputs(ctx->run, ref, job);
    bool ok = verify_objfile(obj, &in, ref->stencil, &ref->result->unwind);
    verify_inputs_free(&in);
    if (ok)
        lay_out_parts(ctx, ref);
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

/* The last object built for each op stays in WORKDIR/<triple>/, and its unit
 * in WORKDIR/tu/<unit>/unit.c (rundir_keep). */
static void keep_for_inspection(const gen_run *run, const job_set *js, const job_ref *ref,
                                const gen_job *job)
{
    const char *unit = !ref->op ? NULL : ref->leader ? js->batches[ref->batch].name
                                                     : ref->op->name;
    rundir_keep(run->workdir, ref->result->target->triple, job->output, unit, ref->tu_path);
}

/* One op's share of a finished compile: its stencil, checked, and stored
 * in the cache (an op its batch cannot stand for is neither: it compiles
 * alone next). */
static bool take_object(done_ctx *ctx, gen_job *job, const gen_job *compile, const objfile *batch,
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
static bool take_batch(done_ctx *ctx, gen_job *job, const inc_output *fresh)
{
    job_set *js = ctx->js;
    job_ref *ref = job->user;
    objfile obj;
    gen_verify_in in = verify_inputs(ctx->run, ref, job);
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

/* A compile started in its run directory (gen_job.dir) names its unit in its
 * dependency file as it was given, relative to that directory: the full path
 * again, which the cache's key leaves out and the build's depfile filters.
 * The unit's path is the run's own (tu/<name>/unit.c: no character to
 * escape). */
static void unit_path_absolute(const gen_job *job, const char *unit, uint8_t **text,
                               size_t *size)
{
    size_t dlen = strlen(job->dir);
    if (!unit || strncmp(unit, job->dir, dlen) || unit[dlen] != '/')
        return;
    const char *rel = unit + dlen + 1;
    size_t rlen = strlen(rel);
    char *s = (char *)*text, *end = s + *size;
    for (char *p = s; (p = memmem(p, (size_t)(end - p), rel, rlen)) != NULL; p += rlen) {
        bool starts = p > s && p[-1] == ' ';
        bool ends = p + rlen == end || p[rlen] == ' ' || p[rlen] == '\n' || p[rlen] == '\r';
        if (!starts || !ends)
            continue;
        strbuf sb = {0};
        sb_putn(&sb, s, (size_t)(p - s));
        sb_putn(&sb, unit, strlen(unit));
        sb_putn(&sb, p + rlen, (size_t)(end - p - rlen));
        free(*text);
        *size = sb.len;
        *text = (uint8_t *)sb.data;
        return;
    }
}

/* Runs while other compiles are still going: cache the object, build the
 * stencil; a batch's for each of its ops that had to compile. */
static bool on_compiled(gen_job *job, void *vctx)
{
    done_ctx *ctx = vctx;
    job_ref *ref = job->user;
    if (!ref)
        return true; /* a discovery's preprocess (inc_compile_with_discovery) */
    uint8_t *bytes, *dtext;
    size_t size, dsize;
    char *dfile = xasprintf("%s.d", job->output);
    bool have = compile_read_output(job, job->output, "object", &bytes, &size);
    if (have && !compile_read_output(job, dfile, "dependency file", &dtext, &dsize)) {
        free(bytes);
        have = false;
    }
    free(dfile);
    if (!have)
        return false; /* status -1 without extract_failed: exit 3 */
    if (job->dir)
        unit_path_absolute(job, ref->tu_path, &dtext, &dsize);
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

/* ---- translation units, the cache, and the compiles */

/* What every op's cache key takes from its own unit (the file without the
 * other ops): its text, and its position (the file name as __FILE__ gives it,
 * and the lines), composed by inc_unit_init. A batched op is keyed by its own
 * unit too: an edit to one op of a batch misses that op alone, and only it
 * compiles. Keys are made once per file (op_keys_for_file) and shared by
 * every target's job of the op. */
static int by_file_then_index(const void *a, const void *b, void *ops)
{
    const gen_op *items = ops;
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    int c = strcmp(items[x].source, items[y].source);
    return c ? c : (x > y) - (x < y);
}

static void key_translation_units(gen_run *run, job_set *js, op_sources *texts)
{
    const gen_oplist *all = &run->ops;
    size_t n = all->count;
    op_key *keys = xcalloc(n ? n : 1, sizeof *keys);
    /* The ops of each file in source order (discovery lists them so), the
     * files one after another. */
    size_t *order = xcalloc(n ? n : 1, sizeof *order);
    for (size_t i = 0; i < n; i++)
        order[i] = i;
    qsort_r(order, n, sizeof *order, by_file_then_index, all->items);
    gen_op *file = xcalloc(n ? n : 1, sizeof *file);
    op_key *fkeys = xcalloc(n ? n : 1, sizeof *fkeys);
    for (size_t i = 0, e; i < n; i = e) {
        const char *source = all->items[order[i]].source;
        for (e = i; e < n && !strcmp(all->items[order[e]].source, source); e++)
            file[e - i] = all->items[order[e]];
        op_keys_for_file(texts, file, e - i, fkeys, &run->key_bytes);
        for (size_t k = i; k < e; k++)
            keys[order[k]] = fkeys[k - i];
    }
    for (size_t i = 0; i < js->count; i++) {
        job_ref *ref = &js->refs[i];
        if (!ref->op)
            continue;
        ref->tu_file = manifest_relpath(&run->manifest, ref->op->source);
        ref->tu_key = keys[ref->op - all->items];
    }
    free(fkeys);
    free(file);
    free(order);
    free(keys);
}

/* Write the unit of every op that must compile. A unit that cannot be written
 * fails its op (exit 3): compiling anything else in its place would be wrong. */
static size_t write_translation_units(gen_run *run, job_set *js, op_sources *texts)
{
    size_t failed = 0;
    for (size_t i = 0; i < js->count; i++) {
        job_ref *ref = &js->refs[i];
        gen_job *job = &js->jobs[i];
        if (!ref->op || job->skip)
            continue;
        op_batch *b = ref->leader ? &js->batches[ref->batch] : NULL;
        if (b && b->written)
            continue; /* every target's leader compiles the same unit */
        op_unit u = b ? op_batch_unit_for(texts, &run->ops, b->members, b->n)
                      : op_unit_for(texts, &run->ops, ref->op);
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
        sb_free(&u.unit);
    }
    return failed;
}

/* The job as the cache knows it, and the key its entry would have. */
static void key_job(gen_run *run, gen_job *job)
{
    job_ref *ref = job->user;
    inc_op_unit op = {ref->tu_key.text, ref->tu_key.mentions_position, ref->tu_key.position,
                      ref->tu_file, ref->batched};
    inc_unit_init(&run->inc, &ref->unit, ref->result->target->triple, job,
                  ref->op ? &op : NULL, ref->tu_path);
    inc_key(&run->inc, &ref->unit);
}

/* A cache entry stands in for the compile: the job is skipped. */
static bool try_cached(done_ctx *ctx, gen_job *job)
{
    job_ref *ref = job->user;
    gen_run *run = ctx->run;
    uint8_t *obj;
    size_t size;
    uint8_t *unwind = NULL;
    size_t unwind_size = 0;
    switch (inc_lookup(&run->inc, &ref->unit, job->label, ref->stencil, &obj, &size,
                       &ref->deps, &unwind, &unwind_size)) {
    case INC_MISS: return false;
    case INC_STENCIL: {
        gen_verify_in in = verify_inputs(run, ref, job);
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

/* Ops whose batch, once compiled, could not stand for them: compiled from
 * their own units, in a second round. Returns the number of failures. */
static size_t compile_the_alone(gen_run *run, job_set *js, done_ctx *ctx,
                                const gen_compile_opts *co, op_sources *texts, bool *spawn_failed)
{
    size_t n = 0, failures = 0;
    size_t *from = xcalloc(js->count ? js->count : 1, sizeof *from);
    for (size_t i = 0; i < js->count; i++) {
        if (js->refs[i].batch >= 0 && js->refs[i].alone[0] && !js->refs[i].solo) {
            batch_compile_alone(run, js, i);
            from[n++] = i;
        }
    }
    if (n && !make_run_dirs(run)) {
        free(from);
        return n;
    }
    if (n)
        failures = write_translation_units(run, js, texts);
    gen_job *round = xcalloc(n ? n : 1, sizeof *round);
    for (size_t k = 0; k < n; k++)
        round[k] = js->jobs[from[k]]; /* user still points at its ref */
    inc_name_probes(round, n);
    if (n)
        inc_probe_compiles(round, n, co, run->opt.launcher != NULL);
    if (n)
        failures += compile_run(round, n, co, on_compiled, ctx, spawn_failed);
    for (size_t k = 0; k < n; k++)
        js->jobs[from[k]] = round[k];
    free(round);
    free(from);
    return failures;
}

/* The status line on a terminal (compile.h): stencils compiled of those
 * that must compile, in all and per triple. A batch's compile counts all
 * its ops at once. */
static void build_status(strbuf *line, void *data)
{
    const done_ctx *ctx = data;
    const gen_run *run = ctx->run;
    size_t done = 0, total = 0;
    for (size_t t = 0; t < run->nresults; t++) {
        done += run->results[t].compiled;
        total += run->ops.count - run->results[t].cached;
    }
    sb_printf(line, "[%zu/%zu stencils]", done, total);
    for (size_t t = 0; t < run->nresults; t++) {
        const gen_target_result *r = &run->results[t];
        if (run->ops.count > r->cached)
            sb_printf(line, " %s %zu/%zu", r->target->triple, r->compiled,
                      run->ops.count - r->cached);
    }
}

/* distcc's own failures (exit 100-127, not clang's) name a host only when it
 * could not connect; one that hung up, refused the job or is backed off goes
 * unnamed (docs/build.md, "distcc"): say which hosts it was given. */
static void note_distcc_failure(const gen_run *run, const gen_job *job)
{
    const char *l = run->opt.launcher, *base = l ? strrchr(l, '/') : NULL;
    base = base ? base + 1 : l;
    const char *hosts = getenv("DISTCC_HOSTS");
    if (!base || strcmp(base, "distcc") || job->status < 100 || job->status > 127)
        return;
    diag_note("%s: distcc could not compile it on its hosts (DISTCC_HOSTS=%s; its exit %d, "
              "not the compiler's)", job->label, hosts ? hosts : "unset: its hosts file",
              job->status);
}

/* A batch that does not compile fails all its ops; its errors are told
 * which op each is in (gen_job_failed, compile.h). A launcher's own failure
 * says so. */
static void note_batch_errors(const gen_job *job, void *data)
{
    const done_ctx *ctx = data;
    batch_note_errors(ctx->js, job);
    note_distcc_failure(ctx->run, job);
}

int jobs_run(gen_run *run, job_set *js)
{
    for (size_t t = 0; t < run->nresults; t++) {
        gen_target_result *r = &run->results[t];
        r->ops = xcalloc(run->ops.count, sizeof *r->ops);
        add_job(js, run, r, NULL);
        for (size_t i = 0; i < run->ops.count; i++)
            add_job(js, run, r, &run->ops.items[i]);
    }
    for (size_t i = 0; i < js->count; i++) /* refs no longer moves */
        js->jobs[i].user = &js->refs[i];
    gen_compile_opts co = {
        .parallel = run->opt.jobs,
        .timeout = run->opt.compile_timeout,
        .verbose = run->opt.verbose >= 2,
        .progress = isatty(2) && !run->opt.verbose,
        .failed = note_batch_errors,
        .status = build_status,
    };
    done_ctx ctx = {run, js, SG_EXIT_OK, 0};
    size_t failures = 0;
    op_sources texts = {0};
    key_translation_units(run, js, &texts);
    for (size_t i = 0; i < js->count; i++)
        key_job(run, &js->jobs[i]);
    gen_key digest;
    if (!strcmp(run->opt.command, "build") && memo_digest(run, js, &digest) &&
        memo_replay(run, &digest, &run->memo_summary)) {
        run->memo_hit = true;
        op_sources_free(&texts);
        return SG_EXIT_OK; /* the outputs are those these keys made: nothing to load */
    }
    for (size_t i = 0; i < js->count; i++)
        if (try_cached(&ctx, &js->jobs[i]))
            failures += js->jobs[i].status != 0;
    batch_assign(run, js);
    bool must_compile = false;
    for (size_t i = 0; i < js->count; i++)
        must_compile |= !js->jobs[i].skip;
    if (must_compile && !make_run_dirs(run)) {
        op_sources_free(&texts);
        return SG_EXIT_TOOLCHAIN;
    }
    failures += write_translation_units(run, js, &texts);
    co.in_process = run->compiled_in_process = must_compile && compile_can_fork(run->clang, run->opt.exec_clang || run->opt.launcher);
    /* Once per compiler: the verdict, and the version the headers name, are
     * cached under its identity. */
    if (!inc_compiler_verified(&run->inc, run->compiler_version, sizeof run->compiler_version)) {
        if (!make_run_dirs(run) ||
            compile_check_clang(run->clang, run->rundir.path, &co, run->compiler_version,
                                sizeof run->compiler_version) != SG_EXIT_OK) {
            op_sources_free(&texts);
            return SG_EXIT_TOOLCHAIN;
        }
        inc_compiler_verdict(&run->inc, run->compiler_version);
    }
    bool spawn_failed, spawn_failed2 = false;
    inc_name_probes(js->jobs, js->count);
    if (must_compile)
        inc_probe_compiles(js->jobs, js->count, &co, run->opt.launcher != NULL);
    const gen_rundir *rd = run->inc.npending && make_run_dirs(run) ? &run->rundir : NULL;
    failures += inc_compile_with_discovery(&run->inc, rd, js->jobs, js->count, &co, on_compiled,
                                           &ctx, &spawn_failed);
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
