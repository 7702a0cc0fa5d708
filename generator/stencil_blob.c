/* stencil_blob.c - see stencil_blob.h. */
#include "stencil_blob.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char magic[8] = "SGSTNCL";

/* A trailing jump is one instruction (5 bytes on x86-64, 4 on AArch64). */
#define MAX_REMOVED_JUMP 16

/* ------------------------------------------------------------- writing */

static void put_u8(strbuf *sb, unsigned v)
{
    sb_putc(sb, (char)(uint8_t)v);
}

/* A string preceded by its length in `len_bytes` bytes. */
static void put_str(strbuf *sb, const char *s, unsigned len_bytes)
{
    size_t n = strlen(s);
    sb_put_le(sb, n, len_bytes);
    sb_putn(sb, s, n);
}

static void put_hole(strbuf *sb, const gen_hole *h)
{
    sb_put_le(sb, h->offset, 4);
    put_u8(sb, (unsigned)h->patch);
    put_u8(sb, (unsigned)h->value);
    sb_put_le(sb, h->index, 4);
    sb_put_le(sb, (uint64_t)h->addend, 8);
    put_str(sb, h->reloc, 1);
    put_str(sb, h->symbol, 1);
}

void stencil_blob_encode(strbuf *out, const gen_stencil *s, const char *deps,
                         const digest *context)
{
    sb_putn(out, magic, sizeof magic);
    sb_put_le(out, STENCIL_BLOB_VERSION, 4);
    sb_putn(out, context->b, sizeof context->b);
    sb_put_le(out, s->code_size, 8);
    sb_put_le(out, s->data_size, 8);
    sb_put_le(out, s->data_align, 8);
    sb_put_le(out, s->entry, 8);
    sb_put_le(out, s->removed_jump, 8);
    sb_put_le(out, s->hot_size, 8);
    sb_put_le(out, (s->split ? 1u : 0u) | (s->hot_runs_on ? 2u : 0u), 8); /* hotcold_split */
    sb_put_le(out, s->ncode_holes, 4);
    sb_put_le(out, s->ndata_holes, 4);
    sb_put_le(out, s->ninsns, 4);
    put_str(out, deps, 4);
    if (s->code_size) /* memcpy from NULL is undefined, even for 0 bytes */
        sb_putn(out, s->code, s->code_size);
    if (s->data_size)
        sb_putn(out, s->data, s->data_size);
    for (size_t i = 0; i < s->ncode_holes; i++)
        put_hole(out, &s->code_holes[i]);
    for (size_t i = 0; i < s->ndata_holes; i++)
        put_hole(out, &s->data_holes[i]);
    for (size_t i = 0; i < s->ninsns; i++) {
        put_u8(out, s->insns[i].size);
        put_str(out, stencil_insn_text(s, &s->insns[i]), 1);
    }
}

/* ------------------------------------------------------------- reading */

/* Reads never go past `end`: the first short read sets `failed`, and every
 * later read then returns zeros, so callers check once per section. */
typedef struct reader {
    const uint8_t *p, *start, *end;
    bool failed;
    char *err;
    size_t errsz;
} reader;

static void fail(reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(reader *r, const char *fmt, ...)
{
    if (r->failed)
        return; /* keep the first reason */
    r->failed = true;
    int n = snprintf(r->err, r->errsz, "stencil blob, at byte %zu: ", (size_t)(r->p - r->start));
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < r->errsz)
        vsnprintf(r->err + n, r->errsz - (size_t)n, fmt, ap);
    va_end(ap);
}

static const uint8_t *get_bytes(reader *r, uint64_t n)
{
    if (r->failed)
        return NULL;
    if (n > (uint64_t)(r->end - r->p)) {
        fail(r, "truncated (%" PRIu64 " bytes needed, %zu left)", n, (size_t)(r->end - r->p));
        return NULL;
    }
    const uint8_t *at = r->p;
    r->p += n;
    return at;
}

static uint64_t get_uint(reader *r, unsigned bytes)
{
    const uint8_t *b = get_bytes(r, bytes);
    return b ? load_le(b, bytes) : 0;
}

/* A size_t-sized field no larger than `max`. */
static size_t get_size(reader *r, uint64_t max, const char *what)
{
    uint64_t v = get_uint(r, 8);
    if (!r->failed && v > max)
        fail(r, "%s %" PRIu64 " out of range (at most %" PRIu64 ")", what, v, max);
    return r->failed ? 0 : (size_t)v;
}

/* A string with a `len_bytes` length into buf[cap] (NUL-terminated); no NUL
 * inside, as the encoder never writes one. */
static void get_str(reader *r, unsigned len_bytes, char *buf, size_t cap, const char *what)
{
    uint64_t n = get_uint(r, len_bytes);
    if (!r->failed && n >= cap)
        fail(r, "%s of %" PRIu64 " bytes is too long", what, n);
    const uint8_t *b = get_bytes(r, n);
    if (!b) {
        buf[0] = '\0';
        return;
    }
    if (memchr(b, '\0', n)) {
        fail(r, "%s contains a NUL byte", what);
        buf[0] = '\0';
        return;
    }
    memcpy(buf, b, n);
    buf[n] = '\0';
}

/* Holes must be of known kinds, name existing operands and symbols, lie inside
 * their code or data (`limit` bytes), and come sorted as the extraction leaves
 * them (the listing relies on the order). */
static void get_holes(reader *r, gen_hole *holes, size_t n, size_t limit, size_t nsymbols,
                      const char *where)
{
    for (size_t i = 0; i < n && !r->failed; i++) {
        gen_hole *h = &holes[i];
        h->offset = (uint32_t)get_uint(r, 4);
        unsigned patch = (unsigned)get_uint(r, 1), value = (unsigned)get_uint(r, 1);
        h->index = (uint32_t)get_uint(r, 4);
        h->addend = (int64_t)get_uint(r, 8);
        get_str(r, 1, h->reloc, sizeof h->reloc, "relocation name");
        get_str(r, 1, h->symbol, sizeof h->symbol, "symbol name");
        if (r->failed)
            return;
        h->patch = (sg_patch)patch;
        h->value = (sg_value)value;
        uint32_t max_index = value == SG_VALUE_OPERAND ? SG_OPERANDS
                             : value == SG_VALUE_SYMBOL ? (uint32_t)(nsymbols < UINT32_MAX ? nsymbols : UINT32_MAX)
                                                        : 1;
        if (patch >= SG_PATCH__COUNT || value >= SG_VALUE__COUNT)
            fail(r, "%s hole %zu: kind %u/%u out of range", where, i, patch, value);
        else if (h->index >= max_index)
            fail(r, "%s hole %zu: index %" PRIu32 " out of range", where, i, h->index);
        else if (h->offset >= limit)
            fail(r, "%s hole %zu: offset 0x%" PRIx32 " outside %zu bytes", where, i, h->offset,
                 limit);
        else if (i && h->offset < holes[i - 1].offset)
            fail(r, "%s hole %zu: out of order", where, i);
    }
}

/* Instructions tile the code exactly; their texts go to one pool. */
static void get_insns(reader *r, gen_stencil *s)
{
    strbuf pool = {0};
    size_t pc = 0;
    for (size_t i = 0; i < s->ninsns && !r->failed; i++) {
        unsigned size = (unsigned)get_uint(r, 1);
        char text[sizeof ((lb_insn){0}).text]; /* what the disassembler can produce */
        get_str(r, 1, text, sizeof text, "instruction text");
        if (r->failed)
            break;
        if (size == 0 || size > s->code_size - pc) {
            fail(r, "instruction %zu at +0x%zx: size %u does not fit the code", i, pc, size);
            break;
        }
        s->insns[i] = (gen_insn){.offset = (uint32_t)pc,
                                .size = size,
                                .text = (uint32_t)pool.len,
                                .decoded = true};
        sb_putn(&pool, text, strlen(text) + 1);
        pc += size;
    }
    if (!r->failed && pc != s->code_size)
        fail(r, "instructions cover %zu of %zu code bytes", pc, s->code_size);
    s->insn_text = pool.data ? pool.data : xstrdup("");
    s->insn_text_size = pool.len;
}

/* Decoded into `t`; handed over only when everything checked out. */
static bool decode(reader *r, const digest *context, size_t nsymbols, gen_stencil *t,
                   char **deps)
{
    const uint8_t *m = get_bytes(r, sizeof magic);
    if (!m || memcmp(m, magic, sizeof magic)) {
        fail(r, "not a stencil blob");
        return false;
    }
    uint32_t version = (uint32_t)get_uint(r, 4);
    if (!r->failed && version != STENCIL_BLOB_VERSION)
        fail(r, "format version %" PRIu32 ", this stencilgen reads %u", version,
             STENCIL_BLOB_VERSION);
    const uint8_t *ctx = get_bytes(r, sizeof context->b);
    if (!r->failed && memcmp(ctx, context->b, sizeof context->b))
        fail(r, "made by another generator, LLVM or symbol list");
    size_t left = (size_t)(r->end - r->p); /* bounds every count below */
    t->code_size = get_size(r, left, "code size");
    t->data_size = get_size(r, left, "data size");
    t->data_align = get_size(r, (uint64_t)1 << 30, "data alignment");
    t->entry = get_size(r, t->code_size, "entry");
    t->removed_jump = get_size(r, MAX_REMOVED_JUMP, "removed jump");
    t->hot_size = get_size(r, t->code_size, "hot part");
    unsigned parts = (unsigned)get_size(r, 3, "hot and cold layout");
    t->split = parts & 1;
    t->hot_runs_on = parts & 2;
    if (!r->failed && (t->data_align == 0 || (t->data_align & (t->data_align - 1))))
        fail(r, "data alignment %zu is not a power of two", t->data_align);
    /* Each hole takes at least 20 bytes and each instruction 2: counts beyond
     * that are damage, and must not size an allocation. */
    t->ncode_holes = (size_t)get_uint(r, 4);
    t->ndata_holes = (size_t)get_uint(r, 4);
    t->ninsns = (size_t)get_uint(r, 4);
    if (!r->failed && (t->ncode_holes > left / 20 || t->ndata_holes > left / 20 ||
                       t->ninsns > left / 2))
        fail(r, "counts %zu/%zu/%zu exceed the blob", t->ncode_holes, t->ndata_holes, t->ninsns);
    uint64_t dlen = get_uint(r, 4);
    const uint8_t *d = get_bytes(r, dlen);
    if (d && memchr(d, '\0', dlen))
        fail(r, "depfile text contains a NUL byte");
    const uint8_t *code = get_bytes(r, t->code_size), *data = get_bytes(r, t->data_size);
    if (r->failed)
        return false;
    t->code = xmalloc(t->code_size);
    memcpy(t->code, code, t->code_size);
    if (t->data_size) {
        t->data = xmalloc(t->data_size);
        memcpy(t->data, data, t->data_size);
    }
    t->code_holes = xcalloc(t->ncode_holes, sizeof *t->code_holes);
    t->data_holes = xcalloc(t->ndata_holes, sizeof *t->data_holes);
    t->insns = xcalloc(t->ninsns, sizeof *t->insns);
    get_holes(r, t->code_holes, t->ncode_holes, t->code_size, nsymbols, "code");
    get_holes(r, t->data_holes, t->ndata_holes, t->data_size, nsymbols, "data");
    get_insns(r, t);
    if (!r->failed && r->p != r->end)
        fail(r, "%zu bytes after the end", (size_t)(r->end - r->p));
    if (!r->failed)
        *deps = xstrndup((const char *)d, (size_t)dlen);
    return !r->failed;
}

bool stencil_blob_decode(const uint8_t *buf, size_t size, const digest *context, size_t nsymbols,
                          gen_stencil *s, char **deps, char *err, size_t errsz)
{
    reader r = {buf, buf, buf + size, false, err, errsz};
    gen_stencil t = {0};
    if (!decode(&r, context, nsymbols, &t, deps)) {
        /* not stencil_free: this module stays free of the extraction's
         * dependencies (LLVM), so the fuzzer can link it alone */
        free(t.code);
        free(t.data);
        free(t.code_holes);
        free(t.data_holes);
        free(t.insns);
        free(t.insn_text);
        return false;
    }
    s->code = t.code;
    s->code_size = t.code_size;
    s->data = t.data;
    s->data_size = t.data_size;
    s->data_align = t.data_align;
    s->code_holes = t.code_holes;
    s->ncode_holes = t.ncode_holes;
    s->data_holes = t.data_holes;
    s->ndata_holes = t.ndata_holes;
    s->entry = t.entry;
    s->removed_jump = t.removed_jump;
    s->hot_size = t.hot_size;
    s->split = t.split;
    s->hot_runs_on = t.hot_runs_on;
    s->insns = t.insns;
    s->ninsns = t.ninsns;
    s->insn_text = t.insn_text;
    s->insn_text_size = t.insn_text_size;
    return true;
}
