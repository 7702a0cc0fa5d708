/* emit.c - copy stencils back to back and patch their holes.
 *
 * An executor is one run of pages: [code][veneers][read-only data][GOT].
 * Stencil data without holes is shared by every use of the same op; GOT slots
 * are shared by equal values. Every patch is range-checked: a value that does
 * not fit is an error, never a truncation. The one exception to "does not
 * fit" is an AArch64 B/BL to a run-time symbol (or an operand) beyond +-128
 * MiB: it is sent through a veneer placed right after the code
 * (`ldr x16, #8; br x16; .quad target`, x16 being the intra-procedure-call
 * scratch register the AAPCS64 reserves for exactly this). */
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

static bool is_got_patch(uint8_t patch)
{
    return patch == SG_PATCH_GOTPCREL32 || patch == SG_PATCH_AARCH64_GOT_ADRP ||
           patch == SG_PATCH_AARCH64_GOT_LO12 || patch == SG_PATCH_AARCH64_GOT_PCREL19;
}

static size_t got_holes(const sg_stencil *s)
{
    size_t n = 0;
    for (size_t i = 0; i < s->code_hole_count; i++)
        n += is_got_patch(s->code_holes[i].patch);
    for (size_t i = 0; i < s->data_hole_count; i++)
        n += is_got_patch(s->data_holes[i].patch);
    return n;
}

/* A branch that may need a veneer: B/BL to something outside the executor. */
static bool may_need_veneer(const sg_hole *h)
{
    return h->patch == SG_PATCH_AARCH64_BRANCH26 &&
           (h->value == SG_VALUE_SYMBOL || h->value == SG_VALUE_OPERAND);
}

static size_t veneer_holes(const sg_stencil *s)
{
    size_t n = 0;
    for (size_t i = 0; i < s->code_hole_count; i++)
        n += may_need_veneer(&s->code_holes[i]);
    return n;
}

enum { VENEER_SIZE = 16 }; /* ldr x16, #8; br x16; .quad target */

sr_status emit_plan(const sr_stencil_set *set, const sr_instr *code, size_t n,
                    uint32_t *offsets, sr_layout *l)
{
    if (n == 0)
        return sr_fail(SR_EINVAL, "an executor needs at least one instruction");
    size_t at = 0, data = 0, got = 0, veneers = 0;
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
        veneers += veneer_holes(s);
        if (at > UINT32_MAX / 2)
            return sr_fail(SR_ENOMEM, "executor code larger than 2 GiB");
    }
    offsets[n] = (uint32_t)at;
    l->code_size = at;
    /* Veneers sit at align_up(code_size, 16), before the data (an upper bound:
     * only out-of-range branches get one, and equal targets share it). */
    l->data_start = align_up(at, 16) + VENEER_SIZE * veneers;
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
    size_t veneer_start, veneer_cap, veneer_used; /* veneers: [start, start + 16 * cap) */
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

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

/* Replace `width` bits at `shift` of the instruction at loc with `field`. */
static void set_field(uint8_t *loc, unsigned shift, unsigned width, uint64_t field)
{
    uint32_t mask = (uint32_t)(((uint64_t)1 << width) - 1) << shift;
    put32(loc, (get32(loc) & ~mask) | ((uint32_t)(field << shift) & mask));
}

/* d fits a signed field of `bits` bits after dropping `scale` low bits, which
 * must be zero. */
static bool fits_scaled(int64_t d, unsigned bits, unsigned scale)
{
    int64_t lim = (int64_t)1 << (bits + scale - 1);
    return d >= -lim && d < lim && (d & (((int64_t)1 << scale) - 1)) == 0;
}

static void put_adr_imm(uint8_t *loc, int64_t imm21)
{
    set_field(loc, 29, 2, (uint64_t)imm21 & 3);
    set_field(loc, 5, 19, ((uint64_t)imm21 >> 2) & 0x7ffff);
}

/* The veneer that jumps to `target`, made on first use; 0 when there is no
 * room (cannot happen: emit_plan counts every candidate branch). */
static uint64_t veneer(writer *w, uint64_t target)
{
    for (size_t k = 0; k < w->veneer_used; k++) {
        uint8_t *v = w->mem + w->veneer_start + VENEER_SIZE * k;
        uint64_t t;
        memcpy(&t, v + 8, 8);
        if (t == target)
            return (uintptr_t)v;
    }
    if (w->veneer_used == w->veneer_cap)
        return 0;
    uint8_t *v = w->mem + w->veneer_start + VENEER_SIZE * w->veneer_used++;
    put32(v, 0x58000050u);     /* ldr x16, #8 */
    put32(v + 4, 0xd61f0200u); /* br x16 */
    memcpy(v + 8, &target, 8);
    return (uintptr_t)v;
}

/* log2 of the access size a scaled LO12 immediate counts in. */
static unsigned lo12_scale(uint8_t patch)
{
    switch (patch) {
    case SG_PATCH_AARCH64_LDST16_LO12: return 1;
    case SG_PATCH_AARCH64_LDST32_LO12: return 2;
    case SG_PATCH_AARCH64_LDST64_LO12:
    case SG_PATCH_AARCH64_GOT_LO12: return 3;
    case SG_PATCH_AARCH64_LDST128_LO12: return 4;
    default: return 0;
    }
}

static const char *op_name(const writer *w, size_t i)
{
    return w->set->stencils[w->code[i].op].name;
}

static sr_status patch(writer *w, size_t i, const sg_hole *h, uint8_t *loc)
{
    uint64_t s = 0;
    sr_status st = value_of(w, i, h, &s);
    if (st != SR_OK)
        return st;
    uint64_t p = (uintptr_t)loc;
    uint64_t v = s + (uint64_t)h->addend;
    if (is_got_patch(h->patch))
        v = got_slot(w, s) + (uint64_t)h->addend;
    int64_t sv, d = (int64_t)(v - p);
    unsigned scale = 0;
    const char *why = "does not fit";
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
        if (d < INT32_MIN || d > INT32_MAX)
            break;
        memcpy(loc, &(int32_t){(int32_t)d}, 4);
        return SR_OK;
    case SG_PATCH_AARCH64_BRANCH26:
        if (!fits_scaled(d, 26, 2) && may_need_veneer(h)) {
            uint64_t ven = veneer(w, v);
            if (!ven)
                break;
            d = (int64_t)(ven - p);
        }
        if (!fits_scaled(d, 26, 2))
            break;
        set_field(loc, 0, 26, (uint64_t)(d >> 2));
        return SR_OK;
    case SG_PATCH_AARCH64_PCREL19:
    case SG_PATCH_AARCH64_GOT_PCREL19:
        if (!fits_scaled(d, 19, 2))
            break;
        set_field(loc, 5, 19, (uint64_t)(d >> 2));
        return SR_OK;
    case SG_PATCH_AARCH64_TSTBR14:
        if (!fits_scaled(d, 14, 2))
            break;
        set_field(loc, 5, 14, (uint64_t)(d >> 2));
        return SR_OK;
    case SG_PATCH_AARCH64_ADR21:
        if (!fits_scaled(d, 21, 0))
            break;
        put_adr_imm(loc, d);
        return SR_OK;
    case SG_PATCH_AARCH64_ADRP:
    case SG_PATCH_AARCH64_GOT_ADRP:
        d = (int64_t)((v & ~(uint64_t)0xfff) - (p & ~(uint64_t)0xfff));
        if (!fits_scaled(d, 21, 12))
            break;
        put_adr_imm(loc, d >> 12);
        return SR_OK;
    case SG_PATCH_AARCH64_ADD_LO12:
    case SG_PATCH_AARCH64_LDST8_LO12:
    case SG_PATCH_AARCH64_LDST16_LO12:
    case SG_PATCH_AARCH64_LDST32_LO12:
    case SG_PATCH_AARCH64_LDST64_LO12:
    case SG_PATCH_AARCH64_LDST128_LO12:
    case SG_PATCH_AARCH64_GOT_LO12:
        scale = lo12_scale(h->patch);
        if (v & ((1u << scale) - 1)) {
            why = "is not aligned to the access size of";
            break;
        }
        set_field(loc, 10, 12, (v & 0xfff) >> scale);
        return SR_OK;
    case SG_PATCH_AARCH64_MOVW_G0:
    case SG_PATCH_AARCH64_MOVW_G1:
    case SG_PATCH_AARCH64_MOVW_G2: {
        unsigned g = (unsigned)(h->patch - SG_PATCH_AARCH64_MOVW_G0) / 2;
        if (v >> (16 * (g + 1)))
            break;
        set_field(loc, 5, 16, (v >> (16 * g)) & 0xffff);
        return SR_OK;
    }
    case SG_PATCH_AARCH64_MOVW_G0_NC:
    case SG_PATCH_AARCH64_MOVW_G1_NC:
    case SG_PATCH_AARCH64_MOVW_G2_NC:
    case SG_PATCH_AARCH64_MOVW_G3: {
        unsigned g = h->patch == SG_PATCH_AARCH64_MOVW_G3
                         ? 3
                         : (unsigned)(h->patch - SG_PATCH_AARCH64_MOVW_G0_NC) / 2;
        set_field(loc, 5, 16, (v >> (16 * g)) & 0xffff);
        return SR_OK;
    }
    default:
        return sr_fail(SR_EUNSUPPORTED, "instruction %zu (%s): hole kind %u is not supported", i,
                       op_name(w, i), h->patch);
    }
    return sr_fail(SR_ERANGE, "instruction %zu (%s): value 0x%" PRIx64 " %s the hole "
                   "at +0x%" PRIx32 " (kind %u)",
                   i, op_name(w, i), s, why, h->offset, h->patch);
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
    writer w = {set, symbols, code, n, offsets, mem, l, NULL, NULL, NULL, NULL, 0, 0, 0, 0, 0};
    w.veneer_start = align_up(l->code_size, 16);
    w.veneer_cap = (l->data_start - w.veneer_start) / VENEER_SIZE;
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
