/* emit_plan.h - the plan reader and result printer shared by the programs that
 * emit executors from a plan on stdin and print what the runtime did:
 * tests/patch/patch_dump.c (native, the patching differential) and
 * tests/aarch64/a64_reloc.c (AArch64 under qemu-user). Each program keeps its
 * own stencils, symbols and plan lines; what both say the same way is here:
 *
 *   ins OP TARGET O0 O1 O2 O3  one instruction; an operand is HEX, or e+HEX /
 *                              e-HEX: relative to the last executor's entry
 * and, per executor,
 *   exec LABEL ok N CODESIZE
 *   addr I HEXADDR             for I in 0..N (N: the end of the code)
 *   mem HEXADDR HEXBYTES       the run from the entry, up to DUMPLEN readable bytes
 * or
 *   exec LABEL err STATUS MESSAGE
 *
 * Depends only on stencilrt.h, not on a generated header, so one copy serves
 * every stencil set the tests compile these programs against. */
#ifndef EMIT_PLAN_H
#define EMIT_PLAN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "stencilrt.h"

/* End of the readable mapping holding p (0 if none is). */
uintptr_t ep_mapping_end(uintptr_t p);

/* Prints "HEXADDR HEXBYTES\n": up to len bytes from p, fewer where the
 * readable mapping ends first. */
void ep_dump(const uint8_t *p, size_t len);

/* The runtime a plan's executors go into: GDB and perf off (nothing here is
 * debugged or profiled), unwind registrations as sr_config.frames `frames`
 * says (-1: the default, or STENCILRT_FRAMES; 0: none). Returns NULL after
 * printing sr_last_error() on stderr. */
sr_runtime *ep_runtime(const sr_stencil_set *set, const void *const *symbols, int frames);

/* Reads the n "ins" lines of executor `label` from in into *code (grown with
 * realloc; *code may be NULL). entry: the last executor's entry, for e+/e-
 * operands. Returns 0, or 2 after printing which line of `label` is bad. */
int ep_read_instrs(FILE *in, const char *label, size_t n, uintptr_t entry, sr_instr **code);

/* sr_emit's result for code[0..n) as the exec/addr/mem lines above (dumplen:
 * at most that many bytes of mem). Returns the executor, or NULL after the
 * "err" line. */
sr_executor *ep_emit_and_print(sr_runtime *rt, const sr_instr *code, size_t n, const char *label,
                               size_t dumplen);

#endif
