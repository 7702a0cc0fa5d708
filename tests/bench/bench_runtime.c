/* bench_runtime - stencilrt costs, measured side by side in one run.
 * Prints "name value unit" lines; tests/bench/run.py turns them into a table. */
#include <execinfo.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "jit_stencils.h"
#include "tinyvm.h"

typedef vm_value shim_fn(vm_frame *frame, vm_value *sp, void *code);

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- helpers the stencils call */
static double backtrace_seconds;
static long backtrace_calls;

vm_value vm_call(vm_frame *caller, vm_value function, vm_value argc, vm_value *args)
{
    (void)caller, (void)function, (void)argc, (void)args;
    return 0;
}

vm_value vm_print(vm_frame *frame, vm_value value)
{
    (void)frame;
    return value;
}

vm_value vm_native(vm_frame *frame, vm_value which, vm_value arg)
{
    (void)frame, (void)which;
    void *pcs[64];
    double t0 = now();
    int n = backtrace(pcs, 64);
    backtrace_seconds += now() - t0;
    backtrace_calls++;
    return arg + n;
}

_Noreturn void vm_trap(vm_frame *frame, const char *why)
{
    (void)frame;
    fprintf(stderr, "trap: %s\n", why);
    exit(1);
}

static const sr_stencil_set set = SR_STENCIL_SET_FROM_HEADER;
static const void *symbols[SG_SYM__COUNT] = {
    [SG_SYM_vm_call] = (const void *)vm_call, [SG_SYM_vm_print] = (const void *)vm_print,
    [SG_SYM_vm_native] = (const void *)vm_native, [SG_SYM_vm_trap] = (const void *)vm_trap,
};

/* A realistic instruction mix: the body of loop.tvm, repeated. */
static sr_instr *program(size_t n)
{
    static const sr_instr body[] = {
        {SG_OP_load, 0, {0}},  {SG_OP_push, 0, {3000}}, {SG_OP_lt, 0, {0}},
        {SG_OP_load, 0, {1}},  {SG_OP_load, 0, {0}},    {SG_OP_mul, 0, {0}},
        {SG_OP_push, 0, {7}},  {SG_OP_mod, 0, {0}},     {SG_OP_add, 0, {0}},
        {SG_OP_store, 0, {1}}, {SG_OP_load, 0, {0}},    {SG_OP_addi, 0, {1}},
        {SG_OP_store, 0, {0}}, {SG_OP_pop, 0, {0}},
    };
    sr_instr *code = calloc(n, sizeof *code);
    for (size_t i = 0; i + 1 < n; i++)
        code[i] = body[i % (sizeof body / sizeof *body)];
    code[n - 1] = (sr_instr){SG_OP_ret, 0, {0}};
    return code;
}

static void report(const char *name, double value, const char *unit)
{
    printf("%s %.6g %s\n", name, value, unit);
}

/* The four ways of producing one executor's code that bench_emit_core compares. */
typedef enum { EMIT_GENERATED, EMIT_TABLE, COPY_STENCILS, COPY_BULK, WAYS } emit_way;

typedef struct emit_case {
    sr_emitter generated, table;
    const sr_instr *code;
    size_t n;
    uint32_t *offsets;
    sr_layout l;
    uint8_t *dst, *src;
} emit_case;

static void produce(const emit_case *c, emit_way way)
{
    switch (way) {
    case EMIT_GENERATED:
    case EMIT_TABLE:
        if (emit_write(way == EMIT_GENERATED ? &c->generated : &c->table, c->code, c->n,
                       c->offsets, &c->l, c->dst, 0) != SR_OK)
            exit(1);
        break;
    case COPY_STENCILS: /* the copy half of copy-and-patch: the same stencils, unpatched */
        for (size_t i = 0; i < c->n; i++) {
            const sg_stencil *st = &set.stencils[c->code[i].op];
            memcpy(c->dst + c->offsets[i], st->code, st->code_size);
        }
        break;
    default: /* the same number of bytes in one memcpy */
        memcpy(c->dst, c->src, c->l.code_size);
        break;
    }
    __asm__ volatile("" ::"r"(c->dst) : "memory");
}

/* Copy-and-patch proper (no mmap, no mprotect, no registration) against
 * copying the same bytes. The ways take turns in short rounds and each keeps
 * its best round, so a machine whose speed wanders treats them alike. */
static void bench_emit_core(void)
{
    emit_case c = {.n = 1000};
    sr_instr *code = program(c.n);
    c.code = code;
    c.offsets = malloc((c.n + 1) * sizeof *c.offsets);
    if (emit_init(&c.generated, &set, symbols, true) != SR_OK ||
        emit_init(&c.table, &set, symbols, false) != SR_OK ||
        emit_plan(&c.generated, code, c.n, c.offsets, &c.l) != SR_OK)
        exit(1);
    c.dst = aligned_alloc(4096, (c.l.total + 4095) / 4096 * 4096);
    c.src = malloc(c.l.total);
    memset(c.src, 0x90, c.l.total);
    double best[WAYS] = {0};
    for (int round = 0; round < 20; round++) {
        for (int way = 0; way < WAYS; way++) {
            long reps = 0;
            double t0 = now(), t;
            do {
                produce(&c, (emit_way)way);
                reps++;
            } while ((t = now() - t0) < 0.05);
            double bps = (double)c.l.code_size * (double)reps / t;
            if (bps > best[way])
                best[way] = bps;
        }
    }
    report("emit_core_bytes_per_s", best[EMIT_GENERATED], "B/s");
    report("emit_table_bytes_per_s", best[EMIT_TABLE], "B/s");
    report("stencil_copy_bytes_per_s", best[COPY_STENCILS], "B/s");
    report("memcpy_bytes_per_s", best[COPY_BULK], "B/s");
    report("emit_core_vs_stencil_copy", best[COPY_STENCILS] / best[EMIT_GENERATED], "x");
    report("emit_core_vs_memcpy", best[COPY_BULK] / best[EMIT_GENERATED], "x");
    report("executor_code_bytes", (double)c.l.code_size, "B");
    emit_fini(&c.generated);
    emit_fini(&c.table);
    free(c.src);
    free(c.dst);
    free(c.offsets);
    free(code);
}

/* Mean time of sr_emit + sr_executor_free of an n-instruction executor, over `seconds`. */
static double emit_free_cost(sr_runtime *rt, const sr_instr *code, size_t n, double seconds)
{
    long reps = 0;
    double t0 = now(), t;
    do {
        sr_executor *e;
        if (sr_emit(rt, code, n, "measured", &e) != SR_OK)
            exit(1);
        sr_executor_free(e);
        reps++;
    } while ((t = now() - t0) < seconds);
    return t / (double)reps;
}

/* Two code views (the default) unregistered, with libgcc, with libgcc but
 * not listed in the registry for other processes, with libgcc and GDB; then
 * one code view (pages flipped) with libgcc and GDB. */
enum { BARE, LIBGCC, NO_REGISTRY, GDB, GDB_ONE_VIEW, RUNTIMES };
static const char *const runtime_tags[RUNTIMES] = {"unregistered", "gdb_off", "no_registry",
                                                   "gdb_on", "gdb_on_one_view"};

/* sr_emit + sr_executor_free of 8 instructions with `live` others alive in
 * each runtime up to `nrts`, the runtimes taking turns in short rounds, best
 * round of each: what registration adds is the difference from the bare
 * runtime. */
static void emit_free_costs(sr_runtime *const *rts, size_t nrts, size_t live, double *best)
{
    sr_instr *code = program(8);
    sr_executor **bg = calloc(nrts * live + 1, sizeof *bg);
    for (size_t r = 0; r < nrts; r++) {
        best[r] = 1e9;
        for (size_t i = 0; i < live; i++)
            if (sr_emit(rts[r], code, 8, "background", &bg[r * live + i]) != SR_OK)
                exit(1);
    }
    for (int round = 0; round < 10; round++) {
        for (size_t r = 0; r < nrts; r++) {
            double t = emit_free_cost(rts[r], code, 8, 0.05);
            best[r] = t < best[r] ? t : best[r];
        }
    }
    sr_executor_free_batch(bg, nrts * live);
    free(bg);
    free(code);
}

static size_t heap_bytes(void)
{
    struct mallinfo2 m = mallinfo2();
    return m.uordblks + m.hblkhd;
}

/* What `live` 8-instruction executors cost in memory, per executor, in the
 * libgcc runtime and the GDB one (sr_emit one at a time, so one GDB object
 * each): JIT memory (its chunk: code, veneers, data, GOT, rounded to the
 * granule), of it code; the runtime's records (executor, names, offsets,
 * lookup table, FDE); the GDB object's share. */
static void memory_per_executor(sr_runtime *libgcc, sr_runtime *gdb, size_t live)
{
    sr_instr *code = program(8);
    sr_executor **ex = calloc(2 * live, sizeof *ex);
    size_t heap[3], chunk = 0, text = 0;
    heap[0] = heap_bytes();
    for (size_t i = 0; i < live; i++)
        if (sr_emit(libgcc, code, 8, "measured", &ex[i]) != SR_OK)
            exit(1);
    heap[1] = heap_bytes();
    for (size_t i = 0; i < live; i++)
        if (sr_emit(gdb, code, 8, "measured", &ex[live + i]) != SR_OK)
            exit(1);
    heap[2] = heap_bytes();
    for (size_t i = 0; i < live; i++) {
        chunk += jitmem_chunk_size(&ex[i]->arena->region, ex[i]->mem_size);
        text += ex[i]->code_size;
    }
    size_t fde = 0; /* the unwind table: one FDE per arena, shared by its executors */
    for (const sr_arena *a = libgcc->arenas; a; a = a->next)
        fde += a->eh_frame_size;
    double records = (double)(heap[1] - heap[0]) / (double)live;
    report("memory_per_executor_fde_share", (double)fde / (double)live, "B");
    report("memory_per_executor_chunk", (double)chunk / (double)live, "B");
    report("memory_per_executor_code", (double)text / (double)live, "B");
    report("memory_per_executor_records", records, "B");
    report("memory_per_executor_gdb_object",
           (double)(heap[2] - heap[1]) / (double)live - records, "B");
    sr_executor_free_batch(ex, 2 * live);
    free(ex);
    free(code);
}

/* Mean time of one glibc backtrace() from a helper called by JIT code, over
 * `seconds`. */
static double backtrace_cost(sr_runtime *rt, double seconds)
{
    sr_instr calls[] = {{SG_OP_push, 0, {1}}, {SG_OP_native, 0, {0}}, {SG_OP_ret, 0, {0}}};
    sr_executor *e;
    if (sr_emit(rt, calls, 3, "backtracer", &e) != SR_OK)
        exit(1);
    shim_fn *shim = (shim_fn *)sr_shim_entry(rt);
    vm_frame frame = {0};
    vm_value stack[16];
    backtrace_seconds = 0;
    backtrace_calls = 0;
    double t0 = now();
    while (now() - t0 < seconds)
        shim(&frame, stack, sr_executor_entry(e));
    sr_executor_free(e);
    return backtrace_seconds / (double)backtrace_calls;
}

/* backtrace() with 100 and with 10,000 executors live, in alternating rounds
 * (the other 9,900 emitted and freed in between), best round of each. */
static void backtrace_costs(sr_runtime *rt, double *at100, double *at10k)
{
    sr_instr small[] = {{SG_OP_push, 0, {1}}, {SG_OP_ret, 0, {0}}};
    sr_executor **bg = calloc(10000, sizeof *bg);
    *at100 = *at10k = 1e9;
    for (size_t i = 0; i < 100; i++)
        if (sr_emit(rt, small, 2, "background", &bg[i]) != SR_OK)
            exit(1);
    for (int round = 0; round < 5; round++) {
        double t = backtrace_cost(rt, 0.1);
        *at100 = t < *at100 ? t : *at100;
        for (size_t i = 100; i < 10000; i++)
            if (sr_emit(rt, small, 2, "background", &bg[i]) != SR_OK)
                exit(1);
        t = backtrace_cost(rt, 0.1);
        *at10k = t < *at10k ? t : *at10k;
        sr_executor_free_batch(bg + 100, 9900);
    }
    sr_executor_free_batch(bg, 100);
    free(bg);
}

int main(void)
{
    bench_emit_core();
    sr_runtime *rts[RUNTIMES];
    for (int r = 0; r < RUNTIMES; r++) {
        sr_config cfg = SR_CONFIG_DEFAULT;
        cfg.frames = r != BARE; /* the bare runtime registers nothing: the floor */
        cfg.gdb = r == GDB || r == GDB_ONE_VIEW;
        cfg.code_views = r == GDB_ONE_VIEW ? 1 : 2;
        cfg.registry = r == NO_REGISTRY ? 2 : 1;
        if (sr_runtime_create(&set, symbols, &cfg, &rts[r]) != SR_OK)
            return 1;
    }
    char name[96];
    /* 100,000 live with one view would be 100,000 mappings' worth of pages:
     * measured with two views only. */
    static const size_t lives[3] = {100, 10000, 100000};
    for (int k = 0; k < 3; k++) {
        double best[RUNTIMES];
        size_t nrts = lives[k] > 10000 ? GDB + 1 : RUNTIMES;
        emit_free_costs(rts, nrts, lives[k], best);
        for (size_t r = 0; r < nrts; r++) {
            snprintf(name, sizeof name, "emit_free_8instr_%zulive_%s", lives[k], runtime_tags[r]);
            report(name, best[r] * 1e6, "us");
        }
    }
    memory_per_executor(rts[LIBGCC], rts[GDB], 10000);
    sr_instr *big = program(1000);
    for (int r = LIBGCC; r < RUNTIMES; r++) {
        if (r == NO_REGISTRY)
            continue;
        snprintf(name, sizeof name, "emit_free_1000instr_%s", runtime_tags[r]);
        report(name, emit_free_cost(rts[r], big, 1000, 0.5) * 1e6, "us");
        double bt100, bt10k;
        backtrace_costs(rts[r], &bt100, &bt10k);
        snprintf(name, sizeof name, "backtrace_100live_%s", runtime_tags[r]);
        report(name, bt100 * 1e6, "us");
        snprintf(name, sizeof name, "backtrace_10000live_%s", runtime_tags[r]);
        report(name, bt10k * 1e6, "us");
    }
    free(big);
    for (int r = 0; r < RUNTIMES; r++)
        sr_runtime_destroy(rts[r]);
    return 0;
}
