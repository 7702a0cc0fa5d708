/* stencilrt_abi.h - the stencil ABI: how a generated header describes stencils
 * to the runtime, written once.
 *
 * The runtime (stencilrt.h), every generated header and the generator itself
 * include this file; nothing else spells out a patch kind, a formula or the
 * structs below. A generated header records the SG_ABI_VERSION it was written
 * for and refuses (#error) to compile against any other.
 *
 * Adding a patch kind: one row in SG_PATCH_KINDS (with a formula below, if none
 * of them fits), then the relocation that produces it in the generator's
 * target_<arch>.c. Everything else (the enum, the per-kind functions, the
 * table-driven switch, the predicates, names in listings and messages) follows
 * from the row. Rows are only ever appended, and a new row or a changed one
 * bumps SG_ABI_VERSION, as does a new constant every header must define
 * (version 4: SG_TARGET_LANDING_PADS and SG_UNWIND_RA_SIGNED; version 5: a
 * hole's address as the code runs is passed apart from where it is written;
 * version 6: an instruction's holes holding the same value share a GOT slot;
 * version 7: one emitter function writes a group of stencils, told which by
 * the stencil's emit_case; stencils' cold parts, sg_cold_sizes and
 * SG_VALUE_COLD).
 *
 * JIT memory may be mapped twice, written through one view and run through
 * the other: every formula writes at p and computes with P, its address in
 * the running view; every address a value names is in the running view too.
 *
 * Notation: P = the hole's address as the code runs, S = its value, A = its addend, G = the
 * address of a GOT slot holding S (sg_got_key), Page(x) = x & ~0xfff.
 * Holes are little-endian: both targets are, and stencils are patched on the
 * machine that runs them. */
#ifndef STENCILRT_ABI_H
#define STENCILRT_ABI_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define SG_ABI_VERSION 7

/* Operands per VM instruction (SG_VALUE_OPERAND indexes 0 .. SG_OPERANDS - 1). */
#define SG_OPERANDS 4

/* X(NAME, formula, a, b, got, veneer, bias, what it writes): each kind is
 * written by formula(p, P, v, a, b), where v = S + A, or G + A when `got` is 1.
 * `veneer`: a branch to a run-time symbol or an operand that does not reach
 * is sent through a veneer (sg_patch_veneered) instead of failing; it jumps
 * to v + bias, the branch's target (x86-64 counts rel32 from the end of the
 * field, 4 bytes after P, so its A holds -4 that the target does not). */
#define SG_PATCH_KINDS(X)                                                                          \
    X(ABS64, sg_put_abs, 64, 0, 0, 0, 0, "64-bit S + A")                                           \
    X(ABS32, sg_put_abs, 32, 0, 0, 0, 0, "32-bit S + A, must fit unsigned")                        \
    X(ABS32S, sg_put_abs, 32, 1, 0, 0, 0, "32-bit S + A, must fit signed")                         \
    X(PCREL32, sg_put_pcrel, 32, 1, 0, 0, 0, "32-bit S + A - P, must fit signed")                  \
    X(GOTPCREL32, sg_put_pcrel, 32, 1, 1, 0, 0, "32-bit G + A - P, must fit signed")               \
    X(AARCH64_BRANCH26, sg_put_a64_branch, 0, 26, 0, 1, 0,                                         \
      "B, BL: (S + A - P) >> 2, +-128 MiB")                                                        \
    X(AARCH64_PCREL19, sg_put_a64_branch, 5, 19, 0, 0, 0,                                          \
      "B.cond, CBZ, CBNZ, LDR literal: (S + A - P) >> 2, +-1 MiB")                                 \
    X(AARCH64_TSTBR14, sg_put_a64_branch, 5, 14, 0, 0, 0, "TBZ, TBNZ: (S + A - P) >> 2, +-32 KiB") \
    X(AARCH64_ADR21, sg_put_a64_adr, 0, 0, 0, 0, 0, "ADR: S + A - P, +-1 MiB")                     \
    X(AARCH64_ADRP, sg_put_a64_adr, 12, 0, 0, 0, 0,                                                \
      "ADRP: (Page(S + A) - Page(P)) >> 12, +-4 GiB")                                              \
    X(AARCH64_ADD_LO12, sg_put_a64_lo12, 0, 0, 0, 0, 0, "ADD: (S + A) & 0xfff")                    \
    X(AARCH64_LDST8_LO12, sg_put_a64_lo12, 0, 0, 0, 0, 0, "LDR/STR byte: (S + A) & 0xfff")         \
    X(AARCH64_LDST16_LO12, sg_put_a64_lo12, 1, 0, 0, 0, 0,                                         \
      "LDR/STR half: ((S + A) & 0xfff) >> 1, 2-aligned")                                           \
    X(AARCH64_LDST32_LO12, sg_put_a64_lo12, 2, 0, 0, 0, 0,                                         \
      "LDR/STR word: ((S + A) & 0xfff) >> 2, 4-aligned")                                           \
    X(AARCH64_LDST64_LO12, sg_put_a64_lo12, 3, 0, 0, 0, 0,                                         \
      "LDR/STR double: ((S + A) & 0xfff) >> 3, 8-aligned")                                         \
    X(AARCH64_LDST128_LO12, sg_put_a64_lo12, 4, 0, 0, 0, 0,                                        \
      "LDR/STR quad: ((S + A) & 0xfff) >> 4, 16-aligned")                                          \
    X(AARCH64_GOT_ADRP, sg_put_a64_adr, 12, 0, 1, 0, 0, "ADRP: (Page(G + A) - Page(P)) >> 12")     \
    X(AARCH64_GOT_LO12, sg_put_a64_lo12, 3, 0, 1, 0, 0,                                            \
      "LDR double: ((G + A) & 0xfff) >> 3, 8-aligned")                                             \
    X(AARCH64_GOT_PCREL19, sg_put_a64_branch, 5, 19, 1, 0, 0,                                      \
      "LDR literal: (G + A - P) >> 2, +-1 MiB")                                                    \
    X(AARCH64_MOVW_G0, sg_put_a64_movw, 0, 1, 0, 0, 0, "MOVZ/MOVK: S + A, must fit 16 bits")       \
    X(AARCH64_MOVW_G0_NC, sg_put_a64_movw, 0, 0, 0, 0, 0, "MOVK: (S + A) & 0xffff")                \
    X(AARCH64_MOVW_G1, sg_put_a64_movw, 1, 1, 0, 0, 0,                                             \
      "MOVZ/MOVK: (S + A) >> 16, must fit 32 bits")                                                \
    X(AARCH64_MOVW_G1_NC, sg_put_a64_movw, 1, 0, 0, 0, 0, "MOVK: ((S + A) >> 16) & 0xffff")        \
    X(AARCH64_MOVW_G2, sg_put_a64_movw, 2, 1, 0, 0, 0,                                             \
      "MOVZ/MOVK: (S + A) >> 32, must fit 48 bits")                                                \
    X(AARCH64_MOVW_G2_NC, sg_put_a64_movw, 2, 0, 0, 0, 0, "MOVK: ((S + A) >> 32) & 0xffff")        \
    X(AARCH64_MOVW_G3, sg_put_a64_movw, 3, 0, 0, 0, 0, "MOVZ/MOVK: (S + A) >> 48")                 \
    X(X86_BRANCH32, sg_put_pcrel, 32, 1, 0, 1, 4, "CALL, JMP, Jcc rel32: S + A - P, +-2 GiB")

/* X(NAME, what S is) */
#define SG_VALUES(X)                                                                               \
    X(CODE, "this stencil's code")                                                                 \
    X(DATA, "this stencil's read-only data")                                                       \
    X(CONTINUE, "the next instruction's code")                                                     \
    X(JUMP_TARGET, "the code of the instruction this one jumps to")                                \
    X(OPERAND, "operand number `index` of the instruction")                                        \
    X(SYMBOL, "run-time symbol number `index` (the manifest's order)")                           \
    X(COLD, "this instruction's cold part")

#define SG_ENUM_ROW_(name, ...) SG_PATCH_##name,
typedef enum sg_patch { SG_PATCH_KINDS(SG_ENUM_ROW_) SG_PATCH__COUNT } sg_patch;
#undef SG_ENUM_ROW_
#define SG_ENUM_ROW_(name, doc) SG_VALUE_##name,
typedef enum sg_value { SG_VALUES(SG_ENUM_ROW_) SG_VALUE__COUNT } sg_value;
#undef SG_ENUM_ROW_

/* One hole of a stencil: where, how, and with what. */
typedef struct sg_hole {
    uint32_t offset; /* in the stencil's code (or data) */
    uint8_t patch;   /* sg_patch */
    uint8_t value;   /* sg_value */
    uint16_t index;  /* operand or symbol number */
    int64_t addend;
} sg_hole;

/* What a stencil's generated emitter needs besides the bytes it copies: the
 * values of its holes (code and data pointers are passed directly, and the
 * next instruction's code follows this one's). Addresses are those of the
 * running view; `delta` takes a written byte there. */
typedef struct sg_emit_env {
    uint64_t delta;              /* the byte written at p runs at (uintptr_t)p + delta */
    uint64_t target;             /* SG_VALUE_JUMP_TARGET */
    const uint64_t *operand;     /* SG_VALUE_OPERAND, SG_OPERANDS of them */
    const void *const *symbol;   /* SG_VALUE_SYMBOL, every one the stencil uses non-NULL */
    const uint64_t *symbol_got;  /* per symbol used through the GOT: its slot's address */
    uint8_t *got_free;           /* the next free GOT slot, for other values */
    uint64_t (*veneer)(void *ctx, uint64_t target); /* address of a jump to target, 0: none */
    void *ctx;
    uint8_t *cold; /* an op with a cold part: where that part is written (SG_VALUE_COLD) */
} sg_emit_env;

/* Copies stencil `which` (its emit_case) of the function's group to `code`
 * and patches its holes there and in its data, already copied to `data` (both
 * in the written view). Returns 0, or 1 + the number of the first hole whose
 * value does not fit (code holes first, then data holes), the stencil then
 * being partly written; SG_EMIT_UNKNOWN for a `which` not in the group. One
 * function per group, not per stencil: a C compiler's cost is mostly per
 * function, and a VM compiles the header on every build. */
typedef unsigned sg_emit_fn(unsigned which, uint8_t *code, uint8_t *data, sg_emit_env *env);
#define SG_EMIT_UNKNOWN 0xffffffffu

typedef struct sg_stencil {
    const char *name;
    const uint8_t *code;
    size_t code_size;
    const uint8_t *data; /* read-only data, placed apart from code */
    size_t data_size;
    size_t data_align;
    const sg_hole *code_holes;
    size_t code_hole_count;
    const sg_hole *data_holes;
    size_t data_hole_count;
    uint8_t falls_through; /* ends by running into the next instruction */
    sg_emit_fn *emit;      /* the holes above as straight-line code; NULL: none */
    uint32_t emit_case;    /* `which` this stencil is to emit */
} sg_stencil;

/* ---- Ops with variants (docs/ops.md, "Variants"). A header whose ops have
 * variants lists them in sg_variant_ops (and requires SG_ABI_VARIANTS); the
 * types and the lookups below are all a VM needs to pick a variant by
 * values known only at run time (SG_OP_VARIANT_<op>() is the constant form). */
#define SG_ABI_VARIANTS 1

typedef struct sg_variant_axis {
    const char *name;
    uint8_t first, last; /* its values, inclusive */
} sg_variant_axis;

typedef struct sg_variant_op {
    const char *name;            /* the op as written: "add" */
    size_t axis_count;           /* 1 to 4 */
    const sg_variant_axis *axes; /* in declaration order */
    size_t count;                /* variants: the product of the axes' spans */
    const uint32_t *stencils;    /* each combination's op (SG_OP_), the last axis fastest */
} sg_variant_op;

/* The op named `name` among ops[0..count), or NULL. (Compared here: this
 * header asks of <string.h> only what the patch formulas use.) */
static inline const sg_variant_op *sg_variant_find(const sg_variant_op *ops, size_t count,
                                                   const char *name)
{
    for (size_t i = 0; i < count; i++) {
        const char *a = ops[i].name, *b = name;
        while (*a && *a == *b)
            a++, b++;
        if (*a == *b)
            return &ops[i];
    }
    return NULL;
}

/* The op (an index of sg_stencils) of op's variant with values[0..n), one
 * per axis in declaration order; UINT32_MAX when n is not its axis count or
 * a value is outside its axis. */
static inline uint32_t sg_variant_stencil(const sg_variant_op *op, const unsigned *values,
                                          size_t n)
{
    if (n != op->axis_count)
        return UINT32_MAX;
    size_t index = 0;
    for (size_t i = 0; i < n; i++) {
        const sg_variant_axis *a = &op->axes[i];
        if (values[i] < a->first || values[i] > a->last)
            return UINT32_MAX;
        index = index * (size_t)(a->last - a->first + 1) + (values[i] - a->first);
    }
    return op->stencils[index];
}

/* ---- The formulas. Each writes v into the hole at p and returns 0, or returns
 * 1 when v does not fit or is misaligned (the hole is then left as it was). */

static inline int sg_fits(int64_t d, unsigned bits, unsigned scale)
{
    int64_t lim = (int64_t)1 << (bits + scale - 1);
    return d >= -lim && d < lim && (d & (((int64_t)1 << scale) - 1)) == 0;
}

/* Replace bits [shift, shift + width) of the AArch64 instruction at p. */
static inline int sg_field(uint8_t *p, unsigned shift, unsigned width, uint64_t f)
{
    uint32_t w, mask = (uint32_t)((((uint64_t)1 << width) - 1) << shift);
    memcpy(&w, p, 4);
    w = (w & ~mask) | ((uint32_t)(f << shift) & mask);
    memcpy(p, &w, 4);
    return 0;
}

/* v as a `bits`-bit (64 or 32) field; 32 bits must fit, signed or not. */
static inline int sg_put_abs(uint8_t *p, uint64_t pc, uint64_t v, unsigned bits,
                             unsigned is_signed)
{
    uint32_t w = (uint32_t)v;
    (void)pc;
    if (bits == 64) {
        memcpy(p, &v, 8);
        return 0;
    }
    if ((is_signed ? v + UINT64_C(0x80000000) : v) > UINT32_MAX)
        return 1;
    memcpy(p, &w, 4);
    return 0;
}

static inline int sg_put_pcrel(uint8_t *p, uint64_t pc, uint64_t v, unsigned bits,
                               unsigned is_signed)
{
    return sg_put_abs(p, pc, v - pc, bits, is_signed);
}

/* B, BL (shift 0, 26 bits); B.cond, CBZ, LDR literal (5, 19); TBZ (5, 14). */
static inline int sg_put_a64_branch(uint8_t *p, uint64_t pc, uint64_t v, unsigned shift,
                                    unsigned bits)
{
    int64_t d = (int64_t)(v - pc);
    return sg_fits(d, bits, 2) ? sg_field(p, shift, bits, (uint64_t)(d >> 2)) : 1;
}

/* ADR (page_bits 0: a byte offset) and ADRP (12: an offset in 4 KiB pages). */
static inline int sg_put_a64_adr(uint8_t *p, uint64_t pc, uint64_t v, unsigned page_bits,
                                 unsigned unused)
{
    uint64_t page = ~(uint64_t)0 << page_bits;
    int64_t d = (int64_t)((v & page) - (pc & page));
    (void)unused;
    if (!sg_fits(d, 21, page_bits))
        return 1;
    d >>= page_bits;
    sg_field(p, 29, 2, (uint64_t)d & 3);
    return sg_field(p, 5, 19, ((uint64_t)d >> 2) & 0x7ffff);
}

/* ADD and LDR/STR: the low 12 bits, counted in units of the access size. */
static inline int sg_put_a64_lo12(uint8_t *p, uint64_t pc, uint64_t v, unsigned scale,
                                  unsigned unused)
{
    (void)pc;
    (void)unused;
    return v & ((1u << scale) - 1) ? 1 : sg_field(p, 10, 12, (v & 0xfff) >> scale);
}

/* MOVZ/MOVK: 16 bits of v; `checked`: the bits above them must be zero. */
static inline int sg_put_a64_movw(uint8_t *p, uint64_t pc, uint64_t v, unsigned group,
                                  unsigned checked)
{
    (void)pc;
    if (checked && group < 3 && v >> (16 * (group + 1)))
        return 1;
    return sg_field(p, 5, 16, (v >> (16 * group)) & 0xffff);
}

/* ---- One function per kind, sg_patch_<NAME>(p, P, v): what generated emitters call. */
#define SG_PATCH_FN_(name, fn, a, b, got, veneer, bias, doc)                                   \
    static inline int sg_patch_##name(uint8_t *p, uint64_t pc, uint64_t v)                     \
    {                                                                                          \
        return fn(p, pc, v, a, b);                                                             \
    }
SG_PATCH_KINDS(SG_PATCH_FN_)
#undef SG_PATCH_FN_

/* The formula of a kind, for table-driven patching: 2 if the kind is unknown. */
static inline int sg_patch_hole(uint8_t *p, uint64_t pc, unsigned kind, uint64_t v)
{
#define SG_CASE_(name, fn, a, b, got, veneer, bias, doc) \
    case SG_PATCH_##name: return fn(p, pc, v, a, b);
    switch (kind) {
    SG_PATCH_KINDS(SG_CASE_)
    default: return 2;
    }
#undef SG_CASE_
}

/* What the runtime and the generator ask of a kind, indexed by sg_patch. */
typedef struct sg_patch_info {
    const char *name; /* "PCREL32" */
    const char *doc;  /* what it writes */
    uint8_t uses_got; /* v is G + A: the value goes into a GOT slot, the hole names the slot */
    uint8_t veneer;   /* may reach its target through a veneer */
    uint8_t bias;     /* a branch's target is v + bias */
} sg_patch_info;
#define SG_INFO_ROW_(name, fn, a, b, got, veneer, bias, doc) {#name, doc, got, veneer, bias},
static const sg_patch_info sg_patch_infos[SG_PATCH__COUNT] = {SG_PATCH_KINDS(SG_INFO_ROW_)};
#undef SG_INFO_ROW_

#define SG_NAME_ROW_(name, doc) #name,
static const char *const sg_value_names[SG_VALUE__COUNT] = {SG_VALUES(SG_NAME_ROW_)};
#undef SG_NAME_ROW_

static inline int sg_patch_uses_got(unsigned kind)
{
    return kind < SG_PATCH__COUNT && sg_patch_infos[kind].uses_got;
}

/* GOT slots. A run-time symbol has one per executor (sg_emit_env.symbol_got).
 * Any other value has one per instruction, shared by every hole of that
 * instruction that holds it: an AArch64 ADRP and its LDR must name the same
 * slot, which two slots would not be when they straddle a page. A generated
 * emitter and the runtime's hole table take them in the same order: as the
 * holes (code, then data) first hold each value. */
#define SG_GOT_KEYS (SG_VALUE_OPERAND + SG_OPERANDS)
static inline unsigned sg_got_key(unsigned value, unsigned index)
{
    return value < SG_VALUE_OPERAND ? value : SG_VALUE_OPERAND + index;
}

/* A branch that goes through a veneer when its target is out of reach: a
 * veneer-capable kind aimed outside the executor (a run-time symbol or an
 * operand; the executor's own code is always in reach). */
static inline int sg_hole_may_use_veneer(unsigned kind, unsigned value)
{
    return kind < SG_PATCH__COUNT && sg_patch_infos[kind].veneer &&
           (value == SG_VALUE_SYMBOL || value == SG_VALUE_OPERAND);
}

/* The address (running view) of a fresh GOT slot holding value. */
static inline uint64_t sg_got(sg_emit_env *env, uint64_t value)
{
    uint8_t *slot = env->got_free;
    memcpy(slot, &value, 8);
    env->got_free = slot + 8;
    return (uintptr_t)slot + env->delta;
}

/* A veneer-capable branch (sg_hole_may_use_veneer): straight to v when it
 * reaches, else to a veneer, placed after the executor's code, that jumps
 * there (AArch64 B/BL +-128 MiB, x86-64 CALL/JMP +-2 GiB). */
static inline int sg_patch_veneered(uint8_t *p, uint64_t pc, unsigned kind, uint64_t v,
                                    const sg_emit_env *env)
{
    uint64_t veneer, bias = kind < SG_PATCH__COUNT ? sg_patch_infos[kind].bias : 0;
    if (!sg_patch_hole(p, pc, kind, v))
        return 0;
    veneer = env->veneer(env->ctx, v + bias);
    return veneer ? sg_patch_hole(p, pc, kind, veneer - bias) : 1;
}

/* Stencil `stencil`, `size` bytes, copied to `code` and its holes h[0, n)
 * patched: what a generated emitter does for a stencil with many holes
 * instead of a copy and a patch each (docs/runtime.md, "Emitters"), as a VM's
 * compile of per-hole code grows with its holes, and an inline copy of each
 * stencil is code too. The generator sends only stencils of one part whose
 * holes' values are at hand: this stencil's code, the next instruction (just
 * after it), the jump target, an operand or a symbol (or the symbol's GOT
 * slot), never through a veneer or a fresh GOT slot. Returns 0, or 1 + the
 * number of the first hole whose value does not fit, as an emitter does. One
 * copy per file, not one per stencil. */
#if defined(__GNUC__)
#define SG_EMIT_TABLE_FN_ static __attribute__((noinline, unused))
#else
#define SG_EMIT_TABLE_FN_ static inline
#endif
SG_EMIT_TABLE_FN_ unsigned sg_emit_table(uint8_t *code, const sg_emit_env *env,
                                         const uint8_t *stencil, unsigned size, const sg_hole *h,
                                         unsigned n)
{
    const uint64_t at = (uintptr_t)code + env->delta, next = at + size;
    unsigned i;
    memcpy(code, stencil, size);
    for (i = 0; i < n; i++) {
        uint64_t s;
        switch ((sg_value)h[i].value) {
        case SG_VALUE_CODE: s = at; break;
        case SG_VALUE_CONTINUE: s = next; break;
        case SG_VALUE_JUMP_TARGET: s = env->target; break;
        case SG_VALUE_OPERAND: s = env->operand[h[i].index]; break;
        default: /* SG_VALUE_SYMBOL */
            s = sg_patch_uses_got(h[i].patch) ? env->symbol_got[h[i].index]
                                               : (uint64_t)(uintptr_t)env->symbol[h[i].index];
            break;
        }
        if (sg_patch_hole(code + h[i].offset, at + h[i].offset, h[i].patch,
                          s + (uint64_t)h[i].addend))
            return i + 1;
    }
    return 0;
}
#undef SG_EMIT_TABLE_FN_

#endif
