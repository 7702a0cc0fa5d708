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

enum { STP_FP_LR_PRE = 0xa9bf7bfdu, LDP_FP_LR_POST = 0xa8c17bfdu };

static bool is_fp_lr_restore(const gen_stencil *s, const gen_insn *in)
{
    return word_of(s, in) == LDP_FP_LR_POST;
}

/* Whether control never goes on to the next instruction from `in`: an
 * unconditional branch or a return. Any other (unknown ones included) is
 * taken to fall through, which only adds paths to check. */
static bool ends_flow(const gen_stencil *s, const gen_insn *in)
{
    static const char *const ends[] = {"b", "br", "ret", "braa", "brab", "braaz", "brabz",
                                       "retaa", "retab", NULL};
    const char *text = stencil_insn_text(s, in);
    size_t n = strcspn(text, " \t");
    for (const char *const *e = ends; *e; e++)
        if (strlen(*e) == n && !strncmp(text, *e, n))
            return true;
    return false;
}

/* What may run just before insns[k] besides the branches to it: false when
 * control may also arrive from where the check cannot follow (the entry, a
 * code address taken or held in data). A patched instruction's target is
 * whatever the runtime writes, never this code (a call's bytes name itself). */
static bool arrivals_known(const gen_stencil *s, size_t k)
{
    int64_t at = s->insns[k].offset;
    if (at == 0)
        return false;
    for (size_t j = 0; j < s->ninsns; j++)
        if (s->insns[j].has_target && !s->insns[j].target_is_branch &&
            s->insns[j].target == at && !patched(s, &s->insns[j]))
            return false;
    for (size_t j = 0; j < s->ndata_holes; j++)
        if (s->data_holes[j].value == SG_VALUE_CODE && s->data_holes[j].addend == at)
            return false;
    return true;
}

/* sp moved, x29 written, or a store that may hit the slot at [sp]. DWARF
 * register 31 is sp, and also what LLVM numbers xzr (cmp is subs xzr, ...):
 * an instruction that moves sp names it. */
static bool clobbers_saved_pair(const gen_stencil *s, const gen_insn *in)
{
    enum { SP = 31 };
    const char *text = stencil_insn_text(s, in);
    return !in->decoded || ((in->defs >> SP & 1) && strstr(text, "sp")) || in->writes_fp ||
           (!strncmp(text, "st", 2) && strstr(text, "[sp"));
}

enum { NOT_SEEN, QUEUED };

/* Queue what may run just before insns[k]: the one before it if it falls
 * through, and every direct branch to it. */
static bool queue_arrivals(const gen_stencil *s, size_t k, unsigned char *state, size_t *work,
                           size_t *n)
{
    if (!arrivals_known(s, k))
        return false;
    if (!ends_flow(s, &s->insns[k - 1]) && state[k - 1] == NOT_SEEN) {
        state[k - 1] = QUEUED;
        work[(*n)++] = k - 1;
    }
    for (size_t j = 0; j < s->ninsns; j++) {
        const gen_insn *in = &s->insns[j];
        if (in->has_target && in->target_is_branch && in->target == (int64_t)s->insns[k].offset &&
            !patched(s, in) && state[j] == NOT_SEEN) {
            state[j] = QUEUED;
            work[(*n)++] = j;
        }
    }
    return true;
}

/* Whether every path to the ldp at insns[i] went through an
 * stp x29, x30, [sp, #-16]! last, with nothing between that moves sp,
 * writes x29 or stores at [sp] (docs/platforms.md, "The frame-pointer
 * check"). Paths are followed backwards through fall-throughs and direct
 * branches, so an op whose calls share one stp (two exits, each with its
 * ldp) is accepted; anything the check cannot follow is refused. */
static bool restores_saved_fp(const gen_stencil *s, size_t i)
{
    if (!is_fp_lr_restore(s, &s->insns[i]))
        return false;
    unsigned char *state = xcalloc(s->ninsns, 1);
    size_t *work = xcalloc(s->ninsns, sizeof *work), n = 0;
    bool ok = queue_arrivals(s, i, state, work, &n);
    while (ok && n) {
        size_t j = work[--n];
        if (word_of(s, &s->insns[j]) == STP_FP_LR_PRE)
            continue; /* this path saved the pair last */
        ok = !clobbers_saved_pair(s, &s->insns[j]) && queue_arrivals(s, j, state, work, &n);
    }
    free(work);
    free(state);
    return ok;
}

bool fp_check(const gen_stencil *s, const gen_target *t, const gen_where *where)
{
    return writes_nothing_it_should_not(s, t, where) && control_stays_on_checked_code(s, where);
}
