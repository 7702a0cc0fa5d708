/* attach.c - ptrace with PTRACE_SEIZE: unlike PTRACE_ATTACH it sends no
 * SIGSTOP, so the target's own job control and signals are left alone;
 * PTRACE_INTERRUPT stops a thread for us alone. */
#include "attach.h"

#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { MAX_THREADS = 4096 };

#define YAMA_SCOPE "/proc/sys/kernel/yama/ptrace_scope"

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static void read_name(pid_t pid, thread *th)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task/%d/comm", (int)pid, (int)th->tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    if (fgets(th->name, sizeof th->name, f))
        th->name[strcspn(th->name, "\n")] = 0;
    fclose(f);
}

/* The state letter and parent pid in /proc/PID/stat (or, when tid is not 0,
 * /proc/PID/task/TID/stat); false when the file is gone or unreadable. The
 * name may hold spaces and parentheses: the fields start after the last ')'. */
static bool read_stat(pid_t pid, pid_t tid, char *state, int *ppid)
{
    char path[64], buf[512];
    if (tid)
        snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, (int)tid);
    else
        snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *paren = strrchr(buf, ')');
    return paren && sscanf(paren + 1, " %c %d", state, ppid) == 2;
}

/* Z (zombie) or X (dead): the process or thread has exited. */
static bool state_exited(char state)
{
    return state == 'Z' || state == 'X';
}

/* A zombie thread (one that called pthread_exit while the process lives)
 * never stops: leave it out rather than wait on it every sample. */
static bool is_zombie(pid_t pid, pid_t tid)
{
    char state;
    int ppid;
    return !read_stat(pid, tid, &state, &ppid) || state_exited(state);
}

static thread *find(target *t, pid_t tid)
{
    for (size_t i = 0; i < t->count; i++)
        if (t->threads[i].tid == tid)
            return &t->threads[i];
    return NULL;
}

static thread *add(target *t, pid_t tid)
{
    if (t->count == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        thread *n = realloc(t->threads, cap * sizeof *n);
        if (!n)
            return NULL;
        t->threads = n;
        t->cap = cap;
    }
    thread *th = &t->threads[t->count++];
    memset(th, 0, sizeof *th);
    th->tid = tid;
    return th;
}

static void drop(target *t, size_t i)
{
    t->threads[i] = t->threads[--t->count];
}

static void read_pac_mask(target *t)
{
#if defined(__aarch64__)
    struct { unsigned long long data_mask, insn_mask; } m = {0, 0};
    struct iovec iov = {&m, sizeof m};
    if (t->count && ptrace(PTRACE_GETREGSET, t->threads[0].tid, (void *)NT_ARM_PAC_MASK, &iov) == 0)
        t->pac_mask = m.insn_mask;
#else
    (void)t;
#endif
}

/* SIGALRM only breaks a blocking waitpid when the wait is over time. */
static void on_alarm(int sig)
{
    (void)sig;
}

/* A "Key:\tvalue" line of /proc/PID/status, as a number (-1 when absent). */
static long status_field(pid_t pid, const char *key)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    long v = -1;
    size_t klen = strlen(key);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, klen) && line[klen] == ':') {
            v = strtol(line + klen + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

/* Yama's ptrace_scope, or -1 when the kernel has no Yama (no such file). */
static int yama_scope(void)
{
    FILE *f = fopen(YAMA_SCOPE, "r");
    if (!f)
        return -1;
    int v = -1;
    if (fscanf(f, "%d", &v) != 1)
        v = -1;
    fclose(f);
    return v;
}

/* Why the kernel said EPERM, in the order it checks (ptrace_attach: an exited
 * task, then one already traced; __ptrace_may_access: the credentials, then
 * the LSMs, Yama among them). Only an existing Yama file set above 0 is named:
 * on a kernel without Yama, or with scope 0, it is not the reason. */
static void explain_eperm(pid_t pid, char *err, size_t errlen)
{
    long tracer = status_field(pid, "TracerPid");
    long uid = status_field(pid, "Uid"); /* the real uid, first of four */
    int scope = yama_scope();
    if (tracer > 0)
        snprintf(err, errlen, "cannot attach to process %d: it is already traced by process "
                 "%ld (a debugger or another stencilrt-stack)", (int)pid, tracer);
    else if (uid >= 0 && (uid_t)uid != getuid())
        snprintf(err, errlen, "cannot attach to process %d: not permitted: it belongs to "
                 "uid %ld and this tool runs as uid %ld (run as that user, or with "
                 "CAP_SYS_PTRACE)", (int)pid, uid, (long)getuid());
    else if (scope > 0)
        snprintf(err, errlen, "cannot attach to process %d: not permitted by Yama: %s is %d "
                 "(%s; run with CAP_SYS_PTRACE, or set it to 0)", (int)pid, YAMA_SCOPE, scope,
                 scope == 1 ? "only a parent may attach to its descendants"
                 : scope == 2 ? "only CAP_SYS_PTRACE may attach" : "no process may attach");
    else
        snprintf(err, errlen, "cannot attach to process %d: not permitted (it may not be "
                 "dumpable, e.g. setuid, or a security module refused; run with "
                 "CAP_SYS_PTRACE)", (int)pid);
}

/* Names what failed when PTRACE_SEIZE did. A zombie (exited, its parent has
 * not waited for it yet) answers EPERM too: its state says why first. */
static void explain_seize_failure(pid_t pid, int e, char *err, size_t errlen)
{
    char state;
    int ppid;
    if (read_stat(pid, 0, &state, &ppid) && state_exited(state))
        snprintf(err, errlen, "cannot attach to process %d: it has exited (state %c: %s) "
                 "and is not yet reaped by its parent, process %d; there is no stack to read",
                 (int)pid, state, state == 'Z' ? "zombie" : "dead", ppid);
    else if (e == ESRCH)
        snprintf(err, errlen, "cannot attach to process %d: no such process", (int)pid);
    else if (e == EPERM)
        explain_eperm(pid, err, errlen);
    else
        snprintf(err, errlen, "cannot attach to process %d: ptrace(PTRACE_SEIZE): %s",
                 (int)pid, strerror(e));
}

int target_attach(target *t, pid_t pid, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    /* No SA_RESTART: the alarm must end a blocking waitpid. */
    struct sigaction sa = {.sa_handler = on_alarm};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    t->pid = pid;
    if (ptrace(PTRACE_SEIZE, pid, 0, 0) != 0) {
        explain_seize_failure(pid, errno, err, errlen);
        return -1;
    }
    thread *th = add(t, pid);
    if (!th) {
        ptrace(PTRACE_DETACH, pid, 0, 0);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    target_rescan(t);
    if (t->exited) {
        target_detach(t);
        snprintf(err, errlen, "cannot attach to process %d: it exited", (int)pid);
        return -1;
    }
    read_pac_mask(t);
    return 0;
}

void target_rescan(target *t)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)t->pid);
    DIR *d = opendir(path);
    if (!d) {
        t->exited = true;
        return;
    }
    for (size_t i = 0; i < t->count; i++)
        t->threads[i].seen = false;
    /* Names of known threads are read again once a second: a file read per
     * thread per sample would cost more than the rest of the rescan. */
    bool renames = now_ns() - t->names_read_ns >= 1000000000ll;
    if (renames)
        t->names_read_ns = now_ns();
    struct dirent *de;
    while ((de = readdir(d)) && t->count < MAX_THREADS) {
        pid_t tid = (pid_t)atoi(de->d_name);
        if (tid <= 0)
            continue;
        thread *th = find(t, tid);
        bool is_new = !th;
        if (!th && !is_zombie(t->pid, tid) && ptrace(PTRACE_SEIZE, tid, 0, 0) == 0)
            th = add(t, tid);
        if (th) {
            th->seen = true;
            if (is_new || renames)
                read_name(t->pid, th);
        }
    }
    closedir(d);
    /* A thread no longer listed has ended; a traced one is reaped by the kernel
     * for its tracer, so collect its status to leave no zombie behind. */
    for (size_t i = t->count; i-- > 0;)
        if (!t->threads[i].seen && !t->threads[i].stopped) {
            int st;
            waitpid(t->threads[i].tid, &st, __WALL | WNOHANG);
            drop(t, i);
        }
}

static bool get_regs(thread *th)
{
    memset(&th->regs, 0, sizeof th->regs);
#if defined(__x86_64__)
    struct user_regs_struct u;
    struct iovec iov = {&u, sizeof u};
    if (ptrace(PTRACE_GETREGSET, th->tid, (void *)NT_PRSTATUS, &iov) != 0)
        return false;
    const unsigned long long v[17] = {u.rax, u.rdx, u.rcx, u.rbx, u.rsi, u.rdi, u.rbp, u.rsp,
                                      u.r8,  u.r9,  u.r10, u.r11, u.r12, u.r13, u.r14, u.r15,
                                      u.rip};
    for (unsigned n = 0; n < 17; n++)
        regs_set(&th->regs, n, v[n]);
    th->regs.pc = u.rip;
#elif defined(__aarch64__)
    struct user_regs_struct u; /* glibc's: regs[31], sp, pc, pstate */
    struct iovec iov = {&u, sizeof u};
    if (ptrace(PTRACE_GETREGSET, th->tid, (void *)NT_PRSTATUS, &iov) != 0)
        return false;
    for (unsigned n = 0; n < 31; n++)
        regs_set(&th->regs, n, u.regs[n]);
    regs_set(&th->regs, 31, u.sp);
    th->regs.pc = u.pc;
#endif
    return true;
}

/* What waitpid said about one thread we interrupted. */
static void note_stop(thread *th, int status)
{
    int sig = WSTOPSIG(status), event = status >> 16;
    th->stopped = true;
    if (event == PTRACE_EVENT_STOP)
        th->group_stop = sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
    else if (event == 0)
        th->pending_sig = sig; /* signal-delivery-stop: our interrupt comes after it */
}

/* A periodic timer, not a single one: a tick that fires just before waitpid
 * blocks is followed by another. */
static void alarm_ticks(bool on)
{
    struct itimerval it = {{0, on ? 2000 : 0}, {0, on ? 2000 : 0}};
    setitimer(ITIMER_REAL, &it, NULL);
}

/* Waits until every interrupted thread has stopped or ended, or the deadline
 * passes (a thread that never stops is left running). Blocking in waitpid
 * rather than polling leaves the CPU to the threads that must run to stop. */
static void wait_all(target *t, long long deadline)
{
    size_t left = 0;
    for (size_t i = 0; i < t->count; i++)
        left += !t->threads[i].stopped;
    if (!left)
        return;
    alarm_ticks(true);
    while (left && now_ns() < deadline) {
        int st;
        pid_t r = waitpid(-1, &st, __WALL);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) /* ECHILD: no tracee is left */
            break;
        thread *th = find(t, r);
        if (!th || th->stopped)
            continue;
        left--;
        if (WIFSTOPPED(st)) {
            note_stop(th, st);
        } else { /* exited or killed */
            if (th->tid == t->pid)
                t->exited = true;
            drop(t, (size_t)(th - t->threads));
        }
    }
    alarm_ticks(false);
    if (left) /* a thread we lost track of (ECHILD) has ended */
        for (size_t i = t->count; i-- > 0;)
            if (!t->threads[i].stopped && kill(t->threads[i].tid, 0) != 0 && errno == ESRCH)
                drop(t, i);
}

size_t target_stop(target *t, int timeout_ms)
{
    for (size_t i = t->count; i-- > 0;) {
        thread *th = &t->threads[i];
        th->have_regs = false;
        if (!th->stopped && ptrace(PTRACE_INTERRUPT, th->tid, 0, 0) != 0) {
            if (errno == ESRCH && th->tid == t->pid)
                t->exited = true;
            int st;
            waitpid(th->tid, &st, __WALL | WNOHANG);
            drop(t, i);
        }
    }
    wait_all(t, now_ns() + timeout_ms * 1000000ll);
    size_t stopped = 0;
    for (size_t i = 0; i < t->count; i++)
        if (t->threads[i].stopped) {
            t->threads[i].have_regs = get_regs(&t->threads[i]);
            stopped++;
        }
    return stopped;
}

/* A thread caught in signal-delivery-stop still owes us the interrupt's
 * stop: deliver the signal, take that stop at once, and run again, so no
 * stale stop is left to hold the thread until the next sample. */
static void resume_after_signal(thread *th)
{
    if (ptrace(PTRACE_CONT, th->tid, 0, (void *)(long)th->pending_sig) != 0)
        return;
    th->pending_sig = 0;
    long long deadline = now_ns() + 100000000ll;
    while (now_ns() < deadline) {
        int st;
        pid_t r = waitpid(th->tid, &st, __WALL | WNOHANG);
        if (r == th->tid && WIFSTOPPED(st)) {
            int sig = (st >> 16) == 0 ? WSTOPSIG(st) : 0;
            if (ptrace(PTRACE_CONT, th->tid, 0, (void *)(long)sig) != 0 || sig == 0)
                return;
            continue; /* another signal: delivered, keep waiting for the interrupt */
        }
        if (r != 0)
            return;
        struct timespec pause = {0, 20000};
        nanosleep(&pause, NULL);
    }
}

void target_resume(target *t)
{
    for (size_t i = 0; i < t->count; i++) {
        thread *th = &t->threads[i];
        if (!th->stopped)
            continue;
        th->stopped = false;
        if (th->group_stop)
            ptrace(PTRACE_LISTEN, th->tid, 0, 0);
        else if (th->pending_sig)
            resume_after_signal(th);
        else
            ptrace(PTRACE_CONT, th->tid, 0, 0);
        th->group_stop = false;
    }
}

void target_detach(target *t)
{
    /* PTRACE_DETACH needs a stopped tracee. */
    if (t->count)
        target_stop(t, 1000);
    for (size_t i = 0; i < t->count; i++) {
        thread *th = &t->threads[i];
        if (th->stopped)
            ptrace(PTRACE_DETACH, th->tid, 0, (void *)(long)th->pending_sig);
        else /* never stopped: the kernel detaches it when we exit; try anyway */
            ptrace(PTRACE_DETACH, th->tid, 0, 0);
    }
    free(t->threads);
    t->threads = NULL;
    t->count = t->cap = 0;
}
