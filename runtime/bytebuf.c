/* bytebuf.c - a growable byte buffer for the formats the runtime writes
 * (.eh_frame, in-memory ELF, jitdump). A failed allocation poisons the buffer:
 * writers check `failed` once at the end instead of after every field. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void buf_put(sr_buf *b, const void *src, size_t n)
{
    if (b->failed || !n)
        return;
    if (n > SIZE_MAX / 2 - b->len) {
        b->failed = true;
        return;
    }
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n)
            cap *= 2;
        uint8_t *np = realloc(b->p, cap);
        if (!np) {
            b->failed = true;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->len, src, n);
    b->len += n;
}

void buf_u8(sr_buf *b, uint8_t v) { buf_put(b, &v, 1); }
void buf_u32(sr_buf *b, uint32_t v) { buf_put(b, &v, 4); }
void buf_u64(sr_buf *b, uint64_t v) { buf_put(b, &v, 8); }

void buf_uleb(sr_buf *b, uint64_t v)
{
    do {
        uint8_t byte = v & 0x7f;
        v >>= 7;
        buf_u8(b, byte | (v ? 0x80 : 0));
    } while (v);
}

void buf_sleb(sr_buf *b, int64_t v)
{
    for (;;) {
        uint8_t byte = v & 0x7f;
        v >>= 7;
        bool done = (v == 0 && !(byte & 0x40)) || (v == -1 && (byte & 0x40));
        buf_u8(b, byte | (done ? 0 : 0x80));
        if (done)
            return;
    }
}

void buf_zeros(sr_buf *b, size_t n)
{
    static const uint8_t zeros[8];
    for (; n > sizeof zeros; n -= sizeof zeros)
        buf_put(b, zeros, sizeof zeros);
    buf_put(b, zeros, n);
}

void buf_patch_u32(sr_buf *b, size_t at, uint32_t v)
{
    if (!b->failed)
        memcpy(b->p + at, &v, 4);
}
