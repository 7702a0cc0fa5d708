/* incremental.h - what makes a run incremental: the cache protocol for op
 * discovery and for compiles, on top of the store in cache.h.
 *
 * A compile is known to the cache as an inc_unit: a slot (target and object
 * name), a hash of its exact command, the compiler's identity and (for an op)
 * its translation unit, and the unit's position for code that compiles its
 * position in. Four calls make up the protocol:
 *   inc_discover  an op source's ops, parsed once per content of the files read;
 *   inc_key       before compiling: the key its entry would have, if any (a run
 *                 whose every key it has seen may use no entry at all, memo.h);
 *   inc_lookup    then: a miss, the object (still to be checked), or
 *                 the checked stencil (and, for the shim, what its unwind facts
 *                 are derived from), which stands in for every step after the
 *                 compile: a run with nothing to compile reads no object;
 *   inc_store     after compiling (and checking): the object under the key of
 *                 the files the compile read, and the checked stencil.
 *
 * What a key is made of (each one is composed here, in incremental.c; cache.c
 * is a plain store that hashes a command with the contents of its files):
 *   - KEY_VERSION, bumped when the ingredients change (older records miss);
 *   - the compiler's identity (path, size, mtime; and the launcher's, found on PATH);
 *   - the exact command, less the paths of this run's own files;
 *   - an op's unit text, marked when it compiles in a batch, and its position
 *     (file name and lines) when the code, or a file it reads, compiles one in;
 *   - the environment variables clang reads that can change an object
 *     (keyed_env in incremental.c, each with its reason);
 *   - the contents of every file the compile read (its depfile);
 *   - the paths the compile looked for and did not find (clang_main.cpp
 *     lists them: an include directory searched before the one a header was
 *     found in, a __has_include'd or #include_next'ed file, a file beside the
 *     including one, a clang config file): a hit needs each still missing.
 *     Commands clang's executable runs (a launcher, --exec-clang, options
 *     only the executable handles) are preprocessed by the clang module to
 *     list them; a compile with no list (no clang module) is not stored.
 * Discovery's key is the same, less the unit and position; its list of
 * missing paths comes from a preprocess of the source with the same arguments
 * (inc_discover). */
#ifndef STENCILGEN_INCREMENTAL_H
#define STENCILGEN_INCREMENTAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "cache.h"
#include "compile.h"
#include "discover.h"
#include "rundir.h"
#include "stencil.h"

/* A set of missing paths found still missing, or not, in this run. */
typedef struct inc_absent_verdict {
    gen_key id;
    bool holds;
    char *text; /* the list as read or written (a header's provenance names it: read once,
                   as an eviction by another build may remove the blob since) */
} inc_absent_verdict;

typedef struct gen_incremental {
    gen_cache *cache;
    gen_key compiler;   /* the compiler's (and launcher's) identity */
    bool stencils;      /* checked stencils may be cached: this generator build is known */
    gen_key generator;  /* this generator build, the LLVM it links and the symbol list */
    /* The cache entry of a checked stencil: ops are stored with their hot and
     * cold parts laid out, or whole (--no-hot-cold), each under its own name. */
    const char *stencil_kind;
    size_t nsymbols;
    bool verbose;       /* say why a cached stencil was not used */
    gen_key environment;          /* keyed_env's variables, for every target */
    gen_key environment_darwin;   /* and those read for Darwin targets alone */
    gen_key environment_mingw;    /* and for MinGW targets alone */
    inc_absent_verdict *verdicts; /* each set of missing paths checked this run */
    size_t nverdicts, verdicts_cap;
    struct inc_pending *pending; /* discoveries whose record waits for a preprocess */
    size_t npending, pending_cap;
} gen_incremental;

void inc_open(gen_incremental *inc, gen_cache *cache, const char *clang, const char *launcher,
              char *const *symbols, size_t nsymbols, bool verbose);
void inc_close(gen_incremental *inc);

/* Whether this compiler (by its identity) was already found to be clang 19 or
 * newer, with the version it said ("19.1.7", for the provenance) written into
 * version; inc_compiler_verdict records that it was. */
bool inc_compiler_verified(gen_incremental *inc, char *version, size_t version_size);
void inc_compiler_verdict(gen_incremental *inc, const char *version);

typedef struct inc_pending inc_pending;

/* The ops of `source` for a parse with `args` (from the cache, or by
 * discover_ops). A parse's result is stored by inc_discover_finish, under
 * the files the parse read and the paths a preprocess of the source with
 * `args` looked for and did not find. Returns an exit code. */
int inc_discover(gen_incremental *inc, const char *source, const gen_argv *args, gen_oplist *ops);

/* Those preprocesses, as jobs for compile_run in forked children (the clang
 * module lists what they looked for; without it, none: the results are not
 * stored), writing their files in `rundir` (made). They run beside the run's
 * compiles, so that an edit's rebuild does not wait for them. */
size_t inc_discovery_jobs(gen_incremental *inc, const gen_rundir *rundir, gen_job **jobs);
/* Record the parses, given those jobs as run (n of them; a job not run, or
 * failed, leaves its parse unrecorded). */
void inc_discover_finish(gen_incremental *inc, const gen_job *jobs, size_t n);

/* Run the compiles `jobs` (compile_run, with `done` and `ctx`) and, beside
 * them, the preprocesses that complete the cache records of this run's
 * discoveries (their lists of missing paths, written in `rd`; NULL: none can
 * run, and those discoveries are not recorded): in forked children with the
 * compiles when those are, else alone first. Returns the compiles' failures. */
size_t inc_compile_with_discovery(gen_incremental *inc, const gen_rundir *rd, gen_job *jobs,
                                  size_t n, const gen_compile_opts *co, gen_job_done *done,
                                  void *ctx, bool *spawn_failed);

/* Every job that runs lists the paths its compile looked for and did not
 * find in <object>.probes (removed first, so a list is always this run's). */
void inc_name_probes(gen_job *jobs, size_t n);
/* Compiles that clang's executable runs (not co->in_process) cannot list
 * them: a preprocess of each job's command by the clang module does, first. */
void inc_probe_compiles(gen_job *jobs, size_t n, const gen_compile_opts *co, bool launcher);

typedef struct inc_unit {
    char *slot;          /* "<triple>/<object name>" */
    gen_key args;        /* the command, the compiler, and an op's unit text */
    gen_key position;    /* an op unit's file name and lines */
    gen_key context;     /* what a checked stencil depends on besides its object */
    const char *tu_path; /* an op's unit as compiled (hashed through args, not as a file) */
    bool op;             /* an op (else the shim, whose entry needs its unwind facts too) */
    bool keyed;          /* key holds the entry found or stored */
    gen_key key;
    bool absent_known;   /* absent names the paths its compile looked for and did not find */
    gen_key absent;
} inc_unit;

/* What an op's key takes from its translation unit (opunit.h): the unit
 * as the key sees it, and where it sits. */
typedef struct inc_op_unit {
    gen_key text;     /* its own unit without #line directives (op_key's text) */
    bool positional;  /* that unit mentions a position macro */
    gen_key lines;    /* its unit's lines (op_key's position) */
    const char *file; /* its file as __FILE__ names it (relative to the manifest) */
    bool batched;     /* compiled in a batch (its entry keeps the batch's object) */
} inc_op_unit;

/* `op`: NULL for the shim. */
void inc_unit_init(const gen_incremental *inc, inc_unit *u, const char *triple, const gen_job *job,
                   const inc_op_unit *op, const char *tu_path);
void inc_unit_free(inc_unit *u);

/* Key u by the files its last compile read (u->keyed: an entry may exist);
 * false when nothing is recorded or a file it found or missed has changed. */
bool inc_key(gen_incremental *inc, inc_unit *u);

typedef enum inc_hit {
    INC_MISS,    /* compile it */
    INC_OBJECT,  /* *object and *deps set (caller frees): check it, then inc_store */
    INC_STENCIL, /* *stencil (code, data, holes, instructions) and *deps set, and
                    for the shim *unwind (caller frees): done */
} inc_hit;

/* After inc_key; `label` names the compile in the note on a damaged stencil
 * entry. */
inc_hit inc_lookup(gen_incremental *inc, inc_unit *u, const char *label, gen_stencil *stencil,
                   uint8_t **object, size_t *size, char **deps, uint8_t **unwind,
                   size_t *unwind_size);

/* A compile's output: its object, its depfile's text and its list of
 * missing paths. */
typedef struct inc_output {
    const struct timespec *started; /* when the compile started */
    const uint8_t *deps;
    size_t deps_size;
    const uint8_t *absent; /* one path a line (lb_clang_main); NULL: unknown */
    size_t absent_size;
    const uint8_t *object;
    size_t size;
    /* Another op of the same batched unit stores this object: record the key
     * (and the stencil) only. Without the object, a damaged stencil entry is
     * a miss, and the batch compiles again. */
    bool key_only;
} inc_output;

/* After a compile (`fresh`), or after checking an INC_OBJECT hit (fresh NULL).
 * A fresh result whose missing paths are unknown is not stored.
 * `checked`: the stencil as checked, NULL when it failed a check; `deps`: the
 * depfile text, kept with the stencil; `unwind`: the shim's
 * unwind_cache_encode (NULL for ops). A result whose inputs changed after its
 * compile started is not stored. */
void inc_store(gen_incremental *inc, inc_unit *u, const inc_output *fresh,
               const gen_stencil *checked, const char *deps, const strbuf *unwind);

/* The paths u's compile looked for and did not find, one a line (what its
 * key needs still missing), as this run read or wrote them; NULL when
 * unknown. Valid until inc_close; only reads, so render threads may call it. */
const char *inc_absent_list(const gen_incremental *inc, const inc_unit *u);

#endif
