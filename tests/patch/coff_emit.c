/* coff_emit.c - the emitters' half of the COFF patching differential
 * (tests/integration/test_coff.py).
 *
 * Compiled by the test, for the build machine, against one generated
 * x86_64-w64-windows-gnu header (-DJIT_HEADER="..."): a Windows header's
 * stencils and emitters are plain C, whatever machine runs them. Nothing
 * emitted is executed; the test compares the bytes with what lld-link links.
 *
 *   coff_emit list
 *       one line per stencil: INDEX NAME CODE_SIZE DATA_SIZE FALLS_THROUGH
 *   coff_emit emit INDEX CODE_ADDR DATA_ADDR TARGET OP0 OP1 OP2 OP3 SYM...
 *       patches stencil INDEX as if its code ran at CODE_ADDR and its data at
 *       DATA_ADDR (hex), the next instruction right after its code, jumps to
 *       TARGET, with the operands and run-time symbol values given (hex, in
 *       the manifest's order); prints "code HEX" and "data HEX", or
 *       "error HOLE" when a value does not fit (exit 1).
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
    if (argc < 10 + SG_SYM__COUNT) {
        fprintf(stderr, "coff_emit emit: want INDEX CODE DATA TARGET OP0..OP3 and %d symbols\n",
                SG_SYM__COUNT);
        return 2;
    }
    size_t index = strtoul(argv[2], NULL, 10);
    if (index >= SG_OP__COUNT)
        return 2;
    const sg_stencil *st = &sg_stencils[index];
    uint64_t code_addr = hex(argv[3]), data_addr = hex(argv[4]);
    if (data_addr < code_addr + st->code_size || data_addr - code_addr > (1u << 24))
        return 2;
    uint64_t operand[SG_OPERANDS];
    const void *symbol[SG_SYM__COUNT + 1];
    for (int i = 0; i < SG_OPERANDS; i++)
        operand[i] = hex(argv[6 + i]);
    for (int i = 0; i < SG_SYM__COUNT; i++)
        symbol[i] = (const void *)(uintptr_t)hex(argv[10 + i]);
    /* One block: code at its start, data where DATA_ADDR falls, so that one
     * delta takes both to the addresses asked for. */
    size_t span = (size_t)(data_addr - code_addr);
    uint8_t *block = calloc(span + st->data_size + 1, 1);
    if (!block)
        return 2;
    uint8_t *code = block, *data = block + span;
    if (st->data_size)
        memcpy(data, st->data, st->data_size);
    sg_emit_env env = {.delta = code_addr - (uintptr_t)code,
                       .target = hex(argv[5]),
                       .operand = operand,
                       .symbol = symbol,
                       .veneer = no_veneer};
    unsigned bad = st->emit ? st->emit(code, data, &env) : 0;
    if (!st->emit)
        memcpy(code, st->code, st->code_size);
    if (bad)
        printf("error %u\n", bad);
    else {
        put_hex("code", code, st->code_size);
        put_hex("data", data, st->data_size);
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
    fputs("usage: coff_emit list | emit INDEX CODE DATA TARGET OP0 OP1 OP2 OP3 SYM...\n", stderr);
    return 2;
}
