/* cache.c - see cache.h. Files under DIR: records.idx (every record's slot,
 * argument hash and dependency list), records.lock (held while the index is
 * merged) and blobs/<key>.<kind> (a blob followed by a 24-byte trailer: magic,
 * size, checksum). */
#define _GNU_SOURCE
#include "cache.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "opunit.h"
#include "util.h"

#define TRAILER_MAGIC 0x31454843474753ull /* "SGGCHE1" */
/* Records kept per slot: enough for a few checkouts or branches sharing a
 * cache, few enough that the index stays small. */
#define RECORDS_PER_SLOT 4

typedef struct file_hash {
    char *path;
    bool ok;
    bool positional; /* mentions a source-position macro */
    struct timespec mtime; /* when hashed */
    off_t size;
    uint64_t h[2];
} file_hash;

/* One record per slot and argument hash: the files the result depended on. */
typedef struct record {
    char *slot;
    uint64_t args;
    gen_key absent; /* the set of paths that were missing (cache.h) */
    char *deps; /* one path a line */
    bool fresh; /* recorded by this run */
} record;

typedef struct record_list {
    record *items;
    size_t count, cap;
} record_list;

struct gen_cache {
    char *dir;
    char *path_buf;
    file_hash *files; /* contents hashed once per run */
    size_t nfiles, cap;
    record_list records; /* the index as loaded, updated by this run */
    size_t next_record;  /* where find_record starts */
    bool records_dirty;
};

static void record_free(record *r)
{
    free(r->slot);
    free(r->deps);
}

static void records_free(record_list *l)
{
    for (size_t i = 0; i < l->count; i++)
        record_free(&l->items[i]);
    free(l->items);
    *l = (record_list){0};
}

static char *index_path(const gen_cache *c)
{
    return xasprintf("%s/records.idx", c->dir);
}

/* "absent <16 hex><16 hex>", as save_records writes it. */
static bool parse_absent(const char *line, size_t n, gen_key *out)
{
    if (n != 7 + 32 || strncmp(line, "absent ", 7))
        return false;
    for (size_t lane = 0; lane < 2; lane++) {
        uint64_t v = 0;
        for (size_t i = 0; i < 16; i++) {
            char ch = line[7 + lane * 16 + i];
            int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
            if (d < 0)
                return false;
            v = v << 4 | (uint64_t)d;
        }
        out->h[lane] = v;
    }
    return true;
}

/* Index format: for each record, "slot <name>\nargs <hex>\nabsent <hex><hex>\n",
 * its dependency paths one a line, then ".\n". A torn index loses records
 * (misses), never yields a wrong key; a record without its absent line (an
 * older stencilgen's) is dropped. */
static void load_records(const char *path, record_list *out)
{
    uint8_t *data;
    size_t size;
    if (!read_file(path, &data, &size))
        return;
    char *text = (char *)data;
    for (char *p = text; p < text + size;) {
        char *end = strstr(p, "\n.\n");
        char *nl = strchr(p, '\n');
        char *args_end = nl ? strchr(nl + 1, '\n') : NULL;
        /* strtoull, not sscanf: glibc's sscanf measures the whole rest of
         * the index first, which made loading it quadratic (a tenth of a
         * no-op run at 300 ops). */
        char *hex_end = NULL;
        unsigned long long args =
            nl && !strncmp(nl + 1, "args ", 5) ? strtoull(nl + 6, &hex_end, 16) : 0;
        if (strncmp(p, "slot ", 5) || !end || !args_end || args_end > end || !hex_end ||
            hex_end == nl + 6 || hex_end != args_end)
            break;
        char *absent_end = strchr(args_end + 1, '\n');
        gen_key absent;
        if (!absent_end || absent_end > end ||
            !parse_absent(args_end + 1, (size_t)(absent_end - args_end - 1), &absent)) {
            p = end + 3;
            continue;
        }
        record r = {xstrndup(p + 5, (size_t)(nl - p - 5)), args, absent,
                    xstrndup(absent_end + 1, (size_t)(end - absent_end)), false};
        ARRAY_PUSH(out->items, out->count, out->cap, r);
        p = end + 3;
    }
    free(data);
}

static bool same_record(const record *a, const record *b)
{
    return a->args == b->args && !strcmp(a->slot, b->slot);
}

/* ---- record tables: a record's place by its slot (and args), so that
 * saving an index of n records takes time linear in n, not n * n. */

typedef struct record_table {
    size_t *at;   /* index + 1 into the list; 0: empty */
    size_t mask;  /* size - 1, a power of two at least twice the records */
    bool by_args; /* keyed by slot and args, else by slot alone */
} record_table;

static uint64_t record_hash(const record *r, bool by_args)
{
    uint64_t h = hash64(r->slot, strlen(r->slot), 0);
    return by_args ? hash64(&r->args, sizeof r->args, h) : h;
}

static record_table table_new(size_t n, bool by_args)
{
    size_t size = 16;
    while (size < 2 * n)
        size *= 2;
    return (record_table){xcalloc(size, sizeof(size_t)), size - 1, by_args};
}

/* The cell of `r` in `t` over `items`: its own, or the empty one it would take. */
static size_t *table_cell(const record_table *t, const record *items, const record *r)
{
    for (size_t i = record_hash(r, t->by_args) & t->mask;; i = (i + 1) & t->mask) {
        size_t *cell = &t->at[i];
        const record *o = *cell ? &items[*cell - 1] : NULL;
        if (!o || (!strcmp(o->slot, r->slot) && (!t->by_args || o->args == r->args)))
            return cell;
    }
}

/* Keep the last RECORDS_PER_SLOT records of each slot (the list is oldest
 * first): counted from the newest, each slot's count in a table. */
static void trim_slots(record_list *l)
{
    record_table t = table_new(l->count, false);
    size_t *seen = xcalloc(l->count ? l->count : 1, sizeof *seen); /* per first-seen record */
    bool *keep = xcalloc(l->count ? l->count : 1, sizeof *keep);
    for (size_t i = l->count; i-- > 0;) {
        size_t *cell = table_cell(&t, l->items, &l->items[i]);
        if (!*cell)
            *cell = i + 1;
        keep[i] = seen[*cell - 1]++ < RECORDS_PER_SLOT;
    }
    size_t kept = 0;
    for (size_t i = 0; i < l->count; i++) {
        if (keep[i])
            l->items[kept++] = l->items[i];
        else
            record_free(&l->items[i]);
    }
    l->count = kept;
    free(keep);
    free(seen);
    free(t.at);
}

/* The index on disk is the truth for every record this run did not make:
 * concurrent runs' records are kept, and this run's own come last (newest). */
static void save_records(gen_cache *c)
{
    if (!c->records_dirty || !mkdir_p(c->dir))
        return;
    char *lock_path = xasprintf("%s/records.lock", c->dir);
    int lock = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    free(lock_path);
    if (lock >= 0)
        flock(lock, LOCK_EX); /* without the lock, merging is still safe, only lossier */
    char *path = index_path(c);
    record_list merged = {0};
    load_records(path, &merged);
    size_t kept = 0;
    record_table fresh = table_new(c->records.count, true); /* this run's own records */
    for (size_t j = 0; j < c->records.count; j++)
        if (c->records.items[j].fresh)
            *table_cell(&fresh, c->records.items, &c->records.items[j]) = j + 1;
    for (size_t i = 0; i < merged.count; i++) {
        bool replaced = *table_cell(&fresh, c->records.items, &merged.items[i]) != 0;
        if (replaced)
            record_free(&merged.items[i]);
        else
            merged.items[kept++] = merged.items[i];
    }
    merged.count = kept;
    free(fresh.at);
    for (size_t j = 0; j < c->records.count; j++) {
        if (c->records.items[j].fresh) { /* moved into `merged` */
            ARRAY_PUSH(merged.items, merged.count, merged.cap, c->records.items[j]);
            c->records.items[j] = (record){0};
        }
    }
    trim_slots(&merged);
    strbuf sb = {0};
    for (size_t i = 0; i < merged.count; i++)
        sb_printf(&sb, "slot %s\nargs %llx\nabsent %016llx%016llx\n%s.\n", merged.items[i].slot,
                  (unsigned long long)merged.items[i].args,
                  (unsigned long long)merged.items[i].absent.h[0],
                  (unsigned long long)merged.items[i].absent.h[1], merged.items[i].deps);
    write_file_atomic(path, sb.data ? sb.data : "", sb.len);
    sb_free(&sb);
    free(path);
    records_free(&merged);
    if (lock >= 0)
        close(lock);
}

/* Runs look slots up in the order they recorded them: searching on from the
 * last hit finds the next one at once instead of after hundreds of strcmps. */
static record *find_record(gen_cache *c, const char *slot, uint64_t args)
{
    record want = {(char *)slot, args, {{0, 0}}, NULL, false};
    for (size_t k = 0; k < c->records.count; k++) {
        size_t i = (c->next_record + k) % c->records.count;
        if (same_record(&c->records.items[i], &want)) {
            c->next_record = i + 1;
            return &c->records.items[i];
        }
    }
    return NULL;
}

gen_cache *cache_open(const char *dir)
{
    gen_cache *c = xcalloc(1, sizeof *c);
    c->dir = xstrdup(dir);
    char *path = index_path(c);
    load_records(path, &c->records);
    free(path);
    return c;
}

void cache_close(gen_cache *c)
{
    if (!c)
        return;
    save_records(c);
    records_free(&c->records);
    for (size_t i = 0; i < c->nfiles; i++)
        free(c->files[i].path);
    free(c->files);
    free(c->path_buf);
    free(c->dir);
    free(c);
}

void cache_now(struct timespec *ts)
{
    clock_gettime(CLOCK_REALTIME_COARSE, ts);
}

/* A 128-bit key: two 64-bit lanes of one pass. */
static void mix(uint64_t h[2], const void *p, size_t n)
{
    hash128(p, n, h);
}

uint64_t cache_hash_args(char *const *argv, const char *const *skip_next)
{
    uint64_t h = 0;
    for (char *const *a = argv; *a; a++) {
        h = hash64(*a, strlen(*a) + 1, h);
        for (const char *const *s = skip_next; *s && a[1]; s++) {
            if (!strcmp(*a, *s)) {
                a++;
                break;
            }
        }
    }
    return h;
}

static const file_hash *hash_file(gen_cache *c, const char *path)
{
    for (size_t i = 0; i < c->nfiles; i++)
        if (!strcmp(c->files[i].path, path))
            return &c->files[i];
    file_hash f = {xstrdup(path), false, false, {0, 0}, 0, {1, 2}};
    struct stat st;
    uint8_t *data;
    size_t size;
    /* stat first: a write racing with the read leaves a later mtime. */
    if (stat(path, &st) == 0 && read_file(path, &data, &size)) {
        mix(f.h, data, size);
        f.positional = text_mentions_position((const char *)data, size);
        f.mtime = st.st_mtim;
        f.size = st.st_size;
        f.ok = true;
        free(data);
    }
    ARRAY_PUSH(c->files, c->nfiles, c->cap, f);
    return &c->files[c->nfiles - 1];
}

static const char *cache_path(gen_cache *c, const gen_key *key, const char *kind)
{
    free(c->path_buf);
    c->path_buf = xasprintf("%s/blobs/%016llx%016llx.%s", c->dir, (unsigned long long)key->h[0],
                            (unsigned long long)key->h[1], kind);
    return c->path_buf;
}

static bool modified_since(const struct timespec *mtime, const struct timespec *since)
{
    return mtime->tv_sec > since->tv_sec ||
           (mtime->tv_sec == since->tv_sec && mtime->tv_nsec >= since->tv_nsec);
}

/* Whether the file is still the one hashed, unchanged since before `since`:
 * then the work that started at `since` read exactly the hashed bytes. (Hashes
 * are kept for the whole run, so a file edited after it was hashed, even
 * before the work started, must not be recorded by its old hash.) */
static bool stable_since(const file_hash *f, const struct timespec *since)
{
    struct stat st;
    return stat(f->path, &st) == 0 && st.st_size == f->size &&
           st.st_mtim.tv_sec == f->mtime.tv_sec && st.st_mtim.tv_nsec == f->mtime.tv_nsec &&
           !modified_since(&f->mtime, since);
}

/* The key of `args` and the files' names and contents; *positional: whether
 * one of them mentions a source position (text_mentions_position). */
static bool key_of(gen_cache *c, uint64_t args, char *const *deps, size_t n,
                   const struct timespec *since, gen_key *key, bool *positional)
{
    *positional = false;
    key->h[0] = args;
    key->h[1] = ~args;
    for (size_t i = 0; i < n; i++) {
        const file_hash *f = hash_file(c, deps[i]);
        if (!f->ok || (since && !stable_since(f, since)))
            return false;
        *positional |= f->positional;
        mix(key->h, deps[i], strlen(deps[i]) + 1);
        mix(key->h, f->h, sizeof f->h);
    }
    return true;
}

/* Split a record's dependency lines in place. */
static char **split_deps(char *text, size_t *n)
{
    char **deps = NULL;
    size_t cap = 0;
    *n = 0;
    for (char *line = text, *nl; (nl = strchr(line, '\n')); line = nl + 1) {
        *nl = '\0';
        ARRAY_PUSH(deps, *n, cap, line);
    }
    return deps;
}

bool cache_key_for(gen_cache *c, const char *slot, uint64_t args, gen_key *key, gen_key *absent,
                   bool *positional)
{
    const record *r = find_record(c, slot, args);
    if (!r)
        return false;
    *absent = r->absent;
    char *text = xstrdup(r->deps);
    size_t n;
    char **deps = split_deps(text, &n);
    bool ok = key_of(c, args, deps, n, NULL, key, positional);
    free(deps);
    free(text);
    return ok;
}

bool cache_record(gen_cache *c, const char *slot, uint64_t args, char *const *deps, size_t n,
                  const gen_key *absent, const struct timespec *since, gen_key *key,
                  bool *positional)
{
    if (!key_of(c, args, deps, n, since, key, positional))
        return false;
    strbuf sb = {0};
    for (size_t i = 0; i < n; i++)
        sb_printf(&sb, "%s\n", deps[i]);
    record nr = {xstrdup(slot), args, *absent, sb.data ? sb.data : xstrdup(""), true};
    record *old = find_record(c, slot, args);
    if (old) { /* the newest goes last */
        record_free(old);
        memmove(old, old + 1, (size_t)(c->records.items + c->records.count - old - 1) * sizeof *old);
        c->records.count--;
    }
    ARRAY_PUSH(c->records.items, c->records.count, c->records.cap, nr);
    c->records_dirty = true;
    return true;
}

typedef struct trailer {
    uint64_t magic, size, sum;
} trailer;

bool cache_get(gen_cache *c, const gen_key *key, const char *kind, uint8_t **data, size_t *size)
{
    uint8_t *buf;
    size_t n;
    if (!read_file(cache_path(c, key, kind), &buf, &n))
        return false;
    trailer t;
    if (n < sizeof t) {
        free(buf);
        return false;
    }
    memcpy(&t, buf + n - sizeof t, sizeof t);
    n -= sizeof t;
    if (t.magic != TRAILER_MAGIC || t.size != n || t.sum != hash64(buf, n, key->h[0])) {
        free(buf);
        return false;
    }
    *data = buf;
    *size = n;
    return true;
}

/* Written to a temporary and renamed: a reader (this run or another sharing
 * the directory) sees the old entry or the new one, never half of one. */
bool cache_put(gen_cache *c, const gen_key *key, const char *kind, const void *data, size_t size)
{
    trailer t = {TRAILER_MAGIC, size, hash64(data, size, key->h[0])};
    strbuf sb = {0};
    sb_putn(&sb, data, size);
    sb_putn(&sb, &t, sizeof t);
    const char *path = cache_path(c, key, kind);
    char *dir = path_dirname(path);
    bool ok = write_file_atomic(path, sb.data, sb.len) ||
              (mkdir_p(dir) && write_file_atomic(path, sb.data, sb.len));
    free(dir);
    sb_free(&sb);
    return ok;
}
