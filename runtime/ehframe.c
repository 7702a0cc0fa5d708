/* ehframe.c - a synthetic .eh_frame: one CIE carrying the shim's initial
 * instructions and factors, then one FDE per code range. Pointers are absolute
 * (DW_EH_PE_absptr) so the same bytes serve libgcc and GDB's in-memory ELF. */
#include <stdlib.h>

#include "internal.h"

/* libgcc's registration API (unwind-dw2-fde.h); not in a public header. */
extern void __register_frame(void *begin);
extern void __deregister_frame(void *begin);

enum { DW_EH_PE_absptr = 0x00, DW_CFA_nop = 0x00 };

/* Pad the entry that started at `start` (its length field) to 8 bytes with
 * DW_CFA_nop and fill in its length. */
static void end_entry(sr_buf *b, size_t start)
{
    while ((b->len - start) % 8)
        buf_u8(b, DW_CFA_nop);
    buf_patch_u32(b, start, (uint32_t)(b->len - start - 4));
}

uint8_t *ehframe_build(const sr_stencil_set *set, const sr_fde *fdes, size_t n, size_t *size)
{
    sr_buf b = {0};
    size_t cie = b.len;
    buf_u32(&b, 0); /* length, filled in by end_entry */
    buf_u32(&b, 0); /* CIE id */
    buf_u8(&b, 1);  /* version */
    buf_put(&b, "zR", 3);
    buf_uleb(&b, set->code_align);
    buf_sleb(&b, set->data_align);
    buf_u8(&b, (uint8_t)set->ra_column);
    buf_uleb(&b, 1); /* augmentation data: the FDE pointer encoding */
    buf_u8(&b, DW_EH_PE_absptr);
    buf_put(&b, set->cie_insns, set->cie_insns_len);
    end_entry(&b, cie);
    for (size_t i = 0; i < n; i++) {
        size_t fde = b.len;
        buf_u32(&b, 0);
        buf_u32(&b, (uint32_t)(b.len - cie)); /* CIE pointer: back to the CIE */
        buf_u64(&b, fdes[i].pc);
        buf_u64(&b, fdes[i].size);
        buf_uleb(&b, 0); /* no augmentation data */
        buf_put(&b, fdes[i].insns, fdes[i].insns_len);
        end_entry(&b, fde);
    }
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
