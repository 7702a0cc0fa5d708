/* variant.c - see variant.h. */
#define _GNU_SOURCE
#include "variant.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

size_t variant_count(const gen_axis *axes, size_t naxes)
{
    size_t n = 1;
    for (size_t i = 0; i < naxes; i++)
        n *= axes[i].last - axes[i].first + 1;
    return n;
}

/* Variant v's value on each axis (the last axis varies fastest). */
static void values_of(const gen_op *op, size_t v, unsigned *values)
{
    for (size_t i = op->naxes; i-- > 0;) {
        size_t span = op->axes[i].last - op->axes[i].first + 1;
        values[i] = op->axes[i].first + (unsigned)(v % span);
        v /= span;
    }
}

static gen_op variant_of(const gen_op *op, size_t v)
{
    gen_op x = *op;
    x.variant = v;
    values_of(op, v, x.values);
    x.axes = xcalloc(op->naxes, sizeof *x.axes);
    strbuf c = {0}, d = {0};
    sb_printf(&c, "%s_", op->name);
    sb_printf(&d, "%s[", op->name);
    for (size_t i = 0; i < op->naxes; i++) {
        x.axes[i] = (gen_axis){xstrdup(op->axes[i].name), op->axes[i].first, op->axes[i].last};
        sb_printf(&c, "_%s%u", op->axes[i].name, x.values[i]);
        sb_printf(&d, "%s%s=%u", i ? "," : "", op->axes[i].name, x.values[i]);
    }
    sb_putc(&d, ']');
    x.name = c.data;
    x.display = d.data;
    x.base = xstrdup(op->name);
    x.source = xstrdup(op->source);
    return x;
}

void variant_expand(gen_oplist *ops, size_t from)
{
    gen_oplist out = {0};
    for (size_t i = 0; i < ops->count; i++) {
        gen_op *op = &ops->items[i];
        if (i < from || !op->naxes) {
            ARRAY_PUSH(out.items, out.count, out.cap, *op);
            continue;
        }
        size_t n = variant_count(op->axes, op->naxes);
        for (size_t v = 0; v < n; v++) {
            gen_op x = variant_of(op, v);
            ARRAY_PUSH(out.items, out.count, out.cap, x);
        }
        free(op->name);
        free(op->source);
        gen_op_free_variant(op);
    }
    free(ops->items);
    *ops = out;
}

static bool same_holes(const gen_hole *a, const gen_hole *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i].offset != b[i].offset || a[i].patch != b[i].patch || a[i].value != b[i].value ||
            a[i].index != b[i].index || a[i].addend != b[i].addend)
            return false;
    return true;
}

bool variant_same_stencil(const gen_stencil *a, const gen_stencil *b)
{
    return a->code_size == b->code_size && a->data_size == b->data_size &&
           a->data_align == b->data_align && a->entry == b->entry &&
           a->removed_jump == b->removed_jump && a->ncode_holes == b->ncode_holes &&
           a->ndata_holes == b->ndata_holes &&
           (!a->code_size || !memcmp(a->code, b->code, a->code_size)) &&
           (!a->data_size || !memcmp(a->data, b->data, a->data_size)) &&
           same_holes(a->code_holes, b->code_holes, a->ncode_holes) &&
           same_holes(a->data_holes, b->data_holes, a->ndata_holes);
}

size_t variant_fold(const gen_oplist *ops, const gen_stencil *stencils, size_t *twin)
{
    size_t folded = 0;
    for (size_t i = 0; i < ops->count; i++) {
        twin[i] = i;
        const gen_op *op = &ops->items[i];
        /* Its op's variants come before it, from number 0 on (variant_expand):
         * compare with those that are their own stencil. */
        for (size_t k = i - op->variant; op->naxes && k < i && twin[i] == i; k++)
            if (twin[k] == k && variant_same_stencil(&stencils[k], &stencils[i]))
                twin[i] = k;
        folded += twin[i] != i;
    }
    return folded;
}
