/* emit.c - copy stencils back to back and patch their holes.
 *
 * An executor is one chunk of JIT memory: [code][veneers][read-only data][GOT].
 * Stencil data without holes is shared by every use of the same op; GOT slots
 * are shared by equal values. Every patch is range-checked: a value that does
 * not fit is an error, never a truncation. The one exception to "does not
 * fit" is a call or jump to a run-time symbol (or an operand) out of reach of
 * its instruction, AArch64 B/BL beyond +-128 MiB or x86-64 CALL/JMP rel32
 * beyond +-2 GiB: it is sent through a 16-byte veneer placed right after the
 * code, `ldr x16, #8; br x16; .quad target` (x16 being the intra-procedure-
 * call scratch register the AAPCS64 reserves for exactly this) or
 * `jmp *2(%rip); ud2; .quad target`.
 *
 * An op with a cold part (sr_stencil_set.cold_sizes) is split: its hot part
 * goes with the others back to back, its cold part after every hot part,
 * [hot parts][cold parts] being the executor's code (docs/runtime.md, "Hot
 * and cold parts"); the branches between them are holes (SG_VALUE_COLD from
 * hot to cold, SG_VALUE_CODE back); its emitter writes the cold part at
 * sg_emit_env.cold.
 *
 * Each stencil is written by its generated emitter (straight-line code in the
 * header) when every one of its holes was checked valid up front; otherwise,
 * and to explain any patch that fails, by the table-driven patcher here. Both
 * call stencilrt_abi.h's formulas, so they cannot disagree on a bit. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elfdefs.h"
#include "internal.h"

static size_t align_up(size_t v, size_t a)
{
    return a > 1 ? (v + a - 1) / a * a : v;
}

/* The bytes at the end of op's code that are its cold part (0: none). */
static size_t cold_size(const sr_stencil_set *set, uint32_t op)
{
    return set->cold_sizes ? set->cold_sizes[op] : 0;
}

/* Where hole h of instruction i is written: in its hot part at hot, or in its
 * cold part at cold (offsets in the stencil's code either way). */
static uint8_t *code_hole_at(const sg_stencil *s, size_t cold, uint8_t *hot, uint8_t *coldp,
                             const sg_hole *h)
{
    size_t hot_size = s->code_size - cold;
    return h->offset < hot_size ? hot + h->offset : coldp + (h->offset - hot_size);
}

/* The generated emitter trusts its holes: operand and symbol numbers in range,
 * symbols present, kinds known. Anything else goes the table-driven way, which
 * reports it. */
static bool hole_checked(const sr_emitter *em, const sg_hole *h)
{
    switch ((sg_value)h->value) {
    case SG_VALUE_CODE:
    case SG_VALUE_DATA:
    case SG_VALUE_CONTINUE:
    case SG_VALUE_JUMP_TARGET: break;
    case SG_VALUE_COLD:
        if (sg_patch_uses_got(h->patch))
            return false; /* no GOT key (value_of refuses it, naming it) */
        break;
    case SG_VALUE_OPERAND:
        if (h->index >= SG_OPERANDS)
            return false;
        break;
    case SG_VALUE_SYMBOL:
        if (h->index >= em->set->symbol_count || !em->symbols[h->index])
            return false;
        break;
    default: return false;
    }
    return h->patch < SG_PATCH__COUNT;
}

static void note_holes(const sr_emitter *em, sr_op_info *info, const sg_hole *h, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        info->generated &= hole_checked(em, &h[i]);
        info->jumps |= h[i].value == SG_VALUE_JUMP_TARGET;
        info->continues |= h[i].value == SG_VALUE_CONTINUE;
        info->got += sg_patch_uses_got(h[i].patch);
        info->veneers += sg_hole_may_use_veneer(h[i].patch, h[i].value);
    }
}

/* The symbols op `s` reaches through the GOT, each once, appended to *list. */
static bool list_got_symbols(const sr_emitter *em, const sg_stencil *s, sr_op_info *info,
                             uint32_t **list, size_t *len, size_t *cap)
{
    info->got_symbols = (uint32_t)*len;
    for (size_t k = 0; k < s->code_hole_count + s->data_hole_count; k++) {
        const sg_hole *h = k < s->code_hole_count ? &s->code_holes[k]
                                                  : &s->data_holes[k - s->code_hole_count];
        if (!sg_patch_uses_got(h->patch) || h->value != SG_VALUE_SYMBOL ||
            h->index >= em->set->symbol_count)
            continue;
        bool seen = false;
        for (size_t j = info->got_symbols; j < *len; j++)
            seen |= (*list)[j] == h->index;
        if (seen)
            continue;
        if (*len == *cap) {
            uint32_t *grown = realloc(*list, (*cap = *cap ? 2 * *cap : 16) * sizeof **list);
            if (!grown)
                return false;
            *list = grown;
        }
        (*list)[(*len)++] = h->index;
    }
    info->ngot_symbols = (uint32_t)*len - info->got_symbols;
    return true;
}

sr_status emit_init(sr_emitter *em, const sr_stencil_set *set, const void *const *symbols,
                    bool generated)
{
    em->set = set;
    em->symbols = symbols;
    em->got_symbols = NULL;
    em->shim = false;
    em->ops = calloc(set->count ? set->count : 1, sizeof *em->ops);
    if (!em->ops)
        return sr_fail(SR_ENOMEM, "out of memory");
    size_t len = 0, cap = 0;
    for (size_t i = 0; i < set->count; i++) {
        const sg_stencil *s = &set->stencils[i];
        sr_op_info *info = &em->ops[i];
        if (cold_size(set, (uint32_t)i) > s->code_size) {
            emit_fini(em);
            return sr_fail(SR_EINVAL, "op %zu (%s): a cold part of %zu bytes in %zu bytes of code",
                           i, s->name, cold_size(set, (uint32_t)i), s->code_size);
        }
        info->generated = generated && s->emit;
        info->continues = s->falls_through;
        info->data = s->data_size > 0;
        info->cold = (uint32_t)cold_size(set, (uint32_t)i); /* <= code_size, checked above */
        info->holes = (uint32_t)(s->code_hole_count + s->data_hole_count);
        info->emit_case = s->emit_case;
        info->emit = s->emit;
        note_holes(em, info, s->code_holes, s->code_hole_count);
        note_holes(em, info, s->data_holes, s->data_hole_count);
        if (!list_got_symbols(em, s, info, &em->got_symbols, &len, &cap)) {
            emit_fini(em);
            return sr_fail(SR_ENOMEM, "out of memory");
        }
        info->prepare = info->data || info->ngot_symbols || info->jumps || !info->generated;
    }
    return SR_OK;
}

void emit_fini(sr_emitter *em)
{
    free(em->ops);
    free(em->got_symbols);
    em->ops = NULL;
    em->got_symbols = NULL;
}

enum { VENEER_SIZE = 16 }; /* ldr x16, #8; br x16; .quad target */
/* The most bytes of each part of an executor (code, data, GOT, veneers):
 * offsets are 32-bit, and the layout's sums of a few such parts cannot wrap
 * a 64-bit size_t. */
#define SIZE_LIMIT ((size_t)UINT32_MAX / 2)

sr_status emit_plan(const sr_emitter *em, const sr_instr *code, size_t n, uint32_t *offsets,
                    sr_layout *l)
{
    const sr_stencil_set *set = em->set;
    if (n == 0)
        return sr_fail(SR_EINVAL, "an executor needs at least one instruction");
    size_t at = 0, cold = 0, data = 0, got = 0, veneers = 0;
    for (size_t i = 0; i < n; i++) {
        if (code[i].op >= set->count)
            return sr_fail(SR_EINVAL, "instruction %zu: op %" PRIu32 " does not exist (%zu ops)",
                           i, code[i].op, set->count);
        const sg_stencil *s = &set->stencils[code[i].op];
        const sr_op_info *info = &em->ops[code[i].op];
        if (info->jumps && code[i].target >= n)
            return sr_fail(SR_EINVAL, "instruction %zu (%s): jump target %" PRIu32
                           " is outside the executor (%zu instructions)",
                           i, s->name, code[i].target, n);
        if (i == n - 1 && info->continues)
            return sr_fail(SR_EFALLTHROUGH, "the last instruction (%s) continues past the end",
                           s->name);
        offsets[i] = (uint32_t)at;
        /* Each size is checked before it is added, so no sum wraps (a
         * stencil set is a struct anyone can fill: SIZE_MAX - 8 bytes of
         * code would otherwise wrap `at` back to a small chunk). */
        if (s->code_size > SIZE_LIMIT - at - cold)
            return sr_fail(SR_ENOMEM, "instruction %zu (%s): executor code larger than 2 GiB",
                           i, s->name);
        at += s->code_size - cold_size(set, code[i].op);
        cold += cold_size(set, code[i].op);
        if (s->data_size > SIZE_LIMIT || s->data_align > SIZE_LIMIT ||
            s->data_size + s->data_align > SIZE_LIMIT - data)
            return sr_fail(SR_ENOMEM, "instruction %zu (%s): executor data larger than 2 GiB",
                           i, s->name);
        data += s->data_size + s->data_align;
        got += info->got;
        veneers += info->veneers;
        if (got > SIZE_LIMIT / 8 || veneers > SIZE_LIMIT / VENEER_SIZE)
            return sr_fail(SR_ENOMEM, "instruction %zu (%s): executor GOT or veneers larger "
                           "than 2 GiB", i, s->name);
    }
    offsets[n] = (uint32_t)at;
    l->cold_start = at;
    at += cold;
    l->code_size = at;
    /* Veneers sit at align_up(code_size, 16), before the data (an upper bound:
     * only out-of-range branches get one, and equal targets share it). */
    l->data_start = align_up(at, 16) + VENEER_SIZE * veneers;
    l->data_end = l->data_start + data; /* an upper bound: data of holeless ops is shared */
    l->got_start = align_up(l->data_end, 8);
    /* One spare slot: explaining a GOT hole a generated emitter refused
     * patches it again, from a fresh slot. */
    l->got_slots = got + 1;
    l->total = l->got_start + 8 * l->got_slots;
    return SR_OK;
}

typedef struct writer {
    const sr_emitter *em;
    const sr_instr *code;
    size_t n;
    const uint32_t *offsets;
    uint8_t *mem;         /* the writable view; the code runs at mem + env.delta */
    sg_emit_env env;      /* GOT slots and the veneer callback (ctx = this writer) */
    uint64_t *symbol_got; /* per run-time symbol: its GOT slot's address (0 = none yet) */
    uint64_t insn_got[SG_GOT_KEYS]; /* the instruction's other slots, by sg_got_key */
    size_t *op_data;      /* per op: shared data offset + 1 (0 = not placed yet) */
    size_t data_next;     /* where the next stencil's data goes */
    size_t data;          /* the current instruction's data */
    size_t cold;          /* the current instruction's cold part */
    size_t cold_next;     /* where the first cold part goes (patch_all goes on from there) */
    size_t veneer_start, veneer_cap, veneer_used; /* veneers: [start, start + 16 * cap) */
} writer;

/* Where the byte at mem + offset runs. */
static uint64_t running(const writer *w, size_t offset)
{
    return (uintptr_t)(w->mem + offset) + w->env.delta;
}

static sr_status value_of(writer *w, size_t i, const sg_hole *h, uint64_t *s)
{
    const sr_instr *in = &w->code[i];
    const sr_stencil_set *set = w->em->set;
    switch ((sg_value)h->value) {
    case SG_VALUE_CODE: *s = running(w, w->offsets[i]); return SR_OK;
    case SG_VALUE_DATA: *s = running(w, w->data); return SR_OK;
    case SG_VALUE_COLD:
        if (sg_patch_uses_got(h->patch))
            break; /* no GOT key: the generator never writes one */
        *s = running(w, w->cold);
        return SR_OK;
    case SG_VALUE_CONTINUE: *s = running(w, w->offsets[i + 1]); return SR_OK;
    case SG_VALUE_JUMP_TARGET: *s = running(w, w->offsets[in->target]); return SR_OK;
    case SG_VALUE_OPERAND:
        if (h->index >= SG_OPERANDS)
            break;
        *s = in->operand[h->index];
        return SR_OK;
    case SG_VALUE_SYMBOL:
        if (h->index >= set->symbol_count)
            break;
        if (!w->em->symbols[h->index])
            return sr_fail(SR_ESYMBOL, "run-time symbol '%s' has no value",
                           set->symbol_names[h->index]);
        *s = (uintptr_t)w->em->symbols[h->index];
        return SR_OK;
    default: break;
    }
    return sr_fail(SR_EUNSUPPORTED, "instruction %zu: hole value %u/%u is not supported", i,
                   h->value, h->index);
}

/* A veneer's 8 bytes of code, which jump to the 8-byte target after them. */
static const uint8_t *veneer_code(unsigned elf_machine)
{
    static const uint8_t aarch64[8] = {0x50, 0x00, 0x00, 0x58,  /* ldr x16, #8 */
                                       0x00, 0x02, 0x1f, 0xd6}; /* br x16 */
    static const uint8_t x86_64[8] = {0xff, 0x25, 0x02, 0x00, 0x00, 0x00, /* jmp *2(%rip) */
                                      0x0f, 0x0b};                        /* ud2 */
    return elf_machine == EM_AARCH64 ? aarch64 : x86_64;
}

/* The veneer that jumps to `target`, made on first use; 0 when there is no
 * room (cannot happen: emit_plan counts every candidate branch). */
static uint64_t veneer(void *ctx, uint64_t target)
{
    writer *w = ctx;
    for (size_t k = 0; k < w->veneer_used; k++) {
        size_t at = w->veneer_start + VENEER_SIZE * k;
        uint64_t t;
        memcpy(&t, w->mem + at + 8, 8);
        if (t == target)
            return running(w, at);
    }
    if (w->veneer_used == w->veneer_cap)
        return 0;
    size_t at = w->veneer_start + VENEER_SIZE * w->veneer_used++;
    memcpy(w->mem + at, veneer_code(w->em->set->elf_machine), 8);
    memcpy(w->mem + at + 8, &target, 8);
    return running(w, at);
}

/* How messages name instruction i: "instruction 3 (add)", or "the shim tinyvm_shim". */
static void describe(const writer *w, size_t i, char *buf, size_t size)
{
    const char *name = w->em->set->stencils[w->code[i].op].name;
    if (w->em->shim)
        snprintf(buf, size, "the shim %s", name);
    else
        snprintf(buf, size, "instruction %zu (%s)", i, name);
}

static sr_status patch(writer *w, size_t i, const sg_hole *h, uint8_t *loc)
{
    uint64_t s = 0;
    sr_status st = value_of(w, i, h, &s);
    if (st != SR_OK)
        return st;
    uint64_t g = s; /* the GOT slots a generated emitter would use, in the same order */
    if (sg_patch_uses_got(h->patch) && h->value == SG_VALUE_SYMBOL) {
        g = w->symbol_got[h->index];
    } else if (sg_patch_uses_got(h->patch)) {
        unsigned key = sg_got_key(h->value, h->index); /* index checked by value_of */
        if (!w->insn_got[key])
            w->insn_got[key] = sg_got(&w->env, s);
        g = w->insn_got[key];
    }
    uint64_t v = g + (uint64_t)h->addend, pc = (uintptr_t)loc + w->env.delta;
    int rc = sg_hole_may_use_veneer(h->patch, h->value)
                 ? sg_patch_veneered(loc, pc, h->patch, v, &w->env)
                 : sg_patch_hole(loc, pc, h->patch, v);
    if (!rc)
        return SR_OK;
    char what[96]; /* only now: this runs for every hole the table way */
    describe(w, i, what, sizeof what);
    if (rc == 2)
        return sr_fail(SR_EUNSUPPORTED, "%s: hole kind %u is not supported", what, h->patch);
    return sr_fail(SR_ERANGE, "%s: value 0x%" PRIx64 " does not fit the hole at +0x%" PRIx32
                   " (%s: %s)", what, s, h->offset, sg_patch_infos[h->patch].name,
                   sg_patch_infos[h->patch].doc);
}

/* Copy instruction i's data; ops whose data has no holes share one copy. */
static void place_data(writer *w, size_t i, const sg_stencil *s)
{
    size_t *shared = &w->op_data[w->code[i].op];
    if (!s->data_hole_count && *shared) {
        w->data = *shared - 1;
        return;
    }
    /* Align the address, not the offset: the executor is only 64-byte aligned,
     * and emit_plan reserved data_align bytes of slack for exactly this. */
    size_t at = align_up(running(w, w->data_next), s->data_align) - running(w, 0);
    memcpy(w->mem + at, s->data, s->data_size);
    w->data = at;
    if (!s->data_hole_count)
        *shared = at + 1;
    w->data_next = at + s->data_size;
}

/* A symbol reached through the GOT has one slot per executor, made on first use. */
static void place_symbol_slots(writer *w, const sr_op_info *info)
{
    const sr_emitter *em = w->em;
    for (uint32_t k = 0; k < info->ngot_symbols; k++) {
        uint32_t sym = em->got_symbols[info->got_symbols + k];
        if (!w->symbol_got[sym])
            w->symbol_got[sym] = sg_got(&w->env, (uintptr_t)em->symbols[sym]);
    }
}

/* The table-driven way: what the generated emitter does, hole by hole. */
static sr_status patch_table(writer *w, size_t i, const sg_stencil *s)
{
    uint8_t *code = w->mem + w->offsets[i], *cold = w->mem + w->cold;
    size_t cold_bytes = cold_size(w->em->set, w->code[i].op);
    memcpy(code, s->code, s->code_size - cold_bytes);
    if (cold_bytes)
        memcpy(cold, s->code + s->code_size - cold_bytes, cold_bytes);
    memset(w->insn_got, 0, sizeof w->insn_got);
    for (size_t h = 0; h < s->code_hole_count; h++) {
        const sg_hole *x = &s->code_holes[h];
        sr_status st = patch(w, i, x, code_hole_at(s, cold_bytes, code, cold, x));
        if (st != SR_OK)
            return st;
    }
    for (size_t h = 0; h < s->data_hole_count; h++) {
        uint8_t *loc = w->mem + w->data + s->data_holes[h].offset;
        sr_status st = patch(w, i, &s->data_holes[h], loc);
        if (st != SR_OK)
            return st;
    }
    return SR_OK;
}

/* A generated emitter refused hole `bad`: patch it the table way for the message. */
static sr_status explain(writer *w, size_t i, const sg_stencil *s, unsigned bad)
{
    bool in_code = bad < s->code_hole_count;
    const sg_hole *h = in_code ? &s->code_holes[bad] : &s->data_holes[bad - s->code_hole_count];
    uint8_t *loc = in_code ? code_hole_at(s, cold_size(w->em->set, w->code[i].op),
                                          w->mem + w->offsets[i], w->mem + w->cold, h)
                           : w->mem + w->data + h->offset;
    memset(w->insn_got, 0, sizeof w->insn_got); /* the spare slot (emit_plan) */
    sr_status st = patch(w, i, h, loc);
    if (st != SR_OK)
        return st;
    char what[96];
    describe(w, i, what, sizeof what);
    return sr_fail(SR_EUNSUPPORTED, "%s: the generated emitter refused the hole at +0x%" PRIx32
                   " that its hole table accepts (an edited header?)", what, h->offset);
}

/* A stencil its emitter does not write (a hand-made sg_stencil, or an edited
 * header): SG_EMIT_UNKNOWN, or a hole number it does not have. */
static sr_status unknown_case(const writer *w, size_t i, const sg_stencil *s)
{
    char what[96];
    describe(w, i, what, sizeof what);
    return sr_fail(SR_EUNSUPPORTED, "%s: its emitter does not write emit_case %" PRIu32
                   " (an edited header?)", what, s->emit_case);
}

/* Everything an instruction needs before its generated emitter runs, for an
 * op that needs any of it (sr_op_info.prepare): its data, its GOT slots, its
 * jump target; or the whole of it the table-driven way (*done). */
static sr_status prepare(writer *w, size_t i, const sr_op_info *info, bool *done)
{
    const sr_instr *in = &w->code[i];
    const sg_stencil *s = &w->em->set->stencils[in->op];
    if (info->data)
        place_data(w, i, s);
    if (info->ngot_symbols)
        place_symbol_slots(w, info);
    *done = !info->generated;
    if (*done)
        return patch_table(w, i, s);
    if (info->jumps)
        w->env.target = running(w, w->offsets[in->target]);
    return SR_OK;
}

/* A generated emitter returned `bad` for instruction i: a hole it refused, or a
 * case it does not have. */
static sr_status refused(writer *w, size_t i, unsigned bad)
{
    const sg_stencil *s = &w->em->set->stencils[w->code[i].op];
    if (bad > w->em->ops[w->code[i].op].holes)
        return unknown_case(w, i, s);
    return explain(w, i, s, bad - 1);
}

/* One pass: data, GOT slots, then code, instruction by instruction (the
 * table-driven and generated ways allocate in the same order). This loop runs
 * for every instruction emitted, so an op that needs nothing but its emitter
 * (most do) costs one test of sr_op_info.prepare, and what stays the same for
 * every instruction is held in locals: the emitter is called through a
 * pointer that could reach *w, so anything read through w is read again after
 * each call. */
static sr_status patch_all(writer *w)
{
    const sr_op_info *ops = w->em->ops;
    const sr_instr *code = w->code;
    const uint32_t *offsets = w->offsets;
    uint8_t *mem = w->mem, *data = mem + w->data;
    sg_emit_env *env = &w->env;
    size_t n = w->n, cold = w->cold_next;
    for (size_t i = 0; i < n; i++) {
        const sr_instr *in = &code[i];
        const sr_op_info *info = &ops[in->op];
        env->cold = mem + cold;
        if (info->prepare) {
            bool done;
            w->cold = cold;
            sr_status st = prepare(w, i, info, &done);
            if (st != SR_OK)
                return st;
            data = mem + w->data;
            if (done) {
                cold += info->cold;
                continue;
            }
        }
        env->operand = in->operand;
        unsigned bad = info->emit(info->emit_case, mem + offsets[i], data, env);
        if (bad) {
            w->cold = cold;
            return refused(w, i, bad);
        }
        cold += info->cold;
    }
    return SR_OK;
}

sr_status emit_write(const sr_emitter *em, const sr_instr *code, size_t n,
                     const uint32_t *offsets, const sr_layout *l, uint8_t *mem, uint64_t delta)
{
    writer w = {.em = em, .code = code, .n = n, .offsets = offsets, .mem = mem};
    w.data_next = l->data_start;
    w.cold_next = l->cold_start;
    w.veneer_start = align_up(l->code_size, 16);
    w.veneer_cap = (l->data_start - w.veneer_start) / VENEER_SIZE;
    w.op_data = calloc(em->set->count, sizeof *w.op_data);
    w.symbol_got = calloc(em->set->symbol_count + 1, sizeof *w.symbol_got);
    w.env = (sg_emit_env){delta, 0, NULL, em->symbols, w.symbol_got, mem + l->got_start,
                          veneer, &w, NULL};
    sr_status st = w.op_data && w.symbol_got ? patch_all(&w) : sr_fail(SR_ENOMEM, "out of memory");
    free(w.op_data);
    free(w.symbol_got);
    return st;
}
