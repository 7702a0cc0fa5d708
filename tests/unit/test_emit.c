/* test_emit - the generated emitters of a header against the runtime's
 * table-driven patcher, on random programs: the same status, the same error
 * message and, when both succeed, the same bytes (code, veneers, data, GOT);
 * neither may write past the end emit_plan laid out.
 *
 * Compiled against whatever jit_stencils.h is on the include path (the bundled
 * stencils in the build; relocation fixtures in tests/integration/test_emit.py,
 * AArch64 ones under qemu). Usage: test_emit [PROGRAMS [SEED]].
 * Prints one line per case and ends with "N passed, N failed". */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/mman.h>

#include "internal.h"
#include "jit_stencils.h"

/* The header's ops and one of ours, "end": a return, with no holes and no
 * emitter, so that every program can end (fixture ops all continue) and
 * programs mix generated and table-driven stencils. */
static const sr_stencil_set header_set = SR_STENCIL_SET_FROM_HEADER;
#if defined(__aarch64__)
static const uint8_t end_code[4] = {0xc0, 0x03, 0x5f, 0xd6}; /* ret */
#else
static const uint8_t end_code[1] = {0xc3}; /* ret */
#endif
static sg_stencil stencils[SG_OP__COUNT + 1];
static size_t cold_sizes[SG_OP__COUNT + 1]; /* the header's, and the end op's 0 */
static sr_stencil_set set;
static int passed, failed;

static void result(bool ok, const char *name, const char *detail)
{
    printf("%s %s%s%s\n", ok ? "ok  " : "FAIL", name, detail[0] ? ": " : "", detail);
    ok ? passed++ : failed++;
}

static uint64_t rng = 0x9e3779b97f4a7c15u;

static uint64_t next_random(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static uint64_t below(uint64_t n)
{
    return n ? next_random() % n : 0;
}

/* Values that straddle every hole's limits: small and huge numbers, and
 * addresses near the executor (within +-1 KiB, 1 MiB, 128 MiB, 4 GiB). */
static uint64_t interesting_value(uint64_t base)
{
    static const uint64_t fixed[] = {0, 1, 8, 0xfff, 0x1000, 0xffff, 0x10000, 0x7fffffff,
                                     0x80000000, 0xffffffff, 0x100000000, 0xffffffff80000000,
                                     0x7fffffffffffffff, 0x8000000000000000, UINT64_MAX};
    static const uint64_t spans[] = {1 << 10, 1 << 20, 1 << 27, (uint64_t)1 << 32};
    switch (below(4)) {
    case 0: return fixed[below(sizeof fixed / sizeof *fixed)];
    case 1: return next_random();
    case 2: return next_random() & 0xffff;
    default: {
        uint64_t span = spans[below(4)];
        uint64_t v = base + below(2 * span) - span;
        return below(2) ? v & ~(uint64_t)15 : v; /* aligned or not (AArch64 LO12) */
    }
    }
}

enum { MAX_N = 48, BUFFER = 1 << 20 };

typedef struct trial {
    sr_instr code[MAX_N];
    size_t n;
    const void *symbols[SG_SYM__COUNT + 1];
} trial;

/* Ops that end an executor (neither fall through nor continue). */
static size_t enders(const sr_emitter *em, uint32_t *out)
{
    size_t k = 0;
    for (uint32_t op = 0; op < set.count; op++)
        if (!em->ops[op].continues)
            out[k++] = op;
    return k;
}

static void random_trial(trial *t, uint8_t *buf, const uint32_t *end_ops, size_t nend,
                         bool null_symbols)
{
    t->n = 1 + below(below(2) ? 4 : MAX_N); /* short ones: more of them fit entirely */
    for (size_t i = 0; i < t->n; i++) {
        sr_instr *in = &t->code[i];
        in->op = (uint32_t)below(set.count);
        in->target = (uint32_t)below(t->n);
        for (size_t k = 0; k < SG_OPERANDS; k++)
            in->operand[k] = interesting_value((uintptr_t)buf);
    }
    t->code[t->n - 1].op = end_ops[below(nend)];
    uint64_t regime = below(3); /* symbols near the code, in the low 2 GiB, or anywhere */
    for (size_t k = 0; k < SG_SYM__COUNT; k++) {
        uint64_t v = regime == 0   ? (uintptr_t)buf + below(1 << 20)
                     : regime == 1 ? 0x1000 + below(0x7fff0000)
                                   : interesting_value((uintptr_t)buf);
        t->symbols[k] = null_symbols && !below(4) ? NULL : (const void *)(uintptr_t)v;
    }
}

typedef struct outcome {
    sr_status st;
    char message[256];
    bool overran; /* wrote past the layout's end (emit_plan's total), even on failure */
} outcome;

/* Emit with the header's emitters or the hole tables, written to buf for code
 * that runs at `run` (PC-relative holes depend on where; buf == run but for
 * JIT memory mapped twice). */
static outcome emit_at(const trial *t, bool generated, uint8_t *buf, const uint8_t *run,
                       size_t *total)
{
    outcome o = {SR_OK, "", false};
    sr_emitter em;
    uint32_t offsets[MAX_N + 1];
    sr_layout l;
    memset(buf, 0xa5, BUFFER);
    o.st = emit_init(&em, &set, t->symbols, generated);
    if (o.st == SR_OK) {
        o.st = emit_plan(&em, t->code, t->n, offsets, &l);
        if (o.st == SR_OK && l.total > BUFFER)
            o.st = SR_ENOMEM;
        if (o.st == SR_OK) {
            o.st = emit_write(&em, t->code, t->n, offsets, &l, buf,
                              (uintptr_t)run - (uintptr_t)buf);
            for (size_t k = l.total; k < BUFFER && k < l.total + 64; k++)
                o.overran |= buf[k] != 0xa5;
        }
        emit_fini(&em);
    }
    if (o.st != SR_OK)
        snprintf(o.message, sizeof o.message, "%s", sr_last_error());
    *total = o.st == SR_OK ? l.total : 0;
    return o;
}

static void describe(char *out, size_t size, const trial *t, size_t at)
{
    int k = snprintf(out, size, "[");
    for (size_t i = 0; i < t->n && k > 0 && (size_t)k < size; i++)
        k += snprintf(out + k, size - (size_t)k, "%s%s", i ? " " : "",
                      set.stencils[t->code[i].op].name);
    if (k > 0 && (size_t)k < size)
        snprintf(out + k, size - (size_t)k, "], first difference at +0x%zx", at);
}

/* A buffer in the low 2 GiB, where absolute 32-bit holes can hold code and
 * data addresses (-fno-pic, -mcmodel=small); NULL if the kernel will not. */
static uint8_t *low_buffer(void)
{
#if defined(MAP_32BIT)
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT;
#else
    int flags = MAP_PRIVATE | MAP_ANONYMOUS;
#endif
    void *p = mmap((void *)(uintptr_t)0x10000000, BUFFER, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    if ((uintptr_t)p + BUFFER > 0x80000000u) {
        munmap(p, BUFFER);
        return NULL;
    }
    return p;
}

/* Both ways over `programs` random programs, half of them in low memory;
 * with null_symbols some symbols have no value, so refusals must happen too.
 * One of the two ways, in turn, writes elsewhere what is to run at `a`, as
 * through the writable view of JIT memory mapped twice: the bytes must not
 * depend on where they are written. */
static void differential(size_t programs, bool null_symbols, const char *name)
{
    uint8_t *high = aligned_alloc(4096, BUFFER), *low = low_buffer(), *saved = malloc(BUFFER);
    uint8_t *elsewhere = malloc(BUFFER);
    uint8_t *a = high;
    const void *any[SG_SYM__COUNT + 1] = {high};
    sr_emitter probe;
    uint32_t end_ops[SG_OP__COUNT + 2];
    if (!high || !saved || !elsewhere || emit_init(&probe, &set, any, true) != SR_OK) {
        result(false, name, "out of memory");
        return;
    }
    size_t nend = enders(&probe, end_ops);
    emit_fini(&probe);
    size_t ok = 0, errors = 0, mismatches = 0;
    bool op_emitted[SG_OP__COUNT + 2] = {false};
    char detail[512] = "";
    for (size_t p = 0; p < programs && nend; p++) {
        trial t;
        a = low && p % 2 ? low : high;
        random_trial(&t, a, end_ops, nend, null_symbols);
        size_t ta, tb;
        bool generated_elsewhere = p % 4 < 2;
        outcome x = emit_at(&t, true, generated_elsewhere ? elsewhere : a, a, &ta);
        memcpy(saved, generated_elsewhere ? elsewhere : a, BUFFER);
        uint8_t *table_buf = generated_elsewhere ? a : elsewhere;
        outcome y = emit_at(&t, false, table_buf, a, &tb);
        size_t at = 0;
        while (at < ta && saved[at] == table_buf[at])
            at++;
        if (x.overran || y.overran) {
            if (!mismatches++)
                printf("     the %s way wrote past the executor's end\n",
                       x.overran ? "generated" : "table");
            continue;
        }
        if (x.st != y.st || strcmp(x.message, y.message) || ta != tb || at < ta) {
            if (!mismatches++) { /* the first one, in full */
                describe(detail, sizeof detail, &t, at);
                printf("     %s\n     generated: %d %s\n     table:     %d %s\n", detail, x.st,
                       x.message, y.st, y.message);
            }
            continue;
        }
        if (x.st == SR_OK) {
            ok++;
            for (size_t i = 0; i < t.n; i++)
                op_emitted[t.code[i].op] = true;
        } else {
            errors++;
        }
    }
    size_t never = 0;
    for (size_t op = 0; op < set.count; op++)
        never += !op_emitted[op];
    bool covered = null_symbols ? errors > 0 : ok > 0 && never == 0;
    if (mismatches)
        snprintf(detail, sizeof detail, "%zu of %zu programs differ", mismatches, programs);
    else
        snprintf(detail, sizeof detail, "%s%zu programs agree (%zu emitted, %zu refused, %zu "
                 "ops never in an emitted one)", covered ? "" : "too little covered: ",
                 programs, ok, errors, never);
    result(!mismatches && covered, name, detail);
    free(high);
    free(saved);
    free(elsewhere);
    if (low)
        munmap(low, BUFFER);
}

/* With every symbol set, each op of the header is written by its emitter. */
static void generated_in_use(void)
{
    const void *symbols[SG_SYM__COUNT + 1];
    for (size_t k = 0; k < SG_SYM__COUNT + 1; k++)
        symbols[k] = (const void *)(uintptr_t)0x1000;
    sr_emitter em;
    size_t table = 0;
    if (emit_init(&em, &header_set, symbols, true) == SR_OK) {
        for (size_t op = 0; op < header_set.count; op++)
            table += !em.ops[op].generated;
        emit_fini(&em);
    }
    char detail[96];
    snprintf(detail, sizeof detail, "%zu of %zu ops would be patched from the hole table",
             table, header_set.count);
    result(table == 0, "every op has a trusted generated emitter", table ? detail : "");
}

int main(int argc, char **argv)
{
    size_t programs = argc > 1 ? strtoull(argv[1], NULL, 10) : 3000;
    if (argc > 2)
        rng = strtoull(argv[2], NULL, 0) | 1;
    set = header_set;
    memcpy(stencils, header_set.stencils, sizeof sg_stencils);
    stencils[SG_OP__COUNT] = (sg_stencil){"end", end_code, sizeof end_code, NULL, 0, 1,
                                          NULL, 0, NULL, 0, 0, NULL, 0};
    memcpy(cold_sizes, sg_cold_sizes, sizeof sg_cold_sizes);
    set.stencils = stencils;
    set.cold_sizes = cold_sizes;
    set.count = SG_OP__COUNT + 1;
    generated_in_use();
    differential(programs, false, "generated = table, random programs");
    differential(programs / 4, true, "generated = table, some symbols missing");
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
