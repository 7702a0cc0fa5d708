/* rvm.h - the third VM's state, shared by its ops, its shim and main.c.
 *
 * rvm is an accumulator machine with a register file: every op sees the VM,
 * the current function's 16 registers and the accumulator. It depends on
 * nothing of stencilrt, so ops compile without the runtime's headers. */
#ifndef RVM_H
#define RVM_H

#include <stddef.h>
#include <stdint.h>

#define RVM_REGS 16

struct rvm {
    void *shim;          /* the shim's entry in JIT memory */
    void *const *entry;  /* code of each function of the program, by index */
    size_t nfuncs;
    const void *rt;      /* the sr_runtime, for sr_lookup_pc in rvm_trace */
    const void *const *executors; /* by function index, to name JIT frames */
    const char *const *names;     /* function names, by index */
    int depth;           /* calls in progress, to refuse runaway recursion */
};

/* The shim (rvm_shim.c), in JIT memory: its own argument order, not the ops'. */
typedef int64_t rvm_shim_fn(void *code, int64_t acc, struct rvm *vm, int64_t *regs);

/* Run-time symbols the ops call (the manifest's `symbols:`), in main.c. */
int64_t rvm_call(struct rvm *vm, uint64_t fn, int64_t acc);
int64_t rvm_trace(struct rvm *vm, int64_t acc);

#endif
