/* fuzz_arm64_unwind.c - libFuzzer target for generator/arm64_unwind.c.
 *
 * Input: a packed .pdata word (the first 4 bytes, little-endian), then the
 * bytes of an .xdata-like section. The word is expanded, and each offset from
 * 4 to min(size, 20) is parsed as an .xdata record; every record that parses
 * (the expansion's too) is replayed over its own length and rewritten by
 * a64w_after_prolog. Besides "no crash, no leak", the target checks the
 * documented invariants and traps when one breaks: errors carry a message, a
 * failed replay leaves an empty table, rows tile the function from the entry
 * state, one row per prolog instruction, an expansion parses as the record
 * it claims to be, and the executors' record parses, has no length, starts
 * with end_c and, after it, replays to the original's rows.
 */
#include "arm64_unwind.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check(int cond)
{
    if (!cond)
        __builtin_trap();
}

static void check_rows(const cfi_table *t, uint64_t end)
{
    check(t->count >= 1);
    check(t->rows[0].cfa.kind == CFI_CFA_REG_OFFSET && t->rows[0].cfa.reg == 31 &&
          t->rows[0].cfa.offset == 0);
    uint64_t loc = 0;
    for (size_t i = 0; i < t->count; i++) {
        check(t->rows[i].loc == loc && t->rows[i].end > loc);
        check(t->rows[i].cfa.kind == CFI_CFA_REG_OFFSET);
        loc = i + 1 < t->count ? loc + 4 : t->rows[i].end;
    }
    check(loc == end);
}

static void format_rows(const cfi_table *t, strbuf *out)
{
    char row[2048];
    for (size_t i = 0; i < t->count; i++) {
        cfi_format_row(&t->rows[i], NULL, row, sizeof row);
        sb_printf(out, "%llu %s\n", (unsigned long long)t->rows[i].loc, row);
    }
}

/* The executors' record parses, has no length, starts with end_c, and when
 * the original replayed, the codes after end_c replay over its length to the
 * same rows. */
static void check_after_prolog(const a64w_info *info, const cfi_table *rows)
{
    strbuf sb = {0};
    cfi_error err = {0};
    if (a64w_after_prolog(info, &sb, &err) != 0) {
        check(err.msg[0] != '\0' && 4 * (size_t)info->code_words > 4 * 0xff - 2);
        sb_free(&sb);
        return;
    }
    a64w_info again;
    check(a64w_parse_xdata((const uint8_t *)sb.data, sb.len, 0, &again, &err) == 0);
    check(again.size == sb.len && again.function_words == 0 && again.single_epilog &&
          again.epilogs == 0 && again.codes[0] == 0xe5);
    size_t len = 4 * (size_t)again.code_words;
    uint8_t *codes = malloc(len);
    check(codes != NULL);
    memcpy(codes, again.codes + 1, len - 1);
    codes[len - 1] = 0xe3;
    a64w_info parent = {.function_words = info->function_words, .code_words = again.code_words,
                        .codes = codes, .size = len};
    cfi_table t = {0};
    uint64_t sign_at;
    int rc = a64w_rows(&parent, 0, 4 * (uint64_t)info->function_words, &t, &sign_at, &err);
    check(rc == 0 || rows == NULL);
    if (rows) {
        strbuf want = {0}, got = {0};
        format_rows(rows, &want);
        format_rows(&t, &got);
        check(want.len == got.len && memcmp(want.data, got.data, want.len) == 0);
        sb_free(&want);
        sb_free(&got);
    }
    cfi_table_free(&t);
    free(codes);
    sb_free(&sb);
}

static void replay(const a64w_info *info)
{
    cfi_table t = {0};
    cfi_error err;
    uint64_t sign_at;
    err.msg[0] = '\0';
    uint64_t end = 4 * (uint64_t)info->function_words;
    if (a64w_rows(info, 0, end, &t, &sign_at, &err) == 0) {
        check_rows(&t, end);
        check(sign_at == UINT64_MAX || (sign_at % 4 == 0 && sign_at < end));
    } else {
        check(err.msg[0] != '\0' && t.rows == NULL && t.count == 0);
    }
    check_after_prolog(info, t.count ? &t : NULL);
    cfi_table_free(&t);
}

static void one(const uint8_t *data, size_t size, size_t offset)
{
    a64w_info info;
    cfi_error err;
    err.msg[0] = '\0';
    if (a64w_parse_xdata(data, size, offset, &info, &err) != 0) {
        check(err.msg[0] != '\0');
        return;
    }
    check(info.code_words > 0 && info.size <= size - offset && info.codes > data + offset);
    replay(&info);
}

static void packed(uint32_t word)
{
    strbuf sb = {0};
    cfi_error err;
    err.msg[0] = '\0';
    if (a64w_expand_packed(word, &sb, &err) != 0) {
        check(err.msg[0] != '\0');
        sb_free(&sb);
        return;
    }
    a64w_info info;
    check(a64w_parse_xdata((const uint8_t *)sb.data, sb.len, 0, &info, &err) == 0);
    check(info.size == sb.len && info.single_epilog &&
          info.function_words == ((word >> 2) & 0x7ff));
    replay(&info);
    sb_free(&sb);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    packed((uint32_t)data[0] | (uint32_t)data[1] << 8 | (uint32_t)data[2] << 16 |
           (uint32_t)data[3] << 24);
    size_t last = size < 20 ? size : 20;
    for (size_t offset = 4; offset <= last; offset++)
        one(data, size, offset);
    return 0;
}
