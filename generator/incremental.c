/* incremental.c - see incremental.h. */
#define _GNU_SOURCE /* st_mtim */
#include "incremental.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "diag.h"
#include "flags.h"
#include "llvm_bridge.h"
#include "rundir.h"
#include "opunit.h"
#include "outputs.h"
#include "stencil_blob.h"
#include "util.h"

/* Bumped when what a key is made of changes (incremental.h lists it), so
 * that no record made by an older stencilgen is found: 2 added the missing
 * paths and the environment; 3 the batched mark as an ingredient of its own;
 * 4 the unit's text as hashes made a file at a time (op_keys_for_file);
 * 5 SHA-256 digests (digest.h) for every part. */
#define KEY_VERSION 5

/* The environment variables clang reads that can change an object (or which
 * ops a source holds), from clang's driver and its toolchains. The value of
 * each, or its absence, is part of every key of the targets it applies to.
 * None is cleared for the compiles: a build that sets one means it (CPATH is
 * a way to pass include directories), and the stencils must stay what the
 * user's own clang makes of the same command. Not keyed, as no object
 * depends on them: TMPDIR (temporaries), CC_PRINT_OPTIONS, CC_PRINT_HEADERS,
 * CC_LOG_DIAGNOSTICS, CC_PRINT_PROC_STAT, CC_PRINT_INTERNAL_STAT and their
 * *_FILE companions (logs on the side; clang_main.cpp hands such commands
 * to the executable), CLANG_SPAWN_CC1 (whether cc1 runs in a process of its
 * own), LIBRARY_PATH (linking; stencils are not linked). PATH is read for
 * MinGW targets, keyed as the gcc it finds (mingw_gcc_on_path). */
typedef enum env_scope { ENV_ALL, ENV_DARWIN } env_scope;

static const struct keyed_env {
    const char *name;
    env_scope scope;
    const char *why; /* for the reader (and docs/build.md's table) */
} keyed_env[] = {
    {"CPATH", ENV_ALL, "include directories after the command's -I, for every language"},
    {"C_INCLUDE_PATH", ENV_ALL, "include directories after the command's -isystem, for C"},
    {"CPLUS_INCLUDE_PATH", ENV_ALL, "the same for C++ (units are C: keyed, not relied on)"},
    {"OBJC_INCLUDE_PATH", ENV_ALL, "the same for Objective-C (likewise)"},
    {"OBJCPLUS_INCLUDE_PATH", ENV_ALL, "the same for Objective-C++ (likewise)"},
    {"CCC_OVERRIDE_OPTIONS", ENV_ALL, "edits clang's command line"},
    {"SOURCE_DATE_EPOCH", ENV_ALL, "the date and time __DATE__, __TIME__, __TIMESTAMP__ give"},
    {"CLANG_NO_DEFAULT_CONFIG", ENV_ALL, "whether clang reads its default configuration files"},
    {"COMPILER_PATH", ENV_ALL, "directories the driver searches first, as -B does"},
    {"SDKROOT", ENV_DARWIN, "the SDK (sysroot, so the include directories) without -isysroot"},
    {"MACOSX_DEPLOYMENT_TARGET", ENV_DARWIN, "the OS and version the code is for"},
    {"IPHONEOS_DEPLOYMENT_TARGET", ENV_DARWIN, "likewise"},
    {"TVOS_DEPLOYMENT_TARGET", ENV_DARWIN, "likewise"},
    {"WATCHOS_DEPLOYMENT_TARGET", ENV_DARWIN, "likewise"},
    {"BRIDGEOS_DEPLOYMENT_TARGET", ENV_DARWIN, "likewise"},
    {"DRIVERKIT_DEPLOYMENT_TARGET", ENV_DARWIN, "likewise"},
    {"XROS_DEPLOYMENT_TARGET", ENV_DARWIN, "likewise"},
    {"RC_DEBUG_OPTIONS", ENV_DARWIN, "puts the command line in debug information"},
    {"RC_DEBUG_PREFIX_MAP", ENV_DARWIN, "a prefix map for debug information"},
};

/* The keyed variables of one scope: each name with its value, or unset. */
static gen_key environment_hash(env_scope scope)
{
    digest_ctx h;
    digest_begin(&h);
    digest_add_u64(&h, KEY_VERSION);
    for (size_t i = 0; i < sizeof keyed_env / sizeof keyed_env[0]; i++) {
        if (keyed_env[i].scope != scope)
            continue;
        digest_add_str(&h, keyed_env[i].name);
        digest_add_str(&h, getenv(keyed_env[i].name)); /* unset and empty differ */
    }
    return digest_end(&h);
}

/* Where clang's MinGW toolchain finds the sysroot for `triple` on PATH
 * (MinGW.cpp, findGcc): the first of its gcc names that some PATH directory
 * holds as a readable, executable regular file (llvm::sys::findProgramByName,
 * which skips empty entries), whose directory's parent is the sysroot. That
 * path is keyed, not PATH: a change to PATH that finds the same gcc (a tool's
 * own directory put first, as perf and pyenv do) keeps every MinGW stencil.
 * NULL when none is found. */
static char *mingw_gcc_on_path(const char *triple)
{
    const char *path = getenv("PATH");
    int arch = (int)strcspn(triple, "-");
    char *names[] = {xasprintf("%s-gcc", triple), xasprintf("%.*s-w64-mingw32-gcc", arch, triple),
                     xasprintf("%.*s-w64-mingw32ucrt-gcc", arch, triple), xstrdup("mingw32-gcc")};
    size_t nnames = sizeof names / sizeof names[0];
    char *found = NULL;
    for (size_t i = 0; i < nnames && !found && path; i++)
        found = path_search(path, names[i], R_OK | X_OK, false);
    for (size_t i = 0; i < nnames; i++)
        free(names[i]);
    return found;
}

/* The MinGW targets' part of the environment: their gcc on PATH (one target,
 * x86_64-w64-windows-gnu, has the MinGW toolchain). */
static gen_key mingw_environment(void)
{
    digest_ctx h;
    digest_begin(&h);
    digest_add_u64(&h, KEY_VERSION);
    char *gcc = mingw_gcc_on_path(sg_target_x86_64_windows.triple);
    digest_add_str(&h, gcc);
    free(gcc);
    return digest_end(&h);
}

/* What of the environment a compile or a parse for `triple` depends on. */
static void add_environment(digest_ctx *h, const gen_incremental *inc, const char *triple)
{
    digest_add_digest(h, &inc->environment);
    bool darwin = strstr(triple, "-apple-") != NULL;
    bool mingw = strstr(triple, "-windows-gnu") || strstr(triple, "-mingw");
    digest_add_u64(h, (uint64_t)darwin << 1 | mingw);
    if (darwin)
        digest_add_digest(h, &inc->environment_darwin);
    if (mingw)
        digest_add_digest(h, &inc->environment_mingw);
}

/* A program's identity for cache keys: its path, size and modification time
 * (stat only: a no-op build must not run it, nor read megabytes of it). */
static void add_program_identity(digest_ctx *h, const char *path)
{
    struct stat st;
    digest_add_str(h, path);
    bool found = stat(path, &st) == 0;
    digest_add_u64(h, found);
    if (found) {
        digest_add_u64(h, (uint64_t)st.st_size);
        digest_add_u64(h, (uint64_t)st.st_mtim.tv_sec);
        digest_add_u64(h, (uint64_t)st.st_mtim.tv_nsec);
    }
}

/* The compiler's identity for cache keys: clang's and the launcher's, the file
 * that runs (found on PATH), so an edited launcher script (a flag added) is a
 * new compiler. */
static gen_key compiler_identity(const char *clang, const char *launcher)
{
    digest_ctx h;
    digest_begin(&h);
    digest_add_u64(&h, KEY_VERSION);
    add_program_identity(&h, clang);
    digest_add_u64(&h, launcher != NULL);
    if (launcher)
        add_program_identity(&h, launcher);
    return digest_end(&h);
}

/* What an op's checked stencil depends on besides its object and target: this
 * generator build (extraction and checks may change with it), the LLVM that
 * printed the instructions, and the run-time symbol list (holes name symbols
 * by number). The generator is known by its executable's size, modification
 * time and inode; without them, no stencil cache. */
static bool generator_identity(char *const *symbols, size_t nsymbols, gen_key *id)
{
    struct stat st;
    if (stat("/proc/self/exe", &st) != 0)
        return false;
    digest_ctx h;
    digest_begin(&h);
    uint64_t facts[] = {STENCIL_BLOB_VERSION, (uint64_t)st.st_size, (uint64_t)st.st_mtim.tv_sec,
                        (uint64_t)st.st_mtim.tv_nsec, (uint64_t)st.st_ino};
    for (size_t i = 0; i < sizeof facts / sizeof facts[0]; i++)
        digest_add_u64(&h, facts[i]);
    digest_add_str(&h, lb_llvm_version());
    digest_add_u64(&h, nsymbols);
    for (size_t i = 0; i < nsymbols; i++)
        digest_add_str(&h, symbols[i]);
    *id = digest_end(&h);
    return true;
}

void inc_open(gen_incremental *inc, gen_cache *cache, const char *clang, const char *launcher,
              char *const *symbols, size_t nsymbols, bool verbose)
{
    inc->cache = cache;
    inc->compiler = compiler_identity(clang, launcher);
    inc->stencils = generator_identity(symbols, nsymbols, &inc->generator);
    inc->stencil_kind = "stencil";
    inc->nsymbols = nsymbols;
    inc->verbose = verbose;
    inc->environment = environment_hash(ENV_ALL);
    inc->environment_darwin = environment_hash(ENV_DARWIN);
    inc->environment_mingw = mingw_environment();
    inc->verdicts = NULL;
    inc->nverdicts = inc->verdicts_cap = 0;
    inc->pending = NULL;
    inc->npending = inc->pending_cap = 0;
}

void inc_close(gen_incremental *inc)
{
    inc_discover_finish(inc, NULL, 0); /* what never ran is not recorded */
    for (size_t i = 0; i < inc->nverdicts; i++)
        free(inc->verdicts[i].text);
    free(inc->verdicts);
    inc->verdicts = NULL;
    inc->nverdicts = inc->verdicts_cap = 0;
}

/* ---- paths looked for and not found
 *
 * A compile's list of them (lb_clang_main) is stored once as an "absent"
 * blob under the hash of its text: a target's ops mostly share one, so a run
 * reads and checks each list once, with one stat per path. */

static inc_absent_verdict *verdict_of(const gen_incremental *inc, const gen_key *id)
{
    for (size_t i = 0; i < inc->nverdicts; i++)
        if (digest_equal(&inc->verdicts[i].id, id))
            return &inc->verdicts[i];
    return NULL;
}

static void remember_verdict(gen_incremental *inc, const gen_key *id, bool holds,
                             const uint8_t *text, size_t size)
{
    inc_absent_verdict v = {*id, holds, text ? xstrndup((const char *)text, size) : NULL};
    ARRAY_PUSH(inc->verdicts, inc->nverdicts, inc->verdicts_cap, v);
}

/* Whether every path of the list `id` is still missing (a damaged or lost
 * list: no). */
static bool still_absent(gen_incremental *inc, const gen_key *id)
{
    const inc_absent_verdict *known = verdict_of(inc, id);
    if (known)
        return known->holds;
    uint8_t *text = NULL;
    size_t size = 0;
    bool holds = cache_get(inc->cache, id, "absent", &text, &size);
    if (holds) {
        char *copy = xstrndup((const char *)text, size);
        struct stat st;
        for (char *p = copy, *nl; holds && (nl = strchr(p, '\n')); p = nl + 1) {
            *nl = '\0';
            holds = stat(p, &st) != 0;
        }
        free(copy);
    }
    remember_verdict(inc, id, holds, text, size);
    free(text);
    return holds;
}

/* Store a list of missing paths; *id names it in a record. */
static bool store_absent(gen_incremental *inc, const uint8_t *text, size_t size, gen_key *id)
{
    digest_ctx h;
    digest_begin(&h);
    digest_add_str(&h, "absent");
    digest_add(&h, text, size);
    *id = digest_end(&h);
    inc_absent_verdict *known = verdict_of(inc, id);
    if (known && known->holds)
        return true; /* read or written already in this run */
    /* Written again when it was found missing (another build evicted it) or
     * not holding: a compile just found these paths missing. Remembered
     * even when it cannot be written: the header's provenance names it. */
    bool put = cache_put(inc->cache, id, "absent", text, size);
    if (!known) {
        remember_verdict(inc, id, put, text, size);
    } else {
        known->holds = put;
        if (!known->text)
            known->text = xstrndup((const char *)text, size);
    }
    return put;
}

/* Each compile lists the paths it looked for and did not find in
 * <object>.probes (lb_clang_main, incremental.h); named once the objects
 * are, and removed first, so that a list is always this compile's. */
void inc_name_probes(gen_job *jobs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (jobs[i].skip)
            continue;
        free(jobs[i].probes);
        jobs[i].probes = xasprintf("%s.probes", jobs[i].output);
        unlink(jobs[i].probes);
    }
}

/* Compiles that clang's executable runs (under a launcher, --exec-clang,
 * another clang) cannot list the paths they looked for: a preprocess of each
 * command, by the clang module in forked children, lists them first. Without
 * the module their results are not cached. */
void inc_probe_compiles(gen_job *jobs, size_t n, const gen_compile_opts *co, bool launcher)
{
    const char *clang = co->in_process ? NULL : lb_clang_path();
    if (!clang)
        return;
    gen_job *pp = xcalloc(n ? n : 1, sizeof *pp);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (jobs[i].skip)
            continue;
        pp[m++] = (gen_job){.argv = flags_preprocess(jobs[i].argv, launcher, clang),
                           .output = "/dev/null",
                           .log = xasprintf("%s.probes.log", jobs[i].output),
                           .label = jobs[i].label,
                           .probes = jobs[i].probes};
    }
    gen_compile_opts o = *co;
    o.in_process = o.quiet = true;
    o.verbose = o.progress = false;
    o.failed = NULL;
    bool spawn_failed;
    compile_run(pp, m, &o, NULL, NULL, &spawn_failed);
    for (size_t k = 0; k < m; k++) {
        argv_free(pp[k].argv);
        free(pp[k].log);
    }
    free(pp);
}

/* ---- the key: cache.c hashes the command's and the files' part
 * (cache_key_for, cache_record); the paths that must stay missing, and the
 * position when a file read mentions one, are mixed in here. */

static void finish_key(gen_key *key, const gen_key *absent, bool positional,
                       const gen_key *position)
{
    digest_ctx h;
    digest_begin(&h);
    digest_add_digest(&h, key);
    digest_add_digest(&h, absent);
    digest_add_u64(&h, positional);
    if (positional)
        digest_add_digest(&h, position ? position : &(gen_key){{0}});
    *key = digest_end(&h);
}

/* The key of `slot`'s record (see cache_key_for); *absent: its set of paths
 * that must still be missing. */
static bool key_for(gen_incremental *inc, const char *slot, const gen_key *args,
                    const gen_key *position, gen_key *key, gen_key *absent)
{
    bool positional;
    if (!cache_key_for(inc->cache, slot, args, key, absent, &positional))
        return false;
    finish_key(key, absent, positional, position);
    return true;
}

/* Record `slot` (see cache_record) and give its key. */
static bool record_key(gen_incremental *inc, const char *slot, const gen_key *args,
                       const gen_key *position, char *const *deps, size_t n, const gen_key *absent,
                       const struct timespec *since, gen_key *key)
{
    bool positional;
    if (!cache_record(inc->cache, slot, args, deps, n, absent, since, key, &positional))
        return false;
    finish_key(key, absent, positional, position);
    return true;
}

/* ---- the compiler's version check, once per compiler */

static gen_key compiler_key(const gen_incremental *inc)
{
    digest_ctx h;
    digest_begin(&h);
    digest_add_str(&h, "clang-ok");
    digest_add_digest(&h, &inc->compiler);
    return digest_end(&h);
}

/* The entry holds the version; one that holds "ok" (written before the
 * header named the compiler's own version) is asked again. */
bool inc_compiler_verified(gen_incremental *inc, char *version, size_t version_size)
{
    gen_key key = compiler_key(inc);
    uint8_t *seen;
    size_t size;
    if (!cache_get(inc->cache, &key, "clang-ok", &seen, &size))
        return false;
    bool usable = size > 0 && size < version_size && seen[0] >= '1' && seen[0] <= '9' &&
                  !memchr(seen, '\0', size);
    if (usable) {
        memcpy(version, seen, size);
        version[size] = '\0';
    }
    free(seen);
    return usable;
}

void inc_compiler_verdict(gen_incremental *inc, const char *version)
{
    gen_key key = compiler_key(inc);
    cache_put(inc->cache, &key, "clang-ok", version, strlen(version));
}

/* ---- discovery */

/* The variant axes after an op's fields in a cached discovery: "<n> [<axis>
 * <first> <last>]..." (the checks were made when it was discovered). */
static bool parse_cached_axes(const char *text, gen_op *op)
{
    unsigned n;
    int used = 0;
    if (sscanf(text, " %u%n", &n, &used) != 1 || n > GEN_MAX_AXES)
        return false;
    op->axes = xcalloc(n ? n : 1, sizeof *op->axes);
    for (text += used; op->naxes < n; text += used) {
        char name[256];
        gen_axis a = {NULL, 0, 0};
        used = 0;
        if (sscanf(text, " %255s %u %u%n", name, &a.first, &a.last, &used) != 3 || !used ||
            a.first > a.last || a.last > GEN_MAX_AXIS_VALUE)
            return false;
        a.name = xstrdup(name);
        op->axes[op->naxes++] = a;
    }
    return true;
}

/* Parse "name prefixed line col begin end axes" lines of a cached discovery
 * into ops of `source`. */
static bool parse_cached_ops(const uint8_t *text, size_t size, const char *source,
                             gen_oplist *out)
{
    char *copy = xstrndup((const char *)text, size);
    bool ok = true;
    for (char *line = strtok(copy, "\n"); line && ok; line = strtok(NULL, "\n")) {
        char name[256];
        unsigned prefixed, l, c, begin, end;
        int used = 0;
        ok = sscanf(line, "%255s %u %u %u %u %u%n", name, &prefixed, &l, &c, &begin, &end,
                    &used) == 6 && prefixed <= 1 && used;
        if (ok) {
            gen_op op = {.name = xstrdup(name), .prefixed = prefixed, .source = xstrdup(source),
                         .line = l, .col = c, .begin = begin, .end = end};
            ok = parse_cached_axes(line + used, &op);
            ARRAY_PUSH(out->items, out->count, out->cap, op);
        }
    }
    free(copy);
    return ok;
}

static void drop_ops_after(gen_oplist *ops, size_t count)
{
    while (ops->count > count) {
        gen_op *op = &ops->items[--ops->count];
        free(op->name);
        free(op->source);
        gen_op_free_variant(op);
    }
}

/* A discovery that missed, waiting for its preprocess (inc_discovery_jobs):
 * the paths that lists as missing complete its record. */
struct inc_pending {
    char *slot;
    gen_key args;
    char *source;
    char **argv; /* discovery's arguments */
    gen_pathlist deps; /* what the parse read */
    struct timespec since;
    strbuf ops;
    char *depfile;
    gen_job job;
};

static void pending_free(inc_pending *p)
{
    free(p->slot);
    free(p->source);
    argv_free(p->argv);
    pathlist_free(&p->deps);
    sb_free(&p->ops);
    free(p->depfile);
    argv_free(p->job.argv);
    free(p->job.log);
    free(p->job.probes);
    free(p->job.label);
}

/* The preprocess of a pending discovery's source, with its arguments, by
 * clang's driver and cc1 from the clang module in a forked child: libclang's
 * parse cannot list the paths it looked for. The parse and the preprocess
 * search the same directories for the same names. */
static void pending_job(inc_pending *p, const char *clang, const char *dir)
{
    gen_argv cmd = {0};
    argv_add(&cmd, clang);
    for (char **a = p->argv; *a; a++)
        argv_add(&cmd, *a);
    char *base = xasprintf("%s/discover-%016llx", dir,
                           (unsigned long long)hash64(p->source, strlen(p->source), 0));
    p->depfile = xasprintf("%s.d", base);
    argv_add(&cmd, "-MD");
    argv_add(&cmd, "-MF");
    argv_add(&cmd, p->depfile);
    argv_add(&cmd, "-E");
    argv_add(&cmd, p->source);
    argv_add(&cmd, "-o");
    argv_add(&cmd, "/dev/null");
    p->job = (gen_job){.argv = argv_finish(&cmd), .output = "/dev/null", .status = -1,
                      .log = xasprintf("%s.log", base), .probes = xasprintf("%s.probes", base),
                      .label = xasprintf("ops of %s (the paths its parse looks for)", p->source)};
    free(base);
}

size_t inc_discovery_jobs(gen_incremental *inc, const gen_rundir *rundir, gen_job **jobs)
{
    const char *clang = inc->npending ? lb_clang_path() : NULL;
    if (!clang)
        return 0;
    *jobs = xcalloc(inc->npending, sizeof **jobs);
    for (size_t i = 0; i < inc->npending; i++) {
        pending_job(&inc->pending[i], clang, rundir->path);
        (*jobs)[i] = inc->pending[i].job;
    }
    return inc->npending;
}

/* The files the preprocess read must be files the parse read: else one
 * appeared in between, and the missing paths are not the parse's. */
static bool read_no_more(const inc_pending *p, const uint8_t *dtext, size_t dsize)
{
    gen_pathlist read = {0};
    outputs_parse_deps(dtext, dsize, &read.items, &read.count, &read.cap);
    bool ok = true;
    for (size_t i = 0; ok && i < read.count; i++) {
        bool known = false;
        for (size_t k = 0; k < p->deps.count && !known; k++)
            known = !strcmp(read.items[i], p->deps.items[k]);
        ok = known;
    }
    pathlist_free(&read);
    return ok;
}

static void record_discovery(gen_incremental *inc, inc_pending *p)
{
    uint8_t *dtext = NULL, *missing = NULL;
    size_t dsize = 0, nmissing = 0;
    gen_key absent, key;
    bool ok = p->job.argv && p->job.status == 0 && read_file(p->depfile, &dtext, &dsize) &&
              read_file(p->job.probes, &missing, &nmissing) && read_no_more(p, dtext, dsize) &&
              store_absent(inc, missing, nmissing, &absent);
    if (ok && record_key(inc, p->slot, &p->args, NULL, p->deps.items, p->deps.count, &absent,
                         &p->since, &key))
        cache_put(inc->cache, &key, "ops", p->ops.data ? p->ops.data : "", p->ops.len);
    else if (!ok && inc->verbose)
        diag_note("%s: its ops are not cached: the paths its parse looked for are unknown",
                  p->source);
    free(dtext);
    free(missing);
}

void inc_discover_finish(gen_incremental *inc, const gen_job *jobs, size_t n)
{
    for (size_t i = 0; i < inc->npending; i++) {
        if (i < n)
            inc->pending[i].job.status = jobs[i].status;
        record_discovery(inc, &inc->pending[i]);
        pending_free(&inc->pending[i]);
    }
    free(inc->pending);
    inc->pending = NULL;
    inc->npending = inc->pending_cap = 0;
}

size_t inc_compile_with_discovery(gen_incremental *inc, const gen_rundir *rd, gen_job *jobs,
                                  size_t n, const gen_compile_opts *co, gen_job_done *done,
                                  void *ctx, bool *spawn_failed)
{
    gen_job *djobs = NULL;
    size_t nd = inc->npending && rd ? inc_discovery_jobs(inc, rd, &djobs) : 0;
    bool together = nd && co->in_process;
    if (nd && !together) {
        gen_compile_opts o = *co;
        o.in_process = o.quiet = true;
        o.progress = false;
        o.failed = NULL;
        bool ignored;
        compile_run(djobs, nd, &o, NULL, NULL, &ignored);
    }
    gen_job *all = jobs;
    if (together) {
        all = xcalloc(n + nd, sizeof *all);
        memcpy(all, jobs, n * sizeof *all);
        memcpy(all + n, djobs, nd * sizeof *all);
    }
    size_t failures = compile_run(all, n + (together ? nd : 0), co, done, ctx, spawn_failed);
    if (together) {
        /* Back only what compile_run ran: a job it skipped (a batch's rider, a
         * cache hit) may have been changed meanwhile in its own slot by `done`
         * (take_batch fails a rider whose check failed), which its stale copy
         * in `all` would undo. */
        for (size_t i = 0; i < n; i++)
            if (!jobs[i].skip)
                jobs[i] = all[i];
        memcpy(djobs, all + n, nd * sizeof *all);
        size_t theirs = 0; /* not the compiles' failures: those that ran and failed */
        for (size_t i = 0; i < nd; i++)
            theirs += djobs[i].status != 0 && (djobs[i].started.tv_sec || djobs[i].started.tv_nsec);
        failures = failures > theirs ? failures - theirs : 0;
        free(all);
    }
    inc_discover_finish(inc, djobs, nd);
    free(djobs);
    return failures;
}

/* Discovery costs a libclang parse per source; its result is cached under the
 * contents of every file that parse read, and the paths it did not find
 * (recorded by inc_discover_finish). */
int inc_discover(gen_incremental *inc, const char *source, const gen_argv *a, gen_oplist *ops)
{
    gen_argv copy = {0};
    for (size_t i = 0; i < a->count; i++)
        argv_add(&copy, a->items[i]);
    char **argv = argv_finish(&copy);
    const char *triple = "";
    for (size_t i = 0; i < a->count; i++)
        if (!strncmp(a->items[i], "--target=", 9))
            triple = a->items[i] + 9;
    gen_key command = cache_hash_args(argv, (const char *const[]){NULL});
    digest_ctx h;
    digest_begin(&h);
    digest_add_digest(&h, &command);
    digest_add_str(&h, source); /* the slot names it by a short hash only */
    digest_add_str(&h, lb_llvm_version());
    add_environment(&h, inc, triple);
    gen_key args = digest_end(&h);
    char *slot = xasprintf("discover/%016llx",
                           (unsigned long long)hash64(source, strlen(source), 0));
    size_t before = ops->count;
    gen_key key, absent;
    uint8_t *text;
    size_t size;
    if (key_for(inc, slot, &args, NULL, &key, &absent) && still_absent(inc, &absent) &&
        cache_get(inc->cache, &key, "ops", &text, &size)) {
        bool ok = parse_cached_ops(text, size, source, ops);
        free(text);
        if (ok) {
            free(slot);
            argv_free(argv);
            return SG_EXIT_OK;
        }
        drop_ops_after(ops, before); /* a damaged entry: discover afresh */
    }
    inc_pending p = {.slot = slot, .args = args, .source = xstrdup(source), .argv = argv};
    cache_now(&p.since);
    int rc = discover_ops(source, (const char *const *)a->items, a->count, ops, &p.deps);
    if (rc != SG_EXIT_OK) {
        pending_free(&p);
        return rc;
    }
    for (size_t i = before; i < ops->count; i++) {
        const gen_op *o = &ops->items[i];
        sb_printf(&p.ops, "%s %u %u %u %u %u %zu", o->name, (unsigned)o->prefixed, o->line,
                  o->col, o->begin, o->end, o->naxes);
        for (size_t k = 0; k < o->naxes; k++)
            sb_printf(&p.ops, " %s %u %u", o->axes[k].name, o->axes[k].first, o->axes[k].last);
        sb_putc(&p.ops, '\n');
    }
    ARRAY_PUSH(inc->pending, inc->npending, inc->pending_cap, p);
    return rc;
}

/* ---- compiles */

/* The hash of the job's arguments; a shared first part (gen_shared_args) is
 * hashed by the first job that has it, and the hash kept there. A shared part
 * belongs to one kind of command, so it is always hashed with the same skips. */
static gen_key hash_command(const gen_job *job, const char *const *skip_next)
{
    gen_shared_args *s = job->shared;
    if (!s)
        return cache_hash_args(job->argv, skip_next);
    if (!s->hashed) {
        s->hash = cache_hash_args_from(NULL, job->argv, s->n, skip_next);
        s->hashed = true;
    }
    return cache_hash_args_from(&s->hash, job->argv + s->n, SIZE_MAX, skip_next);
}

void inc_unit_init(const gen_incremental *inc, inc_unit *u, const char *triple, const gen_job *job,
                   const inc_op_unit *op, const char *tu_path)
{
    /* Paths of this run's own files do not count: an op's unit (after -c) is
     * hashed by its text, its object and depfile are outputs. */
    static const char *const shim_paths[] = {"-o", "-MF", NULL};
    static const char *const op_paths[] = {"-o", "-MF", "-c", NULL};
    const char *base = strrchr(job->output, '/');
    *u = (inc_unit){.tu_path = tu_path, .op = op != NULL};
    u->slot = xasprintf("%s/%s", triple, base ? base + 1 : job->output);
    gen_key command = hash_command(job, u->op ? op_paths : shim_paths);
    digest_ctx h;
    digest_begin(&h);
    digest_add_digest(&h, &command);
    digest_add_digest(&h, &inc->compiler);
    add_environment(&h, inc, triple);
    digest_add_u64(&h, op != NULL);
    if (op) {
        /* A batched op is marked so: its entry keeps its batch's object. */
        digest_add_u64(&h, op->batched);
        digest_add_digest(&h, &op->text);
        /* Code that compiles its position in (__LINE__, __FILE__, also through
         * a header's macro: then the header mentions one, see finish_key). */
        digest_ctx p;
        digest_begin(&p);
        digest_add_str(&p, op->file);
        digest_add_digest(&p, &op->lines);
        u->position = digest_end(&p);
        digest_add_u64(&h, op->positional);
        if (op->positional)
            digest_add_digest(&h, &u->position);
    }
    u->args = digest_end(&h);
    digest_ctx c;
    digest_begin(&c);
    digest_add_digest(&c, &inc->generator);
    digest_add_str(&c, triple);
    u->context = digest_end(&c);
}

void inc_unit_free(inc_unit *u)
{
    free(u->slot);
    u->slot = NULL;
}

/* The shim's "unwind" entry: this generator's context, then the payload. */
static bool cached_unwind(gen_incremental *inc, const inc_unit *u, uint8_t **out, size_t *size)
{
    uint8_t *e;
    size_t n;
    if (!cache_get(inc->cache, &u->key, "unwind", &e, &n))
        return false;
    size_t c = sizeof u->context.b;
    if (n < c || memcmp(e, u->context.b, c)) {
        free(e);
        return false;
    }
    memmove(e, e + c, n - c);
    *out = e;
    *size = n - c;
    return true;
}

/* A verified, decodable "stencil" entry stands in for the object and every
 * step after it. A damaged one is a miss: the caller falls back to the object. */
static bool cached_stencil(gen_incremental *inc, const inc_unit *u, const char *label,
                           gen_stencil *s, char **deps, uint8_t **unwind, size_t *unwind_size)
{
    uint8_t *blob;
    size_t size;
    if (!inc->stencils || (!u->op && !cached_unwind(inc, u, unwind, unwind_size)))
        return false;
    if (!cache_get(inc->cache, &u->key, inc->stencil_kind, &blob, &size)) {
        if (!u->op)
            free(*unwind);
        return false;
    }
    char err[256];
    bool ok = stencil_blob_decode(blob, size, &u->context, inc->nsymbols, s, deps, err,
                                   sizeof err);
    free(blob);
    if (!ok && !u->op)
        free(*unwind);
    if (!ok && inc->verbose)
        diag_note("%s: cached stencil not used: %s", label, err);
    return ok;
}

bool inc_key(gen_incremental *inc, inc_unit *u)
{
    gen_key absent = {0};
    u->keyed = key_for(inc, u->slot, &u->args, &u->position, &u->key, &absent) &&
               still_absent(inc, &absent);
    u->absent_known = u->keyed;
    u->absent = absent;
    return u->keyed;
}

inc_hit inc_lookup(gen_incremental *inc, inc_unit *u, const char *label, gen_stencil *stencil,
                   uint8_t **object, size_t *size, char **deps, uint8_t **unwind,
                   size_t *unwind_size)
{
    uint8_t *dtext;
    size_t dsize;
    if (!u->keyed)
        return INC_MISS;
    if (cached_stencil(inc, u, label, stencil, deps, unwind, unwind_size))
        return INC_STENCIL;
    if (!cache_get(inc->cache, &u->key, "d", &dtext, &dsize))
        return INC_MISS;
    if (!cache_get(inc->cache, &u->key, "o", object, size)) {
        free(dtext);
        return INC_MISS;
    }
    *deps = xstrndup((const char *)dtext, dsize);
    free(dtext);
    return INC_OBJECT;
}

/* The missing paths of an op's compile, less those beside its unit (a
 * quoted include looks there first): the unit's directory is this run's
 * own, and gone with it. */
static strbuf absent_outside_unit(const inc_unit *u, const uint8_t *text, size_t size)
{
    strbuf sb = {0};
    char *dir = u->tu_path ? path_dirname(u->tu_path) : NULL;
    size_t dlen = dir ? strlen(dir) : 0;
    for (const char *p = (const char *)text, *end = p + size, *nl; p < end; p = nl + 1) {
        nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl)
            break;
        if (!dir || (size_t)(nl - p) <= dlen || memcmp(p, dir, dlen) || p[dlen] != '/')
            sb_putn(&sb, p, (size_t)(nl + 1 - p));
    }
    free(dir);
    return sb;
}

/* Store a fresh object under the key of the files its compile read and the
 * paths it did not find, unless one of the files changed after the compile
 * started (then the object may be of other bytes than the key names), or
 * the paths are unknown. */
static bool store_object(gen_incremental *inc, inc_unit *u, const inc_output *out)
{
    gen_key absent = {0};
    strbuf kept = out->absent ? absent_outside_unit(u, out->absent, out->absent_size)
                              : (strbuf){0};
    bool listed = out->absent && store_absent(inc, (const uint8_t *)(kept.data ? kept.data : ""),
                                              kept.len, &absent);
    sb_free(&kept);
    u->absent_known = out->absent != NULL; /* for the provenance, stored or not */
    u->absent = absent;
    if (!listed) {
        if (inc->verbose)
            diag_note("%s: not cached: the paths its compile looked for and did not find are "
                      "unknown (no clang module to list them)", u->slot);
        return false;
    }
    char **deps = NULL;
    size_t n = 0, cap = 0;
    outputs_parse_deps(out->deps, out->deps_size, &deps, &n, &cap);
    if (u->tu_path) { /* the unit itself is hashed into u->args */
        for (size_t i = 0; i < n; i++) {
            if (!strcmp(deps[i], u->tu_path)) {
                free(deps[i]);
                deps[i] = deps[--n];
                break;
            }
        }
    }
    bool ok = record_key(inc, u->slot, &u->args, &u->position, deps, n, &absent, out->started,
                         &u->key) &&
              (out->key_only ||
               (cache_put(inc->cache, &u->key, "d", out->deps, out->deps_size) &&
               cache_put(inc->cache, &u->key, "o", out->object, out->size)));
    for (size_t i = 0; i < n; i++)
        free(deps[i]);
    free(deps);
    return ok;
}

void inc_store(gen_incremental *inc, inc_unit *u, const inc_output *fresh,
               const gen_stencil *checked, const char *deps, const strbuf *unwind)
{
    if (fresh)
        u->keyed = store_object(inc, u, fresh);
    /* The checked stencil, stored beside its object so that the next run need
     * not read, extract, check or disassemble the object again (nor load
     * LLVM to do it); the shim's unwind entry first, as its stencil entry
     * alone is no hit. */
    if (!u->keyed || !checked || !inc->stencils || !deps || (!u->op && !unwind))
        return;
    if (!u->op) {
        strbuf e = {0};
        sb_putn(&e, u->context.b, sizeof u->context.b);
        sb_putn(&e, unwind->data, unwind->len);
        bool put = cache_put(inc->cache, &u->key, "unwind", e.data, e.len);
        sb_free(&e);
        if (!put)
            return;
    }
    strbuf sb = {0};
    stencil_blob_encode(&sb, checked, deps, &u->context);
    cache_put(inc->cache, &u->key, inc->stencil_kind, sb.data, sb.len);
    sb_free(&sb);
}

const char *inc_absent_list(const gen_incremental *inc, const inc_unit *u)
{
    const inc_absent_verdict *v = u->absent_known ? verdict_of(inc, &u->absent) : NULL;
    return v ? v->text : NULL;
}
