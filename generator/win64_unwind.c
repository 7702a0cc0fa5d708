/* win64_unwind.c - see win64_unwind.h. Layout and semantics from the
 * Windows x64 exception-handling documentation (UNWIND_INFO, UNWIND_CODE). */
#include "win64_unwind.h"

#include <stdlib.h>
#include <string.h>

enum {
    UNW_FLAG_EHANDLER = 1,
    UNW_FLAG_UHANDLER = 2,
    UNW_FLAG_CHAININFO = 4,
};

enum {
    UWOP_PUSH_NONVOL = 0,
    UWOP_ALLOC_LARGE = 1,
    UWOP_ALLOC_SMALL = 2,
    UWOP_SET_FPREG = 3,
    UWOP_SAVE_NONVOL = 4,
    UWOP_SAVE_NONVOL_FAR = 5,
    UWOP_SAVE_XMM128 = 8,
    UWOP_SAVE_XMM128_FAR = 9,
    UWOP_PUSH_MACHFRAME = 10,
};

enum { DWARF_RSP = 7, DWARF_XMM0 = 17, W64_RSP = 4 };

/* Windows numbers the integer registers rax rcx rdx rbx rsp rbp rsi rdi
 * r8-r15; DWARF rax rdx rcx rbx rsi rdi rbp rsp r8-r15. */
static const uint8_t dwarf_of[16] = {0, 2, 1, 3, 7, 6, 4, 5, 8, 9, 10, 11, 12, 13, 14, 15};

int w64_parse_info(const uint8_t *data, size_t size, size_t offset, w64_info *out,
                   cfi_error *err)
{
    *out = (w64_info){0};
    if (offset > size || size - offset < 4)
        return cfi_fail(err, offset, "UNWIND_INFO at 0x%zx: its 4-byte header is past the end of "
                                     "the section (size 0x%zx)", offset, size);
    const uint8_t *p = data + offset;
    out->version = p[0] & 7;
    out->flags = p[0] >> 3;
    out->prolog_size = p[1];
    out->nslots = p[2];
    out->frame_reg = p[3] & 15;
    out->frame_offset = p[3] >> 4;
    if (out->version != 1)
        return cfi_fail(err, offset, "UNWIND_INFO at 0x%zx: version %u; stencilgen reads version 1 "
                                     "(version 2 adds epilog codes)", offset, out->version);
    if (out->flags & (UNW_FLAG_EHANDLER | UNW_FLAG_UHANDLER))
        return cfi_fail(err, offset, "UNWIND_INFO at 0x%zx: the shim has an exception handler "
                                     "(flags 0x%x); it must have none", offset, out->flags);
    if (out->flags & UNW_FLAG_CHAININFO)
        return cfi_fail(err, offset, "UNWIND_INFO at 0x%zx: chained unwind info (flags 0x%x); the "
                                     "shim's must be one piece", offset, out->flags);
    if (out->flags)
        return cfi_fail(err, offset, "UNWIND_INFO at 0x%zx: unknown flags 0x%x", offset,
                        out->flags);
    if (out->frame_reg == W64_RSP)
        return cfi_fail(err, offset, "UNWIND_INFO at 0x%zx: the frame register is rsp", offset);
    size_t slot_bytes = 2 * (size_t)((out->nslots + 1u) & ~1u);
    if (size - offset - 4 < slot_bytes)
        return cfi_fail(err, offset, "UNWIND_INFO at 0x%zx: %u unwind-code slots run past the end "
                                     "of the section (size 0x%zx)", offset, out->nslots, size);
    out->slots = p + 4;
    out->size = 4 + slot_bytes;
    return 0;
}

static uint32_t slot(const w64_info *info, unsigned i)
{
    return (uint32_t)info->slots[2 * i] | (uint32_t)info->slots[2 * i + 1] << 8;
}

/* One decoded code: what a row needs. */
typedef struct code {
    uint8_t at;  /* prolog offset: the state holds from here on */
    uint8_t op, info;
    uint32_t arg; /* size, offset, or 0 */
    unsigned first_slot;
} code;

/* Slots each op takes, or 0 for ops stencilgen does not accept. */
static unsigned slots_of(uint8_t op, uint8_t info)
{
    switch (op) {
    case UWOP_PUSH_NONVOL:
    case UWOP_ALLOC_SMALL:
    case UWOP_SET_FPREG: return 1;
    case UWOP_ALLOC_LARGE: return info == 0 ? 2 : info == 1 ? 3 : 0;
    case UWOP_SAVE_NONVOL:
    case UWOP_SAVE_XMM128: return 2;
    case UWOP_SAVE_NONVOL_FAR:
    case UWOP_SAVE_XMM128_FAR: return 3;
    default: return 0;
    }
}

static uint32_t argument(const w64_info *info, const code *c)
{
    unsigned s = c->first_slot + 1;
    switch (c->op) {
    case UWOP_ALLOC_SMALL: return 8u * c->info + 8;
    case UWOP_ALLOC_LARGE:
        return c->info == 0 ? 8 * slot(info, s) : slot(info, s) | slot(info, s + 1) << 16;
    case UWOP_SAVE_NONVOL: return 8 * slot(info, s);
    case UWOP_SAVE_XMM128: return 16 * slot(info, s);
    case UWOP_SAVE_NONVOL_FAR:
    case UWOP_SAVE_XMM128_FAR: return slot(info, s) | slot(info, s + 1) << 16;
    default: return 0;
    }
}

static bool moves_rsp(uint8_t op)
{
    return op == UWOP_PUSH_NONVOL || op == UWOP_ALLOC_SMALL || op == UWOP_ALLOC_LARGE;
}

/* Windows reads every save at an offset from one base, the bottom of the
 * fixed allocation (rsp once the prolog's pushes and allocations are done,
 * or the frame register minus 16 * FrameOffset), and the replay measures a
 * save from rsp where it happens: the two agree when nothing moves rsp after
 * the first save or after the frame register is set, as Windows requires. */
static int fixed_allocation_first(const code *codes, size_t n, cfi_error *err)
{
    const code *fixed = NULL;
    for (size_t i = 0; i < n; i++) {
        if (moves_rsp(codes[i].op) && fixed)
            return cfi_fail(err, 4 + 2 * codes[i].first_slot,
                            "unwind code at slot %u moves rsp after the %s at slot %u (pushes and "
                            "allocations come first)", codes[i].first_slot,
                            fixed->op == UWOP_SET_FPREG ? "frame register is set" : "save",
                            fixed->first_slot);
        if (!moves_rsp(codes[i].op) && !fixed)
            fixed = &codes[i];
    }
    return 0;
}

/* The codes in prolog order (the table lists them last first); -1 after a
 * diagnostic. */
static int decode(const w64_info *info, code *codes, size_t *n, cfi_error *err)
{
    *n = 0;
    unsigned prev_at = 256;
    for (unsigned i = 0; i < info->nslots;) {
        code c = {.at = info->slots[2 * i], .op = info->slots[2 * i + 1] & 15,
                  .info = info->slots[2 * i + 1] >> 4, .first_slot = i};
        unsigned k = slots_of(c.op, c.info);
        if (!k)
            return cfi_fail(err, 4 + 2 * i, "unwind code %u (slot %u): operation %u (info %u) "
                                            "is not one a shim's prolog may use here",
                            (unsigned)*n, i, c.op, c.info);
        if (k > info->nslots - i)
            return cfi_fail(err, 4 + 2 * i, "unwind code at slot %u needs %u slots, %u are left", i,
                            k, info->nslots - i);
        if (c.at > info->prolog_size || c.at > prev_at)
            return cfi_fail(err, 4 + 2 * i, "unwind code at slot %u: prolog offset %u is %s", i,
                            c.at, c.at > info->prolog_size ? "past the prolog" : "out of order");
        if (c.op == UWOP_SET_FPREG && !info->frame_reg)
            return cfi_fail(err, 4 + 2 * i, "UWOP_SET_FPREG but the UNWIND_INFO names no frame "
                                            "register");
        if (c.op == UWOP_PUSH_NONVOL && c.info == W64_RSP)
            return cfi_fail(err, 4 + 2 * i, "unwind code at slot %u pushes rsp", i);
        c.arg = argument(info, &c);
        prev_at = c.at;
        codes[(*n)++] = c;
        i += k;
    }
    for (size_t a = 0, b = *n; a + 1 < b; a++, b--) { /* reverse: prolog order */
        code t = codes[a];
        codes[a] = codes[b - 1];
        codes[b - 1] = t;
    }
    return fixed_allocation_first(codes, *n, err);
}

/* The state before any prolog instruction: the return address just pushed. */
static void entry_row(cfi_row *r)
{
    memset(r, 0, sizeof *r);
    r->cfa = (cfi_cfa_rule){.kind = CFI_CFA_REG_OFFSET, .reg = DWARF_RSP, .offset = 8};
    r->regs[W64_RA_COLUMN] = (cfi_reg_rule){.kind = CFI_REG_OFFSET, .offset = -8};
}

static void saved(cfi_row *r, uint32_t dwarf, int64_t cfa_offset)
{
    r->regs[dwarf] = (cfi_reg_rule){.kind = CFI_REG_OFFSET, .offset = cfa_offset};
}

/* Apply one code to the row. `depth` is how far rsp is below the CFA. */
static int apply(const w64_info *info, const code *c, cfi_row *r, int64_t *depth,
                 cfi_error *err)
{
    switch (c->op) {
    case UWOP_PUSH_NONVOL:
        *depth += 8;
        saved(r, dwarf_of[c->info], -*depth);
        break;
    case UWOP_ALLOC_SMALL:
    case UWOP_ALLOC_LARGE: *depth += c->arg; break;
    case UWOP_SET_FPREG:
        /* frame_reg = rsp + 16 * frame_offset, so CFA = frame_reg + depth - 16 * offset */
        r->cfa.reg = dwarf_of[info->frame_reg];
        r->cfa.offset = *depth - 16 * (int64_t)info->frame_offset;
        break;
    case UWOP_SAVE_NONVOL:
    case UWOP_SAVE_NONVOL_FAR: saved(r, dwarf_of[c->info], c->arg - *depth); break;
    case UWOP_SAVE_XMM128:
    case UWOP_SAVE_XMM128_FAR: saved(r, DWARF_XMM0 + c->info, c->arg - *depth); break;
    default: return cfi_fail(err, 4 + 2 * c->first_slot, "unwind operation %u", c->op);
    }
    if (r->cfa.reg == DWARF_RSP)
        r->cfa.offset = *depth;
    if (*depth > INT32_MAX)
        return cfi_fail(err, 4 + 2 * c->first_slot, "the prolog allocates more than 2 GiB");
    return 0;
}

int w64_rows(const w64_info *info, uint64_t begin, uint64_t end, cfi_table *out,
             cfi_error *err)
{
    *out = (cfi_table){0};
    if (end <= begin || end - begin <= info->prolog_size)
        return cfi_fail(err, 1, "the prolog (%u bytes) is not shorter than the function (%llu "
                                "bytes)", info->prolog_size, (unsigned long long)(end - begin));
    code *codes = calloc(info->nslots ? info->nslots : 1, sizeof *codes);
    cfi_row *row = malloc(sizeof *row);
    size_t n = 0;
    int rc = codes && row ? decode(info, codes, &n, err) : cfi_fail(err, 0, "out of memory");
    int64_t depth = 8;
    if (rc == 0) {
        entry_row(row);
        rc = cfi_table_push(out, row, begin, err);
    }
    for (size_t i = 0; rc == 0 && i < n; i++) {
        rc = apply(info, &codes[i], row, &depth, err);
        if (rc == 0)
            rc = cfi_table_push(out, row, begin + codes[i].at, err);
    }
    if (rc == 0)
        out->rows[out->count - 1].end = end;
    else
        cfi_table_free(out);
    free(codes);
    free(row);
    return rc;
}

void w64_after_prolog(const w64_info *info, strbuf *out)
{
    sb_putc(out, (char)(info->version | info->flags << 3));
    sb_putc(out, 0); /* no prolog */
    sb_putc(out, (char)info->nslots);
    sb_putc(out, (char)(info->frame_reg | info->frame_offset << 4));
    /* A code's first slot starts with its prolog offset; the slots after it
     * are its operands, kept as they are. */
    for (unsigned i = 0; i < info->nslots;) {
        uint8_t op = info->slots[2 * i + 1];
        unsigned k = slots_of(op & 15, op >> 4);
        k = k ? k : 1;
        sb_putc(out, 0);
        sb_putc(out, (char)op);
        for (unsigned j = 1; j < k && i + j < info->nslots; j++)
            sb_putn(out, info->slots + 2 * (i + j), 2);
        i += k;
    }
    if (info->nslots & 1)
        sb_putn(out, "\0\0", 2);
}
