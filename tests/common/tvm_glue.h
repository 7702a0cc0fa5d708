/* tvm_glue.h - tinyvm embedded in a test program that runs on another host
 * (tests/aarch64/a64_glue.c under qemu, tests/windows/win_glue.c under Wine):
 * load a program, run its functions by name, unload. The VM itself is
 * tinyvm's own code (stencils/loader.c, interp.c, jit.c, chain.c, and run.c
 * for vm_run); each program brings its natives (vm_call, vm_print,
 * vm_native, vm_trap). Usable from C and C++ (the generated header is C
 * only, so this one does not include it). */
#ifndef TVM_GLUE_H
#define TVM_GLUE_H

#include <stdbool.h>

#ifdef __cplusplus
#define _Noreturn [[noreturn]]
extern "C" {
#endif

#include "tinyvm.h"

/* Loads PROGRAM, to be interpreted, or JIT-compiled by jit_init (tinyvm's
 * vm_jit_init, or the program's own); exits with a message on failure. */
struct vm *tvm_load(const char *path, int jit, bool (*jit_init)(struct vm *vm));
/* Runs the program's function `name` through vm_run (exits if there is none). */
vm_value tvm_run(struct vm *vm, const char *name, vm_value argc, const vm_value *args);
void tvm_unload(struct vm *vm);

#ifdef __cplusplus
}
#undef _Noreturn
#endif

#endif
