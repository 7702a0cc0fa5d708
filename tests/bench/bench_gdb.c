/* bench_gdb - executors registered per second with 10,000 live, meant to run
 * under GDB (tests/bench/run.py starts it with `gdb -batch -ex run`) and
 * without, to compare. Prints "name value unit" lines. Each row starts from
 * the same 10,000 live executors (emitted in batches of 100): what it emits is
 * freed again before the next row. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "jit_stencils.h"
#include "stencilrt.h"
#include "tinyvm.h"

#define LIVE 10000
#define BATCH 100
#define BIG_BATCH 1000
#define MEASURED 2000

vm_value vm_call(vm_frame *f, vm_value fn, vm_value argc, vm_value *args)
{
    (void)f, (void)fn, (void)argc, (void)args;
    return 0;
}
vm_value vm_print(vm_frame *f, vm_value v) { (void)f; return v; }
vm_value vm_native(vm_frame *f, vm_value w, vm_value a) { (void)f, (void)w; return a; }
_Noreturn void vm_trap(vm_frame *f, const char *why) { (void)f, (void)why; abort(); }

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const sr_stencil_set set = SR_STENCIL_SET_FROM_HEADER;

/* Emit `count` executors in batches of `batch` (one at a time between
 * sr_gdb_hold and sr_gdb_release if `held`); returns executors per second. */
static double emit_many(sr_runtime *rt, sr_executor **out, size_t count, size_t batch, int held)
{
    static const sr_instr code[] = {{SG_OP_load, 0, {0}}, {SG_OP_addi, 0, {1}},
                                    {SG_OP_print, 0, {0}}, {SG_OP_ret, 0, {0}}};
    static sr_program progs[BIG_BATCH];
    for (size_t i = 0; i < BIG_BATCH; i++)
        progs[i] = (sr_program){code, 4, "bench"};
    double t0 = now();
    if (held)
        sr_gdb_hold(rt);
    for (size_t done = 0; done < count; done += batch)
        if (sr_emit_batch(rt, progs, batch, out + done) != SR_OK) {
            fprintf(stderr, "%s\n", sr_last_error());
            exit(1);
        }
    if (held)
        sr_gdb_release(rt);
    return (double)count / (now() - t0);
}

/* One row: emit, report, free what was emitted (10,000 stay live). */
static void row(sr_runtime *rt, sr_executor **scratch, const char *name, size_t count,
                size_t batch, int held)
{
    double rate = emit_many(rt, scratch, count, batch, held);
    printf("%s %.6g 1/s\n", name, rate);
    fflush(stdout);
    sr_executor_free_batch(scratch, count);
}

int main(void)
{
    const void *symbols[SG_SYM__COUNT] = {
        [SG_SYM_vm_call] = (const void *)vm_call, [SG_SYM_vm_print] = (const void *)vm_print,
        [SG_SYM_vm_native] = (const void *)vm_native, [SG_SYM_vm_trap] = (const void *)vm_trap,
    };
    sr_runtime *rt;
    if (sr_runtime_create(&set, symbols, NULL, &rt) != SR_OK)
        return 1;
    sr_executor **live = calloc(LIVE, sizeof *live);
    sr_executor **scratch = calloc(MEASURED, sizeof *scratch);
    emit_many(rt, live, LIVE, BATCH, 0);
    sr_stats st = sr_runtime_stats(rt);
    row(rt, scratch, "registered_per_s_batch100_at10000live", MEASURED, BATCH, 0);
    row(rt, scratch, "registered_per_s_single_at10000live", MEASURED / 10, 1, 0);
    row(rt, scratch, "registered_per_s_batch1000_at10000live", MEASURED, BIG_BATCH, 0);
    row(rt, scratch, "registered_per_s_single_held_at10000live", MEASURED, 1, 1);
    printf("gdb_objects %zu n\n", st.gdb_entries); /* with the 10,000 live */
    sr_executor_free_batch(live, LIVE);
    sr_runtime_destroy(rt);
    free(scratch);
    free(live);
    return 0;
}
