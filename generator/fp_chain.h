/* fp_chain.h - the frame of a shim on a target without unwind tables
 * (32-bit Windows, where debuggers and stack walkers follow the ebp chain),
 * read from its prolog's instructions and turned into the rows DWARF CFI
 * would give.
 *
 * The prolog a chain needs is push ebp; mov ebp, esp, then any pushes of
 * other registers and sub esp: the replay stops at the first instruction
 * that is none of these. Every read is bounds-checked; every problem is
 * reported through cfi_error. */
#ifndef STENCILGEN_FP_CHAIN_H
#define STENCILGEN_FP_CHAIN_H

#include <stddef.h>
#include <stdint.h>

#include "cfi.h"

/* The return address's column in the rows (DWARF's eip on 32-bit x86). */
enum { FPC_RA_COLUMN = 8 };

/* Replay the prolog at code[0, size) of a function covering [begin, end):
 * one row per prolog instruction, the last one to `end`; DWARF register
 * numbers (i386 psABI). *prolog_size: the bytes it takes. 0, or -1 (*out
 * then freed and zeroed; the error's offset counts from code[0]) when the
 * code does not start with push ebp; mov ebp, esp. */
int fpc_rows(const uint8_t *code, size_t size, uint64_t begin, uint64_t end, cfi_table *out,
             size_t *prolog_size, cfi_error *err);

#endif
