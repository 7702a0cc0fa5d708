/* provenance.c - see provenance.h. Nothing here loads LLVM or starts a
 * process: check-prebuilt (prebuilt.c) shares the digests and the cutting of
 * op sources with the writer, so both sides see the same bytes. */
#define _GNU_SOURCE
#include "provenance.h"

#ifndef SG_GENERATOR_VERSION /* meson.build's project version (generator/meson.build) */
#error "SG_GENERATOR_VERSION is not defined: build stencilgen with its meson.build"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opunit.h"
#include "outputs.h"
#include "../runtime/stencilrt_abi.h" /* the ABI, owned by the runtime */

static prov_digest prov_digest_from(const digest *d)
{
    prov_digest p;
    digest_hex(d, p.hex);
    return p;
}

prov_digest prov_digest_of(const void *data, size_t size)
{
    digest d = digest_of(data, size);
    return prov_digest_from(&d);
}

const char *prov_generator(void)
{
    return "stencilgen " SG_GENERATOR_VERSION;
}

static void put_list(strbuf *sb, const char *tag, const gen_strlist *l, const gen_manifest *m,
                     bool paths)
{
    for (size_t i = 0; i < l->count; i++) {
        char *rel = paths ? manifest_relpath(m, l->items[i]) : NULL;
        sb_printf(sb, "%s %s\n", tag, rel ? rel : l->items[i]);
        free(rel);
    }
}

prov_digest prov_flags_digest(const gen_manifest *m, const char *triple,
                              const gen_manifest_target *t, bool shim)
{
    static const gen_strlist none = {0};
    strbuf sb = {0};
    sb_printf(&sb, "target %s\n", triple);
    char *tmpl = manifest_relpath(m, m->template_path);
    sb_printf(&sb, "template %s\n", tmpl);
    free(tmpl);
    put_list(&sb, "include", &m->include_dirs, m, true);
    put_list(&sb, "define", &m->defines, m, false);
    put_list(&sb, "symbol", &m->symbols, m, false); /* holes name symbols by number */
    if (shim) {
        sb_printf(&sb, "shim %s\n", m->shim_function);
        put_list(&sb, "target-cflag", t ? &t->shim_cflags : &none, m, false);
    } else {
        put_list(&sb, "cflag", &m->cflags, m, false);
        put_list(&sb, "target-cflag", t ? &t->cflags : &none, m, false);
    }
    prov_digest d = prov_digest_of(sb.data, sb.len);
    sb_free(&sb);
    return d;
}

/* ---- cutting an op source into its ops, without a parser */

static size_t line_end(const char *text, size_t size, size_t at)
{
    const char *nl = memchr(text + at, '\n', size - at);
    return nl ? (size_t)(nl - text) : size;
}

prov_digest prov_line_digest(const char *text, size_t size, size_t begin)
{
    return prov_digest_of(text + begin, line_end(text, size, begin) - begin);
}

/* Past a comment, string or character literal starting at p (else p). */
static size_t skip_lexical(const char *text, size_t size, size_t p)
{
    if (text[p] == '/' && p + 1 < size && text[p + 1] == '/')
        return line_end(text, size, p);
    if (text[p] == '/' && p + 1 < size && text[p + 1] == '*') {
        const char *e = memmem(text + p + 2, size - p - 2, "*/", 2);
        return e ? (size_t)(e - text) + 2 : size;
    }
    if (text[p] == '"' || text[p] == '\'') {
        char q = text[p];
        for (size_t i = p + 1; i < size; i++) {
            if (text[i] == '\\')
                i++;
            else if (text[i] == q || text[i] == '\n')
                return i + 1;
        }
        return size;
    }
    return p;
}

/* The brace that closes the first body after `from`, or size: none. A ';'
 * outside parentheses before any body: a declaration, not a definition. */
static size_t closing_brace(const char *text, size_t size, size_t from)
{
    int depth = 0, parens = 0;
    for (size_t p = from; p < size;) {
        /* Most bytes matter to nothing here: skip them in one call. */
        p += strcspn(text + p, "/\"'(){};");
        if (p >= size)
            break;
        size_t q = skip_lexical(text, size, p);
        if (q != p) {
            p = q;
            continue;
        }
        char c = text[p++];
        if (c == '(')
            parens++;
        else if (c == ')')
            parens--;
        else if (c == ';' && depth == 0 && parens <= 0)
            return size;
        else if (c == '{')
            depth++;
        else if (c == '}' && --depth == 0)
            return p - 1;
        else if (c == '}' && depth < 0)
            return size;
    }
    return size;
}

/* Past the blanks after `end`, and its line break, when only blanks follow
 * on its line (opunit.c, whole_lines: the same extension). */
static size_t whole_line_end(const char *text, size_t size, size_t end)
{
    size_t e = end;
    while (e < size && (text[e] == ' ' || text[e] == '\t' || text[e] == '\r'))
        e++;
    if (e == size)
        return e;
    return text[e] == '\n' ? e + 1 : end;
}

prov_extent prov_extent_at(const char *text, size_t size, size_t line_begin)
{
    prov_extent x = {line_begin, line_begin, false};
    size_t close = closing_brace(text, size, line_begin);
    if (close < size) {
        x.end = whole_line_end(text, size, close + 1);
        x.found = true;
    }
    return x;
}

static size_t line_number(const char *text, size_t at)
{
    size_t n = 1;
    for (const char *p = text; (p = memchr(p, '\n', (size_t)(text + at - p))); p++)
        n++;
    return n;
}

/* The first line at or after `from` whose digest is `at`; `size` if none. */
static size_t find_line(const char *text, size_t size, size_t from, const prov_digest *at)
{
    for (size_t p = from; p < size; p = line_end(text, size, p) + 1) {
        prov_digest d = prov_line_digest(text, size, p);
        if (!memcmp(d.hex, at->hex, PROV_DIGEST_HEX))
            return p;
    }
    return size;
}

static bool blank(const char *p, size_t n)
{
    return strspn(p, " \t\r") >= n;
}

/* Blank lines of the text outside the ops go: the one that separates an
 * added op from the next is not a change to the others (their positions
 * count apart, below). A blank line that ends a macro continued onto it
 * stays. */
static void drop_blank_lines(strbuf *sb)
{
    size_t w = 0;
    bool continued = false;
    for (size_t r = 0; r < sb->len;) {
        size_t e = line_end(sb->data, sb->len, r);
        size_t n = e - r;
        if (continued || !blank(sb->data + r, n)) {
            memmove(sb->data + w, sb->data + r, e < sb->len ? n + 1 : n);
            w += e < sb->len ? n + 1 : n;
        }
        continued = n && sb->data[r + n - 1 - (n > 1 && sb->data[r + n - 1] == '\r')] == '\\';
        r = e < sb->len ? e + 1 : e;
    }
    sb->len = w;
    sb->data[w] = '\0';
}

void prov_cut(const char *text, size_t size, const prov_digest *at, size_t n, prov_file_cut *out)
{
    out->ext = xcalloc(n ? n : 1, sizeof *out->ext);
    out->unit = xcalloc(n ? n : 1, sizeof *out->unit);
    size_t pos = 0;
    strbuf shared = {0};
    sb_puts(&shared, "");
    for (size_t i = 0; i < n; i++) {
        if (i && !memcmp(at[i].hex, at[i - 1].hex, PROV_DIGEST_HEX)) {
            /* The next variant of the same op (variant_expand keeps them
             * together): its definition, not a search on past it, which
             * made a file of variants quadratic. */
            out->ext[i] = out->ext[i - 1];
            continue;
        }
        size_t line = find_line(text, size, pos, &at[i]);
        if (line == size)
            continue;
        out->ext[i] = prov_extent_at(text, size, line);
        if (!out->ext[i].found)
            continue;
        sb_putn(&shared, text + pos, line - pos);
        pos = out->ext[i].end;
    }
    sb_putn(&shared, text + pos, size - pos);
    drop_blank_lines(&shared);
    digest base = digest_of(shared.data ? shared.data : "", shared.len);
    /* Code that compiles its position in changes when its op moves. */
    bool positional = text_mentions_position(text, size);
    for (size_t i = 0; i < n; i++) {
        if (!out->ext[i].found)
            continue;
        digest_ctx h;
        digest_begin(&h);
        digest_add_digest(&h, &base);
        digest_add_u64(&h, positional);
        if (positional)
            digest_add_u64(&h, line_number(text, out->ext[i].begin));
        digest_add_field(&h, text + out->ext[i].begin, out->ext[i].end - out->ext[i].begin);
        digest d = digest_end(&h);
        out->unit[i] = prov_digest_from(&d);
    }
    sb_free(&shared);
}

void prov_cut_free(prov_file_cut *c)
{
    free(c->ext);
    free(c->unit);
}

/* ---- names */

void prov_put_name(strbuf *sb, const char *name)
{
    for (const char *p = name; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '\n')
            sb_puts(sb, "\\n"); /* as the listings' comments write it (writer.c) */
        else if (c == '\r')
            sb_puts(sb, "\\r");
        else if (c == '\\')
            sb_puts(sb, "\\\\");
        else if (c <= ' ' || c == 0x7f || (c == '*' && p[1] == '/'))
            sb_printf(sb, "\\x%02x", c);
        else
            sb_putc(sb, *p);
    }
}

bool prov_decode_name(char *s)
{
    char *w = s;
    for (char *p = s; *p; p++) {
        if (*p != '\\') {
            *w++ = *p;
            continue;
        }
        if (p[1] == 'n' || p[1] == 'r' || p[1] == '\\') {
            *w++ = p[1] == 'n' ? '\n' : p[1] == 'r' ? '\r' : '\\';
            p++;
            continue;
        }
        int hi = p[1] == 'x' ? hex_digit(p[2]) : -1, lo = hi >= 0 ? hex_digit(p[3]) : -1;
        if (lo < 0 || (hi == 0 && lo == 0))
            return false;
        *w++ = (char)(hi * 16 + lo);
        p += 3;
    }
    *w = '\0';
    return true;
}

/* ---- writing the record */

typedef struct name_set {
    char **items;
    size_t count, cap;
} name_set;

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void sort_unique(name_set *s)
{
    if (!s->count)
        return;
    qsort(s->items, s->count, sizeof *s->items, cmp_names);
    size_t kept = 1;
    for (size_t i = 1; i < s->count; i++) {
        if (strcmp(s->items[i], s->items[kept - 1]))
            s->items[kept++] = s->items[i];
        else
            free(s->items[i]);
    }
    s->count = kept;
}

static void free_names(name_set *s)
{
    for (size_t i = 0; i < s->count; i++)
        free(s->items[i]);
    free(s->items);
}

static bool under(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    return !strncmp(path, dir, n) && (path[n] == '/' || (n && dir[n - 1] == '/'));
}

/* `path` relative to `dir` when it lies under it, else NULL. clang's
 * dependency files turn a backslash into '/' (test_odd_paths): a directory
 * holding one is also tried that way. */
static char *rel_under(const char *path, const char *dir)
{
    if (under(path, dir))
        return path_relative_to(path, dir);
    if (!strchr(dir, '\\'))
        return NULL;
    char *slashed = xstrdup(dir);
    for (char *p = slashed; *p; p++)
        if (*p == '\\')
            *p = '/';
    char *rel = under(path, slashed) ? path_relative_to(path, slashed) : NULL;
    free(slashed);
    return rel;
}

/* Where the compiler and the system keep their headers: clang's own (its
 * installation, in->compiler_prefix) and the C libraries' and distribution's
 * (under /usr, cross sysroots and MinGW's included). */
static bool system_file(const prov_inputs *in, const char *abs)
{
    return under(abs, "/usr") || (in->compiler_prefix && under(abs, in->compiler_prefix));
}

/* Whether `path` lies under `dir`, either way a depfile may spell it. */
static bool within(const char *path, const char *dir)
{
    char *rel = rel_under(path, dir);
    free(rel);
    return rel != NULL;
}

/* A file the project owns, relative to the manifest: under the manifest's
 * directory or one of its include directories, or (`anywhere`: a file a
 * compile read) anywhere but the compiler's and the system's (a `-I../common`
 * in cflags, an include climbing out of the checkout); else NULL (clang's and
 * the C library's headers come with the compiler that sg-compiler names).
 * Paths looked for and not found count in the VM's own directories only:
 * clang also probes the machine's (/etc, /opt) for its configuration. */
static char *project_name(const prov_inputs *in, const char *abs, bool anywhere)
{
    const gen_manifest *m = in->manifest;
    char *rel = rel_under(abs, m->dir);
    for (size_t i = 0; !rel && i < m->include_dirs.count; i++) {
        char *inner = rel_under(abs, m->include_dirs.items[i]);
        if (inner) {
            char *dir = manifest_relpath(m, m->include_dirs.items[i]);
            rel = path_join(dir, inner);
            free(dir);
            free(inner);
        }
    }
    if (!rel && anywhere && !system_file(in, abs))
        rel = path_relative_to(abs, m->dir);
    return rel;
}

/* The files a compile read, relative to the manifest, less `own` (its unit). */
static name_set reads_of(const prov_inputs *in, const char *deps, const char *own)
{
    name_set s = {0};
    char **abs = NULL;
    size_t n = 0, cap = 0;
    if (deps)
        outputs_parse_deps((const uint8_t *)deps, strlen(deps), &abs, &n, &cap);
    char *own_rel = manifest_relpath(in->manifest, own);
    for (size_t i = 0; i < n; i++) {
        char *rel = within(abs[i], in->workdir) ? NULL : project_name(in, abs[i], true);
        if (rel && strcmp(rel, own_rel))
            ARRAY_PUSH(s.items, s.count, s.cap, rel);
        else
            free(rel);
        free(abs[i]);
    }
    free(own_rel);
    free(abs);
    sort_unique(&s);
    return s;
}

/* The ops of a batch share their compile's depfile text: each distinct text
 * and unit is read once (an open-addressing table over `items`). */
typedef struct reads_entry {
    const char *deps, *own;
    name_set reads;
} reads_entry;

typedef struct reads_memo {
    reads_entry *items;
    size_t count, cap;
    hash_index index; /* of items, by deps and own */
} reads_memo;

static uint64_t reads_hash(const char *deps, const char *own)
{
    uint64_t h = hash64(own, strlen(own) + 1, 0);
    return deps ? hash64(deps, strlen(deps) + 1, h) : ~h;
}

/* The index in m->items of what the compile with `deps` read besides `own`. */
static size_t memo_reads(reads_memo *m, const prov_inputs *in, const char *deps, const char *own)
{
    uint64_t h = reads_hash(deps, own);
    hash_slot *s = hash_index_first(&m->index, h);
    for (; s->item; s = hash_index_next(&m->index, s)) {
        const reads_entry *e = &m->items[s->item - 1];
        if (s->hash == h && !strcmp(e->own, own) && !e->deps == !deps &&
            (!deps || !strcmp(e->deps, deps)))
            return s->item - 1;
    }
    reads_entry e = {deps, own, reads_of(in, deps, own)};
    ARRAY_PUSH(m->items, m->count, m->cap, e);
    hash_index_put(&m->index, s, h, m->count - 1);
    return m->count - 1;
}

static void reads_memo_free(reads_memo *m)
{
    for (size_t i = 0; i < m->count; i++)
        free_names(&m->items[i].reads);
    free(m->items);
    hash_index_free(&m->index);
}

/* The project's paths of a list of paths looked for and not found (one a
 * line), relative to the manifest, less the generator's own. */
static name_set absent_of(const prov_inputs *in, const char *text)
{
    name_set s = {0};
    for (const char *p = text, *nl; p && (nl = strchr(p, '\n')); p = nl + 1) {
        char *abs = xstrndup(p, (size_t)(nl - p));
        char *rel = within(abs, in->workdir) ? NULL : project_name(in, abs, false);
        if (rel)
            ARRAY_PUSH(s.items, s.count, s.cap, rel);
        free(abs);
    }
    sort_unique(&s);
    return s;
}

/* The distinct lists of absent paths, numbered in order of first use (the
 * shim's, then the ops'): ops share a few lists, each text once. */
typedef struct absent_lists {
    const char **texts; /* one per distinct text, as given */
    name_set *names;    /* ... its project's paths */
    size_t *number;     /* ... its number in the record, SIZE_MAX when it has none */
    size_t count, numbered;
    size_t *of;         /* per op (the shim last): its list's number, or SIZE_MAX */
} absent_lists;

static size_t absent_list_of(absent_lists *l, const prov_inputs *in, const char *text)
{
    if (!text)
        return SIZE_MAX;
    for (size_t k = 0; k < l->count; k++)
        if (l->texts[k] == text || !strcmp(l->texts[k], text))
            return l->number[k];
    size_t k = l->count++;
    l->texts[k] = text;
    l->names[k] = absent_of(in, text);
    l->number[k] = l->names[k].count ? l->numbered++ : SIZE_MAX;
    return l->number[k];
}

static absent_lists absent_lists_make(const prov_inputs *in)
{
    size_t n = in->ops->count + 1;
    absent_lists l = {xcalloc(n, sizeof *l.texts), xcalloc(n, sizeof *l.names),
                      xcalloc(n, sizeof *l.number), 0, 0, xcalloc(n, sizeof *l.of)};
    l.of[in->ops->count] = absent_list_of(&l, in, in->shim_absent);
    for (size_t i = 0; i < in->ops->count; i++)
        l.of[i] = absent_list_of(&l, in, in->op_absent ? in->op_absent[i] : NULL);
    return l;
}

static void absent_lists_free(absent_lists *l)
{
    for (size_t k = 0; k < l->count; k++)
        free_names(&l->names[k]);
    free(l->names);
    free(l->texts);
    free(l->number);
    free(l->of);
}

static void put_absent_lists(strbuf *sb, const absent_lists *l)
{
    for (size_t k = 0; k < l->count; k++) {
        if (l->number[k] == SIZE_MAX)
            continue;
        sb_printf(sb, " * sg-absent %zu", l->number[k]);
        for (size_t i = 0; i < l->names[k].count; i++) {
            sb_putc(sb, ' ');
            prov_put_name(sb, l->names[k].items[i]);
        }
        sb_putc(sb, '\n');
    }
}

static void put_absent(strbuf *sb, size_t list)
{
    if (list != SIZE_MAX)
        sb_printf(sb, " absent %zu", list);
}

static void put_reads(strbuf *sb, const name_set *s)
{
    sb_puts(sb, " reads");
    for (size_t i = 0; i < s->count; i++) {
        sb_putc(sb, ' ');
        prov_put_name(sb, s->items[i]);
    }
    sb_putc(sb, '\n');
}

static prov_digest file_digest(const char *abs)
{
    uint8_t *text = NULL;
    size_t size = 0;
    if (!read_file(abs, &text, &size))
        return prov_digest_of("", 0);
    prov_digest d = prov_digest_of(text, size);
    free(text);
    return d;
}

static void put_files(strbuf *sb, const prov_inputs *in, const name_set *all)
{
    for (size_t i = 0; i < all->count; i++) {
        char *abs = path_join(in->manifest->dir, all->items[i]);
        char *norm = path_absolute(abs);
        sb_puts(sb, " * sg-file ");
        prov_put_name(sb, all->items[i]);
        sb_printf(sb, " %s\n", file_digest(norm).hex);
        free(norm);
        free(abs);
    }
}

/* Each op's "at" and unit: its file cut at every op of that file, by the
 * lines discovery found them on; an op whose cut does not match discovery's
 * extent (a definition no brace closes, two on one line) is recorded whole:
 * any edit of its file makes it stale. */
typedef struct op_fact {
    bool whole;
    prov_digest at, unit;
} op_fact;

static size_t line_start(const char *text, size_t at)
{
    while (at > 0 && text[at - 1] != '\n')
        at--;
    return at;
}

static void facts_of_file(const gen_oplist *ops, const char *source, op_fact *facts)
{
    uint8_t *bytes = NULL;
    size_t size = 0;
    bool ok = read_file(source, &bytes, &size);
    const char *text = (const char *)bytes;
    size_t n = 0;
    size_t *idx = xcalloc(ops->count, sizeof *idx);
    for (size_t i = 0; i < ops->count; i++)
        if (!strcmp(ops->items[i].source, source))
            idx[n++] = i;
    prov_digest *at = xcalloc(n ? n : 1, sizeof *at);
    for (size_t k = 0; ok && k < n; k++) {
        const gen_op *o = &ops->items[idx[k]];
        at[k] = o->begin <= size ? prov_line_digest(text, size, line_start(text, o->begin))
                                 : prov_digest_of("", 0);
    }
    prov_file_cut cut = {0};
    if (ok)
        prov_cut(text, size, at, n, &cut);
    prov_digest whole = ok ? prov_digest_of(text, size) : prov_digest_of("", 0);
    for (size_t k = 0; k < n; k++) {
        const gen_op *o = &ops->items[idx[k]];
        op_fact *f = &facts[idx[k]];
        f->at = at[k];
        bool match = ok && cut.ext[k].found && o->end <= size && o->begin <= o->end &&
                     cut.ext[k].begin == line_start(text, o->begin) &&
                     cut.ext[k].end == whole_line_end(text, size, o->end);
        f->whole = !match;
        f->unit = match ? cut.unit[k] : whole;
    }
    if (ok)
        prov_cut_free(&cut);
    free(at);
    free(idx);
    free(bytes);
}

static op_fact *op_facts(const gen_oplist *ops)
{
    op_fact *facts = xcalloc(ops->count ? ops->count : 1, sizeof *facts);
    bool *done = xcalloc(ops->count ? ops->count : 1, sizeof *done);
    for (size_t i = 0; i < ops->count; i++) {
        if (done[i])
            continue;
        facts_of_file(ops, ops->items[i].source, facts);
        for (size_t j = i; j < ops->count; j++)
            if (!strcmp(ops->items[j].source, ops->items[i].source))
                done[j] = true;
    }
    free(done);
    return facts;
}

static void put_header_lines(strbuf *sb, const prov_inputs *in)
{
    sb_puts(sb, "/* Provenance, read by `stencilgen check-prebuilt` (docs/build.md, \"Prebuilt\n"
                " * headers\"): what each stencil was made from; paths are relative to the\n"
                " * manifest, digests cover the files' bytes.\n");
    sb_printf(sb, " * sg-provenance %d\n", PROV_FORMAT_VERSION);
    sb_printf(sb, " * sg-generator %s\n", prov_generator());
    /* The version the compiler itself says (its predefined macros), not the
     * --clang path or name, nor a launcher: the same compiler reached another
     * way writes the same header (test_in_process). */
    sb_printf(sb, " * sg-compiler clang, LLVM %s\n", in->compiler_version);
    sb_printf(sb, " * sg-abi %d\n", SG_ABI_VERSION);
    sb_printf(sb, " * sg-layout %s\n", in->hot_cold ? "hot-cold" : "whole");
}

void prov_write(strbuf *sb, const prov_inputs *in)
{
    const gen_manifest *m = in->manifest;
    reads_memo memo = {0};
    size_t *reads = xcalloc(in->ops->count + 1, sizeof *reads);
    for (size_t i = 0; i <= in->ops->count; i++) {
        bool shim = i == in->ops->count;
        reads[i] = memo_reads(&memo, in, shim ? in->shim_deps : in->op_deps[i],
                              shim ? m->shim_source : in->ops->items[i].source);
    }
    name_set all = {0};
    for (size_t i = 0; i < memo.count; i++)
        for (size_t k = 0; k < memo.items[i].reads.count; k++)
            ARRAY_PUSH(all.items, all.count, all.cap, xstrdup(memo.items[i].reads.items[k]));
    sort_unique(&all);
    op_fact *facts = op_facts(in->ops);
    absent_lists absent = absent_lists_make(in);
    put_header_lines(sb, in);
    put_files(sb, in, &all);
    put_absent_lists(sb, &absent);
    char *shim_rel = manifest_relpath(m, m->shim_source);
    sb_puts(sb, " * sg-shim ");
    prov_put_name(sb, shim_rel);
    sb_printf(sb, " unit %s flags %s", file_digest(m->shim_source).hex,
              prov_flags_digest(m, in->triple, in->target, true).hex);
    put_absent(sb, absent.of[in->ops->count]);
    put_reads(sb, &memo.items[reads[in->ops->count]].reads);
    free(shim_rel);
    prov_digest flags = prov_flags_digest(m, in->triple, in->target, false);
    for (size_t i = 0; i < in->ops->count; i++) {
        const gen_op *o = &in->ops->items[i];
        char *src = manifest_relpath(m, o->source);
        sb_printf(sb, " * sg-op %s ", o->name);
        prov_put_name(sb, src);
        if (facts[i].whole)
            sb_puts(sb, " whole");
        else
            sb_printf(sb, " at %s", facts[i].at.hex);
        sb_printf(sb, " unit %s flags %s", facts[i].unit.hex, flags.hex);
        put_absent(sb, absent.of[i]);
        put_reads(sb, &memo.items[reads[i]].reads);
        free(src);
    }
    sb_puts(sb, " */\n");
    free(reads);
    absent_lists_free(&absent);
    reads_memo_free(&memo);
    free_names(&all);
    free(facts);
}
