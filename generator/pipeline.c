/* pipeline.c - one run of the generator: manifest -> discover -> compile ->
 * objfile -> stencil -> writer. Each stage reports its own errors; this file
 * only wires them together and maps failures to exit codes. */
#define _GNU_SOURCE
#include "pipeline.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compile.h"
#include "diag.h"
#include "fp_check.h"
#include "llvm_bridge.h"
#include "objfile.h"
#include "outputs.h"
#include "util.h"
#include "writer.h"

#define COMPILE_TIMEOUT_S 600.0

/* Flags every op needs, whatever the target: no frame, no unwind tables, no
 * stack protector (it would read TLS), no jump tables (data relocations), and
 * the frame-pointer register kept out of reach of the register allocator. */
static const char *const op_flags[] = {
    "-x", "c", "-std=c11", "-O3", "-fPIC", "-fno-plt", "-fno-jump-tables",
    "-fno-stack-protector", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables",
    "-fno-ident", "-fno-addrsig", "-Xclang", "-mframe-pointer=reserved", "-DNDEBUG", NULL,
};

/* The shim is an ordinary function whose unwind tables are the source of truth. */
static const char *const shim_flags[] = {
    "-x", "c", "-std=c11", "-O2", "-fPIC", "-fno-plt", "-fno-jump-tables",
    "-fno-stack-protector", "-fasynchronous-unwind-tables", "-fno-omit-frame-pointer",
    "-mno-omit-leaf-frame-pointer", "-fno-ident", "-fno-addrsig", "-DNDEBUG", NULL,
};

static void add_list(sg_argv *a, const char *const *flags)
{
    for (; *flags; flags++)
        argv_add(a, *flags);
}

static void add_strlist(sg_argv *a, const sg_strlist *l, const char *prefix)
{
    for (size_t i = 0; i < l->count; i++)
        argv_addf(a, "%s%s", prefix, l->items[i]);
}

/* -include, -I, -D: shared by discovery, op and shim compiles. */
static void add_common(sg_argv *a, const sg_run *run, const sg_target *t)
{
    const sg_manifest *m = &run->manifest;
    argv_addf(a, "--target=%s", t->triple);
    argv_add(a, "-include");
    argv_add(a, m->template_path);
    add_strlist(a, &m->include_dirs, "-I");
    add_strlist(a, &m->defines, "-D");
    argv_addf(a, "-ffile-prefix-map=%s=.", m->dir);
}

static void add_op_cflags(sg_argv *a, const sg_run *run, const sg_target_result *r)
{
    add_list(a, op_flags);
    add_list(a, r->target->op_cflags);
    add_common(a, run, r->target);
    add_strlist(a, &run->manifest.cflags, "");
    if (r->mt)
        add_strlist(a, &r->mt->cflags, "");
    if (run->opt.extra_cflags)
        argv_add_split(a, run->opt.extra_cflags);
}

static void add_shim_cflags(sg_argv *a, const sg_run *run, const sg_target_result *r)
{
    add_list(a, shim_flags);
    add_list(a, r->target->shim_cflags);
    add_common(a, run, r->target);
    if (r->mt)
        add_strlist(a, &r->mt->shim_cflags, "");
    if (run->opt.extra_shim_cflags)
        argv_add_split(a, run->opt.extra_shim_cflags);
}

static bool resolve_targets(sg_run *run)
{
    const sg_manifest *m = &run->manifest;
    size_t n = run->opt.ntargets ? run->opt.ntargets : m->ntargets;
    run->results = xcalloc(n, sizeof *run->results);
    for (size_t i = 0; i < n; i++) {
        const char *triple = run->opt.ntargets ? run->opt.targets[i] : m->targets[i].triple;
        sg_target_result *r = &run->results[run->nresults++];
        r->target = target_lookup(triple);
        for (size_t j = 0; j < m->ntargets; j++) {
            if (!strcmp(m->targets[j].triple, triple))
                r->mt = &m->targets[j];
        }
        if (!r->target) {
            if (r->mt)
                diag_error_at(m->path, r->mt->loc.line, r->mt->loc.col,
                              "unsupported target '%s' (supported: %s)", triple,
                              target_supported_list());
            else
                diag_error("unsupported target '%s' (supported: %s)", triple,
                           target_supported_list());
            return false;
        }
    }
    return true;
}

/* Ops are named by what the template marks; names must be unique across files. */
static int discover_all(sg_run *run)
{
    const sg_manifest *m = &run->manifest;
    sg_argv a = {0};
    argv_add(&a, "-x");
    argv_add(&a, "c");
    argv_add(&a, "-std=c11");
    argv_add(&a, "-DSTENCILGEN_DISCOVER");
    add_common(&a, run, run->results[0].target);
    add_strlist(&a, &m->cflags, "");
    if (run->opt.extra_cflags)
        argv_add_split(&a, run->opt.extra_cflags);
    int rc = SG_EXIT_OK;
    for (size_t i = 0; i < m->op_sources.count && rc == SG_EXIT_OK; i++) {
        size_t before = run->ops.count;
        if (!discover_ops(m->op_sources.items[i], (const char *const *)a.items, a.count,
                          &run->ops)) {
            rc = SG_EXIT_TOOLCHAIN;
        } else if (run->ops.count == before) {
            sg_loc l = m->op_sources.locs[i];
            diag_error_at(m->path, l.line, l.col,
                          "no ops found in '%s' (an op is written OP(name) { ... })",
                          m->op_sources.items[i]);
            rc = SG_EXIT_USAGE;
        }
    }
    for (size_t i = 0; i < run->ops.count && rc == SG_EXIT_OK; i++) {
        for (size_t j = 0; j < i; j++) {
            const sg_op *x = &run->ops.items[i], *y = &run->ops.items[j];
            if (strcmp(x->name, y->name))
                continue;
            diag_error_at(x->source, x->line, x->col, "op '%s' is defined twice", x->name);
            fprintf(stderr, "%s:%u:%u: note: first defined here\n", y->source, y->line, y->col);
            rc = SG_EXIT_USAGE;
            break;
        }
    }
    argv_free(argv_finish(&a));
    return rc;
}

static lb_disasm *open_disasm(const sg_target *t)
{
    char err[256];
    lb_disasm *d = lb_disasm_create(t->triple, t->fp_reg, t->fp_writers, err, sizeof err);
    if (!d)
        diag_error("%s", err);
    return d;
}

typedef struct job_ref {
    sg_target_result *result;
    sg_stencil *stencil;
    const sg_op *op; /* NULL for the shim */
    bool extract_failed;
} job_ref;

typedef struct job_set {
    sg_job *jobs;
    job_ref *refs; /* refs[i] describes jobs[i] */
    size_t count, cap;
} job_set;

static void add_job(job_set *js, sg_run *run, sg_target_result *r, const sg_op *op)
{
    const char *name = op ? op->name : "shim";
    char *dir = path_join(run->workdir, r->target->triple);
    mkdir_p(dir);
    sg_argv a = {0};
    if (run->opt.launcher)
        argv_add(&a, run->opt.launcher);
    argv_add(&a, run->clang);
    if (op) {
        add_op_cflags(&a, run, r);
        argv_addf(&a, "-DSTENCILGEN_OP=%s", op->name);
    } else {
        add_shim_cflags(&a, run, r);
    }
    sg_job job = {0};
    job.output = xasprintf("%s/%s%s.o", dir, op ? "op_" : "", name);
    job.log = xasprintf("%s.log", job.output);
    job.label = op ? xasprintf("op %s (%s)", name, r->target->triple)
                   : xasprintf("shim %s (%s)", run->manifest.shim_function, r->target->triple);
    argv_add(&a, "-MD");
    argv_add(&a, "-MF");
    argv_addf(&a, "%s.d", job.output);
    argv_add(&a, "-c");
    argv_add(&a, op ? op->source : run->manifest.shim_source);
    argv_add(&a, "-o");
    argv_add(&a, job.output);
    job.argv = argv_finish(&a);
    size_t cap = js->cap;
    grow_array((void **)&js->jobs, &js->cap, js->count + 1, sizeof *js->jobs);
    grow_array((void **)&js->refs, &cap, js->count + 1, sizeof *js->refs);
    js->refs[js->count] = (job_ref){r, op ? &r->ops[op - run->ops.items] : &r->shim, op, false};
    js->jobs[js->count++] = job;
    free(dir);
}

static void free_jobs(job_set *js)
{
    for (size_t i = 0; i < js->count; i++) {
        argv_free(js->jobs[i].argv);
        free(js->jobs[i].output);
        free(js->jobs[i].log);
        free(js->jobs[i].label);
    }
    free(js->jobs);
    free(js->refs);
}

typedef struct done_ctx {
    sg_run *run;
    job_set *js;
    int extract_rc;
} done_ctx;

/* Runs while other compiles are still going: read the object, build the stencil. */
static bool on_compiled(sg_job *job, void *vctx)
{
    done_ctx *ctx = vctx;
    job_ref *ref = job->user;
    const sg_manifest *m = &ctx->run->manifest;
    objfile obj;
    char err[512];
    ref->result->compiled++;
    if (!objfile_load(job->output, &obj, err, sizeof err)) { /* before `where`: no location yet */
        diag_error("%s: %s", job->label, err);
        ref->extract_failed = true;
        ctx->extract_rc = exit_worst(ctx->extract_rc, SG_EXIT_CHECK);
        return false;
    }
    sg_where where = {ref->op ? ref->op->source : m->shim_source, ref->op ? ref->op->line : 0,
                      ref->op ? ref->op->col : 0, job->label};
    sg_extract_ctx ec = {
        .target = ref->result->target,
        .where = &where,
        .entry_symbol = ref->op ? SG_HOLE_ENTRY : m->shim_function,
        .symbols = m->symbols.items,
        .nsymbols = m->symbols.count,
        .remove_trailing_jump = ref->op != NULL,
        .disasm = ref->result->disasm,
    };
    sg_stencil *s = ref->stencil;
    sg_target_result *r = ref->result;
    s->name = xstrdup(ref->op ? ref->op->name : m->shim_function);
    s->source = manifest_relpath(m, ref->op ? ref->op->source : m->shim_source);
    s->line = ref->op ? ref->op->line : 0;
    s->col = ref->op ? ref->op->col : 0;
    bool ok = stencil_extract(&obj, &ec, s);
    if (ok && ref->op)
        ok = fp_check(s, r->disasm, &where);
    if (ok && !ref->op) {
        ok = frame_shape_analyze(&obj, s, r->target, r->disasm, &where, &r->unwind);
        if (ok && r->mt && r->mt->has_pin)
            ok = frame_shape_check_pin(&r->unwind, &r->mt->pin, r->target, m->path, &where);
    }
    objfile_free(&obj);
    if (!ok) {
        ref->extract_failed = true;
        ctx->extract_rc = exit_worst(ctx->extract_rc, SG_EXIT_CHECK);
    }
    return ok;
}

static int compile_all(sg_run *run, job_set *js)
{
    for (size_t t = 0; t < run->nresults; t++) {
        sg_target_result *r = &run->results[t];
        r->disasm = open_disasm(r->target);
        if (!r->disasm)
            return SG_EXIT_TOOLCHAIN;
        r->ops = xcalloc(run->ops.count, sizeof *r->ops);
        add_job(js, run, r, NULL);
        for (size_t i = 0; i < run->ops.count; i++)
            add_job(js, run, r, &run->ops.items[i]);
    }
    for (size_t i = 0; i < js->count; i++) /* refs no longer moves */
        js->jobs[i].user = &js->refs[i];
    sg_compile_opts co = {
        .parallel = run->opt.jobs,
        .timeout = COMPILE_TIMEOUT_S,
        .verbose = run->opt.verbose,
        .progress = isatty(2) && !run->opt.verbose,
    };
    done_ctx ctx = {run, js, SG_EXIT_OK};
    bool spawn_failed;
    size_t failures = compile_run(js->jobs, js->count, &co, on_compiled, &ctx, &spawn_failed);
    if (!failures)
        return SG_EXIT_OK;
    /* A compile that failed, timed out or could not start is a toolchain
     * failure; an object we refused is a check failure. */
    bool toolchain_failed = spawn_failed;
    for (size_t i = 0; i < js->count; i++)
        toolchain_failed |= js->jobs[i].status != 0 && !js->refs[i].extract_failed;
    return toolchain_failed ? SG_EXIT_TOOLCHAIN : ctx.extract_rc;
}

static void print_summary(const sg_run *run)
{
    for (size_t t = 0; t < run->nresults; t++) {
        const sg_target_result *r = &run->results[t];
        size_t code = 0, data = 0, nholes = 0, holes[SG_PATCH__COUNT] = {0};
        for (size_t i = 0; i < run->ops.count; i++) {
            code += r->ops[i].code_size;
            data += r->ops[i].data_size;
            stencil_count_holes(&r->ops[i], holes);
        }
        strbuf kinds = {0};
        for (int k = 0; k < SG_PATCH__COUNT; k++) {
            nholes += holes[k];
            if (holes[k])
                sb_printf(&kinds, "%s%s %zu", kinds.len ? ", " : "",
                          sg_patch_names[k] + strlen("SG_PATCH_"), holes[k]);
        }
        printf("stencilgen: %s: %zu ops (%zu compiled, %zu cached), %zu bytes of code, "
               "%zu bytes of data, %zu holes (%s)\n",
               r->target->triple, run->ops.count, r->compiled ? r->compiled - 1 : 0,
               run->ops.count - (r->compiled ? r->compiled - 1 : 0), code, data, nholes,
               kinds.len ? kinds.data : "none");
        sb_free(&kinds);
    }
}


static int render_and_publish(sg_run *run, const job_set *js)
{
    sg_outputs out = {0};
    for (size_t t = 0; t < run->nresults; t++) {
        strbuf sb = {0};
        writer_target_header(&sb, run, &run->results[t]);
        char *name = writer_target_filename(run->results[t].target);
        outputs_add(&out, path_join(run->opt.outdir, name), sb);
        free(name);
    }
    strbuf disp = {0};
    writer_dispatcher(&disp, run);
    char *dispatcher = path_join(run->opt.outdir, "jit_stencils.h");
    outputs_add(&out, xstrdup(dispatcher), disp);
    if (run->opt.depfile)
        outputs_add(&out, xstrdup(run->opt.depfile), outputs_depfile(run, js->jobs, js->count,
                                                                     dispatcher));
    if (run->opt.compile_commands)
        outputs_add(&out, xstrdup(run->opt.compile_commands),
                    outputs_compile_commands(js->jobs, js->count));
    free(dispatcher);
    return outputs_publish(&out) ? SG_EXIT_OK : SG_EXIT_TOOLCHAIN;
}

static int dump(sg_run *run)
{
    const char *only = run->opt.dump_op;
    bool found = !only;
    for (size_t t = 0; t < run->nresults; t++) {
        const sg_target_result *r = &run->results[t];
        lb_disasm *d = r->disasm;
        for (size_t i = 0; i < run->ops.count; i++) {
            if (only && strcmp(only, r->ops[i].name))
                continue;
            found = true;
            strbuf sb = {0};
            sb_printf(&sb, "op %s (%s) - %s:%u:%u, %zu bytes\n", r->ops[i].name,
                      r->target->triple, r->ops[i].source, r->ops[i].line, r->ops[i].col,
                      r->ops[i].code_size);
            writer_listing(&sb, run, &r->ops[i], d, "  ");
            fputs(sb.data, stdout);
            putchar('\n');
            sb_free(&sb);
        }
        if (!only) {
            strbuf sb = {0};
            sb_printf(&sb, "shim %s (%s) - %s, %zu bytes, entry +0x%zx\n", r->shim.name,
                      r->target->triple, r->shim.source, r->shim.code_size, r->shim.entry);
            writer_listing(&sb, run, &r->shim, d, "  ");
            writer_unwind_rows(&sb, r, "  ");
            fputs(sb.data, stdout);
            sb_free(&sb);
        }
    }
    if (!found) {
        diag_error("no op named '%s' in %s", only, run->manifest.path);
        return SG_EXIT_USAGE;
    }
    return SG_EXIT_OK;
}

static int prepare(sg_run *run)
{
    if (!manifest_load(run->opt.manifest, &run->manifest) || !resolve_targets(run))
        return SG_EXIT_USAGE;
    const char *clang = run->opt.clang ? run->opt.clang : "clang-22";
    run->clang = find_program(clang);
    if (!run->clang) {
        diag_error("cannot find the C compiler '%s' (install clang-22, or pass --clang PATH)",
                   clang);
        return SG_EXIT_TOOLCHAIN;
    }
    if (run->opt.launcher && !find_program(run->opt.launcher)) {
        diag_error("cannot find the compiler launcher '%s'", run->opt.launcher);
        return SG_EXIT_TOOLCHAIN;
    }
    if (run->opt.cache_dir) {
        run->workdir = path_absolute(run->opt.cache_dir);
    } else if (run->opt.outdir) {
        char *w = path_join(run->opt.outdir, ".stencilgen");
        run->workdir = path_absolute(w);
        free(w);
    } else {
        char tmpl[] = "/tmp/stencilgen.XXXXXX";
        if (!mkdtemp(tmpl)) {
            diag_error("cannot create a temporary directory: %s", strerror(errno));
            return SG_EXIT_TOOLCHAIN;
        }
        run->workdir = xstrdup(tmpl);
    }
    if (!mkdir_p(run->workdir)) {
        diag_error("cannot create '%s': %s", run->workdir, strerror(errno));
        return SG_EXIT_TOOLCHAIN;
    }
    return SG_EXIT_OK;
}

static void run_free(sg_run *run, bool remove_workdir)
{
    for (size_t t = 0; t < run->nresults; t++) {
        sg_target_result *r = &run->results[t];
        for (size_t i = 0; r->ops && i < run->ops.count; i++)
            stencil_free(&r->ops[i]);
        free(r->ops);
        stencil_free(&r->shim);
        unwind_free(&r->unwind);
        if (r->disasm)
            lb_disasm_destroy(r->disasm);
    }
    free(run->results);
    if (remove_workdir && run->workdir)
        remove_tree(run->workdir);
    free(run->workdir);
    free(run->clang);
    oplist_free(&run->ops);
    manifest_free(&run->manifest);
}

int pipeline_run(const sg_options *opt)
{
    sg_run run = {.opt = *opt};
    job_set js = {0};
    bool temp_workdir = !opt->cache_dir && !opt->outdir;
    int rc = prepare(&run);
    if (rc == SG_EXIT_OK)
        rc = discover_all(&run);
    if (rc == SG_EXIT_OK)
        rc = compile_all(&run, &js);
    if (rc == SG_EXIT_OK && !strcmp(opt->command, "build"))
        rc = render_and_publish(&run, &js);
    if (rc == SG_EXIT_OK && !strcmp(opt->command, "dump"))
        rc = dump(&run);
    if (rc == SG_EXIT_OK && strcmp(opt->command, "dump"))
        print_summary(&run);
    free_jobs(&js);
    run_free(&run, temp_workdir);
    return rc;
}
