/* step.c - libgcc's unwinder at every instruction of JIT code (x86-64).
 *
 * Emits seven executors over the bundled stencils (a loop, one calling the
 * print and native helpers, two that re-enter other executors through `call`,
 * one taking the other paths through div and mod, one dividing by zero so the
 * div stencil calls vm_trap, and one longer than a page), then runs them with
 * EFLAGS.TF set: a SIGTRAP handler sees every instruction. Whenever the
 * interrupted PC is in JIT memory (the shim or an executor) or in one of the
 * helpers the stencils call (vm_call, vm_print, vm_native, vm_trap), the
 * handler runs
 * _Unwind_Backtrace and checks the whole chain against the shadow stack that
 * glue_run keeps:
 *
 *   [helper ->] JIT frame -> glue_run -> (vm_call -> JIT frame at a `call`
 *   instruction -> glue_run)* -> run_guarded -> main -> libc ... -> end
 *
 * and that unwinding restored, for each glue_run frame, exactly the CFA,
 * return address and callee-saved registers (rbx rbp r12-r15) it had when it
 * entered the shim; those are read from the ucontext at the shim's first
 * instruction, so every executor PC is compared with the shim's own rows.
 *
 * Prints what it saw (per executor: instruction layout, visited offsets,
 * counts) and "unwind_step: PASS" with exit 0 only if every check passed.
 * With STENCILRT_FRAMES=0 the JIT code is not registered and the checks must
 * fail ("unwind_step: FAIL", exit 1): the control that shows the test can fail.
 * UNWIND_TEST_MUTATE (glue.c) hands the runtime a broken executor rule, and
 * UNWIND_TEST_ARENA=BYTES sets the code arena size.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>
#include <unwind.h>

#include "glue.h"

#define MAX_TRAPS 5000000UL
#define MAX_FRAMES 128
#define MAX_FAILURES 12
#define TF 0x100

enum { F_LOOP, F_HELPERS, F_MID, F_TOP, F_ARITH, F_TRAPPER, F_LONG, NPROGS };

/* long(x) = x + 3 * LONG_ADDS: more than a page of straight-line code. */
#define LONG_ADDS 620

/* loop(n): every arithmetic op, both branches of both conditional jumps. */
static const char SRC_LOOP[] =
    "    push 0\n"
    "    store 1            # sum = 0\n"
    "    push 0\n"
    "    store 2            # i = 0\n"
    "top:\n"
    "    load 2\n"
    "    dup\n"
    "    mul\n"
    "    load 1\n"
    "    add\n"
    "    push 3\n"
    "    sub\n"
    "    store 1            # sum += i*i - 3\n"
    "    load 2\n"
    "    push 2\n"
    "    mod\n"
    "    jump_if_zero @even\n"
    "    load 1\n"
    "    load 2\n"
    "    push 3\n"
    "    div\n"
    "    add\n"
    "    store 1            # odd i: sum += i/3\n"
    "    jump @next\n"
    "even:\n"
    "    load 1\n"
    "    push 5\n"
    "    le\n"
    "    load 2\n"
    "    eq\n"
    "    load 1\n"
    "    add\n"
    "    store 1            # even i: sum += ((sum <= 5) == i)\n"
    "next:\n"
    "    load 2\n"
    "    addi 1\n"
    "    dup\n"
    "    store 2            # i++\n"
    "    load 0\n"
    "    lt\n"
    "    jump_if_nonzero @top\n"
    "    load 1\n"
    "    push 7\n"
    "    pop\n"
    "    ret\n";

/* helpers(x): print and native helpers. */
static const char SRC_HELPERS[] =
    "    load 0\n"
    "    print\n"
    "    native 1           # 2x+1\n"
    "    dup\n"
    "    print\n"
    "    native 2           # -4\n"
    "    add\n"
    "    load 0\n"
    "    native 3           # ^0x55\n"
    "    add\n"
    "    ret\n";

/* mid(x) = helpers(x+3) + loop(x): re-enters two executors. */
static const char SRC_MID[] =
    "    load 0\n"
    "    addi 3\n"
    "    call 1 1\n"
    "    load 0\n"
    "    call 0 1\n"
    "    add\n"
    "    ret\n";

/* top(x) = mid(x) - helpers(2x): JIT -> C -> JIT -> C -> JIT -> helper. */
static const char SRC_TOP[] =
    "    load 0\n"
    "    call 2 1\n"
    "    load 0\n"
    "    push 2\n"
    "    mul\n"
    "    call 1 1\n"
    "    sub\n"
    "    ret\n";

/* arith(x): the other paths through div and mod (64-bit operands, divisor -1). */
static const char SRC_ARITH[] =
    "    load 0\n"
    "    push -1\n"
    "    div                # -x\n"
    "    load 0\n"
    "    push 8589934592\n"
    "    mul\n"
    "    push 3\n"
    "    div                # x * 2^33 / 3\n"
    "    add\n"
    "    load 0\n"
    "    push 8589934592\n"
    "    mul\n"
    "    push -1\n"
    "    mod                # 0\n"
    "    add\n"
    "    load 0\n"
    "    push 8589934592\n"
    "    mul\n"
    "    push 7\n"
    "    mod\n"
    "    add\n"
    "    ret\n";

/* trapper(x): x / 0 calls vm_trap from the end of the div stencil (a call
 * that does not return: its return address is the next stencil's start);
 * vm_trap leaves through longjmp. */
static const char SRC_TRAPPER[] =
    "    load 0\n"
    "    push 0\n"
    "    div\n"
    "    ret\n";

static struct vm VM;
static glue_prog progs[NPROGS];
static jmp_buf trap_jmp;
static volatile int trap_armed;
#define TRAPPED ((vm_value)0x7eadbeef7eadbeefLL)

/* ---- helpers (called from JIT code) */

static vm_value print_log[256];
static volatile size_t print_n;

vm_value vm_call(vm_frame *caller, vm_value function, vm_value argc, vm_value *args);
vm_value vm_print(vm_frame *frame, vm_value value);
vm_value vm_native(vm_frame *frame, vm_value which, vm_value arg);

static volatile unsigned long calls_done;

vm_value vm_call(vm_frame *caller, vm_value function, vm_value argc, vm_value *args)
{
    vm_value r = glue_run(caller->vm, (size_t)function, argc, args);
    calls_done++; /* not a tail call: vm_call keeps its frame */
    return r;
}

vm_value vm_print(vm_frame *frame, vm_value value)
{
    (void)frame;
    if (print_n < sizeof print_log / sizeof *print_log)
        print_log[print_n] = value;
    print_n++;
    return value;
}

vm_value vm_native(vm_frame *frame, vm_value which, vm_value arg)
{
    switch (which) {
    case 1: return (vm_value)((uint64_t)arg * 2 + 1);
    case 2: return (vm_value)((uint64_t)arg - 4);
    case 3: return arg ^ 0x55;
    default: vm_trap(frame, "unknown native");
    }
}

_Noreturn void vm_trap(vm_frame *frame, const char *why)
{
    if (trap_armed)
        longjmp(trap_jmp, 1);
    fprintf(stderr, "unwind_step: trap in %s: %s\n", VM.progs[frame->function].name, why);
    exit(3);
}

/* ---- what the handler checks against */

typedef struct range {
    const char *name;
    uintptr_t start, end;
} range;
enum { R_MAIN, R_GUARD, R_RUN, R_CALL, R_PRINT, R_NATIVE, R_TRAP, NRANGES };
static range ranges[NRANGES];

static int in_range(int r, uintptr_t pc)
{
    return pc >= ranges[r].start && pc < ranges[r].end;
}

static uint32_t op_call, op_print, op_native, op_div;
static volatile sig_atomic_t stepping;
static unsigned long traps, jit_traps, helper_traps;
static unsigned long checks_jit, checks_helper, failed_jit, failed_helper;
static unsigned long jit_main_reached, jit_main_not_reached;
static unsigned long ex_checks[NPROGS], ex_failed[NPROGS], shim_checks, shim_failed;
static unsigned long max_depth_seen;
static unsigned long range_checks[NRANGES];
static uint8_t *visited[NPROGS];
static uint8_t shim_visited[256];
static char failures[MAX_FAILURES][320];
static unsigned long nfailures;

typedef struct frame_rec {
    uintptr_t ip, cfa;
    int before;
    uintptr_t regs[6];
} frame_rec;
static frame_rec frames[MAX_FRAMES];
static int nframes;
static const int regno[6] = {3, 6, 12, 13, 14, 15}; /* DWARF: rbx rbp r12 r13 r14 r15 */
static const char *const regname[6] = {"rbx", "rbp", "r12", "r13", "r14", "r15"};

static _Unwind_Reason_Code record_frame(struct _Unwind_Context *ctx, void *arg)
{
    (void)arg;
    if (nframes >= MAX_FRAMES)
        return _URC_NORMAL_STOP;
    frame_rec *f = &frames[nframes++];
    f->ip = _Unwind_GetIPInfo(ctx, &f->before);
    f->cfa = _Unwind_GetCFA(ctx);
    for (int i = 0; i < 6; i++)
        f->regs[i] = _Unwind_GetGR(ctx, regno[i]);
    return _URC_NO_REASON;
}

/* One failure note per failed check (the first MAX_FAILURES are kept). The
 * interrupted code is JIT code or a helper that uses no stdio, so formatting
 * with snprintf here is safe. */
static int check_failed;
__attribute__((format(printf, 1, 2))) static void fail(const char *fmt, ...)
{
    if (check_failed++)
        return; /* the first problem of a trap is the one worth reading */
    if (nfailures < MAX_FAILURES) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(failures[nfailures], sizeof failures[nfailures], fmt, ap);
        va_end(ap);
    }
    nfailures++;
}

static const char *where_name(uintptr_t pc)
{
    int w = glue_locate(&VM, pc);
    if (w == -2)
        return "shim";
    if (w >= 0)
        return VM.progs[w].name;
    for (int r = 0; r < NRANGES; r++)
        if (in_range(r, pc))
            return ranges[r].name;
    return "elsewhere";
}

/* frames[k] is a return address into executor `ex` inside an instruction
 * whose op is `op` (the call that made the frame above). */
static int expect_jit_call(int k, int ex, uint32_t op, const char *ctx)
{
    if (k >= nframes) {
        fail("%s: chain ends before the JIT frame of %s", ctx, VM.progs[ex].name);
        return 0;
    }
    uintptr_t ra = frames[k].ip;
    long i = glue_instr_at(&VM, (size_t)ex, ra - 1);
    if (frames[k].before || i < 0 || VM.progs[ex].code[i].op != op) {
        fail("%s: frame %d is %#lx (%s%s), expected a return address in a %s instruction of %s",
             ctx, k, (unsigned long)ra, where_name(ra), frames[k].before ? ", signal" : "",
             glue_op_name(op), VM.progs[ex].name);
        return 0;
    }
    return 1;
}

/* frames[k] is glue_run of level j, with the state it entered the shim in.
 * (For a frame, libgcc's _Unwind_GetCFA is the CFA of the frame it called,
 * the one before it in the backtrace: here the JIT frame's, which must be the
 * shim's.) */
static int expect_run(int k, int j, const char *ctx)
{
    glue_level *L = &glue_levels[j];
    if (k >= nframes) {
        fail("%s: chain ends before glue_run of level %d", ctx, j);
        return 0;
    }
    if (frames[k].ip != L->ref_ra || !in_range(R_RUN, frames[k].ip)) {
        fail("%s: frame %d is %#lx (%s), expected glue_run's return address %#lx (level %d)",
             ctx, k, (unsigned long)frames[k].ip, where_name(frames[k].ip),
             (unsigned long)L->ref_ra, j);
        return 0;
    }
    if (frames[k].cfa != L->ref_cfa) {
        fail("%s: the JIT frame of level %d has CFA %#lx, the shim's is %#lx", ctx, j,
             (unsigned long)frames[k].cfa, (unsigned long)L->ref_cfa);
        return 0;
    }
    for (int r = 0; r < 6; r++)
        if (frames[k].regs[r] != L->ref_regs[r]) {
            fail("%s: level %d: unwound %s=%#lx, but glue_run had %#lx when it entered the shim",
                 ctx, j, regname[r], (unsigned long)frames[k].regs[r],
                 (unsigned long)L->ref_regs[r]);
            return 0;
        }
    return 1;
}

/* Check the unwound chain from the interrupted pc (in JIT code when
 * helper_op is 0, else in the helper the stencil with op helper_op called). */
static void check_chain(const ucontext_t *uc, uintptr_t pc, uint32_t helper_op, int *reached)
{
    const greg_t *g = uc->uc_mcontext.gregs;
    int where = glue_locate(&VM, pc);
    uintptr_t base = where == -2 ? VM.shim_start : where >= 0 ? VM.ex_start[where] : 0;
    char ctx[96];
    snprintf(ctx, sizeof ctx, "pc %#lx (%s+%#lx)", (unsigned long)pc, where_name(pc),
             (unsigned long)(pc - base));
    int d = glue_depth - 1;
    if (d < 0) {
        fail("%s: no active glue_run level", ctx);
        return;
    }
    if ((unsigned long)d + 1 > max_depth_seen)
        max_depth_seen = (unsigned long)d + 1;
    glue_level *L = &glue_levels[d];
    if (!helper_op && where == -2 && pc == (uintptr_t)VM.shim && !L->ref_valid) {
        /* The shim's first instruction: the caller's state, first hand. */
        const uintptr_t *sp = (const uintptr_t *)g[REG_RSP];
        L->ref_cfa = (uintptr_t)g[REG_RSP] + 8;
        L->ref_ra = sp[0];
        L->ref_regs[0] = (uintptr_t)g[REG_RBX];
        L->ref_regs[1] = (uintptr_t)g[REG_RBP];
        L->ref_regs[2] = (uintptr_t)g[REG_R12];
        L->ref_regs[3] = (uintptr_t)g[REG_R13];
        L->ref_regs[4] = (uintptr_t)g[REG_R14];
        L->ref_regs[5] = (uintptr_t)g[REG_R15];
        L->ref_valid = 1;
        if (!in_range(R_RUN, L->ref_ra))
            fail("%s: the shim was entered from %#lx, not from glue_run", ctx,
                 (unsigned long)L->ref_ra);
    }
    if (!L->ref_valid) {
        fail("%s: level %d runs JIT code that did not start at the shim's entry", ctx, d);
        return;
    }
    if (where >= 0 && where != L->ex) {
        fail("%s: executor %s runs, but level %d is %s", ctx, VM.progs[where].name, d,
             VM.progs[L->ex].name);
        return;
    }
    if (where >= 0 && pc >= VM.ex_end[where]) {
        fail("%s: pc past the end of %s's code", ctx, VM.progs[where].name);
        return;
    }

    nframes = 0;
    _Unwind_Reason_Code rc = _Unwind_Backtrace(record_frame, NULL);
    int s = -1;
    for (int i = 0; i < nframes && s < 0; i++)
        if (frames[i].ip == pc && frames[i].before)
            s = i;
    /* main reached? (independent of the detailed checks) */
    int main_at = -1;
    for (int i = 0; i < nframes && main_at < 0; i++)
        if (!frames[i].before && in_range(R_MAIN, frames[i].ip - 1))
            main_at = i;
    *reached = main_at >= 0;
    if (s < 0) {
        fail("%s: the interrupted frame is not in the backtrace (%d frames)", ctx, nframes);
        return;
    }
    if (main_at < 0) {
        fail("%s: backtrace stopped after %d frames at %#lx (%s) without reaching main "
             "(reason %d)",
             ctx, nframes, (unsigned long)frames[nframes - 1].ip,
             where_name(frames[nframes - 1].ip), (int)rc);
        return;
    }
    int k = s;
    if (helper_op) {
        if (!expect_jit_call(++k, L->ex, helper_op, ctx))
            return;
    }
    if (!expect_run(++k, d, ctx))
        return;
    for (int j = d - 1; j >= 0; j--) {
        k++;
        if (k >= nframes || frames[k].before || !in_range(R_CALL, frames[k].ip - 1)) {
            fail("%s: frame %d is %#lx (%s), expected vm_call", ctx, k,
                 k < nframes ? (unsigned long)frames[k].ip : 0UL,
                 k < nframes ? where_name(frames[k].ip) : "-");
            return;
        }
        if (!expect_jit_call(++k, glue_levels[j].ex, op_call, ctx) || !expect_run(++k, j, ctx))
            return;
    }
    if (++k >= nframes || frames[k].before || !in_range(R_GUARD, frames[k].ip - 1)) {
        fail("%s: frame %d is %#lx (%s), expected run_guarded", ctx, k,
             k < nframes ? (unsigned long)frames[k].ip : 0UL,
             k < nframes ? where_name(frames[k].ip) : "-");
        return;
    }
    if (++k != main_at) {
        fail("%s: frame %d is %#lx (%s), expected main (at %d)", ctx, k,
             (unsigned long)frames[k].ip, where_name(frames[k].ip), main_at);
        return;
    }
    if (rc != _URC_END_OF_STACK) {
        fail("%s: _Unwind_Backtrace returned %d, not _URC_END_OF_STACK", ctx, (int)rc);
        return;
    }
    if (nframes - main_at < 2) {
        fail("%s: the backtrace ends at main: main's callers are missing", ctx);
        return;
    }
    /* Below main: libc's frames, then _start, whose caller libgcc reports as
     * a last frame with ip 0 (its CFI marks the return address undefined). */
    for (int i = main_at + 1; i < nframes; i++)
        if (glue_locate(&VM, frames[i].ip) != -1 || (frames[i].ip == 0 && i != nframes - 1)) {
            fail("%s: frame %d below main is %#lx (%s)", ctx, i, (unsigned long)frames[i].ip,
                 where_name(frames[i].ip));
            return;
        }
}

static void on_trap(int sig, siginfo_t *si, void *ucv)
{
    (void)sig;
    (void)si;
    ucontext_t *uc = ucv;
    greg_t *g = uc->uc_mcontext.gregs;
    if (!stepping) {
        g[REG_EFL] &= ~(greg_t)TF;
        return;
    }
    g[REG_EFL] |= TF;
    if (++traps > MAX_TRAPS) {
        static const char msg[] = "unwind_step: more than MAX_TRAPS traps, giving up\n";
        ssize_t rc = write(2, msg, sizeof msg - 1);
        (void)rc;
        _exit(2);
    }
    uintptr_t pc = (uintptr_t)g[REG_RIP];
    int where = glue_locate(&VM, pc);
    uint32_t helper_op = 0;
    int helper = -1;
    if (where == -1) {
        if (in_range(R_CALL, pc))
            helper_op = op_call, helper = R_CALL;
        else if (in_range(R_PRINT, pc))
            helper_op = op_print, helper = R_PRINT;
        else if (in_range(R_NATIVE, pc))
            helper_op = op_native, helper = R_NATIVE;
        else if (in_range(R_TRAP, pc))
            helper_op = op_div, helper = R_TRAP; /* only trapper's div traps */
        else
            return; /* other C code: keep stepping, nothing to check */
        range_checks[helper]++;
        helper_traps++;
    } else {
        jit_traps++;
        if (where == -2) {
            if (pc - VM.shim_start < sizeof shim_visited)
                shim_visited[pc - VM.shim_start] = 1;
        } else if (pc < VM.ex_end[where]) {
            visited[where][pc - VM.ex_start[where]] = 1;
        }
    }
    check_failed = 0;
    int reached = 0;
    check_chain(uc, pc, helper_op, &reached);
    if (helper_op) {
        checks_helper++;
        failed_helper += check_failed != 0;
        return;
    }
    checks_jit++;
    failed_jit += check_failed != 0;
    if (reached)
        jit_main_reached++;
    else
        jit_main_not_reached++;
    if (where == -2) {
        shim_checks++;
        shim_failed += check_failed != 0;
    } else {
        ex_checks[where]++;
        ex_failed[where] += check_failed != 0;
    }
}

__attribute__((noinline)) static void step_on(void)
{
    __builtin_ia32_writeeflags_u64(__builtin_ia32_readeflags_u64() | TF);
}

static _Unwind_Reason_Code count_frame(struct _Unwind_Context *ctx, void *arg)
{
    (void)ctx;
    ++*(int *)arg;
    return _URC_NO_REASON;
}

typedef struct run_spec {
    size_t fn;
    vm_value arg;
} run_spec;

vm_value run_guarded(int jit, const run_spec *run, uint8_t *const *executed);

/* Run fn(arg) single-stepped through JIT code (jit) or in the interpreter;
 * TRAPPED when vm_trap was called. The chain checks expect this frame between
 * the outermost glue_run and main. */
__attribute__((noinline)) vm_value run_guarded(int jit, const run_spec *run,
                                               uint8_t *const *executed)
{
    volatile vm_value got = TRAPPED;
    if (setjmp(trap_jmp) == 0) {
        trap_armed = 1;
        if (jit) {
            stepping = 1;
            step_on();
            got = glue_run(&VM, run->fn, 1, &run->arg);
        } else {
            got = glue_interp(&VM, run->fn, 1, &run->arg, executed);
        }
    }
    stepping = 0;
    __asm__ volatile("nop"); /* the trap after this one clears TF */
    trap_armed = 0;
    glue_depth = 0; /* after a longjmp out of nested glue_runs */
    return got;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* keep what was printed if the unwinder crashes */
    glue_crash_reporter("unwind_step");
    op_call = glue_op("call");
    op_print = glue_op("print");
    op_native = glue_op("native");
    op_div = glue_op("div");
    glue_asm(&progs[F_LOOP], "loop", SRC_LOOP);
    glue_asm(&progs[F_HELPERS], "helpers", SRC_HELPERS);
    glue_asm(&progs[F_MID], "mid", SRC_MID);
    glue_asm(&progs[F_TOP], "top", SRC_TOP);
    glue_asm(&progs[F_ARITH], "arith", SRC_ARITH);
    glue_asm(&progs[F_TRAPPER], "trapper", SRC_TRAPPER);
    static char src_long[16 + LONG_ADDS * 8 + 16];
    size_t at = (size_t)snprintf(src_long, sizeof src_long, "load 0\n");
    for (int i = 0; i < LONG_ADDS; i++)
        at += (size_t)snprintf(src_long + at, sizeof src_long - at, "addi 3\n");
    snprintf(src_long + at, sizeof src_long - at, "ret\n");
    glue_asm(&progs[F_LONG], "long", src_long);
    /* UNWIND_TEST_ARENA=BYTES: small code arenas, so the executors spread over
     * several arenas, each with its own libgcc registration. */
    sr_config want = SR_CONFIG_DEFAULT;
    const char *arena = getenv("UNWIND_TEST_ARENA");
    if (arena && *arena)
        want.arena_size = (size_t)strtoull(arena, NULL, 0);
    if (!glue_init(&VM, progs, NPROGS, &want, (const void *)vm_call, (const void *)vm_print,
                   (const void *)vm_native, (const void *)vm_trap))
        return 2;
    sr_config cfg = sr_runtime_config(VM.rt);
    sr_stats st = sr_runtime_stats(VM.rt);
    printf("config: frames=%d gdb=%d; %zu arena(s), %zu executors, %zu libgcc registrations\n",
           cfg.frames, cfg.gdb, st.arenas, st.executors, st.frames_registered);

    const void *fns[NRANGES] = {(const void *)main,     (const void *)run_guarded,
                                (const void *)glue_run, (const void *)vm_call,
                                (const void *)vm_print, (const void *)vm_native,
                                (const void *)vm_trap};
    const char *names[NRANGES] = {"main",     "run_guarded", "glue_run", "vm_call",
                                  "vm_print", "vm_native",   "vm_trap"};
    for (int r = 0; r < NRANGES; r++) {
        ranges[r].name = names[r];
        if (!glue_func_range(fns[r], &ranges[r].start, &ranges[r].end)) {
            fprintf(stderr, "unwind_step: no symbol size for %s (link with -rdynamic)\n",
                    names[r]);
            return 2;
        }
    }

    /* Expected results and executed instructions, from the interpreter. */
    static const run_spec runs[] = {{F_LOOP, 25}, {F_HELPERS, 7}, {F_MID, 4},
                                    {F_TOP, 6},   {F_ARITH, 12},  {F_TRAPPER, 9},
                                    {F_LONG, 1}};
    enum { NRUNS = sizeof runs / sizeof runs[0] };
    uint8_t *executed[NPROGS];
    for (size_t i = 0; i < NPROGS; i++) {
        executed[i] = calloc(progs[i].n, 1);
        visited[i] = calloc(sr_executor_code_size(VM.ex[i]), 1);
        if (!executed[i] || !visited[i])
            return 2;
    }
    vm_value expect[NRUNS];
    vm_value expect_log[NRUNS][64];
    size_t expect_log_n[NRUNS];
    for (size_t r = 0; r < NRUNS; r++) {
        print_n = 0;
        expect[r] = run_guarded(0, &runs[r], executed);
        expect_log_n[r] = print_n;
        memcpy(expect_log[r], print_log, sizeof expect_log[r]);
    }
    if (VM.shim_end - VM.shim_start > sizeof shim_visited)
        return 2;

    /* Warm up the unwinder outside the handler: libgcc sorts the FDEs of
     * newly registered objects (with malloc) on the first lookup. */
    int warm = 0;
    _Unwind_Backtrace(count_frame, &warm);
    /* What libgcc has for the JIT code (the test decodes and compares it). */
    glue_fde_dump(&VM, stdout);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_trap;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGTRAP, &sa, NULL) != 0) {
        perror("sigaction");
        return 2;
    }

    int ok = 1;
    for (size_t r = 0; r < NRUNS; r++) {
        print_n = 0;
        unsigned long before = jit_traps;
        vm_value got = run_guarded(1, &runs[r], NULL);
        int same_log = print_n == expect_log_n[r] &&
                       !memcmp(print_log, expect_log[r], print_n * sizeof *print_log);
        printf("run %s(%lld) = %lld%s (interpreter: %lld), %zu prints%s, %lu JIT traps\n",
               progs[runs[r].fn].name, (long long)runs[r].arg, (long long)got,
               got == TRAPPED ? " (vm_trap)" : "", (long long)expect[r], (size_t)print_n,
               same_log ? "" : " DIFFERENT", jit_traps - before);
        if (got != expect[r] || !same_log) {
            printf("FAIL: %s: JIT result or prints differ from the interpreter\n",
                   progs[runs[r].fn].name);
            ok = 0;
        }
        if (jit_traps == before) {
            printf("FAIL: %s: no trap in JIT code: single-stepping did not work\n",
                   progs[runs[r].fn].name);
            ok = 0;
        }
    }
    if (glue_depth != 0) {
        printf("FAIL: shadow stack depth %d after the runs\n", glue_depth);
        ok = 0;
    }

    /* Report: layout, visited offsets, counts. */
    for (size_t i = 0; i < NPROGS; i++) {
        size_t n = progs[i].n, size = sr_executor_code_size(VM.ex[i]);
        printf("layout %s:", progs[i].name);
        for (size_t k = 0; k < n; k++)
            printf(" %s@%zu", glue_op_name(progs[i].code[k].op),
                   (size_t)((uintptr_t)sr_executor_instr(VM.ex[i], k) - VM.ex_start[i]));
        printf(" end@%zu\n", size);
        printf("visited %s:", progs[i].name);
        size_t distinct = 0;
        for (size_t off = 0; off < size; off++)
            if (visited[i][off]) {
                printf(" %zu", off);
                distinct++;
            }
        printf("\n");
        size_t nexec = 0, starts = 0, mismatch = 0;
        for (size_t k = 0; k < n; k++) {
            size_t off = (uintptr_t)sr_executor_instr(VM.ex[i], k) - VM.ex_start[i];
            nexec += executed[i][k];
            starts += visited[i][off];
            if (executed[i][k] != visited[i][off]) {
                printf("FAIL: %s[%zu] (%s): %s by the interpreter, %s by single-stepping\n",
                       progs[i].name, k, glue_op_name(progs[i].code[k].op),
                       executed[i][k] ? "executed" : "not executed",
                       visited[i][off] ? "visited" : "not visited");
                mismatch++;
            }
        }
        if (mismatch || nexec == 0)
            ok = 0;
        printf("executor %s: instructions=%zu executed=%zu starts_visited=%zu code_bytes=%zu "
               "distinct_pcs=%zu checks=%lu failed=%lu\n",
               progs[i].name, n, nexec, starts, size, distinct, ex_checks[i], ex_failed[i]);
    }
    size_t shim_distinct = 0;
    printf("visited shim:");
    for (size_t off = 0; off < VM.shim_end - VM.shim_start; off++)
        if (shim_visited[off]) {
            printf(" %zu", off);
            shim_distinct++;
        }
    printf("\nshim: code_bytes=%zu distinct_pcs=%zu checks=%lu failed=%lu\n",
           (size_t)(VM.shim_end - VM.shim_start), shim_distinct, shim_checks, shim_failed);
    printf("helper checks:");
    for (int h = R_CALL; h < NRANGES; h++)
        printf(" %s=%lu", ranges[h].name, range_checks[h]);
    printf("\n");
    printf("traps=%lu jit_traps=%lu helper_traps=%lu max_depth=%lu vm_calls=%lu\n", traps,
           jit_traps, helper_traps, max_depth_seen, calls_done);
    printf("checks: jit=%lu (failed %lu, main reached %lu, not reached %lu) helper=%lu "
           "(failed %lu)\n",
           checks_jit, failed_jit, jit_main_reached, jit_main_not_reached, checks_helper,
           failed_helper);
    for (unsigned long i = 0; i < nfailures && i < MAX_FAILURES; i++)
        printf("failure: %s\n", failures[i]);
    if (nfailures > MAX_FAILURES)
        printf("failure: ... and %lu more\n", nfailures - MAX_FAILURES);
    if (failed_jit || failed_helper || checks_jit == 0 || max_depth_seen < 3)
        ok = 0;
    for (int h = R_CALL; h < NRANGES; h++)
        if (!range_checks[h]) {
            printf("FAIL: no instruction of %s was checked\n", ranges[h].name);
            ok = 0;
        }

    for (size_t i = 0; i < NPROGS; i++) {
        free(executed[i]);
        free(visited[i]);
    }
    /* Balanced registration: once the runtime is gone, libgcc must not find
     * an FDE for any of its code any more (a stale one would point at freed
     * .eh_frame bytes). */
    uintptr_t pcs[NPROGS + 1];
    pcs[0] = (uintptr_t)VM.shim;
    for (size_t i = 0; i < NPROGS; i++)
        pcs[i + 1] = VM.ex_start[i];
    size_t live = glue_fde_count(pcs, NPROGS + 1);
    glue_fini(&VM);
    size_t stale = glue_fde_count(pcs, NPROGS + 1);
    printf("registrations: FDEs found for %zu of %d code ranges while alive, %zu after "
           "sr_runtime_destroy\n", live, NPROGS + 1, stale);
    if (stale || (cfg.frames && live != NPROGS + 1))
        ok = 0;
    for (size_t i = 0; i < NPROGS; i++)
        glue_asm_free(&progs[i]);
    printf("unwind_step: %s\n", ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
}
