/* batch.c - see batch.h. */
#define _GNU_SOURCE
#include "batch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "diag.h"
#include "flags.h"
#include "util.h"

/* ---- which ops make which batch */

/* Which ops compile in this run: those that missed the cache on some target
 * and may stand in a batch (per op: true). */
static bool *ops_to_compile(const gen_run *run, const job_set *js, size_t *count)
{
    bool *must = xcalloc(run->ops.count ? run->ops.count : 1, sizeof *must);
    *count = 0;
    for (size_t i = 0; i < js->count; i++) {
        const job_ref *ref = &js->refs[i]; /* batched: an op, never the shim */
        if (!ref->batched || js->jobs[i].skip || ref->alone[0])
            continue;
        size_t k = (size_t)(ref->op - run->ops.items);
        *count += !must[k];
        must[k] = true;
    }
    return must;
}

/* The fewest ops a batch holds: BATCH_MIN, since a clang process costs about
 * as much as compiling 15 small ops (docs/build.md, "Batched units"). More -j
 * jobs than this machine has CPUs can only run elsewhere (distcc, icecc:
 * docs/build.md, "Batches for a build farm"), where the compiles run in
 * parallel beyond this machine's CPUs (only their preprocessing stays here):
 * there BATCH_MIN gives way as far as one batch a job needs, so that no slot
 * waits while ops are left to compile. */
#define BATCH_MIN 16
static size_t batch_floor(size_t count, size_t jobs)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus < 1 || jobs <= (size_t)cpus)
        return BATCH_MIN;
    size_t per_job = count / jobs;
    return per_job < 1 ? 1 : per_job < BATCH_MIN ? per_job : BATCH_MIN;
}

/* Ops per batch: --batch-ops, or else enough batches for every -j job to
 * have two, but at least batch_floor's. */
static size_t batch_size(const gen_run *run, size_t count)
{
    if (run->opt.batch_ops)
        return run->opt.batch_ops;
    size_t jobs = (size_t)(run->opt.jobs > 0 ? run->opt.jobs : 1);
    size_t size = (count + 2 * jobs - 1) / (2 * jobs), floor = batch_floor(count, jobs);
    return size < floor ? floor : size;
}

static op_batch *new_batch(gen_run *run, job_set *js, size_t *cap, const gen_op *const *ops,
                           size_t n)
{
    grow_array((void **)&js->batches, cap, js->nbatches + 1, sizeof *js->batches);
    op_batch *b = &js->batches[js->nbatches++];
    *b = (op_batch){.n = n};
    b->members = xcalloc(n, sizeof *b->members);
    memcpy(b->members, ops, n * sizeof *ops);
    b->name = xasprintf("batch_%s", ops[0]->name);
    b->tu_path = xasprintf("%s/tu/%s/unit.c", run->rundir.path, b->name);
    return b;
}

/* The ops that must compile, cut into batches: each file's, in source order,
 * in as few batches of about equal size as `batch_size` allows. The cache
 * keys each op by its own unit, so what a batch held never matters to a
 * later run: a one-op edit compiles one op. */
static void plan_batches(gen_run *run, job_set *js)
{
    size_t count, cap = 0;
    bool *must = ops_to_compile(run, js, &count);
    size_t size = batch_size(run, count);
    long *batch_of = xcalloc(run->ops.count ? run->ops.count : 1, sizeof *batch_of);
    const gen_op **file = xcalloc(run->ops.count ? run->ops.count : 1, sizeof *file);
    for (size_t i = 0; i < run->ops.count;) { /* a file's ops are consecutive */
        size_t end = i, m = 0;
        for (; end < run->ops.count && !strcmp(run->ops.items[end].source,
                                               run->ops.items[i].source); end++) {
            batch_of[end] = -1;
            if (must[end])
                file[m++] = &run->ops.items[end];
        }
        size_t nb = (m + size - 1) / size;
        for (size_t k = 0; k < nb; k++) {
            size_t from = k * m / nb, to = (k + 1) * m / nb;
            new_batch(run, js, &cap, file + from, to - from);
            for (size_t x = from; x < to; x++)
                batch_of[file[x] - run->ops.items] = (long)js->nbatches - 1;
        }
        i = end;
    }
    for (size_t i = 0; i < js->count; i++)
        if (js->refs[i].op)
            js->refs[i].batch = batch_of[js->refs[i].op - run->ops.items];
    free(file);
    free(batch_of);
    free(must);
}

/* ---- which job compiles what */

/* An op its batch cannot stand for compiles from its own unit (its cache
 * entry keeps that unit's object). */
void batch_compile_alone(gen_run *run, job_set *js, size_t i)
{
    job_ref *ref = &js->refs[i];
    gen_job *job = &js->jobs[i];
    if (run->opt.verbose)
        diag_note_at(ref->op->source, ref->op->line, ref->op->col,
                     "op %s is compiled from its own unit: %s", op_display(ref->op), ref->alone);
    if (ref->op_label) { /* it led its batch: its job is its own again */
        free(job->label);
        job->label = ref->op_label;
        ref->op_label = NULL;
    }
    ref->leader = ref->rides = false;
    ref->solo = true;
    free(job->output);
    job->output = xasprintf("%s/%s/op_%s.o", run->rundir.path, ref->result->target->triple,
                            ref->op->name);
    free(ref->tu_path);
    ref->tu_path = xasprintf("%s/tu/%s/unit.c", run->rundir.path, ref->op->name);
    ref->unit.tu_path = ref->tu_path; /* the unit is not a dependency to record */
    job_argv_free(job);
    job->argv = flags_command(run, ref->result, ref->op, false, job->output, ref->tu_path);
    job->skip = false;
    job->status = 0;
}

/* A batched op compiles from its batch's unit: the cache must not record
 * that unit as one of its inputs (it is hashed as text). */
static void compile_in_batch(job_ref *ref, const op_batch *b)
{
    free(ref->tu_path);
    ref->tu_path = xstrdup(b->tu_path);
    ref->unit.tu_path = ref->tu_path;
}

/* Per target and batch, the first of its ops that must compile leads: its
 * job compiles the batch's unit, for it and for the other members (riders,
 * whose own jobs do not run). */
void batch_assign(gen_run *run, job_set *js)
{
    plan_batches(run, js);
    long *leader = xcalloc(js->nbatches ? js->nbatches : 1, sizeof *leader);
    const gen_target_result *target = NULL;
    for (size_t i = 0; i < js->count; i++) {
        job_ref *ref = &js->refs[i];
        gen_job *job = &js->jobs[i];
        if (ref->result != target) {
            target = ref->result;
            for (size_t b = 0; b < js->nbatches; b++)
                leader[b] = -1;
        }
        if (job->skip || !ref->batched)
            continue;
        if (ref->alone[0]) {
            batch_compile_alone(run, js, i);
            continue;
        }
        compile_in_batch(ref, &js->batches[ref->batch]);
        if (leader[ref->batch] >= 0) {
            ref->rides = job->skip = true;
            continue;
        }
        leader[ref->batch] = (long)i;
        const op_batch *b = &js->batches[ref->batch];
        ref->leader = true;
        ref->op_label = job->label;
        char *rel = manifest_relpath(&run->manifest, b->members[0]->source);
        const gen_op *first = b->members[0], *last = b->members[b->n - 1];
        job->label = first == last ? xasprintf("op %s of %s (%s)", op_display(first), rel,
                                               target->target->triple)
                                   : xasprintf("ops %s..%s of %s (%s)", op_display(first),
                                               op_display(last), rel, target->target->triple);
        free(rel);
        free(job->output);
        job->output = xasprintf("%s/%s/%s.o", run->rundir.path, target->target->triple, b->name);
        job_argv_free(job);
        job->argv = flags_command(run, ref->result, ref->op, true, job->output, ref->tu_path);
    }
    free(leader);
}

/* ---- errors */

/* The op compiled in batch b whose lines hold `line` (they are in source
 * order), or NULL for the text before the first. */
static const gen_op *op_at_line(const op_batch *b, unsigned line)
{
    const gen_op *found = NULL;
    for (size_t i = 0; i < b->n && b->members[i]->line <= line; i++)
        found = b->members[i];
    return found;
}

/* How many members of batch b are variants of op's definition (1 for an op
 * without variants); *from is the first. */
static size_t variants_in_batch(const op_batch *b, const gen_op *op, size_t *from)
{
    size_t n = 0;
    for (size_t i = 0; i < b->n; i++)
        if (b->members[i]->begin == op->begin && !strcmp(b->members[i]->source, op->source)) {
            if (!n)
                *from = i;
            n++;
        }
    return n;
}

/* The variants of `op` in the failed batch of `leader` compile alone next
 * (compile_the_alone), on this target: their own compiles say which holds the error. */
static void variants_alone(job_set *js, const job_ref *leader, const gen_op *op)
{
    for (size_t i = 0; i < js->count; i++) {
        job_ref *r = &js->refs[i];
        if (r->result == leader->result && r->batch == leader->batch && r->op &&
            r->op->begin == op->begin && !strcmp(r->op->source, op->source) && !r->alone[0])
            snprintf(r->alone, sizeof r->alone, "its batch did not compile, with an error in "
                     "op %s, whose variants share their lines", op->base);
    }
}

/* A batch that does not compile fails all its ops; the compiler's messages
 * point at the source (#line), and a note under them says which op, on which
 * target, each error is in. */
void batch_note_errors(job_set *js, const gen_job *job)
{
    const job_ref *ref = job->user;
    if (!ref || !ref->leader || job->status <= 0 || ref->extract_failed)
        return;
    const op_batch *b = &js->batches[ref->batch];
    uint8_t *log;
    size_t size;
    if (!read_file(job->log, &log, &size))
        return;
    const char *src = b->members[0]->source;
    size_t n = strlen(src);
    for (char *p = (char *)log, *end = p + size; p < end;) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *eol = nl ? nl : end;
        unsigned line, col;
        int used = 0;
        if ((size_t)(eol - p) > n && !memcmp(p, src, n) && p[n] == ':' &&
            sscanf(p + n, ":%u:%u: error:%n", &line, &col, &used) == 2 && used) {
            const gen_op *op = op_at_line(b, line);
            size_t from = 0, nv = op ? variants_in_batch(b, op, &from) : 0;
            if (nv > 1) {
                diag_note_at(src, line, col, "this error is in op %s, in one or more of its "
                             "variants %s..%s (%s; compiled in one unit with %s..%s); each of "
                             "them compiles alone next, to tell which",
                             op->base, op_display(b->members[from]),
                             op_display(b->members[from + nv - 1]),
                             ref->result->target->triple, op_display(b->members[0]),
                             op_display(b->members[b->n - 1]));
                variants_alone(js, ref, op);
            } else if (op) {
                diag_note_at(src, line, col, "this error is in op %s (%s; compiled in one unit "
                             "with %s..%s)", op_display(op), ref->result->target->triple,
                             op_display(b->members[0]), op_display(b->members[b->n - 1]));
            }
        }
        p = eol + 1;
    }
    free(log);
}
