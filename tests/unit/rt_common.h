/* rt_common.h - what the runtime unit programs share: the bundled stencil
 * set, symbol values for it, a three-instruction program (push 41; addi 1;
 * ret) and a way to run it through the shim. */
#ifndef RT_COMMON_H
#define RT_COMMON_H

#include <stdbool.h>
#include <stdio.h>

#include "jit_stencils.h"
#include "stencilrt.h"
#include "tinyvm.h"

typedef vm_value shim_fn(vm_frame *frame, vm_value *sp, void *code);

static const sr_stencil_set rt_set = SR_STENCIL_SET_FROM_HEADER;

/* The program never calls a helper; the symbols only need values. */
static void rt_no_helper(void) {}
static const void *const rt_symbols[SG_SYM__COUNT + 1] = {
    [SG_SYM_vm_call] = (const void *)rt_no_helper, [SG_SYM_vm_print] = (const void *)rt_no_helper,
    [SG_SYM_vm_native] = (const void *)rt_no_helper, [SG_SYM_vm_trap] = (const void *)rt_no_helper,
};

static const sr_instr rt_answer[] = {
    {SG_OP_push, 0, {41, 0, 0, 0}}, {SG_OP_addi, 0, {1, 0, 0, 0}}, {SG_OP_ret, 0, {0, 0, 0, 0}}};

static vm_value rt_run(const sr_runtime *rt, const sr_executor *ex)
{
    vm_frame frame = {0};
    vm_value stack[16];
    return ((shim_fn *)sr_shim_entry(rt))(&frame, stack, sr_executor_entry(ex));
}

static int rt_passed, rt_failed;

static void rt_result(bool ok, const char *name, const char *detail)
{
    printf("%s %s%s%s\n", ok ? "ok  " : "FAIL", name, detail && *detail ? ": " : "",
           detail ? detail : "");
    ok ? rt_passed++ : rt_failed++;
}

static int rt_summary(void)
{
    printf("%d passed, %d failed\n", rt_passed, rt_failed);
    return rt_failed != 0;
}

#endif
