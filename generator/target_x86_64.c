/* target_x86_64.c - x86-64 Linux, ELF. */
#include "target.h"

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

static bool classify(uint32_t type, sg_patch *patch)
{
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

static const char *reg_name(uint32_t r)
{
    static const char *const names[] = {"rax", "rdx", "rcx", "rbx", "rsi", "rdi",
                                        "rbp", "rsp", "r8",  "r9",  "r10", "r11",
                                        "r12", "r13", "r14", "r15", "rip"};
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

const sg_target sg_target_x86_64_linux = {
    .triple = "x86_64-unknown-linux-gnu",
    .host_condition = "defined(__x86_64__) && defined(__linux__)",
    .op_cflags = op_cflags,
    .shim_cflags = shim_cflags,
    .fp_reg = 6,
    .elf_machine = 62, /* EM_X86_64 */
    .fp_writers = fp_writers,
    .reg_name = reg_name,
    .classify_reloc = classify,
    .trailing_jump = trailing_jump,
    .landing_pad = landing_pad,
    .landing_pad_flag = "-fcf-protection=branch (or full)",
};
