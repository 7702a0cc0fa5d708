/* digest.h - SHA-256 digests (OpenSSL's libcrypto, which uses the CPU's SHA
 * instructions where there are some) of everything a cache key, a file's
 * identity, the no-op memo or a header's provenance is made of. A cache
 * directory may be shared between checkouts, users and CI: a key must not be
 * reachable by crafted inputs, so nothing that feeds one is a weaker hash.
 * (hash64 in util.h remains for in-memory indexes, where a collision costs a
 * compare.) */
#ifndef STENCILGEN_DIGEST_H
#define STENCILGEN_DIGEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DIGEST_SIZE 32
#define DIGEST_HEX (2 * DIGEST_SIZE)

typedef struct digest {
    uint8_t b[DIGEST_SIZE];
} digest;

/* A digest being made: digest_begin, any number of adds, digest_end (which
 * frees it). Each context belongs to one thread. */
typedef struct digest_ctx {
    struct evp_md_ctx_st *md;
} digest_ctx;

void digest_begin(digest_ctx *c);
/* Bytes as they are: consecutive adds hash as one run of bytes. */
void digest_add(digest_ctx *c, const void *data, size_t size);
/* One field: its length, then its bytes, so that no two fields run together. */
void digest_add_field(digest_ctx *c, const void *data, size_t size);
/* A string as a field; NULL and "" differ. */
void digest_add_str(digest_ctx *c, const char *s);
void digest_add_u64(digest_ctx *c, uint64_t v);
void digest_add_digest(digest_ctx *c, const digest *d);
digest digest_end(digest_ctx *c);

digest digest_of(const void *data, size_t size);
bool digest_equal(const digest *a, const digest *b);
/* Lowercase hex, DIGEST_HEX digits and a NUL. */
void digest_hex(const digest *d, char out[DIGEST_HEX + 1]);
/* DIGEST_HEX lowercase hex digits at `hex` (the generator writes lowercase). */
bool digest_from_hex(const char *hex, digest *d);
/* The first 8 bytes, for an in-memory index's hash. */
uint64_t digest_word(const digest *d);

#endif
