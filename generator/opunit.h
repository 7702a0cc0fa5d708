/* opunit.h - the translation unit each op compiles from.
 *
 * An op's unit is its source file without the other ops' definitions: the text
 * outside every op (declarations, helpers the ops share) and the op itself, each
 * segment preceded by a #line directive naming the real file and line, so
 * diagnostics point at the source. The cache key hashes the segments without
 * those directives: editing one op (even moving the others down) changes only
 * its own key, so only it recompiles. (An op whose code uses __LINE__ would
 * keep a stale value when text above it moves; no cached object knows lines.)
 */
#ifndef STENCILGEN_OPUNIT_H
#define STENCILGEN_OPUNIT_H

#include <stdbool.h>
#include <stddef.h>

#include "discover.h"
#include "util.h"

typedef struct op_unit {
    strbuf unit; /* what clang compiles */
    strbuf key;  /* what the cache key hashes */
} op_unit;

/* `text` is the contents of op->source; `ops` holds every discovered op (those
 * of one file in source order). The unit itself is only made when want_unit
 * (a cache hit needs just the key). */
op_unit op_translation_unit(const sg_oplist *ops, const sg_op *op, const char *text,
                           size_t size, bool want_unit);

#endif
