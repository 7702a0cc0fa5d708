/* ehframe.c - a synthetic .eh_frame: one CIE carrying the shim's initial
 * instructions and factors, then one FDE per code range. The runtime's own
 * table uses absolute pointers (DW_EH_PE_absptr), so the same bytes serve
 * libgcc and GDB's in-memory ELF; perf's images, loaded at addresses only perf
 * knows, are written with pc-relative ones by the same two functions. */
#include <stdlib.h>

#include "internal.h"

/* libgcc's registration API (unwind-dw2-fde.h); not in a public header. */
extern void __register_frame(void *begin);
extern void __deregister_frame(void *begin);

_Static_assert(DW_CFA_nop == 0, "padding is written with buf_zeros");

/* Pad the entry that started at `start` (its length field) with DW_CFA_nop
 * to a multiple of 8 bytes, then to `size`, and fill in its length. The pad
 * is counted first: a failed buffer stops growing. */
static void end_entry(sr_buf *b, size_t start, size_t size)
{
    size_t len = b->len - start, padded = (len + 7) & ~(size_t)7;
    buf_zeros(b, (padded > size ? padded : size) - len);
    buf_patch_u32(b, start, (uint32_t)(b->len - start - 4));
}

/* A pointer field in encoding `enc` (the two ehframe_cie documents). */
static void put_pointer(sr_buf *b, uint8_t enc, uint64_t v, uint64_t base)
{
    if ((enc & 0x70) == DW_EH_PE_pcrel)
        v -= base + b->len;
    if ((enc & 0x0f) == DW_EH_PE_sdata4)
        buf_u32(b, (uint32_t)v);
    else
        buf_u64(b, v);
}

size_t ehframe_cie(sr_buf *b, const sr_stencil_set *set, uint8_t enc, size_t size)
{
    size_t cie = b->len;
    buf_u32(b, 0); /* length, filled in by end_entry */
    buf_u32(b, 0); /* CIE id */
    buf_u8(b, 1);  /* version */
    buf_put(b, "zR", 3);
    buf_uleb(b, set->code_align);
    buf_sleb(b, set->data_align);
    buf_u8(b, (uint8_t)set->ra_column);
    buf_uleb(b, 1); /* augmentation data: the FDE pointer encoding */
    buf_u8(b, enc);
    buf_put(b, set->cie_insns, set->cie_insns_len);
    end_entry(b, cie, size);
    return cie;
}

void ehframe_fde(sr_buf *b, size_t cie_at, const sr_fde *f, uint8_t enc, uint64_t base)
{
    size_t fde = b->len;
    buf_u32(b, 0);
    buf_u32(b, (uint32_t)(b->len - cie_at)); /* CIE pointer: back to the CIE */
    put_pointer(b, enc, f->pc, base);
    put_pointer(b, enc & 0x0f, f->size, 0); /* a length: never relative */
    buf_uleb(b, 0); /* no augmentation data */
    buf_put(b, f->insns, f->insns_len);
    end_entry(b, fde, 0);
}

uint8_t *ehframe_build(const sr_stencil_set *set, const sr_fde *fdes, size_t n, size_t *size)
{
    sr_buf b = {0};
    size_t cie = ehframe_cie(&b, set, DW_EH_PE_absptr, 0);
    for (size_t i = 0; i < n; i++)
        ehframe_fde(&b, cie, &fdes[i], DW_EH_PE_absptr, 0);
    buf_u32(&b, 0); /* terminator: libgcc walks until a zero length */
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
