/* opunit.h - the translation unit each op compiles from.
 *
 * An op's unit is its source file without the other ops' definitions: the text
 * outside every op (declarations, helpers the ops share) and the op itself, each
 * segment preceded by a #line directive naming the real file and line, so
 * diagnostics point at the source. The cache key hashes the segments without
 * those directives: editing one op (even moving the others down) changes only
 * its own key, so only it recompiles. Code that compiles its position in
 * (__LINE__, __FILE__ ...) is the exception: `position` hashes the unit's line
 * numbers, and the cache counts it whenever the unit or a header it reads
 * mentions such a macro (see cache.h).
 */
#ifndef STENCILGEN_OPUNIT_H
#define STENCILGEN_OPUNIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "discover.h"
#include "util.h"

typedef struct op_unit {
    strbuf unit; /* what clang compiles */
    strbuf key;  /* what the cache key hashes */
    uint64_t position; /* the line each segment starts at (not the file name) */
} op_unit;

/* Each op source read once per run, so an op's cache key and the unit it
 * compiles come from the same bytes. */
typedef struct op_source {
    const char *path;
    uint8_t *text; /* NULL when it cannot be read */
    size_t size;
    /* Offsets of every '\n', ascending: the line numbers of the units' #lines,
     * found once per file, not counted from the top for each of its ops. */
    size_t *newlines;
    size_t nnewlines;
} op_source;

typedef struct op_sources {
    op_source *items;
    size_t count, cap;
} op_sources;

/* The unit of `op`, its source read through `sources` (a source that cannot
 * be read gives a unit that says so when compiled); `ops` holds every
 * discovered op (those of one file in source order). The unit itself is only
 * made when want_unit (a cache hit needs just the key). */
op_unit op_unit_for(op_sources *sources, const gen_oplist *ops, const gen_op *op, bool want_unit);
/* A batched unit: the ops `members` (n >= 1, all of one file, in source
 * order) in one unit, the file's other ops cut out as above, each member
 * named as an entry at the end (_JIT_ENTRY_<name>, an alias the unit makes
 * of the op's function, so no template support is needed; compiled with
 * -DSTENCILGEN_BATCH). The key hashes the same text without #line. */
op_unit op_batch_unit_for(op_sources *sources, const gen_oplist *ops,
                          const gen_op *const *members, size_t n, bool want_unit);
void op_sources_free(op_sources *sources);

/* Whether `text` mentions a macro or builtin whose value is a source position
 * (__LINE__, __FILE__, __builtin_LINE ...). A mention anywhere counts, even in
 * a comment: a false positive costs a rebuild, a false negative a stale object. */
bool text_mentions_position(const char *text, size_t size);

#endif
