/* test_arm64_unwind.c - unit tests for generator/arm64_unwind.c: Windows
 * ARM64 .xdata records and packed .pdata words (real ones from clang, and the
 * examples of the ARM64 exception-handling documentation) in, DWARF-style rows
 * and the executors' record out. Every expected row was derived by hand from
 * the prolog's instructions. Prints "ok NAME" / "FAIL NAME: why" per test and
 * a final "N passed, N failed" line; exits 0 iff everything passed.
 *
 *   test_arm64_unwind --packed-rows WORD...
 *       prints, for each packed .pdata word (hex), "WORD" and then one line
 *       per row of the prolog it stands for, "OFFSET ROW", or "WORD error
 *       MESSAGE": test_coff_arm64.py compares them with llvm-readobj's
 *       reading of the same words. */
#include "../../generator/arm64_unwind.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- harness */

static a64w_info I;
static cfi_table T;
static cfi_error E;
static strbuf S;
static uint64_t sign_at;

#define UNIT_ERR E.msg
static void unit_reset(void)
{
    memset(&E, 0, sizeof E);
    memset(&I, 0, sizeof I);
    sign_at = 0;
}

static void unit_cleanup(void)
{
    cfi_table_free(&T);
    sb_free(&S);
    S = (strbuf){0};
}

#include "unit_harness.h"

#define BYTES(...) (const uint8_t[]){ __VA_ARGS__ }, sizeof((const uint8_t[]){ __VA_ARGS__ })

/* AADWARF64: x0-x30 0-30, sp 31, v0-v31 64-95. */
static const char *a64_name(uint32_t r)
{
    static char s[8][8];
    static unsigned k;
    char *b = s[k++ % 8];
    if (r < 31)
        snprintf(b, 8, "x%u", r);
    else if (r == 31)
        return "sp";
    else if (r >= 64 && r < 96)
        snprintf(b, 8, "v%u", r - 64);
    else
        return NULL;
    return b;
}

static const char *fmt(const cfi_row *row)
{
    static char s[512];
    cfi_format_row(row, a64_name, s, sizeof s);
    return s;
}

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

#define ROWS_ARE(want, begin, end) CHECK(rows_are(want, sizeof want / sizeof *want, begin, end))

static int replay_at(const uint8_t *p, size_t n, uint64_t begin, uint64_t end)
{
    cfi_table_free(&T);
    return a64w_parse_xdata(p, n, 0, &I, &E) == 0 ? a64w_rows(&I, begin, end, &T, &sign_at, &E)
                                                   : -1;
}

/* The same for a function at 0. */
static int parse_and_replay(const uint8_t *p, size_t n, uint64_t end)
{
    return replay_at(p, n, 0, end);
}

/* The record a packed word stands for, parsed into I and replayed over the
 * length the word gives. */
static int packed_replay(uint32_t word, uint64_t begin)
{
    sb_free(&S);
    S = (strbuf){0};
    cfi_table_free(&T);
    if (a64w_expand_packed(word, &S, &E) != 0 ||
        a64w_parse_xdata((const uint8_t *)S.data, S.len, 0, &I, &E) != 0)
        return -1;
    return a64w_rows(&I, begin, begin + 4 * (uint64_t)I.function_words, &T, &sign_at, &E);
}

static int is_error(int rc, const char *needle)
{
    return rc == -1 && E.msg[0] && strstr(E.msg, needle) && !T.rows && T.count == 0;
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

/* ---------------------------------------------------------------- tests */

/* tinyvm's shim for aarch64-pc-windows-msvc as clang 22 compiles it:
 *   stp x19, x20, [sp, #-160]!; stp x21, x22 .. x27, x28 (save_next x4);
 *   stp x29, x30, [sp, #80]; stp d8, d9 .. d14, d15 [sp, #96..144];
 *   add x29, sp, #80 */
static const uint8_t tinyvm_shim[] = {
    0x1a, 0x00, 0xa0, 0x28, 0xe2, 0x0a, 0xd9, 0x92, 0xd9, 0x10, 0xd8, 0x8e,
    0xd8, 0x0c, 0x4a, 0xe6, 0xe6, 0xe6, 0xe6, 0x34, 0xe4, 0xe3, 0xe3, 0xe3,
};

TEST(tinyvm_shim_record)
{
    CHECK(a64w_parse_xdata(tinyvm_shim, sizeof tinyvm_shim, 0, &I, &E) == 0);
    CHECK(I.function_words == 26 && I.single_epilog && I.epilogs == 2 && I.code_words == 5);
    CHECK(I.size == sizeof tinyvm_shim && I.codes == tinyvm_shim + 4);
    return 1;
}

TEST(tinyvm_shim_rows)
{
    CHECK(replay_at(tinyvm_shim, sizeof tinyvm_shim, 0x100, 0x168) == 0);
    const char *x = "x19=[CFA-160] x20=[CFA-152] x21=[CFA-144] x22=[CFA-136] x23=[CFA-128] "
                    "x24=[CFA-120] x25=[CFA-112] x26=[CFA-104] x27=[CFA-96] x28=[CFA-88] "
                    "x29=[CFA-80] x30=[CFA-72]";
    char all[400], sp_all[440], fp_all[440];
    snprintf(all, sizeof all, "%s v8=[CFA-64] v9=[CFA-56] v10=[CFA-48] v11=[CFA-40] "
             "v12=[CFA-32] v13=[CFA-24] v14=[CFA-16] v15=[CFA-8]", x);
    snprintf(sp_all, sizeof sp_all, "CFA=sp+160 %s", all);
    snprintf(fp_all, sizeof fp_all, "CFA=x29+80 %s", all);
    CHECK(T.count == 12);
    CHECK(!strcmp(fmt(&T.rows[0]), "CFA=sp+0") && T.rows[0].loc == 0x100);
    CHECK(!strcmp(fmt(&T.rows[1]), "CFA=sp+160 x19=[CFA-160] x20=[CFA-152]"));
    CHECK(!strcmp(fmt(&T.rows[5]), "CFA=sp+160 x19=[CFA-160] x20=[CFA-152] x21=[CFA-144] "
                                   "x22=[CFA-136] x23=[CFA-128] x24=[CFA-120] x25=[CFA-112] "
                                   "x26=[CFA-104] x27=[CFA-96] x28=[CFA-88]"));
    CHECK(!strcmp(fmt(&T.rows[10]), sp_all) && T.rows[10].loc == 0x128);
    CHECK(!strcmp(fmt(&T.rows[11]), fp_all) && T.rows[11].loc == 0x12c);
    CHECK(T.rows[11].end == 0x168 && sign_at == UINT64_MAX);
    return 1;
}

/* The executors' record: end_c, the shim's prolog codes, end; E with the
 * epilog at code 0; no length. */
TEST(tinyvm_after_prolog)
{
    CHECK(a64w_parse_xdata(tinyvm_shim, sizeof tinyvm_shim, 0, &I, &E) == 0);
    CHECK(a64w_after_prolog(&I, &S, &E) == 0);
    static const uint8_t want[] = {
        0x00, 0x00, 0x20, 0x28, 0xe5, 0xe2, 0x0a, 0xd9, 0x92, 0xd9, 0x10, 0xd8,
        0x8e, 0xd8, 0x0c, 0x4a, 0xe6, 0xe6, 0xe6, 0xe6, 0x34, 0xe4, 0xe3, 0xe3,
    };
    CHECK(S.len == sizeof want && !memcmp(S.data, want, sizeof want));
    /* It parses, and its prolog is empty: end_c is no code a shim may use. */
    a64w_info ex;
    CHECK(a64w_parse_xdata((const uint8_t *)S.data, S.len, 0, &ex, &E) == 0);
    CHECK(ex.function_words == 0 && ex.single_epilog && ex.epilogs == 0);
    EXPECT_ERR(a64w_rows(&ex, 0, 64, &T, &sign_at, &E), "end_c");
    return 1;
}

/* 126 codes (nop) need the extended header, and so does the executors'
 * record, two bytes longer. */
TEST(extended_headers)
{
    uint8_t rec[8 + 128];
    memset(rec, 0xe3, sizeof rec);
    memcpy(rec, (const uint8_t[]){200, 0, 0, 0, 0, 0, 32, 0}, 8);
    rec[8 + 126] = 0xe4;
    CHECK(parse_and_replay(rec, sizeof rec, 800) == 0);
    CHECK(I.code_words == 32 && I.epilogs == 0 && !I.single_epilog && T.count == 127);
    CHECK(a64w_after_prolog(&I, &S, &E) == 0);
    a64w_info ex;
    CHECK(a64w_parse_xdata((const uint8_t *)S.data, S.len, 0, &ex, &E) == 0);
    CHECK(S.len == 8 + 128 && ex.code_words == 32 && ex.single_epilog && ex.epilogs == 0);
    CHECK(ex.codes[0] == 0xe5 && !memcmp(ex.codes + 1, rec + 8, 127));
    return 1;
}

/* The documentation's example 2 (frame-chained, full form):
 *   stp x19, x20, [sp, #-16]!; stp fp, lr, [sp, #-0x90]!; mov fp, sp */
TEST(docs_example_2)
{
    static const uint8_t rec[] = {0x3d, 0x00, 0x40, 0x10, 0x38, 0x00, 0x00, 0x01,
                                  0xe1, 0x91, 0x22, 0xe4, 0xe1, 0x91, 0x22, 0xe4};
    CHECK(parse_and_replay(rec, sizeof rec, 0x100) == 0);
    CHECK(!I.single_epilog && I.epilogs == 1 && I.code_words == 2 && I.codes == rec + 8);
    static const want_row want[] = {
        {0, "CFA=sp+0"},
        {4, "CFA=sp+16 x19=[CFA-16] x20=[CFA-8]"},
        {8, "CFA=sp+160 x19=[CFA-16] x20=[CFA-8] x29=[CFA-160] x30=[CFA-152]"},
        {12, "CFA=x29+160 x19=[CFA-16] x20=[CFA-8] x29=[CFA-160] x30=[CFA-152]"},
    };
    ROWS_ARE(want, 0, 0x100);
    return 1;
}

/* Example 3 (unchained, homed parameters): sub sp, sp, #0x50; stp x19, lr,
 * [sp]; four stp x0-x7 (nop codes). Its header says 3 code words and lists
 * 2: a third (after end, never read) makes it whole. */
TEST(docs_example_3)
{
    static const uint8_t rec[] = {0x12, 0x00, 0x40, 0x18, 0x0f, 0x00, 0x00, 0x02,
                                  0xe3, 0xe3, 0xe3, 0xe3, 0xd6, 0x00, 0x05, 0xe4,
                                  0xe3, 0xe3, 0xe3, 0xe3};
    CHECK(parse_and_replay(rec, sizeof rec, 72) == 0);
    const char *saved = "CFA=sp+80 x19=[CFA-80] x30=[CFA-72]";
    static want_row want[] = {
        {0, "CFA=sp+0"}, {4, "CFA=sp+80"}, {8, NULL}, {12, NULL}, {16, NULL}, {20, NULL},
        {24, NULL},
    };
    for (size_t i = 2; i < sizeof want / sizeof *want; i++)
        want[i].row = saved;
    ROWS_ARE(want, 0, 72);
    return 1;
}

/* Example 1, packed: 0x416101ed stands for str x19, [sp, #-16]!; sub sp, sp,
 * #0x810; stp fp, lr, [sp]; mov fp, sp. */
TEST(docs_example_1_packed)
{
    CHECK(packed_replay(0x416101ed, 0x1000) == 0);
    CHECK(I.function_words == 123);
    static const want_row want[] = {
        {0, "CFA=sp+0"},
        {4, "CFA=sp+16 x19=[CFA-16]"},
        {8, "CFA=sp+2080 x19=[CFA-16]"},
        {12, "CFA=sp+2080 x19=[CFA-16] x29=[CFA-2080] x30=[CFA-2072]"},
        {16, "CFA=x29+2080 x19=[CFA-16] x29=[CFA-2080] x30=[CFA-2072]"},
    };
    ROWS_ARE(want, 0x1000, 0x1000 + 492);
    return 1;
}

/* clang's simplest chained function: stp x29, x30, [sp, #-16]!; mov x29, sp
 * (CR 3, a 16-byte frame), packed. */
TEST(packed_frame_record_only)
{
    uint32_t word = 1 | 8u << 2 | 3u << 21 | 1u << 23;
    CHECK(packed_replay(word, 0) == 0);
    static const want_row want[] = {
        {0, "CFA=sp+0"},
        {4, "CFA=sp+16 x29=[CFA-16] x30=[CFA-8]"},
        {8, "CFA=x29+16 x29=[CFA-16] x30=[CFA-8]"},
    };
    ROWS_ARE(want, 0, 32);
    /* Its single epilog starts past set_fp, which no epilog undoes. */
    CHECK(I.single_epilog && I.epilogs == 1 && I.codes[0] == 0xe1 && I.codes[1] == 0x81);
    return 1;
}

/* CR 2 signs the return address first (pacibsp); RegI 3 and RegF 1: x19,
 * x20, x21 and d8, d9 below the frame record. */
TEST(packed_signed_with_saves)
{
    uint32_t word = 1 | 20u << 2 | 1u << 13 | 3u << 16 | 2u << 21 | 5u << 23;
    CHECK(packed_replay(word, 0) == 0);
    CHECK(sign_at == 0); /* pacibsp, the first instruction */
    /* intsz 24, fpsz 16, savsz 48, locsz 32 */
    static const want_row want[] = {
        {0, "CFA=sp+0"},
        {4, "CFA=sp+0"}, /* pacibsp */
        {8, "CFA=sp+48 x19=[CFA-48] x20=[CFA-40]"},
        {12, "CFA=sp+48 x19=[CFA-48] x20=[CFA-40] x21=[CFA-32]"},
        {16, "CFA=sp+48 x19=[CFA-48] x20=[CFA-40] x21=[CFA-32] v8=[CFA-24] v9=[CFA-16]"},
        {20, "CFA=sp+80 x19=[CFA-48] x20=[CFA-40] x21=[CFA-32] x29=[CFA-80] x30=[CFA-72] "
             "v8=[CFA-24] v9=[CFA-16]"},
        {24, "CFA=x29+80 x19=[CFA-48] x20=[CFA-40] x21=[CFA-32] x29=[CFA-80] x30=[CFA-72] "
             "v8=[CFA-24] v9=[CFA-16]"},
    };
    ROWS_ARE(want, 0, 80);
    return 1;
}

/* CR 1 (lr saved with the integer registers, no frame record), RegI 2, a
 * large frame: stp x19, x20, [sp, #-32]!; str lr, [sp, #16]; sub sp, sp,
 * #4080; sub sp, sp, #(locsz - 4080). */
TEST(packed_unchained_large_frame)
{
    uint32_t word = 1 | 100u << 2 | 2u << 16 | 1u << 21 | 300u << 23;
    CHECK(packed_replay(word, 0) == 0);
    static const want_row want[] = {
        {0, "CFA=sp+0"},
        {4, "CFA=sp+32 x19=[CFA-32] x20=[CFA-24]"},
        {8, "CFA=sp+32 x19=[CFA-32] x20=[CFA-24] x30=[CFA-16]"},
        {12, "CFA=sp+4112 x19=[CFA-32] x20=[CFA-24] x30=[CFA-16]"},
        {16, "CFA=sp+4800 x19=[CFA-32] x20=[CFA-24] x30=[CFA-16]"},
    };
    ROWS_ARE(want, 0, 400);
    return 1;
}

TEST(bad_headers)
{
    EXPECT_ERR(parse_and_replay(BYTES(0x01, 0x00, 0x00), 64), "past the end");
    EXPECT_ERR(parse_and_replay(BYTES(0x10, 0x00, 0x04, 0x08, 0xe1, 0xe4, 0xe3, 0xe3), 64),
               "version 1");
    EXPECT_ERR(parse_and_replay(BYTES(0x10, 0x00, 0x10, 0x08, 0xe1, 0xe4, 0xe3, 0xe3), 64),
               "exception handler");
    EXPECT_ERR(parse_and_replay(BYTES(0x10, 0x00, 0x00, 0x10, 0xe1, 0xe4, 0xe3, 0xe3), 64),
               "run past the end");
    EXPECT_ERR(parse_and_replay(BYTES(0x10, 0x00, 0x00, 0x00), 64), "extended header");
    /* The extended header's counts: no codes at all. */
    EXPECT_ERR(parse_and_replay(BYTES(0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00), 64),
               "no unwind codes");
    return 1;
}

TEST(bad_codes)
{
    /* end_c: chained scopes */
    EXPECT_ERR(parse_and_replay(BYTES(0x10, 0x00, 0x20, 0x08, 0xe5, 0xe1, 0xe4, 0xe3), 64),
               "chained scopes");
    /* alloc_z (SVE) */
    EXPECT_ERR(parse_and_replay(BYTES(0x10, 0x00, 0x20, 0x08, 0xdf, 0x01, 0xe4, 0xe3), 64),
               "0xdf");
    /* no end in the code words */
    EXPECT_ERR(parse_and_replay(BYTES(0x10, 0x00, 0x20, 0x08, 0xe1, 0xe3, 0xe3, 0xe3), 64),
               "no end");
    /* alloc_l cut by the end of the codes */
    EXPECT_ERR(parse_and_replay(BYTES(0x10, 0x00, 0x20, 0x08, 0xe3, 0xe3, 0xe0, 0x01), 64),
               "needs 4 bytes");
    /* save_next with no pair saved before it (in the prolog's order) */
    EXPECT_ERR(parse_and_replay(BYTES(0x10, 0x00, 0x20, 0x08, 0xe6, 0xe4, 0xe3, 0xe3), 64),
               "save_next");
    /* a prolog as long as the function */
    EXPECT_ERR(parse_and_replay(BYTES(0x10, 0x00, 0x20, 0x08, 0xe1, 0xe3, 0xe4, 0xe3), 8),
               "not shorter");
    return 1;
}

/* save_next after x27, x28 goes on with d8, d9. */
TEST(save_next_into_fp_registers)
{
    /* save_regp x27 at sp+0 after save_regp_x x25 ... : stp x27, x28, [sp,
     * #-16]!; save_next -> d8, d9 at [sp, #16] */
    CHECK(parse_and_replay(BYTES(0x10, 0x00, 0x20, 0x08, 0xe6, 0xce, 0x01, 0xe4), 64) == 0);
    static const want_row want[] = {
        {0, "CFA=sp+0"},
        {4, "CFA=sp+16 x27=[CFA-16] x28=[CFA-8]"},
        {8, "CFA=sp+16 x27=[CFA-16] x28=[CFA-8] v8=[CFA+0] v9=[CFA+8]"},
    };
    ROWS_ARE(want, 0, 64);
    return 1;
}

TEST(bad_packed)
{
    EXPECT_ERR(packed_replay(2 | 8u << 2, 0), "fragment");
    EXPECT_ERR(packed_replay(3 | 8u << 2, 0), "reserved flag");
    EXPECT_ERR(packed_replay(1 | 8u << 2 | 1u << 16 | 1u << 21 | 2u << 23, 0), "CR 1");
    EXPECT_ERR(packed_replay(1 | 8u << 2 | 11u << 16 | 10u << 23, 0), "10");
    EXPECT_ERR(packed_replay(1 | 8u << 2 | 4u << 16, 0), "cannot hold");
    EXPECT_ERR(packed_replay(1 | 8u << 2 | 1u << 20 | 4u << 23, 0), "homed parameters");
    return 1;
}

/* --packed-rows: the rows of each word's prolog, for the differential. */
static int packed_rows(int argc, char **argv)
{
    for (int i = 2; i < argc; i++) {
        uint32_t word = (uint32_t)strtoul(argv[i], NULL, 16);
        unit_reset();
        if (packed_replay(word, 0) != 0) {
            printf("%08" PRIx32 " error %s\n", word, E.msg);
            continue;
        }
        printf("%08" PRIx32 "\n", word);
        for (size_t r = 0; r < T.count; r++)
            printf("%" PRIu64 " %s\n", T.rows[r].loc, fmt(&T.rows[r]));
        unit_cleanup();
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "--packed-rows"))
        return packed_rows(argc, argv);
    RUN(tinyvm_shim_record);
    RUN(tinyvm_shim_rows);
    RUN(tinyvm_after_prolog);
    RUN(extended_headers);
    RUN(docs_example_2);
    RUN(docs_example_3);
    RUN(docs_example_1_packed);
    RUN(packed_frame_record_only);
    RUN(packed_signed_with_saves);
    RUN(packed_unchained_large_frame);
    RUN(save_next_into_fp_registers);
    RUN(bad_headers);
    RUN(bad_codes);
    RUN(bad_packed);
    return unit_summary();
}
