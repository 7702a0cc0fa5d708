/* jitmem.c - executable memory, W^X: a region reserves address space with no
 * access; a run of pages is mapped read+write while code is written, then
 * read+execute (and back to read+write only while sr_patch_* rewrites a hole).
 * No page is ever writable and executable. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

size_t jitmem_page_size(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

bool jitmem_region_init(sr_region *r, size_t size)
{
    size_t page = jitmem_page_size();
    if (size > SIZE_MAX - page)
        return false; /* rounding up would wrap */
    size = (size + page - 1) / page * page;
    void *base = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    size_t npages = size / page;
    uint8_t *used = calloc(npages, 1);
    if (base == MAP_FAILED || !used) {
        if (base != MAP_FAILED)
            munmap(base, size);
        free(used);
        return false;
    }
    *r = (sr_region){.base = base, .size = size, .used = used, .npages = npages};
    return true;
}

void jitmem_region_fini(sr_region *r)
{
    munmap(r->base, r->size);
    free(r->used);
}

uint8_t *jitmem_alloc(sr_region *r, size_t bytes)
{
    size_t page = jitmem_page_size();
    size_t want = (bytes + page - 1) / page;
    /* First fit: regions are small (hundreds of pages) and runs are short.
     * used[] is 0 free, 1 in use, 2 retired (freed while perf watches). */
    for (size_t i = 0, run = 0; i < r->npages; i++) {
        run = r->used[i] ? 0 : run + 1;
        if (run < want)
            continue;
        size_t first = i + 1 - want;
        uint8_t *p = r->base + first * page;
        if (mprotect(p, want * page, PROT_READ | PROT_WRITE) != 0)
            return NULL;
        memset(r->used + first, 1, want);
        return p;
    }
    return NULL;
}

/* The whole pages under [p, p + bytes). */
static void page_span(uint8_t *p, size_t bytes, uint8_t **first, size_t *len)
{
    uintptr_t page = jitmem_page_size(), lo = (uintptr_t)p / page * page;
    uintptr_t hi = ((uintptr_t)p + bytes + page - 1) / page * page;
    *first = (uint8_t *)lo;
    *len = hi - lo;
}

int jitmem_exec_prot(bool landing_pads)
{
#if defined(__aarch64__) && defined(__linux__)
    /* Guarded pages: an indirect branch into them must land on a BTI
     * instruction. Only when every way in has one, and the CPU has BTI. */
    enum { HWCAP2_BTI_ = 1 << 17, PROT_BTI_ = 0x10 };
    if (landing_pads && (getauxval(AT_HWCAP2) & HWCAP2_BTI_))
        return PROT_READ | PROT_EXEC | PROT_BTI_;
#else
    (void)landing_pads;
#endif
    return PROT_READ | PROT_EXEC;
}

bool jitmem_seal(uint8_t *p, size_t bytes, int prot)
{
    uint8_t *first;
    size_t len;
    page_span(p, bytes, &first, &len);
    if (mprotect(first, len, prot) != 0)
        return false;
    __builtin___clear_cache((char *)p, (char *)p + bytes);
    return true;
}

bool jitmem_unseal(uint8_t *p, size_t bytes)
{
    uint8_t *first;
    size_t len;
    page_span(p, bytes, &first, &len);
    return mprotect(first, len, PROT_READ | PROT_WRITE) == 0;
}

void jitmem_release(sr_region *r, uint8_t *p, size_t bytes)
{
    size_t page = jitmem_page_size();
    size_t first = (size_t)(p - r->base) / page, n = (bytes + page - 1) / page;
    /* Inaccessible again: a stale pointer into freed code faults at once. */
    mmap(p, n * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
    memset(r->used + first, r->no_reuse ? 2 : 0, n);
}
