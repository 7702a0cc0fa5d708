/* fp_check.h - the pinned-frame-pointer invariant: no stencil instruction may
 * write the frame-pointer register or any part of it, in any form. */
#ifndef STENCILGEN_FP_CHECK_H
#define STENCILGEN_FP_CHECK_H

#include <stdbool.h>

#include "diag.h"
#include "stencil.h"

/* Walks s->insns (stencil_disassemble). Each violation (and each undecodable byte
 * sequence, which could hide one) is reported as
 *   op NAME (TARGET) at +0xOFF: <instruction>: writes the frame pointer
 * Returns false if there was any (exit code 1). */
bool fp_check(const sg_stencil *s, const sg_where *where);

#endif
