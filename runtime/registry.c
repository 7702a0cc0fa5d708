/* registry.c - the registry other processes read (stencilrt_registry.h).
 *
 * Every call is made with the library's lock held, so writers never race
 * each other; the counters are for readers in other processes, which copy
 * this memory while it changes. A slot's counter is made odd before any of
 * its fields change and even after the last one: a reader that sees the same
 * even number before and after its copy has a slot no writer touched. */
#include <stdlib.h>
#include <string.h>
#ifndef _WIN32
#include <sys/mman.h>
#endif

#include "internal.h"
#include "stencilrt_registry.h"

/* A runtime's directory holds this many block pointers (512 KiB of address
 * space, touched as blocks are added: room for 16 million executors). */
#define BLOCK_MAX 65536

#ifdef SR_REGISTRY_TEST_VERSION /* negative control: a layout readers must refuse */
#define PUBLISHED_VERSION SR_REGISTRY_TEST_VERSION
#else
#define PUBLISHED_VERSION SR_REGISTRY_VERSION
#endif

#define FIELD(T, id, type, member) \
    {T, id, (uint16_t)offsetof(type, member), (uint16_t)sizeof(((type *)0)->member)}

static const sr_registry_field registry_fields[] = {
    FIELD(SR_REGISTRY_T_ROOT, SR_REGISTRY_F_SEQ, sr_registry_root, seq),
    FIELD(SR_REGISTRY_T_ROOT, SR_REGISTRY_F_RUNTIMES, sr_registry_root, runtimes),
    FIELD(SR_REGISTRY_T_RUNTIME, SR_REGISTRY_F_RT_NEXT, sr_registry_runtime, next),
    FIELD(SR_REGISTRY_T_RUNTIME, SR_REGISTRY_F_RT_ELF_MACHINE, sr_registry_runtime, elf_machine),
    FIELD(SR_REGISTRY_T_RUNTIME, SR_REGISTRY_F_RT_CFA_REGISTER, sr_registry_runtime, cfa_register),
    FIELD(SR_REGISTRY_T_RUNTIME, SR_REGISTRY_F_RT_CFA_OFFSET, sr_registry_runtime, cfa_offset),
    FIELD(SR_REGISTRY_T_RUNTIME, SR_REGISTRY_F_RT_FP_REGISTER, sr_registry_runtime, fp_register),
    FIELD(SR_REGISTRY_T_RUNTIME, SR_REGISTRY_F_RT_FP_OFFSET, sr_registry_runtime, fp_offset),
    FIELD(SR_REGISTRY_T_RUNTIME, SR_REGISTRY_F_RT_RA_OFFSET, sr_registry_runtime, ra_offset),
    FIELD(SR_REGISTRY_T_RUNTIME, SR_REGISTRY_F_RT_RA_SIGNED, sr_registry_runtime, ra_signed),
    FIELD(SR_REGISTRY_T_RUNTIME, SR_REGISTRY_F_RT_SHIM_START, sr_registry_runtime, shim_start),
    FIELD(SR_REGISTRY_T_RUNTIME, SR_REGISTRY_F_RT_SHIM_SIZE, sr_registry_runtime, shim_size),
    FIELD(SR_REGISTRY_T_RUNTIME, SR_REGISTRY_F_RT_SHIM_RULE_START, sr_registry_runtime,
          shim_rule_start),
    FIELD(SR_REGISTRY_T_RUNTIME, SR_REGISTRY_F_RT_SHIM_RULE_END, sr_registry_runtime,
          shim_rule_end),
    FIELD(SR_REGISTRY_T_RUNTIME, SR_REGISTRY_F_RT_OP_NAMES, sr_registry_runtime, op_names),
    FIELD(SR_REGISTRY_T_RUNTIME, SR_REGISTRY_F_RT_OP_COUNT, sr_registry_runtime, op_count),
    FIELD(SR_REGISTRY_T_RUNTIME, SR_REGISTRY_F_RT_BLOCKS, sr_registry_runtime, blocks),
    FIELD(SR_REGISTRY_T_RUNTIME, SR_REGISTRY_F_RT_BLOCK_COUNT, sr_registry_runtime, block_count),
    FIELD(SR_REGISTRY_T_RUNTIME, SR_REGISTRY_F_RT_BLOCK_MAX, sr_registry_runtime, block_max),
    FIELD(SR_REGISTRY_T_RUNTIME, SR_REGISTRY_F_RT_COLD_SIZES, sr_registry_runtime, cold_sizes),
    FIELD(SR_REGISTRY_T_BLOCK, SR_REGISTRY_F_BLOCK_SEQ, sr_registry_block, seq),
    FIELD(SR_REGISTRY_T_BLOCK, SR_REGISTRY_F_BLOCK_SLOT, sr_registry_block, slot),
    FIELD(SR_REGISTRY_T_SLOT, SR_REGISTRY_F_SLOT_GENERATION, sr_registry_slot, generation),
    FIELD(SR_REGISTRY_T_SLOT, SR_REGISTRY_F_SLOT_CODE_START, sr_registry_slot, code_start),
    FIELD(SR_REGISTRY_T_SLOT, SR_REGISTRY_F_SLOT_CODE_SIZE, sr_registry_slot, code_size),
    FIELD(SR_REGISTRY_T_SLOT, SR_REGISTRY_F_SLOT_NAME, sr_registry_slot, name),
    FIELD(SR_REGISTRY_T_SLOT, SR_REGISTRY_F_SLOT_NAME_LEN, sr_registry_slot, name_len),
    FIELD(SR_REGISTRY_T_SLOT, SR_REGISTRY_F_SLOT_COUNT, sr_registry_slot, count),
    FIELD(SR_REGISTRY_T_SLOT, SR_REGISTRY_F_SLOT_OFFSETS, sr_registry_slot, offsets),
    FIELD(SR_REGISTRY_T_SLOT, SR_REGISTRY_F_SLOT_OPS, sr_registry_slot, ops),
};

/* The root readers find by its dynamic symbol. */
SR_API __attribute__((used)) sr_registry_root stencilrt_registry = {
    .magic = SR_REGISTRY_MAGIC,
    .version = PUBLISHED_VERSION,
    .size = sizeof(sr_registry_root),
    .fields = (uint64_t)(uintptr_t)registry_fields,
    .field_count = sizeof registry_fields / sizeof *registry_fields,
};

/* Executor ids: the generations slots are given, unique in the process. */
static uint64_t last_generation;

/* A runtime's part: what readers see, and the slots free for reuse. */
struct sr_reg {
    sr_registry_runtime pub;
    sr_registry_block **blocks; /* the directory: BLOCK_MAX pointers, mapped */
    const char **op_names;
    uint64_t *cold_sizes; /* the set's, fixed-width for readers; NULL: none */
    uint32_t *free_slots; /* a stack of slot numbers */
    size_t nfree, cap;
};

static uint64_t addr(const void *p)
{
    return (uint64_t)(uintptr_t)p;
}

static void put(uint64_t *field, uint64_t v)
{
    __atomic_store_n(field, v, __ATOMIC_RELAXED);
}

/* Open a change of what `seq` guards: odd, and ordered before the change. */
static void seq_begin(uint64_t *seq)
{
#ifndef SR_REGISTRY_TEST_NO_SEQLOCK /* negative control: readers cannot see changes */
    __atomic_store_n(seq, *seq + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
#else
    (void)seq;
#endif
}

/* Close it: even again, ordered after the change. */
static void seq_end(uint64_t *seq)
{
#ifndef SR_REGISTRY_TEST_NO_SEQLOCK
    __atomic_store_n(seq, *seq + 1, __ATOMIC_RELEASE);
#else
    (void)seq;
#endif
}

uint64_t registry_next_id(void)
{
    return ++last_generation;
}

#ifdef _WIN32
/* Windows never publishes (config.c turns the registry off there, and
 * nothing reads it), so no directory is made: registry_add_runtime is NULL. */
static sr_registry_block **directory_map(void)
{
    return NULL;
}

static void directory_unmap(sr_registry_block **blocks)
{
    (void)blocks;
}
#else
/* The directory's address space, its pages touched only as blocks are added
 * (NULL when it cannot be had). */
static sr_registry_block **directory_map(void)
{
    size_t size = BLOCK_MAX * sizeof(sr_registry_block *);
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void directory_unmap(sr_registry_block **blocks)
{
    munmap(blocks, BLOCK_MAX * sizeof *blocks);
}
#endif

sr_reg *registry_add_runtime(const sr_runtime *rt)
{
    const sr_stencil_set *set = rt->set;
    sr_reg *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->op_names = calloc(set->count ? set->count : 1, sizeof *g->op_names);
    if (set->cold_sizes)
        g->cold_sizes = calloc(set->count ? set->count : 1, sizeof *g->cold_sizes);
    g->blocks = directory_map();
    if (!g->op_names || !g->blocks || (set->cold_sizes && !g->cold_sizes)) {
        if (g->blocks)
            directory_unmap(g->blocks);
        free(g->op_names);
        free(g->cold_sizes);
        free(g);
        return NULL;
    }
    for (size_t i = 0; i < set->count; i++) {
        g->op_names[i] = set->stencils[i].name;
        if (g->cold_sizes)
            g->cold_sizes[i] = set->cold_sizes[i];
    }
    g->pub = (sr_registry_runtime){
        .elf_machine = set->elf_machine,
        .cfa_register = set->cfa_register,
        .cfa_offset = set->cfa_offset,
        .fp_register = set->fp_register,
        .ra_signed = set->ra_signed,
        .fp_offset = set->fp_offset,
        .ra_offset = set->ra_offset,
        .shim_start = addr(rt->shim),
        .shim_size = set->shim->code_size,
        .shim_rule_start = set->shim_call_offset,
        .shim_rule_end = set->shim_call_offset + set->shim_call_size + 1,
        .op_names = addr(g->op_names),
        .op_count = set->count,
        .blocks = addr(g->blocks),
        .block_max = BLOCK_MAX,
        .cold_sizes = addr(g->cold_sizes),
    };
    sr_registry_root *root = &stencilrt_registry;
    seq_begin(&root->seq);
    put(&g->pub.next, root->runtimes);
    put(&root->runtimes, addr(&g->pub));
    seq_end(&root->seq);
    return g;
}

void registry_remove_runtime(sr_reg *g)
{
    if (!g)
        return;
    sr_registry_root *root = &stencilrt_registry;
    seq_begin(&root->seq);
    uint64_t *link = &root->runtimes;
    while (*link && *link != addr(&g->pub))
        link = &((sr_registry_runtime *)(uintptr_t)*link)->next;
    if (*link)
        put(link, g->pub.next);
    seq_end(&root->seq);
    for (uint64_t i = 0; i < g->pub.block_count; i++)
        free(g->blocks[i]);
    directory_unmap(g->blocks);
    free(g->op_names);
    free(g->cold_sizes);
    free(g->free_slots);
    free(g);
}

/* A new block's slots go on the free stack (the highest first, so slots are
 * handed out in order); false when out of memory or slots. The stack has room
 * for every slot, so a free never needs memory. */
static bool add_block(sr_reg *g)
{
    uint64_t n = g->pub.block_count;
    size_t slots = (size_t)(n + 1) * SR_REGISTRY_BLOCK_SLOTS;
    if (n == BLOCK_MAX)
        return false;
    if (g->cap < slots) {
        size_t cap = 2 * g->cap > slots ? 2 * g->cap : slots;
        uint32_t *s = realloc(g->free_slots, cap * sizeof *s);
        if (!s)
            return false;
        g->free_slots = s;
        g->cap = cap;
    }
    sr_registry_block *b = calloc(1, sizeof *b);
    if (!b)
        return false;
    g->blocks[n] = b;
    __atomic_store_n(&g->pub.block_count, n + 1, __ATOMIC_RELEASE); /* after blocks[n] */
    for (uint32_t i = SR_REGISTRY_BLOCK_SLOTS; i-- > 0;)
        g->free_slots[g->nfree++] = (uint32_t)(n * SR_REGISTRY_BLOCK_SLOTS + i);
    return true;
}

static uint64_t *slot_seq(sr_reg *g, uint32_t slot)
{
    return &g->blocks[slot / SR_REGISTRY_BLOCK_SLOTS]->seq[slot % SR_REGISTRY_BLOCK_SLOTS];
}

static sr_registry_slot *slot_at(sr_reg *g, uint32_t slot)
{
    return &g->blocks[slot / SR_REGISTRY_BLOCK_SLOTS]->slot[slot % SR_REGISTRY_BLOCK_SLOTS];
}

/* The generation a slot publishes for e. */
static uint64_t published_generation(const sr_executor *e)
{
#ifdef SR_REGISTRY_TEST_NO_GENERATION /* negative control: one per slot, forever */
    return (uint64_t)e->reg_slot + 1;
#else
    return e->id;
#endif
}

void registry_add(sr_reg *g, sr_executor *e)
{
    e->reg_slot = REGISTRY_NO_SLOT;
    if (!g || (!g->nfree && !add_block(g)))
        return; /* best effort, like GDB's: out of memory, the executor is not listed */
    uint32_t slot = g->free_slots[--g->nfree];
    e->reg_slot = slot;
    sr_registry_slot *s = slot_at(g, slot);
    uint64_t *seq = slot_seq(g, slot);
    seq_begin(seq);
    put(&s->generation, published_generation(e));
    put(&s->code_start, addr(e->mem));
    put(&s->code_size, e->text_size);
    put(&s->name, addr(e->name));
    put(&s->name_len, strlen(e->name));
    put(&s->count, e->n);
    put(&s->offsets, addr(e->offsets));
    put(&s->ops, addr(e->ops));
    seq_end(seq);
}

void registry_remove(sr_reg *g, sr_executor *e)
{
    if (!g || e->reg_slot == REGISTRY_NO_SLOT)
        return;
    sr_registry_slot *s = slot_at(g, e->reg_slot);
    uint64_t *seq = slot_seq(g, e->reg_slot);
    seq_begin(seq);
    uint64_t *field = (uint64_t *)s; /* every field is a uint64_t */
    for (size_t i = 0; i < sizeof *s / sizeof *field; i++)
        put(&field[i], 0);
    seq_end(seq);
    g->free_slots[g->nfree++] = e->reg_slot; /* room: every slot was on it once */
    e->reg_slot = REGISTRY_NO_SLOT;
}
