/* base.c - the library's shared state: its one registry lock and the errors. */
#include <stdarg.h>
#include <stdio.h>
#ifdef _WIN32
#include <windows.h>
#else
#include <pthread.h>
#endif

#include "internal.h"

/* ---- the registry lock */

#ifdef _WIN32
/* No fork() on Windows, so nothing to reset; an SRWLOCK needs no
 * initialization at run time. */
static SRWLOCK registry_lock = SRWLOCK_INIT;

void sr_registry_lock(void)
{
    AcquireSRWLockExclusive(&registry_lock);
}

void sr_registry_unlock(void)
{
    ReleaseSRWLockExclusive(&registry_lock);
}
#else
/* Reset around fork(). */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t registry_once = PTHREAD_ONCE_INIT;

static void registry_prepare(void)
{
    pthread_mutex_lock(&registry_lock);
    jitmem_fork_prepare();
}

static void registry_parent(void)
{
    jitmem_fork_parent();
    pthread_mutex_unlock(&registry_lock);
}

/* The child has one thread, the one that forked and holds the lock. */
static void registry_child(void)
{
    jitmem_fork_child();
    pthread_mutex_unlock(&registry_lock);
}

static void registry_init(void)
{
    pthread_atfork(registry_prepare, registry_parent, registry_child);
}

void sr_registry_lock(void)
{
    pthread_once(&registry_once, registry_init);
    pthread_mutex_lock(&registry_lock);
}

void sr_registry_unlock(void)
{
    pthread_mutex_unlock(&registry_lock);
}
#endif

/* ---- errors */

static _Thread_local char last_error[256] = "no error";

sr_status sr_fail(sr_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return s;
}

const char *sr_last_error(void)
{
    return last_error;
}

const char *sr_strerror(sr_status s)
{
    static const char *const names[] = {
        "ok", "out of memory", "invalid argument", "value out of range for its hole",
        "unsupported hole kind", "run-time symbol without a value",
        "last instruction falls off the end", "system call failed",
    };
    return (unsigned)s < sizeof names / sizeof *names ? names[s] : "unknown status";
}
