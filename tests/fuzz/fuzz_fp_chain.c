/* fuzz_fp_chain.c - libFuzzer target for generator/fp_chain.c.
 *
 * Input: the bytes of a 32-bit x86 function (a shim's code, or the prolog a
 * cache entry keeps), replayed as a function of size + 1 bytes. Besides "no
 * crash, no leak", the target checks the documented invariants and traps
 * when one breaks: an error carries a message and leaves an empty table; rows
 * tile the function from the entry state, the third on ebp, and the prolog
 * replayed alone gives the same rows (what a cached entry gets).
 */
#include "fp_chain.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check(int cond)
{
    if (!cond)
        __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cfi_table t = {0}, again = {0};
    cfi_error err;
    size_t prolog, prolog2;
    err.msg[0] = '\0';
    if (fpc_rows(data, size, 0, size + 1, &t, &prolog, &err) != 0) {
        check(err.msg[0] != '\0' && t.rows == NULL && t.count == 0);
        return 0;
    }
    check(t.count >= 3 && prolog <= size && t.rows[0].loc == 0 && t.rows[2].cfa.reg == 5);
    for (size_t i = 0; i < t.count; i++)
        check(t.rows[i].end > t.rows[i].loc && (i + 1 == t.count || t.rows[i].end ==
                                                                     t.rows[i + 1].loc));
    check(t.rows[t.count - 1].end == size + 1);
    check(fpc_rows(data, prolog, 0, size + 1, &again, &prolog2, &err) == 0 && prolog2 == prolog);
    check(again.count == t.count && !memcmp(again.rows, t.rows, t.count * sizeof *t.rows));
    cfi_table_free(&t);
    cfi_table_free(&again);
    return 0;
}
