/* wx_stress.c - W^X: no mapping of the process is ever writable and
 * executable, while executors are being written; executor pages are r-x once
 * sr_emit returns, and once sr_executor_free returns they are inaccessible
 * (---, one code view) or hold only trap instructions (two views: the pages
 * stay r-x, shared with other executors; STENCILRT_CODE_VIEWS picks).
 *
 *   wx_stress [--seconds S] [--seed N] [--debug-inject-wx] [--debug-reprotect]
 *
 * An emitter thread emits executors continuously (small random programs and
 * straight-line ones of 2,000 to 60,000 instructions, so that pages stay
 * read+write for a while), checks each one's pages in /proc/self/maps right
 * after sr_emit (r-xp) and right after sr_executor_free (---p), and runs it.
 * A scanner thread reads /proc/self/maps in a loop and fails on any mapping
 * with both 'w' and 'x'. The runtime gets one big arena, so the address range
 * spanned by executors contains arena pages only: a rw-p mapping inside it is
 * an executor being written, and the scanner counts how often it saw one (it
 * shows the scanner does look inside the write window).
 *
 * Negative controls: --debug-inject-wx maps one page PROT_WRITE|PROT_EXEC for
 * 50 ms during the run (the scanner must report it); --debug-reprotect makes
 * the first executor's first page read-only before the post-emit check (which
 * must report it).
 *
 * Last stdout line: "wx: key=value ..."; exit 0 iff every check passed. */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "stress_common.h"

#define MAPS_CAP (8u << 20)

static double seconds = 3;
static uint64_t seed = 11;
static int inject_wx, reprotect;
static const st_opt options[] = {
    ST_OPT_SECONDS("--seconds", &seconds), ST_OPT_U64("--seed", &seed),
    ST_OPT_FLAG("--debug-inject-wx", &inject_wx), ST_OPT_FLAG("--debug-reprotect", &reprotect)};

static atomic_int stop;
static atomic_uintptr_t span_lo = UINTPTR_MAX, span_hi = 0;
static atomic_long scans, transient_rw, wx_violations, failures;
static char wx_line[512];

static void *scanner(void *arg)
{
    (void)arg;
    char *buf = malloc(MAPS_CAP);
    while (!atomic_load(&stop)) {
        if (!st_read_maps(buf, MAPS_CAP, NULL)) {
            fprintf(stderr, "FAIL: cannot read /proc/self/maps\n");
            atomic_fetch_add(&failures, 1);
            break;
        }
        atomic_fetch_add(&scans, 1);
        uintptr_t lo = atomic_load(&span_lo), hi = atomic_load(&span_hi);
        const char *p = buf, *line;
        size_t len;
        st_mapping m;
        while (st_next_mapping(&p, &m, &line, &len)) {
            if (m.perms[1] == 'w' && m.perms[2] == 'x') {
                if (atomic_fetch_add(&wx_violations, 1) == 0) {
                    snprintf(wx_line, sizeof wx_line, "%.*s", (int)len, line);
                    fprintf(stderr, "FAIL: writable and executable mapping: %s\n", wx_line);
                }
            }
            if (!strcmp(m.perms, "rw-p") && m.lo >= lo && m.hi <= hi)
                atomic_fetch_add(&transient_rw, 1);
        }
    }
    free(buf);
    return NULL;
}

typedef struct live {
    sr_executor *ex;
    uintptr_t lo, hi; /* whole pages of the code */
    const void *entry;
    size_t code_size;
    vm_value expect;
} live;

static long pages_rx, pages_none, emits, frees, trapped;
static int two_views;

#if defined(__aarch64__)
enum { TRAP_BYTE = 0x00 }; /* udf #0 */
#else
enum { TRAP_BYTE = 0xcc }; /* int3 */
#endif

/* Two views: a freed executor's code is all traps (it may share its pages). */
static int check_trapped(const live *l)
{
    const uint8_t *p = (const uint8_t *)l->entry;
    for (size_t k = 0; k < l->code_size; k++)
        if (p[k] != TRAP_BYTE) {
            fprintf(stderr, "FAIL: freed code at %p+%zu is %#x, not a trap\n", l->entry, k,
                    p[k]);
            return 0;
        }
    return 1;
}

static int check_pages(char *maps, uintptr_t lo, uintptr_t hi, const char *perms,
                       const char *when)
{
    char found[512];
    if (!st_read_maps(maps, MAPS_CAP, NULL)) {
        fprintf(stderr, "FAIL: cannot read /proc/self/maps\n");
        return 0;
    }
    if (!st_range_has_perms(maps, lo, hi, perms, found, sizeof found)) {
        fprintf(stderr, "FAIL: executor pages %#lx-%#lx %s: expected %s, found %s\n",
                (unsigned long)lo, (unsigned long)hi, when, perms, found);
        return 0;
    }
    return 1;
}

/* After sr_executor_free: what the mode promises of l's pages. */
static int check_freed(char *maps, const live *l, size_t page)
{
    if (two_views) {
        if (!check_trapped(l) || !check_pages(maps, l->lo, l->hi, "r-xs", "after a free"))
            return 0;
        trapped++;
        return 1;
    }
    if (!check_pages(maps, l->lo, l->hi, "---p", "after sr_executor_free"))
        return 0;
    pages_none += (long)((l->hi - l->lo) / page);
    return 1;
}

int main(int argc, char **argv)
{
    if (ST_PARSE_OPTIONS(argc, argv, options))
        return 2;
    setvbuf(stdout, NULL, _IOLBF, 0);
    sr_config cfg = SR_CONFIG_DEFAULT;
    cfg.arena_size = (size_t)64 << 20; /* one arena for the whole run */
    sr_runtime *rt;
    if (sr_runtime_create(&st_stencil_set, st_leaf_symbols, &cfg, &rt) != SR_OK) {
        fprintf(stderr, "FAIL: sr_runtime_create: %s\n", sr_last_error());
        return 1;
    }
    two_views = sr_runtime_config(rt).code_views == 2;
    st_shim_fn *shim = (st_shim_fn *)sr_shim_entry(rt);
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    char *maps = malloc(MAPS_CAP);
    sr_instr *code = malloc(60000 * sizeof *code);
    st_rng r = {seed};

    pthread_t scan;
    pthread_create(&scan, NULL, scanner, NULL);
    while (atomic_load(&scans) == 0)
        sched_yield();

    enum { KEEP = 4 };
    live lv[KEEP];
    memset(lv, 0, sizeof lv);
    double t0 = st_now(), end = t0 + seconds;
    int injected = 0;
    long i;
    for (i = 0; st_now() < end && atomic_load(&failures) < 5; i++) {
        /* The emitter: sizes from a handful of instructions to ~600 KB of code. */
        static const size_t sizes[] = {0, 0, 2000, 20000, 60000};
        size_t n = sizes[st_below(&r, 5)];
        vm_value expect;
        if (n) {
            n = st_gen_big(&r, n, code, &expect);
        } else {
            st_gen_opts o;
            memset(&o, 0, sizeof o);
            o.max_instrs = 600;
            o.allow_native_mix = o.allow_print = o.allow_loops = 1;
            n = st_gen_program(&r, &o, code);
            if (st_interpret(NULL, code, n, NULL, 0, &expect) != 0) {
                fprintf(stderr, "FAIL: generator produced an invalid program\n");
                return 1;
            }
        }
        int k = (int)(i % KEEP);
        if (lv[k].ex) {
            sr_executor_free(lv[k].ex);
            frees++;
            if (!check_freed(maps, &lv[k], page))
                atomic_fetch_add(&failures, 1);
            lv[k].ex = NULL;
        }
        if (sr_emit(rt, code, n, "wx", &lv[k].ex) != SR_OK) {
            fprintf(stderr, "FAIL: sr_emit: %s\n", sr_last_error());
            atomic_fetch_add(&failures, 1);
            break;
        }
        emits++;
        uintptr_t lo = (uintptr_t)sr_executor_entry(lv[k].ex);
        uintptr_t hi = lo + sr_executor_code_size(lv[k].ex);
        lv[k].lo = lo / page * page;
        lv[k].hi = (hi + page - 1) / page * page;
        lv[k].entry = sr_executor_entry(lv[k].ex);
        lv[k].code_size = sr_executor_code_size(lv[k].ex);
        lv[k].expect = expect;
        if (reprotect && i == 0) {
            fprintf(stderr, "debug: making %#lx read-only\n", (unsigned long)lv[k].lo);
            mprotect((void *)lv[k].lo, page, PROT_READ);
        }
        if (check_pages(maps, lv[k].lo, lv[k].hi, two_views ? "r-xs" : "r-xp", "after sr_emit"))
            pages_rx += (long)((lv[k].hi - lv[k].lo) / page);
        else
            atomic_fetch_add(&failures, 1);
        if (reprotect && i == 0)
            mprotect((void *)lv[k].lo, page, PROT_READ | PROT_EXEC);
        uintptr_t cur = atomic_load(&span_lo);
        while (lv[k].lo < cur && !atomic_compare_exchange_weak(&span_lo, &cur, lv[k].lo)) {
        }
        cur = atomic_load(&span_hi);
        while (lv[k].hi > cur && !atomic_compare_exchange_weak(&span_hi, &cur, lv[k].hi)) {
        }
        vm_frame f;
        memset(&f, 0, sizeof f);
        vm_value stack[1024];
        vm_value got = shim(&f, stack, sr_executor_entry(lv[k].ex));
        if (got != expect) {
            fprintf(stderr, "FAIL: executor returned %" PRId64 ", expected %" PRId64 "\n",
                    (int64_t)got, (int64_t)expect);
            atomic_fetch_add(&failures, 1);
        }
        if (inject_wx && !injected && st_now() > t0 + seconds / 4) {
            void *p = mmap(NULL, page, PROT_READ | PROT_WRITE | PROT_EXEC,
                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            fprintf(stderr, "debug: mapped a W+X page at %p for 50 ms\n", p);
            struct timespec ts = {0, 50 * 1000000};
            nanosleep(&ts, NULL);
            if (p != MAP_FAILED)
                munmap(p, page);
            injected = 1;
        }
    }
    for (int k = 0; k < KEEP; k++) {
        if (!lv[k].ex)
            continue;
        sr_executor_free(lv[k].ex);
        frees++;
        if (!check_freed(maps, &lv[k], page))
            atomic_fetch_add(&failures, 1);
    }
    /* One last scan after everything settled. */
    long before = atomic_load(&scans);
    while (atomic_load(&scans) < before + 2 && !atomic_load(&failures))
        sched_yield();
    atomic_store(&stop, 1);
    pthread_join(scan, NULL);
    sr_runtime_destroy(rt);
    free(maps);
    free(code);
    long fails = atomic_load(&failures) + atomic_load(&wx_violations);
    printf("wx: views=%d seconds=%.2f emits=%ld frees=%ld scans=%ld transient_rw_seen=%ld "
           "pages_checked_rx=%ld pages_checked_none=%ld freed_code_trapped=%ld "
           "wx_violations=%ld failures=%ld\n", two_views ? 2 : 1,
           st_now() - t0, emits, frees, atomic_load(&scans), atomic_load(&transient_rw),
           pages_rx, pages_none, trapped, atomic_load(&wx_violations), fails);
    return fails ? 1 : 0;
}
