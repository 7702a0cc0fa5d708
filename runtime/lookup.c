/* lookup.c - which executor and instruction a code address belongs to
 * (sr_lookup_pc), for signal handlers and sampling profilers: lock-free and
 * async-signal-safe, while other threads emit and free.
 *
 * Two things are published with atomic stores, under the registry lock: the
 * runtime's arenas sorted by address (replaced, rarely, when an arena is
 * made) and, per arena, the executor owning each granule of its code (set
 * once an executor is sealed, cleared before it is freed; chunks never share
 * a granule). A lookup is a binary search over arenas, one load of a
 * granule's owner and a binary search over the owner's instruction offsets:
 * O(log arenas + log instructions).
 *
 * A lookup counts itself in rt->lookups while it reads (so do the getters
 * that read an executor's body: executor.c's pin). Memory it may be reading
 * (a replaced arena table, a freed executor's body, its record before the
 * pool may reuse it: executor.c) is released only while that count is zero:
 * otherwise it waits on a list until a later emit or free, or
 * sr_runtime_destroy. With every access sequentially
 * consistent, a lookup that started after a writer saw the count at zero
 * cannot have loaded what that writer then releases. */
#include <stdlib.h>

#include "internal.h"

struct sr_arena_table {
    struct sr_arena_table *retired_next;
    size_t n;
    sr_arena *arenas[]; /* by region.base */
};

bool lookup_add_arena(sr_runtime *rt, sr_arena *a)
{
    sr_arena_table *old = atomic_load(&rt->arena_table);
    size_t n = old ? old->n : 0;
    sr_arena_table *t = malloc(sizeof *t + (n + 1) * sizeof *t->arenas);
    a->owner = calloc(a->region.ngranules ? a->region.ngranules : 1, sizeof *a->owner);
    if (!t || !a->owner) {
        free(t);
        free(a->owner);
        a->owner = NULL;
        return false;
    }
    t->retired_next = NULL;
    t->n = 0;
    size_t k = 0;
    while (k < n && old->arenas[k]->region.base < a->region.base)
        t->arenas[t->n++] = old->arenas[k++];
    t->arenas[t->n++] = a;
    while (k < n)
        t->arenas[t->n++] = old->arenas[k++];
    atomic_store(&rt->arena_table, t);
    if (old) {
        old->retired_next = rt->retired_tables;
        rt->retired_tables = old;
    }
    lookup_reclaim(rt);
    return true;
}

void lookup_publish(sr_executor *e, bool on)
{
    sr_region *r = &e->arena->region;
    if (!e->code_size)
        return;
    size_t first = (size_t)(e->mem - r->base) / r->granule;
    size_t last = (size_t)(e->mem + e->code_size - 1 - r->base) / r->granule;
    for (size_t g = first; g <= last; g++)
        atomic_store(&e->arena->owner[g], on ? e : NULL);
}

void lookup_retire(sr_runtime *rt, sr_executor *e)
{
    e->next = rt->retired_executors;
    rt->retired_executors = e;
    lookup_reclaim(rt);
}

void lookup_reclaim(sr_runtime *rt)
{
    if (atomic_load(&rt->lookups) != 0)
        return;
    while (rt->retired_executors) {
        sr_executor *e = rt->retired_executors;
        rt->retired_executors = e->next;
        executor_destroy(e);
    }
    while (rt->retired_tables) {
        sr_arena_table *t = rt->retired_tables;
        rt->retired_tables = t->retired_next;
        free(t);
    }
}

void lookup_fini(sr_runtime *rt)
{
    /* No lookup may run once the runtime is being destroyed. */
    lookup_reclaim(rt);
    free(atomic_load(&rt->arena_table));
}

/* The arena whose region holds pc, or NULL. */
static sr_arena *arena_of(const sr_arena_table *t, uintptr_t pc)
{
    size_t lo = 0, hi = t ? t->n : 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const sr_region *r = &t->arenas[mid]->region;
        if (pc < (uintptr_t)r->base)
            hi = mid;
        else if (pc - (uintptr_t)r->base >= r->size)
            lo = mid + 1;
        else
            return t->arenas[mid];
    }
    return NULL;
}

/* The instruction whose cold part holds offset `at` (offsets[n] <= at <
 * code_size): the cold parts follow the hot ones in instruction order
 * (emit.c). A linear walk: cold code is where a program rarely is. */
static size_t cold_instruction_at(const sr_stencil_set *set, const sr_executor *e, uint32_t at)
{
    size_t end = e->offsets[e->n];
    for (size_t i = 0; i < e->n && set->cold_sizes; i++) {
        end += set->cold_sizes[e->ops[i]];
        if (at < end)
            return i;
    }
    return e->n - 1; /* cannot happen: code_size is the sum */
}

/* The instruction whose code holds offset `at` (< code_size). */
static size_t instruction_at(const sr_stencil_set *set, const sr_executor *e, uint32_t at)
{
    if (at >= e->offsets[e->n])
        return cold_instruction_at(set, e, at);
    size_t lo = 0, hi = e->n; /* offsets[lo] <= at < offsets[hi] */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (e->offsets[mid] <= at)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

SR_API bool sr_lookup_pc(const sr_runtime *crt, const void *pc, sr_executor **executor,
                         size_t *instruction)
{
    sr_runtime *rt = (sr_runtime *)crt; /* the count is the only thing written */
    if (!rt || !executor)
        return false;
    atomic_fetch_add(&rt->lookups, 1);
    uintptr_t at = (uintptr_t)pc;
    sr_executor *e = NULL;
    sr_arena *a = arena_of(atomic_load(&rt->arena_table), at);
    if (a)
        e = atomic_load(&a->owner[(at - (uintptr_t)a->region.base) / a->region.granule]);
    /* Code only: not the veneers, data or GOT after it. */
    bool found = e && at >= (uintptr_t)e->mem && at - (uintptr_t)e->mem < e->code_size;
    if (found) {
        *executor = e;
        if (instruction)
            *instruction = instruction_at(rt->set, e, (uint32_t)(at - (uintptr_t)e->mem));
    }
    atomic_fetch_sub(&rt->lookups, 1);
    return found;
}
