/* test_registry - the registry's writer against its contract
 * (stencilrt_registry.h), read in-process straight from the structs: the
 * field table matches the layout, a runtime lists its unwind rule, shim and
 * op names, every live executor has a slot with its code, name and
 * instruction map and a generation equal to its id, freeing empties the slot
 * and reuse gives a new generation, and counters are even between changes.
 * (tools/stack's reader, and test_stack, read it from another process.)
 * Prints one line per case and ends with "N passed, N failed". */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rt_common.h"
#include "stencilrt_registry.h"

extern sr_registry_root stencilrt_registry;

static const void *ptr(uint64_t a)
{
    return (const void *)(uintptr_t)a;
}

typedef struct expected_field {
    uint16_t type, field;
    size_t offset, size;
} expected_field;

#define EXPECT(T, id, type, member) \
    {T, id, offsetof(type, member), sizeof(((type *)0)->member)}

static void field_table(void)
{
    static const expected_field want[] = {
        EXPECT(SR_REGISTRY_T_ROOT, SR_REGISTRY_F_SEQ, sr_registry_root, seq),
        EXPECT(SR_REGISTRY_T_ROOT, SR_REGISTRY_F_RUNTIMES, sr_registry_root, runtimes),
        EXPECT(SR_REGISTRY_T_RUNTIME, SR_REGISTRY_F_RT_CFA_OFFSET, sr_registry_runtime, cfa_offset),
        EXPECT(SR_REGISTRY_T_RUNTIME, SR_REGISTRY_F_RT_RA_SIGNED, sr_registry_runtime, ra_signed),
        EXPECT(SR_REGISTRY_T_RUNTIME, SR_REGISTRY_F_RT_BLOCK_MAX, sr_registry_runtime, block_max),
        EXPECT(SR_REGISTRY_T_BLOCK, SR_REGISTRY_F_BLOCK_SLOT, sr_registry_block, slot),
        EXPECT(SR_REGISTRY_T_SLOT, SR_REGISTRY_F_SLOT_GENERATION, sr_registry_slot, generation),
        EXPECT(SR_REGISTRY_T_SLOT, SR_REGISTRY_F_SLOT_OPS, sr_registry_slot, ops),
    };
    const sr_registry_root *root = &stencilrt_registry;
    const sr_registry_field *f = ptr(root->fields);
    char detail[160];
    snprintf(detail, sizeof detail, "magic %#llx version %u size %u, %llu fields",
             (unsigned long long)root->magic, root->version, root->size,
             (unsigned long long)root->field_count);
    rt_result(root->magic == SR_REGISTRY_MAGIC && root->version == SR_REGISTRY_VERSION &&
                  root->size == sizeof *root && f && root->field_count == 30,
              "root: magic, version, size, every field listed", detail);
    bool unique = true;
    for (size_t i = 0; i < root->field_count; i++)
        for (size_t j = 0; j < i; j++)
            unique &= f[i].field != f[j].field;
    rt_result(unique, "field ids are unique", "");
    for (size_t k = 0; k < sizeof want / sizeof *want; k++) {
        const sr_registry_field *hit = NULL;
        for (size_t i = 0; i < root->field_count; i++)
            if (f[i].field == want[k].field)
                hit = &f[i];
        snprintf(detail, sizeof detail, "field %u: type %d offset %d size %d, want %u %zu %zu",
                 want[k].field, hit ? hit->type : -1, hit ? hit->offset : -1,
                 hit ? hit->size : -1, want[k].type, want[k].offset, want[k].size);
        rt_result(hit && hit->type == want[k].type && hit->offset == want[k].offset &&
                      hit->size == want[k].size, "field table entry", detail);
    }
}

/* The listed runtime whose shim starts at `shim`. */
static const sr_registry_runtime *listed_shim(uint64_t shim)
{
    for (uint64_t at = stencilrt_registry.runtimes; at;) {
        const sr_registry_runtime *r = ptr(at);
        if (r->shim_start == shim)
            return r;
        at = r->next;
    }
    return NULL;
}

/* The registry's record of rt. */
static const sr_registry_runtime *listed(const sr_runtime *rt)
{
    return listed_shim((uintptr_t)sr_shim_entry(rt) - rt_set.shim_entry);
}

static void runtime_record(const sr_runtime *rt)
{
    const sr_registry_runtime *r = listed(rt);
    if (!r) {
        rt_result(false, "a runtime is listed", "not found from stencilrt_registry.runtimes");
        return;
    }
    rt_result(r->elf_machine == SG_TARGET_ELF_MACHINE && r->cfa_register == SG_UNWIND_CFA_REGISTER &&
                  r->cfa_offset == SG_UNWIND_CFA_OFFSET && r->fp_register == SG_UNWIND_FP_REGISTER &&
                  r->fp_offset == SG_UNWIND_FP_OFFSET && r->ra_offset == SG_UNWIND_RA_OFFSET &&
                  r->ra_signed == SG_UNWIND_RA_SIGNED,
              "a runtime lists the header's unwind rule", "");
    rt_result(r->shim_size == sg_shim.code_size && r->shim_rule_start == SG_SHIM_CALL_OFFSET &&
                  r->shim_rule_end == SG_SHIM_CALL_OFFSET + SG_SHIM_CALL_SIZE + 1,
              "its shim range and the part the rule holds in", "");
    const char *const *names = ptr(r->op_names);
    bool same = r->op_count == SG_OP__COUNT;
    for (size_t i = 0; same && i < SG_OP__COUNT; i++)
        same = !strcmp(names[i], sg_stencils[i].name);
    rt_result(same, "its op names, in op order", "");
    /* The set's cold part sizes, for readers to place each cold part. */
    const uint64_t *cold = ptr(r->cold_sizes);
    size_t ncold = 0;
    same = cold != NULL;
    for (size_t i = 0; same && i < SG_OP__COUNT; i++) {
        same = cold[i] == sg_cold_sizes[i];
        ncold += cold[i] != 0;
    }
    rt_result(same && ncold > 0, "its ops' cold part sizes, in op order", "");
}

/* The slot publishing ex, or NULL; *seq gets where its counter is. */
static const sr_registry_slot *slot_of(const sr_runtime *rt, const sr_executor *ex,
                                       const uint64_t **seq)
{
    const sr_registry_runtime *r = listed(rt);
    sr_registry_block *const *blocks = r ? ptr(r->blocks) : NULL;
    for (uint64_t b = 0; r && b < r->block_count; b++)
        for (size_t i = 0; i < SR_REGISTRY_BLOCK_SLOTS; i++)
            if (blocks[b]->slot[i].code_start == (uintptr_t)sr_executor_entry(ex)) {
                *seq = &blocks[b]->seq[i];
                return &blocks[b]->slot[i];
            }
    return NULL;
}

static bool slot_matches(const sr_registry_slot *s, const sr_executor *ex, const sr_instr *code,
                         size_t n)
{
    const char *name = sr_executor_name(ex);
    const uint32_t *offsets = ptr(s->offsets), *ops = ptr(s->ops);
    if (s->generation != sr_executor_id(ex) || !s->generation || s->count != n ||
        s->code_size < sr_executor_code_size(ex) || s->name_len != strlen(name) ||
        memcmp(ptr(s->name), name, s->name_len))
        return false;
    for (size_t i = 0; i <= n; i++)
        if (s->code_start + offsets[i] != (uintptr_t)sr_executor_instr(ex, i) ||
            (i < n && ops[i] != code[i].op))
            return false;
    return true;
}

static void executors(void)
{
    sr_runtime *rt;
    if (sr_runtime_create(&rt_set, rt_symbols, NULL, &rt) != SR_OK) {
        rt_result(false, "set-up", sr_last_error());
        return;
    }
    runtime_record(rt);
    enum { N = 300 }; /* more than a block of slots */
    static sr_executor *ex[N];
    bool ok = true;
    for (size_t i = 0; i < N && ok; i++)
        ok = sr_emit(rt, rt_answer, 3, i % 2 ? "odd" : "even", &ex[i]) == SR_OK;
    const uint64_t *seq = NULL;
    const sr_registry_slot *s = ok ? slot_of(rt, ex[N - 1], &seq) : NULL;
    rt_result(s && slot_matches(s, ex[N - 1], rt_answer, 3) && *seq % 2 == 0 && *seq,
              "an executor's slot: id, code, name, instruction map; counter even", "");
    size_t matched = 0;
    for (size_t i = 0; i < N && ok; i++)
        matched += (s = slot_of(rt, ex[i], &seq)) && slot_matches(s, ex[i], rt_answer, 3);
    char detail[96];
    snprintf(detail, sizeof detail, "%zu of %d; %llu blocks", matched, N,
             (unsigned long long)listed(rt)->block_count);
    rt_result(matched == N && listed(rt)->block_count == 2, "every live executor is listed",
              detail);

    uint64_t old_id = sr_executor_id(ex[7]);
    const sr_registry_slot *freed = slot_of(rt, ex[7], &seq);
    uint64_t old_seq = *seq;
    sr_executor_free(ex[7]);
    rt_result(!freed->generation && !freed->code_start && *seq == old_seq + 2,
              "a freed executor's slot is empty, its counter 2 further on", "");
    static const sr_instr longer[] = {{SG_OP_push, 0, {40, 0, 0, 0}}, {SG_OP_addi, 0, {1, 0, 0, 0}},
                                      {SG_OP_addi, 0, {1, 0, 0, 0}}, {SG_OP_ret, 0, {0, 0, 0, 0}}};
    ok = sr_emit(rt, longer, 4, "again", &ex[7]) == SR_OK && rt_run(rt, ex[7]) == 42;
    s = ok ? slot_of(rt, ex[7], &seq) : NULL;
    snprintf(detail, sizeof detail, "slot reused %d; id %llu after %llu", s == freed,
             (unsigned long long)sr_executor_id(ex[7]), (unsigned long long)old_id);
    rt_result(s == freed && slot_matches(s, ex[7], longer, 4) &&
                  sr_executor_id(ex[7]) > sr_executor_id(ex[N - 1]),
              "a reused slot gets a new generation", detail);

    /* Every slot freed, then taken again (the free stack holds them all). */
    ok = sr_executor_free_batch(ex, N) == SR_OK;
    for (size_t i = 0; i < N && ok; i++)
        ok = sr_emit(rt, rt_answer, 3, "refilled", &ex[i]) == SR_OK;
    matched = 0;
    for (size_t i = 0; i < N && ok; i++)
        matched += (s = slot_of(rt, ex[i], &seq)) && slot_matches(s, ex[i], rt_answer, 3);
    snprintf(detail, sizeof detail, "%zu of %d; %llu blocks", matched, N,
             (unsigned long long)listed(rt)->block_count);
    rt_result(matched == N && listed(rt)->block_count == 2,
              "all freed and emitted again: listed in the same blocks", detail);

    uint64_t root_seq = stencilrt_registry.seq;
    uint64_t shim = (uintptr_t)sr_shim_entry(rt) - rt_set.shim_entry;
    sr_runtime_destroy(rt);
    rt_result(!listed_shim(shim) && stencilrt_registry.seq == root_seq + 2,
              "a destroyed runtime is unlisted under the root's counter", "");
}

static void switched_off(void)
{
    sr_config c = SR_CONFIG_DEFAULT;
    c.registry = 2;
    sr_runtime *rt;
    sr_executor *a = NULL, *b = NULL;
    if (sr_runtime_create(&rt_set, rt_symbols, &c, &rt) != SR_OK ||
        sr_emit(rt, rt_answer, 3, "a", &a) != SR_OK || sr_emit(rt, rt_answer, 3, "b", &b) != SR_OK) {
        rt_result(false, "registry off: set-up", sr_last_error());
        return;
    }
    rt_result(!listed(rt) && sr_executor_id(a) && sr_executor_id(b) > sr_executor_id(a) &&
                  sr_executor_id(NULL) == 0,
              "registry off: not listed; ids still unique", "");
    sr_runtime_destroy(rt);
}

int main(void)
{
    unsetenv("STENCILRT_REGISTRY");
    field_table();
    executors();
    switched_off();
    return rt_summary();
}
