/* test_registry_reader.c - the registry reader (tools/stack/registry_reader.h)
 * against the real writer, in one process, through a read callback that
 * copies this process's own memory. Prints one line per case and ends with
 * "N passed, N failed" (tests/run.py; AArch64: test_stack.py, under qemu).
 *
 * churn: emitting threads emit and free executors (unique names, random
 * lengths, so freed memory and slots are reused by other executors) and
 * record each one, with a global event counter read around sr_emit and
 * sr_executor_free. Each emitter keeps 8 executors and replaces one (free,
 * emit) each time the reader lets it: in the middle of a block's copy and
 * after each snapshot (see read_self). A reader thread takes snapshots and
 * looks up addresses in the executors the emitters keep (before and after
 * the snapshot: some are freed or replaced during it), in the shim
 * and in C code, noting each answer and the counter around it. Afterwards
 * every answer is checked against the records: an executor named must carry
 * that id and name, hold the address at that index with that op, and have
 * been registered at some moment of the lookup; an executor emitted before
 * the snapshot and freed after the lookup must be named; the shim is the
 * shim, with the header's unwind rule; C code is no JIT code; at most one
 * answer in 1000 is "could not be read" (a writer preempted mid-write).
 * Built against writers broken on purpose (tests/stack/meson.build), the
 * churn case fails: test_stack.test_registry_reader_controls.
 * refusals: roots that are not version 1, have another magic, a field of
 * another size or a missing field, or cannot be read.
 * layout: a registry built here with another layout described by its field
 * table (fields moved, fields added) is read through the table. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "registry_reader.h"
#include "rt_common.h"
#include "stencilrt_registry.h"

extern sr_registry_root stencilrt_registry; /* runtime/registry.c: the root readers find */

enum { EMITTERS = 3, MAX_N = 12, RECORDS = 150000, OBSERVATIONS = 200000, NAME_MAX_LEN = 32 };
#define CHURN_SECONDS 1.5

/* Lets the emitters take one step (see emit_loop). */
static void let_writers_run(void);

/* Copies this process's memory the way a tool in another process would see
 * it: while other threads write it, from memory they may have freed (never
 * unmapped here), so neither instrumented nor a plain memcpy (a data race).
 * From the last byte to the first: one copy has no order within it
 * (stencilrt_registry.h), and the writer fills a slot from its first field,
 * so a forward copy that trails it sees the old generation (an empty slot)
 * or every new field, and hides most tearing; a backward copy that crosses a
 * write sees the new generation beside older fields, which only the slot's
 * counter reveals. And a reader in another process may be descheduled in
 * the middle of a copy: a block's copy stops in one of its first slots
 * (those in use: freed slots are reused first), after the slot's code range
 * and before its generation, while the emitters take a step. */
/* Whether all of [addr, addr + len) is mapped. A pointer read from a torn
 * slot may point anywhere; a tool in another process gets EFAULT there, and
 * this reader must get the same refusal, not a fault. */
static bool mapped(uint64_t addr, size_t len)
{
    static long page;
    if (!page)
        page = sysconf(_SC_PAGESIZE);
    unsigned char vec[64];
    uint64_t at = addr & ~(uint64_t)(page - 1), end = addr + len;
    while (at < end) {
        uint64_t span = end - at < sizeof vec * (uint64_t)page ? end - at : sizeof vec * page;
        if (mincore((void *)(uintptr_t)at, span, vec) != 0)
            return false;
        at += span;
    }
    return true;
}

__attribute__((no_sanitize("address", "thread"))) static bool read_self(void *ctx, uint64_t addr,
                                                                        void *buf, size_t len)
{
    static _Thread_local uint64_t split = 1;
    (void)ctx;
    if (addr < 65536 || addr + len < addr || !mapped(addr, len))
        return false; /* a zero or torn pointer: a reader must survive it */
    const unsigned char *src = (const unsigned char *)(uintptr_t)addr;
    unsigned char *dst = buf;
    size_t pause = 0;
    if (len < sizeof(sr_registry_block) / 2) {
        /* A name or a map, maybe in memory freed since: malloc may have made
         * it inaccessible (a thread's arena shrinks with PROT_NONE, which
         * mincore still counts as mapped) between the check and the copy.
         * The kernel copies it as it would for another process: EFAULT, not
         * a fault. Where the call is missing (ENOSYS), copy as below. */
        struct iovec local = {buf, len}, remote = {(void *)(uintptr_t)addr, len};
        ssize_t got = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
        if (got >= 0 || errno != ENOSYS)
            return got == (ssize_t)len;
    } else { /* a block, or its slots */
        split = split * 6364136223846793005u + 1442695040888963407u;
        size_t slot = (size_t)((split >> 33) % 32);
        pause = len - sizeof(sr_registry_block) + offsetof(sr_registry_block, slot) +
                sizeof(sr_registry_slot) * slot + offsetof(sr_registry_slot, code_start);
        pause = pause < len ? pause : len / 2;
    }
    for (size_t i = len; i-- > 0;) {
        dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
        if (i == pause && pause)
            let_writers_run();
    }
    return true;
}

/* ---- the emitters' records ---- */

typedef struct record {
    uint64_t id, start;
    uint64_t seq_emit0;  /* before sr_emit */
    uint64_t seq_emit;   /* after sr_emit returned */
    uint64_t seq_free;   /* before sr_executor_free (UINT64_MAX: never freed) */
    uint64_t seq_freed;  /* after it returned */
    uint32_t n;
    uint32_t ops[MAX_N];
    uint32_t off[MAX_N + 1];
    char name[NAME_MAX_LEN];
} record;

enum { LIVE = 8 }; /* executors each emitter keeps */

typedef struct emitter {
    record *recs;
    size_t nrecs;
    _Atomic(record *) live[LIVE]; /* what it keeps now, for the reader */
} emitter;

typedef struct observation {
    const record *asked; /* NULL: the shim or C code */
    uint64_t addr, seq_snap, seq_before, seq_after;
    srr_pc pc;
    srr_rule rule; /* *pc.rule, which lives until the next lookup */
    char op[16], name[NAME_MAX_LEN];
} observation;

/* What the churn case's threads share: the emitters' records, the reader's
 * answers (written by the reader alone, checked after every thread joined). */
static struct {
    sr_runtime *rt;
    emitter em[EMITTERS];
    atomic_ullong clock; /* events, in order */
    atomic_bool stop;
    observation *obs;
    size_t nobs;
    uint64_t torn, snapshots, executors_seen;
    char reader_error[320];
    atomic_ullong turn; /* the emitters take a step each time it changes */
} shared;

static void let_writers_run(void)
{
    atomic_fetch_add(&shared.turn, 1);
    sched_yield();
}

static uint64_t tick(void)
{
    return atomic_fetch_add(&shared.clock, 1);
}

static uint64_t rnd(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* push...; ret: k + 1 instructions, so executors come in many sizes. */
static size_t program(uint64_t *s, sr_instr *code)
{
    size_t n = 1 + (size_t)(rnd(s) % (MAX_N - 1));
    for (size_t i = 0; i + 1 < n; i++)
        code[i] = (sr_instr){i % 3 == 2 ? SG_OP_addi : SG_OP_push, 0, {rnd(s) & 0xffff}};
    code[n - 1] = (sr_instr){SG_OP_ret, 0, {0}};
    return n;
}

/* Emit one executor and record it. */
static sr_executor *emit_one(emitter *e, uint64_t *seed)
{
    sr_instr code[MAX_N];
    record *r = &e->recs[e->nrecs++];
    r->n = (uint32_t)program(seed, code);
    snprintf(r->name, sizeof r->name, "e%d_%zu", (int)(e - shared.em), e->nrecs);
    sr_executor *ex;
    r->seq_emit0 = tick();
    if (sr_emit(shared.rt, code, r->n, r->name, &ex) != SR_OK) {
        fprintf(stderr, "sr_emit: %s\n", sr_last_error());
        exit(1);
    }
    r->seq_emit = tick();
    r->id = sr_executor_id(ex);
    r->start = (uint64_t)(uintptr_t)sr_executor_entry(ex);
    for (uint32_t i = 0; i < r->n; i++)
        r->ops[i] = code[i].op;
    for (uint32_t i = 0; i <= r->n; i++)
        r->off[i] = (uint32_t)((uintptr_t)sr_executor_instr(ex, i) - r->start);
    r->seq_free = r->seq_freed = UINT64_MAX;
    return ex;
}

static void retire(sr_executor *ex, record *r)
{
    r->seq_free = tick();
    sr_executor_free(ex);
    r->seq_freed = tick();
}

/* Keeps LIVE executors, replacing a random one at each step, and shows them
 * to the reader. */
static void *emit_loop(void *arg)
{
    emitter *e = arg;
    uint64_t seed = (uint64_t)(uintptr_t)arg;
    sr_executor *live[LIVE] = {0};
    record *live_rec[LIVE] = {0};
    uint64_t turn = 0;
    while (!atomic_load(&shared.stop) && e->nrecs < RECORDS) {
        if (e->nrecs > LIVE) { /* then one step per turn of the reader's */
            while (atomic_load(&shared.turn) == turn && !atomic_load(&shared.stop))
                sched_yield();
            turn = atomic_load(&shared.turn);
        }
        size_t k = (size_t)(rnd(&seed) % LIVE);
        if (live[k])
            retire(live[k], live_rec[k]);
        live[k] = emit_one(e, &seed);
        live_rec[k] = &e->recs[e->nrecs - 1];
        atomic_store_explicit(&e->live[k], live_rec[k], memory_order_release);
    }
    for (size_t k = 0; k < LIVE; k++)
        if (live[k])
            retire(live[k], live_rec[k]);
    return NULL;
}

/* ---- the reader ---- */

static void note(srr_reader *r, const record *asked, uint64_t addr, uint64_t seq_snap)
{
    if (shared.nobs == OBSERVATIONS)
        return;
    observation *o = &shared.obs[shared.nobs++];
    o->asked = asked;
    o->addr = addr;
    o->seq_snap = seq_snap;
    o->seq_before = tick();
    srr_status st = srr_lookup(r, addr, &o->pc);
    o->seq_after = tick();
    if (st == SRR_EBUSY) /* a writer was preempted mid-write: "could not be read" */
        o->pc.kind = SRR_UNRESOLVED;
    else if (st != SRR_OK && !shared.reader_error[0])
        snprintf(shared.reader_error, sizeof shared.reader_error, "srr_lookup: %s", srr_error(r));
    if (o->pc.rule)
        o->rule = *o->pc.rule;
    if (o->pc.kind == SRR_EXECUTOR) { /* the strings live until the next lookup */
        snprintf(o->op, sizeof o->op, "%s", o->pc.op ? o->pc.op : "(null)");
        snprintf(o->name, sizeof o->name, "%s", o->pc.executor ? o->pc.executor : "(null)");
    }
}

/* The executors the emitters keep now. */
static void shown(const record **out)
{
    for (size_t i = 0; i < EMITTERS * LIVE; i++)
        out[i] = atomic_load_explicit(&shared.em[i / LIVE].live[i % LIVE], memory_order_acquire);
}

static void *read_loop(void *arg)
{
    (void)arg;
    char err[256];
    srr_reader *r;
    if (srr_open(read_self, NULL, (uint64_t)(uintptr_t)&stencilrt_registry, &r, err,
                 sizeof err) != SRR_OK) {
        snprintf(shared.reader_error, sizeof shared.reader_error, "srr_open: %s", err);
        return NULL;
    }
    uint64_t seed = 99, shim = (uint64_t)(uintptr_t)sr_shim_entry(shared.rt);
    while (!atomic_load(&shared.stop) && shared.nobs < OBSERVATIONS) {
        /* What the emitters keep before the snapshot (some are freed during it)
         * and after it (their replacements), asked in the other order so that
         * a replacement's details are cached when its predecessor's addresses
         * are asked. */
        const record *asked[2][EMITTERS * LIVE];
        shown(asked[1]);
        uint64_t seq_snap = tick();
        if (srr_snapshot(r) != SRR_OK) {
            snprintf(shared.reader_error, sizeof shared.reader_error, "srr_snapshot: %s",
                     srr_error(r));
            break;
        }
        shared.snapshots++;
        shared.executors_seen += srr_executor_count(r);
        shown(asked[0]);
        let_writers_run();
        for (size_t k = 0; k < 2 * EMITTERS * LIVE; k++) {
            const record *h = asked[k / (EMITTERS * LIVE)][k % (EMITTERS * LIVE)];
            if (h) {
                uint32_t i = (uint32_t)(rnd(&seed) % h->n);
                uint64_t span = h->off[i + 1] - h->off[i];
                note(r, h, h->start + h->off[i] + rnd(&seed) % span, seq_snap);
            }
        }
        note(r, NULL, shim, seq_snap);
        note(r, NULL, (uint64_t)(uintptr_t)read_loop, seq_snap);
    }
    shared.torn = srr_torn_reads(r);
    srr_close(r);
    return NULL;
}

/* ---- checking the answers ---- */

static const record *by_id(uint64_t id)
{
    for (int t = 0; t < EMITTERS; t++) { /* ids grow with each emitter's records */
        const emitter *e = &shared.em[t];
        size_t lo = 0, hi = e->nrecs;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (e->recs[mid].id < id)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < e->nrecs && e->recs[lo].id == id)
            return &e->recs[lo];
    }
    return NULL;
}

/* Why an answer about an executor's address is wrong, or NULL. */
static const char *judge(const observation *o)
{
    const record *a = o->asked;
    bool surely_live = a->seq_emit < o->seq_snap && a->seq_free > o->seq_after;
    if (o->pc.kind == SRR_NOT_JIT)
        return surely_live ? "a live executor's address is not JIT code" : NULL;
    if (o->pc.kind != SRR_EXECUTOR)
        return "an executor's address answered neither executor nor not JIT";
    const record *r = by_id(o->pc.id);
    if (!r)
        return "an id no emitter was given";
    if (surely_live && r != a)
        return "another executor named at a live executor's address";
    if (strcmp(r->name, o->name))
        return "a name that is not the id's";
    uint64_t i = o->pc.index;
    if (i == r->n) { /* past the instructions: the executor's veneers (none in these
                      * programs, which call nothing: only the padding to 16 bytes) */
        if (o->addr < r->start + r->off[i] || o->addr >= r->start + ((r->off[i] + 15) & ~15u))
            return "an address named a veneer outside the veneers";
        if (strcmp(o->op, "veneer"))
            return "a veneer named as an op";
    } else if (i > r->n || o->addr < r->start + r->off[i] || o->addr >= r->start + r->off[i + 1]) {
        return "an instruction index that does not hold the address";
    } else if (strcmp(rt_set.stencils[r->ops[i]].name, o->op)) {
        return "the wrong op";
    }
    if (r->seq_emit0 > o->seq_after || r->seq_freed < o->seq_before)
        return "an executor not registered during the lookup";
    return NULL;
}

/* The answer judged by the name alone, ids aside: true when the executor of
 * that name was registered during the lookup and holds the address. */
static bool name_holds(const observation *o)
{
    int t;
    size_t k;
    if (sscanf(o->name, "e%d_%zu", &t, &k) != 2 || t < 0 || t >= EMITTERS || k < 1 ||
        k > shared.em[t].nrecs)
        return false;
    const record *r = &shared.em[t].recs[k - 1];
    return r->seq_emit0 < o->seq_after && r->seq_freed > o->seq_before &&
           o->addr >= r->start && o->addr < r->start + ((r->off[r->n] + 15) & ~15u);
}

/* The runtime's unwind rule as the header states it, and where its shim is. */
static bool rule_is_the_headers(const srr_rule *rule)
{
    uint64_t entry = (uint64_t)(uintptr_t)sr_shim_entry(shared.rt);
    return rule->elf_machine == SG_TARGET_ELF_MACHINE &&
           rule->cfa_register == SG_UNWIND_CFA_REGISTER &&
           rule->cfa_offset == SG_UNWIND_CFA_OFFSET &&
           rule->fp_register == SG_UNWIND_FP_REGISTER && rule->fp_offset == SG_UNWIND_FP_OFFSET &&
           rule->ra_offset == SG_UNWIND_RA_OFFSET && rule->ra_signed == !!SG_UNWIND_RA_SIGNED &&
           rule->shim_start + SG_SHIM_ENTRY == entry && rule->shim_size == sg_shim.code_size &&
           rule->shim_rule_start <= SG_SHIM_CALL_OFFSET &&
           rule->shim_rule_end >= SG_SHIM_CALL_OFFSET + SG_SHIM_CALL_SIZE &&
           rule->shim_rule_end <= rule->shim_size;
}

static void check_answers(void)
{
    size_t named = 0, not_jit = 0, wrong = 0, shim_ok = 0, c_ok = 0, unresolved = 0, stale = 0;
    char first[512] = "";
    for (size_t k = 0; k < shared.nobs; k++) {
        const observation *o = &shared.obs[k];
        const char *why = NULL;
        if (!o->asked && o->addr == (uint64_t)(uintptr_t)sr_shim_entry(shared.rt)) {
            bool rule_ok = o->pc.rule && rule_is_the_headers(&o->rule);
            why = o->pc.kind != SRR_SHIM ? "the shim is not the shim"
                  : !rule_ok             ? "the shim's rule is not the header's"
                                         : NULL;
            shim_ok += !why;
        } else if (!o->asked) {
            why = o->pc.kind != SRR_NOT_JIT ? "C code named as JIT code" : NULL;
            c_ok += !why;
        } else if (o->pc.kind == SRR_UNRESOLVED) {
            unresolved++; /* allowed, if rare: below */
        } else {
            why = judge(o);
            named += o->pc.kind == SRR_EXECUTOR && !why;
            not_jit += o->pc.kind == SRR_NOT_JIT;
            stale += o->pc.kind == SRR_EXECUTOR && !name_holds(o);
        }
        if (why && !wrong++)
            snprintf(first, sizeof first, "%s: address 0x%llx asked for %s, answered kind %d "
                     "id %llu %s index %llu op %s", why, (unsigned long long)o->addr,
                     o->asked ? o->asked->name : "-", (int)o->pc.kind,
                     (unsigned long long)o->pc.id, o->name, (unsigned long long)o->pc.index,
                     o->op);
    }
    size_t emitted = 0;
    for (int t = 0; t < EMITTERS; t++)
        emitted += shared.em[t].nrecs;
    char detail[768];
    snprintf(detail, sizeof detail, "%zu executors emitted, %llu snapshots (%.1f live on "
             "average), %zu answers: %zu named right, %zu freed in between, %zu shim, %zu C, "
             "%zu unresolved, %zu wrong (%zu named by a stale name), %llu torn reads retried%s%s",
             emitted, (unsigned long long)shared.snapshots,
             shared.snapshots ? (double)shared.executors_seen / (double)shared.snapshots : 0.0,
             shared.nobs, named, not_jit, shim_ok, c_ok, unresolved, wrong, stale,
             (unsigned long long)shared.torn,
             wrong ? "; first: " : "", first);
    rt_result(!shared.reader_error[0] && wrong == 0 && named > 1000 && shim_ok > 0 && c_ok > 0 &&
                  unresolved <= shared.nobs / 1000,
              "churn", shared.reader_error[0] ? shared.reader_error : detail);
}

static void test_churn(void)
{
    sr_config cfg = SR_CONFIG_DEFAULT;
    cfg.gdb = 0;
    if (sr_runtime_create(&rt_set, rt_symbols, &cfg, &shared.rt) != SR_OK) {
        rt_result(false, "churn", sr_last_error());
        return;
    }
    shared.obs = calloc(OBSERVATIONS, sizeof *shared.obs);
    pthread_t em[EMITTERS], reader;
    for (int t = 0; t < EMITTERS; t++) {
        shared.em[t].recs = calloc(RECORDS, sizeof *shared.em[t].recs);
        if (!shared.obs || !shared.em[t].recs) {
            rt_result(false, "churn", "out of memory");
            exit(1);
        }
        pthread_create(&em[t], NULL, emit_loop, &shared.em[t]);
    }
    pthread_create(&reader, NULL, read_loop, NULL);
    struct timespec d = {1, (long)((CHURN_SECONDS - 1) * 1e9)};
    nanosleep(&d, NULL);
    atomic_store(&shared.stop, true);
    for (int t = 0; t < EMITTERS; t++)
        pthread_join(em[t], NULL);
    pthread_join(reader, NULL);
    check_answers();
    sr_runtime_destroy(shared.rt);
    for (int t = 0; t < EMITTERS; t++)
        free(shared.em[t].recs);
    free(shared.obs);
}

/* ---- refusals ---- */

static void expect_refusal(const char *name, uint64_t root, srr_status want, const char *text)
{
    char err[256] = "", detail[400];
    srr_reader *r = (srr_reader *)1;
    srr_status st = srr_open(read_self, NULL, root, &r, err, sizeof err);
    snprintf(detail, sizeof detail, "status %d (want %d): %s", (int)st, (int)want, err);
    rt_result(st == want && r == NULL && strstr(err, text), name, detail);
}

/* The real field table, copied so that one entry can be changed. */
static size_t copy_fields(sr_registry_field *out, size_t cap)
{
    size_t n = stencilrt_registry.field_count;
    if (n > cap)
        n = cap;
    memcpy(out, (const void *)(uintptr_t)stencilrt_registry.fields, n * sizeof *out);
    return n;
}

static sr_registry_field *find_field(sr_registry_field *f, size_t n, uint16_t id)
{
    for (size_t i = 0; i < n; i++)
        if (f[i].field == id)
            return &f[i];
    return NULL;
}

static void test_refusals(void)
{
    sr_registry_root root = stencilrt_registry;
    uint64_t at = (uint64_t)(uintptr_t)&root;
    root.version = 2;
    expect_refusal("refuse version 2", at, SRR_EFORMAT, "registry version 2, this reader reads 1");
    root = stencilrt_registry;
    root.magic ^= 1;
    expect_refusal("refuse another magic", at, SRR_EFORMAT, "magic");

    sr_registry_field fields[64];
    size_t n = copy_fields(fields, 64);
    root = stencilrt_registry;
    root.fields = (uint64_t)(uintptr_t)fields;
    sr_registry_field *gen = find_field(fields, n, SR_REGISTRY_F_SLOT_GENERATION);
    if (!gen) {
        rt_result(false, "refuse a field of another size", "no slot generation in the table");
        return;
    }
    gen->size = 4;
    expect_refusal("refuse a field of another size", at, SRR_EFORMAT, "size 4");
    gen->size = 8;
    *find_field(fields, n, SR_REGISTRY_F_SLOT_OPS) = fields[n - 1]; /* drop slot.ops */
    root.field_count = n - 1;
    expect_refusal("refuse a missing field", at, SRR_EFORMAT, "not in its field table");
    expect_refusal("refuse an unreadable root", 16, SRR_EREAD, "cannot read");
}

/* A runtime written before cold parts lists no runtime.cold_sizes: its
 * registry is still read (every byte past the hot parts is then a veneer). */
static void test_older_writer(void)
{
    sr_registry_field fields[64];
    size_t n = copy_fields(fields, 64);
    sr_registry_root root = stencilrt_registry;
    root.fields = (uint64_t)(uintptr_t)fields;
    sr_registry_field *cold = find_field(fields, n, SR_REGISTRY_F_RT_COLD_SIZES);
    if (!cold) {
        rt_result(false, "read a registry without cold part sizes", "none in the table");
        return;
    }
    *cold = fields[n - 1];
    root.field_count = n - 1;
    char err[256] = "";
    srr_reader *r = NULL;
    srr_status st = srr_open(read_self, NULL, (uint64_t)(uintptr_t)&root, &r, err, sizeof err);
    bool ok = st == SRR_OK && srr_snapshot(r) == SRR_OK;
    rt_result(ok, "read a registry without cold part sizes (an older runtime's)", err);
    if (r)
        srr_close(r);
}

/* ---- another layout, read through its field table ---- */

/* Version 1 with every slot field moved and one added (a future writer's
 * slot), the runtime struct grown at its front. */
typedef struct odd_slot {
    uint64_t added; /* a field this reader does not know */
    uint64_t ops, offsets, count, name_len, name, code_size, code_start, generation;
} odd_slot;
typedef struct odd_block {
    uint64_t seq[SR_REGISTRY_BLOCK_SLOTS];
    odd_slot slot[SR_REGISTRY_BLOCK_SLOTS];
} odd_block;
typedef struct odd_runtime {
    uint64_t added[3];
    sr_registry_runtime rt;
} odd_runtime;

#define ODD(T, id, type, member) \
    {T, id, (uint16_t)offsetof(type, member), (uint16_t)sizeof(((type *)0)->member)}

static void test_other_layout(void)
{
    static odd_block block;
    static odd_runtime rt;
    static uint64_t blocks[1];
    static const char *op_names[] = {"alpha", "beta"};
    static const uint32_t offsets[] = {0, 16, 40}, ops[] = {1, 0};
    static const char name[] = "oddity";
    static const uint8_t code[40];
    sr_registry_field f[64];
    size_t n = copy_fields(f, 64);
    for (size_t i = 0; i < n; i++) { /* move every slot and runtime field */
        if (f[i].type == SR_REGISTRY_T_RUNTIME)
            f[i].offset += (uint16_t)offsetof(odd_runtime, rt);
        if (f[i].type == SR_REGISTRY_T_BLOCK && f[i].field == SR_REGISTRY_F_BLOCK_SLOT)
            f[i] = (sr_registry_field)ODD(SR_REGISTRY_T_BLOCK, SR_REGISTRY_F_BLOCK_SLOT,
                                          odd_block, slot);
    }
    const sr_registry_field moved[] = {
        ODD(SR_REGISTRY_T_SLOT, SR_REGISTRY_F_SLOT_GENERATION, odd_slot, generation),
        ODD(SR_REGISTRY_T_SLOT, SR_REGISTRY_F_SLOT_CODE_START, odd_slot, code_start),
        ODD(SR_REGISTRY_T_SLOT, SR_REGISTRY_F_SLOT_CODE_SIZE, odd_slot, code_size),
        ODD(SR_REGISTRY_T_SLOT, SR_REGISTRY_F_SLOT_NAME, odd_slot, name),
        ODD(SR_REGISTRY_T_SLOT, SR_REGISTRY_F_SLOT_NAME_LEN, odd_slot, name_len),
        ODD(SR_REGISTRY_T_SLOT, SR_REGISTRY_F_SLOT_COUNT, odd_slot, count),
        ODD(SR_REGISTRY_T_SLOT, SR_REGISTRY_F_SLOT_OFFSETS, odd_slot, offsets),
        ODD(SR_REGISTRY_T_SLOT, SR_REGISTRY_F_SLOT_OPS, odd_slot, ops),
        {SR_REGISTRY_T_SLOT, 99, 0, 8}, /* `added`: unknown to the reader */
    };
    for (size_t m = 0; m < sizeof moved / sizeof *moved; m++) {
        sr_registry_field *slot_field = find_field(f, n, moved[m].field);
        if (slot_field)
            *slot_field = moved[m];
        else if (n < 64)
            f[n++] = moved[m];
    }
    uint64_t start = (uint64_t)(uintptr_t)code;
    rt.rt = stencilrt_registry.runtimes
                ? *(const sr_registry_runtime *)(uintptr_t)stencilrt_registry.runtimes
                : (sr_registry_runtime){.elf_machine = SG_TARGET_ELF_MACHINE};
    rt.rt.next = 0;
    rt.rt.op_names = (uint64_t)(uintptr_t)op_names;
    rt.rt.op_count = 2;
    rt.rt.blocks = (uint64_t)(uintptr_t)blocks;
    rt.rt.block_count = rt.rt.block_max = 1;
    rt.rt.shim_start = rt.rt.shim_size = 0;
    blocks[0] = (uint64_t)(uintptr_t)&block;
    block.slot[7] = (odd_slot){.added = 0xdead, .ops = (uint64_t)(uintptr_t)ops,
                               .offsets = (uint64_t)(uintptr_t)offsets, .count = 2,
                               .name_len = sizeof name - 1, .name = (uint64_t)(uintptr_t)name,
                               .code_size = sizeof code, .code_start = start, .generation = 77};
    sr_registry_root root = stencilrt_registry;
    root.fields = (uint64_t)(uintptr_t)f;
    root.field_count = n;
    root.seq = 0;
    root.runtimes = (uint64_t)(uintptr_t)&rt;
    char err[256] = "", detail[400];
    srr_reader *r;
    srr_pc pc = {0};
    srr_status st = srr_open(read_self, NULL, (uint64_t)(uintptr_t)&root, &r, err, sizeof err);
    if (st == SRR_OK && (st = srr_snapshot(r)) == SRR_OK)
        st = srr_lookup(r, start + 20, &pc);
    snprintf(detail, sizeof detail, "status %d %s; kind %d id %llu index %llu op %s name %s",
             (int)st, st == SRR_OK ? "" : r ? srr_error(r) : err, (int)pc.kind,
             (unsigned long long)pc.id, (unsigned long long)pc.index,
             pc.kind == SRR_EXECUTOR ? pc.op : "-", pc.kind == SRR_EXECUTOR ? pc.executor : "-");
    rt_result(st == SRR_OK && pc.kind == SRR_EXECUTOR && pc.id == 77 && pc.index == 1 &&
              !strcmp(pc.op, "alpha") && !strcmp(pc.executor, "oddity"),
              "another layout, read through its field table", detail);
    if (r)
        srr_close(r);
}

/* The executor rt_common.h runs (push 41; addi 1; ret), named while it lives. */
static void test_answer(void)
{
    sr_config cfg = SR_CONFIG_DEFAULT;
    cfg.gdb = 0;
    sr_runtime *rt;
    sr_executor *ex = NULL;
    srr_reader *r = NULL;
    char err[256] = "", detail[400] = "";
    srr_pc pc = {0};
    bool ok = sr_runtime_create(&rt_set, rt_symbols, &cfg, &rt) == SR_OK &&
              sr_emit(rt, rt_answer, 3, "answer", &ex) == SR_OK && rt_run(rt, ex) == 42 &&
              srr_open(read_self, NULL, (uint64_t)(uintptr_t)&stencilrt_registry, &r, err,
                       sizeof err) == SRR_OK &&
              srr_snapshot(r) == SRR_OK &&
              srr_lookup(r, (uint64_t)(uintptr_t)sr_executor_instr(ex, 1), &pc) == SRR_OK;
    if (pc.kind == SRR_EXECUTOR)
        snprintf(detail, sizeof detail, "%s@%s[%llu] id %llu", pc.op, pc.executor,
                 (unsigned long long)pc.index, (unsigned long long)pc.id);
    else
        snprintf(detail, sizeof detail, "kind %d; %s%s", (int)pc.kind, err, sr_last_error());
    rt_result(ok && pc.kind == SRR_EXECUTOR && pc.id == sr_executor_id(ex) && pc.index == 1 &&
              !strcmp(pc.op, "addi") && !strcmp(pc.executor, "answer"),
              "a run executor is named", detail);
    if (r)
        srr_close(r);
    sr_runtime_destroy(rt);
}

int main(void)
{
    test_answer();
    test_refusals();
    test_older_writer();
    test_other_layout();
    test_churn();
    return rt_summary();
}
