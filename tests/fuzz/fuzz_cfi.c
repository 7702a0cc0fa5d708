/* fuzz_cfi.c - libFuzzer target for generator/cfi.c.
 *
 * Input: one selector byte, then the .eh_frame bytes.  Selector bit 0 picks the
 * address size (4 or 8), bits 1-2 the section address (so pcrel decoding and
 * 32-bit wrapping get exercised), bits 3-7 an extra offset handed straight to
 * cfi_parse_cie.  Besides "no crash", the target checks the documented
 * invariants and traps when one breaks: errors carry a message, a failed
 * cfi_run leaves an empty table, rows tile [pc_begin, pc_begin + pc_range).
 */
#include "cfi.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *name_reg(uint32_t reg)
{
    static const char *const names[] = { "rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp" };
    return reg < 8 ? names[reg] : NULL;
}

static void check(int cond)
{
    if (!cond)
        __builtin_trap();
}

static void check_rows(const cfi_fde *fde, const cfi_table *t)
{
    char buf[256];
    uint64_t loc = fde->pc_begin;
    for (size_t i = 0; i < t->count; i++) {
        const cfi_row *row = &t->rows[i];
        check(row->loc == loc && row->end > row->loc);
        loc = row->end;
        size_t n = cfi_format_row(row, (i & 1) ? name_reg : NULL, buf, sizeof buf);
        check(strlen(buf) == (n < sizeof buf ? n : sizeof buf - 1));
        check(cfi_row_at(t, row->loc) == row && cfi_row_at(t, row->end - 1) == row);
    }
    check(t->count == 0 || loc == fde->pc_begin + fde->pc_range);
    check(cfi_row_at(t, fde->pc_begin - 1) == NULL || fde->pc_begin == 0);
    check(cfi_row_at(t, fde->pc_begin + fde->pc_range) == NULL);
    cfi_row_at(t, fde->pc_begin + fde->pc_range / 2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint64_t addrs[] = { 0, 0x1000, 0x400000, 0xffffffffffff0000u };
    if (size < 1)
        return 0;
    cfi_section sec = {
        .data = data + 1,
        .size = size - 1,
        .addr = addrs[(data[0] >> 1) & 3],
        .addr_size = (data[0] & 1) ? 4 : 8,
    };
    cfi_error err;
    cfi_cie cie;
    cfi_fde fde;
    size_t cursor = 0;
    /* Each successful step moves the cursor forward, so this terminates; the
     * bound is a second line of defence. */
    for (size_t steps = 0; steps <= sec.size; steps++) {
        size_t before = cursor;
        err.msg[0] = '\0';
        int k = cfi_next_fde(&sec, &cursor, &cie, &fde, &err);
        if (k != 1) {
            check(k == 0 || err.msg[0] != '\0');
            break;
        }
        check(cursor >= before + 4 && cursor <= sec.size);
        cfi_table t = { 0 };
        err.msg[0] = '\0';
        if (cfi_run(&sec, &cie, &fde, &t, &err) == 0)
            check_rows(&fde, &t);
        else
            check(err.msg[0] != '\0' && t.rows == NULL && t.count == 0);
        cfi_table_free(&t);
    }
    size_t off = data[0] >> 3;
    if (cfi_parse_cie(&sec, off, &cie, &err) != 0)
        check(err.msg[0] != '\0');
    return 0;
}
