/* compile.c - a small job runner: posix_spawn, at most `parallel` children,
 * SIGCHLD waited for with sigtimedwait so no time is spent polling, and a
 * deadline per child after which it is killed. */
#define _GNU_SOURCE
#include "compile.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "diag.h"
#include "llvm_bridge.h"
#include "util.h"

extern char **environ;

void argv_add(gen_argv *a, const char *s)
{
    ARRAY_PUSH(a->items, a->count, a->cap, xstrdup(s));
}

void argv_addf(gen_argv *a, const char *fmt, ...)
{
    strbuf sb = {0};
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(&sb, fmt, ap);
    va_end(ap);
    ARRAY_PUSH(a->items, a->count, a->cap, sb.data);
}

void argv_add_split(gen_argv *a, const char *flags)
{
    const char *p = flags;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == '\n')
            p++;
        if (!*p)
            break;
        strbuf word = {0};
        char quote = 0;
        for (; *p && (quote || (*p != ' ' && *p != '\t' && *p != '\n')); p++) {
            if (quote && *p == quote)
                quote = 0;
            else if (!quote && (*p == '\'' || *p == '"'))
                quote = *p;
            else
                sb_putc(&word, *p);
        }
        if (!word.data)
            sb_puts(&word, "");
        ARRAY_PUSH(a->items, a->count, a->cap, word.data);
    }
}

char **argv_finish(gen_argv *a)
{
    ARRAY_PUSH(a->items, a->count, a->cap, NULL);
    char **r = a->items;
    *a = (gen_argv){0};
    return r;
}

void argv_free(char **argv)
{
    if (!argv)
        return;
    for (char **p = argv; *p; p++)
        free(*p);
    free(argv);
}

void job_argv_free(gen_job *job)
{
    if (job->argv) {
        for (char **p = job->argv + (job->shared ? job->shared->n : 0); *p; p++)
            free(*p);
        free(job->argv);
    }
    job->argv = NULL;
    job->shared = NULL;
}

char *find_program(const char *name)
{
    if (strchr(name, '/'))
        return access(name, X_OK) == 0 ? xstrdup(name) : NULL;
    const char *path = getenv("PATH");
    return path_search(path ? path : "/usr/bin:/bin", name, X_OK, true);
}

typedef struct running {
    pid_t pid;
    size_t job;
    double started, deadline;
    bool noticed; /* "still compiling" was printed */
} running;

/* A compile slower than this gets one line saying so: a hung compiler must not
 * look like a quiet build until the deadline. */
#define SLOW_NOTICE_S 30.0

/* A child with the files and signal mask posix_spawn would give it, running
 * clang's main from the clang module, which the parent has loaded. stdio is
 * flushed first, so that nothing buffered is written twice; the child itself
 * ends with _exit (lb_clang_main). */
static pid_t fork_job(gen_job *job, int log, const sigset_t *child_mask)
{
    clock_gettime(CLOCK_REALTIME_COARSE, &job->started);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_RDONLY);
        if (null < 0 || dup2(null, 0) < 0 || dup2(log, 2) < 0)
            _exit(127);
        if (null != 0)
            close(null);
        sigprocmask(SIG_SETMASK, child_mask, NULL);
        _exit(lb_clang_main(job->argv, job->probes));
    }
    if (pid < 0)
        diag_error("%s: cannot start a compile (fork): %s", job->label, strerror(errno));
    close(log);
    return pid;
}

/* job->argv with every argument naming a file under `dir` made relative to it
 * (gen_job.dir); the strings are argv's own, offset. */
static char **argv_relative_to(char *const *argv, const char *dir)
{
    size_t n = 0, len = strlen(dir);
    while (argv[n])
        n++;
    char **out = xcalloc(n + 1, sizeof *out);
    for (size_t i = 0; i < n; i++)
        out[i] = !strncmp(argv[i], dir, len) && argv[i][len] == '/' ? argv[i] + len + 1 : argv[i];
    return out;
}

/* The log is opened here, not by posix_spawn, so a log that cannot be created
 * is reported as such rather than as a failure to run the compiler. */
static pid_t spawn_job(gen_job *job, sigset_t *child_mask, bool in_process)
{
    int log = open(job->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (log < 0) {
        diag_error("%s: cannot create the compiler's log file '%s': %s", job->label, job->log,
                   strerror(errno));
        return -1;
    }
    if (in_process)
        return fork_job(job, log, child_mask);
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, log, 2);
    posix_spawnattr_init(&attr);
    posix_spawnattr_setsigmask(&attr, child_mask);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
    char **argv = job->argv;
    if (job->dir) {
        posix_spawn_file_actions_addchdir_np(&fa, job->dir);
        argv = argv_relative_to(job->argv, job->dir);
    }
    clock_gettime(CLOCK_REALTIME_COARSE, &job->started);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, &attr, argv, environ);
    if (argv != job->argv)
        free(argv);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(log);
    if (rc != 0) {
        diag_error("%s: cannot run '%s': %s", job->label, job->argv[0], strerror(rc));
        return -1;
    }
    return pid;
}

/* A compiler that failed without a word on a full filesystem could write
 * neither its object nor its messages: below this much room in the log's
 * directory (what a batch's object and log may take), that is what is said. */
#define ROOM_NEEDED (1u << 20)

/* The bytes the log's filesystem still takes from us (root may use the
 * blocks kept for it); false if it cannot be asked. */
static bool room_for(const char *log, unsigned long long *bytes)
{
    char *dir = path_dirname(log);
    struct statvfs fs;
    bool ok = statvfs(dir, &fs) == 0;
    free(dir);
    if (ok)
        *bytes = (unsigned long long)(geteuid() == 0 ? fs.f_bfree : fs.f_bavail) * fs.f_frsize;
    return ok;
}

/* Print what the command wrote to stderr, if anything, under its label; a
 * failure says how the compiler ended even when it printed nothing, and that
 * the disk is full when it is. */
static void show_log(const gen_job *job, bool failed, double timeout)
{
    uint8_t *text = NULL;
    size_t size = 0;
    unsigned long long room = 0;
    if (!read_file(job->log, &text, &size) && !failed)
        return;
    if (failed && job->timed_out)
        diag_error("%s: compile timed out after %.0f s (--compile-timeout); no further "
                   "compile is started", job->label, timeout);
    else if (failed && job->term_signal)
        diag_error("%s: the compiler was killed by signal %d (%s)%s", job->label,
                   job->term_signal, strsignal(job->term_signal), size ? ":" : "");
    else if (failed && job->status > 0 && !size && room_for(job->log, &room) &&
             room < ROOM_NEEDED) {
        char *dir = path_dirname(job->log);
        diag_error("%s: compile failed: %s in '%s' (%llu KB free): the compiler exited with "
                   "status %d, its object and messages unwritten", job->label, strerror(ENOSPC),
                   dir, room / 1024, job->status);
        free(dir);
    } else if (failed && job->status > 0)
        diag_error("%s: compile failed: the compiler exited with status %d%s", job->label,
                   job->status, size ? ":" : " and printed nothing");
    else if (size && !failed)
        diag_note("%s: compiler output:", job->label);
    if (size)
        diag_write(text, size);
    free(text);
}

static void print_command(const gen_job *job)
{
    strbuf sb = {0};
    for (char **p = job->argv; *p; p++)
        sb_printf(&sb, "%s%s", p == job->argv ? "" : " ", *p);
    fprintf(stderr, "%s\n", sb.data);
    sb_free(&sb);
}

/* The terminal's width in columns, or 0 if unknown. */
static size_t terminal_width(void)
{
    struct winsize ws;
    return ioctl(2, TIOCGWINSZ, &ws) == 0 ? ws.ws_col : 0;
}

/* One line that overwrites the last, cut to the terminal's width: a line
 * that wrapped would not be overwritten. */
static void progress_line(const gen_compile_opts *o, size_t done, size_t total, const char *label,
                          void *ctx)
{
    if (!o->progress)
        return;
    strbuf line = {0};
    if (o->status)
        o->status(&line, ctx);
    else
        sb_printf(&line, "[%zu/%zu] %s", done, total, label);
    size_t width = terminal_width(), len = line.len;
    if (width > 4 && len >= width)
        len = width - 4;
    fprintf(stderr, "\r\033[K%.*s%s", (int)len, line.data ? line.data : "",
            len < line.len ? "..." : "");
    sb_free(&line);
}

/* Wait until a child changes state or the earliest deadline passes. */
static void wait_for_child(const sigset_t *chld, const running *run, size_t nrun)
{
    double earliest = run[0].deadline;
    for (size_t i = 1; i < nrun; i++)
        earliest = run[i].deadline < earliest ? run[i].deadline : earliest;
    double wait = earliest - now_seconds();
    if (wait <= 0)
        return;
    if (wait > 0.5)
        wait = 0.5; /* re-check now and then: a SIGCHLD may have been merged */
    struct timespec ts = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};
    sigtimedwait(chld, NULL, &ts);
}

static void finish_job(gen_job *job, int wstatus)
{
    if (WIFEXITED(wstatus)) {
        job->status = WEXITSTATUS(wstatus);
    } else {
        job->term_signal = WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0;
        job->status = 128 + job->term_signal;
    }
}

/* Report a finished job and hand it to `done`, collecting what either says
 * into `messages`; returns whether it succeeded. */
static bool conclude(gen_job *job, const gen_compile_opts *opts, size_t finished, size_t total,
                     gen_job_done *done, void *ctx, strbuf *messages)
{
    bool ok = job->status == 0;
    strbuf *outer = diag_capture(messages);
    if (!opts->quiet)
        show_log(job, !ok, opts->timeout);
    if (!ok && opts->failed)
        opts->failed(job, ctx);
    if (ok && done && !done(job, ctx)) {
        job->status = -1;
        ok = false;
    }
    diag_capture(outer);
    progress_line(opts, finished, total, job->label, ctx); /* counting what done took */
    return ok;
}

/* Messages of concluded jobs, printed in job order (for a build, manifest
 * order) however the jobs finish: the same build says the same thing. */
typedef struct in_order {
    strbuf *messages; /* per job */
    bool *ready;      /* concluded, or never to run */
    size_t next;      /* the first job not printed yet */
} in_order;

static void print_ready(in_order *o, const gen_job *jobs, size_t n, const gen_compile_opts *opts)
{
    for (; o->next < n && (o->ready[o->next] || jobs[o->next].skip); o->next++) {
        strbuf *m = &o->messages[o->next];
        if (m->len) {
            if (opts->progress)
                fputs("\r\033[K", stderr);
            diag_write(m->data, m->len);
        }
        sb_free(m);
    }
}

/* Reap every finished (or overdue) child into done[]; returns how many.
 * *timed_out is set when a compile had to be killed. */
static size_t reap(gen_job *jobs, running *run, size_t *nrun, size_t *done_jobs,
                   bool *timed_out)
{
    size_t ndone = 0;
    for (size_t i = 0; i < *nrun;) {
        gen_job *job = &jobs[run[i].job];
        int wstatus;
        pid_t r = waitpid(run[i].pid, &wstatus, WNOHANG);
        if (r == 0 && now_seconds() > run[i].deadline) {
            kill(run[i].pid, SIGKILL);
            waitpid(run[i].pid, &wstatus, 0);
            job->status = -1;
            job->timed_out = true;
            *timed_out = true;
        } else if (r == run[i].pid) {
            finish_job(job, wstatus);
        } else {
            i++;
            continue;
        }
        done_jobs[ndone++] = run[i].job;
        run[i] = run[--*nrun];
    }
    return ndone;
}

static void notice_slow(const gen_job *jobs, running *run, size_t nrun, const gen_compile_opts *o)
{
    double after = o->timeout / 2 < SLOW_NOTICE_S ? o->timeout / 2 : SLOW_NOTICE_S;
    double now = now_seconds();
    for (size_t i = 0; i < nrun; i++) {
        if (run[i].noticed || now - run[i].started < after)
            continue;
        run[i].noticed = true;
        fprintf(stderr, "%sstencilgen: %s: still compiling after %.0f s (killed at %.0f s; "
                        "see --compile-timeout)\n",
                o->progress ? "\r\033[K" : "", jobs[run[i].job].label, now - run[i].started,
                o->timeout);
    }
}

size_t compile_run(gen_job *jobs, size_t n, const gen_compile_opts *opts, gen_job_done *done,
                   void *ctx, bool *spawn_failed)
{
    sigset_t chld, old, child_mask;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, &old);
    sigemptyset(&child_mask);

    size_t total = 0, finished = 0, failures = 0, next = 0, nrun = 0, npending = 0;
    for (size_t i = 0; i < n; i++)
        total += !jobs[i].skip;
    size_t parallel = opts->parallel > 0 ? (size_t)opts->parallel : 1;
    running *run = xcalloc(parallel, sizeof *run);
    size_t *pending = xcalloc(parallel, sizeof *pending); /* reaped, not yet concluded */
    bool timed_out = false;
    *spawn_failed = false;
    in_order order = {xcalloc(n ? n : 1, sizeof *order.messages), xcalloc(n ? n : 1, 1), 0};

    while (next < n || nrun > 0 || npending > 0) {
        /* Replace finished compiles first, then read their objects: the
         * compiler slots stay busy while the generator does its own work.
         * After a compiler could not start or hung, nothing more starts. */
        while (nrun < parallel && next < n && !*spawn_failed && !timed_out) {
            gen_job *job = &jobs[next];
            if (job->skip) {
                next++;
                continue;
            }
            if (opts->verbose)
                print_command(job);
            pid_t pid = spawn_job(job, &child_mask, opts->in_process);
            if (pid < 0) {
                job->status = -1;
                failures++;
                *spawn_failed = true; /* the compiler itself is missing: stop */
                break;
            }
            double now = now_seconds();
            run[nrun++] = (running){pid, next, now, now + opts->timeout, false};
            next++;
        }
        if (*spawn_failed || timed_out) {
            for (; next < n; next++) { /* never started: failed, without a message each */
                jobs[next].status = jobs[next].skip ? jobs[next].status : -1;
                order.ready[next] = true;
            }
        }
        for (size_t k = 0; k < npending; k++) {
            failures += !conclude(&jobs[pending[k]], opts, ++finished, total, done, ctx,
                                  &order.messages[pending[k]]);
            order.ready[pending[k]] = true;
        }
        npending = 0;
        print_ready(&order, jobs, n, opts);
        if (nrun == 0)
            continue; /* ends the loop unless jobs remain */
        wait_for_child(&chld, run, nrun);
        npending = reap(jobs, run, &nrun, pending, &timed_out);
        notice_slow(jobs, run, nrun, opts);
    }
    for (size_t i = 0; i < n; i++) /* a spawn failure stopped the loop early */
        order.ready[i] = true;
    print_ready(&order, jobs, n, opts);
    free(order.messages);
    free(order.ready);
    if (opts->progress && total)
        fputs("\r\033[K", stderr);
    free(pending);
    free(run);
    sigprocmask(SIG_SETMASK, &old, NULL);
    return failures;
}

/* stencilgen needs clang 19: stencils use preserve_none, and every op is
 * compiled with -mframe-pointer=reserved (clang 18 and older have neither;
 * 14 rejects the flag). */
#define MIN_CLANG_MAJOR 19

/* The value of `#define NAME N` in clang's -dM output, or -1. */
static int macro_number(const char *macros, const char *name)
{
    char line[64];
    snprintf(line, sizeof line, "#define %s ", name);
    const char *m = strstr(macros, line);
    return m ? atoi(m + strlen(line)) : -1;
}

int compile_check_clang(const char *clang, const char *dir, const gen_compile_opts *co,
                        char *version, size_t version_size)
{
    char *out = path_join(dir, "compiler-macros.h");
    char *argv[] = {(char *)clang, "-dM", "-E", "-x", "c", "/dev/null", "-o", out, NULL};
    char *log = path_join(dir, "compiler-check.log");
    char *label = xasprintf("the C compiler '%s' (asked for its version)", clang);
    gen_job job = {.argv = argv, .output = out, .log = log, .label = label};
    gen_compile_opts o = *co;
    o.in_process = false; /* the executable itself answers for what it is */
    o.failed = NULL;
    o.status = NULL; /* its status is its own label: the caller's is of the build */
    bool spawn_failed;
    int rc = SG_EXIT_TOOLCHAIN;
    uint8_t *text = NULL;
    size_t size = 0;
    if (compile_run(&job, 1, &o, NULL, NULL, &spawn_failed) == 0 && read_file(out, &text, &size)) {
        char *macros = xstrndup((const char *)text, size);
        int major = macro_number(macros, "__clang_major__");
        if (major < 0)
            diag_error("'%s' is not clang (it does not define __clang_major__); stencilgen needs "
                       "clang %d or newer", clang, MIN_CLANG_MAJOR);
        else if (major < MIN_CLANG_MAJOR)
            diag_error("'%s' is clang %d; stencilgen needs clang %d or newer (stencils use "
                       "preserve_none, and ops are compiled with -mframe-pointer=reserved)",
                       clang, major, MIN_CLANG_MAJOR);
        else
            rc = SG_EXIT_OK;
        if (rc == SG_EXIT_OK)
            snprintf(version, version_size, "%d.%d.%d", major,
                     macro_number(macros, "__clang_minor__"),
                     macro_number(macros, "__clang_patchlevel__"));
        free(macros);
    }
    free(text);
    free(out);
    free(log);
    free(label);
    return rc;
}

/* Whether compiles by `clang` can run clang's main in a forked child: it is
 * the executable the clang module links (the same file, whatever the path
 * given), and nothing else (`exec`: a launcher, --exec-clang) must start. */
bool compile_can_fork(const char *clang, bool exec)
{
    const char *own = exec ? NULL : lb_clang_path();
    char *a = own ? realpath(clang, NULL) : NULL, *b = own ? realpath(own, NULL) : NULL;
    bool same = a && b && !strcmp(a, b);
    free(a);
    free(b);
    return same;
}

/* A compiler that reports success must have written both files; anything
 * else is a toolchain failure, never a reason to read an older file. */
bool compile_read_output(const gen_job *job, const char *path, const char *what, uint8_t **data,
                         size_t *size)
{
    if (read_file(path, data, size))
        return true;
    if (errno == ENOENT)
        diag_error("%s: the compiler exited with status 0 but wrote no %s ('%s')", job->label,
                   what, path);
    else
        diag_error("%s: cannot read the %s '%s': %s", job->label, what, path, strerror(errno));
    return false;
}
