/* memo.c - a build's outputs remembered by what made them (memo.h). */
#define _GNU_SOURCE /* st_mtim, st_ctim */
#include "memo.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "outputs.h"


#define MEMO_VERSION 2 /* 2: SHA-256 digests */
#define MEMO_MAX_OUTPUTS 4096


/* The options a header, the depfile or compile_commands.json can depend
 * on; -v, the compile timeout and dump's --op do not change them. */
static void feed_options(digest_ctx *h, const gen_options *o)
{
    digest_add_str(h, o->command);
    digest_add_str(h, o->manifest);
    digest_add_u64(h, o->ntargets);
    for (size_t i = 0; i < o->ntargets; i++)
        digest_add_str(h, o->targets[i]);
    const char *paths[] = {o->outdir, o->cache_dir, o->depfile, o->clang, o->launcher,
                           o->compile_commands, o->extra_cflags, o->extra_shim_cflags};
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++)
        digest_add_str(h, paths[i]);
    uint64_t facts[] = {(uint64_t)o->jobs, o->exec_clang, (uint64_t)o->units, o->batch_ops,
                        o->no_hot_cold, o->no_listing};
    for (size_t i = 0; i < sizeof facts / sizeof *facts; i++)
        digest_add_u64(h, facts[i]);
}

static void feed_op(digest_ctx *h, const gen_op *op)
{
    digest_add_str(h, op->name);
    digest_add_str(h, op->display);
    digest_add_str(h, op->source);
    uint64_t facts[] = {op->prefixed, op->line, op->col, op->begin, op->end, op->variant};
    for (size_t i = 0; i < sizeof facts / sizeof *facts; i++)
        digest_add_u64(h, facts[i]);
}

bool memo_digest(const gen_run *run, const job_set *js, gen_key *out)
{
    if (!run->inc.stencils)
        return false;
    for (size_t i = 0; i < js->count; i++)
        if (!js->refs[i].unit.keyed)
            return false;
    uint8_t *manifest;
    size_t msize;
    if (!read_file(run->manifest.path, &manifest, &msize))
        return false;
    digest_ctx h;
    digest_begin(&h);
    digest_add_u64(&h, MEMO_VERSION);
    digest_add_field(&h, manifest, msize);
    free(manifest);
    char *cwd = getcwd(NULL, 0); /* relative paths in the options and outputs */
    digest_add_str(&h, cwd);
    free(cwd);
    feed_options(&h, &run->opt);
    digest_add_digest(&h, &run->inc.generator);
    digest_add_digest(&h, &run->inc.compiler);
    digest_add_str(&h, run->inc.stencil_kind);
    digest_add_u64(&h, run->ops.count);
    for (size_t i = 0; i < run->ops.count; i++)
        feed_op(&h, &run->ops.items[i]);
    digest_add_u64(&h, js->count);
    for (size_t i = 0; i < js->count; i++) {
        const job_ref *ref = &js->refs[i];
        digest_add_str(&h, ref->result->target->triple);
        digest_add_u64(&h, ref->op ? (uint64_t)(ref->op - run->ops.items) : UINT64_MAX);
        digest_add_str(&h, ref->unit.slot);
        digest_add_digest(&h, &ref->unit.key);
        digest_add_digest(&h, &ref->unit.context);
    }
    *out = digest_end(&h);
    return true;
}

/* The memo of this run's outputs: one per outdir, depfile and
 * compile_commands, so that builds sharing a cache keep theirs apart. */
static char *memo_path(const gen_run *run)
{
    char *outdir = path_absolute(run->opt.outdir ? run->opt.outdir : ".");
    uint64_t h = hash64(outdir, strlen(outdir) + 1, MEMO_VERSION);
    free(outdir);
    const char *more[] = {run->opt.depfile, run->opt.compile_commands};
    for (size_t i = 0; i < 2; i++)
        h = hash64(more[i] ? more[i] : "", more[i] ? strlen(more[i]) + 1 : 0, h);
    return xasprintf("%s/memo-%016" PRIx64, run->workdir, h);
}

/* What an output is on disk; any write, replacement or touch changes it. */
typedef struct file_facts {
    uint64_t dev, ino, size, mtime_s, mtime_ns, ctime_s, ctime_ns;
} file_facts;

static bool facts_from(const struct stat *st, file_facts *f)
{
    if (!st->st_ino || !S_ISREG(st->st_mode))
        return false;
    *f = (file_facts){(uint64_t)st->st_dev, (uint64_t)st->st_ino, (uint64_t)st->st_size,
                      (uint64_t)st->st_mtim.tv_sec, (uint64_t)st->st_mtim.tv_nsec,
                      (uint64_t)st->st_ctim.tv_sec, (uint64_t)st->st_ctim.tv_nsec};
    return true;
}

/* The next line of [*p, end) without its newline, or NULL. */
static char *next_line(char **p, char *end)
{
    char *nl = memchr(*p, '\n', (size_t)(end - *p));
    if (!nl)
        return NULL;
    char *line = *p;
    *nl = 0;
    *p = nl + 1;
    return line;
}

/* The path at the end of an output line "<7 numbers> <path>", and the file
 * there, open (*fd), when it is what the numbers say (else *fd is -1). */
static const char *output_line(const char *line, int *fd)
{
    file_facts was, now;
    int used = 0;
    *fd = -1;
    if (sscanf(line, "%" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64
                     " %" SCNu64 " %n", &was.dev, &was.ino, &was.size, &was.mtime_s,
               &was.mtime_ns, &was.ctime_s, &was.ctime_ns, &used) != 7 || !used)
        return NULL;
    int f = open(line + used, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;
    if (f >= 0 && fstat(f, &st) == 0 && facts_from(&st, &now) && !memcmp(&was, &now, sizeof was))
        *fd = f;
    else if (f >= 0)
        close(f);
    return line + used;
}

/* Write the memo: written in place, not beside and renamed, so that a no-op
 * build adds no file to the cache directory; a torn write fails the length
 * check of memo_replay and is only a miss. False when an output cannot be
 * described (the memo is removed then). */
static bool write_memo(const gen_run *run, const gen_key *digest, char *const *paths,
                       const struct stat *published, size_t n, const char *summary)
{
    strbuf sb = {0};
    size_t slen = strlen(summary);
    char hex[DIGEST_HEX + 1];
    digest_hex(digest, hex);
    sb_printf(&sb, "stencilgen memo %d %s\n%zu %zu\n", MEMO_VERSION, hex, n, slen);
    bool ok = n > 0 && n <= MEMO_MAX_OUTPUTS;
    for (size_t i = 0; ok && i < n; i++) {
        file_facts f;
        char *abs = path_absolute(paths[i]);
        ok = abs && !strchr(abs, '\n') && facts_from(&published[i], &f);
        if (ok)
            sb_printf(&sb, "%" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
                           " %" PRIu64 " %s\n", f.dev, f.ino, f.size, f.mtime_s, f.mtime_ns,
                      f.ctime_s, f.ctime_ns, abs);
        free(abs);
    }
    sb_putn(&sb, summary, slen);
    char *path = memo_path(run);
    ok = ok && write_file(path, sb.data, sb.len);
    if (!ok)
        unlink(path); /* an old memo must not outlive the outputs it described */
    free(path);
    sb_free(&sb);
    return ok;
}

bool memo_replay(const gen_run *run, const gen_key *digest, strbuf *summary)
{
    char *path = memo_path(run);
    uint8_t *data;
    size_t size;
    bool ok = read_file(path, &data, &size);
    free(path);
    if (!ok)
        return false;
    char *p = (char *)data, *end = p + size, *line = next_line(&p, end);
    char hex[DIGEST_HEX + 1], want[DIGEST_HEX + 32];
    digest_hex(digest, hex);
    snprintf(want, sizeof want, "stencilgen memo %d %s", MEMO_VERSION, hex);
    unsigned long n = 0, slen = 0;
    ok = line && !strcmp(line, want) && (line = next_line(&p, end)) &&
         sscanf(line, "%lu %lu", &n, &slen) == 2 && n > 0 && n <= MEMO_MAX_OUTPUTS;
    char **paths = ok ? xcalloc(n, sizeof *paths) : NULL;
    int *fds = ok ? xcalloc(n, sizeof *fds) : NULL;
    for (unsigned long i = 0; fds && i < n; i++)
        fds[i] = -1;
    for (unsigned long i = 0; ok && i < n; i++)
        ok = (line = next_line(&p, end)) && (paths[i] = (char *)output_line(line, &fds[i])) &&
             fds[i] >= 0;
    ok = ok && (size_t)(end - p) == slen;
    if (ok) {
        sb_putn(summary, p, slen);
        /* Dated now, as a publish dates the outputs it leaves unchanged
         * (build systems compare times), and remembered so: through the
         * files found right, whatever their paths name by now. */
        struct stat *facts = xcalloc(n, sizeof *facts);
        for (unsigned long i = 0; i < n; i++) {
            futimens(fds[i], NULL);
            if (fstat(fds[i], &facts[i]) != 0)
                facts[i] = (struct stat){.st_ino = 0};
            outputs_remove_stale_temps(paths[i]); /* as a publish does too */
        }
        char *text = xstrndup(p, slen);
        write_memo(run, digest, paths, facts, n, text);
        free(text);
        free(facts);
    }
    for (unsigned long i = 0; fds && i < n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    free(fds);
    free(paths);
    free(data);
    return ok;
}

void memo_record(const gen_run *run, const gen_key *digest, char *const *paths,
                 const struct stat *published, size_t n, const char *summary)
{
    write_memo(run, digest, paths, published, n, summary);
}
