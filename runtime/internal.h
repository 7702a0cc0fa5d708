/* internal.h - runtime internals shared by its modules. */
#ifndef STENCILRT_INTERNAL_H
#define STENCILRT_INTERNAL_H

#ifndef _WIN32
#include <pthread.h>
#endif
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stencilrt.h"

/* ---- base: the library's shared state, used by every other module */

/* Record the error message for sr_last_error() and return s. */
sr_status sr_fail(sr_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The one lock of the library: arenas, registrations, GDB's descriptor. */
void sr_registry_lock(void);
void sr_registry_unlock(void);

/* ---- bytebuf: the growable buffer behind every format the runtime writes */
typedef struct sr_buf {
    uint8_t *p;
    size_t len, cap;
    bool failed; /* an allocation failed: the contents are incomplete */
} sr_buf;

void buf_put(sr_buf *b, const void *src, size_t n);
void buf_u8(sr_buf *b, uint8_t v);
void buf_u32(sr_buf *b, uint32_t v);
void buf_u64(sr_buf *b, uint64_t v);
void buf_uleb(sr_buf *b, uint64_t v);
void buf_sleb(sr_buf *b, int64_t v);
void buf_zeros(sr_buf *b, size_t n);
void buf_patch_u32(sr_buf *b, size_t at, uint32_t v); /* a length field written earlier */

/* ---- jitmem: regions of code memory, handed out in chunks (jitmem.c has
 * the two ways a region is kept: two views, or one view flipped). Every call
 * is made with the registry lock held. */
enum { JITMEM_CLASSES = 64 }; /* chunk sizes, in granules, with a free list each */

typedef struct jitmem_chunk {
    uint64_t at, granules; /* in granules from the region's start */
} jitmem_chunk;

typedef struct jitmem_list {
    jitmem_chunk *item;
    size_t n, cap;
} jitmem_list;

typedef struct sr_region {
    uint8_t *base;    /* where code runs: never writable */
    uint8_t *write;   /* the same memory, writable and never executable (== base: one view) */
    size_t size;      /* bytes, a multiple of the page size */
    size_t granule;   /* a chunk's unit and alignment: 64 bytes, or a page (one view) */
    size_t ngranules;
    size_t top;       /* granules [0, top) have been handed out at least once */
    int prot;         /* the protection of sealed code (jitmem_exec_prot) */
    bool two_views;
    bool no_reuse;    /* perf is watching: freed chunks are never handed out again */
    bool frozen;      /* a forked child could not copy it: never written again */
    jitmem_list free[JITMEM_CLASSES]; /* free chunks of 1 .. JITMEM_CLASSES granules */
    jitmem_list large;                /* bigger ones */
    struct sr_region *next_two_view;  /* jitmem's list, for fork */
} sr_region;

size_t jitmem_page_size(void);
/* The protection of sealed code: read+execute, and BTI-guarded on AArch64
 * when the stencils have landing pads and the CPU has BTI. */
int jitmem_exec_prot(bool landing_pads);
/* Reserve `size` bytes (rounded up to whole pages), kept with two views or
 * one, sealed code getting `prot`; false if the address space cannot be had. */
bool jitmem_region_init(sr_region *r, size_t size, bool two_views, int prot);
void jitmem_region_fini(sr_region *r);
/* The bytes a chunk for `bytes` takes: whole granules. */
size_t jitmem_chunk_size(const sr_region *r, size_t bytes);
/* A chunk of at least `bytes`, where it runs; *write is where to write it
 * (writable until jitmem_seal). NULL if the region has no room. */
uint8_t *jitmem_alloc(sr_region *r, size_t bytes, uint8_t **write);
/* Make [p, p + bytes) (running addresses) executable as written: flush the
 * instruction cache (and, one view, flip the pages back to r->prot). */
bool jitmem_seal(sr_region *r, uint8_t *p, size_t bytes);
/* Where to write [p, p + bytes) again, writable until jitmem_seal; NULL if
 * it cannot be (mprotect failed, or the region is frozen). */
uint8_t *jitmem_unseal(sr_region *r, uint8_t *p, size_t bytes);
/* Return a chunk: its code traps (two views) or faults (one view) if run,
 * and, unless r->no_reuse (perf's maps are append-only), it is reused. */
void jitmem_release(sr_region *r, uint8_t *p, size_t bytes);
/* Whether code written through the region's writable view is the code that
 * runs from the other (true with one view): a tiny function is written, run,
 * rewritten and run again through the region's own paths. False where a
 * translator (qemu-user, valgrind without --smc-check=all, FEX, box64) does
 * not see writes made through an alias and keeps running the old code. Uses,
 * and gives back, JITMEM_PROBE_BYTES of the region. */
enum { JITMEM_PROBE_BYTES = 64 };
bool jitmem_views_agree(sr_region *r);
/* What the calling thread's last failed jitmem call failed on, for a
 * message: on Linux strerror(errno), after "posix_call: " when given; on
 * Windows the API with its arguments and GetLastError's code and text. When
 * nothing failed (errno 0, or no Windows call failed), fallback if given. */
const char *jitmem_error(const char *posix_call, const char *fallback);
/* fork() handlers, run with the registry lock held: the child copies every
 * two-view region (the parent waits for it), so neither writes the other's. */
void jitmem_fork_prepare(void);
void jitmem_fork_parent(void);
void jitmem_fork_child(void);

/* ---- ehframe: synthetic .eh_frame built from the header's CFI blobs. */
typedef struct sr_fde {
    uint64_t pc, size;
    const uint8_t *insns;
    size_t insns_len;
} sr_fde;

/* The DWARF constants the runtime writes: pointer encodings for FDEs and
 * .eh_frame_hdr (the LSB's DW_EH_PE_*), and the padding opcode. */
enum {
    DW_EH_PE_absptr = 0x00, /* 8 bytes, absolute */
    DW_EH_PE_udata4 = 0x03,
    DW_EH_PE_sdata4 = 0x0b,
    DW_EH_PE_pcrel = 0x10,  /* from the field's own address */
    DW_EH_PE_datarel = 0x30, /* from the start of .eh_frame_hdr */
    DW_CFA_nop = 0x00,
};

/* Append a CIE with the set's factors and initial instructions whose FDEs
 * encode pc_begin and pc_range as `enc`: DW_EH_PE_absptr, or
 * DW_EH_PE_pcrel | DW_EH_PE_sdata4. It is padded with DW_CFA_nop to a multiple
 * of 8 bytes and then to `size` bytes if that is more (perf puts the FDEs after
 * it at addresses of its choosing). Returns its offset in b, for ehframe_fde. */
size_t ehframe_cie(sr_buf *b, const sr_stencil_set *set, uint8_t enc, size_t size);
/* Append an FDE for f under the CIE at offset cie_at of b, in that CIE's
 * `enc`; `base` is the address b's first byte will have (used by pcrel only;
 * the caller checks that the distances fit the encoding). Padded to 8 bytes. */
void ehframe_fde(sr_buf *b, size_t cie_at, const sr_fde *f, uint8_t enc, uint64_t base);
/* CIE (from the set) + FDEs + terminator, malloc'ed; pointers are absolute. */
uint8_t *ehframe_build(const sr_stencil_set *set, const sr_fde *fdes, size_t n, size_t *size);
/* The bytes ehframe_build writes for FDEs that all carry the same
 * instructions, built once: its CIE, and one FDE whose CIE pointer, pc and
 * size are filled in per copy. A table of n such FDEs is ehframe_tables_size
 * bytes: ehframe_table_cie, then ehframe_table_fde for each of 0..n-1 (in any
 * order), then ehframe_table_end. */
typedef struct sr_eh_template {
    uint8_t *bytes; /* the CIE, then the FDE (malloc'ed; NULL: not built) */
    size_t cie_size, fde_size;
} sr_eh_template;

bool ehframe_template(sr_eh_template *t, const sr_stencil_set *set, const uint8_t *insns,
                      size_t insns_len);
void ehframe_template_free(sr_eh_template *t);
size_t ehframe_table_size(const sr_eh_template *t, size_t n);
void ehframe_table_cie(const sr_eh_template *t, uint8_t *table);
void ehframe_table_fde(const sr_eh_template *t, uint8_t *table, size_t i, uint64_t pc,
                       uint64_t size);
void ehframe_table_end(const sr_eh_template *t, uint8_t *table, size_t n);
/* The unwinders a table was registered with. */
enum { SR_UNWINDER_LIBGCC = 1, SR_UNWINDER_LLVM = 2 };
/* Registers a table built by ehframe_build with every unwinder in the process
 * (libgcc's, LLVM's libunwind, or both) and says which: 0 when neither is
 * there. Deregister with that answer. Not on Windows, whose unwinder reads
 * the tables of winunwind below. */
unsigned ehframe_register(uint8_t *eh);
void ehframe_deregister(uint8_t *eh, unsigned registered);

/* ---- winunwind (Windows x64): a chunk of code's RUNTIME_FUNCTION and
 * UNWIND_INFO, kept in the chunk itself right after its `used` bytes and
 * registered with RtlAddFunctionTable, relative to the chunk's start (so the
 * 32-bit RVAs always fit). */
#ifdef _WIN32
/* SR_EINVAL unless info[0..len) is an UNWIND_INFO the runtime can place:
 * version 1, no handler, no chained info, its codes within len. `what`
 * names it in the message. */
sr_status winunwind_check(const uint8_t *info, size_t len, const char *what);
/* SR_EUNSUPPORTED if a stencil's (or the shim's) branch that may go through
 * a veneer is not a call: Windows unwinds a veneer as an epilog. */
sr_status winunwind_check_veneers(const sr_stencil_set *set);
/* Bytes the table takes after `used` bytes of a chunk (alignment included). */
size_t winunwind_size(size_t used, size_t info_len);
/* Write the table through `write`, the chunk's writable view: one
 * RUNTIME_FUNCTION for the chunk's bytes [begin, end), then the UNWIND_INFO.
 * SR_ERANGE (nothing written) when an offset does not fit its 32 bits. */
sr_status winunwind_write(uint8_t *write, size_t used, size_t begin, size_t end,
                          const uint8_t *info, size_t info_len);
/* Register the table written in the chunk that runs at `mem`; its handle for
 * winunwind_deregister, or NULL if Windows refused it. */
void *winunwind_register(uint8_t *mem, size_t used);
/* False (GetLastError set) if Windows did not find the table. */
bool winunwind_deregister(void *table);
#endif

/* ---- gdbjit: the GDB JIT interface, one in-memory ELF object per registration. */
typedef struct gdbjit_section {
    uint64_t addr;
    size_t size;
} gdbjit_section;

typedef struct gdbjit_symbol {
    const char *name;
    uint64_t addr, size;
    size_t section; /* index into the text sections */
} gdbjit_symbol;

typedef struct gdbjit_entry gdbjit_entry;

/* Objects GDB has been told to forget, kept for the next ones instead of
 * freed: at most GDBJIT_SPARE_BYTES of them. An object is about 1 KiB, which
 * glibc's malloc serves from its unsorted and large bins; after a big
 * allocator user (LLVM compiling, say) that search took about 1 us, more
 * than writing the object. */
enum { GDBJIT_SPARES = 4, GDBJIT_SPARE_BYTES = 16384 };
typedef struct gdbjit_spares {
    gdbjit_entry *entry[GDBJIT_SPARES];
    size_t n, bytes;
} gdbjit_spares;

/* One object: `ntext` disjoint code ranges, an .eh_frame covering them, symbols. */
gdbjit_entry *gdbjit_register(unsigned machine, const gdbjit_section *text, size_t ntext,
                              const uint8_t *eh_frame, size_t eh_size,
                              const gdbjit_symbol *syms, size_t nsyms);
/* Tell GDB to forget e, then keep it in `keep` if there is room (NULL: free it). */
void gdbjit_unregister(gdbjit_entry *e, gdbjit_spares *keep);
void gdbjit_spares_free(gdbjit_spares *s);

/* The same object written in place, in one allocation and without arrays of
 * sections and symbols: gdbjit_begin sizes it for `ntext` code ranges, `nsyms`
 * symbols whose names (with their terminators) take `names_size` bytes and an
 * .eh_frame of `eh_size` bytes, which the caller writes at `eh_frame`, in a
 * spare object's memory if one fits (`spares` may be NULL). Then
 * gdbjit_add_text for each range (again as a range grows), gdbjit_add_names and
 * gdbjit_add_symbol for each symbol in order, and gdbjit_publish to tell GDB. */
typedef struct gdbjit_writer {
    gdbjit_entry *entry;
    uint8_t *img, *eh_frame;
    size_t off_sh, off_str, off_sym;
    size_t nsyms, stroff; /* symbols and name bytes written so far */
} gdbjit_writer;

bool gdbjit_begin(gdbjit_writer *w, gdbjit_spares *spares, unsigned machine, size_t ntext,
                  size_t nsyms, size_t names_size, size_t eh_size);
void gdbjit_add_text(gdbjit_writer *w, size_t i, uint64_t addr, uint64_t size);
/* Copies `size` bytes of NUL-terminated names into the string table; returns
 * the offset of the first, for gdbjit_add_symbol. */
uint32_t gdbjit_add_names(gdbjit_writer *w, const char *names, size_t size);
/* A function symbol in code range `text` (whose gdbjit_add_text came first). */
void gdbjit_add_symbol(gdbjit_writer *w, uint32_t name, uint64_t addr, uint64_t size,
                       size_t text);
gdbjit_entry *gdbjit_publish(gdbjit_writer *w);

/* ---- perf: perf's two JIT formats, /tmp/perf-<pid>.map and jitdump.
 * One sr_perf per runtime; every call is made with the registry lock held. */
typedef struct sr_perf sr_perf;
typedef struct sr_perf_code {
    const char *name;      /* "add@fib[3]", "fib", "tinyvm_shim" */
    uint64_t addr;
    size_t size;
    const sr_fde *fde;     /* unwind info covering addr (NULL if none) */
    /* The FDE's instructions are one row, true at every PC of its range
     * (executors: the frame pointer is pinned), so they describe any part of
     * it; false: rows after advances are tied to fde->pc (the shim). */
    bool one_row;
} sr_perf_code;

#ifndef _WIN32
/* NULL (after one warning on stderr) if the files cannot be created. The
 * set's CIE heads the unwind data of every jitdump image. */
sr_perf *perf_open(sr_perf_mode mode, const sr_stencil_set *set);
/* Code became executable: one entry per range (an executor, then its stencils). */
void perf_code_load(sr_perf *p, const sr_perf_code *code, size_t n);
/* Whether p keeps copies of the code (jitdump): then code patched after
 * emit is loaded again. */
bool perf_keeps_code(const sr_perf *p);
/* Bytes to keep free after each executor's code while p is on (0 when p is
 * NULL): perf's image of the code carries its unwind data right after it. */
size_t perf_unwind_slack(const sr_perf *p);
void perf_close(sr_perf *p);
#else
/* perf is Linux's profiler and perf.c is not built on Windows: config_resolve
 * keeps perf off there, so a runtime's perf is always NULL, and these are what
 * perf.c's functions do given NULL. */
static inline sr_perf *perf_open(sr_perf_mode mode, const sr_stencil_set *set)
{
    (void)mode, (void)set;
    return NULL;
}
static inline void perf_code_load(sr_perf *p, const sr_perf_code *code, size_t n)
{
    (void)p, (void)code, (void)n;
}
static inline bool perf_keeps_code(const sr_perf *p)
{
    (void)p;
    return false;
}
static inline size_t perf_unwind_slack(const sr_perf *p)
{
    (void)p;
    return 0;
}
static inline void perf_close(sr_perf *p)
{
    (void)p;
}
#endif

/* ---- emit */

/* Where things go in an executor's chunk. */
typedef struct sr_layout {
    size_t code_size;  /* the hot parts, then from cold_start the cold parts */
    size_t cold_start;
    size_t data_start, data_end; /* data_end is an upper bound (shared data) */
    size_t got_start, got_slots; /* got_slots is an upper bound (symbols share) */
    size_t total;
} sr_layout;

/* What emitting needs to know of an op, worked out once per stencil set. The
 * emit loop reads this alone for an op its generated emitter writes, not the
 * sg_stencil or the set (emit.c, patch_all); what it reads for every
 * instruction comes first. */
typedef struct sr_op_info {
    sg_emit_fn *emit;   /* sg_stencil.emit */
    uint32_t emit_case; /* sg_stencil.emit_case */
    uint32_t cold;      /* bytes of its cold part (sr_stencil_set.cold_sizes) */
    bool prepare;       /* any of: data, GOT symbols, a jump target, not generated */
    bool generated;     /* its generated emitter may write it: every hole checked */
    bool jumps;         /* has a JUMP_TARGET hole */
    bool continues;     /* falls through or has a CONTINUE hole */
    bool data;          /* has data to place */
    uint32_t holes;     /* code and data holes: the most a generated emitter returns */
    uint32_t got;       /* GOT holes (an upper bound on its slots) */
    uint32_t veneers;   /* branches that may need a veneer */
    uint32_t got_symbols, ngot_symbols; /* its symbols reached through the GOT:
                                           sr_emitter.got_symbols[got_symbols + i] */
} sr_op_info;

typedef struct sr_emitter {
    const sr_stencil_set *set;
    const void *const *symbols;
    sr_op_info *ops;       /* per op of the set */
    uint32_t *got_symbols; /* symbol numbers, a run per op */
    bool shim;             /* the one "op" is the shim: messages name it so */
} sr_emitter;

/* `generated`: use the header's emitters where they can be trusted (false:
 * the table-driven patcher everywhere, for tests and benchmarks). */
sr_status emit_init(sr_emitter *em, const sr_stencil_set *set, const void *const *symbols,
                    bool generated);
void emit_fini(sr_emitter *em);
/* Validate the program and compute offsets[0..n] (instruction code offsets). */
sr_status emit_plan(const sr_emitter *em, const sr_instr *code, size_t n, uint32_t *offsets,
                    sr_layout *l);
/* Copy and patch into `mem`, writable; the code will run at mem + delta (the
 * same memory's executable view). */
sr_status emit_write(const sr_emitter *em, const sr_instr *code, size_t n,
                     const uint32_t *offsets, const sr_layout *l, uint8_t *mem, uint64_t delta);

/* ---- gdbgroup: which executors share a GDB object.
 * A group is the executors emitted together (one sr_emit, one sr_emit_batch,
 * or everything emitted under sr_gdb_hold); its one GDB object names them all
 * and unwinds through them. GDB pays mostly per object, so groups are large;
 * but freeing a member rebuilds the whole object, so GDB_GROUP_MAX bounds what
 * a free costs. Every call is made with the registry lock held. */
#define GDB_GROUP_MAX 256

typedef struct sr_group {
    struct sr_runtime *rt;
    struct sr_executor **members;
    size_t n, cap;
    struct gdbjit_entry *gdb;
    bool held;                /* emitted under sr_gdb_hold: GDB is told at release */
    bool settling;            /* listed by sr_executor_free_batch, rebuilt once at its end */
    struct sr_group *next_held; /* in sr_runtime.held */
} sr_group;

/* Put `count` freshly emitted executors into groups and tell GDB (under
 * sr_gdb_hold: once the hold ends). False, and nothing changed, if out of
 * memory. */
bool group_join(sr_runtime *rt, sr_executor **ex, size_t count);
/* The outermost sr_gdb_hold ended: tell GDB of the groups it held back. */
void group_release_held(sr_runtime *rt);
/* Take e out of its group, leaving the group's object to group_settle. */
void group_remove(sr_group *g, sr_executor *e);
/* After members left: rebuild g's object (unless `rebuild` is false: the whole
 * runtime is going), or drop it and g with its last member. */
void group_settle(sr_runtime *rt, sr_group *g, bool rebuild);
/* group_remove, then group_settle. */
void group_leave(sr_runtime *rt, sr_executor *e, bool rebuild);

/* ---- registry: what tools in other processes read (stencilrt_registry.h).
 * Every call is made with the registry lock held. */
typedef struct sr_reg sr_reg;
#define REGISTRY_NO_SLOT UINT32_MAX
/* The next executor id (a slot's generation): unique in the process. */
uint64_t registry_next_id(void);
/* List rt (its shim placed) for readers; NULL when out of memory. */
sr_reg *registry_add_runtime(const sr_runtime *rt);
/* Unlist it and free its slots (g may be NULL). */
void registry_remove_runtime(sr_reg *g);
/* Publish e (its code sealed) in a slot; best effort: without memory for a new
 * block of slots e is not listed. g may be NULL (the registry is off). */
void registry_add(sr_reg *g, sr_executor *e);
/* Take e out before its code and record can be reused. */
void registry_remove(sr_reg *g, sr_executor *e);

/* ---- config */

/* `in` (NULL: SR_CONFIG_DEFAULT) with each -1 read from the environment and a
 * zero arena_size made the default (stencilrt.h has the rules), *why saying
 * why code_views is what it is; SR_EINVAL, and `out` untouched, if a field is
 * out of range. */
sr_status config_resolve(const sr_config *in, sr_config *out, sr_views_reason *why);
/* Two code views were to be used and do not work (jitmem_views_agree): `in`
 * (the caller's sr_config, or NULL) asked for them by name, SR_EUNSUPPORTED
 * naming the field; otherwise c->code_views becomes 1 and one warning per
 * process says why. */
sr_status config_views_stale(const sr_config *in, sr_config *c);

/* ---- runtime */

/* An arena: a jitmem region, and what the runtime registered for all of it. */
typedef struct sr_arena {
    struct sr_arena *next;
    sr_region region;
    struct sr_executor *executors; /* live executors in this arena */
    size_t nexecutors;
    uint8_t *eh_frame; /* registered with the unwinders in frames_registered */
    size_t eh_frame_size;
    unsigned frames_registered; /* the unwinders it is registered with (SR_UNWINDER_*) */
    struct gdbjit_entry *gdb; /* the shim's GDB object (executors are named per group) */
    _Atomic(struct sr_executor *) *owner; /* per granule: the executor whose code it
                                             holds (lookup.c) */
} sr_arena;

/* What an executor record's state says (executor.c): only a record whose
 * state is EXECUTOR_LIVE may be used; 0 is a record freed or never handed
 * out, so a zeroed record is not live. */
#define EXECUTOR_LIVE 0x53524558u /* "SREX" */

/* An emitted program: its chunk of JIT memory, and the names debuggers and
 * profilers give its parts. The record stays in its runtime's pool after
 * the executor is freed (executor.c); `body` is what the free releases. */
struct sr_executor {
    atomic_uint state; /* EXECUTOR_LIVE from emit to free; read without the lock */
    sr_runtime *rt;
    sr_arena *arena;
    struct sr_executor *next, *prev; /* in arena->executors */
    sr_group *group;
    uint8_t *mem;      /* its chunk, where it runs: code, veneers, data, GOT */
    size_t mem_size;
    size_t code_size;
    size_t text_size;  /* code and the veneers after it: everything that executes */
    void *body;        /* one malloc: symbols, offsets, ops, then the names */
    char *name;
    size_t names_size;   /* bytes of its name and then its symbols' names, each with its NUL */
    size_t n;            /* instructions */
    uint32_t *offsets;   /* n + 1 code offsets */
    uint32_t *ops;       /* n op numbers */
    char **symbols;      /* n "<op>@<executor>[<index>]" names, for debuggers and profilers */
    uint64_t id;         /* sr_executor_id */
    uint32_t reg_slot;   /* its registry slot, or REGISTRY_NO_SLOT */
#ifdef _WIN32
    void *unwind_table;  /* its RtlAddFunctionTable registration, or NULL */
#endif
};

/* ---- executor.c: executor records, kept by their runtime until it is
 * destroyed so that a freed executor can be told from a live one; what a
 * record holds besides the code. Registry lock held. */
enum { RECORD_QUARANTINE = 256 }; /* freed records waiting before any is reused */

typedef struct sr_record_pool {
    struct sr_record_slab *slabs;
    struct sr_executor *head, *tail; /* freed records, oldest first (linked by next) */
    size_t waiting;
} sr_record_pool;

/* Every record, live or not, goes: no executor pointer may be used after. */
void record_pool_fini(sr_record_pool *p);

struct sr_runtime {
    sr_config cfg;
    sr_views_reason views_reason; /* why cfg.code_views (sr_runtime_views_reason) */
    const sr_stencil_set *set;
    int exec_prot;     /* sealed code's protection (jitmem_exec_prot) */
    const void **symbols;
    sr_emitter emitter; /* the set's ops, with rt->symbols */
    sr_arena *arenas;  /* executor arenas */
    sr_arena *shim_arena;
    uint8_t *shim;     /* the shim's code in JIT memory */
    size_t executors;
    sr_perf *perf;     /* NULL unless STENCILRT_PERF is map or jitdump */
    sr_reg *reg;       /* its part of the registry; NULL when off (or out of memory) */
#ifdef _WIN32
    void *shim_unwind_table; /* the shim's RtlAddFunctionTable registration, or NULL */
    size_t unwind_tables;    /* registrations live, the shim's included (sr_stats) */
#endif
    unsigned gdb_hold; /* sr_gdb_hold depth */
    sr_eh_template gdb_eh; /* executors' .eh_frame for GDB's objects (when gdb is on) */
    gdbjit_spares gdb_spares; /* groups' objects GDB forgot, for their next ones */
    sr_group *held;    /* groups emitted under the hold, newest (the one filling) first */
    /* lookup.c: the arenas by address, lookups in flight, and what they may
     * still be reading (released when none is). */
    _Atomic(struct sr_arena_table *) arena_table;
    atomic_uint lookups;
    struct sr_arena_table *retired_tables;
    struct sr_executor *retired_executors;
    sr_record_pool records;
};

/* Bytes of instruction i's cold part, placed after every hot part of the
 * executor in instruction order (emit.c); 0 when its op has none. */
static inline size_t executor_cold_size(const sr_executor *e, size_t i)
{
    const size_t *cold = e->rt->set->cold_sizes;
    return cold ? cold[e->ops[i]] : 0;
}

/* A record for n instructions of `code` named `name` (NULL or "": "executor"),
 * with its instruction names; not live until the emit makes it so. */
sr_status executor_new(sr_runtime *rt, const sr_instr *code, size_t n, const char *name,
                       sr_executor **out);
/* Takes e off its arena's list of executors. */
void executor_unlink(sr_executor *e);
/* Frees an executor's body and returns its record to the pool (its code is
 * released by the caller). */
void executor_destroy(sr_executor *e);
/* Whether ex is a live executor (not freed); with the registry lock held
 * the answer cannot change during the call. */
bool executor_live(const sr_executor *ex);
/* SR_EINVAL naming `call` when ex is NULL or was freed (lock held). */
sr_status executor_check(const char *call, const sr_executor *ex);
/* Tell perf (if on) about e's code: the executor, then each stencil in it. */
void executor_announce_to_perf(sr_runtime *rt, const sr_executor *e);

/* ---- lookup: sr_lookup_pc's tables. Every call but sr_lookup_pc itself is
 * made with the registry lock held. */
typedef struct sr_arena_table sr_arena_table;
/* Make a's code findable (a->owner) and list it; false when out of memory. */
bool lookup_add_arena(sr_runtime *rt, sr_arena *a);
/* Name e as the owner of its code's granules (on) or no one (off). */
void lookup_publish(sr_executor *e, bool on);
/* executor_destroy(e) as soon as no lookup can be reading it (e unpublished). */
void lookup_retire(sr_runtime *rt, sr_executor *e);
/* Release what lookups can no longer reach, if none is in flight. */
void lookup_reclaim(sr_runtime *rt);
void lookup_fini(sr_runtime *rt);

#endif
