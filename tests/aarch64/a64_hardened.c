/* a64_hardened - what PAC and BTI change for JIT code, under qemu -cpu max
 * (test_aarch64_qemu.py compiles it against a header it generates).
 *
 *   a64_hardened enter OFFSET   run `push 41; addi 1; ret` through the shim,
 *                               entering the executor OFFSET bytes in; prints
 *                               the result (42), or dies of SIGILL when the
 *                               entry is not a landing pad of a guarded page
 *   a64_hardened backtrace      backtrace() from a helper called from JIT code:
 *                               prints "reached main" or "lost after N frames" */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jit_stencils.h"
#include "stencilrt.h"
#include "tinyvm.h"

typedef vm_value shim_fn(vm_frame *frame, vm_value *sp, void *code);
static const sr_stencil_set set = SR_STENCIL_SET_FROM_HEADER;

vm_value vm_call(vm_frame *caller, vm_value function, vm_value argc, vm_value *args)
{
    (void)caller, (void)function, (void)argc, (void)args;
    abort();
}

vm_value vm_print(vm_frame *frame, vm_value value)
{
    (void)frame;
    return value;
}

_Noreturn void vm_trap(vm_frame *frame, const char *why)
{
    (void)frame;
    fprintf(stderr, "trap: %s\n", why);
    exit(3);
}

/* The frames backtrace() finds, up to main: libgcc must step through the
 * executor, whose saved return address the shim signed. */
__attribute__((noinline)) vm_value vm_native(vm_frame *frame, vm_value which, vm_value arg)
{
    (void)frame, (void)which;
    void *pcs[64];
    int n = backtrace(pcs, 64);
    for (int i = 0; i < n; i++) {
        Dl_info info;
        if (dladdr(pcs[i], &info) && info.dli_sname && !strcmp(info.dli_sname, "main")) {
            printf("reached main after %d frames\n", i);
            return arg;
        }
    }
    printf("lost after %d frames\n", n);
    return arg;
}

static vm_value run(sr_runtime *rt, const sr_instr *code, size_t n, size_t offset)
{
    sr_executor *ex;
    if (sr_emit(rt, code, n, "hardened", &ex) != SR_OK) {
        fprintf(stderr, "a64_hardened: %s\n", sr_last_error());
        exit(1);
    }
    vm_frame frame = {.vm = NULL};
    vm_value stack[16];
    return ((shim_fn *)sr_shim_entry(rt))(&frame, stack, (char *)sr_executor_entry(ex) + offset);
}

int main(int argc, char **argv)
{
    const void *symbols[SG_SYM__COUNT] = {
        [SG_SYM_vm_call] = (const void *)vm_call, [SG_SYM_vm_print] = (const void *)vm_print,
        [SG_SYM_vm_native] = (const void *)vm_native, [SG_SYM_vm_trap] = (const void *)vm_trap,
    };
    sr_runtime *rt;
    if (sr_runtime_create(&set, symbols, NULL, &rt) != SR_OK) {
        fprintf(stderr, "a64_hardened: %s\n", sr_last_error());
        return 1;
    }
    if (argc == 3 && !strcmp(argv[1], "enter")) {
        const sr_instr code[] = {{SG_OP_push, 0, {41, 0, 0, 0}}, {SG_OP_addi, 0, {1, 0, 0, 0}},
                                 {SG_OP_ret, 0, {0, 0, 0, 0}}};
        printf("%lld\n", (long long)run(rt, code, 3, strtoul(argv[2], NULL, 0)));
    } else if (argc == 2 && !strcmp(argv[1], "backtrace")) {
        const sr_instr code[] = {{SG_OP_push, 0, {7, 0, 0, 0}}, {SG_OP_native, 0, {0, 0, 0, 0}},
                                 {SG_OP_ret, 0, {0, 0, 0, 0}}};
        run(rt, code, 3, 0);
    } else {
        fputs("usage: a64_hardened enter OFFSET | backtrace\n", stderr);
        return 2;
    }
    sr_runtime_destroy(rt);
    return 0;
}
