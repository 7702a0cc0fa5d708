/* arm64_unwind.c - see arm64_unwind.h. Layout and semantics from the ARM64
 * exception-handling documentation for Windows (.pdata, .xdata, unwind codes
 * and the canonical prolog that packed data describes). */
#include "arm64_unwind.h"

#include <stdlib.h>
#include <string.h>

enum { DWARF_SP = 31, DWARF_FP = 29, DWARF_D0 = 64 };

/* Unwind codes by their first byte (several take a range of it). */
enum {
    OP_SET_FP = 0xe1,
    OP_ADD_FP = 0xe2,
    OP_NOP = 0xe3,
    OP_END = 0xe4,
    OP_END_C = 0xe5,
    OP_SAVE_NEXT = 0xe6,
    OP_PAC_SIGN_LR = 0xfc,
};

static uint32_t word_at(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int a64w_parse_xdata(const uint8_t *data, size_t size, size_t offset, a64w_info *out,
                     cfi_error *err)
{
    *out = (a64w_info){0};
    if (offset > size || size - offset < 4)
        return cfi_fail(err, offset, ".xdata record at 0x%zx: its header is past the end of the "
                                     "section (size 0x%zx)", offset, size);
    const uint8_t *p = data + offset;
    size_t left = size - offset, head = 4;
    uint32_t w = word_at(p);
    out->function_words = w & 0x3ffff;
    unsigned version = (w >> 18) & 3;
    bool handler = (w >> 20) & 1;
    out->single_epilog = (w >> 21) & 1;
    out->epilogs = (w >> 22) & 0x1f;
    out->code_words = w >> 27;
    if (version != 0)
        return cfi_fail(err, offset, ".xdata record at 0x%zx: version %u; stencilgen reads "
                                     "version 0", offset, version);
    if (handler)
        return cfi_fail(err, offset, ".xdata record at 0x%zx: the shim has an exception handler; "
                                     "it must have none", offset);
    if (out->epilogs == 0 && out->code_words == 0) { /* the counts are in a second word */
        if (left < 8)
            return cfi_fail(err, offset, ".xdata record at 0x%zx: its extended header is past the "
                                         "end of the section", offset);
        uint32_t x = word_at(p + 4);
        out->epilogs = x & 0xffff;
        out->code_words = (x >> 16) & 0xff;
        head = 8;
    }
    size_t scopes = out->single_epilog ? 0 : out->epilogs;
    size_t need = head + 4 * scopes + 4 * (size_t)out->code_words;
    if (out->code_words == 0)
        return cfi_fail(err, offset, ".xdata record at 0x%zx: no unwind codes", offset);
    if (left < need)
        return cfi_fail(err, offset, ".xdata record at 0x%zx: %zu epilog scopes and %u code words "
                                     "run past the end of the section (size 0x%zx)",
                        offset, scopes, out->code_words, size);
    out->codes = p + head + 4 * scopes;
    out->size = need;
    return 0;
}

/* Bytes the code starting with `b` takes. */
static unsigned code_length(uint8_t b)
{
    if (b < 0xc0)
        return 1;
    if (b < 0xe0)
        return 2;
    return b == 0xe0 ? 4 : b == OP_ADD_FP ? 2 : b == 0xe7 ? 3 : 1;
}

/* One decoded code: what it does to the frame. */
typedef enum code_kind {
    K_ALLOC,     /* sp -= arg */
    K_SAVE,      /* reg (and reg2) at [sp + arg]; with pre: sp -= pre first */
    K_SET_FP,    /* x29 = sp + arg */
    K_NOP,       /* no unwind effect (nop, homing parameters) */
    K_SIGN_RA,   /* pacibsp */
    K_SAVE_NEXT, /* the pair after the previous pair save */
} code_kind;

typedef struct code {
    code_kind kind;
    uint32_t reg, reg2; /* DWARF numbers; reg2 0: a single register */
    uint32_t arg, pre;
    size_t at; /* byte offset in the codes */
} code;

/* x(19 + n) or d(8 + n), and their pair partners. */
static code save(uint32_t reg, bool pair, uint32_t off, uint32_t pre)
{
    return (code){.kind = K_SAVE, .reg = reg, .reg2 = pair ? reg + 1 : 0, .arg = off,
                  .pre = pre};
}

/* Decode the code at c[0] (code_length bytes); false for one a shim's prolog
 * may not use. */
static bool decode_one(const uint8_t *c, code *out)
{
    uint32_t b = c[0], b1 = code_length(c[0]) > 1 ? c[1] : 0;
    uint32_t z6 = b1 & 0x3f, x4 = ((b & 3) << 2) | (b1 >> 6);
    if (b < 0x20) /* alloc_s */
        *out = (code){.kind = K_ALLOC, .arg = 16 * (b & 0x1f)};
    else if (b < 0x40) /* save_r19r20_x */
        *out = save(19, true, 0, 8 * (b & 0x1f));
    else if (b < 0x80) /* save_fplr */
        *out = save(DWARF_FP, true, 8 * (b & 0x3f), 0);
    else if (b < 0xc0) /* save_fplr_x */
        *out = save(DWARF_FP, true, 0, 8 * ((b & 0x3f) + 1));
    else if (b < 0xc8) /* alloc_m */
        *out = (code){.kind = K_ALLOC, .arg = 16 * (((b & 7) << 8) | b1)};
    else if (b < 0xcc) /* save_regp */
        *out = save(19 + x4, true, 8 * z6, 0);
    else if (b < 0xd0) /* save_regp_x */
        *out = save(19 + x4, true, 0, 8 * (z6 + 1));
    else if (b < 0xd4) /* save_reg */
        *out = save(19 + x4, false, 8 * z6, 0);
    else if (b < 0xd6) /* save_reg_x: 1101010x xxxzzzzz */
        *out = save(19 + (((b & 1) << 3) | (b1 >> 5)), false, 0, 8 * ((b1 & 0x1f) + 1));
    else if (b < 0xd8) { /* save_lrpair: x(19 + 2X) and lr */
        *out = save(19 + 2 * (((b & 1) << 2) | (b1 >> 6)), false, 8 * z6, 0);
        out->reg2 = A64W_RA_COLUMN;
    } else if (b < 0xda) /* save_fregp */
        *out = save(DWARF_D0 + 8 + (((b & 1) << 2) | (b1 >> 6)), true, 8 * z6, 0);
    else if (b < 0xdc) /* save_fregp_x */
        *out = save(DWARF_D0 + 8 + (((b & 1) << 2) | (b1 >> 6)), true, 0, 8 * (z6 + 1));
    else if (b < 0xde) /* save_freg */
        *out = save(DWARF_D0 + 8 + (((b & 1) << 2) | (b1 >> 6)), false, 8 * z6, 0);
    else if (b == 0xde) /* save_freg_x: 11011110 xxxzzzzz */
        *out = save(DWARF_D0 + 8 + (b1 >> 5), false, 0, 8 * ((b1 & 0x1f) + 1));
    else if (b == 0xe0) /* alloc_l */
        *out = (code){.kind = K_ALLOC,
                      .arg = 16 * ((uint32_t)c[1] << 16 | (uint32_t)c[2] << 8 | c[3])};
    else if (b == OP_SET_FP)
        *out = (code){.kind = K_SET_FP};
    else if (b == OP_ADD_FP)
        *out = (code){.kind = K_SET_FP, .arg = 8 * c[1]};
    else if (b == OP_NOP)
        *out = (code){.kind = K_NOP};
    else if (b == OP_SAVE_NEXT)
        *out = (code){.kind = K_SAVE_NEXT};
    else if (b == OP_PAC_SIGN_LR)
        *out = (code){.kind = K_SIGN_RA};
    else /* alloc_z (SVE), end_c, custom stacks, reserved */
        return false;
    return true;
}

/* The prolog's codes, in the record's order (last instruction first). */
static int decode(const a64w_info *info, code **codes, size_t *n, cfi_error *err)
{
    size_t len = 4 * (size_t)info->code_words, base = info->size - len;
    *n = 0;
    *codes = calloc(len, sizeof **codes);
    if (!*codes)
        return cfi_fail(err, 0, "out of memory");
    for (size_t at = 0; at < len;) {
        uint8_t b = info->codes[at];
        if (b == OP_END)
            return 0;
        unsigned k = code_length(b);
        if (k > len - at)
            return cfi_fail(err, base + at, "unwind code 0x%02x at byte %zu needs %u bytes, %zu "
                                            "are left", b, at, k, len - at);
        code c;
        if (!decode_one(info->codes + at, &c))
            return cfi_fail(err, base + at, "unwind code 0x%02x at byte %zu is not one a shim's "
                                            "prolog may use%s", b, at,
                            b == OP_END_C ? " (end_c: chained scopes; the shim's must be one piece)"
                                          : "");
        c.at = base + at;
        (*codes)[(*n)++] = c;
        at += k;
    }
    return cfi_fail(err, base, "the unwind codes have no end");
}

/* The state before any prolog instruction: nothing saved, the return
 * address still in x30. */
static void entry_row(cfi_row *r)
{
    memset(r, 0, sizeof *r);
    r->cfa = (cfi_cfa_rule){.kind = CFI_CFA_REG_OFFSET, .reg = DWARF_SP, .offset = 0};
}

static void saved(cfi_row *r, uint32_t reg, int64_t cfa_offset)
{
    r->regs[reg] = (cfi_reg_rule){.kind = CFI_REG_OFFSET, .offset = cfa_offset};
}

/* The last pair a save stored, for save_next. */
typedef struct pair_state {
    uint32_t reg; /* 0: none yet */
    uint32_t off; /* from sp */
} pair_state;

/* Apply one code. `depth` is how far sp is below the CFA. */
static int apply(const code *c, cfi_row *r, int64_t *depth, pair_state *last, cfi_error *err)
{
    code k = *c;
    if (k.kind == K_SAVE_NEXT) {
        if (!last->reg)
            return cfi_fail(err, c->at, "save_next follows no register pair save");
        uint32_t next = last->reg + 2;
        if (last->reg < DWARF_D0 && next + 1 > 28)
            next = DWARF_D0 + 8; /* after the last integer pair, the first FP one */
        if (next >= DWARF_D0 && next + 1 > DWARF_D0 + 15)
            return cfi_fail(err, c->at, "save_next past d15");
        k = save(next, true, last->off + 16, 0);
    }
    switch (k.kind) {
    case K_ALLOC: *depth += k.arg; break;
    case K_SAVE:
        *depth += k.pre;
        saved(r, k.reg, (int64_t)k.arg - *depth);
        if (k.reg2)
            saved(r, k.reg2, (int64_t)k.arg + 8 - *depth);
        *last = k.reg2 == k.reg + 1 && k.reg != DWARF_FP ? (pair_state){k.reg, k.arg}
                                                          : (pair_state){0, 0};
        break;
    case K_SET_FP: /* x29 = sp + arg, so CFA = x29 + depth - arg */
        r->cfa.reg = DWARF_FP;
        r->cfa.offset = *depth - (int64_t)k.arg;
        break;
    case K_NOP:
    case K_SIGN_RA:
    case K_SAVE_NEXT: break;
    }
    if (r->cfa.reg == DWARF_SP)
        r->cfa.offset = *depth;
    if (*depth > INT32_MAX)
        return cfi_fail(err, c->at, "the prolog allocates more than 2 GiB");
    return 0;
}

int a64w_rows(const a64w_info *info, uint64_t begin, uint64_t end, cfi_table *out,
              uint64_t *sign_at, cfi_error *err)
{
    *out = (cfi_table){0};
    *sign_at = UINT64_MAX;
    code *codes = NULL;
    size_t n = 0;
    cfi_row *row = malloc(sizeof *row);
    int rc = row ? decode(info, &codes, &n, err) : cfi_fail(err, 0, "out of memory");
    if (rc == 0 && (end <= begin || (end - begin) / 4 <= n))
        rc = cfi_fail(err, 0, "the prolog (%zu instructions) is not shorter than the function "
                              "(%llu bytes)", n, (unsigned long long)(end - begin));
    int64_t depth = 0;
    pair_state last = {0, 0};
    if (rc == 0) {
        entry_row(row);
        rc = cfi_table_push(out, row, begin, err);
    }
    for (size_t i = 0; rc == 0 && i < n; i++) { /* the prolog's order: the list's last first */
        const code *c = &codes[n - 1 - i];
        rc = apply(c, row, &depth, &last, err);
        if (c->kind == K_SIGN_RA)
            *sign_at = begin + 4 * i;
        if (rc == 0)
            rc = cfi_table_push(out, row, begin + 4 * (i + 1), err);
    }
    if (rc == 0)
        out->rows[out->count - 1].end = end;
    else
        cfi_table_free(out);
    free(codes);
    free(row);
    return rc;
}

/* ---- packed entries ------------------------------------------------------ */

/* Codes are collected in the prolog's order and written reversed. */
typedef struct code_list {
    uint8_t bytes[64];
    unsigned start[32], n;
    size_t len;
} code_list;

static void emit(code_list *l, unsigned count, const uint8_t *b)
{
    l->start[l->n++] = (unsigned)l->len;
    memcpy(l->bytes + l->len, b, count);
    l->len += count;
}

static void emit1(code_list *l, uint32_t a)
{
    emit(l, 1, (uint8_t[]){(uint8_t)a});
}

static void emit2(code_list *l, uint32_t a, uint32_t b)
{
    emit(l, 2, (uint8_t[]){(uint8_t)a, (uint8_t)b});
}

/* sub sp, sp, #size (< 32 KiB): alloc_s or alloc_m. */
static void emit_alloc(code_list *l, uint32_t size)
{
    if (size < 512)
        emit1(l, size / 16);
    else
        emit2(l, 0xc0 | (size / 16) >> 8, (size / 16) & 0xff);
}

/* The canonical prolog, step by step as the documentation lays it out. */
static int packed_codes(uint32_t word, code_list *l, cfi_error *err)
{
    unsigned regf = (word >> 13) & 7, regi = (word >> 16) & 15, h = (word >> 20) & 1,
             cr = (word >> 21) & 3, frame = 16 * (word >> 23);
    unsigned intsz = 8 * regi + (cr == 1 ? 8 : 0), fpsz = regf ? 8 * regf + 8 : 0;
    unsigned savsz = (intsz + fpsz + 64 * h + 15) & ~15u;
    if (regi > 10)
        return cfi_fail(err, 4, "packed unwind data saves %u integer registers (x19-x28 are 10)",
                        regi);
    if (frame < savsz)
        return cfi_fail(err, 4, "packed unwind data: a frame of %u bytes cannot hold its %u bytes "
                                "of saved registers", frame, savsz);
    if (cr == 1 && regi == 1)
        return cfi_fail(err, 4, "packed unwind data: CR 1 with one integer register has no "
                                "canonical prolog");
    if (h && !regi && !regf && cr != 1)
        return cfi_fail(err, 4, "packed unwind data: homed parameters with nothing else saved "
                                "have no documented prolog");
    unsigned locsz = frame - savsz, pairs = (regi + 1) / 2;
    if (cr == 2)
        emit1(l, OP_PAC_SIGN_LR);
    for (unsigned i = 0; i < pairs; i++) {
        bool single = i == pairs - 1 && regi % 2;
        if (single && cr == 1) /* stp x(19+2i), lr */
            emit2(l, 0xd6 | (i >> 2), (i & 3) << 6 | 2 * i);
        else if (single && i == 0) /* str x19, [sp, #-savsz]! */
            emit2(l, 0xd4, savsz / 8 - 1);
        else if (single) /* str x(19+2i), [sp, #16i] */
            emit2(l, 0xd0 | (2 * i) >> 2, ((2 * i) & 3) << 6 | 2 * i);
        else if (i == 0) /* stp x19, x20, [sp, #-savsz]! */
            emit2(l, 0xcc, savsz / 8 - 1);
        else /* stp x(19+2i), x(20+2i), [sp, #16i] */
            emit2(l, 0xc8 | (2 * i) >> 2, ((2 * i) & 3) << 6 | 2 * i);
    }
    if (cr == 1 && regi % 2 == 0) { /* lr = x(19+11) */
        if (regi == 0)
            emit2(l, 0xd4 | 11 >> 3, (11 & 7) << 5 | (savsz / 8 - 1));
        else
            emit2(l, 0xd0 | 11 >> 2, (11 & 3) << 6 | (intsz - 8) / 8);
    }
    unsigned fregs = regf ? regf + 1 : 0, fpairs = (fregs + 1) / 2;
    for (unsigned i = 0; i < fpairs; i++) {
        unsigned x = 2 * i, off = (intsz + 16 * i) / 8;
        if (i == fpairs - 1 && fregs % 2) /* str d(8+2i) */
            emit2(l, 0xdc | x >> 2, (x & 3) << 6 | off);
        else if (i == 0 && regi == 0 && cr != 1) /* stp d8, d9, [sp, #-savsz]! */
            emit2(l, 0xda, savsz / 8 - 1);
        else
            emit2(l, 0xd8 | x >> 2, (x & 3) << 6 | off);
    }
    for (unsigned i = 0; h && i < 4; i++) /* stp x0-x7 to the home area */
        emit1(l, OP_NOP);
    if (cr >= 2 && locsz <= 512) { /* stp x29, lr, [sp, #-locsz]!; mov x29, sp */
        if (locsz == 0)
            return cfi_fail(err, 4, "packed unwind data: a chained frame with no room for x29 "
                                    "and lr");
        emit1(l, 0x80 | (locsz / 8 - 1));
        emit1(l, OP_SET_FP);
        return 0;
    }
    if (locsz > 4080) {
        emit_alloc(l, 4080);
        if (locsz - 4080 >= 32768)
            return cfi_fail(err, 4, "packed unwind data: %u bytes of locals", locsz);
        emit_alloc(l, locsz - 4080);
    } else if (locsz) {
        emit_alloc(l, locsz);
    }
    if (cr >= 2) { /* stp x29, lr, [sp]; mov x29, sp */
        emit1(l, 0x40);
        emit1(l, OP_SET_FP);
    }
    return 0;
}

int a64w_expand_packed(uint32_t word, strbuf *out, cfi_error *err)
{
    unsigned flag = word & 3, words = (word >> 2) & 0x7ff;
    if (flag == A64W_PDATA_FRAGMENT)
        return cfi_fail(err, 4, "packed unwind data for a fragment (flag 2): the shim's entry has "
                                "no prolog");
    if (flag != A64W_PDATA_PACKED)
        return cfi_fail(err, 4, "packed unwind data with the reserved flag 3");
    code_list l = {0};
    if (packed_codes(word, &l, err) != 0)
        return -1;
    /* The record: the codes last first and `end`, padded to words; the single
     * epilog at the function's end undoes all but the frame pointer set-up
     * (x29 is not copied back into sp), so it starts past set_fp. */
    uint8_t codes[72];
    size_t len = 0;
    for (unsigned i = l.n; i-- > 0;) {
        size_t next = i + 1 < l.n ? l.start[i + 1] : l.len;
        memcpy(codes + len, l.bytes + l.start[i], next - l.start[i]);
        len += next - l.start[i];
    }
    codes[len++] = OP_END;
    while (len % 4)
        codes[len++] = OP_NOP;
    unsigned epilog_index = l.n && l.bytes[l.start[l.n - 1]] == OP_SET_FP ? 1 : 0;
    uint32_t head = words | 1u << 21 | (uint32_t)epilog_index << 22 | (uint32_t)(len / 4) << 27;
    sb_put_le(out, head, 4);
    sb_putn(out, (const char *)codes, len);
    return 0;
}

int a64w_after_prolog(const a64w_info *info, strbuf *out, cfi_error *err)
{
    /* The prolog's codes, found as a64w_rows finds them. */
    size_t len = 4 * (size_t)info->code_words, used = 0;
    while (used < len && info->codes[used] != OP_END)
        used += code_length(info->codes[used]);
    used = used < len ? used : len;
    size_t total = (1 + used + 1 + 3) & ~(size_t)3, words = total / 4;
    if (words > 0xff)
        return cfi_fail(err, 0, "the prolog's %zu bytes of unwind codes do not fit an .xdata "
                                "record with end_c before them", used);
    /* A single epilog whose codes are end_c's: it has no instructions, so no
     * executor PC is in an epilog either. More than 31 code words take the
     * extended header. */
    if (words <= 31) {
        sb_put_le(out, 1u << 21 | (uint32_t)words << 27, 4);
    } else {
        sb_put_le(out, 1u << 21, 4);
        sb_put_le(out, (uint32_t)words << 16, 4);
    }
    sb_putc(out, (char)OP_END_C);
    sb_putn(out, (const char *)info->codes, used);
    sb_putc(out, (char)OP_END);
    for (size_t k = 1 + used + 1; k < total; k++)
        sb_putc(out, (char)OP_NOP);
    return 0;
}
