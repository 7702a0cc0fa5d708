/* abi.h - the stencil model that generated headers describe to the runtime.
 *
 * The writer emits these enums into every generated header from the tables in
 * abi.c, so the generator and the runtime can never disagree on a number. */
#ifndef STENCILGEN_ABI_H
#define STENCILGEN_ABI_H

#include <stdbool.h>
#include <stdint.h>

/* How a hole's bytes are written (P = address of the hole, S = value, A = addend). */
typedef enum sg_patch {
    SG_PATCH_ABS64,      /* 64-bit S + A */
    SG_PATCH_ABS32,      /* 32-bit S + A, must fit unsigned */
    SG_PATCH_ABS32S,     /* 32-bit S + A, must fit signed */
    SG_PATCH_PCREL32,    /* 32-bit S + A - P */
    SG_PATCH_GOTPCREL32, /* 32-bit G + A - P, G = address of a GOT slot holding S */
    /* AArch64 (patches write an instruction's immediate field; Page(x) =
     * x & ~0xfff; G = address of a GOT slot holding S; out of range or
     * misaligned is an error, except calls and jumps to run-time symbols,
     * which the runtime sends through a veneer when out of range). */
    SG_PATCH_AARCH64_BRANCH26,     /* B, BL: (S + A - P) >> 2, +-128 MiB */
    SG_PATCH_AARCH64_PCREL19,      /* B.cond, CBZ, CBNZ, LDR literal: (S + A - P) >> 2, +-1 MiB */
    SG_PATCH_AARCH64_TSTBR14,      /* TBZ, TBNZ: (S + A - P) >> 2, +-32 KiB */
    SG_PATCH_AARCH64_ADR21,        /* ADR: S + A - P, +-1 MiB */
    SG_PATCH_AARCH64_ADRP,         /* ADRP: (Page(S + A) - Page(P)) >> 12, +-4 GiB */
    SG_PATCH_AARCH64_ADD_LO12,     /* ADD: (S + A) & 0xfff */
    SG_PATCH_AARCH64_LDST8_LO12,   /* LDR/STR byte: (S + A) & 0xfff */
    SG_PATCH_AARCH64_LDST16_LO12,  /* LDR/STR half: ((S + A) & 0xfff) >> 1, 2-aligned */
    SG_PATCH_AARCH64_LDST32_LO12,  /* LDR/STR word: ((S + A) & 0xfff) >> 2, 4-aligned */
    SG_PATCH_AARCH64_LDST64_LO12,  /* LDR/STR double: ((S + A) & 0xfff) >> 3, 8-aligned */
    SG_PATCH_AARCH64_LDST128_LO12, /* LDR/STR quad: ((S + A) & 0xfff) >> 4, 16-aligned */
    SG_PATCH_AARCH64_GOT_ADRP,     /* ADRP: (Page(G + A) - Page(P)) >> 12 */
    SG_PATCH_AARCH64_GOT_LO12,     /* LDR double: ((G + A) & 0xfff) >> 3 */
    SG_PATCH_AARCH64_GOT_PCREL19,  /* LDR literal: (G + A - P) >> 2, +-1 MiB */
    SG_PATCH_AARCH64_MOVW_G0,      /* MOVZ/MOVK: S + A, must fit 16 bits */
    SG_PATCH_AARCH64_MOVW_G0_NC,   /* MOVK: (S + A) & 0xffff */
    SG_PATCH_AARCH64_MOVW_G1,      /* MOVZ/MOVK: (S + A) >> 16, must fit 32 bits */
    SG_PATCH_AARCH64_MOVW_G1_NC,   /* MOVK: ((S + A) >> 16) & 0xffff */
    SG_PATCH_AARCH64_MOVW_G2,      /* MOVZ/MOVK: (S + A) >> 32, must fit 48 bits */
    SG_PATCH_AARCH64_MOVW_G2_NC,   /* MOVK: ((S + A) >> 32) & 0xffff */
    SG_PATCH_AARCH64_MOVW_G3,      /* MOVZ/MOVK: (S + A) >> 48 */
    SG_PATCH__COUNT
} sg_patch;

/* What S is. */
typedef enum sg_value {
    SG_VALUE_CODE,        /* this stencil's code */
    SG_VALUE_DATA,        /* this stencil's read-only data */
    SG_VALUE_CONTINUE,    /* the next instruction's code */
    SG_VALUE_JUMP_TARGET, /* the code of the instruction this one jumps to */
    SG_VALUE_OPERAND,     /* operand number `index` of the instruction */
    SG_VALUE_SYMBOL,      /* run-time symbol number `index` (manifest order) */
    SG_VALUE__COUNT
} sg_value;

/* Hole-symbol spellings used by the template. */
#define SG_HOLE_CONTINUE "_JIT_CONTINUE"
#define SG_HOLE_JUMP_TARGET "_JIT_JUMP_TARGET"
#define SG_HOLE_OPERAND_PREFIX "_JIT_OPERAND"
#define SG_HOLE_ENTRY "_JIT_ENTRY"
#define SG_MAX_OPERANDS 4

extern const char *const sg_patch_names[SG_PATCH__COUNT]; /* "SG_PATCH_ABS64", ... */
extern const char *const sg_value_names[SG_VALUE__COUNT];
extern const char *const sg_patch_docs[SG_PATCH__COUNT];
extern const char *const sg_value_docs[SG_VALUE__COUNT];

/* How generated emitters write a kind: a patch formula of the ABI block
 * (abi_header.c), called as fn(p, v<args>). */
typedef struct sg_patch_call {
    const char *fn;
    const char *args;
} sg_patch_call;
extern const sg_patch_call sg_patch_calls[SG_PATCH__COUNT];

/* The value written is the address of a GOT slot holding S, not S. */
bool sg_patch_uses_got(sg_patch p);

#endif
