/* registry_reader.c - the registry read by the rules of stencilrt_registry.h:
 * fields located through the root's field table, slots kept only when their
 * two sequence counters agree and are even, executor details cached by
 * generation and trusted only while that generation is live. */
#include "registry_reader.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stencilrt_registry.h"

/* Bounds on what a damaged or hostile registry can make us read or loop on. */
enum {
    MAX_RUNTIMES = 256,
    MAX_BLOCKS = 1 << 16,
    MAX_RETRIES = 8,       /* re-reads of a block, or of the runtime list, per snapshot */
    MAX_NAME = 4096,       /* bytes of an executor name kept */
    MAX_COUNT = 1 << 24,   /* instructions of one executor */
    MAX_OPS = 1 << 16,     /* op names of one runtime */
    MAX_OP_NAME = 256,
    MAX_FIELDS = 4096,
    FIELD_IDS = 64,        /* field ids this reader knows are below this */
};

typedef struct field_loc {
    uint16_t offset, size;
} field_loc;

/* Every field this reader uses and the size it reads it as (0: checked apart);
 * an optional one may be missing (written by an older runtime). */
static const struct wanted_field {
    uint16_t type, id, size;
    const char *name;
    bool optional;
} wanted[] = {
    {SR_REGISTRY_T_ROOT, SR_REGISTRY_F_SEQ, 8, "root.seq", false},
    {SR_REGISTRY_T_ROOT, SR_REGISTRY_F_RUNTIMES, 8, "root.runtimes", false},
    {SR_REGISTRY_T_RUNTIME, SR_REGISTRY_F_RT_NEXT, 8, "runtime.next", false},
    {SR_REGISTRY_T_RUNTIME, SR_REGISTRY_F_RT_ELF_MACHINE, 4, "runtime.elf_machine", false},
    {SR_REGISTRY_T_RUNTIME, SR_REGISTRY_F_RT_CFA_REGISTER, 4, "runtime.cfa_register", false},
    {SR_REGISTRY_T_RUNTIME, SR_REGISTRY_F_RT_CFA_OFFSET, 8, "runtime.cfa_offset", false},
    {SR_REGISTRY_T_RUNTIME, SR_REGISTRY_F_RT_FP_REGISTER, 4, "runtime.fp_register", false},
    {SR_REGISTRY_T_RUNTIME, SR_REGISTRY_F_RT_FP_OFFSET, 8, "runtime.fp_offset", false},
    {SR_REGISTRY_T_RUNTIME, SR_REGISTRY_F_RT_RA_OFFSET, 8, "runtime.ra_offset", false},
    {SR_REGISTRY_T_RUNTIME, SR_REGISTRY_F_RT_RA_SIGNED, 4, "runtime.ra_signed", false},
    {SR_REGISTRY_T_RUNTIME, SR_REGISTRY_F_RT_SHIM_START, 8, "runtime.shim_start", false},
    {SR_REGISTRY_T_RUNTIME, SR_REGISTRY_F_RT_SHIM_SIZE, 8, "runtime.shim_size", false},
    {SR_REGISTRY_T_RUNTIME, SR_REGISTRY_F_RT_SHIM_RULE_START, 8, "runtime.shim_rule_start", false},
    {SR_REGISTRY_T_RUNTIME, SR_REGISTRY_F_RT_SHIM_RULE_END, 8, "runtime.shim_rule_end", false},
    {SR_REGISTRY_T_RUNTIME, SR_REGISTRY_F_RT_OP_NAMES, 8, "runtime.op_names", false},
    {SR_REGISTRY_T_RUNTIME, SR_REGISTRY_F_RT_OP_COUNT, 8, "runtime.op_count", false},
    {SR_REGISTRY_T_RUNTIME, SR_REGISTRY_F_RT_BLOCKS, 8, "runtime.blocks", false},
    {SR_REGISTRY_T_RUNTIME, SR_REGISTRY_F_RT_BLOCK_COUNT, 8, "runtime.block_count", false},
    {SR_REGISTRY_T_RUNTIME, SR_REGISTRY_F_RT_BLOCK_MAX, 8, "runtime.block_max", false},
    {SR_REGISTRY_T_RUNTIME, SR_REGISTRY_F_RT_COLD_SIZES, 8, "runtime.cold_sizes", true},
    {SR_REGISTRY_T_BLOCK, SR_REGISTRY_F_BLOCK_SEQ, 0, "block.seq", false},
    {SR_REGISTRY_T_BLOCK, SR_REGISTRY_F_BLOCK_SLOT, 0, "block.slot", false},
    {SR_REGISTRY_T_SLOT, SR_REGISTRY_F_SLOT_GENERATION, 8, "slot.generation", false},
    {SR_REGISTRY_T_SLOT, SR_REGISTRY_F_SLOT_CODE_START, 8, "slot.code_start", false},
    {SR_REGISTRY_T_SLOT, SR_REGISTRY_F_SLOT_CODE_SIZE, 8, "slot.code_size", false},
    {SR_REGISTRY_T_SLOT, SR_REGISTRY_F_SLOT_NAME, 8, "slot.name", false},
    {SR_REGISTRY_T_SLOT, SR_REGISTRY_F_SLOT_NAME_LEN, 8, "slot.name_len", false},
    {SR_REGISTRY_T_SLOT, SR_REGISTRY_F_SLOT_COUNT, 8, "slot.count", false},
    {SR_REGISTRY_T_SLOT, SR_REGISTRY_F_SLOT_OFFSETS, 8, "slot.offsets", false},
    {SR_REGISTRY_T_SLOT, SR_REGISTRY_F_SLOT_OPS, 8, "slot.ops", false},
};

/* One runtime as last read, with its op names (read once per op_names array). */
typedef struct rt_snap {
    uint64_t addr;
    srr_rule rule;
    uint64_t op_names_addr, op_count, blocks, block_count, cold_sizes_addr;
    char **op_names;
    size_t op_names_len;
    uint64_t *cold_sizes; /* op_count entries, read with op_names; NULL: none */
} rt_snap;

/* One live slot of the snapshot. */
/* One live slot of the snapshot: the copy of its fields, and where it is. */
typedef struct entry {
    uint64_t start, size, generation;
    uint64_t name, name_len, count, offsets, ops;
    uint64_t slot_addr, seq_addr;
    size_t rt;
} entry;

/* An executor's name and instruction map, valid while its generation lives. */
typedef struct detail {
    uint64_t generation;
    char *name;
    uint64_t count;
    uint32_t *offsets; /* count + 1 */
    uint32_t *ops;     /* count */
} detail;

struct srr_reader {
    srr_read_fn *read;
    void *ctx;
    uint64_t root;
    field_loc loc[FIELD_IDS];
    size_t rt_bytes, slot_bytes, slot_stride, block_bytes; /* bytes to copy of each */
    rt_snap *rts;
    size_t nrts;
    entry *entries;
    size_t nentries, entries_cap;
    detail **cache; /* open addressing by generation, power-of-two capacity */
    size_t cache_cap, cache_len;
    uint64_t torn;
    uint8_t *blockbuf, *seqbuf;
    char err[256];
};

static srr_status fail(srr_reader *r, srr_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static srr_status fail(srr_reader *r, srr_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, sizeof r->err, fmt, ap);
    va_end(ap);
    return st;
}

static uint64_t u64_at(const uint8_t *p, size_t off)
{
    uint64_t v;
    memcpy(&v, p + off, 8);
    return v;
}

static uint32_t u32_at(const uint8_t *p, size_t off)
{
    uint32_t v;
    memcpy(&v, p + off, 4);
    return v;
}

/* A field's value; 0 for an optional field the registry does not have. */
static uint64_t get(const srr_reader *r, const uint8_t *p, int id)
{
    if (!r->loc[id].size)
        return 0;
    return r->loc[id].size == 4 ? u32_at(p, r->loc[id].offset) : u64_at(p, r->loc[id].offset);
}

static bool rd(srr_reader *r, uint64_t addr, void *buf, size_t len)
{
    return len == 0 || r->read(r->ctx, addr, buf, len);
}

static srr_status read_fail(srr_reader *r, const char *what, uint64_t addr, size_t len)
{
    return fail(r, SRR_EREAD, "cannot read %s (%zu bytes at 0x%llx)", what, len,
                (unsigned long long)addr);
}

/* ---- opening: the root and the field table ---- */

/* Largest offset + size of the fields of one struct type, i.e. what to copy. */
static size_t extent(const srr_reader *r, uint16_t type)
{
    size_t end = 0;
    for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++)
        if (wanted[i].type == type && wanted[i].size &&
            (size_t)r->loc[wanted[i].id].offset + r->loc[wanted[i].id].size > end)
            end = (size_t)r->loc[wanted[i].id].offset + r->loc[wanted[i].id].size;
    return end;
}

/* The block's two arrays may be listed as whole arrays or by one element. */
static srr_status check_block_fields(srr_reader *r)
{
    field_loc seq = r->loc[SR_REGISTRY_F_BLOCK_SEQ], slot = r->loc[SR_REGISTRY_F_BLOCK_SLOT];
    if (seq.size != 8 && seq.size != 8 * SR_REGISTRY_BLOCK_SLOTS)
        return fail(r, SRR_EFORMAT, "registry field block.seq has size %u, this reader reads "
                    "8-byte counters", seq.size);
    r->slot_bytes = extent(r, SR_REGISTRY_T_SLOT);
    if (slot.size % SR_REGISTRY_BLOCK_SLOTS == 0 &&
        slot.size / SR_REGISTRY_BLOCK_SLOTS >= r->slot_bytes)
        r->slot_stride = slot.size / SR_REGISTRY_BLOCK_SLOTS;
    else if (slot.size >= r->slot_bytes)
        r->slot_stride = slot.size;
    else
        return fail(r, SRR_EFORMAT, "registry field block.slot has size %u, smaller than the "
                    "%zu bytes of a slot's fields", slot.size, r->slot_bytes);
    size_t seq_end = seq.offset + 8 * (size_t)SR_REGISTRY_BLOCK_SLOTS;
    size_t slot_end = slot.offset + r->slot_stride * SR_REGISTRY_BLOCK_SLOTS;
    r->block_bytes = seq_end > slot_end ? seq_end : slot_end;
    return SRR_OK;
}

static srr_status read_fields(srr_reader *r, uint64_t addr, uint64_t count)
{
    if (count == 0 || count > MAX_FIELDS)
        return fail(r, SRR_EFORMAT, "registry field table has %llu entries (expected 1 to %d)",
                    (unsigned long long)count, MAX_FIELDS);
    sr_registry_field *f = malloc(count * sizeof *f);
    if (!f)
        return fail(r, SRR_ENOMEM, "out of memory for the registry's field table");
    if (!rd(r, addr, f, count * sizeof *f)) {
        free(f);
        return read_fail(r, "the registry's field table", addr, count * sizeof *f);
    }
    srr_status st = SRR_OK;
    for (size_t w = 0; w < sizeof wanted / sizeof wanted[0] && st == SRR_OK; w++) {
        size_t i = 0;
        while (i < count && !(f[i].type == wanted[w].type && f[i].field == wanted[w].id))
            i++;
        if (i == count && wanted[w].optional)
            continue;
        if (i == count)
            st = fail(r, SRR_EFORMAT, "registry field %s (type %u, id %u) is not in its field "
                      "table", wanted[w].name, wanted[w].type, wanted[w].id);
        else if (wanted[w].size && f[i].size != wanted[w].size)
            st = fail(r, SRR_EFORMAT, "registry field %s has size %u, this reader reads %u",
                      wanted[w].name, f[i].size, wanted[w].size);
        else
            r->loc[wanted[w].id] = (field_loc){f[i].offset, f[i].size};
    }
    free(f);
    return st;
}

static srr_status check_root(srr_reader *r)
{
    sr_registry_root root;
    size_t fixed = offsetof(sr_registry_root, seq); /* magic..field_count: fixed in version 1 */
    if (!rd(r, r->root, &root, fixed))
        return read_fail(r, "the registry root", r->root, fixed);
    if (root.magic != SR_REGISTRY_MAGIC)
        return fail(r, SRR_EFORMAT, "no registry at 0x%llx: magic 0x%016llx, expected 0x%016llx",
                    (unsigned long long)r->root, (unsigned long long)root.magic,
                    (unsigned long long)SR_REGISTRY_MAGIC);
    if (root.version != SR_REGISTRY_VERSION)
        return fail(r, SRR_EFORMAT, "registry version %u, this reader reads %d", root.version,
                    SR_REGISTRY_VERSION);
    srr_status st = read_fields(r, root.fields, root.field_count);
    if (st != SRR_OK)
        return st;
    for (int id = SR_REGISTRY_F_SEQ; id <= SR_REGISTRY_F_RUNTIMES; id++)
        if ((size_t)r->loc[id].offset + r->loc[id].size > root.size)
            return fail(r, SRR_EFORMAT, "registry root field %d lies past the root's %u bytes",
                        id, root.size);
    r->rt_bytes = extent(r, SR_REGISTRY_T_RUNTIME);
    return check_block_fields(r);
}

srr_status srr_open(srr_read_fn *read, void *ctx, uint64_t root_addr, srr_reader **out, char *err,
                    size_t errlen)
{
    *out = NULL;
    srr_reader *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errlen, "out of memory");
        return SRR_ENOMEM;
    }
    r->read = read;
    r->ctx = ctx;
    r->root = root_addr;
    srr_status st = check_root(r);
    if (st == SRR_OK) {
        r->blockbuf = malloc(r->block_bytes);
        r->seqbuf = malloc(8 * SR_REGISTRY_BLOCK_SLOTS);
        if (!r->blockbuf || !r->seqbuf)
            st = fail(r, SRR_ENOMEM, "out of memory for a registry block");
    }
    if (st != SRR_OK) {
        snprintf(err, errlen, "%s", r->err);
        srr_close(r);
        return st;
    }
    *out = r;
    return SRR_OK;
}

/* ---- the detail cache ---- */

static void detail_free(detail *d)
{
    if (d) {
        free(d->name);
        free(d->offsets);
        free(d->ops);
        free(d);
    }
}

static size_t slot_of(uint64_t generation, size_t cap)
{
    return (size_t)(generation * 0x9e3779b97f4a7c15ull >> 17) & (cap - 1);
}

static detail *cache_find(const srr_reader *r, uint64_t generation)
{
    if (!r->cache_cap)
        return NULL;
    for (size_t i = slot_of(generation, r->cache_cap), n = 0; n < r->cache_cap;
         i = (i + 1) & (r->cache_cap - 1), n++) {
        if (!r->cache[i])
            return NULL;
        if (r->cache[i]->generation == generation)
            return r->cache[i];
    }
    return NULL;
}

static void cache_put_raw(detail **table, size_t cap, detail *d)
{
    size_t i = slot_of(d->generation, cap);
    while (table[i])
        i = (i + 1) & (cap - 1);
    table[i] = d;
}

static bool cache_put(srr_reader *r, detail *d)
{
    if ((r->cache_len + 1) * 2 > r->cache_cap) {
        size_t cap = r->cache_cap ? r->cache_cap * 2 : 64;
        detail **t = calloc(cap, sizeof *t);
        if (!t)
            return false;
        for (size_t i = 0; i < r->cache_cap; i++)
            if (r->cache[i])
                cache_put_raw(t, cap, r->cache[i]);
        free(r->cache);
        r->cache = t;
        r->cache_cap = cap;
    }
    cache_put_raw(r->cache, r->cache_cap, d);
    r->cache_len++;
    return true;
}

static int by_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Keeps only the details of generations the new snapshot still holds, so the
 * cache never outgrows the live executors. */
static void cache_prune(srr_reader *r)
{
    if (!r->cache_len)
        return;
    uint64_t *live = malloc((r->nentries + 1) * sizeof *live);
    detail **fresh = calloc(r->cache_cap, sizeof *fresh);
    if (!live || !fresh) { /* keep the old table: it is only bigger than needed */
        free(live);
        free(fresh);
        return;
    }
    for (size_t e = 0; e < r->nentries; e++)
        live[e] = r->entries[e].generation;
    qsort(live, r->nentries, sizeof *live, by_u64);
    r->cache_len = 0;
    for (size_t i = 0; i < r->cache_cap; i++) {
        detail *d = r->cache[i];
        if (d && bsearch(&d->generation, live, r->nentries, sizeof *live, by_u64)) {
            cache_put_raw(fresh, r->cache_cap, d);
            r->cache_len++;
        } else {
            detail_free(d);
        }
    }
    free(r->cache);
    r->cache = fresh;
    free(live);
}

/* ---- runtimes ---- */

static void free_op_names(rt_snap *rt)
{
    for (size_t i = 0; i < rt->op_names_len; i++)
        free(rt->op_names[i]);
    free(rt->op_names);
    free(rt->cold_sizes);
    rt->op_names = NULL;
    rt->op_names_len = 0;
    rt->cold_sizes = NULL;
}

/* A NUL-terminated string of unknown length, read without crossing into a
 * page it does not reach (the next page may be unmapped). */
static char *read_cstring(srr_reader *r, uint64_t addr, size_t max)
{
    char *s = malloc(max + 1);
    size_t n = 0;
    while (s && n < max) {
        size_t chunk = 4096 - ((addr + n) & 4095);
        if (chunk > max - n)
            chunk = max - n;
        if (!rd(r, addr + n, s + n, chunk)) {
            free(s);
            return NULL;
        }
        char *nul = memchr(s + n, 0, chunk);
        if (nul)
            return s;
        n += chunk;
    }
    if (s)
        s[max] = 0;
    return s;
}

/* The runtime's cold part sizes per op, fixed for its life as op names are. */
static srr_status read_cold_sizes(srr_reader *r, rt_snap *rt)
{
    if (!rt->cold_sizes_addr || !rt->op_count)
        return SRR_OK;
    rt->cold_sizes = malloc(rt->op_count * sizeof *rt->cold_sizes);
    if (!rt->cold_sizes)
        return fail(r, SRR_ENOMEM, "out of memory for cold part sizes");
    if (!rd(r, rt->cold_sizes_addr, rt->cold_sizes, rt->op_count * 8))
        return read_fail(r, "a runtime's cold part sizes", rt->cold_sizes_addr,
                         rt->op_count * 8);
    return SRR_OK;
}

static srr_status read_op_names(srr_reader *r, rt_snap *rt)
{
    if (rt->op_count > MAX_OPS)
        return fail(r, SRR_EFORMAT, "runtime at 0x%llx lists %llu ops (at most %d)",
                    (unsigned long long)rt->addr, (unsigned long long)rt->op_count, MAX_OPS);
    uint64_t *ptrs = malloc((rt->op_count + 1) * sizeof *ptrs);
    rt->op_names = calloc(rt->op_count + 1, sizeof *rt->op_names);
    if (!ptrs || !rt->op_names) {
        free(ptrs);
        return fail(r, SRR_ENOMEM, "out of memory for op names");
    }
    if (!rd(r, rt->op_names_addr, ptrs, rt->op_count * 8)) {
        free(ptrs);
        return read_fail(r, "a runtime's op names", rt->op_names_addr, rt->op_count * 8);
    }
    srr_status st = SRR_OK;
    for (size_t i = 0; i < rt->op_count && st == SRR_OK; i++) {
        rt->op_names[i] = read_cstring(r, ptrs[i], MAX_OP_NAME);
        if (!rt->op_names[i])
            st = read_fail(r, "an op name", ptrs[i], 1);
        rt->op_names_len = i + 1;
    }
    free(ptrs);
    return st == SRR_OK ? read_cold_sizes(r, rt) : st;
}

static void rule_from(const srr_reader *r, const uint8_t *b, srr_rule *rule)
{
    rule->elf_machine = (uint32_t)get(r, b, SR_REGISTRY_F_RT_ELF_MACHINE);
    rule->cfa_register = (uint32_t)get(r, b, SR_REGISTRY_F_RT_CFA_REGISTER);
    rule->fp_register = (uint32_t)get(r, b, SR_REGISTRY_F_RT_FP_REGISTER);
    rule->cfa_offset = (int64_t)get(r, b, SR_REGISTRY_F_RT_CFA_OFFSET);
    rule->fp_offset = (int64_t)get(r, b, SR_REGISTRY_F_RT_FP_OFFSET);
    rule->ra_offset = (int64_t)get(r, b, SR_REGISTRY_F_RT_RA_OFFSET);
    rule->ra_signed = get(r, b, SR_REGISTRY_F_RT_RA_SIGNED) != 0;
    rule->shim_start = get(r, b, SR_REGISTRY_F_RT_SHIM_START);
    rule->shim_size = get(r, b, SR_REGISTRY_F_RT_SHIM_SIZE);
    rule->shim_rule_start = get(r, b, SR_REGISTRY_F_RT_SHIM_RULE_START);
    rule->shim_rule_end = get(r, b, SR_REGISTRY_F_RT_SHIM_RULE_END);
}

/* One runtime's fixed part; op names are kept from the last snapshot when
 * the runtime at this address still points at the same array. */
static srr_status read_runtime(srr_reader *r, uint64_t addr, rt_snap *old, size_t nold,
                               rt_snap *rt, uint64_t *next)
{
    uint8_t b[1024];
    if (r->rt_bytes > sizeof b)
        return fail(r, SRR_EFORMAT, "registry runtime struct is %zu bytes (at most %zu)",
                    r->rt_bytes, sizeof b);
    if (!rd(r, addr, b, r->rt_bytes))
        return read_fail(r, "a registry runtime", addr, r->rt_bytes);
    memset(rt, 0, sizeof *rt);
    rt->addr = addr;
    rule_from(r, b, &rt->rule);
    rt->op_names_addr = get(r, b, SR_REGISTRY_F_RT_OP_NAMES);
    rt->op_count = get(r, b, SR_REGISTRY_F_RT_OP_COUNT);
    rt->blocks = get(r, b, SR_REGISTRY_F_RT_BLOCKS);
    rt->block_count = get(r, b, SR_REGISTRY_F_RT_BLOCK_COUNT);
    rt->cold_sizes_addr = get(r, b, SR_REGISTRY_F_RT_COLD_SIZES);
    uint64_t block_max = get(r, b, SR_REGISTRY_F_RT_BLOCK_MAX);
    if (rt->block_count > block_max || block_max > MAX_BLOCKS)
        return fail(r, SRR_EFORMAT, "runtime at 0x%llx has %llu of %llu blocks (at most %d)",
                    (unsigned long long)addr, (unsigned long long)rt->block_count,
                    (unsigned long long)block_max, MAX_BLOCKS);
    *next = get(r, b, SR_REGISTRY_F_RT_NEXT);
    for (size_t i = 0; i < nold; i++)
        if (old[i].addr == addr && old[i].op_names_addr == rt->op_names_addr &&
            old[i].op_count == rt->op_count && old[i].cold_sizes_addr == rt->cold_sizes_addr &&
            old[i].op_names) {
            rt->op_names = old[i].op_names;
            rt->op_names_len = old[i].op_names_len;
            rt->cold_sizes = old[i].cold_sizes;
            old[i].op_names = NULL;
            old[i].op_names_len = 0;
            old[i].cold_sizes = NULL;
            return SRR_OK;
        }
    return read_op_names(r, rt);
}

static void free_rts(rt_snap *rts, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free_op_names(&rts[i]);
    free(rts);
}

/* The runtime list, walked between two equal even reads of the root's seq. */
static srr_status read_runtimes(srr_reader *r)
{
    uint64_t seq_addr = r->root + r->loc[SR_REGISTRY_F_SEQ].offset;
    uint64_t head_addr = r->root + r->loc[SR_REGISTRY_F_RUNTIMES].offset;
    for (int attempt = 0; attempt <= MAX_RETRIES; attempt++) {
        uint64_t seq1, seq2, next;
        if (!rd(r, seq_addr, &seq1, 8))
            return read_fail(r, "the registry's seq", seq_addr, 8);
        if (seq1 & 1)
            continue;
        if (!rd(r, head_addr, &next, 8))
            return read_fail(r, "the registry's runtime list", head_addr, 8);
        rt_snap *rts = calloc(MAX_RUNTIMES, sizeof *rts);
        if (!rts)
            return fail(r, SRR_ENOMEM, "out of memory for runtimes");
        size_t n = 0;
        srr_status st = SRR_OK;
        while (next && st == SRR_OK) {
            if (n == MAX_RUNTIMES)
                st = fail(r, SRR_EFORMAT, "registry lists more than %d runtimes", MAX_RUNTIMES);
            else if ((st = read_runtime(r, next, r->rts, r->nrts, &rts[n], &next)) == SRR_OK)
                n++;
        }
        if (st == SRR_OK && !rd(r, seq_addr, &seq2, 8))
            st = read_fail(r, "the registry's seq", seq_addr, 8);
        if (st == SRR_OK && seq2 == seq1) {
            free_rts(r->rts, r->nrts);
            r->rts = rts;
            r->nrts = n;
            return SRR_OK;
        }
        free_rts(rts, n < MAX_RUNTIMES ? n + 1 : n); /* and the one that failed, if any */
        /* A runtime freed while we walked makes reads fail; only a stable list counts. */
        if (st != SRR_OK && st != SRR_EREAD)
            return st;
    }
    return fail(r, SRR_EBUSY, "the registry's runtime list kept changing (%d tries)",
                MAX_RETRIES + 1);
}

/* ---- blocks and slots ---- */

static bool add_entry(srr_reader *r, entry e)
{
    if (r->nentries == r->entries_cap) {
        size_t cap = r->entries_cap ? r->entries_cap * 2 : 256;
        entry *n = realloc(r->entries, cap * sizeof *n);
        if (!n)
            return false;
        r->entries = n;
        r->entries_cap = cap;
    }
    r->entries[r->nentries++] = e;
    return true;
}

/* The slot's fields, from a consistent copy of it. */
static void entry_from_slot(const srr_reader *r, const uint8_t *s, entry *e)
{
    e->generation = get(r, s, SR_REGISTRY_F_SLOT_GENERATION);
    e->start = get(r, s, SR_REGISTRY_F_SLOT_CODE_START);
    e->size = get(r, s, SR_REGISTRY_F_SLOT_CODE_SIZE);
    e->name = get(r, s, SR_REGISTRY_F_SLOT_NAME);
    e->name_len = get(r, s, SR_REGISTRY_F_SLOT_NAME_LEN);
    e->count = get(r, s, SR_REGISTRY_F_SLOT_COUNT);
    e->offsets = get(r, s, SR_REGISTRY_F_SLOT_OFFSETS);
    e->ops = get(r, s, SR_REGISTRY_F_SLOT_OPS);
}

static uint64_t seq_addr_of(const srr_reader *r, uint64_t block, size_t i)
{
    return block + r->loc[SR_REGISTRY_F_BLOCK_SEQ].offset + 8 * i;
}

static uint64_t slot_addr_of(const srr_reader *r, uint64_t block, size_t i)
{
    return block + r->loc[SR_REGISTRY_F_BLOCK_SLOT].offset + r->slot_stride * i;
}

/* Three separate copies (counters, slots, counters): a slot is kept only if
 * both of its counters are the same even number. Torn slots are retried by
 * re-reading the block. */
static srr_status read_block(srr_reader *r, size_t rt, uint64_t block)
{
    bool done[SR_REGISTRY_BLOCK_SLOTS] = {false};
    size_t left = SR_REGISTRY_BLOCK_SLOTS;
    uint64_t seq_addr = seq_addr_of(r, block, 0), slots_addr = slot_addr_of(r, block, 0);
    size_t slots_len = r->slot_stride * SR_REGISTRY_BLOCK_SLOTS;
    for (int attempt = 0; attempt <= MAX_RETRIES && left; attempt++) {
        if (!rd(r, seq_addr, r->seqbuf, 8 * SR_REGISTRY_BLOCK_SLOTS) ||
            !rd(r, slots_addr, r->blockbuf, slots_len))
            return read_fail(r, "a registry block", block, r->block_bytes);
        uint64_t seq2[SR_REGISTRY_BLOCK_SLOTS];
        if (!rd(r, seq_addr, seq2, sizeof seq2))
            return read_fail(r, "a registry block's counters", seq_addr, sizeof seq2);
        for (size_t i = 0; i < SR_REGISTRY_BLOCK_SLOTS; i++) {
            if (done[i])
                continue;
            uint64_t s1 = u64_at(r->seqbuf, 8 * i);
            if (s1 != seq2[i] || (s1 & 1)) {
                r->torn++;
                continue;
            }
            done[i] = true;
            left--;
            entry e = {.slot_addr = slot_addr_of(r, block, i),
                       .seq_addr = seq_addr_of(r, block, i),
                       .rt = rt};
            entry_from_slot(r, r->blockbuf + r->slot_stride * i, &e);
            if (e.generation && e.size && !add_entry(r, e))
                return fail(r, SRR_ENOMEM, "out of memory for the registry snapshot");
        }
    }
    return SRR_OK;
}

static srr_status read_blocks(srr_reader *r, size_t rt)
{
    uint64_t count = r->rts[rt].block_count;
    if (!count)
        return SRR_OK;
    uint64_t *blocks = malloc(count * 8);
    if (!blocks)
        return fail(r, SRR_ENOMEM, "out of memory for a runtime's blocks");
    srr_status st = SRR_OK;
    if (!rd(r, r->rts[rt].blocks, blocks, count * 8))
        st = read_fail(r, "a runtime's block directory", r->rts[rt].blocks, count * 8);
    for (size_t b = 0; b < count && st == SRR_OK; b++)
        if (blocks[b])
            st = read_block(r, rt, blocks[b]);
    free(blocks);
    return st;
}

static int by_start(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

srr_status srr_snapshot(srr_reader *r)
{
    srr_status st = read_runtimes(r);
    r->nentries = 0;
    for (size_t i = 0; i < r->nrts && st == SRR_OK; i++)
        st = read_blocks(r, i);
    if (st != SRR_OK) {
        r->nentries = 0;
        return st;
    }
    if (r->nentries) /* entries may be NULL, which qsort must not be given */
        qsort(r->entries, r->nentries, sizeof *r->entries, by_start);
    cache_prune(r);
    return SRR_OK;
}

/* ---- lookups ---- */

/* Reads one slot by the seq protocol; false with *st set when it cannot. */
static bool read_slot(srr_reader *r, const entry *at, entry *out, uint8_t *slot, srr_status *st)
{
    for (int attempt = 0; attempt <= MAX_RETRIES; attempt++) {
        uint64_t s1, s2;
        if (!rd(r, at->seq_addr, &s1, 8) || !rd(r, at->slot_addr, slot, r->slot_bytes) ||
            !rd(r, at->seq_addr, &s2, 8)) {
            *st = read_fail(r, "a registry slot", at->slot_addr, r->slot_bytes);
            return false;
        }
        if (s1 == s2 && !(s1 & 1)) {
            *out = *at;
            entry_from_slot(r, slot, out);
            return true;
        }
        r->torn++;
    }
    *st = fail(r, SRR_EBUSY, "registry slot at 0x%llx stayed torn (%d tries)",
               (unsigned long long)at->slot_addr, MAX_RETRIES + 1);
    return false;
}

static bool generation_is(srr_reader *r, const entry *e, uint64_t generation, srr_status *st)
{
    uint64_t g;
    uint64_t addr = e->slot_addr + r->loc[SR_REGISTRY_F_SLOT_GENERATION].offset;
    if (!rd(r, addr, &g, 8)) {
        *st = read_fail(r, "a slot's generation", addr, 8);
        return false;
    }
    return g == generation;
}

/* Name and instruction map of the executor e describes (a consistent copy
 * of its slot), trusted only if the slot still holds e's generation after
 * they were copied. NULL with *st unchanged: the generation changed. */
static detail *read_detail(srr_reader *r, const entry *e, srr_status *st)
{
    uint64_t name = e->name, name_len = e->name_len, count = e->count;
    if (name_len > MAX_NAME)
        name_len = MAX_NAME;
    if (count == 0 || count > MAX_COUNT) {
        *st = fail(r, SRR_EFORMAT, "registry slot at 0x%llx has %llu instructions",
                   (unsigned long long)e->slot_addr, (unsigned long long)count);
        return NULL;
    }
    detail *d = calloc(1, sizeof *d);
    if (d) {
        d->generation = e->generation;
        d->count = count;
        d->name = malloc(name_len + 1);
        d->offsets = malloc((count + 1) * 4);
        d->ops = malloc(count * 4);
    }
    if (!d || !d->name || !d->offsets || !d->ops) {
        detail_free(d);
        *st = fail(r, SRR_ENOMEM, "out of memory for an executor's details");
        return NULL;
    }
    bool ok = rd(r, name, d->name, name_len) &&
              rd(r, e->offsets, d->offsets, (count + 1) * 4) && rd(r, e->ops, d->ops, count * 4);
    d->name[name_len] = 0;
    /* Details are freed only after the generation changes: same generation
     * after the copy means the copy is of live, unchanged memory. */
    if (!ok || !generation_is(r, e, e->generation, st)) {
        detail_free(d);
        return NULL;
    }
    return d;
}

/* The details of e's executor, cached or copied now; *stale when its slot
 * changed generation meanwhile. */
static srr_status detail_of(srr_reader *r, const entry *e, detail **out, bool *stale)
{
    srr_status st = SRR_OK;
    *stale = false;
    if ((*out = cache_find(r, e->generation)))
        return SRR_OK;
    detail *d = read_detail(r, e, &st);
    if (!d) {
        *stale = st == SRR_OK;
        return st;
    }
    if (!cache_put(r, d)) {
        detail_free(d);
        return fail(r, SRR_ENOMEM, "out of memory for the executor cache");
    }
    *out = d;
    return SRR_OK;
}

/* The live details of the executor covering addr in e's slot. The same
 * generation as in the snapshot: the snapshot's copy of the slot still
 * describes it (one small read). Another: the slot is read again. */
static srr_status resolve(srr_reader *r, const entry *e, uint64_t addr, detail **out,
                          entry *now)
{
    srr_status st = SRR_OK;
    bool stale = true;
    *out = NULL;
    *now = *e;
    if (generation_is(r, e, e->generation, &st)) {
        if ((st = detail_of(r, now, out, &stale)) != SRR_OK || !stale)
            return st;
    } else if (st != SRR_OK) {
        return st;
    }
    for (int attempt = 0; attempt <= MAX_RETRIES; attempt++) {
        uint8_t slot[512];
        if (r->slot_bytes > sizeof slot)
            return fail(r, SRR_EFORMAT, "registry slot is %zu bytes", r->slot_bytes);
        if (!read_slot(r, e, now, slot, &st))
            return st;
        if (!now->generation || addr < now->start || addr - now->start >= now->size)
            return SRR_OK; /* the slot now holds other code, or none */
        if ((st = detail_of(r, now, out, &stale)) != SRR_OK || !stale)
            return st;
        r->torn++; /* replaced while we copied its details: read the slot again */
    }
    return fail(r, SRR_EBUSY, "executor in slot 0x%llx kept changing",
                (unsigned long long)e->slot_addr);
}

/* The instruction whose cold part holds offset `off` (at or past the hot
 * parts), or d->count when it is past them too: the veneers. The cold parts
 * follow the hot ones in instruction order (stencilrt_registry.h); a linear
 * walk, as the runtime's own lookup does: cold code is rarely where a PC is. */
static size_t cold_instruction_at(const rt_snap *rt, const detail *d, uint64_t off)
{
    uint64_t end = d->offsets[d->count];
    for (size_t i = 0; i < d->count && rt->cold_sizes; i++) {
        if (d->ops[i] < rt->op_count)
            end += rt->cold_sizes[d->ops[i]];
        if (off < end)
            return i;
    }
    return d->count;
}

/* The instruction whose hot part holds offset `off` (before offsets[count]). */
static size_t hot_instruction_at(const detail *d, uint64_t off)
{
    size_t lo = 0, hi = d->count; /* last i with offsets[i] <= off */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (d->offsets[mid] <= off)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

static void name_pc(const srr_reader *r, const detail *d, const entry *now, uint64_t addr,
                    srr_pc *out)
{
    uint64_t off = addr - now->start;
    const rt_snap *rt = &r->rts[now->rt];
    out->kind = SRR_EXECUTOR;
    out->rule = &rt->rule;
    out->id = d->generation;
    out->executor = d->name;
    size_t i = off < d->offsets[d->count] ? hot_instruction_at(d, off)
                                          : cold_instruction_at(rt, d, off);
    out->index = i;
    if (i == d->count) /* past the instructions: the veneers */
        out->op = "veneer";
    else
        out->op = d->ops[i] < rt->op_names_len && rt->op_names[d->ops[i]] ? rt->op_names[d->ops[i]]
                                                                            : "?";
}

/* Index of the last entry starting at or below addr, or SIZE_MAX. */
static size_t last_at_or_below(const srr_reader *r, uint64_t addr)
{
    size_t lo = 0, hi = r->nentries;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->entries[mid].start <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo ? lo - 1 : SIZE_MAX;
}

srr_status srr_lookup(srr_reader *r, uint64_t addr, srr_pc *out)
{
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < r->nrts; i++) {
        const srr_rule *rule = &r->rts[i].rule;
        if (addr >= rule->shim_start && addr - rule->shim_start < rule->shim_size) {
            out->kind = SRR_SHIM;
            out->rule = rule;
            return SRR_OK;
        }
    }
    /* Entries copied at different moments may overlap (code freed, its
     * memory reused by a slot read later): try each that covers addr, a
     * bounded number, the latest start first. */
    size_t i = last_at_or_below(r, addr);
    for (int tried = 0; i != SIZE_MAX && tried < 16; tried++, i--) {
        const entry *e = &r->entries[i];
        if (addr - e->start < e->size) {
            detail *d;
            entry now;
            srr_status st = resolve(r, e, addr, &d, &now);
            if (st != SRR_OK) {
                out->kind = SRR_UNRESOLVED;
                out->rule = &r->rts[e->rt].rule;
                return st;
            }
            if (d) {
                name_pc(r, d, &now, addr, out);
                return SRR_OK;
            }
        }
        if (i == 0)
            break;
    }
    out->kind = SRR_NOT_JIT;
    return SRR_OK;
}

/* ---- accessors ---- */

void srr_close(srr_reader *r)
{
    if (!r)
        return;
    free_rts(r->rts, r->nrts);
    free(r->entries);
    for (size_t i = 0; i < r->cache_cap; i++)
        detail_free(r->cache[i]);
    free(r->cache);
    free(r->blockbuf);
    free(r->seqbuf);
    free(r);
}

const char *srr_error(const srr_reader *r) { return r->err; }
size_t srr_runtime_count(const srr_reader *r) { return r->nrts; }
const srr_rule *srr_runtime_rule(const srr_reader *r, size_t i) { return &r->rts[i].rule; }
size_t srr_executor_count(const srr_reader *r) { return r->nentries; }
uint64_t srr_torn_reads(const srr_reader *r) { return r->torn; }
