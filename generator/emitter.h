/* emitter.h - stencils' copy-and-patch as C code of the generated header:
 * offsets, kinds and addends become constants, so the runtime runs
 * straight-line code instead of interpreting the hole table. One function
 * writes a group of stencils, a case each: compilers pay mostly per function
 * (gcc -O2: about 1 ms for each, even an empty one), and every VM build
 * compiles the header; gcc compiles them at -O1 (emitter_write_attributes). */
#ifndef STENCILGEN_EMITTER_H
#define STENCILGEN_EMITTER_H

#include "stencil.h"
#include "util.h"

/* How many stencils a group's function writes on average: a header of n
 * stencils has n / EMITTER_GROUP groups, rounded up (docs/build.md, "What a
 * header holds"). */
#define EMITTER_GROUP 128

/* A stencil with more code holes than this, all of them at hand
 * (emitter.c, tabled), hands them to sg_emit_table instead of a patch each. */
#define EMIT_TABLE_MIN_HOLES 2

/* A stencil of a group, the C name of its arrays (sg_code_<id> ...) and its
 * case label (SG_CASE_<id>, an enumerator of its function's own enum: the cases
 * are numbered from 0 without any number written, so the switch is one jump
 * table and an added op changes no other op's line). */
typedef struct emitter_case {
    const gen_stencil *stencil;
    const char *id;
    const char *label;
} emitter_case;

/* The SG_EMITTER_ATTRIBUTES every emitter function carries, once per header
 * before the first (a VM may define its own). */
void emitter_write_attributes(strbuf *sb);

/* "SG_EMITTER_ATTRIBUTES static unsigned <fn>(which, ...) { switch (which)
 * ... }" (the sg_emit_fn contract) writing cases[0..n). */
void emitter_write_group(strbuf *sb, const char *fn, const emitter_case *cases, size_t n,
                         char *const *symbols);

#endif
