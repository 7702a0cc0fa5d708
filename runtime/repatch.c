/* repatch.c - patching emitted code: a jump target re-pointed, an operand
 * changed (sr_patch_jump, sr_patch_operand).
 *
 * The holes of one instruction that carry the value are patched again with
 * the ABI's formulas, in place, in its hot part and in its cold part (placed
 * after every hot part, docs/runtime.md "Hot and cold parts"). Only values
 * patched into the code itself can change: a GOT slot may be shared with
 * other holes, and an op's data may be shared by every use of the op. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Which holes of an instruction a patch rewrites. */
typedef struct wanted {
    sg_value value;
    unsigned index; /* operand number (SG_VALUE_OPERAND) */
    const char *what; /* "jump target", "operand 2" */
} wanted;

static bool is_wanted(const sg_hole *h, const wanted *w)
{
    return h->value == (unsigned)w->value &&
           (w->value != SG_VALUE_OPERAND || h->index == w->index);
}

/* SR_OK when op s has code holes for w and none of them, nor any data hole,
 * keeps the value where it cannot be changed alone. */
static sr_status check_holes(const sr_executor *ex, size_t i, const sg_stencil *s,
                             const wanted *w)
{
    size_t found = 0;
    for (size_t k = 0; k < s->code_hole_count; k++) {
        const sg_hole *h = &s->code_holes[k];
        if (!is_wanted(h, w))
            continue;
        if (h->patch >= SG_PATCH__COUNT || sg_patch_uses_got(h->patch))
            return sr_fail(SR_EUNSUPPORTED, "%s: its %s is loaded from a GOT slot, which "
                           "cannot be patched alone (STENCIL_OPERANDS_IN_GOT?)",
                           ex->symbols[i], w->what);
        found++;
    }
    for (size_t k = 0; k < s->data_hole_count; k++)
        if (is_wanted(&s->data_holes[k], w))
            return sr_fail(SR_EUNSUPPORTED, "%s: its %s is also in the op's read-only data, "
                           "which cannot be patched after emit", ex->symbols[i], w->what);
    if (!found)
        return sr_fail(SR_EINVAL, "%s: the op %s has no %s to patch", ex->symbols[i],
                       s->name, w->what);
    return SR_OK;
}

/* One part of instruction i's code: where it runs, how many bytes, the
 * offset in the stencil's code of its first byte, and a copy to patch. */
typedef struct code_part {
    uint8_t *code;
    size_t size, first;
    uint8_t *copy;
} code_part;

/* Instruction i's hot part, and its cold part if it has one; the count. */
static size_t code_parts(const sr_executor *ex, size_t i, code_part parts[2])
{
    size_t hot = ex->offsets[i + 1] - ex->offsets[i], cold = executor_cold_size(ex, i);
    parts[0] = (code_part){ex->mem + ex->offsets[i], hot, 0, NULL};
    if (!cold)
        return 1;
    size_t at = ex->offsets[ex->n]; /* the cold parts, in instruction order */
    for (size_t j = 0; j < i; j++)
        at += executor_cold_size(ex, j);
    parts[1] = (code_part){ex->mem + at, cold, hot, NULL};
    return 2;
}

/* Patch every hole of instruction i that w names with v, in copies of its
 * parts: nothing is written to the code unless every value fits. */
static sr_status patch_holes(const sr_executor *ex, size_t i, code_part *parts, size_t nparts,
                             const sg_stencil *s, const wanted *w, uint64_t v)
{
    for (size_t p = 0; p < nparts; p++) {
        parts[p].copy = malloc(parts[p].size ? parts[p].size : 1);
        if (!parts[p].copy)
            return sr_fail(SR_ENOMEM, "out of memory");
        memcpy(parts[p].copy, parts[p].code, parts[p].size);
    }
    for (size_t k = 0; k < s->code_hole_count; k++) {
        const sg_hole *h = &s->code_holes[k];
        if (!is_wanted(h, w))
            continue;
        const code_part *p = &parts[nparts == 2 && h->offset >= parts[1].first];
        size_t at = h->offset - p->first;
        if (sg_patch_hole(p->copy + at, (uintptr_t)p->code + at, h->patch,
                          v + (uint64_t)h->addend))
            return sr_fail(SR_ERANGE, "%s: 0x%" PRIx64 " does not fit the hole of its %s at +0x%"
                           PRIx32 " (%s: %s)", ex->symbols[i], v, w->what, h->offset,
                           sg_patch_infos[h->patch].name, sg_patch_infos[h->patch].doc);
    }
    return SR_OK;
}

/* Write a patched copy over its part: open for writing, copy, seal again. */
static sr_status write_part(sr_region *r, const code_part *p)
{
    errno = 0;
    uint8_t *write = jitmem_unseal(r, p->code, p->size);
    if (!write)
        return sr_fail(SR_ESYSTEM, "cannot make the code writable: %s",
                       jitmem_error(NULL, "its memory is shared with the parent process"));
    memcpy(write, p->copy, p->size);
    if (!jitmem_seal(r, p->code, p->size)) /* executable, as before, in every case */
        return sr_fail(SR_ESYSTEM, "%s", jitmem_error("mprotect", NULL));
    return SR_OK;
}

/* Patch instruction i's parts, then tell perf. */
static sr_status repatch(sr_executor *ex, size_t i, const wanted *w, uint64_t v)
{
    sr_runtime *rt = ex->rt;
    const sg_stencil *s = &rt->set->stencils[ex->ops[i]];
    sr_status st = check_holes(ex, i, s, w);
    if (st != SR_OK)
        return st;
    code_part parts[2];
    size_t nparts = code_parts(ex, i, parts);
    st = patch_holes(ex, i, parts, nparts, s, w, v);
    for (size_t p = 0; p < nparts && st == SR_OK; p++)
        st = write_part(&ex->arena->region, &parts[p]);
    for (size_t p = 0; p < nparts; p++)
        free(parts[p].copy);
    if (st == SR_OK && perf_keeps_code(rt->perf))
        executor_announce_to_perf(rt, ex);
    return st;
}

/* True when target is where an instruction of a live executor of rt starts. */
static bool instruction_start(const sr_runtime *rt, const void *target)
{
    sr_executor *e;
    size_t k;
    return sr_lookup_pc(rt, target, &e, &k) && e->mem + e->offsets[k] == (const uint8_t *)target;
}

/* The executor must be live and have the instruction (registry lock held:
 * a free on another thread cannot happen meanwhile). */
static sr_status check_instruction(const char *call, const sr_executor *ex, size_t i)
{
    sr_status st = executor_check(call, ex);
    if (st != SR_OK)
        return st;
    if (i >= ex->n)
        return sr_fail(SR_EINVAL, "%s: executor '%s' has no instruction %zu (%zu instructions)",
                       call, ex->name, i, ex->n);
    return SR_OK;
}

static sr_status patch_jump_locked(sr_executor *ex, size_t instruction, const void *target)
{
    sr_status st = check_instruction("sr_patch_jump", ex, instruction);
    if (st != SR_OK)
        return st;
    wanted w = {SG_VALUE_JUMP_TARGET, 0, "jump target"};
    if (!instruction_start(ex->rt, target))
        return sr_fail(SR_EINVAL, "%s: the target %p is not the start of an instruction of "
                       "a live executor of this runtime", ex->symbols[instruction], target);
    return repatch(ex, instruction, &w, (uintptr_t)target);
}

sr_status sr_patch_jump(sr_executor *ex, size_t instruction, const void *target)
{
    sr_registry_lock();
    sr_status st = patch_jump_locked(ex, instruction, target);
    sr_registry_unlock();
    return st;
}

static sr_status patch_operand_locked(sr_executor *ex, size_t instruction, unsigned n,
                                      uint64_t value)
{
    sr_status st = check_instruction("sr_patch_operand", ex, instruction);
    if (st != SR_OK)
        return st;
    if (n >= SG_OPERANDS)
        return sr_fail(SR_EINVAL, "sr_patch_operand: %s: there is no operand %u (%d operands)",
                       ex->symbols[instruction], n, SG_OPERANDS);
    char what[32];
    snprintf(what, sizeof what, "operand %u", n);
    wanted w = {SG_VALUE_OPERAND, n, what};
    return repatch(ex, instruction, &w, value);
}

sr_status sr_patch_operand(sr_executor *ex, size_t instruction, unsigned n, uint64_t value)
{
    sr_registry_lock();
    sr_status st = patch_operand_locked(ex, instruction, n, value);
    sr_registry_unlock();
    return st;
}
