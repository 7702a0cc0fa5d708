/* cache.h - the content-addressed cache behind incremental builds.
 *
 * A result (an op's object and its checked stencil, an op source's discovered
 * ops) is stored under a key that hashes everything it was made from: the
 * exact arguments, the compiler's identity, and the contents of every file the
 * previous run found it depended on. A "record" per slot and argument digest
 * (e.g. "x86_64-unknown-linux-gnu/op_add.o" built with these flags from this
 * unit) remembers that file list, so the next run recomputes the key from the
 * files' current contents without running anything. A record also names the
 * set of paths the work looked for and did not find (an "absent" blob, stored
 * by incremental.c, which checks that they are still missing before it trusts
 * the key); its id is part of the key. A slot keeps its few most
 * recent records, so two checkouts sharing one cache directory (worktrees, CI
 * jobs) do not evict each other.
 *
 * Sharing is safe: records live in one index, appended to or merged under a
 * lock when a run closes the cache (a lost record is a miss, never a wrong
 * key); entries are
 * written to a temporary and renamed, and carry a checksum, so a corrupt or
 * truncated one is a miss, never trusted; and a result is only recorded when
 * none of its inputs changed after the work that made it started.
 *
 * Source positions: code can compile line numbers and file names in (__LINE__,
 * __FILE__, __builtin_LINE() ...). When the unit or a file it read mentions
 * one of those, the key also hashes the unit's `position` (its file name and
 * line numbers), so moving such code rebuilds it; other code ignores where it
 * sits, so adding lines above an op does not rebuild it. */
#ifndef STENCILGEN_CACHE_H
#define STENCILGEN_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "digest.h"

/* Keys, and what they are made of, are SHA-256 digests (digest.h). */
typedef digest gen_key;

typedef struct gen_cache gen_cache;

/* NULL only on out-of-memory; a cache whose directory cannot be created simply misses. */
gen_cache *cache_open(const char *dir);
/* Adds this run's records to the index on disk (under a lock: appended to the
 * index it loaded, or merged with what another run wrote since) and frees. */
void cache_close(gen_cache *c);

/* Digest of an argument vector; `skip_next` names options whose following
 * argument (an output path) must not count. */
gen_key cache_hash_args(char *const *argv, const char *const *skip_next);
/* The same, after the digest `from` of a shared first part of many commands
 * (hashed once), over at most n arguments (stopping at NULL). */
gen_key cache_hash_args_from(const gen_key *from, char *const *argv, size_t n,
                             const char *const *skip_next);

/* The key of `args` and the contents of the files `slot`'s record lists, if
 * one was made with the same arguments and every file it lists still exists;
 * *absent: the id of the set of paths it stored with the record;
 * *positional: whether one of the files mentions a source position. What a
 * key is made of is incremental.c's business: this is the store's part. */
bool cache_key_for(gen_cache *c, const char *slot, const gen_key *args, gen_key *key,
                   gen_key *absent, bool *positional);
/* Record `slot` (its files, and the id of a set of paths `absent`) and return
 * the key its files hash to now, as cache_key_for; false, recording nothing,
 * when a file is missing, or changed at or after `since` (the time the work
 * that read them started) or after this run hashed it: the result may not be
 * of the bytes the key would name. */
bool cache_record(gen_cache *c, const char *slot, const gen_key *args, char *const *deps, size_t n,
                  const gen_key *absent, const struct timespec *since, gen_key *key,
                  bool *positional);

/* Stored blobs, verified on read. `kind` is a file suffix such as "o" or "d". */
bool cache_get(gen_cache *c, const gen_key *key, const char *kind, uint8_t **data, size_t *size);
bool cache_put(gen_cache *c, const gen_key *key, const char *kind, const void *data, size_t size);

/* The bound on the blobs' bytes: past it, the run that closes the cache
 * removes the least recently used (never its own) down to 8/10 of it. 0: no
 * bound. Default CACHE_DEFAULT_MAX_SIZE (--cache-max-size). */
#define CACHE_DEFAULT_MAX_SIZE (1024ull << 20)
void cache_set_max_size(gen_cache *c, uint64_t bytes);
/* "500M", "2G", "1048576", "0": bytes, K, M and G binary; false for anything else. */
bool cache_parse_size(const char *text, uint64_t *bytes);

/* What DIR holds (`stencilgen cache --stats`); false when DIR is no directory. */
typedef struct gen_cache_stats {
    size_t blobs;
    uint64_t blob_bytes, index_bytes;
    struct timespec oldest, newest; /* the blobs' dates: when each was last used */
} gen_cache_stats;
bool cache_stats(const char *dir, gen_cache_stats *s);
/* Remove every blob and the record index (`stencilgen cache --clean`), under
 * the lock runs take to close the cache; *removed: the blob bytes removed. */
bool cache_clean(const char *dir, uint64_t *removed);

/* A timestamp comparable with file modification times (which the kernel takes
 * from its coarse clock): any write after this call has an mtime >= it. */
void cache_now(struct timespec *ts);

#endif
