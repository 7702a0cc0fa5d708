/* outputs.h - the files a build publishes, all or nothing. Every destination
 * is checked first (absent, or a file a rename can replace); every file is
 * written to a temporary beside it (or to its spare, below); only then is each
 * renamed into place, keeping a hard link to the file it replaces, and if any
 * rename fails the replaced files are put back, so a failed run leaves the
 * previous outputs exactly as they were (same bytes, inode and mtime). A run
 * killed during the renames themselves can leave some files new and others
 * old; the build system re-runs the generator after a failed or killed
 * command, which rewrites all. Temporaries such a run left behind are removed
 * by a later publish.
 *
 * Spares: deleting a replaced header of megabytes cost ext4 2-16 ms (its
 * blocks freed through the journal), a fifth of a one-op edit's time besides
 * compiling for 5 headers. An output with a spare is written over its spare
 * file instead, and the two are exchanged (renameat2 RENAME_EXCHANGE): the
 * spare then holds the replaced output, whose blocks the next publish writes
 * over, and no file is deleted. A spare is written over only while nobody
 * else has it: one hard link, and no other open file or mapping (a write
 * lease is granted, fcntl(2)); otherwise it is replaced by a fresh file. */
#ifndef STENCILGEN_OUTPUTS_H
#define STENCILGEN_OUTPUTS_H

#include <stdbool.h>
#include <sys/stat.h>

#include "compile.h"
#include "util.h"

typedef struct gen_output {
    char *path;
    strbuf content;
    char *spare;    /* its spare (outputs_use_spares), or NULL */
    char *temp;     /* staged: the file written (a temporary beside path, or the spare), or NULL */
    bool in_spare;  /* staged: temp is the spare */
    bool unchanged; /* staged: path already holds content (nothing written) */
    bool staged;
    int fd;         /* staged: the file this run leaves at path (temp, or path if unchanged),
                       open read-only, or -1: the memo's facts are its, not the path's */
} gen_output;

typedef struct gen_outputs {
    gen_output *items;
    size_t count, cap;
    int spare_lock; /* outputs_use_spares: the spares' lock, held until publish or discard */
    bool locked;
} gen_outputs;

void outputs_add(gen_outputs *o, char *path, strbuf content); /* takes ownership */
/* Give every output now in the set a spare in `dir` (made if need be), named
 * as the output is: for outputs a file in dir can be renamed to (one
 * filesystem, one mount point of it). A run holds the spares while it stages and publishes (a lock in
 * dir); when another run holds them, or dir cannot serve, outputs are staged
 * beside their paths as without spares. */
void outputs_use_spares(gen_outputs *o, const char *dir);
/* Whether the n paths name n different files (through "..", symlinks and hard
 * links too); otherwise says which two collide, by what[i]. */
bool outputs_distinct(const char *const *paths, const char *const *what, size_t n);
/* Make the destinations' directories and check each is absent or a file a
 * rename can replace; says which is not. Publishing does it for every output
 * before writing any; a caller staging outputs early does it first. */
bool outputs_ready(const gen_outputs *o);
/* Write one output's temporary beside it, unless the file there already holds
 * its content. Several threads may stage different outputs of one set, so it
 * prints nothing: false leaves errno for the caller to report. */
bool outputs_stage(gen_output *item);
/* Stages what is not yet, publishes, frees o. When `published` is not NULL it
 * receives, for each output, what the file this run put (or left) at its
 * path is once published (fstat of the file itself, so another build that
 * replaced it since cannot be taken for this one's); st_ino 0 where unknown. */
bool outputs_publish(gen_outputs *o, struct stat *published);
/* Remove temporaries of `path` left behind by runs killed while publishing
 * (publishing does it too). */
void outputs_remove_stale_temps(const char *path);
void outputs_discard(gen_outputs *o); /* and any temporary staged */

/* Append the prerequisites listed in a compiler-written depfile (absolute paths). */
void outputs_parse_deps(const uint8_t *text, size_t size, char ***list, size_t *count,
                        size_t *cap);

typedef struct gen_depfile_inputs {
    const char *manifest; /* the manifest's path */
    char *const *sources; /* the op sources, absolute */
    size_t nsources;
    const char *workdir;  /* the generator's own files: never prerequisites */
} gen_depfile_inputs;
/* Make-style depfile naming `target`: the manifest, the op sources, and every
 * file the compiles read (deps[i]: the text of a compiler-written depfile; NULL
 * entries skipped) except the generator's own files under its work directory.
 * False (exit 2) when a path cannot be written in a depfile at all. */
bool outputs_depfile(const gen_depfile_inputs *in, char *const *deps, size_t n,
                     const char *target, strbuf *out);
/* compile_commands.json for clangd: the exact command of every compile. */
/* sources[i], when not NULL, replaces the translation unit job i compiles, so
 * clangd sees the op's real file. Paths under `run_dir` (a run's private
 * directory, gone when it ends) are written under `kept_dir` instead, so the
 * file is the same from run to run. */
strbuf outputs_compile_commands(const gen_job *jobs, size_t n, const char *const *sources,
                                const char *run_dir, const char *kept_dir);

#endif
