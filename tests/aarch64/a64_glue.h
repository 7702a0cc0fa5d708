/* a64_glue.h - tinyvm for the AArch64 test programs: the VM's loader,
 * interpreter and JIT (stencils/loader.c, interp.c, jit.c) with the entry
 * points stencils/main.c would provide. Each program defines vm_print,
 * vm_native and vm_trap itself. Usable from C and C++ (the generated header
 * is C only, so this one does not include it). */
#ifndef A64_GLUE_H
#define A64_GLUE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define _Noreturn [[noreturn]]
extern "C" {
#endif

#include "tinyvm.h"

/* Load PROGRAM, JIT-compiled or interpreted; exits with a message on failure. */
struct vm *a64_load(const char *path, int jit);
/* Run the program's function `name` (exits if there is none). */
vm_value a64_run(struct vm *vm, const char *name, vm_value argc, const vm_value *args);
void a64_unload(struct vm *vm);

/* The natives' numbers (stencils/vm.h), for vm_native. */
enum { A64_NATIVE_BACKTRACE, A64_NATIVE_BREAKPOINT, A64_NATIVE_TRAP, A64_NATIVE_ABORT };

/* The code of every executor and of the shim (JIT mode), for PC lookups:
 * returns the number of ranges written (at most max). */
typedef struct a64_range {
    uintptr_t start, end;
    const char *name;
} a64_range;
size_t a64_jit_ranges(const struct vm *vm, a64_range *out, size_t max);

#ifdef __cplusplus
}
#undef _Noreturn
#endif

#endif
