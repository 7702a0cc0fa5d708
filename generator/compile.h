/* compile.h - run clang compiles in parallel, with a timeout each. */
#ifndef STENCILGEN_COMPILE_H
#define STENCILGEN_COMPILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "digest.h"
#include "util.h"

/* The leading arguments of several jobs' commands (one target's flags for one
 * source file: flags_command_shared), made once; the jobs' argv point at its
 * strings, and cache keys hash them once (inc_unit_init). */
typedef struct gen_shared_args {
    char **argv; /* NULL-terminated; owned */
    size_t n;
    bool hashed;
    digest hash;
} gen_shared_args;

typedef struct gen_job {
    char **argv;   /* NULL-terminated: [launcher] clang args... */
    gen_shared_args *shared; /* argv[0, shared->n) are its strings; NULL: argv owns all */
    char *output;  /* object file the command writes */
    char *log;     /* file that receives the command's stderr */
    char *label;   /* "op add (x86_64-unknown-linux-gnu)", for messages */
    /* In a forked child (gen_compile_opts.in_process), the file that receives
     * the paths the compile looked for and did not find (lb_clang_main); a
     * compile the executable runs leaves it unwritten. NULL: not asked. */
    char *probes;
    /* When set (compiles through a launcher), the executable starts in this
     * directory and the arguments naming files under it name them relative to
     * it: the command is then the same in every run, whatever the run
     * directory's name, as a launcher's cache (ccache, sccache) needs. argv
     * keeps the full paths (the key, -vv, --compile-commands). NULL: started
     * where the generator runs, with argv as it is. */
    const char *dir;
    bool skip;     /* already up to date (cache hit): not run */
    int status;    /* 0 ok; otherwise the exit status, or -1 spawn/timeout failure */
    int term_signal; /* the signal that killed the compiler, or 0 */
    bool timed_out;  /* killed at the deadline */
    struct timespec started; /* when it was started (coarse realtime, as file mtimes) */
    void *user;
} gen_job;

/* Called after a failed job's compiler output is shown, with the same ctx as
 * gen_job_done, so that what it says is printed with the job's messages. */
typedef void gen_job_failed(const gen_job *job, void *ctx);

typedef struct gen_compile_opts {
    int parallel;
    double timeout; /* seconds per command; after the first timeout no new job starts */
    bool verbose;   /* print every command */
    bool progress;  /* ninja-style "[n/N] label" status line (on a terminal) */
    /* With progress: the status line's text after each job, given the
     * compile_run's ctx (NULL: "[n/N] label" of jobs). */
    void (*status)(strbuf *line, void *ctx);
    /* argv[0] is lb_clang_path()'s clang: run lb_clang_main in a forked child
     * instead of starting the executable (the same compile, twice as fast for
     * a small unit). */
    bool in_process;
    gen_job_failed *failed; /* or NULL */
    /* Failures are not reported: the caller knows what one means (a
     * preprocess run for the paths it looks for, whose compile reports). */
    bool quiet;
} gen_compile_opts;

/* Called in the parent as soon as a job finishes successfully, so reading its
 * object overlaps the remaining compiles. Returns false to record a failure. */
typedef bool gen_job_done(gen_job *job, void *ctx);

/* Run every job not marked skip. Each job's stderr is printed (prefixed with its
 * label) when it fails or produced warnings, together with what `done` says,
 * in job order whatever order the jobs finish in. Returns the number of failures.
 * *spawn_failed is set when a command could not be started at all. */
size_t compile_run(gen_job *jobs, size_t n, const gen_compile_opts *opts, gen_job_done *done,
                   void *ctx, bool *spawn_failed);

/* Ask `clang` for the macros it predefines (vendors reword --version, never
 * __clang_major__) before compiling anything with it, in directory `dir`: one
 * clear error instead of one per op. Returns an exit code (3: not clang 19 or
 * newer, or it could not say); on success its version ("19.1.7") is written
 * into version. */
int compile_check_clang(const char *clang, const char *dir, const gen_compile_opts *co,
                        char *version, size_t version_size);

/* argv helpers */
typedef struct gen_argv {
    char **items;
    size_t count, cap;
} gen_argv;

void argv_add(gen_argv *a, const char *s);
void argv_addf(gen_argv *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Split a flags string on blanks (single/double quotes group words). */
void argv_add_split(gen_argv *a, const char *flags);
char **argv_finish(gen_argv *a); /* NULL-terminates and hands the array over */
void argv_free(char **argv);
/* Free the job's argv (the strings it owns) and forget it. */
void job_argv_free(gen_job *job);

/* Resolve a program name through PATH; NULL if it is not an executable. */
char *find_program(const char *name);

/* Whether compiles by `clang` may run in forked children (in_process):
 * `clang` is the clang the module links and `exec` (a launcher, --exec-clang)
 * does not ask for the executable. */
bool compile_can_fork(const char *clang, bool exec);

/* A job's output file `path` (`what`: "object", "depfile") read into *data:
 * a compiler that reported success must have written it, so a missing or
 * unreadable one is a toolchain failure, said here, never a reason to read
 * an older file. */
bool compile_read_output(const gen_job *job, const char *path, const char *what, uint8_t **data,
                         size_t *size);

#endif
