/* perfprog.h - what the perf test programs share: the tinyvm stencil set, a
 * counting loop built as an executor, and a way to run it. */
#ifndef PERFPROG_H
#define PERFPROG_H

#include <stdio.h>
#include <stdlib.h>

#include "jit_stencils.h"
#include "stencilrt.h"
#include "tinyvm.h"

typedef vm_value shim_fn(vm_frame *frame, vm_value *sp, void *code);

static const sr_stencil_set perfprog_set = SR_STENCIL_SET_FROM_HEADER;

/* The helpers tinyvm's stencils may call; the loop below calls none. */
static vm_value perfprog_unused(void)
{
    fputs("perfprog: unexpected call from JIT code\n", stderr);
    abort();
}

static sr_runtime *perfprog_runtime(void)
{
    const void *symbols[SG_SYM__COUNT];
    for (int i = 0; i < SG_SYM__COUNT; i++)
        symbols[i] = (const void *)perfprog_unused;
    sr_runtime *rt;
    if (sr_runtime_create(&perfprog_set, symbols, NULL, &rt) != SR_OK) {
        fprintf(stderr, "perfprog: %s\n", sr_last_error());
        exit(1);
    }
    return rt;
}

/* for (i = 0; i < n; i++) {} return i;  -- PERFPROG_LOOP_OPS stencils */
enum { PERFPROG_LOOP_OPS = 12 };

static sr_executor *perfprog_loop(sr_runtime *rt, const char *name, uint64_t n)
{
    const sr_instr code[PERFPROG_LOOP_OPS] = {
        {SG_OP_push, 0, {0}},          {SG_OP_store, 0, {0}},    {SG_OP_load, 0, {0}},
        {SG_OP_push, 0, {n}},          {SG_OP_lt, 0, {0}},       {SG_OP_jump_if_zero, 10, {0}},
        {SG_OP_load, 0, {0}},          {SG_OP_addi, 0, {1}},     {SG_OP_store, 0, {0}},
        {SG_OP_jump, 2, {0}},          {SG_OP_load, 0, {0}},     {SG_OP_ret, 0, {0}},
    };
    sr_executor *ex;
    if (sr_emit(rt, code, PERFPROG_LOOP_OPS, name, &ex) != SR_OK) {
        fprintf(stderr, "perfprog: cannot emit %s: %s\n", name, sr_last_error());
        exit(1);
    }
    return ex;
}

static vm_value perfprog_run(sr_runtime *rt, sr_executor *ex)
{
    vm_frame frame = {.vm = NULL};
    vm_value stack[64];
    shim_fn *shim = (shim_fn *)sr_shim_entry(rt);
    return shim(&frame, stack, sr_executor_entry(ex));
}

#endif
