/* emitter.h - stencils' copy-and-patch as C code of the generated header:
 * offsets, kinds and addends become constants, so the runtime runs
 * straight-line code instead of interpreting the hole table. One function
 * writes a group of stencils, a case each: compilers pay mostly per function
 * (gcc -O2: about 1 ms for each, even an empty one), and every VM build
 * compiles the header. */
#ifndef STENCILGEN_EMITTER_H
#define STENCILGEN_EMITTER_H

#include "stencil.h"
#include "util.h"

/* How many stencils a group's function writes at most (docs/build.md, "What
 * a header holds"). */
#define EMITTER_GROUP 64

/* "static unsigned <fn>(which, ...) { switch (which) ... }" (the sg_emit_fn
 * contract) writing stencils s[0..n), whose cases are first, first + 1, ...;
 * their arrays are sg_code_<id>, <id> being each one's name if `id` is NULL. */
void emitter_write_group(strbuf *sb, const char *fn, const gen_stencil *s, size_t n,
                         size_t first, const char *id, char *const *symbols);

#endif
