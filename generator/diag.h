/* diag.h - GCC-style diagnostics and the tool's exit codes. */
#ifndef STENCILGEN_DIAG_H
#define STENCILGEN_DIAG_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"

enum sg_exit {
    SG_EXIT_OK = 0,
    SG_EXIT_CHECK = 1,     /* invariant, frame shape, unsupported relocation */
    SG_EXIT_USAGE = 2,     /* command line or manifest */
    SG_EXIT_TOOLCHAIN = 3, /* clang missing, or a source that does not compile */
};

/* "file:line:col: error: ..." (line/col omitted when 0). */
void diag_error_at(const char *file, unsigned line, unsigned col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* "file:line:col: note: ...", e.g. where a duplicate was first given. */
void diag_note_at(const char *file, unsigned line, unsigned col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Where a diagnostic about an op or the shim points: its source when known. */
typedef struct gen_where {
    const char *file; /* NULL: no source location */
    unsigned line, col;
    const char *label; /* "op add (x86_64-unknown-linux-gnu)" */
} gen_where;

/* "file:line:col: error: LABEL: ..." when w has a file, else
 * "stencilgen: error: LABEL: ...". */
void diag_error_in(const gen_where *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same about the instruction at `offset` in the code: "... error: LABEL at +0xOFF: ...". */
void diag_error_in_code(const gen_where *w, uint64_t offset, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* "stencilgen: error: ..." */
void diag_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void diag_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void diag_warning(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* While `into` is set (NULL: stderr again), every message, and what
 * diag_write is given, goes there instead of stderr: so compile_run can print
 * each job's messages in job order, whatever order the jobs finish in.
 * Returns the previous target, to restore. */
strbuf *diag_capture(strbuf *into);
void diag_write(const void *text, size_t n);

/* Keep the worst (highest) exit code seen so far. */
static inline int exit_worst(int a, int b)
{
    return a > b ? a : b;
}

#endif
