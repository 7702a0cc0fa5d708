/* abi.h - the stencil model that generated headers describe to the runtime.
 *
 * The writer emits these enums into every generated header from the tables in
 * abi.c, so the generator and the runtime can never disagree on a number. */
#ifndef STENCILGEN_ABI_H
#define STENCILGEN_ABI_H

#include <stdint.h>

/* How a hole's bytes are written (P = address of the hole, S = value, A = addend). */
typedef enum sg_patch {
    SG_PATCH_ABS64,      /* 64-bit S + A */
    SG_PATCH_ABS32,      /* 32-bit S + A, must fit unsigned */
    SG_PATCH_ABS32S,     /* 32-bit S + A, must fit signed */
    SG_PATCH_PCREL32,    /* 32-bit S + A - P */
    SG_PATCH_GOTPCREL32, /* 32-bit G + A - P, G = address of a GOT slot holding S */
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

#endif
