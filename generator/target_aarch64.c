/* target_aarch64.c - AArch64 Linux (ELF, little-endian, LP64), and macOS
 * (Mach-O, below).
 *
 * Stencils are compiled in the small code model with PIC: data and GOT slots
 * are reached with ADRP + ADD/LDR pairs, branches to the continuation and jump
 * targets are B (JUMP26), B.cond/CBZ (CONDBR19) or TBZ (TSTBR14), and calls to
 * run-time symbols are BL (CALL26) unless -fno-plt makes them GOT loads. The
 * tiny code model (ADR, LDR literal) and absolute MOVZ/MOVK sequences
 * (-mcmodel=large) are supported as well. */
#include "target.h"

#include "util.h"

/* ELF relocation numbers, from "ELF for the Arm 64-bit Architecture" (AAELF64). */
enum {
    R_AARCH64_ABS64 = 257,
    R_AARCH64_PREL32 = 261,
    R_AARCH64_MOVW_UABS_G0 = 263,
    R_AARCH64_MOVW_UABS_G0_NC = 264,
    R_AARCH64_MOVW_UABS_G1 = 265,
    R_AARCH64_MOVW_UABS_G1_NC = 266,
    R_AARCH64_MOVW_UABS_G2 = 267,
    R_AARCH64_MOVW_UABS_G2_NC = 268,
    R_AARCH64_MOVW_UABS_G3 = 269,
    R_AARCH64_LD_PREL_LO19 = 273,
    R_AARCH64_ADR_PREL_LO21 = 274,
    R_AARCH64_ADR_PREL_PG_HI21 = 275,
    R_AARCH64_ADD_ABS_LO12_NC = 277,
    R_AARCH64_LDST8_ABS_LO12_NC = 278,
    R_AARCH64_TSTBR14 = 279,
    R_AARCH64_CONDBR19 = 280,
    R_AARCH64_JUMP26 = 282,
    R_AARCH64_CALL26 = 283,
    R_AARCH64_LDST16_ABS_LO12_NC = 284,
    R_AARCH64_LDST32_ABS_LO12_NC = 285,
    R_AARCH64_LDST64_ABS_LO12_NC = 286,
    R_AARCH64_LDST128_ABS_LO12_NC = 299,
    R_AARCH64_GOT_LD_PREL19 = 309,
    R_AARCH64_ADR_GOT_PAGE = 311,
    R_AARCH64_LD64_GOT_LO12_NC = 312,
};

static bool classify(uint32_t type, const uint8_t *bytes, uint64_t size, uint64_t field,
                     sg_patch *patch)
{
    (void)bytes, (void)size, (void)field; /* ELF types say all */
    switch (type) {
    case R_AARCH64_ABS64: *patch = SG_PATCH_ABS64; return true;
    case R_AARCH64_PREL32: *patch = SG_PATCH_PCREL32; return true;
    /* A call to a run-time symbol may be out of reach of BL: the runtime then
     * sends it through a veneer, so a PLT is never needed. */
    case R_AARCH64_JUMP26:
    case R_AARCH64_CALL26: *patch = SG_PATCH_AARCH64_BRANCH26; return true;
    case R_AARCH64_CONDBR19:
    case R_AARCH64_LD_PREL_LO19: *patch = SG_PATCH_AARCH64_PCREL19; return true;
    case R_AARCH64_TSTBR14: *patch = SG_PATCH_AARCH64_TSTBR14; return true;
    case R_AARCH64_ADR_PREL_LO21: *patch = SG_PATCH_AARCH64_ADR21; return true;
    case R_AARCH64_ADR_PREL_PG_HI21: *patch = SG_PATCH_AARCH64_ADRP; return true;
    case R_AARCH64_ADD_ABS_LO12_NC: *patch = SG_PATCH_AARCH64_ADD_LO12; return true;
    case R_AARCH64_LDST8_ABS_LO12_NC: *patch = SG_PATCH_AARCH64_LDST8_LO12; return true;
    case R_AARCH64_LDST16_ABS_LO12_NC: *patch = SG_PATCH_AARCH64_LDST16_LO12; return true;
    case R_AARCH64_LDST32_ABS_LO12_NC: *patch = SG_PATCH_AARCH64_LDST32_LO12; return true;
    case R_AARCH64_LDST64_ABS_LO12_NC: *patch = SG_PATCH_AARCH64_LDST64_LO12; return true;
    case R_AARCH64_LDST128_ABS_LO12_NC: *patch = SG_PATCH_AARCH64_LDST128_LO12; return true;
    case R_AARCH64_ADR_GOT_PAGE: *patch = SG_PATCH_AARCH64_GOT_ADRP; return true;
    case R_AARCH64_LD64_GOT_LO12_NC: *patch = SG_PATCH_AARCH64_GOT_LO12; return true;
    case R_AARCH64_GOT_LD_PREL19: *patch = SG_PATCH_AARCH64_GOT_PCREL19; return true;
    case R_AARCH64_MOVW_UABS_G0: *patch = SG_PATCH_AARCH64_MOVW_G0; return true;
    case R_AARCH64_MOVW_UABS_G0_NC: *patch = SG_PATCH_AARCH64_MOVW_G0_NC; return true;
    case R_AARCH64_MOVW_UABS_G1: *patch = SG_PATCH_AARCH64_MOVW_G1; return true;
    case R_AARCH64_MOVW_UABS_G1_NC: *patch = SG_PATCH_AARCH64_MOVW_G1_NC; return true;
    case R_AARCH64_MOVW_UABS_G2: *patch = SG_PATCH_AARCH64_MOVW_G2; return true;
    case R_AARCH64_MOVW_UABS_G2_NC: *patch = SG_PATCH_AARCH64_MOVW_G2_NC; return true;
    case R_AARCH64_MOVW_UABS_G3: *patch = SG_PATCH_AARCH64_MOVW_G3; return true;
    default: return false;
    }
}

/* `b imm26` (0b000101 in bits 31..26) as the last instruction, its field
 * being the hole. */
/* A direct branch's immediate: which bits (lo, width), in words. B: 26 bits at
 * 0; B.cond, CBZ, CBNZ: 19 at 5; TBZ, TBNZ: 14 at 5. 0 width: not one. */
static unsigned branch_field(uint32_t insn, unsigned *lo)
{
    *lo = 5;
    if ((insn & 0xfc000000u) == 0x14000000u)
        return *lo = 0, 26;
    if ((insn & 0xff000010u) == 0x54000000u || (insn & 0x7e000000u) == 0x34000000u)
        return 19;
    if ((insn & 0x7e000000u) == 0x36000000u)
        return 14;
    return 0;
}

static uint32_t load32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void store32(uint8_t *p, uint32_t v)
{
    for (unsigned k = 0; k < 4; k++)
        p[k] = (uint8_t)(v >> (8 * k));
}

static bool invert_branch(uint8_t *insn, unsigned size);

/* B reaches +-128 MiB as it is. A conditional branch (+-1 MiB, TBZ +-32 KiB)
 * becomes the opposite branch over a B (`b.ne 1f; b target; 1:`), so that a
 * jump between an executor's hot and cold parts reaches as far as any B. */
static bool long_branch(const uint8_t *insn, unsigned size, uint8_t *out, unsigned *out_size,
                        unsigned *field, sg_patch *patch, int64_t *addend)
{
    unsigned lo, width = size == 4 ? branch_field(load32(insn), &lo) : 0;
    if (!width)
        return false;
    uint32_t mask = (uint32_t)(((uint64_t)1 << width) - 1) << lo;
    *patch = SG_PATCH_AARCH64_BRANCH26;
    *addend = 0; /* S + A - P, P being the B itself */
    if (width == 26) {
        store32(out, load32(insn) & ~mask);
        *out_size = 4, *field = 0;
        return true;
    }
    store32(out, (load32(insn) & ~mask) | (2u << lo)); /* over the B: 2 words on */
    if (!invert_branch(out, 4))
        return false;
    store32(out + 4, 0x14000000u);
    *out_size = 8, *field = 4;
    return true;
}

static bool set_branch(uint8_t *insn, unsigned size, int64_t disp)
{
    unsigned lo, width = size == 4 ? branch_field(load32(insn), &lo) : 0;
    int64_t words = disp / 4, lim = (int64_t)1 << (width - 1);
    if (!width || disp % 4 || words < -lim || words >= lim)
        return false;
    uint32_t mask = (uint32_t)(((uint64_t)1 << width) - 1);
    uint32_t v = load32(insn) & ~(mask << lo);
    store32(insn, v | ((uint32_t)words & mask) << lo);
    return true;
}

/* B.cond flips the condition's low bit (not AL/NV); CBZ/CBNZ and TBZ/TBNZ
 * differ in bit 24. */
static bool invert_branch(uint8_t *insn, unsigned size)
{
    uint32_t v = size == 4 ? load32(insn) : 0;
    if ((v & 0xff000010u) == 0x54000000u && (v & 0xe) != 0xe)
        store32(insn, v ^ 1);
    else if ((v & 0x7e000000u) == 0x34000000u || (v & 0x7e000000u) == 0x36000000u)
        store32(insn, v ^ (1u << 24));
    else
        return false;
    return true;
}

static const uint8_t short_jump[] = {0x01, 0x00, 0x00, 0x14}; /* b .+4 */

static size_t trailing_jump(const uint8_t *code, size_t size, uint32_t hole_offset,
                            sg_patch patch, int64_t addend)
{
    if (size < 4 || size % 4 || hole_offset != size - 4 || patch != SG_PATCH_AARCH64_BRANCH26 ||
        addend != 0)
        return 0;
    return (load_le(code + size - 4, 4) & 0xfc000000u) == 0x14000000u ? 4 : 0;
}

/* DWARF register numbers (AADWARF64): x0..x30 = 0..30, sp = 31, v0..v31 = 64..95. */
static const char *reg_name(uint32_t r)
{
    static const char *const x[] = {
        "x0",  "x1",  "x2",  "x3",  "x4",  "x5",  "x6",  "x7",  "x8",  "x9",  "x10",
        "x11", "x12", "x13", "x14", "x15", "x16", "x17", "x18", "x19", "x20", "x21",
        "x22", "x23", "x24", "x25", "x26", "x27", "x28", "x29", "x30", "sp",
    };
    static const char *const v[] = {
        "v0",  "v1",  "v2",  "v3",  "v4",  "v5",  "v6",  "v7",  "v8",  "v9",  "v10",
        "v11", "v12", "v13", "v14", "v15", "v16", "v17", "v18", "v19", "v20", "v21",
        "v22", "v23", "v24", "v25", "v26", "v27", "v28", "v29", "v30", "v31",
    };
    if (r < 32)
        return x[r];
    if (r >= 64 && r < 96)
        return v[r - 64];
    return NULL;
}

/* An indirect call (BLR) may land on BTI c or jc, or on PACIASP/PACIBSP,
 * which act as BTI c. */
static bool landing_pad(const uint8_t *code, size_t size)
{
    if (size < 4)
        return false;
    uint32_t w = (uint32_t)load_le(code, 4);
    return w == 0xd503245f || w == 0xd50324df || w == 0xd503233f || w == 0xd503237f;
}

/* LLVM's AArch64 instruction descriptions list every written register,
 * written-back base registers included (the "wback" operand of the pre- and
 * post-indexed forms), and w29 overlaps x29: nothing to add. */
static const char *const fp_writers[] = {NULL};

/* Atomics inline (LSE or LL/SC), never calls of libgcc's __aarch64_* helpers,
 * which would be undefined symbols of the stencil. */
static const char *const op_cflags[] = {"-mno-outline-atomics", NULL};
static const char *const shim_cflags[] = {"-mno-outline-atomics", NULL};

const gen_target sg_target_aarch64_linux = {
    .triple = "aarch64-unknown-linux-gnu",
    .host_condition = "defined(__aarch64__) && defined(__linux__)",
    .op_cflags = op_cflags,
    .shim_cflags = shim_cflags,
    .pic_cflags = sg_elf_pic_cflags,
    .fp_reg = 29,
    .elf_machine = 183, /* EM_AARCH64 */
    .fp_writers = fp_writers,
    .reg_name = reg_name,
    .object_format = OBJ_FORMAT_ELF,
    .classify_reloc = classify,
    .trailing_jump = trailing_jump,
    .landing_pad = landing_pad,
    .landing_pad_flag = "-mbranch-protection=bti (or standard)",
    .long_branch = long_branch,
    .set_branch = set_branch,
    .invert_branch = invert_branch,
    .short_jump = short_jump,
    .short_jump_size = sizeof short_jump,
};

/* Mach-O relocation numbers (<mach-o/arm64/reloc.h>); objfile.h puts the
 * field's log2 width in bits 8-9 of the type. */
enum {
    ARM64_RELOC_UNSIGNED = 0,
    ARM64_RELOC_BRANCH26 = 2,
    ARM64_RELOC_PAGE21 = 3,
    ARM64_RELOC_PAGEOFF12 = 4,
    ARM64_RELOC_GOT_LOAD_PAGE21 = 5,
    ARM64_RELOC_GOT_LOAD_PAGEOFF12 = 6,
};

static bool insn_at(const uint8_t *bytes, uint64_t size, uint64_t field, uint32_t *insn)
{
    if (!bytes || field > size || size - field < 4)
        return false;
    *insn = (uint32_t)load_le(bytes + field, 4);
    return true;
}

/* ELF says which low-12-bits form an instruction takes (ADD, or a load or
 * store of 1 to 16 bytes, whose offset is scaled by its size); Mach-O's one
 * PAGEOFF12 leaves it to the instruction. */
static bool lo12_kind(uint32_t insn, sg_patch *patch)
{
    if ((insn & 0x7f800000u) == 0x11000000u) { /* ADD (immediate), 32 or 64 bits */
        *patch = SG_PATCH_AARCH64_ADD_LO12;
        return true;
    }
    if ((insn & 0x3b000000u) != 0x39000000u) /* load/store, unsigned offset */
        return false;
    unsigned size = insn >> 30, simd = (insn >> 26) & 1, opc = (insn >> 22) & 3;
    static const sg_patch by_size[] = {SG_PATCH_AARCH64_LDST8_LO12, SG_PATCH_AARCH64_LDST16_LO12,
                                       SG_PATCH_AARCH64_LDST32_LO12,
                                       SG_PATCH_AARCH64_LDST64_LO12};
    *patch = simd && size == 0 && (opc & 2) ? SG_PATCH_AARCH64_LDST128_LO12 : by_size[size];
    return true;
}

static bool classify_macho(uint32_t type, const uint8_t *bytes, uint64_t size, uint64_t field,
                           sg_patch *patch)
{
    uint32_t insn, width = 1u << (type >> 8);
    switch (type & 0xff) {
    case ARM64_RELOC_UNSIGNED: *patch = SG_PATCH_ABS64; return width == 8;
    case ARM64_RELOC_BRANCH26: *patch = SG_PATCH_AARCH64_BRANCH26; return true;
    case ARM64_RELOC_PAGE21: *patch = SG_PATCH_AARCH64_ADRP; return true;
    case ARM64_RELOC_PAGEOFF12: return insn_at(bytes, size, field, &insn) && lo12_kind(insn, patch);
    case ARM64_RELOC_GOT_LOAD_PAGE21: *patch = SG_PATCH_AARCH64_GOT_ADRP; return true;
    case ARM64_RELOC_GOT_LOAD_PAGEOFF12: /* LDR x (unsigned offset), the slot's one form */
        *patch = SG_PATCH_AARCH64_GOT_LO12;
        return insn_at(bytes, size, field, &insn) && (insn & 0xffc00000u) == 0xf9400000u;
    default: return false;
    }
}

/* No -fPIC (Mach-O code always is) and no -fno-plt (an unused argument on
 * Darwin); the operating system's headers are not this machine's, and 11.0
 * is the first macOS with arm64. */
static const char *const darwin_cflags[] = {"-mno-outline-atomics", "-mmacosx-version-min=11.0",
                                            "-nostdlibinc", NULL};
static const char *const no_cflags[] = {NULL};

const gen_target sg_target_aarch64_darwin = {
    .triple = "aarch64-apple-darwin",
    .host_condition = "defined(__aarch64__) && defined(__APPLE__)",
    .op_cflags = darwin_cflags,
    .shim_cflags = darwin_cflags,
    .pic_cflags = no_cflags,
    .fp_reg = 29,
    .elf_machine = 183, /* EM_AARCH64: the architecture's number, whatever the format */
    .fp_writers = fp_writers,
    .fp_saved_with_lr = true,
    .reg_name = reg_name,
    .object_format = OBJ_FORMAT_MACHO,
    .classify_reloc = classify_macho,
    .trailing_jump = trailing_jump,
    .landing_pad = landing_pad,
    .landing_pad_flag = "-mbranch-protection=bti (or standard)",
};

/* COFF relocation numbers for ARM64, from the PE/COFF specification. */
enum {
    IMAGE_REL_ARM64_ADDR32 = 0x1,
    IMAGE_REL_ARM64_BRANCH26 = 0x3,
    IMAGE_REL_ARM64_PAGEBASE_REL21 = 0x4,
    IMAGE_REL_ARM64_REL21 = 0x5,
    IMAGE_REL_ARM64_PAGEOFFSET_12A = 0x6,
    IMAGE_REL_ARM64_PAGEOFFSET_12L = 0x7,
    IMAGE_REL_ARM64_ADDR64 = 0xe,
    IMAGE_REL_ARM64_BRANCH19 = 0xf,
    IMAGE_REL_ARM64_BRANCH14 = 0x10,
    IMAGE_REL_ARM64_REL32 = 0x11,
};

/* COFF has no GOT: a symbol's address is reached with ADRP and ADD (or a
 * load), and one PAGEOFFSET_12L serves loads and stores of every size, told
 * apart by the instruction. An operand is declared dllimport (stencil_op.h)
 * and loaded from its import slot, which serves as its GOT entry
 * (OBJ_COFF_IMPORT_SLOT). The objects' implicit addends (in the
 * instructions) were moved out by the reader. */
static bool classify_coff(uint32_t type, const uint8_t *bytes, uint64_t size, uint64_t field,
                          sg_patch *patch)
{
    uint32_t insn;
    if (type & OBJ_COFF_IMPORT_SLOT) { /* the slot is the symbol's GOT entry */
        switch (type & ~OBJ_COFF_IMPORT_SLOT) {
        case IMAGE_REL_ARM64_PAGEBASE_REL21: *patch = SG_PATCH_AARCH64_GOT_ADRP; return true;
        case IMAGE_REL_ARM64_PAGEOFFSET_12L: /* LDR x (unsigned offset), the slot's one form */
            *patch = SG_PATCH_AARCH64_GOT_LO12;
            return insn_at(bytes, size, field, &insn) && (insn & 0xffc00000u) == 0xf9400000u;
        default: return false;
        }
    }
    switch (type) {
    case IMAGE_REL_ARM64_ADDR64: *patch = SG_PATCH_ABS64; return true;
    case IMAGE_REL_ARM64_ADDR32: *patch = SG_PATCH_ABS32; return true;
    case IMAGE_REL_ARM64_REL32: *patch = SG_PATCH_PCREL32; return true;
    case IMAGE_REL_ARM64_BRANCH26: *patch = SG_PATCH_AARCH64_BRANCH26; return true;
    case IMAGE_REL_ARM64_BRANCH19: *patch = SG_PATCH_AARCH64_PCREL19; return true;
    case IMAGE_REL_ARM64_BRANCH14: *patch = SG_PATCH_AARCH64_TSTBR14; return true;
    case IMAGE_REL_ARM64_REL21: *patch = SG_PATCH_AARCH64_ADR21; return true;
    case IMAGE_REL_ARM64_PAGEBASE_REL21: *patch = SG_PATCH_AARCH64_ADRP; return true;
    case IMAGE_REL_ARM64_PAGEOFFSET_12A: /* ADD (immediate) only */
        *patch = SG_PATCH_AARCH64_ADD_LO12;
        return insn_at(bytes, size, field, &insn) && (insn & 0x7f800000u) == 0x11000000u;
    case IMAGE_REL_ARM64_PAGEOFFSET_12L:
        return insn_at(bytes, size, field, &insn) && (insn & 0x3b000000u) == 0x39000000u &&
               lo12_kind(insn, patch);
    default: return false;
    }
}

/* MSVC's environment makes objects for incremental linking, whose COFF header
 * holds the time of the compile: objects would differ from run to run. */
static const char *const msvc_cflags[] = {"-mno-incremental-linker-compatible", NULL};

/* Windows on ARM64 (MSVC's environment): COFF, code position-independent as
 * compiled, x18 reserved for the TEB (clang does that for the triple). The
 * shim's frame comes from its .pdata/.xdata (arm64_unwind.h). Ops keep
 * whole: hot and cold parts on this target would need an unwind record per
 * cold part, which the runtime does not write. No Windows on ARM64 runs
 * here: the tests link the stencils with lld-link instead. */
const gen_target sg_target_aarch64_windows = {
    .triple = "aarch64-pc-windows-msvc",
    .host_condition = "(defined(_M_ARM64) || defined(__aarch64__)) && defined(_WIN32) && "
                      "!defined(_M_ARM64EC)",
    .op_cflags = msvc_cflags,
    .shim_cflags = msvc_cflags,
    .pic_cflags = no_cflags,
    .fp_reg = 29,
    .elf_machine = 183, /* EM_AARCH64 */
    .fp_writers = fp_writers,
    .reg_name = reg_name,
    .object_format = OBJ_FORMAT_COFF,
    .win_unwind = WIN_UNWIND_ARM64,
    .classify_reloc = classify_coff,
    .trailing_jump = trailing_jump,
    .landing_pad = landing_pad,
    .landing_pad_flag = "-mbranch-protection=bti (or standard)",
};
