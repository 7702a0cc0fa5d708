/* cache_command.c - `stencilgen cache (--stats | --clean) (--cache-dir DIR |
 * --outdir DIR)`: the store's size, its blobs and their dates, or all of it
 * removed under the lock builds take to close it. No compiler, no LLVM. */
#define _GNU_SOURCE
#include "cache_command.h"

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache.h"
#include "diag.h"
#include "util.h"

static const char cache_usage[] =
    "usage: stencilgen cache (--stats | --clean) (--cache-dir DIR | --outdir DIR)\n"
    "  --stats  the blobs, their bytes and dates, the record index\n"
    "  --clean  remove every blob and the record index (the next build compiles all)\n";

static int cache_usage_error(const char *what)
{
    fprintf(stderr, "stencilgen: error: cache: %s\n%s", what, cache_usage);
    return SG_EXIT_USAGE;
}

static void put_date(const char *label, const struct timespec *t)
{
    char text[64] = "-";
    struct tm tm;
    if (t->tv_sec && gmtime_r(&t->tv_sec, &tm))
        strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S UTC", &tm);
    printf("%s%s\n", label, text);
}

int cache_command_main(int argc, char **argv)
{
    enum { C_STATS = 256, C_CLEAN, C_CACHE_DIR, C_OUTDIR, C_HELP };
    static const struct option opts[] = {
        {"stats", no_argument, NULL, C_STATS},         {"clean", no_argument, NULL, C_CLEAN},
        {"cache-dir", required_argument, NULL, C_CACHE_DIR},
        {"outdir", required_argument, NULL, C_OUTDIR}, {"help", no_argument, NULL, C_HELP},
        {NULL, 0, NULL, 0},
    };
    bool stats = false, clean = false;
    const char *cache_dir = NULL, *outdir = NULL;
    opterr = 0;
    for (int c; (c = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
        switch (c) {
        case C_STATS: stats = true; break;
        case C_CLEAN: clean = true; break;
        case C_CACHE_DIR: cache_dir = optarg; break;
        case C_OUTDIR: outdir = optarg; break;
        case C_HELP: fputs(cache_usage, stdout); return SG_EXIT_OK;
        default: return cache_usage_error("unknown or incomplete option");
        }
    }
    if (optind < argc)
        return cache_usage_error("unexpected argument");
    if (stats == clean)
        return cache_usage_error("needs exactly one of --stats and --clean");
    if (!cache_dir == !outdir)
        return cache_usage_error("needs exactly one of --cache-dir DIR and --outdir DIR");
    char *dir = cache_dir ? xstrdup(cache_dir) : path_join(outdir, ".stencilgen");
    gen_cache_stats s;
    if (!cache_stats(dir, &s)) {
        diag_error("'%s' is not a stencilgen cache directory", dir);
        free(dir);
        return SG_EXIT_USAGE;
    }
    int rc = SG_EXIT_OK;
    if (stats) {
        printf("cache: %s\n", dir);
        printf("blobs: %zu, %llu bytes\n", s.blobs, (unsigned long long)s.blob_bytes);
        printf("record index: %llu bytes\n", (unsigned long long)s.index_bytes);
        put_date("least recently used: ", &s.oldest);
        put_date("most recently used: ", &s.newest);
    } else {
        uint64_t removed = 0;
        if (!cache_clean(dir, &removed)) {
            diag_error("cannot empty '%s' (a blob or the record index could not be removed)",
                       dir);
            rc = SG_EXIT_TOOLCHAIN;
        }
        printf("cache: %s: removed %llu bytes of blobs and the record index\n", dir,
               (unsigned long long)removed);
    }
    free(dir);
    return rc;
}
