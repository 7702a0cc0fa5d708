/* jitmem.c - executable memory, W^X: an arena reserves address space with no
 * access; a run of pages is mapped read+write while an executor is written,
 * then read+execute for good. No page is ever writable and executable. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

size_t jitmem_page_size(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

sr_arena *jitmem_arena_new(size_t size)
{
    size_t page = jitmem_page_size();
    if (size > SIZE_MAX - page)
        return NULL; /* rounding up would wrap */
    size = (size + page - 1) / page * page;
    sr_arena *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    void *base = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    a->npages = size / page;
    a->used = calloc(a->npages, 1);
    if (base == MAP_FAILED || !a->used) {
        if (base != MAP_FAILED)
            munmap(base, size);
        free(a->used);
        free(a);
        return NULL;
    }
    a->base = base;
    a->size = size;
    return a;
}

void jitmem_arena_free(sr_arena *a)
{
    munmap(a->base, a->size);
    free(a->used);
    free(a);
}

uint8_t *jitmem_alloc(sr_arena *a, size_t bytes)
{
    size_t page = jitmem_page_size();
    size_t want = (bytes + page - 1) / page;
    /* First fit: arenas are small (hundreds of pages) and runs are short.
     * used[] is 0 free, 1 in use, 2 retired (freed while perf watches). */
    for (size_t i = 0, run = 0; i < a->npages; i++) {
        run = a->used[i] ? 0 : run + 1;
        if (run < want)
            continue;
        size_t first = i + 1 - want;
        uint8_t *p = a->base + first * page;
        if (mprotect(p, want * page, PROT_READ | PROT_WRITE) != 0)
            return NULL;
        memset(a->used + first, 1, want);
        return p;
    }
    return NULL;
}

bool jitmem_seal(uint8_t *p, size_t bytes)
{
    size_t page = jitmem_page_size();
    size_t len = (bytes + page - 1) / page * page;
    if (mprotect(p, len, PROT_READ | PROT_EXEC) != 0)
        return false;
    __builtin___clear_cache((char *)p, (char *)p + bytes);
    return true;
}

void jitmem_release(sr_arena *a, uint8_t *p, size_t bytes)
{
    size_t page = jitmem_page_size();
    size_t first = (size_t)(p - a->base) / page, n = (bytes + page - 1) / page;
    /* Inaccessible again: a stale pointer into freed code faults at once. */
    mmap(p, n * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
    memset(a->used + first, a->no_reuse ? 2 : 0, n);
}
