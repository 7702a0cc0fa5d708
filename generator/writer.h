/* writer.h - render jit_stencils-<triple>.h and the jit_stencils.h dispatcher. */
#ifndef STENCILGEN_WRITER_H
#define STENCILGEN_WRITER_H

#include "pipeline.h"
#include "util.h"

/* Annotated disassembly of a stencil (from s->insns), every line starting with `prefix`. */
void writer_listing(strbuf *sb, const sg_run *run, const gen_stencil *s, const char *prefix);

/* The whole per-target header. */
void writer_target_header(strbuf *sb, const sg_run *run, const sg_target_result *r);
/* The shim's CFI row table and the derived frame shape, readable. */
void writer_unwind_rows(strbuf *sb, const sg_target_result *r, const char *prefix);
void writer_dispatcher(strbuf *sb, const sg_run *run);

/* File name of the per-target header: "jit_stencils-<triple>.h" (caller frees). */
char *writer_target_filename(const sg_target *t);

#endif
