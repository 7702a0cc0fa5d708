/* fp_chain.c - see fp_chain.h. Encodings from the Intel SDM (PUSH r32 50+rd,
 * MOV r/m32, r32 89 /r and r32, r/m32 8B /r, SUB r/m32, imm 83 /5 ib and
 * 81 /5 id). */
#include "fp_chain.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

enum { EAX, ECX, EDX, EBX, ESP, EBP, ESI, EDI }; /* the encoding's order, DWARF's too */

/* One prolog instruction at p (n bytes left): its size, or 0 when it is not
 * one. *push: the register pushed (or -1), *sub: bytes taken from esp, *set:
 * it is mov ebp, esp. */
static unsigned decode(const uint8_t *p, size_t n, int *push, uint32_t *sub, int *set)
{
    *push = -1, *sub = 0, *set = 0;
    if (n >= 1 && p[0] >= 0x50 && p[0] <= 0x57 && p[0] != 0x50 + ESP)
        return *push = p[0] - 0x50, 1;
    if (n >= 2 && ((p[0] == 0x89 && p[1] == 0xe5) || (p[0] == 0x8b && p[1] == 0xec)))
        return *set = 1, 2;
    if (n >= 3 && p[0] == 0x83 && p[1] == 0xec && p[2] < 0x80)
        return *sub = p[2], 3;
    if (n >= 6 && p[0] == 0x81 && p[1] == 0xec && p[5] < 0x80)
        return *sub = (uint32_t)load_le(p + 2, 4), 6;
    return 0;
}

int fpc_rows(const uint8_t *code, size_t size, uint64_t begin, uint64_t end, cfi_table *out,
             size_t *prolog_size, cfi_error *err)
{
    *out = (cfi_table){0};
    *prolog_size = 0;
    cfi_row *r = calloc(1, sizeof *r);
    if (!r)
        return cfi_fail(err, 0, "out of memory");
    /* At the entry: the return address just pushed. */
    r->cfa = (cfi_cfa_rule){.kind = CFI_CFA_REG_OFFSET, .reg = ESP, .offset = 4};
    r->regs[FPC_RA_COLUMN] = (cfi_reg_rule){.kind = CFI_REG_OFFSET, .offset = -4};
    if (cfi_table_push(out, r, begin, err) != 0) {
        free(r);
        return -1;
    }
    int64_t depth = 4; /* how far esp is below the CFA */
    size_t at = 0;
    unsigned k = 0;
    for (int push, set; at < size; k++) {
        uint32_t sub;
        unsigned len = decode(code + at, size - at, &push, &sub, &set);
        bool chain = k == 0 ? push == EBP : k == 1 ? set : len && !set && push != EBP;
        if (!chain && k < 2) {
            free(r);
            cfi_table_free(out);
            return cfi_fail(err, at, "the shim does not start with push ebp; mov ebp, esp "
                                     "(instruction %u of its prolog, byte 0x%zx): its frame is not "
                                     "on the ebp chain; compile it with -fno-omit-frame-pointer", k,
                            at);
        }
        if (!chain)
            break;
        depth += push >= 0 ? 4 : sub;
        if (push >= 0)
            r->regs[push] = (cfi_reg_rule){.kind = CFI_REG_OFFSET, .offset = -depth};
        if (set)
            r->cfa.reg = EBP;
        if (r->cfa.reg == ESP)
            r->cfa.offset = depth;
        at += len;
        if (begin + at >= end || depth > INT32_MAX ||
            cfi_table_push(out, r, begin + at, err) != 0) {
            if (begin + at >= end || depth > INT32_MAX)
                cfi_fail(err, at, "the prolog (%zu bytes) is not shorter than the function", at);
            free(r);
            cfi_table_free(out);
            return -1;
        }
    }
    if (out->count < 3) { /* the code ended inside push ebp; mov ebp, esp */
        free(r);
        cfi_table_free(out);
        return cfi_fail(err, at, "the shim ends before its prolog sets ebp");
    }
    out->rows[out->count - 1].end = end;
    *prolog_size = at;
    free(r);
    return 0;
}
