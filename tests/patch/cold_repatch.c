/* cold_repatch.c - sr_patch_operand and sr_patch_jump on holes in an op's
 * cold part (test_hot_cold.test_hot_cold_holes_in_cold_parts_are_repatched).
 *
 * Built against a header of tinyvm's ops plus two made by the test:
 *     guard_tos   traps unless tos == operand 0; the trap (cold) passes
 *                 operand 1 to vm_trap as its message
 *     cold_branch jumps (from a block marked STENCIL_COLD()) when tos is 0
 * Each executor runs, is patched, and runs again; every line printed is
 * "ok ..." or "FAIL ...", and the exit status is the number of failures. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include "jit_stencils.h"
#include "stencilrt.h"
#include "tinyvm.h"

typedef vm_value shim_fn(vm_frame *frame, vm_value *sp, void *code);

static jmp_buf trapped;
static const char *trap_why;
static int failures;

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
    return arg;
}

/* The cold path of guard_tos ends here: note the message, leave the JIT code. */
_Noreturn void vm_trap(vm_frame *frame, const char *why)
{
    (void)frame;
    trap_why = why;
    longjmp(trapped, 1);
}

static void expect(int ok, const char *what, const char *detail)
{
    printf("%s %s%s%s\n", ok ? "ok  " : "FAIL", what, *detail ? ": " : "", detail);
    failures += !ok;
}

/* Runs ex: its result, or -1 with trap_why set when it trapped. */
static vm_value run(sr_runtime *rt, const sr_executor *ex)
{
    static vm_frame frame;
    static vm_value stack[64];
    trap_why = NULL;
    if (setjmp(trapped))
        return -1;
    memset(&frame, 0, sizeof frame);
    return ((shim_fn *)sr_shim_entry(rt))(&frame, stack, sr_executor_entry(ex));
}

static void operand_in_cold_part(sr_runtime *rt)
{
    static const char first[] = "first message", second[] = "second message";
    sr_instr code[] = {
        {SG_OP_push, 0, {7}},
        {SG_OP_guard_tos, 0, {5, (uint64_t)(uintptr_t)first}},
        {SG_OP_ret, 0, {0}},
    };
    sr_executor *ex;
    if (sr_emit(rt, code, 3, "guard", &ex) != SR_OK) {
        expect(0, "emit guard", sr_last_error());
        return;
    }
    vm_value r = run(rt, ex);
    expect(r == -1 && trap_why == first, "the guard fails, its cold part passes operand 1", "");
    sr_status st = sr_patch_operand(ex, 1, 1, (uint64_t)(uintptr_t)second);
    expect(st == SR_OK, "sr_patch_operand on a hole in the cold part", st ? sr_last_error() : "");
    r = run(rt, ex);
    expect(r == -1 && trap_why == second, "the cold part runs with the patched operand",
           trap_why ? trap_why : "no trap");
    st = sr_patch_operand(ex, 1, 0, 7); /* the hot part's hole of the same instruction */
    r = run(rt, ex);
    expect(st == SR_OK && r == 7 && !trap_why, "the hot part's operand patched: the guard holds",
           st ? sr_last_error() : "");
    sr_executor_free(ex);
}

static void jump_in_cold_part(sr_runtime *rt)
{
    sr_instr code[] = {
        {SG_OP_push, 0, {0}},
        {SG_OP_cold_branch, 4, {0}},
        {SG_OP_push, 0, {1}},
        {SG_OP_ret, 0, {0}},
        {SG_OP_push, 0, {2}},
        {SG_OP_ret, 0, {0}},
    };
    sr_executor *ex;
    if (sr_emit(rt, code, 6, "branch", &ex) != SR_OK) {
        expect(0, "emit branch", sr_last_error());
        return;
    }
    char got[64];
    vm_value r = run(rt, ex);
    snprintf(got, sizeof got, "returned %" PRId64, r);
    expect(r == 2, "the cold block's jump goes to instruction 4", got);
    sr_status st = sr_patch_jump(ex, 1, sr_executor_instr(ex, 2));
    expect(st == SR_OK, "sr_patch_jump on a hole in the cold part", st ? sr_last_error() : "");
    r = run(rt, ex);
    snprintf(got, sizeof got, "returned %" PRId64, r);
    expect(r == 1, "the cold block's jump goes to instruction 2 once patched", got);
    st = sr_patch_jump(ex, 1, (const char *)sr_executor_instr(ex, 2) + 1);
    expect(st == SR_EINVAL, "a target inside an instruction is still refused", "");
    sr_executor_free(ex);
}

int main(void)
{
    static const sr_stencil_set set = SR_STENCIL_SET_FROM_HEADER;
    expect(set.cold_sizes && set.cold_sizes[SG_OP_guard_tos] && set.cold_sizes[SG_OP_cold_branch],
           "guard_tos and cold_branch have cold parts", "");
    const void *symbols[SG_SYM__COUNT] = {
        [SG_SYM_vm_call] = (const void *)vm_call,
        [SG_SYM_vm_print] = (const void *)vm_print,
        [SG_SYM_vm_native] = (const void *)vm_native,
        [SG_SYM_vm_trap] = (const void *)vm_trap,
    };
    sr_config cfg = SR_CONFIG_DEFAULT;
    sr_runtime *rt;
    if (sr_runtime_create(&set, symbols, &cfg, &rt) != SR_OK) {
        expect(0, "sr_runtime_create", sr_last_error());
        return 1;
    }
    operand_in_cold_part(rt);
    jump_in_cold_part(rt);
    sr_runtime_destroy(rt);
    return failures;
}
