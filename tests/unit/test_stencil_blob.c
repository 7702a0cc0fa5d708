/* test_stencil_blob.c - unit tests for generator/stencil_blob.c: a stencil
 * survives the round trip, and every kind of damage is refused with a reason
 * while leaving the caller's stencil alone.  Prints "ok NAME" / "FAIL NAME: why"
 * per test and a final "N passed, N failed" line; exits 0 iff all passed. */
#include "../../generator/stencil_blob.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- harness */

static char err[256]; /* the decoder's last reason */

#define UNIT_ERR err
static void unit_reset(void)
{
    err[0] = '\0';
}

static void unit_cleanup(void) {}

#include "unit_harness.h"

/* ------------------------------------------------------------- samples */

static const digest context = {{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef}};
#define CONTEXT (&context)
#define NSYMBOLS 4
static const char DEPS[] = "op_add.o: tu/op_add.c stencil_template.h\n";

static uint8_t code[] = {0x48, 0x8b, 0x05, 0, 0, 0, 0, 0xff, 0x15, 0, 0, 0, 0, 0x90};
static uint8_t data[] = {1, 2, 3, 4, 5, 6, 7, 8};
static gen_hole code_holes[] = {
    {3, SG_PATCH_GOTPCREL32, SG_VALUE_OPERAND, 1, -4, "R_X86_64_REX_GOTPCRELX", "_JIT_OPERAND1"},
    {9, SG_PATCH_GOTPCREL32, SG_VALUE_SYMBOL, 3, -4, "R_X86_64_GOTPCRELX", "vm_trap"},
};
static gen_hole data_holes[] = {{0, SG_PATCH_ABS64, SG_VALUE_CODE, 0, 7, "R_X86_64_64", ".text"}};
static gen_insn insns[] = {{.offset = 0, .size = 7, .text = 0, .decoded = true},
                          {.offset = 7, .size = 6, .text = 18, .decoded = true},
                          {.offset = 13, .size = 1, .text = 32, .decoded = true}};
static char insn_text[] = "movq (%rip), %rax\0callq *(%rip)\0nop";

static gen_stencil sample(void)
{
    return (gen_stencil){.code = code, .code_size = sizeof code, .data = data,
                        .data_size = sizeof data, .data_align = 8, .code_holes = code_holes,
                        .ncode_holes = 2, .data_holes = data_holes, .ndata_holes = 1,
                        .entry = 0, .removed_jump = 5, .hot_size = 4, .insns = insns,
                        .ninsns = 3,
                        .insn_text = insn_text, .insn_text_size = sizeof insn_text};
}

static strbuf encode(const gen_stencil *s)
{
    strbuf sb = {0};
    stencil_blob_encode(&sb, s, DEPS, CONTEXT);
    return sb;
}

static void free_decoded(gen_stencil *s, char *deps)
{
    free(s->code);
    free(s->data);
    free(s->code_holes);
    free(s->data_holes);
    free(s->insns);
    free(s->insn_text);
    free(deps);
}

/* Decoding `b` fails, gives a reason containing `reason`, and touches nothing. */
static int refused(const void *b, size_t n, size_t nsymbols, const char *reason)
{
    gen_stencil s = {.name = "kept"};
    char *deps = NULL;
    err[0] = '\0';
    bool ok = stencil_blob_decode(b, n, CONTEXT, nsymbols, &s, &deps, err, sizeof err);
    if (ok)
        free_decoded(&s, deps);
    return !ok && deps == NULL && s.code == NULL && !strcmp(s.name, "kept") && err[0] &&
           strstr(err, reason) != NULL;
}

/* ------------------------------------------------------------- tests */

TEST(round_trip)
{
    gen_stencil in = sample();
    strbuf b = encode(&in);
    gen_stencil out = {0};
    char *deps = NULL;
    CHECK(stencil_blob_decode((uint8_t *)b.data, b.len, CONTEXT, NSYMBOLS, &out, &deps, err,
                               sizeof err));
    int ok = out.code_size == in.code_size && !memcmp(out.code, code, sizeof code) &&
             out.data_size == in.data_size && !memcmp(out.data, data, sizeof data) &&
             out.data_align == 8 && out.entry == 0 && out.removed_jump == 5 && out.hot_size == 4 &&
             out.ncode_holes == 2 && out.ndata_holes == 1 && out.ninsns == 3 &&
             !memcmp(out.code_holes, code_holes, sizeof code_holes) &&
             !memcmp(out.data_holes, data_holes, sizeof data_holes) && !strcmp(deps, DEPS);
    for (size_t i = 0; ok && i < 3; i++)
        ok = out.insns[i].offset == insns[i].offset && out.insns[i].size == insns[i].size &&
             out.insns[i].decoded && !out.insns[i].writes_fp &&
             !strcmp(stencil_insn_text(&out, &out.insns[i]), insn_text + insns[i].text);
    strbuf again = encode(&out);
    ok = ok && again.len == b.len && !memcmp(again.data, b.data, b.len);
    free_decoded(&out, deps);
    sb_free(&again);
    sb_free(&b);
    CHECK(ok);
    return 1;
}

TEST(empty_code)
{
    gen_stencil in = {.data_align = 1, .removed_jump = 5};
    strbuf b = {0};
    stencil_blob_encode(&b, &in, "", CONTEXT);
    gen_stencil out = {0};
    char *deps = NULL;
    bool ok = stencil_blob_decode((uint8_t *)b.data, b.len, CONTEXT, 0, &out, &deps, err,
                                   sizeof err);
    sb_free(&b);
    CHECK(ok);
    ok = out.code_size == 0 && out.ninsns == 0 && out.removed_jump == 5 && !strcmp(deps, "");
    free_decoded(&out, deps);
    CHECK(ok);
    return 1;
}

TEST(every_truncation_refused)
{
    gen_stencil in = sample();
    strbuf b = encode(&in);
    for (size_t n = 0; n < b.len; n++)
        CHECK(refused(b.data, n, NSYMBOLS, "")); /* "truncated", or a size beyond the end */
    sb_free(&b);
    return 1;
}

TEST(trailing_byte_refused)
{
    gen_stencil in = sample();
    strbuf b = encode(&in);
    sb_putc(&b, 0);
    CHECK(refused(b.data, b.len, NSYMBOLS, "1 bytes after the end"));
    sb_free(&b);
    return 1;
}

TEST(version_and_context_refused)
{
    gen_stencil in = sample();
    strbuf b = encode(&in);
    b.data[8]++; /* the version's low byte */
    CHECK(refused(b.data, b.len, NSYMBOLS, "format version 5, this stencilgen reads 4"));
    b.data[8]--;
    b.data[12] ^= 1; /* the context */
    CHECK(refused(b.data, b.len, NSYMBOLS, "another generator"));
    b.data[12] ^= 1;
    b.data[12 + 31] ^= 1; /* its last byte: the whole digest is compared */
    CHECK(refused(b.data, b.len, NSYMBOLS, "another generator"));
    b.data[12 + 31] ^= 1;
    b.data[0] = 'X';
    CHECK(refused(b.data, b.len, NSYMBOLS, "not a stencil blob"));
    sb_free(&b);
    return 1;
}

TEST(symbol_beyond_the_manifest_refused)
{
    gen_stencil in = sample();
    strbuf b = encode(&in);
    CHECK(refused(b.data, b.len, 3, "code hole 1: index 3 out of range"));
    sb_free(&b);
    return 1;
}

/* Fields the encoder would never write (from a stencil damaged in memory). */
TEST(bad_fields_refused)
{
    static const char *const reasons[] = {
        "not a power of two", "entry 15 out of range", "removed jump 17 out of range",
        "code hole 1: out of order", "outside 14 bytes", "kind 99/4 out of range",
        "size 2 does not fit the code", "instructions cover 13 of 14 code bytes",
        "hot part 15 out of range",
    };
    for (size_t k = 0; k < sizeof reasons / sizeof *reasons; k++) {
        gen_stencil s = sample();
        gen_hole holes[2];
        gen_insn ins[3];
        memcpy(holes, code_holes, sizeof holes);
        memcpy(ins, insns, sizeof ins);
        s.code_holes = holes;
        s.insns = ins;
        switch (k) {
        case 0: s.data_align = 12; break;
        case 1: s.entry = s.code_size + 1; break;
        case 2: s.removed_jump = 17; break;
        case 3: holes[0].offset = 10; break;
        case 4: holes[1].offset = 14; break;
        case 5: holes[0].patch = (sg_patch)99; break;
        case 6: ins[2].size = 2; break;
        case 7: s.ninsns = 2; break;
        case 8: s.hot_size = s.code_size + 1; break;
        }
        strbuf b = encode(&s);
        int ok = refused(b.data, b.len, NSYMBOLS, reasons[k]);
        sb_free(&b);
        if (!ok) {
            snprintf(why, sizeof why, "case %zu: want '%s', got '%s'", k, reasons[k], err);
            return 0;
        }
    }
    return 1;
}

/* Whatever one flipped bit does, decoding must not crash, and whatever it
 * accepts must be exactly what the encoder would write (run under ASan). */
TEST(every_bit_flip_is_refused_or_canonical)
{
    gen_stencil in = sample();
    strbuf b = encode(&in);
    for (size_t i = 0; i < b.len; i++) {
        for (int bit = 0; bit < 8; bit++) {
            b.data[i] ^= (char)(1 << bit);
            gen_stencil out = {0};
            char *deps = NULL;
            if (stencil_blob_decode((uint8_t *)b.data, b.len, CONTEXT, NSYMBOLS, &out, &deps,
                                     err, sizeof err)) {
                strbuf again = {0};
                stencil_blob_encode(&again, &out, deps, CONTEXT);
                int same = again.len == b.len && !memcmp(again.data, b.data, b.len);
                sb_free(&again);
                free_decoded(&out, deps);
                CHECK(same);
            } else {
                CHECK(err[0] && out.code == NULL && deps == NULL);
            }
            b.data[i] ^= (char)(1 << bit);
        }
    }
    sb_free(&b);
    return 1;
}

int main(void)
{
    RUN(round_trip);
    RUN(empty_code);
    RUN(every_truncation_refused);
    RUN(trailing_byte_refused);
    RUN(version_and_context_refused);
    RUN(symbol_beyond_the_manifest_refused);
    RUN(bad_fields_refused);
    RUN(every_bit_flip_is_refused_or_canonical);
    return unit_summary();
}
