/* discover.h - find the ops in the op sources with libclang (no text scraping). */
#ifndef STENCILGEN_DISCOVER_H
#define STENCILGEN_DISCOVER_H

#include <stdbool.h>
#include <stddef.h>

/* Variant limits (docs/ops.md, "Variants"). */
#define GEN_MAX_AXES 4
#define GEN_MAX_AXIS_VALUE 255
#define GEN_MAX_VARIANTS 256

/* One variant axis of an op: OP(add, VARIANT(in, 0, 2)) has {"in", 0, 2}. */
typedef struct gen_axis {
    char *name;
    unsigned first, last;
} gen_axis;

typedef struct gen_op {
    char *name;   /* "add" for OP(add); a variant's C name, "add__in1_out2" (variant.h) */
    bool prefixed; /* its function is op_<name> (else <name>): what a batch's entry aliases */
    char *source; /* absolute path of the op source */
    unsigned line, col;
    unsigned begin, end; /* byte range of the whole definition, OP( to its closing brace */
    /* Its variant axes, in declaration order (none: an op without variants).
     * Discovery fills them; variant_expand makes the op one op per variant,
     * each with its own copy of the axes and the fields below. */
    gen_axis *axes;
    size_t naxes;
    unsigned values[GEN_MAX_AXES]; /* a variant's value on each axis */
    char *base;    /* a variant's op name as written ("add"), else NULL */
    char *display; /* a variant's display name ("add[in=1,out=2]"), else NULL */
    size_t variant; /* a variant's number among its op's (the last axis varies fastest) */
} gen_op;

/* The name people read (errors, GDB, perf, the registry): the op's, or its
 * variant's display name. */
static inline const char *op_display(const gen_op *op)
{
    return op->display ? op->display : op->name;
}

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
/* Frees an op's axes and variant names (not its name or source). */
void gen_op_free_variant(gen_op *op);
void pathlist_free(gen_pathlist *l);

#endif
