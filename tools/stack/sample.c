/* sample.c - the sampling loop. Each tick: re-read the registry and the
 * thread list while the target runs, stop every thread, read registers and
 * unwind, resume; then write what was seen. Only the unwinding happens while
 * the threads are stopped. */
#include "sample.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { STOP_TIMEOUT_MS = 1000, TOP_OPS = 10 };

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* ---- a counting table of strings (folded stacks, op names) ---- */

typedef struct counted {
    char *key;
    uint64_t count;
} counted;

typedef struct counter {
    counted *slots;
    size_t cap, len;
} counter;

static uint64_t hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    while (*s)
        h = (h ^ (unsigned char)*s++) * 1099511628211ull;
    return h;
}

static bool counter_grow(counter *c)
{
    size_t cap = c->cap ? c->cap * 2 : 256;
    counted *n = calloc(cap, sizeof *n);
    if (!n)
        return false;
    for (size_t i = 0; i < c->cap; i++)
        if (c->slots[i].key) {
            size_t j = hash(c->slots[i].key) & (cap - 1);
            while (n[j].key)
                j = (j + 1) & (cap - 1);
            n[j] = c->slots[i];
        }
    free(c->slots);
    c->slots = n;
    c->cap = cap;
    return true;
}

static bool counter_add(counter *c, const char *key, uint64_t n)
{
    if ((c->len + 1) * 2 > c->cap && !counter_grow(c))
        return false;
    size_t j = hash(key) & (c->cap - 1);
    while (c->slots[j].key && strcmp(c->slots[j].key, key))
        j = (j + 1) & (c->cap - 1);
    if (!c->slots[j].key) {
        if (!(c->slots[j].key = strdup(key)))
            return false;
        c->len++;
    }
    c->slots[j].count += n;
    return true;
}

static void counter_free(counter *c)
{
    for (size_t i = 0; i < c->cap; i++)
        free(c->slots[i].key);
    free(c->slots);
}

/* The entries, packed and sorted by cmp. Caller frees the array only. */
static counted *counter_sorted(const counter *c, int (*cmp)(const void *, const void *))
{
    counted *v = malloc((c->len + 1) * sizeof *v);
    size_t n = 0;
    for (size_t i = 0; v && i < c->cap; i++)
        if (c->slots[i].key)
            v[n++] = c->slots[i];
    if (v)
        qsort(v, n, sizeof *v, cmp);
    return v;
}

static int by_key(const void *a, const void *b)
{
    return strcmp(((const counted *)a)->key, ((const counted *)b)->key);
}

static int by_count_desc(const void *a, const void *b)
{
    const counted *x = a, *y = b;
    if (x->count != y->count)
        return x->count < y->count ? 1 : -1;
    return strcmp(x->key, y->key);
}

/* ---- one stop ---- */

/* Frames of every thread of one stop, kept until the threads run again. */
typedef struct stack {
    pid_t tid;
    char name[32];
    frame *frames;
    int n;
    bool reached_main;
} stack;

typedef struct stop_buf {
    stack *stacks;
    size_t count, cap;
} stop_buf;

static bool stop_buf_reserve(stop_buf *b, size_t n)
{
    if (n <= b->cap)
        return true;
    stack *s = realloc(b->stacks, n * sizeof *s);
    if (!s)
        return false;
    for (size_t i = b->cap; i < n; i++) {
        s[i].frames = malloc(UNWIND_MAX_DEPTH * sizeof *s[i].frames);
        if (!s[i].frames) {
            b->stacks = s;
            b->cap = i;
            return false;
        }
    }
    b->stacks = s;
    b->cap = n;
    return true;
}

static void stop_buf_free(stop_buf *b)
{
    for (size_t i = 0; i < b->cap; i++)
        free(b->stacks[i].frames);
    free(b->stacks);
}

/* Main thread first, then by thread id, so output is in a stable order. */
static int by_tid(const void *a, const void *b)
{
    const stack *x = a, *y = b;
    return x->tid < y->tid ? -1 : x->tid > y->tid;
}

/* Stops the target, unwinds every stopped thread into b, and resumes it.
 * *t_stop and *t_resume bracket the time the threads were held. */
static bool take_stop(target *t, unwinder *u, stop_buf *b, long long *t_stop, long long *t_resume)
{
    b->count = 0;
    target_stop(t, STOP_TIMEOUT_MS);
    *t_stop = now_ns();
    if (!stop_buf_reserve(b, t->count)) {
        target_resume(t);
        return false;
    }
    u->resnapshot = true;
    for (size_t i = 0; i < t->count; i++) {
        thread *th = &t->threads[i];
        if (!th->stopped || !th->have_regs)
            continue;
        stack *s = &b->stacks[b->count++];
        s->tid = th->tid;
        snprintf(s->name, sizeof s->name, "%s", th->name);
        s->n = unwind_thread(u, &th->regs, s->frames, UNWIND_MAX_DEPTH, &s->reached_main);
    }
    *t_resume = now_ns();
    target_resume(t);
    qsort(b->stacks, b->count, sizeof *b->stacks, by_tid);
    for (size_t i = 1; i < b->count; i++)
        if (b->stacks[i].tid == t->pid) { /* the main thread first */
            stack main_thread = b->stacks[i];
            memmove(&b->stacks[1], &b->stacks[0], i * sizeof *b->stacks);
            b->stacks[0] = main_thread;
        }
    return true;
}

/* ---- printing one stack ---- */

static void print_frame(FILE *out, int depth, const frame *f)
{
    fprintf(out, "  #%-2d 0x%016llx ", depth, (unsigned long long)f->pc);
    switch (f->kind) {
    case FRAME_JIT:
        fprintf(out, "%s@%s[%llu] (executor %s, id %llu)\n", f->op, f->executor,
                (unsigned long long)f->index, f->executor, (unsigned long long)f->id);
        break;
    case FRAME_SHIM:
        fputs("[stencilrt shim]\n", out);
        break;
    case FRAME_UNRESOLVED:
        fputs("?? (jit)\n", out); /* JIT code the registry does not name */
        break;
    case FRAME_NATIVE:
        if (f->sym[0])
            fprintf(out, "%s+0x%llx (%s)\n", f->sym, (unsigned long long)f->offset, f->module);
        else
            fprintf(out, "?? (%s)\n", f->module);
        break;
    }
}

bool print_stacks(target *t, unwinder *u, FILE *out)
{
    stop_buf b = {0};
    long long t0, t1;
    bool ok = take_stop(t, u, &b, &t0, &t1) && b.count > 0;
    for (size_t i = 0; ok && i < t->count; i++)
        if (!t->threads[i].have_regs)
            fprintf(stderr, "stencilrt-stack: thread %d did not stop within %d ms: left out\n",
                    (int)t->threads[i].tid, STOP_TIMEOUT_MS);
    for (size_t i = 0; i < b.count; i++) {
        const stack *s = &b.stacks[i];
        fprintf(out, "%sthread %d \"%s\":\n", i ? "\n" : "", (int)s->tid, s->name);
        for (int d = 0; d < s->n; d++)
            print_frame(out, d, &s->frames[d]);
    }
    stop_buf_free(&b);
    return ok;
}

/* ---- sampling ---- */

/* A frame as folded stacks and the samples file name it. */
static void frame_label(const frame *f, char *buf, size_t len)
{
    switch (f->kind) {
    case FRAME_JIT:
        snprintf(buf, len, "%s@%s[%llu]", f->op, f->executor, (unsigned long long)f->index);
        break;
    case FRAME_SHIM:
        snprintf(buf, len, "[stencilrt shim]");
        break;
    case FRAME_NATIVE:
        snprintf(buf, len, "%s", f->sym[0] ? f->sym : "??");
        break;
    default:
        snprintf(buf, len, "??");
        break;
    }
}

static void write_samples(FILE *out, uint64_t sample, const stack *s, long long t0, long long t1)
{
    fprintf(out, "S %llu %d %lld %lld %d %d\n", (unsigned long long)sample, (int)s->tid, t0, t1,
            s->n, s->reached_main);
    for (int d = 0; d < s->n; d++) {
        const frame *f = &s->frames[d];
        if (f->kind == FRAME_JIT) {
            fprintf(out, "J %llu %d %d %llx %llu %llu %s %s\n", (unsigned long long)sample,
                    (int)s->tid, d, (unsigned long long)f->pc, (unsigned long long)f->id,
                    (unsigned long long)f->index, f->op, f->executor);
        } else {
            char label[512];
            frame_label(f, label, sizeof label);
            fprintf(out, "N %llu %d %d %llx %s\n", (unsigned long long)sample, (int)s->tid, d,
                    (unsigned long long)f->pc, f->kind == FRAME_NATIVE && !f->sym[0] ? "?" : label);
        }
    }
}

/* root;outermost;...;innermost, the root being the thread's name. */
static char *folded_key(const stack *s)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m)
        return NULL;
    fputs(s->name[0] ? s->name : "?", m);
    for (int d = s->n - 1; d >= 0; d--) {
        char label[512];
        frame_label(&s->frames[d], label, sizeof label);
        fprintf(m, ";%s", label);
    }
    fclose(m);
    return buf;
}

static bool record(const sample_opts *o, counter *folded, counter *ops, uint64_t sample,
                   const stop_buf *b, long long t0, long long t1, sample_stats *st)
{
    for (size_t i = 0; i < b->count; i++) {
        const stack *s = &b->stacks[i];
        if (o->samples_out)
            write_samples(o->samples_out, sample, s, t0, t1);
        char *key = folded_key(s);
        bool ok = key && counter_add(folded, key, 1);
        free(key);
        if (!ok)
            return false;
        st->stacks++;
        for (int d = 0; d < s->n; d++)
            if (s->frames[d].kind == FRAME_JIT) { /* the innermost op is where time goes */
                if (!counter_add(ops, s->frames[d].op, 1))
                    return false;
                break;
            }
    }
    return true;
}

static void sleep_until(long long t)
{
    struct timespec ts = {(time_t)(t / 1000000000ll), (long)(t % 1000000000ll)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

static void report(const sample_opts *o, const counter *folded, const counter *ops,
                   const sample_stats *st, uint64_t torn)
{
    counted *v = counter_sorted(folded, by_key);
    for (size_t i = 0; v && i < folded->len; i++)
        fprintf(o->folded, "%s %llu\n", v[i].key, (unsigned long long)v[i].count);
    free(v);
    fflush(o->folded);
    v = counter_sorted(ops, by_count_desc);
    if (v && ops->len) {
        fprintf(stderr, "stencilrt-stack: hottest ops (innermost JIT frame of %llu stacks):\n",
                (unsigned long long)st->stacks);
        for (size_t i = 0; i < ops->len && i < TOP_OPS; i++)
            fprintf(stderr, "  %-24s %8llu %6.2f%%\n", v[i].key, (unsigned long long)v[i].count,
                    st->stacks ? 100.0 * (double)v[i].count / (double)st->stacks : 0.0);
    }
    free(v);
    if (st->elapsed > 0)
        fprintf(stderr, "stencilrt-stack: %.1f samples/s over %.2f s (%llu ticks missed)\n",
                (double)st->samples / st->elapsed, st->elapsed,
                (unsigned long long)st->missed_ticks);
    fprintf(stderr, "stencilrt-stack: %llu samples, %llu stacks, %llu JIT frames, %llu torn reads "
            "retried, %llu unresolved JIT frames\n", (unsigned long long)st->samples,
            (unsigned long long)st->stacks, (unsigned long long)st->jit_frames,
            (unsigned long long)torn, (unsigned long long)st->unresolved);
}

int sample_run(target *t, unwinder *u, const sample_opts *o, sample_stats *st)
{
    counter folded = {0}, ops = {0};
    stop_buf b = {0};
    memset(st, 0, sizeof *st);
    long long period = (long long)(1e9 / o->hz), start = now_ns();
    long long end = start + (long long)(o->seconds * 1e9), tick = start;
    int rc = 0;
    while (!*o->stop && !t->exited && tick < end) {
        if (u->reader)
            srr_snapshot(u->reader); /* while the JIT runs; a failure leaves no executors */
        target_rescan(t);
        long long t0, t1;
        uint64_t jit0 = u->jit_frames, unres0 = u->unresolved;
        if (!take_stop(t, u, &b, &t0, &t1) ||
            !record(o, &folded, &ops, st->samples, &b, t0, t1, st)) {
            fprintf(stderr, "stencilrt-stack: out of memory while sampling\n");
            rc = 3;
            break;
        }
        if (b.count)
            st->samples++;
        st->jit_frames += u->jit_frames - jit0;
        st->unresolved += u->unresolved - unres0;
        /* The next tick in the future: a slow sample skips ticks, never bursts. */
        long long now = now_ns();
        tick += period;
        while (tick <= now) {
            tick += period;
            st->missed_ticks++;
        }
        if (tick < end)
            sleep_until(tick);
    }
    st->elapsed = (double)(now_ns() - start) / 1e9;
    if (o->samples_out)
        fflush(o->samples_out);
    report(o, &folded, &ops, st, u->reader ? srr_torn_reads(u->reader) : 0);
    counter_free(&folded);
    counter_free(&ops);
    stop_buf_free(&b);
    return rc;
}
