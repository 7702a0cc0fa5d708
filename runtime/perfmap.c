/* perfmap.c - perf's JIT formats. Map mode appends "START SIZE name" lines to
 * /tmp/perf-<pid>.map, which `perf report` reads for samples in anonymous
 * executable memory. Freed code is never reused while perf is watching (see
 * jitmem), because the map is append-only: a stale line must not name new code. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

struct sr_perf {
    sr_perf_mode mode;
    pid_t pid; /* the file belongs to this process; a forked child opens its own */
    FILE *map;
    bool failed; /* warned once; the JIT goes on without perf output */
};

static bool open_map(sr_perf *p)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/perf-%d.map", (int)getpid());
    p->pid = getpid();
    p->map = fopen(path, "a");
    if (!p->map) {
        fprintf(stderr, "stencilrt: warning: cannot write %s (%s); perf will not name JIT code\n",
                path, strerror(errno));
        p->failed = true;
        return false;
    }
    return true;
}

sr_perf *perfmap_open(sr_perf_mode mode)
{
    sr_perf *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->mode = mode;
    if (mode != SR_PERF_MAP) {
        fprintf(stderr, "stencilrt: warning: STENCILRT_PERF=jitdump is not supported yet\n");
        free(p);
        return NULL;
    }
    if (!open_map(p)) {
        free(p);
        return NULL;
    }
    return p;
}

void perfmap_code_load(sr_perf *p, const sr_perf_code *code, size_t n)
{
    if (!p || p->failed)
        return;
    if (p->pid != getpid()) { /* forked: the parent's file is not ours */
        if (p->map)
            fclose(p->map);
        if (!open_map(p))
            return;
    }
    for (size_t i = 0; i < n; i++)
        fprintf(p->map, "%" PRIx64 " %zx %s\n", code[i].addr, code[i].size, code[i].name);
    /* Whole lines only: perf may read the file at any time. */
    if (fflush(p->map) != 0 && !p->failed) {
        fprintf(stderr, "stencilrt: warning: writing the perf map failed (%s)\n", strerror(errno));
        p->failed = true;
    }
}

void perfmap_close(sr_perf *p)
{
    if (!p)
        return;
    if (p->map)
        fclose(p->map);
    free(p);
}
