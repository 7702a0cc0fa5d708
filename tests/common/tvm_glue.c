/* tvm_glue.c - see tvm_glue.h. */
#include "tvm_glue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vm.h"

struct vm *tvm_load(const char *path, int jit, bool (*jit_init)(struct vm *vm))
{
    struct vm *vm = calloc(1, sizeof *vm);
    if (!vm) {
        fprintf(stderr, "out of memory loading %s\n", path);
        exit(1);
    }
    vm->mode = jit ? VM_JIT : VM_INTERP;
    if (!vm_load(vm, path)) /* vm_load said why */
        exit(1);
    if (jit && !jit_init(vm)) {
        fprintf(stderr, "%s: JIT setup failed (see above)\n", path);
        exit(1);
    }
    return vm;
}

vm_value tvm_run(struct vm *vm, const char *name, vm_value argc, const vm_value *args)
{
    for (size_t i = 0; i < vm->nfunctions; i++)
        if (!strcmp(vm->functions[i].name, name))
            return vm_run(vm, i, argc, args);
    fprintf(stderr, "no function '%s'\n", name);
    exit(1);
}

void tvm_unload(struct vm *vm)
{
    if (vm->mode == VM_JIT)
        vm_jit_fini(vm);
    vm_unload(vm);
    free(vm);
}
