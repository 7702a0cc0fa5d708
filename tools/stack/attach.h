/* attach.h - holding a process's threads with ptrace: seize every thread,
 * stop them all for a moment, read their registers, let them go, and detach
 * leaving nothing stopped or traced. Every wait is bounded. */
#ifndef STENCILRT_STACK_ATTACH_H
#define STENCILRT_STACK_ATTACH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "arch.h"

typedef struct thread {
    pid_t tid;
    char name[32];   /* /proc/PID/task/TID/comm */
    bool stopped;    /* in a ptrace-stop we caused and must end */
    bool group_stop; /* stopped by SIGSTOP & co.: resumed with PTRACE_LISTEN */
    int pending_sig; /* a signal caught on its way in: delivered at resume */
    bool seen;       /* listed by the last rescan */
    regs regs;       /* read at the last stop */
    bool have_regs;
} thread;

typedef struct target {
    pid_t pid;
    thread *threads;
    size_t count, cap;
    unsigned long long pac_mask; /* AArch64: the bits a PAC occupies (0 elsewhere) */
    bool exited;                 /* the process is gone */
    long long names_read_ns;     /* when every thread's name was last read */
} target;

/* Seizes every thread of pid. On failure returns -1 with err naming the
 * reason: exited but not yet reaped (a zombie), no such process, already
 * traced, another user's, refused by Yama (named only when its ptrace_scope
 * file exists and is above 0), or the ptrace error itself. */
int target_attach(target *t, pid_t pid, char *err, size_t errlen);

/* Seizes threads started since the last scan, forgets those that ended and
 * refreshes the names. Never stops anything. */
void target_rescan(target *t);

/* Interrupts every thread and waits (at most timeout_ms in all) until each is
 * stopped, then reads their registers. Threads that ended are dropped; a
 * process that ended sets t->exited. Returns the number of stopped threads. */
size_t target_stop(target *t, int timeout_ms);

/* Lets every stopped thread run again, delivering signals caught meanwhile. */
void target_resume(target *t);

/* Stops, then detaches from every thread, and frees the list. */
void target_detach(target *t);

#endif
