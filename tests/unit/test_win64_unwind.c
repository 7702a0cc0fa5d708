/* test_win64_unwind.c - unit tests for generator/win64_unwind.c: Windows x64
 * UNWIND_INFO bytes (real ones from clang and llvm-mc, and hand-made ones) in,
 * DWARF-style rows and the after-the-prolog UNWIND_INFO out. Every expected
 * row was derived by hand from the documented format and checked against
 * llvm-readobj --unwind's decoding of the same bytes. Prints "ok NAME" /
 * "FAIL NAME: why" per test and a final "N passed, N failed" line; exits 0
 * iff everything passed. */
#include "../../generator/win64_unwind.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- harness */

/* Shared per-test state, reset by run_test so that a failing test cannot
 * leak into the next one. */
static w64_info I;
static cfi_table T;
static cfi_error E;
static strbuf S;

#define UNIT_ERR E.msg
static void unit_reset(void)
{
    memset(&E, 0, sizeof E);
    memset(&I, 0, sizeof I);
}

static void unit_cleanup(void)
{
    cfi_table_free(&T);
    sb_free(&S);
    S = (strbuf){0};
}

#include "unit_harness.h"

#define BYTES(...) (const uint8_t[]){ __VA_ARGS__ }, sizeof((const uint8_t[]){ __VA_ARGS__ })

/* DWARF x86-64 numbers (psABI): rax rdx rcx rbx rsi rdi rbp rsp r8-r15, rip
 * 16, xmm0-15 17-32. */
static const char *x64_name(uint32_t r)
{
    static const char *const n[] = {
        "rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10",
        "r11", "r12", "r13", "r14", "r15", "rip", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4",
        "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14",
        "xmm15",
    };
    return r < sizeof n / sizeof n[0] ? n[r] : NULL;
}

static const char *fmt(const cfi_row *row)
{
    static char s[512];
    cfi_format_row(row, x64_name, s, sizeof s);
    return s;
}

/* Row i of T, formatted, must be `want`. */
#define CHECK_ROW(i, want)                                                                   \
    do {                                                                                     \
        CHECK((i) < T.count);                                                                \
        if (strcmp(fmt(&T.rows[i]), (want)) != 0) {                                          \
            snprintf(why, sizeof why, "line %d: row %d is \"%s\", want \"%s\"", __LINE__,     \
                     (int)(i), fmt(&T.rows[i]), (want));                                     \
            return 0;                                                                        \
        }                                                                                    \
    } while (0)

/* One expected row: from `loc` (relative to the function's start) to the
 * next row's loc, or to the function's end for the last one. */
typedef struct want_row {
    uint64_t loc;
    const char *row;
} want_row;

/* T must hold exactly `n` rows matching `want`, tiling [begin, end). */
static int rows_are(const want_row *want, size_t n, uint64_t begin, uint64_t end)
{
    if (T.count != n) {
        snprintf(why, sizeof why, "%zu rows, want %zu (err: %s)", T.count, n, E.msg);
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t loc = begin + want[i].loc, to = i + 1 < n ? begin + want[i + 1].loc : end;
        const cfi_row *r = &T.rows[i];
        if (r->loc != loc || r->end != to || strcmp(fmt(r), want[i].row) != 0) {
            snprintf(why, sizeof why, "row %zu: got 0x%" PRIx64 "-0x%" PRIx64 " \"%s\", want "
                     "0x%" PRIx64 "-0x%" PRIx64 " \"%s\"", i, r->loc, r->end, fmt(r), loc, to,
                     want[i].row);
            return 0;
        }
    }
    return 1;
}

/* Replay I over [begin, end) into T (freed first: a test may replay twice). */
static int replay(uint64_t begin, uint64_t end)
{
    cfi_table_free(&T);
    return w64_rows(&I, begin, end, &T, &E);
}

/* Parse a whole buffer as one UNWIND_INFO, then replay it over [begin, end). */
static int parse_and_replay(const uint8_t *p, size_t n, uint64_t begin, uint64_t end)
{
    return w64_parse_info(p, n, 0, &I, &E) == 0 ? replay(begin, end) : -1;
}

/* An error whose message contains `needle`, with the table left empty. */
static int is_error(int rc, const char *needle)
{
    return rc == -1 && E.msg[0] && strstr(E.msg, needle) && !T.rows && T.count == 0 &&
           T.cap == 0;
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

static void bytes_of(const uint8_t **p, size_t *n, const uint8_t *bp, size_t bn)
{
    *p = bp;
    *n = bn;
}

/* The header parses, and the replay refuses the codes with `needle`. */
#define EXPECT_ROWS_ERR(bytes_and_size, end, needle)                                         \
    do {                                                                                     \
        const uint8_t *p_;                                                                   \
        size_t n_;                                                                           \
        memset(&E, 0, sizeof E);                                                             \
        bytes_of(&p_, &n_, bytes_and_size);                                                  \
        CHECK(w64_parse_info(p_, n_, 0, &I, &E) == 0);                                       \
        EXPECT_ERR(replay(0, (end)), needle);                                                \
    } while (0)

/* The header is refused with `needle`. */
#define EXPECT_PARSE_ERR(needle, ...)                                                        \
    do {                                                                                     \
        const uint8_t *p_;                                                                   \
        size_t n_;                                                                           \
        memset(&E, 0, sizeof E);                                                             \
        bytes_of(&p_, &n_, __VA_ARGS__);                                                     \
        EXPECT_ERR(w64_parse_info(p_, n_, 0, &I, &E), needle);                               \
    } while (0)

/* ------------------------------------------------- tinyvm's Windows shim */

/* clang-22 --target=x86_64-w64-windows-gnu -O2: push rbp, r15, r14, r13, r12,
 * rsi, rdi, rbx; sub rsp,168; lea rbp,[rsp+128]; movaps of xmm15..xmm6 at
 * [rbp+16]..[rbp-128], which is [rsp+144]..[rsp+0]. Function 0x9b bytes,
 * prolog 0x4b, frame register rbp (5) at offset 8 (rsp + 128), 31 slots and
 * one of padding. */
static const uint8_t shim_info[68] = {
    0x01, 0x4b, 0x1f, 0x85, 0x4b, 0x68, 0x00, 0x00, 0x47, 0x78, 0x01, 0x00, 0x43, 0x88, 0x02, 0x00,
    0x3e, 0x98, 0x03, 0x00, 0x39, 0xa8, 0x04, 0x00, 0x34, 0xb8, 0x05, 0x00, 0x2f, 0xc8, 0x06, 0x00,
    0x2a, 0xd8, 0x07, 0x00, 0x25, 0xe8, 0x08, 0x00, 0x20, 0xf8, 0x09, 0x00, 0x1b, 0x03, 0x13, 0x01,
    0x15, 0x00, 0x0c, 0x30, 0x0b, 0x70, 0x0a, 0x60, 0x09, 0xc0, 0x07, 0xd0, 0x05, 0xe0, 0x03, 0xf0,
    0x01, 0x50, 0x00, 0x00,
};

/* The same with SizeOfProlog 0 and every code's offset 0; operand slots and
 * the padding slot unchanged. */
static const uint8_t shim_executor[68] = {
    0x01, 0x00, 0x1f, 0x85, 0x00, 0x68, 0x00, 0x00, 0x00, 0x78, 0x01, 0x00, 0x00, 0x88, 0x02, 0x00,
    0x00, 0x98, 0x03, 0x00, 0x00, 0xa8, 0x04, 0x00, 0x00, 0xb8, 0x05, 0x00, 0x00, 0xc8, 0x06, 0x00,
    0x00, 0xd8, 0x07, 0x00, 0x00, 0xe8, 0x08, 0x00, 0x00, 0xf8, 0x09, 0x00, 0x00, 0x03, 0x00, 0x01,
    0x15, 0x00, 0x00, 0x30, 0x00, 0x70, 0x00, 0x60, 0x00, 0xc0, 0x00, 0xd0, 0x00, 0xe0, 0x00, 0xf0,
    0x00, 0x50, 0x00, 0x00,
};

/* Eight pushes: CFA = rsp + 8 + 8k, the k-th pushed register at CFA-8-8k.
 * sub rsp,168: CFA = rsp + 72 + 168 = rsp + 240. lea rbp,[rsp+128]: CFA =
 * rbp + 240 - 128 = rbp + 112. movaps xmmN,[rsp+16(N-6)]: the frame base
 * (rsp = rbp - 128) is 240 below the CFA, so xmmN=[CFA-240+16(N-6)]. */
#define SHIM_REGS "rbx=[CFA-72] rsi=[CFA-56] rdi=[CFA-64] rbp=[CFA-16] r12=[CFA-48] " \
                  "r13=[CFA-40] r14=[CFA-32] r15=[CFA-24] rip=[CFA-8]"
static const want_row shim_rows[] = {
    {0x00, "CFA=rsp+8 rip=[CFA-8]"},
    {0x01, "CFA=rsp+16 rbp=[CFA-16] rip=[CFA-8]"},
    {0x03, "CFA=rsp+24 rbp=[CFA-16] r15=[CFA-24] rip=[CFA-8]"},
    {0x05, "CFA=rsp+32 rbp=[CFA-16] r14=[CFA-32] r15=[CFA-24] rip=[CFA-8]"},
    {0x07, "CFA=rsp+40 rbp=[CFA-16] r13=[CFA-40] r14=[CFA-32] r15=[CFA-24] rip=[CFA-8]"},
    {0x09, "CFA=rsp+48 rbp=[CFA-16] r12=[CFA-48] r13=[CFA-40] r14=[CFA-32] r15=[CFA-24] "
           "rip=[CFA-8]"},
    {0x0a, "CFA=rsp+56 rsi=[CFA-56] rbp=[CFA-16] r12=[CFA-48] r13=[CFA-40] r14=[CFA-32] "
           "r15=[CFA-24] rip=[CFA-8]"},
    {0x0b, "CFA=rsp+64 rsi=[CFA-56] rdi=[CFA-64] rbp=[CFA-16] r12=[CFA-48] r13=[CFA-40] "
           "r14=[CFA-32] r15=[CFA-24] rip=[CFA-8]"},
    {0x0c, "CFA=rsp+72 " SHIM_REGS},
    {0x13, "CFA=rsp+240 " SHIM_REGS},
    {0x1b, "CFA=rbp+112 " SHIM_REGS},
    {0x20, "CFA=rbp+112 " SHIM_REGS " xmm15=[CFA-96]"},
    {0x25, "CFA=rbp+112 " SHIM_REGS " xmm14=[CFA-112] xmm15=[CFA-96]"},
    {0x2a, "CFA=rbp+112 " SHIM_REGS " xmm13=[CFA-128] xmm14=[CFA-112] xmm15=[CFA-96]"},
    {0x2f, "CFA=rbp+112 " SHIM_REGS " xmm12=[CFA-144] xmm13=[CFA-128] xmm14=[CFA-112] "
           "xmm15=[CFA-96]"},
    {0x34, "CFA=rbp+112 " SHIM_REGS " xmm11=[CFA-160] xmm12=[CFA-144] xmm13=[CFA-128] "
           "xmm14=[CFA-112] xmm15=[CFA-96]"},
    {0x39, "CFA=rbp+112 " SHIM_REGS " xmm10=[CFA-176] xmm11=[CFA-160] xmm12=[CFA-144] "
           "xmm13=[CFA-128] xmm14=[CFA-112] xmm15=[CFA-96]"},
    {0x3e, "CFA=rbp+112 " SHIM_REGS " xmm9=[CFA-192] xmm10=[CFA-176] xmm11=[CFA-160] "
           "xmm12=[CFA-144] xmm13=[CFA-128] xmm14=[CFA-112] xmm15=[CFA-96]"},
    {0x43, "CFA=rbp+112 " SHIM_REGS " xmm8=[CFA-208] xmm9=[CFA-192] xmm10=[CFA-176] "
           "xmm11=[CFA-160] xmm12=[CFA-144] xmm13=[CFA-128] xmm14=[CFA-112] xmm15=[CFA-96]"},
    {0x47, "CFA=rbp+112 " SHIM_REGS " xmm7=[CFA-224] xmm8=[CFA-208] xmm9=[CFA-192] "
           "xmm10=[CFA-176] xmm11=[CFA-160] xmm12=[CFA-144] xmm13=[CFA-128] xmm14=[CFA-112] "
           "xmm15=[CFA-96]"},
    {0x4b, "CFA=rbp+112 " SHIM_REGS " xmm6=[CFA-240] xmm7=[CFA-224] xmm8=[CFA-208] "
           "xmm9=[CFA-192] xmm10=[CFA-176] xmm11=[CFA-160] xmm12=[CFA-144] xmm13=[CFA-128] "
           "xmm14=[CFA-112] xmm15=[CFA-96]"},
};
#define N_SHIM_ROWS (sizeof shim_rows / sizeof shim_rows[0])

TEST(shim_header)
{
    CHECK(w64_parse_info(shim_info, sizeof shim_info, 0, &I, &E) == 0);
    CHECK(I.version == 1 && I.flags == 0 && I.prolog_size == 0x4b && I.nslots == 31);
    CHECK(I.frame_reg == 5 && I.frame_offset == 8);
    CHECK(I.slots == shim_info + 4 && I.size == 68);
    return 1;
}

TEST(shim_rows)
{
    CHECK(parse_and_replay(shim_info, sizeof shim_info, 0, 0x9b) == 0);
    return rows_are(shim_rows, N_SHIM_ROWS, 0, 0x9b);
}

/* The same bytes at an offset inside a larger section, for a function that
 * does not start at 0: locations move with `begin`, nothing else does. */
TEST(shim_in_section)
{
    uint8_t sec[12 + sizeof shim_info + 8];
    memset(sec, 0xee, sizeof sec);
    memcpy(sec + 12, shim_info, sizeof shim_info);
    CHECK(w64_parse_info(sec, sizeof sec, 12, &I, &E) == 0);
    CHECK(I.slots == sec + 16 && I.size == 68 && I.nslots == 31);
    CHECK(replay(0x2000, 0x209b) == 0);
    if (!rows_are(shim_rows, N_SHIM_ROWS, 0x2000, 0x209b))
        return 0;
    /* exactly as long as needed: the padding slot is the section's last byte */
    CHECK(w64_parse_info(sec, 12 + sizeof shim_info, 12, &I, &E) == 0);
    return 1;
}

TEST(shim_after_prolog)
{
    CHECK(w64_parse_info(shim_info, sizeof shim_info, 0, &I, &E) == 0);
    w64_after_prolog(&I, &S);
    CHECK(S.len == sizeof shim_executor);
    for (size_t i = 0; i < S.len; i++)
        if ((uint8_t)S.data[i] != shim_executor[i]) {
            snprintf(why, sizeof why, "byte %zu: 0x%02x, want 0x%02x", i, (uint8_t)S.data[i],
                     shim_executor[i]);
            return 0;
        }
    /* Read back, it is one row: the shim's state after its prolog, at every PC. */
    CHECK(parse_and_replay((const uint8_t *)S.data, S.len, 0x100, 0x140) == 0);
    CHECK(I.prolog_size == 0 && I.frame_reg == 5 && I.frame_offset == 8 && I.nslots == 31);
    want_row one = {0, shim_rows[N_SHIM_ROWS - 1].row};
    return rows_are(&one, 1, 0x100, 0x140);
}

/* ------------------------------------------- other codes, from llvm-mc */

/* llvm-mc-22 -triple x86_64-w64-windows-gnu of two functions, their .xdata
 * as one section:
 *   near (0x1f bytes): push rbx; sub rsp,48; mov [rsp+40],rsi; mov [rsp+32],rdi
 *   far  (0x31 bytes): push rbp; sub rsp,0x90000; mov [rsp+0x88000],r12;
 *                      movaps [rsp+0x80000],xmm6 */
static const uint8_t mc_xdata[40] = {
    0x01, 0x0f, 0x06, 0x00, 0x0f, 0x74, 0x04, 0x00, 0x0a, 0x64, 0x05, 0x00, 0x05, 0x52, 0x01, 0x30,
    0x01, 0x18, 0x0a, 0x00, 0x18, 0x69, 0x00, 0x00, 0x08, 0x00, 0x10, 0xc5, 0x00, 0x80, 0x08, 0x00,
    0x08, 0x11, 0x00, 0x00, 0x09, 0x00, 0x01, 0x50,
};

/* UWOP_SAVE_NONVOL (offset / 8 in one slot) and UWOP_ALLOC_SMALL (info 5:
 * 5 * 8 + 8 = 48). After push and sub the frame base rsp is 8 + 8 + 48 = 64
 * below the CFA: rsi at [rsp+40] = CFA-24, rdi at [rsp+32] = CFA-32. */
TEST(save_nonvol_alloc_small)
{
    CHECK(w64_parse_info(mc_xdata, sizeof mc_xdata, 0, &I, &E) == 0);
    CHECK(I.prolog_size == 0x0f && I.nslots == 6 && I.size == 16 && I.frame_reg == 0);
    CHECK(replay(0x1000, 0x101f) == 0);
    static const want_row want[] = {
        {0x00, "CFA=rsp+8 rip=[CFA-8]"},
        {0x01, "CFA=rsp+16 rbx=[CFA-16] rip=[CFA-8]"},
        {0x05, "CFA=rsp+64 rbx=[CFA-16] rip=[CFA-8]"},
        {0x0a, "CFA=rsp+64 rbx=[CFA-16] rsi=[CFA-24] rip=[CFA-8]"},
        {0x0f, "CFA=rsp+64 rbx=[CFA-16] rsi=[CFA-24] rdi=[CFA-32] rip=[CFA-8]"},
    };
    return rows_are(want, 5, 0x1000, 0x101f);
}

/* UWOP_ALLOC_LARGE info 1 (the size unscaled in two slots, 0x90000),
 * UWOP_SAVE_NONVOL_FAR and UWOP_SAVE_XMM128_FAR (offsets unscaled in two
 * slots). The frame base is 8 + 8 + 0x90000 = 0x90010 below the CFA: r12 at
 * 0x88000 - 0x90010 = -0x8010 = -32784, xmm6 at 0x80000 - 0x90010 = -0x10010
 * = -65552. */
TEST(save_far_alloc_large_info1)
{
    CHECK(w64_parse_info(mc_xdata, sizeof mc_xdata, 16, &I, &E) == 0);
    CHECK(I.prolog_size == 0x18 && I.nslots == 10 && I.size == 24 && I.slots == mc_xdata + 20);
    CHECK(replay(0x40, 0x71) == 0);
    static const want_row want[] = {
        {0x00, "CFA=rsp+8 rip=[CFA-8]"},
        {0x01, "CFA=rsp+16 rbp=[CFA-16] rip=[CFA-8]"},
        {0x08, "CFA=rsp+589840 rbp=[CFA-16] rip=[CFA-8]"},
        {0x10, "CFA=rsp+589840 rbp=[CFA-16] r12=[CFA-32784] rip=[CFA-8]"},
        {0x18, "CFA=rsp+589840 rbp=[CFA-16] r12=[CFA-32784] rip=[CFA-8] xmm6=[CFA-65552]"},
    };
    return rows_are(want, 5, 0x40, 0x71);
}

/* Hand-made: the extremes of UWOP_ALLOC_SMALL (info 0 = 8, info 15 = 128),
 * of UWOP_ALLOC_LARGE info 0 (0xffff * 8 = 524280) and info 1 with a high
 * half (0x00012345 = 74565), and UWOP_SAVE_XMM128 (offset / 16 in one slot:
 * 0x8000 * 16 = 0x80000). Codes are listed last first. */
TEST(alloc_sizes)
{
    /* depth: 8, +8 = 16 @1, +128 = 144 @2, +524280 = 524424 @3, +74565 = 598989 @4;
     * xmm0 at 0x80000 - 598989 = -74701 @5 */
    CHECK(parse_and_replay(BYTES(0x01, 0x05, 0x09, 0x00,
                                 0x05, 0x08, 0x00, 0x80,  /* @5 SAVE_XMM128 xmm0, 0x8000 */
                                 0x04, 0x11, 0x45, 0x23, 0x01, 0x00, /* @4 ALLOC_LARGE/1 */
                                 0x03, 0x01, 0xff, 0xff,  /* @3 ALLOC_LARGE/0 0xffff */
                                 0x02, 0xf2,              /* @2 ALLOC_SMALL 15 */
                                 0x01, 0x02,              /* @1 ALLOC_SMALL 0 */
                                 0x00, 0x00),             /* padding */
                           0, 6) == 0);
    static const want_row want[] = {
        {0, "CFA=rsp+8 rip=[CFA-8]"},
        {1, "CFA=rsp+16 rip=[CFA-8]"},
        {2, "CFA=rsp+144 rip=[CFA-8]"},
        {3, "CFA=rsp+524424 rip=[CFA-8]"},
        {4, "CFA=rsp+598989 rip=[CFA-8]"},
        {5, "CFA=rsp+598989 rip=[CFA-8] xmm0=[CFA-74701]"},
    };
    return rows_are(want, 6, 0, 6);
}

/* Windows register numbers (rax rcx rdx rbx rsp rbp rsi rdi r8-r15) become
 * DWARF's (rax rdx rcx rbx rsi rdi rbp rsp r8-r15): push each of the 15
 * that can be pushed, rax first, and see where each one lands. */
TEST(register_numbers)
{
    uint8_t b[4 + 16 * 2] = {0x01, 15, 15, 0x00};
    unsigned at = 15, k = 0;
    for (unsigned win = 15; win < 16; win--) { /* listed last first */
        if (win == 4)
            continue; /* rsp */
        b[4 + 2 * k] = (uint8_t)at--;
        b[5 + 2 * k++] = (uint8_t)(win << 4);
    }
    CHECK(parse_and_replay(b, sizeof b, 0, 16) == 0 && T.count == 16);
    CHECK_ROW(15, "CFA=rsp+128 rax=[CFA-16] rdx=[CFA-32] rcx=[CFA-24] rbx=[CFA-40] "
                  "rsi=[CFA-56] rdi=[CFA-64] rbp=[CFA-48] r8=[CFA-72] r9=[CFA-80] r10=[CFA-88] "
                  "r11=[CFA-96] r12=[CFA-104] r13=[CFA-112] r14=[CFA-120] r15=[CFA-128] "
                  "rip=[CFA-8]");
    return 1;
}

/* ------------------------------------------- padding, shared offsets */

/* clang-22 -O2 for Windows of an op that calls a run-time function, then
 * tail-calls the next op (0x28 bytes): push rsi; push rdi; sub rsp,40. Three
 * slots and one of padding, which counts in the size and comes out zeroed
 * whatever it held. */
TEST(odd_slot_count)
{
    uint8_t b[12] = {0x01, 0x06, 0x03, 0x00, 0x06, 0x42, 0x02, 0x70, 0x01, 0x60, 0xaa, 0xbb};
    /* without its padding slot the UNWIND_INFO does not fit */
    EXPECT_ERR(w64_parse_info(b, 10, 0, &I, &E), "run past the end");
    CHECK(parse_and_replay(b, sizeof b, 0, 0x28) == 0 && I.size == 12);
    static const want_row want[] = {
        {0, "CFA=rsp+8 rip=[CFA-8]"},
        {1, "CFA=rsp+16 rsi=[CFA-16] rip=[CFA-8]"},
        {2, "CFA=rsp+24 rsi=[CFA-16] rdi=[CFA-24] rip=[CFA-8]"},
        {6, "CFA=rsp+64 rsi=[CFA-16] rdi=[CFA-24] rip=[CFA-8]"},
    };
    if (!rows_are(want, 4, 0, 0x28))
        return 0;
    w64_after_prolog(&I, &S);
    static const uint8_t exec[12] = {0x01, 0x00, 0x03, 0x00, 0x00, 0x42, 0x00, 0x70,
                                     0x00, 0x60, 0x00, 0x00};
    CHECK(S.len == sizeof exec && memcmp(S.data, exec, sizeof exec) == 0);
    return 1;
}

/* Multi-slot ops keep their operand slots in w64_after_prolog. */
TEST(after_prolog_operands)
{
    /* @9 SAVE_NONVOL_FAR rbx 0x00010020, @5 ALLOC_LARGE/0 0x2000 * 8, @1 push rbp */
    static const uint8_t in[] = {0x01, 0x09, 0x06, 0x00, 0x09, 0x35, 0x20, 0x00, 0x01, 0x00,
                                 0x05, 0x01, 0x00, 0x20, 0x01, 0x50};
    static const uint8_t out[] = {0x01, 0x00, 0x06, 0x00, 0x00, 0x35, 0x20, 0x00, 0x01, 0x00,
                                  0x00, 0x01, 0x00, 0x20, 0x00, 0x50};
    CHECK(w64_parse_info(in, sizeof in, 0, &I, &E) == 0 && I.size == 16);
    w64_after_prolog(&I, &S);
    CHECK(S.len == sizeof out && memcmp(S.data, out, sizeof out) == 0);
    /* depth 16 + 0x10000 = 65552; rbx at 0x10020 - 65552 = +16, in the caller's
     * home space above the return address */
    CHECK(parse_and_replay((const uint8_t *)S.data, S.len, 0, 1) == 0 && T.count == 1);
    CHECK_ROW(0, "CFA=rsp+65552 rbx=[CFA+16] rbp=[CFA-16] rip=[CFA-8]");
    return 1;
}

/* llvm-mc: push rbp; sub rsp,32; mov rbp,rsp - the last two codes share
 * offset 8, giving one row with the state after both: ALLOC_SMALL (depth
 * 48) then SET_FPREG with offset 0 (CFA = rbp + 48). */
TEST(same_code_offset)
{
    CHECK(parse_and_replay(BYTES(0x01, 0x08, 0x03, 0x05, 0x08, 0x03, 0x08, 0x32, 0x01, 0x50,
                                 0x00, 0x00),
                           0, 0x0e) == 0);
    static const want_row want[] = {
        {0, "CFA=rsp+8 rip=[CFA-8]"},
        {1, "CFA=rsp+16 rbp=[CFA-16] rip=[CFA-8]"},
        {8, "CFA=rbp+48 rbp=[CFA-16] rip=[CFA-8]"},
    };
    if (!rows_are(want, 3, 0, 0x0e))
        return 0;
    /* a code at offset 0 replaces the entry state rather than adding a row */
    CHECK(parse_and_replay(BYTES(0x01, 0x00, 0x01, 0x00, 0x00, 0x12, 0x00, 0x00), 0, 4) == 0);
    want_row one = {0, "CFA=rsp+24 rip=[CFA-8]"};
    return rows_are(&one, 1, 0, 4);
}

/* ------------------------------------------------------------ refusals */

TEST(bad_header_truncated)
{
    EXPECT_PARSE_ERR("4-byte header", BYTES(0x01, 0x00, 0x00));
    CHECK(w64_parse_info(NULL, 0, 0, &I, &E) == -1 && strstr(E.msg, "4-byte header"));
    /* offsets at and past the end */
    EXPECT_ERR(w64_parse_info(shim_info, sizeof shim_info, 65, &I, &E), "4-byte header");
    EXPECT_ERR(w64_parse_info(shim_info, sizeof shim_info, 68, &I, &E), "4-byte header");
    EXPECT_ERR(w64_parse_info(shim_info, sizeof shim_info, 69, &I, &E), "4-byte header");
    EXPECT_ERR(w64_parse_info(shim_info, 4, SIZE_MAX, &I, &E), "4-byte header");
    CHECK(w64_parse_info(BYTES(0x01, 0x00, 0x00, 0x00), 0, &I, &E) == 0 && I.size == 4);
    return 1;
}

TEST(bad_slots_past_end)
{
    EXPECT_PARSE_ERR("run past the end", BYTES(0x01, 0x01, 0x02, 0x00, 0x01, 0x50));
    EXPECT_ERR(w64_parse_info(shim_info, sizeof shim_info - 1, 0, &I, &E), "run past the end");
    EXPECT_PARSE_ERR("run past the end", BYTES(0x01, 0x00, 0xff, 0x00));
    return 1;
}

TEST(bad_version)
{
    EXPECT_PARSE_ERR("version 2", BYTES(0x02, 0x00, 0x00, 0x00));
    EXPECT_PARSE_ERR("version 0", BYTES(0x00, 0x00, 0x00, 0x00));
    EXPECT_PARSE_ERR("version 7", BYTES(0x07, 0x00, 0x00, 0x00));
    return 1;
}

TEST(bad_flags)
{
    EXPECT_PARSE_ERR("exception handler", BYTES(0x09, 0x00, 0x00, 0x00, 0, 0, 0, 0)); /* E */
    EXPECT_PARSE_ERR("exception handler", BYTES(0x11, 0x00, 0x00, 0x00, 0, 0, 0, 0)); /* U */
    EXPECT_PARSE_ERR("chained", BYTES(0x21, 0x00, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0));
    EXPECT_PARSE_ERR("unknown flags 0x8", BYTES(0x41, 0x00, 0x00, 0x00));
    EXPECT_PARSE_ERR("unknown flags 0x10", BYTES(0x81, 0x00, 0x00, 0x00));
    return 1;
}

/* Ops 6 and 7 (SAVE_XMM / SAVE_XMM_FAR of old, EPILOG in version 2), 10
 * (PUSH_MACHFRAME: interrupt frames, never a shim's) and 11-15 (undefined). */
TEST(bad_unknown_ops)
{
    static const uint8_t ops[] = {6, 7, 10, 11, 12, 13, 14, 15};
    for (size_t i = 0; i < sizeof ops; i++) {
        /* three slots: room for the operands of any op */
        uint8_t b[12] = {0x01, 0x04, 0x03, 0x00, 0x04, (uint8_t)(0x30 | ops[i])};
        char needle[32];
        snprintf(needle, sizeof needle, "operation %u ", ops[i]);
        memset(&E, 0, sizeof E);
        CHECK(w64_parse_info(b, sizeof b, 0, &I, &E) == 0);
        EXPECT_ERR(replay(0, 8), needle);
    }
    /* the only two sizes of ALLOC_LARGE are 0 and 1 */
    EXPECT_ROWS_ERR(BYTES(0x01, 0x04, 0x03, 0x00, 0x04, 0x21, 0, 0, 0, 0, 0, 0), 8,
                    "operation 1 (info 2)");
    EXPECT_ROWS_ERR(BYTES(0x01, 0x04, 0x03, 0x00, 0x04, 0xf1, 0, 0, 0, 0, 0, 0), 8,
                    "operation 1 (info 15)");
    return 1;
}

/* An op whose operand slots are past the slot count, even when the padding
 * slot (or the section) holds bytes there. */
TEST(bad_multislot_cut)
{
    EXPECT_ROWS_ERR(BYTES(0x01, 0x04, 0x01, 0x00, 0x04, 0x01, 0x10, 0x00), 8,
                    "needs 2 slots, 1 are left"); /* ALLOC_LARGE/0 */
    EXPECT_ROWS_ERR(BYTES(0x01, 0x04, 0x02, 0x00, 0x04, 0x11, 0x10, 0x00), 8,
                    "needs 3 slots, 2 are left"); /* ALLOC_LARGE/1 */
    EXPECT_ROWS_ERR(BYTES(0x01, 0x04, 0x01, 0x00, 0x04, 0x34, 0x01, 0x00), 8,
                    "needs 2 slots, 1 are left"); /* SAVE_NONVOL */
    EXPECT_ROWS_ERR(BYTES(0x01, 0x04, 0x02, 0x00, 0x04, 0x35, 0x01, 0x00), 8,
                    "needs 3 slots, 2 are left"); /* SAVE_NONVOL_FAR */
    EXPECT_ROWS_ERR(BYTES(0x01, 0x04, 0x01, 0x00, 0x04, 0x68, 0x01, 0x00), 8,
                    "needs 2 slots, 1 are left"); /* SAVE_XMM128 */
    EXPECT_ROWS_ERR(BYTES(0x01, 0x04, 0x02, 0x00, 0x04, 0x69, 0x10, 0x00), 8,
                    "needs 3 slots, 2 are left"); /* SAVE_XMM128_FAR */
    /* cut after a complete one: push @4, then ALLOC_LARGE/1 @2 with 2 of 3 slots */
    EXPECT_ROWS_ERR(BYTES(0x01, 0x04, 0x03, 0x00, 0x04, 0x30, 0x02, 0x11, 0x10, 0x00, 0, 0), 8,
                    "slot 1 needs 3 slots, 2 are left");
    return 1;
}

TEST(bad_set_fpreg_without_frame_register)
{
    EXPECT_ROWS_ERR(BYTES(0x01, 0x04, 0x01, 0x80, 0x04, 0x03, 0x00, 0x00), 8,
                    "names no frame register");
    return 1;
}

TEST(bad_code_offsets)
{
    /* listed last first, so offsets must not grow: @1 then @5 */
    EXPECT_ROWS_ERR(BYTES(0x01, 0x05, 0x02, 0x00, 0x01, 0x50, 0x05, 0x30), 8, "out of order");
    /* @5 in a 4-byte prolog */
    EXPECT_ROWS_ERR(BYTES(0x01, 0x04, 0x02, 0x00, 0x05, 0x30, 0x01, 0x50), 8,
                    "past the prolog");
    /* @4 in a 4-byte prolog is its end, and fine */
    CHECK(parse_and_replay(BYTES(0x01, 0x04, 0x01, 0x00, 0x04, 0x30, 0x00, 0x00), 0, 8) == 0);
    return 1;
}

TEST(bad_prolog_longer_than_function)
{
    CHECK(w64_parse_info(shim_info, sizeof shim_info, 0, &I, &E) == 0);
    EXPECT_ERR(replay(0x100, 0x100 + 0x4a), "not shorter than the function");
    /* all prolog: no body, and its last row would be empty */
    EXPECT_ERR(replay(0x100, 0x100 + 0x4b), "not shorter than the function");
    EXPECT_ERR(replay(0x100, 0x100), "not shorter than the function");
    EXPECT_ERR(replay(0x100, 0x10), "not shorter than the function");
    CHECK(replay(0x100, 0x100 + 0x4c) == 0 && T.count == N_SHIM_ROWS);
    return 1;
}

/* Windows reads a save at an offset from the bottom of the fixed allocation;
 * the replay, from rsp where the save is. Nothing may move rsp after a save
 * or after the frame register is set, where the two would differ. */
TEST(bad_rsp_moved_after_fixed_allocation)
{
    /* sub rsp,16 @4; mov [rsp+8],rsi @9; sub rsp,32 @13 */
    EXPECT_ROWS_ERR(BYTES(0x01, 0x0d, 0x04, 0x00, 0x0d, 0x32, 0x09, 0x64, 0x01, 0x00, 0x04, 0x12),
                    0x20, "moves rsp after the save");
    /* push rbp @1; mov rbp,rsp @4; push rbx @5 */
    EXPECT_ROWS_ERR(BYTES(0x01, 0x05, 0x03, 0x05, 0x05, 0x30, 0x04, 0x03, 0x01, 0x50, 0x00, 0x00),
                    0x20, "moves rsp after the frame register is set");
    /* the same codes with the allocation first replay */
    CHECK(parse_and_replay(BYTES(0x01, 0x0d, 0x04, 0x00, 0x0d, 0x64, 0x01, 0x00, 0x09, 0x32, 0x04,
                                 0x12),
                           0, 0x20) == 0);
    return 1;
}

TEST(bad_rsp_as_a_saved_or_frame_register)
{
    EXPECT_ERR(w64_parse_info(BYTES(0x01, 0x04, 0x01, 0x04, 0x04, 0x03, 0x00, 0x00), 0, &I, &E),
               "frame register is rsp");
    EXPECT_ROWS_ERR(BYTES(0x01, 0x01, 0x01, 0x00, 0x01, 0x40, 0x00, 0x00), 8, "pushes rsp");
    return 1;
}

int main(void)
{
    RUN(shim_header);
    RUN(shim_rows);
    RUN(shim_in_section);
    RUN(shim_after_prolog);
    RUN(save_nonvol_alloc_small);
    RUN(save_far_alloc_large_info1);
    RUN(alloc_sizes);
    RUN(register_numbers);
    RUN(odd_slot_count);
    RUN(after_prolog_operands);
    RUN(same_code_offset);
    RUN(bad_header_truncated);
    RUN(bad_slots_past_end);
    RUN(bad_version);
    RUN(bad_flags);
    RUN(bad_unknown_ops);
    RUN(bad_multislot_cut);
    RUN(bad_set_fpreg_without_frame_register);
    RUN(bad_code_offsets);
    RUN(bad_prolog_longer_than_function);
    RUN(bad_rsp_moved_after_fixed_allocation);
    RUN(bad_rsp_as_a_saved_or_frame_register);
    return unit_summary();
}
