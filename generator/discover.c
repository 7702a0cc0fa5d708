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
} visit_ctx;

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
    unsigned line, col;
    clang_getExpansionLocation(clang_getCursorLocation(c), &file, &line, &col, NULL);
    CXString fname = clang_getFileName(file);
    CXString spelling = clang_getCursorSpelling(c);
    const char *name = clang_getCString(spelling);
    if (!strncmp(name, OP_PREFIX, strlen(OP_PREFIX)))
        name += strlen(OP_PREFIX);
    const char *fn = clang_getCString(fname);
    sg_op op = {xstrdup(name), path_absolute(fn ? fn : ctx->source), line, col};
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

bool discover_ops(const char *source, const char *const *args, size_t nargs, sg_oplist *out)
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
        visit_ctx ctx = {source, out};
        clang_visitChildren(clang_getTranslationUnitCursor(tu), visit_top, &ctx);
    }
    if (tu)
        clang_disposeTranslationUnit(tu);
    clang_disposeIndex(index);
    return ok;
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
