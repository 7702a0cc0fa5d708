/* test_property_notes.c - unit tests for generator/property_notes.c: the
 * .note.gnu.property bytes clang 22 writes (copied out of its objects with
 * llvm-objcopy --only-section), hand-cut ones, and the flags that ask for
 * each feature. Prints "ok NAME" / "FAIL NAME: why" per test and a final
 * "N passed, N failed" line; exits 0 iff everything passed. */
#include "../../generator/property_notes.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static char E[160];
static strbuf S;

#define UNIT_ERR E
static void unit_reset(void)
{
    E[0] = '\0';
}

static void unit_cleanup(void)
{
    sb_free(&S);
    S = (strbuf){0};
}

#include "unit_harness.h"

enum { X86 = 62, A64 = 183 };

/* clang-22 --target=x86_64-linux-gnu -fcf-protection=full */
static const uint8_t x86_full[] = {
    0x04, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00,
    0x47, 0x4e, 0x55, 0x00, 0x02, 0x00, 0x00, 0xc0, 0x04, 0x00, 0x00, 0x00,
    0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};
/* clang-22 --target=aarch64-linux-gnu -mbranch-protection=standard */
static const uint8_t a64_standard[] = {
    0x04, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00,
    0x47, 0x4e, 0x55, 0x00, 0x00, 0x00, 0x00, 0xc0, 0x04, 0x00, 0x00, 0x00,
    0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};

static uint32_t features(const uint8_t *b, size_t n, unsigned machine, bool *ok)
{
    uint32_t f = 0xdead;
    *ok = pn_parse(b, n, machine, &f, E, sizeof E);
    return f;
}

TEST(clang_x86_full)
{
    bool ok;
    CHECK(features(x86_full, sizeof x86_full, X86, &ok) == (PN_X86_IBT | PN_X86_SHSTK) && ok);
    pn_describe(&S, X86, PN_X86_IBT | PN_X86_SHSTK);
    CHECK(!strcmp(S.data, "IBT, SHSTK"));
    return 1;
}

TEST(clang_aarch64_standard)
{
    bool ok;
    uint32_t f = features(a64_standard, sizeof a64_standard, A64, &ok);
    CHECK(ok && f == (PN_AARCH64_BTI | PN_AARCH64_PAC | PN_AARCH64_GCS));
    pn_describe(&S, A64, f);
    CHECK(!strcmp(S.data, "BTI, PAC, GCS"));
    return 1;
}

/* The other machine's property type is not this machine's feature set. */
TEST(other_machines_property_is_ignored)
{
    bool ok;
    CHECK(features(x86_full, sizeof x86_full, A64, &ok) == 0 && ok);
    CHECK(features(a64_standard, sizeof a64_standard, X86, &ok) == 0 && ok);
    return 1;
}

TEST(empty_section_has_no_features)
{
    bool ok;
    CHECK(features(x86_full, 0, X86, &ok) == 0 && ok);
    return 1;
}

/* Two notes (as a relocatable link may leave them): the bits of both. */
TEST(two_notes)
{
    uint8_t two[2 * sizeof x86_full];
    memcpy(two, x86_full, sizeof x86_full);
    memcpy(two + sizeof x86_full, x86_full, sizeof x86_full);
    two[24] = 0x01;                  /* first: IBT */
    two[sizeof x86_full + 24] = 0x02; /* second: SHSTK */
    bool ok;
    CHECK(features(two, sizeof two, X86, &ok) == (PN_X86_IBT | PN_X86_SHSTK) && ok);
    return 1;
}

TEST(cut_short_is_an_error)
{
    bool ok;
    for (size_t n = 1; n < sizeof x86_full; n++) {
        features(x86_full, n, X86, &ok);
        CHECK(!ok && E[0]);
    }
    return 1;
}

/* A property whose size runs past its note, and a note whose descriptor
 * runs past the section. */
TEST(sizes_past_the_end_are_errors)
{
    uint8_t b[sizeof x86_full];
    bool ok;
    memcpy(b, x86_full, sizeof b);
    b[20] = 0x20; /* pr_datasz 32 in a 16-byte descriptor */
    features(b, sizeof b, X86, &ok);
    CHECK(!ok && strstr(E, "run past its note"));
    memcpy(b, x86_full, sizeof b);
    b[4] = 0xff, b[5] = 0xff, b[6] = 0xff, b[7] = 0xff; /* descsz 2^32-1 */
    features(b, sizeof b, X86, &ok);
    CHECK(!ok && strstr(E, "run past the section"));
    memcpy(b, x86_full, sizeof b);
    b[0] = 0xfd, b[1] = 0xff, b[2] = 0xff, b[3] = 0xff; /* namesz near 2^32 */
    features(b, sizeof b, X86, &ok);
    CHECK(!ok && strstr(E, "name runs past"));
    return 1;
}

static uint32_t asked(unsigned machine, const char **flag, ...)
{
    char *argv[8] = {0};
    va_list ap;
    va_start(ap, flag);
    for (size_t i = 0; i < 7 && (argv[i] = va_arg(ap, char *)); i++)
        ;
    va_end(ap);
    return pn_asked(argv, machine, flag);
}

TEST(cf_protection_flags)
{
    const char *flag;
    CHECK(asked(X86, &flag, "clang", "-fcf-protection=full", "-c", NULL) ==
          (PN_X86_IBT | PN_X86_SHSTK));
    CHECK(!strcmp(flag, "-fcf-protection=full"));
    CHECK(asked(X86, &flag, "-fcf-protection", NULL) == (PN_X86_IBT | PN_X86_SHSTK));
    CHECK(asked(X86, &flag, "-fcf-protection=branch", NULL) == PN_X86_IBT);
    CHECK(asked(X86, &flag, "-fcf-protection=return", NULL) == PN_X86_SHSTK);
    /* The last one wins, as in clang. */
    CHECK(asked(X86, &flag, "-fcf-protection=full", "-fcf-protection=none", NULL) == 0 && !flag);
    CHECK(asked(X86, &flag, "-fcf-protection=none", "-fcf-protection=branch", NULL) ==
          PN_X86_IBT);
    CHECK(!strcmp(flag, "-fcf-protection=branch"));
    /* Neither another machine's flag nor a longer option name counts. */
    CHECK(asked(X86, &flag, "-mbranch-protection=standard", NULL) == 0 && !flag);
    CHECK(asked(X86, &flag, "-fcf-protection-x", NULL) == 0 && !flag);
    CHECK(asked(A64, &flag, "-fcf-protection=full", NULL) == 0 && !flag);
    return 1;
}

TEST(branch_protection_flags)
{
    const char *flag;
    CHECK(asked(A64, &flag, "-mbranch-protection=standard", NULL) ==
          (PN_AARCH64_BTI | PN_AARCH64_PAC));
    CHECK(asked(A64, &flag, "-mbranch-protection=bti", NULL) == PN_AARCH64_BTI);
    CHECK(asked(A64, &flag, "-mbranch-protection=pac-ret+leaf+b-key", NULL) == PN_AARCH64_PAC);
    CHECK(asked(A64, &flag, "-mbranch-protection=bti+pac-ret+gcs", NULL) ==
          (PN_AARCH64_BTI | PN_AARCH64_PAC | PN_AARCH64_GCS));
    CHECK(asked(A64, &flag, "-mbranch-protection=standard", "-mbranch-protection=none", NULL) ==
          0 && !flag);
    CHECK(asked(A64, &flag, "-mbranch-protection=pac-retx", NULL) == 0 && !flag);
    return 1;
}

int main(void)
{
    RUN(clang_x86_full);
    RUN(clang_aarch64_standard);
    RUN(other_machines_property_is_ignored);
    RUN(empty_section_has_no_features);
    RUN(two_notes);
    RUN(cut_short_is_an_error);
    RUN(sizes_past_the_end_are_errors);
    RUN(cf_protection_flags);
    RUN(branch_protection_flags);
    return unit_summary();
}
