/* a64_glue.h - tinyvm for the AArch64 test programs: tinyvm's own VM
 * (tests/common/tvm_glue.h: tvm_run, tvm_unload) with a vm_call that keeps
 * its frame. Each program defines vm_print, vm_native and vm_trap itself.
 * Usable from C and C++ (the generated header is C only, so this one does
 * not include it). */
#ifndef A64_GLUE_H
#define A64_GLUE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define _Noreturn [[noreturn]]
extern "C" {
#endif

#include "tinyvm.h"
#include "tvm_glue.h"

/* Load PROGRAM, JIT-compiled (tinyvm's vm_jit_init) or interpreted; exits
 * with a message on failure. Run and unload with tvm_run, tvm_unload. */
struct vm *a64_load(const char *path, int jit);

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
