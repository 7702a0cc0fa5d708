/* arm64_unwind.h - Windows ARM64 unwind data (a .pdata entry, packed, or an
 * .xdata record of unwind codes), read as hostile bytes and turned into the
 * rows DWARF CFI would give.
 *
 * An ARM64 RUNTIME_FUNCTION's second word either packs a canonical prolog
 * into bit fields or points at an .xdata record whose unwind codes map one
 * to one onto the prolog's instructions, listed last first. Both forms come
 * out as one record (a packed entry expanded into the codes it stands for),
 * and replaying its codes gives, per prolog offset, the same "CFA = reg + k,
 * register saved at [CFA + n]" rows the ELF path reads from .eh_frame, so one
 * set of checks (frame_shape.c) serves every format. Every read is
 * bounds-checked; every problem is reported through cfi_error. */
#ifndef STENCILGEN_ARM64_UNWIND_H
#define STENCILGEN_ARM64_UNWIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cfi.h"
#include "util.h"

/* The return address's column in the rows (DWARF's x30, the link register). */
enum { A64W_RA_COLUMN = 30 };

/* The flag in a .pdata entry's second word: 0 points at .xdata. */
enum { A64W_PDATA_XDATA = 0, A64W_PDATA_PACKED = 1, A64W_PDATA_FRAGMENT = 2 };

typedef struct a64w_info {
    uint32_t function_words; /* the function's length, in 4-byte instructions */
    bool single_epilog;      /* E: one epilog, at the end, no scope words */
    unsigned epilogs;        /* scope words, or (E) the epilog's first code */
    unsigned code_words;     /* unwind codes, in 4-byte words */
    const uint8_t *codes;    /* points into the parsed bytes */
    size_t size;             /* bytes the whole record takes */
} a64w_info;

/* Parse the .xdata record at data[offset] (data holds `size` bytes). Refuses
 * an exception handler and chained scopes (a shim has neither). 0 or -1. */
int a64w_parse_xdata(const uint8_t *data, size_t size, size_t offset, a64w_info *out,
                     cfi_error *err);

/* The .xdata record a packed .pdata word stands for, appended to out: the
 * canonical prolog's codes and a single epilog at the function's end. 0, or
 * -1 for a fragment, a reserved flag or a combination no prolog has. */
int a64w_expand_packed(uint32_t word, strbuf *out, cfi_error *err);

/* Replay the prolog's codes of a function covering [begin, end): one row per
 * instruction of the prolog, the last one to `end`; DWARF register numbers
 * (AADWARF64). *sign_at: the address of the instruction that signs the
 * return address (pac_sign_lr, which stands for pacibsp), or UINT64_MAX. 0,
 * or -1 (*out then freed and zeroed; the error's offset counts from the
 * record's first byte). */
int a64w_rows(const a64w_info *info, uint64_t begin, uint64_t end, cfi_table *out,
              uint64_t *sign_at, cfi_error *err);

/* The .xdata record of code that runs in this function's frame after its
 * prolog, appended to out: no prolog of its own (end_c), then the shim's
 * prolog codes as its parent's, so unwinders apply every code at every PC.
 * Its length field is 0: the runtime writes each executor's. 0, or -1 when
 * the codes do not fit a record (255 words). */
int a64w_after_prolog(const a64w_info *info, strbuf *out, cfi_error *err);

#endif
