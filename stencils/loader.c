/* loader.c - tinyvm's assembly: one instruction per line,
 *
 *     func NAME NPARAMS      start a function (arguments arrive in locals 0..)
 *     LABEL:                 a jump target
 *     OP [OPERAND...]        an op of the bundled stencils, e.g. push 42,
 *                            jump_if_zero done, call fib 1, native backtrace
 *     # comment
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vm.h"

#define MAX_TOKENS 4

const char *const vm_native_names[NATIVE__COUNT] = {"backtrace", "breakpoint", "trap", "abort"};

typedef struct label {
    char *name;
    size_t function, index;
} label;

typedef struct fixup { /* an operand naming a label or function, resolved at the end */
    size_t function, index;
    char *name;
    unsigned line;
    bool is_call;
} fixup;

typedef struct loader {
    const char *path;
    unsigned line;
    struct vm *vm;
    label *labels;
    size_t nlabels;
    fixup *fixups;
    size_t nfixups;
} loader;

static bool error(const loader *ld, const char *fmt, const char *arg)
{
    fprintf(stderr, "%s:%u: error: ", ld->path, ld->line);
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    return false;
}

static void *grow(void *p, size_t n, size_t size)
{
    void *q = realloc(p, (n + 1) * size);
    if (!q) {
        fputs("tinyvm: out of memory\n", stderr);
        exit(1);
    }
    return q;
}

static int find_op(const char *name)
{
    for (int i = 0; i < SG_OP__COUNT; i++)
        if (!strcmp(sg_stencils[i].name, name))
            return i;
    return -1;
}

static bool parse_int(const char *s, vm_value *v)
{
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 0);
    *v = x;
    return *s && !*end && errno == 0;
}

static bool add_fixup(loader *ld, vm_function *f, const char *name, bool is_call)
{
    ld->fixups = grow(ld->fixups, ld->nfixups, sizeof *ld->fixups);
    ld->fixups[ld->nfixups++] = (fixup){ld->vm->nfunctions - 1, f->n, strdup(name), ld->line,
                                        is_call};
    return true;
}

static bool parse_instr(loader *ld, char **tok, int ntok)
{
    struct vm *vm = ld->vm;
    if (!vm->nfunctions)
        return error(ld, "instruction '%s' outside a function", tok[0]);
    vm_function *f = &vm->functions[vm->nfunctions - 1];
    int op = find_op(tok[0]);
    /* side_exit is the dispatcher's, the cached forms the JIT's: not the language's */
    if (op < 0 || op == SG_OP_side_exit || vm_jit_is_variant((uint32_t)op))
        return error(ld, "unknown op '%s'", tok[0]);
    sr_instr in = {.op = (uint32_t)op};
    bool ok = true;
    if (op == SG_OP_jump || op == SG_OP_jump_if_zero || op == SG_OP_jump_if_nonzero) {
        ok = ntok == 2 && add_fixup(ld, f, tok[1], false);
    } else if (op == SG_OP_call) {
        vm_value argc = 0;
        ok = ntok == 3 && parse_int(tok[2], &argc) && argc >= 0 && argc <= VM_MAX_LOCALS &&
             add_fixup(ld, f, tok[1], true);
        in.operand[1] = (uint64_t)argc;
    } else if (op == SG_OP_native) {
        ok = false;
        for (int i = 0; ntok == 2 && i < NATIVE__COUNT; i++)
            if (!strcmp(tok[1], vm_native_names[i])) {
                in.operand[0] = (uint64_t)i;
                ok = true;
            }
    } else if (op == SG_OP_push || op == SG_OP_addi || op == SG_OP_load || op == SG_OP_store) {
        vm_value v = 0;
        ok = ntok == 2 && parse_int(tok[1], &v);
        if (ok && (op == SG_OP_load || op == SG_OP_store)) {
            ok = v >= 0 && v < VM_MAX_LOCALS;
            if (ok && v >= f->nlocals)
                f->nlocals = (int)v + 1;
        }
        in.operand[0] = (uint64_t)v;
    } else {
        ok = ntok == 1;
    }
    if (!ok)
        return error(ld, "bad operands for '%s'", tok[0]);
    f->code = grow(f->code, f->n, sizeof *f->code);
    f->code[f->n++] = in;
    return true;
}

static bool parse_line(loader *ld, char *text)
{
    char *hash = strchr(text, '#');
    if (hash)
        *hash = '\0';
    char *tok[MAX_TOKENS + 1];
    int ntok = 0;
    for (char *s = strtok(text, " \t\r\n"); s; s = strtok(NULL, " \t\r\n")) {
        if (ntok == MAX_TOKENS)
            return error(ld, "too many operands%s", "");
        tok[ntok++] = s;
    }
    if (!ntok)
        return true;
    struct vm *vm = ld->vm;
    size_t len = strlen(tok[0]);
    if (ntok == 1 && len > 1 && tok[0][len - 1] == ':') {
        if (!vm->nfunctions)
            return error(ld, "label '%s' outside a function", tok[0]);
        tok[0][len - 1] = '\0';
        ld->labels = grow(ld->labels, ld->nlabels, sizeof *ld->labels);
        ld->labels[ld->nlabels++] = (label){strdup(tok[0]), vm->nfunctions - 1,
                                            vm->functions[vm->nfunctions - 1].n};
        return true;
    }
    if (!strcmp(tok[0], "func")) {
        vm_value np;
        if (ntok != 3 || !parse_int(tok[2], &np) || np < 0 || np > VM_MAX_LOCALS)
            return error(ld, "expected 'func NAME NPARAMS'%s", "");
        vm->functions = grow(vm->functions, vm->nfunctions, sizeof *vm->functions);
        vm->functions[vm->nfunctions++] = (vm_function){.name = strdup(tok[1]), .nparams = (int)np};
        return true;
    }
    return parse_instr(ld, tok, ntok);
}

static bool resolve(loader *ld)
{
    struct vm *vm = ld->vm;
    for (size_t i = 0; i < ld->nfixups; i++) {
        fixup *fx = &ld->fixups[i];
        sr_instr *in = &vm->functions[fx->function].code[fx->index];
        bool found = false;
        for (size_t k = 0; fx->is_call && k < vm->nfunctions && !found; k++)
            if (!strcmp(vm->functions[k].name, fx->name)) {
                in->operand[0] = k;
                found = true;
            }
        for (size_t k = 0; !fx->is_call && k < ld->nlabels && !found; k++)
            if (ld->labels[k].function == fx->function && !strcmp(ld->labels[k].name, fx->name)) {
                in->target = (uint32_t)ld->labels[k].index;
                found = true;
            }
        ld->line = fx->line;
        if (!found)
            return error(ld, fx->is_call ? "unknown function '%s'" : "unknown label '%s'",
                         fx->name);
        if (!fx->is_call && in->target >= vm->functions[fx->function].n)
            return error(ld, "label '%s' is past the last instruction", fx->name);
    }
    for (size_t k = 0; k < vm->nfunctions; k++) {
        vm_function *f = &vm->functions[k];
        if (!f->n || (f->code[f->n - 1].op != SG_OP_ret && f->code[f->n - 1].op != SG_OP_jump)) {
            ld->line = 0;
            return error(ld, "function '%s' must end with ret or jump", f->name);
        }
    }
    return true;
}

bool vm_load(struct vm *vm, const char *path)
{
    loader ld = {.path = path, .vm = vm};
    FILE *in = fopen(path, "r");
    if (!in) {
        fprintf(stderr, "tinyvm: cannot open '%s': %s\n", path, strerror(errno));
        return false;
    }
    char line[1024];
    bool ok = true;
    while (ok && fgets(line, sizeof line, in)) {
        ld.line++;
        ok = parse_line(&ld, line);
    }
    fclose(in);
    ok = ok && resolve(&ld);
    for (size_t i = 0; i < ld.nlabels; i++)
        free(ld.labels[i].name);
    for (size_t i = 0; i < ld.nfixups; i++)
        free(ld.fixups[i].name);
    free(ld.labels);
    free(ld.fixups);
    return ok;
}

void vm_unload(struct vm *vm)
{
    for (size_t i = 0; i < vm->nfunctions; i++) {
        free(vm->functions[i].name);
        free(vm->functions[i].code);
    }
    free(vm->functions);
    vm->functions = NULL;
    vm->nfunctions = 0;
}
