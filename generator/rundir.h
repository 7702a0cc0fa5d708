/* rundir.h - one private directory per run inside the work directory.
 *
 * The work directory may be shared (one --cache-dir for several checkouts, CI
 * jobs or worktrees building at once). Everything a run writes for itself
 * alone (op units, objects, depfiles, compiler logs) goes to its own run.XXXXXX
 * directory, so no run ever compiles or reads another run's files; only the
 * cache (see cache.h) is shared. A live run holds a lock on its directory, so
 * the next run removes what killed runs left behind without touching live ones.
 * The directory is made only when something is compiled: a no-op run creates
 * no file (on ext4, new inodes were a large part of a no-op's time). */
#ifndef STENCILGEN_RUNDIR_H
#define STENCILGEN_RUNDIR_H

typedef struct gen_rundir {
    char *path;
    int lock_fd; /* -1 until the directory exists (rundir_open) */
} gen_rundir;

/* Name a run directory under `workdir`, removing those of dead runs first;
 * nothing is created yet: a run that compiles nothing never makes one. */
void rundir_reserve(const char *workdir, gen_rundir *out);
/* Create (and lock) the reserved directory, once; false with errno set when
 * it cannot be created. */
_Bool rundir_open(gen_rundir *r);
/* The last object built for each op stays in WORKDIR/<triple>/ (moved
 * there from `object`), and the unit it compiled (`unit`, for an op: NULL
 * for the shim) in WORKDIR/tu/<unit_name>/unit.c, for people, tests and
 * benchmarks to inspect; the generator itself never reads them back. */
void rundir_keep(const char *workdir, const char *triple, const char *object,
                 const char *unit_name, const char *unit);
/* Remove it (if it was made) and release the lock. */
void rundir_remove(gen_rundir *r);

#endif
