/* veneer_run.c - runs JIT code whose calls to run-time symbols are out of
 * their rel32's reach (tests/integration/test_patch.py): the functions below
 * live in this position-independent executable, more than 2 GiB from the JIT
 * arenas the runtime maps, so every direct call goes through a veneer.
 *
 *   against tests/patch/fixtures' header (which has SG_OP_direct_call):
 *       runs [direct_call, leave]; the op's `call vm_print` must reach
 *       vm_print, which returns its argument + 1
 *   against tests/fixtures/shim/stack_protector.yaml's header:
 *       the shim calls __stack_chk_fail directly (stack protector), so
 *       sr_runtime_create must place that call through a veneer
 *   against tests/fixtures/shim/far_data.yaml's header (SG_SYM_vm_marker):
 *       the shim takes vm_marker's address PC-relatively, which no veneer can
 *       carry: sr_runtime_create must refuse, naming the shim
 *
 * Prints "veneer_run: PASS" (exit 0), or what failed (exit 1). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jit_stencils.h"
#include "stencilrt.h"
#include "tinyvm.h"

typedef vm_value shim_fn(vm_frame *frame, vm_value *sp, void *code);

static int printed;
char vm_marker[16]; /* in this executable, far from JIT memory */

__attribute__((noinline)) vm_value far_print(vm_frame *frame, vm_value value)
{
    (void)frame;
    printed++;
    return value + 1;
}

__attribute__((noinline, noreturn)) void far_stack_chk_fail(void)
{
    fputs("veneer_run: the shim's stack protector fired\n", stderr);
    abort();
}

static const void *symbol_value(const char *name)
{
    if (!strcmp(name, "vm_print"))
        return (const void *)far_print;
    if (!strcmp(name, "__stack_chk_fail"))
        return (const void *)far_stack_chk_fail;
    if (!strcmp(name, "vm_marker"))
        return vm_marker;
    return (const void *)&printed; /* never called by these programs */
}

static int far(const void *a, const void *b)
{
    intptr_t d = (intptr_t)a - (intptr_t)b;
    return d > INT32_MAX || d < INT32_MIN;
}

int main(void)
{
    static const sr_stencil_set set = SR_STENCIL_SET_FROM_HEADER;
    const void *symbols[SG_SYM__COUNT + 1];
    for (size_t i = 0; i < SG_SYM__COUNT; i++)
        symbols[i] = symbol_value(sg_symbol_names[i]);
    sr_runtime *rt;
#ifdef SG_SYM_vm_marker
    sr_status refused = sr_runtime_create(&set, symbols, NULL, &rt);
    printf("sr_runtime_create: %s\n", refused == SR_OK ? "ok" : sr_last_error());
    puts(refused == SR_ERANGE ? "veneer_run: PASS" : "veneer_run: FAIL");
    return refused != SR_ERANGE;
#endif
    if (sr_runtime_create(&set, symbols, NULL, &rt) != SR_OK) {
        printf("sr_runtime_create: %s\nveneer_run: FAIL\n", sr_last_error());
        return 1;
    }
    shim_fn *shim = (shim_fn *)sr_shim_entry(rt);
    int ok = 1;
#ifdef SG_OP_direct_call /* tests/patch/fixtures' header */
    {
        vm_frame frame;
        memset(&frame, 0, sizeof frame);
        vm_value stack[8];
        sr_instr code[] = {{SG_OP_direct_call, 0, {0}}, {SG_OP_leave, 0, {0}}};
        sr_executor *ex;
        if (sr_emit(rt, code, 2, "veneered", &ex) != SR_OK) {
            printf("sr_emit: %s\n", sr_last_error());
            ok = 0;
        } else {
            vm_value v = shim(&frame, stack, sr_executor_entry(ex)); /* tos starts at 0 */
            printf("far: %d; vm_print called %d time(s), result %lld\n",
                   far((void *)far_print, sr_executor_entry(ex)), printed, (long long)v);
            ok = printed == 1 && v == 1 && far((void *)far_print, sr_executor_entry(ex));
            sr_executor_free(ex);
        }
    }
#else
    printf("far: %d\n", far((void *)far_stack_chk_fail, (void *)shim));
    ok = far((void *)far_stack_chk_fail, (void *)shim);
#endif
    sr_runtime_destroy(rt);
    puts(ok ? "veneer_run: PASS" : "veneer_run: FAIL");
    return !ok;
}
