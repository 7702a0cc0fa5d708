/* run.h - what one run of the generator holds and produces, target by
 * target: data only. pipeline.c fills it stage by stage; jobs.c and the
 * modules it drives read and fill their parts. */
#ifndef STENCILGEN_RUN_H
#define STENCILGEN_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "discover.h"
#include "frame_shape.h"
#include "incremental.h"
#include "llvm_bridge.h"
#include "manifest.h"
#include "rundir.h"
#include "stencil.h"
#include "target.h"

/* How ops are grouped into translation units (docs/build.md, "Batched units"). */
typedef enum gen_units {
    SG_UNITS_PER_OP,  /* one unit and one compile per op */
    SG_UNITS_BATCHED, /* the ops of a file in batches, each batch one compile */
} gen_units;

typedef struct gen_options {
    const char *command;   /* "build", "check" or "dump" */
    const char *manifest;
    const char **targets;  /* --target (empty: the manifest's) */
    size_t ntargets;
    const char *outdir;
    int jobs;
    const char *cache_dir;
    const char *depfile;
    const char *clang;
    const char *launcher;
    bool exec_clang; /* start the clang executable even for the clang the generator links */
    const char *compile_commands;
    const char *extra_cflags;
    const char *extra_shim_cflags;
    const char *dump_op;
    double compile_timeout; /* seconds per compile */
    gen_units units;
    unsigned batch_ops; /* batched units: ops a batch holds (0: spread over the -j jobs) */
    int verbose; /* -v: counts and phase times; -vv: also every compiler command */
    bool no_hot_cold; /* --no-hot-cold: ops are one part (docs/design.md, "Hot and cold parts") */
    bool no_listing; /* headers without the disassembly listing (docs/build.md, "Prebuilt headers") */
    uint64_t cache_max_size; /* --cache-max-size: the bound on the cache's blobs (0: none) */
} gen_options;

typedef struct gen_target_result {
    const gen_target *target;
    const gen_manifest_target *mt;
    gen_stencil *ops;  /* one per discovered op, in op order */
    size_t *twin;      /* per op, the op whose stencil it uses: itself, or a variant it folds into */
    gen_stencil shim;
    gen_unwind unwind; /* derived from the shim */
    bool landing_pads; /* every op and the shim start with one (verify_landing_pads) */
    lb_disasm *disasm;
    size_t compiled;  /* ops compiled for this target in this run */
    size_t cached;    /* ops taken from the cache */
    size_t stencils_cached; /* of those, ops whose checked stencil was cached (no object read) */
} gen_target_result;

typedef struct gen_run {
    gen_options opt;
    gen_manifest manifest;
    gen_oplist ops;
    gen_target_result *results;
    size_t nresults;
    char *workdir;    /* the cache lives here (--cache-dir, else OUTDIR/.stencilgen) */
    gen_rundir rundir; /* this run's own files: units, objects, logs */
    char *clang;      /* resolved compiler path */
    char *compiler_prefix; /* its installation: the directory above its real bin/ (provenance.h) */
    char compiler_version[32]; /* what it says it is ("19.1.7"), once a header needs it */
    char *op_template_dir; /* WORKDIR/include: stencil_op.h for every compile */
    struct gen_cache *cache;
    gen_incremental inc; /* the cache protocol, over `cache` */
    size_t compiles;    /* compiler runs that produced an object (ops, batches, the shim) */
    bool compiled_in_process; /* ... by clang's main in forked children (compile.h) */
    size_t key_bytes;   /* bytes of op sources hashed for the ops' keys (op_keys_for_file) */
    bool memo_hit;      /* the outputs on disk are what this run would write (memo.h) */
    strbuf memo_summary; /* ... and the summary to print */
} gen_run;

#endif
