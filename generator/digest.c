/* digest.c - see digest.h. */
#include "digest.h"

#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* The one registry here: SHA-256 as OpenSSL fetches it, once per process
 * (an implicit fetch at every digest_begin costs three times the hashing
 * of a short input). */
static EVP_MD *sha256;
static pthread_once_t sha256_once = PTHREAD_ONCE_INIT;

static void fetch_sha256(void)
{
    sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
}

/* libcrypto fails only without memory or without a SHA-256 provider (a
 * broken OpenSSL configuration): neither leaves anything to do. */
static void crypto_failed(const char *what)
{
    fprintf(stderr, "stencilgen: error: OpenSSL's libcrypto failed to %s SHA-256 (out of "
            "memory, or no provider offers SHA-256: see OPENSSL_CONF)\n", what);
    exit(3); /* as out of memory (util.c) */
}

void digest_begin(digest_ctx *c)
{
    pthread_once(&sha256_once, fetch_sha256);
    if (!sha256)
        crypto_failed("fetch");
    c->md = EVP_MD_CTX_new();
    if (!c->md)
        crypto_failed("allocate");
    if (!EVP_DigestInit_ex2(c->md, sha256, NULL))
        crypto_failed("start");
}

void digest_add(digest_ctx *c, const void *data, size_t size)
{
    if (size && !EVP_DigestUpdate(c->md, data, size))
        crypto_failed("update");
}

void digest_add_u64(digest_ctx *c, uint64_t v)
{
    uint8_t le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (uint8_t)(v >> 8 * i);
    digest_add(c, le, sizeof le);
}

void digest_add_field(digest_ctx *c, const void *data, size_t size)
{
    digest_add_u64(c, size);
    digest_add(c, data, size);
}

void digest_add_str(digest_ctx *c, const char *s)
{
    if (s)
        digest_add_field(c, s, strlen(s) + 1);
    else
        digest_add_field(c, "", 0);
}

void digest_add_digest(digest_ctx *c, const digest *d)
{
    digest_add(c, d->b, sizeof d->b);
}

digest digest_end(digest_ctx *c)
{
    digest d;
    unsigned n = 0;
    if (!EVP_DigestFinal_ex(c->md, d.b, &n) || n != sizeof d.b)
        crypto_failed("finish");
    EVP_MD_CTX_free(c->md);
    c->md = NULL;
    return d;
}

digest digest_of(const void *data, size_t size)
{
    digest_ctx c;
    digest_begin(&c);
    digest_add(&c, data, size);
    return digest_end(&c);
}

bool digest_equal(const digest *a, const digest *b)
{
    return !memcmp(a->b, b->b, sizeof a->b);
}

void digest_hex(const digest *d, char out[DIGEST_HEX + 1])
{
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < DIGEST_SIZE; i++) {
        out[2 * i] = hex[d->b[i] >> 4];
        out[2 * i + 1] = hex[d->b[i] & 15];
    }
    out[DIGEST_HEX] = '\0';
}

bool digest_from_hex(const char *hex, digest *d)
{
    for (size_t i = 0; i < DIGEST_SIZE; i++) {
        int hi = hex_digit(hex[2 * i]), lo = hi < 0 ? -1 : hex_digit(hex[2 * i + 1]);
        if (lo < 0)
            return false;
        d->b[i] = (uint8_t)(hi << 4 | lo);
    }
    return true;
}

uint64_t digest_word(const digest *d)
{
    uint64_t w;
    memcpy(&w, d->b, sizeof w);
    return w;
}
