/* bench_runtime - stencilrt costs, measured side by side in one run.
 * Prints "name value unit" lines; tests/bench/run.py turns them into a table. */
#include <execinfo.h>
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
                       c->offsets, &c->l, c->dst) != SR_OK)
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

/* Whole sr_emit + sr_executor_free, per executor, with `live` others alive. */
static double emit_free_cost(sr_runtime *rt, size_t live, size_t n)
{
    sr_instr *code = program(n);
    sr_executor **bg = calloc(live, sizeof *bg);
    for (size_t i = 0; i < live; i++)
        if (sr_emit(rt, code, n, "background", &bg[i]) != SR_OK)
            exit(1);
    long reps = 0;
    double t0 = now(), t;
    do {
        sr_executor *e;
        if (sr_emit(rt, code, n, "measured", &e) != SR_OK)
            exit(1);
        sr_executor_free(e);
        reps++;
    } while ((t = now() - t0) < 0.5);
    for (size_t i = 0; i < live; i++)
        sr_executor_free(bg[i]);
    free(bg);
    free(code);
    return t / (double)reps;
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
    sr_config cfg = SR_CONFIG_DEFAULT;
    /* No registration at all: the floor for what registration costs. */
    cfg.gdb = 0;
    cfg.frames = 0;
    sr_runtime *bare;
    if (sr_runtime_create(&set, symbols, &cfg, &bare) != SR_OK)
        return 1;
    report("emit_free_8instr_100live_unregistered", emit_free_cost(bare, 100, 8) * 1e6, "us");
    report("emit_free_8instr_10000live_unregistered", emit_free_cost(bare, 10000, 8) * 1e6, "us");
    sr_runtime_destroy(bare);
    for (int gdb = 0; gdb <= 1; gdb++) {
        cfg.gdb = gdb;
        cfg.frames = 1;
        sr_runtime *rt;
        if (sr_runtime_create(&set, symbols, &cfg, &rt) != SR_OK)
            return 1;
        const char *tag = gdb ? "gdb_on" : "gdb_off";
        char name[96];
        double small100 = emit_free_cost(rt, 100, 8), small10k = emit_free_cost(rt, 10000, 8);
        snprintf(name, sizeof name, "emit_free_8instr_100live_%s", tag);
        report(name, small100 * 1e6, "us");
        snprintf(name, sizeof name, "emit_free_8instr_10000live_%s", tag);
        report(name, small10k * 1e6, "us");
        snprintf(name, sizeof name, "emit_free_1000instr_%s", tag);
        report(name, emit_free_cost(rt, 0, 1000) * 1e6, "us");
        double bt100, bt10k;
        backtrace_costs(rt, &bt100, &bt10k);
        snprintf(name, sizeof name, "backtrace_100live_%s", tag);
        report(name, bt100 * 1e6, "us");
        snprintf(name, sizeof name, "backtrace_10000live_%s", tag);
        report(name, bt10k * 1e6, "us");
        sr_runtime_destroy(rt);
    }
    return 0;
}
