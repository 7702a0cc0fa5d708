/* manifest.c - read the manifest with libyaml's document API, which keeps the
 * line and column of every node so each error can point at the offending text.
 * The input is bounded first (size, then nesting depth with the event API),
 * because libyaml's time grows faster than the input on deep nesting. */
#define _GNU_SOURCE
#include "manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "diag.h"
#include "util.h"

/* A manifest lists files and flags: far below a mebibyte, and a few levels deep. */
#define MANIFEST_MAX_BYTES (1u << 20)
#define MANIFEST_MAX_DEPTH 8

typedef struct reader {
    const char *path;
    yaml_document_t *doc;
    const gen_manifest *m;
} reader;

static gen_loc loc_of(const yaml_node_t *n)
{
    return (gen_loc){(unsigned)n->start_mark.line + 1, (unsigned)n->start_mark.column + 1};
}

static bool fail(const reader *r, const yaml_node_t *n, const char *fmt, const char *a,
                 const char *b)
{
    gen_loc l = loc_of(n);
    char msg[512];
    snprintf(msg, sizeof msg, fmt, a, b);
    diag_error_at(r->path, l.line, l.col, "%s", msg);
    return false;
}

static const char *scalar(const yaml_node_t *n)
{
    return n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static bool want_scalar(const reader *r, const yaml_node_t *n, const char *key, char **out)
{
    const char *s = scalar(n);
    if (!s || !*s)
        return fail(r, n, "'%s' must be a non-empty string%s", key, "");
    *out = xstrdup(s);
    return true;
}

static bool want_int(const reader *r, const yaml_node_t *n, const char *key, int64_t *out)
{
    const char *s = scalar(n);
    char *end = NULL;
    long long v = s ? strtoll(s, &end, 0) : 0;
    if (!s || !*s || *end)
        return fail(r, n, "'%s' must be an integer, got '%s'", key, s ? s : "(not a scalar)");
    *out = v;
    return true;
}

static void list_add(gen_strlist *l, char *s, gen_loc loc)
{
    size_t cap = l->cap;
    grow_array((void **)&l->items, &l->cap, l->count + 1, sizeof *l->items);
    grow_array((void **)&l->locs, &cap, l->count + 1, sizeof *l->locs);
    l->items[l->count] = s;
    l->locs[l->count++] = loc;
}

static void list_free(gen_strlist *l)
{
    for (size_t i = 0; i < l->count; i++)
        free(l->items[i]);
    free(l->items);
    free(l->locs);
    *l = (gen_strlist){0};
}

static bool file_exists(const char *path, bool want_dir)
{
    struct stat st;
    return stat(path, &st) == 0 && (want_dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode));
}

/* A path relative to the manifest's directory, checked to exist. */
static bool want_path(const reader *r, const yaml_node_t *n, const char *key, bool dir,
                      char **out)
{
    char *rel = NULL;
    if (!want_scalar(r, n, key, &rel))
        return false;
    char *joined = path_join(r->m->dir, rel);
    *out = path_absolute(joined);
    free(joined);
    if (!file_exists(*out, dir)) {
        fail(r, n, dir ? "%s: directory '%s' not found" : "%s: file '%s' not found", key, rel);
        free(rel);
        free(*out);
        *out = NULL;
        return false;
    }
    free(rel);
    return true;
}

typedef bool item_fn(const reader *r, const yaml_node_t *item, const char *key, void *ctx);

static bool each_item(const reader *r, const yaml_node_t *n, const char *key, item_fn *fn,
                      void *ctx)
{
    if (n->type != YAML_SEQUENCE_NODE)
        return fail(r, n, "'%s' must be a list%s", key, "");
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
         it++) {
        if (!fn(r, yaml_document_get_node(r->doc, *it), key, ctx))
            return false;
    }
    return true;
}

static bool add_string(const reader *r, const yaml_node_t *item, const char *key, void *ctx)
{
    char *s = NULL;
    if (!want_scalar(r, item, key, &s))
        return false;
    list_add(ctx, s, loc_of(item));
    return true;
}

/* A list of paths that must exist: files, or directories. */
typedef struct path_list {
    gen_strlist *list;
    bool dirs;
} path_list;

static bool add_path(const reader *r, const yaml_node_t *item, const char *key, void *ctx)
{
    path_list *pl = ctx;
    char *s = NULL;
    if (!want_path(r, item, key, pl->dirs, &s))
        return false;
    list_add(pl->list, s, loc_of(item));
    return true;
}

/* Iterate a mapping, rejecting keys that are not in `known` (a NULL-terminated list). */
typedef bool pair_fn(const reader *r, const char *key, const yaml_node_t *keynode,
                     const yaml_node_t *value, void *ctx);

static bool each_pair(const reader *r, const yaml_node_t *n, const char *what,
                      const char *const *known, pair_fn *fn, void *ctx)
{
    if (n->type != YAML_MAPPING_NODE)
        return fail(r, n, "%s must be a mapping%s", what, "");
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        const yaml_node_t *k = yaml_document_get_node(r->doc, p->key);
        const yaml_node_t *v = yaml_document_get_node(r->doc, p->value);
        const char *key = scalar(k);
        if (!key)
            return fail(r, k, "%s: keys must be strings%s", what, "");
        bool ok = false;
        for (const char *const *kk = known; *kk; kk++)
            ok |= strcmp(*kk, key) == 0;
        if (!ok) {
            strbuf sb = {0};
            for (const char *const *kk = known; *kk; kk++)
                sb_printf(&sb, "%s%s", kk == known ? "" : ", ", *kk);
            char msg[160];
            snprintf(msg, sizeof msg, "unknown key '%s' in %s", key, what);
            fail(r, k, "%s (expected one of: %s)", msg, sb.data);
            sb_free(&sb);
            return false;
        }
        for (yaml_node_pair_t *q = n->data.mapping.pairs.start; q < p; q++) {
            const yaml_node_t *first = yaml_document_get_node(r->doc, q->key);
            if (strcmp(scalar(first), key))
                continue;
            fail(r, k, "duplicate key '%s' in %s", key, what);
            gen_loc l = loc_of(first);
            diag_note_at(r->path, l.line, l.col, "'%s' first given here", key);
            return false;
        }
        if (!fn(r, key, k, v, ctx))
            return false;
    }
    return true;
}

static bool pin_pair(const reader *r, const char *key, const yaml_node_t *k,
                     const yaml_node_t *v, void *ctx)
{
    (void)k;
    gen_frame_pin *pin = ctx;
    if (!strcmp(key, "cfa_register"))
        return want_scalar(r, v, key, &pin->cfa_register);
    if (!strcmp(key, "cfa_offset"))
        return want_int(r, v, key, &pin->cfa_offset);
    if (!strcmp(key, "fp_offset"))
        return want_int(r, v, key, &pin->fp_offset);
    return want_int(r, v, key, &pin->ra_offset);
}

static bool target_pair(const reader *r, const char *key, const yaml_node_t *k,
                        const yaml_node_t *v, void *ctx)
{
    (void)k;
    gen_manifest_target *t = ctx;
    if (!strcmp(key, "triple"))
        return want_scalar(r, v, key, &t->triple);
    if (!strcmp(key, "cflags"))
        return each_item(r, v, key, add_string, &t->cflags);
    if (!strcmp(key, "shim_cflags"))
        return each_item(r, v, key, add_string, &t->shim_cflags);
    static const char *const pin_keys[] = {"cfa_register", "cfa_offset", "fp_offset",
                                           "ra_offset", NULL};
    t->has_pin = true;
    t->pin.loc = loc_of(v);
    if (!each_pair(r, v, "expect_frame", pin_keys, pin_pair, &t->pin))
        return false;
    if (!t->pin.cfa_register)
        return fail(r, v, "expect_frame needs %s%s", "cfa_register, cfa_offset, fp_offset and ra_offset", "");
    return true;
}

static bool add_target(const reader *r, const yaml_node_t *item, const char *key, void *ctx)
{
    (void)key;
    gen_manifest *m = ctx;
    static const char *const keys[] = {"triple", "cflags", "shim_cflags", "expect_frame", NULL};
    grow_array((void **)&m->targets, &m->targets_cap, m->ntargets + 1, sizeof *m->targets);
    gen_manifest_target *t = &m->targets[m->ntargets++];
    *t = (gen_manifest_target){.loc = loc_of(item)};
    if (!each_pair(r, item, "target", keys, target_pair, t))
        return false;
    if (!t->triple)
        return fail(r, item, "target needs a 'triple'%s%s", "", "");
    for (size_t i = 0; i + 1 < m->ntargets; i++) {
        if (!strcmp(m->targets[i].triple, t->triple))
            return fail(r, item, "target '%s' is listed twice%s", t->triple, "");
    }
    return true;
}

static bool shim_pair(const reader *r, const char *key, const yaml_node_t *k,
                      const yaml_node_t *v, void *ctx)
{
    (void)k;
    gen_manifest *m = ctx;
    if (!strcmp(key, "source")) {
        m->shim_loc = loc_of(v);
        return want_path(r, v, "shim.source", false, &m->shim_source);
    }
    return want_scalar(r, v, "shim.function", &m->shim_function);
}

static bool top_pair(const reader *r, const char *key, const yaml_node_t *k,
                     const yaml_node_t *v, void *ctx)
{
    (void)k;
    gen_manifest *m = ctx;
    if (!strcmp(key, "targets"))
        return each_item(r, v, key, add_target, m);
    if (!strcmp(key, "template")) {
        m->template_loc = loc_of(v);
        if (!want_path(r, v, key, false, &m->template_path))
            return false;
        /* clang turns -include FILE into a line #include "FILE" (unescaped). */
        if (strpbrk(m->template_path, "\"\n\r"))
            return fail(r, v, "template: the path '%s' holds a quote or a line break, which "
                        "clang's -include cannot take%s", m->template_path, "");
        return true;
    }
    if (!strcmp(key, "shim")) {
        static const char *const keys[] = {"source", "function", NULL};
        return each_pair(r, v, "shim", keys, shim_pair, m);
    }
    if (!strcmp(key, "ops"))
        return each_item(r, v, key, add_path, &(path_list){&m->op_sources, false});
    if (!strcmp(key, "include_dirs"))
        return each_item(r, v, key, add_path, &(path_list){&m->include_dirs, true});
    if (!strcmp(key, "defines"))
        return each_item(r, v, key, add_string, &m->defines);
    if (!strcmp(key, "cflags"))
        return each_item(r, v, key, add_string, &m->cflags);
    return each_item(r, v, key, add_string, &m->symbols);
}

static bool is_identifier(const char *s)
{
    if (!*s || (*s >= '0' && *s <= '9'))
        return false;
    for (; *s; s++) {
        if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
              (*s >= '0' && *s <= '9')))
            return false;
    }
    return true;
}

/* Entries that would compile twice or declare a name twice. (Repeated include
 * directories and defines are harmless: clang takes them as given.) */
static bool no_repeats(const reader *r, const gen_strlist *l, const char *key)
{
    for (size_t i = 0; i < l->count; i++) {
        for (size_t j = 0; j < i; j++) {
            if (strcmp(l->items[i], l->items[j]))
                continue;
            diag_error_at(r->path, l->locs[i].line, l->locs[i].col, "'%s' is listed twice in '%s'",
                          l->items[i], key);
            diag_note_at(r->path, l->locs[j].line, l->locs[j].col, "first listed here");
            return false;
        }
    }
    return true;
}

static bool check_complete(const reader *r, const yaml_node_t *root, gen_manifest *m)
{
    const char *missing = !m->ntargets        ? "targets"
                          : !m->template_path ? "template"
                          : !m->shim_source   ? "shim.source"
                          : !m->shim_function ? "shim.function"
                          : !m->op_sources.count ? "ops"
                                              : NULL;
    if (missing)
        return fail(r, root, "manifest is missing '%s'%s", missing, "");
    if (!no_repeats(r, &m->op_sources, "ops") || !no_repeats(r, &m->symbols, "symbols"))
        return false;
    for (size_t i = 0; i < m->symbols.count; i++) {
        if (!is_identifier(m->symbols.items[i])) {
            gen_loc l = m->symbols.locs[i];
            diag_error_at(r->path, l.line, l.col, "symbol '%s' is not a C identifier",
                          m->symbols.items[i]);
            return false;
        }
    }
    return true;
}

static bool parse_error(const char *path, const yaml_parser_t *p)
{
    const yaml_mark_t *mk = p->problem_mark.line || p->problem_mark.column
                                ? &p->problem_mark
                                : &p->context_mark;
    if (p->context)
        diag_error_at(path, (unsigned)mk->line + 1, (unsigned)mk->column + 1,
                      "invalid YAML: %s %s", p->problem ? p->problem : "error", p->context);
    else
        diag_error_at(path, (unsigned)mk->line + 1, (unsigned)mk->column + 1,
                      "invalid YAML: %s", p->problem ? p->problem : "error");
    return false;
}

/* At most MANIFEST_MAX_BYTES + 1 bytes, whatever the file is (/dev/zero, a pipe). */
static bool read_bounded(const char *path, uint8_t **text, size_t *size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    size_t cap = MANIFEST_MAX_BYTES + 1, n = 0;
    uint8_t *buf = xmalloc(cap);
    while (n < cap) {
        ssize_t got = read(fd, buf + n, cap - n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            if (got < 0) {
                int saved = errno;
                free(buf);
                close(fd);
                errno = saved;
                return false;
            }
            break;
        }
        n += (size_t)got;
    }
    close(fd);
    *text = buf;
    *size = n;
    return true;
}

/* Walk the events only as deep as the schema allows, so that input nested
 * thousands deep is refused before libyaml spends superlinear time on it. */
static bool depth_ok(const char *path, const uint8_t *text, size_t size)
{
    yaml_parser_t p;
    yaml_parser_initialize(&p);
    yaml_parser_set_input_string(&p, text, size);
    int depth = 0;
    bool ok = true, done = false;
    while (ok && !done) {
        yaml_event_t e;
        if (!yaml_parser_parse(&p, &e))
            break; /* the document load below reports syntax errors */
        if (e.type == YAML_SEQUENCE_START_EVENT || e.type == YAML_MAPPING_START_EVENT) {
            if (++depth > MANIFEST_MAX_DEPTH) {
                diag_error_at(path, (unsigned)e.start_mark.line + 1,
                              (unsigned)e.start_mark.column + 1,
                              "the manifest nests deeper than %d levels", MANIFEST_MAX_DEPTH);
                ok = false;
            }
        } else if (e.type == YAML_SEQUENCE_END_EVENT || e.type == YAML_MAPPING_END_EVENT) {
            depth--;
        }
        done = e.type == YAML_STREAM_END_EVENT;
        yaml_event_delete(&e);
    }
    yaml_parser_delete(&p);
    return ok;
}

bool manifest_load(const char *path, gen_manifest *m)
{
    uint8_t *text;
    size_t size;
    if (!read_bounded(path, &text, &size)) {
        *m = (gen_manifest){.path = xstrdup(path)};
        diag_error("cannot read manifest '%s': %s", path, strerror(errno));
        return false;
    }
    bool ok = manifest_parse(text, size, path, m);
    free(text);
    return ok;
}

bool manifest_parse(const uint8_t *text, size_t size, const char *path, gen_manifest *m)
{
    *m = (gen_manifest){.path = xstrdup(path)};
    char *abs = path_absolute(path);
    m->dir = path_dirname(abs);
    free(abs);
    if (size > MANIFEST_MAX_BYTES) {
        diag_error("manifest '%s' is larger than %u bytes", path, MANIFEST_MAX_BYTES);
        return false;
    }
    if (!depth_ok(path, text, size))
        return false;
    yaml_parser_t parser;
    yaml_document_t doc;
    yaml_parser_initialize(&parser);
    yaml_parser_set_input_string(&parser, text, size);
    bool ok = yaml_parser_load(&parser, &doc);
    if (!ok) {
        parse_error(path, &parser);
        yaml_parser_delete(&parser);
        return false;
    }
    reader r = {path, &doc, m};
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    static const char *const keys[] = {"targets", "template", "shim", "ops", "include_dirs",
                                       "defines", "cflags", "symbols", NULL};
    if (!root) {
        diag_error_at(path, 1, 1, "manifest is empty");
        ok = false;
    } else {
        ok = each_pair(&r, root, "the manifest", keys, top_pair, m) &&
             check_complete(&r, root, m);
    }
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    return ok;
}

void manifest_free(gen_manifest *m)
{
    free(m->path);
    free(m->dir);
    free(m->template_path);
    free(m->shim_source);
    free(m->shim_function);
    list_free(&m->op_sources);
    list_free(&m->include_dirs);
    list_free(&m->defines);
    list_free(&m->cflags);
    list_free(&m->symbols);
    for (size_t i = 0; i < m->ntargets; i++) {
        gen_manifest_target *t = &m->targets[i];
        free(t->triple);
        list_free(&t->cflags);
        list_free(&t->shim_cflags);
        free(t->pin.cfa_register);
    }
    free(m->targets);
    *m = (gen_manifest){0};
}

char *manifest_relpath(const gen_manifest *m, const char *abs)
{
    return path_relative_to(abs, m->dir);
}
