/* test_alloc_failures - stencilrt under allocation failure. The runtime's
 * sources are built into this program with every allocation counted
 * (failing_alloc.h); for k = 1, 2, ... the k-th allocation fails, and a whole
 * session (create, emit, batch emit, run, free, destroy) must end in SR_OK or
 * SR_ENOMEM at every step, never crash, leak nothing (the ASan build checks),
 * and never report SR_OK for code libgcc cannot unwind: a successful emit's
 * code must have its FDE registered. Stops once a session completes without
 * reaching the k-th allocation. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rt_common.h"

/* This file is built with failing_alloc.h too: the real allocators, by name. */
#undef malloc
#undef calloc
#undef realloc
#undef strdup
extern void *malloc(size_t n);
extern void *calloc(size_t n, size_t size);
extern void *realloc(void *p, size_t n);
extern char *strdup(const char *s);

static size_t allocations, fail_at;

static bool should_fail(void)
{
    return ++allocations == fail_at;
}

void *fa_malloc(size_t n) { return should_fail() ? NULL : malloc(n); }
void *fa_calloc(size_t n, size_t size) { return should_fail() ? NULL : calloc(n, size); }
void *fa_realloc(void *p, size_t n) { return should_fail() ? NULL : realloc(p, n); }
char *fa_strdup(const char *s) { return should_fail() ? NULL : strdup(s); }

/* libgcc's lookup of the FDE covering pc. */
struct dwarf_eh_bases {
    void *tbase, *dbase, *func;
};
extern const void *_Unwind_Find_FDE(void *pc, struct dwarf_eh_bases *bases);

static bool unwindable(const void *code)
{
    struct dwarf_eh_bases bases;
    return _Unwind_Find_FDE((char *)code + 1, &bases) != NULL;
}

typedef struct outcome {
    bool bad;            /* a status other than SR_OK/SR_ENOMEM, or a broken promise */
    char why[256];
} outcome;

static void step(outcome *o, sr_status st, const char *what)
{
    if (st != SR_OK && st != SR_ENOMEM && !o->bad) {
        o->bad = true;
        snprintf(o->why, sizeof o->why, "%s: status %d (%s)", what, st, sr_last_error());
    }
}

static void promise(outcome *o, bool kept, const char *what)
{
    if (!kept && !o->bad) {
        o->bad = true;
        snprintf(o->why, sizeof o->why, "%s", what);
    }
}

static void session(outcome *o)
{
    sr_config cfg = {1, 1, SR_PERF_OFF, 0, -1, -1}; /* libgcc and GDB registration on */
    sr_runtime *rt;
    sr_status st = sr_runtime_create(&rt_set, rt_symbols, &cfg, &rt);
    step(o, st, "create");
    if (st != SR_OK)
        return;
    promise(o, unwindable(sr_shim_entry(rt)), "create: SR_OK but the shim has no FDE");
    sr_executor *one = NULL, *two[2] = {NULL, NULL};
    st = sr_emit(rt, rt_answer, 3, "one", &one);
    step(o, st, "emit");
    if (st == SR_OK) {
        promise(o, unwindable(sr_executor_entry(one)), "emit: SR_OK but no FDE for its code");
        promise(o, rt_run(rt, one) == 42, "emit: the executor does not compute 42");
    }
    sr_program progs[2] = {{rt_answer, 3, "two0"}, {rt_answer, 3, "two1"}};
    st = sr_emit_batch(rt, progs, 2, two);
    step(o, st, "emit_batch");
    if (st == SR_OK) {
        promise(o, unwindable(sr_executor_entry(two[1])), "emit_batch: SR_OK but no FDE");
        promise(o, rt_run(rt, two[1]) == 42, "emit_batch: the executor does not compute 42");
    } else {
        promise(o, !two[0] && !two[1], "emit_batch failed but returned executors");
    }
    sr_executor_free(one);
    step(o, sr_executor_free_batch(two, 2), "free_batch");
    sr_runtime_destroy(rt);
}

int main(void)
{
    size_t sessions = 0, failures_seen = 0;
    for (fail_at = 1; fail_at <= 100000; fail_at++) {
        allocations = 0;
        outcome o = {false, ""};
        session(&o);
        sessions++;
        if (o.bad) {
            char name[64];
            snprintf(name, sizeof name, "allocation %zu fails", fail_at);
            rt_result(false, name, o.why);
        }
        failures_seen += allocations >= fail_at;
        if (allocations < fail_at)
            break; /* the session no longer reaches the failing allocation */
    }
    char detail[128];
    snprintf(detail, sizeof detail, "%zu sessions, each failing one of %zu allocations", sessions,
             failures_seen);
    rt_result(failures_seen > 10 && sessions == failures_seen + 1, "every allocation failed once",
              detail);
    return rt_summary();
}
