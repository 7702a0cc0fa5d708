/* cache.c - see cache.h. Files under DIR: records3.idx (every record's slot,
 * argument digest and file list, each distinct list once), records.lock (held
 * while the index is written) and blobs/<key>.<kind> (a blob followed by a
 * 24-byte trailer: magic, size, checksum). records.idx (0.2) and
 * records2.idx (0.3, keys of a 128-bit hash of stencilgen's own) are older
 * indexes: their keys are made differently, so they are left alone, and
 * their blobs, never read again, go first when the cache is over its bound. */
#define _GNU_SOURCE
#include "cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "digest.h"
#include "opunit.h"
#include "util.h"

#define TRAILER_MAGIC 0x31454843474753ull /* "SGGCHE1" */
/* Records kept per slot: enough for a few checkouts or branches sharing a
 * cache, few enough that the index stays small. */
#define RECORDS_PER_SLOT 4
/* Blobs go least recently used first. A blob read is dated now when its date
 * is older than this: each date says when it was last used, to the hour, for
 * one futimens an hour per blob in use. */
#define LRU_RESOLUTION_S 3600
/* An eviction leaves the blobs at most this share of the bound (in 1/10s),
 * so that the next runs add to it for a while without scanning. */
#define EVICT_TO_TENTHS 8

typedef struct file_hash {
    char *path;
    bool ok;
    bool positional; /* mentions a source-position macro */
    struct timespec mtime; /* when hashed */
    off_t size;
    digest d;
} file_hash;

/* A list of files as records name them. Most records share one (a target's
 * ops read the same headers), so each distinct list is kept once, and its
 * files are hashed into a digest once per run (list_digest). */
typedef struct dep_list {
    char *text;      /* one path a line */
    size_t len;
    int state;       /* this run: 0 not yet hashed, 1 digest known, -1 a file is gone */
    gen_key digest;  /* the paths and the contents of their files */
    bool positional; /* a file mentions a source position */
} dep_list;

typedef struct dep_lists {
    dep_list *items;
    size_t count, cap;
    hash_index index; /* of items, by their text */
} dep_lists;

/* One record per slot and argument digest: the files the result depended on. */
typedef struct record {
    char *slot;
    gen_key args;
    gen_key absent; /* the set of paths that were missing (cache.h) */
    size_t deps;    /* its list in gen_cache.lists */
    bool fresh;     /* recorded by this run */
} record;

typedef struct record_list {
    record *items;
    size_t count, cap;
} record_list;

/* The index file as this run loaded it: what appending to it needs. */
typedef struct index_state {
    struct stat st; /* before it was read */
    size_t base;    /* bytes of its first part, written whole by a merge */
    size_t parts;   /* that part and those appended since */
    bool whole;     /* every byte of it read and parsed */
} index_state;

struct gen_cache {
    char *dir;
    char *path_buf;
    uint64_t max_size;   /* the bound on the blobs' bytes (cache_set_max_size), 0: none */
    uint64_t put_bytes;  /* blob bytes this run wrote */
    struct timespec opened;
    file_hash *files; /* contents hashed once per run */
    size_t nfiles, cap;
    dep_lists lists;     /* every record's file list, each distinct one once */
    record_list records; /* the index as loaded, updated by this run */
    index_state index;
    size_t next_record;  /* where find_record starts */
    bool records_dirty;
};

static void record_free(record *r)
{
    free(r->slot);
}

static void dep_lists_free(dep_lists *l)
{
    for (size_t i = 0; i < l->count; i++)
        free(l->items[i].text);
    free(l->items);
    hash_index_free(&l->index);
    *l = (dep_lists){0};
}

/* The index of the list `text` (its `len` bytes), added if new. */
static size_t intern_deps(dep_lists *l, const char *text, size_t len)
{
    uint64_t h = hash64(text, len, len);
    hash_slot *s = hash_index_first(&l->index, h);
    for (; s->item; s = hash_index_next(&l->index, s)) {
        const dep_list *d = &l->items[s->item - 1];
        if (s->hash == h && d->len == len && !memcmp(d->text, text, len))
            return s->item - 1;
    }
    dep_list d = {xstrndup(text, len), len, 0, {{0, 0}}, false};
    ARRAY_PUSH(l->items, l->count, l->cap, d);
    hash_index_put(&l->index, s, h, l->count - 1);
    return l->count - 1;
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
    return xasprintf("%s/records3.idx", c->dir);
}

/* The decimal number at *p up to `stop`, which *p then points past. */
static bool parse_count(const char **p, const char *end, char stop, size_t *out)
{
    size_t v = 0;
    const char *q = *p;
    for (; q < end && *q >= '0' && *q <= '9' && q - *p < 18; q++)
        v = v * 10 + (size_t)(*q - '0');
    if (q == *p || q >= end || *q != stop)
        return false;
    *p = q + 1;
    *out = v;
    return true;
}

/* "R <args: 64 hex> <absent: 64 hex> <list> <slot>", as save_records writes it. */
static bool parse_record(const char *line, const char *end, const size_t *lists, size_t nlists,
                         record *r)
{
    const char *p = line + 2;
    gen_key args, absent;
    size_t list;
    if (end - line < 2 + 2 * (DIGEST_HEX + 1) + 1 || !digest_from_hex(p, &args) ||
        p[DIGEST_HEX] != ' ' || !digest_from_hex(p + DIGEST_HEX + 1, &absent) ||
        p[2 * DIGEST_HEX + 1] != ' ')
        return false;
    p += 2 * (DIGEST_HEX + 1);
    if (!parse_count(&p, end, ' ', &list) || list >= nlists || p >= end ||
        memchr(p, '\0', (size_t)(end - p)))
        return false;
    *r = (record){xstrndup(p, (size_t)(end - p)), args, absent, lists[list], false};
    return true;
}

/* Index format: a file list is "L <n>\n", its paths one a line, then ".\n",
 * numbered from 0 in the order written and written before the first record
 * that names it; a record is one line (parse_record). A run that only added
 * records may append them as a part of its own, "S <part>\n" (parts numbered
 * from 1) followed by lists and records numbered as above: its records are
 * newer than the same keys' before it (keep_newest). A torn or damaged index
 * loses the records from there on (misses), never yields a wrong key. */
static void keep_newest(record_list *l, size_t first);

static void load_records(const char *path, record_list *out, dep_lists *lists, index_state *st)
{
    uint8_t *data;
    size_t size;
    *st = (index_state){.parts = 1};
    if (stat(path, &st->st) != 0 || !read_file(path, &data, &size))
        return;
    const char *p = (const char *)data, *end = p + size;
    size_t *local = NULL, nlocal = 0, cap = 0; /* list number -> lists index */
    size_t first_appended = 0;
    st->base = size;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl || nl - p < 2 || p[1] != ' ')
            break;
        if (p[0] == 'L') {
            const char *q = p + 2, *close = memmem(nl, (size_t)(end - nl), "\n.\n", 3);
            size_t n;
            if (!close || !parse_count(&q, nl + 1, '\n', &n) || n != nlocal)
                break;
            ARRAY_PUSH(local, nlocal, cap, intern_deps(lists, nl + 1, (size_t)(close - nl)));
            p = close + 3;
        } else if (p[0] == 'R') {
            record r;
            if (!parse_record(p, nl, local, nlocal, &r))
                break;
            ARRAY_PUSH(out->items, out->count, out->cap, r);
            p = nl + 1;
        } else if (p[0] == 'S') {
            const char *q = p + 2;
            size_t part;
            if (!parse_count(&q, nl + 1, '\n', &part) || part != st->parts)
                break;
            if (st->parts++ == 1) {
                st->base = (size_t)(p - (const char *)data);
                first_appended = out->count;
            }
            nlocal = 0; /* a part numbers its lists afresh */
            p = nl + 1;
        } else {
            break;
        }
    }
    st->whole = p == end && (off_t)size == st->st.st_size;
    if (st->parts > 1)
        keep_newest(out, first_appended);
    free(local);
    free(data);
}

static bool same_record(const record *a, const record *b)
{
    return digest_equal(&a->args, &b->args) && !strcmp(a->slot, b->slot);
}

/* ---- record indexes: a record's place by its slot (and args), so that
 * saving an index of n records takes time linear in n, not n * n. */

/* In `x` over `items`, keyed by slot (and args when by_args): the slot of
 * the first record with r's key, or the empty one where r goes (hash *h). */
static hash_slot *record_slot(hash_index *x, const record *items, const record *r, bool by_args,
                              uint64_t *h)
{
    *h = hash64(r->slot, strlen(r->slot), 0);
    if (by_args)
        *h ^= digest_word(&r->args);
    hash_slot *s = hash_index_first(x, *h);
    for (; s->item; s = hash_index_next(x, s)) {
        const record *o = &items[s->item - 1];
        if (s->hash == *h && !strcmp(o->slot, r->slot) &&
            (!by_args || digest_equal(&o->args, &r->args)))
            break;
    }
    return s;
}

/* The record placed first in `x` with items[i]'s key: i itself, placed now, if none. */
static size_t record_place(hash_index *x, const record *items, size_t i, bool by_args)
{
    uint64_t h;
    hash_slot *s = record_slot(x, items, &items[i], by_args, &h);
    if (!s->item)
        hash_index_put(x, s, h, i);
    return s->item - 1;
}

/* Keep the records of l marked in `keep`, in their order. */
static void keep_only(record_list *l, const bool *keep)
{
    size_t kept = 0;
    for (size_t i = 0; i < l->count; i++) {
        if (keep[i])
            l->items[kept++] = l->items[i];
        else
            record_free(&l->items[i]);
    }
    l->count = kept;
}

/* Keep the last RECORDS_PER_SLOT records of each slot (the list is oldest
 * first): counted from the newest, each slot's count in an index. */
static void trim_slots(record_list *l)
{
    hash_index x = {0};
    size_t *seen = xcalloc(l->count ? l->count : 1, sizeof *seen); /* per first-seen record */
    bool *keep = xcalloc(l->count ? l->count : 1, sizeof *keep);
    for (size_t i = l->count; i-- > 0;)
        keep[i] = seen[record_place(&x, l->items, i, false)]++ < RECORDS_PER_SLOT;
    keep_only(l, keep);
    free(keep);
    free(seen);
    hash_index_free(&x);
}

/* The records of appended parts (from `first` on) replace those of their
 * keys (slot and args) before them; a merge wrote the first part's records
 * once a key. Only the few appended are indexed. */
static void keep_newest(record_list *l, size_t first)
{
    hash_index x = {0};
    bool *keep = xcalloc(l->count ? l->count : 1, sizeof *keep);
    for (size_t i = l->count; i-- > first;)
        keep[i] = record_place(&x, l->items, i, true) == i;
    for (size_t i = 0; i < first; i++) {
        uint64_t h;
        keep[i] = !record_slot(&x, l->items, &l->items[i], true, &h)->item;
    }
    keep_only(l, keep);
    free(keep);
    hash_index_free(&x);
}

/* The index text of `l` (load_records reads it). */
static void write_index(strbuf *sb, const record_list *l, const dep_lists *lists)
{
    size_t *number = xcalloc(lists->count ? lists->count : 1, sizeof *number); /* n + 1 */
    size_t written = 0;
    for (size_t i = 0; i < l->count; i++) {
        const record *r = &l->items[i];
        if (!number[r->deps]) {
            number[r->deps] = ++written;
            sb_printf(sb, "L %zu\n", written - 1);
            sb_putn(sb, lists->items[r->deps].text, lists->items[r->deps].len);
            sb_puts(sb, ".\n");
        }
        char args[DIGEST_HEX + 1], absent[DIGEST_HEX + 1];
        digest_hex(&r->args, args);
        digest_hex(&r->absent, absent);
        sb_printf(sb, "R %s %s %zu %s\n", args, absent, number[r->deps] - 1, r->slot);
    }
    free(number);
}

/* Appended parts may grow the index by this share of its first part and
 * this many bytes, in at most this many parts, before a merge writes it whole
 * again: every run reads them, and a no-op reads nothing else. */
#define APPENDED_SHARE 8 /* an eighth */
#define APPENDED_BYTES 65536
#define MAX_INDEX_PARTS 64

/* This run's records appended to the index as a part of their own, when the
 * file is the one this run loaded whole (no other run wrote it since) and its
 * appended parts are still small: rewriting the whole index (800 KB for
 * CPython's stencils on 5 targets) cost an edit 8-10 ms. A failed or torn
 * append costs the records from there on (misses) until the next merge. */
static bool append_records(gen_cache *c, const char *path)
{
    const index_state *s = &c->index;
    struct stat now;
    if (!s->whole || !s->base || s->parts >= MAX_INDEX_PARTS || stat(path, &now) != 0 ||
        now.st_dev != s->st.st_dev || now.st_ino != s->st.st_ino ||
        now.st_size != s->st.st_size || now.st_mtim.tv_sec != s->st.st_mtim.tv_sec ||
        now.st_mtim.tv_nsec != s->st.st_mtim.tv_nsec)
        return false;
    record_list fresh = {0}; /* this run's records, borrowed */
    for (size_t j = 0; j < c->records.count; j++)
        if (c->records.items[j].fresh)
            ARRAY_PUSH(fresh.items, fresh.count, fresh.cap, c->records.items[j]);
    strbuf sb = {0};
    sb_printf(&sb, "S %zu\n", s->parts);
    write_index(&sb, &fresh, &c->lists);
    free(fresh.items);
    bool ok = (size_t)now.st_size - s->base + sb.len <= s->base / APPENDED_SHARE + APPENDED_BYTES;
    int fd = ok ? open(path, O_WRONLY | O_APPEND | O_CLOEXEC) : -1;
    ok = fd >= 0 && write_all(fd, sb.data, sb.len);
    if (fd >= 0 && close(fd) != 0)
        ok = false;
    sb_free(&sb);
    return ok;
}

/* The index rewritten whole. The one on disk is the truth for every record
 * this run did not make: concurrent runs' records are kept, and this run's
 * own come last (newest). */
static void merge_records(gen_cache *c, const char *path)
{
    record_list merged = {0};
    index_state ignored;
    load_records(path, &merged, &c->lists, &ignored);
    size_t kept = 0;
    hash_index fresh = {0}; /* this run's own records */
    for (size_t j = 0; j < c->records.count; j++)
        if (c->records.items[j].fresh)
            record_place(&fresh, c->records.items, j, true);
    for (size_t i = 0; i < merged.count; i++) {
        uint64_t h;
        if (record_slot(&fresh, c->records.items, &merged.items[i], true, &h)->item) /* replaced */
            record_free(&merged.items[i]);
        else
            merged.items[kept++] = merged.items[i];
    }
    merged.count = kept;
    hash_index_free(&fresh);
    for (size_t j = 0; j < c->records.count; j++) {
        if (c->records.items[j].fresh) { /* moved into `merged` */
            ARRAY_PUSH(merged.items, merged.count, merged.cap, c->records.items[j]);
            c->records.items[j] = (record){0};
        }
    }
    trim_slots(&merged);
    strbuf sb = {0};
    write_index(&sb, &merged, &c->lists);
    write_file_atomic(path, sb.data ? sb.data : "", sb.len);
    sb_free(&sb);
    records_free(&merged);
}

/* ---- the bound on the cache's size
 *
 * DIR/size holds the blobs' bytes as the last scan found them plus what runs
 * wrote since (an overwritten blob counts twice: an overestimate, which only
 * brings the next scan forward). Past the bound a scan measures the blobs and
 * removes the least recently used until they take EVICT_TO_TENTHS of it; this
 * run's own are kept (it may still read them, and a concurrent run that lost
 * one only misses). Under records.lock, so runs closing at once take turns. */

static bool modified_since(const struct timespec *mtime, const struct timespec *since)
{
    return mtime->tv_sec > since->tv_sec ||
           (mtime->tv_sec == since->tv_sec && mtime->tv_nsec >= since->tv_nsec);
}

static int lock_cache(const char *dir)
{
    char *lock_path = xasprintf("%s/records.lock", dir);
    int lock = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    free(lock_path);
    if (lock >= 0)
        flock(lock, LOCK_EX);
    return lock;
}

typedef struct blob_file {
    char *name;
    uint64_t size;
    struct timespec mtime;
} blob_file;

static int by_mtime(const void *a, const void *b)
{
    const blob_file *x = a, *y = b;
    if (x->mtime.tv_sec != y->mtime.tv_sec)
        return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
    if (x->mtime.tv_nsec != y->mtime.tv_nsec)
        return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* The blobs under DIR/blobs (temporaries of a write in progress left out). */
static blob_file *scan_blobs(const char *dir, size_t *n, uint64_t *bytes)
{
    char *path = xasprintf("%s/blobs", dir);
    DIR *d = opendir(path);
    blob_file *files = NULL;
    size_t cap = 0;
    *n = 0;
    *bytes = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        struct stat st;
        if (e->d_name[0] == '.' || strstr(e->d_name, ".tmp") ||
            fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
            continue;
        blob_file f = {xstrdup(e->d_name), (uint64_t)st.st_size, st.st_mtim};
        ARRAY_PUSH(files, *n, cap, f);
        *bytes += f.size;
    }
    if (d)
        closedir(d);
    free(path);
    return files;
}

static void free_blob_files(blob_file *files, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(files[i].name);
    free(files);
}

/* The bytes DIR/size says, or UINT64_MAX when it says nothing (a cache older
 * than the bound, a damaged file): then they are measured. */
static uint64_t read_size_file(const char *dir)
{
    char *path = xasprintf("%s/size", dir);
    uint8_t *text;
    size_t n;
    unsigned long long v = UINT64_MAX;
    if (read_file(path, &text, &n)) {
        if (sscanf((const char *)text, "stencilgen cache size %llu", &v) != 1)
            v = UINT64_MAX;
        free(text);
    }
    free(path);
    return (uint64_t)v;
}

static void write_size_file(const char *dir, uint64_t bytes)
{
    char *path = xasprintf("%s/size", dir);
    char text[64];
    int n = snprintf(text, sizeof text, "stencilgen cache size %llu\n", (unsigned long long)bytes);
    write_file_atomic(path, text, (size_t)n);
    free(path);
}

/* Remove the least recently used blobs, none dated at or after `keep`, until
 * they take at most `target` bytes; returns the bytes left (*before, unless
 * NULL: the bytes there were). */
static uint64_t evict(const char *dir, uint64_t target, const struct timespec *keep,
                      uint64_t *before)
{
    size_t n;
    uint64_t bytes;
    blob_file *files = scan_blobs(dir, &n, &bytes);
    if (before)
        *before = bytes;
    qsort(files, n, sizeof *files, by_mtime);
    char *blobs = xasprintf("%s/blobs", dir);
    for (size_t i = 0; i < n && bytes > target; i++) {
        if (modified_since(&files[i].mtime, keep))
            break; /* sorted: the rest are this run's, or newer */
        char *p = path_join(blobs, files[i].name);
        if (unlink(p) == 0)
            bytes -= files[i].size;
        free(p);
    }
    free(blobs);
    free_blob_files(files, n);
    return bytes;
}

static void account(gen_cache *c)
{
    int lock = lock_cache(c->dir);
    uint64_t was = read_size_file(c->dir), now;
    if (was == UINT64_MAX) { /* this run's blobs are among those measured */
        size_t n;
        blob_file *files = scan_blobs(c->dir, &n, &now);
        free_blob_files(files, n);
    } else {
        now = UINT64_MAX - was < c->put_bytes ? UINT64_MAX : was + c->put_bytes;
    }
    if (c->max_size && now > c->max_size)
        now = evict(c->dir, c->max_size / 10 * EVICT_TO_TENTHS, &c->opened, NULL);
    write_size_file(c->dir, now);
    if (lock >= 0)
        close(lock);
}

void cache_set_max_size(gen_cache *c, uint64_t bytes)
{
    c->max_size = bytes;
}

bool cache_parse_size(const char *text, uint64_t *bytes)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (end == text || errno || *text == '-' || *text == '+')
        return false;
    unsigned shift = 0;
    if (*end == 'K' || *end == 'k')
        shift = 10;
    else if (*end == 'M' || *end == 'm')
        shift = 20;
    else if (*end == 'G' || *end == 'g')
        shift = 30;
    if (shift)
        end++;
    if (*end || (shift && v > (UINT64_MAX >> shift)))
        return false;
    *bytes = (uint64_t)v << shift;
    return true;
}

bool cache_stats(const char *dir, gen_cache_stats *s)
{
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return false;
    size_t n;
    blob_file *files = scan_blobs(dir, &n, &s->blob_bytes);
    s->blobs = n;
    s->oldest = s->newest = (struct timespec){0, 0};
    for (size_t i = 0; i < n; i++) {
        if (!i || !modified_since(&files[i].mtime, &s->oldest))
            s->oldest = files[i].mtime;
        if (!i || modified_since(&files[i].mtime, &s->newest))
            s->newest = files[i].mtime;
    }
    free_blob_files(files, n);
    char *index = xasprintf("%s/records3.idx", dir);
    s->index_bytes = stat(index, &st) == 0 ? (uint64_t)st.st_size : 0;
    free(index);
    return true;
}

bool cache_clean(const char *dir, uint64_t *removed)
{
    int lock = lock_cache(dir);
    struct timespec now;
    cache_now(&now);
    now.tv_sec += 1; /* every blob, also one dated this very moment */
    uint64_t before;
    uint64_t left = evict(dir, 0, &now, &before);
    bool ok = left == 0;
    /* This stencilgen's index and the older ones (see the top): nothing is left. */
    static const char *const indexes[] = {"records3.idx", "records2.idx", "records.idx"};
    for (size_t i = 0; i < sizeof indexes / sizeof *indexes; i++) {
        char *index = path_join(dir, indexes[i]);
        ok &= unlink(index) == 0 || errno == ENOENT;
        free(index);
    }
    write_size_file(dir, left);
    *removed = before - left;
    if (lock >= 0)
        close(lock);
    return ok;
}

static void save_records(gen_cache *c)
{
    if (!c->records_dirty || !mkdir_p(c->dir))
        return;
    int lock = lock_cache(c->dir); /* without the lock, merging is still safe, only lossier */
    char *path = index_path(c);
    /* Appending without the lock could interleave with another run's. */
    if (lock < 0 || !append_records(c, path))
        merge_records(c, path);
    free(path);
    if (lock >= 0)
        close(lock);
}

/* Runs look slots up in the order they recorded them: searching on from the
 * last hit finds the next one at once instead of after hundreds of strcmps. */
static record *find_record(gen_cache *c, const char *slot, const gen_key *args)
{
    record want = {(char *)slot, *args, {{0}}, 0, false};
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
    c->max_size = CACHE_DEFAULT_MAX_SIZE;
    cache_now(&c->opened);
    char *path = index_path(c);
    load_records(path, &c->records, &c->lists, &c->index);
    free(path);
    return c;
}

void cache_close(gen_cache *c)
{
    if (!c)
        return;
    save_records(c);
    if (c->put_bytes)
        account(c);
    records_free(&c->records);
    dep_lists_free(&c->lists);
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

gen_key cache_hash_args_from(const gen_key *from, char *const *argv, size_t n,
                             const char *const *skip_next)
{
    digest_ctx h;
    digest_begin(&h);
    digest_add_u64(&h, from != NULL);
    if (from)
        digest_add_digest(&h, from);
    for (size_t i = 0; i < n && argv[i]; i++) {
        digest_add_str(&h, argv[i]);
        for (const char *const *s = skip_next; *s && i + 1 < n && argv[i + 1]; s++) {
            if (!strcmp(argv[i], *s)) {
                i++;
                break;
            }
        }
    }
    return digest_end(&h);
}

gen_key cache_hash_args(char *const *argv, const char *const *skip_next)
{
    return cache_hash_args_from(NULL, argv, SIZE_MAX, skip_next);
}

static const file_hash *hash_file(gen_cache *c, const char *path)
{
    for (size_t i = 0; i < c->nfiles; i++)
        if (!strcmp(c->files[i].path, path))
            return &c->files[i];
    file_hash f = {xstrdup(path), false, false, {0, 0}, 0, {{0}}};
    struct stat st;
    uint8_t *data;
    size_t size;
    /* stat first: a write racing with the read leaves a later mtime. */
    if (stat(path, &st) == 0 && read_file(path, &data, &size)) {
        f.d = digest_of(data, size);
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
    char hex[DIGEST_HEX + 1];
    digest_hex(key, hex);
    c->path_buf = xasprintf("%s/blobs/%s.%s", c->dir, hex, kind);
    return c->path_buf;
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

/* The digest of the files' names and contents; *positional: whether one of
 * them mentions a source position (text_mentions_position). With `since`,
 * false when a file changed at or after it (stable_since). */
static bool digest_files(gen_cache *c, char *const *paths, size_t n, const struct timespec *since,
                         gen_key *digest, bool *positional)
{
    *positional = false;
    digest_ctx h;
    digest_begin(&h);
    digest_add_u64(&h, n);
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++) {
        const file_hash *f = hash_file(c, paths[i]);
        ok = f->ok && (!since || stable_since(f, since));
        *positional |= f->positional;
        digest_add_str(&h, paths[i]);
        digest_add_digest(&h, &f->d);
    }
    *digest = digest_end(&h);
    return ok;
}

/* The list's digest, worked out on its first use in this run. */
static const dep_list *list_digest(gen_cache *c, size_t index)
{
    dep_list *d = &c->lists.items[index];
    if (d->state)
        return d;
    char *text = xstrndup(d->text, d->len);
    char **paths = NULL;
    size_t n = 0, cap = 0;
    for (char *line = text, *nl; (nl = strchr(line, '\n')); line = nl + 1) {
        *nl = '\0';
        ARRAY_PUSH(paths, n, cap, line);
    }
    d->state = digest_files(c, paths, n, NULL, &d->digest, &d->positional) ? 1 : -1;
    free(paths);
    free(text);
    return d;
}

/* A key: the arguments' digest and the digest of the files. */
static void key_from(const gen_key *args, const gen_key *files, gen_key *key)
{
    digest_ctx h;
    digest_begin(&h);
    digest_add_digest(&h, args);
    digest_add_digest(&h, files);
    *key = digest_end(&h);
}

bool cache_key_for(gen_cache *c, const char *slot, const gen_key *args, gen_key *key,
                   gen_key *absent, bool *positional)
{
    const record *r = find_record(c, slot, args);
    if (!r)
        return false;
    *absent = r->absent;
    const dep_list *d = list_digest(c, r->deps);
    if (d->state < 0)
        return false;
    key_from(args, &d->digest, key);
    *positional = d->positional;
    return true;
}

bool cache_record(gen_cache *c, const char *slot, const gen_key *args, char *const *deps, size_t n,
                  const gen_key *absent, const struct timespec *since, gen_key *key,
                  bool *positional)
{
    gen_key digest;
    if (!digest_files(c, deps, n, since, &digest, positional))
        return false;
    key_from(args, &digest, key);
    strbuf sb = {0};
    for (size_t i = 0; i < n; i++)
        sb_printf(&sb, "%s\n", deps[i]);
    record nr = {xstrdup(slot), *args, *absent, intern_deps(&c->lists, sb.data ? sb.data : "", sb.len),
                 true};
    sb_free(&sb);
    record *old = find_record(c, slot, args);
    if (old && old->deps == nr.deps && digest_equal(&old->absent, &nr.absent)) {
        record_free(&nr); /* the index holds it already: nothing to save */
        return true;
    }
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
    struct stat st;
    const char *path = cache_path(c, key, kind);
    if (!read_file_stat(path, &buf, &n, &st))
        return false;
    if (st.st_mtim.tv_sec + LRU_RESOLUTION_S < c->opened.tv_sec)
        utimensat(AT_FDCWD, path, NULL, 0); /* used: the last to go */
    trailer t;
    if (n < sizeof t) {
        free(buf);
        return false;
    }
    memcpy(&t, buf + n - sizeof t, sizeof t);
    n -= sizeof t;
    if (t.magic != TRAILER_MAGIC || t.size != n || t.sum != hash64(buf, n, digest_word(key))) {
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
    trailer t = {TRAILER_MAGIC, size, hash64(data, size, digest_word(key))};
    strbuf sb = {0};
    sb_putn(&sb, data, size);
    sb_putn(&sb, &t, sizeof t);
    const char *path = cache_path(c, key, kind);
    char *dir = path_dirname(path);
    bool ok = write_file_atomic(path, sb.data, sb.len) ||
              (mkdir_p(dir) && write_file_atomic(path, sb.data, sb.len));
    if (ok)
        c->put_bytes += sb.len;
    free(dir);
    sb_free(&sb);
    return ok;
}
