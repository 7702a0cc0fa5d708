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

/* Copy-and-patch proper (no mmap, no mprotect, no registration) against memcpy
 * of the same bytes. */
static void bench_emit_core(void)
{
    size_t n = 1000;
    sr_instr *code = program(n);
    uint32_t *offsets = malloc((n + 1) * sizeof *offsets);
    sr_layout l;
    if (emit_plan(&set, code, n, offsets, &l) != SR_OK)
        exit(1);
    uint8_t *dst = aligned_alloc(4096, (l.total + 4095) / 4096 * 4096);
    uint8_t *src = malloc(l.total);
    memset(src, 0x90, l.total);
    long reps = 0;
    double t0 = now(), t;
    do {
        emit_write(&set, symbols, code, n, offsets, &l, dst);
        reps++;
    } while ((t = now() - t0) < 0.5);
    double emit_bps = (double)l.code_size * (double)reps / t;
    long mreps = 0;
    t0 = now();
    do {
        memcpy(dst, src, l.code_size);
        __asm__ volatile("" ::"r"(dst) : "memory");
        mreps++;
    } while ((t = now() - t0) < 0.5);
    double memcpy_bps = (double)l.code_size * (double)mreps / t;
    /* The copy half of copy-and-patch alone: the same stencils, one by one. */
    long creps = 0;
    t0 = now();
    do {
        for (size_t i = 0; i < n; i++) {
            const sg_stencil *st = &set.stencils[code[i].op];
            memcpy(dst + offsets[i], st->code, st->code_size);
        }
        __asm__ volatile("" ::"r"(dst) : "memory");
        creps++;
    } while ((t = now() - t0) < 0.5);
    double copy_bps = (double)l.code_size * (double)creps / t;
    report("stencil_copy_bytes_per_s", copy_bps, "B/s");
    report("emit_core_vs_stencil_copy", copy_bps / emit_bps, "x");
    report("emit_core_bytes_per_s", emit_bps, "B/s");
    report("memcpy_bytes_per_s", memcpy_bps, "B/s");
    report("emit_core_vs_memcpy", memcpy_bps / emit_bps, "x");
    report("executor_code_bytes", (double)l.code_size, "B");
    free(src);
    free(dst);
    free(offsets);
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

/* Mean time of one glibc backtrace() from a helper called by JIT code. */
static double backtrace_cost(sr_runtime *rt, size_t live)
{
    sr_instr small[] = {{SG_OP_push, 0, {1}}, {SG_OP_ret, 0, {0}}};
    sr_instr calls[] = {{SG_OP_push, 0, {1}}, {SG_OP_native, 0, {0}}, {SG_OP_ret, 0, {0}}};
    sr_executor **bg = calloc(live, sizeof *bg), *e;
    for (size_t i = 0; i < live; i++)
        sr_emit(rt, small, 2, "background", &bg[i]);
    sr_emit(rt, calls, 3, "backtracer", &e);
    shim_fn *shim = (shim_fn *)sr_shim_entry(rt);
    vm_frame frame = {0};
    vm_value stack[16];
    backtrace_seconds = 0;
    backtrace_calls = 0;
    double t0 = now();
    while (now() - t0 < 0.5)
        shim(&frame, stack, sr_executor_entry(e));
    sr_executor_free(e);
    for (size_t i = 0; i < live; i++)
        sr_executor_free(bg[i]);
    free(bg);
    return backtrace_seconds / (double)backtrace_calls;
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
        double bt100 = backtrace_cost(rt, 100), bt10k = backtrace_cost(rt, 10000);
        snprintf(name, sizeof name, "backtrace_100live_%s", tag);
        report(name, bt100 * 1e6, "us");
        snprintf(name, sizeof name, "backtrace_10000live_%s", tag);
        report(name, bt10k * 1e6, "us");
        sr_runtime_destroy(rt);
    }
    return 0;
}
