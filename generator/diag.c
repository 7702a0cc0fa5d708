/* diag.c - see diag.h. Diagnostics go to stderr, one message per call, or
 * into the capture buffer while one is set. */
#include "diag.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

/* The one piece of state: where messages go while a job's are collected. */
static strbuf *capture;

strbuf *diag_capture(strbuf *into)
{
    strbuf *previous = capture;
    capture = into;
    return previous;
}

void diag_write(const void *text, size_t n)
{
    if (capture)
        sb_putn(capture, text, n);
    else
        fwrite(text, 1, n, stderr);
}

static void vput(const char *fmt, va_list ap)
{
    if (capture)
        sb_vprintf(capture, fmt, ap);
    else
        vfprintf(stderr, fmt, ap);
}

static void put(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void put(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vput(fmt, ap);
    va_end(ap);
}

static void emit(const char *prefix, const char *kind, const char *fmt, va_list ap)
{
    put("%s%s: ", prefix, kind);
    vput(fmt, ap);
    put("\n");
}

static void emit_at(const char *file, unsigned line, unsigned col, const char *kind,
                    const char *fmt, va_list ap)
{
    if (line && col)
        put("%s:%u:%u: ", file, line, col);
    else if (line)
        put("%s:%u: ", file, line);
    else
        put("%s: ", file);
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

/* `where` is what follows the label: ": " or " at +0x12: ". */
static void emit_in(const gen_where *w, const char *where, const char *fmt, va_list ap)
{
    if (w->file && w->line && w->col)
        put("%s:%u:%u: ", w->file, w->line, w->col);
    else if (w->file)
        put("%s: ", w->file);
    put("%serror: %s%s", w->file ? "" : "stencilgen: ", w->label, where);
    vput(fmt, ap);
    put("\n");
}

void diag_error_in(const gen_where *w, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    emit_in(w, ": ", fmt, ap);
    va_end(ap);
}

void diag_error_in_code(const gen_where *w, uint64_t offset, const char *fmt, ...)
{
    char where[32];
    va_list ap;
    snprintf(where, sizeof where, " at +0x%" PRIx64 ": ", offset);
    va_start(ap, fmt);
    emit_in(w, where, fmt, ap);
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
