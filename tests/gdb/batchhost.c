/* batchhost.c - executors emitted in batches and under sr_gdb_hold, for
 * tests/integration/test_gdb.py (test_batches). It calls
 * batchhost_checkpoint(phase) at each point where the test's GDB script
 * (tests/gdb/batchcheck.py) compares what GDB knows with batchhost_exec[],
 * and runs some executors, whose "native" instruction calls
 * batchhost_breakpoint(), so that GDB can take backtraces through them.
 *
 * Every executor is "load 0; native 1; addi 1; ret" (one page each), in
 * 1 MiB (256-page) arenas:
 *   phase 1: b0..b299 by one sr_emit_batch (two arenas, two GDB objects)
 *   phase 2: b0..b99 freed one by one, b100..b199 by sr_executor_free_batch
 *   phase 3: c0..c49 by one sr_emit_batch
 *   phase 4: under sr_gdb_hold: h0..h19 by sr_emit, h19 freed again
 *   phase 5: after sr_gdb_release
 * Runs (each stops in batchhost_breakpoint): b0, b150, b299 after phase 1,
 * c5 after phase 3, h3 after phase 5. Exits 0 if every run returned its
 * argument + 1 and sr_runtime_stats agreed at each phase.
 * Built with -fno-optimize-sibling-calls -fno-inline: the C frames below a
 * JIT frame are run_function, main. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jit_stencils.h"
#include "stencilrt.h"
#include "tinyvm.h"

typedef vm_value shim_fn(vm_frame *frame, vm_value *sp, void *code);

/* What the GDB script reads: every executor ever emitted (NULL entry once
 * freed), its name and instruction addresses. */
#define MAX_EXEC 400
#define NINSTR 4
typedef struct batchhost_exec {
    char name[16];
    void *instr[NINSTR + 1]; /* instruction addresses, then the end of the code */
    int live;
    int held; /* emitted under sr_gdb_hold and not released yet */
} batchhost_exec;
batchhost_exec batchhost_exec_table[MAX_EXEC];
int batchhost_nexec;

static sr_executor *executors[MAX_EXEC];
static shim_fn *shim;
static int failed;

__attribute__((noinline)) void batchhost_checkpoint(int phase)
{
    __asm__ volatile("" ::"r"(phase) : "memory"); /* GDB breaks here */
}

__attribute__((noinline)) vm_value batchhost_breakpoint(vm_value v)
{
    __asm__ volatile("" ::: "memory"); /* GDB breaks here */
    return v;
}

vm_value vm_call(vm_frame *f, vm_value fn, vm_value argc, vm_value *args)
{
    (void)f, (void)fn, (void)argc, (void)args;
    abort();
}
vm_value vm_print(vm_frame *f, vm_value v)
{
    (void)f;
    return v;
}
vm_value vm_native(vm_frame *f, vm_value which, vm_value arg)
{
    (void)f, (void)which;
    vm_value r = batchhost_breakpoint(arg);
    __asm__ volatile("" ::: "memory");
    return r;
}
_Noreturn void vm_trap(vm_frame *f, const char *why)
{
    (void)f;
    fprintf(stderr, "batchhost: trap: %s\n", why);
    exit(3);
}

static const sr_instr code[NINSTR] = {
    {SG_OP_load, 0, {0}}, {SG_OP_native, 0, {1}}, {SG_OP_addi, 0, {1}}, {SG_OP_ret, 0, {0}}};
static const sr_stencil_set set = SR_STENCIL_SET_FROM_HEADER;

static void record(int k, sr_executor *ex, int held)
{
    batchhost_exec *e = &batchhost_exec_table[k];
    for (size_t i = 0; i <= NINSTR; i++)
        e->instr[i] = sr_executor_instr(ex, i);
    e->live = 1;
    e->held = held;
    executors[k] = ex;
}

/* Emit `count` executors named prefix0.. as one batch. */
static void emit_batch(sr_runtime *rt, const char *prefix, int count)
{
    sr_program progs[MAX_EXEC];
    sr_executor *out[MAX_EXEC];
    int first = batchhost_nexec;
    for (int i = 0; i < count; i++) {
        batchhost_exec *e = &batchhost_exec_table[first + i];
        snprintf(e->name, sizeof e->name, "%s%d", prefix, i);
        progs[i] = (sr_program){code, NINSTR, e->name};
    }
    if (sr_emit_batch(rt, progs, (size_t)count, out) != SR_OK) {
        fprintf(stderr, "batchhost: sr_emit_batch: %s\n", sr_last_error());
        exit(1);
    }
    for (int i = 0; i < count; i++)
        record(first + i, out[i], 0);
    batchhost_nexec += count;
}

static int find(const char *name)
{
    for (int k = 0; k < batchhost_nexec; k++)
        if (batchhost_exec_table[k].live && !strcmp(batchhost_exec_table[k].name, name))
            return k;
    fprintf(stderr, "batchhost: no live executor %s\n", name);
    exit(1);
}

__attribute__((noinline)) static vm_value run_function(const char *name, vm_value arg)
{
    vm_frame frame = {.function = 0};
    vm_value stack[16];
    frame.locals[0] = arg;
    vm_value r = shim(&frame, stack, batchhost_exec_table[find(name)].instr[0]);
    __asm__ volatile("" ::: "memory");
    if (r != arg + 1) {
        fprintf(stderr, "batchhost: %s(%lld) returned %lld\n", name, (long long)arg,
                (long long)r);
        failed = 1;
    }
    return r;
}

static void free_one(int k)
{
    sr_executor_free(executors[k]);
    batchhost_exec_table[k].live = 0;
}

static void expect_stats(sr_runtime *rt, const char *when, size_t executors_live, size_t held)
{
    sr_stats s = sr_runtime_stats(rt);
    if (s.executors != executors_live || s.gdb_held != held) {
        fprintf(stderr, "batchhost: %s: %zu executors, %zu held; expected %zu, %zu\n", when,
                s.executors, s.gdb_held, executors_live, held);
        failed = 1;
    }
}

int main(void)
{
    const void *symbols[SG_SYM__COUNT] = {
        [SG_SYM_vm_call] = (const void *)vm_call, [SG_SYM_vm_print] = (const void *)vm_print,
        [SG_SYM_vm_native] = (const void *)vm_native, [SG_SYM_vm_trap] = (const void *)vm_trap,
    };
    sr_config cfg = SR_CONFIG_DEFAULT;
    cfg.arena_size = (size_t)1 << 20;
    sr_runtime *rt;
    if (sr_runtime_create(&set, symbols, &cfg, &rt) != SR_OK) {
        fprintf(stderr, "batchhost: %s\n", sr_last_error());
        return 1;
    }
    shim = (shim_fn *)sr_shim_entry(rt);

    emit_batch(rt, "b", 300);
    expect_stats(rt, "phase 1", 300, 0);
    batchhost_checkpoint(1);
    run_function("b0", 1);
    run_function("b150", 2);
    run_function("b299", 3);

    for (int k = 0; k < 100; k++)
        free_one(k);
    sr_executor_free_batch(executors + 100, 100);
    for (int k = 100; k < 200; k++)
        batchhost_exec_table[k].live = 0;
    expect_stats(rt, "phase 2", 100, 0);
    batchhost_checkpoint(2);

    emit_batch(rt, "c", 50);
    batchhost_checkpoint(3);
    run_function("c5", 4);

    sr_gdb_hold(rt);
    sr_gdb_hold(rt); /* holds nest */
    for (int i = 0; i < 20; i++) {
        int k = batchhost_nexec++;
        batchhost_exec *e = &batchhost_exec_table[k];
        snprintf(e->name, sizeof e->name, "h%d", i);
        sr_executor *ex;
        if (sr_emit(rt, code, NINSTR, e->name, &ex) != SR_OK) {
            fprintf(stderr, "batchhost: sr_emit: %s\n", sr_last_error());
            return 1;
        }
        record(k, ex, 1);
    }
    free_one(find("h19"));
    sr_gdb_release(rt); /* inner: still held */
    expect_stats(rt, "phase 4", 169, 19);
    batchhost_checkpoint(4);
    sr_gdb_release(rt);
    for (int k = 0; k < batchhost_nexec; k++)
        batchhost_exec_table[k].held = 0;
    expect_stats(rt, "phase 5", 169, 0);
    batchhost_checkpoint(5);
    run_function("h3", 5);

    sr_runtime_destroy(rt);
    puts(failed ? "batchhost: FAILED" : "batchhost: ok");
    return failed;
}
