/* manifest.h - the YAML manifest that lists a JIT's targets, template, shim and ops. */
#ifndef STENCILGEN_MANIFEST_H
#define STENCILGEN_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct gen_loc {
    unsigned line, col; /* 1-based position in the manifest */
} gen_loc;

typedef struct gen_strlist {
    char **items;
    gen_loc *locs;
    size_t count, cap;
} gen_strlist;

/* A pinned frame shape: any difference from the derived one fails the build. */
typedef struct gen_frame_pin {
    char *cfa_register; /* e.g. "rbp" */
    int64_t cfa_offset;
    int64_t fp_offset;  /* where the caller's FP is saved, relative to the CFA */
    int64_t ra_offset;  /* where the return address is saved, relative to the CFA */
    gen_loc loc;
} gen_frame_pin;

typedef struct gen_manifest_target {
    char *triple;
    gen_loc loc;
    gen_strlist cflags;      /* appended to every op compile for this target */
    gen_strlist shim_cflags; /* appended to the shim compile for this target */
    bool has_pin;
    gen_frame_pin pin;
} gen_manifest_target;

typedef struct gen_manifest {
    char *path;          /* as given on the command line */
    char *dir;           /* absolute directory of the manifest; relative paths start here */
    char *template_path; /* absolute */
    gen_loc template_loc;
    char *shim_source;   /* absolute */
    gen_loc shim_loc;
    char *shim_function;
    gen_strlist op_sources;   /* absolute paths */
    gen_strlist include_dirs; /* absolute paths */
    gen_strlist defines;      /* NAME or NAME=VALUE */
    gen_strlist cflags;       /* appended to every op compile */
    gen_strlist symbols;      /* run-time symbols stencils may reference */
    gen_manifest_target *targets;
    size_t ntargets, targets_cap;
} gen_manifest;

/* Load and validate; on failure prints "manifest:line:col: error: ..." and
 * returns false (exit code SG_EXIT_USAGE). Either way m is to be freed with
 * manifest_free. Input larger than 1 MiB or nested deeper than 8 levels is
 * refused before it is parsed. */
bool manifest_load(const char *path, gen_manifest *m);
/* The same from bytes in memory; `path` names them in messages and anchors
 * relative paths (the files they name are checked to exist). */
bool manifest_parse(const uint8_t *text, size_t size, const char *path, gen_manifest *m);
void manifest_free(gen_manifest *m);

/* Path relative to the manifest directory (caller frees), for generated comments:
 * they must not depend on where the project is checked out. */
char *manifest_relpath(const gen_manifest *m, const char *abs);

#endif
