/* glue.h - the unwind test programs' own small VM glue over stencilrt and the
 * bundled stencils (it does not use tinyvm's sources): program tables, the
 * runtime and its executors, a reference interpreter, and the ranges the
 * checks need. Each program defines the run-time helpers (vm_call, vm_print,
 * vm_native, vm_trap) itself. Usable from C and C++. */
#ifndef UNWIND_GLUE_H
#define UNWIND_GLUE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "stencilrt.h"

#ifdef __cplusplus
#define _Noreturn [[noreturn]]
extern "C" {
#endif
#include "tinyvm.h"
#ifdef __cplusplus
#undef _Noreturn
#endif

#define GLUE_MAX_EXECUTORS 16
#define GLUE_STACK 256

/* The shim's C type (stencils/shim.c), the executor passed as a code pointer. */
typedef vm_value glue_shim_fn(vm_frame *frame, vm_value *sp, void *code);

/* One VM function: its instructions. Operands and jump targets as sr_instr. */
typedef struct glue_prog {
    const char *name;
    const sr_instr *code;
    size_t n;
} glue_prog;

struct vm {
    sr_runtime *rt;
    glue_shim_fn *shim;
    uintptr_t shim_start, shim_end; /* the shim's code in JIT memory */
    const glue_prog *progs;
    size_t nprogs;
    sr_executor *ex[GLUE_MAX_EXECUTORS];
    uintptr_t ex_start[GLUE_MAX_EXECUTORS], ex_end[GLUE_MAX_EXECUTORS]; /* code */
    uintptr_t ex_page_end[GLUE_MAX_EXECUTORS]; /* end of its code's last page, or
                                                  where the next executor starts */
    const void *symbols[8];                    /* by SG_SYM_* */
};

/* Assemble `src` into out: one instruction a line, "op [operand]... [@target]",
 * "label:" lines, '#' comments; @target is a label or an instruction index.
 * Aborts on an error (the sources are fixed test programs). */
void glue_asm(glue_prog *out, const char *name, const char *src);
void glue_asm_free(glue_prog *p);

/* The op number of a bundled stencil by name (aborts when unknown). */
uint32_t glue_op(const char *name);
const char *glue_op_name(uint32_t op);
/* SG_SYM_* of a helper by name (aborts when unknown). */
size_t glue_sym(const char *name);
/* Number of run-time symbols. */
size_t glue_nsyms(void);

/* Create the runtime (cfg NULL: defaults and environment) and emit every
 * program; on failure prints why and returns 0. helpers: vm_call, vm_print,
 * vm_native, vm_trap. */
int glue_init(struct vm *vm, const glue_prog *progs, size_t nprogs, const sr_config *cfg,
              const void *vm_call_fn, const void *vm_print_fn, const void *vm_native_fn,
              const void *vm_trap_fn);
void glue_fini(struct vm *vm);

/* Which executor's code holds pc (-1: none); -2 for the shim. */
int glue_locate(const struct vm *vm, uintptr_t pc);
/* Instruction index of executor ex that holds code address pc (-1: none). */
long glue_instr_at(const struct vm *vm, size_t ex, uintptr_t pc);

/* Reference interpreter with the stencils' semantics. call recurses into
 * the interpreter; print and native call the helpers. executed[fn][i] is set
 * for every instruction that ran (may be NULL). */
vm_value glue_interp(struct vm *vm, size_t fn, vm_value argc, const vm_value *args,
                     uint8_t *const *executed);

/* Run executor fn in a fresh frame through the shim (the caller of the shim is
 * this function; it keeps a shadow stack of active levels, see below). */
vm_value glue_run(struct vm *vm, size_t fn, vm_value argc, const vm_value *args);

/* The shadow stack, for signal handlers and helpers: levels[0..depth) are
 * this thread's active glue_run calls, innermost last. */
typedef struct glue_level {
    volatile int ex;
    volatile int ref_valid; /* set by whoever records the caller's state */
    uintptr_t ref_cfa, ref_ra;
    uintptr_t ref_regs[6]; /* rbx rbp r12 r13 r14 r15 */
} glue_level;
#define GLUE_MAX_DEPTH 32
#ifdef __cplusplus
#define GLUE_TLS thread_local
#else
#define GLUE_TLS _Thread_local
#endif
extern GLUE_TLS glue_level glue_levels[GLUE_MAX_DEPTH]; /* per thread */
extern GLUE_TLS volatile int glue_depth;

/* Print, for the shim and every executor, the CIE and FDE that libgcc finds
 * for it (_Unwind_Find_FDE at its first instruction), as lines
 *   fde NAME: entry_off=.. pc_begin_off=.. range=.. func_off=.. code_align=..
 *     data_align=.. ra=.. aug=.. cie_insns=HEX fde_insns=HEX
 * (offsets from the code's start) or "fde NAME: none". Returns how many
 * were found. */
int glue_fde_dump(const struct vm *vm, FILE *out);

/* How many of the code addresses pcs[0..n) libgcc finds an FDE for. */
size_t glue_fde_count(const uintptr_t *pcs, size_t n);

/* Report SIGSEGV/SIGBUS/SIGILL (e.g. the unwinder following a wrong rule into
 * the weeds) as "PROG: FAIL: signal N at pc X, address Y" and exit 4. */
void glue_crash_reporter(const char *prog);

/* [start, end) of a global function, from its dynamic symbol (link with
 * -rdynamic); 0 when unknown. */
int glue_func_range(const void *fn, uintptr_t *start, uintptr_t *end);

#ifdef __cplusplus
}
#endif

#endif
