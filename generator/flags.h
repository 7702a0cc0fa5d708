/* flags.h - the clang command lines of a run: discovery's parse, every op's
 * compile and the shim's (whole: launcher, compiler, flags, depfile, input and
 * object), and a compile's preprocess, each flag with the reason it is there. */
#ifndef STENCILGEN_FLAGS_H
#define STENCILGEN_FLAGS_H

#include "compile.h"
#include "discover.h"
#include "manifest.h"
#include "run.h"
#include "target.h"

/* What the flags depend on besides the source. */
typedef struct gen_flag_inputs {
    const gen_manifest *manifest;
    const gen_target *target;
    const gen_manifest_target *mt;  /* the manifest's entry for the target, or NULL */
    const char *extra_cflags;      /* --extra-cflags, or NULL */
    const char *extra_shim_cflags; /* --extra-shim-cflags, or NULL */
    const char *op_template_dir;   /* holds stencil_op.h (flags_op_template_dir) */
} gen_flag_inputs;

/* WORKDIR/include, holding the generic op template stencil_op.h as this
 * generator carries it (written when absent or different), for every compile
 * to find after the manifest's include directories. NULL after a diagnostic.
 * Caller frees. */
char *flags_op_template_dir(const char *workdir);

/* libclang's parse of an op source, to find its ops. */
void flags_discover(gen_argv *a, const gen_flag_inputs *in);
/* Compiling `op` from its translation unit (the caller adds -c UNIT). */
void flags_op(gen_argv *a, const gen_flag_inputs *in, const gen_op *op);
/* A batched unit of ops from `source`: the op flags, each function and
 * object in its own section, and -DSTENCILGEN_BATCH. */
void flags_batch(gen_argv *a, const gen_flag_inputs *in, const char *source);
/* Compiling the shim. */
void flags_shim(gen_argv *a, const gen_flag_inputs *in);

/* The inputs of the run's command lines for target r. */
gen_flag_inputs flags_inputs(const gen_run *run, const gen_target_result *r);
/* A compile's whole command (NULL-terminated; argv_free): [launcher] clang,
 * the shim's flags (op NULL), an op's own unit's or its batch's (batch), then
 * its depfile OUTPUT.d, its input (the shim's source, or `unit`) and OUTPUT. */
char **flags_command(const gen_run *run, const gen_target_result *r, const gen_op *op, bool batch,
                     const char *output, const char *unit);
/* flags_command in two parts: what every job of `r` with the same kind of
 * command and the same source shares (the compiler and its flags), and the
 * whole command made from those n strings (their pointers copied, not the
 * strings) and what is the job's own (op name, depfile, unit, object). */
char **flags_command_shared(const gen_run *run, const gen_target_result *r, const gen_op *op,
                           bool batch);
char **flags_command_after(char *const *shared, size_t n, const gen_run *run, const gen_op *op,
                           bool batch, const char *output, const char *unit);
/* A compile's command (flags_command's) as a preprocess for the clang
 * module's driver `clang`: no launcher, no object and no depfile. */
char **flags_preprocess(char *const *argv, bool launcher, const char *clang);

#endif
