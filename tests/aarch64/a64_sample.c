/* a64_sample.c - unwinding at sampled PCs, on AArch64 (under qemu-user), with
 * the unwinder the program is linked against: libgcc (the cross build's
 * a64_sample) or LLVM's libunwind (test_aarch64_llvm_libunwind links it with
 * libunwind.a).
 *
 *   a64_sample PROGRAM.tvm [--seconds S] [--until-coverage F] [--max-samples N]
 *              [--verbose] [--compare-libgcc]
 *
 * Runs PROGRAM's main interpreted once (the reference result), then
 * JIT-compiled over and over while a POSIX timer (CLOCK_MONOTONIC, SIGPROF)
 * interrupts it. The timer is one-shot and re-armed at the end of every
 * handler with a pseudo-random delay, so samples land at unrelated points of
 * the program's cycle and never back to back. When the interrupted PC
 * (uc_mcontext.pc) is in JIT memory (an executor or the shim), the handler
 * walks the stack with _Unwind_Backtrace, through the signal frame, and checks:
 *   - the walk passes the interrupted PC itself (the signal frame's exact PC);
 *   - every JIT frame in it (the interrupted one and outer executors that
 *     re-entered the VM through vm_call) is followed by the shim's caller,
 *     vm_jit_run or vm_run (a tail call may elide vm_jit_run);
 *   - it reaches main, with no zero or unknown return address before.
 * Each sample is counted at its instruction; the run ends when every JIT
 * instruction was sampled, after S seconds (default 60) or N samples
 * (default 1000000). With --until-coverage F it goes on after S seconds
 * while fewer than that fraction of JIT instructions were sampled, up to 6 S
 * in all: a slow machine samples longer instead of less.
 * Under qemu-aarch64 -singlestep a signal can land on any instruction.
 *
 * Samples in the VM's own C functions that run between JIT frames (vm_run,
 * vm_call, vm_jit_run, vm_native, vm_print) are walked and judged the same
 * way (the compiled-code control: what an unwinder gets wrong there is not
 * the JIT's doing). A walk that faults (a wrong frame read as a right one)
 * counts as bad; the run goes on.
 *
 * --compare-libgcc (a program not linked against libgcc's unwinder): loads
 * libgcc_s.so.1 first (RTLD_GLOBAL, so the runtime registers JIT code with it
 * too) and at every sample also walks with libgcc's _Unwind_Backtrace, the
 * reference: every PC whose walk (from the interrupted PC to main) differs
 * from libgcc's is listed.
 *
 * Prints one summary line:
 *   jit_instructions T covered C coverage F samples S jit_samples J
 *   reached_main R bad B runs N wrong_results W seconds X
 * then "uncovered NAME+0xOFF" for each JIT instruction never sampled, then
 *   c_instructions T c_covered C c_samples S c_bad B walk_faults F
 *   [compare_libgcc samples S differ D libgcc_bad G]
 * then the first few bad JIT samples' frame chains, then for each instruction
 * (JIT or C) where a walk was bad or differed from libgcc's:
 *   pc KIND NAME+0xOFF samples N bad B differ D faults F prev WORD
 * (KIND jit or c; WORD the instruction before it in the same function,
 * "none" at its first), followed by "  walk ..." and "  libgcc ..." (the
 * return addresses from the interrupted PC on, of its first such sample).
 * Exit 0 when B == W == 0 (JIT samples). */
#include <dlfcn.h>
#include <inttypes.h>
#include <link.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ucontext.h>
#include <unwind.h>

#include "a64_glue.h"
#include "vm.h"

#define MAX_RANGES 64
#define MAX_FRAMES 64
#define MAX_BAD_SHOWN 5
#define MAX_C 8

/* Per instruction of a JIT range or C function: samples, bad walks, walks
 * that differ from libgcc's, and the first such chains. */
typedef struct pcstat {
    uint32_t samples, bad, differ, faults;
    char *chains;
} pcstat;

static a64_range ranges[MAX_RANGES];
static size_t nranges;
static uint32_t *counts[MAX_RANGES];
static pcstat *stats[MAX_RANGES];
static a64_range cfuncs[MAX_C];
static size_t ncfuncs;
static pcstat *cstats[MAX_C];

typedef struct span {
    uintptr_t start, end;
} span;
static span main_span, run_span, jit_run_span;

static volatile sig_atomic_t stop;
static timer_t timer;
static uint64_t rng = 0x9e3779b97f4a7c15u;
static unsigned long samples, jit_samples, reached_main, bad;
static unsigned long c_samples, c_bad, compared, differ, libgcc_bad, faults;
static char bad_text[MAX_BAD_SHOWN][1024];

/* A walk that reads through a wrong frame may fault: the fault ends that
 * walk (counted as bad), not the run. */
static sigjmp_buf walk_jmp;
static volatile sig_atomic_t walking;

static void on_fault(int sig)
{
    if (walking)
        siglongjmp(walk_jmp, 1);
    signal(sig, SIG_DFL);
    raise(sig);
}

/* libgcc's unwinder, loaded for --compare-libgcc. */
typedef _Unwind_Reason_Code backtrace_fn(_Unwind_Trace_Fn, void *);
typedef uintptr_t getip_fn(struct _Unwind_Context *);
static backtrace_fn *gcc_backtrace;
static getip_fn *gcc_getip;

/* vm_native's "backtrace" native: something cheap and checkable. */
vm_value vm_native(vm_frame *frame, vm_value which, vm_value arg)
{
    (void)frame;
    return which == A64_NATIVE_BACKTRACE ? arg * 3 + 1 : arg;
}

vm_value vm_print(vm_frame *frame, vm_value value)
{
    (void)frame;
    return value ^ 5;
}

_Noreturn void vm_trap(vm_frame *frame, const char *why)
{
    (void)frame;
    fprintf(stderr, "trap: %s\n", why);
    exit(3);
}

static span span_of(void *fn, const char *name)
{
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    if (!dladdr1(fn, &info, (void **)&sym, RTLD_DL_SYMENT) || !sym || !sym->st_size) {
        fprintf(stderr, "cannot size %s (link with -rdynamic)\n", name);
        exit(2);
    }
    uintptr_t start = (uintptr_t)info.dli_saddr;
    return (span){start, start + sym->st_size};
}

/* A return address `ip` belongs to the call before it. */
static int in_span(span s, uintptr_t ip)
{
    return ip > s.start && ip <= s.end;
}

static int range_of(uintptr_t pc)
{
    for (size_t i = 0; i < nranges; i++)
        if (pc >= ranges[i].start && pc < ranges[i].end)
            return (int)i;
    return -1;
}

static int cfunc_of(uintptr_t pc)
{
    for (size_t i = 0; i < ncfuncs; i++)
        if (pc >= cfuncs[i].start && pc < cfuncs[i].end)
            return (int)i;
    return -1;
}

static void arm(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    long us = 150 + (long)(rng % 700); /* 150..850 us of execution between samples */
    struct itimerspec its = {{0, 0}, {0, us * 1000}};
    timer_settime(timer, 0, &its, NULL);
}

typedef struct walk {
    uintptr_t ip[MAX_FRAMES];
    int n;
} walk;

static _Unwind_Reason_Code add_frame(walk *w, uintptr_t ip)
{
    if (w->n == MAX_FRAMES)
        return _URC_END_OF_STACK;
    w->ip[w->n++] = ip;
    return in_span(main_span, ip) ? _URC_END_OF_STACK : _URC_NO_REASON;
}

static _Unwind_Reason_Code collect(struct _Unwind_Context *ctx, void *arg)
{
    return add_frame(arg, _Unwind_GetIP(ctx));
}

static _Unwind_Reason_Code collect_libgcc(struct _Unwind_Context *ctx, void *arg)
{
    return add_frame(arg, gcc_getip(ctx));
}

/* The program's own unwinder from here; false when the walk faulted. */
static int walk_here(walk *w)
{
    if (sigsetjmp(walk_jmp, 1)) {
        walking = 0;
        return 0;
    }
    walking = 1;
    _Unwind_Backtrace(collect, w);
    walking = 0;
    return 1;
}

/* Where the walk passes the interrupted PC, or -1. */
static int start_of(const walk *w, uintptr_t pc)
{
    for (int i = 0; i < w->n; i++)
        if (w->ip[i] == pc)
            return i;
    return -1;
}

/* Whether two walks agree from the interrupted PC on. */
static int same_walk(const walk *a, const walk *b, uintptr_t pc)
{
    int i = start_of(a, pc), j = start_of(b, pc);
    if (i < 0 || j < 0 || a->n - i != b->n - j)
        return 0;
    return !memcmp(a->ip + i, b->ip + j, (size_t)(a->n - i) * sizeof a->ip[0]);
}

static void append(char *buf, size_t size, const char *fmt, uintptr_t v)
{
    size_t len = strlen(buf);
    if (len + 1 < size)
        snprintf(buf + len, size - len, fmt, v);
}

/* Empty when the chain is good, else why not. */
static const char *judge(const walk *w, uintptr_t pc)
{
    int k = start_of(w, pc);
    if (k < 0)
        return "the walk does not pass the interrupted PC";
    for (int i = k; i < w->n; i++) {
        uintptr_t ip = w->ip[i];
        if (ip == 0)
            return "a zero return address before main";
        if (in_span(main_span, ip))
            return "";
        if (range_of(i == k ? ip : ip - 1) >= 0) {
            if (i + 1 >= w->n)
                return "the walk ends in JIT code";
            uintptr_t next = w->ip[i + 1];
            if (!in_span(jit_run_span, next) && !in_span(run_span, next))
                return "a JIT frame is not followed by vm_jit_run or vm_run";
        } else if (!dladdr((void *)(ip - 1), &(Dl_info){0})) {
            return "a return address in no known object";
        }
    }
    return "the walk does not reach main";
}

static void append_text(char *buf, size_t size, const char *text)
{
    size_t len = strlen(buf);
    if (len + 1 < size)
        snprintf(buf + len, size - len, "%s", text);
}

/* "\n  WHAT ip ip ...": the walk's return addresses from the interrupted PC on. */
static void append_walk(char *buf, size_t size, const char *what, const walk *w, uintptr_t pc)
{
    int k = start_of(w, pc);
    append_text(buf, size, "\n  ");
    append_text(buf, size, what);
    for (int i = k < 0 ? 0 : k; i < w->n; i++)
        append(buf, size, " %#" PRIxPTR, w->ip[i]);
    if (k < 0)
        append_text(buf, size, " (does not pass the PC)");
}

/* Room for the chains of the first MAX_CHAINS instructions with a bad or
 * differing walk (no allocation in the handler). */
#define MAX_CHAINS 64
#define CHAIN_TEXT 2048
static char chain_pool[MAX_CHAINS][CHAIN_TEXT];
static int chains_used;

/* Counts a walk at its instruction's record (judged_bad: judge() failed it);
 * with --compare-libgcc also walks with libgcc and compares. */
static void account(pcstat *st, const walk *w, uintptr_t pc, int judged_bad, int faulted)
{
    walk g = {.n = 0};
    int differs = 0;
    st->samples++;
    st->bad += judged_bad;
    st->faults += faulted;
    if (gcc_backtrace) {
        gcc_backtrace(collect_libgcc, &g);
        compared++;
        libgcc_bad += *judge(&g, pc) != 0;
        differs = !same_walk(w, &g, pc);
        differ += differs;
        st->differ += differs;
    }
    if ((differs || judged_bad) && !st->chains && chains_used < MAX_CHAINS) {
        st->chains = chain_pool[chains_used++];
        append_walk(st->chains, CHAIN_TEXT, faulted ? "walk (faulted)" : "walk", w, pc);
        if (gcc_backtrace)
            append_walk(st->chains, CHAIN_TEXT, "libgcc", &g, pc);
    }
}

static void on_prof(int sig, siginfo_t *si, void *uctx)
{
    (void)sig;
    (void)si;
    ucontext_t *uc = uctx;
    uintptr_t pc = (uintptr_t)uc->uc_mcontext.pc;
    samples++;
    int r = range_of(pc), c = r < 0 ? cfunc_of(pc) : -1;
    if (c >= 0) {
        c_samples++;
        walk w = {.n = 0};
        int ok = walk_here(&w);
        int b = !ok || *judge(&w, pc) != 0;
        c_bad += b;
        faults += !ok;
        account(&cstats[c][(pc - cfuncs[c].start) / 4], &w, pc, b, !ok);
    }
    if (r >= 0) {
        jit_samples++;
        counts[r][(pc - ranges[r].start) / 4]++;
        walk w = {.n = 0};
        int ok = walk_here(&w);
        const char *why = ok ? judge(&w, pc) : "the walk faulted";
        faults += !ok;
        account(&stats[r][(pc - ranges[r].start) / 4], &w, pc, *why != 0, !ok);
        if (!*why) {
            reached_main++;
        } else {
            if (bad < MAX_BAD_SHOWN) {
                char *b = bad_text[bad];
                snprintf(b, sizeof bad_text[bad], "bad sample at %s+0x%" PRIxPTR ": %s; frames:",
                         ranges[r].name, pc - ranges[r].start, why);
                for (int i = 0; i < w.n; i++)
                    append(b, sizeof bad_text[bad], " %#" PRIxPTR, w.ip[i]);
            }
            bad++;
        }
    }
    if (!stop)
        arm();
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static size_t coverage(size_t *total)
{
    size_t covered = 0;
    *total = 0;
    for (size_t r = 0; r < nranges; r++) {
        size_t n = (ranges[r].end - ranges[r].start) / 4;
        *total += n;
        for (size_t i = 0; i < n; i++)
            covered += counts[r][i] != 0;
    }
    return covered;
}

int main(int argc, char **argv)
{
    const char *path = NULL;
    double seconds = 60, enough = 0;
    unsigned long max_samples = 1000000;
    int verbose = 0, compare = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
            seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--until-coverage") && i + 1 < argc)
            enough = atof(argv[++i]);
        else if (!strcmp(argv[i], "--max-samples") && i + 1 < argc)
            max_samples = strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--verbose"))
            verbose = 1;
        else if (!strcmp(argv[i], "--compare-libgcc"))
            compare = 1;
        else
            path = argv[i];
    }
    if (!path) {
        fprintf(stderr, "usage: a64_sample PROGRAM [--seconds S] [--until-coverage F] "
                        "[--max-samples N] [--verbose] [--compare-libgcc]\n");
        return 2;
    }
    if (compare) { /* before the runtime is made, so that it registers with libgcc too */
        void *h = dlopen("libgcc_s.so.1", RTLD_NOW | RTLD_GLOBAL);
        gcc_backtrace = h ? (backtrace_fn *)dlsym(h, "_Unwind_Backtrace") : NULL;
        gcc_getip = h ? (getip_fn *)dlsym(h, "_Unwind_GetIP") : NULL;
        if (!gcc_backtrace || !gcc_getip || (void *)gcc_backtrace == (void *)_Unwind_Backtrace) {
            fprintf(stderr, "--compare-libgcc: no separate libgcc_s unwinder (%s)\n",
                    h ? "linked against it?" : dlerror());
            return 2;
        }
    }
    struct vm *vm = a64_load(path, 0);
    vm_value want = tvm_run(vm, "main", 0, NULL);
    tvm_unload(vm);

    vm = a64_load(path, 1);
    nranges = a64_jit_ranges(vm, ranges, MAX_RANGES);
    for (size_t r = 0; r < nranges; r++)
        counts[r] = calloc((ranges[r].end - ranges[r].start) / 4 + 1, sizeof **counts);
    main_span = span_of((void *)main, "main");
    run_span = span_of((void *)vm_run, "vm_run");
    jit_run_span = span_of((void *)vm_jit_run, "vm_jit_run");
    for (size_t r = 0; r < nranges; r++)
        stats[r] = calloc((ranges[r].end - ranges[r].start) / 4 + 1, sizeof **stats);
    struct {
        void *fn;
        const char *name;
    } cs[] = {{(void *)vm_run, "vm_run"}, {(void *)vm_call, "vm_call"},
              {(void *)vm_jit_run, "vm_jit_run"}, {(void *)vm_native, "vm_native"},
              {(void *)vm_print, "vm_print"}};
    for (size_t i = 0; i < sizeof cs / sizeof cs[0] && i < MAX_C; i++) {
        span sp = span_of(cs[i].fn, cs[i].name);
        cfuncs[ncfuncs] = (a64_range){sp.start, sp.end, cs[i].name};
        cstats[ncfuncs++] = calloc((sp.end - sp.start) / 4 + 1, sizeof **cstats);
    }

    struct sigaction sa = {0};
    sa.sa_sigaction = on_prof;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGPROF, &sa, NULL);
    struct sigaction fa = {0};
    fa.sa_handler = on_fault;
    sigemptyset(&fa.sa_mask);
    sigaction(SIGSEGV, &fa, NULL);
    sigaction(SIGBUS, &fa, NULL);
    struct sigevent sev = {0};
    sev.sigev_notify = SIGEV_SIGNAL;
    sev.sigev_signo = SIGPROF;
    if (timer_create(CLOCK_MONOTONIC, &sev, &timer) != 0) {
        perror("timer_create");
        return 2;
    }
    unsigned long runs = 0, wrong = 0;
    size_t total, covered = 0;
    double t0 = now();
    arm();
    for (double t = 0; t < 6 * seconds && samples < max_samples; t = now() - t0) {
        for (int i = 0; i < 20; i++) {
            vm_value got = tvm_run(vm, "main", 0, NULL);
            runs++;
            wrong += got != want;
        }
        covered = coverage(&total);
        if (covered == total || (t >= seconds && covered >= enough * (double)total))
            break;
    }
    stop = 1;
    struct itimerspec off = {{0, 0}, {0, 0}};
    timer_settime(timer, 0, &off, NULL);
    timer_delete(timer);
    covered = coverage(&total);
    printf("jit_instructions %zu covered %zu coverage %.4f samples %lu jit_samples %lu "
           "reached_main %lu bad %lu runs %lu wrong_results %lu seconds %.1f\n",
           total, covered, total ? (double)covered / (double)total : 0.0, samples, jit_samples,
           reached_main, bad, runs, wrong, now() - t0);
    for (size_t r = 0; r < nranges; r++) {
        size_t n = (ranges[r].end - ranges[r].start) / 4;
        for (size_t i = 0; i < n; i++) {
            if (!counts[r][i])
                printf("uncovered %s+0x%zx\n", ranges[r].name, 4 * i);
            else if (verbose)
                printf("count %s+0x%zx %u\n", ranges[r].name, 4 * i, counts[r][i]);
        }
    }
    size_t c_total = 0, c_covered = 0;
    for (size_t c = 0; c < ncfuncs; c++)
        for (size_t i = 0; i < (cfuncs[c].end - cfuncs[c].start) / 4; i++) {
            c_total++;
            c_covered += cstats[c][i].samples != 0;
        }
    printf("c_instructions %zu c_covered %zu c_samples %lu c_bad %lu walk_faults %lu\n", c_total,
           c_covered, c_samples, c_bad, faults);
    if (gcc_backtrace)
        printf("compare_libgcc samples %lu differ %lu libgcc_bad %lu\n", compared, differ,
               libgcc_bad);
    for (unsigned long i = 0; i < bad && i < MAX_BAD_SHOWN; i++)
        printf("%s\n", bad_text[i]);
    for (int kind = 0; kind < 2; kind++) {
        size_t n = kind ? ncfuncs : nranges;
        for (size_t r = 0; r < n; r++) {
            const a64_range *rg = kind ? &cfuncs[r] : &ranges[r];
            const pcstat *st = kind ? cstats[r] : stats[r];
            for (size_t i = 0; i < (rg->end - rg->start) / 4; i++) {
                if (!st[i].bad && !st[i].differ)
                    continue;
                char prev[16] = "none";
                if (i)
                    snprintf(prev, sizeof prev, "%08x", ((const uint32_t *)rg->start)[i - 1]);
                printf("pc %s %s+0x%zx samples %u bad %u differ %u faults %u prev %s%s\n",
                       kind ? "c" : "jit", rg->name, 4 * i, st[i].samples, st[i].bad,
                       st[i].differ, st[i].faults, prev, st[i].chains ? st[i].chains : "");
            }
        }
    }
    tvm_unload(vm);
    return bad || wrong ? 1 : 0;
}
