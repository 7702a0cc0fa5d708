/* gdbgroup.c - which executors share a GDB object, and that object's contents.
 *
 * GDB gets one in-memory object per group of executors emitted together
 * (sr_emit_batch, or under sr_gdb_hold), with a section and an FDE per
 * contiguous run of them and symbols per executor and stencil. What GDB does
 * with each object grows with what GDB already holds (see register_group), so
 * the runtime hands it few objects and few sections. The interface, and why
 * groups are capped, is in internal.h. */
#include <stdint.h>
#include <stdlib.h>

#include "internal.h"

static int by_address(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)(*(sr_executor *const *)a)->mem;
    uintptr_t y = (uintptr_t)(*(sr_executor *const *)b)->mem;
    return (x > y) - (x < y);
}

/* The GDB object of a group: symbols name each executor (zero-sized, so the
 * sized stencil symbols win inside it) and each instruction. Members whose
 * chunks touch share one .text section and one FDE (the executor rule holds at
 * every executor PC, and the data and GOT between two members' code belong to
 * the first, so no other object can claim them): GDB re-sorts every section it
 * knows at each registration, and a batch emitted into fresh memory is then
 * one section, not one per executor. Built again, without the departed, when a
 * member is freed. */
static void register_group(sr_runtime *rt, sr_group *g)
{
    gdbjit_unregister(g->gdb, &rt->gdb_spares);
    g->gdb = NULL;
    const sr_eh_template *eh = &rt->gdb_eh;
    if (!rt->cfg.gdb || g->held || g->n == 0 || !eh->bytes)
        return;
    if (g->n > 1)
        qsort(g->members, g->n, sizeof *g->members, by_address);
    /* First the object's size: its runs, symbols and names. */
    size_t nrun = 0, nsyms = 0, names_size = 0;
    const uint8_t *run_end = NULL; /* first byte after the last member's chunk */
    for (size_t m = 0; m < g->n; m++) {
        const sr_executor *e = g->members[m];
        nrun += e->mem != run_end;
        run_end = e->mem + jitmem_chunk_size(&e->arena->region, e->mem_size);
        nsyms += 1 + e->n;
        for (size_t i = 0; i < e->n; i++) /* a cold part: a second symbol of the same name */
            nsyms += executor_cold_size(e, i) != 0;
        names_size += e->names_size;
    }
    gdbjit_writer w;
    if (!gdbjit_begin(&w, &rt->gdb_spares, rt->set->elf_machine, nrun, nsyms, names_size,
                      ehframe_table_size(eh, nrun)))
        return;
    /* Then its contents: a member's names are one block (executor_new), the
     * executor's first, in the order of its symbols here. */
    ehframe_table_cie(eh, w.eh_frame);
    size_t run = 0;
    uint64_t run_addr = 0, run_size = 0;
    run_end = NULL;
    for (size_t m = 0; m < g->n; m++) {
        const sr_executor *e = g->members[m];
        if (e->mem != run_end) {
            if (m > 0)
                ehframe_table_fde(eh, w.eh_frame, run++, run_addr, run_size);
            run_addr = (uintptr_t)e->mem;
        }
        run_size = (uintptr_t)(e->mem + e->text_size) - run_addr;
        run_end = e->mem + jitmem_chunk_size(&e->arena->region, e->mem_size);
        gdbjit_add_text(&w, run, run_addr, run_size);
        uint32_t names = gdbjit_add_names(&w, e->name, e->names_size);
        gdbjit_add_symbol(&w, names, (uintptr_t)e->mem, 0, run);
        for (size_t i = 0; i < e->n; i++)
            gdbjit_add_symbol(&w, names + (uint32_t)(e->symbols[i] - e->name),
                              (uintptr_t)(e->mem + e->offsets[i]),
                              e->offsets[i + 1] - e->offsets[i], run);
        size_t cold = e->offsets[e->n];
        for (size_t i = 0; i < e->n; cold += executor_cold_size(e, i), i++) {
            if (executor_cold_size(e, i))
                gdbjit_add_symbol(&w, names + (uint32_t)(e->symbols[i] - e->name),
                                  (uintptr_t)(e->mem + cold), executor_cold_size(e, i), run);
        }
    }
    ehframe_table_fde(eh, w.eh_frame, run, run_addr, run_size);
    ehframe_table_end(eh, w.eh_frame, nrun);
    g->gdb = gdbjit_publish(&w);
}

/* The group and its members' array in one allocation. */
static sr_group *new_group(sr_runtime *rt, size_t cap)
{
    sr_group *g = calloc(1, sizeof *g + cap * sizeof *g->members);
    if (!g)
        return NULL;
    g->members = (sr_executor **)(g + 1);
    g->rt = rt;
    g->cap = cap;
    return g;
}

/* New groups of at most GDB_GROUP_MAX, registered now; under sr_gdb_hold, the
 * held groups instead (the newest one filled up first), registered at release.
 * Everything is allocated before anything changes. */
bool group_join(sr_runtime *rt, sr_executor **ex, size_t count)
{
    sr_group *open = rt->gdb_hold ? rt->held : NULL;
    size_t room = open ? open->cap - open->n : 0;
    size_t rest = count > room ? count - room : 0;
    size_t nfresh = (rest + GDB_GROUP_MAX - 1) / GDB_GROUP_MAX;
    sr_group *one = NULL; /* most emits make one group at most */
    sr_group **fresh = nfresh <= 1 ? &one : calloc(nfresh, sizeof *fresh);
    bool ok = fresh != NULL;
    for (size_t i = 0; ok && i < nfresh; i++) {
        /* Held groups keep filling across calls, so they get the full cap. */
        size_t left = rest - i * GDB_GROUP_MAX;
        fresh[i] = new_group(rt, rt->gdb_hold || left > GDB_GROUP_MAX ? GDB_GROUP_MAX : left);
        ok = fresh[i] != NULL;
    }
    if (!ok) {
        for (size_t i = 0; fresh && i < nfresh; i++)
            free(fresh[i]);
        if (fresh != &one)
            free(fresh);
        return false;
    }
    size_t k = 0;
    for (; open && k < count && open->n < open->cap; k++) {
        ex[k]->group = open;
        open->members[open->n++] = ex[k];
    }
    for (size_t i = 0; i < nfresh; i++) {
        sr_group *g = fresh[i];
        for (; k < count && g->n < g->cap; k++) {
            ex[k]->group = g;
            g->members[g->n++] = ex[k];
        }
        if (rt->gdb_hold) {
            g->held = true;
            g->next_held = rt->held;
            rt->held = g;
        } else {
            register_group(rt, g);
        }
    }
    if (fresh != &one)
        free(fresh);
    return true;
}

void group_release_held(sr_runtime *rt)
{
    while (rt->held) {
        sr_group *g = rt->held;
        rt->held = g->next_held;
        g->next_held = NULL;
        g->held = false;
        register_group(rt, g);
    }
}

void group_remove(sr_group *g, sr_executor *e)
{
    for (size_t m = 0; m < g->n; m++) {
        if (g->members[m] == e) {
            g->members[m] = g->members[--g->n];
            break;
        }
    }
    e->group = NULL;
}

static void unlink_held(sr_runtime *rt, sr_group *g)
{
    for (sr_group **p = &rt->held; *p; p = &(*p)->next_held) {
        if (*p == g) {
            *p = g->next_held;
            return;
        }
    }
}

void group_settle(sr_runtime *rt, sr_group *g, bool rebuild)
{
    if (rebuild || g->n == 0)
        register_group(rt, g);
    if (g->n == 0) {
        if (g->held)
            unlink_held(rt, g);
        free(g); /* with its members' array */
    }
}

void group_leave(sr_runtime *rt, sr_executor *e, bool rebuild)
{
    sr_group *g = e->group;
    group_remove(g, e);
    group_settle(rt, g, rebuild);
}
