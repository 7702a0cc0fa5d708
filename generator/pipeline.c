/* pipeline.c - one run of the generator: manifest -> discover -> compile ->
 * objfile -> stencil -> writer. Each stage reports its own errors; this file
 * only wires them together and maps failures to exit codes. */
#define _GNU_SOURCE
#include "pipeline.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache.h"
#include "compile.h"
#include "diag.h"
#include "fp_check.h"
#include "llvm_bridge.h"
#include "objfile.h"
#include "opunit.h"
#include "outputs.h"
#include "stencil_cache.h"
#include "util.h"
#include "writer.h"

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
    /* Last, so no -Wall undoes them: an op's unit keeps the file's static
     * helpers and tables, and those another op uses look unused in it. */
    argv_add(a, "-Wno-unused-function");
    argv_add(a, "-Wno-unused-const-variable");
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

/* A copy of the arguments, NULL-terminated, for hashing (freed with argv_free). */
static char **argv_finish_copy(const sg_argv *a)
{
    sg_argv c = {0};
    for (size_t i = 0; i < a->count; i++)
        argv_add(&c, a->items[i]);
    return argv_finish(&c);
}

/* Parse "name line col begin end" lines of a cached discovery into ops of `source`. */
static bool parse_cached_ops(const uint8_t *text, size_t size, const char *source,
                             sg_oplist *out)
{
    char *copy = xstrndup((const char *)text, size);
    bool ok = true;
    for (char *line = strtok(copy, "\n"); line && ok; line = strtok(NULL, "\n")) {
        char name[256];
        unsigned l, c, begin, end;
        ok = sscanf(line, "%255s %u %u %u %u", name, &l, &c, &begin, &end) == 5;
        if (ok) {
            sg_op op = {xstrdup(name), xstrdup(source), l, c, begin, end};
            ARRAY_PUSH(out->items, out->count, out->cap, op);
        }
    }
    free(copy);
    return ok;
}

/* Discovery costs a libclang parse per source; its result is cached under the
 * contents of every file that parse read. Returns an exit code. */
static int discover_cached(sg_run *run, const char *source, const sg_argv *a, uint64_t args)
{
    char *slot = xasprintf("discover/%016llx",
                           (unsigned long long)hash64(source, strlen(source), 0));
    sg_key key;
    uint8_t *text;
    size_t size, before = run->ops.count;
    bool ok;
    if (cache_key_for(run->cache, slot, args, 0, &key) &&
        cache_get(run->cache, &key, "ops", &text, &size)) {
        ok = parse_cached_ops(text, size, source, &run->ops);
        free(text);
        if (ok) {
            free(slot);
            return SG_EXIT_OK;
        }
        while (run->ops.count > before) { /* a damaged entry: discover afresh */
            sg_op *op = &run->ops.items[--run->ops.count];
            free(op->name);
            free(op->source);
        }
    }
    sg_pathlist deps = {0};
    struct timespec since;
    cache_now(&since);
    int rc = discover_ops(source, (const char *const *)a->items, a->count, &run->ops, &deps);
    if (rc == SG_EXIT_OK) {
        strbuf sb = {0};
        for (size_t i = before; i < run->ops.count; i++)
            sb_printf(&sb, "%s %u %u %u %u\n", run->ops.items[i].name, run->ops.items[i].line,
                      run->ops.items[i].col, run->ops.items[i].begin, run->ops.items[i].end);
        if (cache_record(run->cache, slot, args, 0, deps.items, deps.count, &since, &key))
            cache_put(run->cache, &key, "ops", sb.data ? sb.data : "", sb.len);
        sb_free(&sb);
    }
    pathlist_free(&deps);
    free(slot);
    return rc;
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
    /* Errors only: bodies are skipped here, so a static helper or table used
     * only inside ops looks unused, and -Werror would make that an error. The
     * op compiles report every warning. */
    argv_add(&a, "-w");
    int rc = SG_EXIT_OK;
    char **copy = argv_finish_copy(&a);
    uint64_t args = hash64(lb_llvm_version(), strlen(lb_llvm_version()),
                           cache_hash_args(copy, (const char *const[]){NULL}));
    argv_free(copy);
    for (size_t i = 0; i < m->op_sources.count && rc == SG_EXIT_OK; i++) {
        size_t before = run->ops.count;
        rc = discover_cached(run, m->op_sources.items[i], &a, args);
        if (rc == SG_EXIT_OK && run->ops.count == before) {
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
            diag_note_at(y->source, y->line, y->col, "first defined here");
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
    gen_stencil *stencil;
    const sg_op *op; /* NULL for the shim */
    bool extract_failed;
    char *slot;     /* cache slot: "<triple>/<object name>" */
    uint64_t args;  /* hash of the command and the compiler's identity */
    char *deps;     /* the compile's depfile text, for this build's depfile */
    char *tu_key;   /* an op's unit without #line directives: what the cache key hashes */
    char *tu_path;  /* where the unit is written when the op must be compiled */
    uint64_t position; /* the unit's file and lines, for code that compiles them in */
} job_ref;

typedef struct job_set {
    sg_job *jobs;
    job_ref *refs; /* refs[i] describes jobs[i] */
    size_t count, cap;
} job_set;

static void add_job(job_set *js, sg_run *run, sg_target_result *r, const sg_op *op)
{
    const char *name = op ? op->name : "shim";
    char *dir = path_join(run->rundir.path, r->target->triple);
    sg_argv a = {0};
    if (run->opt.launcher)
        argv_add(&a, run->opt.launcher);
    argv_add(&a, run->clang);
    if (op) {
        /* The unit is compiled from the run directory: quoted includes must
         * still find what they find beside the op's own source, first. */
        char *srcdir = path_dirname(op->source);
        argv_add(&a, "-iquote");
        argv_add(&a, srcdir);
        free(srcdir);
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
    /* An op compiles from its own translation unit (written only if needed),
     * alone in its directory: a quoted include never finds a sibling unit. */
    char *tu_path = op ? xasprintf("%s/tu/%s/unit.c", run->rundir.path, op->name) : NULL;
    argv_add(&a, "-c");
    argv_add(&a, op ? tu_path : run->manifest.shim_source);
    argv_add(&a, "-o");
    argv_add(&a, job.output);
    job.argv = argv_finish(&a);
    size_t cap = js->cap;
    grow_array((void **)&js->jobs, &js->cap, js->count + 1, sizeof *js->jobs);
    grow_array((void **)&js->refs, &cap, js->count + 1, sizeof *js->refs);
    js->refs[js->count] = (job_ref){r, op ? &r->ops[op - run->ops.items] : &r->shim, op, false,
                                    NULL, 0, NULL, NULL, tu_path, 0};
    js->jobs[js->count++] = job;
    free(dir);
}

static void free_jobs(job_set *js)
{
    for (size_t i = 0; i < js->count; i++) {
        free(js->refs[i].slot);
        free(js->refs[i].deps);
        free(js->refs[i].tu_key);
        free(js->refs[i].tu_path);
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

/* What the run itself knows of a stencil (not stored in any cache entry: the
 * cache key ignores lines, so an op moved down a file still hits). */
static void name_stencil(const sg_manifest *m, job_ref *ref)
{
    gen_stencil *s = ref->stencil;
    s->name = xstrdup(ref->op ? ref->op->name : m->shim_function);
    s->source = manifest_relpath(m, ref->op ? ref->op->source : m->shim_source);
    s->line = ref->op ? ref->op->line : 0;
    s->col = ref->op ? ref->op->col : 0;
}

/* Build the stencil from an object's bytes and run the checks on it. */
static bool process_object(done_ctx *ctx, sg_job *job, const uint8_t *bytes, size_t size)
{
    job_ref *ref = job->user;
    const sg_manifest *m = &ctx->run->manifest;
    objfile obj;
    char err[512];
    bool parsed = objfile_parse(bytes, size, &obj, err, sizeof err);
    if (!parsed || !objfile_is_for(&obj, ref->result->target->elf_machine, err, sizeof err)) {
        diag_error("%s: %s", job->label, err);
        if (parsed)
            objfile_free(&obj);
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
    gen_stencil *s = ref->stencil;
    sg_target_result *r = ref->result;
    name_stencil(m, ref);
    bool ok = stencil_extract(&obj, &ec, s);
    if (ok) /* once: the check, the header's listing and dump all use it */
        stencil_disassemble(s, r->disasm);
    if (ok && ref->op)
        ok = fp_check(s, &where);
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

/* An op's checked stencil, stored beside its object so that the next run
 * need not read, extract, check or disassemble the object again. */
static void cache_stencil(sg_cache *cache, const job_ref *ref, const sg_key *key)
{
    const sg_target_result *r = ref->result;
    if (!ref->op || !r->stencil_cache || !ref->deps)
        return;
    strbuf sb = {0};
    stencil_cache_encode(&sb, ref->stencil, ref->deps, r->stencil_context);
    cache_put(cache, key, "stencil", sb.data, sb.len);
    sb_free(&sb);
}

/* A verified, decodable "stencil" entry stands in for the object and every
 * step after it. A damaged one is a miss: the caller falls back to the object. */
static bool use_cached_stencil(done_ctx *ctx, job_ref *ref, const sg_key *key)
{
    sg_cache *cache = ctx->run->cache;
    sg_target_result *r = ref->result;
    uint8_t *blob;
    size_t size;
    if (!ref->op || !r->stencil_cache || !cache_get(cache, key, "stencil", &blob, &size))
        return false;
    char err[256];
    bool ok = stencil_cache_decode(blob, size, r->stencil_context,
                                   ctx->run->manifest.symbols.count, ref->stencil, &ref->deps,
                                   err, sizeof err);
    free(blob);
    if (!ok) {
        if (ctx->run->opt.verbose)
            diag_note("op %s (%s): cached stencil not used: %s", ref->op->name,
                      r->target->triple, err);
        return false;
    }
    name_stencil(&ctx->run->manifest, ref);
    r->stencils_cached++;
    return true;
}

/* Store a fresh object under the key of the files its compile read, unless
 * one of them changed after the compile started (then the object may be of
 * other bytes than the key names). Sets *key and returns true when stored. */
static bool cache_object(sg_cache *cache, const job_ref *ref, const struct timespec *since,
                         const uint8_t *dtext, size_t dsize, const uint8_t *obj, size_t size,
                         sg_key *key)
{
    char **deps = NULL;
    size_t n = 0, cap = 0;
    outputs_parse_deps(dtext, dsize, &deps, &n, &cap);
    if (ref->tu_path) { /* the unit itself is hashed into ref->args */
        for (size_t i = 0; i < n; i++) {
            if (!strcmp(deps[i], ref->tu_path)) {
                free(deps[i]);
                deps[i] = deps[--n];
                break;
            }
        }
    }
    bool ok = cache_record(cache, ref->slot, ref->args, ref->position, deps, n, since, key) &&
              cache_put(cache, key, "d", dtext, dsize) && cache_put(cache, key, "o", obj, size);
    for (size_t i = 0; i < n; i++)
        free(deps[i]);
    free(deps);
    return ok;
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
static void keep_for_inspection(const sg_run *run, const job_ref *ref, const sg_job *job)
{
    const char *base = strrchr(job->output, '/');
    char *dest = xasprintf("%s/%s%s", run->workdir, ref->result->target->triple, base);
    rename(job->output, dest);
    free(dest);
    if (!ref->op)
        return;
    /* Linked, not moved: every target's job compiles the same unit. */
    char *unit = xasprintf("%s/tu/%s/unit.c", run->workdir, ref->op->name);
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

/* Runs while other compiles are still going: cache the object, build the stencil. */
static bool on_compiled(sg_job *job, void *vctx)
{
    done_ctx *ctx = vctx;
    job_ref *ref = job->user;
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
    if (ref->op)
        ref->result->compiled++;
    ref->deps = xstrndup((const char *)dtext, dsize);
    sg_key key;
    bool stored = cache_object(ctx->run->cache, ref, &job->started, dtext, dsize, bytes, size,
                               &key);
    free(dtext);
    bool ok = process_object(ctx, job, bytes, size);
    free(bytes);
    keep_for_inspection(ctx->run, ref, job);
    if (ok && stored)
        cache_stencil(ctx->run->cache, ref, &key);
    return ok;
}

/* The compiler's identity for cache keys: its path, size and modification time
 * (stat only: a no-op build must not run the compiler). */
static uint64_t compiler_identity(const sg_run *run)
{
    struct stat st;
    uint64_t h = hash64(run->clang, strlen(run->clang), 0);
    if (stat(run->clang, &st) == 0) {
        int64_t facts[3] = {(int64_t)st.st_size, (int64_t)st.st_mtim.tv_sec,
                            (int64_t)st.st_mtim.tv_nsec};
        h = hash64(facts, sizeof facts, h);
    }
    if (run->opt.launcher)
        h = hash64(run->opt.launcher, strlen(run->opt.launcher), h);
    return h;
}

/* Each op source is read once per run, so an op's cache key and the unit it
 * compiles come from the same bytes. */
typedef struct source_text {
    const char *path;
    uint8_t *text; /* NULL when it cannot be read */
    size_t size;
} source_text;

typedef struct source_texts {
    source_text *items;
    size_t count, cap;
} source_texts;

static const source_text *source_of(source_texts *st, const char *path)
{
    for (size_t i = 0; i < st->count; i++)
        if (!strcmp(st->items[i].path, path))
            return &st->items[i];
    source_text t = {path, NULL, 0};
    if (!read_file(path, &t.text, &t.size))
        t.text = NULL;
    ARRAY_PUSH(st->items, st->count, st->cap, t);
    return &st->items[st->count - 1];
}

static void source_texts_free(source_texts *st)
{
    for (size_t i = 0; i < st->count; i++)
        free(st->items[i].text);
    free(st->items);
}

static op_unit unit_of(const sg_run *run, source_texts *texts, const sg_op *op, bool want_unit)
{
    const source_text *src = source_of(texts, op->source);
    if (src->text)
        return op_translation_unit(&run->ops, op, (const char *)src->text, src->size, want_unit);
    op_unit u = {{0}, {0}, 0}; /* the compile will say what is wrong */
    sb_puts(&u.key, "");
    sb_puts(&u.unit, "#error \"cannot read the op source\"\n");
    return u;
}

/* Every op's cache key: its unit's text, and its position (the file name as
 * __FILE__ gives it, and the lines) for code that compiles positions in. */
static void key_translation_units(sg_run *run, job_set *js, source_texts *texts)
{
    for (size_t i = 0; i < js->count; i++) {
        job_ref *ref = &js->refs[i];
        if (!ref->op)
            continue;
        op_unit u = unit_of(run, texts, ref->op, false);
        char *rel = manifest_relpath(&run->manifest, ref->op->source);
        ref->position = hash64(rel, strlen(rel) + 1, u.position);
        free(rel);
        ref->tu_key = u.key.data;
        sb_free(&u.unit);
    }
}

/* Write the unit of every op that must compile. A unit that cannot be written
 * fails its op (exit 3): compiling anything else in its place would be wrong. */
static size_t write_translation_units(sg_run *run, job_set *js, source_texts *texts)
{
    size_t failed = 0;
    for (size_t i = 0; i < js->count; i++) {
        job_ref *ref = &js->refs[i];
        sg_job *job = &js->jobs[i];
        if (!ref->op || job->skip)
            continue;
        op_unit u = unit_of(run, texts, ref->op, true);
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

/* A verified cache entry stands in for the compile: the job is skipped. */
static bool try_cached(done_ctx *ctx, sg_job *job, uint64_t identity)
{
    /* Paths of this run's own files do not count: an op's unit (after -c) is
     * hashed by its text, its object and depfile are outputs. */
    static const char *const shim_paths[] = {"-o", "-MF", NULL};
    static const char *const op_paths[] = {"-o", "-MF", "-c", NULL};
    job_ref *ref = job->user;
    sg_cache *cache = ctx->run->cache;
    const char *base = strrchr(job->output, '/');
    ref->slot = xasprintf("%s/%s", ref->result->target->triple, base ? base + 1 : job->output);
    ref->args = hash64(&identity, sizeof identity,
                       cache_hash_args(job->argv, ref->op ? op_paths : shim_paths));
    if (ref->tu_key) {
        ref->args = hash64(ref->tu_key, strlen(ref->tu_key), ref->args);
        if (text_mentions_position(ref->tu_key, strlen(ref->tu_key)))
            ref->args = hash64(&ref->position, sizeof ref->position, ref->args);
    }
    sg_key key;
    uint8_t *obj, *dtext;
    size_t size, dsize;
    if (!cache_key_for(cache, ref->slot, ref->args, ref->position, &key))
        return false;
    if (use_cached_stencil(ctx, ref, &key)) {
        job->skip = true;
        ref->result->cached++;
        return true;
    }
    if (!cache_get(cache, &key, "d", &dtext, &dsize))
        return false;
    if (!cache_get(cache, &key, "o", &obj, &size)) {
        free(dtext);
        return false;
    }
    ref->deps = xstrndup((const char *)dtext, dsize);
    free(dtext);
    job->skip = true;
    if (ref->op)
        ref->result->cached++;
    if (!process_object(ctx, job, obj, size))
        job->status = -1;
    else
        cache_stencil(cache, ref, &key);
    free(obj);
    return true;
}

/* What an op's checked stencil depends on besides its object (and so, its
 * cache key): this generator build (extraction and checks may change with it),
 * the LLVM that printed the instructions, the target, and the run-time symbol
 * list (holes name symbols by number). The generator is known by its
 * executable's size, modification time and inode; without them, no stencil
 * cache. */
static bool stencil_context(const sg_run *run, const sg_target_result *r, uint64_t *context)
{
    struct stat st;
    if (stat("/proc/self/exe", &st) != 0)
        return false;
    int64_t facts[4] = {(int64_t)st.st_size, (int64_t)st.st_mtim.tv_sec,
                        (int64_t)st.st_mtim.tv_nsec, (int64_t)st.st_ino};
    uint64_t h = hash64(facts, sizeof facts, STENCIL_CACHE_VERSION);
    h = hash64(lb_llvm_version(), strlen(lb_llvm_version()) + 1, h);
    h = hash64(r->target->triple, strlen(r->target->triple) + 1, h);
    for (size_t i = 0; i < run->manifest.symbols.count; i++)
        h = hash64(run->manifest.symbols.items[i], strlen(run->manifest.symbols.items[i]) + 1, h);
    *context = h;
    return true;
}

/* stencilgen needs clang 22: -mframe-pointer=reserved keeps x86-64 code off
 * %rbp only from 22 on (19 ignores it, 14 rejects it), and stencils use
 * preserve_none (19 on). */
#define MIN_CLANG_MAJOR 22

/* Ask the compiler for the macros it predefines (vendors reword --version,
 * never __clang_major__) before compiling anything with it: one clear error
 * instead of one per op. Returns an exit code. */
static int check_compiler(const sg_run *run, const sg_compile_opts *co, uint64_t identity)
{
    /* Once per compiler: the verdict is cached under its identity. */
    sg_key key = {{identity, identity ^ 0x636c616e67ull /* "clang" */}};
    uint8_t *seen;
    size_t seen_size;
    if (cache_get(run->cache, &key, "clang-ok", &seen, &seen_size)) {
        free(seen);
        return SG_EXIT_OK;
    }
    char *out = path_join(run->rundir.path, "compiler-macros.h");
    char *argv[] = {run->clang, "-dM", "-E", "-x", "c", "/dev/null", "-o", out, NULL};
    char *log = path_join(run->rundir.path, "compiler-check.log");
    char *label = xasprintf("the C compiler '%s' (asked for its version)", run->clang);
    sg_job job = {.argv = argv, .output = out, .log = log, .label = label};
    bool spawn_failed;
    int rc = SG_EXIT_TOOLCHAIN;
    uint8_t *text = NULL;
    size_t size = 0;
    if (compile_run(&job, 1, co, NULL, NULL, &spawn_failed) == 0 && read_file(out, &text, &size)) {
        char *macros = xstrndup((const char *)text, size);
        const char *m = strstr(macros, "#define __clang_major__ ");
        int major = m ? atoi(m + strlen("#define __clang_major__ ")) : 0;
        if (!m)
            diag_error("'%s' is not clang (it does not define __clang_major__); stencilgen needs "
                       "clang %d or newer", run->clang, MIN_CLANG_MAJOR);
        else if (major < MIN_CLANG_MAJOR)
            diag_error("'%s' is clang %d; stencilgen needs clang %d or newer "
                       "(-mframe-pointer=reserved keeps x86-64 stencils off %%rbp only from "
                       "clang 22 on, and stencils use preserve_none)",
                       run->clang, major, MIN_CLANG_MAJOR);
        else
            rc = SG_EXIT_OK;
        if (rc == SG_EXIT_OK)
            cache_put(run->cache, &key, "clang-ok", m, strcspn(m, "\n"));
        free(macros);
    }
    free(text);
    free(out);
    free(log);
    free(label);
    return rc;
}

/* Per target: the run's own object directory, and the one objects are kept in. */
static bool make_target_dirs(const sg_run *run, const sg_target *t)
{
    char *own = path_join(run->rundir.path, t->triple);
    char *kept = path_join(run->workdir, t->triple);
    bool ok = mkdir_p(own) && mkdir_p(kept);
    if (!ok)
        diag_error("cannot create '%s' or '%s': %s", own, kept, strerror(errno));
    free(own);
    free(kept);
    return ok;
}

static int compile_all(sg_run *run, job_set *js)
{
    for (size_t t = 0; t < run->nresults; t++) {
        sg_target_result *r = &run->results[t];
        r->disasm = open_disasm(r->target);
        if (!r->disasm || !make_target_dirs(run, r->target))
            return SG_EXIT_TOOLCHAIN;
        r->stencil_cache = stencil_context(run, r, &r->stencil_context);
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
    };
    done_ctx ctx = {run, js, SG_EXIT_OK};
    uint64_t identity = compiler_identity(run);
    size_t failures = 0;
    source_texts texts = {0};
    key_translation_units(run, js, &texts);
    for (size_t i = 0; i < js->count; i++)
        if (try_cached(&ctx, &js->jobs[i], identity))
            failures += js->jobs[i].status != 0;
    failures += write_translation_units(run, js, &texts);
    source_texts_free(&texts);
    bool must_compile = false;
    for (size_t i = 0; i < js->count; i++)
        must_compile |= !js->jobs[i].skip;
    if (must_compile && check_compiler(run, &co, identity) != SG_EXIT_OK)
        return SG_EXIT_TOOLCHAIN;
    bool spawn_failed;
    failures += compile_run(js->jobs, js->count, &co, on_compiled, &ctx, &spawn_failed);
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
        sg_totals tot = stencil_totals(r->ops, run->ops.count);
        strbuf kinds = {0};
        for (int k = 0; k < SG_PATCH__COUNT; k++) {
            if (tot.by_patch[k])
                sb_printf(&kinds, "%s%s %zu", kinds.len ? ", " : "",
                          sg_patch_infos[k].name, tot.by_patch[k]);
        }
        printf("stencilgen: %s: %zu ops (%zu compiled, %zu cached), %zu bytes of code, "
               "%zu bytes of data, %zu holes (%s)\n",
               r->target->triple, run->ops.count, r->compiled, r->cached, tot.code, tot.data,
               tot.holes, kinds.len ? kinds.data : "none");
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
    if (run->opt.depfile) {
        char **texts = xcalloc(js->count, sizeof *texts);
        for (size_t i = 0; i < js->count; i++)
            texts[i] = js->refs[i].deps;
        strbuf dep;
        bool ok = outputs_depfile(run, texts, js->count, dispatcher, &dep);
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
    return outputs_publish(&out) ? SG_EXIT_OK : SG_EXIT_TOOLCHAIN;
}

static int dump(sg_run *run)
{
    const char *only = run->opt.dump_op;
    bool found = !only;
    for (size_t t = 0; t < run->nresults; t++) {
        const sg_target_result *r = &run->results[t];
        for (size_t i = 0; i < run->ops.count; i++) {
            if (only && strcmp(only, r->ops[i].name))
                continue;
            found = true;
            strbuf sb = {0};
            sb_printf(&sb, "op %s (%s) - %s:%u:%u, %zu bytes\n", r->ops[i].name,
                      r->target->triple, r->ops[i].source, r->ops[i].line, r->ops[i].col,
                      r->ops[i].code_size);
            writer_listing(&sb, run, &r->ops[i], "  ");
            fputs(sb.data, stdout);
            putchar('\n');
            sb_free(&sb);
        }
        if (!only) {
            strbuf sb = {0};
            sb_printf(&sb, "shim %s (%s) - %s, %zu bytes, entry +0x%zx\n", r->shim.name,
                      r->target->triple, r->shim.source, r->shim.code_size, r->shim.entry);
            writer_listing(&sb, run, &r->shim, "  ");
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

/* Every file a build writes must be a different file: a --depfile naming a
 * header would overwrite it. */
static bool outputs_do_not_collide(const sg_run *run)
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

static int prepare(sg_run *run)
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
    char *launcher = run->opt.launcher ? find_program(run->opt.launcher) : NULL;
    if (run->opt.launcher && !launcher) {
        diag_error("cannot find the compiler launcher '%s'", run->opt.launcher);
        return SG_EXIT_TOOLCHAIN;
    }
    free(launcher); /* the launcher runs by name, as given */
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
            return SG_EXIT_TOOLCHAIN;
        }
        run->workdir = tmpl;
    }
    if (!mkdir_p(run->workdir)) {
        diag_error("cannot create '%s': %s", run->workdir, strerror(errno));
        return SG_EXIT_TOOLCHAIN;
    }
    run->cache = cache_open(run->workdir);
    if (!rundir_create(run->workdir, &run->rundir)) {
        diag_error("cannot create a run directory in '%s': %s", run->workdir, strerror(errno));
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
    rundir_remove(&run->rundir);
    cache_close(run->cache); /* before removing a temporary workdir: it writes there */
    if (remove_workdir && run->workdir)
        remove_tree(run->workdir);
    free(run->workdir);
    free(run->clang);
    oplist_free(&run->ops);
    manifest_free(&run->manifest);
}

int pipeline_run(const sg_options *opt)
{
    sg_run run = {.opt = *opt, .rundir = {NULL, -1}};
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
        rc = compile_all(&run, &js);
    if (dumping)
        diag_capture(outer);
    double t2 = now_seconds();
    if (rc == SG_EXIT_OK && !strcmp(opt->command, "build"))
        rc = render_and_publish(&run, &js);
    if (opt->verbose) {
        size_t stencils = 0;
        for (size_t t = 0; t < run.nresults; t++)
            stencils += run.results[t].stencils_cached;
        fprintf(stderr, "stencilgen: discovery %.3f s, compile and read objects %.3f s "
                        "(%zu cached stencils), write %.3f s\n",
                t1 - t0, t2 - t1, stencils, now_seconds() - t2);
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
    free_jobs(&js);
    run_free(&run, temp_workdir);
    return rc;
}
