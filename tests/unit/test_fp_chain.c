/* test_fp_chain.c - unit tests for generator/fp_chain.c: 32-bit x86 prologs
 * in (clang's, and hand-made ones with both encodings of mov ebp, esp and
 * both forms of sub esp), DWARF-style rows out, and the refusals of a prolog
 * that does not put the frame on the ebp chain. Prints "ok NAME" / "FAIL
 * NAME: why" per test and a final "N passed, N failed" line; exits 0 iff
 * everything passed. */
#include "../../generator/fp_chain.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static cfi_table T;
static cfi_error E;
static size_t P;

#define UNIT_ERR E.msg
static void unit_reset(void)
{
    memset(&E, 0, sizeof E);
    P = 0;
}

static void unit_cleanup(void)
{
    cfi_table_free(&T);
}

#include "unit_harness.h"

#define BYTES(...) (const uint8_t[]){ __VA_ARGS__ }, sizeof((const uint8_t[]){ __VA_ARGS__ })

static const char *i386_name(uint32_t r)
{
    static const char *const n[] = {"eax", "ecx", "edx", "ebx", "esp",
                                    "ebp", "esi", "edi", "eip"};
    return r < 9 ? n[r] : NULL;
}

static const char *fmt(size_t i)
{
    static char s[512];
    cfi_format_row(&T.rows[i], i386_name, s, sizeof s);
    return s;
}

static int replay(const uint8_t *p, size_t n, uint64_t end)
{
    cfi_table_free(&T);
    return fpc_rows(p, n, 0, end, &T, &P, &E);
}

#define ROW(i, loc_, want)                                                                   \
    do {                                                                                     \
        CHECK((i) < T.count && T.rows[i].loc == (loc_));                                     \
        if (strcmp(fmt(i), (want))) {                                                        \
            snprintf(why, sizeof why, "line %d: row %d is \"%s\", want \"%s\"", __LINE__,     \
                     (int)(i), fmt(i), (want));                                              \
            return 0;                                                                        \
        }                                                                                    \
    } while (0)

/* tinyvm's shim as clang 22 compiles it: push ebp; mov ebp, esp; push edi;
 * then the body (mov 8(%ebp), %eax). */
TEST(tinyvm_shim)
{
    CHECK(replay(BYTES(0x55, 0x89, 0xe5, 0x57, 0x8b, 0x45, 0x08), 0x16) == 0);
    CHECK(T.count == 4 && P == 4 && T.rows[3].end == 0x16);
    ROW(0, 0, "CFA=esp+4 eip=[CFA-4]");
    ROW(1, 1, "CFA=esp+8 ebp=[CFA-8] eip=[CFA-4]");
    ROW(2, 3, "CFA=ebp+8 ebp=[CFA-8] eip=[CFA-4]");
    ROW(3, 4, "CFA=ebp+8 ebp=[CFA-8] edi=[CFA-12] eip=[CFA-4]");
    return 1;
}

/* The other mov encoding (8B EC), pushes, sub esp, imm8 and imm32. */
TEST(encodings)
{
    CHECK(replay(BYTES(0x55, 0x8b, 0xec, 0x53, 0x56, 0x83, 0xec, 0x10, 0x81, 0xec, 0x00, 0x10,
                       0x00, 0x00, 0x31, 0xc0), 64) == 0);
    CHECK(T.count == 7 && P == 14);
    ROW(4, 5, "CFA=ebp+8 ebx=[CFA-12] ebp=[CFA-8] esi=[CFA-16] eip=[CFA-4]");
    ROW(6, 14, "CFA=ebp+8 ebx=[CFA-12] ebp=[CFA-8] esi=[CFA-16] eip=[CFA-4]");
    return 1;
}

TEST(off_the_chain)
{
    /* no push ebp */
    CHECK(replay(BYTES(0x57, 0x89, 0xe5), 16) == -1 && strstr(E.msg, "push ebp; mov ebp, esp"));
    CHECK(T.count == 0 && !T.rows);
    /* push ebp, but ebp never set */
    CHECK(replay(BYTES(0x55, 0x57, 0x89, 0xe5), 16) == -1 && strstr(E.msg, "instruction 1"));
    /* the code ends inside the prolog */
    CHECK(replay(BYTES(0x55), 16) == -1 && strstr(E.msg, "ends before"));
    /* a prolog as long as the function */
    CHECK(replay(BYTES(0x55, 0x89, 0xe5, 0x57), 4) == -1 && strstr(E.msg, "not shorter"));
    /* push esp is no save; sub with a negative imm8 is no allocation */
    CHECK(replay(BYTES(0x55, 0x89, 0xe5, 0x54), 16) == 0 && P == 3);
    CHECK(replay(BYTES(0x55, 0x89, 0xe5, 0x83, 0xec, 0xf0), 16) == 0 && P == 3);
    return 1;
}

int main(void)
{
    RUN(tinyvm_shim);
    RUN(encodings);
    RUN(off_the_chain);
    return unit_summary();
}
