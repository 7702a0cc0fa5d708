/* a64_glue.c - see a64_glue.h. */
#include "a64_glue.h"

#include "vm.h"

_Static_assert((int)A64_NATIVE_TRAP == (int)NATIVE_TRAP &&
                   (int)A64_NATIVE_BACKTRACE == (int)NATIVE_BACKTRACE,
               "native numbers");

/* vm_run is tinyvm's own (stencils/run.c). vm_call keeps a frame of its own:
 * the unwinding tests look for vm_call's frame too (tinyvm's vm_call is a
 * sibling call to vm_run). */
__attribute__((noinline)) vm_value vm_call(vm_frame *caller, vm_value function, vm_value argc,
                                           vm_value *args)
{
    vm_value v = vm_run(caller->vm, (size_t)function, argc, args);
    __asm__ volatile("" ::: "memory"); /* not a tail call */
    return v;
}

struct vm *a64_load(const char *path, int jit)
{
    return tvm_load(path, jit, vm_jit_init);
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
