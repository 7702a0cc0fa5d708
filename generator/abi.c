/* abi.c - names and one-line documentation of the ABI enums (see abi.h). */
#include "abi.h"

const char *const sg_patch_names[SG_PATCH__COUNT] = {
    "SG_PATCH_ABS64", "SG_PATCH_ABS32", "SG_PATCH_ABS32S", "SG_PATCH_PCREL32",
    "SG_PATCH_GOTPCREL32",
};

const char *const sg_patch_docs[SG_PATCH__COUNT] = {
    "64-bit S + A",
    "32-bit S + A, must fit unsigned",
    "32-bit S + A, must fit signed",
    "32-bit S + A - P, must fit signed",
    "32-bit G + A - P, G = GOT slot holding S",
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
