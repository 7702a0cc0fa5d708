/* manifest.h - the YAML manifest that lists a JIT's targets, template, shim and ops. */
#ifndef STENCILGEN_MANIFEST_H
#define STENCILGEN_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sg_loc {
    unsigned line, col; /* 1-based position in the manifest */
} sg_loc;

typedef struct sg_strlist {
    char **items;
    sg_loc *locs;
    size_t count, cap;
} sg_strlist;

/* A pinned frame shape: any difference from the derived one fails the build. */
typedef struct sg_frame_pin {
    char *cfa_register; /* e.g. "rbp" */
    int64_t cfa_offset;
    int64_t fp_offset;  /* where the caller's FP is saved, relative to the CFA */
    int64_t ra_offset;  /* where the return address is saved, relative to the CFA */
    sg_loc loc;
} sg_frame_pin;

typedef struct sg_manifest_target {
    char *triple;
    sg_loc loc;
    sg_strlist cflags;      /* appended to every op compile for this target */
    sg_strlist shim_cflags; /* appended to the shim compile for this target */
    bool has_pin;
    sg_frame_pin pin;
} sg_manifest_target;

typedef struct sg_manifest {
    char *path;          /* as given on the command line */
    char *dir;           /* absolute directory of the manifest; relative paths start here */
    char *template_path; /* absolute */
    sg_loc template_loc;
    char *shim_source;   /* absolute */
    sg_loc shim_loc;
    char *shim_function;
    sg_strlist op_sources;   /* absolute paths */
    sg_strlist include_dirs; /* absolute paths */
    sg_strlist defines;      /* NAME or NAME=VALUE */
    sg_strlist cflags;       /* appended to every op compile */
    sg_strlist symbols;      /* run-time symbols stencils may reference */
    sg_manifest_target *targets;
    size_t ntargets, targets_cap;
} sg_manifest;

/* Load and validate; on failure prints "manifest:line:col: error: ..." and
 * returns false (exit code SG_EXIT_USAGE). Either way m is to be freed with
 * manifest_free. Input larger than 1 MiB or nested deeper than 8 levels is
 * refused before it is parsed. */
bool manifest_load(const char *path, sg_manifest *m);
/* The same from bytes in memory; `path` names them in messages and anchors
 * relative paths (the files they name are checked to exist). */
bool manifest_parse(const uint8_t *text, size_t size, const char *path, sg_manifest *m);
void manifest_free(sg_manifest *m);

/* Path relative to the manifest directory (caller frees), for generated comments:
 * they must not depend on where the project is checked out. */
char *manifest_relpath(const sg_manifest *m, const char *abs);

#endif
