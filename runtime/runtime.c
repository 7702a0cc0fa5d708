/* runtime.c - the runtime's lifecycle and the public API: arenas and their
 * registrations, the shim, executors.
 *
 * Unwinding: the frame pointer is pinned, so one CFI rule (the shim's row at
 * its call into JIT code) covers every executor PC. Each arena therefore gets
 * one FDE covering all of it, registered with libgcc once when the arena is
 * created: per-executor unwind work is zero. GDB learns of executors a group
 * at a time (gdbgroup.c).
 *
 * Windows x64 registers with the system's unwinder instead (winunwind.c):
 * one function table per executor and one for the shim, each in its own
 * chunk; GDB's JIT interface, perf and the registry are off there (config.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- arenas and their registrations (registry lock held) */

#ifndef _WIN32
/* False when the unwind table cannot be built: code in the arena would then
 * stop every backtrace and terminate every exception, so it must not run. */
static bool register_frames(sr_runtime *rt, sr_arena *a, const sr_fde *fde)
{
    if (!rt->cfg.frames && !rt->cfg.gdb)
        return true;
    a->eh_frame = ehframe_build(rt->set, fde, 1, &a->eh_frame_size);
    if (!a->eh_frame)
        return false;
    if (rt->cfg.frames)
        a->frames_registered = ehframe_register(a->eh_frame);
    return true;
}
#else
/* Bytes a chunk of `used` bytes needs after them for its function table (0
 * with registration off). */
static size_t unwind_slack(const sr_runtime *rt, size_t used, size_t info_len)
{
    return rt->cfg.frames ? winunwind_size(used, info_len) : 0;
}

/* Register the table written after the chunk's `used` bytes; false (with
 * the error set) when Windows refuses it: the code must not run then. */
static bool register_table(sr_runtime *rt, uint8_t *mem, size_t used, void **table)
{
    *table = NULL;
    if (!rt->cfg.frames)
        return true;
    *table = winunwind_register(mem, used);
    if (!*table) {
        sr_fail(SR_ENOMEM, "RtlAddFunctionTable refused the table of the code at %p",
                (void *)mem);
        return false;
    }
    rt->unwind_tables++;
    return true;
}

/* A table Windows does not find stays counted in frames_registered, and
 * winunwind_deregister reports it: its code is freed anyway (the caller
 * cannot keep it). */
static void deregister_table(sr_runtime *rt, void *table)
{
    if (table && winunwind_deregister(table))
        rt->unwind_tables--;
}
#endif

/* An arena around a fresh region of `size` bytes, nothing registered yet. */
static sr_arena *map_arena(const sr_runtime *rt, size_t size)
{
    sr_arena *a = calloc(1, sizeof *a);
    if (a && !jitmem_region_init(&a->region, size, rt->cfg.code_views == 2, rt->exec_prot)) {
        free(a);
        return NULL;
    }
    return a;
}

static void free_arena(sr_arena *a)
{
#ifndef _WIN32
    if (a->frames_registered)
        ehframe_deregister(a->eh_frame, a->frames_registered);
#endif
    gdbjit_unregister(a->gdb, NULL);
    free(a->eh_frame);
    free(a->owner);
    jitmem_region_fini(&a->region);
    free(a);
}

static sr_arena *new_arena(sr_runtime *rt, size_t size)
{
    sr_arena *a = map_arena(rt, size);
    if (!a)
        return NULL;
    a->region.no_reuse = rt->perf != NULL;
#ifdef _WIN32
    if (!lookup_add_arena(rt, a)) { /* its executors register their own tables */
#else
    sr_fde fde = {(uintptr_t)a->region.base, a->region.size, rt->set->executor_cfi,
                  rt->set->executor_cfi_len};
    if (!register_frames(rt, a, &fde) || !lookup_add_arena(rt, a)) {
#endif
        free_arena(a);
        return NULL;
    }
    a->next = rt->arenas;
    rt->arenas = a;
    return a;
}


/* perf: the executor, then each stencil in it (so samples name the op). */
void executor_announce_to_perf(sr_runtime *rt, const sr_executor *e)
{
    if (!rt->perf)
        return;
    sr_perf_code *codes = calloc(2 * e->n + 1, sizeof *codes); /* hot and cold parts */
    if (!codes)
        return;
    /* The arena's FDE, as registered (perf gets none where no table was built). */
    sr_fde arena_fde = {(uintptr_t)e->arena->region.base, e->arena->region.size,
                        rt->set->executor_cfi, rt->set->executor_cfi_len};
    const sr_fde *fde = e->arena->eh_frame ? &arena_fde : NULL;
    codes[0] = (sr_perf_code){e->name, (uintptr_t)e->mem, e->code_size, fde, true};
    size_t k = 1;
    for (size_t i = 0; i < e->n; i++) {
        size_t size = e->offsets[i + 1] - e->offsets[i];
        if (size)
            codes[k++] = (sr_perf_code){e->symbols[i], (uintptr_t)(e->mem + e->offsets[i]),
                                        size, fde, true};
    }
    size_t cold = e->offsets[e->n]; /* the cold parts, named as their instructions */
    for (size_t i = 0; i < e->n; cold += executor_cold_size(e, i), i++) {
        if (executor_cold_size(e, i))
            codes[k++] = (sr_perf_code){e->symbols[i], (uintptr_t)(e->mem + cold),
                                        executor_cold_size(e, i), fde, true};
    }
    perf_code_load(rt->perf, codes, k);
    free(codes);
}

/* ---- the shim */

/* The shim's arena of `size` bytes. With two views, first the proof that
 * code rewritten through the writable view is the code that runs
 * (jitmem_views_agree): where it is not (a translator such as qemu-user
 * keeps running what it translated before), an executor emitted into a
 * freed chunk, or patched, would run stale code, so JIT memory gets one view
 * (config_views_stale: a warning, or SR_EUNSUPPORTED when `asked` named 2). */
static sr_status map_shim_arena(sr_runtime *rt, const sr_config *asked, size_t size)
{
    bool probe = rt->cfg.code_views == 2;
    rt->shim_arena = map_arena(rt, size + (probe ? JITMEM_PROBE_BYTES : 0));
    if (rt->shim_arena && probe && !jitmem_views_agree(&rt->shim_arena->region)) {
        free_arena(rt->shim_arena);
        rt->shim_arena = NULL;
        sr_status st = config_views_stale(asked, &rt->cfg);
        if (st != SR_OK)
            return st;
        rt->views_reason = SR_VIEWS_STALE_CODE;
        rt->shim_arena = map_arena(rt, size);
    }
    if (!rt->shim_arena)
        return sr_fail(SR_ENOMEM, "cannot map memory for the shim: %s", jitmem_error(NULL, NULL));
    return SR_OK;
}

/* Copy and patch the shim into an arena of its own, like a one-op executor. */
static sr_status write_shim(sr_runtime *rt, const sr_config *asked, sr_layout *l)
{
    sr_instr only = {0};
    sr_stencil_set one = *rt->set;
    one.stencils = rt->set->shim;
    one.count = 1;
    one.cold_sizes = NULL; /* the shim is one part */
    uint32_t offsets[2];
    sr_emitter em;
    uint8_t *mem = NULL, *write = NULL;
    sr_status st = emit_init(&em, &one, (const void *const *)rt->symbols, true);
    em.shim = true;
    if (st == SR_OK)
        st = emit_plan(&em, &only, 1, offsets, l);
    size_t size = l->total;
#ifdef _WIN32
    if (st == SR_OK)
        size += unwind_slack(rt, l->total, rt->set->shim_unwind_info_len);
#endif
    if (st == SR_OK)
        st = map_shim_arena(rt, asked, size);
    if (st == SR_OK && !(mem = jitmem_alloc(&rt->shim_arena->region, size, &write)))
        st = sr_fail(SR_ENOMEM, "cannot map memory for the shim: %s", jitmem_error(NULL, NULL));
    if (st == SR_OK)
        st = emit_write(&em, &only, 1, offsets, l, write, (uintptr_t)mem - (uintptr_t)write);
#ifdef _WIN32
    const sr_stencil_set *set = rt->set;
    if (st == SR_OK && rt->cfg.frames)
        st = winunwind_write(write, l->total, set->shim_function_start,
                             set->shim_function_start + set->shim_function_size,
                             set->shim_unwind_info, set->shim_unwind_info_len);
#endif
    if (st == SR_OK && !jitmem_seal(&rt->shim_arena->region, mem, size))
        st = sr_fail(SR_ESYSTEM, "%s", jitmem_error("mprotect", NULL));
    emit_fini(&em);
    if (st == SR_OK)
        rt->shim = mem;
    return st;
}

static sr_status place_shim(sr_runtime *rt, const sr_config *asked)
{
    const sg_stencil *shim = rt->set->shim;
    sr_layout l;
    sr_status st = write_shim(rt, asked, &l);
    if (st != SR_OK)
        return st;
    uint8_t *mem = rt->shim;
#ifdef _WIN32
    (void)shim;
    if (!register_table(rt, mem, l.total, &rt->shim_unwind_table))
        return SR_ENOMEM;
    return SR_OK;
#else
    sr_fde fde = {(uintptr_t)mem + rt->set->shim_fde_start, rt->set->shim_fde_size,
                  rt->set->shim_fde_insns, rt->set->shim_fde_insns_len};
    if (!register_frames(rt, rt->shim_arena, &fde))
        return sr_fail(SR_ENOMEM, "out of memory for the shim's unwind table");
    if (rt->perf) {
        sr_perf_code code = {shim->name, fde.pc, fde.size,
                             rt->shim_arena->eh_frame ? &fde : NULL, false};
        perf_code_load(rt->perf, &code, 1);
    }
    if (rt->cfg.gdb && rt->shim_arena->eh_frame) {
        gdbjit_section text = {(uintptr_t)mem, l.code_size};
        gdbjit_symbol sym = {shim->name, (uintptr_t)mem + rt->set->shim_entry,
                             rt->set->shim_fde_size, 0};
        rt->shim_arena->gdb = gdbjit_register(rt->set->elf_machine, &text, 1,
                                              rt->shim_arena->eh_frame,
                                              rt->shim_arena->eh_frame_size, &sym, 1);
    }
    return SR_OK;
#endif
}

/* A set from the other target's header is refused whatever frames says:
 * frames only switches registration, and a set without this platform's
 * unwind facts is wrong for every setting. */
static sr_status target_check(const sr_stencil_set *set)
{
#ifdef _WIN32
    sr_status st = winunwind_check(set->shim_unwind_info, set->shim_unwind_info_len, "shim's");
    if (st == SR_OK)
        st = winunwind_check(set->executor_unwind_info, set->executor_unwind_info_len,
                             "executors'");
    if (st == SR_OK)
        st = winunwind_check_veneers(set);
    return st;
#else
    if (set->shim_unwind_info)
        return sr_fail(SR_EINVAL, "the stencil set is for another target: it has Windows "
                       "UNWIND_INFO (shim_unwind_info), and this runtime needs DWARF CFI");
    if (!set->cie_insns)
        return sr_fail(SR_EINVAL, "the stencil set is for another target: it has no DWARF CIE "
                       "(cie_insns is NULL)");
    return SR_OK;
#endif
}

/* ---- public API */

sr_status sr_runtime_create(const sr_stencil_set *set, const void *const *symbols,
                            const sr_config *cfg, sr_runtime **out)
{
    if (!out)
        return sr_fail(SR_EINVAL, "sr_runtime_create: out is NULL");
    *out = NULL;
    if (!set || !set->stencils || !set->shim)
        return sr_fail(SR_EINVAL, "no stencil set");
    sr_config resolved;
    sr_views_reason why;
    sr_status st = config_resolve(cfg, &resolved, &why);
    if (st == SR_OK)
        st = target_check(set);
    if (st != SR_OK)
        return st;
    sr_runtime *rt = calloc(1, sizeof *rt);
    if (!rt)
        return sr_fail(SR_ENOMEM, "out of memory");
    rt->cfg = resolved;
    rt->views_reason = why;
    rt->set = set;
    rt->exec_prot = jitmem_exec_prot(set->landing_pads);
    rt->symbols = calloc(set->symbol_count ? set->symbol_count : 1, sizeof *rt->symbols);
    if (!rt->symbols) {
        free(rt);
        return sr_fail(SR_ENOMEM, "out of memory");
    }
    for (size_t i = 0; symbols && i < set->symbol_count; i++)
        rt->symbols[i] = symbols[i];
    st = emit_init(&rt->emitter, set, (const void *const *)rt->symbols, true);
    /* The .eh_frame of every GDB object of executors, but for their FDEs' pc
     * and size (gdbgroup.c), written once here. */
    if (st == SR_OK && rt->cfg.gdb &&
        !ehframe_template(&rt->gdb_eh, set, set->executor_cfi, set->executor_cfi_len))
        st = sr_fail(SR_ENOMEM, "out of memory");
    if (st != SR_OK) {
        sr_runtime_destroy(rt);
        return st;
    }
    sr_registry_lock();
    if (rt->cfg.perf != SR_PERF_OFF)
        rt->perf = perf_open((sr_perf_mode)rt->cfg.perf, set);
    st = place_shim(rt, cfg);
    if (st == SR_OK && rt->cfg.registry == 1 && !(rt->reg = registry_add_runtime(rt)))
        st = sr_fail(SR_ENOMEM, "out of memory");
    sr_registry_unlock();
    if (st != SR_OK) {
        sr_runtime_destroy(rt);
        return st;
    }
    *out = rt;
    return SR_OK;
}

void sr_runtime_destroy(sr_runtime *rt)
{
    if (!rt)
        return;
    sr_registry_lock();
    registry_remove_runtime(rt->reg); /* first: readers must not follow what goes next */
    for (sr_arena *a = rt->arenas, *next; a; a = next) {
        next = a->next;
        while (a->executors) {
            sr_executor *e = a->executors;
            executor_unlink(e);
#ifdef _WIN32
            deregister_table(rt, e->unwind_table);
#endif
            group_leave(rt, e, false); /* each object goes once, with its last member */
            executor_destroy(e);
        }
        free_arena(a);
    }
#ifdef _WIN32
    deregister_table(rt, rt->shim_unwind_table);
#endif
    if (rt->shim_arena)
        free_arena(rt->shim_arena);
    perf_close(rt->perf);
    lookup_fini(rt);
    record_pool_fini(&rt->records); /* after lookup_fini: it returns retired records */
    sr_registry_unlock();
    emit_fini(&rt->emitter);
    ehframe_template_free(&rt->gdb_eh);
    gdbjit_spares_free(&rt->gdb_spares);
    free(rt->symbols);
    free(rt);
}

void *sr_shim_entry(const sr_runtime *rt)
{
    return rt ? rt->shim + rt->set->shim_entry : NULL;
}

sr_config sr_runtime_config(const sr_runtime *rt)
{
    return rt ? rt->cfg : (sr_config)SR_CONFIG_DEFAULT;
}

sr_views_reason sr_runtime_views_reason(const sr_runtime *rt)
{
    return rt ? rt->views_reason : SR_VIEWS_CONFIGURED;
}

/* A chunk of `bytes` from an existing arena or a new one: where it runs, and
 * in *write where to write it. */
static uint8_t *allocate(sr_runtime *rt, size_t bytes, sr_arena **arena, uint8_t **write)
{
    for (sr_arena *a = rt->arenas; a; a = a->next) {
        uint8_t *p = jitmem_alloc(&a->region, bytes, write);
        if (p) {
            *arena = a;
            return p;
        }
    }
    size_t size = bytes > rt->cfg.arena_size ? bytes : rt->cfg.arena_size;
    sr_arena *a = new_arena(rt, size);
    *arena = a;
    return a ? jitmem_alloc(&a->region, bytes, write) : NULL;
}

/* Copy, patch and seal one executor; the caller holds the registry lock and
 * registers it with GDB (as part of a group). */
static sr_status emit_one(sr_runtime *rt, const sr_program *prog, sr_executor **out)
{
    *out = NULL;
    sr_executor *e = NULL;
    sr_status st = executor_new(rt, prog->code, prog->n, prog->name, &e);
    if (st != SR_OK)
        return st;
    sr_layout l;
    st = emit_plan(&rt->emitter, prog->code, prog->n, e->offsets, &l);
    if (st != SR_OK) {
        executor_destroy(e);
        return st;
    }
    e->code_size = l.code_size;
    e->text_size = l.data_start; /* veneers, if any, end where data starts */
    /* perf's injected image of this code carries its unwind tables right after
     * the code; keep that much of our own chunk so no other executor's
     * image can cover them. */
    e->mem_size = l.total + perf_unwind_slack(rt->perf);
#ifdef _WIN32
    e->mem_size += unwind_slack(rt, l.total, rt->set->executor_unwind_info_len);
#endif
    errno = 0;
    uint8_t *write;
    e->mem = allocate(rt, e->mem_size, &e->arena, &write);
    if (!e->mem) {
        executor_destroy(e);
        return sr_fail(SR_ENOMEM, "cannot map %zu bytes of code memory, or its unwind table: %s",
                       l.total, jitmem_error(NULL, "out of memory"));
    }
    st = emit_write(&rt->emitter, prog->code, prog->n, e->offsets, &l, write,
                    (uintptr_t)e->mem - (uintptr_t)write);
#ifdef _WIN32
    if (st == SR_OK && rt->cfg.frames) /* its whole text: instructions and veneers */
        st = winunwind_write(write, l.total, 0, e->text_size, rt->set->executor_unwind_info,
                             rt->set->executor_unwind_info_len);
#endif
    if (st == SR_OK && !jitmem_seal(&e->arena->region, e->mem, e->mem_size))
        st = sr_fail(SR_ESYSTEM, "%s", jitmem_error("mprotect", NULL));
#ifdef _WIN32
    if (st == SR_OK && !register_table(rt, e->mem, l.total, &e->unwind_table))
        st = SR_ENOMEM;
#endif
    if (st != SR_OK) {
        jitmem_release(&e->arena->region, e->mem, e->mem_size);
        executor_destroy(e);
        return st;
    }
    e->next = e->arena->executors;
    if (e->next)
        e->next->prev = e;
    e->arena->executors = e;
    e->arena->nexecutors++;
    rt->executors++;
    atomic_store(&e->state, EXECUTOR_LIVE); /* before a lookup can return it */
    lookup_publish(e, true);
    e->id = registry_next_id();
    registry_add(rt->reg, e);
    executor_announce_to_perf(rt, e);
    *out = e;
    return SR_OK;
}

/* Free ex; its group is left for the caller to settle when `settle` is false. */
static void free_executor_locked(sr_runtime *rt, sr_executor *ex, bool settle)
{
    atomic_store(&ex->state, 0); /* from now on every call refuses it */
    executor_unlink(ex);
    registry_remove(rt->reg, ex);
#ifdef _WIN32
    deregister_table(rt, ex->unwind_table); /* before its chunk can be handed out again */
#endif
    lookup_publish(ex, false); /* before its chunk can be handed out again */
    jitmem_release(&ex->arena->region, ex->mem, ex->mem_size);
    rt->executors--;
    if (ex->group && settle)
        group_leave(rt, ex, true);
    else if (ex->group)
        group_remove(ex->group, ex);
    lookup_retire(rt, ex);
}

sr_status sr_emit_batch(sr_runtime *rt, const sr_program *progs, size_t count,
                        sr_executor **out)
{
    if (!rt || (count && (!progs || !out)))
        return sr_fail(SR_EINVAL, "sr_emit_batch: %s is NULL", !rt ? "the runtime"
                                                             : !progs ? "progs" : "out");
    for (size_t i = 0; i < count; i++) {
        out[i] = NULL;
        if (progs[i].n && !progs[i].code)
            return sr_fail(SR_EINVAL, "sr_emit_batch: program %zu has %zu instructions and "
                           "no code", i, progs[i].n);
        /* Before any of its code is read: a count this large cannot be an
         * array's, and would overflow the executor's sizes. */
        if (progs[i].n > SR_MAX_INSTRUCTIONS)
            return sr_fail(SR_EINVAL, "sr_emit_batch: program %zu has %zu instructions, "
                           "more than SR_MAX_INSTRUCTIONS (%zu)", i, progs[i].n,
                           (size_t)SR_MAX_INSTRUCTIONS);
    }
    sr_status st = SR_OK;
    size_t done = 0;
    sr_registry_lock();
    for (; done < count && st == SR_OK; done++)
        st = emit_one(rt, &progs[done], &out[done]);
    if (st == SR_OK && !group_join(rt, out, count))
        st = sr_fail(SR_ENOMEM, "out of memory");
    if (st != SR_OK) { /* all or nothing; none of them is in a group yet */
        for (size_t i = 0; i < done; i++) {
            if (out[i])
                free_executor_locked(rt, out[i], true);
            out[i] = NULL;
        }
    }
    sr_registry_unlock();
    return st;
}

sr_status sr_emit(sr_runtime *rt, const sr_instr *code, size_t n, const char *name,
                  sr_executor **out)
{
    if (!out)
        return sr_fail(SR_EINVAL, "sr_emit: out is NULL");
    sr_program prog = {code, n, name};
    *out = NULL;
    return sr_emit_batch(rt, &prog, 1, out);
}

void sr_executor_free(sr_executor *ex)
{
    if (!ex)
        return;
    sr_runtime *rt = ex->rt;
    sr_registry_lock();
    if (executor_check("sr_executor_free", ex) == SR_OK)
        free_executor_locked(rt, ex, true);
    sr_registry_unlock();
}

static int by_pointer(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)*(sr_executor *const *)a, y = (uintptr_t)*(sr_executor *const *)b;
    return (x > y) - (x < y);
}

/* An executor freed already, or listed twice (it would be freed twice):
 * refuse the whole batch. Registry lock held, so none is freed meanwhile. */
static sr_status check_batch(sr_executor *const *ex, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (ex[i] && !executor_live(ex[i]))
            return sr_fail(SR_EINVAL, "sr_executor_free_batch: executor %zu (id %llu) was "
                           "already freed", i, (unsigned long long)ex[i]->id);
    sr_executor **sorted = malloc((count ? count : 1) * sizeof *sorted);
    if (!sorted)
        return sr_fail(SR_ENOMEM, "out of memory");
    memcpy(sorted, ex, count * sizeof *sorted);
    qsort(sorted, count, sizeof *sorted, by_pointer);
    sr_status st = SR_OK;
    for (size_t i = 1; i < count && st == SR_OK; i++)
        if (sorted[i] && sorted[i] == sorted[i - 1])
            st = sr_fail(SR_EINVAL, "sr_executor_free_batch: executor '%s' is listed twice",
                         sorted[i]->name);
    free(sorted);
    return st;
}

sr_status sr_executor_free_batch(sr_executor *const *ex, size_t count)
{
    if (count && !ex)
        return sr_fail(SR_EINVAL, "sr_executor_free_batch: ex is NULL");
    if (count > SIZE_MAX / sizeof *ex) /* no array is that long: its bytes would wrap */
        return sr_fail(SR_EINVAL, "sr_executor_free_batch: count %zu is larger than any "
                       "array", count);
    /* Each group touched is rebuilt once, after all its departing members left. */
    sr_group **touched = calloc(count ? count : 1, sizeof *touched);
    sr_registry_lock();
    sr_status st = check_batch(ex, count);
    if (st != SR_OK) {
        sr_registry_unlock();
        free(touched);
        return st;
    }
    size_t ntouched = 0;
    for (size_t i = 0; i < count; i++) {
        if (!ex[i])
            continue;
        sr_runtime *rt = ex[i]->rt;
        sr_group *g = ex[i]->group;
        if (!touched) { /* out of memory: free them one by one */
            free_executor_locked(rt, ex[i], true);
            continue;
        }
        if (g && !g->settling) {
            g->settling = true;
            touched[ntouched++] = g;
        }
        free_executor_locked(rt, ex[i], false);
    }
    for (size_t i = 0; i < ntouched; i++) {
        touched[i]->settling = false;
        group_settle(touched[i]->rt, touched[i], true);
    }
    sr_registry_unlock();
    free(touched);
    return SR_OK;
}

void sr_gdb_hold(sr_runtime *rt)
{
    if (!rt)
        return;
    sr_registry_lock();
    rt->gdb_hold++;
    sr_registry_unlock();
}

void sr_gdb_release(sr_runtime *rt)
{
    if (!rt)
        return;
    sr_registry_lock();
    if (rt->gdb_hold && --rt->gdb_hold == 0)
        group_release_held(rt);
    sr_registry_unlock();
}

sr_stats sr_runtime_stats(const sr_runtime *rt)
{
    sr_stats s = {0};
    if (!rt)
        return s;
    sr_registry_lock();
    for (const sr_arena *a = rt->arenas; a; a = a->next) {
        s.arenas++;
        s.frames_registered += a->frames_registered != 0;
        for (const sr_executor *e = a->executors; e; e = e->next) { /* count each group once */
            s.gdb_entries += e->group && e->group->gdb && e->group->members[0] == e;
            s.gdb_held += e->group && e->group->held;
        }
    }
    if (rt->shim_arena) {
        s.frames_registered += rt->shim_arena->frames_registered != 0;
        s.gdb_entries += rt->shim_arena->gdb != NULL;
    }
#ifdef _WIN32
    s.frames_registered = rt->unwind_tables; /* one per executor, and the shim's */
#endif
    s.executors = rt->executors;
    sr_registry_unlock();
    return s;
}
