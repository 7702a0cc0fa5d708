/* fuzz_registry - the registry reader (tools/stack/registry_reader.c) over a
 * hostile address space: what another process's memory can hold is not ours
 * to trust. The input is the memory the reader may copy, then the addresses
 * to name:
 *     u32 nlookups, u64 lookups[nlookups], then regions: u64 addr, u32 len, bytes
 * (little-endian); the root is the first region's address. Reads outside
 * every region fail, as a copy of unmapped memory does. */
#include <stdint.h>
#include <string.h>

#include "registry_reader.h"

enum { MAX_REGIONS = 256, MAX_LOOKUPS = 64 };

typedef struct region {
    uint64_t addr;
    const uint8_t *bytes;
    size_t len;
} region;

typedef struct space {
    region r[MAX_REGIONS];
    size_t n;
} space;

static bool space_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
    const space *s = ctx;
    for (size_t i = 0; i < s->n; i++) {
        const region *r = &s->r[i];
        if (addr >= r->addr && addr - r->addr <= r->len && len <= r->len - (addr - r->addr)) {
            memcpy(buf, r->bytes + (addr - r->addr), len);
            return true;
        }
    }
    return false;
}

static uint64_t le(const uint8_t *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;)
        v = v << 8 | p[i];
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    size_t nlookups = le(data, 4), at = 4;
    if (nlookups > MAX_LOOKUPS || nlookups * 8 > size - at)
        return 0;
    const uint8_t *lookups = data + at;
    at += nlookups * 8;
    space s = {.n = 0};
    while (s.n < MAX_REGIONS && size - at >= 12) {
        region *r = &s.r[s.n++];
        r->addr = le(data + at, 8);
        r->len = le(data + at + 8, 4);
        at += 12;
        if (r->len > size - at)
            r->len = size - at;
        r->bytes = data + at;
        at += r->len;
    }
    if (!s.n)
        return 0;
    srr_reader *reader;
    char err[256];
    if (srr_open(space_read, &s, s.r[0].addr, &reader, err, sizeof err) != SRR_OK)
        return 0;
    for (int round = 0; round < 2; round++) { /* the second reuses the first's cache */
        srr_snapshot(reader);
        for (size_t i = 0; i < nlookups; i++) {
            srr_pc pc;
            if (srr_lookup(reader, le(lookups + 8 * i, 8), &pc) == SRR_OK && pc.kind == SRR_EXECUTOR)
                (void)(strlen(pc.op) + strlen(pc.executor));
        }
    }
    for (size_t i = 0; i < srr_runtime_count(reader); i++)
        (void)srr_runtime_rule(reader, i);
    srr_close(reader);
    return 0;
}
