/* jit.c - tinyvm's JIT: every function becomes one executor, entered through
 * the shim that stencilrt placed in JIT memory. */
#include <stdio.h>
#include <stdlib.h>

#include "vm.h"

static const sr_stencil_set stencil_set = SR_STENCIL_SET_FROM_HEADER;

bool vm_jit_runtime_with(struct vm *vm, const sr_stencil_set *set)
{
    const void *symbols[SG_SYM__COUNT] = {
        [SG_SYM_vm_call] = (const void *)vm_call,
        [SG_SYM_vm_print] = (const void *)vm_print,
        [SG_SYM_vm_native] = (const void *)vm_native,
        [SG_SYM_vm_trap] = (const void *)vm_trap,
    };
    if (sr_runtime_create(set, symbols, NULL, &vm->rt) != SR_OK) {
        fprintf(stderr, "tinyvm: %s\n", sr_last_error());
        return false;
    }
    vm->shim = sr_shim_entry(vm->rt);
    return true;
}

bool vm_jit_runtime(struct vm *vm)
{
    return vm_jit_runtime_with(vm, &stencil_set);
}

bool vm_jit_init(struct vm *vm)
{
    if (!vm_jit_runtime(vm))
        return false;
    /* One batch: one registration with debuggers for the whole program. */
    sr_program *progs = calloc(vm->nfunctions, sizeof *progs);
    sr_executor **out = calloc(vm->nfunctions, sizeof *out);
    bool ok = progs && out;
    for (size_t i = 0; ok && i < vm->nfunctions; i++)
        progs[i] = (sr_program){vm->functions[i].code, vm->functions[i].n, vm->functions[i].name};
    if (ok && sr_emit_batch(vm->rt, progs, vm->nfunctions, out) != SR_OK) {
        fprintf(stderr, "tinyvm: cannot compile the program: %s\n", sr_last_error());
        ok = false;
    }
    for (size_t i = 0; ok && i < vm->nfunctions; i++) {
        vm->functions[i].executor = out[i];
        vm->functions[i].entry = sr_executor_entry(out[i]);
    }
    free(progs);
    free(out);
    return ok;
}

void vm_jit_fini(struct vm *vm)
{
    for (size_t i = 0; i < vm->nfunctions; i++)
        sr_executor_free(vm->functions[i].executor);
    sr_runtime_destroy(vm->rt);
    vm->rt = NULL;
}

vm_value vm_jit_run(vm_frame *frame, vm_value *sp)
{
    struct vm *vm = frame->vm;
    shim_fn *shim = (shim_fn *)vm->shim;
    return shim(frame, sp, vm->functions[frame->function].entry);
}
