/* variant.h - an op with variant axes becomes one op per variant (docs/ops.md,
 * "Variants"): every combination of its axes' values, axes in declaration
 * order, the last varying fastest. Each variant is then an op like any other
 * (its own unit, key, cache entry and stencil), named `<op>__<axis><value>...`
 * in C and `<op>[<axis>=<value>,...]` for people. */
#ifndef STENCILGEN_VARIANT_H
#define STENCILGEN_VARIANT_H

#include <stddef.h>

#include "discover.h"

/* Replaces each op of ops[from..] that has axes by its variants, in place. */
void variant_expand(gen_oplist *ops, size_t from);
/* How many variants an op with these axes has. */
size_t variant_count(const gen_axis *axes, size_t naxes);

#include <stdbool.h>

#include "stencil.h"

/* Folding (docs/build.md, "Variants"): a variant whose stencil is byte for
 * byte another's of the same op (code, data and holes; the listing's
 * comments aside) shares that stencil. Fills twin[i] (ops->count of them)
 * with the op whose stencil op i uses: i itself, or an earlier variant of
 * its op. Returns how many ops were folded. */
size_t variant_fold(const gen_oplist *ops, const gen_stencil *stencils, size_t *twin);
/* Whether two stencils are the same stencil (folding's test). */
bool variant_same_stencil(const gen_stencil *a, const gen_stencil *b);

#endif
