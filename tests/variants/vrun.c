/* vrun.c - variant stencils at run time (tests/integration/test_variants.py),
 * over the header of tests/fixtures/variants for x86-64 Linux.
 *
 * Emits one executor "variants" whose instructions are variants picked with
 * SG_OP_VARIANT_<op>() and by the table (sg_variant_stencil), and runs it:
 *
 *   vrun run    prints each instruction's name and offset, the result, and
 *               what sr_lookup_pc names at each instruction's first byte;
 *               STENCILRT_PERF=map makes the perf map the test reads, and
 *               GDB stops it in vm_print (called from print[twice=1]), and
 *               with VRUN_STOP set vm_print stops the process (SIGSTOP)
 *               for stencilrt-stack to read its stack from outside.
 *   vrun step   runs it with EFLAGS.TF set: at every instruction of the
 *               executor a SIGTRAP handler runs _Unwind_Backtrace and checks
 *               the chain: the interrupted JIT frame (which stands for the
 *               shim's, unwind.md), run_executor, main; and that sr_lookup_pc names the
 *               instruction the PC is in. Prints every stepped offset and
 *               "vrun: PASS" (exit 0) only if every check passed; with
 *               STENCILRT_FRAMES=0 the chain stops at JIT code: FAIL, exit 1.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>
#include <unwind.h>

#include "jit_stencils.h"
#include "stencilrt.h"
#include "tinyvm.h"

#define MAX_FRAMES 64
#define MAX_OFFSETS 4096

typedef vm_value shim_fn(vm_frame *frame, vm_value *sp, void *code);

vm_value vm_print(vm_frame *frame, vm_value value)
{
    (void)frame;
    printf("print %lld\n", (long long)value);
    fflush(stdout);
    if (getenv("VRUN_STOP")) /* for stencilrt-stack to read this process's stack */
        raise(SIGSTOP);
    return value;
}

vm_value vm_call(vm_frame *caller, vm_value function, vm_value argc, vm_value *args)
{
    (void)caller, (void)function, (void)argc, (void)args;
    abort();
}

vm_value vm_native(vm_frame *frame, vm_value which, vm_value arg)
{
    (void)frame, (void)which;
    return arg;
}

void vm_trap(vm_frame *frame, const char *why)
{
    (void)frame;
    fprintf(stderr, "trap: %s\n", why);
    abort();
}

/* What the handler checks against; set before the executor runs. */
static struct {
    sr_runtime *rt;
    sr_executor *ex;
    uintptr_t start, end;
    unsigned char seen[MAX_OFFSETS];
    unsigned long checks, failed;
} g;

typedef struct chain {
    uintptr_t ip[MAX_FRAMES];
    int n;
} chain;

static _Unwind_Reason_Code collect(struct _Unwind_Context *c, void *data)
{
    chain *ch = data;
    if (ch->n == MAX_FRAMES)
        return _URC_END_OF_STACK;
    ch->ip[ch->n++] = _Unwind_GetIP(c);
    return _URC_NO_REASON;
}

/* The function `ip` (a return address: looked up at ip - 1) is in, or "". */
static const char *function_of(uintptr_t ip)
{
    Dl_info info;
    if (!dladdr((void *)(ip - 1), &info) || !info.dli_sname)
        return "";
    return info.dli_sname;
}

static bool chain_is_right(uintptr_t pc)
{
    chain ch = {{0}, 0};
    _Unwind_Backtrace(collect, &ch);
    int k = 0;
    while (k < ch.n && ch.ip[k] != pc)
        k++;
    return k + 2 < ch.n && !strcmp(function_of(ch.ip[k + 1]), "run_executor") &&
           !strcmp(function_of(ch.ip[k + 2]), "main");
}

/* The instruction sr_lookup_pc names must hold pc: its start at or before it,
 * the next one's after it. */
static bool lookup_is_right(uintptr_t pc)
{
    sr_executor *ex = NULL;
    size_t i = 0;
    if (!sr_lookup_pc(g.rt, (void *)pc, &ex, &i) || ex != g.ex)
        return false;
    uintptr_t at = (uintptr_t)sr_executor_instr(ex, i), next = (uintptr_t)sr_executor_instr(ex, i + 1);
    return at <= pc && pc < next;
}

static void on_trap(int sig, siginfo_t *si, void *uc_)
{
    (void)sig, (void)si;
    ucontext_t *uc = uc_;
    uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
    if (pc < g.start || pc >= g.end || pc - g.start >= MAX_OFFSETS)
        return;
    g.seen[pc - g.start] = 1;
    g.checks++;
    if (!chain_is_right(pc) || !lookup_is_right(pc))
        g.failed++;
}

static void set_tf(bool on)
{
    if (on)
        __asm__ volatile("pushfq; orq $0x100, (%%rsp); popfq" ::: "cc", "memory");
    else
        __asm__ volatile("pushfq; andq $~0x100, (%%rsp); popfq" ::: "cc", "memory");
}

vm_value run_executor(shim_fn *shim, void *code, bool step);

/* Exported (-rdynamic), so that dladdr names it in a chain. */
__attribute__((noinline)) vm_value run_executor(shim_fn *shim, void *code, bool step)
{
    vm_frame frame = {0};
    vm_value stack[16];
    if (step)
        set_tf(true);
    vm_value r = shim(&frame, stack, code);
    if (step)
        set_tf(false);
    return r;
}

int main(int argc, char **argv)
{
    bool step = argc > 1 && !strcmp(argv[1], "step");
    static const sr_stencil_set set = SR_STENCIL_SET_FROM_HEADER;
    const void *symbols[SG_SYM__COUNT] = {[SG_SYM_vm_call] = (void *)vm_call,
                                          [SG_SYM_vm_print] = (void *)vm_print,
                                          [SG_SYM_vm_native] = (void *)vm_native,
                                          [SG_SYM_vm_trap] = (void *)vm_trap};
    unsigned in0_out0[2] = {0, 0};
    sr_instr code[] = {
        {SG_OP_push, 0, {5}},
        {SG_OP_VARIANT_add(1, 2), 0, {0}},   /* 5 + 121 */
        {SG_OP_VARIANT_pad(2), 0, {0}},      /* folded into pad[width=1] */
        {SG_OP_VARIANT_pad(3), 0, {0}},      /* ^ 1 */
        {SG_OP_VARIANT_print(1), 0, {0}},    /* prints 127, then 128 */
        {SG_OP_push, 0, {1000}},
        {sg_variant_stencil(&sg_variant_ops[SG_VARIANT_OP_add], in0_out0, 2), 0, {0}},
        {SG_OP_ret, 0, {0}},
    };
    size_t n = sizeof code / sizeof *code;
    if (sr_runtime_create(&set, symbols, NULL, &g.rt) != SR_OK ||
        sr_emit(g.rt, code, n, "variants", &g.ex) != SR_OK) {
        fprintf(stderr, "vrun: %s\n", sr_last_error());
        return 2;
    }
    printf("pid %ld\n", (long)getpid());
    fflush(stdout);
    g.start = (uintptr_t)sr_executor_entry(g.ex);
    g.end = g.start + sr_executor_code_size(g.ex);
    for (size_t i = 0; i < n; i++) {
        uintptr_t at = (uintptr_t)sr_executor_instr(g.ex, i);
        sr_executor *found = NULL;
        size_t which = 0;
        bool empty = at == (uintptr_t)sr_executor_instr(g.ex, i + 1); /* names the next */
        bool named = empty || (sr_lookup_pc(g.rt, (void *)at, &found, &which) && found == g.ex &&
                               which == i);
        printf("instr %zu %s +%lu %s\n", i, sr_executor_instr_name(g.ex, i),
               (unsigned long)(at - g.start), named ? "lookup-ok" : "lookup-wrong");
    }
    printf("end +%lu\n", (unsigned long)(g.end - g.start));
    if (step) {
        struct sigaction sa = {0};
        sa.sa_sigaction = on_trap;
        sa.sa_flags = SA_SIGINFO;
        sigaction(SIGTRAP, &sa, NULL);
    }
    vm_value r = run_executor((shim_fn *)sr_shim_entry(g.rt), sr_executor_entry(g.ex), step);
    printf("result %lld\n", (long long)r);
    if (!step) {
        sr_executor_free(g.ex);
        sr_runtime_destroy(g.rt);
        return 0;
    }
    printf("stepped");
    for (size_t i = 0; i < MAX_OFFSETS; i++)
        if (g.seen[i])
            printf(" %zu", i);
    printf("\nchecks %lu failed %lu\n", g.checks, g.failed);
    bool pass = g.checks > 0 && g.failed == 0;
    puts(pass ? "vrun: PASS" : "vrun: FAIL");
    sr_executor_free(g.ex);
    sr_runtime_destroy(g.rt);
    return pass ? 0 : 1;
}
