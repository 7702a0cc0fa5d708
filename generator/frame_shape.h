/* frame_shape.h - derive the shim's frame shape from its compiled unwind
 * tables: .eh_frame (ELF and Mach-O), or .pdata/.xdata (COFF), whose unwind
 * codes are replayed into the same rows (win64_unwind.h, arm64_unwind.h).
 *
 * The shim calls JIT code exactly once, through a register or memory operand.
 * The CFI row in force at that call is what every executor PC inherits (the
 * stencils never move the frame pointer), so it must be frame-pointer based:
 * CFA = FP + k, with FP and the return address saved at fixed CFA offsets. */
#ifndef STENCILGEN_FRAME_SHAPE_H
#define STENCILGEN_FRAME_SHAPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cfi.h"
#include "diag.h"
#include "objfile.h"
#include "stencil.h"
#include "target.h"

typedef struct gen_frame_shape {
    uint32_t cfa_reg;
    int64_t cfa_offset;
    int64_t fp_offset; /* FP saved at [CFA + fp_offset] */
    int64_t ra_offset; /* return address saved at [CFA + ra_offset] */
} gen_frame_shape;

typedef struct gen_unwind {
    /* From the shim's CIE. */
    uint64_t code_align;
    int64_t data_align;
    uint32_t ra_column;
    uint8_t *cie_insns; /* initial instructions, trailing DW_CFA_nop padding stripped */
    size_t cie_insns_len;
    /* From the shim's FDE (offsets relative to the shim stencil's code). */
    uint8_t *fde_insns;
    size_t fde_insns_len;
    uint64_t fde_start, fde_size;
    cfi_table rows; /* the FDE's whole row table (rows relative to the shim code) */
    /* The call into JIT code and the row in force there. */
    size_t call_offset, call_size;
    char call_text[128];
    gen_frame_shape shape;
    const cfi_row *call_row; /* points into rows */
    /* The call row re-encoded as CFA instructions (every register rule), for
     * the runtime's executor FDE. */
    uint8_t *executor_cfi;
    size_t executor_cfi_len;
    /* COFF: the shim's unwind record (x64: its UNWIND_INFO as compiled;
     * ARM64: its .xdata record, or the one its packed .pdata entry stands
     * for, win_packed), and the executors' (the same codes with the prolog
     * done: win64_unwind.h, arm64_unwind.h). fde_start and fde_size above are
     * then the shim's RUNTIME_FUNCTION; the DWARF fields unused. */
    bool win_packed;
    uint8_t *win64_info;
    size_t win64_info_len;
    uint8_t *executor_win64_info;
    size_t executor_win64_info_len;
    bool ra_signed; /* AArch64: at the call the saved return address is signed */
    bool derived; /* every field above is set: the shape passed its checks */
    /* The relocated .eh_frame it was derived from, kept for the cache (COFF:
     * win64_info is). */
    uint8_t *eh_frame;
    size_t eh_frame_size;
    uint64_t eh_frame_addr;
    uint8_t eh_addr_size;
} gen_unwind;

/* A copy of the object's .eh_frame with its relocations applied, as a linker
 * would lay it out: section `code_sec` at address 0 (code_size bytes), the
 * .eh_frame right after it (out->addr). NULL after a diagnostic. Caller frees. */
uint8_t *eh_frame_relocated(const objfile *obj, int code_sec, uint64_t code_size,
                            const gen_target *t, const gen_where *where, cfi_section *out);

/* What a COFF shim's unwind facts are read from, for messages and comments:
 * "UNWIND_INFO", ".xdata record", "packed .pdata entry" or "prolog's
 * instructions". */
const char *unwind_record_name(const gen_target *t, const gen_unwind *u);

/* Analyse the compiled shim. `shim` is its stencil (code as placed at 0,
 * decoded by stencil_disassemble). */
bool frame_shape_analyze(const objfile *obj, const gen_stencil *shim, const gen_target *t,
                         const gen_where *where, gen_unwind *out);

/* What the next run needs to derive the same facts without the object (and
 * so without LLVM): frame_shape_from_cache takes it back; false when the
 * entry is not one this generator wrote (a cache miss, no diagnostic), or
 * after a diagnostic when the facts fail their checks. */
void unwind_cache_encode(strbuf *out, const gen_unwind *u);
bool frame_shape_from_cache(const uint8_t *buf, size_t size, const gen_stencil *shim,
                            const gen_target *t, const gen_where *where, gen_unwind *out);

void unwind_free(gen_unwind *u);

#endif
