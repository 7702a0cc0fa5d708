/* abi.c - names and one-line documentation of the ABI enums (see abi.h). */
#include "abi.h"

const char *const sg_patch_names[SG_PATCH__COUNT] = {
    "SG_PATCH_ABS64", "SG_PATCH_ABS32", "SG_PATCH_ABS32S", "SG_PATCH_PCREL32",
    "SG_PATCH_GOTPCREL32",
    "SG_PATCH_AARCH64_BRANCH26",
    "SG_PATCH_AARCH64_PCREL19",
    "SG_PATCH_AARCH64_TSTBR14",
    "SG_PATCH_AARCH64_ADR21",
    "SG_PATCH_AARCH64_ADRP",
    "SG_PATCH_AARCH64_ADD_LO12",
    "SG_PATCH_AARCH64_LDST8_LO12",
    "SG_PATCH_AARCH64_LDST16_LO12",
    "SG_PATCH_AARCH64_LDST32_LO12",
    "SG_PATCH_AARCH64_LDST64_LO12",
    "SG_PATCH_AARCH64_LDST128_LO12",
    "SG_PATCH_AARCH64_GOT_ADRP",
    "SG_PATCH_AARCH64_GOT_LO12",
    "SG_PATCH_AARCH64_GOT_PCREL19",
    "SG_PATCH_AARCH64_MOVW_G0",
    "SG_PATCH_AARCH64_MOVW_G0_NC",
    "SG_PATCH_AARCH64_MOVW_G1",
    "SG_PATCH_AARCH64_MOVW_G1_NC",
    "SG_PATCH_AARCH64_MOVW_G2",
    "SG_PATCH_AARCH64_MOVW_G2_NC",
    "SG_PATCH_AARCH64_MOVW_G3",
};

const char *const sg_patch_docs[SG_PATCH__COUNT] = {
    "64-bit S + A",
    "32-bit S + A, must fit unsigned",
    "32-bit S + A, must fit signed",
    "32-bit S + A - P, must fit signed",
    "32-bit G + A - P, G = GOT slot holding S",
    "AArch64 B, BL: (S + A - P) >> 2, +-128 MiB (run-time symbols: via a veneer beyond)",
    "AArch64 B.cond, CBZ, CBNZ, LDR literal: (S + A - P) >> 2, +-1 MiB",
    "AArch64 TBZ, TBNZ: (S + A - P) >> 2, +-32 KiB",
    "AArch64 ADR: S + A - P, +-1 MiB",
    "AArch64 ADRP: (Page(S + A) - Page(P)) >> 12, +-4 GiB",
    "AArch64 ADD: (S + A) & 0xfff",
    "AArch64 LDR/STR byte: (S + A) & 0xfff",
    "AArch64 LDR/STR half: ((S + A) & 0xfff) >> 1, 2-aligned",
    "AArch64 LDR/STR word: ((S + A) & 0xfff) >> 2, 4-aligned",
    "AArch64 LDR/STR double: ((S + A) & 0xfff) >> 3, 8-aligned",
    "AArch64 LDR/STR quad: ((S + A) & 0xfff) >> 4, 16-aligned",
    "AArch64 ADRP: (Page(G + A) - Page(P)) >> 12, G = GOT slot holding S",
    "AArch64 LDR double: ((G + A) & 0xfff) >> 3, G = GOT slot holding S",
    "AArch64 LDR literal: (G + A - P) >> 2, +-1 MiB, G = GOT slot holding S",
    "AArch64 MOVZ/MOVK: S + A, must fit 16 bits unsigned",
    "AArch64 MOVK: (S + A) & 0xffff",
    "AArch64 MOVZ/MOVK: (S + A) >> 16, S + A must fit 32 bits unsigned",
    "AArch64 MOVK: ((S + A) >> 16) & 0xffff",
    "AArch64 MOVZ/MOVK: (S + A) >> 32, S + A must fit 48 bits unsigned",
    "AArch64 MOVK: ((S + A) >> 32) & 0xffff",
    "AArch64 MOVZ/MOVK: (S + A) >> 48",
};

const char *const sg_value_names[SG_VALUE__COUNT] = {
    "SG_VALUE_CODE",    "SG_VALUE_DATA",    "SG_VALUE_CONTINUE",
    "SG_VALUE_JUMP_TARGET", "SG_VALUE_OPERAND", "SG_VALUE_SYMBOL",
};

const char *const sg_value_docs[SG_VALUE__COUNT] = {
    "this stencil's code",
    "this stencil's read-only data",
    "the next instruction's code",
    "the jump target's code",
    "operand number `index`",
    "run-time symbol number `index`",
};

const sg_patch_call sg_patch_calls[SG_PATCH__COUNT] = {
    [SG_PATCH_ABS64] = {"sg_patch_abs64", ""},
    [SG_PATCH_ABS32] = {"sg_patch_abs32", ""},
    [SG_PATCH_ABS32S] = {"sg_patch_abs32s", ""},
    [SG_PATCH_PCREL32] = {"sg_patch_pcrel32", ""},
    [SG_PATCH_GOTPCREL32] = {"sg_patch_pcrel32", ""},
    [SG_PATCH_AARCH64_BRANCH26] = {"sg_patch_a64_pcrel", ", 0, 26"},
    [SG_PATCH_AARCH64_PCREL19] = {"sg_patch_a64_pcrel", ", 5, 19"},
    [SG_PATCH_AARCH64_TSTBR14] = {"sg_patch_a64_pcrel", ", 5, 14"},
    [SG_PATCH_AARCH64_ADR21] = {"sg_patch_a64_adr21", ""},
    [SG_PATCH_AARCH64_ADRP] = {"sg_patch_a64_adrp", ""},
    [SG_PATCH_AARCH64_ADD_LO12] = {"sg_patch_a64_lo12", ", 0"},
    [SG_PATCH_AARCH64_LDST8_LO12] = {"sg_patch_a64_lo12", ", 0"},
    [SG_PATCH_AARCH64_LDST16_LO12] = {"sg_patch_a64_lo12", ", 1"},
    [SG_PATCH_AARCH64_LDST32_LO12] = {"sg_patch_a64_lo12", ", 2"},
    [SG_PATCH_AARCH64_LDST64_LO12] = {"sg_patch_a64_lo12", ", 3"},
    [SG_PATCH_AARCH64_LDST128_LO12] = {"sg_patch_a64_lo12", ", 4"},
    [SG_PATCH_AARCH64_GOT_ADRP] = {"sg_patch_a64_adrp", ""},
    [SG_PATCH_AARCH64_GOT_LO12] = {"sg_patch_a64_lo12", ", 3"},
    [SG_PATCH_AARCH64_GOT_PCREL19] = {"sg_patch_a64_pcrel", ", 5, 19"},
    [SG_PATCH_AARCH64_MOVW_G0] = {"sg_patch_a64_movw", ", 0, 1"},
    [SG_PATCH_AARCH64_MOVW_G0_NC] = {"sg_patch_a64_movw", ", 0, 0"},
    [SG_PATCH_AARCH64_MOVW_G1] = {"sg_patch_a64_movw", ", 1, 1"},
    [SG_PATCH_AARCH64_MOVW_G1_NC] = {"sg_patch_a64_movw", ", 1, 0"},
    [SG_PATCH_AARCH64_MOVW_G2] = {"sg_patch_a64_movw", ", 2, 1"},
    [SG_PATCH_AARCH64_MOVW_G2_NC] = {"sg_patch_a64_movw", ", 2, 0"},
    [SG_PATCH_AARCH64_MOVW_G3] = {"sg_patch_a64_movw", ", 3, 0"},
};

bool sg_patch_uses_got(sg_patch p)
{
    return p == SG_PATCH_GOTPCREL32 || p == SG_PATCH_AARCH64_GOT_ADRP ||
           p == SG_PATCH_AARCH64_GOT_LO12 || p == SG_PATCH_AARCH64_GOT_PCREL19;
}
