/* opunit.c - see opunit.h. */
#include "opunit.h"

#include <stdbool.h>
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

static unsigned line_at(const char *text, size_t offset)
{
    unsigned line = 1;
    for (size_t i = 0; i < offset; i++)
        line += text[i] == '\n';
    return line;
}

static void add_segment(op_unit *u, bool want_unit, const sg_op *op, const char *text,
                        size_t from, size_t to)
{
    if (from >= to)
        return;
    sb_putn(&u->key, text + from, to - from);
    if (!want_unit)
        return;
    sb_printf(&u->unit, "#line %u \"%s\"\n", line_at(text, from), op->source);
    sb_putn(&u->unit, text + from, to - from);
    if (text[to - 1] != '\n')
        sb_putc(&u->unit, '\n');
}

op_unit op_translation_unit(const sg_oplist *ops, const sg_op *op, const char *text,
                           size_t size, bool want_unit)
{
    op_unit u = {{0}, {0}};
    size_t at = 0;
    for (size_t i = 0; i < ops->count; i++) { /* ops of a file are in source order */
        const sg_op *o = &ops->items[i];
        if (strcmp(o->source, op->source) || o->end > size || o->begin > o->end || o->begin < at)
            continue;
        size_t b = o->begin, e = o->end;
        whole_lines(text, size, &b, &e);
        add_segment(&u, want_unit, op, text, at, b);
        if (o == op)
            add_segment(&u, want_unit, op, text, b, e);
        at = e;
    }
    add_segment(&u, want_unit, op, text, at, size);
    if (!u.unit.data)
        sb_puts(&u.unit, "");
    if (!u.key.data)
        sb_puts(&u.key, "");
    return u;
}
