/* jit.c - tinyvm's JIT: every function becomes one executor, entered through
 * the shim that stencilrt placed in JIT memory. */
#include <stdio.h>
#include <stdlib.h>

#include "vm.h"

static const sr_stencil_set stencil_set = SR_STENCIL_SET_FROM_HEADER;

#ifdef SG_OP_VARIANT_tos_push
/* Top-of-stack caching (docs/ops.md "Variants in tinyvm"): each language op
 * has a family of cached forms (ops/cached.c), one stencil per number of
 * values received in registers (in), left there (out) and, for some ops, a
 * third axis (form): the immediate width of a value operand (push, addi:
 * wide), the argument count (call: args) or a fused jump (comparisons:
 * branch). */
typedef struct op_family {
    uint32_t op;    /* the language's op (the interpreter's form) */
    int forms;      /* values of the third axis: 1 when there is none */
    uint32_t stencil[3][3][4]; /* [in][out][form] */
} op_family;

#define FORMS1_(f, i, o) {SG_OP_VARIANT_##f(i, o)}
#define FORMS2_(f, i, o) {SG_OP_VARIANT_##f(i, o, 0), SG_OP_VARIANT_##f(i, o, 1)}
#define FORMS3_(f, i, o)                                                                   \
    {SG_OP_VARIANT_##f(i, o, 0), SG_OP_VARIANT_##f(i, o, 1), SG_OP_VARIANT_##f(i, o, 2)}
#define FORMS4_(f, i, o)                                                                   \
    {SG_OP_VARIANT_##f(i, o, 0), SG_OP_VARIANT_##f(i, o, 1), SG_OP_VARIANT_##f(i, o, 2),   \
     SG_OP_VARIANT_##f(i, o, 3)}
#define IN_ONLY_(f, i, o) {SG_OP_VARIANT_##f(i)}
#define FAMILY_(op, forms, k, f)                                                            \
    {SG_OP_##op,                                                                          \
     forms,                                                                               \
     {{k(f, 0, 0), k(f, 0, 1), k(f, 0, 2)},                                               \
      {k(f, 1, 0), k(f, 1, 1), k(f, 1, 2)},                                               \
      {k(f, 2, 0), k(f, 2, 1), k(f, 2, 2)}}}

static const op_family families[] = {
    FAMILY_(push, 2, FORMS2_, tos_push),
    FAMILY_(pop, 1, FORMS1_, tos_pop),
    FAMILY_(dup, 1, FORMS1_, tos_dup),
    FAMILY_(load, 1, FORMS1_, tos_load),
    FAMILY_(store, 1, FORMS1_, tos_store),
    FAMILY_(add, 1, FORMS1_, tos_add),
    FAMILY_(sub, 1, FORMS1_, tos_sub),
    FAMILY_(mul, 1, FORMS1_, tos_mul),
    FAMILY_(div, 1, FORMS1_, tos_div),
    FAMILY_(mod, 1, FORMS1_, tos_mod),
    FAMILY_(addi, 2, FORMS2_, tos_addi),
    FAMILY_(lt, 3, FORMS3_, tos_lt),
    FAMILY_(le, 3, FORMS3_, tos_le),
    FAMILY_(eq, 3, FORMS3_, tos_eq),
    FAMILY_(jump, 1, FORMS1_, tos_jump),
    FAMILY_(jump_if_zero, 1, FORMS1_, tos_jump_if_zero),
    FAMILY_(jump_if_nonzero, 1, FORMS1_, tos_jump_if_nonzero),
    FAMILY_(ret, 1, IN_ONLY_, tos_ret),
    FAMILY_(call, 4, FORMS4_, tos_call),
    FAMILY_(print, 1, FORMS1_, tos_print),
    FAMILY_(native, 1, FORMS1_, tos_native),
};
#define NFAMILIES (sizeof families / sizeof families[0])

static const op_family *family_of(uint32_t op)
{
    for (size_t i = 0; i < NFAMILIES; i++)
        if (families[i].op == op)
            return &families[i];
    return NULL;
}

bool vm_jit_is_variant(uint32_t op)
{
    if (op == SG_OP_tos_skip)
        return true;
    for (size_t i = 0; i < NFAMILIES; i++)
        for (int in = 0; in < 3; in++)
            for (int out = 0; out < 3; out++)
                for (int form = 0; form < families[i].forms; form++)
                    if (families[i].stencil[in][out][form] == op)
                        return true;
    return false;
}

static bool is_jump(uint32_t op)
{
    return op == SG_OP_jump || op == SG_OP_jump_if_zero || op == SG_OP_jump_if_nonzero;
}

static bool is_compare(uint32_t op)
{
    return op == SG_OP_lt || op == SG_OP_le || op == SG_OP_eq;
}

/* How many values `op` leaves cached when it receives `in`, spilling or
 * reloading nothing it need not: pushes fill the registers (a third value
 * spills the lowest), pops empty them, results land in a register. */
static int natural_depth(uint32_t op, int in)
{
    switch (op) {
    case SG_OP_push:
    case SG_OP_load:
    case SG_OP_dup: return in < 2 ? in + 1 : 2;
    case SG_OP_pop:
    case SG_OP_store: return in > 0 ? in - 1 : 0;
    case SG_OP_addi:
    case SG_OP_print:
    case SG_OP_native: return in > 0 ? in : 1;
    default: return 1; /* binary ops and calls: the result alone */
    }
}

/* The third axis's value for instruction i (op_family): the wide immediate
 * for a value operand that does not fit 32 bits, a call's argument count
 * (3: from the operand), a comparison's fused jump (fuse_branch). */
static int form_of(const sr_instr *code, size_t i, bool fused)
{
    const sr_instr *in = &code[i];
    if (in->op == SG_OP_push || in->op == SG_OP_addi) {
        int64_t v = (int64_t)in->operand[0];
        return v < INT32_MIN || v > INT32_MAX;
    }
    if (in->op == SG_OP_call)
        return in->operand[1] < 3 ? (int)in->operand[1] : 3;
    if (fused)
        return code[i + 1].op == SG_OP_jump_if_zero ? 1 : 2;
    return 0;
}

/* Whether comparison i and the conditional jump after it become one
 * compare-and-branch: not when the jump is a target of its own, as its
 * instruction must stay there to be jumped to. */
static bool fuse_branch(const sr_instr *code, size_t n, size_t i, const bool *target)
{
    return is_compare(code[i].op) && i + 1 < n && !target[i + 1] &&
           (code[i + 1].op == SG_OP_jump_if_zero || code[i + 1].op == SG_OP_jump_if_nonzero);
}

/* Rewrites `code` into `out` with a cached form per instruction, choosing its
 * depths at compile time as the code runs straight: the entry and every jump
 * target of the function have nothing cached (the entry's one stack value is
 * in memory: vm_jit_run), and the instruction before a target, and every
 * jump, leave nothing cached. A comparison followed by a conditional jump
 * takes the jump's target and the jump's place becomes tos_skip. Instruction
 * i stays at index i. */
static bool choose_variants(const sr_instr *code, size_t n, sr_instr *out)
{
    bool *target = calloc(n + 1, sizeof *target);
    if (!target)
        return false;
    for (size_t i = 0; i < n; i++)
        if (is_jump(code[i].op) && code[i].target < n)
            target[code[i].target] = true;
    int depth = 0;
    for (size_t i = 0; i < n; i++) {
        out[i] = code[i];
        const op_family *f = family_of(code[i].op);
        if (!f)
            continue; /* not a language op (none reach here: loader.c) */
        if (target[i])
            depth = 0;
        bool fused = fuse_branch(code, n, i, target);
        int leave = natural_depth(code[i].op, depth);
        if (is_jump(code[i].op) || fused || target[i + 1])
            leave = 0;
        out[i].op = f->stencil[depth][leave][form_of(code, i, fused)];
        depth = leave;
        if (fused) {
            out[i].target = code[i + 1].target;
            i++;
            out[i] = code[i];
            out[i].op = SG_OP_tos_skip;
        }
    }
    free(target);
    return true;
}
#else
bool vm_jit_is_variant(uint32_t op)
{
    (void)op;
    return false;
}
#endif

bool vm_jit_runtime_with(struct vm *vm, const sr_stencil_set *set)
{
    const void *symbols[SG_SYM__COUNT] = {
        [SG_SYM_vm_call] = (const void *)vm_call,
        [SG_SYM_vm_print] = (const void *)vm_print,
        [SG_SYM_vm_native] = (const void *)vm_native,
        [SG_SYM_vm_trap] = (const void *)vm_trap,
    };
    if (sr_runtime_create(set, symbols, NULL, &vm->rt) != SR_OK) {
        fprintf(stderr, "tinyvm: %s\n", sr_last_error());
        return false;
    }
    vm->shim = sr_shim_entry(vm->rt);
    return true;
}

bool vm_jit_runtime(struct vm *vm)
{
    return vm_jit_runtime_with(vm, &stencil_set);
}

bool vm_jit_init(struct vm *vm)
{
    if (!vm_jit_runtime(vm))
        return false;
    /* One batch: one registration with debuggers for the whole program. */
    sr_program *progs = calloc(vm->nfunctions, sizeof *progs);
    sr_executor **out = calloc(vm->nfunctions, sizeof *out);
    bool ok = progs && out;
    for (size_t i = 0; ok && i < vm->nfunctions; i++)
        progs[i] = (sr_program){vm->functions[i].code, vm->functions[i].n, vm->functions[i].name};
#ifdef SG_OP_VARIANT_tos_push
    for (size_t i = 0; ok && vm->variants && i < vm->nfunctions; i++) {
        sr_instr *cached = malloc(vm->functions[i].n * sizeof *cached);
        progs[i].code = vm->functions[i].jit_code = cached; /* vm_jit_fini frees it */
        if (!cached || !choose_variants(vm->functions[i].code, vm->functions[i].n, cached)) {
            fputs("tinyvm: out of memory\n", stderr);
            ok = false;
        }
    }
#endif
    if (ok && sr_emit_batch(vm->rt, progs, vm->nfunctions, out) != SR_OK) {
        fprintf(stderr, "tinyvm: cannot compile the program: %s\n", sr_last_error());
        ok = false;
    }
    for (size_t i = 0; ok && i < vm->nfunctions; i++) {
        vm->functions[i].executor = out[i];
        vm->functions[i].entry = sr_executor_entry(out[i]);
    }
    free(progs);
    free(out);
    return ok;
}

void vm_jit_fini(struct vm *vm)
{
    for (size_t i = 0; i < vm->nfunctions; i++) {
        sr_executor_free(vm->functions[i].executor);
        free(vm->functions[i].jit_code);
        vm->functions[i].jit_code = NULL;
    }
    sr_runtime_destroy(vm->rt);
    vm->rt = NULL;
}

/* The shim enters with one stack value, a 0, in `tos` (TINYVM_ENTRY_ARGS),
 * which a function that pops more than it pushed finds. The same 0 goes to
 * memory for the cached forms, which enter with nothing cached and would pop
 * it from there (choose_variants); the plain ops never read it. */
vm_value vm_jit_run(vm_frame *frame, vm_value *sp)
{
    struct vm *vm = frame->vm;
    shim_fn *shim = (shim_fn *)vm->shim;
    *sp = 0;
    return shim(frame, sp + 1, vm->functions[frame->function].entry);
}
