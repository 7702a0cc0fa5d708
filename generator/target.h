/* target.h - everything architecture- or object-format-specific, behind one table.
 *
 * The pipeline never tests for an architecture; it asks the target. Adding
 * AArch64, Mach-O or COFF means adding a table, not editing the stages. */
#ifndef STENCILGEN_TARGET_H
#define STENCILGEN_TARGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../runtime/stencilrt_abi.h" /* the ABI, owned by the runtime */
#include "cfi.h"
#include "objfile.h"

typedef struct gen_target {
    const char *triple;         /* canonical LLVM triple, as written in manifests */
    const char *host_condition; /* preprocessor test that is true on this host */
    /* Tested before the others in jit_stencils.h: its condition is a special
     * case of another target's (MSVC's environment of Windows'). */
    bool dispatch_first;
    const char *const *op_cflags;   /* NULL-terminated; flags every op needs here */
    const char *const *shim_cflags; /* NULL-terminated; flags the shim needs here */
    /* Position independence as the object format has it (-fPIC -fno-plt
     * for ELF; nothing for COFF and Mach-O, where clang calls -fno-plt unused). */
    const char *const *pic_cflags;   /* NULL-terminated */
    uint32_t fp_reg; /* DWARF register number (the return address column comes from the CIE) */
    unsigned elf_machine;            /* e_machine, for the runtime's in-memory ELF objects */
    /* ELF and Mach-O: the shim's unwind facts come from its (__)eh_frame
     * (DWARF CFI). COFF: from its .pdata/.xdata (Windows x64 UNWIND_INFO,
     * win64_unwind.h; ARM64 unwind codes, arm64_unwind.h). */
    obj_format object_format;
    /* COFF: whose .pdata and .xdata layout and unwind codes (X86_FP: none,
     * the shim's prolog puts it on the ebp chain, fp_chain.h). */
    enum { WIN_UNWIND_NONE, WIN_UNWIND_X64, WIN_UNWIND_ARM64, WIN_UNWIND_X86_FP } win_unwind;
    /* LLVM opcode-name prefixes that write the frame pointer although LLVM's
     * instruction description does not say so (NULL-terminated). */
    const char *const *fp_writers;
    /* AArch64 Mach-O: LLVM saves x29 with x30 whenever it saves x30 (the
     * frame records compact unwind wants), so a call out of an op is
     * bracketed by stp x29, x30, [sp, #-16]! and ldp x29, x30, [sp], #16,
     * which writes x29 the value it had (fp_check proves when). */
    bool fp_saved_with_lr;
    cfi_reg_namer *reg_name;
    /* Map an object-file relocation type to a patch; false if unsupported.
     * `field` is the patched bytes' offset in `bytes` (the section, `size`
     * bytes): COFF's one PC-relative type serves both branches and data
     * references, told apart by the instruction. */
    bool (*classify_reloc)(uint32_t type, const uint8_t *bytes, uint64_t size, uint64_t field,
                           sg_patch *patch);
    /* Bytes taken by a final jump to the continuation whose hole starts at
     * `hole_offset` (0 when the code does not end with one). */
    size_t (*trailing_jump)(const uint8_t *code, size_t size, uint32_t hole_offset,
                            sg_patch patch, int64_t addend);
    /* Whether the code starts with a landing pad for an indirect call
     * (AArch64 BTI, x86-64 IBT), and the compiler flag that makes one. */
    bool (*landing_pad)(const uint8_t *code, size_t size);
    const char *landing_pad_flag;
    /* Hot and cold parts (hotcold_split.c); NULL: this target keeps ops whole.
     * long_branch: the form of the direct branch `insn` (`size` bytes) whose
     * displacement a hole can carry, into out (at most 8 bytes): its size, the
     * hole's offset in it and kind, and the addend that makes the hole's value
     * the branch's target; false for a branch that has none (x86 JRCXZ, LOOP).
     * set_branch: point the direct branch `insn` at `disp` bytes from its
     * start; false when that is out of its reach. */
    bool (*long_branch)(const uint8_t *insn, unsigned size, uint8_t *out, unsigned *out_size,
                        unsigned *field, sg_patch *patch, int64_t *addend);
    bool (*set_branch)(uint8_t *insn, unsigned size, int64_t disp);
    /* invert_branch: the conditional branch `insn` made to branch on the
     * opposite condition; false for an unconditional one. short_jump: an
     * unconditional direct jump to the next byte (long_branch grows it). */
    bool (*invert_branch)(uint8_t *insn, unsigned size);
    const uint8_t *short_jump;
    unsigned short_jump_size;
} gen_target;

/* NULL when the triple is not supported. */
const gen_target *target_lookup(const char *triple);
/* The supported triples, comma-separated, for error messages (caller frees). */
char *target_supported_list(void);

/* -fPIC -fno-plt, for every ELF target (flags.c, with their reasons). */
extern const char *const sg_elf_pic_cflags[];

/* Per-architecture tables (target_<arch>.c). */
extern const gen_target sg_target_x86_64_linux;
extern const gen_target sg_target_x86_64_windows;
extern const gen_target sg_target_x86_64_msvc;
extern const gen_target sg_target_x86_64_darwin;
extern const gen_target sg_target_aarch64_linux;
extern const gen_target sg_target_aarch64_darwin;
extern const gen_target sg_target_aarch64_windows;
extern const gen_target sg_target_i686_windows;

#endif
