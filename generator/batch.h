/* batch.h - batched units' policy (docs/build.md, "Batched units"): the ops
 * that must compile, cut into batches of a file's ops; which job compiles each
 * batch for the others, and which ops a batch cannot stand for and compile
 * from their own units; which op of a batch a compile error is in. */
#ifndef STENCILGEN_BATCH_H
#define STENCILGEN_BATCH_H

#include <stddef.h>

#include "jobs.h"

/* After the cache was asked: cut the ops that must compile into batches
 * (js->batches), and make each target's first member that must compile lead
 * its batch's compile; the other members ride on it. An op marked alone
 * compiles from its own unit (batch_compile_alone). */
void batch_assign(gen_run *run, job_set *js);
/* Job i compiles its op from the op's own unit, which its batch cannot
 * stand for (ref->alone says why; -v notes it). */
void batch_compile_alone(gen_run *run, job_set *js, size_t i);
/* For a batch whose compile failed: a note under each of the compiler's
 * errors naming the op and target it is in. An error in an op of which the
 * batch holds several variants cannot tell which variant it is in (they
 * share their lines): those variants are marked to compile alone next,
 * where each one's own compile names it. */
void batch_note_errors(job_set *js, const gen_job *job);

#endif
