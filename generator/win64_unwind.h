/* win64_unwind.h - Windows x64 unwind data (an UNWIND_INFO in .xdata), read
 * as hostile bytes and turned into the rows DWARF CFI would give.
 *
 * A COFF shim describes its frame with one UNWIND_INFO: a prolog of unwind
 * codes (pushes, a stack allocation, the frame register set to rsp + 16 *
 * FrameOffset, register and xmm saves), each tagged with the prolog offset
 * where it has happened. Replaying them gives, per prolog offset, the same
 * "CFA = reg + k, register saved at [CFA + n]" rows the ELF path reads from
 * .eh_frame, so one set of checks (frame_shape.c) serves both formats.
 * Every read is bounds-checked; every problem is reported through cfi_error. */
#ifndef STENCILGEN_WIN64_UNWIND_H
#define STENCILGEN_WIN64_UNWIND_H

#include <stddef.h>
#include <stdint.h>

#include "cfi.h"
#include "util.h"

/* The return address's column in the rows (DWARF's rip on x86-64). */
enum { W64_RA_COLUMN = 16 };

typedef struct w64_info {
    uint8_t version;      /* 1 (2 adds epilog codes, which are refused) */
    uint8_t flags;        /* UNW_FLAG_*: a shim may have none */
    uint8_t prolog_size;  /* bytes */
    uint8_t frame_reg;    /* Windows register number, 0 = none */
    uint8_t frame_offset; /* the frame register is rsp + 16 * frame_offset */
    uint8_t nslots;       /* unwind-code slots (2 bytes each) */
    const uint8_t *slots; /* points into the parsed bytes */
    size_t size;          /* bytes the whole UNWIND_INFO takes (slots padded to even) */
} w64_info;

/* Parse the UNWIND_INFO at data[offset] (data holds `size` bytes). Refuses
 * an exception handler or chained info (a shim has neither). 0 or -1. */
int w64_parse_info(const uint8_t *data, size_t size, size_t offset, w64_info *out,
                   cfi_error *err);

/* Replay the unwind codes of a function covering [begin, end): one row per
 * prolog offset at which the state changes, the last one to `end`; DWARF
 * register numbers (x86-64 psABI). 0, or -1 (*out then freed and zeroed; the
 * error's offset counts from the UNWIND_INFO's first byte). Refuses pushes
 * and allocations after a save or after the frame register is set. */
int w64_rows(const w64_info *info, uint64_t begin, uint64_t end, cfi_table *out,
             cfi_error *err);

/* The UNWIND_INFO of code that runs in this function's frame after its
 * prolog: the same frame register, offset and codes, with no prolog (every
 * code's offset 0), so unwinders apply every code at every PC. */
void w64_after_prolog(const w64_info *info, strbuf *out);

#endif
