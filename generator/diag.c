/* diag.c - see diag.h. Diagnostics go to stderr, one message per call. */
#include "diag.h"

#include <stdarg.h>
#include <stdio.h>

static void emit(const char *prefix, const char *kind, const char *fmt, va_list ap)
{
    fprintf(stderr, "%s%s: ", prefix, kind);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

static void emit_at(const char *file, unsigned line, unsigned col, const char *kind,
                    const char *fmt, va_list ap)
{
    if (line && col)
        fprintf(stderr, "%s:%u:%u: ", file, line, col);
    else if (line)
        fprintf(stderr, "%s:%u: ", file, line);
    else
        fprintf(stderr, "%s: ", file);
    emit("", kind, fmt, ap);
}

void diag_error_at(const char *file, unsigned line, unsigned col, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    emit_at(file, line, col, "error", fmt, ap);
    va_end(ap);
}

void diag_note_at(const char *file, unsigned line, unsigned col, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    emit_at(file, line, col, "note", fmt, ap);
    va_end(ap);
}

void diag_error_in(const sg_where *w, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (w->file && w->line && w->col)
        fprintf(stderr, "%s:%u:%u: ", w->file, w->line, w->col);
    else if (w->file)
        fprintf(stderr, "%s: ", w->file);
    emit(w->file ? "" : "stencilgen: ", "error", fmt, ap);
    va_end(ap);
}

void diag_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    emit("stencilgen: ", "error", fmt, ap);
    va_end(ap);
}

void diag_warning(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    emit("stencilgen: ", "warning", fmt, ap);
    va_end(ap);
}

void diag_note(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    emit("stencilgen: ", "note", fmt, ap);
    va_end(ap);
}
