/* rundir.c - see rundir.h. A run directory holds "lock", a file the owner
 * keeps flock()ed. It is created as "lock.new", locked, then renamed, so a
 * "lock" that can be locked by someone else belongs to a dead run. */
#define _GNU_SOURCE
#include "rundir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

#define PREFIX "run."
/* A directory without its lock yet is either being created right now or was
 * left by a run killed in that instant: only the second kind is this old. */
#define UNLOCKED_GRACE_S 3600

/* Remove `dir` if the run that made it is gone. The lock is held while
 * removing, so two sweepers never remove the same directory at once. */
static void remove_if_dead(const char *dir)
{
    char *lock = path_join(dir, "lock");
    int fd = open(lock, O_RDWR | O_CLOEXEC);
    free(lock);
    if (fd < 0) {
        struct stat st;
        if (stat(dir, &st) == 0 && time(NULL) - st.st_mtime > UNLOCKED_GRACE_S)
            remove_tree(dir);
        return;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) == 0)
        remove_tree(dir);
    close(fd);
}

static void sweep_dead_runs(const char *workdir)
{
    DIR *d = opendir(workdir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, PREFIX, strlen(PREFIX)))
            continue;
        char *dir = path_join(workdir, e->d_name);
        remove_if_dead(dir);
        free(dir);
    }
    closedir(d);
}

/* A name no other run picks: the process and 32 random bits. */
static char *fresh_name(const char *workdir)
{
    uint32_t r = 0;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
        r = (uint32_t)time(NULL) ^ (uint32_t)clock();
    return xasprintf("%s/" PREFIX "%ld-%08x", workdir, (long)getpid(), r);
}

void rundir_reserve(const char *workdir, gen_rundir *out)
{
    sweep_dead_runs(workdir);
    *out = (gen_rundir){fresh_name(workdir), -1};
}

bool rundir_open(gen_rundir *r)
{
    if (r->lock_fd >= 0)
        return true;
    if (mkdir(r->path, 0700) != 0)
        return false;
    char *fresh = path_join(r->path, "lock.new"), *lock = path_join(r->path, "lock");
    int fd = open(fresh, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    bool ok = fd >= 0 && flock(fd, LOCK_EX) == 0 && rename(fresh, lock) == 0;
    int saved = errno;
    free(fresh);
    free(lock);
    if (!ok) {
        if (fd >= 0)
            close(fd);
        remove_tree(r->path);
        errno = saved;
        return false;
    }
    r->lock_fd = fd;
    return true;
}

void rundir_remove(gen_rundir *r)
{
    if (!r->path)
        return;
    if (r->lock_fd >= 0) {
        remove_tree(r->path);
        close(r->lock_fd);
    }
    free(r->path);
    *r = (gen_rundir){NULL, -1};
}

void rundir_keep(const char *workdir, const char *triple, const char *object,
                 const char *unit_name, const char *unit)
{
    const char *base = strrchr(object, '/');
    char *dest = xasprintf("%s/%s%s", workdir, triple, base ? base : "/");
    rename(object, dest);
    free(dest);
    if (!unit_name)
        return;
    /* Linked, not moved: every target's job compiles the same unit. */
    char *kept = xasprintf("%s/tu/%s/unit.c", workdir, unit_name);
    char *fresh = xasprintf("%s.%ld", kept, (long)getpid());
    char *dir = path_dirname(kept);
    if (mkdir_p(dir) && link(unit, fresh) == 0) {
        rename(fresh, kept);
        unlink(fresh); /* left when kept already was this file (rename does nothing then) */
    }
    free(dir);
    free(fresh);
    free(kept);
}
