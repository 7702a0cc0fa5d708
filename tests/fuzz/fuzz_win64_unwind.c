/* fuzz_win64_unwind.c - libFuzzer target for generator/win64_unwind.c.
 *
 * Input: the bytes of an .xdata-like section. Each offset from 0 to
 * min(size, 16) is parsed as an UNWIND_INFO; one that parses is replayed as
 * a 256-byte function (longer than any prolog, whose size is one byte) and
 * rewritten by w64_after_prolog. Besides "no crash, no leak", the target
 * checks the documented invariants and traps when one breaks: errors carry
 * a message, a failed replay leaves an empty table, rows tile [0, 256) from
 * the entry state, and the after-the-prolog UNWIND_INFO is as long as the
 * original and replays to one row holding the original's final state.
 */
#include "win64_unwind.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { FUNCTION_SIZE = 256 };

static void check(int cond)
{
    if (!cond)
        __builtin_trap();
}

static void check_rows(const cfi_table *t)
{
    check(t->count >= 1);
    uint64_t loc = 0;
    for (size_t i = 0; i < t->count; i++) {
        check(t->rows[i].loc == loc && t->rows[i].end > loc);
        check(t->rows[i].cfa.kind == CFI_CFA_REG_OFFSET);
        loc = t->rows[i].end;
    }
    check(loc == FUNCTION_SIZE);
}

/* The after-the-prolog UNWIND_INFO: same header but for the prolog size,
 * and (when the original replayed) one row with the original's last state. */
static void check_after_prolog(const w64_info *info, const cfi_table *rows)
{
    strbuf sb = {0};
    w64_after_prolog(info, &sb);
    check(sb.len == info->size);
    w64_info again;
    cfi_error err = {0};
    check(w64_parse_info((const uint8_t *)sb.data, sb.len, 0, &again, &err) == 0);
    check(again.prolog_size == 0 && again.nslots == info->nslots &&
          again.frame_reg == info->frame_reg && again.frame_offset == info->frame_offset);
    cfi_table t = {0};
    int rc = w64_rows(&again, 0, FUNCTION_SIZE, &t, &err);
    if (rows) {
        char want[2048], got[2048];
        check(rc == 0 && t.count == 1);
        cfi_format_row(&rows->rows[rows->count - 1], NULL, want, sizeof want);
        cfi_format_row(&t.rows[0], NULL, got, sizeof got);
        check(strcmp(want, got) == 0);
    }
    cfi_table_free(&t);
    sb_free(&sb);
}

static void one(const uint8_t *data, size_t size, size_t offset)
{
    w64_info info;
    cfi_error err;
    err.msg[0] = '\0';
    if (w64_parse_info(data, size, offset, &info, &err) != 0) {
        check(err.msg[0] != '\0');
        return;
    }
    check(info.version == 1 && info.flags == 0 && info.slots == data + offset + 4);
    check(info.size == 4 + 2 * (size_t)((info.nslots + 1) & ~1) && info.size <= size - offset);
    cfi_table t = {0};
    err.msg[0] = '\0';
    int rc = w64_rows(&info, 0, FUNCTION_SIZE, &t, &err);
    if (rc == 0)
        check_rows(&t);
    else
        check(err.msg[0] != '\0' && t.rows == NULL && t.count == 0);
    check_after_prolog(&info, rc == 0 ? &t : NULL);
    cfi_table_free(&t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t last = size < 16 ? size : 16;
    for (size_t offset = 0; offset <= last; offset++)
        one(data, size, offset);
    return 0;
}
