/* emitter.h - a stencil's copy-and-patch as a C function of the generated
 * header: offsets, kinds and addends become constants, so the runtime runs
 * straight-line code instead of interpreting the hole table. */
#ifndef STENCILGEN_EMITTER_H
#define STENCILGEN_EMITTER_H

#include "stencil.h"
#include "util.h"

/* "static unsigned sg_emit_<id>(...) { ... }" (the sg_emit_fn contract). */
void emitter_write(strbuf *sb, const gen_stencil *s, const char *id, char *const *symbols);

#endif
