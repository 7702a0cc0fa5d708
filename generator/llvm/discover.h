/* discover.h - find the ops in the op sources with libclang (no text scraping). */
#ifndef STENCILGEN_DISCOVER_H
#define STENCILGEN_DISCOVER_H

#include <stdbool.h>
#include <stddef.h>

typedef struct gen_op {
    char *name;   /* "add" for OP(add) */
    bool prefixed; /* its function is op_<name> (else <name>): what a batch's entry aliases */
    char *source; /* absolute path of the op source */
    unsigned line, col;
    unsigned begin, end; /* byte range of the whole definition, OP( to its closing brace */
} gen_op;

/* Files a parse read (the source and everything it included), absolute. */
typedef struct gen_pathlist {
    char **items;
    size_t count, cap;
} gen_pathlist;

typedef struct gen_oplist {
    gen_op *items;
    size_t count, cap;
} gen_oplist;

/* Parse `source` with the given compiler arguments (the template is force-included
 * with STENCILGEN_DISCOVER defined) and append every function the template marked
 * as an op, in source order. Returns an exit code: 3 when the source does not
 * parse (errors printed clang-style), 2 when an op is defined in a header rather
 * than in `source` itself. */
int discover_ops(const char *source, const char *const *args, size_t nargs, gen_oplist *out,
                 gen_pathlist *deps);

void oplist_free(gen_oplist *l);
void pathlist_free(gen_pathlist *l);

#endif
