/* failopen.c - an LD_PRELOAD library that makes opening a file for writing
 * fail, to test how a program handles a write it cannot make.
 *
 *   FAILOPEN_MATCH=/tu/ FAILOPEN_ERRNO=5 LD_PRELOAD=libfailopen.so prog ...
 *
 * Every open/creat/openat (and their 64-bit names) of a path containing
 * FAILOPEN_MATCH (and not FAILOPEN_SPARE, when set), with O_WRONLY, O_RDWR or
 * O_CREAT, fails with FAILOPEN_ERRNO (default EIO); so does mkdir of such a
 * path. Reads are never affected.
 *
 * FAILRENAME_MATCH likewise makes rename() onto a path containing it fail. */
/* Both the plain and the 64-bit names are defined here, so the headers must
 * not rename one into the other. */
#undef _FILE_OFFSET_BITS
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

static int injected_errno(const char *path, int flags)
{
    const char *match = getenv("FAILOPEN_MATCH");
    const char *spare = getenv("FAILOPEN_SPARE");
    if (!match || !*match || !path || !strstr(path, match) || (spare && *spare && strstr(path, spare)))
        return 0;
    if (!(flags & (O_WRONLY | O_RDWR | O_CREAT)))
        return 0;
    const char *e = getenv("FAILOPEN_ERRNO");
    int err = e ? atoi(e) : 0;
    return err > 0 ? err : EIO;
}

static mode_t mode_arg(int flags, va_list ap)
{
    return (flags & (O_CREAT | O_TMPFILE)) ? (mode_t)va_arg(ap, int) : 0;
}

#define WRAP_OPEN(name)                                                                       \
    int name(const char *path, int flags, ...)                                                \
    {                                                                                         \
        va_list ap;                                                                           \
        va_start(ap, flags);                                                                  \
        mode_t mode = mode_arg(flags, ap);                                                    \
        va_end(ap);                                                                           \
        int err = injected_errno(path, flags);                                                \
        if (err) {                                                                            \
            errno = err;                                                                      \
            return -1;                                                                        \
        }                                                                                     \
        int (*real)(const char *, int, ...) = (int (*)(const char *, int, ...))dlsym(         \
            RTLD_NEXT, #name);                                                                \
        return real(path, flags, mode);                                                       \
    }

#define WRAP_OPENAT(name)                                                                     \
    int name(int dirfd, const char *path, int flags, ...)                                     \
    {                                                                                         \
        va_list ap;                                                                           \
        va_start(ap, flags);                                                                  \
        mode_t mode = mode_arg(flags, ap);                                                    \
        va_end(ap);                                                                           \
        int err = injected_errno(path, flags);                                                \
        if (err) {                                                                            \
            errno = err;                                                                      \
            return -1;                                                                        \
        }                                                                                     \
        int (*real)(int, const char *, int, ...) = (int (*)(int, const char *, int, ...))dlsym( \
            RTLD_NEXT, #name);                                                                \
        return real(dirfd, path, flags, mode);                                                \
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
    int err = injected_errno(path, O_CREAT);
    if (err) {
        errno = err;
        return -1;
    }
    int (*real)(const char *, mode_t) = (int (*)(const char *, mode_t))dlsym(RTLD_NEXT, "mkdir");
    return real(path, mode);
}

int rename(const char *from, const char *to)
{
    const char *match = getenv("FAILRENAME_MATCH");
    if (match && *match && to && strstr(to, match)) {
        const char *e = getenv("FAILOPEN_ERRNO");
        errno = e && atoi(e) > 0 ? atoi(e) : EIO;
        return -1;
    }
    int (*real)(const char *, const char *) =
        (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename");
    return real(from, to);
}
