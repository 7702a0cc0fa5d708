/* main.c - the stencilgen command line. */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache.h"
#include "cache_command.h"
#include "diag.h"
#include "llvm_bridge.h"
#include "pipeline.h"
#include "prebuilt.h"
#include "provenance.h"
#include "report.h"
#include "util.h"

static const char usage_text[] =
    "usage: stencilgen build --manifest FILE [--target TRIPLE]... --outdir DIR [-j N]\n"
    "                        [--cache-dir DIR] [--depfile FILE] [--clang PATH]\n"
    "                        [--launcher PROG] [--exec-clang] [--compile-commands FILE]\n"
    "                        [-v|-vv] [--extra-cflags STR] [--extra-shim-cflags STR]\n"
    "                        [--compile-timeout SECONDS] [--units batched|per-op]\n"
    "                        [--batch-ops N]   (units: batched by default; per-op to debug an op)\n"
    "                        [--no-hot-cold]   (each op one part: no cold part split off)\n"
    "                        [--no-listing]   (headers without the disassembly listing)\n"
    "                        [--cache-max-size SIZE]   (the cache's bound, e.g. 500M; 0: none)\n"
    "       stencilgen check-prebuilt --manifest FILE --prebuilt DIR [--target TRIPLE]... [--no-hot-cold]\n"
    "       stencilgen check --manifest FILE [--target TRIPLE]...   (all checks, writes nothing)\n"
    "       stencilgen dump  --manifest FILE --target TRIPLE [--op NAME]\n"
    "       stencilgen report [-o FILE] [--format html|json] [--against DIR]... [--max-growth PERCENT] DIR...\n"
    "       stencilgen cache (--stats | --clean) (--cache-dir DIR | --outdir DIR)\n"
    "       stencilgen --version\n"
    "\n"
    "Exit codes: 0 ok, 1 a check failed, 2 usage or manifest error, 3 toolchain failure.\n";

/* Generous: the slowest real op compiles in seconds. */
#define DEFAULT_COMPILE_TIMEOUT_S 600.0

enum {
    OPT_MANIFEST = 256, OPT_TARGET, OPT_OUTDIR, OPT_CACHE_DIR, OPT_DEPFILE, OPT_CLANG,
    OPT_LAUNCHER, OPT_COMPILE_COMMANDS, OPT_EXTRA_CFLAGS, OPT_EXTRA_SHIM_CFLAGS, OPT_OP,
    OPT_COMPILE_TIMEOUT, OPT_UNITS, OPT_BATCH_OPS, OPT_EXEC_CLANG, OPT_NO_LISTING, OPT_HELP,
    OPT_NO_HOT_COLD, OPT_CACHE_MAX_SIZE,
};

static const struct option long_opts[] = {
    {"manifest", required_argument, NULL, OPT_MANIFEST},
    {"target", required_argument, NULL, OPT_TARGET},
    {"outdir", required_argument, NULL, OPT_OUTDIR},
    {"jobs", required_argument, NULL, 'j'},
    {"cache-dir", required_argument, NULL, OPT_CACHE_DIR},
    {"depfile", required_argument, NULL, OPT_DEPFILE},
    {"clang", required_argument, NULL, OPT_CLANG},
    {"launcher", required_argument, NULL, OPT_LAUNCHER},
    {"exec-clang", no_argument, NULL, OPT_EXEC_CLANG},
    {"compile-commands", required_argument, NULL, OPT_COMPILE_COMMANDS},
    {"extra-cflags", required_argument, NULL, OPT_EXTRA_CFLAGS},
    {"extra-shim-cflags", required_argument, NULL, OPT_EXTRA_SHIM_CFLAGS},
    {"op", required_argument, NULL, OPT_OP},
    {"compile-timeout", required_argument, NULL, OPT_COMPILE_TIMEOUT},
    {"units", required_argument, NULL, OPT_UNITS},
    {"batch-ops", required_argument, NULL, OPT_BATCH_OPS},
    {"no-listing", no_argument, NULL, OPT_NO_LISTING},
    {"verbose", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, OPT_HELP},
    {"no-hot-cold", no_argument, NULL, OPT_NO_HOT_COLD},
    {"cache-max-size", required_argument, NULL, OPT_CACHE_MAX_SIZE},
    {NULL, 0, NULL, 0},
};

static int usage_error(const char *msg, const char *arg)
{
    fprintf(stderr, "stencilgen: error: ");
    fprintf(stderr, msg, arg);
    fprintf(stderr, "\n%s", usage_text);
    return SG_EXIT_USAGE;
}

static bool parse_jobs(const char *s, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end || v < 1 || v > 1024)
        return false;
    *out = (int)v;
    return true;
}

/* Seconds, from 1 to a day: a compile stuck longer than that is a hung compiler. */
static bool parse_timeout(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (*s == '\0' || *end || !(v >= 1 && v <= 86400))
        return false;
    *out = v;
    return true;
}

/* The ops a batch holds (jobs.c, plan_batches); without it, as many as
 * keep every -j job busy. */
static bool parse_batch_ops(const char *s, unsigned *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end || v < 1 || v > 10000)
        return false;
    *out = (unsigned)v;
    return true;
}

/* Returns -1 when parsing succeeded, else an exit code. */
static int parse_options(int argc, char **argv, gen_options *o)
{
    int c;
    bool batch_ops = false;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "j:v", long_opts, NULL)) != -1) {
        switch (c) {
        case OPT_MANIFEST: o->manifest = optarg; break;
        case OPT_TARGET:
            o->targets = xrealloc(o->targets, (o->ntargets + 1) * sizeof *o->targets);
            o->targets[o->ntargets++] = optarg;
            break;
        case OPT_OUTDIR: o->outdir = optarg; break;
        case 'j':
            if (!parse_jobs(optarg, &o->jobs))
                return usage_error("-j wants a number from 1 to 1024, got '%s'", optarg);
            break;
        case OPT_CACHE_DIR: o->cache_dir = optarg; break;
        case OPT_DEPFILE: o->depfile = optarg; break;
        case OPT_CLANG: o->clang = optarg; break;
        case OPT_LAUNCHER: o->launcher = optarg; break;
        case OPT_EXEC_CLANG: o->exec_clang = true; break;
        case OPT_NO_HOT_COLD: o->no_hot_cold = true; break;
        case OPT_COMPILE_COMMANDS: o->compile_commands = optarg; break;
        case OPT_EXTRA_CFLAGS: o->extra_cflags = optarg; break;
        case OPT_EXTRA_SHIM_CFLAGS: o->extra_shim_cflags = optarg; break;
        case OPT_OP: o->dump_op = optarg; break;
        case OPT_COMPILE_TIMEOUT:
            if (!parse_timeout(optarg, &o->compile_timeout))
                return usage_error("--compile-timeout wants seconds from 1 to 86400, got '%s'",
                                   optarg);
            break;
        case OPT_UNITS:
            if (!strcmp(optarg, "per-op"))
                o->units = SG_UNITS_PER_OP;
            else if (!strcmp(optarg, "batched"))
                o->units = SG_UNITS_BATCHED;
            else
                return usage_error("--units wants per-op or batched, got '%s'", optarg);
            break;
        case OPT_BATCH_OPS:
            if (!parse_batch_ops(optarg, &o->batch_ops))
                return usage_error("--batch-ops wants a number of ops from 1 to 10000, got '%s'",
                                   optarg);
            batch_ops = true;
            break;
        case OPT_NO_LISTING: o->no_listing = true; break;
        case OPT_CACHE_MAX_SIZE:
            if (!cache_parse_size(optarg, &o->cache_max_size))
                return usage_error("--cache-max-size wants bytes, with K, M or G for KiB, MiB "
                                   "or GiB (0: no bound), got '%s'", optarg);
            break;
        case 'v': o->verbose++; break;
        case OPT_HELP: fputs(usage_text, stdout); return SG_EXIT_OK;
        default:
            return usage_error("unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return usage_error("unexpected argument '%s'", argv[optind]);
    if (batch_ops && o->units != SG_UNITS_BATCHED)
        return usage_error("%s belongs to --units batched, not --units per-op", "--batch-ops");
    return -1;
}

static int check_required(const gen_options *o)
{
    const char *const paths[][2] = {
        {"--manifest", o->manifest}, {"--outdir", o->outdir}, {"--cache-dir", o->cache_dir},
        {"--depfile", o->depfile}, {"--compile-commands", o->compile_commands},
        {"--clang", o->clang}, {"--launcher", o->launcher},
    };
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++)
        if (paths[i][1] && !*paths[i][1]) /* "" would quietly mean the current directory */
            return usage_error("%s is empty", paths[i][0]);
    for (size_t i = 0; i < o->ntargets; i++)
        for (size_t j = 0; j < i; j++)
            if (!strcmp(o->targets[i], o->targets[j]))
                return usage_error("--target '%s' is given twice", o->targets[i]);
    if (!o->manifest)
        return usage_error("%s needs --manifest FILE", o->command);
    if (!strcmp(o->command, "build") && !o->outdir)
        return usage_error("%s needs --outdir DIR", o->command);
    if (!strcmp(o->command, "dump") && o->ntargets != 1)
        return usage_error("%s needs exactly one --target TRIPLE", o->command);
    if (strcmp(o->command, "build") &&
        (o->outdir || o->depfile || o->compile_commands))
        return usage_error("%s writes nothing: --outdir, --depfile and --compile-commands "
                           "belong to build",
                           o->command);
    if (strcmp(o->command, "dump") && o->dump_op)
        return usage_error("--op belongs to %s", "dump");
    return -1;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage_error("%s", "no command given");
    if (!strcmp(argv[1], "--version")) {
        printf("%s (LLVM %s)\n", prov_generator(), lb_llvm_version());
        return SG_EXIT_OK;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fputs(usage_text, stdout);
        return SG_EXIT_OK;
    }
    /* Before anything that could load the LLVM module: check-prebuilt runs
     * where there is none (prebuilt.c). */
    if (!strcmp(argv[1], "check-prebuilt"))
        return prebuilt_main(argc - 1, argv + 1);
    if (!strcmp(argv[1], "report"))
        return report_main(argc - 1, argv + 1);
    if (!strcmp(argv[1], "cache"))
        return cache_command_main(argc - 1, argv + 1);
    gen_options o = {.command = argv[1]};
    if (strcmp(o.command, "build") && strcmp(o.command, "check") && strcmp(o.command, "dump"))
        return usage_error("unknown command '%s'", o.command);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    o.jobs = ncpu > 0 ? (int)ncpu : 1;
    o.compile_timeout = DEFAULT_COMPILE_TIMEOUT_S;
    /* Batched units write the same headers as per-op ones, several times faster
     * cold; per-op units stay for debugging one op. */
    o.units = SG_UNITS_BATCHED;
    o.cache_max_size = CACHE_DEFAULT_MAX_SIZE;
    int rc = parse_options(argc - 1, argv + 1, &o);
    if (rc < 0)
        rc = check_required(&o);
    if (rc < 0)
        rc = pipeline_run(&o);
    free(o.targets);
    return rc;
}
