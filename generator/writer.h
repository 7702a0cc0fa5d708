/* writer.h - render what a run made, from a model of it: the per-target
 * header jit_stencils-<triple>.h, the jit_stencils.h dispatcher, `dump`'s
 * listing and the one-line summary. */
#ifndef STENCILGEN_WRITER_H
#define STENCILGEN_WRITER_H

#include <stdbool.h>
#include <stddef.h>

#include "discover.h"
#include "frame_shape.h"
#include "stencil.h"
#include "target.h"
#include "util.h"

/* Everything one target's header is made of. */
typedef struct gen_header_model {
    const gen_target *target;
    const char *manifest_name; /* the manifest's file name, without its directory */
    char *const *symbols;      /* the run-time symbols, in manifest order */
    size_t nsymbols;
    const gen_stencil *ops;    /* in op order */
    size_t nops;
    const gen_op *defs;        /* the ops (variants apart), in op order: C names, axes */
    const size_t *twin;        /* per op, the op whose stencil it uses (variant_fold) */
    const gen_stencil *shim;
    const gen_unwind *unwind;   /* derived from the shim (partly, when it failed a check) */
    bool landing_pads;         /* every op and the shim start with a landing pad */
} gen_header_model;

/* Annotated disassembly of a stencil (from s->insns), every line starting with `prefix`. */
void writer_listing(strbuf *sb, char *const *symbols, const gen_stencil *s, const char *prefix);
/* The whole per-target header. */
void writer_target_header(strbuf *sb, const gen_header_model *m);
/* The shim's CFI row table and the derived frame shape, readable. */
void writer_unwind_rows(strbuf *sb, const gen_target *t, const gen_unwind *u, const char *prefix);
/* Includes the header of whichever of targets[0..n) the compiler targets. */
void writer_dispatcher(strbuf *sb, const gen_target *const *targets, size_t n);
/* File name of the per-target header: "jit_stencils-<triple>.h" (caller frees). */
char *writer_target_filename(const gen_target *t);
/* `stencilgen dump`: each op (only the one named `only`, if not NULL: an
 * op's name, or a variant's C or display name; an op with variants names
 * them all), then the shim with its CFI rows. False when `only` names no op. */
bool writer_dump(strbuf *sb, const gen_header_model *m, const char *only);
/* "stencilgen: TRIPLE: N ops (C compiled, K cached[, F folded]), ... bytes, ... holes (...)" */
void writer_summary(strbuf *sb, const gen_header_model *m, size_t compiled, size_t cached);

#endif
