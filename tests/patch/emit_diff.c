/* emit_diff.c - the emitters' half of the patching differentials against
 * lld-link (tests/integration/test_coff.py) and ld64.lld
 * (tests/integration/test_macho.py).
 *
 * Compiled by the test, for the build machine, against one generated header
 * (-DJIT_HEADER="jit_stencils-<triple>.h"): a header's stencils and emitters
 * are plain C, whatever machine runs them. Nothing emitted is executed; the
 * test compares the bytes with what the linker links.
 *
 *   emit_diff list
 *       one line per stencil: INDEX NAME CODE_SIZE DATA_SIZE FALLS_THROUGH
 *   emit_diff emit INDEX CODE_ADDR DATA_ADDR GOT_ADDR TARGET OP0 OP1 OP2 OP3 SYM...
 *       patches stencil INDEX as if its code ran at CODE_ADDR, its data at
 *       DATA_ADDR and its GOT at GOT_ADDR (hex), the next instruction right
 *       after its code, jumps to TARGET, with the operands and run-time symbol
 *       values given (hex, in the manifest's order). The GOT holds first one
 *       slot per run-time symbol, in the manifest's order (env->symbol_got),
 *       then the slots the emitter takes for other values (env->got_free).
 *       Prints "code HEX", "data HEX" and "got HEX" (the GOT from GOT_ADDR to
 *       the last slot taken), or "error HOLE" when a value does not fit
 *       (exit 1).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include JIT_HEADER

static uint64_t hex(const char *s)
{
    return strtoull(s, NULL, 16);
}

static void put_hex(const char *what, const uint8_t *p, size_t n)
{
    printf("%s ", what);
    for (size_t i = 0; i < n; i++)
        printf("%02x", p[i]);
    putchar('\n');
}

/* A branch out of reach would need the runtime's veneer: the test chooses
 * values in reach, so asking for one is a failure. */
static uint64_t no_veneer(void *ctx, uint64_t target)
{
    (void)ctx;
    (void)target;
    return 0;
}

static int emit(int argc, char **argv)
{
    if (argc < 11 + SG_SYM__COUNT) {
        fprintf(stderr, "emit_diff emit: want INDEX CODE DATA GOT TARGET OP0..OP3 and %d symbols\n",
                SG_SYM__COUNT);
        return 2;
    }
    size_t index = strtoul(argv[2], NULL, 10);
    if (index >= SG_OP__COUNT)
        return 2;
    const sg_stencil *st = &sg_stencils[index];
    uint64_t code_addr = hex(argv[3]), data_addr = hex(argv[4]), got_addr = hex(argv[5]);
    /* One block: code at its start, data and GOT where their addresses fall,
     * so that one delta takes all three to the addresses asked for. */
    if (data_addr < code_addr + st->code_size || data_addr - code_addr > (1u << 24) ||
        got_addr < data_addr + st->data_size || got_addr - code_addr > (1u << 24) ||
        got_addr % 8)
        return 2;
    uint64_t operand[SG_OPERANDS];
    const void *symbol[SG_SYM__COUNT + 1];
    uint64_t symbol_got[SG_SYM__COUNT + 1];
    for (int i = 0; i < SG_OPERANDS; i++)
        operand[i] = hex(argv[7 + i]);
    size_t data_span = (size_t)(data_addr - code_addr), got_span = (size_t)(got_addr - code_addr);
    /* The emitter takes a slot per GOT hole that is not a symbol's, at most. */
    size_t slots = SG_SYM__COUNT;
    for (size_t i = 0; i < st->code_hole_count + st->data_hole_count; i++) {
        const sg_hole *h = i < st->code_hole_count ? &st->code_holes[i]
                                                   : &st->data_holes[i - st->code_hole_count];
        slots += sg_patch_uses_got(h->patch) && h->value != SG_VALUE_SYMBOL;
    }
    size_t got_size = 8 * slots;
    uint8_t *block = calloc(got_span + got_size, 1);
    if (!block)
        return 2;
    uint8_t *code = block, *data = block + data_span, *got = block + got_span;
    for (int i = 0; i < SG_SYM__COUNT; i++) {
        uint64_t v = hex(argv[11 + i]);
        symbol[i] = (const void *)(uintptr_t)v;
        symbol_got[i] = got_addr + 8 * (uint64_t)i;
        memcpy(got + 8 * i, &v, 8);
    }
    if (st->data_size)
        memcpy(data, st->data, st->data_size);
    sg_emit_env env = {.delta = code_addr - (uintptr_t)code,
                       .target = hex(argv[6]),
                       .operand = operand,
                       .symbol = symbol,
                       .symbol_got = symbol_got,
                       .got_free = got + 8 * SG_SYM__COUNT,
                       .veneer = no_veneer};
    unsigned bad = st->emit ? st->emit(st->emit_case, code, data, &env) : 0;
    if (!st->emit)
        memcpy(code, st->code, st->code_size);
    if (bad)
        printf("error %u\n", bad);
    else {
        put_hex("code", code, st->code_size);
        put_hex("data", data, st->data_size);
        put_hex("got", got, (size_t)(env.got_free - got));
    }
    free(block);
    return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "list")) {
        for (size_t i = 0; i < SG_OP__COUNT; i++)
            printf("%zu %s %zu %zu %d\n", i, sg_stencils[i].name, sg_stencils[i].code_size,
                   sg_stencils[i].data_size, sg_stencils[i].falls_through);
        return 0;
    }
    if (argc >= 2 && !strcmp(argv[1], "emit"))
        return emit(argc, argv);
    fputs("usage: emit_diff list | emit INDEX CODE DATA GOT TARGET OP0 OP1 OP2 OP3 SYM...\n",
          stderr);
    return 2;
}
