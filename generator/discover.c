/* discover.c - ops are functions carrying the "stencilgen.op" annotation that
 * the template adds in discovery mode; libclang finds them with their locations. */
#include "discover.h"

#include <clang-c/Index.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define OP_ANNOTATION "stencilgen.op"
#define OP_PREFIX "op_"

typedef struct visit_ctx {
    const char *source;
    sg_oplist *out;
    CXTranslationUnit tu;
} visit_ctx;

/* Offset just past the closing brace of the body that follows `from` in `file`.
 * Bodies are skipped while parsing, so the cursor's extent stops at the
 * declarator; tokens find the matching brace (braces in strings and comments
 * are not tokens). 0 if there is no body. */
static unsigned body_end(CXTranslationUnit tu, CXFile file, unsigned from)
{
    size_t size = 0;
    clang_getFileContents(tu, file, &size);
    CXSourceRange range = clang_getRange(clang_getLocationForOffset(tu, file, from),
                                         clang_getLocationForOffset(tu, file, (unsigned)size));
    CXToken *tokens = NULL;
    unsigned n = 0, end = 0;
    clang_tokenize(tu, range, &tokens, &n);
    int depth = 0;
    for (unsigned i = 0; i < n && !end; i++) {
        if (clang_getTokenKind(tokens[i]) != CXToken_Punctuation)
            continue;
        CXString s = clang_getTokenSpelling(tu, tokens[i]);
        const char *p = clang_getCString(s);
        if (!strcmp(p, "{"))
            depth++;
        else if (!strcmp(p, "}") && --depth == 0)
            clang_getExpansionLocation(clang_getRangeEnd(clang_getTokenExtent(tu, tokens[i])),
                                       NULL, NULL, NULL, &end);
        clang_disposeString(s);
    }
    clang_disposeTokens(tu, tokens, n);
    return end;
}

static enum CXChildVisitResult find_annotation(CXCursor c, CXCursor parent, CXClientData data)
{
    (void)parent;
    if (clang_getCursorKind(c) != CXCursor_AnnotateAttr)
        return CXChildVisit_Continue;
    CXString s = clang_getCursorSpelling(c);
    if (!strcmp(clang_getCString(s), OP_ANNOTATION))
        *(bool *)data = true;
    clang_disposeString(s);
    return CXChildVisit_Continue;
}

static enum CXChildVisitResult visit_top(CXCursor c, CXCursor parent, CXClientData data)
{
    (void)parent;
    visit_ctx *ctx = data;
    /* Bodies are skipped (faster), so definitions look like declarations here;
     * the annotation alone marks an op, and only OP() adds it. */
    if (clang_getCursorKind(c) != CXCursor_FunctionDecl)
        return CXChildVisit_Continue;
    bool is_op = false;
    clang_visitChildren(c, find_annotation, &is_op);
    if (!is_op)
        return CXChildVisit_Continue;
    /* OP(name) is a macro: report where it is written, not where it expands. */
    CXFile file;
    unsigned line, col, begin, decl_end;
    clang_getExpansionLocation(clang_getCursorLocation(c), &file, &line, &col, NULL);
    CXSourceRange extent = clang_getCursorExtent(c);
    clang_getExpansionLocation(clang_getRangeStart(extent), NULL, NULL, NULL, &begin);
    clang_getExpansionLocation(clang_getRangeEnd(extent), NULL, NULL, NULL, &decl_end);
    CXString fname = clang_getFileName(file);
    CXString spelling = clang_getCursorSpelling(c);
    const char *name = clang_getCString(spelling);
    if (!strncmp(name, OP_PREFIX, strlen(OP_PREFIX)))
        name += strlen(OP_PREFIX);
    const char *fn = clang_getCString(fname);
    sg_op op = {xstrdup(name), path_absolute(fn ? fn : ctx->source), line, col, begin,
                body_end(ctx->tu, file, decl_end)};
    ARRAY_PUSH(ctx->out->items, ctx->out->count, ctx->out->cap, op);
    clang_disposeString(spelling);
    clang_disposeString(fname);
    return CXChildVisit_Continue;
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
    sg_pathlist *deps = data;
    CXString name = clang_getFileName(file);
    const char *s = clang_getCString(name);
    if (s)
        ARRAY_PUSH(deps->items, deps->count, deps->cap, path_absolute(s));
    clang_disposeString(name);
}

bool discover_ops(const char *source, const char *const *args, size_t nargs, sg_oplist *out,
                  sg_pathlist *deps)
{
    CXIndex index = clang_createIndex(0, 0);
    CXTranslationUnit tu = NULL;
    enum CXErrorCode rc = clang_parseTranslationUnit2(
        index, source, args, (int)nargs, NULL, 0,
        CXTranslationUnit_SkipFunctionBodies | CXTranslationUnit_KeepGoing, &tu);
    bool ok = rc == CXError_Success && tu;
    if (!ok)
        fprintf(stderr, "%s: error: libclang could not parse this file (error %d)\n", source,
                (int)rc);
    else if (report_errors(tu))
        ok = false;
    if (ok) {
        visit_ctx ctx = {source, out, tu};
        clang_visitChildren(clang_getTranslationUnitCursor(tu), visit_top, &ctx);
        if (deps)
            clang_getInclusions(tu, add_inclusion, deps);
    }
    if (tu)
        clang_disposeTranslationUnit(tu);
    clang_disposeIndex(index);
    return ok;
}

void pathlist_free(sg_pathlist *l)
{
    for (size_t i = 0; i < l->count; i++)
        free(l->items[i]);
    free(l->items);
    *l = (sg_pathlist){0};
}

void oplist_free(sg_oplist *l)
{
    for (size_t i = 0; i < l->count; i++) {
        free(l->items[i].name);
        free(l->items[i].source);
    }
    free(l->items);
    *l = (sg_oplist){0};
}
