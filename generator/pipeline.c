/* pipeline.c - one run of the generator: manifest -> discover -> compile ->
 * objfile -> stencil -> writer. Each stage reports its own errors; this file
 * only wires them together and maps failures to exit codes. */
#define _GNU_SOURCE
#include "pipeline.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag.h"
#include "flags.h"
#include "jobs.h"
#include "memo.h"
#include "outputs.h"
#include "provenance.h"
#include "util.h"
#include "variant.h"
#include "verify.h"
#include "writer.h"

static bool resolve_targets(gen_run *run)
{
    const gen_manifest *m = &run->manifest;
    size_t n = run->opt.ntargets ? run->opt.ntargets : m->ntargets;
    run->results = xcalloc(n, sizeof *run->results);
    for (size_t i = 0; i < n; i++) {
        const char *triple = run->opt.ntargets ? run->opt.targets[i] : m->targets[i].triple;
        gen_target_result *r = &run->results[run->nresults++];
        r->target = target_lookup(triple);
        for (size_t j = 0; j < m->ntargets; j++) {
            if (!strcmp(m->targets[j].triple, triple))
                r->mt = &m->targets[j];
        }
        if (!r->target) {
            char *supported = target_supported_list();
            if (r->mt)
                diag_error_at(m->path, r->mt->loc.line, r->mt->loc.col,
                              "unsupported target '%s' (supported: %s)", triple, supported);
            else
                diag_error("unsupported target '%s' (supported: %s)", triple, supported);
            free(supported);
            return false;
        }
    }
    return true;
}

/* The name an op is unique by: as written (a variant's op's), or its C name. */
static const char *written_name(const gen_op *op, bool written)
{
    return written && op->base ? op->base : op->name;
}

static int by_written_name_then_order(const void *a, const void *b)
{
    const gen_op *x = *(const gen_op *const *)a, *y = *(const gen_op *const *)b;
    int c = strcmp(written_name(x, true), written_name(y, true));
    return c ? c : (x > y) - (x < y);
}

static int by_name_then_order(const void *a, const void *b)
{
    const gen_op *x = *(const gen_op *const *)a, *y = *(const gen_op *const *)b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x > y) - (x < y);
}

/* The variants of one op share its definition (variant_expand). */
static bool one_definition(const gen_op *a, const gen_op *b)
{
    return a->begin == b->begin && !strcmp(a->source, b->source);
}

/* Each op name once, as written (two definitions of `add`, with variants or
 * not) and in C (a variant's add__in1 and an op of that name): the first op
 * (in manifest order) whose name came before is reported, with where it came
 * first. Sorted, not compared pairwise: a CPython-style VM has hundreds of ops. */
static int check_unique(const gen_oplist *ops, bool written)
{
    const gen_op **sorted = xcalloc(ops->count ? ops->count : 1, sizeof *sorted);
    for (size_t i = 0; i < ops->count; i++)
        sorted[i] = &ops->items[i];
    qsort(sorted, ops->count, sizeof *sorted,
          written ? by_written_name_then_order : by_name_then_order);
    const gen_op *again = NULL, *first = NULL;
    for (size_t i = 1, run = 0; i < ops->count; i++) {
        if (strcmp(written_name(sorted[i], written), written_name(sorted[run], written)))
            run = i; /* the first of its name */
        else if (!one_definition(sorted[i], sorted[run]) && (!again || sorted[i] < again))
            again = sorted[i], first = sorted[run];
    }
    free(sorted);
    if (!again)
        return SG_EXIT_OK;
    if (written || (!again->display && !first->display)) {
        diag_error_at(again->source, again->line, again->col, "op '%s' is defined twice",
                      written_name(again, written));
        diag_note_at(first->source, first->line, first->col, "first defined here");
    } else { /* a variant's C name clashes: the names people wrote differ */
        diag_error_at(again->source, again->line, again->col,
                      "%s '%s' and %s '%s' are both named '%s' in C",
                      again->display ? "variant" : "op", op_display(again),
                      first->display ? "variant" : "op", op_display(first), again->name);
        diag_note_at(first->source, first->line, first->col, "%s '%s' is defined here",
                     first->display ? "variant" : "op", op_display(first));
    }
    return SG_EXIT_USAGE;
}

static int check_unique_names(const gen_oplist *ops)
{
    int rc = check_unique(ops, true);
    return rc == SG_EXIT_OK ? check_unique(ops, false) : rc;
}

/* Ops are named by what the template marks; names must be unique across files. */
static int discover_all(gen_run *run)
{
    const gen_manifest *m = &run->manifest;
    gen_argv a = {0};
    gen_flag_inputs in = flags_inputs(run, &run->results[0]);
    flags_discover(&a, &in);
    int rc = SG_EXIT_OK;
    for (size_t i = 0; i < m->op_sources.count && rc == SG_EXIT_OK; i++) {
        size_t before = run->ops.count;
        rc = inc_discover(&run->inc, m->op_sources.items[i], &a, &run->ops);
        if (rc == SG_EXIT_OK)
            variant_expand(&run->ops, before);
        if (rc == SG_EXIT_OK && run->ops.count == before) {
            gen_loc l = m->op_sources.locs[i];
            diag_error_at(m->path, l.line, l.col,
                          "no ops found in '%s' (an op is written OP(name) { ... })",
                          m->op_sources.items[i]);
            rc = SG_EXIT_USAGE;
        }
    }
    if (rc == SG_EXIT_OK)
        rc = check_unique_names(&run->ops);
    argv_free(argv_finish(&a));
    return rc;
}

/* What holds of a target's stencils together rather than of each. */
static int check_across_ops(gen_run *run)
{
    int rc = SG_EXIT_OK;
    for (size_t t = 0; t < run->nresults; t++) {
        gen_target_result *r = &run->results[t];
        if (!verify_landing_pads(r->target, r->ops, run->ops.count, &r->shim, &r->landing_pads))
            rc = SG_EXIT_CHECK;
    }
    return rc;
}

/* Variants whose stencils came out the same share one (variant_fold): each
 * fold told with -v, their count in the summary. */
static void fold_variants(gen_run *run)
{
    for (size_t t = 0; t < run->nresults; t++) {
        gen_target_result *r = &run->results[t];
        r->twin = xcalloc(run->ops.count ? run->ops.count : 1, sizeof *r->twin);
        variant_fold(&run->ops, r->ops, r->twin);
        for (size_t i = 0; run->opt.verbose && i < run->ops.count; i++)
            if (r->twin[i] != i)
                fprintf(stderr, "stencilgen: %s: op %s is folded into %s: their stencils are "
                                "the same\n", r->target->triple,
                        op_display(&run->ops.items[i]), op_display(&run->ops.items[r->twin[i]]));
    }
}

/* What the writer renders of one target. */
static gen_header_model header_model(const gen_run *run, const gen_target_result *r)
{
    const char *slash = strrchr(run->manifest.path, '/');
    return (gen_header_model){r->target, slash ? slash + 1 : run->manifest.path,
                             run->manifest.symbols.items, run->manifest.symbols.count,
                             r->ops, run->ops.count, run->ops.items, r->twin, &r->shim,
                             &r->unwind, r->landing_pads, !run->opt.no_hot_cold,
                             run->opt.no_listing, NULL};
}

/* One line per target; `as_noop`: as a run that compiles nothing says it. */
static strbuf summary(const gen_run *run, bool as_noop)
{
    strbuf sb = {0};
    for (size_t t = 0; t < run->nresults; t++) {
        const gen_target_result *r = &run->results[t];
        gen_header_model m = header_model(run, r);
        writer_summary(&sb, &m, as_noop ? 0 : r->compiled, as_noop ? r->compiled + r->cached
                                                                   : r->cached);
    }
    return sb;
}

static void print_summary(const gen_run *run)
{
    strbuf sb = run->memo_hit ? run->memo_summary : summary(run, false);
    fwrite(sb.data, 1, sb.len, stdout);
    if (!run->memo_hit)
        sb_free(&sb);
}

/* After publishing: what a no-op run needs to load and render nothing (memo.h),
 * with what this run's files are (`published`), not what the paths name now. */
static void remember_outputs(gen_run *run, const job_set *js, const gen_outputs *out,
                             const struct stat *published)
{
    gen_key digest;
    if (!memo_digest(run, js, &digest))
        return;
    char **paths = xcalloc(out->count, sizeof *paths);
    for (size_t i = 0; i < out->count; i++)
        paths[i] = out->items[i].path;
    strbuf sb = summary(run, true);
    memo_record(run, &digest, paths, published, out->count, sb.data);
    sb_free(&sb);
    free(paths);
}

/* The closing comment of a target's header: what its stencils were made
 * from, each op's files from its compile's depfile (provenance.h). */
static strbuf provenance_of(const gen_run *run, const job_set *js, const gen_target_result *r)
{
    char **deps = xcalloc(run->ops.count + 1, sizeof *deps);
    const char **absent = xcalloc(run->ops.count + 1, sizeof *absent);
    const char *shim_deps = NULL, *shim_absent = NULL;
    for (size_t i = 0; i < js->count; i++) {
        const job_ref *ref = &js->refs[i];
        if (ref->result != r)
            continue;
        if (ref->op) {
            deps[ref->op - run->ops.items] = ref->deps;
            absent[ref->op - run->ops.items] = inc_absent_list(&run->inc, &ref->unit);
        } else {
            shim_deps = ref->deps;
            shim_absent = inc_absent_list(&run->inc, &ref->unit);
        }
    }
    prov_inputs in = {&run->manifest, r->target->triple, r->mt, &run->ops,
                      deps, shim_deps, run->workdir, !run->opt.no_hot_cold, absent, shim_absent,
                      run->compiler_prefix, run->compiler_version};
    strbuf sb = {0};
    prov_write(&sb, &in);
    free(absent);
    free(deps);
    return sb;
}

static strbuf render_target(const gen_run *run, const job_set *js, const gen_target_result *r)
{
    strbuf sb = {0};
    gen_header_model m = header_model(run, r);
    strbuf prov = provenance_of(run, js, r);
    m.provenance = prov.data;
    writer_target_header(&sb, &m);
    sb_free(&prov);
    return sb;
}

/* Targets are rendered side by side, up to -j threads: each header is made
 * of its own target's results alone (writer.h, provenance.h keep no state),
 * so the bytes do not depend on which thread made them. Each thread also
 * stages the header it made (outputs_stage: compared with the file there, its
 * temporary written), which overlaps writing megabytes with rendering. */
typedef struct render_work {
    const gen_run *run;
    const job_set *js;
    gen_output *headers; /* one per target: path set, content made here */
    int *errs;           /* per target: 0, or the errno its staging failed with */
    atomic_size_t next;
} render_work;

static void *render_targets(void *arg)
{
    render_work *w = arg;
    for (size_t t; (t = atomic_fetch_add(&w->next, 1)) < w->run->nresults;) {
        w->headers[t].content = render_target(w->run, w->js, &w->run->results[t]);
        if (!outputs_stage(&w->headers[t]))
            w->errs[t] = errno;
    }
    return NULL;
}

/* Renders and stages every target's header into out's first nresults items;
 * false (said why) when one cannot be written. */
static bool render_all(const gen_run *run, const job_set *js, gen_outputs *out)
{
    int *errs = xcalloc(run->nresults ? run->nresults : 1, sizeof *errs);
    render_work w = {run, js, out->items, errs, 0};
    size_t helpers = run->opt.jobs > 1 ? (size_t)run->opt.jobs - 1 : 0;
    if (helpers + 1 > run->nresults)
        helpers = run->nresults ? run->nresults - 1 : 0;
    pthread_t *threads = xcalloc(helpers ? helpers : 1, sizeof *threads);
    size_t started = 0;
    while (started < helpers && !pthread_create(&threads[started], NULL, render_targets, &w))
        started++; /* a thread that cannot start leaves its share to the others */
    render_targets(&w);
    for (size_t i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
    free(threads);
    bool ok = true;
    for (size_t t = 0; t < run->nresults && ok; t++) {
        ok = !errs[t];
        if (!ok)
            diag_error("cannot write '%s': %s", out->items[t].path, strerror(errs[t]));
    }
    free(errs);
    return ok;
}

static int render_and_publish(gen_run *run, const job_set *js)
{
    gen_outputs out = {0};
    for (size_t t = 0; t < run->nresults; t++) {
        char *name = writer_target_filename(run->results[t].target);
        outputs_add(&out, path_join(run->opt.outdir, name), (strbuf){0});
        free(name);
    }
    if (!outputs_ready(&out)) {
        outputs_discard(&out);
        return SG_EXIT_TOOLCHAIN;
    }
    /* The headers' spares (outputs.h) live in a work directory of this
     * outdir's own, not in a --cache-dir other checkouts share. */
    if (!run->opt.cache_dir) {
        char *spares = path_join(run->workdir, "spare");
        outputs_use_spares(&out, spares);
        free(spares);
    }
    if (!render_all(run, js, &out)) {
        outputs_discard(&out);
        return SG_EXIT_TOOLCHAIN;
    }
    strbuf disp = {0};
    const gen_target **targets = xcalloc(run->nresults, sizeof *targets);
    for (size_t t = 0; t < run->nresults; t++)
        targets[t] = run->results[t].target;
    writer_dispatcher(&disp, targets, run->nresults);
    free(targets);
    char *dispatcher = path_join(run->opt.outdir, "jit_stencils.h");
    outputs_add(&out, xstrdup(dispatcher), disp);
    if (run->opt.depfile) {
        char **texts = xcalloc(js->count, sizeof *texts);
        for (size_t i = 0; i < js->count; i++)
            texts[i] = js->refs[i].deps;
        strbuf dep;
        gen_depfile_inputs in = {run->manifest.path, run->manifest.op_sources.items,
                                run->manifest.op_sources.count, run->workdir};
        bool ok = outputs_depfile(&in, texts, js->count, dispatcher, &dep);
        free(texts);
        if (!ok) {
            outputs_discard(&out);
            free(dispatcher);
            return SG_EXIT_USAGE;
        }
        outputs_add(&out, xstrdup(run->opt.depfile), dep);
    }
    if (run->opt.compile_commands) {
        const char **sources = xcalloc(js->count, sizeof *sources);
        for (size_t i = 0; i < js->count; i++)
            sources[i] = js->refs[i].op ? js->refs[i].op->source : NULL;
        outputs_add(&out, xstrdup(run->opt.compile_commands),
                    outputs_compile_commands(js->jobs, js->count, sources, run->rundir.path,
                                             run->workdir));
        free(sources);
    }
    free(dispatcher);
    gen_outputs published = {.items = xcalloc(out.count, sizeof *published.items),
                             .count = out.count, .cap = out.count};
    for (size_t i = 0; i < out.count; i++) /* their paths: publishing frees out */
        published.items[i].path = xstrdup(out.items[i].path);
    struct stat *facts = xcalloc(out.count, sizeof *facts);
    bool ok = outputs_publish(&out, facts);
    if (ok)
        remember_outputs(run, js, &published, facts);
    free(facts);
    outputs_discard(&published);
    return ok ? SG_EXIT_OK : SG_EXIT_TOOLCHAIN;
}

static int dump(const gen_run *run)
{
    const char *only = run->opt.dump_op;
    bool found = !only;
    strbuf sb = {0};
    for (size_t t = 0; t < run->nresults; t++) {
        gen_header_model m = header_model(run, &run->results[t]);
        found |= writer_dump(&sb, &m, only);
    }
    if (sb.len)
        fputs(sb.data, stdout);
    sb_free(&sb);
    if (!found) {
        diag_error("no op named '%s' in %s", only, run->manifest.path);
        return SG_EXIT_USAGE;
    }
    return SG_EXIT_OK;
}

/* Every file a build writes must be a different file: a --depfile naming a
 * header would overwrite it. */
static bool outputs_do_not_collide(const gen_run *run)
{
    size_t n = 0, cap = run->nresults + 3;
    char **paths = xcalloc(cap, sizeof *paths);
    const char **what = xcalloc(cap, sizeof *what);
    for (size_t t = 0; t < run->nresults; t++) {
        char *name = writer_target_filename(run->results[t].target);
        what[n] = "the header";
        paths[n++] = path_join(run->opt.outdir, name);
        free(name);
    }
    what[n] = "the header";
    paths[n++] = path_join(run->opt.outdir, "jit_stencils.h");
    if (run->opt.depfile) {
        what[n] = "--depfile";
        paths[n++] = xstrdup(run->opt.depfile);
    }
    if (run->opt.compile_commands) {
        what[n] = "--compile-commands";
        paths[n++] = xstrdup(run->opt.compile_commands);
    }
    bool ok = outputs_distinct((const char *const *)paths, what, n);
    for (size_t i = 0; i < n; i++)
        free(paths[i]);
    free(paths);
    free(what);
    return ok;
}

/* The directory above the real bin/ of `clang` (/usr/lib/llvm-22 for
 * /usr/bin/clang-22), where its own headers are; NULL if it is not in one. */
static char *compiler_prefix(const char *clang)
{
    char *real = realpath(clang, NULL);
    char *bin = real ? path_dirname(real) : NULL;
    const char *slash = bin ? strrchr(bin, '/') : NULL;
    char *prefix = slash && !strcmp(slash, "/bin") ? path_dirname(bin) : NULL;
    free(bin);
    free(real);
    return prefix;
}

static int prepare(gen_run *run)
{
    if (!manifest_load(run->opt.manifest, &run->manifest) || !resolve_targets(run))
        return SG_EXIT_USAGE;
    if (!strcmp(run->opt.command, "build") && !outputs_do_not_collide(run))
        return SG_EXIT_USAGE;
    const char *clang = run->opt.clang ? run->opt.clang : "clang-22";
    run->clang = find_program(clang);
    if (!run->clang) {
        diag_error("cannot find the C compiler '%s' (install clang-22, or pass --clang PATH)",
                   clang);
        return SG_EXIT_TOOLCHAIN;
    }
    run->compiler_prefix = compiler_prefix(run->clang);
    /* The launcher runs by name, as given; keys know it by the file that runs. */
    char *launcher = run->opt.launcher ? find_program(run->opt.launcher) : NULL;
    if (run->opt.launcher && !launcher) {
        diag_error("cannot find the compiler launcher '%s'", run->opt.launcher);
        return SG_EXIT_TOOLCHAIN;
    }
    if (run->opt.cache_dir) {
        run->workdir = path_absolute(run->opt.cache_dir);
    } else if (run->opt.outdir) {
        char *w = path_join(run->opt.outdir, ".stencilgen");
        run->workdir = path_absolute(w);
        free(w);
    } else { /* check and dump: a private cache, removed at the end */
        const char *tmp = getenv("TMPDIR");
        char *tmpl = xasprintf("%s/stencilgen.XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(tmpl)) {
            diag_error("cannot create a temporary directory '%s': %s", tmpl, strerror(errno));
            free(tmpl);
            free(launcher);
            return SG_EXIT_TOOLCHAIN;
        }
        run->workdir = tmpl;
    }
    if (!mkdir_p(run->workdir)) {
        diag_error("cannot create '%s': %s", run->workdir, strerror(errno));
        free(launcher);
        return SG_EXIT_TOOLCHAIN;
    }
    run->cache = cache_open(run->workdir);
    cache_set_max_size(run->cache, run->opt.cache_max_size);
    inc_open(&run->inc, run->cache, run->clang, launcher, run->manifest.symbols.items,
             run->manifest.symbols.count, run->opt.verbose);
    free(launcher);
    /* Cached stencils are stored with their parts laid out (jobs.c,
     * lay_out_parts) or whole: each setting has its own. */
    if (run->opt.no_hot_cold)
        run->inc.stencil_kind = "stencil-whole";
    rundir_reserve(run->workdir, &run->rundir);
    run->op_template_dir = flags_op_template_dir(run->workdir);
    return run->op_template_dir ? SG_EXIT_OK : SG_EXIT_TOOLCHAIN;
}

/* What a run leaves behind on disk: no run directory, the cache's records saved. */
static void run_finish(gen_run *run, bool remove_workdir)
{
    rundir_remove(&run->rundir);
    inc_close(&run->inc);
    cache_close(run->cache); /* before removing a temporary workdir: it writes there */
    run->cache = NULL;
    if (remove_workdir && run->workdir)
        remove_tree(run->workdir);
}

/* A run's memory goes with the process: freeing its many thousand blocks one
 * by one cost a one-op edit about 2 ms of its 60. Sanitized builds free
 * everything, so that LeakSanitizer keeps proving nothing else is lost. */
#ifdef __SANITIZE_ADDRESS__
#define FREE_BEFORE_EXIT 1
#else
#define FREE_BEFORE_EXIT 0
#endif

static void run_free(gen_run *run)
{
    for (size_t t = 0; t < run->nresults; t++) {
        gen_target_result *r = &run->results[t];
        for (size_t i = 0; r->ops && i < run->ops.count; i++)
            stencil_free(&r->ops[i]);
        free(r->ops);
        free(r->twin);
        stencil_free(&r->shim);
        unwind_free(&r->unwind);
        if (r->disasm)
            lb_disasm_destroy(r->disasm);
    }
    free(run->results);
    sb_free(&run->memo_summary);
    free(run->workdir);
    free(run->op_template_dir);
    free(run->clang);
    free(run->compiler_prefix);
    oplist_free(&run->ops);
    manifest_free(&run->manifest);
}

int pipeline_run(const gen_options *opt)
{
    gen_run run = {.opt = *opt, .rundir = {NULL, -1}};
    job_set js = {0};
    bool temp_workdir = !opt->cache_dir && !opt->outdir;
    double t0 = now_seconds();
    int rc = prepare(&run);
    if (rc == SG_EXIT_OK)
        rc = discover_all(&run);
    double t1 = now_seconds();
    /* dump shows what it has even when a check fails (the thing being
     * debugged), and the check's messages after it. */
    bool dumping = !strcmp(opt->command, "dump");
    strbuf held = {0};
    strbuf *outer = dumping ? diag_capture(&held) : NULL;
    if (rc == SG_EXIT_OK)
        rc = jobs_run(&run, &js);
    if (rc == SG_EXIT_OK && !run.memo_hit)
        rc = check_across_ops(&run);
    if (rc == SG_EXIT_OK && !run.memo_hit)
        fold_variants(&run);
    if (dumping)
        diag_capture(outer);
    double t2 = now_seconds();
    if (rc == SG_EXIT_OK && !strcmp(opt->command, "build") && !run.memo_hit)
        rc = render_and_publish(&run, &js);
    if (opt->verbose) {
        size_t stencils = 0;
        for (size_t t = 0; t < run.nresults; t++)
            stencils += run.results[t].stencils_cached;
        fprintf(stderr, "stencilgen: discovery %.3f s, compile and read objects %.3f s "
                        "(%zu cached stencils), %zu compiler runs%s, write %.3f s\n",
                t1 - t0, t2 - t1, stencils, run.compiles,
                run.compiled_in_process && run.compiles ? " (clang's driver and cc1 in forked children)"
                                                        : "",
                now_seconds() - t2);
        fprintf(stderr, "stencilgen: keys: %zu bytes of op sources hashed for %zu ops\n",
                run.key_bytes, run.ops.count);
        if (run.memo_hit)
            fprintf(stderr, "stencilgen: outputs as the last build left them (memo): no stencil "
                            "loaded, no header rendered\n");
    }
    if (dumping && (rc == SG_EXIT_OK || rc == SG_EXIT_CHECK)) {
        int dumped = dump(&run);
        rc = rc == SG_EXIT_OK ? dumped : rc;
        fflush(stdout);
    }
    if (held.len)
        diag_write(held.data, held.len);
    sb_free(&held);
    if (rc == SG_EXIT_OK && !dumping)
        print_summary(&run);
    run_finish(&run, temp_workdir);
    if (FREE_BEFORE_EXIT) {
        jobs_free(&js);
        run_free(&run);
    }
    lb_clang_preload_done();
    return rc;
}
