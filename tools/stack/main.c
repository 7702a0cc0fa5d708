/* main.c - stencilrt-stack: the stacks of a running stencilrt process, JIT
 * frames named from its registry, seen from another process.
 *
 * Exit codes: 0 ok; 1 no registry, or one this reader cannot read; 2 usage;
 * 3 cannot attach to or read the process. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attach.h"
#include "procmem.h"
#include "registry_reader.h"
#include "sample.h"
#include "stencilrt_registry.h"
#include "symbols.h"
#include "unwind.h"

enum { EXIT_NOREGISTRY = 1, EXIT_USAGE = 2, EXIT_ATTACH = 3 };

static const char usage_text[] =
    "usage: stencilrt-stack PID\n"
    "       stencilrt-stack --sample HZ --duration SECONDS [--output FILE] [--samples-out FILE] "
    "PID\n"
    "\n"
    "Prints the stack of every thread of a running process that uses stencilrt, JIT frames\n"
    "named op@executor[instruction] from the registry the runtime publishes (the dynamic\n"
    "symbol " SR_REGISTRY_SYMBOL "). Attaches with ptrace; threads are stopped only while\n"
    "their registers are read and their stacks unwound.\n"
    "\n"
    "  --sample HZ          sample every thread HZ times a second and write folded stacks\n"
    "                       (root;...;leaf COUNT, the root being the thread's name)\n"
    "  --duration SECONDS   how long to sample\n"
    "  --output FILE        folded stacks to FILE (default: standard output)\n"
    "  --samples-out FILE   every stack of every sample, one line per frame:\n"
    "                         S <sample> <tid> <t_stop_ns> <t_resume_ns> <nframes> <reached_main>\n"
    "                         J <sample> <tid> <depth> <pc> <id> <index> <op> <executor>\n"
    "                         N <sample> <tid> <depth> <pc> <symbol or ?>\n"
    "  --help               this text\n"
    "\n"
    "Exit status: 0 ok; 1 no registry, or a registry this reader cannot read; 2 usage;\n"
    "3 cannot attach to or read the process.\n";

typedef struct options {
    pid_t pid;
    bool sample;
    double hz, seconds;
    const char *output, *samples_out;
} options;

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static int usage_error(const char *what, const char *arg)
{
    fprintf(stderr, "stencilrt-stack: %s%s%s\n%s", what, arg ? ": " : "", arg ? arg : "",
            "usage: stencilrt-stack [--sample HZ --duration SECONDS [--output FILE] "
            "[--samples-out FILE]] PID (--help for more)\n");
    return EXIT_USAGE;
}

static bool parse_number(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi))
        return false;
    *out = v;
    return true;
}

/* Returns -1 when the options are good, else the exit status. */
static int parse(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    const char *pid = NULL, *hz = NULL, *duration = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char **slot = !strcmp(a, "--sample")        ? &hz
                            : !strcmp(a, "--duration")    ? &duration
                            : !strcmp(a, "--output")      ? &o->output
                            : !strcmp(a, "--samples-out") ? &o->samples_out
                                                          : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage_text, stdout);
            return 0;
        } else if (slot) {
            if (i + 1 == argc)
                return usage_error("option needs a value", a);
            *slot = argv[++i];
        } else if (a[0] == '-') {
            return usage_error("unknown option", a);
        } else if (pid) {
            return usage_error("more than one PID", a);
        } else {
            pid = a;
        }
    }
    double p;
    if (!pid)
        return usage_error("no PID given", NULL);
    if (!parse_number(pid, 1, 4194304, &p) || p != (double)(pid_t)p)
        return usage_error("PID is not a process id", pid);
    o->pid = (pid_t)p;
    o->sample = hz != NULL;
    if (!hz && (duration || o->output || o->samples_out))
        return usage_error("--duration, --output and --samples-out need --sample", NULL);
    if (hz && !parse_number(hz, 0.1, 10000, &o->hz))
        return usage_error("--sample takes a rate from 0.1 to 10000 Hz", hz);
    if (hz && !duration)
        return usage_error("--sample needs --duration", NULL);
    if (duration && !parse_number(duration, 0.001, 86400, &o->seconds))
        return usage_error("--duration takes seconds from 0.001 to 86400", duration);
    return -1;
}

/* Finds and opens the registry; on failure prints why and returns the exit status. */
static int open_registry(pid_t pid, symbols *syms, procmem *mem, srr_reader **out)
{
    uint64_t root;
    const char *module;
    char err[512];
    if (!symbols_find(syms, SR_REGISTRY_SYMBOL, &root, &module)) {
        fprintf(stderr, "stencilrt-stack: process %d has no registry: no module defines the "
                "symbol %s (is it a stencilrt program?)\n", (int)pid, SR_REGISTRY_SYMBOL);
        return EXIT_NOREGISTRY;
    }
    srr_status st = srr_open(procmem_read, mem, root, out, err, sizeof err);
    if (st == SRR_OK)
        return 0;
    fprintf(stderr, "stencilrt-stack: process %d, %s in %s: %s\n", (int)pid, SR_REGISTRY_SYMBOL,
            module, err);
    return st == SRR_EREAD ? EXIT_ATTACH : EXIT_NOREGISTRY;
}

static FILE *open_out(const char *path, const char *what)
{
    FILE *f = fopen(path, "w");
    if (!f)
        fprintf(stderr, "stencilrt-stack: cannot write %s %s: %s\n", what, path, strerror(errno));
    return f;
}

static int run(const options *o, target *t, unwinder *u)
{
    if (!o->sample) {
        if (u->reader && srr_snapshot(u->reader) != SRR_OK)
            fprintf(stderr, "stencilrt-stack: warning: %s\n", srr_error(u->reader));
        if (!print_stacks(t, u, stdout)) {
            fprintf(stderr, "stencilrt-stack: process %d: no thread could be stopped%s\n",
                    (int)o->pid, t->exited ? " (it exited)" : "");
            return EXIT_ATTACH;
        }
        return 0;
    }
    sample_opts so = {o->hz, o->seconds, stdout, NULL, &stop_requested};
    if (o->output && !(so.folded = open_out(o->output, "--output")))
        return EXIT_USAGE;
    if (o->samples_out && !(so.samples_out = open_out(o->samples_out, "--samples-out"))) {
        if (so.folded != stdout)
            fclose(so.folded);
        return EXIT_USAGE;
    }
    sample_stats st;
    int rc = sample_run(t, u, &so, &st);
    if (so.folded != stdout && fclose(so.folded) != 0)
        rc = EXIT_ATTACH;
    if (so.samples_out && fclose(so.samples_out) != 0)
        rc = EXIT_ATTACH;
    if (rc == 0 && st.samples == 0) {
        fprintf(stderr, "stencilrt-stack: process %d: no sample taken%s\n", (int)o->pid,
                t->exited ? " (it exited)" : "");
        rc = EXIT_ATTACH;
    } else if (rc == 0 && t->exited) {
        fprintf(stderr, "stencilrt-stack: process %d exited after %llu samples\n", (int)o->pid,
                (unsigned long long)st.samples);
    }
    return rc;
}

int main(int argc, char **argv)
{
    options o;
    int rc = parse(argc, argv, &o);
    if (rc >= 0)
        return rc;
    /* Missing debug files are looked for on disk only, never fetched. */
    unsetenv("DEBUGINFOD_URLS");
    char err[512], proc[64];
    struct stat sb;
    snprintf(proc, sizeof proc, "/proc/%d", (int)o.pid);
    if (stat(proc, &sb) != 0) {
        fprintf(stderr, "stencilrt-stack: no such process %d\n", (int)o.pid);
        return EXIT_ATTACH;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    target t;
    if (target_attach(&t, o.pid, err, sizeof err) != 0) {
        fprintf(stderr, "stencilrt-stack: %s\n", err);
        return EXIT_ATTACH;
    }
    procmem mem = {o.pid, 0};
    symbols *syms = symbols_open(o.pid, err, sizeof err);
    if (!syms) {
        fprintf(stderr, "stencilrt-stack: %s\n", err);
        target_detach(&t);
        return EXIT_ATTACH;
    }
    unwinder u = {.syms = syms, .mem = &mem, .pac_mask = t.pac_mask};
    rc = open_registry(o.pid, syms, &mem, &u.reader);
    if (rc == 0)
        rc = run(&o, &t, &u);
    target_detach(&t);
    srr_close(u.reader);
    symbols_close(syms);
    return rc;
}
