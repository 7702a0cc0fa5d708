/* hotcold_split.h - lay an op's stencil out as its hot part then its cold part
 * (docs/design.md, "Hot and cold parts"), for a runtime that places every
 * instruction's hot part back to back and the cold parts after them all. */
#ifndef STENCILGEN_HOTCOLD_SPLIT_H
#define STENCILGEN_HOTCOLD_SPLIT_H

#include <stdbool.h>

#include "llvm_bridge.h"
#include "stencil.h"
#include "target.h"

/* When s has a cold part (hotcold_analyse) and the target splits: rewrites
 * s->code as the hot part, without its final jump to the continuation (it
 * runs into the next instruction's hot part), then the cold part; branches
 * between the two become holes (SG_VALUE_COLD from hot to cold, SG_VALUE_CODE
 * back), grown to their long form where they were short; sets s->split.
 * Leaves s as it was (and returns false) when some branch or reference
 * cannot be moved that way (see hotcold_split.c). `d` decodes s->code again:
 * a cached stencil keeps no branch facts. */
bool hotcold_split(gen_stencil *s, const gen_target *t, lb_disasm *d);

#endif
