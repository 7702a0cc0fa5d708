/* cache.h - the content-addressed cache behind incremental builds.
 *
 * A result (an op's object and its checked stencil, an op source's discovered
 * ops) is stored under a key that hashes everything it was made from: the
 * exact arguments, the compiler's identity, and the contents of every file the
 * previous run found it depended on. A "record" per slot (e.g. "x86_64-unknown-linux-gnu/op_add.o")
 * remembers that file list, so the next run recomputes the key from the files'
 * current contents without running anything. Records live in one index file,
 * read when the cache is opened and written when it is closed. Entries carry a checksum: a
 * corrupt or truncated one is a miss, never trusted. */
#ifndef STENCILGEN_CACHE_H
#define STENCILGEN_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sg_key {
    uint64_t h[2];
} sg_key;

typedef struct sg_cache sg_cache;

/* NULL only on out-of-memory; a cache whose directory cannot be created simply misses. */
sg_cache *cache_open(const char *dir);
void cache_close(sg_cache *c);

/* Hash of an argument vector; `skip_next` names options whose following argument
 * (an output path) must not count. */
uint64_t cache_hash_args(char *const *argv, const char *const *skip_next);

/* The key for `slot` from its record, if the record exists, was made with the
 * same arguments, and every file it lists still exists. */
bool cache_key_for(sg_cache *c, const char *slot, uint64_t args, sg_key *key);
/* Write the record for `slot` and return the key its files hash to now. */
bool cache_record(sg_cache *c, const char *slot, uint64_t args, char *const *deps, size_t n,
                  sg_key *key);

/* Stored blobs, verified on read. `kind` is a file suffix such as "o" or "d". */
bool cache_get(sg_cache *c, const sg_key *key, const char *kind, uint8_t **data, size_t *size);
bool cache_put(sg_cache *c, const sg_key *key, const char *kind, const void *data, size_t size);
/* Path of a stored blob (valid until the next call). */
const char *cache_path(sg_cache *c, const sg_key *key, const char *kind);

#endif
