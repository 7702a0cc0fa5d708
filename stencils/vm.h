/* vm.h - tinyvm internals shared by its loader, interpreter, JIT and main. */
#ifndef TINYVM_VM_H
#define TINYVM_VM_H

#include <stdbool.h>
#include <stddef.h>

#include "jit_stencils.h"
#include "stencilrt.h"
#include "tinyvm.h"

typedef struct vm_function {
    char *name;
    int nparams;
    int nlocals; /* locals its code names: 1 + the highest load/store index (loader.c) */
    sr_instr *code;
    size_t n;
    sr_executor *executor; /* JIT mode */
    sr_instr *jit_code;    /* what it was emitted from, with variants: the cached forms (jit.c) */
    void *entry;           /* its sr_executor_entry, looked up once per call otherwise */
    struct vm_block *blocks; /* chain mode: its basic blocks (chain.c) */
    size_t nblocks;
} vm_function;

typedef enum vm_mode { VM_INTERP, VM_JIT, VM_CHAIN } vm_mode;

struct vm {
    vm_function *functions;
    size_t nfunctions;
    vm_mode mode;
    bool variants; /* JIT mode: the cached ops' variants (jit.c), or the plain ops */
    sr_runtime *rt;
    void *shim; /* the JIT shim, in JIT memory */
    struct { size_t blocks, links, exits; } chain; /* chain mode's work, for --stats */
};

/* Natives callable with `native NAME` (operand = index); loader.c names them. */
enum vm_native_id { NATIVE_BACKTRACE, NATIVE_BREAKPOINT, NATIVE_TRAP, NATIVE_ABORT, NATIVE__COUNT };
extern const char *const vm_native_names[NATIVE__COUNT];

/* loader.c: parse a program; false after printing "file:line: error" to stderr. */
bool vm_load(struct vm *vm, const char *path);
void vm_unload(struct vm *vm);

/* interp.c */
vm_value vm_interpret(vm_frame *frame, vm_value *sp);

/* The shim's C type (shim.c), for both JIT modes; the executor is passed as a
 * plain code pointer. */
typedef vm_value shim_fn(vm_frame *frame, vm_value *sp, void *code);

/* jit.c */
bool vm_jit_runtime(struct vm *vm); /* the runtime and the shim, for both JIT modes */
/* The same from another stencil set (a test's altered one: tests/windows/win_glue.c). */
bool vm_jit_runtime_with(struct vm *vm, const sr_stencil_set *set);
bool vm_jit_init(struct vm *vm);
/* Whether stencil `op` is one of the JIT's cached forms, not a language op. */
bool vm_jit_is_variant(uint32_t op);
void vm_jit_fini(struct vm *vm);
vm_value vm_jit_run(vm_frame *frame, vm_value *sp);

/* chain.c: basic blocks compiled when first run, jumps between them linked */
bool vm_chain_init(struct vm *vm);
void vm_chain_fini(struct vm *vm);
vm_value vm_chain_run(vm_frame *frame, vm_value *sp);

/* run.c: run function `fn` with the given arguments (the entry point of every mode). */
vm_value vm_run(struct vm *vm, size_t fn, vm_value argc, const vm_value *args);

/* A function GDB tests break on (native breakpoint). */
vm_value tinyvm_breakpoint(vm_value v);

#endif
