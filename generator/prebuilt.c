/* prebuilt.c - `stencilgen check-prebuilt`: which ops of which targets of a
 * directory of prebuilt headers are stale, and why, from the provenance each
 * header records (provenance.h). It reads the manifest, the headers and the
 * files they name, and nothing else: no compiler runs and the LLVM module is
 * never loaded (llvm_loader.c loads it on first use only), so the executable
 * answers on a machine with no LLVM (docs/build.md, "Prebuilt headers"). */
#define _GNU_SOURCE
#include "prebuilt.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "diag.h"
#include "manifest.h"
#include "provenance.h"
#include "target.h"
#include "../runtime/stencilrt_abi.h" /* the ABI, owned by the runtime */
#include "util.h"

typedef struct pb_options {
    const char *manifest, *prebuilt;
    const char **targets;
    size_t ntargets;
    bool no_hot_cold; /* the headers are to be laid out whole, as --no-hot-cold builds them */
} pb_options;

/* One sg-file line: a file some compile read, and its digest then. */
typedef struct pb_file {
    char *name;
    char recorded[PROV_DIGEST_HEX + 1];
} pb_file;

/* An sg-op or sg-shim line. */
typedef struct pb_op {
    char *name, *source;
    bool whole;
    prov_digest at;
    char unit[PROV_DIGEST_HEX + 1], flags[PROV_DIGEST_HEX + 1];
    size_t *reads; /* indices into the record's files */
    size_t nreads;
    size_t absent; /* its list of paths looked for and not found, or SIZE_MAX */
} pb_op;

/* An sg-absent line: paths some compiles looked for and did not find. */
typedef struct pb_absent {
    char **names;
    size_t count;
} pb_absent;

/* One header's record. The shim is ops[0] (its name NULL), the ops follow
 * in header order. */
typedef struct pb_record {
    char *generator, *abi;
    const char *layout; /* "hot-cold" or "whole" */
    pb_file *files;
    size_t nfiles, files_cap;
    pb_op *ops;
    size_t nops, ops_cap;
    pb_absent *absent;
    size_t nabsent, absent_cap;
    bool has_shim;
    int format; /* sg-provenance's number */
    char *text; /* the record's lines, tokens cut in place */
} pb_record;

/* Digests of the files as they are now, by relative name: several targets
 * read the same files. */
typedef struct pb_now_file {
    char *name;
    prov_digest digest;
    bool present;
} pb_now_file;

typedef struct pb_now {
    pb_now_file *items;
    size_t count, cap;
} pb_now;

static int cmp_file(const void *key, const void *item)
{
    return strcmp((const char *)key, ((const pb_file *)item)->name);
}

static bool digest_token(const pb_record *r, const char *tok, char out[PROV_DIGEST_HEX + 1])
{
    /* formats 1 and 2 wrote 32 digits a digest */
    size_t n = r->format < PROV_SHA256_FORMAT ? 32 : PROV_DIGEST_HEX;
    if (!tok || strlen(tok) != n || strspn(tok, "0123456789abcdef") != n)
        return false;
    memcpy(out, tok, n + 1);
    return true;
}

static char *next_token(char **save)
{
    return strtok_r(NULL, " ", save);
}

/* "NAME DIGEST" after sg-file; names arrive sorted (prov_write). */
static bool parse_file(pb_record *r, char **save)
{
    char *name = next_token(save), *d = next_token(save);
    pb_file f = {name, {0}};
    if (!name || !prov_decode_name(name) || !digest_token(r, d, f.recorded) || next_token(save))
        return false;
    if (r->nfiles && strcmp(r->files[r->nfiles - 1].name, name) >= 0)
        return false;
    ARRAY_PUSH(r->files, r->nfiles, r->files_cap, f);
    return true;
}

/* "L NAME..." after sg-absent: list L, numbered from 0 in order. */
static bool parse_absent(pb_record *r, char **save)
{
    char *n = next_token(save), *end = NULL;
    if (!n || strtoul(n, &end, 10) != r->nabsent || *end)
        return false;
    pb_absent a = {0};
    size_t cap = 0;
    for (char *tok; (tok = next_token(save));) {
        if (!prov_decode_name(tok)) {
            free(a.names);
            return false;
        }
        ARRAY_PUSH(a.names, a.count, cap, tok);
    }
    ARRAY_PUSH(r->absent, r->nabsent, r->absent_cap, a);
    return a.count > 0;
}

/* "[absent L] reads NAME..." after an op's or the shim's digests. */
static bool parse_reads(pb_record *r, pb_op *op, char **save)
{
    char *tok = next_token(save);
    op->absent = SIZE_MAX;
    if (tok && !strcmp(tok, "absent")) {
        char *n = next_token(save), *end = NULL;
        if (!n || (op->absent = strtoul(n, &end, 10)) >= r->nabsent || *end)
            return false;
        tok = next_token(save);
    }
    if (!tok || strcmp(tok, "reads"))
        return false;
    size_t cap = 0;
    while ((tok = next_token(save))) {
        if (!prov_decode_name(tok))
            return false;
        pb_file *f = bsearch(tok, r->files, r->nfiles, sizeof *r->files, cmp_file);
        if (!f)
            return false;
        ARRAY_PUSH(op->reads, op->nreads, cap, (size_t)(f - r->files));
    }
    return true;
}

static bool expect(char **save, const char *word)
{
    const char *tok = next_token(save);
    return tok && !strcmp(tok, word);
}

/* "[NAME] SOURCE (at D | whole) unit D flags D reads ..." (the shim has no
 * name and no at). */
static bool parse_op(pb_record *r, char **save, bool shim)
{
    pb_op op = {0};
    op.name = shim ? NULL : next_token(save);
    op.source = next_token(save);
    if ((!shim && !op.name) || !op.source || !prov_decode_name(op.source))
        return false;
    if (!shim) {
        char *how = next_token(save);
        if (how && !strcmp(how, "whole"))
            op.whole = true;
        else if (!how || strcmp(how, "at") || !digest_token(r, next_token(save), op.at.hex))
            return false;
    }
    bool ok = expect(save, "unit") && digest_token(r, next_token(save), op.unit) &&
              expect(save, "flags") && digest_token(r, next_token(save), op.flags) &&
              parse_reads(r, &op, save);
    if (!ok) {
        free(op.reads);
        return false;
    }
    ARRAY_PUSH(r->ops, r->nops, r->ops_cap, op);
    return true;
}

static bool parse_line(pb_record *r, char *line)
{
    char *save = NULL;
    char *tag = strtok_r(line, " ", &save);
    char *rest = save;
    if (!tag)
        return false;
    if (!strcmp(tag, "sg-generator") && !r->generator)
        return (r->generator = rest) != NULL;
    if (!strcmp(tag, "sg-compiler"))
        return true; /* names what made the header; no compiler here to compare with */
    if (!strcmp(tag, "sg-abi") && !r->abi)
        return (r->abi = next_token(&save)) != NULL;
    if (!strcmp(tag, "sg-layout") && !r->layout) {
        r->layout = next_token(&save);
        return r->layout && (!strcmp(r->layout, "hot-cold") || !strcmp(r->layout, "whole"));
    }
    if (!strcmp(tag, "sg-file"))
        return r->nops == 0 && !r->has_shim && !r->nabsent && parse_file(r, &save);
    if (!strcmp(tag, "sg-absent"))
        return r->nops == 0 && !r->has_shim && parse_absent(r, &save);
    if (!strcmp(tag, "sg-shim") && !r->has_shim && r->nops == 0)
        return (r->has_shim = parse_op(r, &save, true));
    if (!strcmp(tag, "sg-op"))
        return r->has_shim && parse_op(r, &save, false);
    return false;
}

/* The line number in the header of the record's line `k` (from 0). */
static unsigned line_of(const char *text, const char *start, size_t k)
{
    size_t n = 1 + k;
    for (const char *p = text; p < start; p++)
        n += *p == '\n';
    return (unsigned)n;
}

static const char record_start[] = "/* Provenance, read by `stencilgen check-prebuilt`";

/* The record is the header's last comment: found from the end, so a header
 * of thousands of stencils is not scanned whole. Returns an exit code. */
static int parse_record(const char *path, const char *text, size_t size, pb_record *r)
{
    const char *start = NULL;
    for (size_t end = size; end > 0 && !start;) {
        const char *nl = memrchr(text, '\n', end - 1);
        size_t b = nl ? (size_t)(nl - text) + 1 : 0;
        if (end - b > sizeof record_start - 1 &&
            !memcmp(text + b, record_start, sizeof record_start - 1))
            start = text + b;
        end = b;
    }
    if (!start) {
        diag_error("%s: the header records no provenance (it was generated before stencilgen "
                   "0.3.0, or is not a stencilgen header): regenerate it with stencilgen build",
                   path);
        return SG_EXIT_USAGE;
    }
    const char *close = memmem(start, size - (size_t)(start - text), "\n */\n", 5);
    if (!close) {
        diag_error("%s: its provenance comment is not closed", path);
        return SG_EXIT_USAGE;
    }
    r->text = xstrndup(start, (size_t)(close - start) + 1);
    size_t lineno = 0; /* within the record: the header's lines are counted on error only */
    char *save = NULL;
    for (char *line = strtok_r(r->text, "\n", &save); line; line = strtok_r(NULL, "\n", &save),
              lineno++) {
        if (strncmp(line, " * sg-", 6))
            continue; /* the comment's prose */
        if (!strncmp(line, " * sg-provenance ", 17)) {
            r->format = atoi(line + 17);
            if (r->format < 1 || r->format > PROV_FORMAT_VERSION) {
                diag_error_at(path, line_of(text, start, lineno), 4, "provenance format %s, this stencilgen "
                              "reads formats 1 to %d", line + 17, PROV_FORMAT_VERSION);
                return SG_EXIT_USAGE;
            }
            continue;
        }
        if (!r->format || !parse_line(r, line + 3)) {
            diag_error_at(path, line_of(text, start, lineno), 4, "malformed provenance line '%s'", line + 3);
            return SG_EXIT_USAGE;
        }
    }
    if (!r->generator || !r->abi || !r->has_shim || (r->format >= 2 && !r->layout)) {
        diag_error("%s: its provenance lacks the generator, ABI, layout or shim line", path);
        return SG_EXIT_USAGE;
    }
    if (!r->layout) /* format 1 (0.3.0) did not say: its builds split ops by default */
        r->layout = "hot-cold";
    return SG_EXIT_OK;
}

static void record_free(pb_record *r)
{
    for (size_t i = 0; i < r->nops; i++)
        free(r->ops[i].reads);
    free(r->ops);
    for (size_t i = 0; i < r->nabsent; i++)
        free(r->absent[i].names);
    free(r->absent);
    free(r->files);
    free(r->text);
}

/* ---- the files as they are now */

static const pb_now_file *now_file(pb_now *now, const gen_manifest *m, const char *name)
{
    for (size_t i = 0; i < now->count; i++)
        if (!strcmp(now->items[i].name, name))
            return &now->items[i];
    char *abs = path_join(m->dir, name);
    uint8_t *text = NULL;
    size_t size = 0;
    pb_now_file f = {xstrdup(name), {{0}}, read_file(abs, &text, &size)};
    f.digest = prov_digest_of(text ? text : (const uint8_t *)"", size);
    ARRAY_PUSH(now->items, now->count, now->cap, f);
    free(text);
    free(abs);
    return &now->items[now->count - 1];
}

static void now_free(pb_now *now)
{
    for (size_t i = 0; i < now->count; i++)
        free(now->items[i].name);
    free(now->items);
}

/* ---- reasons */

typedef struct pb_reasons {
    char ***items; /* per op (and the shim last): reason strings */
    size_t *count, *cap;
    size_t n;      /* ops + 1 */
} pb_reasons;

static void add_reason(pb_reasons *rs, size_t op, char *why)
{
    ARRAY_PUSH(rs->items[op], rs->count[op], rs->cap[op], why);
}

/* What kind of file `name` is, for the message. */
static const char *kind_of(const gen_manifest *m, const char *name)
{
    char *tmpl = manifest_relpath(m, m->template_path);
    char *shim = manifest_relpath(m, m->shim_source);
    const char *kind = !strcmp(name, tmpl) ? "template" : !strcmp(name, shim) ? "shim" : "header";
    free(tmpl);
    free(shim);
    return kind;
}

/* Each recorded file that changed, for every op that read it. */
static void files_changed(const pb_record *r, const gen_manifest *m, pb_now *now,
                          pb_reasons *rs)
{
    bool *changed = xcalloc(r->nfiles ? r->nfiles : 1, sizeof *changed);
    bool *gone = xcalloc(r->nfiles ? r->nfiles : 1, sizeof *gone);
    for (size_t i = 0; i < r->nfiles; i++) {
        const pb_now_file *f = now_file(now, m, r->files[i].name);
        gone[i] = !f->present;
        changed[i] = gone[i] || strcmp(f->digest.hex, r->files[i].recorded);
    }
    for (size_t o = 0; o < r->nops; o++)
        for (size_t j = 0; j < r->ops[o].nreads; j++) {
            size_t f = r->ops[o].reads[j];
            if (changed[f])
                add_reason(rs, o, xasprintf("%s %s %s", kind_of(m, r->files[f].name),
                                            r->files[f].name, gone[f] ? "removed" : "changed"));
        }
    free(changed);
    free(gone);
}

/* Each path a compile looked for and did not find that is there now (a
 * header earlier on the include path, shadowing the one found; a file a
 * __has_include now finds), for every op whose compile looked. */
static void absent_appeared(const pb_record *r, const gen_manifest *m, pb_reasons *rs)
{
    for (size_t k = 0; k < r->nabsent; k++) {
        for (size_t i = 0; i < r->absent[k].count; i++) {
            char *path = path_join(m->dir, r->absent[k].names[i]);
            struct stat st;
            bool there = lstat(path, &st) == 0;
            free(path);
            for (size_t o = 0; there && o < r->nops; o++)
                if (r->ops[o].absent == k)
                    add_reason(rs, o, xasprintf("%s now exists (its compile looked for it and "
                                                "found nothing)", r->absent[k].names[i]));
        }
    }
}

static bool is_op_source(const gen_manifest *m, const char *abs)
{
    for (size_t i = 0; i < m->op_sources.count; i++)
        if (!strcmp(m->op_sources.items[i], abs))
            return true;
    return false;
}

/* The ops idx[0..n) recorded from one op source, against its text now. */
static void source_changed(const pb_record *r, const gen_manifest *m, const char *source,
                           const size_t *idx, size_t n, pb_reasons *rs)
{
    char *abs0 = path_join(m->dir, source);
    char *abs = path_absolute(abs0);
    free(abs0);
    uint8_t *bytes = NULL;
    size_t size = 0;
    bool listed = is_op_source(m, abs), ok = listed && read_file(abs, &bytes, &size);
    free(abs);
    prov_digest *at = xcalloc(n ? n : 1, sizeof *at);
    for (size_t k = 0; k < n; k++)
        at[k] = r->ops[idx[k]].at;
    prov_file_cut cut = {0};
    if (ok)
        prov_cut((const char *)bytes, size, at, n, &cut);
    prov_digest whole = prov_digest_of(bytes ? bytes : (const uint8_t *)"", size);
    for (size_t k = 0; k < n; k++) {
        const pb_op *op = &r->ops[idx[k]];
        const char *now = op->whole ? whole.hex : cut.ext && cut.ext[k].found ? cut.unit[k].hex
                                                                                : NULL;
        if (!listed)
            add_reason(rs, idx[k], xasprintf("%s is no longer an op source of the manifest",
                                             source));
        else if (!ok)
            add_reason(rs, idx[k], xasprintf("%s cannot be read", source));
        else if (!now)
            add_reason(rs, idx[k], xasprintf("%s changed (the op's first line is gone)", source));
        else if (strcmp(now, op->unit))
            add_reason(rs, idx[k], xasprintf("%s changed", source));
    }
    if (ok)
        prov_cut_free(&cut);
    free(at);
    free(bytes);
}

/* Ops by source, then by position: each source's ops in source order. */
static int cmp_by_source(const void *a, const void *b, void *ctx)
{
    const pb_op *ops = ctx;
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    int c = strcmp(ops[x].source, ops[y].source);
    return c ? c : (x > y) - (x < y);
}

/* The recorded ops' indices (the shim left out), grouped by source. */
static size_t *ops_by_source(const pb_record *r)
{
    size_t *idx = xcalloc(r->nops, sizeof *idx);
    for (size_t o = 1; o < r->nops; o++)
        idx[o - 1] = o;
    qsort_r(idx, r->nops - 1, sizeof *idx, cmp_by_source, r->ops);
    return idx;
}

static void sources_changed(const pb_record *r, const gen_manifest *m, const size_t *by_source,
                            pb_reasons *rs)
{
    for (size_t i = 0, j; i < r->nops - 1; i = j) {
        const char *source = r->ops[by_source[i]].source;
        for (j = i + 1; j < r->nops - 1 && !strcmp(r->ops[by_source[j]].source, source); j++)
            ;
        source_changed(r, m, source, by_source + i, j - i, rs);
    }
    const pb_op *shim = &r->ops[0];
    char *rel = manifest_relpath(m, m->shim_source);
    uint8_t *text = NULL;
    size_t size = 0;
    bool ok = read_file(m->shim_source, &text, &size);
    prov_digest d = prov_digest_of(text ? text : (const uint8_t *)"", size);
    if (strcmp(rel, shim->source))
        add_reason(rs, 0, xasprintf("the manifest's shim is now %s", rel));
    else if (!ok || strcmp(d.hex, shim->unit))
        add_reason(rs, 0, xasprintf("%s changed", rel));
    free(text);
    free(rel);
}

static int cmp_source_key(const void *key, const void *item, void *ctx)
{
    const pb_op *ops = ctx;
    return strcmp((const char *)key, ops[*(const size_t *)item].source);
}

/* bsearch with a context, over `by_source`. */
static bool recorded_source(const pb_record *r, const size_t *by_source, const char *rel)
{
    size_t lo = 0, hi = r->nops - 1;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = cmp_source_key(rel, &by_source[mid], r->ops);
        if (!c)
            return true;
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return false;
}

/* Op sources the manifest lists now that no recorded op comes from: the
 * header lacks their ops. */
static size_t new_sources(const pb_record *r, const gen_manifest *m, const size_t *by_source,
                          strbuf *out)
{
    size_t n = 0;
    for (size_t i = 0; i < m->op_sources.count; i++) {
        char *rel = manifest_relpath(m, m->op_sources.items[i]);
        if (!recorded_source(r, by_source, rel)) {
            sb_printf(out, "op list: %s is new in the manifest\n", rel);
            n++;
        }
        free(rel);
    }
    return n;
}

/* The ops' order is the manifest's order of their files (each file's ops in
 * source order): the files in another order renumber every SG_OP_
 * enumerator, though no stencil changed. Compared over the files both name
 * (one added or removed is a reason of its own). */
static bool order_changed(const pb_record *r, const gen_manifest *m)
{
    size_t at = 0; /* the next manifest file the header's may be */
    for (size_t k = 1; k < r->nops; k++) {
        if (k > 1 && !strcmp(r->ops[k].source, r->ops[k - 1].source))
            continue;
        bool found = false;
        for (size_t i = 0; i < m->op_sources.count && !found; i++) {
            char *rel = manifest_relpath(m, m->op_sources.items[i]);
            found = !strcmp(rel, r->ops[k].source);
            free(rel);
            if (found && i < at)
                return true;
            if (found)
                at = i + 1;
        }
    }
    return false;
}

static void globals_changed(const pb_record *r, const gen_manifest *m, const char *triple,
                            const gen_manifest_target *t, bool hot_cold, pb_reasons *rs)
{
    const char *layout = hot_cold ? "hot-cold" : "whole";
    bool reordered = order_changed(r, m);
    char *abi = xasprintf("%d", SG_ABI_VERSION);
    prov_digest op_flags = prov_flags_digest(m, triple, t, false);
    prov_digest shim_flags = prov_flags_digest(m, triple, t, true);
    for (size_t k = 0; k < r->nops; k++) {
        if (r->format < PROV_SHA256_FORMAT) /* nothing else compares: no digest can match */
            add_reason(rs, k, xasprintf("provenance format %d digests files with a 128-bit hash "
                                        "of stencilgen's own, format %d with SHA-256: "
                                        "regenerate the header", r->format,
                                        PROV_SHA256_FORMAT));
        if (strcmp(r->generator, prov_generator()))
            add_reason(rs, k, xasprintf("generator changed (header: %s, this: %s)", r->generator,
                                        prov_generator()));
        if (strcmp(r->abi, abi))
            add_reason(rs, k, xasprintf("ABI version changed (header: %s, this: %s)", r->abi,
                                        abi));
        if (r->format >= PROV_SHA256_FORMAT &&
            strcmp(r->ops[k].flags, k ? op_flags.hex : shim_flags.hex))
            add_reason(rs, k, xasprintf("flags changed (the manifest's %s)",
                                        k ? "cflags, defines or include_dirs"
                                          : "shim_cflags, defines or include_dirs"));
        if (k && strcmp(r->layout, layout)) /* the shim is one part either way */
            add_reason(rs, k, xasprintf("layout changed (header: %s, this check: %s; "
                                        "--no-hot-cold lays ops out whole)", r->layout, layout));
        if (k && reordered)
            add_reason(rs, k, xstrdup("the manifest's ops: files are in another order (every "
                                      "SG_OP_ enumerator renumbered)"));
    }
    free(abi);
}

static bool has_reason(const pb_reasons *rs, size_t op, const char *why)
{
    for (size_t i = 0; i < rs->count[op]; i++)
        if (rs->items[op][i] && !strcmp(rs->items[op][i], why))
            return true;
    return false;
}

/* "every op: WHY" when all ops share a reason, then "op NAME: WHY" per op,
 * then "shim: WHY". Returns the stale ops (the shim counted as one). */
static size_t report(const pb_record *r, pb_reasons *rs, strbuf *out)
{
    size_t ops = r->nops - 1;
    for (size_t i = 0; ops > 1 && i < rs->count[1]; i++) {
        char *why = rs->items[1][i];
        bool all = true;
        for (size_t k = 2; k < r->nops && all; k++)
            all = has_reason(rs, k, why);
        if (!all)
            continue;
        sb_printf(out, "every op: %s\n", why);
        for (size_t k = r->nops - 1; k >= 1; k--) /* op 1 last: `why` is its string */
            for (size_t j = 0; j < rs->count[k]; j++)
                if (rs->items[k][j] && !strcmp(rs->items[k][j], why)) {
                    free(rs->items[k][j]);
                    rs->items[k][j] = NULL;
                }
    }
    size_t stale = 0;
    for (size_t k = 1; k <= r->nops; k++) {
        size_t op = k % r->nops; /* the shim last */
        bool any = false;
        for (size_t j = 0; j < rs->count[op]; j++) {
            any = true;
            if (!rs->items[op][j])
                continue;
            if (op)
                sb_printf(out, "op %s: %s\n", r->ops[op].name, rs->items[op][j]);
            else
                sb_printf(out, "shim: %s\n", rs->items[op][j]);
        }
        stale += any;
    }
    return stale;
}

static void reasons_free(pb_reasons *rs)
{
    for (size_t k = 0; k < rs->n; k++) {
        for (size_t j = 0; j < rs->count[k]; j++)
            free(rs->items[k][j]);
        free(rs->items[k]);
    }
    free(rs->items);
    free(rs->count);
    free(rs->cap);
}

/* The header, mapped: the record is read from the end, so the pages of a
 * header of thousands of stencils before it are never touched (a copy of
 * the whole file cost more than the check). NULL with errno on failure; an
 * empty file maps to "" with *size 0. */
static const char *map_header(const char *path, size_t *size)
{
    *size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct stat st;
    const char *text = NULL;
    if (fstat(fd, &st) != 0) {
        text = NULL;
    } else if (!S_ISREG(st.st_mode)) {
        errno = EISDIR;
    } else if (st.st_size == 0) {
        text = "";
    } else {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        text = p == MAP_FAILED ? NULL : p;
        *size = text ? (size_t)st.st_size : 0;
    }
    int saved = errno;
    close(fd);
    errno = saved;
    return text;
}

/* One target (`t`: its manifest entry, NULL for a --target the manifest
 * does not list): 0 current, 1 stale (listed in `out`), 2 bad input. */
static int check_target(const pb_options *o, const gen_manifest *m, const char *triple,
                        const gen_manifest_target *t, pb_now *now, strbuf *out)
{
    char *path = xasprintf("%s/jit_stencils-%s.h", o->prebuilt, triple);
    size_t size = 0;
    const char *text = map_header(path, &size);
    if (!text) {
        diag_error("%s: no prebuilt header for target %s (%s)", path, triple, strerror(errno));
        free(path);
        return SG_EXIT_USAGE;
    }
    pb_record r = {0};
    int rc = parse_record(path, text, size, &r);
    if (size)
        munmap((void *)text, size);
    if (rc) {
        record_free(&r);
        free(path);
        return rc;
    }
    pb_reasons rs = {xcalloc(r.nops, sizeof(char **)), xcalloc(r.nops, sizeof(size_t)),
                     xcalloc(r.nops, sizeof(size_t)), r.nops};
    size_t *by_source = ops_by_source(&r);
    globals_changed(&r, m, triple, t, !o->no_hot_cold, &rs);
    if (r.format >= PROV_SHA256_FORMAT) {
        sources_changed(&r, m, by_source, &rs);
        files_changed(&r, m, now, &rs);
        absent_appeared(&r, m, &rs);
    }
    strbuf lines = {0};
    sb_puts(&lines, "");
    size_t added = new_sources(&r, m, by_source, &lines);
    free(by_source);
    size_t stale = report(&r, &rs, &lines);
    if (stale || added)
        sb_printf(out, "%s: %zu of %zu stencils stale (%s)\n%s", triple, stale, r.nops, path,
                  lines.data);
    sb_free(&lines);
    reasons_free(&rs);
    record_free(&r);
    free(path);
    return stale || added ? SG_EXIT_CHECK : SG_EXIT_OK;
}

static const gen_manifest_target *find_target(const gen_manifest *m, const char *triple)
{
    for (size_t i = 0; i < m->ntargets; i++)
        if (!strcmp(m->targets[i].triple, triple))
            return &m->targets[i];
    return NULL;
}

/* A --target the manifest does not list is one `build --target` accepts
 * too, when stencilgen supports it. */
static bool known_target(const pb_options *o, const gen_manifest *m, const char *triple)
{
    if (find_target(m, triple) || target_lookup(triple))
        return true;
    strbuf known = {0};
    for (size_t k = 0; k < m->ntargets; k++)
        sb_printf(&known, "%s%s", k ? ", " : "", m->targets[k].triple);
    char *supported = target_supported_list();
    diag_error("unknown target '%s': %s lists %s, and stencilgen supports %s", triple,
               o->manifest, known.data ? known.data : "none", supported);
    free(supported);
    sb_free(&known);
    return false;
}

static int check_all(const pb_options *o, const gen_manifest *m)
{
    for (size_t i = 0; i < o->ntargets; i++)
        if (!known_target(o, m, o->targets[i]))
            return SG_EXIT_USAGE;
    pb_now now = {0};
    strbuf out = {0};
    sb_puts(&out, "");
    int rc = SG_EXIT_OK;
    size_t n = o->ntargets ? o->ntargets : m->ntargets;
    for (size_t i = 0; i < n && rc != SG_EXIT_USAGE; i++) {
        const char *triple = o->ntargets ? o->targets[i] : m->targets[i].triple;
        int one = check_target(o, m, triple, find_target(m, triple), &now, &out);
        rc = one > rc ? one : rc;
    }
    if (rc != SG_EXIT_USAGE)
        fputs(out.data, stdout);
    sb_free(&out);
    now_free(&now);
    return rc;
}

static const char pb_usage[] =
    "usage: stencilgen check-prebuilt --manifest FILE --prebuilt DIR [--target TRIPLE]...\n"
    "                                 [--no-hot-cold]   (the headers' build's option)\n"
    "Exit codes: 0 every header current, 1 some stencils stale (listed), 2 bad input.\n";

static int pb_usage_error(const char *what, const char *arg)
{
    fprintf(stderr, "stencilgen: error: check-prebuilt: ");
    fprintf(stderr, what, arg);
    fprintf(stderr, "\n%s", pb_usage);
    return SG_EXIT_USAGE;
}

enum { PB_MANIFEST = 256, PB_PREBUILT, PB_TARGET, PB_NO_HOT_COLD, PB_HELP };

static int parse_pb_options(int argc, char **argv, pb_options *o)
{
    static const struct option opts[] = {
        {"manifest", required_argument, NULL, PB_MANIFEST},
        {"prebuilt", required_argument, NULL, PB_PREBUILT},
        {"target", required_argument, NULL, PB_TARGET},
        {"no-hot-cold", no_argument, NULL, PB_NO_HOT_COLD},
        {"help", no_argument, NULL, PB_HELP},
        {NULL, 0, NULL, 0},
    };
    int c;
    opterr = 0;
    size_t cap = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case PB_MANIFEST: o->manifest = optarg; break;
        case PB_PREBUILT: o->prebuilt = optarg; break;
        case PB_TARGET:
            for (size_t i = 0; i < o->ntargets; i++)
                if (!strcmp(o->targets[i], optarg))
                    return pb_usage_error("--target '%s' is given twice", optarg);
            ARRAY_PUSH(o->targets, o->ntargets, cap, optarg);
            break;
        case PB_NO_HOT_COLD: o->no_hot_cold = true; break;
        case PB_HELP: fputs(pb_usage, stdout); return SG_EXIT_OK;
        default: return pb_usage_error("unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return pb_usage_error("unexpected argument '%s'", argv[optind]);
    if (!o->manifest || !*o->manifest)
        return pb_usage_error("%s", "needs --manifest FILE");
    if (!o->prebuilt || !*o->prebuilt)
        return pb_usage_error("%s", "needs --prebuilt DIR");
    return -1;
}

int prebuilt_main(int argc, char **argv)
{
    pb_options o = {0};
    int rc = parse_pb_options(argc, argv, &o);
    if (rc < 0) {
        gen_manifest m = {0};
        rc = manifest_load(o.manifest, &m) ? check_all(&o, &m) : SG_EXIT_USAGE;
        manifest_free(&m);
    }
    free(o.targets);
    return rc;
}
