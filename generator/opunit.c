/* opunit.c - see opunit.h. */
#define _GNU_SOURCE
#include "opunit.h"
#include "split.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Extend [*b, *e) to whole lines when only blanks share them with it. */
static void whole_lines(const char *text, size_t size, size_t *b, size_t *e)
{
    size_t lb = *b, le = *e;
    while (lb > 0 && (text[lb - 1] == ' ' || text[lb - 1] == '\t'))
        lb--;
    while (le < size && (text[le] == ' ' || text[le] == '\t' || text[le] == '\r'))
        le++;
    if ((lb == 0 || text[lb - 1] == '\n') && (le == size || text[le] == '\n')) {
        *b = lb;
        *e = le < size ? le + 1 : le;
    }
}

/* 1 + the newlines before offset. */
static unsigned line_at(const op_source *t, size_t offset)
{
    return (unsigned)first_at_least(t->newlines, t->nnewlines, offset) + 1;
}

/* Whether text[from, to) holds nothing but blanks: a segment without tokens,
 * left out of units and keys (each segment starts with its own #line, so
 * the lines it spans do not matter). */
static bool blank(const char *text, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++)
        if (text[i] != ' ' && text[i] != '\t' && text[i] != '\n' && text[i] != '\r' &&
            text[i] != '\f' && text[i] != '\v')
            return false;
    return true;
}

static void add_segment(op_unit *u, const gen_op *op, const op_source *t, size_t from, size_t to)
{
    const char *text = (const char *)t->text;
    if (from >= to || blank(text, from, to))
        return;
    sb_printf(&u->unit, "#line %u ", line_at(t, from));
    sb_put_quoted(&u->unit, op->source, SB_QUOTE_C); /* clang decodes #line's escapes */
    sb_putc(&u->unit, '\n');
    sb_putn(&u->unit, text + from, to - from);
    if (text[to - 1] != '\n')
        sb_putc(&u->unit, '\n');
}

/* The definitions that make an op's definition one of its variants (docs/
 * ops.md, "Variants"): its axes' values as STENCIL_V_<axis>, and its
 * function renamed to the variant's, so that a unit can hold several
 * variants of an op; undefined after it, as the text after the op is every
 * variant's. Nothing for an op without variants. */
static void variant_defs(const gen_op *op, strbuf *defs, strbuf *undefs)
{
    if (!op->naxes)
        return;
    const char *prefix = op->prefixed ? "op_" : "";
    /* A misspelled STENCIL_V(axis) in #if would be 0, silently: an error. */
    sb_puts(defs, "#pragma clang diagnostic push\n#pragma clang diagnostic error \"-Wundef\"\n");
    for (size_t i = 0; i < op->naxes; i++) {
        sb_printf(defs, "#define STENCIL_V_%s %u\n", op->axes[i].name, op->values[i]);
        sb_printf(undefs, "#undef STENCIL_V_%s\n", op->axes[i].name);
    }
    sb_printf(defs, "#define %s%s %s%s\n", prefix, op->base, prefix, op->name);
    sb_printf(undefs, "#undef %s%s\n#pragma clang diagnostic pop\n", prefix, op->base);
}

/* An op's definition, a variant's between its variant_defs. */
static void add_op_segment(op_unit *u, const gen_op *first, const op_source *t, size_t from,
                           size_t to, const gen_op *op)
{
    strbuf defs = {0}, undefs = {0};
    variant_defs(op, &defs, &undefs);
    if (defs.len)
        sb_putn(&u->unit, defs.data, defs.len);
    add_segment(u, first, t, from, to);
    if (undefs.len)
        sb_putn(&u->unit, undefs.data, undefs.len);
    sb_free(&defs);
    sb_free(&undefs);
}

/* Mach-O has no aliases: a batch's entry there is a function that
 * tail-calls the op, as the template's _JIT_ENTRY is in the op's own unit,
 * and the op is always_inline so that the entry's code is the op's own.
 * Declared so before its definition: clang ignores the attribute on a later
 * declaration (docs/platforms.md, "Units"). */
static void add_apple_inline_decl(op_unit *u, const gen_op *op)
{
    sb_printf(&u->unit,
              "#ifdef __APPLE__\n"
              "static inline __attribute__((always_inline)) STENCIL_CC STENCIL_RETURN "
              "%s%s(STENCIL_PARAMS);\n#endif\n",
              op->prefixed ? "op_" : "", op->name);
}

/* A batch member's entry: an alias of its function, or on Mach-O a
 * function that tail-calls it (add_apple_inline_decl). */
static void add_entry(op_unit *u, const gen_op *op)
{
    const char *prefix = op->prefixed ? "op_" : "";
    sb_printf(&u->unit,
              "#ifdef __APPLE__\n"
              "STENCIL_CC STENCIL_RETURN " SPLIT_ENTRY_PREFIX "%s(STENCIL_PARAMS);\n"
              "STENCIL_CC STENCIL_RETURN " SPLIT_ENTRY_PREFIX "%s(STENCIL_PARAMS)\n"
              "{\n    __attribute__((musttail)) return %s%s(STENCIL_ARGS);\n}\n#else\n",
              op->name, op->name, prefix, op->name);
    sb_printf(&u->unit,
              "extern __typeof__(%s%s) " SPLIT_ENTRY_PREFIX "%s "
              "__attribute__((alias(STENCIL_ALIAS_PREFIX \"%s%s\")));\n#endif\n",
              prefix, op->name, op->name, prefix, op->name);
}

/* Variants of one op share its definition (variant_expand lists them one
 * after another). */
static bool same_definition(const gen_op *a, const gen_op *b)
{
    return a->begin == b->begin && a->end == b->end && !strcmp(a->source, b->source);
}

static bool is_member(const gen_op *o, const gen_op *const *members, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (members[i] == o)
            return true;
    return false;
}

/* Whether op o's definition can be cut out of the file, its text ending at
 * or after `at` (discovery gives ops of a file in source order; one that is
 * not stays in the text around the others). */
static bool cuttable(const gen_op *o, size_t at, size_t size)
{
    return o->end <= size && o->begin <= o->end && o->begin >= at;
}

/* The file without the ops that are not members; a batch also makes each
 * member's entry (_JIT_ENTRY_<name>, add_entry) after the text. */
static op_unit unit_of(const gen_oplist *ops, const gen_op *const *members, size_t n,
                       bool batch, const op_source *t)
{
    const char *text = (const char *)t->text;
    size_t size = t->size;
    op_unit u = {{0}};
    size_t at = 0;
    const gen_op *first = members[0];
    for (size_t i = 0; i < ops->count; i++) { /* ops of a file are in source order */
        const gen_op *o = &ops->items[i];
        if (strcmp(o->source, first->source) || !cuttable(o, at, size))
            continue;
        size_t b = o->begin, e = o->end;
        whole_lines(text, size, &b, &e);
        add_segment(&u, first, t, at, b);
        /* The op's variants follow it, with its definition (variant_expand). */
        for (size_t k = i; k < ops->count && same_definition(&ops->items[k], o); k++) {
            if (!is_member(&ops->items[k], members, n))
                continue;
            if (batch)
                add_apple_inline_decl(&u, &ops->items[k]);
            add_op_segment(&u, first, t, b, e, &ops->items[k]);
        }
        at = e;
    }
    add_segment(&u, first, t, at, size);
    /* The entries are the generator's text, not the file's (messages about
     * them name the batched unit), and need nothing from the template but,
     * on Mach-O, the macros its own _JIT_ENTRY uses (STENCIL_CC and the
     * VM's three): any template that compiled per-op units, an older copy of
     * stencil_op.h included, compiles batches too (one without the aliases'
     * prefix gets none). */
    if (batch)
        sb_puts(&u.unit, "#ifndef STENCIL_ALIAS_PREFIX\n"
                         "#define STENCIL_ALIAS_PREFIX \"\"\n"
                         "#endif\n"
                         "#line 1 \"<stencilgen batched unit>\"\n");
    for (size_t i = 0; batch && i < n; i++)
        add_entry(&u, members[i]);
    if (!u.unit.data)
        sb_puts(&u.unit, "");
    return u;
}

/* Identifiers whose value depends on where the code sits. */
static const char *const position_macros[] = {
    "__LINE__", "__FILE__", "__FILE_NAME__", "__BASE_FILE__", "__builtin_LINE",
    "__builtin_FILE", "__builtin_FILE_NAME", "__builtin_COLUMN", NULL,
};

static bool ident_char(char c)
{
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

bool text_mentions_position(const char *text, size_t size)
{
    for (const char *p = text, *end = text + size;
         (p = memmem(p, (size_t)(end - p), "__", 2)) != NULL; p++) {
        if (p > text && ident_char(p[-1]))
            continue;
        for (const char *const *m = position_macros; *m; m++) {
            size_t n = strlen(*m);
            if ((size_t)(end - p) >= n && !memcmp(p, *m, n) && (p + n == end || !ident_char(p[n])))
                return true;
        }
    }
    return false;
}

static const op_source *source_of(op_sources *s, const char *path)
{
    for (size_t i = 0; i < s->count; i++)
        if (!strcmp(s->items[i].path, path))
            return &s->items[i];
    op_source t = {path, NULL, 0, NULL, 0};
    if (!read_file(path, &t.text, &t.size))
        t.text = NULL;
    size_t cap = 0;
    for (size_t i = 0; t.text && i < t.size; i++)
        if (t.text[i] == '\n')
            ARRAY_PUSH(t.newlines, t.nnewlines, cap, i);
    ARRAY_PUSH(s->items, s->count, s->cap, t);
    return &s->items[s->count - 1];
}

static op_unit unreadable(void)
{
    op_unit u = {{0}}; /* the compile will say what is wrong */
    sb_puts(&u.unit, "#error \"cannot read the op source\"\n");
    return u;
}

op_unit op_unit_for(op_sources *sources, const gen_oplist *ops, const gen_op *op)
{
    const op_source *src = source_of(sources, op->source);
    if (src->text)
        return unit_of(ops, &op, 1, false, src);
    return unreadable();
}

op_unit op_batch_unit_for(op_sources *sources, const gen_oplist *ops,
                          const gen_op *const *members, size_t n)
{
    const op_source *src = source_of(sources, members[0]->source);
    if (src->text)
        return unit_of(ops, members, n, true, src);
    return unreadable();
}

/* ---- keys: each op's unit is the text around every op of its file, the
 * same for all of them, plus its own definition. The text before the op and
 * the text after it are hashed once per file, as running hashes from either
 * end, so keying a file's n ops reads it once, not n times. */

/* Running digests of segments: each segment's text, and the line it starts
 * at, chained onto those before it (a chain of SHA-256 steps is as hard to
 * collide as one digest of the whole). */
typedef struct segment_run {
    digest text, lines;
} segment_run;

static void chain(digest *run, const void *data, size_t size)
{
    digest_ctx h;
    digest_begin(&h);
    digest_add_digest(&h, run);
    digest_add_field(&h, data, size);
    *run = digest_end(&h);
}

/* A segment as the key sees it: its text, and the line it starts at. */
static void hash_segment(const op_source *t, size_t from, size_t to, segment_run *run,
                         size_t *hashed)
{
    if (from >= to || blank((const char *)t->text, from, to))
        return;
    *hashed += to - from;
    unsigned n = line_at(t, from);
    uint8_t line[4] = {(uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16), (uint8_t)(n >> 24)};
    chain(&run->text, t->text + from, to - from);
    chain(&run->lines, line, sizeof line);
}

/* The key facts of op `o`, its definition t[b, e), given the digests of the
 * text before it (pre) and after it (post): lines go into the position
 * alone, so an edit that moves an op keeps its key. */
static op_key key_of(const gen_op *o, const op_source *t, size_t b, size_t e,
                     const segment_run *pre, const segment_run *post, bool around_mentions,
                     size_t *hashed)
{
    segment_run own = {{{0}}, {{0}}};
    hash_segment(t, b, e, &own, hashed);
    strbuf defs = {0}, undefs = {0};
    variant_defs(o, &defs, &undefs); /* a variant's values, in its key as in its unit */
    digest_ctx h;
    digest_begin(&h);
    digest_add_digest(&h, &pre->text);
    digest_add_field(&h, defs.data ? defs.data : "", defs.len);
    digest_add_digest(&h, &own.text);
    digest_add_field(&h, undefs.data ? undefs.data : "", undefs.len);
    digest_add_digest(&h, &post->text);
    sb_free(&defs);
    sb_free(&undefs);
    op_key k = {digest_end(&h), {{0}},
                around_mentions || text_mentions_position((const char *)t->text + b, e - b)};
    digest_begin(&h);
    digest_add_digest(&h, &pre->lines);
    digest_add_digest(&h, &own.lines);
    digest_add_digest(&h, &post->lines);
    k.position = digest_end(&h);
    return k;
}

void op_keys_for_file(op_sources *sources, const gen_op *ops, size_t n, op_key *keys,
                      size_t *hashed)
{
    const op_source *t = n ? source_of(sources, ops[0].source) : NULL;
    if (!t || !t->text) {
        for (size_t i = 0; i < n; i++) /* its compile says what is wrong */
            keys[i] = (op_key){digest_of(ops[i].name, strlen(ops[i].name)), {{0}}, false};
        return;
    }
    const char *text = (const char *)t->text;
    /* Each op's [b, e), or cut false; gap i is the text before op i's b. A
     * variant after the first of its op shares its definition and its
     * gaps (follows[i]: the first's index + 1). */
    size_t *b = xcalloc(n + 1, sizeof *b), *e = xcalloc(n + 1, sizeof *e);
    size_t *follows = xcalloc(n + 1, sizeof *follows);
    bool *cut = xcalloc(n + 1, sizeof *cut);
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        b[i] = e[i] = at;
        size_t lead = i && follows[i - 1] ? follows[i - 1] - 1 : i - 1;
        if (i && cut[lead] && same_definition(&ops[i], &ops[lead])) {
            follows[i] = lead + 1;
            continue;
        }
        if (!cuttable(&ops[i], at, t->size))
            continue;
        b[i] = ops[i].begin, e[i] = ops[i].end;
        whole_lines(text, t->size, &b[i], &e[i]);
        cut[i] = true;
        at = e[i];
    }
    b[n] = t->size;
    /* gap_start[i]: where the gap before op i starts (the end of the last cut op). */
    size_t *gap_start = xcalloc(n + 1, sizeof *gap_start);
    bool mentions = false;
    for (size_t i = 0, last = 0; i <= n; i++) {
        if (i < n && !cut[i])
            continue;
        gap_start[i] = last;
        mentions |= text_mentions_position(text + last, b[i] - last);
        last = i < n ? e[i] : last;
    }
    /* pre[i]: the gaps before op i; post[i]: those after it. */
    segment_run *pre = xcalloc(n + 1, sizeof *pre), *post = xcalloc(n + 1, sizeof *post);
    segment_run run = {{{0}}, {{0}}};
    for (size_t i = 0; i < n; i++) {
        if (cut[i])
            hash_segment(t, gap_start[i], b[i], &run, hashed);
        pre[i] = run;
    }
    run = (segment_run){{{1}}, {{1}}}; /* "after": never a chain from the start */
    hash_segment(t, gap_start[n], t->size, &run, hashed);
    for (size_t i = n; i-- > 0;) {
        post[i] = run;
        if (cut[i])
            hash_segment(t, gap_start[i], b[i], &run, hashed);
    }
    for (size_t i = 0; i < n; i++) {
        size_t d = follows[i] ? follows[i] - 1 : i; /* whose definition and gaps */
        /* An op that cannot be cut out is compiled from the whole file. */
        static const segment_run none = {{{0}}, {{0}}};
        keys[i] = cut[d] ? key_of(&ops[i], t, b[d], e[d], &pre[d], &post[d], mentions, hashed)
                         : key_of(&ops[i], t, 0, t->size, &none, &none, mentions, hashed);
    }
    free(follows);
    free(pre);
    free(post);
    free(gap_start);
    free(cut);
    free(b);
    free(e);
}

void op_sources_free(op_sources *sources)
{
    for (size_t i = 0; i < sources->count; i++) {
        free(sources->items[i].text);
        free(sources->items[i].newlines);
    }
    free(sources->items);
}
