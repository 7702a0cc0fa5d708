/* opunit.c - see opunit.h. */
#define _GNU_SOURCE
#include "opunit.h"
#include "split.h"

#include <stdbool.h>
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

static void add_segment(op_unit *u, bool want_unit, const gen_op *op, const op_source *t,
                        size_t from, size_t to)
{
    if (from >= to)
        return;
    const char *text = (const char *)t->text;
    unsigned line = line_at(t, from);
    sb_putn(&u->key, text + from, to - from);
    u->position = hash64(&line, sizeof line, u->position);
    if (!want_unit)
        return;
    sb_printf(&u->unit, "#line %u ", line);
    sb_put_quoted(&u->unit, op->source, SB_QUOTE_C); /* clang decodes #line's escapes */
    sb_putc(&u->unit, '\n');
    sb_putn(&u->unit, text + from, to - from);
    if (text[to - 1] != '\n')
        sb_putc(&u->unit, '\n');
}

/* Generator text in both the unit and its key. */
static void add_generated(op_unit *u, bool want_unit, const char *text)
{
    sb_puts(&u->key, text);
    if (want_unit)
        sb_puts(&u->unit, text);
}

/* An op's definition; a variant's between the definitions that make it that
 * variant (docs/ops.md, "Variants"): its axes' values as STENCIL_V_<axis>,
 * and its function renamed to the variant's, so that a unit can hold
 * several variants of an op. Undefined after it: the text after the op is
 * every variant's. */
static void add_op_segment(op_unit *u, bool want_unit, const gen_op *first, const op_source *t,
                           size_t from, size_t to, const gen_op *op)
{
    if (!op->naxes) {
        add_segment(u, want_unit, first, t, from, to);
        return;
    }
    const char *prefix = op->prefixed ? "op_" : "";
    strbuf defs = {0}, undefs = {0};
    /* A misspelled STENCIL_V(axis) in #if would be 0, silently: an error. */
    sb_puts(&defs, "#pragma clang diagnostic push\n#pragma clang diagnostic error \"-Wundef\"\n");
    for (size_t i = 0; i < op->naxes; i++) {
        sb_printf(&defs, "#define STENCIL_V_%s %u\n", op->axes[i].name, op->values[i]);
        sb_printf(&undefs, "#undef STENCIL_V_%s\n", op->axes[i].name);
    }
    sb_printf(&defs, "#define %s%s %s%s\n", prefix, op->base, prefix, op->name);
    sb_printf(&undefs, "#undef %s%s\n#pragma clang diagnostic pop\n", prefix, op->base);
    add_generated(u, want_unit, defs.data);
    add_segment(u, want_unit, first, t, from, to);
    add_generated(u, want_unit, undefs.data);
    sb_free(&defs);
    sb_free(&undefs);
}

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

/* The file without the ops that are not members; a batch also makes each
 * member's entry (_JIT_ENTRY_<name>, an alias of its function) after the text. */
static op_unit unit_of(const gen_oplist *ops, const gen_op *const *members, size_t n,
                       bool batch, const op_source *t, bool want_unit)
{
    const char *text = (const char *)t->text;
    size_t size = t->size;
    op_unit u = {{0}, {0}, 0};
    size_t at = 0;
    const gen_op *first = members[0];
    for (size_t i = 0; i < ops->count; i++) { /* ops of a file are in source order */
        const gen_op *o = &ops->items[i];
        if (strcmp(o->source, first->source) || o->end > size || o->begin > o->end ||
            o->begin < at)
            continue;
        size_t b = o->begin, e = o->end;
        whole_lines(text, size, &b, &e);
        add_segment(&u, want_unit, first, t, at, b);
        /* The op's variants follow it, with its definition (variant_expand). */
        for (size_t k = i; k < ops->count && same_definition(&ops->items[k], o); k++)
            if (is_member(&ops->items[k], members, n))
                add_op_segment(&u, want_unit, first, t, b, e, &ops->items[k]);
        at = e;
    }
    add_segment(&u, want_unit, first, t, at, size);
    /* The entries are the generator's text, not the file's (messages about
     * them name the batched unit), and need nothing from the template: any
     * template that compiled per-op units, an older copy of stencil_op.h
     * included, compiles batches too. */
    if (batch && want_unit)
        sb_puts(&u.unit, "#line 1 \"<stencilgen batched unit>\"\n");
    for (size_t i = 0; batch && i < n; i++) {
        const char *prefix = members[i]->prefixed ? "op_" : "";
        sb_printf(&u.key, "entry %s%s %s\n", prefix, members[i]->name, members[i]->name);
        if (want_unit)
            sb_printf(&u.unit,
                      "extern __typeof__(%s%s) " SPLIT_ENTRY_PREFIX "%s "
                      "__attribute__((alias(\"%s%s\")));\n",
                      prefix, members[i]->name, members[i]->name, prefix, members[i]->name);
    }
    if (!u.unit.data)
        sb_puts(&u.unit, "");
    if (!u.key.data)
        sb_puts(&u.key, "");
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
    op_unit u = {{0}, {0}, 0}; /* the compile will say what is wrong */
    sb_puts(&u.key, "");
    sb_puts(&u.unit, "#error \"cannot read the op source\"\n");
    return u;
}

op_unit op_unit_for(op_sources *sources, const gen_oplist *ops, const gen_op *op, bool want_unit)
{
    const op_source *src = source_of(sources, op->source);
    if (src->text)
        return unit_of(ops, &op, 1, false, src, want_unit);
    return unreadable();
}

op_unit op_batch_unit_for(op_sources *sources, const gen_oplist *ops,
                          const gen_op *const *members, size_t n, bool want_unit)
{
    const op_source *src = source_of(sources, members[0]->source);
    if (src->text)
        return unit_of(ops, members, n, true, src, want_unit);
    return unreadable();
}

void op_sources_free(op_sources *sources)
{
    for (size_t i = 0; i < sources->count; i++) {
        free(sources->items[i].text);
        free(sources->items[i].newlines);
    }
    free(sources->items);
}
