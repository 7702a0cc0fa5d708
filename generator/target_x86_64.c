/* target_x86_64.c - x86-64: Linux (ELF), Windows (COFF, the MinGW-w64 ABI) and
 * macOS (Mach-O); and 32-bit x86 Windows (COFF), at the end. */
#include "target.h"

#include <string.h>

/* ELF relocation numbers, from the x86-64 psABI. */
enum {
    R_X86_64_64 = 1,
    R_X86_64_PC32 = 2,
    R_X86_64_PLT32 = 4,
    R_X86_64_GOTPCREL = 9,
    R_X86_64_32 = 10,
    R_X86_64_32S = 11,
    R_X86_64_GOTPCRELX = 41,
    R_X86_64_REX_GOTPCRELX = 42,
};

static bool classify(uint32_t type, const uint8_t *bytes, uint64_t size, uint64_t field,
                     sg_patch *patch)
{
    (void)bytes, (void)size, (void)field; /* ELF types say all */
    switch (type) {
    case R_X86_64_64: *patch = SG_PATCH_ABS64; return true;
    case R_X86_64_32: *patch = SG_PATCH_ABS32; return true;
    case R_X86_64_32S: *patch = SG_PATCH_ABS32S; return true;
    /* A call or jump (clang emits PLT32 for every one): to a run-time symbol
     * out of reach the runtime goes through a veneer, so no PLT is needed. */
    case R_X86_64_PLT32: *patch = SG_PATCH_X86_BRANCH32; return true;
    case R_X86_64_PC32: *patch = SG_PATCH_PCREL32; return true;
    case R_X86_64_GOTPCREL:
    case R_X86_64_GOTPCRELX:
    case R_X86_64_REX_GOTPCRELX: *patch = SG_PATCH_GOTPCREL32; return true;
    default: return false;
    }
}

/* `jmp rel32` (E9) as the last instruction, its field being the hole. */
static size_t trailing_jump(const uint8_t *code, size_t size, uint32_t hole_offset,
                            sg_patch patch, int64_t addend)
{
    if (size < 5 || hole_offset != size - 4 || patch != SG_PATCH_X86_BRANCH32 || addend != -4)
        return 0;
    return code[size - 5] == 0xe9 ? 5 : 0;
}

/* Jcc rel8 (70+cc) and JMP rel8 (EB) grow to Jcc rel32 (0F 80+cc) and JMP
 * rel32 (E9); the rel32 forms stay. Displacements count from the end. */
static bool long_branch(const uint8_t *insn, unsigned size, uint8_t *out, unsigned *out_size,
                        unsigned *field, sg_patch *patch, int64_t *addend)
{
    if (size == 2 && insn[0] >= 0x70 && insn[0] <= 0x7f) {
        out[0] = 0x0f, out[1] = (uint8_t)(0x80 + (insn[0] - 0x70)), *out_size = 6;
    } else if (size == 2 && insn[0] == 0xeb) {
        out[0] = 0xe9, *out_size = 5;
    } else if (size == 6 && insn[0] == 0x0f && insn[1] >= 0x80 && insn[1] <= 0x8f) {
        out[0] = insn[0], out[1] = insn[1], *out_size = 6;
    } else if (size == 5 && insn[0] == 0xe9) {
        out[0] = 0xe9, *out_size = 5;
    } else {
        return false;
    }
    *field = *out_size - 4;
    memset(out + *field, 0, 4);
    *patch = SG_PATCH_PCREL32;
    *addend = -4; /* S + A - P, P being the field, is the displacement from its end */
    return true;
}

static bool set_branch(uint8_t *insn, unsigned size, int64_t disp)
{
    int64_t rel = disp - (int64_t)size;
    if (size == 2) {
        if (rel < INT8_MIN || rel > INT8_MAX)
            return false;
        insn[1] = (uint8_t)(int8_t)rel;
        return true;
    }
    if (rel < INT32_MIN || rel > INT32_MAX)
        return false;
    uint32_t v = (uint32_t)(int32_t)rel;
    for (unsigned k = 0; k < 4; k++)
        insn[size - 4 + k] = (uint8_t)(v >> (8 * k));
    return true;
}

static bool invert_branch(uint8_t *insn, unsigned size)
{
    if (size == 2 && insn[0] >= 0x70 && insn[0] <= 0x7f) {
        insn[0] ^= 1; /* the condition codes come in pairs: JO/JNO, JB/JAE, ... */
        return true;
    }
    if (size == 6 && insn[0] == 0x0f && insn[1] >= 0x80 && insn[1] <= 0x8f) {
        insn[1] ^= 1;
        return true;
    }
    return false;
}

static const uint8_t short_jump[] = {0xeb, 0x00}; /* jmp .+2 */

static const char *reg_name(uint32_t r)
{
    /* Windows' shims save xmm6-xmm15 too (DWARF 17-32 are xmm0-xmm15). */
    static const char *const names[] = {
        "rax",  "rdx",  "rcx",  "rbx",   "rsi",   "rdi",   "rbp",   "rsp",   "r8",
        "r9",   "r10",  "r11",  "r12",   "r13",   "r14",   "r15",   "rip",   "xmm0",
        "xmm1", "xmm2", "xmm3", "xmm4",  "xmm5",  "xmm6",  "xmm7",  "xmm8",  "xmm9",
        "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15"};
    return r < sizeof names / sizeof *names ? names[r] : NULL;
}

/* ENTER pushes rbp and then sets it (the "frame pointer" operand of enter);
 * LLVM models its uses but not that write. */
static const char *const fp_writers[] = {"ENTER", NULL};

/* IBT: an indirect call must land on ENDBR64. */
static bool landing_pad(const uint8_t *code, size_t size)
{
    return size >= 4 && code[0] == 0xf3 && code[1] == 0x0f && code[2] == 0x1e && code[3] == 0xfa;
}

static const char *const op_cflags[] = {NULL};
static const char *const shim_cflags[] = {NULL};
static const char *const no_cflags[] = {NULL};

const gen_target sg_target_x86_64_linux = {
    .triple = "x86_64-unknown-linux-gnu",
    .host_condition = "defined(__x86_64__) && defined(__linux__)",
    .op_cflags = op_cflags,
    .shim_cflags = shim_cflags,
    .pic_cflags = sg_elf_pic_cflags,
    .fp_reg = 6,
    .elf_machine = 62, /* EM_X86_64 */
    .fp_writers = fp_writers,
    .reg_name = reg_name,
    .object_format = OBJ_FORMAT_ELF,
    .classify_reloc = classify,
    .trailing_jump = trailing_jump,
    .landing_pad = landing_pad,
    .landing_pad_flag = "-fcf-protection=branch (or full)",
    .long_branch = long_branch,
    .set_branch = set_branch,
    .invert_branch = invert_branch,
    .short_jump = short_jump,
    .short_jump_size = sizeof short_jump,
};

/* COFF relocation numbers, from the PE/COFF specification. */
enum {
    IMAGE_REL_AMD64_ADDR64 = 1,
    IMAGE_REL_AMD64_ADDR32 = 2,
    IMAGE_REL_AMD64_REL32 = 4,
    IMAGE_REL_AMD64_REL32_5 = 9,
};

/* Whether the 4-byte field at `field` is a branch's displacement: it follows
 * the opcode of a call (E8), a jump (E9) or a conditional jump (0F 8x). */
static bool after_branch_opcode(const uint8_t *bytes, uint64_t field)
{
    uint8_t before = bytes[field - 1];
    bool jcc = field >= 2 && bytes[field - 2] == 0x0f && (before & 0xf0) == 0x80;
    return before == 0xe8 || before == 0xe9 || jcc;
}

/* COFF has one PC-relative type for calls, jumps and data references alike
 * (ELF says PLT32 or PC32). A branch's field follows its opcode and may go
 * through a veneer; a data reference's follows a ModRM byte that selects
 * RIP-relative addressing (mod 00, r/m 101). */
static bool classify_coff(uint32_t type, const uint8_t *bytes, uint64_t size, uint64_t field,
                          sg_patch *patch)
{
    if (type == IMAGE_REL_AMD64_ADDR64) {
        *patch = SG_PATCH_ABS64;
        return true;
    }
    if (type == IMAGE_REL_AMD64_ADDR32) {
        *patch = SG_PATCH_ABS32;
        return true;
    }
    if (type < IMAGE_REL_AMD64_REL32 || type > IMAGE_REL_AMD64_REL32_5 || !bytes || field < 1 ||
        field > size)
        return false;
    if (type == IMAGE_REL_AMD64_REL32 && after_branch_opcode(bytes, field)) {
        *patch = SG_PATCH_X86_BRANCH32;
        return true;
    }
    if ((bytes[field - 1] & 0xc7) == 0x05) {
        *patch = SG_PATCH_PCREL32;
        return true;
    }
    return false;
}

/* Windows x64, in either environment: COFF code is position-independent as
 * compiled. Hot and cold parts take the same instructions as on ELF: the
 * jumps between the parts are holes of their own (PCREL32, never a veneer),
 * and the executor's one RUNTIME_FUNCTION covers its cold parts
 * (docs/platforms.md, "Hot and cold parts on Windows"). */
#define WIN64_COFF_FIELDS                                                                \
    .pic_cflags = no_cflags,                                                           \
    .fp_reg = 6, .elf_machine = 62, /* EM_X86_64, whatever the format */             \
    .object_format = OBJ_FORMAT_COFF, .win_unwind = WIN_UNWIND_X64,                    \
    .fp_writers = fp_writers, .reg_name = reg_name,                                    \
    .classify_reloc = classify_coff, .trailing_jump = trailing_jump,                   \
    .landing_pad = landing_pad, .landing_pad_flag = "-fcf-protection=branch (or full)", \
    .long_branch = long_branch, .set_branch = set_branch, .invert_branch = invert_branch, \
    .short_jump = short_jump, .short_jump_size = sizeof short_jump

const gen_target sg_target_x86_64_windows = {
    .triple = "x86_64-w64-windows-gnu",
    .host_condition = "defined(__x86_64__) && defined(_WIN32)",
    .op_cflags = op_cflags,
    .shim_cflags = shim_cflags,
    WIN64_COFF_FIELDS,
};

/* MSVC's environment makes objects for incremental linking, whose COFF header
 * holds the time of the compile: objects would differ from run to run. */
static const char *const msvc_cflags[] = {"-mno-incremental-linker-compatible", NULL};

/* Windows x64 as MSVC's environment has it: the same ABI, COFF and unwind
 * codes as MinGW-w64's, so the same stencils but for what the environment's
 * headers and predefined macros make of the sources (string literals, for
 * one, become COMDAT symbols of their own). Ops that need no C library build
 * with clang's own headers (<stdint.h>, <stddef.h>) where no Windows SDK is
 * installed. Listed before MinGW's in the dispatcher: `_WIN32` is true for
 * both, `_MSC_VER` for this one only. */
const gen_target sg_target_x86_64_msvc = {
    .triple = "x86_64-pc-windows-msvc",
    .host_condition = "defined(_M_X64) && defined(_MSC_VER) && !defined(_M_ARM64EC)",
    .dispatch_first = true,
    .op_cflags = msvc_cflags,
    .shim_cflags = msvc_cflags,
    WIN64_COFF_FIELDS,
};

/* Mach-O relocation numbers (<mach-o/x86_64/reloc.h>); objfile.h puts the
 * field's log2 width in bits 8-9 of the type. */
enum {
    X86_64_RELOC_UNSIGNED = 0,
    X86_64_RELOC_SIGNED = 1,
    X86_64_RELOC_BRANCH = 2,
    X86_64_RELOC_GOT_LOAD = 3,
    X86_64_RELOC_GOT = 4,
    X86_64_RELOC_SIGNED_1 = 6,
    X86_64_RELOC_SIGNED_2 = 7,
    X86_64_RELOC_SIGNED_4 = 8,
};

static bool classify_macho(uint32_t type, const uint8_t *bytes, uint64_t size, uint64_t field,
                           sg_patch *patch)
{
    (void)bytes, (void)size, (void)field; /* the type says all */
    uint32_t width = 1u << (type >> 8);
    switch (type & 0xff) {
    /* 32-bit absolute addresses do not exist in x86-64 Mach-O code. */
    case X86_64_RELOC_UNSIGNED: *patch = SG_PATCH_ABS64; return width == 8;
    case X86_64_RELOC_BRANCH: *patch = SG_PATCH_X86_BRANCH32; break;
    case X86_64_RELOC_SIGNED:
    case X86_64_RELOC_SIGNED_1:
    case X86_64_RELOC_SIGNED_2:
    case X86_64_RELOC_SIGNED_4: *patch = SG_PATCH_PCREL32; break;
    case X86_64_RELOC_GOT_LOAD:
    case X86_64_RELOC_GOT: *patch = SG_PATCH_GOTPCREL32; break;
    default: return false;
    }
    return width == 4;
}

/* No -fPIC (Mach-O code always is) and no -fno-plt (an unused argument on
 * Darwin); the operating system's headers are not this machine's, and from
 * 11.0 on the shim's __eh_frame needs no relocations. */
static const char *const darwin_cflags[] = {"-mmacosx-version-min=11.0", "-nostdlibinc", NULL};

const gen_target sg_target_x86_64_darwin = {
    .triple = "x86_64-apple-darwin",
    .host_condition = "defined(__x86_64__) && defined(__APPLE__)",
    .op_cflags = darwin_cflags,
    .shim_cflags = darwin_cflags,
    .pic_cflags = no_cflags,
    .fp_reg = 6,
    .elf_machine = 62, /* EM_X86_64 */
    .object_format = OBJ_FORMAT_MACHO,
    .fp_writers = fp_writers,
    .reg_name = reg_name,
    .classify_reloc = classify_macho,
    .trailing_jump = trailing_jump,
    .landing_pad = landing_pad,
    .landing_pad_flag = "-fcf-protection=branch (or full)",
};

/* 32-bit x86 COFF relocation numbers, from the PE/COFF specification. */
enum {
    IMAGE_REL_I386_DIR32 = 6,
    IMAGE_REL_I386_REL32 = 20,
};

/* 32-bit code has no PC-relative data references: REL32 is a call's or a
 * jump's (E8, E9, 0F 8x), and an address is a DIR32, in code or data. */
static bool classify_i386(uint32_t type, const uint8_t *bytes, uint64_t size, uint64_t field,
                          sg_patch *patch)
{
    if (type == IMAGE_REL_I386_DIR32) {
        *patch = SG_PATCH_ABS32;
        return true;
    }
    if (type != IMAGE_REL_I386_REL32 || !bytes || field < 1 || field > size)
        return false;
    *patch = SG_PATCH_X86_BRANCH32;
    return after_branch_opcode(bytes, field);
}

/* DWARF numbers of the i386 psABI. */
static const char *reg_name_i386(uint32_t r)
{
    static const char *const names[] = {"eax", "ecx", "edx", "ebx", "esp",
                                        "ebp", "esi", "edi", "eip"};
    return r < sizeof names / sizeof *names ? names[r] : NULL;
}

/* IBT on 32-bit x86: an indirect call must land on ENDBR32. */
static bool landing_pad_i386(const uint8_t *code, size_t size)
{
    return size >= 4 && code[0] == 0xf3 && code[1] == 0x0f && code[2] == 0x1e && code[3] == 0xfb;
}

/* 32-bit Windows in MSVC's environment. No .pdata: x86 Windows unwinds by
 * the ebp chain where a function has no FPO data, so the shim's frame is
 * read from its prolog (fp_chain.h) and must put it on the chain. Ops use
 * regcall (stencil_op.h). Ops keep whole: no hot and cold parts here. */
const gen_target sg_target_i686_windows = {
    .triple = "i686-pc-windows-msvc",
    .host_condition = "(defined(_M_IX86) || defined(__i386__)) && defined(_WIN32)",
    .op_cflags = msvc_cflags,
    .shim_cflags = msvc_cflags,
    .pic_cflags = no_cflags,
    .fp_reg = 5,       /* ebp */
    .elf_machine = 3,  /* EM_386 */
    .object_format = OBJ_FORMAT_COFF,
    .win_unwind = WIN_UNWIND_X86_FP,
    .fp_writers = fp_writers,
    .reg_name = reg_name_i386,
    .classify_reloc = classify_i386,
    .trailing_jump = trailing_jump,
    .landing_pad = landing_pad_i386,
    .landing_pad_flag = "-fcf-protection=branch (or full)",
};
