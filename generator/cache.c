/* cache.c - see cache.h. Files under DIR: records.idx (every slot's argument
 * hash and dependency list, read once and written once per run) and
 * blobs/<key>.<kind> (a blob followed by a 24-byte trailer: magic, size,
 * checksum). */
#include "cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define TRAILER_MAGIC 0x31454843474753ull /* "SGGCHE1" */

typedef struct file_hash {
    char *path;
    bool ok;
    uint64_t h[2];
} file_hash;

/* One record per slot: "args <hex>" then the dependency paths, one a line. */
typedef struct record {
    char *slot;
    char *text;
} record;

struct sg_cache {
    char *dir;
    char *path_buf;
    file_hash *files; /* contents hashed once per run */
    size_t nfiles, cap;
    record *records;  /* the index, loaded once and saved once */
    size_t nrecords, records_cap;
    size_t next_record; /* where find_record starts */
    bool records_dirty;
};

static char *index_path(const sg_cache *c)
{
    return xasprintf("%s/records.idx", c->dir);
}

/* Index format: for each record, "slot <name>\n" then its text, then "\n.\n".
 * A torn index loses records (misses), never yields a wrong key. */
static void load_records(sg_cache *c)
{
    char *path = index_path(c);
    uint8_t *data;
    size_t size;
    bool ok = read_file(path, &data, &size);
    free(path);
    if (!ok)
        return;
    char *text = (char *)data;
    for (char *p = text; p < text + size;) {
        char *end = strstr(p, "\n.\n");
        if (strncmp(p, "slot ", 5) || !end)
            break;
        char *nl = strchr(p, '\n');
        record r = {xstrndup(p + 5, (size_t)(nl - p - 5)), xstrndup(nl + 1, (size_t)(end - nl))};
        ARRAY_PUSH(c->records, c->nrecords, c->records_cap, r);
        p = end + 3;
    }
    free(data);
}

static void save_records(sg_cache *c)
{
    if (!c->records_dirty)
        return;
    strbuf sb = {0};
    for (size_t i = 0; i < c->nrecords; i++)
        sb_printf(&sb, "slot %s\n%s.\n", c->records[i].slot, c->records[i].text);
    char *path = index_path(c);
    if (mkdir_p(c->dir))
        write_file_atomic(path, sb.data ? sb.data : "", sb.len);
    free(path);
    sb_free(&sb);
}

/* Runs look slots up in the order they recorded them: searching on from the
 * last hit finds the next one at once instead of after hundreds of strcmps. */
static record *find_record(sg_cache *c, const char *slot)
{
    for (size_t k = 0; k < c->nrecords; k++) {
        size_t i = (c->next_record + k) % c->nrecords;
        if (!strcmp(c->records[i].slot, slot)) {
            c->next_record = i + 1;
            return &c->records[i];
        }
    }
    return NULL;
}

sg_cache *cache_open(const char *dir)
{
    sg_cache *c = xcalloc(1, sizeof *c);
    c->dir = xstrdup(dir);
    load_records(c);
    return c;
}

void cache_close(sg_cache *c)
{
    if (!c)
        return;
    save_records(c);
    for (size_t i = 0; i < c->nrecords; i++) {
        free(c->records[i].slot);
        free(c->records[i].text);
    }
    free(c->records);
    for (size_t i = 0; i < c->nfiles; i++)
        free(c->files[i].path);
    free(c->files);
    free(c->path_buf);
    free(c->dir);
    free(c);
}

/* Two independent 64-bit FNV-1a streams make a 128-bit key. */
static void mix(uint64_t h[2], const void *p, size_t n)
{
    h[0] = hash64(p, n, h[0]);
    h[1] = hash64(p, n, h[1] ^ 0x9e3779b97f4a7c15ull);
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

static const file_hash *hash_file(sg_cache *c, const char *path)
{
    for (size_t i = 0; i < c->nfiles; i++)
        if (!strcmp(c->files[i].path, path))
            return &c->files[i];
    file_hash f = {xstrdup(path), false, {1, 2}};
    uint8_t *data;
    size_t size;
    if (read_file(path, &data, &size)) {
        mix(f.h, data, size);
        f.ok = true;
        free(data);
    }
    ARRAY_PUSH(c->files, c->nfiles, c->cap, f);
    return &c->files[c->nfiles - 1];
}

const char *cache_path(sg_cache *c, const sg_key *key, const char *kind)
{
    free(c->path_buf);
    c->path_buf = xasprintf("%s/blobs/%016llx%016llx.%s", c->dir, (unsigned long long)key->h[0],
                            (unsigned long long)key->h[1], kind);
    return c->path_buf;
}

static bool key_of(sg_cache *c, uint64_t args, char *const *deps, size_t n, sg_key *key)
{
    key->h[0] = args;
    key->h[1] = ~args;
    for (size_t i = 0; i < n; i++) {
        const file_hash *f = hash_file(c, deps[i]);
        if (!f->ok)
            return false;
        mix(key->h, deps[i], strlen(deps[i]) + 1);
        mix(key->h, f->h, sizeof f->h);
    }
    return true;
}

bool cache_key_for(sg_cache *c, const char *slot, uint64_t args, sg_key *key)
{
    const record *r = find_record(c, slot);
    if (!r)
        return false;
    char *text = xstrdup(r->text);
    char **deps = NULL;
    size_t n = 0, cap = 0;
    unsigned long long recorded;
    bool ok = sscanf(text, "args %llx\n", &recorded) == 1 && recorded == args;
    char *line = strchr(text, '\n');
    while (ok && line && line[1]) {
        char *start = line + 1;
        line = strchr(start, '\n');
        if (!line)
            break; /* a damaged record: its last line is incomplete */
        *line = '\0';
        ARRAY_PUSH(deps, n, cap, start);
    }
    ok = ok && line && key_of(c, args, deps, n, key);
    free(deps);
    free(text);
    return ok;
}

bool cache_record(sg_cache *c, const char *slot, uint64_t args, char *const *deps, size_t n,
                  sg_key *key)
{
    if (!key_of(c, args, deps, n, key))
        return false;
    strbuf sb = {0};
    sb_printf(&sb, "args %llx\n", (unsigned long long)args);
    for (size_t i = 0; i < n; i++)
        sb_printf(&sb, "%s\n", deps[i]);
    record *r = find_record(c, slot);
    if (r) {
        free(r->text);
        r->text = sb.data;
    } else {
        record nr = {xstrdup(slot), sb.data};
        ARRAY_PUSH(c->records, c->nrecords, c->records_cap, nr);
    }
    c->records_dirty = true;
    return true;
}

typedef struct trailer {
    uint64_t magic, size, sum;
} trailer;

bool cache_get(sg_cache *c, const sg_key *key, const char *kind, uint8_t **data, size_t *size)
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

bool cache_put(sg_cache *c, const sg_key *key, const char *kind, const void *data, size_t size)
{
    trailer t = {TRAILER_MAGIC, size, hash64(data, size, key->h[0])};
    strbuf sb = {0};
    sb_putn(&sb, data, size);
    sb_putn(&sb, &t, sizeof t);
    /* Not atomic, and need not be: a torn blob fails its checksum. */
    const char *path = cache_path(c, key, kind);
    char *dir = path_dirname(path);
    bool ok = write_file(path, sb.data, sb.len) || (mkdir_p(dir) && write_file(path, sb.data, sb.len));
    free(dir);
    sb_free(&sb);
    return ok;
}
