/* discover.c - ops are functions carrying the "stencilgen.op" annotation that
 * the template adds in discovery mode; libclang finds them with their locations. */
#include "discover.h"

#include <clang-c/Index.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag.h"
#include "util.h"

#define OP_ANNOTATION "stencilgen.op"
#define VARIANT_ANNOTATION "stencilgen.variant:"
#define OP_PREFIX "op_"

/* The main file's raw tokens, comments left out, with each token's offset:
 * tokenized once per parse, since a CPython-style file holds hundreds of ops
 * and tokenizing the rest of the file for each op is quadratic. */
typedef struct token_run {
    CXTranslationUnit tu;
    const char *text; /* the file's bytes */
    size_t size;
    CXToken *all; /* as clang_tokenize returned them */
    unsigned nall;
    CXToken *tokens; /* the same without comments */
    size_t *offsets; /* where each of `tokens` starts */
    unsigned n;
} token_run;

static token_run tokens_of(CXTranslationUnit tu, CXFile file)
{
    size_t size = 0;
    const char *text = clang_getFileContents(tu, file, &size);
    CXSourceRange range = clang_getRange(clang_getLocationForOffset(tu, file, 0),
                                         clang_getLocationForOffset(tu, file, (unsigned)size));
    token_run t = {tu, text ? text : "", text ? size : 0, NULL, 0, NULL, NULL, 0};
    clang_tokenize(tu, range, &t.all, &t.nall);
    t.tokens = xcalloc(t.nall ? t.nall : 1, sizeof *t.tokens);
    t.offsets = xcalloc(t.nall ? t.nall : 1, sizeof *t.offsets);
    for (unsigned i = 0; i < t.nall; i++)
        if (clang_getTokenKind(t.all[i]) != CXToken_Comment) {
            unsigned at;
            clang_getExpansionLocation(clang_getTokenLocation(tu, t.all[i]), NULL, NULL, NULL, &at);
            t.offsets[t.n] = at;
            t.tokens[t.n++] = t.all[i];
        }
    return t;
}

typedef struct visit_ctx {
    const char *source;
    CXFile main_file;
    gen_oplist *out;
    CXTranslationUnit tu;
    token_run tokens; /* of main_file, made at its first op (then tokens.tokens is set) */
    int rc; /* SG_EXIT_USAGE once an op is refused */
} visit_ctx;

static void tokens_free(token_run *t)
{
    free(t->offsets);
    free(t->tokens);
    clang_disposeTokens(t->tu, t->all, t->nall);
}

/* A character that continues an identifier: clang takes '$' and UTF-8 too. */
static bool identifier_char(char c)
{
    unsigned char u = (unsigned char)c;
    return u == '_' || u == '$' || u >= 0x80 || (u >= '0' && u <= '9') ||
           ((u | 0x20) >= 'a' && (u | 0x20) <= 'z');
}

/* p past any line continuations there (a backslash, blanks, a newline),
 * which clang reads as nothing, also inside a token. */
static const char *past_continuations(const char *p, const char *end)
{
    while (p < end && *p == '\\') {
        const char *q = p + 1;
        while (q < end && (*q == ' ' || *q == '\t'))
            q++;
        if (q < end && *q == '\r')
            q++;
        if (q >= end || *q != '\n')
            break;
        p = q + 1;
    }
    return p;
}

/* Whether token i is spelled `text` (an identifier, or one of the
 * punctuators no longer one starts with: ( ) { } [ ] ; ,), read from the
 * file's bytes with its line continuations left out: libclang spells a
 * punctuator by its bytes, so "\\<newline>{" was not a brace. Reading the
 * bytes also makes no string for each token (a CPython-sized file has
 * 46,000). */
static bool token_is(const token_run *t, unsigned i, const char *text)
{
    if (i >= t->n || t->offsets[i] >= t->size)
        return false;
    const char *p = t->text + t->offsets[i], *end = t->text + t->size;
    for (const char *c = text; *c; c++, p++) {
        p = past_continuations(p, end);
        if (p >= end || *p != *c)
            return false;
    }
    p = past_continuations(p, end);
    /* An identifier's bytes may go on into a longer one. */
    return p >= end || !identifier_char(text[strlen(text) - 1]) || !identifier_char(*p);
}

static unsigned token_end(const token_run *t, unsigned i)
{
    unsigned end;
    clang_getExpansionLocation(clang_getRangeEnd(clang_getTokenExtent(t->tu, t->tokens[i])), NULL,
                               NULL, NULL, &end);
    return end;
}

/* Index of the token closing the bracket opened at token i, or t->n. (Brackets
 * in strings and comments are not tokens.) */
static unsigned matching(const token_run *t, unsigned i, const char *open, const char *close)
{
    int depth = 0;
    for (; i < t->n; i++) {
        if (clang_getTokenKind(t->tokens[i]) != CXToken_Punctuation)
            continue;
        if (token_is(t, i, open))
            depth++;
        else if (token_is(t, i, close) && --depth == 0)
            return i;
    }
    return t->n;
}

/* Offset just past the op's definition; 0 if it has no body. Bodies are
 * skipped while parsing, so the end is found in the tokens from `from`: the
 * end of the declarator, whose body is the next braces; or, for an op whose
 * name comes from a macro (OP(add) { ... }, or BINOP(band, a & b) expanding to
 * a whole definition), that macro's invocation: the body is the braces right
 * after it, or, when none follow, the invocation holds it (with a ';' written
 * after it). */
static unsigned op_end(const token_run *t, unsigned from, bool from_macro)
{
    unsigned at = (unsigned)first_at_least(t->offsets, t->n, from), end = 0, i = at;
    if (from_macro && token_is(t, at + 1, "(")) {
        unsigned close = matching(t, at + 1, "(", ")");
        if (close < t->n && !token_is(t, close + 1, "{"))
            end = token_end(t, token_is(t, close + 1, ";") ? close + 1 : close);
        i = close + 1;
    }
    if (!end) {
        unsigned close = matching(t, i, "{", "}");
        end = close < t->n ? token_end(t, close) : 0;
    }
    return end;
}

/* Whether the cursor's name was written through a macro (its spelling is not
 * where it expands). */
static bool named_by_macro(CXCursor c)
{
    CXSourceLocation loc = clang_getCursorLocation(c);
    CXFile ef, sf;
    unsigned eo, so;
    clang_getExpansionLocation(loc, &ef, NULL, NULL, &eo);
    clang_getSpellingLocation(loc, &sf, NULL, NULL, &so);
    return eo != so || !clang_File_isEqual(ef, sf);
}

/* What an op's annotations say: that it is one, and its variant axes as
 * VARIANT() wrote them ("stencilgen.variant:<axis>:<first>:<last>"), in
 * declaration order. */
typedef struct op_marks {
    bool is_op;
    char *axes[GEN_MAX_AXES + 1]; /* one more than allowed, to say there are too many */
    size_t naxes;
} op_marks;

static enum CXChildVisitResult find_annotation(CXCursor c, CXCursor parent, CXClientData data)
{
    (void)parent;
    op_marks *m = data;
    if (clang_getCursorKind(c) != CXCursor_AnnotateAttr)
        return CXChildVisit_Continue;
    CXString s = clang_getCursorSpelling(c);
    const char *text = clang_getCString(s);
    if (!strcmp(text, OP_ANNOTATION))
        m->is_op = true;
    else if (!strncmp(text, VARIANT_ANNOTATION, strlen(VARIANT_ANNOTATION)) &&
             m->naxes <= GEN_MAX_AXES)
        m->axes[m->naxes++] = xstrdup(text + strlen(VARIANT_ANNOTATION));
    clang_disposeString(s);
    return CXChildVisit_Continue;
}

static void marks_free(op_marks *m)
{
    for (size_t i = 0; i < m->naxes; i++)
        free(m->axes[i]);
}

/* Where the k-th VARIANT of the op written from `from` on is (its name's
 * token), for messages; false when the op's axes come from another macro. */
static bool variant_position(const token_run *t, unsigned from, size_t k, unsigned *line,
                             unsigned *col)
{
    for (unsigned i = (unsigned)first_at_least(t->offsets, t->n, from); i < t->n; i++) {
        if (token_is(t, i, "{") || token_is(t, i, ";"))
            return false;
        if (token_is(t, i, "VARIANT") && token_is(t, i + 1, "(") && k-- == 0) {
            clang_getExpansionLocation(clang_getTokenLocation(t->tu, t->tokens[i]), NULL, line,
                                       col, NULL);
            return true;
        }
    }
    return false;
}

static bool is_identifier(const char *s)
{
    if (!*s || (*s >= '0' && *s <= '9'))
        return false;
    for (; *s; s++)
        if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
              (*s >= '0' && *s <= '9')))
            return false;
    return true;
}

/* An axis value as written: a decimal (or 0x) integer literal of 0..255. */
static bool axis_value(const char *text, unsigned *v)
{
    char *end;
    if (!*text || *text == '-' || *text == '+')
        return false;
    unsigned long n = strtoul(text, &end, 0);
    *v = (unsigned)n;
    return !*end && n <= GEN_MAX_AXIS_VALUE;
}

/* The next comma-separated field of a VARIANT's arguments as the
 * preprocessor spelled them ("in, 0, 2"), blanks trimmed; NULL after the last. */
static char *next_field(char **at)
{
    if (!*at)
        return NULL;
    char *f = *at, *comma = strchr(f, ',');
    *at = comma ? comma + 1 : NULL;
    if (comma)
        *comma = '\0';
    while (*f == ' ')
        f++;
    for (char *e = f + strlen(f); e > f && e[-1] == ' ';)
        *--e = '\0';
    return f;
}

/* The axes the annotations declare, checked against docs/ops.md's limits;
 * false (the message printed at `file:line:col`) on the first bad one. */
static bool parse_axes(const op_marks *m, const char *file, const token_run *t, unsigned from,
                       unsigned line, unsigned col, const char *op, gen_op *out)
{
    if (m->naxes > GEN_MAX_AXES) {
        diag_error_at(file, line, col, "op '%s' declares more than %d variant axes", op,
                      GEN_MAX_AXES);
        return false;
    }
    out->axes = xcalloc(m->naxes ? m->naxes : 1, sizeof *out->axes);
    size_t variants = 1;
    for (size_t i = 0; i < m->naxes; i++) {
        unsigned l = line, c = col;
        variant_position(t, from, i, &l, &c);
        char *text = xstrdup(m->axes[i]), *at = text;
        char *name = next_field(&at), *first = next_field(&at), *last = next_field(&at);
        gen_axis a = {xstrdup(name), 0, 0};
        const char *why = NULL;
        if (!last || at)
            why = "it must be written VARIANT(axis, first, last)";
        else if (!is_identifier(name))
            why = "its name must be a C identifier";
        else if (!axis_value(first, &a.first) || !axis_value(last, &a.last))
            why = "its first and last values must be integer literals of 0 to 255";
        else if (a.first > a.last)
            why = "its first value is greater than its last";
        for (size_t k = 0; k < i && !why; k++)
            if (!strcmp(out->axes[k].name, a.name))
                why = "an axis of that name comes before it";
        if (!why && (variants *= a.last - a.first + 1) > GEN_MAX_VARIANTS)
            why = "the op's axes make more than 256 variants";
        if (why) {
            diag_error_at(file, l, c, "op '%s': VARIANT(%s): %s", op, m->axes[i], why);
            free(a.name);
            free(text);
            return false;
        }
        out->axes[out->naxes++] = a;
        free(text);
    }
    return true;
}

static enum CXChildVisitResult visit_top(CXCursor c, CXCursor parent, CXClientData data)
{
    (void)parent;
    visit_ctx *ctx = data;
    /* Bodies are skipped (faster), so definitions look like declarations here;
     * the annotation alone marks an op, and only OP() adds it. */
    if (clang_getCursorKind(c) != CXCursor_FunctionDecl)
        return CXChildVisit_Continue;
    op_marks marks = {0};
    clang_visitChildren(c, find_annotation, &marks);
    if (!marks.is_op) {
        marks_free(&marks);
        return CXChildVisit_Continue;
    }
    /* OP(name) is a macro: report where it is written, not where it expands. */
    CXFile file;
    unsigned line, col, name_at, begin, decl_end;
    clang_getExpansionLocation(clang_getCursorLocation(c), &file, &line, &col, &name_at);
    CXSourceRange extent = clang_getCursorExtent(c);
    clang_getExpansionLocation(clang_getRangeStart(extent), NULL, NULL, NULL, &begin);
    clang_getExpansionLocation(clang_getRangeEnd(extent), NULL, NULL, NULL, &decl_end);
    CXString fname = clang_getFileName(file);
    CXString spelling = clang_getCursorSpelling(c);
    const char *name = clang_getCString(spelling);
    bool prefixed = !strncmp(name, OP_PREFIX, strlen(OP_PREFIX));
    if (prefixed)
        name += strlen(OP_PREFIX);
    const char *fn = clang_getCString(fname);
    if (!clang_File_isEqual(file, ctx->main_file)) {
        /* Its unit would be cut from the header alone, without what the
         * listed file defines before including it. */
        diag_error_at(fn ? fn : "?", line, col,
                      "op '%s' is defined in a header included by '%s'; define ops in the "
                      "files listed under 'ops' (each is cut into one unit per op)",
                      name, ctx->source);
        ctx->rc = SG_EXIT_USAGE;
    } else {
        /* A macro-made name expands at the invocation that made it. */
        bool by_macro = named_by_macro(c);
        if (!ctx->tokens.tokens)
            ctx->tokens = tokens_of(ctx->tu, file);
        gen_op op = {.name = xstrdup(name), .prefixed = prefixed,
                     .source = path_absolute(fn ? fn : ctx->source), .line = line, .col = col,
                     .begin = begin,
                     .end = op_end(&ctx->tokens, by_macro ? name_at : decl_end, by_macro)};
        if (parse_axes(&marks, fn ? fn : ctx->source, &ctx->tokens, begin, line, col, name, &op)) {
            ARRAY_PUSH(ctx->out->items, ctx->out->count, ctx->out->cap, op);
        } else {
            gen_op_free_variant(&op);
            free(op.name);
            free(op.source);
            ctx->rc = SG_EXIT_USAGE;
        }
    }
    marks_free(&marks);
    clang_disposeString(spelling);
    clang_disposeString(fname);
    return ctx->rc ? CXChildVisit_Break : CXChildVisit_Continue;
}

/* Print libclang's errors the way clang would; true if there were any. */
static bool report_errors(CXTranslationUnit tu)
{
    bool any = false;
    unsigned n = clang_getNumDiagnostics(tu);
    for (unsigned i = 0; i < n; i++) {
        CXDiagnostic d = clang_getDiagnostic(tu, i);
        if (clang_getDiagnosticSeverity(d) >= CXDiagnostic_Error) {
            CXString s = clang_formatDiagnostic(d, CXDiagnostic_DisplaySourceLocation |
                                                       CXDiagnostic_DisplayColumn |
                                                       CXDiagnostic_DisplayOption);
            fprintf(stderr, "%s\n", clang_getCString(s));
            clang_disposeString(s);
            any = true;
        }
        clang_disposeDiagnostic(d);
    }
    return any;
}

static void add_inclusion(CXFile file, CXSourceLocation *stack, unsigned depth, CXClientData data)
{
    (void)stack;
    (void)depth;
    gen_pathlist *deps = data;
    CXString name = clang_getFileName(file);
    const char *s = clang_getCString(name);
    if (s)
        ARRAY_PUSH(deps->items, deps->count, deps->cap, path_absolute(s));
    clang_disposeString(name);
}

int discover_ops(const char *source, const char *const *args, size_t nargs, gen_oplist *out,
                 gen_pathlist *deps)
{
    /* libclang does not find its own headers (stdint.h, stddef.h) when it
     * is loaded from a path clang's layout does not start at, as Debian's
     * is: without them a target whose system headers are not this machine's
     * (-nostdlibinc) has none. */
    const char **all = xmalloc((nargs + 2) * sizeof *all);
    all[0] = "-resource-dir";
    all[1] = SG_CLANG_RESOURCE_DIR;
    memcpy(all + 2, args, nargs * sizeof *args);
    CXIndex index = clang_createIndex(0, 0);
    CXTranslationUnit tu = NULL;
    enum CXErrorCode err = clang_parseTranslationUnit2(
        index, source, all, (int)nargs + 2, NULL, 0,
        CXTranslationUnit_SkipFunctionBodies | CXTranslationUnit_KeepGoing, &tu);
    free(all);
    bool ok = err == CXError_Success && tu;
    if (!ok)
        fprintf(stderr, "%s: error: libclang could not parse this file (error %d)\n", source,
                (int)err);
    else if (report_errors(tu))
        ok = false;
    int rc = ok ? SG_EXIT_OK : SG_EXIT_TOOLCHAIN;
    if (ok) {
        visit_ctx ctx = {source, clang_getFile(tu, source), out, tu, {0}, SG_EXIT_OK};
        clang_visitChildren(clang_getTranslationUnitCursor(tu), visit_top, &ctx);
        if (ctx.tokens.tokens)
            tokens_free(&ctx.tokens);
        rc = ctx.rc;
        if (deps && rc == SG_EXIT_OK)
            clang_getInclusions(tu, add_inclusion, deps);
    }
    if (tu)
        clang_disposeTranslationUnit(tu);
    clang_disposeIndex(index);
    return rc;
}
