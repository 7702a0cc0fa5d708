/* emit.c - copy stencils back to back and patch their holes.
 *
 * An executor is one run of pages: [code][read-only data][GOT]. Stencil data
 * without holes is shared by every use of the same op; GOT slots are shared
 * by equal values. Every patch is range-checked: a value that does not fit is
 * an error, never a truncation. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static size_t align_up(size_t v, size_t a)
{
    return a > 1 ? (v + a - 1) / a * a : v;
}

static bool has_value(const sg_stencil *s, sg_value v)
{
    for (size_t i = 0; i < s->code_hole_count; i++)
        if (s->code_holes[i].value == v)
            return true;
    for (size_t i = 0; i < s->data_hole_count; i++)
        if (s->data_holes[i].value == v)
            return true;
    return false;
}

static size_t got_holes(const sg_stencil *s)
{
    size_t n = 0;
    for (size_t i = 0; i < s->code_hole_count; i++)
        n += s->code_holes[i].patch == SG_PATCH_GOTPCREL32;
    for (size_t i = 0; i < s->data_hole_count; i++)
        n += s->data_holes[i].patch == SG_PATCH_GOTPCREL32;
    return n;
}

sr_status emit_plan(const sr_stencil_set *set, const sr_instr *code, size_t n,
                    uint32_t *offsets, sr_layout *l)
{
    if (n == 0)
        return sr_fail(SR_EINVAL, "an executor needs at least one instruction");
    size_t at = 0, data = 0, got = 0;
    for (size_t i = 0; i < n; i++) {
        if (code[i].op >= set->count)
            return sr_fail(SR_EINVAL, "instruction %zu: op %" PRIu32 " does not exist (%zu ops)",
                           i, code[i].op, set->count);
        const sg_stencil *s = &set->stencils[code[i].op];
        if (has_value(s, SG_VALUE_JUMP_TARGET) && code[i].target >= n)
            return sr_fail(SR_EINVAL, "instruction %zu (%s): jump target %" PRIu32
                           " is outside the executor (%zu instructions)",
                           i, s->name, code[i].target, n);
        if (i == n - 1 && (s->falls_through || has_value(s, SG_VALUE_CONTINUE)))
            return sr_fail(SR_EFALLTHROUGH, "the last instruction (%s) continues past the end",
                           s->name);
        offsets[i] = (uint32_t)at;
        at += s->code_size;
        data += s->data_size + s->data_align;
        got += got_holes(s);
        if (at > UINT32_MAX / 2)
            return sr_fail(SR_ENOMEM, "executor code larger than 2 GiB");
    }
    offsets[n] = (uint32_t)at;
    l->code_size = at;
    l->data_start = align_up(at, 16);
    l->data_end = l->data_start + data; /* an upper bound: data of holeless ops is shared */
    l->got_start = align_up(l->data_end, 8);
    l->got_slots = got;
    l->total = l->got_start + 8 * got;
    return SR_OK;
}

typedef struct writer {
    const sr_stencil_set *set;
    const void *const *symbols;
    const sr_instr *code;
    size_t n;
    const uint32_t *offsets;
    uint8_t *mem;
    const sr_layout *l;
    size_t *data_of;   /* per instruction: data offset */
    size_t *op_data;   /* per op: shared data offset + 1 (0 = not placed yet) */
    uint64_t *got_keys; /* open-addressing table: value -> slot */
    uint32_t *got_index; /* slot number + 1 (0 = empty) */
    size_t got_mask;
    size_t got_used;
} writer;

static sr_status value_of(writer *w, size_t i, const sg_hole *h, uint64_t *s)
{
    const sr_instr *in = &w->code[i];
    switch ((sg_value)h->value) {
    case SG_VALUE_CODE: *s = (uintptr_t)(w->mem + w->offsets[i]); return SR_OK;
    case SG_VALUE_DATA: *s = (uintptr_t)(w->mem + w->data_of[i]); return SR_OK;
    case SG_VALUE_CONTINUE: *s = (uintptr_t)(w->mem + w->offsets[i + 1]); return SR_OK;
    case SG_VALUE_JUMP_TARGET: *s = (uintptr_t)(w->mem + w->offsets[in->target]); return SR_OK;
    case SG_VALUE_OPERAND:
        if (h->index >= sizeof in->operand / sizeof in->operand[0])
            break;
        *s = in->operand[h->index];
        return SR_OK;
    case SG_VALUE_SYMBOL:
        if (h->index >= w->set->symbol_count)
            break;
        if (!w->symbols || !w->symbols[h->index])
            return sr_fail(SR_ESYMBOL, "run-time symbol '%s' has no value",
                           w->set->symbol_names[h->index]);
        *s = (uintptr_t)w->symbols[h->index];
        return SR_OK;
    default: break;
    }
    return sr_fail(SR_EUNSUPPORTED, "instruction %zu: hole value %u/%u is not supported", i,
                   h->value, h->index);
}

/* The address of the GOT slot holding `value`, allocated on first use. */
static uint64_t got_slot(writer *w, uint64_t value)
{
    size_t k = (size_t)((value * 0x9e3779b97f4a7c15ull) >> 17) & w->got_mask;
    while (w->got_index[k] && w->got_keys[k] != value)
        k = (k + 1) & w->got_mask;
    if (!w->got_index[k]) {
        w->got_keys[k] = value;
        w->got_index[k] = (uint32_t)++w->got_used;
        memcpy(w->mem + w->l->got_start + 8 * (w->got_used - 1), &value, 8);
    }
    return (uintptr_t)(w->mem + w->l->got_start + 8 * (w->got_index[k] - 1));
}

static sr_status patch(writer *w, size_t i, const sg_hole *h, uint8_t *loc)
{
    uint64_t s = 0;
    sr_status st = value_of(w, i, h, &s);
    if (st != SR_OK)
        return st;
    uint64_t p = (uintptr_t)loc;
    uint64_t v = s + (uint64_t)h->addend;
    int64_t sv;
    switch ((sg_patch)h->patch) {
    case SG_PATCH_ABS64: memcpy(loc, &v, 8); return SR_OK;
    case SG_PATCH_ABS32:
        if (v > UINT32_MAX)
            break;
        memcpy(loc, &(uint32_t){(uint32_t)v}, 4);
        return SR_OK;
    case SG_PATCH_ABS32S:
        sv = (int64_t)v;
        if (sv < INT32_MIN || sv > INT32_MAX)
            break;
        memcpy(loc, &(int32_t){(int32_t)sv}, 4);
        return SR_OK;
    case SG_PATCH_PCREL32:
    case SG_PATCH_GOTPCREL32:
        if (h->patch == SG_PATCH_GOTPCREL32)
            v = got_slot(w, s) + (uint64_t)h->addend;
        sv = (int64_t)(v - p);
        if (sv < INT32_MIN || sv > INT32_MAX)
            break;
        memcpy(loc, &(int32_t){(int32_t)sv}, 4);
        return SR_OK;
    default:
        return sr_fail(SR_EUNSUPPORTED, "instruction %zu (%s): hole kind %u is not supported", i,
                       w->set->stencils[w->code[i].op].name, h->patch);
    }
    return sr_fail(SR_ERANGE, "instruction %zu (%s): value 0x%" PRIx64 " does not fit the hole "
                   "at +0x%" PRIx32 " (kind %u)",
                   i, w->set->stencils[w->code[i].op].name, s, h->offset, h->patch);
}

/* Copy each stencil's data; ops whose data has no holes share one copy. */
static void place_data(writer *w)
{
    size_t at = w->l->data_start;
    for (size_t i = 0; i < w->n; i++) {
        const sg_stencil *s = &w->set->stencils[w->code[i].op];
        if (!s->data_size)
            continue;
        size_t *shared = &w->op_data[w->code[i].op];
        if (!s->data_hole_count && *shared) {
            w->data_of[i] = *shared - 1;
            continue;
        }
        /* Align the address, not the offset: the run is only page-aligned, and
         * emit_plan reserved data_align bytes of slack for exactly this. */
        at = align_up((uintptr_t)(w->mem + at), s->data_align) - (uintptr_t)w->mem;
        memcpy(w->mem + at, s->data, s->data_size);
        w->data_of[i] = at;
        if (!s->data_hole_count)
            *shared = at + 1;
        at += s->data_size;
    }
}

static sr_status patch_all(writer *w)
{
    for (size_t i = 0; i < w->n; i++) {
        const sg_stencil *s = &w->set->stencils[w->code[i].op];
        uint8_t *code = w->mem + w->offsets[i];
        memcpy(code, s->code, s->code_size);
        for (size_t h = 0; h < s->code_hole_count; h++) {
            sr_status st = patch(w, i, &s->code_holes[h], code + s->code_holes[h].offset);
            if (st != SR_OK)
                return st;
        }
        for (size_t h = 0; h < s->data_hole_count; h++) {
            uint8_t *loc = w->mem + w->data_of[i] + s->data_holes[h].offset;
            sr_status st = patch(w, i, &s->data_holes[h], loc);
            if (st != SR_OK)
                return st;
        }
    }
    return SR_OK;
}

sr_status emit_write(const sr_stencil_set *set, const void *const *symbols,
                     const sr_instr *code, size_t n, const uint32_t *offsets,
                     const sr_layout *l, uint8_t *mem)
{
    writer w = {set, symbols, code, n, offsets, mem, l, NULL, NULL, NULL, NULL, 0, 0};
    size_t table = 2;
    while (table < 2 * l->got_slots)
        table *= 2;
    w.got_mask = table - 1;
    w.data_of = calloc(n, sizeof *w.data_of);
    w.op_data = calloc(set->count, sizeof *w.op_data);
    w.got_keys = calloc(table, sizeof *w.got_keys);
    w.got_index = calloc(table, sizeof *w.got_index);
    sr_status st;
    if (!w.data_of || !w.op_data || !w.got_keys || !w.got_index) {
        st = sr_fail(SR_ENOMEM, "out of memory");
    } else {
        place_data(&w);
        st = patch_all(&w);
    }
    free(w.data_of);
    free(w.op_data);
    free(w.got_keys);
    free(w.got_index);
    return st;
}
