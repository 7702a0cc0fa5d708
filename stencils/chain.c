/* chain.c - tinyvm --chain: a function is cut into basic blocks, each compiled
 * into an executor of its own when it first runs, and every jump from one
 * block to another is linked (sr_patch_jump) once both exist. Until then the
 * jump goes to a side exit, which returns to the dispatcher below; after it,
 * control flows from executor to executor without leaving JIT code.
 *
 * A block's executor: [pop] body... then, per way out, [jump -> side_exit].
 * The pop is the dispatcher's entry (the side exit pushed the top of stack);
 * a linked jump enters at instruction 1, with the top of stack in its
 * register. */
#include <stdio.h>
#include <stdlib.h>

#include "vm.h"

struct vm_block {
    size_t first, n;   /* its instructions in the function */
    sr_executor *ex;   /* NULL until it first runs */
};

static bool is_jump(uint32_t op)
{
    return op == SG_OP_jump || op == SG_OP_jump_if_zero || op == SG_OP_jump_if_nonzero;
}

/* Blocks start at 0, at every jump target and after every jump or ret. */
static bool cut_blocks(vm_function *f)
{
    bool *leader = calloc(f->n + 1, sizeof *leader);
    if (!leader)
        return false;
    leader[0] = true;
    for (size_t i = 0; i < f->n; i++) {
        if (is_jump(f->code[i].op))
            leader[f->code[i].target] = true;
        if (is_jump(f->code[i].op) || f->code[i].op == SG_OP_ret)
            leader[i + 1] = true;
    }
    size_t n = 0;
    for (size_t i = 0; i < f->n; i++)
        n += leader[i];
    f->blocks = calloc(n, sizeof *f->blocks);
    for (size_t i = 0, b = 0; f->blocks && i < f->n; i++) {
        if (leader[i])
            f->blocks[b++].first = i;
        f->blocks[b - 1].n++;
    }
    f->nblocks = n;
    free(leader);
    return f->blocks != NULL;
}

static size_t block_at(const vm_function *f, size_t pc)
{
    size_t lo = 0, hi = f->nblocks;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (f->blocks[mid].first <= pc)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* Block b's executor code (see the top of the file): at most its n + 5 instructions. */
static size_t block_code(const vm_function *f, size_t b, sr_instr *code)
{
    const struct vm_block *blk = &f->blocks[b];
    size_t k = 0;
    code[k++] = (sr_instr){.op = SG_OP_pop};
    for (size_t i = 0; i < blk->n; i++)
        code[k++] = f->code[blk->first + i];
    sr_instr *last = &code[k - 1];
    if (last->op == SG_OP_ret)
        return k;
    /* The ways out: to[j] is the block reached through the jump at link[j]. */
    size_t link[2], to[2], n = 0;
    if (last->op == SG_OP_jump) {
        to[n] = block_at(f, last->target);
        link[n++] = k - 1;
    } else {
        to[n] = b + 1; /* falling through (the last block always jumps or returns) */
        link[n++] = k++;
        if (is_jump(last->op)) { /* a conditional jump goes to a linkable jump of its own */
            to[n] = block_at(f, last->target);
            last->target = (uint32_t)k;
            link[n++] = k++;
        }
    }
    for (size_t j = 0; j < n; j++) {
        code[link[j]] = (sr_instr){.op = SG_OP_jump, .target = (uint32_t)(k + j)};
        code[k + j] = (sr_instr){.op = SG_OP_side_exit, .operand = {to[j], b, link[j]}};
    }
    return k + n;
}

/* Block b's executor, compiled the first time it is needed. */
static sr_executor *block_executor(vm_frame *frame, vm_function *f, size_t b)
{
    struct vm *vm = frame->vm;
    if (f->blocks[b].ex)
        return f->blocks[b].ex;
    sr_instr *code = calloc(f->blocks[b].n + 5, sizeof *code);
    if (!code)
        vm_trap(frame, "out of memory");
    char name[128];
    snprintf(name, sizeof name, "%s.b%zu", f->name, b);
    sr_status st = sr_emit(vm->rt, code, block_code(f, b, code), name, &f->blocks[b].ex);
    free(code);
    if (st != SR_OK)
        vm_trap(frame, sr_last_error());
    vm->chain.blocks++;
    return f->blocks[b].ex;
}

bool vm_chain_init(struct vm *vm)
{
    for (size_t i = 0; i < vm->nfunctions; i++)
        if (!cut_blocks(&vm->functions[i])) {
            fputs("tinyvm: out of memory\n", stderr);
            return false;
        }
    return vm_jit_runtime(vm);
}

void vm_chain_fini(struct vm *vm)
{
    for (size_t i = 0; i < vm->nfunctions; i++) {
        vm_function *f = &vm->functions[i];
        for (size_t b = 0; b < f->nblocks; b++)
            sr_executor_free(f->blocks[b].ex);
        free(f->blocks);
        f->blocks = NULL;
    }
    sr_runtime_destroy(vm->rt);
    vm->rt = NULL;
}

/* Runs blocks until one returns: compile what is missing, link what exited. */
vm_value vm_chain_run(vm_frame *frame, vm_value *sp)
{
    struct vm *vm = frame->vm;
    vm_function *f = &vm->functions[frame->function];
    shim_fn *shim = (shim_fn *)vm->shim;
    sr_executor *ex = block_executor(frame, f, 0);
    *sp++ = 0; /* the top of stack the first pop takes */
    for (;;) {
        frame->exit_to = -1;
        vm_value tos = shim(frame, sp, sr_executor_entry(ex));
        if (frame->exit_to < 0)
            return tos;
        vm->chain.exits++;
        sp = frame->exit_sp;
        ex = block_executor(frame, f, (size_t)frame->exit_to);
        sr_executor *from = f->blocks[frame->exit_from].ex;
        if (sr_patch_jump(from, (size_t)frame->exit_branch, sr_executor_instr(ex, 1)) != SR_OK)
            vm_trap(frame, sr_last_error());
        vm->chain.links++;
    }
}
