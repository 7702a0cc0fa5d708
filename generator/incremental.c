/* incremental.c - see incremental.h. */
#define _GNU_SOURCE /* st_mtim */
#include "incremental.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "diag.h"
#include "llvm_bridge.h"
#include "opunit.h"
#include "outputs.h"
#include "stencil_blob.h"
#include "util.h"

/* The compiler's identity for cache keys: its path, size and modification time
 * (stat only: a no-op build must not run the compiler). */
static uint64_t compiler_identity(const char *clang, const char *launcher)
{
    struct stat st;
    uint64_t h = hash64(clang, strlen(clang), 0);
    if (stat(clang, &st) == 0) {
        int64_t facts[3] = {(int64_t)st.st_size, (int64_t)st.st_mtim.tv_sec,
                            (int64_t)st.st_mtim.tv_nsec};
        h = hash64(facts, sizeof facts, h);
    }
    if (launcher)
        h = hash64(launcher, strlen(launcher), h);
    return h;
}

/* What an op's checked stencil depends on besides its object and target: this
 * generator build (extraction and checks may change with it), the LLVM that
 * printed the instructions, and the run-time symbol list (holes name symbols
 * by number). The generator is known by its executable's size, modification
 * time and inode; without them, no stencil cache. */
static bool generator_identity(char *const *symbols, size_t nsymbols, uint64_t *id)
{
    struct stat st;
    if (stat("/proc/self/exe", &st) != 0)
        return false;
    int64_t facts[4] = {(int64_t)st.st_size, (int64_t)st.st_mtim.tv_sec,
                        (int64_t)st.st_mtim.tv_nsec, (int64_t)st.st_ino};
    uint64_t h = hash64(facts, sizeof facts, STENCIL_BLOB_VERSION);
    h = hash64(lb_llvm_version(), strlen(lb_llvm_version()) + 1, h);
    for (size_t i = 0; i < nsymbols; i++)
        h = hash64(symbols[i], strlen(symbols[i]) + 1, h);
    *id = h;
    return true;
}

void inc_open(sg_incremental *inc, sg_cache *cache, const char *clang, const char *launcher,
              char *const *symbols, size_t nsymbols, bool verbose)
{
    inc->cache = cache;
    inc->compiler = compiler_identity(clang, launcher);
    inc->stencils = generator_identity(symbols, nsymbols, &inc->generator);
    inc->nsymbols = nsymbols;
    inc->verbose = verbose;
}

/* ---- the compiler's version check, once per compiler */

static sg_key compiler_key(const sg_incremental *inc)
{
    return (sg_key){{inc->compiler, inc->compiler ^ 0x636c616e67ull /* "clang" */}};
}

bool inc_compiler_verified(sg_incremental *inc)
{
    sg_key key = compiler_key(inc);
    uint8_t *seen;
    size_t size;
    if (!cache_get(inc->cache, &key, "clang-ok", &seen, &size))
        return false;
    free(seen);
    return true;
}

void inc_compiler_verdict(sg_incremental *inc)
{
    sg_key key = compiler_key(inc);
    cache_put(inc->cache, &key, "clang-ok", "ok", 2);
}

/* ---- discovery */

/* Parse "name prefixed line col begin end" lines of a cached discovery into ops of `source`. */
static bool parse_cached_ops(const uint8_t *text, size_t size, const char *source,
                             sg_oplist *out)
{
    char *copy = xstrndup((const char *)text, size);
    bool ok = true;
    for (char *line = strtok(copy, "\n"); line && ok; line = strtok(NULL, "\n")) {
        char name[256];
        unsigned prefixed, l, c, begin, end;
        ok = sscanf(line, "%255s %u %u %u %u %u", name, &prefixed, &l, &c, &begin, &end) == 6 &&
             prefixed <= 1;
        if (ok) {
            sg_op op = {xstrdup(name), prefixed, xstrdup(source), l, c, begin, end};
            ARRAY_PUSH(out->items, out->count, out->cap, op);
        }
    }
    free(copy);
    return ok;
}

static void drop_ops_after(sg_oplist *ops, size_t count)
{
    while (ops->count > count) {
        sg_op *op = &ops->items[--ops->count];
        free(op->name);
        free(op->source);
    }
}

/* Discovery costs a libclang parse per source; its result is cached under the
 * contents of every file that parse read. */
int inc_discover(sg_incremental *inc, const char *source, const sg_argv *a, sg_oplist *ops)
{
    sg_argv copy = {0};
    for (size_t i = 0; i < a->count; i++)
        argv_add(&copy, a->items[i]);
    char **argv = argv_finish(&copy);
    uint64_t args = hash64(lb_llvm_version(), strlen(lb_llvm_version()),
                           cache_hash_args(argv, (const char *const[]){NULL}));
    argv_free(argv);
    char *slot = xasprintf("discover/%016llx",
                           (unsigned long long)hash64(source, strlen(source), 0));
    size_t before = ops->count;
    sg_key key;
    uint8_t *text;
    size_t size;
    if (cache_key_for(inc->cache, slot, args, 0, &key) &&
        cache_get(inc->cache, &key, "ops", &text, &size)) {
        bool ok = parse_cached_ops(text, size, source, ops);
        free(text);
        if (ok) {
            free(slot);
            return SG_EXIT_OK;
        }
        drop_ops_after(ops, before); /* a damaged entry: discover afresh */
    }
    sg_pathlist deps = {0};
    struct timespec since;
    cache_now(&since);
    int rc = discover_ops(source, (const char *const *)a->items, a->count, ops, &deps);
    if (rc == SG_EXIT_OK) {
        strbuf sb = {0};
        for (size_t i = before; i < ops->count; i++)
            sb_printf(&sb, "%s %u %u %u %u %u\n", ops->items[i].name,
                      (unsigned)ops->items[i].prefixed, ops->items[i].line,
                      ops->items[i].col, ops->items[i].begin, ops->items[i].end);
        if (cache_record(inc->cache, slot, args, 0, deps.items, deps.count, &since, &key))
            cache_put(inc->cache, &key, "ops", sb.data ? sb.data : "", sb.len);
        sb_free(&sb);
    }
    pathlist_free(&deps);
    free(slot);
    return rc;
}

/* ---- compiles */

void inc_unit_init(const sg_incremental *inc, inc_unit *u, const char *triple, const sg_job *job,
                   const char *tu_key, uint64_t position, const char *tu_path)
{
    /* Paths of this run's own files do not count: an op's unit (after -c) is
     * hashed by its text, its object and depfile are outputs. */
    static const char *const shim_paths[] = {"-o", "-MF", NULL};
    static const char *const op_paths[] = {"-o", "-MF", "-c", NULL};
    const char *base = strrchr(job->output, '/');
    *u = (inc_unit){.position = position, .tu_path = tu_path, .op = tu_key != NULL};
    u->slot = xasprintf("%s/%s", triple, base ? base + 1 : job->output);
    u->args = hash64(&inc->compiler, sizeof inc->compiler,
                     cache_hash_args(job->argv, u->op ? op_paths : shim_paths));
    if (tu_key) {
        u->args = hash64(tu_key, strlen(tu_key), u->args);
        if (text_mentions_position(tu_key, strlen(tu_key)))
            u->args = hash64(&position, sizeof position, u->args);
    }
    u->context = hash64(triple, strlen(triple) + 1, inc->generator);
}

void inc_unit_free(inc_unit *u)
{
    free(u->slot);
    u->slot = NULL;
}

/* The shim's "unwind" entry: this generator's context, then the payload. */
static bool cached_unwind(sg_incremental *inc, const inc_unit *u, uint8_t **out, size_t *size)
{
    uint8_t *e;
    size_t n;
    if (!cache_get(inc->cache, &u->key, "unwind", &e, &n))
        return false;
    if (n < 8 || load_le(e, 8) != u->context) {
        free(e);
        return false;
    }
    memmove(e, e + 8, n - 8);
    *out = e;
    *size = n - 8;
    return true;
}

/* A verified, decodable "stencil" entry stands in for the object and every
 * step after it. A damaged one is a miss: the caller falls back to the object. */
static bool cached_stencil(sg_incremental *inc, const inc_unit *u, const char *label,
                           gen_stencil *s, char **deps, uint8_t **unwind, size_t *unwind_size)
{
    uint8_t *blob;
    size_t size;
    if (!inc->stencils || (!u->op && !cached_unwind(inc, u, unwind, unwind_size)))
        return false;
    if (!cache_get(inc->cache, &u->key, "stencil", &blob, &size)) {
        if (!u->op)
            free(*unwind);
        return false;
    }
    char err[256];
    bool ok = stencil_blob_decode(blob, size, u->context, inc->nsymbols, s, deps, err,
                                   sizeof err);
    free(blob);
    if (!ok && !u->op)
        free(*unwind);
    if (!ok && inc->verbose)
        diag_note("%s: cached stencil not used: %s", label, err);
    return ok;
}

inc_hit inc_lookup(sg_incremental *inc, inc_unit *u, const char *label, gen_stencil *stencil,
                   uint8_t **object, size_t *size, char **deps, uint8_t **unwind,
                   size_t *unwind_size)
{
    uint8_t *dtext;
    size_t dsize;
    u->keyed = cache_key_for(inc->cache, u->slot, u->args, u->position, &u->key);
    if (!u->keyed)
        return INC_MISS;
    if (cached_stencil(inc, u, label, stencil, deps, unwind, unwind_size))
        return INC_STENCIL;
    if (!cache_get(inc->cache, &u->key, "d", &dtext, &dsize))
        return INC_MISS;
    if (!cache_get(inc->cache, &u->key, "o", object, size)) {
        free(dtext);
        return INC_MISS;
    }
    *deps = xstrndup((const char *)dtext, dsize);
    free(dtext);
    return INC_OBJECT;
}

/* Store a fresh object under the key of the files its compile read, unless
 * one of them changed after the compile started (then the object may be of
 * other bytes than the key names). */
static bool store_object(sg_incremental *inc, inc_unit *u, const inc_output *out)
{
    char **deps = NULL;
    size_t n = 0, cap = 0;
    outputs_parse_deps(out->deps, out->deps_size, &deps, &n, &cap);
    if (u->tu_path) { /* the unit itself is hashed into u->args */
        for (size_t i = 0; i < n; i++) {
            if (!strcmp(deps[i], u->tu_path)) {
                free(deps[i]);
                deps[i] = deps[--n];
                break;
            }
        }
    }
    bool ok = cache_record(inc->cache, u->slot, u->args, u->position, deps, n, out->started,
                           &u->key) &&
              (out->key_only ||
               (cache_put(inc->cache, &u->key, "d", out->deps, out->deps_size) &&
               cache_put(inc->cache, &u->key, "o", out->object, out->size)));
    for (size_t i = 0; i < n; i++)
        free(deps[i]);
    free(deps);
    return ok;
}

void inc_store(sg_incremental *inc, inc_unit *u, const inc_output *fresh,
               const gen_stencil *checked, const char *deps, const strbuf *unwind)
{
    if (fresh)
        u->keyed = store_object(inc, u, fresh);
    /* The checked stencil, stored beside its object so that the next run need
     * not read, extract, check or disassemble the object again (nor load
     * LLVM to do it); the shim's unwind entry first, as its stencil entry
     * alone is no hit. */
    if (!u->keyed || !checked || !inc->stencils || !deps || (!u->op && !unwind))
        return;
    if (!u->op) {
        strbuf e = {0};
        sb_put_le(&e, u->context, 8);
        sb_putn(&e, unwind->data, unwind->len);
        bool put = cache_put(inc->cache, &u->key, "unwind", e.data, e.len);
        sb_free(&e);
        if (!put)
            return;
    }
    strbuf sb = {0};
    stencil_blob_encode(&sb, checked, deps, u->context);
    cache_put(inc->cache, &u->key, "stencil", sb.data, sb.len);
    sb_free(&sb);
}
