/* rundir.h - one private directory per run inside the work directory.
 *
 * The work directory may be shared (one --cache-dir for several checkouts, CI
 * jobs or worktrees building at once). Everything a run writes for itself
 * alone (op units, objects, depfiles, compiler logs) goes to its own run.XXXXXX
 * directory, so no run ever compiles or reads another run's files; only the
 * cache (see cache.h) is shared. A live run holds a lock on its directory, so
 * the next run removes what killed runs left behind without touching live ones. */
#ifndef STENCILGEN_RUNDIR_H
#define STENCILGEN_RUNDIR_H

typedef struct sg_rundir {
    char *path;
    int lock_fd;
} sg_rundir;

/* Create (and lock) a run directory under `workdir`, removing those of dead
 * runs first. False with errno set when it cannot be created. */
_Bool rundir_create(const char *workdir, sg_rundir *out);
/* Remove it and release the lock. */
void rundir_remove(sg_rundir *r);

#endif
