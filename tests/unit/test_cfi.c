/* test_cfi.c - unit tests for generator/cfi.c, built from hand-assembled
 * .eh_frame bytes.  Prints "ok NAME" / "FAIL NAME: why" per test and a final
 * "N passed, N failed" line; exits 0 iff everything passed. */
#include "../../generator/cfi.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- harness */

/* Shared per-test state, reset by run_test so failing tests cannot leak. */
static cfi_table T;
static cfi_error E;
static cfi_cie C;
static cfi_fde F;
static cfi_section S;

#define UNIT_ERR E.msg
static void unit_reset(void)
{
    memset(&E, 0, sizeof E);
    memset(&C, 0, sizeof C);
    memset(&F, 0, sizeof F);
}

static void unit_cleanup(void)
{
    cfi_table_free(&T);
}

#include "unit_harness.h"

#define CHECK_STR(got, want)                                                          \
    do {                                                                              \
        if (strcmp((got), (want)) != 0) {                                             \
            snprintf(why, sizeof why, "line %d: got \"%s\" want \"%s\"", __LINE__, (got), \
                     (want));                                                         \
            return 0;                                                                 \
        }                                                                             \
    } while (0)

/* ------------------------------------------------------------- builder */

typedef struct buf {
    uint8_t b[8192];
    size_t n;
} buf;

static buf G;

static void u8(buf *b, unsigned v) { if (b->n < sizeof b->b) b->b[b->n++] = (uint8_t)v; }
static void uN(buf *b, uint64_t v, unsigned n) { for (unsigned i = 0; i < n; i++) u8(b, (unsigned)(v >> (8 * i)) & 0xff); }
static void u16(buf *b, uint64_t v) { uN(b, v, 2); }
static void u32(buf *b, uint64_t v) { uN(b, v, 4); }
static void u64(buf *b, uint64_t v) { uN(b, v, 8); }
static void raw(buf *b, const uint8_t *p, size_t n) { for (size_t i = 0; i < n; i++) u8(b, p[i]); }
static void str(buf *b, const char *s) { raw(b, (const uint8_t *)s, strlen(s) + 1); }

static void uleb(buf *b, uint64_t v)
{
    do {
        uint8_t byte = v & 0x7f;
        v >>= 7;
        u8(b, byte | (v ? 0x80 : 0));
    } while (v);
}

static void sleb(buf *b, int64_t v)
{
    for (;;) {
        uint8_t byte = (uint8_t)(v & 0x7f);
        v >>= 7; /* arithmetic on gcc/clang */
        if ((v == 0 && !(byte & 0x40)) || (v == -1 && (byte & 0x40))) {
            u8(b, byte);
            return;
        }
        u8(b, byte | 0x80);
    }
}

#define BYTES(...) (const uint8_t[]){ __VA_ARGS__ }, sizeof((const uint8_t[]){ __VA_ARGS__ })

/* Length placeholder; returns the entry offset for end_entry. */
static size_t begin_entry(buf *b, int is64)
{
    size_t at = b->n;
    if (is64) {
        u32(b, 0xffffffff);
        u64(b, 0);
    } else {
        u32(b, 0);
    }
    return at;
}

static void end_entry(buf *b, size_t at)
{
    int is64 = memcmp(b->b + at, "\xff\xff\xff\xff", 4) == 0;
    size_t body = at + (is64 ? 12 : 4), len = b->n - body;
    for (unsigned i = 0; i < (is64 ? 8u : 4u); i++)
        b->b[at + (is64 ? 4 : 0) + i] = (uint8_t)((uint64_t)len >> (8 * i));
}

/* CIE header up to and including the return-address register. */
static size_t begin_cie(buf *b, int version, const char *aug, uint64_t ca, int64_t da, unsigned ra)
{
    size_t at = begin_entry(b, 0);
    u32(b, 0);
    u8(b, (unsigned)version);
    str(b, aug);
    if (version == 4) {
        u8(b, 8);
        u8(b, 0);
    }
    uleb(b, ca);
    sleb(b, da);
    if (version == 1)
        u8(b, ra);
    else
        uleb(b, ra);
    return at;
}

/* FDE header up to the CIE pointer (pointing back at the CIE at `cie`). */
static size_t begin_fde_ex(buf *b, size_t cie, int is64)
{
    size_t at = begin_entry(b, is64);
    u32(b, b->n - cie);
    return at;
}
static size_t begin_fde(buf *b, size_t cie) { return begin_fde_ex(b, cie, 0); }

static void section(buf *b, uint64_t addr, uint8_t asz)
{
    S = (cfi_section){ .data = b->b, .size = b->n, .addr = addr, .addr_size = asz };
}

static int first_fde(void)
{
    size_t cur = 0;
    int k = cfi_next_fde(&S, &cur, &C, &F, &E);
    return k == 1 ? 0 : -1;
}

static int walk_and_run(void)
{
    if (first_fde())
        return -1;
    return cfi_run(&S, &C, &F, &T, &E);
}

static uint64_t code_align = 1;
static int64_t data_align = -8;

/* CIE v1 "zR" (R = udata4), then one FDE for [0x1000, 0x1100). */
static int run_simple(const uint8_t *ci, size_t cn, const uint8_t *fi, size_t fn)
{
    G.n = 0;
    size_t c = begin_cie(&G, 1, "zR", code_align, data_align, 16);
    uleb(&G, 1);
    u8(&G, 0x03);
    raw(&G, ci, cn);
    end_entry(&G, c);
    size_t f = begin_fde(&G, c);
    u32(&G, 0x1000);
    u32(&G, 0x100);
    uleb(&G, 0);
    raw(&G, fi, fn);
    end_entry(&G, f);
    section(&G, 0, 8);
    return walk_and_run();
}

#define DEF_CFA_RSP8 0x0c, 0x07, 0x08 /* DW_CFA_def_cfa: r7 ofs 8 */
#define RIP_AT_M8 0x90, 0x01          /* DW_CFA_offset: r16 at cfa-8 */
#define NO_INSNS NULL, 0

static const char *x86_name(uint32_t r)
{
    static const char *const n[] = { "rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp", "r8",
                                     "r9", "r10", "r11", "r12", "r13", "r14", "r15", "rip" };
    return r < 17 ? n[r] : NULL;
}

static const char *fmt(const cfi_row *row)
{
    static char s[512];
    cfi_format_row(row, x86_name, s, sizeof s);
    return s;
}

/* Expect success with `n` rows and return whether the rows tile [0x1000, 0x1100). */
static int rows_tile(size_t n)
{
    if (T.count != n)
        return 0;
    uint64_t loc = 0x1000;
    for (size_t i = 0; i < n; i++) {
        if (T.rows[i].loc != loc || T.rows[i].end <= loc)
            return 0;
        loc = T.rows[i].end;
    }
    return loc == 0x1100;
}

/* Expect an error containing `needle`, with the table freed. */
static int is_error(int rc, const char *needle)
{
    return rc == -1 && E.msg[0] && strstr(E.msg, needle) && !T.rows && T.count == 0 && T.cap == 0;
}

#define EXPECT_ERR(rc, needle)                                                               \
    do {                                                                                     \
        int rc_ = (rc);                                                                      \
        if (!is_error(rc_, needle)) {                                                        \
            snprintf(why, sizeof why, "line %d: rc=%d msg=\"%s\", wanted \"%s\"", __LINE__, \
                     rc_, E.msg, needle);                                                    \
            return 0;                                                                        \
        }                                                                                    \
    } while (0)

/* -------------------------------------------------------- opcode tests */

TEST(advance_loc)
{
    CHECK(run_simple(BYTES(DEF_CFA_RSP8), BYTES(0x41, 0x0e, 0x10, 0x44, 0x40, 0x0e, 0x18)) == 0);
    CHECK(rows_tile(3));
    CHECK(T.rows[0].end == 0x1001 && T.rows[0].cfa.offset == 8);
    CHECK(T.rows[1].end == 0x1005 && T.rows[1].cfa.offset == 16);
    CHECK(T.rows[2].cfa.kind == CFI_CFA_REG_OFFSET && T.rows[2].cfa.reg == 7 && T.rows[2].cfa.offset == 24);
    return 1;
}

TEST(advance_loc_code_align)
{
    code_align = 4;
    int rc = run_simple(BYTES(0x0c, 31, 0), BYTES(0x42, 0x0e, 0x10, 0x02, 0x03, 0x0e, 0x20));
    code_align = 1;
    CHECK(rc == 0 && rows_tile(3));
    CHECK(T.rows[0].end == 0x1008 && T.rows[1].end == 0x1014);
    CHECK(T.rows[2].cfa.reg == 31 && T.rows[2].cfa.offset == 32);
    return 1;
}

TEST(advance_loc124)
{
    CHECK(run_simple(BYTES(DEF_CFA_RSP8), BYTES(0x02, 0x10, 0x0e, 0x10, 0x03, 0x20, 0x00, 0x0e, 0x18,
                                                0x04, 0x30, 0x00, 0x00, 0x00, 0x0e, 0x20)) == 0);
    CHECK(rows_tile(4));
    CHECK(T.rows[0].end == 0x1010 && T.rows[1].end == 0x1030 && T.rows[2].end == 0x1060);
    CHECK(T.rows[3].cfa.offset == 32);
    return 1;
}

TEST(advance_zero_emits_nothing)
{
    CHECK(run_simple(BYTES(DEF_CFA_RSP8), BYTES(0x40, 0x02, 0x00, 0x0e, 0x10)) == 0);
    CHECK(rows_tile(1) && T.rows[0].cfa.offset == 16);
    return 1;
}

TEST(set_loc)
{
    CHECK(run_simple(BYTES(DEF_CFA_RSP8), BYTES(0x01, 0x10, 0x10, 0, 0, 0x0e, 0x10, 0x01, 0x10,
                                                0x10, 0, 0, 0x0e, 0x18)) == 0);
    CHECK(rows_tile(2) && T.rows[0].end == 0x1010 && T.rows[1].cfa.offset == 24);
    return 1;
}

TEST(nop_and_empty_fde)
{
    CHECK(run_simple(BYTES(DEF_CFA_RSP8, 0x00), BYTES(0x00, 0x00, 0x00)) == 0);
    CHECK(rows_tile(1) && T.rows[0].cfa.reg == 7);
    return 1;
}

TEST(offset)
{
    CHECK(run_simple(BYTES(DEF_CFA_RSP8), BYTES(0x83, 0x02, 0xbf, 0x01)) == 0);
    CHECK(rows_tile(1));
    CHECK(T.rows[0].regs[3].kind == CFI_REG_OFFSET && T.rows[0].regs[3].offset == -16);
    CHECK(T.rows[0].regs[63].kind == CFI_REG_OFFSET && T.rows[0].regs[63].offset == -8);
    return 1;
}

TEST(offset_extended_variants)
{
    /* offset_extended r100 2; offset_extended_sf r5 -2 (=> +16); negative_offset_extended r6 1 */
    CHECK(run_simple(BYTES(DEF_CFA_RSP8), BYTES(0x05, 100, 2, 0x11, 5, 0x7e, 0x2f, 6, 1)) == 0);
    CHECK(rows_tile(1));
    CHECK(T.rows[0].regs[100].kind == CFI_REG_OFFSET && T.rows[0].regs[100].offset == -16);
    CHECK(T.rows[0].regs[5].kind == CFI_REG_OFFSET && T.rows[0].regs[5].offset == 16);
    CHECK(T.rows[0].regs[6].kind == CFI_REG_OFFSET && T.rows[0].regs[6].offset == 8);
    return 1;
}

TEST(val_offset)
{
    CHECK(run_simple(BYTES(DEF_CFA_RSP8), BYTES(0x14, 3, 2, 0x15, 4, 0x7f)) == 0);
    CHECK(rows_tile(1));
    CHECK(T.rows[0].regs[3].kind == CFI_REG_VAL_OFFSET && T.rows[0].regs[3].offset == -16);
    CHECK(T.rows[0].regs[4].kind == CFI_REG_VAL_OFFSET && T.rows[0].regs[4].offset == 8);
    return 1;
}

TEST(restore)
{
    /* CIE: rip at cfa-8.  FDE: rip at -16, rbx at -24, then restore both. */
    CHECK(run_simple(BYTES(DEF_CFA_RSP8, RIP_AT_M8),
                     BYTES(0x90, 0x02, 0x83, 0x03, 0x41, 0xd0, 0x06, 3)) == 0);
    CHECK(rows_tile(2));
    CHECK(T.rows[0].regs[16].offset == -16 && T.rows[0].regs[3].kind == CFI_REG_OFFSET);
    CHECK(T.rows[1].regs[16].kind == CFI_REG_OFFSET && T.rows[1].regs[16].offset == -8);
    CHECK(T.rows[1].regs[3].kind == CFI_REG_UNSPECIFIED);
    return 1;
}

TEST(undefined_same_register)
{
    CHECK(run_simple(BYTES(DEF_CFA_RSP8), BYTES(0x07, 16, 0x08, 3, 0x09, 6, 12)) == 0);
    CHECK(rows_tile(1));
    CHECK(T.rows[0].regs[16].kind == CFI_REG_UNDEFINED);
    CHECK(T.rows[0].regs[3].kind == CFI_REG_SAME_VALUE);
    CHECK(T.rows[0].regs[6].kind == CFI_REG_REGISTER && T.rows[0].regs[6].reg == 12);
    return 1;
}

TEST(remember_restore_state)
{
    /* remember; cfa+=8, rbx saved; advance; restore_state; advance */
    CHECK(run_simple(BYTES(DEF_CFA_RSP8),
                     BYTES(0x0a, 0x0e, 0x10, 0x83, 0x02, 0x42, 0x0b, 0x42)) == 0);
    CHECK(rows_tile(3));
    CHECK(T.rows[0].cfa.offset == 16 && T.rows[0].regs[3].kind == CFI_REG_OFFSET);
    CHECK(T.rows[1].loc == 0x1002 && T.rows[1].cfa.offset == 8 && T.rows[1].regs[3].kind == 0);
    CHECK(T.rows[1].end == 0x1004);
    return 1;
}

TEST(def_cfa_family)
{
    /* def_cfa r7+8; def_cfa_register r6; def_cfa_offset 32; def_cfa_sf r5 -2 (=>16);
     * def_cfa_offset_sf -3 (=>24) */
    CHECK(run_simple(BYTES(DEF_CFA_RSP8), BYTES(0x41, 0x0d, 6, 0x41, 0x0e, 32, 0x41, 0x12, 5, 0x7e,
                                                0x41, 0x13, 0x7d)) == 0);
    CHECK(rows_tile(5));
    CHECK(T.rows[1].cfa.reg == 6 && T.rows[1].cfa.offset == 8);
    CHECK(T.rows[2].cfa.reg == 6 && T.rows[2].cfa.offset == 32);
    CHECK(T.rows[3].cfa.reg == 5 && T.rows[3].cfa.offset == 16);
    CHECK(T.rows[4].cfa.reg == 5 && T.rows[4].cfa.offset == 24);
    return 1;
}

TEST(expressions)
{
    /* def_cfa_expression {77 08}; expression r3 {1 byte}; val_expression r4 {3 bytes} */
    CHECK(run_simple(NO_INSNS, BYTES(0x0f, 2, 0x77, 0x08, 0x10, 3, 1, 0x96, 0x16, 4, 3, 1, 2, 3)) == 0);
    CHECK(rows_tile(1));
    CHECK(T.rows[0].cfa.kind == CFI_CFA_EXPRESSION && T.rows[0].cfa.expr_len == 2 &&
          T.rows[0].cfa.expr[0] == 0x77);
    CHECK(T.rows[0].regs[3].kind == CFI_REG_EXPRESSION && T.rows[0].regs[3].expr_len == 1 &&
          T.rows[0].regs[3].expr[0] == 0x96);
    CHECK(T.rows[0].regs[4].kind == CFI_REG_VAL_EXPRESSION && T.rows[0].regs[4].expr_len == 3);
    CHECK_STR(fmt(&T.rows[0]), "CFA=expr(2) rbx=[expr(1)] rsi=expr(3)");
    return 1;
}

TEST(gnu_ops)
{
    /* negate_ra_state, args_size 16, then an offset to prove decoding stayed in sync */
    CHECK(run_simple(BYTES(DEF_CFA_RSP8), BYTES(0x2d, 0x2e, 0x10, 0x83, 0x02)) == 0);
    CHECK(rows_tile(1) && T.rows[0].regs[3].offset == -16 && T.rows[0].ra_signed);
    return 1;
}

TEST(ra_sign_state)
{
    /* AArch64 pac-ret: signed from +4 (paciasp), remembered, unsigned at +8,
     * restored (signed again) at +12, unsigned at +16 (autiasp) */
    CHECK(run_simple(BYTES(DEF_CFA_RSP8), BYTES(0x44, 0x2d, 0x0a, 0x44, 0x2d, 0x44, 0x0b, 0x44,
                                                0x2d)) == 0);
    CHECK(T.count == 5);
    CHECK(!T.rows[0].ra_signed && !T.rows[0].ra_state_set);
    CHECK(T.rows[1].ra_signed && T.rows[1].ra_state_set);
    CHECK(!T.rows[2].ra_signed && T.rows[3].ra_signed && !T.rows[4].ra_signed &&
          T.rows[4].ra_state_set);
    CHECK_STR(fmt(&T.rows[1]), "CFA=rsp+8 ra_sign_state=1");
    CHECK_STR(fmt(&T.rows[4]), "CFA=rsp+8 ra_sign_state=0");
    return 1;
}

TEST(cfa_unset)
{
    CHECK(run_simple(NO_INSNS, BYTES(0x83, 0x01)) == 0);
    CHECK(rows_tile(1) && T.rows[0].cfa.kind == CFI_CFA_UNSET);
    CHECK_STR(fmt(&T.rows[0]), "CFA=undefined rbx=[CFA-8]");
    return 1;
}

TEST(zero_range)
{
    G.n = 0;
    size_t c = begin_cie(&G, 1, "zR", 1, -8, 16);
    uleb(&G, 1);
    u8(&G, 0x03);
    u8(&G, 0x0c), u8(&G, 7), u8(&G, 8);
    end_entry(&G, c);
    size_t f = begin_fde(&G, c);
    u32(&G, 0x1000);
    u32(&G, 0);
    uleb(&G, 0);
    end_entry(&G, f);
    section(&G, 0, 8);
    CHECK(walk_and_run() == 0 && T.count == 0);
    return 1;
}

/* ------------------------------------------------------ augmentations */

/* CIE with `aug`/aug data then an FDE whose pc fields and aug data the caller writes. */
static size_t cie_with(const char *aug, const uint8_t *ad, size_t an)
{
    G.n = 0;
    size_t c = begin_cie(&G, 1, aug, 1, -8, 16);
    uleb(&G, an);
    raw(&G, ad, an);
    u8(&G, 0x0c), u8(&G, 7), u8(&G, 8);
    end_entry(&G, c);
    return c;
}

TEST(aug_R_pcrel_sdata4)
{
    size_t c = cie_with("zR", BYTES(0x1b));
    size_t f = begin_fde(&G, c);
    size_t field = G.n;
    u32(&G, (uint32_t)-0x100); /* pc_begin = addr + field - 0x100 */
    u32(&G, 0x40);
    uleb(&G, 0);
    end_entry(&G, f);
    section(&G, 0x400000, 8);
    CHECK(walk_and_run() == 0);
    CHECK(C.fde_encoding == 0x1b);
    CHECK(F.pc_begin == 0x400000 + field - 0x100 && F.pc_range == 0x40);
    CHECK(T.count == 1 && T.rows[0].loc == F.pc_begin && T.rows[0].end == F.pc_begin + 0x40);
    return 1;
}

TEST(aug_R_absptr_udata8_uleb_sdata2)
{
    static const struct { uint8_t enc, asz; unsigned w; } cases[] = {
        { 0x00, 8, 8 }, { 0x04, 8, 8 }, { 0x00, 4, 4 }, { 0x03, 4, 4 }, { 0x01, 8, 0 },
        { 0x09, 8, 0 }, { 0x02, 8, 2 }, { 0x0a, 4, 2 }, { 0x0c, 8, 8 }, { 0x08, 4, 4 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t c = cie_with("zR", &cases[i].enc, 1);
        size_t f = begin_fde(&G, c);
        if (cases[i].enc == 0x01) {
            uleb(&G, 0x123456), uleb(&G, 0x20);
        } else if (cases[i].enc == 0x09) {
            sleb(&G, 0x123456), sleb(&G, 0x20);
        } else if (cases[i].enc == 0x02) {
            u16(&G, 0x3456), u16(&G, 0x20);
        } else if (cases[i].enc == 0x0a) {
            u16(&G, 0xfff0), u16(&G, 0x20); /* sdata2 -16, absolute */
        } else {
            uN(&G, 0x123456, cases[i].w), uN(&G, 0x20, cases[i].w);
        }
        uleb(&G, 0);
        end_entry(&G, f);
        section(&G, 0x5000, cases[i].asz);
        CHECK(walk_and_run() == 0);
        uint64_t want = cases[i].enc == 0x0a ? 0xfffffff0u : cases[i].enc == 0x02 ? 0x3456 : 0x123456;
        CHECK(F.pc_begin == want && F.pc_range == 0x20 && T.count == 1);
        cfi_table_free(&T);
    }
    return 1;
}

TEST(aug_P_L)
{
    /* zPLR: P = indirect|pcrel|sdata4, L = pcrel|sdata4, R = pcrel|sdata4 */
    G.n = 0;
    size_t c = begin_cie(&G, 1, "zPLR", 1, -8, 16);
    uleb(&G, 7);
    u8(&G, 0x9b);
    size_t pfield = G.n;
    u32(&G, 0x100);
    u8(&G, 0x1b);
    u8(&G, 0x1b);
    end_entry(&G, c);
    size_t f = begin_fde(&G, c);
    u32(&G, 0);
    u32(&G, 0x10);
    uleb(&G, 4);
    size_t lfield = G.n;
    u32(&G, 0x200);
    u8(&G, 0x41);
    end_entry(&G, f);
    section(&G, 0x1000, 8);
    CHECK(walk_and_run() == 0);
    CHECK(!strcmp(C.augmentation, "zPLR") && C.personality_encoding == 0x9b);
    CHECK(C.personality == 0x1000 + pfield + 0x100);
    CHECK(C.lsda_encoding == 0x1b && F.has_lsda && F.lsda == 0x1000 + lfield + 0x200);
    CHECK(T.count == 2);
    return 1;
}

TEST(aug_P_absptr_L_omit)
{
    size_t c = cie_with("zPLR", BYTES(0x00, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0xff, 0x03));
    size_t f = begin_fde(&G, c);
    u32(&G, 0x2000);
    u32(&G, 0x10);
    uleb(&G, 0);
    end_entry(&G, f);
    section(&G, 0, 8);
    CHECK(walk_and_run() == 0);
    CHECK(C.personality == 0x1122334455667788u && !F.has_lsda && F.pc_begin == 0x2000);
    return 1;
}

TEST(aug_S_B_G)
{
    size_t c = cie_with("zRSBG", BYTES(0x03));
    size_t f = begin_fde(&G, c);
    u32(&G, 0x10), u32(&G, 0x10), uleb(&G, 0);
    end_entry(&G, f);
    section(&G, 0, 8);
    CHECK(walk_and_run() == 0 && C.signal_frame && T.count == 1);
    return 1;
}

TEST(aug_data_length_respected)
{
    /* Three bytes of augmentation data where 'R' needs one: the rest is skipped. */
    size_t c = cie_with("zR", BYTES(0x03, 0xee, 0xee));
    size_t f = begin_fde(&G, c);
    u32(&G, 0x10), u32(&G, 0x10), uleb(&G, 2), u8(&G, 0xee), u8(&G, 0xee), u8(&G, 0x0e), u8(&G, 0x20);
    end_entry(&G, f);
    section(&G, 0, 8);
    CHECK(walk_and_run() == 0 && T.count == 1 && T.rows[0].cfa.offset == 32);
    return 1;
}

TEST(cie_versions_3_4_and_no_aug)
{
    for (int v = 3; v <= 4; v++) {
        G.n = 0;
        size_t c = begin_cie(&G, v, "", 4, -8, 30); /* no 'R': absptr pointers */
        u8(&G, 0x0c), u8(&G, 31), u8(&G, 0);
        end_entry(&G, c);
        size_t f = begin_fde(&G, c);
        u64(&G, 0x4000), u64(&G, 0x20), u8(&G, 0x41), u8(&G, 0x0e), u8(&G, 16);
        end_entry(&G, f);
        section(&G, 0, 8);
        CHECK(walk_and_run() == 0);
        CHECK(C.version == v && C.ra_reg == 30 && C.code_align == 4 && T.count == 2);
        CHECK(T.rows[0].end == 0x4004 && T.rows[1].cfa.offset == 16);
        cfi_table_free(&T);
    }
    return 1;
}

TEST(length_64bit)
{
    G.n = 0;
    size_t c = begin_cie(&G, 1, "zR", 1, -8, 16);
    uleb(&G, 1), u8(&G, 0x03), u8(&G, 0x0c), u8(&G, 7), u8(&G, 8);
    end_entry(&G, c);
    size_t f = begin_fde_ex(&G, c, 1);
    u32(&G, 0x1000), u32(&G, 0x100), uleb(&G, 0), u8(&G, 0x41), u8(&G, 0x0e), u8(&G, 16);
    end_entry(&G, f);
    section(&G, 0, 8);
    CHECK(walk_and_run() == 0 && rows_tile(2) && F.offset == f);
    return 1;
}

TEST(aug_unknown_letter)
{
    cie_with("zRX", BYTES(0x03));
    section(&G, 0, 8);
    EXPECT_ERR(cfi_parse_cie(&S, 0, &C, &E), "unknown augmentation 'X' in CIE at 0x0");
    return 1;
}

TEST(aug_eh_rejected)
{
    cie_with("eh", BYTES(0));
    section(&G, 0, 8);
    EXPECT_ERR(cfi_parse_cie(&S, 0, &C, &E), "\"eh\"");
    return 1;
}

/* ----------------------------------------------------------- realistic */

TEST(x86_64_clang_frame)
{
    /* CIE as clang emits it, FDE for: push rbp; mov rbp,rsp; push rbx; push rax; ...;
     * add rsp,8; pop rbx; pop rbp; ret */
    G.n = 0;
    size_t c = begin_cie(&G, 1, "zR", 1, -8, 16);
    uleb(&G, 1), u8(&G, 0x1b);
    raw(&G, BYTES(0x0c, 0x07, 0x08, 0x90, 0x01, 0x00, 0x00));
    end_entry(&G, c);
    size_t f = begin_fde(&G, c);
    u32(&G, (uint32_t)-0x20); /* pcrel */
    u32(&G, 0x30);
    uleb(&G, 0);
    raw(&G, BYTES(0x41, 0x0e, 0x10, 0x86, 0x02, 0x43, 0x0d, 0x06, 0x45, 0x83, 0x03,
                  0x5f, 0x0c, 0x07, 0x08, 0x00));
    end_entry(&G, f);
    section(&G, 0x401000, 8);
    CHECK(walk_and_run() == 0);
    uint64_t pc = 0x401000 + 0x20 - 0x20; /* pc_begin field sits at 0x20 */
    CHECK(F.offset == 0x18 && F.pc_begin == pc && T.count == 5);
    static const char *const want[] = {
        "CFA=rsp+8 rip=[CFA-8]",
        "CFA=rsp+16 rbp=[CFA-16] rip=[CFA-8]",
        "CFA=rbp+16 rbp=[CFA-16] rip=[CFA-8]",
        "CFA=rbp+16 rbx=[CFA-24] rbp=[CFA-16] rip=[CFA-8]",
        "CFA=rsp+8 rbx=[CFA-24] rbp=[CFA-16] rip=[CFA-8]",
    };
    static const uint64_t locs[] = { 0, 1, 4, 9, 0x28, 0x30 };
    for (size_t i = 0; i < 5; i++) {
        CHECK(T.rows[i].loc == pc + locs[i] && T.rows[i].end == pc + locs[i + 1]);
        CHECK_STR(fmt(&T.rows[i]), want[i]);
    }
    CHECK(cfi_row_at(&T, pc + 5) == &T.rows[2]);
    CHECK(cfi_row_at(&T, pc + 0x2f) == &T.rows[4]);
    CHECK(cfi_row_at(&T, pc) == &T.rows[0]);
    CHECK(cfi_row_at(&T, pc - 1) == NULL && cfi_row_at(&T, pc + 0x30) == NULL);
    return 1;
}

TEST(format_row)
{
    static cfi_row row;
    char small[8];
    memset(&row, 0, sizeof row);
    row.cfa = (cfi_cfa_rule){ .kind = CFI_CFA_REG_OFFSET, .reg = 6, .offset = -8 };
    row.regs[3] = (cfi_reg_rule){ .kind = CFI_REG_REGISTER, .reg = 12 };
    row.regs[4] = (cfi_reg_rule){ .kind = CFI_REG_VAL_OFFSET, .offset = 16 };
    row.regs[5] = (cfi_reg_rule){ .kind = CFI_REG_SAME_VALUE };
    row.regs[16] = (cfi_reg_rule){ .kind = CFI_REG_UNDEFINED };
    row.regs[17] = (cfi_reg_rule){ .kind = CFI_REG_OFFSET, .offset = 0 };
    const char *want = "CFA=rbp-8 rbx=r12 rsi=CFA+16 rdi=same rip=undefined reg17=[CFA+0]";
    CHECK_STR(fmt(&row), want);
    size_t n = cfi_format_row(&row, x86_name, small, sizeof small);
    CHECK(n == strlen(want) && strcmp(small, "CFA=rbp") == 0);
    char big[128];
    cfi_format_row(&row, NULL, big, sizeof big);
    CHECK_STR(big, "CFA=reg6-8 reg3=reg12 reg4=CFA+16 reg5=same reg16=undefined reg17=[CFA+0]");
    CHECK(cfi_format_row(&row, x86_name, NULL, 0) == strlen(want));
    row.cfa.offset = 0;
    memset(row.regs, 0, sizeof row.regs);
    CHECK_STR(fmt(&row), "CFA=rbp+0");
    return 1;
}

/* ------------------------------------------------------- cursor walk */

TEST(walk_two_cies_three_fdes)
{
    G.n = 0;
    size_t a = begin_cie(&G, 1, "zR", 1, -8, 16);
    uleb(&G, 1), u8(&G, 0x03), u8(&G, 0x0c), u8(&G, 7), u8(&G, 8);
    end_entry(&G, a);
    size_t f1 = begin_fde(&G, a);
    u32(&G, 0x100), u32(&G, 0x10), uleb(&G, 0);
    end_entry(&G, f1);
    size_t b = begin_cie(&G, 3, "zR", 4, -4, 30);
    uleb(&G, 1), u8(&G, 0x00);
    end_entry(&G, b);
    size_t f2 = begin_fde(&G, b);
    u64(&G, 0x200), u64(&G, 0x20), uleb(&G, 0);
    end_entry(&G, f2);
    size_t f3 = begin_fde(&G, a);
    u32(&G, 0x300), u32(&G, 0x30), uleb(&G, 0);
    end_entry(&G, f3);
    u32(&G, 0); /* terminator */
    section(&G, 0, 8);
    size_t cur = 0;
    const size_t fo[] = { f1, f2, f3 }, co[] = { a, b, a };
    for (int i = 0; i < 3; i++) {
        CHECK(cfi_next_fde(&S, &cur, &C, &F, &E) == 1);
        CHECK(F.offset == fo[i] && F.cie_offset == co[i] && C.offset == co[i]);
        CHECK(F.pc_begin == 0x100u * (i + 1) && F.pc_range == 0x10u * (i + 1));
        CHECK(cfi_run(&S, &C, &F, &T, &E) == 0 && T.count == 1);
        cfi_table_free(&T);
    }
    CHECK(C.ra_reg == 16);
    CHECK(cfi_next_fde(&S, &cur, &C, &F, &E) == 0 && cur == G.n);
    CHECK(cfi_next_fde(&S, &cur, &C, &F, &E) == 0);
    return 1;
}

/* ---------------------------------------------------------- corruption */

TEST(bad_truncated_entry)
{
    G.n = 0;
    u8(&G, 1), u8(&G, 0);
    section(&G, 0, 8);
    EXPECT_ERR(walk_and_run(), "truncated");
    return 1;
}

TEST(bad_length_past_end)
{
    G.n = 0;
    u32(&G, 0x100), u32(&G, 0);
    section(&G, 0, 8);
    EXPECT_ERR(walk_and_run(), "entry at 0x0 has length 0x100 past the end of the section (size 0x8)");
    return 1;
}

TEST(bad_64bit_length_truncated)
{
    G.n = 0;
    u32(&G, 0xffffffff), u16(&G, 1);
    section(&G, 0, 8);
    EXPECT_ERR(walk_and_run(), "truncated 64-bit length");
    return 1;
}

TEST(bad_short_entry)
{
    G.n = 0;
    u32(&G, 2), u16(&G, 0);
    section(&G, 0, 8);
    EXPECT_ERR(walk_and_run(), "too short");
    return 1;
}

/* A valid CIE then an FDE whose CIE pointer is `ptr`. */
static int fde_with_pointer(uint32_t ptr)
{
    cie_with("zR", BYTES(0x03)); /* 0x14 bytes at 0x0; the FDE's pointer field is at 0x18 */
    size_t f = begin_entry(&G, 0);
    u32(&G, ptr), u32(&G, 0x10), u32(&G, 0x10), uleb(&G, 0);
    end_entry(&G, f);
    section(&G, 0, 8);
    return walk_and_run();
}

TEST(bad_cie_pointer_self)
{
    EXPECT_ERR(fde_with_pointer(4), "points at the FDE itself");
    return 1;
}

TEST(bad_cie_pointer_before_start)
{
    EXPECT_ERR(fde_with_pointer(0x1000), "before the start of the section");
    return 1;
}

TEST(bad_cie_pointer_mid_entry)
{
    EXPECT_ERR(fde_with_pointer(0x16), "CIE pointer 0x16 (offset 0x2) does not point at a valid");
    return 1;
}

TEST(bad_cie_pointer_to_fde)
{
    size_t c = cie_with("zR", BYTES(0x03));
    size_t f1 = begin_fde(&G, c);
    u32(&G, 0x10), u32(&G, 0x10), uleb(&G, 0);
    end_entry(&G, f1);
    size_t f2 = begin_fde(&G, f1);
    u32(&G, 0x10), u32(&G, 0x10), uleb(&G, 0);
    end_entry(&G, f2);
    section(&G, 0, 8);
    size_t cur = 0;
    CHECK(cfi_next_fde(&S, &cur, &C, &F, &E) == 1);
    EXPECT_ERR(cfi_next_fde(&S, &cur, &C, &F, &E), "does not point at a CIE");
    CHECK(strncmp(E.msg, "FDE at 0x", 9) == 0 && cur == f2);
    return 1;
}

TEST(bad_aug_not_terminated)
{
    G.n = 0;
    size_t c = begin_entry(&G, 0);
    u32(&G, 0), u8(&G, 1), u8(&G, 'z'), u8(&G, 'R'), u8(&G, 'R');
    end_entry(&G, c);
    section(&G, 0, 8);
    EXPECT_ERR(cfi_parse_cie(&S, 0, &C, &E), "not NUL-terminated");
    return 1;
}

TEST(bad_aug_too_long)
{
    cie_with("zRRRRRRRRRRRRRRRRRRR", BYTES(3));
    section(&G, 0, 8);
    EXPECT_ERR(cfi_parse_cie(&S, 0, &C, &E), "too long");
    return 1;
}

TEST(bad_pointer_encodings)
{
    static const struct { const char *aug; uint8_t enc; const char *msg; } cases[] = {
        { "zR", 0x0f, "unknown pointer format" }, { "zR", 0x3b, "base address" },
        { "zR", 0x5b, "aligned" },                { "zR", 0x9b, "indirect pointer encoding" },
        { "zR", 0x7b, "application" },            { "zR", 0xff, "omit" },
        { "zLR", 0x8b, "indirect pointer encoding" }, { "zP", 0x0d, "unknown pointer format" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memset(&E, 0, sizeof E);
        cie_with(cases[i].aug, BYTES(cases[i].enc, 0x03, 0, 0, 0, 0));
        section(&G, 0, 8);
        EXPECT_ERR(cfi_parse_cie(&S, 0, &C, &E), cases[i].msg);
        CHECK(strstr(E.msg, "bad pointer encoding"));
    }
    return 1;
}

TEST(bad_aug_data_truncated)
{
    cie_with("zP", BYTES(0x00, 1, 2, 3)); /* absptr needs 8 bytes */
    section(&G, 0, 8);
    EXPECT_ERR(cfi_parse_cie(&S, 0, &C, &E), "truncated personality");
    return 1;
}

TEST(bad_fde_fields)
{
    size_t c = cie_with("zR", BYTES(0x03));
    size_t f = begin_fde(&G, c);
    u32(&G, 0x10), u32(&G, 0x10), uleb(&G, 9), u8(&G, 0);
    end_entry(&G, f);
    section(&G, 0, 8);
    EXPECT_ERR(walk_and_run(), "augmentation data length 0x9 at 0x24 runs past the end of the FDE");
    c = cie_with("zR", BYTES(0x04));
    f = begin_fde(&G, c);
    u32(&G, 0x10), u32(&G, 0x10);
    end_entry(&G, f);
    section(&G, 0, 8);
    EXPECT_ERR(walk_and_run(), "truncated pc_range");
    G.n = 0;
    c = begin_cie(&G, 4, "", 1, -8, 16);
    end_entry(&G, c);
    section(&G, 0, 4); /* the CIE says 8-byte addresses */
    EXPECT_ERR(cfi_parse_cie(&S, 0, &C, &E), "address size 8");
    return 1;
}

TEST(bad_version)
{
    G.n = 0;
    size_t c = begin_cie(&G, 2, "", 1, -8, 16);
    end_entry(&G, c);
    section(&G, 0, 8);
    EXPECT_ERR(cfi_parse_cie(&S, 0, &C, &E), "version 2");
    return 1;
}

TEST(bad_advance_past_range)
{
    EXPECT_ERR(run_simple(BYTES(DEF_CFA_RSP8), BYTES(0x03, 0x01, 0x01)),
               "advance past the end of the FDE range");
    EXPECT_ERR(run_simple(BYTES(DEF_CFA_RSP8), BYTES(0x01, 0x01, 0x11, 0, 0)),
               "advance past the end of the FDE range");
    EXPECT_ERR(run_simple(BYTES(DEF_CFA_RSP8), BYTES(0x04, 0xff, 0xff, 0xff, 0xff)),
               "advance past the end of the FDE range");
    return 1;
}

TEST(bad_restore_state_empty)
{
    EXPECT_ERR(run_simple(BYTES(DEF_CFA_RSP8), BYTES(0x0a, 0x0b, 0x0b)),
               "FDE at 0x14: DW_CFA_restore_state at 0x27 without a matching DW_CFA_remember_state");
    return 1;
}

TEST(bad_remember_overflow)
{
    uint8_t ins[65];
    memset(ins, 0x0a, sizeof ins);
    CHECK(run_simple(NO_INSNS, ins, 64) == 0);
    cfi_table_free(&T);
    EXPECT_ERR(run_simple(NO_INSNS, ins, 65), "nesting deeper than 64");
    return 1;
}

TEST(bad_register_number)
{
    EXPECT_ERR(run_simple(NO_INSNS, BYTES(0x05, 0x80, 0x01, 1)), "register 128 out of range");
    EXPECT_ERR(run_simple(NO_INSNS, BYTES(0x0c, 0x80, 0x01, 1)), "DW_CFA_def_cfa at 0x");
    EXPECT_ERR(run_simple(NO_INSNS, BYTES(0x09, 3, 0xc8, 0x01)), "register 200 out of range");
    return 1;
}

TEST(bad_truncated_operands)
{
    static const struct { uint8_t op[4]; size_t n; const char *name; } cases[] = {
        { { 0x0c, 7 }, 2, "truncated DW_CFA_def_cfa at 0x" },
        { { 0x05, 3 }, 2, "truncated DW_CFA_offset_extended at" },
        { { 0x03, 1 }, 2, "truncated DW_CFA_advance_loc2 at" },
        { { 0x04, 1, 0, 0 }, 4, "truncated DW_CFA_advance_loc4 at" },
        { { 0x01, 0x10, 0x10 }, 3, "truncated DW_CFA_set_loc at" },
        { { 0x10, 3 }, 2, "truncated DW_CFA_expression at" },
        { { 0x09, 3 }, 2, "truncated DW_CFA_register at" },
        { { 0x12, 3, 0x80 }, 3, "truncated DW_CFA_def_cfa_sf at" },
        { { 0x83 }, 1, "truncated DW_CFA_offset at" },
        { { 0x2e }, 1, "truncated DW_CFA_GNU_args_size at" },
        { { 0x02 }, 1, "truncated DW_CFA_advance_loc1 at" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memset(&E, 0, sizeof E);
        EXPECT_ERR(run_simple(BYTES(DEF_CFA_RSP8), cases[i].op, cases[i].n), cases[i].name);
    }
    /* CIE initial instructions are bounded by the CIE, not the section. */
    EXPECT_ERR(run_simple(BYTES(0x0c, 7), BYTES(0x00, 0x00)), "CIE at 0x0: truncated DW_CFA_def_cfa");
    return 1;
}

TEST(bad_leb)
{
    EXPECT_ERR(run_simple(BYTES(DEF_CFA_RSP8), BYTES(0x0e, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
                                          0x80, 0x00)), "LEB128");
    EXPECT_ERR(run_simple(NO_INSNS, BYTES(0x2e, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                          0x02)), "LEB128");
    EXPECT_ERR(run_simple(BYTES(DEF_CFA_RSP8), BYTES(0x13, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                          0x3f)), "LEB128");
    /* the maximal valid values still decode */
    CHECK(run_simple(NO_INSNS, BYTES(0x2e, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                     0x01)) == 0);
    return 1;
}

TEST(bad_offset_overflow)
{
    /* factored ULEB 2^62 * -8 overflows */
    EXPECT_ERR(run_simple(NO_INSNS, BYTES(0x05, 3, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
                                          0x40)), "overflows");
    return 1;
}

TEST(bad_cfa_register_on_expression)
{
    EXPECT_ERR(run_simple(NO_INSNS, BYTES(0x0f, 1, 0x9c, 0x0d, 6)), "not register+offset");
    EXPECT_ERR(run_simple(NO_INSNS, BYTES(0x0e, 8)), "DW_CFA_def_cfa_offset at 0x");
    return 1;
}

TEST(bad_set_loc_backwards)
{
    EXPECT_ERR(run_simple(BYTES(DEF_CFA_RSP8), BYTES(0x41, 0x01, 0x00, 0x10, 0, 0)), "backwards");
    return 1;
}

TEST(bad_expression_length)
{
    EXPECT_ERR(run_simple(NO_INSNS, BYTES(0x10, 3, 5, 1, 2)), "runs past the end");
    EXPECT_ERR(run_simple(NO_INSNS, BYTES(0x0f, 0x7f)), "runs past the end");
    return 1;
}

TEST(bad_unknown_opcode)
{
    EXPECT_ERR(run_simple(NO_INSNS, BYTES(0x00, 0x17)), "unknown DW_CFA opcode 0x17 at 0x23");
    return 1;
}

TEST(bad_section_args)
{
    G.n = 0;
    section(&G, 0, 2);
    size_t cur = 0;
    EXPECT_ERR(cfi_next_fde(&S, &cur, &C, &F, &E), "address size");
    section(&G, 0, 8);
    cur = 5;
    EXPECT_ERR(cfi_next_fde(&S, &cur, &C, &F, &E), "past the end");
    return 1;
}

int main(void)
{
    RUN(advance_loc);
    RUN(advance_loc_code_align);
    RUN(advance_loc124);
    RUN(advance_zero_emits_nothing);
    RUN(set_loc);
    RUN(nop_and_empty_fde);
    RUN(offset);
    RUN(offset_extended_variants);
    RUN(val_offset);
    RUN(restore);
    RUN(undefined_same_register);
    RUN(remember_restore_state);
    RUN(def_cfa_family);
    RUN(expressions);
    RUN(gnu_ops);
    RUN(ra_sign_state);
    RUN(cfa_unset);
    RUN(zero_range);
    RUN(aug_R_pcrel_sdata4);
    RUN(aug_R_absptr_udata8_uleb_sdata2);
    RUN(aug_P_L);
    RUN(aug_P_absptr_L_omit);
    RUN(aug_S_B_G);
    RUN(aug_data_length_respected);
    RUN(cie_versions_3_4_and_no_aug);
    RUN(length_64bit);
    RUN(aug_unknown_letter);
    RUN(aug_eh_rejected);
    RUN(x86_64_clang_frame);
    RUN(format_row);
    RUN(walk_two_cies_three_fdes);
    RUN(bad_truncated_entry);
    RUN(bad_length_past_end);
    RUN(bad_64bit_length_truncated);
    RUN(bad_short_entry);
    RUN(bad_cie_pointer_self);
    RUN(bad_cie_pointer_before_start);
    RUN(bad_cie_pointer_mid_entry);
    RUN(bad_cie_pointer_to_fde);
    RUN(bad_aug_not_terminated);
    RUN(bad_aug_too_long);
    RUN(bad_pointer_encodings);
    RUN(bad_aug_data_truncated);
    RUN(bad_fde_fields);
    RUN(bad_version);
    RUN(bad_advance_past_range);
    RUN(bad_restore_state_empty);
    RUN(bad_remember_overflow);
    RUN(bad_register_number);
    RUN(bad_truncated_operands);
    RUN(bad_leb);
    RUN(bad_offset_overflow);
    RUN(bad_cfa_register_on_expression);
    RUN(bad_set_loc_backwards);
    RUN(bad_expression_length);
    RUN(bad_unknown_opcode);
    RUN(bad_section_args);
    return unit_summary();
}
