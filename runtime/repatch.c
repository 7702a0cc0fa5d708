/* repatch.c - patching emitted code: a jump target re-pointed, an operand
 * changed (sr_patch_jump, sr_patch_operand).
 *
 * The holes of one instruction that carry the value are patched again with
 * the ABI's formulas, in place. Only values patched into the code itself can
 * change: a GOT slot may be shared with other holes, and an op's data may be
 * shared by every use of the op. */
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
        const size_t *cold = ex->rt->set->cold_sizes;
        if (cold && h->offset >= s->code_size - cold[ex->ops[i]])
            return sr_fail(SR_EUNSUPPORTED, "%s: its %s is in the op's cold part, which is "
                           "not patched after emit (build the op with --no-hot-cold)",
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

/* Patch every hole of instruction i (its `size` bytes, written at `code`,
 * running at `pc`) that w names with v; on a value that does not fit, put
 * the old bytes back. */
static sr_status patch_holes(const sr_executor *ex, size_t i, uint8_t *code, uint64_t pc,
                             size_t size, const sg_stencil *s, const wanted *w, uint64_t v)
{
    uint8_t *saved = malloc(size ? size : 1);
    if (!saved)
        return sr_fail(SR_ENOMEM, "out of memory");
    memcpy(saved, code, size);
    sr_status st = SR_OK;
    for (size_t k = 0; k < s->code_hole_count && st == SR_OK; k++) {
        const sg_hole *h = &s->code_holes[k];
        if (!is_wanted(h, w))
            continue;
        if (sg_patch_hole(code + h->offset, pc + h->offset, h->patch, v + (uint64_t)h->addend))
            st = sr_fail(SR_ERANGE, "%s: 0x%" PRIx64 " does not fit the hole of its %s at +0x%" PRIx32
                         " (%s: %s)", ex->symbols[i], v, w->what, h->offset,
                         sg_patch_infos[h->patch].name, sg_patch_infos[h->patch].doc);
    }
    if (st != SR_OK)
        memcpy(code, saved, size);
    free(saved);
    return st;
}

/* Open instruction i's code for writing, patch, seal it again, tell perf. */
static sr_status repatch(sr_executor *ex, size_t i, const wanted *w, uint64_t v)
{
    sr_runtime *rt = ex->rt;
    const sg_stencil *s = &rt->set->stencils[ex->ops[i]];
    sr_status st = check_holes(ex, i, s, w);
    if (st != SR_OK)
        return st;
    sr_region *r = &ex->arena->region;
    uint8_t *code = ex->mem + ex->offsets[i];
    size_t size = ex->offsets[i + 1] - ex->offsets[i];
    errno = 0;
    uint8_t *write = jitmem_unseal(r, code, size);
    if (!write)
        return sr_fail(SR_ESYSTEM, "cannot make the code writable: %s",
                       jitmem_error(NULL, "its memory is shared with the parent process"));
    st = patch_holes(ex, i, write, (uintptr_t)code, size, s, w, v);
    if (!jitmem_seal(r, code, size)) /* executable, as before, in every case */
        return sr_fail(SR_ESYSTEM, "%s", jitmem_error("mprotect", NULL));
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
