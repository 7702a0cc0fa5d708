/* make_registry_seeds DIR - seeds for fuzz_registry: a real runtime's
 * registry (the bundled stencils; executors emitted, one freed and its slot
 * reused), recorded as the reader copies it, with the addresses to name:
 * every instruction of every executor, the shim, a C function. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jit_stencils.h"
#include "registry_reader.h"
#include "stencilrt.h"
#include "stencilrt_registry.h"

extern sr_registry_root stencilrt_registry;

static const sr_stencil_set set = SR_STENCIL_SET_FROM_HEADER;
static void no_helper(void) {}

typedef struct recording {
    FILE *f;
} recording;

static void put_le(FILE *f, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        fputc((int)(v >> (8 * i) & 0xff), f);
}

/* Copies like memcpy and writes what it copied as a region of the seed. */
static bool record_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
    recording *rec = ctx;
    memcpy(buf, (const void *)(uintptr_t)addr, len);
    put_le(rec->f, addr, 8);
    put_le(rec->f, len, 4);
    fwrite(buf, 1, len, rec->f);
    return true;
}

static void write_seed(const char *dir, int n, sr_runtime *rt, sr_executor *const *ex, size_t nex)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/registry-%d", dir, n);
    recording rec = {fopen(path, "wb")};
    if (!rec.f)
        exit(1);
    uint64_t lookups[64];
    size_t nl = 0;
    lookups[nl++] = (uintptr_t)sr_shim_entry(rt);
    lookups[nl++] = (uintptr_t)no_helper;
    for (size_t e = 0; e < nex; e++)
        for (size_t i = 0; i < 3 && nl < 64; i++)
            lookups[nl++] = (uintptr_t)sr_executor_instr(ex[e], i);
    put_le(rec.f, nl, 4);
    for (size_t i = 0; i < nl; i++)
        put_le(rec.f, lookups[i], 8);
    srr_reader *r;
    char err[256];
    if (srr_open(record_read, &rec, (uintptr_t)&stencilrt_registry, &r, err, sizeof err) != SRR_OK) {
        fprintf(stderr, "make_registry_seeds: %s\n", err);
        exit(1);
    }
    srr_snapshot(r);
    for (size_t i = 0; i < nl; i++) {
        srr_pc pc;
        srr_lookup(r, lookups[i], &pc);
    }
    srr_close(r);
    fclose(rec.f);
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    const void *symbols[SG_SYM__COUNT + 1];
    for (size_t i = 0; i < SG_SYM__COUNT; i++)
        symbols[i] = (const void *)no_helper;
    static const sr_instr code[] = {{SG_OP_push, 0, {41, 0, 0, 0}}, {SG_OP_addi, 0, {1, 0, 0, 0}},
                                    {SG_OP_ret, 0, {0, 0, 0, 0}}};
    sr_runtime *rt;
    sr_executor *ex[8];
    if (sr_runtime_create(&set, symbols, NULL, &rt) != SR_OK)
        return 1;
    for (size_t i = 0; i < 8; i++)
        if (sr_emit(rt, code, 3, i % 2 ? "odd" : "even", &ex[i]) != SR_OK)
            return 1;
    write_seed(argv[1], 0, rt, ex, 8);
    sr_executor_free(ex[3]);
    write_seed(argv[1], 1, rt, ex, 3);
    if (sr_emit(rt, code, 3, "again", &ex[3]) != SR_OK)
        return 1;
    write_seed(argv[1], 2, rt, ex, 8);
    sr_runtime_destroy(rt);
    return 0;
}
