/* ehframe.c - a synthetic .eh_frame: one CIE carrying the shim's initial
 * instructions and factors, then one FDE per code range. Pointers are absolute
 * (DW_EH_PE_absptr) so the same bytes serve libgcc and GDB's in-memory ELF. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* libgcc's registration API (unwind-dw2-fde.h); not in a public header. */
extern void __register_frame(void *begin);
extern void __deregister_frame(void *begin);

enum { DW_EH_PE_absptr = 0x00, DW_CFA_nop = 0x00 };

typedef struct buf {
    uint8_t *p;
    size_t len, cap;
    bool failed;
} buf;

static void put(buf *b, const void *src, size_t n)
{
    if (b->failed)
        return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
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

static void put_u8(buf *b, uint8_t v) { put(b, &v, 1); }
static void put_u32(buf *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(buf *b, uint64_t v) { put(b, &v, 8); }

static void put_uleb(buf *b, uint64_t v)
{
    do {
        uint8_t byte = v & 0x7f;
        v >>= 7;
        put_u8(b, byte | (v ? 0x80 : 0));
    } while (v);
}

static void put_sleb(buf *b, int64_t v)
{
    for (;;) {
        uint8_t byte = v & 0x7f;
        v >>= 7;
        bool done = (v == 0 && !(byte & 0x40)) || (v == -1 && (byte & 0x40));
        put_u8(b, byte | (done ? 0 : 0x80));
        if (done)
            return;
    }
}

/* Pad the entry that started at `start` (its length field) to 8 bytes with
 * DW_CFA_nop and fill in its length. */
static void end_entry(buf *b, size_t start)
{
    while ((b->len - start) % 8)
        put_u8(b, DW_CFA_nop);
    if (!b->failed) {
        uint32_t len = (uint32_t)(b->len - start - 4);
        memcpy(b->p + start, &len, 4);
    }
}

uint8_t *ehframe_build(const sr_stencil_set *set, const sr_fde *fdes, size_t n, size_t *size)
{
    buf b = {0};
    size_t cie = b.len;
    put_u32(&b, 0); /* length, filled in by end_entry */
    put_u32(&b, 0); /* CIE id */
    put_u8(&b, 1);  /* version */
    put(&b, "zR", 3);
    put_uleb(&b, set->code_align);
    put_sleb(&b, set->data_align);
    put_u8(&b, (uint8_t)set->ra_column);
    put_uleb(&b, 1); /* augmentation data: the FDE pointer encoding */
    put_u8(&b, DW_EH_PE_absptr);
    put(&b, set->cie_insns, set->cie_insns_len);
    end_entry(&b, cie);
    for (size_t i = 0; i < n; i++) {
        size_t fde = b.len;
        put_u32(&b, 0);
        put_u32(&b, (uint32_t)(b.len - cie)); /* CIE pointer: back to the CIE */
        put_u64(&b, fdes[i].pc);
        put_u64(&b, fdes[i].size);
        put_uleb(&b, 0); /* no augmentation data */
        put(&b, fdes[i].insns, fdes[i].insns_len);
        end_entry(&b, fde);
    }
    put_u32(&b, 0); /* terminator: libgcc walks until a zero length */
    if (b.failed) {
        free(b.p);
        return NULL;
    }
    *size = b.len;
    return b.p;
}

void ehframe_register(uint8_t *eh)
{
    __register_frame(eh);
}

void ehframe_deregister(uint8_t *eh)
{
    __deregister_frame(eh);
}
