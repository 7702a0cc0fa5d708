/* hotcold.c - see hotcold.h. One flow graph over the stencil's decoded
 * instructions; a fixpoint marks what can still reach a hot exit. */
#include "hotcold.h"

#include <stdlib.h>

#include "util.h"

/* Index of the instruction that starts at `offset`, or -1. */
static long insn_at(const gen_stencil *s, int64_t offset)
{
    size_t lo = 0, hi = s->ninsns;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->insns[mid].offset < offset)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < s->ninsns && s->insns[lo].offset == offset ? (long)lo : -1;
}

/* The instruction has a code hole: it refers to something outside the stencil
 * (a branch through one leaves it). */
static bool has_code_hole(const gen_stencil *s, const gen_insn *in)
{
    for (size_t h = 0; h < s->ncode_holes; h++) {
        uint32_t at = s->code_holes[h].offset;
        if (at >= in->offset && at < in->offset + in->size)
            return true;
    }
    return false;
}

static bool is_jump(const gen_insn *in)
{
    return !in->is_call && (in->target_is_branch || in->is_indirect);
}

/* Where a jump inside the stencil goes (an instruction index), or -1 when it
 * leaves the stencil (a hole, an indirect jump, a target outside the code). */
static long jump_inside(const gen_stencil *s, const gen_insn *in)
{
    if (in->is_indirect || !in->target_is_branch || has_code_hole(s, in))
        return -1;
    if (in->target < 0 || (uint64_t)in->target >= s->code_size)
        return -1;
    return insn_at(s, in->target);
}

/* A hot exit: leaves the stencil for somewhere that runs on (the next
 * instruction, a jump target, a tail call, the caller). Running off the end
 * goes to the next instruction only when the trailing jump was removed:
 * otherwise the code ends in a call that does not return. */
static bool is_hot_exit(const gen_stencil *s, size_t i)
{
    const gen_insn *in = &s->insns[i];
    if (in->is_return || (is_jump(in) && jump_inside(s, in) < 0))
        return true;
    return i + 1 == s->ninsns && !in->ends_flow && s->removed_jump > 0;
}

/* Instructions in a block (between leaders) holding a STENCIL_COLD() mark. */
static bool *marked_blocks(const gen_stencil *s)
{
    size_t n = s->ninsns;
    bool *leader = xcalloc(n + 1, sizeof *leader), *marked = xcalloc(n, sizeof *marked);
    leader[0] = leader[n] = true;
    for (size_t i = 0; i < n; i++) {
        const gen_insn *in = &s->insns[i];
        long t = is_jump(in) ? jump_inside(s, in) : -1;
        if (t >= 0)
            leader[t] = true;
        if (is_jump(in) || in->ends_flow)
            leader[i + 1] = true;
    }
    for (size_t m = 0; m < s->ncold_marks; m++) {
        long k = insn_at(s, s->cold_marks[m]);
        if (k < 0)
            continue; /* past the last instruction: marks nothing */
        size_t lo = (size_t)k, hi = (size_t)k + 1;
        while (!leader[lo])
            lo--;
        while (!leader[hi])
            hi++;
        for (size_t i = lo; i < hi; i++)
            marked[i] = true;
    }
    free(leader);
    return marked;
}

/* hot[i]: a path from instruction i reaches a hot exit without passing a
 * marked block. Backward passes until nothing changes (each pass that changes
 * something marks one more instruction, so at most n + 1 passes). */
static bool *reach_hot_exits(const gen_stencil *s, const bool *marked)
{
    size_t n = s->ninsns;
    bool *hot = xcalloc(n, sizeof *hot);
    for (bool changed = true; changed;) {
        changed = false;
        for (size_t k = n; k-- > 0;) {
            const gen_insn *in = &s->insns[k];
            if (hot[k] || marked[k])
                continue;
            long t = is_jump(in) ? jump_inside(s, in) : -1;
            bool h = is_hot_exit(s, k) || (t >= 0 && hot[t]) ||
                     (!in->ends_flow && k + 1 < n && hot[k + 1]);
            if (h)
                hot[k] = changed = true;
        }
    }
    return hot;
}

/* The cold run may start after instruction i: it does not run on into it, or
 * it is a conditional jump to the continuation that the target can invert
 * (hotcold_split: the hot part then runs on into the next instruction). */
static bool cold_may_follow(const gen_stencil *s, const gen_target *t, size_t i)
{
    const gen_insn *in = &s->insns[i];
    if (in->ends_flow)
        return true;
    if (!t->invert_branch || !is_jump(in) || in->is_indirect)
        return false;
    for (size_t h = 0; h < s->ncode_holes; h++) {
        const gen_hole *x = &s->code_holes[h];
        if (x->offset >= in->offset && x->offset < in->offset + in->size)
            return x->value == SG_VALUE_CONTINUE;
    }
    return false;
}

void hotcold_analyse(gen_stencil *s, const gen_target *t)
{
    for (size_t i = 0; i < s->ninsns; i++) {
        if (!s->insns[i].decoded)
            return;
    }
    if (!s->ninsns)
        return;
    bool *marked = marked_blocks(s);
    bool *hot = reach_hot_exits(s, marked);
    size_t start = s->ninsns; /* of the cold run that ends the code */
    while (start > 0 && !hot[start - 1])
        start--;
    /* Entered only by branches: the instruction before it must not run on. */
    while (start < s->ninsns && (start == 0 || !cold_may_follow(s, t, start - 1)))
        start++;
    if (start < s->ninsns && s->insns[start].offset > s->entry)
        s->hot_size = s->insns[start].offset;
    free(hot);
    free(marked);
}

size_t hotcold_hot_jump(const gen_stencil *s, const gen_target *t)
{
    for (size_t h = s->ncode_holes; h-- > 0;) {
        const gen_hole *last = &s->code_holes[h];
        if (last->offset >= s->hot_size)
            continue;
        if (last->value != SG_VALUE_CONTINUE)
            return 0;
        return t->trailing_jump(s->code, s->hot_size, last->offset, last->patch, last->addend);
    }
    return 0;
}

void hotcold_describe(strbuf *sb, const gen_stencil *s, const char *prefix)
{
    sb_printf(sb, "%shot +0x0..+0x%zx (%zu bytes", prefix, s->hot_size, s->hot_size);
    if (s->split && s->removed_jump)
        sb_printf(sb, "; its %zu-byte jump to the continuation removed", s->removed_jump);
    if (s->hot_size == s->code_size)
        sb_puts(sb, "), no cold part\n");
    else
        sb_printf(sb, "), cold +0x%zx..+0x%zx (%zu bytes%s)\n", s->hot_size, s->code_size,
                  s->code_size - s->hot_size,
                  s->split ? "" : "; kept in place: a branch or reference cannot be moved");
}
