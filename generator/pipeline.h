/* pipeline.h - one run of the generator, stage by stage (the run's data: run.h). */
#ifndef STENCILGEN_PIPELINE_H
#define STENCILGEN_PIPELINE_H

#include "run.h"

/* Run a command end to end; returns the process exit code. */
int pipeline_run(const gen_options *opt);

#endif
