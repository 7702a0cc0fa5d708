/* stencil.h - turn a compiled op (or the shim) into a stencil: code and
 * read-only data laid out back to back, and the holes the runtime patches. */
#ifndef STENCILGEN_STENCIL_H
#define STENCILGEN_STENCIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "diag.h"
#include "llvm_bridge.h"
#include "objfile.h"
#include "target.h"

/* The symbols an op refers to for its holes, as the template declares them:
 * _JIT_OPERAND0 .. _JIT_OPERAND<SG_OPERANDS - 1>, and the op's entry point. */
#define SG_HOLE_CONTINUE "_JIT_CONTINUE"
#define SG_HOLE_JUMP_TARGET "_JIT_JUMP_TARGET"
#define SG_HOLE_OPERAND_PREFIX "_JIT_OPERAND"
#define SG_HOLE_ENTRY "_JIT_ENTRY"

typedef struct gen_hole {
    uint32_t offset; /* in the stencil's code or data */
    sg_patch patch;
    sg_value value;
    uint32_t index;      /* operand or symbol number */
    int64_t addend;
    char reloc[40];      /* the relocation it came from, for comments */
    char symbol[64];     /* the symbol it referred to, for comments */
} gen_hole;

/* One instruction of a stencil's code, decoded once (stencil_disassemble) for
 * the frame-pointer check, the header's listing and `dump`. */
typedef struct gen_insn {
    uint32_t offset; /* in code */
    uint32_t size;   /* 1 for a byte that does not decode */
    uint32_t text;   /* offset of its NUL-terminated text in gen_stencil.insn_text */
    bool decoded;    /* false: an undecodable byte, text "<undecodable>" */
    bool writes_fp;  /* defines the frame-pointer register or any part of it */
    /* Fresh decodes only (a cached stencil was checked before it was cached):
     * calls, and where a direct branch or call goes, or the code or data a
     * PC-relative operand names, as an offset from the code's start. */
    bool is_call, is_indirect;
    int32_t call_reg; /* an indirect call through one register: its DWARF number, else -1 */
    uint64_t defs;    /* DWARF registers 0..63 it writes (bit n: register n) */
    bool has_target, target_is_branch;
    int64_t target;
} gen_insn;

typedef struct gen_stencil {
    char *name;    /* op name, or the shim function's name */
    char *source;  /* manifest-relative path of the source, for comments */
    unsigned line, col;
    uint8_t *code;
    size_t code_size;
    uint8_t *data;
    size_t data_size;
    size_t data_align;
    gen_hole *code_holes;
    size_t ncode_holes;
    gen_hole *data_holes;
    size_t ndata_holes;
    size_t entry;            /* offset of the entry point in code */
    size_t removed_jump;     /* bytes of trailing jump to the continuation removed */
    gen_insn *insns;          /* tile code[0, code_size) in order */
    size_t ninsns;
    char *insn_text;         /* the instructions' texts, back to back */
    size_t insn_text_size;
} gen_stencil;

/* Everything the extraction needs to know besides the object itself. */
typedef struct gen_extract_ctx {
    const gen_target *target;
    const gen_where *where;     /* the op's source and label, for messages */
    const char *entry_symbol;  /* "_JIT_ENTRY" or the shim function */
    char *const *symbols;      /* run-time symbols from the manifest */
    size_t nsymbols;
    bool remove_trailing_jump; /* ops: yes; the shim: no */
    lb_disasm *disasm;         /* to name the instruction in diagnostics */
} gen_extract_ctx;

/* Fills *s from the object. On a problem prints a diagnostic naming the op,
 * target, section, offset and relocation, and returns false (exit code 1). */
bool stencil_extract(const objfile *obj, const gen_extract_ctx *ctx, gen_stencil *s);
/* Decodes s->code (final: after stencil_extract) into s->insns, once. */
void stencil_disassemble(gen_stencil *s, lb_disasm *d);
static inline const char *stencil_insn_text(const gen_stencil *s, const gen_insn *in)
{
    return s->insn_text + in->text;
}
void stencil_free(gen_stencil *s);

/* What a set of stencils adds up to (for summaries). */
typedef struct gen_totals {
    size_t code, data, holes;
    size_t by_patch[SG_PATCH__COUNT];
} gen_totals;

/* Of s[0..n), those that are their own stencil (twin[k] == k; twin NULL: all). */
gen_totals stencil_totals(const gen_stencil *s, size_t n, const size_t *twin);

#endif
