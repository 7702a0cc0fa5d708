/* cfi.c - .eh_frame CIE/FDE parser and DW_CFA row interpreter (see cfi.h).
 *
 * Layout of the file: error helpers, a bounds-checked byte reader, pointer
 * encodings, entry/CIE/FDE parsing, the interpreter, then the small table and
 * formatting helpers.  Nothing here keeps global mutable state.
 */
#include "cfi.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* DW_EH_PE_* pointer encodings: low nibble = format, bits 4-6 = application. */
enum {
    PE_ABSPTR = 0x00, PE_ULEB128 = 0x01, PE_UDATA2 = 0x02, PE_UDATA4 = 0x03,
    PE_UDATA8 = 0x04, PE_SIGNED = 0x08, PE_SLEB128 = 0x09, PE_SDATA2 = 0x0a,
    PE_SDATA4 = 0x0b, PE_SDATA8 = 0x0c,
    PE_PCREL = 0x10, PE_TEXTREL = 0x20, PE_DATAREL = 0x30, PE_FUNCREL = 0x40,
    PE_ALIGNED = 0x50,
    PE_INDIRECT = 0x80, PE_OMIT = 0xff,
};

#define REMEMBER_DEPTH 64 /* deeper DW_CFA_remember_state nesting is rejected */
#define LEB_MAX_BYTES 10  /* ceil(64 / 7): anything longer cannot be a 64-bit value */

/* DW_CFA_restore/offset carry the register in 6 bits; all of those must be legal. */
_Static_assert(CFI_MAX_REGS >= 64, "primary opcodes encode registers 0..63");

/* ---------------------------------------------------------------- errors */

/* Where a message is about: "CIE at 0x0: ..." or "FDE at 0x18: ...".
 * A NULL kind means the message already says everything. */
typedef struct where {
    cfi_error *err;
    const char *kind;
    size_t at;
} where;

static int vfail(const where *w, size_t off, const char *fmt, va_list ap)
{
    if (!w->err)
        return -1;
    char *msg = w->err->msg;
    size_t cap = sizeof w->err->msg, n = 0;
    w->err->offset = off;
    if (w->kind) {
        int k = snprintf(msg, cap, "%s at 0x%zx: ", w->kind, w->at);
        n = k < 0 ? 0 : (size_t)k < cap ? (size_t)k : cap - 1;
    }
    vsnprintf(msg + n, cap - n, fmt, ap);
    return -1;
}

/* Report an error with the context prefix of `w`; always returns -1. */
static int fail(const where *w, size_t off, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(w, off, fmt, ap);
    va_end(ap);
    return -1;
}

/* Report an error whose message carries its own context. */
static int failx(cfi_error *err, size_t off, const char *fmt, ...)
{
    where w = { err, NULL, 0 };
    va_list ap;
    va_start(ap, fmt);
    vfail(&w, off, fmt, ap);
    va_end(ap);
    return -1;
}

/* ----------------------------------------------------------- byte reader */

/* Reads p[pos..end).  Invariant: pos <= end <= size of the buffer behind p.
 * Positions are section offsets so they can go straight into messages. */
typedef struct reader {
    const uint8_t *p;
    size_t pos, end;
} reader;

typedef enum rd_status { RD_OK = 0, RD_SHORT, RD_BADLEB } rd_status;

static rd_status read_le(reader *r, unsigned n, uint64_t *v)
{
    if (r->end - r->pos < n)
        return RD_SHORT;
    uint64_t x = 0;
    for (unsigned i = 0; i < n; i++)
        x |= (uint64_t)r->p[r->pos + i] << (8 * i);
    r->pos += n;
    *v = x;
    return RD_OK;
}

/* On failure these store 0, so callers never see an indeterminate value. */
static rd_status read_u8(reader *r, uint8_t *v)
{
    uint64_t x = 0;
    rd_status st = read_le(r, 1, &x);
    return *v = (uint8_t)x, st;
}

static rd_status read_u16(reader *r, uint16_t *v)
{
    uint64_t x = 0;
    rd_status st = read_le(r, 2, &x);
    return *v = (uint16_t)x, st;
}

static rd_status read_u32(reader *r, uint32_t *v)
{
    uint64_t x = 0;
    rd_status st = read_le(r, 4, &x);
    return *v = (uint32_t)x, st;
}

static rd_status read_u64(reader *r, uint64_t *v) { return read_le(r, 8, v); }

/* Consumes nothing unless the whole number is valid. */
static rd_status read_uleb(reader *r, uint64_t *v)
{
    uint64_t x = 0;
    size_t pos = r->pos;
    for (unsigned i = 0; i < LEB_MAX_BYTES; i++) {
        if (pos >= r->end)
            return RD_SHORT;
        uint8_t b = r->p[pos++];
        /* The 10th byte holds only bit 63: anything above it overflows. */
        if (i == LEB_MAX_BYTES - 1 && (b & 0x7e))
            return RD_BADLEB;
        x |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            r->pos = pos;
            *v = x;
            return RD_OK;
        }
    }
    return RD_BADLEB;
}

/* Two's-complement reinterpretation without implementation-defined casts. */
static int64_t to_signed(uint64_t x)
{
    return x <= INT64_MAX ? (int64_t)x : -(int64_t)(~x) - 1;
}

static uint64_t sign_extend(uint64_t x, unsigned bits)
{
    uint64_t sign = (uint64_t)1 << (bits - 1);
    return bits >= 64 ? x : ((x & ((sign << 1) - 1)) ^ sign) - sign;
}

static rd_status read_sleb(reader *r, int64_t *v)
{
    uint64_t x = 0;
    size_t pos = r->pos;
    for (unsigned i = 0; i < LEB_MAX_BYTES; i++) {
        if (pos >= r->end)
            return RD_SHORT;
        uint8_t b = r->p[pos++];
        /* The 10th byte holds bit 63 only, so it must be pure sign (0 or 0x7f). */
        if (i == LEB_MAX_BYTES - 1 && (b & 0x7f) != 0 && (b & 0x7f) != 0x7f)
            return RD_BADLEB;
        x |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            unsigned bits = 7 * (i + 1);
            r->pos = pos;
            *v = to_signed(bits < 64 ? sign_extend(x, bits) : x);
            return RD_OK;
        }
    }
    return RD_BADLEB;
}

/* "truncated X at 0x.." or "malformed LEB128 in X at 0x..". */
static int fail_rd(const where *w, rd_status st, const char *what, size_t at)
{
    if (st == RD_SHORT)
        return fail(w, at, "truncated %s at 0x%zx", what, at);
    return fail(w, at, "malformed (overlong or overflowing) LEB128 in %s at 0x%zx", what, at);
}

/* Reads that report their own failure as "truncated <what> at ..". */
static int get_u8(reader *r, uint8_t *v, const where *w, const char *what)
{
    size_t at = r->pos;
    rd_status st = read_u8(r, v);
    return st == RD_OK ? 0 : fail_rd(w, st, what, at);
}

static int get_uleb(reader *r, uint64_t *v, const where *w, const char *what)
{
    size_t at = r->pos;
    rd_status st = read_uleb(r, v);
    return st == RD_OK ? 0 : fail_rd(w, st, what, at);
}

static int get_sleb(reader *r, int64_t *v, const where *w, const char *what)
{
    size_t at = r->pos;
    rd_status st = read_sleb(r, v);
    return st == RD_OK ? 0 : fail_rd(w, st, what, at);
}

/* ------------------------------------------------------ pointer encodings */

/* NULL if `enc` is an encoding we can decode; otherwise why not.  DW_EH_PE_omit
 * is the caller's business. */
static const char *encoding_problem(uint8_t enc, bool allow_indirect)
{
    switch (enc & 0x0f) {
    case PE_ABSPTR: case PE_ULEB128: case PE_UDATA2: case PE_UDATA4: case PE_UDATA8:
    case PE_SIGNED: case PE_SLEB128: case PE_SDATA2: case PE_SDATA4: case PE_SDATA8:
        break;
    default:
        return "unknown pointer format";
    }
    switch (enc & 0x70) {
    case 0: case PE_PCREL:
        break;
    case PE_TEXTREL: case PE_DATAREL: case PE_FUNCREL:
        return "text/data/function-relative pointers need a base address we do not have";
    case PE_ALIGNED:
        return "aligned pointer encoding not supported";
    default:
        return "unknown pointer application";
    }
    if ((enc & PE_INDIRECT) && !allow_indirect)
        return "indirect pointer encoding not supported";
    return NULL;
}

static rd_status read_format(reader *r, uint8_t fmt, uint8_t addr_size, uint64_t *v)
{
    rd_status st;
    int64_t s;
    switch (fmt) {
    case PE_ABSPTR: return read_le(r, addr_size, v);
    case PE_ULEB128: return read_uleb(r, v);
    case PE_UDATA2: return read_le(r, 2, v);
    case PE_UDATA4: return read_le(r, 4, v);
    case PE_UDATA8: return read_le(r, 8, v);
    case PE_SLEB128:
        st = read_sleb(r, &s);
        *v = (uint64_t)s;
        return st;
    case PE_SIGNED: case PE_SDATA2: case PE_SDATA4: case PE_SDATA8: {
        unsigned n = fmt == PE_SIGNED ? addr_size : fmt == PE_SDATA2 ? 2 : fmt == PE_SDATA4 ? 4 : 8;
        st = read_le(r, n, v);
        *v = sign_extend(*v, 8 * n);
        return st;
    }
    default:
        return RD_SHORT; /* unreachable: encoding_problem() vetted fmt */
    }
}

/* Decode a pointer with a vetted encoding.  pcrel is relative to the address
 * of the field itself; `absolute` drops the application (FDE pc_range). */
static rd_status read_pointer(reader *r, const cfi_section *sec, uint8_t enc, bool absolute,
                              uint64_t *v)
{
    size_t field = r->pos;
    rd_status st = read_format(r, enc & 0x0f, sec->addr_size, v);
    if (st != RD_OK)
        return st;
    if (!absolute && (enc & 0x70) == PE_PCREL)
        *v += sec->addr + field; /* address arithmetic wraps, as the hardware would */
    if (sec->addr_size == 4)
        *v &= 0xffffffffu;
    return RD_OK;
}

static int get_pointer(reader *r, const cfi_section *sec, uint8_t enc, bool absolute,
                       uint64_t *v, const where *w, const char *what)
{
    size_t at = r->pos;
    rd_status st = read_pointer(r, sec, enc, absolute, v);
    return st == RD_OK ? 0 : fail_rd(w, st, what, at);
}

/* 'z' augmentation data: ULEB length, then that many bytes inside the entry.
 * Sets *end to where the data stops. */
static int read_aug_length(reader *r, const where *w, size_t *end)
{
    size_t at = r->pos;
    uint64_t len;
    if (get_uleb(r, &len, w, "augmentation data length"))
        return -1;
    if (len > r->end - r->pos)
        return fail(w, at, "augmentation data length 0x%" PRIx64
                    " at 0x%zx runs past the end of the %s", len, at, w->kind);
    *end = r->pos + (size_t)len;
    return 0;
}

/* --------------------------------------------------------------- entries */

static int check_section(const cfi_section *sec, cfi_error *err)
{
    if (!sec)
        return failx(err, 0, "no section given");
    if (!sec->data && sec->size)
        return failx(err, 0, "section of size 0x%zx has no data", sec->size);
    if (sec->addr_size != 4 && sec->addr_size != 8)
        return failx(err, 0, "unsupported address size %u (expected 4 or 8)",
                     (unsigned)sec->addr_size);
    return 0;
}

/* One entry: length field at `off`, CIE id / CIE pointer at `id_pos`, ends at `end`. */
typedef struct entry {
    size_t off, id_pos, end;
    uint32_t id;
} entry;

/* 1 = entry, 0 = zero terminator (e->end is just past it), -1 = error.
 * Requires off <= sec->size. */
static int read_entry(const cfi_section *sec, size_t off, entry *e, cfi_error *err)
{
    reader r = { sec->data, off, sec->size };
    uint32_t len32;
    uint64_t len;
    if (read_u32(&r, &len32) != RD_OK)
        return failx(err, off, "entry at 0x%zx is truncated (%zu bytes left in the section)",
                     off, sec->size - off);
    e->off = off;
    if (len32 == 0) {
        e->id_pos = e->end = r.pos;
        return 0;
    }
    len = len32;
    if (len32 == 0xffffffffu && read_u64(&r, &len) != RD_OK)
        return failx(err, off, "entry at 0x%zx has a truncated 64-bit length", off);
    if (len > r.end - r.pos)
        return failx(err, off,
                     "entry at 0x%zx has length 0x%" PRIx64
                     " past the end of the section (size 0x%zx)", off, len, sec->size);
    if (len < 4)
        return failx(err, off, "entry at 0x%zx is too short for a CIE id (length 0x%" PRIx64 ")",
                     off, len);
    e->id_pos = r.pos;
    e->end = r.pos + (size_t)len;
    /* .eh_frame keeps the CIE id / pointer at 4 bytes even with a 64-bit length. */
    read_u32(&r, &e->id);
    return 1;
}

/* ------------------------------------------------------------------ CIEs */

static int read_aug_string(reader *r, cfi_cie *cie, const where *w)
{
    size_t at = r->pos;
    const uint8_t *s = r->p + r->pos;
    const uint8_t *nul = memchr(s, 0, r->end - r->pos);
    if (!nul)
        return fail(w, at, "augmentation string at 0x%zx is not NUL-terminated inside the entry",
                    at);
    size_t len = (size_t)(nul - s);
    if (len >= sizeof cie->augmentation)
        return fail(w, at, "augmentation string at 0x%zx is too long (%zu bytes, max %zu)", at,
                    len, sizeof cie->augmentation - 1);
    memcpy(cie->augmentation, s, len + 1);
    r->pos += len + 1;
    /* GCC 2.x "eh" put an exception-table pointer here without saying how big. */
    if (strncmp(cie->augmentation, "eh", 2) == 0)
        return fail(w, at, "legacy \"eh\" augmentation is not supported");
    return 0;
}

/* Read an encoding byte for augmentation letter `c` and vet it. */
static int read_aug_encoding(reader *d, char c, bool allow_omit, bool allow_indirect,
                             uint8_t *enc, const where *w)
{
    size_t at = d->pos;
    if (read_u8(d, enc) != RD_OK)
        return fail(w, at, "truncated '%c' augmentation data at 0x%zx", c, at);
    if (*enc == PE_OMIT && allow_omit)
        return 0;
    const char *why = *enc == PE_OMIT ? "omit is not allowed here"
                                      : encoding_problem(*enc, allow_indirect);
    if (why)
        return fail(w, at, "bad pointer encoding 0x%02x for '%c' at 0x%zx: %s", *enc, c, at, why);
    return 0;
}

static int read_aug_letter(reader *d, const cfi_section *sec, cfi_cie *cie, char c,
                           const where *w)
{
    size_t at = d->pos;
    switch (c) {
    case 'R':
        return read_aug_encoding(d, c, false, false, &cie->fde_encoding, w);
    case 'L':
        return read_aug_encoding(d, c, true, false, &cie->lsda_encoding, w);
    case 'P':
        if (read_aug_encoding(d, c, true, true, &cie->personality_encoding, w))
            return -1;
        if (cie->personality_encoding == PE_OMIT)
            return 0;
        /* Indirect: keep the address of the slot holding the routine's address. */
        return get_pointer(d, sec, cie->personality_encoding, false, &cie->personality, w,
                           "personality pointer");
    case 'S':
        cie->signal_frame = true;
        return 0;
    case 'B': /* AArch64 pointer-authentication B key: no unwind-table effect here */
    case 'G': /* AArch64 MTE tagged frame: likewise */
        return 0;
    default:
        if ((unsigned char)c >= 0x20 && (unsigned char)c < 0x7f)
            return failx(w->err, at, "unknown augmentation '%c' in CIE at 0x%zx", c, w->at);
        return failx(w->err, at, "unknown augmentation byte 0x%02x in CIE at 0x%zx",
                     (unsigned)(unsigned char)c, w->at);
    }
}

static int read_aug_data(reader *r, const cfi_section *sec, cfi_cie *cie, const where *w)
{
    const char *a = cie->augmentation;
    bool z = a[0] == 'z';
    size_t data_end = r->end;
    if (z && read_aug_length(r, w, &data_end))
        return -1;
    /* Without 'z' the data is read inline, bounded only by the entry. */
    reader d = { r->p, r->pos, data_end };
    for (size_t i = z ? 1 : 0; a[i]; i++)
        if (read_aug_letter(&d, sec, cie, a[i], w))
            return -1;
    /* With 'z' the length is authoritative: skip data we did not consume. */
    r->pos = z ? data_end : d.pos;
    return 0;
}

static int read_cie_fields(reader *r, const cfi_section *sec, cfi_cie *cie, const where *w)
{
    size_t at = r->pos;
    if (get_u8(r, &cie->version, w, "CIE version"))
        return -1;
    if (cie->version != 1 && cie->version != 3 && cie->version != 4)
        return fail(w, at, "unsupported CIE version %u", (unsigned)cie->version);
    if (read_aug_string(r, cie, w))
        return -1;
    if (cie->version == 4) {
        uint8_t asz, ssz;
        at = r->pos;
        if (get_u8(r, &asz, w, "address size") || get_u8(r, &ssz, w, "segment size"))
            return -1;
        if (asz != sec->addr_size || ssz != 0)
            return fail(w, at, "address size %u / segment size %u not supported (want %u / 0)",
                        (unsigned)asz, (unsigned)ssz, (unsigned)sec->addr_size);
    }
    if (get_uleb(r, &cie->code_align, w, "code alignment factor") ||
        get_sleb(r, &cie->data_align, w, "data alignment factor"))
        return -1;
    uint8_t ra;
    if (cie->version == 1 ? get_u8(r, &ra, w, "return address register")
                          : get_uleb(r, &cie->ra_reg, w, "return address register"))
        return -1;
    if (cie->version == 1)
        cie->ra_reg = ra;
    return read_aug_data(r, sec, cie, w);
}

int cfi_parse_cie(const cfi_section *sec, size_t offset, cfi_cie *cie, cfi_error *err)
{
    if (check_section(sec, err))
        return -1;
    if (!cie)
        return failx(err, offset, "no CIE to fill in");
    if (offset > sec->size)
        return failx(err, offset, "CIE offset 0x%zx is past the end of the section (size 0x%zx)",
                     offset, sec->size);
    entry e;
    int k = read_entry(sec, offset, &e, err);
    if (k < 0)
        return -1;
    where w = { err, "CIE", offset };
    if (k == 0)
        return fail(&w, offset, "zero terminator, not a CIE");
    if (e.id != 0)
        return fail(&w, e.id_pos, "CIE id is 0x%x, not 0", e.id);
    *cie = (cfi_cie){ .offset = offset, .fde_encoding = PE_ABSPTR, .lsda_encoding = PE_OMIT,
                      .personality_encoding = PE_OMIT };
    reader r = { sec->data, e.id_pos + 4, e.end };
    if (read_cie_fields(&r, sec, cie, &w))
        return -1;
    cie->initial_insns = sec->data + r.pos;
    cie->initial_insns_len = r.end - r.pos;
    return 0;
}

/* ------------------------------------------------------------------ FDEs */

/* The CIE pointer must land on the length field of an entry whose id is 0. */
static int check_cie_target(const cfi_section *sec, const entry *fe, size_t cie_off,
                            const where *w)
{
    entry ce;
    cfi_error ignored;
    if (cie_off == fe->off)
        return fail(w, fe->id_pos, "CIE pointer 0x%x points at the FDE itself", fe->id);
    if (read_entry(sec, cie_off, &ce, &ignored) != 1)
        return fail(w, fe->id_pos, "CIE pointer 0x%x (offset 0x%zx) does not point at a valid entry",
                    fe->id, cie_off);
    if (ce.id != 0)
        return fail(w, fe->id_pos, "CIE pointer 0x%x (offset 0x%zx) does not point at a CIE",
                    fe->id, cie_off);
    return 0;
}

static int read_fde_fields(reader *r, const cfi_section *sec, const cfi_cie *cie, cfi_fde *fde,
                           const where *w)
{
    /* pc_range has the pc_begin format but is a length, so no pcrel. */
    if (get_pointer(r, sec, cie->fde_encoding, false, &fde->pc_begin, w, "pc_begin") ||
        get_pointer(r, sec, cie->fde_encoding, true, &fde->pc_range, w, "pc_range"))
        return -1;
    size_t aug_end = r->end;
    bool z = cie->augmentation[0] == 'z';
    if (z && read_aug_length(r, w, &aug_end))
        return -1;
    if (cie->lsda_encoding != PE_OMIT) {
        reader d = { r->p, r->pos, aug_end };
        if (get_pointer(&d, sec, cie->lsda_encoding, false, &fde->lsda, w, "LSDA pointer"))
            return -1;
        fde->has_lsda = true;
        r->pos = d.pos;
    }
    if (z)
        r->pos = aug_end;
    return 0;
}

static int parse_fde(const cfi_section *sec, const entry *e, cfi_cie *cie, cfi_fde *fde,
                     cfi_error *err)
{
    where w = { err, "FDE", e->off };
    /* The pointer counts backwards from its own field. */
    if (e->id > e->id_pos)
        return fail(&w, e->id_pos, "CIE pointer 0x%x points before the start of the section",
                    e->id);
    size_t cie_off = e->id_pos - e->id;
    if (check_cie_target(sec, e, cie_off, &w) || cfi_parse_cie(sec, cie_off, cie, err))
        return -1;
    *fde = (cfi_fde){ .offset = e->off, .cie_offset = cie_off };
    reader r = { sec->data, e->id_pos + 4, e->end };
    if (read_fde_fields(&r, sec, cie, fde, &w))
        return -1;
    fde->insns = sec->data + r.pos;
    fde->insns_len = r.end - r.pos;
    return 0;
}

int cfi_next_fde(const cfi_section *sec, size_t *cursor, cfi_cie *cie, cfi_fde *fde,
                 cfi_error *err)
{
    if (check_section(sec, err))
        return -1;
    if (!cursor || !cie || !fde)
        return failx(err, 0, "cfi_next_fde: missing cursor, CIE or FDE argument");
    size_t off = *cursor;
    if (off > sec->size)
        return failx(err, off, "cursor 0x%zx is past the end of the section (size 0x%zx)", off,
                     sec->size);
    /* Every iteration moves `off` forward by at least 4 bytes. */
    while (off < sec->size) {
        entry e;
        int k = read_entry(sec, off, &e, err);
        if (k < 0)
            break;
        if (k == 1 && e.id != 0) {
            if (parse_fde(sec, &e, cie, fde, err))
                break;
            *cursor = e.end;
            return 1;
        }
        if (k == 1 && cfi_parse_cie(sec, off, cie, err))
            break;
        off = e.end;
    }
    *cursor = off; /* at the end, or at the offending entry */
    return off < sec->size ? -1 : 0;
}

/* ----------------------------------------------------------- interpreter */

static const char *const cfa_names[0x30] = {
    [0x00] = "DW_CFA_nop", [0x01] = "DW_CFA_set_loc", [0x02] = "DW_CFA_advance_loc1",
    [0x03] = "DW_CFA_advance_loc2", [0x04] = "DW_CFA_advance_loc4",
    [0x05] = "DW_CFA_offset_extended", [0x06] = "DW_CFA_restore_extended",
    [0x07] = "DW_CFA_undefined", [0x08] = "DW_CFA_same_value", [0x09] = "DW_CFA_register",
    [0x0a] = "DW_CFA_remember_state", [0x0b] = "DW_CFA_restore_state", [0x0c] = "DW_CFA_def_cfa",
    [0x0d] = "DW_CFA_def_cfa_register", [0x0e] = "DW_CFA_def_cfa_offset",
    [0x0f] = "DW_CFA_def_cfa_expression", [0x10] = "DW_CFA_expression",
    [0x11] = "DW_CFA_offset_extended_sf", [0x12] = "DW_CFA_def_cfa_sf",
    [0x13] = "DW_CFA_def_cfa_offset_sf", [0x14] = "DW_CFA_val_offset",
    [0x15] = "DW_CFA_val_offset_sf", [0x16] = "DW_CFA_val_expression",
    [0x2d] = "DW_CFA_AARCH64_negate_ra_state", [0x2e] = "DW_CFA_GNU_args_size",
    [0x2f] = "DW_CFA_GNU_negative_offset_extended",
};

typedef struct interp {
    const cfi_section *sec;
    const cfi_cie *cie;
    cfi_table *out;
    where w;                /* "CIE at" while running initial_insns, then "FDE at" */
    const char *op;         /* name of the instruction being executed ... */
    size_t op_at;           /* ... and its section offset, for messages */
    uint64_t end_pc;        /* pc_begin + pc_range */
    cfi_row cur;            /* current rules; cur.loc is the current location */
    cfi_reg_rule initial[CFI_MAX_REGS]; /* after the CIE: for DW_CFA_restore */
    cfi_row *stack;         /* DW_CFA_remember_state snapshots (CFA + registers) */
    size_t depth, stack_cap;
} interp;

static int op_fail_rd(interp *in, rd_status st)
{
    return fail_rd(&in->w, st, in->op, in->op_at);
}

static int op_uleb(interp *in, reader *r, uint64_t *v)
{
    rd_status st = read_uleb(r, v);
    return st == RD_OK ? 0 : op_fail_rd(in, st);
}

static int op_sleb(interp *in, reader *r, int64_t *v)
{
    rd_status st = read_sleb(r, v);
    return st == RD_OK ? 0 : op_fail_rd(in, st);
}

static int check_reg(interp *in, uint64_t reg)
{
    if (reg >= CFI_MAX_REGS)
        return fail(&in->w, in->op_at, "%s at 0x%zx: register %" PRIu64 " out of range (max %d)",
                    in->op, in->op_at, reg, CFI_MAX_REGS - 1);
    return 0;
}

static int op_reg(interp *in, reader *r, uint32_t *reg)
{
    uint64_t v;
    if (op_uleb(in, r, &v) || check_reg(in, v))
        return -1;
    *reg = (uint32_t)v;
    return 0;
}

static int overflow(interp *in)
{
    return fail(&in->w, in->op_at, "%s at 0x%zx: offset overflows 64 bits", in->op, in->op_at);
}

/* How an instruction's offset operand is encoded. */
typedef enum operand { OPND_U, OPND_S, OPND_NEG_U } operand;

/* Read an offset operand; `factored` multiplies it by data_align. */
static int op_offset(interp *in, reader *r, operand kind, bool factored, int64_t *off)
{
    int64_t v;
    if (kind == OPND_S) {
        if (op_sleb(in, r, &v))
            return -1;
    } else {
        uint64_t u;
        if (op_uleb(in, r, &u))
            return -1;
        if (u > INT64_MAX)
            return overflow(in);
        v = (int64_t)u;
    }
    if (factored && __builtin_mul_overflow(v, in->cie->data_align, &v))
        return overflow(in);
    if (kind == OPND_NEG_U && __builtin_sub_overflow((int64_t)0, v, &v))
        return overflow(in);
    *off = v;
    return 0;
}

/* ULEB length then that many bytes, which must lie inside the block. */
static int op_block(interp *in, reader *r, const uint8_t **expr, uint32_t *len)
{
    uint64_t n;
    if (op_uleb(in, r, &n))
        return -1;
    if (n > r->end - r->pos || n > UINT32_MAX)
        return fail(&in->w, in->op_at, "%s at 0x%zx: expression length 0x%" PRIx64
                    " runs past the end of the instructions", in->op, in->op_at, n);
    *expr = r->p + r->pos;
    *len = (uint32_t)n;
    r->pos += (size_t)n;
    return 0;
}

/* ----- rows and locations */

static int emit_row(interp *in, uint64_t end)
{
    cfi_table *t = in->out;
    if (t->count == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 8;
        cfi_row *rows = cap > SIZE_MAX / sizeof *rows ? NULL : realloc(t->rows, cap * sizeof *rows);
        if (!rows)
            return fail(&in->w, in->op_at, "out of memory for %zu rows", cap);
        t->rows = rows;
        t->cap = cap;
    }
    cfi_row *row = &t->rows[t->count++];
    *row = in->cur;
    row->end = end;
    return 0;
}

/* Moving the location closes the row for [cur.loc, loc). */
static int advance_to(interp *in, uint64_t loc)
{
    if (loc > in->end_pc)
        return fail(&in->w, in->op_at, "%s at 0x%zx: advance past the end of the FDE range "
                    "(0x%" PRIx64 " > 0x%" PRIx64 ")", in->op, in->op_at, loc, in->end_pc);
    if (loc == in->cur.loc)
        return 0;
    if (emit_row(in, loc))
        return -1;
    in->cur.loc = loc;
    return 0;
}

static int advance_by(interp *in, uint64_t delta)
{
    uint64_t bytes, loc;
    if (__builtin_mul_overflow(delta, in->cie->code_align, &bytes) ||
        __builtin_add_overflow(in->cur.loc, bytes, &loc))
        return fail(&in->w, in->op_at, "%s at 0x%zx: advance past the end of the FDE range "
                    "(location overflows)", in->op, in->op_at);
    return advance_to(in, loc);
}

static int do_advance(interp *in, reader *r, uint8_t op)
{
    uint64_t v;
    if (op == 0x01) {
        rd_status st = read_pointer(r, in->sec, in->cie->fde_encoding, false, &v);
        if (st != RD_OK)
            return op_fail_rd(in, st);
        if (v < in->cur.loc)
            return fail(&in->w, in->op_at, "DW_CFA_set_loc at 0x%zx: location 0x%" PRIx64
                        " goes backwards from 0x%" PRIx64, in->op_at, v, in->cur.loc);
        return advance_to(in, v);
    }
    uint8_t d1 = 0;
    uint16_t d2 = 0;
    uint32_t d4 = 0;
    rd_status st = op == 0x02 ? read_u8(r, &d1) : op == 0x03 ? read_u16(r, &d2) : read_u32(r, &d4);
    if (st != RD_OK)
        return op_fail_rd(in, st);
    return advance_by(in, op == 0x02 ? d1 : op == 0x03 ? d2 : d4);
}

/* ----- state stack */

static int remember_state(interp *in)
{
    if (in->depth == REMEMBER_DEPTH)
        return fail(&in->w, in->op_at, "DW_CFA_remember_state at 0x%zx: nesting deeper than %d",
                    in->op_at, REMEMBER_DEPTH);
    if (in->depth == in->stack_cap) {
        size_t cap = in->stack_cap ? in->stack_cap * 2 : 4;
        cfi_row *s = realloc(in->stack, cap * sizeof *s);
        if (!s)
            return fail(&in->w, in->op_at, "out of memory for DW_CFA_remember_state");
        in->stack = s;
        in->stack_cap = cap;
    }
    in->stack[in->depth++] = in->cur;
    return 0;
}

static int restore_state(interp *in)
{
    if (in->depth == 0)
        return fail(&in->w, in->op_at,
                    "DW_CFA_restore_state at 0x%zx without a matching DW_CFA_remember_state",
                    in->op_at);
    /* The location is not part of the remembered state. */
    const cfi_row *s = &in->stack[--in->depth];
    in->cur.cfa = s->cfa;
    memcpy(in->cur.regs, s->regs, sizeof in->cur.regs);
    in->cur.ra_signed = s->ra_signed; /* AArch64's RA_SIGN_STATE is a (pseudo-)register */
    in->cur.ra_state_set = s->ra_state_set;
    return 0;
}

/* ----- CFA rules */

static int do_cfa(interp *in, reader *r, uint8_t op)
{
    cfi_cfa_rule *cfa = &in->cur.cfa;
    uint32_t reg = cfa->reg;
    int64_t off = cfa->offset;
    if (op == 0x0f) { /* def_cfa_expression */
        cfa->kind = CFI_CFA_EXPRESSION;
        return op_block(in, r, &cfa->expr, &cfa->expr_len);
    }
    /* def_cfa_register/def_cfa_offset(_sf) modify a register+offset rule only. */
    if ((op == 0x0d || op == 0x0e || op == 0x13) && cfa->kind != CFI_CFA_REG_OFFSET)
        return fail(&in->w, in->op_at, "%s at 0x%zx: the CFA rule is not register+offset",
                    in->op, in->op_at);
    if ((op == 0x0c || op == 0x0d || op == 0x12) && op_reg(in, r, &reg))
        return -1;
    /* Only the _sf forms are factored by data_align. */
    if ((op == 0x0c || op == 0x0e) && op_offset(in, r, OPND_U, false, &off))
        return -1;
    if ((op == 0x12 || op == 0x13) && op_offset(in, r, OPND_S, true, &off))
        return -1;
    cfa->kind = CFI_CFA_REG_OFFSET;
    cfa->reg = reg;
    cfa->offset = off;
    cfa->expr = NULL;
    cfa->expr_len = 0;
    return 0;
}

/* ----- register rules */

static int set_offset_rule(interp *in, reader *r, uint32_t reg, cfi_reg_kind kind, operand how)
{
    int64_t off;
    if (op_offset(in, r, how, true, &off))
        return -1;
    in->cur.regs[reg] = (cfi_reg_rule){ .kind = kind, .offset = off };
    return 0;
}

static int do_reg(interp *in, reader *r, uint8_t op)
{
    uint32_t reg, other;
    cfi_reg_rule *rule;
    if (op_reg(in, r, &reg))
        return -1;
    rule = &in->cur.regs[reg];
    switch (op) {
    case 0x05: return set_offset_rule(in, r, reg, CFI_REG_OFFSET, OPND_U);
    case 0x11: return set_offset_rule(in, r, reg, CFI_REG_OFFSET, OPND_S);
    case 0x2f: return set_offset_rule(in, r, reg, CFI_REG_OFFSET, OPND_NEG_U);
    case 0x14: return set_offset_rule(in, r, reg, CFI_REG_VAL_OFFSET, OPND_U);
    case 0x15: return set_offset_rule(in, r, reg, CFI_REG_VAL_OFFSET, OPND_S);
    case 0x06: *rule = in->initial[reg]; return 0;
    case 0x07: *rule = (cfi_reg_rule){ .kind = CFI_REG_UNDEFINED }; return 0;
    case 0x08: *rule = (cfi_reg_rule){ .kind = CFI_REG_SAME_VALUE }; return 0;
    case 0x09:
        if (op_reg(in, r, &other))
            return -1;
        *rule = (cfi_reg_rule){ .kind = CFI_REG_REGISTER, .reg = other };
        return 0;
    default: /* 0x10 expression, 0x16 val_expression */
        *rule = (cfi_reg_rule){ .kind = op == 0x10 ? CFI_REG_EXPRESSION : CFI_REG_VAL_EXPRESSION };
        return op_block(in, r, &rule->expr, &rule->expr_len);
    }
}

/* ----- dispatch */

static int exec_insn(interp *in, reader *r)
{
    uint8_t op;
    in->op_at = r->pos;
    read_u8(r, &op); /* the caller checked pos < end */
    switch (op >> 6) {
    case 1:
        in->op = "DW_CFA_advance_loc";
        return advance_by(in, op & 0x3f);
    case 2:
        in->op = "DW_CFA_offset";
        return set_offset_rule(in, r, op & 0x3f, CFI_REG_OFFSET, OPND_U);
    case 3:
        in->op = "DW_CFA_restore";
        in->cur.regs[op & 0x3f] = in->initial[op & 0x3f];
        return 0;
    }
    in->op = op < sizeof cfa_names / sizeof cfa_names[0] ? cfa_names[op] : NULL;
    if (!in->op)
        return fail(&in->w, in->op_at, "unknown DW_CFA opcode 0x%02x at 0x%zx", op, in->op_at);
    switch (op) {
    case 0x00:
        return 0;
    case 0x2d: /* GNU_window_save on SPARC; the targets here are x86-64 and AArch64 */
        in->cur.ra_signed = !in->cur.ra_signed;
        in->cur.ra_state_set = true;
        return 0;
    case 0x01: case 0x02: case 0x03: case 0x04:
        return do_advance(in, r, op);
    case 0x0a:
        return remember_state(in);
    case 0x0b:
        return restore_state(in);
    case 0x0c: case 0x0d: case 0x0e: case 0x0f: case 0x12: case 0x13:
        return do_cfa(in, r, op);
    case 0x2e: { /* GNU_args_size: outgoing argument area size, irrelevant to the rules */
        uint64_t ignored;
        return op_uleb(in, r, &ignored);
    }
    default:
        return do_reg(in, r, op);
    }
}

/* Section offset of an instruction block, or -1 if it is not inside the section. */
static int block_offset(const cfi_section *sec, const uint8_t *p, size_t len, size_t *off)
{
    uintptr_t base = (uintptr_t)sec->data, q = (uintptr_t)p;
    if (len == 0 && !p) {
        *off = 0;
        return 0;
    }
    if (!p || q < base || q - base > sec->size || len > sec->size - (q - base))
        return -1;
    *off = q - base;
    return 0;
}

/* *used: the block's length without its trailing DW_CFA_nop padding. */
static int run_block(interp *in, const uint8_t *p, size_t len, size_t *used)
{
    reader r = { in->sec->data, 0, 0 };
    if (block_offset(in->sec, p, len, &r.pos))
        return fail(&in->w, 0, "instructions do not lie inside the section");
    size_t start = r.pos;
    r.end = r.pos + len;
    *used = 0;
    while (r.pos < r.end) {
        if (exec_insn(in, &r))
            return -1;
        if (in->sec->data[in->op_at] != 0x00)
            *used = r.pos - start;
    }
    return 0;
}

static int run(interp *in, const cfi_cie *cie, const cfi_fde *fde)
{
    const char *why = encoding_problem(cie->fde_encoding, false);
    if (why)
        return fail(&in->w, cie->offset, "bad FDE pointer encoding 0x%02x: %s",
                    cie->fde_encoding, why);
    in->w.kind = "FDE";
    in->w.at = fde->offset;
    if (__builtin_add_overflow(fde->pc_begin, fde->pc_range, &in->end_pc))
        return fail(&in->w, fde->offset, "pc_begin 0x%" PRIx64 " + pc_range 0x%" PRIx64
                    " overflows", fde->pc_begin, fde->pc_range);
    in->cur.loc = fde->pc_begin;
    in->w.kind = "CIE";
    in->w.at = cie->offset;
    if (run_block(in, cie->initial_insns, cie->initial_insns_len, &in->out->cie_insns_used))
        return -1;
    memcpy(in->initial, in->cur.regs, sizeof in->initial);
    in->w.kind = "FDE";
    in->w.at = fde->offset;
    if (run_block(in, fde->insns, fde->insns_len, &in->out->fde_insns_used))
        return -1;
    in->op = "end of instructions";
    return in->cur.loc < in->end_pc ? emit_row(in, in->end_pc) : 0;
}

int cfi_run(const cfi_section *sec, const cfi_cie *cie, const cfi_fde *fde, cfi_table *out,
            cfi_error *err)
{
    if (check_section(sec, err))
        return -1;
    if (!cie || !fde || !out)
        return failx(err, 0, "cfi_run: missing CIE, FDE or output table");
    /* Two register files of state: keep them off the stack. */
    interp *in = calloc(1, sizeof *in);
    if (!in) {
        cfi_table_free(out);
        return failx(err, fde->offset, "out of memory");
    }
    in->sec = sec;
    in->cie = cie;
    in->out = out;
    in->w = (where){ err, "CIE", cie->offset };
    int rc = run(in, cie, fde);
    free(in->stack);
    free(in);
    if (rc)
        cfi_table_free(out);
    return rc;
}

/* ------------------------------------------------------- table and format */

int cfi_fail(cfi_error *err, size_t offset, const char *fmt, ...)
{
    where w = {err, NULL, 0};
    va_list ap;
    va_start(ap, fmt);
    vfail(&w, offset, fmt, ap);
    va_end(ap);
    return -1;
}

int cfi_table_push(cfi_table *t, const cfi_row *row, uint64_t loc, cfi_error *err)
{
    if (t->count && t->rows[t->count - 1].loc == loc) {
        t->rows[t->count - 1] = *row;
        t->rows[t->count - 1].loc = loc;
        return 0;
    }
    if (t->count == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 8;
        cfi_row *rows = cap > SIZE_MAX / sizeof *rows ? NULL : realloc(t->rows, cap * sizeof *rows);
        if (!rows)
            return cfi_fail(err, 0, "out of memory for %zu rows", cap);
        t->rows = rows;
        t->cap = cap;
    }
    if (t->count)
        t->rows[t->count - 1].end = loc;
    t->rows[t->count] = *row;
    t->rows[t->count++].loc = loc;
    return 0;
}

void cfi_table_free(cfi_table *t)
{
    if (!t)
        return;
    free(t->rows);
    *t = (cfi_table){0};
}

const cfi_row *cfi_row_at(const cfi_table *t, uint64_t pc)
{
    if (!t || !t->rows)
        return NULL;
    /* Rows are sorted and disjoint: find the last one starting at or before pc. */
    size_t lo = 0, hi = t->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->rows[mid].loc <= pc)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return NULL;
    const cfi_row *row = &t->rows[lo - 1];
    return pc < row->end ? row : NULL;
}

/* snprintf-style appender: keeps counting after the buffer is full. */
typedef struct appender {
    char *buf;
    size_t size, len;
} appender;

static void append(appender *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = a->len < a->size ? a->size - a->len : 0;
    int n = vsnprintf(room ? a->buf + a->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        a->len += (size_t)n;
}

static void append_reg(appender *a, cfi_reg_namer *names, uint32_t reg)
{
    const char *name = names ? names(reg) : NULL;
    if (name)
        append(a, "%s", name);
    else
        append(a, "reg%" PRIu32, reg);
}

static void append_rule(appender *a, cfi_reg_namer *names, const cfi_reg_rule *rule)
{
    switch (rule->kind) {
    case CFI_REG_UNDEFINED: append(a, "undefined"); break;
    case CFI_REG_SAME_VALUE: append(a, "same"); break;
    case CFI_REG_OFFSET: append(a, "[CFA%+" PRId64 "]", rule->offset); break;
    case CFI_REG_VAL_OFFSET: append(a, "CFA%+" PRId64, rule->offset); break;
    case CFI_REG_REGISTER: append_reg(a, names, rule->reg); break;
    case CFI_REG_EXPRESSION: append(a, "[expr(%" PRIu32 ")]", rule->expr_len); break;
    case CFI_REG_VAL_EXPRESSION: append(a, "expr(%" PRIu32 ")", rule->expr_len); break;
    default: append(a, "?"); break;
    }
}

size_t cfi_format_row(const cfi_row *row, cfi_reg_namer *names, char *buf, size_t size)
{
    appender a = { buf, buf ? size : 0, 0 };
    if (buf && size)
        buf[0] = '\0';
    if (!row)
        return 0;
    append(&a, "CFA=");
    if (row->cfa.kind == CFI_CFA_REG_OFFSET) {
        append_reg(&a, names, row->cfa.reg);
        append(&a, "%+" PRId64, row->cfa.offset);
    } else if (row->cfa.kind == CFI_CFA_EXPRESSION) {
        append(&a, "expr(%" PRIu32 ")", row->cfa.expr_len);
    } else {
        append(&a, "undefined");
    }
    for (uint32_t reg = 0; reg < CFI_MAX_REGS; reg++) {
        if (reg == CFI_RA_SIGN_STATE && row->ra_state_set) /* in register order, as LLVM's */
            append(&a, " ra_sign_state=%d", row->ra_signed);
        if (row->regs[reg].kind == CFI_REG_UNSPECIFIED)
            continue;
        append(&a, " ");
        append_reg(&a, names, reg);
        append(&a, "=");
        append_rule(&a, names, &row->regs[reg]);
    }
    return a.len;
}
