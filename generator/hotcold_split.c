/* hotcold_split.c - see hotcold_split.h.
 *
 * Only branches are rewritten: every other instruction is copied as it is,
 * its holes moved with it. So a stencil stays whole when its code names
 * itself other than by a direct jump: a hole whose value is its own code, a
 * PC-relative operand or a direct call into it with no hole (no relocation
 * moves those). Jumps between the parts take the target's long form
 * (long_branch), which reaches across any executor. */
#include "hotcold_split.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hotcold.h"
#include "util.h"

enum { PART_HOT, PART_COLD, PART_NEXT };

/* Each instruction as it moves, and one more past the last: the next
 * instruction (PART_NEXT), where the removed jumps to the continuation went. */
typedef struct moved {
    int part;
    long target;        /* a direct jump inside the code: the instruction it goes to, else -1 */
    bool cross;         /* ... in the other part (or the next instruction, from cold code) */
    bool grown;         /* written in its long form (long_branch) */
    bool inverted;      /* the hot part's final jump to the continuation, turned into a
                           jump to the cold part on the opposite condition */
    unsigned size;      /* its size as written */
    size_t at;          /* its offset in its part */
    uint8_t form[8];    /* the long form, when grown */
    unsigned field;     /* the long form's hole */
    sg_patch patch;
    int64_t addend;
} moved;

typedef struct plan {
    const gen_stencil *s;
    const gen_target *t;
    moved *m;           /* ninsns + 1 */
    size_t hot_size, cold_size;
    unsigned tail;      /* a jump to the continuation after the cold part: its size, or 0 */
    bool inverted;      /* the hot part's last jump was inverted (invert_last_hot) */
    moved tail_jump;
} plan;

static long index_of(const gen_stencil *s, int64_t offset)
{
    for (size_t i = 0; i < s->ninsns; i++) {
        if (s->insns[i].offset == offset)
            return (long)i;
    }
    return -1;
}

/* The first code hole in the instruction, or NULL. */
static const gen_hole *hole_in(const gen_stencil *s, const gen_insn *in)
{
    for (size_t h = 0; h < s->ncode_holes; h++) {
        if (s->code_holes[h].offset >= in->offset &&
            s->code_holes[h].offset < in->offset + in->size)
            return &s->code_holes[h];
    }
    return NULL;
}

/* What hotcold_split.c's header comment says keeps an op whole. */
static bool refers_to_itself(const gen_stencil *s)
{
    for (size_t h = 0; h < s->ncode_holes + s->ndata_holes; h++) {
        const gen_hole *x = h < s->ncode_holes ? &s->code_holes[h]
                                               : &s->data_holes[h - s->ncode_holes];
        if (x->value == SG_VALUE_CODE)
            return true;
    }
    for (size_t i = 0; i < s->ninsns; i++) {
        const gen_insn *in = &s->insns[i];
        if (!in->decoded)
            return true;
        bool jump = in->target_is_branch && !in->is_call;
        if (in->has_target && !jump && !hole_in(s, in) && in->target >= 0 &&
            (uint64_t)in->target < s->code_size)
            return true;
    }
    return false;
}

static bool grow(plan *p, moved *m, const uint8_t *bytes, unsigned size)
{
    if (!p->t->long_branch(bytes, size, m->form, &m->size, &m->field, &m->patch, &m->addend))
        return false;
    m->grown = true;
    return true;
}

/* The hot part's last instruction, when it is a conditional jump to the
 * continuation (hotcold.c's cold_may_follow): jump to the cold part's start
 * on the opposite condition instead. */
static bool invert_last_hot(plan *p, size_t last)
{
    const gen_stencil *s = p->s;
    const gen_insn *in = &s->insns[last];
    const gen_hole *h = hole_in(s, in);
    moved *m = &p->m[last];
    if (in->ends_flow || !h || h->value != SG_VALUE_CONTINUE || !p->t->invert_branch)
        return true; /* not that case */
    uint8_t opposite[16];
    if (in->size > sizeof opposite)
        return false;
    memcpy(opposite, s->code + in->offset, in->size);
    if (!p->t->invert_branch(opposite, in->size) || !grow(p, m, opposite, in->size))
        return false;
    m->inverted = m->cross = p->inverted = true;
    m->target = (long)last + 1; /* the cold part's first instruction */
    return true;
}

/* Parts, and which jumps stay inside the code and where they go. */
static bool classify(plan *p, size_t dropped)
{
    const gen_stencil *s = p->s;
    size_t n = s->ninsns, last_hot = 0;
    for (size_t i = 0; i <= n; i++) {
        moved *m = &p->m[i];
        m->part = i == n ? PART_NEXT : s->insns[i].offset < s->hot_size ? PART_HOT : PART_COLD;
        m->target = -1;
        m->size = i < n ? s->insns[i].size : 0;
        if (i < n && m->part == PART_HOT)
            last_hot = i;
    }
    if (dropped)
        p->m[last_hot].part = PART_NEXT; /* the hot part's final jump to the continuation */
    for (size_t i = 0; i < n; i++) {
        const gen_insn *in = &s->insns[i];
        moved *m = &p->m[i];
        bool jump = in->target_is_branch && !in->is_call && !in->is_indirect;
        if (!jump || hole_in(s, in) || in->target < 0)
            continue;
        if ((uint64_t)in->target == s->code_size && s->removed_jump)
            m->target = (long)n; /* where the removed trailing jump was */
        else if ((uint64_t)in->target < s->code_size)
            m->target = index_of(s, in->target);
        else
            continue;
        if (m->target < 0)
            return false; /* into the middle of an instruction */
        int to = p->m[m->target].part;
        m->cross = to == PART_NEXT ? m->part == PART_COLD : to != m->part;
        if (m->cross && !grow(p, m, s->code + in->offset, in->size))
            return false;
    }
    if (!dropped && !invert_last_hot(p, last_hot))
        return false;
    if (s->removed_jump) { /* the cold part ran into the continuation: jump there */
        moved *j = &p->tail_jump;
        if (!grow(p, j, p->t->short_jump, p->t->short_jump_size))
            return false;
        j->part = PART_COLD;
        j->cross = true;
        j->target = (long)n;
        p->tail = j->size;
    }
    return true;
}

/* Offsets in each part, from the sizes as they stand. */
static void place(plan *p)
{
    size_t at[2] = {0, 0}, n = p->s->ninsns;
    for (size_t i = 0; i < n; i++) {
        moved *m = &p->m[i];
        if (m->part == PART_NEXT)
            continue;
        m->at = at[m->part];
        at[m->part] += m->size;
    }
    p->tail_jump.at = at[PART_COLD];
    p->hot_size = at[PART_HOT];
    p->cold_size = at[PART_COLD] + p->tail;
    for (size_t i = 0; i <= n; i++) {
        if (p->m[i].part == PART_NEXT)
            p->m[i].at = p->hot_size; /* the next instruction's hot part starts there */
    }
}

/* Grow every jump inside a part whose short form no longer reaches, until
 * none does (growing only, so at most one round per jump). */
static bool relax(plan *p)
{
    for (size_t round = 0; round <= p->s->ninsns; round++) {
        place(p);
        bool grew = false;
        for (size_t i = 0; i < p->s->ninsns; i++) {
            moved *m = &p->m[i];
            if (m->target < 0 || m->cross || m->grown || m->part == PART_NEXT)
                continue;
            uint8_t probe[8];
            memcpy(probe, p->s->code + p->s->insns[i].offset, m->size);
            if (p->t->set_branch(probe, m->size, (int64_t)p->m[m->target].at - (int64_t)m->at))
                continue;
            if (!grow(p, m, p->s->code + p->s->insns[i].offset, m->size))
                return false;
            grew = true;
        }
        if (!grew)
            return true;
    }
    return false;
}

static int cmp_hole(const void *a, const void *b)
{
    const gen_hole *x = a, *y = b;
    return (x->offset > y->offset) - (x->offset < y->offset);
}

/* The hole of a jump between the parts (or from cold code to the next
 * instruction), written at `base` in the new code. */
static gen_hole cross_hole(const moved *m, const moved *to, size_t base)
{
    gen_hole x = {.offset = (uint32_t)(base + m->field), .patch = m->patch,
                  .addend = m->addend + (int64_t)(to->part == PART_NEXT ? 0 : to->at)};
    x.value = to->part == PART_COLD ? SG_VALUE_COLD
              : to->part == PART_HOT ? SG_VALUE_CODE : SG_VALUE_CONTINUE;
    snprintf(x.reloc, sizeof x.reloc, "%s", "split");
    /* For the listing's comments: one word each, as a relocation's symbol. */
    snprintf(x.symbol, sizeof x.symbol, "%s",
             to->part == PART_COLD ? "cold_part" : to->part == PART_HOT ? "hot_part"
                                                                         : SG_HOLE_CONTINUE);
    return x;
}

/* One instruction at its new place: bytes, the holes it had, its jump. */
static void write_one(const plan *p, const gen_insn *in, const moved *m, uint8_t *code,
                      gen_hole **holes, size_t *nholes, size_t *cap)
{
    const gen_stencil *s = p->s;
    size_t base = m->part == PART_HOT ? m->at : p->hot_size + m->at;
    memcpy(code + base, m->grown ? m->form : s->code + in->offset, m->size);
    for (size_t h = 0; h < s->ncode_holes && !m->inverted; h++) {
        gen_hole x = s->code_holes[h];
        if (x.offset >= in->offset && x.offset < in->offset + in->size) {
            x.offset = (uint32_t)(base + (x.offset - in->offset));
            ARRAY_PUSH(*holes, *nholes, *cap, x);
        }
    }
    if (m->target < 0)
        return;
    const moved *to = &p->m[m->target];
    if (m->cross)
        ARRAY_PUSH(*holes, *nholes, *cap, cross_hole(m, to, base));
    else
        p->t->set_branch(code + base, m->size, (int64_t)to->at - (int64_t)m->at);
}

/* The new code and holes, from a settled plan. */
static void write_parts(const plan *p, uint8_t *code, gen_hole **holes, size_t *nholes)
{
    const gen_stencil *s = p->s;
    size_t cap = 0;
    for (size_t i = 0; i < s->ninsns; i++) {
        if (p->m[i].part != PART_NEXT)
            write_one(p, &s->insns[i], &p->m[i], code, holes, nholes, &cap);
    }
    if (p->tail) {
        const moved *j = &p->tail_jump;
        size_t base = p->hot_size + j->at;
        memcpy(code + base, j->form, j->size);
        ARRAY_PUSH(*holes, *nholes, cap, cross_hole(j, &p->m[s->ninsns], base));
    }
    if (*nholes)
        qsort(*holes, *nholes, sizeof **holes, cmp_hole);
}

static void redecode(gen_stencil *s, lb_disasm *d)
{
    free(s->insns);
    free(s->insn_text);
    s->insns = NULL;
    s->insn_text = NULL;
    s->ninsns = s->insn_text_size = 0;
    stencil_disassemble(s, d);
}

bool hotcold_split(gen_stencil *s, const gen_target *t, lb_disasm *d)
{
    if (!t->long_branch || s->split || s->hot_size >= s->code_size)
        return false;
    redecode(s, d); /* branch facts: a cached stencil has none */
    size_t dropped = hotcold_hot_jump(s, t);
    plan p = {.s = s, .t = t, .m = xcalloc(s->ninsns + 1, sizeof *p.m)};
    bool ok = !refers_to_itself(s) && classify(&p, dropped) && relax(&p);
    long entry = ok ? index_of(s, (int64_t)s->entry) : -1;
    ok = entry >= 0 && p.m[entry].part == PART_HOT;
    if (ok) {
        uint8_t *code = xcalloc(p.hot_size + p.cold_size + 1, 1);
        gen_hole *holes = NULL;
        size_t nholes = 0;
        write_parts(&p, code, &holes, &nholes);
        free(s->code);
        free(s->code_holes);
        s->entry = p.m[entry].at;
        s->code = code;
        s->code_size = p.hot_size + p.cold_size;
        s->code_holes = holes;
        s->ncode_holes = nholes;
        s->hot_size = p.hot_size;
        s->removed_jump = dropped;
        s->hot_runs_on = dropped || p.inverted;
        s->split = true;
        redecode(s, d);
    }
    free(p.m);
    return ok;
}
