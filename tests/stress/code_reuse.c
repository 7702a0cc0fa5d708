/* code_reuse.c - code emitted into memory that earlier executors ran from
 * must be the code that runs (tests/integration/test_aarch64_qemu.py and
 * test_stress.py; README "Design notes: JIT memory").
 *
 *   code_reuse [--rounds N] [--seed S] [--live K] [--config-views V]
 *
 * Each round emits a straight-line program of random length (so executors
 * of many sizes come and go), runs it and checks its result against the
 * value the generator computed; up to K executors stay alive, and when K are,
 * a random one is run again (it must still be right), then freed, so later
 * emits land in its chunk. A translator that does not see code written
 * through the second code view (qemu-user) keeps running the freed
 * executor's code there: those runs give the old program's value.
 * --config-views V passes sr_config.code_views = V (default: -1, the
 * environment).
 *
 * Last stdout line: "reuse: runs=N wrong=W reused=R views=V reason=WHY"
 * (reused: emits whose entry was an earlier executor's). Exit 0 iff every
 * run was right; 3 if sr_runtime_create failed (its message on stderr). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stress_common.h"

enum { MAX_LEN = 40, MAX_LIVE = 64, SEEN_CAP = 1 << 14 };

static _Noreturn void no_helper(void)
{
    abort(); /* straight-line programs call nothing */
}

typedef struct live {
    sr_executor *ex;
    vm_value expect;
} live;

typedef struct run_state {
    sr_runtime *rt;
    st_shim_fn *shim;
    long runs, wrong, reused;
    uintptr_t freed[SEEN_CAP]; /* entries of freed executors, open addressing */
} run_state;

static size_t slot_of(uintptr_t p)
{
    return (size_t)((p >> 4) * 0x9e3779b97f4a7c15u >> 50) & (SEEN_CAP - 1);
}

static void remember_freed(run_state *s, uintptr_t p)
{
    for (size_t i = slot_of(p), k = 0; k < SEEN_CAP; i = (i + 1) & (SEEN_CAP - 1), k++)
        if (!s->freed[i] || s->freed[i] == p) {
            s->freed[i] = p;
            return;
        }
}

static int was_freed(const run_state *s, uintptr_t p)
{
    for (size_t i = slot_of(p), k = 0; k < SEEN_CAP && s->freed[i]; k++) {
        if (s->freed[i] == p)
            return 1;
        i = (i + 1) & (SEEN_CAP - 1);
    }
    return 0;
}

static void run_and_check(run_state *s, const live *l, const char *when)
{
    vm_frame frame = {0};
    vm_value stack[64];
    vm_value got = s->shim(&frame, stack, sr_executor_entry(l->ex));
    s->runs++;
    if (got == l->expect)
        return;
    if (s->wrong++ < 5)
        printf("wrong: %s of executor %" PRIu64 " at %p: %" PRId64 ", want %" PRId64 "\n", when,
               sr_executor_id(l->ex), sr_executor_entry(l->ex), got, l->expect);
}

static int emit_one(run_state *s, st_rng *r, live *l)
{
    sr_instr code[MAX_LEN];
    size_t n = st_gen_big(r, 4 + st_below(r, MAX_LEN - 3), code, &l->expect);
    if (sr_emit(s->rt, code, n, "reuse", &l->ex) != SR_OK) {
        fprintf(stderr, "code_reuse: sr_emit: %s\n", sr_last_error());
        return 0;
    }
    s->reused += was_freed(s, (uintptr_t)sr_executor_entry(l->ex));
    run_and_check(s, l, "first run");
    return 1;
}

static const char *views_reason(const sr_runtime *rt)
{
    switch (sr_runtime_views_reason(rt)) {
    case SR_VIEWS_CONFIGURED: return "configured";
    case SR_VIEWS_DEBUGGER: return "debugger";
    case SR_VIEWS_STALE_CODE: return "stale-code";
    }
    return "?";
}

int main(int argc, char **argv)
{
    int rounds = 768, nlive = 8;
    uint64_t seed = 7;
    int views = -1; /* sr_config's "from the environment" unless --config-views */
    const st_opt options[] = {
        ST_OPT_INT("--rounds", &rounds),
        ST_OPT_U64("--seed", &seed),
        ST_OPT_INT("--live", &nlive),
        ST_OPT_INT("--config-views", &views),
    };
    if (ST_PARSE_OPTIONS(argc, argv, options))
        return 2;
    if (nlive < 1 || nlive > MAX_LIVE) {
        fprintf(stderr, "code_reuse: --live %d: must be 1 to %d\n", nlive, MAX_LIVE);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    const void *symbols[4] = {(const void *)no_helper, (const void *)no_helper,
                              (const void *)no_helper, (const void *)no_helper};
    sr_config cfg = SR_CONFIG_DEFAULT;
    cfg.code_views = views;
    static run_state s;
    if (sr_runtime_create(&st_stencil_set, symbols, &cfg, &s.rt) != SR_OK) {
        fprintf(stderr, "code_reuse: sr_runtime_create: %s\n", sr_last_error());
        return 3;
    }
    s.shim = (st_shim_fn *)sr_shim_entry(s.rt);
    st_rng r = {seed};
    live pool[MAX_LIVE];
    int have = 0;
    for (int round = 0; round < rounds; round++) {
        if (have == nlive) { /* run a random one again, then free it */
            size_t k = st_below(&r, (uint64_t)have);
            run_and_check(&s, &pool[k], "second run");
            remember_freed(&s, (uintptr_t)sr_executor_entry(pool[k].ex));
            sr_executor_free(pool[k].ex);
            pool[k] = pool[--have];
        }
        if (!emit_one(&s, &r, &pool[have++]))
            return 1;
    }
    printf("reuse: runs=%ld wrong=%ld reused=%ld views=%d reason=%s\n", s.runs, s.wrong,
           s.reused, sr_runtime_config(s.rt).code_views, views_reason(s.rt));
    sr_runtime_destroy(s.rt);
    return s.wrong != 0;
}
