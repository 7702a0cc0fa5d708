/* test_misuse - stencilrt's public API (stencilrt.h) used wrongly: each
 * misuse gets its status and message, or is a documented precondition, and
 * none corrupts memory (the program also runs in the ASan+UBSan build and,
 * as test_misuse_tsan, under ThreadSanitizer).
 *
 *   freed executors      patched, freed again, read, looked up, listed in a
 *                        batch: SR_EINVAL "was freed", NULL or 0, not found;
 *                        still recognised after 256 more frees
 *   another runtime      a jump into another runtime's executor; lookups
 *                        find only their own runtime's code
 *   indexes              instruction n, 2^32, SIZE_MAX; operand SG_OPERANDS,
 *                        UINT_MAX; getters past the end
 *   lookups              kernel, unmapped, NULL, 1, top-of-memory addresses,
 *                        the unused part of an arena, freed code
 *   sizes                instruction counts and free_batch counts whose byte
 *                        sizes wrap, stencils whose code, data or alignment
 *                        sizes wrap the executor's layout (each in a child
 *                        process, so that a crash is one failed case)
 *   destroy              with live, batched, patched and held executors; NULL
 *   threads              patches of a live executor and of executors being
 *                        freed, while other threads emit, free and look up
 *
 * Prints one line per case and ends with "N passed, N failed". */
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rt_common.h"

/* push 1; jump 2; ret: returns 1, its jump (instruction 1) can be re-pointed. */
static const sr_instr jumper[] = {
    {SG_OP_push, 0, {1, 0, 0, 0}}, {SG_OP_jump, 2, {0, 0, 0, 0}}, {SG_OP_ret, 0, {0, 0, 0, 0}}};

static void expect_status(sr_status got, sr_status want, const char *name, const char *says)
{
    char detail[512];
    bool said = !says || strstr(sr_last_error(), says);
    /* A success leaves no message of its own: an older one would mislead. */
    snprintf(detail, sizeof detail, "status %d (%s), want %d%s%s%s%s", got, sr_strerror(got),
             want, got == SR_OK ? "" : "; message: ", got == SR_OK ? "" : sr_last_error(),
             said ? "" : "; want it to say ", said ? "" : says);
    rt_result(got == want && said, name, detail);
}

static sr_runtime *make_runtime(const sr_stencil_set *set)
{
    sr_runtime *rt = NULL;
    if (sr_runtime_create(set, rt_symbols, NULL, &rt) != SR_OK) {
        rt_result(false, "runtime created", sr_last_error());
        return NULL;
    }
    return rt;
}

static sr_executor *emit(sr_runtime *rt, const sr_instr *code, size_t n, const char *name)
{
    sr_executor *ex = NULL;
    if (sr_emit(rt, code, n, name, &ex) != SR_OK)
        rt_result(false, "emit", sr_last_error());
    return ex;
}

/* ---- freed executors */

static void freed_executor_refused(void)
{
    sr_runtime *rt = make_runtime(&rt_set);
    sr_executor *a = rt ? emit(rt, jumper, 3, "a") : NULL;
    sr_executor *b = a ? emit(rt, rt_answer, 3, "b") : NULL, *c = b ? emit(rt, jumper, 3, "c")
                                                                     : NULL;
    if (!c) {
        sr_runtime_destroy(rt);
        return;
    }
    const void *a_code = sr_executor_entry(a), *a_jump_target = sr_executor_instr(a, 2);
    sr_executor_free(a);
    expect_status(sr_patch_jump(a, 1, sr_executor_instr(b, 1)), SR_EINVAL,
                  "freed: sr_patch_jump on a freed executor", "was freed");
    expect_status(sr_patch_operand(a, 0, 0, 5), SR_EINVAL,
                  "freed: sr_patch_operand on a freed executor", "was freed");
    expect_status(sr_patch_jump(c, 1, a_jump_target), SR_EINVAL,
                  "freed: a jump into a freed executor's code", "live executor");
    sr_executor_free(a);
    rt_result(strstr(sr_last_error(), "sr_executor_free") && strstr(sr_last_error(), "was freed"),
              "freed: freeing it again does nothing and says so", sr_last_error());
    sr_executor *again[] = {b, a};
    expect_status(sr_executor_free_batch(again, 2), SR_EINVAL,
                  "freed: a batch listing a freed executor", "already freed");
    rt_result(sr_executor_entry(a) == NULL && sr_executor_code_size(a) == 0 &&
                  sr_executor_instr(a, 0) == NULL && sr_executor_name(a) == NULL &&
                  sr_executor_instr_name(a, 0) == NULL && sr_executor_id(a) == 0,
              "freed: getters return NULL or 0", "");
    sr_executor *got = NULL;
    rt_result(!sr_lookup_pc(rt, a_code, &got, NULL), "freed: its code is in no executor", "");
    rt_result(sr_runtime_stats(rt).executors == 2 && rt_run(rt, b) == 42 && rt_run(rt, c) == 1,
              "freed: the batch was all or nothing: b still runs; c's jump is unchanged", "");
    sr_runtime_destroy(rt);
}

/* Records are reused only once more than 256 freed ones wait: a freed
 * executor is still recognised after 256 more frees and as many emits. */
static void freed_executor_quarantine(void)
{
    sr_runtime *rt = make_runtime(&rt_set);
    sr_executor *old = rt ? emit(rt, rt_answer, 3, "old") : NULL;
    if (!old) {
        sr_runtime_destroy(rt);
        return;
    }
    sr_executor_free(old);
    bool ok = true, recognised = true;
    for (int i = 0; i < 256 && ok; i++) {
        sr_executor *ex = emit(rt, rt_answer, 3, "churn");
        ok = ex && ex != old && rt_run(rt, ex) == 42;
        sr_executor_free(ex);
        recognised &= sr_patch_operand(old, 1, 0, 2) == SR_EINVAL;
    }
    rt_result(ok && recognised, "freed: recognised through 256 later emits and frees", "");
    /* Past the quarantine its record may serve a new executor (stencilrt.h):
     * only memory safety is asked of what follows. */
    for (int i = 0; i < 600 && ok; i++) {
        sr_executor *ex = emit(rt, rt_answer, 3, "reuse");
        ok = ex && rt_run(rt, ex) == 42;
        sr_executor_free(ex);
    }
    rt_result(ok && sr_runtime_stats(rt).executors == 0, "freed: records reused safely", "");
    sr_runtime_destroy(rt);
}

/* ---- another runtime */

static void other_runtime(void)
{
    sr_runtime *one = make_runtime(&rt_set), *two = make_runtime(&rt_set);
    sr_executor *a = one ? emit(one, jumper, 3, "a") : NULL;
    sr_executor *c = two ? emit(two, rt_answer, 3, "c") : NULL;
    if (a && c) {
        uint8_t before[256];
        size_t size = sr_executor_code_size(a);
        memcpy(before, sr_executor_entry(a), size < sizeof before ? size : sizeof before);
        expect_status(sr_patch_jump(a, 1, sr_executor_instr(c, 1)), SR_EINVAL,
                      "runtimes: a jump into another runtime's executor", "of this runtime");
        rt_result(!memcmp(before, sr_executor_entry(a), size < sizeof before ? size : sizeof before)
                      && rt_run(one, a) == 1, "runtimes: the code is unchanged", "");
        sr_executor *got = NULL;
        size_t at = 0;
        rt_result(!sr_lookup_pc(one, sr_executor_instr(c, 1), &got, &at) &&
                      sr_lookup_pc(two, sr_executor_instr(c, 1), &got, &at) && got == c && at == 1,
                  "runtimes: each finds only its own executors", "");
        sr_executor *both[] = {a, c};
        expect_status(sr_executor_free_batch(both, 2), SR_OK,
                      "runtimes: one batch frees executors of two runtimes", NULL);
        rt_result(sr_runtime_stats(one).executors == 0 && sr_runtime_stats(two).executors == 0,
                  "runtimes: both freed", "");
    }
    sr_runtime_destroy(one);
    sr_runtime_destroy(two);
}

/* ---- indexes out of range */

static void indexes(void)
{
    sr_runtime *rt = make_runtime(&rt_set);
    sr_executor *a = rt ? emit(rt, jumper, 3, "a") : NULL;
    if (!a) {
        sr_runtime_destroy(rt);
        return;
    }
    const void *target = sr_executor_instr(a, 2);
    static const size_t bad[] = {3, 4, (size_t)UINT32_MAX, (size_t)UINT32_MAX + 1, SIZE_MAX};
    bool ok = true;
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        ok &= sr_patch_jump(a, bad[k], target) == SR_EINVAL &&
              strstr(sr_last_error(), "has no instruction");
        ok &= sr_patch_operand(a, bad[k], 0, 1) == SR_EINVAL &&
              strstr(sr_last_error(), "has no instruction");
        ok &= sr_executor_instr_name(a, bad[k]) == NULL;
        ok &= bad[k] == 3 ? sr_executor_instr(a, 3) != NULL : sr_executor_instr(a, bad[k]) == NULL;
    }
    rt_result(ok, "indexes: instruction 3, 4, 2^32-1, 2^32, SIZE_MAX of 3 refused",
              ok ? "" : sr_last_error());
    expect_status(sr_patch_operand(a, 0, SG_OPERANDS, 1), SR_EINVAL,
                  "indexes: operand SG_OPERANDS", "no operand");
    expect_status(sr_patch_operand(a, 0, UINT_MAX, 1), SR_EINVAL, "indexes: operand UINT_MAX",
                  "no operand");
    expect_status(sr_patch_jump(a, 1, NULL), SR_EINVAL, "indexes: a NULL jump target",
                  "not the start");
    rt_result(rt_run(rt, a) == 1, "indexes: the code still runs as emitted", "");
    sr_runtime_destroy(rt);
}

/* ---- lookups of addresses in no executor */

static void lookups(void)
{
    sr_runtime *rt = make_runtime(&rt_set);
    sr_executor *a = rt ? emit(rt, rt_answer, 3, "a") : NULL;
    if (!a) {
        sr_runtime_destroy(rt);
        return;
    }
    /* An address that was mapped a moment ago and is not now. */
    long page = sysconf(_SC_PAGESIZE);
    void *gone = mmap(NULL, (size_t)page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (gone != MAP_FAILED)
        munmap(gone, (size_t)page);
    const uint8_t *entry = sr_executor_entry(a);
    const void *pcs[] = {
        (const void *)(uintptr_t)0xffffffff81000000u, /* x86-64 kernel text */
        (const void *)(uintptr_t)0xffff800000000000u, /* start of the kernel half */
        (const void *)UINTPTR_MAX, (const void *)(UINTPTR_MAX - 4095),
        NULL, (const void *)1, gone == MAP_FAILED ? NULL : gone,
        entry + sr_executor_code_size(a),      /* just past its code: veneers, data, GOT */
        entry + 256 * 1024,                    /* the arena's unused part (or past it) */
        entry - 1,                             /* the granule before: the shim's or none */
    };
    bool ok = true;
    char detail[128] = "";
    for (size_t k = 0; k < sizeof pcs / sizeof *pcs; k++) {
        sr_executor *got = (sr_executor *)&got;
        size_t at = 77;
        if (sr_lookup_pc(rt, pcs[k], &got, &at) || got != (sr_executor *)&got || at != 77) {
            ok = false;
            snprintf(detail, sizeof detail, "%p was found, or the outputs were written", pcs[k]);
        }
    }
    rt_result(ok, "lookups: kernel, unmapped, NULL, top-of-memory and non-code addresses", detail);
    size_t size = sr_executor_code_size(a);
    sr_executor_free(a);
    ok = true;
    for (size_t i = 0; i < size; i++) {
        sr_executor *got;
        ok &= !sr_lookup_pc(rt, entry + i, &got, NULL);
    }
    rt_result(ok, "lookups: no byte of a freed executor's code is found", "");
    sr_runtime_destroy(rt);
}

/* ---- sizes that would overflow: each case in a child, so that a crash (the
 * old code read past the caller's array or wrote past its chunk) is one
 * failed case and the others still run. */

typedef int size_case(void); /* the child's exit status: 0 refused as wanted */

static void in_child(size_case *fn, const char *name)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0)
        _exit(fn());
    int status = 0;
    char detail[96];
    if (pid < 0 || waitpid(pid, &status, 0) != pid)
        status = -1;
    snprintf(detail, sizeof detail, "child %s %d", WIFSIGNALED(status) ? "killed by signal"
             : "exit", WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    rt_result(WIFEXITED(status) && WEXITSTATUS(status) == 0, name, detail);
}

/* 0 when st is want, and the message says `says`; else prints why. */
static int refused(sr_status st, sr_status want, const char *says)
{
    if (st == want && strstr(sr_last_error(), says))
        return 0;
    printf("     status %d (want %d): %s\n", st, want, sr_last_error());
    return 1;
}

/* Counts no array can have: each times an element's size wraps. The array
 * passed holds 3 instructions; none past them may be read. */
static int huge_instruction_counts(void)
{
    sr_runtime *rt = make_runtime(&rt_set);
    if (!rt)
        return 2;
    static const size_t counts[] = {(size_t)SR_MAX_INSTRUCTIONS + 1, (size_t)1 << 40,
                                    SIZE_MAX / 64 - 2, SIZE_MAX / sizeof(char *) + 1,
                                    SIZE_MAX / sizeof(sr_instr) + 1, SIZE_MAX};
    int bad = 0;
    for (size_t k = 0; k < sizeof counts / sizeof *counts; k++) {
        sr_executor *ex = NULL;
        bad |= refused(sr_emit(rt, rt_answer, counts[k], "huge", &ex), SR_EINVAL,
                       "SR_MAX_INSTRUCTIONS");
        sr_program p = {rt_answer, counts[k], "huge"};
        bad |= refused(sr_emit_batch(rt, &p, 1, &ex), SR_EINVAL, "SR_MAX_INSTRUCTIONS");
        bad |= ex != NULL;
    }
    bad |= sr_runtime_stats(rt).executors != 0;
    sr_runtime_destroy(rt);
    return bad;
}

/* A count whose bytes wrap to a small number (8 on 64 bits). */
static int huge_free_batch(void)
{
    sr_runtime *rt = make_runtime(&rt_set);
    sr_executor *ex = rt ? emit(rt, rt_answer, 3, "kept") : NULL;
    if (!ex)
        return 2;
    sr_executor *list[2] = {ex, NULL};
    int bad = refused(sr_executor_free_batch(list, SIZE_MAX / sizeof(sr_executor *) + 2),
                      SR_EINVAL, "larger than any array");
    bad |= sr_runtime_stats(rt).executors != 1 || rt_run(rt, ex) != 42;
    sr_runtime_destroy(rt);
    return bad;
}

/* A stencil set anyone can fill in: op 0 a 16-byte nop run, op 1 whose size
 * field is `code` bytes of code, `data` of data aligned to `align`. The
 * program runs op 0 then op 1, so that the sizes add up past SIZE_MAX. */
static int wrapping_stencil(size_t code, size_t data, size_t align)
{
    static const uint8_t nops[16] = {0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90,
                                     0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90};
    static const uint8_t ret[1] = {0xc3};
    sg_stencil ops[2] = {
        {"nops", nops, sizeof nops, NULL, 0, 1, NULL, 0, NULL, 0, 1, NULL, 0},
        {"wraps", ret, code, data ? ret : NULL, data, align, NULL, 0, NULL, 0, 0, NULL, 0},
    };
    sr_stencil_set set = rt_set;
    set.stencils = ops;
    set.cold_sizes = NULL; /* these ops are one part */
    set.count = 2;
    sr_runtime *rt = make_runtime(&set);
    if (!rt)
        return 2;
    static const sr_instr prog[] = {{0, 0, {0, 0, 0, 0}}, {1, 0, {0, 0, 0, 0}}};
    sr_executor *ex = NULL;
    int bad = refused(sr_emit(rt, prog, 2, "wraps", &ex), SR_ENOMEM, "larger than 2 GiB");
    bad |= ex != NULL || sr_runtime_stats(rt).executors != 0;
    sr_runtime_destroy(rt);
    return bad;
}

static int wrapping_code_size(void)
{
    return wrapping_stencil(SIZE_MAX - 8, 0, 1);
}

static int wrapping_data_size(void)
{
    return wrapping_stencil(1, SIZE_MAX - 8, 1);
}

static int wrapping_data_align(void)
{
    return wrapping_stencil(1, 1, SIZE_MAX);
}

static void sizes(void)
{
    in_child(huge_instruction_counts, "sizes: instruction counts past SR_MAX_INSTRUCTIONS, "
             "whose bytes wrap, refused before the code is read");
    in_child(huge_free_batch, "sizes: a free_batch count whose bytes wrap");
    in_child(wrapping_code_size, "sizes: a stencil's code size that wraps the layout");
    in_child(wrapping_data_size, "sizes: a stencil's data size that wraps the layout");
    in_child(wrapping_data_align, "sizes: a stencil's data alignment that wraps the layout");
}

/* ---- sr_runtime_destroy: with executors alive in every state (emitted
 * alone, in a batch, patched, under a GDB hold that never ends). ASan's
 * leak check and the registrations undone say nothing is left. */
static void destroy(void)
{
    sr_runtime *rt = make_runtime(&rt_set);
    if (!rt)
        return;
    sr_executor *a = emit(rt, jumper, 3, "a"), *b = emit(rt, rt_answer, 3, "b"), *batch[3];
    sr_program progs[3] = {{rt_answer, 3, "p0"}, {jumper, 3, "p1"}, {rt_answer, 3, "p2"}};
    bool ok = a && b && sr_emit_batch(rt, progs, 3, batch) == SR_OK;
    ok = ok && sr_patch_jump(a, 1, sr_executor_instr(batch[1], 0)) == SR_OK &&
         sr_patch_operand(b, 1, 0, 9) == SR_OK && rt_run(rt, b) == 50;
    sr_gdb_hold(rt);
    sr_executor *held = ok ? emit(rt, rt_answer, 3, "held") : NULL;
    sr_executor_free(batch[2]);
    ok = ok && held && sr_runtime_stats(rt).executors == 5;
    sr_runtime_destroy(rt);
    rt_result(ok, "destroy: with live, batched, patched and held executors",
              ok ? "" : sr_last_error());
    sr_runtime_destroy(NULL);
    rt_result(true, "destroy: NULL does nothing", "");
}

/* ---- threads: a live executor patched over and over, executors being freed
 * patched too (SR_OK or "was freed", nothing else), while other threads emit,
 * free and look up. Bounded iterations; every thread joined. */

enum { CHURN = 400, PATCHES = 800, LOOKUPS = 4000 };

typedef struct shared {
    sr_runtime *rt;
    sr_executor *keep;               /* jumper: patched, never freed */
    _Atomic(sr_executor *) current;  /* the churner's newest executor */
    _Atomic(const void *) last_code; /* where that executor's code was */
    atomic_int done;
    atomic_int errors;
    char error[256];                 /* the first error (written once, under errors) */
} shared;

static void thread_error(shared *s, const char *what)
{
    if (atomic_fetch_add(&s->errors, 1) == 0)
        snprintf(s->error, sizeof s->error, "%s: %s", what, sr_last_error());
}

static void *churner(void *arg)
{
    shared *s = arg;
    for (int i = 0; i < CHURN; i++) {
        sr_executor *ex = NULL;
        if (sr_emit(s->rt, jumper, 3, "churn", &ex) != SR_OK) {
            thread_error(s, "emit");
            break;
        }
        atomic_store(&s->last_code, sr_executor_entry(ex));
        sr_executor *old = atomic_exchange(&s->current, ex);
        sr_executor_free(old);
    }
    atomic_fetch_add(&s->done, 1);
    return NULL;
}

static void *patcher(void *arg)
{
    shared *s = arg;
    for (int i = 0; i < PATCHES; i++) {
        if (sr_patch_operand(s->keep, 0, 0, (uint64_t)i) != SR_OK)
            thread_error(s, "patch of the live executor");
        /* An executor the churner may have freed: its record stays readable
         * for 256 frees, far more than happen between this load and the call. */
        sr_executor *ex = atomic_load(&s->current);
        sr_status st = ex ? sr_patch_operand(ex, 0, 0, 7) : SR_OK;
        if (st != SR_OK && !(st == SR_EINVAL && strstr(sr_last_error(), "was freed")))
            thread_error(s, "patch of a churned executor");
        /* A jump into the churned code: live then (SR_OK) or gone (SR_EINVAL). */
        const void *target = atomic_load(&s->last_code);
        st = target ? sr_patch_jump(s->keep, 1, target) : SR_OK;
        if (st != SR_OK && st != SR_EINVAL)
            thread_error(s, "jump into churned code");
    }
    atomic_fetch_add(&s->done, 1);
    return NULL;
}

static void *looker(void *arg)
{
    shared *s = arg;
    const uint8_t *keep = sr_executor_entry(s->keep);
    for (int i = 0; i < LOOKUPS; i++) {
        sr_executor *got = NULL;
        size_t at = 0;
        if (!sr_lookup_pc(s->rt, keep + 1, &got, &at) || got != s->keep || at != 0)
            thread_error(s, "lookup of the live executor");
        sr_lookup_pc(s->rt, atomic_load(&s->last_code), &got, &at); /* either answer */
    }
    atomic_fetch_add(&s->done, 1);
    return NULL;
}

static void threads(void)
{
    shared s = {.rt = make_runtime(&rt_set)};
    s.keep = s.rt ? emit(s.rt, jumper, 3, "keep") : NULL;
    if (!s.keep) {
        sr_runtime_destroy(s.rt);
        return;
    }
    void *(*fns[])(void *) = {churner, churner, patcher, looker};
    pthread_t t[4];
    int started = 0;
    for (; started < 4; started++)
        if (pthread_create(&t[started], NULL, fns[started], &s) != 0)
            break;
    for (int i = 0; i < started; i++)
        pthread_join(t[i], NULL);
    rt_result(started == 4 && atomic_load(&s.done) == 4 && atomic_load(&s.errors) == 0,
              "threads: patches, emits, frees and lookups at once", s.error);
    /* keep's jump points wherever the last patch left it: home again, then run. */
    bool home = sr_patch_jump(s.keep, 1, sr_executor_instr(s.keep, 2)) == SR_OK &&
                sr_patch_operand(s.keep, 0, 0, 5) == SR_OK;
    bool ran = home && rt_run(s.rt, s.keep) == 5;
    rt_result(ran, "threads: the patched executor runs as patched last", ran ? "" : sr_last_error());
    sr_executor_free(atomic_load(&s.current));
    rt_result(sr_runtime_stats(s.rt).executors == 1, "threads: only the kept executor is left",
              "");
    sr_runtime_destroy(s.rt);
}

int main(void)
{
    /* Defaults whatever the caller's environment says. */
    unsetenv("STENCILRT_FRAMES");
    unsetenv("STENCILRT_GDB");
    unsetenv("STENCILRT_PERF");
    unsetenv("STENCILRT_CODE_VIEWS");
    unsetenv("STENCILRT_REGISTRY");
    freed_executor_refused();
    freed_executor_quarantine();
    other_runtime();
    indexes();
    lookups();
    sizes();
    destroy();
    threads();
    return rt_summary();
}
