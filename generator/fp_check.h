/* fp_check.h - the pinned-frame-pointer invariant: no stencil instruction may
 * write the frame-pointer register or any part of it, in any form. */
#ifndef STENCILGEN_FP_CHECK_H
#define STENCILGEN_FP_CHECK_H

#include <stdbool.h>

#include "diag.h"
#include "stencil.h"
#include "target.h"

/* Walks s->insns (stencil_disassemble: a linear sweep from the entry). Each
 * violation (and each undecodable byte sequence, which could hide one) is
 * reported as
 *   op NAME (TARGET) at +0xOFF: <instruction>: writes the frame pointer
 * Then, so that no control flow reaches bytes the sweep read differently,
 * every direct branch or call target, every PC-relative address into the code
 * (x86) and every absolute code address in the data must be the start of a
 * swept instruction or the end of the code; a branch whose bytes are a hole
 * goes where the runtime patches it. Code reached only through an address the
 * generator cannot see (computed by arithmetic) is not covered.
 * With t->fp_saved_with_lr, an `ldp x29, x30, [sp], #16` is no violation
 * when it reloads what an `stp x29, x30, [sp, #-16]!` before it stored and
 * nothing can have changed the slot or skipped the store: between the two no
 * instruction writes sp or stores at sp, and no branch, code address or
 * entry reaches past the stp from outside.
 * Returns false if anything failed (exit code 1). */
bool fp_check(const gen_stencil *s, const gen_target *t, const gen_where *where);

#endif
