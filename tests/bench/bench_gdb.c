/* bench_gdb - executors registered per second with 10,000 live, meant to run
 * under GDB (tests/bench/run.py starts it with `gdb -batch -ex run`) and
 * without, to compare. Prints "name value unit" lines. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "jit_stencils.h"
#include "stencilrt.h"
#include "tinyvm.h"

#define LIVE 10000
#define BATCH 100
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

/* Emit `count` executors in batches of `batch`; returns executors per second. */
static double emit_many(sr_runtime *rt, sr_executor **out, size_t count, size_t batch)
{
    static const sr_instr code[] = {{SG_OP_load, 0, {0}}, {SG_OP_addi, 0, {1}},
                                    {SG_OP_print, 0, {0}}, {SG_OP_ret, 0, {0}}};
    sr_program progs[BATCH];
    for (size_t i = 0; i < BATCH; i++)
        progs[i] = (sr_program){code, 4, "bench"};
    double t0 = now();
    for (size_t done = 0; done < count; done += batch)
        if (sr_emit_batch(rt, progs, batch, out + done) != SR_OK) {
            fprintf(stderr, "%s\n", sr_last_error());
            exit(1);
        }
    return (double)count / (now() - t0);
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
    sr_executor **live = calloc(LIVE + 2 * MEASURED, sizeof *live);
    emit_many(rt, live, LIVE, BATCH);
    double batched = emit_many(rt, live + LIVE, MEASURED, BATCH);
    double single = emit_many(rt, live + LIVE + MEASURED, MEASURED / 10, 1);
    printf("registered_per_s_batch%d_at%dlive %.6g 1/s\n", BATCH, LIVE, batched);
    printf("registered_per_s_single_at%dlive %.6g 1/s\n", LIVE, single);
    sr_stats st = sr_runtime_stats(rt);
    printf("gdb_objects %zu n\n", st.gdb_entries);
    for (size_t i = 0; i < LIVE + MEASURED + MEASURED / 10; i++)
        sr_executor_free(live[i]);
    sr_runtime_destroy(rt);
    free(live);
    return 0;
}
