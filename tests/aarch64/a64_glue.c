/* a64_glue.c - see a64_glue.h. */
#include "a64_glue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vm.h"

#define OPERAND_STACK 1024

_Static_assert((int)A64_NATIVE_TRAP == (int)NATIVE_TRAP &&
                   (int)A64_NATIVE_BACKTRACE == (int)NATIVE_BACKTRACE,
               "native numbers");

const char *const vm_native_names[NATIVE__COUNT] = {"backtrace", "breakpoint", "trap", "abort"};

/* noinline: the unwinding tests look for vm_run's and vm_call's own frames
 * (clang would otherwise inline vm_run into its callers). */
__attribute__((noinline)) vm_value vm_run(struct vm *vm, size_t fn, vm_value argc,
                                          const vm_value *args)
{
    vm_frame frame = {.vm = vm, .function = (int32_t)fn};
    vm_value stack[OPERAND_STACK];
    for (vm_value i = 0; i < argc && i < VM_MAX_LOCALS; i++)
        frame.locals[i] = args[i];
    vm_value v = vm->mode == VM_JIT ? vm_jit_run(&frame, stack) : vm_interpret(&frame, stack);
    __asm__ volatile("" ::: "memory"); /* keep vm_run's frame under the call */
    return v;
}

__attribute__((noinline)) vm_value vm_call(vm_frame *caller, vm_value function, vm_value argc,
                                           vm_value *args)
{
    vm_value v = vm_run(caller->vm, (size_t)function, argc, args);
    __asm__ volatile("" ::: "memory");
    return v;
}

struct vm *a64_load(const char *path, int jit)
{
    struct vm *vm = calloc(1, sizeof *vm);
    if (!vm)
        exit(1);
    vm->mode = jit ? VM_JIT : VM_INTERP;
    if (!vm_load(vm, path))
        exit(1);
    if (jit && !vm_jit_init(vm))
        exit(1);
    return vm;
}

vm_value a64_run(struct vm *vm, const char *name, vm_value argc, const vm_value *args)
{
    for (size_t i = 0; i < vm->nfunctions; i++)
        if (!strcmp(vm->functions[i].name, name))
            return vm_run(vm, i, argc, args);
    fprintf(stderr, "no function '%s'\n", name);
    exit(1);
}

void a64_unload(struct vm *vm)
{
    if (vm->mode == VM_JIT)
        vm_jit_fini(vm);
    vm_unload(vm);
    free(vm);
}

size_t a64_jit_ranges(const struct vm *vm, a64_range *out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < vm->nfunctions && n < max; i++) {
        const sr_executor *e = vm->functions[i].executor;
        uintptr_t start = (uintptr_t)sr_executor_entry(e);
        out[n++] = (a64_range){start, start + sr_executor_code_size(e), vm->functions[i].name};
    }
    if (n < max) {
        uintptr_t shim = (uintptr_t)vm->shim - SG_SHIM_ENTRY;
        out[n++] = (a64_range){shim, shim + sg_shim.code_size, "shim"};
    }
    return n;
}
