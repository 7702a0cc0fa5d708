/* jitmem.c - executable memory, W^X: no address is ever writable and
 * executable at once.
 *
 * A region is a range of address space that code runs from, handed out in
 * chunks of whole granules. It is kept in one of two ways:
 *
 * - two views (the default): the same memory is mapped twice, read+execute
 *   where code runs and read+write elsewhere, where it is written. Emitting,
 *   patching and freeing make no system call; the instruction cache is
 *   flushed for the bytes written. Chunks are 64-byte granules, so many
 *   executors share a page. A freed chunk is filled with trap instructions
 *   (a stale jump into it stops at once) and reused for the same size.
 *   After fork() the child takes private copies (jitmem_fork_child): the
 *   memory is shared, and neither process may write the other's code.
 * - one view: the memory is mapped once, and each chunk (whole pages) is made
 *   read+write while it is written, read+execute after; a freed chunk is
 *   made inaccessible. Two mprotect calls per emit, and a stale jump faults.
 *
 * The views of a region are a shared anonymous mapping and its alias made by
 * mremap (perf names such memory //anon-like, "/dev/zero", and reads its
 * perf-<pid>.map for it); where mremap cannot alias (valgrind), a memfd
 * mapped twice (which perf 6.1 does not look up in the map).
 *
 * Windows has one view only (config.c): address space reserved with
 * VirtualAlloc, a chunk committed read+write while it is written, made
 * execute+read by VirtualProtect and its instructions flushed with
 * FlushInstructionCache, decommitted when freed (a stale jump faults). */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _WIN32
#include <windows.h>
#else
#include <fcntl.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>
#endif

#include "internal.h"

enum { GRANULE = 64 }; /* two views: a chunk's alignment and unit (a cache line) */

size_t jitmem_page_size(void)
{
#ifdef _WIN32
    SYSTEM_INFO si;
    GetSystemInfo(&si);
    return si.dwPageSize ? si.dwPageSize : 4096;
#else
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
#endif
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
#ifdef _WIN32
    return PAGE_EXECUTE_READ;
#else
    return PROT_READ | PROT_EXEC;
#endif
}

static void free_lists_fini(sr_region *r)
{
    for (size_t c = 0; c < JITMEM_CLASSES; c++)
        free(r->free[c].item);
    free(r->large.item);
}

#ifdef _WIN32
/* The calling thread's last failed Windows call, for jitmem_error: errno
 * cannot carry GetLastError's code, and the API's name says more. */
static _Thread_local char win_error[256];

static void win_error_clear(void)
{
    win_error[0] = 0;
}

/* Record the call that failed (printf-style) with GetLastError's code and,
 * when Windows has one, its text. */
static void win_error_set(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void win_error_set(const char *fmt, ...)
{
    DWORD code = GetLastError();
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(win_error, sizeof win_error, fmt, ap);
    va_end(ap);
    size_t at = n < 0 ? 0 : (size_t)n < sizeof win_error ? (size_t)n : sizeof win_error - 1;
    char text[160];
    DWORD len = FormatMessageA(FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS, NULL,
                               code, 0, text, sizeof text, NULL);
    while (len && (text[len - 1] == '\n' || text[len - 1] == '\r' || text[len - 1] == ' '))
        len--; /* system messages end with a line break */
    text[len] = 0;
    snprintf(win_error + at, sizeof win_error - at, len ? ": error %lu (%s)" : ": error %lu",
             (unsigned long)code, text);
}

const char *jitmem_error(const char *posix_call, const char *fallback)
{
    (void)posix_call; /* the recorded text names the Windows call */
    return win_error[0] ? win_error : fallback ? fallback : "out of memory";
}

/* A failure freeing memory has no caller to tell: it is printed, since the
 * address space (or commit charge) it holds is lost. */
static void win_warn_free(void)
{
    fprintf(stderr, "stencilrt: warning: %s\n", win_error);
}

/* Windows keeps one view (config.c): the region's address space reserved,
 * its chunks committed as they are handed out. */
static bool reserve(sr_region *r)
{
    r->base = r->write = VirtualAlloc(NULL, r->size, MEM_RESERVE, PAGE_NOACCESS);
    if (!r->base)
        win_error_set("VirtualAlloc(NULL, %zu, MEM_RESERVE)", r->size);
    return r->base != NULL;
}

static bool set_prot(uint8_t *p, size_t len, DWORD prot)
{
    DWORD old;
    win_error_clear();
    if (VirtualProtect(p, len, prot, &old))
        return true;
    win_error_set("VirtualProtect(%p, %zu, %s)", (void *)p, len,
                  prot == PAGE_READWRITE ? "PAGE_READWRITE" : "PAGE_EXECUTE_READ");
    return false;
}

static void flush_code(uint8_t *p, size_t bytes)
{
    FlushInstructionCache(GetCurrentProcess(), p, bytes);
}

void jitmem_region_fini(sr_region *r)
{
    if (!VirtualFree(r->base, 0, MEM_RELEASE)) {
        win_error_set("VirtualFree(%p, 0, MEM_RELEASE)", (void *)r->base);
        win_warn_free();
    }
    free_lists_fini(r);
}
#else
/* Linux: errno says what failed; the caller names the call. */
const char *jitmem_error(const char *posix_call, const char *fallback)
{
    static _Thread_local char buf[160];
    if (!errno && fallback)
        return fallback;
    if (!posix_call)
        return strerror(errno);
    snprintf(buf, sizeof buf, "%s: %s", posix_call, strerror(errno));
    return buf;
}

/* ---- the registry of two-view regions, for fork (registry lock held) */

static sr_region *two_view_regions;

static void list_region(sr_region *r)
{
    r->next_two_view = two_view_regions;
    two_view_regions = r;
}

static void unlist_region(sr_region *r)
{
    for (sr_region **p = &two_view_regions; *p; p = &(*p)->next_two_view)
        if (*p == r) {
            *p = r->next_two_view;
            return;
        }
}

/* ---- making the views */

/* A writable view of `size` fresh bytes, and a view of the same memory at
 * *run with `prot`, replacing what is there (a reservation, or a forked
 * child's view of its parent's memory). */
static bool map_views_at(size_t size, int prot, uint8_t **write, uint8_t *run)
{
    uint8_t *w = mmap(NULL, size, PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (w == MAP_FAILED)
        return false;
    /* mremap with old size 0 maps the same shared pages again. */
    if (mremap(w, 0, size, MREMAP_MAYMOVE | MREMAP_FIXED, run) != MAP_FAILED) {
        if (mprotect(run, size, prot) == 0) {
            *write = w;
            return true;
        }
        munmap(w, size);
        return false;
    }
    munmap(w, size);
    int fd = memfd_create("stencilrt", MFD_CLOEXEC);
    if (fd < 0)
        return false;
    w = MAP_FAILED;
    uint8_t *x = MAP_FAILED;
    if (ftruncate(fd, (off_t)size) == 0) {
        w = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
        x = mmap(run, size, prot, MAP_SHARED | MAP_NORESERVE | MAP_FIXED, fd, 0);
    }
    close(fd);
    if (w != MAP_FAILED && x != MAP_FAILED) {
        *write = w;
        return true;
    }
    if (w != MAP_FAILED)
        munmap(w, size);
    return false;
}

/* Both views, the running one where an ordinary mmap puts it (so address
 * hints and interposed mmaps, like a MAP_32BIT one, place code). */
static bool map_views(size_t size, int prot, uint8_t **write, uint8_t **run)
{
    uint8_t *at = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (at == MAP_FAILED)
        return false;
    if (!map_views_at(size, prot, write, at)) {
        munmap(at, size);
        return false;
    }
    *run = at;
    return true;
}

#endif

bool jitmem_region_init(sr_region *r, size_t size, bool two_views, int prot)
{
    size_t page = jitmem_page_size();
    if (size > SIZE_MAX - page)
        return false; /* rounding up would wrap */
    size = (size + page - 1) / page * page;
    *r = (sr_region){.size = size, .two_views = two_views, .prot = prot,
                     .granule = two_views ? GRANULE : page};
    r->ngranules = size / r->granule;
#ifdef _WIN32
    win_error_clear();
    return !two_views && reserve(r);
#else
    if (two_views) {
        if (!map_views(size, prot, &r->write, &r->base))
            return false;
        list_region(r);
        return true;
    }
    void *base = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED)
        return false;
    r->base = r->write = base;
    return true;
#endif
}

#ifndef _WIN32
void jitmem_region_fini(sr_region *r)
{
    if (r->two_views) {
        unlist_region(r);
        munmap(r->write, r->size);
    }
    munmap(r->base, r->size);
    free_lists_fini(r);
}
#endif

/* ---- chunks: exact-size free lists first, then the untouched top.
 * Sizes up to JITMEM_CLASSES granules have a list each (O(1) both ways);
 * bigger chunks share one list, first fit, the rest of a chunk kept. */

size_t jitmem_chunk_size(const sr_region *r, size_t bytes)
{
    return (bytes + r->granule - 1) / r->granule * r->granule;
}

static bool push(jitmem_list *l, uint64_t at, uint64_t granules)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        jitmem_chunk *grown = realloc(l->item, cap * sizeof *grown);
        if (!grown)
            return false;
        l->item = grown;
        l->cap = cap;
    }
    l->item[l->n++] = (jitmem_chunk){at, granules};
    return true;
}

static void keep_free(sr_region *r, uint64_t at, uint64_t granules)
{
    if (!granules)
        return;
    /* Out of memory for the list: the chunk is never reused (no harm done). */
    push(granules <= JITMEM_CLASSES ? &r->free[granules - 1] : &r->large, at, granules);
}

/* A free chunk of `granules`, as a granule index; false if none is free. */
static bool take_free(sr_region *r, uint64_t granules, uint64_t *at)
{
    if (granules <= JITMEM_CLASSES && r->free[granules - 1].n) {
        jitmem_list *l = &r->free[granules - 1];
        *at = l->item[--l->n].at;
        return true;
    }
    jitmem_list *l = &r->large;
    for (size_t k = 0; k < l->n; k++) {
        uint64_t have = l->item[k].granules, start = l->item[k].at;
        if (have < granules)
            continue;
        l->item[k] = l->item[--l->n];
        *at = start;
        keep_free(r, start + granules, have - granules);
        return true;
    }
    return false;
}

uint8_t *jitmem_alloc(sr_region *r, size_t bytes, uint8_t **write)
{
#ifdef _WIN32
    win_error_clear(); /* no room is no system error */
#endif
    if (r->frozen || !bytes)
        return NULL;
    uint64_t granules = jitmem_chunk_size(r, bytes) / r->granule, at;
    if (!take_free(r, granules, &at)) {
        if (granules > r->ngranules - r->top)
            return NULL;
        at = r->top;
        r->top += granules;
    }
    uint8_t *p = r->base + at * r->granule;
#ifdef _WIN32
    if (!VirtualAlloc(p, granules * r->granule, MEM_COMMIT, PAGE_READWRITE)) {
        win_error_set("VirtualAlloc(%p, %zu, MEM_COMMIT)", (void *)p,
                      (size_t)(granules * r->granule));
#else
    if (!r->two_views && mprotect(p, granules * r->granule, PROT_READ | PROT_WRITE) != 0) {
#endif
        keep_free(r, at, granules);
        return NULL;
    }
    *write = r->write + at * r->granule;
    return p;
}

/* The whole pages under [p, p + bytes). */
static void page_span(uint8_t *p, size_t bytes, uint8_t **first, size_t *len)
{
    uintptr_t page = jitmem_page_size(), lo = (uintptr_t)p / page * page;
    uintptr_t hi = ((uintptr_t)p + bytes + page - 1) / page * page;
    *first = (uint8_t *)lo;
    *len = hi - lo;
}

bool jitmem_seal(sr_region *r, uint8_t *p, size_t bytes)
{
    if (!r->two_views) {
        uint8_t *first;
        size_t len;
        page_span(p, bytes, &first, &len);
#ifdef _WIN32
        if (!set_prot(first, len, (DWORD)r->prot))
            return false;
    }
    flush_code(p, bytes);
#else
        if (mprotect(first, len, r->prot) != 0)
            return false;
    }
    /* Written through the other view or not, the bytes that run are these. */
    __builtin___clear_cache((char *)p, (char *)p + bytes);
#endif
    return true;
}

uint8_t *jitmem_unseal(sr_region *r, uint8_t *p, size_t bytes)
{
    if (r->two_views)
        return r->frozen ? NULL : r->write + (p - r->base);
    uint8_t *first;
    size_t len;
    page_span(p, bytes, &first, &len);
#ifdef _WIN32
    return set_prot(first, len, PAGE_READWRITE) ? p : NULL;
#else
    return mprotect(first, len, PROT_READ | PROT_WRITE) == 0 ? p : NULL;
#endif
}

/* What freed code is filled with: a jump into it traps at once. */
#if defined(__aarch64__)
enum { TRAP_BYTE = 0x00 }; /* udf #0 */
#else
enum { TRAP_BYTE = 0xcc }; /* int3 */
#endif

void jitmem_release(sr_region *r, uint8_t *p, size_t bytes)
{
    uint64_t at = (uint64_t)(p - r->base) / r->granule;
    size_t len = jitmem_chunk_size(r, bytes);
    uint64_t granules = len / r->granule;
    if (r->two_views && !r->frozen) {
        memset(r->write + at * r->granule, TRAP_BYTE, len);
        __builtin___clear_cache((char *)p, (char *)p + len);
    } else if (!r->two_views) {
        /* Inaccessible again: a stale pointer into freed code faults at once. */
#ifdef _WIN32
        if (!VirtualFree(p, len, MEM_DECOMMIT)) {
            win_error_set("VirtualFree(%p, %zu, MEM_DECOMMIT)", (void *)p, len);
            win_warn_free();
        }
#else
        mmap(p, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
#endif
    }
    if (!r->no_reuse && !r->frozen)
        keep_free(r, at, granules);
}

/* ---- whether code written through the writable view is the code that runs */

#if defined(__x86_64__) && !defined(_WIN32)
#define PROBE_CODE 1
/* endbr64 (the landing pad an indirect call needs where IBT is enforced, a
 * NOP elsewhere); mov eax, imm32; ret. */
static size_t probe_code(uint8_t *at, uint16_t value)
{
    static const uint8_t head[] = {0xf3, 0x0f, 0x1e, 0xfa, 0xb8};
    uint32_t imm = value;
    memcpy(at, head, sizeof head);
    memcpy(at + sizeof head, &imm, sizeof imm);
    at[sizeof head + sizeof imm] = 0xc3;
    return sizeof head + sizeof imm + 1;
}
#elif defined(__aarch64__) && !defined(_WIN32)
#define PROBE_CODE 1
/* bti c (the landing pad a BTI-guarded page needs, jitmem_exec_prot; a NOP
 * elsewhere); movz w0, #value; ret. No return address is signed: x30 is
 * never saved. */
static size_t probe_code(uint8_t *at, uint16_t value)
{
    const uint32_t insn[] = {0xd503245f, 0x52800000u | (uint32_t)value << 5, 0xd65f03c0};
    memcpy(at, insn, sizeof insn);
    return sizeof insn;
}
#endif

#ifdef PROBE_CODE
enum { PROBE_BEFORE = 0x5a17, PROBE_AFTER = 0xa5e8 };

static int run_probe(const uint8_t *p)
{
    int (*fn)(void);
    memcpy(&fn, &p, sizeof fn); /* code address to function pointer */
    return fn();
}

bool jitmem_views_agree(sr_region *r)
{
    if (!r->two_views)
        return true;
    uint8_t *write, *p = jitmem_alloc(r, JITMEM_PROBE_BYTES, &write);
    if (!p)
        return false; /* no room: not proven */
    /* Written, sealed, run, written again through jitmem_unseal and sealed
     * again: what sr_emit and sr_patch_operand do, cache maintenance
     * included. A translator that missed the second write runs the first. */
    size_t len = probe_code(write, PROBE_BEFORE);
    int before = -1, after = -1;
    if (jitmem_seal(r, p, len)) {
        before = run_probe(p);
        uint8_t *again = jitmem_unseal(r, p, len);
        if (again) {
            probe_code(again, PROBE_AFTER);
            if (jitmem_seal(r, p, len))
                after = run_probe(p);
        }
    }
    jitmem_release(r, p, len);
    return before == PROBE_BEFORE && after == PROBE_AFTER;
}
#else
bool jitmem_views_agree(sr_region *r)
{
    /* Windows has one view; for another CPU there is no probe code (and no
     * stencils), so two views stay as configured. */
    (void)r;
    return true;
}
#endif

#ifndef _WIN32 /* no fork() on Windows */
/* ---- fork: the child's private copy of every two-view region.
 * The parent waits (on a pipe the child closes) until the child has its
 * copies: until then, a parent thread freeing or patching code would write
 * into the child's executors too. */

static int fork_pipe[2] = {-1, -1};

void jitmem_fork_prepare(void)
{
    /* Without a pipe the parent does not wait: then the child copies while
     * the parent may already be changing its code (only out of descriptors). */
    if (two_view_regions && pipe2(fork_pipe, O_CLOEXEC) != 0)
        fork_pipe[0] = fork_pipe[1] = -1;
}

void jitmem_fork_parent(void)
{
    if (fork_pipe[0] < 0)
        return;
    close(fork_pipe[1]);
    char c;
    while (read(fork_pipe[0], &c, 1) < 0 && errno == EINTR)
        continue; /* end of file: the child has its copies (or is gone) */
    close(fork_pipe[0]);
    fork_pipe[0] = fork_pipe[1] = -1;
}

/* New memory under the same running address, holding what the region holds:
 * from now on this process's writes are its own. */
static bool privatize(sr_region *r)
{
    uint8_t *shared = r->write;
    if (!map_views_at(r->size, r->prot, &r->write, r->base)) /* r->write kept on failure */
        return false;
    memcpy(r->write, shared, r->top * r->granule);
    munmap(shared, r->size);
    __builtin___clear_cache((char *)r->base, (char *)r->base + r->top * r->granule);
    return true;
}

void jitmem_fork_child(void)
{
    /* A region that cannot be copied stays shared, and this process never
     * writes to it again (its executors still run, as long as the parent
     * keeps them). */
    for (sr_region *r = two_view_regions; r; r = r->next_two_view)
        if (!r->frozen && !privatize(r))
            r->frozen = true;
    if (fork_pipe[0] >= 0) {
        close(fork_pipe[0]);
        close(fork_pipe[1]);
        fork_pipe[0] = fork_pipe[1] = -1;
    }
}
#endif
