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
    gdbjit_unregister(g->gdb);
    g->gdb = NULL;
    if (!rt->cfg.gdb || g->held || g->n == 0)
        return;
    qsort(g->members, g->n, sizeof *g->members, by_address);
    size_t nsyms = 0;
    for (size_t m = 0; m < g->n; m++)
        nsyms += 1 + g->members[m]->n;
    gdbjit_section *text = calloc(g->n, sizeof *text); /* at most one run per member */
    gdbjit_symbol *syms = calloc(nsyms, sizeof *syms);
    size_t k = 0, nrun = 0;
    const uint8_t *run_end = NULL; /* first byte after the last member's chunk */
    for (size_t m = 0; text && syms && m < g->n; m++) {
        const sr_executor *e = g->members[m];
        if (e->mem != run_end)
            text[nrun++].addr = (uintptr_t)e->mem;
        gdbjit_section *run = &text[nrun - 1];
        run->size = (uintptr_t)(e->mem + e->text_size) - run->addr;
        run_end = e->mem + jitmem_chunk_size(&e->arena->region, e->mem_size);
        syms[k++] = (gdbjit_symbol){e->name, (uintptr_t)e->mem, 0, nrun - 1};
        for (size_t i = 0; i < e->n; i++)
            syms[k++] = (gdbjit_symbol){e->symbols[i], (uintptr_t)(e->mem + e->offsets[i]),
                                        e->offsets[i + 1] - e->offsets[i], nrun - 1};
    }
    sr_fde *fdes = text && syms ? calloc(nrun, sizeof *fdes) : NULL;
    for (size_t r = 0; fdes && r < nrun; r++)
        fdes[r] = (sr_fde){text[r].addr, text[r].size, rt->set->executor_cfi,
                           rt->set->executor_cfi_len};
    size_t eh_size = 0;
    uint8_t *eh = fdes ? ehframe_build(rt->set, fdes, nrun, &eh_size) : NULL;
    if (eh)
        g->gdb = gdbjit_register(rt->set->elf_machine, text, nrun, eh, eh_size, syms, k);
    free(eh);
    free(fdes);
    free(syms);
    free(text);
}

static sr_group *new_group(sr_runtime *rt, size_t cap)
{
    sr_group *g = calloc(1, sizeof *g);
    if (g)
        g->members = calloc(cap, sizeof *g->members);
    if (!g || !g->members) {
        free(g);
        return NULL;
    }
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
    sr_group **fresh = calloc(nfresh ? nfresh : 1, sizeof *fresh);
    bool ok = fresh != NULL;
    for (size_t i = 0; ok && i < nfresh; i++) {
        /* Held groups keep filling across calls, so they get the full cap. */
        size_t left = rest - i * GDB_GROUP_MAX;
        fresh[i] = new_group(rt, rt->gdb_hold || left > GDB_GROUP_MAX ? GDB_GROUP_MAX : left);
        ok = fresh[i] != NULL;
    }
    if (!ok) {
        for (size_t i = 0; fresh && i < nfresh; i++)
            if (fresh[i])
                free(fresh[i]->members), free(fresh[i]);
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
        free(g->members);
        free(g);
    }
}

void group_leave(sr_runtime *rt, sr_executor *e, bool rebuild)
{
    sr_group *g = e->group;
    group_remove(g, e);
    group_settle(rt, g, rebuild);
}
