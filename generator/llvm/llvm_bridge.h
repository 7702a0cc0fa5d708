/* llvm_bridge.h - the few things the LLVM C API cannot give us, behind a C
 * interface: relocation addends, section flags and symbol binding (object
 * reading), and the registers an instruction writes (disassembly). */
#ifndef STENCILGEN_LLVM_BRIDGE_H
#define STENCILGEN_LLVM_BRIDGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "objfile.h"

#ifdef __cplusplus
extern "C" {
#endif

bool lb_read_object(const uint8_t *buf, size_t size, objfile *out, char *err, size_t errsz);

typedef struct lb_disasm lb_disasm;

typedef struct lb_insn {
    unsigned size;      /* 0 when the bytes do not decode */
    bool writes_fp;     /* defines the frame-pointer register or any part of it */
    bool is_call;
    bool is_branch;     /* jumps, conditional or not (not calls) */
    bool is_indirect;   /* a call or branch whose target is not in the instruction */
    bool ends_flow;     /* never runs into the next instruction: jmp, ret, ud2, b, br, brk */
    bool is_return;     /* ret: leaves the stencil for its caller */
    uint64_t target;    /* direct call/branch target */
    int call_reg;       /* an indirect call through one register: its DWARF number; else -1 */
    uint64_t defs;      /* DWARF registers 0..63 it writes, wholly or in part (bit n: reg n) */
    bool has_address;   /* a PC-relative memory operand or address (x86 RIP-relative) */
    uint64_t address;   /* ... and the address it names */
    char text[128];     /* e.g. "movq %rsp, %rbp" */
} lb_insn;

/* fp_dwarf_reg: DWARF number of the frame-pointer register (6 = rbp, 29 = x29).
 * fp_writers: NULL-terminated LLVM opcode-name prefixes that write the frame
 * pointer without LLVM's description saying so (e.g. "ENTER" on x86). */
lb_disasm *lb_disasm_create(const char *triple, uint32_t fp_dwarf_reg,
                            const char *const *fp_writers, char *err, size_t errsz);
/* Decode one instruction of code[0..size) located at address pc. */
void lb_disasm_one(lb_disasm *d, const uint8_t *code, size_t size, uint64_t pc, lb_insn *out);
void lb_disasm_destroy(lb_disasm *d);

/* The clang executable whose driver and cc1 the clang module links
 * (libclang-cpp); NULL if that module cannot be loaded. Its compiles can run in a forked child
 * of the generator (compile.c): the same code, without loading libLLVM and
 * libclang-cpp again for every compile. */
const char *lb_clang_path(void);

/* Start loading the clang module in a thread where a compile is likely (a
 * source changed and is parsed again), so that its 6-10 ms overlap the parse
 * and the cache lookups; lb_clang_path() waits for it, and lb_clang_preload_done() ends it
 * in a run that compiled nothing (before the run forks or exits). */
void lb_clang_preload(void);
void lb_clang_preload_done(void);

/* What lb_clang_path()'s main does for `argv` (argv[0] names the user's clang;
 * the driver runs as lb_clang_path(), which finds the same resource directory):
 * the driver builds the one cc1 job of a compile, which runs here. A command
 * that is not one cc1 job, or asks for more than a compile (clang_main.cpp
 * lists what), runs the executable instead. For a forked child only:
 * it returns clang's exit code, and a fatal error ends the process.
 * `probes` (or NULL): a successful compile writes there every path its
 * driver and cc1 looked for and did not find, absolute, one a line; for a
 * command the executable runs, a preprocess of it run here first does. */
int lb_clang_main(char *const *argv, const char *probes);

/* LLVM version string, e.g. "22.1.0" (for cache keys and --version): the one
 * the generator was built with, known without loading LLVM (llvm_version.c). */
const char *lb_llvm_version(void);

#ifdef __cplusplus
}
#endif

#endif
