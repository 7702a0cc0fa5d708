/* test_runtime_api - stencilrt's rules of use (stencilrt.h): environment
 * switches read strictly (case-insensitive, one warning for anything else),
 * configurations out of range refused, NULL arguments and an executor freed
 * twice in one batch refused with SR_EINVAL, NULL-tolerant getters.
 * Prints one line per case and ends with "N passed, N failed". */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rt_common.h"

/* stderr into a file while `fn` runs; returns what was written (static). */
static const char *captured_stderr(void (*fn)(void *), void *arg)
{
    static char text[4096];
    char path[] = "/tmp/test_runtime_api.XXXXXX";
    int fd = mkstemp(path);
    int saved = dup(2);
    fflush(stderr);
    dup2(fd, 2);
    fn(arg);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    text[n > 0 ? n : 0] = '\0';
    close(fd);
    unlink(path);
    return text;
}

typedef struct create_result {
    sr_status st;
    sr_config cfg;
} create_result;

static void create_with_environment(void *arg)
{
    create_result *r = arg;
    sr_runtime *rt;
    r->st = sr_runtime_create(&rt_set, rt_symbols, NULL, &rt);
    if (r->st == SR_OK) {
        r->cfg = sr_runtime_config(rt);
        sr_runtime_destroy(rt);
    }
}

/* Sets name=value, creates a runtime, returns its setting; *warning gets stderr. */
static int effective(const char *name, const char *value, const char **warning)
{
    setenv(name, value, 1);
    create_result r = {SR_EINVAL, SR_CONFIG_DEFAULT};
    *warning = captured_stderr(create_with_environment, &r);
    unsetenv(name);
    if (r.st != SR_OK)
        return -2;
    return !strcmp(name, "STENCILRT_FRAMES")       ? r.cfg.frames
           : !strcmp(name, "STENCILRT_GDB")        ? r.cfg.gdb
           : !strcmp(name, "STENCILRT_CODE_VIEWS") ? r.cfg.code_views
           : !strcmp(name, "STENCILRT_REGISTRY")   ? r.cfg.registry
                                                   : r.cfg.perf;
}

static void check_value(const char *name, const char *value, int want, bool warns)
{
    const char *warning;
    int got = effective(name, value, &warning);
    char detail[512];
    snprintf(detail, sizeof detail, "%s=%s gave %d (want %d); stderr: %.300s", name, value, got,
             want, warning);
    bool warned = strstr(warning, "stencilrt: warning:") && strstr(warning, name);
    rt_result(got == want && warned == warns, "environment value", detail);
}

static void environment_switches(void)
{
    /* The first unknown value of each variable warns (once per process). */
    check_value("STENCILRT_FRAMES", "maybe", 1, true);
    check_value("STENCILRT_FRAMES", "2", 1, false);
    check_value("STENCILRT_GDB", "2", 1, true);
    check_value("STENCILRT_PERF", "1", SR_PERF_OFF, true);
    check_value("STENCILRT_PERF", "garbage", SR_PERF_OFF, false);
    static const char *const on[] = {"1", "on", "ON", "Yes", "true", "TRUE"};
    static const char *const off[] = {"0", "off", "OFF", "No", "false", "False"};
    for (size_t i = 0; i < sizeof on / sizeof *on; i++) {
        check_value("STENCILRT_FRAMES", on[i], 1, false);
        check_value("STENCILRT_GDB", off[i], 0, false);
        check_value("STENCILRT_FRAMES", off[i], 0, false);
    }
    check_value("STENCILRT_PERF", "MAP", SR_PERF_MAP, false);
    check_value("STENCILRT_PERF", "JitDump", SR_PERF_JITDUMP, false);
    check_value("STENCILRT_PERF", "OFF", SR_PERF_OFF, false);
    check_value("STENCILRT_CODE_VIEWS", "1", 1, false);
    check_value("STENCILRT_CODE_VIEWS", "2", 2, false);
    check_value("STENCILRT_CODE_VIEWS", "3", 2, true);
    check_value("STENCILRT_REGISTRY", "off", 2, false);
    check_value("STENCILRT_REGISTRY", "1", 1, false);
    check_value("STENCILRT_REGISTRY", "2", 1, true);
}

static void expect_status(sr_status got, sr_status want, const char *name)
{
    char detail[400];
    snprintf(detail, sizeof detail, "status %d (%s), want %d; message: %s", got,
             sr_strerror(got), want, sr_last_error());
    rt_result(got == want, name, detail);
}

static void configurations(void)
{
    sr_runtime *rt = (sr_runtime *)&rt; /* must be reset to NULL */
    sr_config c = SR_CONFIG_DEFAULT;
    c.arena_size = SIZE_MAX;
    expect_status(sr_runtime_create(&rt_set, rt_symbols, &c, &rt), SR_EINVAL,
                  "arena_size SIZE_MAX refused");
    rt_result(rt == NULL && strstr(sr_last_error(), "arena_size"), "arena_size named, no runtime",
              sr_last_error());
    c.arena_size = ((size_t)1 << 40) + 1;
    expect_status(sr_runtime_create(&rt_set, rt_symbols, &c, &rt), SR_EINVAL,
                  "arena_size above 1 TiB refused");
    c = (sr_config)SR_CONFIG_DEFAULT;
    c.frames = 2;
    expect_status(sr_runtime_create(&rt_set, rt_symbols, &c, &rt), SR_EINVAL, "frames 2 refused");
    c = (sr_config)SR_CONFIG_DEFAULT;
    c.perf = 7;
    expect_status(sr_runtime_create(&rt_set, rt_symbols, &c, &rt), SR_EINVAL, "perf 7 refused");
    c = (sr_config)SR_CONFIG_DEFAULT;
    c.code_views = 3;
    expect_status(sr_runtime_create(&rt_set, rt_symbols, &c, &rt), SR_EINVAL,
                  "code_views 3 refused");
    c = (sr_config)SR_CONFIG_DEFAULT;
    c.registry = 3;
    expect_status(sr_runtime_create(&rt_set, rt_symbols, &c, &rt), SR_EINVAL,
                  "registry 3 refused");
    c = (sr_config)SR_CONFIG_DEFAULT;
    c.arena_size = 3 * 4096 + 1; /* rounded up to pages, and it works */
    sr_status st = sr_runtime_create(&rt_set, rt_symbols, &c, &rt);
    sr_executor *ex = NULL;
    if (st == SR_OK)
        st = sr_emit(rt, rt_answer, 3, "answer", &ex);
    expect_status(st, SR_OK, "a small odd arena_size works");
    if (st == SR_OK)
        rt_result(rt_run(rt, ex) == 42, "its executor runs", "");
    if (rt)
        sr_runtime_destroy(rt);
}

static void null_arguments(void)
{
    expect_status(sr_runtime_create(&rt_set, rt_symbols, NULL, NULL), SR_EINVAL,
                  "create with out NULL");
    sr_runtime *rt;
    if (sr_runtime_create(&rt_set, rt_symbols, NULL, &rt) != SR_OK) {
        rt_result(false, "create", sr_last_error());
        return;
    }
    sr_executor *ex = (sr_executor *)&ex;
    expect_status(sr_emit(NULL, rt_answer, 3, "x", &ex), SR_EINVAL, "emit with no runtime");
    rt_result(ex == NULL, "emit with no runtime leaves out NULL", "");
    expect_status(sr_emit(rt, NULL, 3, "x", &ex), SR_EINVAL, "emit of NULL code, n 3");
    expect_status(sr_emit(rt, rt_answer, 3, "x", NULL), SR_EINVAL, "emit with out NULL");
    sr_program p = {rt_answer, 3, "x"};
    expect_status(sr_emit_batch(rt, &p, 1, NULL), SR_EINVAL, "batch with out NULL");
    expect_status(sr_emit_batch(rt, NULL, 1, &ex), SR_EINVAL, "batch with progs NULL");
    expect_status(sr_executor_free_batch(NULL, 2), SR_EINVAL, "free_batch of NULL, count 2");
    rt_result(sr_shim_entry(NULL) == NULL && sr_executor_entry(NULL) == NULL &&
                  sr_executor_code_size(NULL) == 0 && sr_executor_instr(NULL, 0) == NULL &&
                  sr_runtime_stats(NULL).executors == 0 && sr_runtime_config(NULL).frames == -1,
              "getters take NULL", "");
    sr_executor_free(NULL);
    sr_gdb_hold(NULL);
    sr_gdb_release(NULL);
    sr_runtime_destroy(NULL);
    sr_runtime_destroy(rt);
}

static void batch_with_a_duplicate(void)
{
    sr_runtime *rt;
    sr_executor *a, *b;
    if (sr_runtime_create(&rt_set, rt_symbols, NULL, &rt) != SR_OK ||
        sr_emit(rt, rt_answer, 3, "a", &a) != SR_OK || sr_emit(rt, rt_answer, 3, "b", &b) != SR_OK) {
        rt_result(false, "set-up", sr_last_error());
        return;
    }
    sr_executor *list[] = {a, NULL, b, a};
    expect_status(sr_executor_free_batch(list, 4), SR_EINVAL, "an executor listed twice");
    rt_result(strstr(sr_last_error(), "'a' is listed twice") != NULL, "the message names it",
              sr_last_error());
    rt_result(sr_runtime_stats(rt).executors == 2 && rt_run(rt, a) == 42 && rt_run(rt, b) == 42,
              "all or nothing: both still alive and running", "");
    expect_status(sr_executor_free_batch(list, 3), SR_OK, "the same batch without the repeat");
    rt_result(sr_runtime_stats(rt).executors == 0, "both freed", "");
    sr_runtime_destroy(rt);
}

/* sr_lookup_pc on each instruction's first and last byte, the end of the
 * code, the shim, C code, a freed executor, and NULL arguments. */
static void lookup_pc(void)
{
    sr_runtime *rt;
    sr_executor *a, *b, *got = NULL;
    size_t at = 99;
    if (sr_runtime_create(&rt_set, rt_symbols, NULL, &rt) != SR_OK ||
        sr_emit(rt, rt_answer, 3, "a", &a) != SR_OK || sr_emit(rt, rt_answer, 3, "b", &b) != SR_OK) {
        rt_result(false, "set-up", sr_last_error());
        return;
    }
    bool ok = true;
    for (size_t i = 0; i < 3; i++) {
        const uint8_t *first = sr_executor_instr(b, i), *next = sr_executor_instr(b, i + 1);
        ok &= sr_lookup_pc(rt, first, &got, &at) && got == b && at == i;
        ok &= sr_lookup_pc(rt, next - 1, &got, &at) && got == b && at == i;
    }
    rt_result(ok, "every instruction's first and last byte names it", "");
    rt_result(sr_lookup_pc(rt, sr_executor_entry(a), &got, NULL) && got == a,
              "the other executor, instruction not asked for", "");
    rt_result(!sr_lookup_pc(rt, sr_executor_instr(b, 3), &got, &at) &&
                  !sr_lookup_pc(rt, sr_shim_entry(rt), &got, &at) &&
                  !sr_lookup_pc(rt, (const void *)lookup_pc, &got, &at) &&
                  !sr_lookup_pc(rt, NULL, &got, &at),
              "the end of the code, the shim, C code and NULL are in no executor", "");
    const void *pc = sr_executor_entry(b);
    sr_executor_free(b);
    rt_result(!sr_lookup_pc(rt, pc, &got, &at), "a freed executor is no longer found", "");
    rt_result(!sr_lookup_pc(NULL, pc, &got, &at) && !sr_lookup_pc(rt, pc, NULL, &at),
              "NULL runtime or out pointer: not found", "");
    sr_runtime_destroy(rt);
}

/* The permissions of the mapping that holds p, from /proc/self/maps ("r-xp"),
 * and whether any mapping of the process is writable and executable. */
static bool mapping_of(const void *p, char perms[5], bool *any_wx)
{
    FILE *f = fopen("/proc/self/maps", "r");
    bool found = false;
    *any_wx = false;
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char pr[5];
        if (sscanf(line, "%lx-%lx %4s", &lo, &hi, pr) != 3)
            continue;
        *any_wx |= pr[1] == 'w' && pr[2] == 'x';
        if ((uintptr_t)p >= lo && (uintptr_t)p < hi) {
            memcpy(perms, pr, 5);
            found = true;
        }
    }
    if (f)
        fclose(f);
    return found;
}

/* sr_patch_jump and sr_patch_operand: the patched code runs as patched, the
 * pages are read+execute again, and every refusal leaves the code as it was. */
static void patch_after_emit(void)
{
    /* a: push 1; jump 2; ret (the jump re-pointed to b's addi); b: push 5; addi 10; ret */
    static const sr_instr a_code[] = {{SG_OP_push, 0, {1}}, {SG_OP_jump, 2, {0}}, {SG_OP_ret, 0, {0}}};
    static const sr_instr b_code[] = {{SG_OP_push, 0, {5}}, {SG_OP_addi, 0, {10}}, {SG_OP_ret, 0, {0}}};
    sr_runtime *rt;
    sr_executor *a, *b;
    if (sr_runtime_create(&rt_set, rt_symbols, NULL, &rt) != SR_OK ||
        sr_emit(rt, a_code, 3, "a", &a) != SR_OK || sr_emit(rt, b_code, 3, "b", &b) != SR_OK) {
        rt_result(false, "patch: set-up", sr_last_error());
        return;
    }
    rt_result(rt_run(rt, a) == 1 && rt_run(rt, b) == 15, "patch: before, a returns 1, b 15", "");
    expect_status(sr_patch_jump(a, 1, sr_executor_instr(b, 1)), SR_OK,
                  "patch: a's jump re-pointed into b");
    rt_result(rt_run(rt, a) == 11, "patch: a now runs on into b's addi and ret (1 + 10)", "");
    expect_status(sr_patch_operand(b, 1, 0, (uint64_t)-1 << 40), SR_OK,
                  "patch: b's addi operand set to a full 64-bit value");
    rt_result(rt_run(rt, a) == 1 + (vm_value)((uint64_t)-1 << 40) && rt_run(rt, b) ==
              5 + (vm_value)((uint64_t)-1 << 40), "patch: both see the new operand", "");
    char perms[5] = "";
    bool any_wx = true;
    rt_result(mapping_of(sr_executor_entry(a), perms, &any_wx) && !strncmp(perms, "r-x", 3) &&
                  !any_wx, "patch: the pages are read+execute again; nothing is writable "
              "and executable", perms);

    uint8_t before[64];
    size_t size = sr_executor_code_size(a);
    memcpy(before, sr_executor_entry(a), size);
    expect_status(sr_patch_jump(a, 0, sr_executor_instr(b, 1)), SR_EINVAL,
                  "patch: push has no jump target");
    expect_status(sr_patch_jump(a, 3, sr_executor_instr(b, 1)), SR_EINVAL,
                  "patch: no instruction 3");
    expect_status(sr_patch_jump(a, 1, (const uint8_t *)sr_executor_instr(b, 1) + 1), SR_EINVAL,
                  "patch: a target inside an instruction");
    expect_status(sr_patch_jump(a, 1, sr_shim_entry(rt)), SR_EINVAL,
                  "patch: a target outside every executor (the shim)");
    expect_status(sr_patch_operand(a, 0, 1, 7), SR_EINVAL, "patch: push has no operand 1");
    expect_status(sr_patch_operand(a, 0, SG_OPERANDS, 7), SR_EINVAL, "patch: no such operand");
    expect_status(sr_patch_operand(NULL, 0, 0, 7), SR_EINVAL, "patch: NULL executor");
    rt_result(!memcmp(before, sr_executor_entry(a), size) && rt_run(rt, a) ==
              1 + (vm_value)((uint64_t)-1 << 40), "patch: refusals left the code as it was", "");
    expect_status(sr_patch_jump(a, 1, sr_executor_instr(a, 2)), SR_OK,
                  "patch: a's jump back to its own ret");
    rt_result(rt_run(rt, a) == 1, "patch: a returns 1 again", "");
    rt_result(!strcmp(sr_executor_name(b), "b") && !strcmp(sr_executor_instr_name(b, 1),
              "addi@b[1]") && !sr_executor_instr_name(b, 3) && !sr_executor_name(NULL),
              "executor and instruction names", sr_executor_instr_name(b, 1));
    sr_runtime_destroy(rt);
}

/* Operands that cannot take a new value: one loaded from a GOT slot
 * (STENCIL_OPERANDS_IN_GOT), which cannot be patched alone, and a 32-bit
 * immediate given a value that does not fit. A two-op set: `mov
 * OPERAND0@GOTPCREL(%rip), %rax; ret` and `mov $OPERAND0, %eax; ret`. */
static void patch_refusals_keep_the_code(void)
{
    static const uint8_t got_code[] = {0x48, 0x8b, 0x05, 0, 0, 0, 0, 0xc3};
    static const uint8_t imm_code[] = {0xb8, 0, 0, 0, 0, 0xc3};
    static const sg_hole got_hole[] = {{3, SG_PATCH_GOTPCREL32, SG_VALUE_OPERAND, 0, -4}};
    static const sg_hole imm_hole[] = {{1, SG_PATCH_ABS32, SG_VALUE_OPERAND, 0, 0}};
    static const sg_stencil ops[] = {
        {"got_operand", got_code, sizeof got_code, NULL, 0, 1, got_hole, 1, NULL, 0, 0, NULL, 0},
        {"imm32_operand", imm_code, sizeof imm_code, NULL, 0, 1, imm_hole, 1, NULL, 0, 0, NULL, 0},
    };
    sr_stencil_set set = rt_set;
    set.stencils = ops;
    set.cold_sizes = NULL; /* these ops are one part */
    set.count = 2;
    sr_runtime *rt;
    sr_executor *g, *i;
    static const sr_instr got_prog[] = {{0, 0, {7, 0, 0, 0}}}, imm_prog[] = {{1, 0, {7, 0, 0, 0}}};
    if (sr_runtime_create(&set, rt_symbols, NULL, &rt) != SR_OK ||
        sr_emit(rt, got_prog, 1, "g", &g) != SR_OK || sr_emit(rt, imm_prog, 1, "i", &i) != SR_OK) {
        rt_result(false, "patch: set-up of the refusals", sr_last_error());
        return;
    }
    uint8_t got_before[sizeof got_code], imm_before[sizeof imm_code];
    memcpy(got_before, sr_executor_entry(g), sizeof got_code);
    memcpy(imm_before, sr_executor_entry(i), sizeof imm_code);
    expect_status(sr_patch_operand(g, 0, 0, 8), SR_EUNSUPPORTED,
                  "patch: an operand in a GOT slot is refused");
    expect_status(sr_patch_operand(i, 0, 0, (uint64_t)1 << 40), SR_ERANGE,
                  "patch: a value too wide for a 32-bit immediate is refused");
    rt_result(!memcmp(got_before, sr_executor_entry(g), sizeof got_code) &&
                  !memcmp(imm_before, sr_executor_entry(i), sizeof imm_code),
              "patch: ... and both codes are as they were", "");
    expect_status(sr_patch_operand(i, 0, 0, 0xfffffffe), SR_OK,
                  "patch: a value that fits is patched");
    rt_result(!memcmp((const uint8_t *)sr_executor_entry(i) + 1, "\xfe\xff\xff\xff", 4),
              "patch: ... into the immediate", "");
    sr_runtime_destroy(rt);
}

/* A stencil whose emitter does not write its emit_case (a hand-made
 * sg_stencil, an edited header) is an error naming the op and the case,
 * not a copy of some other stencil. */
static void unknown_emit_case_is_refused(void)
{
    sg_stencil ret = sg_stencils[SG_OP_ret];
    ret.emit_case = 1000; /* the bundled set's emitters write cases 0 .. SG_OP__COUNT - 1 */
    sr_stencil_set set = rt_set;
    set.stencils = &ret;
    set.count = 1;
    sr_runtime *rt;
    sr_executor *ex = NULL;
    static const sr_instr prog[] = {{0, 0, {0}}};
    if (sr_runtime_create(&set, rt_symbols, NULL, &rt) != SR_OK) {
        rt_result(false, "emit: set-up of an unknown emit_case", sr_last_error());
        return;
    }
    sr_status st = sr_emit(rt, prog, 1, "unknown", &ex);
    rt_result(st == SR_EUNSUPPORTED && strstr(sr_last_error(), "instruction 0 (ret)") &&
                  strstr(sr_last_error(), "emit_case 1000"),
              "emit: an emit_case its emitter does not write is refused", sr_last_error());
    if (st == SR_OK)
        sr_executor_free(ex);
    sr_runtime_destroy(rt);
}

/* How a process that runs code freed in `rt` ends: by the signal (0: it
 * returned). Two views: the code's bytes are traps; one view: the pages are
 * inaccessible. */
static int run_freed_code(int views)
{
    pid_t pid = fork();
    if (pid == 0) {
        /* The signal itself, not a sanitizer's report of it. */
        signal(SIGSEGV, SIG_DFL);
        signal(SIGTRAP, SIG_DFL);
        signal(SIGILL, SIG_DFL);
        sr_config c = SR_CONFIG_DEFAULT;
        c.code_views = views;
        sr_runtime *rt;
        sr_executor *ex;
        if (sr_runtime_create(&rt_set, rt_symbols, &c, &rt) != SR_OK ||
            sr_emit(rt, rt_answer, 3, "answer", &ex) != SR_OK || rt_run(rt, ex) != 42)
            _exit(3);
        void *entry = sr_executor_entry(ex);
        sr_executor_free(ex);
        vm_frame frame = {0};
        vm_value stack[16];
        ((shim_fn *)sr_shim_entry(rt))(&frame, stack, entry);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFSIGNALED(status) ? WTERMSIG(status) : -WEXITSTATUS(status);
}

static void freed_code_stops(void)
{
#if defined(__aarch64__)
    int trap = SIGILL; /* udf */
#else
    int trap = SIGTRAP; /* int3 */
#endif
    char detail[64];
    int sig = run_freed_code(2);
    snprintf(detail, sizeof detail, "ended by %d (want %d)", sig, trap);
    rt_result(sig == trap, "two views: a jump into freed code traps at once", detail);
    sig = run_freed_code(1);
    snprintf(detail, sizeof detail, "ended by %d (want %d)", sig, SIGSEGV);
    rt_result(sig == SIGSEGV, "one view: a jump into freed code faults at once", detail);
}

typedef struct views_result {
    int views;           /* sr_runtime_config's code_views, or -1: create failed */
    sr_views_reason why;
    bool reused_right;   /* an executor emitted into a freed one's chunk ran as emitted */
} views_result;

/* Create with code_views `arg`, emit, free, emit different code into the
 * same chunk and run it. */
static void create_and_reuse(void *arg)
{
    views_result *r = arg;
    sr_config c = SR_CONFIG_DEFAULT;
    c.code_views = r->views;
    r->views = -1;
    sr_runtime *rt;
    sr_executor *a, *b = NULL;
    if (sr_runtime_create(&rt_set, rt_symbols, &c, &rt) != SR_OK)
        return;
    r->views = sr_runtime_config(rt).code_views;
    r->why = sr_runtime_views_reason(rt);
    static const sr_instr other[] = {
        {SG_OP_push, 0, {7, 0, 0, 0}}, {SG_OP_addi, 0, {5, 0, 0, 0}}, {SG_OP_ret, 0, {0, 0, 0, 0}}};
    if (sr_emit(rt, rt_answer, 3, "a", &a) == SR_OK && rt_run(rt, a) == 42) {
        void *was = sr_executor_entry(a);
        sr_executor_free(a);
        r->reused_right = sr_emit(rt, other, 3, "b", &b) == SR_OK &&
                          sr_executor_entry(b) == was && rt_run(rt, b) == 12;
    }
    sr_runtime_destroy(rt);
}

/* Natively, code written through the writable view is the code that runs:
 * sr_runtime_create's probe passes silently and two views stay, whether
 * asked for or the default (test_stress and test_aarch64_qemu run the
 * probe where it fails). */
static void code_views_probe(void)
{
    static const struct {
        int asked, views;
        const char *name;
    } cases[] = {{-1, 2, "default: two views after the probe"},
                 {2, 2, "code_views 2: two views after the probe"},
                 {1, 1, "code_views 1: one view, no probe"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        views_result r = {cases[i].asked, (sr_views_reason)-1, false};
        const char *err = captured_stderr(create_and_reuse, &r);
        char detail[512];
        snprintf(detail, sizeof detail, "views %d (want %d), reason %d, reused code right %d, "
                 "stderr: %.300s; %s", r.views, cases[i].views, (int)r.why, r.reused_right, err,
                 r.views < 0 ? sr_last_error() : "");
        rt_result(r.views == cases[i].views && r.why == SR_VIEWS_CONFIGURED && r.reused_right &&
                      !*err,
                  cases[i].name, detail);
    }
    rt_result(sr_runtime_views_reason(NULL) == SR_VIEWS_CONFIGURED,
              "sr_runtime_views_reason(NULL)", "");
}

/* A process with a tracer (PTRACE_TRACEME: its parent) gets one view by
 * default, and the reason says why; the child exits 0 if so. */
static void traced_process_gets_one_view(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0)
            _exit(4);
        sr_runtime *rt;
        if (sr_runtime_create(&rt_set, rt_symbols, NULL, &rt) != SR_OK)
            _exit(3);
        bool ok = sr_runtime_config(rt).code_views == 1 &&
                  sr_runtime_views_reason(rt) == SR_VIEWS_DEBUGGER;
        sr_runtime_destroy(rt);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    char detail[64];
    snprintf(detail, sizeof detail, "child status 0x%x (1: wrong views or reason)", status);
    rt_result(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "traced: one view, reason SR_VIEWS_DEBUGGER", detail);
}

/* fork(): each process's code is its own. The child frees an executor made
 * before the fork (its bytes become traps) and emits another that may reuse
 * the chunk; the parent's executor still runs as emitted, and a child's
 * patch does not reach the parent. */
static void fork_keeps_code_apart(void)
{
    static const sr_instr other[] = {{SG_OP_push, 0, {7}}, {SG_OP_ret, 0, {0}}};
    sr_runtime *rt;
    sr_executor *ex, *keep;
    if (sr_runtime_create(&rt_set, rt_symbols, NULL, &rt) != SR_OK ||
        sr_emit(rt, rt_answer, 3, "answer", &ex) != SR_OK ||
        sr_emit(rt, rt_answer, 3, "kept", &keep) != SR_OK) {
        rt_result(false, "fork: set-up", sr_last_error());
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        sr_executor *again;
        sr_executor_free(ex);
        bool ok = sr_emit(rt, other, 2, "other", &again) == SR_OK && rt_run(rt, again) == 7 &&
                  sr_patch_operand(keep, 0, 0, 1) == SR_OK;
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    char detail[96];
    snprintf(detail, sizeof detail, "child exit %d; parent's executors return %d, %d",
             WIFEXITED(status) ? WEXITSTATUS(status) : -1, (int)rt_run(rt, ex),
             (int)rt_run(rt, keep));
    rt_result(WIFEXITED(status) && WEXITSTATUS(status) == 0 && rt_run(rt, ex) == 42 &&
                  rt_run(rt, keep) == 42, "fork: the child's frees, emits and patches stay "
              "in the child", detail);
    sr_runtime_destroy(rt);
}

int main(void)
{
    unsetenv("STENCILRT_FRAMES");
    unsetenv("STENCILRT_GDB");
    unsetenv("STENCILRT_PERF");
    unsetenv("STENCILRT_CODE_VIEWS");
    unsetenv("STENCILRT_REGISTRY");
    environment_switches();
    configurations();
    null_arguments();
    batch_with_a_duplicate();
    lookup_pc();
    patch_after_emit();
    patch_refusals_keep_the_code();
    unknown_emit_case_is_refused();
    freed_code_stops();
    code_views_probe();
    traced_process_gets_one_view();
    fork_keeps_code_apart();
    return rt_summary();
}
