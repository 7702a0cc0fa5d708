/* outputs.h - the files a build publishes, all or nothing: every file is
 * written to a temporary beside its destination first, and renamed into place
 * only when all were written, so a failed run leaves the previous outputs. */
#ifndef STENCILGEN_OUTPUTS_H
#define STENCILGEN_OUTPUTS_H

#include <stdbool.h>

#include "compile.h"
#include "pipeline.h"
#include "util.h"

typedef struct sg_output {
    char *path;
    strbuf content;
} sg_output;

typedef struct sg_outputs {
    sg_output *items;
    size_t count, cap;
} sg_outputs;

void outputs_add(sg_outputs *o, char *path, strbuf content); /* takes ownership */
bool outputs_publish(sg_outputs *o);                          /* frees o */
void outputs_discard(sg_outputs *o);

/* Make-style depfile naming `target`: manifest, template, shim, op sources and
 * every header the compiler reported (from the jobs' .d files). */
strbuf outputs_depfile(const sg_run *run, const sg_job *jobs, size_t n, const char *target);
/* compile_commands.json for clangd: the exact command of every compile. */
strbuf outputs_compile_commands(const sg_job *jobs, size_t n);

#endif
