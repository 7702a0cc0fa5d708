/* fp_check.c - see fp_check.h. Whether an instruction writes the frame pointer
 * comes from LLVM's instruction descriptions (explicit and implicit register
 * definitions, including written-back base registers), not from the text. */
#include "fp_check.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static bool restores_saved_fp(const gen_stencil *s, size_t i);
static bool is_fp_lr_restore(const gen_stencil *s, const gen_insn *in);

static bool writes_nothing_it_should_not(const gen_stencil *s, const gen_target *t,
                                         const gen_where *where)
{
    bool ok = true;
    for (size_t i = 0; i < s->ninsns; i++) {
        const gen_insn *in = &s->insns[i];
        if (!in->decoded) {
            diag_error_in_code(where, in->offset,
                               "cannot decode the instruction (byte 0x%02x), so cannot "
                               "prove it leaves the frame pointer alone",
                               s->code[in->offset]);
            return false;
        }
        if (in->writes_fp && !(t->fp_saved_with_lr && restores_saved_fp(s, i))) {
            bool restore = t->fp_saved_with_lr && is_fp_lr_restore(s, in);
            diag_error_in_code(where, in->offset, "%s: writes the frame pointer%s",
                               stencil_insn_text(s, in),
                               restore ? " (not proven to reload what an earlier stp x29, x30, "
                                         "[sp, #-16]! saved: sp moves, the slot is stored to, "
                                         "control enters between them, or there is none)"
                                       : "");
            ok = false;
        }
    }
    return ok;
}

/* The instruction whose bytes hold `offset` (s->insns is in offset order). */
static const gen_insn *insn_at(const gen_stencil *s, int64_t offset)
{
    size_t lo = 0, hi = s->ninsns;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((int64_t)s->insns[mid].offset + s->insns[mid].size <= offset)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < s->ninsns ? &s->insns[lo] : NULL;
}

/* Whether a hole patches any byte of the instruction: then its target is
 * whatever the runtime writes there, not what the bytes say now. */
static bool patched(const gen_stencil *s, const gen_insn *in)
{
    for (size_t i = 0; i < s->ncode_holes; i++)
        if (s->code_holes[i].offset >= in->offset &&
            s->code_holes[i].offset < in->offset + in->size)
            return true;
    return false;
}

/* A place control can reach: the start of a decoded instruction, or the end
 * of the code (where the next instruction's stencil follows). */
static bool lands_on_an_instruction(const gen_stencil *s, int64_t target)
{
    if (target == (int64_t)s->code_size)
        return true;
    const gen_insn *at = insn_at(s, target);
    return at && at->offset == target;
}

static bool check_target(const gen_stencil *s, const gen_where *where, const char *what,
                         uint32_t from, int64_t target, const char *text)
{
    if (target < 0 || target > (int64_t)s->code_size) {
        diag_error_in_code(where, from,
                           "%s: %s %s0x%" PRIx64 ", outside the "
                           "stencil's %zu bytes of code, so the check cannot see what runs there",
                           text, what, target < 0 ? "-" : "+",
                           (uint64_t)(target < 0 ? -target : target), s->code_size);
        return false;
    }
    if (lands_on_an_instruction(s, target))
        return true;
    const gen_insn *at = insn_at(s, target);
    diag_error_in_code(where, from,
                       "%s: %s +0x%" PRIx64 ", inside the instruction "
                       "at +0x%" PRIx32 " (%s), so the check cannot see what runs there",
                       text, what, (uint64_t)target, at->offset, stencil_insn_text(s, at));
    return false;
}

/* Every direct branch and call, every PC-relative address of code, and every
 * absolute code address in the stencil's data must name the start of an
 * instruction the sweep decoded: then whatever such control flow reaches is
 * exactly what writes_nothing_it_should_not looked at. */
static bool control_stays_on_checked_code(const gen_stencil *s, const gen_where *where)
{
    bool ok = true;
    for (size_t i = 0; i < s->ninsns; i++) {
        const gen_insn *in = &s->insns[i];
        if (!in->has_target || patched(s, in))
            continue;
        if (!in->target_is_branch && (in->target < 0 || in->target >= (int64_t)s->code_size))
            continue; /* an address outside the code (data or beyond): not control flow */
        ok &= check_target(s, where, in->target_is_branch ? "jumps to" : "takes the address",
                           in->offset, in->target, stencil_insn_text(s, in));
    }
    for (size_t i = 0; i < s->ndata_holes; i++) {
        const gen_hole *h = &s->data_holes[i];
        bool absolute = h->patch == SG_PATCH_ABS64 || h->patch == SG_PATCH_ABS32 ||
                        h->patch == SG_PATCH_ABS32S;
        if (h->value != SG_VALUE_CODE || !absolute || lands_on_an_instruction(s, h->addend))
            continue;
        const gen_insn *at = insn_at(s, h->addend);
        diag_error_in(where,
                      "data at +0x%" PRIx32 " holds the code address +0x%" PRIx64
                      "%s%s%s, so the check cannot see what runs there",
                      h->offset, (uint64_t)h->addend,
                      at ? ", inside the instruction (" : ", outside the code",
                      at ? stencil_insn_text(s, at) : "", at ? ")" : "");
        ok = false;
    }
    return ok;
}

/* The little-endian word of a 4-byte instruction. */
static uint32_t word_of(const gen_stencil *s, const gen_insn *in)
{
    return in->size == 4 ? (uint32_t)load_le(s->code + in->offset, 4) : 0;
}

/* Whether control can arrive in (from, to] other than from the instruction
 * before: a direct branch from outside [from, to), a PC-relative code address
 * or a code address in data, or the entry. */
static bool entered_inside(const gen_stencil *s, uint32_t from, uint32_t to)
{
    for (size_t i = 0; i < s->ninsns; i++) {
        const gen_insn *in = &s->insns[i];
        bool inside_range = in->offset >= from && in->offset < to;
        if (in->has_target && in->target > (int64_t)from && in->target <= (int64_t)to &&
            (!in->target_is_branch || !inside_range))
            return true;
    }
    for (size_t i = 0; i < s->ndata_holes; i++) {
        const gen_hole *h = &s->data_holes[i];
        if (h->value == SG_VALUE_CODE && h->addend > (int64_t)from && h->addend <= (int64_t)to)
            return true;
    }
    return false; /* and the entry, offset 0, is never inside (from, to] */
}

enum { STP_FP_LR_PRE = 0xa9bf7bfdu, LDP_FP_LR_POST = 0xa8c17bfdu };

static bool is_fp_lr_restore(const gen_stencil *s, const gen_insn *in)
{
    return word_of(s, in) == LDP_FP_LR_POST;
}

static bool restores_saved_fp(const gen_stencil *s, size_t i)
{
    enum { SP = 31 };
    if (!is_fp_lr_restore(s, &s->insns[i]))
        return false;
    for (size_t j = i; j-- > 0;) {
        const gen_insn *in = &s->insns[j];
        if (word_of(s, in) == STP_FP_LR_PRE)
            return !entered_inside(s, in->offset, s->insns[i].offset);
        /* sp moved, x29 written, or a store that may hit the slot at [sp]. */
        const char *text = stencil_insn_text(s, in);
        if (!in->decoded || (in->defs >> SP & 1) || in->writes_fp ||
            (!strncmp(text, "st", 2) && strstr(text, "[sp")))
            return false;
    }
    return false;
}

bool fp_check(const gen_stencil *s, const gen_target *t, const gen_where *where)
{
    return writes_nothing_it_should_not(s, t, where) && control_stays_on_checked_code(s, where);
}
