/* make_stencil_blob_seeds.c - write a seed corpus for fuzz_stencil_blob into
 * the directory argv[1].
 *
 * Each seed is one selector byte (the number of run-time symbols) followed by a
 * blob from stencil_blob_encode under fuzz_stencil_blob.c's context: stencils
 * shaped like real x86-64 and AArch64 ops (holes of every value kind, read-only
 * data, a removed jump, an op whose code is only that jump). */
#include "stencil_blob.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The seeds' context, as the generator's is a digest. */
static const digest fuzz_context = {{0x5e, 0xed, 0xc0, 0xde, 0x5e, 0xed, 0xc0, 0xde}};
#define FUZZ_CONTEXT (&fuzz_context)

typedef struct insn_spec {
    unsigned size;
    const char *text;
} insn_spec;

static void set_insns(gen_stencil *s, const insn_spec *spec, size_t n)
{
    strbuf pool = {0};
    s->insns = calloc(n ? n : 1, sizeof *s->insns);
    s->ninsns = n;
    uint32_t pc = 0;
    for (size_t i = 0; i < n; i++) {
        s->insns[i] = (gen_insn){.offset = pc, .size = spec[i].size, .text = (uint32_t)pool.len,
                                .decoded = true};
        sb_putn(&pool, spec[i].text, strlen(spec[i].text) + 1);
        pc += spec[i].size;
    }
    s->insn_text = pool.data ? pool.data : strdup("");
    s->insn_text_size = pool.len;
}

static void write_seed(const char *dir, int n, unsigned nsymbols, const gen_stencil *s,
                       const char *deps)
{
    strbuf sb = {0};
    sb_putc(&sb, (char)nsymbols);
    stencil_blob_encode(&sb, s, deps, FUZZ_CONTEXT);
    char path[4096];
    snprintf(path, sizeof path, "%s/seed-%02d", dir, n);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(sb.data, 1, sb.len, f) != sb.len || fclose(f)) {
        perror(path);
        exit(1);
    }
    sb_free(&sb);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    const char *deps = "op_add.o: tu/op_add.c ../templates/stencil_template.h vm.h\n";

    /* x86-64: an operand, a helper call through the GOT, a jump target; data. */
    static uint8_t code1[] = {0x48, 0x8b, 0x05, 0, 0, 0, 0, 0xff, 0x15, 0, 0, 0, 0,
                              0x0f, 0x84, 0, 0, 0, 0, 0x48, 0x8d, 0x0d, 0, 0, 0, 0};
    static uint8_t data1[] = {1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0};
    gen_hole holes1[] = {
        {3, SG_PATCH_GOTPCREL32, SG_VALUE_OPERAND, 1, -4, "R_X86_64_REX_GOTPCRELX", "_JIT_OPERAND1"},
        {9, SG_PATCH_GOTPCREL32, SG_VALUE_SYMBOL, 2, -4, "R_X86_64_GOTPCRELX", "vm_native"},
        {15, SG_PATCH_PCREL32, SG_VALUE_JUMP_TARGET, 0, -4, "R_X86_64_PLT32", "_JIT_JUMP_TARGET"},
        {22, SG_PATCH_PCREL32, SG_VALUE_DATA, 0, -4, "R_X86_64_PC32", ".rodata"},
    };
    gen_hole dholes1[] = {{8, SG_PATCH_ABS64, SG_VALUE_CODE, 0, 13, "R_X86_64_64", ".text"}};
    static const insn_spec insns1[] = {{7, "movq (%rip), %rax"}, {6, "callq *(%rip)"},
                                       {6, "je 0x13"}, {7, "leaq (%rip), %rcx"}};
    gen_stencil s1 = {.code = code1, .code_size = sizeof code1, .data = data1,
                     .data_size = sizeof data1, .data_align = 8, .code_holes = holes1,
                     .ncode_holes = 4, .data_holes = dholes1, .ndata_holes = 1,
                     .removed_jump = 5};
    set_insns(&s1, insns1, 4);
    write_seed(argv[1], 0, 4, &s1, deps);
    write_seed(argv[1], 1, 3, &s1, deps); /* symbol 2 of 3 */
    write_seed(argv[1], 2, 2, &s1, deps); /* symbol 2 of 2: refused */

    /* An op that is only its jump to the continuation: no code left. */
    gen_stencil s2 = {.code = code1, .code_size = 0, .data_align = 1, .removed_jump = 5};
    set_insns(&s2, NULL, 0);
    write_seed(argv[1], 3, 0, &s2, "");

    /* AArch64: ADRP/LDR of a GOT slot, a branch to the continuation kept. */
    static uint8_t code3[] = {0x08, 0, 0, 0x90, 0x08, 0x01, 0x40, 0xf9, 0x00, 0x01, 0x3f, 0xd6,
                              0, 0, 0, 0x14};
    gen_hole holes3[] = {
        {0, SG_PATCH_AARCH64_GOT_ADRP, SG_VALUE_SYMBOL, 0, 0, "R_AARCH64_ADR_GOT_PAGE", "vm_call"},
        {4, SG_PATCH_AARCH64_GOT_LO12, SG_VALUE_SYMBOL, 0, 0, "R_AARCH64_LD64_GOT_LO12_NC", "vm_call"},
        {12, SG_PATCH_AARCH64_BRANCH26, SG_VALUE_CONTINUE, 0, 0, "R_AARCH64_JUMP26", "_JIT_CONTINUE"},
    };
    static const insn_spec insns3[] = {{4, "adrp x8, 0x0"}, {4, "ldr x8, [x8]"}, {4, "blr x8"},
                                       {4, "b 0xc"}};
    gen_stencil s3 = {.code = code3, .code_size = sizeof code3, .data_align = 1,
                     .code_holes = holes3, .ncode_holes = 3, .entry = 0};
    set_insns(&s3, insns3, 4);
    write_seed(argv[1], 4, 1, &s3, deps);
    free(s1.insns);
    free(s1.insn_text);
    free(s2.insns);
    free(s2.insn_text);
    free(s3.insns);
    free(s3.insn_text);
    return 0;
}
