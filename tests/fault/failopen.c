/* failopen.c - an LD_PRELOAD library that makes chosen writes fail, to test
 * how a program handles a write it cannot make.
 *
 *   FAILOPEN_MATCH=/tu/ FAILOPEN_ERRNO=5 LD_PRELOAD=libfailopen.so prog ...
 *
 * Every open/creat/openat (and their 64-bit names) of a path containing
 * FAILOPEN_MATCH (and not FAILOPEN_SPARE, when set), with O_WRONLY, O_RDWR or
 * O_CREAT, fails with FAILOPEN_ERRNO (default EIO); so does mkdir of such a
 * path. Reads are never affected. FAILRENAME_MATCH likewise makes rename()
 * onto a path containing it fail (only from a path containing FAILRENAME_FROM,
 * when set: a rename across mount points). FAILEXCHANGE_ERRNO=N makes every exchange
 * (renameat2 with RENAME_EXCHANGE) fail with errno N, as on a filesystem
 * that has none (EINVAL).
 *
 * FAILOPEN_DELAY_MATCH=S FAILOPEN_DELAY_MS=T: the first open of a path
 * containing S, reading or writing, waits T milliseconds first: a race window
 * held open, so a test can act in it. With FAILOPEN_DELAY_AFTER_RENAME=R, the
 * first such open after a rename (or exchange) onto a path containing R. */
/* Both the plain and the 64-bit names are defined here, so the headers must
 * not rename one into the other. */
#undef _FILE_OFFSET_BITS
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h> /* renameat2 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

static bool matches(const char *path, const char *match_var, const char *spare_var)
{
    const char *match = getenv(match_var);
    const char *spare = spare_var ? getenv(spare_var) : NULL;
    return match && *match && path && strstr(path, match) &&
           !(spare && *spare && strstr(path, spare));
}

/* Whether this call is to fail; if so, errno is set. */
static bool refused(const char *path, const char *match_var, const char *spare_var)
{
    if (!matches(path, match_var, spare_var))
        return false;
    const char *e = getenv("FAILOPEN_ERRNO");
    errno = e && atoi(e) > 0 ? atoi(e) : EIO;
    return true;
}

static int renamed; /* FAILOPEN_DELAY_AFTER_RENAME's rename happened, in this process */

static void note_rename(const char *to)
{
    if (matches(to, "FAILOPEN_DELAY_AFTER_RENAME", NULL))
        __atomic_store_n(&renamed, 1, __ATOMIC_SEQ_CST);
}

static void delay_open(const char *path)
{
    static int delayed;
    const char *after = getenv("FAILOPEN_DELAY_AFTER_RENAME"), *ms = getenv("FAILOPEN_DELAY_MS");
    if (!matches(path, "FAILOPEN_DELAY_MATCH", NULL) || !ms || atoi(ms) <= 0 ||
        (after && *after && !__atomic_load_n(&renamed, __ATOMIC_SEQ_CST)) ||
        __atomic_exchange_n(&delayed, 1, __ATOMIC_SEQ_CST))
        return;
    struct timespec t = {atoi(ms) / 1000, (long)(atoi(ms) % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0 && errno == EINTR)
        ;
}

static bool refused_open(const char *path, int flags)
{
    delay_open(path);
    return (flags & (O_WRONLY | O_RDWR | O_CREAT)) &&
           refused(path, "FAILOPEN_MATCH", "FAILOPEN_SPARE");
}

static mode_t mode_arg(int flags, va_list ap)
{
    return (flags & (O_CREAT | O_TMPFILE)) ? (mode_t)va_arg(ap, int) : 0;
}

typedef int open_fn(const char *, int, ...);
typedef int openat_fn(int, const char *, int, ...);

#define WRAP_OPEN(name)                                                                       \
    int name(const char *path, int flags, ...)                                                \
    {                                                                                         \
        va_list ap;                                                                           \
        va_start(ap, flags);                                                                  \
        mode_t mode = mode_arg(flags, ap);                                                    \
        va_end(ap);                                                                           \
        return refused_open(path, flags) ? -1                                                 \
                                         : ((open_fn *)dlsym(RTLD_NEXT, #name))(path, flags, mode); \
    }

#define WRAP_OPENAT(name)                                                                     \
    int name(int dirfd, const char *path, int flags, ...)                                     \
    {                                                                                         \
        va_list ap;                                                                           \
        va_start(ap, flags);                                                                  \
        mode_t mode = mode_arg(flags, ap);                                                    \
        va_end(ap);                                                                           \
        return refused_open(path, flags)                                                      \
                   ? -1                                                                       \
                   : ((openat_fn *)dlsym(RTLD_NEXT, #name))(dirfd, path, flags, mode);        \
    }

WRAP_OPEN(open)
WRAP_OPEN(open64)
WRAP_OPENAT(openat)
WRAP_OPENAT(openat64)

int creat(const char *path, mode_t mode)
{
    return open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
}

int creat64(const char *path, mode_t mode)
{
    return open64(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
}

int mkdir(const char *path, mode_t mode)
{
    typedef int mkdir_fn(const char *, mode_t);
    return refused_open(path, O_CREAT) ? -1 : ((mkdir_fn *)dlsym(RTLD_NEXT, "mkdir"))(path, mode);
}

int rename(const char *from, const char *to)
{
    typedef int rename_fn(const char *, const char *);
    note_rename(to);
    const char *src = getenv("FAILRENAME_FROM");
    bool from_matches = !src || !*src || (from && strstr(from, src));
    return from_matches && refused(to, "FAILRENAME_MATCH", NULL)
               ? -1
               : ((rename_fn *)dlsym(RTLD_NEXT, "rename"))(from, to);
}

int renameat2(int from_dir, const char *from, int to_dir, const char *to, unsigned flags)
{
    typedef int renameat2_fn(int, const char *, int, const char *, unsigned);
    const char *e = getenv("FAILEXCHANGE_ERRNO");
    note_rename(to);
    if ((flags & RENAME_EXCHANGE) && e && atoi(e) > 0) {
        errno = atoi(e);
        return -1;
    }
    return ((renameat2_fn *)dlsym(RTLD_NEXT, "renameat2"))(from_dir, from, to_dir, to, flags);
}
