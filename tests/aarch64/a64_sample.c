/* a64_sample.c - libgcc unwinding at sampled PCs, on AArch64 (under qemu-user).
 *
 *   a64_sample PROGRAM.tvm [--seconds S] [--max-samples N] [--verbose]
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
 * (default 1000000).
 * Under qemu-aarch64 -singlestep a signal can land on any instruction.
 *
 * Prints one summary line:
 *   jit_instructions T covered C coverage F samples S jit_samples J
 *   reached_main R bad B runs N wrong_results W
 * then "uncovered NAME+0xOFF" for each JIT instruction never sampled, and for
 * the first few bad samples their frame chains. Exit 0 when B == W == 0. */
#include <dlfcn.h>
#include <inttypes.h>
#include <link.h>
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

static a64_range ranges[MAX_RANGES];
static size_t nranges;
static uint32_t *counts[MAX_RANGES];

typedef struct span {
    uintptr_t start, end;
} span;
static span main_span, run_span, jit_run_span;

static volatile sig_atomic_t stop;
static timer_t timer;
static uint64_t rng = 0x9e3779b97f4a7c15u;
static unsigned long samples, jit_samples, reached_main, bad;
static char bad_text[MAX_BAD_SHOWN][1024];

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

static _Unwind_Reason_Code collect(struct _Unwind_Context *ctx, void *arg)
{
    walk *w = arg;
    uintptr_t ip = _Unwind_GetIP(ctx);
    if (w->n == MAX_FRAMES)
        return _URC_END_OF_STACK;
    w->ip[w->n++] = ip;
    return in_span(main_span, ip) ? _URC_END_OF_STACK : _URC_NO_REASON;
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
    int k = -1;
    for (int i = 0; i < w->n && k < 0; i++)
        if (w->ip[i] == pc)
            k = i;
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

static void on_prof(int sig, siginfo_t *si, void *uctx)
{
    (void)sig;
    (void)si;
    ucontext_t *uc = uctx;
    uintptr_t pc = (uintptr_t)uc->uc_mcontext.pc;
    samples++;
    int r = range_of(pc);
    if (r >= 0) {
        jit_samples++;
        counts[r][(pc - ranges[r].start) / 4]++;
        walk w = {.n = 0};
        _Unwind_Backtrace(collect, &w);
        const char *why = judge(&w, pc);
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
    double seconds = 60;
    unsigned long max_samples = 1000000;
    int verbose = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
            seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--max-samples") && i + 1 < argc)
            max_samples = strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--verbose"))
            verbose = 1;
        else
            path = argv[i];
    }
    if (!path) {
        fprintf(stderr, "usage: a64_sample PROGRAM [--seconds S] [--max-samples N]\n");
        return 2;
    }
    struct vm *vm = a64_load(path, 0);
    vm_value want = a64_run(vm, "main", 0, NULL);
    a64_unload(vm);

    vm = a64_load(path, 1);
    nranges = a64_jit_ranges(vm, ranges, MAX_RANGES);
    for (size_t r = 0; r < nranges; r++)
        counts[r] = calloc((ranges[r].end - ranges[r].start) / 4 + 1, sizeof **counts);
    main_span = span_of((void *)main, "main");
    run_span = span_of((void *)vm_run, "vm_run");
    jit_run_span = span_of((void *)vm_jit_run, "vm_jit_run");

    struct sigaction sa = {0};
    sa.sa_sigaction = on_prof;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGPROF, &sa, NULL);
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
    while (now() - t0 < seconds && samples < max_samples) {
        for (int i = 0; i < 20; i++) {
            vm_value got = a64_run(vm, "main", 0, NULL);
            runs++;
            wrong += got != want;
        }
        covered = coverage(&total);
        if (covered == total)
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
    for (unsigned long i = 0; i < bad && i < MAX_BAD_SHOWN; i++)
        printf("%s\n", bad_text[i]);
    a64_unload(vm);
    return bad || wrong ? 1 : 0;
}
