/* report_read.h - what `stencilgen report` knows of one generated header:
 * read back from the header's own text (its tables, listings and
 * provenance), with no compiler and no LLVM (report_read.c). */
#ifndef STENCILGEN_REPORT_READ_H
#define STENCILGEN_REPORT_READ_H

#include <stdbool.h>
#include <stddef.h>

typedef struct rp_count {
    char *name; /* a patch kind ("ABS64") or a helper's symbol */
    size_t n;
} rp_count;

typedef struct rp_stencil {
    char *id;      /* the C name: sg_code_<id> */
    char *name;    /* as the header shows it: "load_fast[n=3]" */
    char *op;      /* the op ("load_fast") */
    char *variant; /* "n=3", or "" */
    char *source;  /* its source, relative to the manifest */
    size_t code, data, cold; /* bytes; the hot part is code - cold */
    size_t holes;
    rp_count *kinds; /* holes by patch kind, in first-seen order */
    size_t nkinds;
    rp_count *calls; /* SYMBOL holes by symbol: the helpers it calls or reads */
    size_t ncalls;
    char **folded; /* the variants folded into this stencil (names) */
    size_t nfolded;
    char **listing; /* the header's listing lines, prefix removed (none: --no-listing) */
    size_t nlisting;
} rp_stencil;

typedef struct rp_target {
    char *path;
    char *triple;
    char *compiler;  /* provenance's sg-compiler, or "" */
    char *generator; /* provenance's sg-generator, or "" */
    char *layout;    /* provenance's sg-layout, or "" */
    rp_stencil *stencils; /* in the header's order */
    size_t nstencils;
    char *shim; /* the shim's name */
    size_t shim_code;
    char **shim_listing;
    size_t nshim_listing;
    char **frame; /* the unwind facts: the header's comment and constants */
    size_t nframe;
} rp_target;

/* Reads one header. On a file that is not a stencilgen target header, or is
 * damaged, prints "path:line:col: error: ..." and returns false (t is then
 * freed). */
bool rp_read_header(const char *path, rp_target *t);
/* The same over a header's bytes already read (`path` names them in messages). */
bool rp_read_text(const char *path, const void *data, size_t size, rp_target *t);
void rp_target_free(rp_target *t);

#endif
