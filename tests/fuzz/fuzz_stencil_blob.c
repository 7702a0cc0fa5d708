/* fuzz_stencil_blob.c - libFuzzer target for generator/stencil_blob.c.
 *
 * Input: one selector byte (the manifest's number of run-time symbols, 0-7),
 * then a stencil blob as stored in the cache (without the cache's trailer).
 * Blobs are decoded under FUZZ_CONTEXT, the context the seeds were written
 * with. Besides "no crash", the target traps when an accepted blob breaks what
 * the writer relies on (kinds and indices in range, holes inside and sorted,
 * instructions tiling the code, texts terminated) or does not encode back to
 * exactly the input: the decoder accepts only what the encoder writes.
 */
#include "stencil_blob.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The seeds' context, as the generator's is a digest. */
static const digest fuzz_context = {{0x5e, 0xed, 0xc0, 0xde, 0x5e, 0xed, 0xc0, 0xde}};
#define FUZZ_CONTEXT (&fuzz_context)

static void check(int cond)
{
    if (!cond)
        __builtin_trap();
}

static void check_holes(const gen_hole *h, size_t n, size_t limit, size_t nsymbols)
{
    for (size_t i = 0; i < n; i++) {
        check(h[i].patch < SG_PATCH__COUNT && h[i].value < SG_VALUE__COUNT);
        check(h[i].offset < limit && (i == 0 || h[i - 1].offset <= h[i].offset));
        if (h[i].value == SG_VALUE_SYMBOL)
            check(h[i].index < nsymbols);
        else if (h[i].value == SG_VALUE_OPERAND)
            check(h[i].index < SG_OPERANDS);
        check(memchr(h[i].reloc, '\0', sizeof h[i].reloc) != NULL);
        check(memchr(h[i].symbol, '\0', sizeof h[i].symbol) != NULL);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t nsymbols = data[0] & 7;
    gen_stencil s = {0};
    char *deps = NULL;
    char err[256];
    if (!stencil_blob_decode(data + 1, size - 1, FUZZ_CONTEXT, nsymbols, &s, &deps, err,
                              sizeof err)) {
        check(err[0] != '\0');
        check(s.code == NULL && s.insns == NULL && deps == NULL);
        return 0;
    }
    check(s.entry <= s.code_size && s.data_align && !(s.data_align & (s.data_align - 1)));
    check_holes(s.code_holes, s.ncode_holes, s.code_size, nsymbols);
    check_holes(s.data_holes, s.ndata_holes, s.data_size, nsymbols);
    size_t pc = 0;
    for (size_t i = 0; i < s.ninsns; i++) {
        const gen_insn *in = &s.insns[i];
        check(in->offset == pc && in->size > 0 && in->decoded && !in->writes_fp);
        check(in->text < s.insn_text_size);
        check(memchr(s.insn_text + in->text, '\0', s.insn_text_size - in->text) != NULL);
        pc += in->size;
    }
    check(pc == s.code_size);
    strbuf again = {0};
    stencil_blob_encode(&again, &s, deps, FUZZ_CONTEXT);
    check(again.len == size - 1 && memcmp(again.data, data + 1, size - 1) == 0);
    sb_free(&again);
    free(deps);
    free(s.code);
    free(s.data);
    free(s.code_holes);
    free(s.data_holes);
    free(s.insns);
    free(s.insn_text);
    return 0;
}
