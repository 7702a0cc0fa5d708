/* opunit.h - the translation unit each op compiles from.
 *
 * An op's unit is its source file without the other ops' definitions: the text
 * outside every op (declarations, helpers the ops share) and the op itself, each
 * segment preceded by a #line directive naming the real file and line, so
 * diagnostics point at the source (blank segments are left out: they hold no
 * token, and the next #line says where the next one starts). The cache key
 * hashes the segments without those directives: editing one op (even moving
 * the others down, or adding one) changes only its own key, so only it
 * recompiles. Code that compiles its position in (__LINE__, __FILE__ ...) is
 * the exception: `position` hashes the segments' line numbers, and the cache
 * counts it whenever the unit or a header it reads mentions such a macro (see
 * cache.h). Keys are made a file at a time (op_keys_for_file), in time linear
 * in the file, however many ops it holds.
 */
#ifndef STENCILGEN_OPUNIT_H
#define STENCILGEN_OPUNIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "discover.h"
#include "digest.h"
#include "util.h"

typedef struct op_unit {
    strbuf unit; /* what clang compiles */
} op_unit;

/* What an op's cache key takes from its unit. */
typedef struct op_key {
    digest text;            /* the unit's segments, without #line */
    digest position;        /* the line each segment starts at (not the file name) */
    bool mentions_position; /* the unit mentions __LINE__ or the like */
} op_key;

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
 * discovered op (those of one file in source order). */
op_unit op_unit_for(op_sources *sources, const gen_oplist *ops, const gen_op *op);
/* A batched unit: the ops `members` (n >= 1, all of one file, in source
 * order) in one unit, the file's other ops cut out as above, each member
 * named as an entry at the end (_JIT_ENTRY_<name>, an alias the unit makes
 * of the op's function, so no template support is needed; compiled with
 * -DSTENCILGEN_BATCH). */
op_unit op_batch_unit_for(op_sources *sources, const gen_oplist *ops,
                          const gen_op *const *members, size_t n);
/* keys[i]: the key of ops[i]'s own unit; ops[0..n) are every op of one file,
 * in source order (a file that cannot be read: keys its compile will fail).
 * Adds the bytes of source it hashed to *hashed (-v reports them: about
 * twice the file, however many ops it holds). */
void op_keys_for_file(op_sources *sources, const gen_op *ops, size_t n, op_key *keys,
                      size_t *hashed);
void op_sources_free(op_sources *sources);

/* Whether `text` mentions a macro or builtin whose value is a source position
 * (__LINE__, __FILE__, __builtin_LINE ...). A mention anywhere counts, even in
 * a comment: a false positive costs a rebuild, a false negative a stale object. */
bool text_mentions_position(const char *text, size_t size);

#endif
