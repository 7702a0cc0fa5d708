/* unwind.c - stepping from a frame to its caller. Every step must move the
 * stack pointer up (or, at an AArch64 leaf, keep it and change the PC), so a
 * damaged stack ends the walk instead of looping. */
#include "unwind.h"

#include <dwarf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static bool read8(unwinder *u, uint64_t addr, uint64_t *v)
{
    return procmem_read(u->mem, addr, v, 8);
}

/* ---- DWARF expressions, the forms CFI uses (GCC's and clang's PLT and
 * signal-frame rules included) ---- */

typedef struct expr_env {
    unwinder *u;
    const regs *g;
    bool has_cfa;
    uint64_t cfa;
} expr_env;

enum { STACK_MAX = 32 };

/* Pushes the value of op if it is a constant or register form; false if not one. */
static bool push_operand(const expr_env *env, const Dwarf_Op *op, uint64_t *stack, int *sp,
                         bool *ok)
{
    uint8_t a = op->atom;
    uint64_t v;
    if (a >= DW_OP_lit0 && a <= DW_OP_lit31)
        v = a - DW_OP_lit0;
    else if (a == DW_OP_const1u || a == DW_OP_const2u || a == DW_OP_const4u ||
             a == DW_OP_const8u || a == DW_OP_constu || a == DW_OP_const1s ||
             a == DW_OP_const2s || a == DW_OP_const4s || a == DW_OP_const8s ||
             a == DW_OP_consts || a == DW_OP_addr)
        v = op->number;
    else if (a >= DW_OP_breg0 && a <= DW_OP_breg31) {
        if (!regs_has(env->g, a - DW_OP_breg0))
            return *ok = false, true;
        v = env->g->r[a - DW_OP_breg0] + (uint64_t)(int64_t)op->number;
    } else if (a == DW_OP_bregx) {
        if (!regs_has(env->g, (unsigned)op->number))
            return *ok = false, true;
        v = env->g->r[op->number] + (uint64_t)(int64_t)op->number2;
    } else if (a == DW_OP_call_frame_cfa) {
        if (!env->has_cfa)
            return *ok = false, true;
        v = env->cfa;
    } else {
        return false;
    }
    if (*sp == STACK_MAX)
        return *ok = false, true;
    stack[(*sp)++] = v;
    return true;
}

static bool binary(uint8_t a, uint64_t x, uint64_t y, uint64_t *out)
{
    switch (a) {
    case DW_OP_plus: *out = x + y; return true;
    case DW_OP_minus: *out = x - y; return true;
    case DW_OP_mul: *out = x * y; return true;
    case DW_OP_and: *out = x & y; return true;
    case DW_OP_or: *out = x | y; return true;
    case DW_OP_xor: *out = x ^ y; return true;
    case DW_OP_shl: *out = y < 64 ? x << y : 0; return true;
    case DW_OP_shr: *out = y < 64 ? x >> y : 0; return true;
    case DW_OP_shra: *out = (uint64_t)((int64_t)x >> (y < 63 ? y : 63)); return true;
    case DW_OP_eq: *out = x == y; return true;
    case DW_OP_ne: *out = x != y; return true;
    case DW_OP_lt: *out = (int64_t)x < (int64_t)y; return true;
    case DW_OP_gt: *out = (int64_t)x > (int64_t)y; return true;
    case DW_OP_le: *out = (int64_t)x <= (int64_t)y; return true;
    case DW_OP_ge: *out = (int64_t)x >= (int64_t)y; return true;
    default: return false;
    }
}

/* Evaluates ops; *is_value is set by DW_OP_stack_value or a register
 * location (DW_OP_regN), else the result is an address. */
static bool eval(const expr_env *env, const Dwarf_Op *ops, size_t nops, uint64_t *result,
                 bool *is_value)
{
    uint64_t stack[STACK_MAX];
    int sp = 0;
    bool ok = true;
    *is_value = false;
    if (nops == 1 && ((ops[0].atom >= DW_OP_reg0 && ops[0].atom <= DW_OP_reg31) ||
                      ops[0].atom == DW_OP_regx)) {
        unsigned n = ops[0].atom == DW_OP_regx ? (unsigned)ops[0].number
                                               : (unsigned)(ops[0].atom - DW_OP_reg0);
        *is_value = true;
        *result = env->g->r[n < ARCH_NREGS ? n : 0];
        return regs_has(env->g, n);
    }
    for (size_t i = 0; i < nops && ok; i++) {
        const Dwarf_Op *op = &ops[i];
        uint8_t a = op->atom;
        if (push_operand(env, op, stack, &sp, &ok))
            continue;
        if (a == DW_OP_stack_value) {
            *is_value = true;
        } else if (a == DW_OP_nop) {
        } else if (a == DW_OP_plus_uconst && sp >= 1) {
            stack[sp - 1] += op->number;
        } else if (a == DW_OP_deref && sp >= 1) {
            ok = read8(env->u, stack[sp - 1], &stack[sp - 1]);
        } else if (a == DW_OP_dup && sp >= 1 && sp < STACK_MAX) {
            stack[sp] = stack[sp - 1];
            sp++;
        } else if (a == DW_OP_drop && sp >= 1) {
            sp--;
        } else if (a == DW_OP_swap && sp >= 2) {
            uint64_t t = stack[sp - 1];
            stack[sp - 1] = stack[sp - 2];
            stack[sp - 2] = t;
        } else if (a == DW_OP_over && sp >= 2 && sp < STACK_MAX) {
            stack[sp] = stack[sp - 2];
            sp++;
        } else if (a == DW_OP_neg && sp >= 1) {
            stack[sp - 1] = -stack[sp - 1];
        } else if (a == DW_OP_not && sp >= 1) {
            stack[sp - 1] = ~stack[sp - 1];
        } else if (sp >= 2 && binary(a, stack[sp - 2], stack[sp - 1], &stack[sp - 2])) {
            sp--;
        } else {
            ok = false; /* an operation CFI does not use, or a stack underflow */
        }
    }
    if (!ok || sp < 1)
        return false;
    *result = stack[sp - 1];
    return true;
}

/* ---- steps ---- */

static bool cfi_step(unwinder *u, Dwarf_Frame *fr, const regs *cur, regs *next)
{
    Dwarf_Op *ops;
    size_t nops;
    expr_env env = {u, cur, false, 0};
    bool is_value;
    if (dwarf_frame_cfa(fr, &ops, &nops) != 0 || nops == 0 ||
        !eval(&env, ops, nops, &env.cfa, &is_value))
        return false;
    env.has_cfa = true;
    Dwarf_Addr start, end;
    bool signal_frame = false;
    int ra = dwarf_frame_info(fr, &start, &end, &signal_frame);
    if (ra < 0 || ra >= ARCH_NREGS)
        ra = ARCH_RA;
    memset(next, 0, sizeof *next);
    next->exact = signal_frame; /* a signal trampoline's caller was interrupted, not calling */
    bool ra_known = false;
    for (int n = 0; n < ARCH_NREGS; n++) {
        Dwarf_Op mem[3];
        if (dwarf_frame_register(fr, n, mem, &ops, &nops) != 0)
            continue;
        uint64_t v;
        if (nops == 0 && ops == mem) {
            continue; /* undefined: call-clobbered, or the end of the stack for the RA */
        } else if (nops == 0) {
            /* Same value as in this frame (one we may not know); never the
             * stack pointer's rule, which is the CFA unless the CFI gives
             * one of its own. */
            if (n == ARCH_SP || !regs_has(cur, (unsigned)n))
                continue;
            v = cur->r[n];
        } else if (!eval(&env, ops, nops, &v, &is_value) || (!is_value && !read8(u, v, &v))) {
            continue;
        }
        regs_set(next, (unsigned)n, v);
        if (n == ra)
            ra_known = true;
    }
    next->pc = ra_known ? arch_strip_pac(next->r[ra], u->pac_mask) : 0;
    /* The caller's stack pointer is the CFA unless a rule says otherwise:
     * glibc's __longjmp, once it has its target in registers, describes the
     * frame it jumps to (CFA the jmp_buf, the stack pointer in r8). */
    if (!regs_has(next, ARCH_SP))
        regs_set(next, ARCH_SP, env.cfa);
    return true;
}

/* The JIT rule: CFA = cfa_register + cfa_offset; the caller's frame pointer
 * and return address saved at fixed offsets from it; caller's SP = CFA. */
static bool rule_step(unwinder *u, const srr_rule *rule, const regs *cur, regs *next)
{
    if (!regs_has(cur, rule->cfa_register))
        return false;
    uint64_t cfa = cur->r[rule->cfa_register] + (uint64_t)rule->cfa_offset, fp, ra;
    if (!read8(u, cfa + (uint64_t)rule->fp_offset, &fp) ||
        !read8(u, cfa + (uint64_t)rule->ra_offset, &ra))
        return false;
    memset(next, 0, sizeof *next);
    regs_set(next, rule->fp_register, fp);
    regs_set(next, ARCH_SP, cfa);
    /* The rule's PAC is signed with key A; stripping needs no key. */
    next->pc = rule->ra_signed ? arch_strip_pac(ra, u->pac_mask) : ra;
    return true;
}

/* Frame pointers: [fp] is the caller's fp, [fp + 8] its return address. */
static bool fp_step(unwinder *u, const regs *cur, regs *next)
{
    if (!regs_has(cur, ARCH_FP) || !regs_has(cur, ARCH_SP))
        return false;
    uint64_t fp = cur->r[ARCH_FP], cfp, ra;
    if (fp < cur->r[ARCH_SP] || (fp & 7) || !read8(u, fp, &cfp) || !read8(u, fp + 8, &ra))
        return false;
    memset(next, 0, sizeof *next);
    regs_set(next, ARCH_FP, cfp);
    regs_set(next, ARCH_SP, fp + 16);
    next->pc = arch_strip_pac(ra, u->pac_mask);
    return true;
}

/* The shim's first instruction, before it pushed anything: the return
 * address is where a call left it. */
static bool entry_step(unwinder *u, const regs *cur, regs *next)
{
    if (!regs_has(cur, ARCH_SP))
        return false;
    *next = *cur;
    next->exact = false;
#if defined(__x86_64__)
    uint64_t ra;
    if (!read8(u, cur->r[ARCH_SP], &ra))
        return false;
    regs_set(next, ARCH_SP, cur->r[ARCH_SP] + 8);
    next->pc = ra;
#else
    if (!regs_has(cur, 30))
        return false;
    next->pc = arch_strip_pac(cur->r[30], u->pac_mask);
#endif
    return true;
}

#if defined(__x86_64__)
/* True if the bytes before addr end with a call instruction: e8 rel32, or ff /2
 * (an indirect call, 2 to 7 bytes long). */
static bool after_call(unwinder *u, uint64_t addr)
{
    uint8_t b[8];
    if (addr < 8 || !procmem_read(u->mem, addr - 8, b, 8))
        return false;
    if (b[3] == 0xe8)
        return true;
    for (int len = 2; len <= 7; len++)
        if (b[8 - len] == 0xff && ((b[9 - len] >> 3) & 7) == 2)
            return true;
    return false;
}

/* The shim outside its rule (its prologue and epilogue): the return address
 * is the first word above sp that points just after a call in a known
 * function; its prologue is `push rbp; mov rsp, rbp` (the generator keeps
 * frame pointers), so the caller's rbp was saved just below it, and is still
 * in rbp before that push and after the matching pop. */
static bool shim_edge_step(unwinder *u, const regs *cur, regs *next)
{
    if (!regs_has(cur, ARCH_SP) || !regs_has(cur, ARCH_FP))
        return false;
    for (uint64_t a = cur->r[ARCH_SP], n = 0; n < 32; n++, a += 8) {
        uint64_t ra, fp = cur->r[ARCH_FP];
        sym_info si;
        if (!read8(u, a, &ra))
            return false;
        symbols_describe(u->syms, ra - 1, &si);
        if (!si.has_elf || !si.name || !after_call(u, ra))
            continue;
        if (fp == a - 8 && !read8(u, a - 8, &fp))
            return false;
        memset(next, 0, sizeof *next);
        regs_set(next, ARCH_FP, fp);
        regs_set(next, ARCH_SP, a + 8);
        next->pc = ra;
        return true;
    }
    return false;
}
#endif

static bool shim_step(unwinder *u, const srr_rule *rule, const regs *cur, regs *next)
{
    uint64_t off = cur->pc - rule->shim_start;
    if (off >= rule->shim_rule_start && off < rule->shim_rule_end)
        return rule_step(u, rule, cur, next);
#if defined(__x86_64__)
    if (cur->exact)
        return shim_edge_step(u, cur, next);
#endif
    if (off == 0 && cur->exact)
        return entry_step(u, cur, next);
    return fp_step(u, cur, next);
}

/* ---- naming ---- */

/* Names are copied out of buffers that do not outlive a snapshot; control
 * characters (an executor may be named anything) become '?' so that every
 * output stays one line per frame. */
static void copy(char *dst, size_t len, const char *src)
{
    snprintf(dst, len, "%s", src ? src : "");
    for (char *c = dst; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = '?';
}

/* Looks addr up in the registry, for a PC in no ELF module; one fresh
 * snapshot per stop for a PC the snapshot does not hold (JIT code emitted
 * since it was taken). */
static srr_kind jit_lookup(unwinder *u, uint64_t addr, srr_pc *pc)
{
    memset(pc, 0, sizeof *pc);
    if (!u->reader)
        return SRR_NOT_JIT;
    if (srr_lookup(u->reader, addr, pc) != SRR_OK && pc->kind != SRR_UNRESOLVED)
        pc->kind = SRR_NOT_JIT;
    if (pc->kind == SRR_NOT_JIT && u->resnapshot) {
        u->resnapshot = false;
        if (srr_snapshot(u->reader) == SRR_OK && srr_lookup(u->reader, addr, pc) != SRR_OK &&
            pc->kind != SRR_UNRESOLVED)
            pc->kind = SRR_NOT_JIT;
    }
    return pc->kind;
}

/* The only rule left for a JIT address that cannot be named: the one every
 * runtime of this process shares, if there is just one. */
static const srr_rule *sole_rule(const unwinder *u)
{
    return u->reader && srr_runtime_count(u->reader) == 1 ? srr_runtime_rule(u->reader, 0) : NULL;
}

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* A PC in no module may be in a library loaded since the modules were
 * listed: list them again, at most once a second (it reloads every ELF). */
static void describe_fresh(unwinder *u, uint64_t addr, sym_info *si)
{
    symbols_describe(u->syms, addr, si);
    if (si->module)
        return;
    long long now = now_ns();
    if (now - u->last_refresh_ns < 1000000000ll)
        return;
    u->last_refresh_ns = now;
    if (symbols_refresh(u->syms))
        symbols_describe(u->syms, addr, si);
}

/* Names frame f at cur (lookup at addr) and steps to the caller. */
static bool step(unwinder *u, const regs *cur, uint64_t addr, frame *f, regs *next, bool *is_main)
{
    sym_info si;
    srr_pc pc;
    symbols_describe(u->syms, addr, &si);
    srr_kind k = si.has_elf ? SRR_NOT_JIT : jit_lookup(u, addr, &pc);
    if (k == SRR_NOT_JIT && !si.module) {
        describe_fresh(u, addr, &si);
        if (!si.has_elf)
            k = jit_lookup(u, addr, &pc);
    }
    if (k == SRR_EXECUTOR) {
        f->kind = FRAME_JIT;
        f->id = pc.id;
        f->index = pc.index;
        copy(f->op, sizeof f->op, pc.op);
        copy(f->executor, sizeof f->executor, pc.executor);
        u->jit_frames++;
        return rule_step(u, pc.rule, cur, next);
    }
    if (k == SRR_SHIM) {
        f->kind = FRAME_SHIM;
        return shim_step(u, pc.rule, cur, next);
    }
    if (k == SRR_UNRESOLVED || !si.has_elf) {
        f->kind = FRAME_UNRESOLVED;
        u->unresolved++;
        const srr_rule *rule = k == SRR_UNRESOLVED ? pc.rule : sole_rule(u);
        return (rule && rule_step(u, rule, cur, next)) || fp_step(u, cur, next);
    }
    f->kind = FRAME_NATIVE;
    copy(f->module, sizeof f->module, si.module);
    copy(f->sym, sizeof f->sym, si.name);
    /* .dynsym names may carry a symbol version (pthread_mutex_lock@GLIBC_2.2.5):
     * the function is the same whichever version a caller bound to. */
    f->sym[strcspn(f->sym, "@")] = 0;
    f->offset = si.name ? si.offset + (cur->pc - addr) : 0;
    *is_main = si.name && !strcmp(si.name, "main");
    Dwarf_Frame *fr = symbols_frame(u->syms, addr);
    bool ok = fr && cfi_step(u, fr, cur, next);
    free(fr);
    return ok || fp_step(u, cur, next);
}

int unwind_thread(unwinder *u, const regs *start, frame *frames, int max, bool *reached_main)
{
    regs cur = *start, next;
    cur.exact = true;
    int n = 0;
    *reached_main = false;
    while (n < max && cur.pc) {
        frame *f = &frames[n];
        memset(f, 0, sizeof *f);
        f->pc = cur.pc;
        /* A caller's PC is a return address, after its call: name the call. */
        uint64_t addr = cur.exact ? cur.pc : cur.pc - 1;
        bool is_main = false;
        bool stepped = step(u, &cur, addr, f, &next, &is_main);
        n++;
        *reached_main |= is_main;
        /* What runs below main is the C library's start-up, as GDB shows it. */
        if (is_main || !stepped || !regs_has(&next, ARCH_SP) || !regs_has(&cur, ARCH_SP))
            break;
        uint64_t sp = cur.r[ARCH_SP], nsp = next.r[ARCH_SP];
        if (nsp < sp || (nsp == sp && next.pc == cur.pc))
            break;
        cur = next;
    }
    return n;
}
