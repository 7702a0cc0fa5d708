/* glue.c - see glue.h. */
#include "glue.h"

#include <dlfcn.h>
#include <link.h>
#include <signal.h>
#include <ucontext.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jit_stencils.h"

static const sr_stencil_set stencil_set = SR_STENCIL_SET_FROM_HEADER;

GLUE_TLS glue_level glue_levels[GLUE_MAX_DEPTH];
GLUE_TLS volatile int glue_depth;

uint32_t glue_op(const char *name)
{
    for (uint32_t i = 0; i < SG_OP__COUNT; i++)
        if (!strcmp(sg_stencils[i].name, name))
            return i;
    fprintf(stderr, "glue: no op '%s' in the bundled stencils\n", name);
    abort();
}

const char *glue_op_name(uint32_t op)
{
    return op < SG_OP__COUNT ? sg_stencils[op].name : "?";
}

size_t glue_sym(const char *name)
{
    for (size_t i = 0; i < SG_SYM__COUNT; i++)
        if (!strcmp(sg_symbol_names[i], name))
            return i;
    fprintf(stderr, "glue: no run-time symbol '%s'\n", name);
    abort();
}

size_t glue_nsyms(void)
{
    return SG_SYM__COUNT;
}

/* UNWIND_TEST_MUTATE breaks the executor rule handed to the runtime (never
 * the runtime itself), so the suite can show its checks notice a wrong rule:
 *   drop-REG  remove the DW_CFA_offset rule of DWARF register REG (e.g. 12)
 *   cfa+N     add N to the DW_CFA_def_cfa offset */
static uint8_t mutated_cfi[256];

static int mutate(sr_stencil_set *set, const char *how)
{
    const uint8_t *in = set->executor_cfi;
    size_t n = set->executor_cfi_len, m = 0;
    int done = 0;
    if (n > sizeof mutated_cfi)
        return 0;
    for (size_t i = 0; i < n;) {
        uint8_t op = in[i];
        if (op == 0x0c && i + 2 < n && in[i + 2] < 0x80) { /* def_cfa reg, off (1-byte ulebs) */
            int off = in[i + 2];
            if (!strncmp(how, "cfa+", 4)) {
                off += atoi(how + 4);
                done = off < 0x80;
            }
            mutated_cfi[m++] = op;
            mutated_cfi[m++] = in[i + 1];
            mutated_cfi[m++] = (uint8_t)off;
            i += 3;
        } else if ((op & 0xc0) == 0x80 && i + 1 < n && in[i + 1] < 0x80) { /* offset reg, off */
            if (!strncmp(how, "drop-", 5) && (op & 0x3f) == atoi(how + 5)) {
                done = 1;
            } else {
                mutated_cfi[m++] = op;
                mutated_cfi[m++] = in[i + 1];
            }
            i += 2;
        } else {
            mutated_cfi[m++] = in[i++];
        }
    }
    set->executor_cfi = mutated_cfi;
    set->executor_cfi_len = m;
    return done;
}

int glue_init(struct vm *vm, const glue_prog *progs, size_t nprogs, const sr_config *cfg,
              const void *vm_call_fn, const void *vm_print_fn, const void *vm_native_fn,
              const void *vm_trap_fn)
{
    /* The runtime keeps a pointer to the set: one for the whole process, made
     * by the first call (programs call glue_init first on their main thread). */
    static sr_stencil_set set;
    static int set_state; /* 0: not made, 1: ok, -1: bad mutation */
    if (!set_state) {
        set = stencil_set;
        set_state = 1;
        const char *how = getenv("UNWIND_TEST_MUTATE");
        if (how && *how) {
            if (!mutate(&set, how)) {
                fprintf(stderr, "glue: cannot apply UNWIND_TEST_MUTATE=%s to the executor "
                        "rule\n", how);
                set_state = -1;
            } else {
                fprintf(stderr, "glue: executor rule mutated (%s)\n", how);
            }
        }
    }
    if (set_state < 0)
        return 0;
    memset(vm, 0, sizeof *vm);
    if (nprogs > GLUE_MAX_EXECUTORS || SG_SYM__COUNT > 8) {
        fprintf(stderr, "glue: too many programs or symbols\n");
        return 0;
    }
    vm->symbols[glue_sym("vm_call")] = vm_call_fn;
    vm->symbols[glue_sym("vm_print")] = vm_print_fn;
    vm->symbols[glue_sym("vm_native")] = vm_native_fn;
    vm->symbols[glue_sym("vm_trap")] = vm_trap_fn;
    if (sr_runtime_create(&set, vm->symbols, cfg, &vm->rt) != SR_OK) {
        fprintf(stderr, "glue: sr_runtime_create: %s\n", sr_last_error());
        return 0;
    }
    vm->shim = (glue_shim_fn *)sr_shim_entry(vm->rt);
    vm->shim_start = (uintptr_t)sr_shim_entry(vm->rt) - SG_SHIM_ENTRY;
    vm->shim_end = vm->shim_start + sg_shim.code_size;
    vm->progs = progs;
    vm->nprogs = nprogs;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    for (size_t i = 0; i < nprogs; i++) {
        if (sr_emit(vm->rt, progs[i].code, progs[i].n, progs[i].name, &vm->ex[i]) != SR_OK) {
            fprintf(stderr, "glue: cannot emit '%s': %s\n", progs[i].name, sr_last_error());
            return 0;
        }
        vm->ex_start[i] = (uintptr_t)sr_executor_entry(vm->ex[i]);
        vm->ex_end[i] = vm->ex_start[i] + sr_executor_code_size(vm->ex[i]);
        vm->ex_page_end[i] = (vm->ex_end[i] + page - 1) / page * page;
        if ((uintptr_t)sr_executor_instr(vm->ex[i], 0) != vm->ex_start[i] ||
            (uintptr_t)sr_executor_instr(vm->ex[i], progs[i].n) != vm->ex_end[i]) {
            fprintf(stderr, "glue: '%s': sr_executor_instr disagrees with entry/code size\n",
                    progs[i].name);
            return 0;
        }
    }
    /* Executors may share a page: one's tail (veneers, data) ends where the
     * next one starts. */
    for (size_t i = 0; i < nprogs; i++)
        for (size_t j = 0; j < nprogs; j++)
            if (vm->ex_start[j] > vm->ex_start[i] && vm->ex_start[j] < vm->ex_page_end[i])
                vm->ex_page_end[i] = vm->ex_start[j];
    return 1;
}

void glue_fini(struct vm *vm)
{
    for (size_t i = 0; i < vm->nprogs; i++)
        sr_executor_free(vm->ex[i]);
    sr_runtime_destroy(vm->rt);
    vm->rt = NULL;
}

int glue_locate(const struct vm *vm, uintptr_t pc)
{
    if (pc >= vm->shim_start && pc < vm->shim_end)
        return -2;
    for (size_t i = 0; i < vm->nprogs; i++)
        if (pc >= vm->ex_start[i] && pc < vm->ex_page_end[i])
            return (int)i;
    return -1;
}

long glue_instr_at(const struct vm *vm, size_t ex, uintptr_t pc)
{
    if (ex >= vm->nprogs || pc < vm->ex_start[ex] || pc >= vm->ex_end[ex])
        return -1;
    /* The runtime's answer: it knows the instructions' cold parts too, which
     * follow all the hot ones (docs/runtime.md, "Hot and cold parts"). */
    sr_executor *e = NULL;
    size_t i = 0;
    if (!sr_lookup_pc(vm->rt, (const void *)pc, &e, &i) || e != vm->ex[ex])
        return -1;
    return (long)i;
}

/* ---- reference interpreter */

typedef vm_value print_fn(vm_frame *, vm_value);
typedef vm_value native_fn(vm_frame *, vm_value, vm_value);

static vm_value interp_frame(struct vm *vm, vm_frame *frame, uint8_t *const *executed)
{
    const glue_prog *p = &vm->progs[frame->function];
    vm_value stack[GLUE_STACK];
    vm_value *sp = stack, tos = 0, a;
    size_t pc = 0;
    for (;;) {
        if (pc >= p->n) {
            fprintf(stderr, "glue: interpreter ran off '%s'\n", p->name);
            abort();
        }
        const sr_instr *in = &p->code[pc];
        if (executed)
            executed[frame->function][pc] = 1;
        pc++;
        vm_value op0 = (vm_value)in->operand[0], op1 = (vm_value)in->operand[1];
        switch (in->op) {
        case SG_OP_push: *sp++ = tos; tos = op0; break;
        case SG_OP_pop: tos = *--sp; break;
        case SG_OP_dup: *sp++ = tos; break;
        case SG_OP_load: *sp++ = tos; tos = frame->locals[op0]; break;
        case SG_OP_store: frame->locals[op0] = tos; tos = *--sp; break;
        case SG_OP_add: a = *--sp; tos = (vm_value)((uint64_t)a + (uint64_t)tos); break;
        case SG_OP_sub: a = *--sp; tos = (vm_value)((uint64_t)a - (uint64_t)tos); break;
        case SG_OP_mul: a = *--sp; tos = (vm_value)((uint64_t)a * (uint64_t)tos); break;
        case SG_OP_div:
        case SG_OP_mod:
            if (tos == 0 || (tos == -1 && sp[-1] == INT64_MIN))
                ((void (*)(vm_frame *, const char *))vm->symbols[SG_SYM_vm_trap])(frame, "div");
            a = *--sp;
            tos = in->op == SG_OP_div ? a / tos : a % tos;
            break;
        case SG_OP_addi: tos = (vm_value)((uint64_t)tos + (uint64_t)op0); break;
        case SG_OP_lt: a = *--sp; tos = a < tos; break;
        case SG_OP_le: a = *--sp; tos = a <= tos; break;
        case SG_OP_eq: a = *--sp; tos = a == tos; break;
        case SG_OP_jump: pc = in->target; break;
        case SG_OP_jump_if_zero:
            a = tos;
            tos = *--sp;
            if (a == 0)
                pc = in->target;
            break;
        case SG_OP_jump_if_nonzero:
            a = tos;
            tos = *--sp;
            if (a != 0)
                pc = in->target;
            break;
        case SG_OP_ret: return tos;
        case SG_OP_call:
            *sp++ = tos;
            sp -= op1;
            tos = glue_interp(vm, (size_t)op0, op1, sp, executed);
            break;
        case SG_OP_print: tos = ((print_fn *)vm->symbols[SG_SYM_vm_print])(frame, tos); break;
        case SG_OP_native:
            tos = ((native_fn *)vm->symbols[SG_SYM_vm_native])(frame, op0, tos);
            break;
        default:
            fprintf(stderr, "glue: interpreter: op %u\n", in->op);
            abort();
        }
    }
}

vm_value glue_interp(struct vm *vm, size_t fn, vm_value argc, const vm_value *args,
                     uint8_t *const *executed)
{
    vm_frame frame;
    memset(&frame, 0, sizeof frame);
    frame.vm = vm;
    frame.function = (int32_t)fn;
    for (vm_value i = 0; i < argc && i < VM_MAX_LOCALS; i++)
        frame.locals[i] = args[i];
    return interp_frame(vm, &frame, executed);
}

/* ---- running JIT code */

__attribute__((noinline)) vm_value glue_run(struct vm *vm, size_t fn, vm_value argc,
                                            const vm_value *args)
{
    vm_frame frame;
    vm_value stack[GLUE_STACK];
    memset(&frame, 0, sizeof frame);
    frame.vm = vm;
    frame.function = (int32_t)fn;
    for (vm_value i = 0; i < argc && i < VM_MAX_LOCALS; i++)
        frame.locals[i] = args[i];
    int d = glue_depth;
    if (d >= GLUE_MAX_DEPTH || fn >= vm->nprogs)
        abort();
    glue_levels[d].ex = (int)fn;
    glue_levels[d].ref_valid = 0;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    glue_depth = d + 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    vm_value r = vm->shim(&frame, stack, sr_executor_entry(vm->ex[fn]));
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    glue_depth = d;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    return r;
}

int glue_func_range(const void *fn, uintptr_t *start, uintptr_t *end)
{
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    if (!dladdr1(fn, &info, (void **)&sym, RTLD_DL_SYMENT) || !sym || !info.dli_saddr ||
        (uintptr_t)info.dli_saddr != (uintptr_t)fn || sym->st_size == 0) {
        *start = *end = 0;
        return 0;
    }
    *start = (uintptr_t)fn;
    *end = (uintptr_t)fn + sym->st_size;
    return 1;
}

/* ---- a tiny assembler for the test programs */

#define ASM_MAX 1024

static void asm_fail(const char *name, int line, const char *what)
{
    fprintf(stderr, "glue: %s:%d: %s\n", name, line, what);
    abort();
}

void glue_asm(glue_prog *out, const char *name, const char *src)
{
    char labels[ASM_MAX][32];
    size_t label_at[ASM_MAX], nlabels = 0;
    char targets[ASM_MAX][32];
    int target_line[ASM_MAX];
    sr_instr *code = calloc(ASM_MAX, sizeof *code);
    size_t n = 0;
    if (!code)
        abort();
    int lineno = 0;
    for (const char *p = src; *p;) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        char line[256];
        if (len >= sizeof line)
            asm_fail(name, lineno + 1, "line too long");
        memcpy(line, p, len);
        line[len] = 0;
        p += len + (eol ? 1 : 0);
        lineno++;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = 0;
        char *tok[8];
        int nt = 0;
        for (char *save = NULL, *t = strtok_r(line, " \t", &save); t && nt < 8;
             t = strtok_r(NULL, " \t", &save))
            tok[nt++] = t;
        if (nt == 0)
            continue;
        size_t tl = strlen(tok[0]);
        if (tok[0][tl - 1] == ':') {
            if (nlabels == ASM_MAX || tl > 31)
                asm_fail(name, lineno, "bad label");
            tok[0][tl - 1] = 0;
            strcpy(labels[nlabels], tok[0]);
            label_at[nlabels++] = n;
            continue;
        }
        if (n == ASM_MAX)
            asm_fail(name, lineno, "too many instructions");
        sr_instr *in = &code[n];
        in->op = glue_op(tok[0]);
        targets[n][0] = 0;
        target_line[n] = lineno;
        int nops = 0;
        for (int i = 1; i < nt; i++) {
            if (tok[i][0] == '@') {
                if (strlen(tok[i] + 1) > 31)
                    asm_fail(name, lineno, "bad target");
                strcpy(targets[n], tok[i] + 1);
                continue;
            }
            char *end;
            long long v = strtoll(tok[i], &end, 0);
            if (*end || nops == 4)
                asm_fail(name, lineno, "bad operand");
            in->operand[nops++] = (uint64_t)v;
        }
        n++;
    }
    for (size_t i = 0; i < n; i++) {
        if (!targets[i][0])
            continue;
        size_t k;
        for (k = 0; k < nlabels && strcmp(labels[k], targets[i]); k++)
            ;
        if (k < nlabels) {
            code[i].target = (uint32_t)label_at[k];
        } else {
            char *end;
            unsigned long v = strtoul(targets[i], &end, 0);
            if (*end || v >= n)
                asm_fail(name, target_line[i], "unknown jump target");
            code[i].target = (uint32_t)v;
        }
    }
    out->name = name;
    out->code = code;
    out->n = n;
}

void glue_asm_free(glue_prog *p)
{
    free((void *)p->code);
    p->code = NULL;
}

/* ---- crashes */

static const char *crash_prog = "unwind";

static size_t put_str(char *b, size_t at, const char *s)
{
    while (*s && at < 200)
        b[at++] = *s++;
    return at;
}

static size_t put_hex(char *b, size_t at, uintptr_t v)
{
    char t[19];
    int n = 0;
    do {
        t[n++] = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v);
    at = put_str(b, at, "0x");
    while (n && at < 200)
        b[at++] = t[--n];
    return at;
}

static void on_crash(int sig, siginfo_t *si, void *ucv)
{
    const ucontext_t *uc = ucv;
    char b[256];
    size_t at = put_str(b, 0, crash_prog);
    at = put_str(b, at, ": FAIL: signal ");
    at = put_hex(b, at, (uintptr_t)sig);
    at = put_str(b, at, " at pc ");
#if defined(__aarch64__)
    at = put_hex(b, at, (uintptr_t)uc->uc_mcontext.pc);
#else
    at = put_hex(b, at, (uintptr_t)uc->uc_mcontext.gregs[REG_RIP]);
#endif
    at = put_str(b, at, ", address ");
    at = put_hex(b, at, (uintptr_t)si->si_addr);
    at = put_str(b, at, "\n");
    ssize_t rc = write(2, b, at);
    (void)rc;
    _exit(4);
}

void glue_crash_reporter(const char *prog)
{
    crash_prog = prog;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_crash;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGBUS, &sa, NULL);
    sigaction(SIGILL, &sa, NULL);
}

/* ---- what libgcc has registered */

struct dwarf_eh_bases {
    void *tbase, *dbase, *func;
};
/* libgcc (unwind-dw2-fde.h): the FDE covering pc, from registered frames
 * first, then loaded objects. Exported by libgcc_s, not in a public header. */
extern const void *_Unwind_Find_FDE(void *pc, struct dwarf_eh_bases *bases);

static uint64_t rd_uleb(const uint8_t **p, const uint8_t *end)
{
    uint64_t v = 0;
    int shift = 0;
    while (*p < end) {
        uint8_t b = *(*p)++;
        if (shift < 64)
            v |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
        if (!(b & 0x80))
            break;
    }
    return v;
}

static int64_t rd_sleb(const uint8_t **p, const uint8_t *end)
{
    int64_t v = 0;
    int shift = 0;
    uint8_t b = 0;
    while (*p < end) {
        b = *(*p)++;
        if (shift < 64)
            v |= (int64_t)((uint64_t)(b & 0x7f) << shift);
        shift += 7;
        if (!(b & 0x80))
            break;
    }
    if (shift < 64 && (b & 0x40))
        v |= -((int64_t)1 << shift);
    return v;
}

static void put_bytes(FILE *out, const uint8_t *p, const uint8_t *end)
{
    if (p >= end)
        fputs("-", out);
    for (; p < end; p++)
        fprintf(out, "%02x", *p);
}

static int dump_one(FILE *out, const char *name, uintptr_t start, uintptr_t entry)
{
    struct dwarf_eh_bases bases = {0, 0, 0};
    const uint8_t *fde = _Unwind_Find_FDE((void *)entry, &bases);
    fprintf(out, "fde %s: ", name);
    if (!fde) {
        fprintf(out, "none\n");
        return 0;
    }
    uint32_t flen, cie_off;
    memcpy(&flen, fde, 4);
    memcpy(&cie_off, fde + 4, 4);
    const uint8_t *fend = fde + 4 + flen;
    const uint8_t *cie = fde + 4 - cie_off;
    uint32_t clen;
    memcpy(&clen, cie, 4);
    const uint8_t *cend = cie + 4 + clen, *p = cie + 8;
    uint8_t version = *p++;
    const char *aug = (const char *)p;
    p += strlen(aug) + 1;
    uint64_t code_align = rd_uleb(&p, cend);
    int64_t data_align = rd_sleb(&p, cend);
    uint64_t ra = version == 1 ? *p++ : rd_uleb(&p, cend);
    uint8_t enc = 0;
    if (aug[0] == 'z') {
        uint64_t n = rd_uleb(&p, cend);
        const uint8_t *q = p;
        for (const char *a = aug + 1; *a && q < p + n; a++) {
            if (*a == 'R')
                enc = *q++;
            else
                break; /* the runtime writes "zR" only; others are reported via aug= */
        }
        p += n;
    }
    const uint8_t *cie_insns = p;
    if (enc != 0x00) { /* the runtime uses DW_EH_PE_absptr */
        fprintf(out, "unexpected pointer encoding %#x (aug %s)\n", enc, aug);
        return 1;
    }
    const uint8_t *q = fde + 8;
    uint64_t pc_begin, range;
    memcpy(&pc_begin, q, 8);
    memcpy(&range, q + 8, 8);
    q += 16;
    if (aug[0] == 'z') {
        uint64_t n = rd_uleb(&q, fend);
        q += n;
    }
    fprintf(out, "entry_off=%lld pc_begin_off=%lld range=%llu func_off=%lld code_align=%llu "
            "data_align=%lld ra=%llu aug=%s cie_insns=",
            (long long)(entry - start), (long long)(pc_begin - start), (unsigned long long)range,
            (long long)((uintptr_t)bases.func - start), (unsigned long long)code_align,
            (long long)data_align, (unsigned long long)ra, aug);
    put_bytes(out, cie_insns, cend);
    fprintf(out, " fde_insns=");
    put_bytes(out, q, fend);
    fprintf(out, "\n");
    return 1;
}

size_t glue_fde_count(const uintptr_t *pcs, size_t n)
{
    size_t found = 0;
    for (size_t i = 0; i < n; i++) {
        struct dwarf_eh_bases b;
        found += _Unwind_Find_FDE((void *)pcs[i], &b) != NULL;
    }
    return found;
}

int glue_fde_dump(const struct vm *vm, FILE *out)
{
    int found = dump_one(out, "shim", vm->shim_start, (uintptr_t)vm->shim);
    for (size_t i = 0; i < vm->nprogs; i++) {
        found += dump_one(out, vm->progs[i].name, vm->ex_start[i], vm->ex_start[i]);
        /* and the last instruction: one FDE must cover the whole executor */
        struct dwarf_eh_bases b1, b2;
        const void *f1 = _Unwind_Find_FDE((void *)vm->ex_start[i], &b1);
        const void *f2 = _Unwind_Find_FDE((void *)(vm->ex_end[i] - 1), &b2);
        fprintf(out, "fde %s: last byte %s\n", vm->progs[i].name,
                !f2 ? "none" : f1 == f2 ? "same FDE" : "another FDE");
    }
    return found;
}
