/* runtime.c - the runtime object: configuration, the shim, arenas and their
 * registrations.
 *
 * Unwinding: the frame pointer is pinned, so one CFI rule (the shim's row at
 * its call into JIT code) covers every executor PC. Each arena therefore gets
 * one FDE covering all of it, registered with libgcc once when the arena is
 * created: per-executor unwind work is zero. GDB gets one in-memory object per
 * group of executors emitted together (sr_emit_batch, or under sr_gdb_hold),
 * with a section and an FDE per contiguous run of them and symbols per executor
 * and stencil. What GDB does with each object grows with what GDB already
 * holds (see register_group), so the runtime hands it few objects and few
 * sections. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <strings.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define DEFAULT_ARENA_SIZE ((size_t)1 << 20)
#define MAX_ARENA_SIZE ((size_t)1 << 40) /* address space only, but some limit */

/* ---- the library's one registry lock, reset around fork() */

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t registry_once = PTHREAD_ONCE_INIT;

static void registry_prepare(void) { pthread_mutex_lock(&registry_lock); }
static void registry_parent(void) { pthread_mutex_unlock(&registry_lock); }
/* The child has one thread, the one that forked and holds the lock. */
static void registry_child(void) { pthread_mutex_unlock(&registry_lock); }

static void registry_init(void)
{
    pthread_atfork(registry_prepare, registry_parent, registry_child);
}

void sr_registry_lock(void)
{
    pthread_once(&registry_once, registry_init);
    pthread_mutex_lock(&registry_lock);
}

void sr_registry_unlock(void)
{
    pthread_mutex_unlock(&registry_lock);
}

/* ---- errors */

static _Thread_local char last_error[256] = "no error";

sr_status sr_fail(sr_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return s;
}

const char *sr_last_error(void)
{
    return last_error;
}

const char *sr_strerror(sr_status s)
{
    static const char *const names[] = {
        "ok", "out of memory", "invalid argument", "value out of range for its hole",
        "unsupported hole kind", "run-time symbol without a value",
        "last instruction falls off the end", "system call failed",
    };
    return (unsigned)s < sizeof names / sizeof *names ? names[s] : "unknown status";
}

/* ---- configuration */

/* One warning per variable per process, for a value that is not understood
 * (the setting then keeps its default). */
typedef struct env_var {
    const char *name;
    atomic_flag warned;
} env_var;

static env_var env_frames = {"STENCILRT_FRAMES", ATOMIC_FLAG_INIT};
static env_var env_gdb = {"STENCILRT_GDB", ATOMIC_FLAG_INIT};
static env_var env_perf_mode = {"STENCILRT_PERF", ATOMIC_FLAG_INIT};

static void env_warn(env_var *v, const char *value, const char *accepted, const char *fallback)
{
    if (!atomic_flag_test_and_set(&v->warned))
        fprintf(stderr, "stencilrt: warning: %s=%s is not one of %s; using %s\n", v->name,
                value, accepted, fallback);
}

static bool one_of(const char *v, const char *const *words)
{
    for (; *words; words++)
        if (!strcasecmp(v, *words))
            return true;
    return false;
}

static int env_switch(env_var *var, int fallback)
{
    static const char *const on[] = {"1", "on", "yes", "true", NULL};
    static const char *const off[] = {"0", "off", "no", "false", NULL};
    const char *v = getenv(var->name);
    if (!v || !*v)
        return fallback;
    if (one_of(v, on))
        return 1;
    if (one_of(v, off))
        return 0;
    env_warn(var, v, "0, 1, on, off, yes, no, true, false", fallback ? "1 (on)" : "0 (off)");
    return fallback;
}

static int env_perf(void)
{
    static const char *const off[] = {"off", "0", "no", "false", "none", NULL};
    const char *v = getenv(env_perf_mode.name);
    if (!v || !*v || one_of(v, off))
        return SR_PERF_OFF;
    if (!strcasecmp(v, "map"))
        return SR_PERF_MAP;
    if (!strcasecmp(v, "jitdump"))
        return SR_PERF_JITDUMP;
    env_warn(&env_perf_mode, v, "off, map, jitdump", "off");
    return SR_PERF_OFF;
}

static sr_status resolve_config(const sr_config *in, sr_config *out)
{
    sr_config c = in ? *in : (sr_config)SR_CONFIG_DEFAULT;
    if (c.frames < -1 || c.frames > 1 || c.gdb < -1 || c.gdb > 1 || c.perf < -1 ||
        c.perf > SR_PERF_JITDUMP)
        return sr_fail(SR_EINVAL, "sr_config: frames %d, gdb %d, perf %d: each must be -1 "
                       "(environment), 0 or 1 (perf: an sr_perf_mode)", c.frames, c.gdb, c.perf);
    if (c.arena_size > MAX_ARENA_SIZE)
        return sr_fail(SR_EINVAL, "sr_config: arena_size %zu is larger than %zu bytes",
                       c.arena_size, MAX_ARENA_SIZE);
    if (c.frames < 0)
        c.frames = env_switch(&env_frames, 1);
    if (c.gdb < 0)
        c.gdb = env_switch(&env_gdb, 1);
    if (c.perf < 0)
        c.perf = env_perf();
    if (!c.arena_size)
        c.arena_size = DEFAULT_ARENA_SIZE;
    *out = c;
    return SR_OK;
}

/* ---- arenas and their registrations (registry lock held) */

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

static sr_arena *new_arena(sr_runtime *rt, size_t size)
{
    sr_arena *a = jitmem_arena_new(size);
    if (!a)
        return NULL;
    a->no_reuse = rt->perf != NULL;
    sr_fde fde = {(uintptr_t)a->base, a->size, rt->set->executor_cfi,
                  rt->set->executor_cfi_len};
    if (!register_frames(rt, a, &fde)) {
        jitmem_arena_free(a);
        return NULL;
    }
    a->next = rt->arenas;
    rt->arenas = a;
    return a;
}

static void free_arena(sr_arena *a)
{
    if (a->frames_registered)
        ehframe_deregister(a->eh_frame, a->frames_registered);
    gdbjit_unregister(a->gdb);
    free(a->eh_frame);
    jitmem_arena_free(a);
}

/* "<op>@<executor>[<index>]": what debuggers and profilers call instruction i
 * (malloc'ed; NULL when out of memory). */
static char *stencil_symbol(const sr_runtime *rt, const sr_executor *e, size_t i)
{
    char *name;
    if (asprintf(&name, "%s@%s[%zu]", rt->set->stencils[e->ops[i]].name, e->name, i) < 0)
        return NULL;
    return name;
}

static int by_address(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)(*(sr_executor *const *)a)->mem;
    uintptr_t y = (uintptr_t)(*(sr_executor *const *)b)->mem;
    return (x > y) - (x < y);
}

/* The GDB object of a group: symbols name each executor (zero-sized, so the
 * sized stencil symbols win inside it) and each instruction. Members whose page
 * runs touch share one .text section and one FDE (the executor rule holds at
 * every executor PC, and the data and GOT between two members' code belong to
 * the first, so no other object can claim them): GDB re-sorts every section it
 * knows at each registration, and a batch emitted into fresh pages is then one
 * section, not one per executor. Built again, without the departed, when a
 * member is freed. */
static void register_group(sr_runtime *rt, sr_group *g)
{
    gdbjit_unregister(g->gdb);
    g->gdb = NULL;
    if (!rt->cfg.gdb || g->held || g->n == 0)
        return;
    qsort(g->members, g->n, sizeof *g->members, by_address);
    size_t page = jitmem_page_size(), nsyms = 0;
    for (size_t m = 0; m < g->n; m++)
        nsyms += 1 + g->members[m]->n;
    gdbjit_section *text = calloc(g->n, sizeof *text); /* at most one run per member */
    gdbjit_symbol *syms = calloc(nsyms, sizeof *syms);
    size_t k = 0, nrun = 0;
    const uint8_t *run_end = NULL; /* first byte after the last member's pages */
    for (size_t m = 0; text && syms && m < g->n; m++) {
        const sr_executor *e = g->members[m];
        if (e->mem != run_end)
            text[nrun++].addr = (uintptr_t)e->mem;
        gdbjit_section *run = &text[nrun - 1];
        run->size = (uintptr_t)(e->mem + e->text_size) - run->addr;
        run_end = e->mem + (e->mem_size + page - 1) / page * page;
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

static void unlink_held(sr_runtime *rt, sr_group *g)
{
    for (sr_group **p = &rt->held; *p; p = &(*p)->next_held) {
        if (*p == g) {
            *p = g->next_held;
            return;
        }
    }
}

static void group_remove(sr_group *g, sr_executor *e)
{
    for (size_t m = 0; m < g->n; m++) {
        if (g->members[m] == e) {
            g->members[m] = g->members[--g->n];
            break;
        }
    }
    e->group = NULL;
}

/* After members left: rebuild the group's object (unless `rebuild` is false:
 * the whole runtime is going), or drop it and the group with its last member. */
static void group_settle(sr_runtime *rt, sr_group *g, bool rebuild)
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

static void leave_group(sr_runtime *rt, sr_executor *e, bool rebuild)
{
    sr_group *g = e->group;
    group_remove(g, e);
    group_settle(rt, g, rebuild);
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

/* Put `count` freshly emitted executors into groups: new ones of at most
 * GDB_GROUP_MAX, registered now; under sr_gdb_hold, the held groups instead
 * (the newest one filled up first), registered at release. Everything is
 * allocated before anything changes: false (and nothing done) if out of
 * memory. */
static bool join_groups(sr_runtime *rt, sr_executor **ex, size_t count)
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

/* perf: the executor, then each stencil in it (so samples name the op). */
static void announce_to_perf(sr_runtime *rt, const sr_executor *e)
{
    if (!rt->perf)
        return;
    sr_perf_code *codes = calloc(e->n + 1, sizeof *codes);
    if (!codes)
        return;
    /* The arena's FDE, as registered (perf gets none where no table was built). */
    sr_fde arena_fde = {(uintptr_t)e->arena->base, e->arena->size, rt->set->executor_cfi,
                        rt->set->executor_cfi_len};
    const sr_fde *fde = e->arena->eh_frame ? &arena_fde : NULL;
    codes[0] = (sr_perf_code){e->name, (uintptr_t)e->mem, e->code_size, fde, true};
    size_t k = 1;
    for (size_t i = 0; i < e->n; i++) {
        size_t size = e->offsets[i + 1] - e->offsets[i];
        if (size)
            codes[k++] = (sr_perf_code){e->symbols[i], (uintptr_t)(e->mem + e->offsets[i]),
                                        size, fde, true};
    }
    perf_code_load(rt->perf, codes, k);
    free(codes);
}

/* ---- the shim */

/* Copy and patch the shim into an arena of its own, like a one-op executor. */
static sr_status write_shim(sr_runtime *rt, sr_layout *l)
{
    sr_instr only = {0};
    sr_stencil_set one = *rt->set;
    one.stencils = rt->set->shim;
    one.count = 1;
    uint32_t offsets[2];
    sr_emitter em;
    uint8_t *mem = NULL;
    sr_status st = emit_init(&em, &one, (const void *const *)rt->symbols, true);
    if (st == SR_OK)
        st = emit_plan(&em, &only, 1, offsets, l);
    if (st == SR_OK) {
        rt->shim_arena = jitmem_arena_new(l->total);
        mem = rt->shim_arena ? jitmem_alloc(rt->shim_arena, l->total) : NULL;
        if (!mem)
            st = sr_fail(SR_ENOMEM, "cannot map memory for the shim: %s", strerror(errno));
    }
    if (st == SR_OK)
        st = emit_write(&em, &only, 1, offsets, l, mem);
    if (st == SR_OK && !jitmem_seal(mem, l->total))
        st = sr_fail(SR_ESYSTEM, "mprotect: %s", strerror(errno));
    emit_fini(&em);
    if (st == SR_OK)
        rt->shim = mem;
    return st;
}

static sr_status place_shim(sr_runtime *rt)
{
    const sg_stencil *shim = rt->set->shim;
    sr_layout l;
    sr_status st = write_shim(rt, &l);
    if (st != SR_OK)
        return st;
    uint8_t *mem = rt->shim;
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
    sr_status st = resolve_config(cfg, &resolved);
    if (st != SR_OK)
        return st;
    sr_runtime *rt = calloc(1, sizeof *rt);
    if (!rt)
        return sr_fail(SR_ENOMEM, "out of memory");
    rt->cfg = resolved;
    rt->set = set;
    rt->symbols = calloc(set->symbol_count ? set->symbol_count : 1, sizeof *rt->symbols);
    if (!rt->symbols) {
        free(rt);
        return sr_fail(SR_ENOMEM, "out of memory");
    }
    for (size_t i = 0; symbols && i < set->symbol_count; i++)
        rt->symbols[i] = symbols[i];
    st = emit_init(&rt->emitter, set, (const void *const *)rt->symbols, true);
    if (st != SR_OK) {
        sr_runtime_destroy(rt);
        return st;
    }
    sr_registry_lock();
    if (rt->cfg.perf != SR_PERF_OFF)
        rt->perf = perf_open((sr_perf_mode)rt->cfg.perf, set);
    st = place_shim(rt);
    sr_registry_unlock();
    if (st != SR_OK) {
        sr_runtime_destroy(rt);
        return st;
    }
    *out = rt;
    return SR_OK;
}

static void executor_unlink(sr_executor *e)
{
    sr_arena *a = e->arena;
    if (e->prev)
        e->prev->next = e->next;
    else
        a->executors = e->next;
    if (e->next)
        e->next->prev = e->prev;
    a->nexecutors--;
}

static void executor_destroy(sr_executor *e)
{
    for (size_t i = 0; e->symbols && i < e->n; i++)
        free(e->symbols[i]);
    free(e->symbols);
    free(e->name);
    free(e->offsets);
    free(e->ops);
    free(e);
}

void sr_runtime_destroy(sr_runtime *rt)
{
    if (!rt)
        return;
    sr_registry_lock();
    for (sr_arena *a = rt->arenas, *next; a; a = next) {
        next = a->next;
        while (a->executors) {
            sr_executor *e = a->executors;
            executor_unlink(e);
            leave_group(rt, e, false); /* each object goes once, with its last member */
            executor_destroy(e);
        }
        free_arena(a);
    }
    if (rt->shim_arena)
        free_arena(rt->shim_arena);
    perf_close(rt->perf);
    sr_registry_unlock();
    emit_fini(&rt->emitter);
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

/* A page run for `bytes`, from an existing arena or a new one. */
static uint8_t *allocate(sr_runtime *rt, size_t bytes, sr_arena **arena)
{
    for (sr_arena *a = rt->arenas; a; a = a->next) {
        uint8_t *p = jitmem_alloc(a, bytes);
        if (p) {
            *arena = a;
            return p;
        }
    }
    size_t size = bytes > rt->cfg.arena_size ? bytes : rt->cfg.arena_size;
    sr_arena *a = new_arena(rt, size);
    *arena = a;
    return a ? jitmem_alloc(a, bytes) : NULL;
}

static sr_executor *new_executor(const sr_runtime *rt, const sr_instr *code, size_t n,
                                 const char *name)
{
    sr_executor *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->name = strdup(name && *name ? name : "executor");
    e->offsets = calloc(n + 1, sizeof *e->offsets);
    e->ops = calloc(n ? n : 1, sizeof *e->ops);
    e->symbols = calloc(n ? n : 1, sizeof *e->symbols);
    e->n = n;
    bool ok = e->name && e->offsets && e->ops && e->symbols;
    for (size_t i = 0; ok && i < n; i++) {
        e->ops[i] = code[i].op;
        /* Names are made once, before validation: an out-of-range op gets "?". */
        e->symbols[i] = code[i].op < rt->set->count ? stencil_symbol(rt, e, i) : strdup("?");
        ok = e->symbols[i] != NULL;
    }
    if (!ok) {
        executor_destroy(e);
        return NULL;
    }
    return e;
}

/* Copy, patch and seal one executor; the caller holds the registry lock and
 * registers it with GDB (as part of a group). */
static sr_status emit_one(sr_runtime *rt, const sr_program *prog, sr_executor **out)
{
    *out = NULL;
    sr_executor *e = new_executor(rt, prog->code, prog->n, prog->name);
    if (!e)
        return sr_fail(SR_ENOMEM, "out of memory");
    sr_layout l;
    sr_status st = emit_plan(&rt->emitter, prog->code, prog->n, e->offsets, &l);
    if (st != SR_OK) {
        executor_destroy(e);
        return st;
    }
    e->rt = rt;
    e->code_size = l.code_size;
    e->text_size = l.data_start; /* veneers, if any, end where data starts */
    /* perf's injected image of this code carries its unwind tables right after
     * the code; keep that much of our own page run so no other executor's
     * image can cover them. */
    e->mem_size = l.total + perf_unwind_slack(rt->perf);
    errno = 0;
    e->mem = allocate(rt, e->mem_size, &e->arena);
    if (!e->mem) {
        executor_destroy(e);
        return sr_fail(SR_ENOMEM, "cannot map %zu bytes of code memory, or its unwind table: %s",
                       l.total, errno ? strerror(errno) : "out of memory");
    }
    st = emit_write(&rt->emitter, prog->code, prog->n, e->offsets, &l, e->mem);
    if (st == SR_OK && !jitmem_seal(e->mem, e->mem_size))
        st = sr_fail(SR_ESYSTEM, "mprotect: %s", strerror(errno));
    if (st != SR_OK) {
        jitmem_release(e->arena, e->mem, e->mem_size);
        executor_destroy(e);
        return st;
    }
    e->next = e->arena->executors;
    if (e->next)
        e->next->prev = e;
    e->arena->executors = e;
    e->arena->nexecutors++;
    rt->executors++;
    announce_to_perf(rt, e);
    *out = e;
    return SR_OK;
}

/* Free ex; its group is left for the caller to settle when `settle` is false. */
static void free_executor_locked(sr_runtime *rt, sr_executor *ex, bool settle)
{
    executor_unlink(ex);
    jitmem_release(ex->arena, ex->mem, ex->mem_size);
    rt->executors--;
    if (ex->group && settle)
        leave_group(rt, ex, true);
    else if (ex->group)
        group_remove(ex->group, ex);
    executor_destroy(ex);
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
    }
    sr_status st = SR_OK;
    size_t done = 0;
    sr_registry_lock();
    for (; done < count && st == SR_OK; done++)
        st = emit_one(rt, &progs[done], &out[done]);
    if (st == SR_OK && !join_groups(rt, out, count))
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

void *sr_executor_entry(const sr_executor *ex)
{
    return ex ? ex->mem : NULL;
}

size_t sr_executor_code_size(const sr_executor *ex)
{
    return ex ? ex->code_size : 0;
}

void *sr_executor_instr(const sr_executor *ex, size_t i)
{
    return ex && i <= ex->n ? ex->mem + ex->offsets[i] : NULL;
}

void sr_executor_free(sr_executor *ex)
{
    if (!ex)
        return;
    sr_runtime *rt = ex->rt;
    sr_registry_lock();
    free_executor_locked(rt, ex, true);
    sr_registry_unlock();
}

static int by_pointer(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)*(sr_executor *const *)a, y = (uintptr_t)*(sr_executor *const *)b;
    return (x > y) - (x < y);
}

/* An executor listed twice would be freed twice: refuse the whole batch. */
static sr_status check_distinct(sr_executor *const *ex, size_t count)
{
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
    sr_status st = check_distinct(ex, count);
    if (st != SR_OK)
        return st;
    /* Each group touched is rebuilt once, after all its departing members left. */
    sr_group **touched = calloc(count ? count : 1, sizeof *touched);
    sr_registry_lock();
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
    if (rt->gdb_hold && --rt->gdb_hold == 0) {
        while (rt->held) {
            sr_group *g = rt->held;
            rt->held = g->next_held;
            g->next_held = NULL;
            g->held = false;
            register_group(rt, g);
        }
    }
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
    s.executors = rt->executors;
    sr_registry_unlock();
    return s;
}
