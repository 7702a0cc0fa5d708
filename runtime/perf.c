/* perf.c - perf's two ways of learning about JIT code.
 *
 * Recipes (docs/tools.md, "Profiling with perf"). Names only, from the perf map:
 *
 *   $ STENCILRT_PERF=map perf record -e cpu-clock -- \
 *         build/stencils/tinyvm --jit --repeat 20 stencils/programs/loop.tvm
 *   $ perf report --stdio --no-children
 *       49.63%  tinyvm   [JIT] tid 6747        [.] mod@main[13]
 *       10.79%  tinyvm   [JIT] tid 6747        [.] add@main[14]
 *
 * Names and call chains through JIT frames, from the jitdump: record with the
 * clock the dump is stamped with (-k mono), then let perf inject turn the dump
 * into one ELF image per code load before reporting:
 *
 *   $ STENCILRT_PERF=jitdump perf record -k mono -e cpu-clock \
 *         --call-graph dwarf,65528 -o perf.data -- \
 *         build/stencils/tinyvm --jit tests/perf/nested.tvm
 *   $ perf inject --jit -i perf.data -o perf.jit.data
 *   $ perf report -i perf.jit.data --stdio --no-children
 *       32.81%  tinyvm   jitted-6357-19.so     [.] mod@work[9]
 *               ---mod@work[9]
 *                  vm_run
 *                  call@main[20]
 *                  vm_run
 *                  main
 *
 * `-g` gives the same chains from frame pointers where the C code keeps them;
 * dwarf,65528 because each of tinyvm's vm_run frames holds 8 KiB of operand
 * stack, as much as perf copies by default. Run perf inject after the program
 * exits and before the dump is removed; `rm -f /tmp/jit-*.dump
 * /tmp/jitted-*.so` cleans up afterwards (/tmp/perf-<pid>.map for the map).
 * `perf annotate -i perf.jit.data --stdio -s 'mul@work[7]'` disassembles a
 * stencil with its samples.
 *
 * How it works:
 *
 * STENCILRT_PERF=map: "START SIZE name" lines in /tmp/perf-<pid>.map, which
 * perf report reads for samples in anonymous executable memory.
 *
 * STENCILRT_PERF=jitdump: <dir>/jit-<pid>.dump (dir: $STENCILRT_PERF_DIR, else
 * /tmp) in perf's jitdump format. `perf inject --jit` finds it through the
 * executable mapping of the file that perf record saw (the marker), turns each
 * JIT_CODE_LOAD into an ELF image <dir>/jitted-<pid>-<index>.so plus an mmap
 * event at the record's time, and attaches the JIT_CODE_UNWINDING_INFO that
 * precedes the load to that image, so `--call-graph dwarf` can unwind it.
 *
 * Both files belong to the process, not to a runtime: perf looks for one of
 * each per pid. Every sr_perf of a process shares them (counted users); a
 * forked child drops the parent's and starts files of its own.
 *
 * Every entry point runs with the runtime's registry lock held (internal.h).
 * That lock serialises the shared state below across threads and is held
 * across fork(), so a child never inherits a half-written record; each record
 * also goes out in a single write() so a reader sees whole records.
 *
 * Freed code: perf reads both files after the fact and learns nothing about
 * frees, so an entry must never come to describe different code. While perf
 * output is on, jitmem never hands out freed chunks again (region.no_reuse), so
 * within a runtime an address named here keeps naming this code. Arenas are
 * unmapped when their runtime is destroyed, and a later runtime may be given
 * the same addresses: jitdump copes (every load is timestamped and perf lets
 * a later mapping replace an earlier one), the perf map cannot (it has no
 * time), so a process that destroys and recreates runtimes in map mode may
 * see later samples named after earlier code at the same address. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "elfdefs.h"
#include "internal.h"

static uint64_t align8(uint64_t n) { return (n + 7) & ~(uint64_t)7; }

/* to - from as a 32-bit field; callers have checked that it fits. */
static int32_t rel32(uint64_t to, uint64_t from) { return (int32_t)((int64_t)to - (int64_t)from); }

/* ---- jitdump images and their unwind data
 *
 * perf inject (util/jitdump.c, util/genelf.c) turns each JIT_CODE_LOAD into an
 * ELF image: the code at text address T, then the preceding
 * JIT_CODE_UNWINDING_INFO's data as .eh_frame at ALIGN8(T + size) followed
 * directly by .eh_frame_hdr (table first, header last, whatever the jitdump
 * specification text says), and an mmap event that puts T at the code's
 * address and spans ALIGN8(size) + mapped_size bytes. Every pointer we write is
 * relative (pc-relative, or from the header for the search table) and laid out
 * as if .eh_frame sat at addr + ALIGN8(size), so it holds for any T. The
 * runtime's absolute pointers would only fit an image loaded at address 0.
 *
 * perf's libunwind-based unwinder (Debian's perf) reads the header from the
 * image file but the search table and the FDE through its address-space maps:
 * they must lie inside the image's own mapping (mapped_size 0 breaks the
 * unwinding) and no later mapping may cover them. A stencil's unwind data
 * would sit exactly where the next stencil is mapped, so a stencil's image
 * holds the code from the stencil to the end of its executor instead (a
 * suffix): perf attributes each byte to the last image mapped over it, still
 * the right stencil, and every image of the executor puts its header and
 * FDEs at the same addresses past the executor's end, so the image left
 * owning them (the last one) answers for all: its table's first FDE covers
 * the whole executor (whose CFI is one row, the shim's at its call). Each
 * image's second FDE covers just its own code, for libdw-based perf, which
 * reads every image file directly and skips FDEs that start before the image.
 * Suffixes cost quadratic space, so beyond SUFFIX_BUDGET bytes per executor
 * stencils get images of their own code without unwind data: named, but
 * DWARF unwinding stops in them (frame-pointer call graphs still work). */

enum { EH_FRAME_HDR_SIZE = 28 }; /* version, 3 encodings, 2 words, 2 table rows */

/* Every FDE pointer in the images: relative, so it holds wherever perf maps it. */
enum { PCREL = DW_EH_PE_pcrel | DW_EH_PE_sdata4 };

/* Code bytes all stencil images of one executor may hold together. */
#define SUFFIX_BUDGET ((uint64_t)2 << 20)

/* What the runtime leaves free after an executor's code for the unwind data
 * placed there (perf_unwind_slack): the CIE, two FDEs of the executor's
 * one-row CFI, a terminator and .eh_frame_hdr, after up to 7 bytes of
 * alignment. Kept whenever perf output is on, map mode included. */
#define UNWIND_SLACK 256

/* One JIT_CODE_LOAD: perf's image holds code [addr, addr + size). */
typedef struct image {
    const char *name;
    uint64_t addr, size;
} image;

/* Unwind data shared by the images of one executor (or of the shim). */
typedef struct unwind_plan {
    const sr_stencil_set *set; /* its CIE heads each image's .eh_frame */
    size_t cie_size;           /* that CIE's natural size (0: unknown, no unwind data) */
    const uint8_t *insns;      /* the code's FDE instructions */
    size_t insns_len;
    bool one_row;              /* see sr_perf_code */
    uint64_t lo, hi;           /* the range every image's first FDE covers */
    uint64_t fde_at;           /* where every image of the group puts its first FDE */
} unwind_plan;

/* Where perf maps the unwind data of an image. */
static uint64_t eh_frame_at(const image *im) { return im->addr + align8(im->size); }

/* Plan the unwind data for [lo, hi), which code's FDE must cover (u->set and
 * u->cie_size already set). */
static bool plan_unwind(const sr_perf_code *code, uint64_t lo, uint64_t hi, unwind_plan *u)
{
    const sr_fde *f = code->fde;
    if (!u->cie_size || !f || f->pc > lo || hi - f->pc > f->size || f->insns_len > 4096)
        return false;
    u->insns = f->insns;
    u->insns_len = f->insns_len;
    u->one_row = code->one_row;
    /* One row holds anywhere in its range, so an FDE can start at any code;
     * rows after advances are tied to the FDE's own start, which must stay.
     * Either way an FDE may stop at the code's end. */
    u->lo = u->one_row ? lo : f->pc;
    u->hi = hi;
    return hi - u->lo <= UINT32_MAX;
}

/* Put the first FDE past every image's .eh_frame start plus a full CIE, at a
 * multiple of 8 from the owner's .eh_frame (so the owner's header, which is
 * read through the maps, sits at the same file offset as its address). */
static void place_fdes(unwind_plan *u, const image *ims, size_t n)
{
    uint64_t owner = eh_frame_at(&ims[n - 1]), last = owner;
    for (size_t i = 0; i < n; i++)
        last = eh_frame_at(&ims[i]) > last ? eh_frame_at(&ims[i]) : last;
    u->fde_at = owner + align8(last - owner + u->cie_size);
}

/* Appends .eh_frame (the CIE padded so the first FDE lands at u->fde_at, the
 * FDEs, a terminator) and .eh_frame_hdr for image im to the empty `out`. */
static bool build_unwind(const unwind_plan *u, const image *im, sr_buf *out)
{
    uint64_t eh = eh_frame_at(im), fde = u->fde_at;
    uint64_t own_lo = u->one_row ? im->addr : u->lo;
    if (fde < eh + u->cie_size || fde - eh > 4096)
        return false;
    /* The padding (DW_CFA_nop) leaves room for the longer code of other images. */
    size_t cie = ehframe_cie(out, u->set, PCREL, (size_t)(fde - eh));
    ehframe_fde(out, cie, &(sr_fde){u->lo, u->hi - u->lo, u->insns, u->insns_len}, PCREL, eh);
    uint64_t own = eh + out->len;
    ehframe_fde(out, cie, &(sr_fde){own_lo, u->hi - own_lo, u->insns, u->insns_len}, PCREL, eh);
    buf_u32(out, 0); /* terminator, for readers that walk .eh_frame */
    uint64_t hdr = eh + out->len;
    if (out->failed || hdr + EH_FRAME_HDR_SIZE - u->lo > INT32_MAX)
        return false; /* the longest distance written, checked once it is known */
    buf_u8(out, 1);  /* .eh_frame_hdr version */
    buf_u8(out, PCREL);                              /* eh_frame_ptr */
    buf_u8(out, DW_EH_PE_udata4);                    /* fde_count */
    buf_u8(out, DW_EH_PE_datarel | DW_EH_PE_sdata4); /* search table, from the header */
    buf_u32(out, (uint32_t)rel32(eh, hdr + 4));                /* eh_frame_ptr: back to .eh_frame */
    buf_u32(out, 2);
    buf_u32(out, (uint32_t)rel32(u->lo, hdr)); /* rows sorted by initial location */
    buf_u32(out, (uint32_t)rel32(fde, hdr));
    buf_u32(out, (uint32_t)rel32(own_lo, hdr));
    buf_u32(out, (uint32_t)rel32(own, hdr));
    return !out->failed;
}

/* ---- jitdump records (tools/perf/Documentation/jitdump-specification.txt)
 *
 * Written in the host's byte order (perf tells it by the magic). Every field
 * is naturally aligned, so the structs have the file's layout with no padding,
 * as the assertions below check; a record's variable part follows its struct. */

enum {
    JITDUMP_MAGIC = 0x4A695444, /* "JiTD" */
    JITDUMP_VERSION = 1,
    JIT_CODE_LOAD = 0,
    JIT_CODE_CLOSE = 3,
    JIT_CODE_UNWINDING_INFO = 4,
};

/* The file header. */
typedef struct jitdump_header {
    uint32_t magic;
    uint32_t version;
    uint32_t total_size; /* of this header */
    uint32_t elf_mach;   /* EM_* of the code */
    uint32_t pad1;
    uint32_t pid;
    uint64_t timestamp;
    uint64_t flags;      /* 0: timestamps are CLOCK_MONOTONIC, not the TSC */
} jitdump_header;

/* What every record starts with; JIT_CODE_CLOSE is nothing more. */
typedef struct jitdump_prefix {
    uint32_t id;         /* JIT_CODE_* */
    uint32_t total_size; /* of the record, variable part included */
    uint64_t timestamp;
} jitdump_prefix;

/* Followed by the NUL-terminated name and code_size bytes of code. */
typedef struct jitdump_code_load {
    jitdump_prefix prefix;
    uint32_t pid, tid;
    uint64_t vma;       /* where the code runs */
    uint64_t code_addr; /* where its bytes were read from: the same */
    uint64_t code_size;
    uint64_t code_index; /* unique in the file */
} jitdump_code_load;

/* Followed by unwinding_size bytes (.eh_frame then .eh_frame_hdr), padded to 8. */
typedef struct jitdump_unwinding_info {
    jitdump_prefix prefix;
    uint64_t unwinding_size;
    uint64_t eh_frame_hdr_size;
    uint64_t mapped_size; /* how much of it perf maps with the code */
} jitdump_unwinding_info;

_Static_assert(sizeof(jitdump_header) == 40 && offsetof(jitdump_header, timestamp) == 24,
               "jitdump file header");
_Static_assert(sizeof(jitdump_prefix) == 16 && offsetof(jitdump_prefix, timestamp) == 8,
               "jitdump record header");
_Static_assert(sizeof(jitdump_code_load) == 56 && offsetof(jitdump_code_load, vma) == 24 &&
                   offsetof(jitdump_code_load, code_index) == 48,
               "JIT_CODE_LOAD");
_Static_assert(sizeof(jitdump_unwinding_info) == 40 &&
                   offsetof(jitdump_unwinding_info, unwinding_size) == 16 &&
                   offsetof(jitdump_unwinding_info, mapped_size) == 32,
               "JIT_CODE_UNWINDING_INFO");

#if defined(__x86_64__)
#define HOST_ELF_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define HOST_ELF_MACHINE EM_AARCH64
#else
#define HOST_ELF_MACHINE EM_NONE
#endif

/* The largest code range described; records carry 32-bit sizes. */
#define MAX_CODE_SIZE ((uint64_t)1 << 30)

static void put_unwinding_info(sr_buf *b, const unwind_plan *u, const image *im, uint64_t time)
{
    sr_buf data = {0};
    if (build_unwind(u, im, &data)) {
        size_t pad = (size_t)(align8(data.len) - data.len);
        jitdump_unwinding_info r = {
            .prefix = {JIT_CODE_UNWINDING_INFO, (uint32_t)(sizeof r + data.len + pad), time},
            .unwinding_size = data.len,
            .eh_frame_hdr_size = EH_FRAME_HDR_SIZE,
            .mapped_size = data.len, /* perf's unwinder reads it in place */
        };
        buf_put(b, &r, sizeof r);
        buf_put(b, data.p, data.len);
        buf_zeros(b, pad);
    }
    free(data.p);
}

static void put_code_load(sr_buf *b, const image *im, uint64_t index, uint64_t time)
{
    size_t name_size = strlen(im->name) + 1;
    jitdump_code_load r = {
        .prefix = {JIT_CODE_LOAD, (uint32_t)(sizeof r + name_size + im->size), time},
        .pid = (uint32_t)getpid(),
        .tid = (uint32_t)gettid(),
        .vma = im->addr,
        .code_addr = im->addr,
        .code_size = im->size,
        .code_index = index,
    };
    buf_put(b, &r, sizeof r);
    buf_put(b, im->name, name_size);
    /* The code ends the record: perf finds it by counting back from the end. */
    buf_put(b, (const void *)(uintptr_t)im->addr, (size_t)im->size);
}

/* ---- the process's files
 *
 * One per kind, shared by every sr_perf of the process. The jitdump's marker
 * mapping stays for the life of the process once made: perf record (even one
 * attached later) must see exactly one, and perf inject reads the whole file
 * when it meets it, so records that a later runtime appends are found too. */

typedef struct perf_file {
    int fd;              /* -1: not open in this process */
    pid_t pid;           /* the process whose file this is */
    unsigned users;      /* sr_perf objects sharing it */
    bool started;        /* this process created the file (and wrote its header) */
    bool failed;         /* warned once; nothing more is written */
    off_t size;          /* bytes of whole records; a failed write is cut back to it */
    off_t close_at;      /* jitdump: where our JIT_CODE_CLOSE starts, or -1 */
    char path[PATH_MAX];
    void *marker;        /* jitdump: the executable mapping perf record notices */
    size_t marker_size;
    uint64_t next_index; /* jitdump: code_index of the next load, unique in the file */
    uint64_t last_time;  /* jitdump: timestamps only go up */
} perf_file;

static perf_file files[3] = {[SR_PERF_MAP] = {.fd = -1, .close_at = -1},
                             [SR_PERF_JITDUMP] = {.fd = -1, .close_at = -1}};

struct sr_perf {
    perf_file *file;
    sr_perf_mode mode;
    const sr_stencil_set *set; /* its CIE heads every image's .eh_frame */
    size_t cie_size;           /* that CIE's natural size (0: none, no unwind data) */
};

/* One warning per process and file; afterwards the JIT runs on without it. */
static void give_up(perf_file *f, const char *doing, int err, const char *consequence)
{
    if (!f->failed)
        fprintf(stderr, "stencilrt: warning: %s %s: %s; %s\n", doing, f->path, strerror(err),
                consequence);
    f->failed = true;
}

/* CLOCK_MONOTONIC, what `perf record -k mono` stamps samples with; strictly
 * increasing so perf orders a stencil's load after its executor's. */
static uint64_t timestamp(perf_file *f)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t t = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    if (t <= f->last_time)
        t = f->last_time + 1;
    f->last_time = t;
    return t;
}

/* Append b in one write() (retrying only what an interrupted or short write
 * left). On failure the file is cut back to its last whole record: a torn
 * record would make perf inject misread everything after it. */
static bool write_record(perf_file *f, const sr_buf *b)
{
    if (b->failed)
        return false; /* out of memory: this record is lost, the file stays whole */
    size_t done = 0;
    int err = EIO;
    for (unsigned tries = 0; done < b->len && tries < 100; tries++) {
        ssize_t n = write(f->fd, b->p + done, b->len - done);
        if (n > 0)
            done += (size_t)n;
        else if (n < 0 && errno != EINTR) {
            err = errno;
            break;
        }
    }
    if (done == b->len) {
        f->size += (off_t)done;
        return true;
    }
    if (done && ftruncate(f->fd, f->size) != 0)
        err = errno;
    give_up(f, "cannot write", err,
            "perf output stops here (the file ends at its last complete record)");
    close(f->fd);
    f->fd = -1;
    return false;
}

static bool start_jitdump(perf_file *f)
{
    jitdump_header h = {
        .magic = JITDUMP_MAGIC,
        .version = JITDUMP_VERSION,
        .total_size = sizeof h,
        .elf_mach = HOST_ELF_MACHINE,
        .pid = (uint32_t)getpid(),
        .timestamp = timestamp(f),
    };
    sr_buf b = {0};
    buf_put(&b, &h, sizeof h);
    bool ok = write_record(f, &b);
    free(b.p);
    if (!ok)
        return false;
    /* perf record only logs executable mappings; this one is how perf inject
     * learns which file belongs to which process. */
    long page = sysconf(_SC_PAGESIZE);
    f->marker_size = page > 0 ? (size_t)page : 4096;
    f->marker = mmap(NULL, f->marker_size, PROT_READ | PROT_EXEC, MAP_PRIVATE, f->fd, 0);
    if (f->marker == MAP_FAILED) {
        f->marker = NULL;
        give_up(f, "cannot map", errno, "perf record would not notice the jitdump");
        return false;
    }
    return true;
}

static bool set_path(perf_file *f, sr_perf_mode mode)
{
    int pid = (int)getpid(), n;
    if (mode == SR_PERF_MAP) {
        n = snprintf(f->path, sizeof f->path, "/tmp/perf-%d.map", pid);
    } else {
        const char *dir = getenv("STENCILRT_PERF_DIR");
        n = snprintf(f->path, sizeof f->path, "%s/jit-%d.dump", dir && *dir ? dir : "/tmp", pid);
    }
    if (n < 0 || (size_t)n >= sizeof f->path) {
        give_up(f, "cannot create a file in", ENAMETOOLONG, "STENCILRT_PERF_DIR is too long");
        return false;
    }
    return true;
}

/* After the last user closed the file, a new runtime appends to it. perf's
 * reader stops at a JIT_CODE_CLOSE (it reads the empty body as the end of the
 * file), so the one we wrote at that close is cut off first. */
static bool reopen_file(perf_file *f)
{
    struct stat st;
    f->fd = open(f->path, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
    if (f->fd >= 0 && fstat(f->fd, &st) == 0) {
        f->size = st.st_size;
        if (f->close_at < 0 || (f->size == f->close_at + 16 && ftruncate(f->fd, f->close_at) == 0)) {
            f->size = f->close_at < 0 ? f->size : f->close_at;
            f->close_at = -1;
            return true;
        }
    }
    give_up(f, "cannot reopen", errno, "perf output stops here");
    if (f->fd >= 0)
        close(f->fd);
    f->fd = -1;
    return false;
}

/* The first open in a process creates the file (truncating a stale one of an
 * earlier process with the same pid); later ones reopen it. */
static bool open_file(perf_file *f, sr_perf_mode mode)
{
    if (f->fd >= 0)
        return true;
    if (f->failed)
        return false;
    if (f->started)
        return reopen_file(f);
    if (!set_path(f, mode))
        return false;
    /* Read access too: the jitdump marker is a mapping of the file. */
    f->fd = open(f->path, O_RDWR | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (f->fd < 0) {
        give_up(f, "cannot create", errno,
                mode == SR_PERF_MAP ? "perf will not name JIT code"
                                    : "perf will not see JIT code (is STENCILRT_PERF_DIR "
                                      "a writable directory?)");
        return false;
    }
    f->size = 0;
    f->started = true;
    if (mode == SR_PERF_JITDUMP && !start_jitdump(f)) {
        if (f->fd >= 0)
            close(f->fd);
        f->fd = -1;
        unlink(f->path); /* no header or no marker: of no use to perf */
        return false;
    }
    return true;
}

/* A forked child inherits the parent's descriptor and marker; both belong to
 * the parent's file, which the child must leave alone. It starts its own. */
static void follow_fork(perf_file *f)
{
    pid_t pid = getpid();
    if (f->pid == pid)
        return;
    if (f->fd >= 0)
        close(f->fd);
    if (f->marker)
        munmap(f->marker, f->marker_size);
    f->pid = pid;
    f->fd = -1;
    f->marker = NULL;
    f->started = false;
    f->size = 0;
    f->close_at = -1;
    f->next_index = 0;
    /* f->failed stays: the parent already warned about this environment. */
}

/* ---- the interface */

/* One line per range, the whole batch in one write. Executor and stencil
 * lines overlap; perf report names samples by the stencil lines (checked by
 * tests/integration/test_perf.py). */
static void map_lines(perf_file *f, const sr_perf_code *code, size_t n)
{
    sr_buf b = {0};
    for (size_t i = 0; i < n; i++) {
        char head[48];
        int len = snprintf(head, sizeof head, "%" PRIx64 " %zx ", code[i].addr, code[i].size);
        buf_put(&b, head, (size_t)len);
        for (const char *s = code[i].name; *s; s++) /* one line per entry, whatever the name */
            buf_u8(&b, *s == '\n' || *s == '\r' ? '?' : (uint8_t)*s);
        buf_u8(&b, '\n');
    }
    write_record(f, &b);
    free(b.p);
}

/* Stencils as suffixes of their executor (see "jitdump images"), if code[]
 * is an executor followed by its stencils in order and the budget allows. */
static bool suffix_images(const sr_perf_code *code, size_t n, image *ims)
{
    uint64_t end = code[0].addr + code[0].size, total = 0, prev = code[0].addr;
    for (size_t i = 0; i < n; i++) {
        if (code[i].addr < prev || code[i].addr >= end || code[i].size > end - code[i].addr)
            return false;
        prev = code[i].addr;
        total += end - code[i].addr;
        ims[i] = (image){code[i].name, code[i].addr, end - code[i].addr};
    }
    return total <= SUFFIX_BUDGET;
}

/* Each load goes out with its unwinding info in one write: perf attaches an
 * unwinding record to the load that follows it, so they must not be parted. */
static void jitdump_loads(const sr_perf *p, const sr_perf_code *code, size_t n)
{
    perf_file *f = p->file;
    image *ims = n ? calloc(n, sizeof *ims) : NULL;
    if (!ims || !code[0].size) {
        free(ims);
        return;
    }
    bool suffixes = suffix_images(code, n, ims);
    for (size_t i = 0; !suffixes && i < n; i++)
        ims[i] = (image){code[i].name, code[i].addr, code[i].size};
    unwind_plan u = {.set = p->set, .cie_size = p->cie_size};
    bool unwind = plan_unwind(&code[0], code[0].addr, code[0].addr + code[0].size, &u);
    if (unwind)
        place_fdes(&u, ims, suffixes ? n : 1);
    for (size_t i = 0; i < n && f->fd >= 0; i++) {
        if (!ims[i].size || ims[i].size > MAX_CODE_SIZE)
            continue;
        sr_buf b = {0};
        uint64_t time = timestamp(f);
        if (unwind && (suffixes || i == 0)) /* see SUFFIX_BUDGET for the other case */
            put_unwinding_info(&b, &u, &ims[i], time);
        put_code_load(&b, &ims[i], f->next_index, time);
        if (write_record(f, &b))
            f->next_index++;
        free(b.p);
    }
    free(ims);
}

sr_perf *perf_open(sr_perf_mode mode, const sr_stencil_set *set)
{
    if (mode != SR_PERF_MAP && mode != SR_PERF_JITDUMP)
        return NULL;
    sr_perf *p = calloc(1, sizeof *p);
    perf_file *f = &files[mode];
    follow_fork(f);
    if (!p || !open_file(f, mode)) {
        free(p);
        return NULL;
    }
    p->file = f;
    p->mode = mode;
    p->set = set;
    sr_buf cie = {0}; /* measured once: place_fdes leaves room for it */
    ehframe_cie(&cie, set, PCREL, 0);
    p->cie_size = cie.failed ? 0 : cie.len;
    free(cie.p);
    f->users++;
    return p;
}

void perf_code_load(sr_perf *p, const sr_perf_code *code, size_t n)
{
    if (!p)
        return;
    perf_file *f = p->file;
    follow_fork(f);
    if (!open_file(f, p->mode))
        return;
    if (p->mode == SR_PERF_MAP)
        map_lines(f, code, n);
    else
        jitdump_loads(p, code, n);
}

bool perf_keeps_code(const sr_perf *p)
{
    return p && p->mode == SR_PERF_JITDUMP;
}

size_t perf_unwind_slack(const sr_perf *p)
{
    return p ? UNWIND_SLACK : 0;
}

void perf_close(sr_perf *p)
{
    if (!p)
        return;
    perf_file *f = p->file;
    sr_perf_mode mode = p->mode;
    free(p);
    follow_fork(f);
    if (--f->users > 0 || f->fd < 0)
        return;
    if (mode == SR_PERF_JITDUMP) {
        sr_buf b = {0};
        off_t at = f->size;
        jitdump_prefix r = {JIT_CODE_CLOSE, sizeof r, timestamp(f)};
        buf_put(&b, &r, sizeof r);
        if (write_record(f, &b))
            f->close_at = at;
        free(b.p);
    }
    if (f->fd >= 0)
        close(f->fd);
    f->fd = -1;
}
