/* sample.h - what the tool does with a stopped process: print every
 * thread's stack once, or sample them all at a rate and write folded stacks,
 * the hottest ops and every stack of every sample. */
#ifndef STENCILRT_STACK_SAMPLE_H
#define STENCILRT_STACK_SAMPLE_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "attach.h"
#include "unwind.h"

/* Prints every thread's stack (stop, unwind, resume). False if nothing stopped. */
bool print_stacks(target *t, unwinder *u, FILE *out);

typedef struct sample_opts {
    double hz, seconds;
    FILE *folded;      /* --output, or stdout */
    FILE *samples_out; /* --samples-out, or NULL */
    volatile sig_atomic_t *stop; /* set by SIGINT/SIGTERM: end early, cleanly */
} sample_opts;

typedef struct sample_stats {
    uint64_t samples, stacks, jit_frames, unresolved, missed_ticks;
    double elapsed; /* seconds from the first sample to the end */
} sample_stats;

/* Samples until the duration ends, the process exits or *stop is set;
 * writes the folded stacks and the summary (on stderr). */
int sample_run(target *t, unwinder *u, const sample_opts *o, sample_stats *st);

#endif
