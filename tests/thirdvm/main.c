/* rvm: the third VM's driver. Assembles a .rvm program, JIT-compiles every
 * function of it with stencilrt and runs `main` with an initial accumulator.
 *
 *   rvm PROGRAM [ACC]      prints main's result
 *
 * A program is a list of functions:
 *
 *   .func main             # starts function `main` (the first is entered)
 *   loop:                  # a label, for jmp/jz/jlt
 *       ldi 42             # opcode and operands: imm, rN, label, function
 *
 * Built outside meson, from the installed headers only (see
 * tests/integration/test_thirdvm.py): jit_stencils.h comes from the installed
 * stencilgen, stencilrt.h and the library from pkg-config. */
#define _GNU_SOURCE
#include <errno.h>
#include <execinfo.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jit_stencils.h"
#include "rvm.h"
#include "stencilrt.h"

#define MAX_FUNCS 16
#define MAX_CODE 256
#define MAX_LABELS 64
#define NAME_LEN 32
#define MAX_DEPTH 64

/* Operand kinds, one letter per operand: i immediate, r register, l label
 * (the jump target), f function number. */
static const struct {
    const char *name;
    uint32_t op;
    const char *args;
} opcodes[] = {
    {"ldi", SG_OP_ldi, "i"},   {"ld", SG_OP_ld, "r"},       {"st", SG_OP_st, "r"},
    {"addi", SG_OP_addi, "i"}, {"add", SG_OP_add, "r"},     {"sub", SG_OP_sub, "r"},
    {"mul", SG_OP_mul, "r"},   {"inc", SG_OP_inc, "ri"},    {"jmp", SG_OP_jmp, "l"},
    {"jz", SG_OP_jz, "l"},     {"jlt", SG_OP_jlt, "rl"},    {"call", SG_OP_call, "f"},
    {"trace", SG_OP_trace, ""}, {"ret", SG_OP_ret, ""},
};
_Static_assert(sizeof opcodes / sizeof opcodes[0] == SG_OP__COUNT, "an op has no opcode");

struct func {
    char name[NAME_LEN];
    sr_instr code[MAX_CODE];
    size_t n;
    char label[MAX_LABELS][NAME_LEN]; /* label i is at instruction at[i] */
    size_t at[MAX_LABELS];
    size_t nlabels;
    char fixup[MAX_CODE][NAME_LEN]; /* the label or function an instruction names */
};

static struct func funcs[MAX_FUNCS];
static size_t nfuncs;

static _Noreturn void die(const char *file, int line, const char *msg, const char *what)
{
    fprintf(stderr, "%s:%d: %s%s%s\n", file, line, msg, what ? ": " : "", what ? what : "");
    exit(1);
}

static int64_t number(const char *file, int line, const char *s)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 0);
    if (errno || *end || end == s) {
        /* Unsigned 64-bit constants (0x8000000000000000 and up) are fine too. */
        errno = 0;
        unsigned long long u = strtoull(s, &end, 0);
        if (errno || *end || end == s || *s == '-')
            die(file, line, "not a 64-bit number", s);
        return (int64_t)u;
    }
    return (int64_t)v;
}

static size_t func_index(const char *name)
{
    for (size_t i = 0; i < nfuncs; i++)
        if (strcmp(funcs[i].name, name) == 0)
            return i;
    return SIZE_MAX;
}

static void assemble(const char *file)
{
    FILE *f = fopen(file, "r");
    if (!f)
        die(file, 0, "cannot open", strerror(errno));
    char buf[512];
    int line = 0;
    struct func *fn = NULL;
    while (fgets(buf, sizeof buf, f)) {
        line++;
        buf[strcspn(buf, "#\n")] = 0;
        char *tok[4];
        int ntok = 0;
        for (char *t = strtok(buf, " \t,"); t; t = strtok(NULL, " \t,"))
            if (ntok < 4)
                tok[ntok++] = t;
            else
                die(file, line, "too many operands", t);
        if (ntok == 0)
            continue;
        if (strcmp(tok[0], ".func") == 0) {
            if (ntok != 2 || strlen(tok[1]) >= NAME_LEN || nfuncs == MAX_FUNCS)
                die(file, line, "bad .func", NULL);
            if (func_index(tok[1]) != SIZE_MAX)
                die(file, line, "function defined twice", tok[1]);
            fn = &funcs[nfuncs++];
            strcpy(fn->name, tok[1]);
            continue;
        }
        if (!fn)
            die(file, line, "code before the first .func", NULL);
        size_t len = strlen(tok[0]);
        if (ntok == 1 && len > 1 && tok[0][len - 1] == ':') {
            if (len > NAME_LEN || fn->nlabels == MAX_LABELS)
                die(file, line, "bad label", tok[0]);
            tok[0][len - 1] = 0;
            strcpy(fn->label[fn->nlabels], tok[0]);
            fn->at[fn->nlabels++] = fn->n;
            continue;
        }
        size_t k = 0;
        while (k < sizeof opcodes / sizeof opcodes[0] && strcmp(opcodes[k].name, tok[0]) != 0)
            k++;
        if (k == sizeof opcodes / sizeof opcodes[0])
            die(file, line, "unknown opcode", tok[0]);
        if ((size_t)(ntok - 1) != strlen(opcodes[k].args))
            die(file, line, "wrong number of operands for", tok[0]);
        if (fn->n == MAX_CODE)
            die(file, line, "function too long", fn->name);
        sr_instr *in = &fn->code[fn->n];
        memset(in, 0, sizeof *in);
        in->op = opcodes[k].op;
        fn->fixup[fn->n][0] = 0;
        for (int a = 1; a < ntok; a++) {
            const char *s = tok[a];
            switch (opcodes[k].args[a - 1]) {
            case 'i':
                in->operand[a - 1] = (uint64_t)number(file, line, s);
                break;
            case 'r': {
                int64_t r = s[0] == 'r' ? number(file, line, s + 1) : -1;
                if (r < 0 || r >= RVM_REGS)
                    die(file, line, "not a register r0..r15", s);
                in->operand[a - 1] = (uint64_t)r;
                break;
            }
            case 'l':
            case 'f':
                if (strlen(s) >= NAME_LEN)
                    die(file, line, "name too long", s);
                strcpy(fn->fixup[fn->n], s);
                break;
            }
        }
        fn->n++;
    }
    fclose(f);
    if (nfuncs == 0)
        die(file, line, "no functions", NULL);
    /* Resolve labels (jump targets) and function names (operand 0 of call). */
    for (size_t i = 0; i < nfuncs; i++) {
        struct func *g = &funcs[i];
        for (size_t j = 0; j < g->n; j++) {
            if (!g->fixup[j][0])
                continue;
            if (g->code[j].op == SG_OP_call) {
                size_t callee = func_index(g->fixup[j]);
                if (callee == SIZE_MAX)
                    die(file, 0, "unknown function", g->fixup[j]);
                g->code[j].operand[0] = callee;
                continue;
            }
            size_t l = 0;
            while (l < g->nlabels && strcmp(g->label[l], g->fixup[j]) != 0)
                l++;
            if (l == g->nlabels)
                die(file, 0, "unknown label", g->fixup[j]);
            g->code[j].target = (uint32_t)g->at[l];
        }
    }
}

/* Enter function fn through the shim with a fresh register file. noinline:
 * this is the VM's C frame every backtrace must show between JIT frames. */
__attribute__((noinline)) int64_t rvm_run(struct rvm *vm, size_t fn, int64_t acc)
{
    int64_t regs[RVM_REGS] = {0};
    return ((rvm_shim_fn *)vm->shim)(vm->entry[fn], acc, vm, regs);
}

/* The `call` op's helper: JIT -> C -> shim -> JIT. Not a tail call, so its
 * frame stays on the stack for backtraces. */
__attribute__((noinline)) int64_t rvm_call(struct rvm *vm, uint64_t fn, int64_t acc)
{
    if (fn >= vm->nfuncs || vm->depth == MAX_DEPTH) {
        fprintf(stderr, "rvm: call %" PRIu64 ": bad function or too deep\n", fn);
        exit(1);
    }
    vm->depth++;
    int64_t r = rvm_run(vm, (size_t)fn, acc);
    vm->depth--;
    return r;
}

/* The `trace` op's helper: glibc's backtrace() (libgcc's unwinder) from C
 * code called by JIT code. C frames are named by backtrace_symbols (the
 * program is linked with -rdynamic), JIT frames by sr_lookup_pc. */
__attribute__((noinline)) int64_t rvm_trace(struct rvm *vm, int64_t acc)
{
    void *pcs[64];
    int n = backtrace(pcs, 64);
    char **syms = backtrace_symbols(pcs, n);
    fprintf(stderr, "backtrace (acc %" PRId64 "):\n", acc);
    for (int i = 0; i < n; i++) {
        sr_executor *ex;
        size_t instr;
        /* A return address may be the next instruction's first byte. */
        const char *pc = (const char *)pcs[i] - (i > 0);
        const char *name = NULL;
        if (sr_lookup_pc((const sr_runtime *)vm->rt, pc, &ex, &instr))
            for (size_t f = 0; f < vm->nfuncs; f++)
                if (vm->executors[f] == ex)
                    name = vm->names[f];
        if (name)
            fprintf(stderr, "#%d jit %s[%zu]\n", i, name, instr);
        else
            fprintf(stderr, "#%d c %s\n", i, syms ? syms[i] : "?");
    }
    free(syms);
    return acc;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: rvm PROGRAM [ACC]\n");
        return 2;
    }
    assemble(argv[1]);
    int64_t acc = argc == 3 ? number("argv", 2, argv[2]) : 0;

    static const sr_stencil_set set = SR_STENCIL_SET_FROM_HEADER;
    const void *symbols[SG_SYM__COUNT] = {
        [SG_SYM_rvm_call] = (const void *)rvm_call,
        [SG_SYM_rvm_trace] = (const void *)rvm_trace,
    };
    sr_runtime *rt;
    if (sr_runtime_create(&set, symbols, NULL, &rt) != SR_OK) {
        fprintf(stderr, "rvm: %s\n", sr_last_error());
        return 1;
    }
    /* Every function in one batch: one GDB object for the whole program. */
    sr_program progs[MAX_FUNCS];
    sr_executor *ex[MAX_FUNCS];
    void *entry[MAX_FUNCS];
    const char *names[MAX_FUNCS];
    for (size_t i = 0; i < nfuncs; i++) {
        progs[i] = (sr_program){funcs[i].code, funcs[i].n, funcs[i].name};
        names[i] = funcs[i].name;
    }
    if (sr_emit_batch(rt, progs, nfuncs, ex) != SR_OK) {
        fprintf(stderr, "rvm: %s\n", sr_last_error());
        sr_runtime_destroy(rt);
        return 1;
    }
    for (size_t i = 0; i < nfuncs; i++)
        entry[i] = sr_executor_entry(ex[i]);
    struct rvm vm = {sr_shim_entry(rt), entry, nfuncs, rt, (const void *const *)ex, names, 0};
    int64_t r = rvm_run(&vm, 0, acc);
    printf("%" PRId64 "\n", r);
    sr_runtime_destroy(rt);
    return 0;
}
