/* win_glue.h - tinyvm for the Windows test programs (tests/windows, run under
 * Wine by tests/integration/test_windows.py): tinyvm's own VM
 * (tests/common/tvm_glue.h; unload with tvm_unload) with a vm_call that keeps
 * its frame, and what the unwind checks need to know about the code. Each
 * program defines vm_print, vm_native and vm_trap itself. Usable from C and
 * C++ (the generated header is C only, so this one does not include it). */
#ifndef WIN_GLUE_H
#define WIN_GLUE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define _Noreturn [[noreturn]]
extern "C" {
#endif

#include "tinyvm.h"
#include "tvm_glue.h"

/* Load PROGRAM, JIT-compiled or interpreted; exits with a message on failure.
 * In JIT mode the environment variable WIN_TEST_MUTATE breaks the unwind
 * information handed to the runtime (never the runtime itself), so the suite
 * can show that its checks notice a wrong rule:
 *   frame-offset  the executors' UNWIND_INFO with FrameOffset one more (the
 *                 frame register then points 16 bytes off the frame it names) */
struct vm *win_load(const char *path, int jit);
/* Run the program's function `name` (exits if there is none), counted in
 * win_depth. */
vm_value win_run(struct vm *vm, const char *name, vm_value argc, const vm_value *args);

/* The natives' numbers (stencils/vm.h), for vm_native. */
enum { WIN_NATIVE_BACKTRACE, WIN_NATIVE_BREAKPOINT, WIN_NATIVE_TRAP, WIN_NATIVE_ABORT };

/* What a PC is: code of an executor, of the shim, a veneer after an
 * executor's code (a jump to a helper out of rel32's reach), or neither. */
typedef struct win_code {
    int kind;           /* WIN_CODE_* */
    const char *name;   /* the executor's, or "shim" */
    const char *instr;  /* "op@executor[i]" for executor code, else NULL */
    size_t offset;      /* from the executor's (shim's) start */
    int cold;           /* executor code in its cold parts, after every hot part
                           (docs/runtime.md, "Hot and cold parts") */
} win_code;
enum { WIN_CODE_NONE, WIN_CODE_EXECUTOR, WIN_CODE_SHIM, WIN_CODE_VENEER };
win_code win_locate(const struct vm *vm, uintptr_t pc);

/* Where JIT code starts: function i's executor (i < the number of
 * functions), then the shim's code (i == that number); NULL after that. */
const void *win_jit_code(const struct vm *vm, size_t i);

/* Where instruction i of function fn starts in its executor (i == its
 * instruction count: the end of its code); NULL when out of range. */
const void *win_instr(const struct vm *vm, size_t fn, size_t i);

/* The shim's return address: the instruction after its call into JIT code. */
uintptr_t win_shim_return(const struct vm *vm);

/* vm_run's nesting on this thread: how many tinyvm calls are active, so how
 * many JIT frames a walk of the stack must find (JIT mode: one per level). */
#ifdef __cplusplus
#define WIN_TLS thread_local
#else
#define WIN_TLS _Thread_local
#endif
extern WIN_TLS volatile int win_depth;

/* The program's functions compiled once more, as executors of their own
 * (named "copy"), and freed: for tests that emit and free while other
 * threads run and unwind. Exits on failure. */
void win_emit_and_free_copies(struct vm *vm);

/* Deregistration (win_unwind dereg): function tables counted and looked up
 * after a failed batch emit, after each executor is freed (by then only the
 * shim's is left) and after the runtime is destroyed (none); the old PCs
 * must have no RUNTIME_FUNCTION. Prints a line per check; 1 on any failure.
 * The JIT is gone afterwards (tvm_unload then only frees the program). */
int win_deregistration_check(struct vm *vm);

/* Re-point every jump of every executor at the target it has (sr_patch_jump:
 * each instruction's pages made writable and execute+read again, as
 * tinyvm's --chain does); how many were patched. Exits on an error other
 * than SR_EINVAL (an op without a jump target). */
size_t win_repatch_jumps(struct vm *vm);

/* vm_run itself (the shim's caller, stencils/run.c), for the checks' frame
 * sequence. */
vm_value vm_run(struct vm *vm, size_t fn, vm_value argc, const vm_value *args);

#ifdef __cplusplus
}
#undef _Noreturn
#endif

#endif
