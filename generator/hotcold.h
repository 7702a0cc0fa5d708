/* hotcold.h - find the cold part of an op's stencil (docs/design.md, "Hot and
 * cold parts"). */
#ifndef STENCILGEN_HOTCOLD_H
#define STENCILGEN_HOTCOLD_H

#include <stdbool.h>
#include <stddef.h>

#include "stencil.h"
#include "target.h"
#include "util.h"

/* Sets s->hot_size: the code before the longest run of cold instructions that
 * ends the code and is only entered by branches (never by running into it).
 * Cold: no path from it leaves the stencil for the next instruction, a jump
 * target, a tail call or a return (it ends in a trap or a call that never
 * returns), or it is in a block the op marked with STENCIL_COLD(); the run
 * may follow a conditional jump to the continuation that t can invert. Needs a
 * fresh decode (stencil_disassemble) and s->cold_marks; leaves hot_size as it
 * is when some byte did not decode. */
void hotcold_analyse(gen_stencil *s, const gen_target *t);

/* Bytes of a jump to the continuation that ends the hot part, which a layout
 * of hot parts back to back drops (the next hot part follows): 0 if none. */
size_t hotcold_hot_jump(const gen_stencil *s, const gen_target *t);

/* One line for `dump`: the hot part (and the jump to the continuation it
 * dropped) and the cold part, as offsets in the listing that follows. */
void hotcold_describe(strbuf *sb, const gen_stencil *s, const char *prefix);

#endif
