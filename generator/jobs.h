/* jobs.h - a run's compile jobs, one per target for the shim and each op
 * (or each batch of a file's ops, docs/build.md, "Batched units"): taken from the
 * cache, or compiled and each object checked into its stencil (verify.h). */
#ifndef STENCILGEN_JOBS_H
#define STENCILGEN_JOBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "compile.h"
#include "opunit.h"
#include "run.h"

typedef struct job_ref {
    gen_target_result *result;
    gen_stencil *stencil;
    const gen_op *op; /* NULL for the shim */
    bool extract_failed;
    inc_unit unit;  /* the compile as the cache knows it */
    char *deps;     /* the compile's depfile text, for this build's depfile */
    op_key tu_key;  /* what its cache key takes from its own unit */
    char *tu_file;  /* its file as __FILE__ names it, for its cache key */
    char *tu_path;  /* where the unit is written when the op must be compiled */
    bool batched;      /* batched units: its entry holds its batch's object */
    long batch;        /* its batch in job_set.batches when it compiles in one, else -1 */
    bool leader;       /* its job compiles the batch for every member that must compile */
    bool rides;        /* compiled by its batch's leader: its own job does not run */
    char *op_label;    /* a leader's own label (its job's names the batch) */
    char alone[256];   /* why its batch cannot stand for it (split.h): compiled alone */
    bool solo;         /* ... which it is, in this run */
} job_ref;

/* Ops of one file compiled as one unit (docs/build.md, "Batched units"). */
typedef struct op_batch {
    const gen_op **members; /* consecutive ops of one file that must compile, in order */
    size_t n;
    char *name;     /* "batch_<first op>": its unit's and its objects' name */
    char *tu_path;  /* RUNDIR/tu/<name>/unit.c */
    bool written;   /* its unit is in tu_path */
} op_batch;

/* The flags of one target's commands of one kind for one source (the shim's,
 * an op's own unit's, a batch's), which the jobs' commands begin with. */
typedef struct shared_command {
    const gen_target_result *result;
    const char *source; /* NULL for the shim */
    bool batched;
    gen_shared_args args;
} shared_command;

typedef struct job_set {
    gen_job *jobs;
    job_ref *refs; /* refs[i] describes jobs[i] */
    size_t count, cap;
    op_batch *batches;
    size_t nbatches;
    shared_command **shared; /* not moved: jobs point at their args */
    size_t nshared, shared_cap;
} job_set;

/* Fill every target's stencils (run->results): an exit code, after the
 * diagnostics of every op that failed. */
int jobs_run(gen_run *run, job_set *js);
void jobs_free(job_set *js);

#endif
