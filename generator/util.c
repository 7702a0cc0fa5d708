/* util.c - see util.h. */
#define _GNU_SOURCE
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void out_of_memory(void)
{
    fputs("stencilgen: error: out of memory\n", stderr);
    exit(3);
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        out_of_memory();
    return p;
}

void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        out_of_memory();
    return p;
}

void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p)
        out_of_memory();
    return p;
}

char *xstrdup(const char *s)
{
    return xstrndup(s, strlen(s));
}

char *xstrndup(const char *s, size_t n)
{
    char *p = xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *xasprintf(const char *fmt, ...)
{
    strbuf sb = {0};
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(&sb, fmt, ap);
    va_end(ap);
    return sb.data;
}

void grow_array(void **items, size_t *cap, size_t need, size_t elem_size)
{
    if (need <= *cap)
        return;
    size_t ncap = *cap ? *cap : 8;
    while (ncap < need) {
        if (ncap > SIZE_MAX / 2 / elem_size)
            out_of_memory();
        ncap *= 2;
    }
    *items = xrealloc(*items, ncap * elem_size);
    *cap = ncap;
}

void sb_reserve(strbuf *sb, size_t extra)
{
    if (extra > SIZE_MAX - sb->len - 1)
        out_of_memory();
    grow_array((void **)&sb->data, &sb->cap, sb->len + extra + 1, 1);
}

char *sb_extend(strbuf *sb, size_t n)
{
    if (sb->cap - sb->len <= n) /* the common case needs no call */
        sb_reserve(sb, n);
    char *at = sb->data + sb->len;
    sb->len += n;
    sb->data[sb->len] = '\0';
    return at;
}

void sb_putn(strbuf *sb, const void *p, size_t n)
{
    memcpy(sb_extend(sb, n), p, n);
}

void sb_put_dec(strbuf *sb, int64_t v)
{
    char digits[24];
    unsigned n = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do
        digits[sizeof digits - ++n] = (char)('0' + u % 10);
    while ((u /= 10));
    if (v < 0)
        digits[sizeof digits - ++n] = '-';
    sb_putn(sb, digits + sizeof digits - n, n);
}

void sb_put_addend(strbuf *sb, int64_t v)
{
    sb_puts(sb, v < 0 ? " - 0x" : " + 0x");
    sb_put_hex(sb, v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v, 1);
}

void sb_putc(strbuf *sb, char c)
{
    sb_putn(sb, &c, 1);
}

void sb_puts(strbuf *sb, const char *s)
{
    sb_putn(sb, s, strlen(s));
}

void sb_cat(strbuf *sb, ...)
{
    va_list ap;
    va_start(ap, sb);
    for (const char *s; (s = va_arg(ap, const char *)) != NULL;)
        sb_puts(sb, s);
    va_end(ap);
}

void sb_put_hex(strbuf *sb, uint64_t v, unsigned min_digits)
{
    char digits[16];
    unsigned n = 0;
    do
        digits[sizeof digits - ++n] = "0123456789abcdef"[v & 15];
    while ((v >>= 4) || n < min_digits);
    sb_putn(sb, digits + sizeof digits - n, n);
}

/* Formats straight into the buffer; a second pass only when it did not fit
 * (headers are built from many small printfs). */
void sb_vprintf(strbuf *sb, const char *fmt, va_list ap)
{
    sb_reserve(sb, 128);
    size_t room = sb->cap - sb->len;
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(sb->data + sb->len, room, fmt, ap2);
    va_end(ap2);
    if (n < 0) {
        sb->data[sb->len] = '\0';
        return;
    }
    if ((size_t)n >= room) {
        sb_reserve(sb, (size_t)n);
        vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap);
    }
    sb->len += (size_t)n;
}

void sb_put_le(strbuf *sb, uint64_t v, unsigned bytes)
{
    uint8_t b[8];
    for (unsigned i = 0; i < bytes; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    sb_putn(sb, b, bytes);
}

size_t first_at_least(const size_t *sorted, size_t n, size_t value)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sorted[mid] < value)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

uint64_t load_le(const uint8_t *p, unsigned bytes)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < bytes; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

void sb_printf(strbuf *sb, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(sb, fmt, ap);
    va_end(ap);
}

void sb_free(strbuf *sb)
{
    free(sb->data);
    *sb = (strbuf){0};
}

void sb_put_quoted(strbuf *sb, const char *s, sb_quote_style style)
{
    sb_putc(sb, '"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            sb_printf(sb, "\\%c", c);
        else if (c < 0x20 || (c == 0x7f && style == SB_QUOTE_C))
            sb_printf(sb, style == SB_QUOTE_C ? "\\%03o" : "\\u%04x", c);
        else
            sb_putc(sb, (char)c);
    }
    sb_putc(sb, '"');
}

/* Sized by fstat so that a file usually takes one read and one allocation
 * (a no-op build reads hundreds of cache entries); reads on to end of file
 * in case the size was wrong. */
bool read_file(const char *path, uint8_t **data, size_t *size)
{
    struct stat st;
    return read_file_stat(path, data, size, &st);
}

bool read_file_stat(const char *path, uint8_t **data, size_t *size, struct stat *stp)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    struct stat st = {0};
    strbuf sb = {0};
    bool known = fstat(fd, &st) == 0;
    *stp = st;
    sb_reserve(&sb, known && st.st_size > 0 ? (size_t)st.st_size + 1 : 65536);
    ssize_t n;
    for (;;) {
        if (sb.cap - sb.len < 2)
            sb_reserve(&sb, 65536);
        n = read(fd, sb.data + sb.len, sb.cap - sb.len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        sb.len += (size_t)n;
    }
    int saved = errno;
    close(fd);
    if (n < 0) {
        sb_free(&sb);
        errno = saved;
        return false;
    }
    sb.data[sb.len] = '\0';
    *data = (uint8_t *)sb.data;
    *size = sb.len;
    return true;
}

bool write_all(int fd, const void *data, size_t size)
{
    const char *p = data;
    while (size > 0) {
        ssize_t n = write(fd, p, size);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return false;
        }
        p += n;
        size -= (size_t)n;
    }
    return true;
}

bool write_file(const char *path, const void *data, size_t size)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return false;
    bool ok = write_all(fd, data, size);
    int saved = errno;
    if (close(fd) != 0)
        ok = false;
    errno = saved;
    return ok;
}

char *write_temp_beside(const char *path, const void *data, size_t size)
{
    char *tmp = xasprintf("%s.tmpXXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        free(tmp);
        return NULL;
    }
    bool ok = write_all(fd, data, size) && fchmod(fd, 0644) == 0;
    int saved = errno;
    if (close(fd) != 0)
        ok = false;
    if (!ok) {
        unlink(tmp);
        free(tmp);
        errno = saved;
        return NULL;
    }
    return tmp;
}

bool write_file_atomic(const char *path, const void *data, size_t size)
{
    char *tmp = write_temp_beside(path, data, size);
    if (!tmp)
        return false;
    bool ok = rename(tmp, path) == 0;
    if (!ok) {
        int saved = errno;
        unlink(tmp);
        errno = saved;
    }
    free(tmp);
    return ok;
}

bool mkdir_p(const char *path)
{
    char *p = xstrdup(path);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST) {
            free(p);
            return false;
        }
        *s = '/';
    }
    bool ok = mkdir(p, 0755) == 0 || errno == EEXIST;
    free(p);
    return ok;
}

char *path_join(const char *dir, const char *name)
{
    if (name[0] == '/' || !dir[0])
        return xstrdup(name);
    size_t n = strlen(dir);
    return xasprintf("%s%s%s", dir, dir[n - 1] == '/' ? "" : "/", name);
}

char *path_search(const char *dirs, const char *name, int mode, bool empty_is_cwd)
{
    for (const char *p = dirs; *p;) {
        size_t n = strcspn(p, ":");
        if (n || empty_is_cwd) {
            char *dir = n ? xstrndup(p, n) : xstrdup(".");
            char *full = path_join(dir, name);
            free(dir);
            struct stat st;
            if (stat(full, &st) == 0 && S_ISREG(st.st_mode) && access(full, mode) == 0)
                return full;
            free(full);
        }
        p += n + (p[n] == ':');
    }
    return NULL;
}

char *path_dirname(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return xstrdup(".");
    if (slash == path)
        return xstrdup("/");
    return xstrndup(path, (size_t)(slash - path));
}

/* Collapse "//", "." and ".." components of an absolute path in place. */
static void normalise(char *p)
{
    char *out = p;
    const char *in = p;
    while (*in) {
        while (*in == '/')
            in++;
        const char *end = strchr(in, '/');
        size_t n = end ? (size_t)(end - in) : strlen(in);
        if (n == 0)
            break;
        if (n == 1 && in[0] == '.') {
            /* skip */
        } else if (n == 2 && in[0] == '.' && in[1] == '.') {
            while (out > p && *--out != '/')
                ;
        } else {
            *out++ = '/';
            memmove(out, in, n);
            out += n;
        }
        in += n;
    }
    if (out == p)
        *out++ = '/';
    *out = '\0';
}

char *path_absolute(const char *path)
{
    char *abs;
    if (path[0] == '/') {
        abs = xstrdup(path);
    } else {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof cwd))
            return xstrdup(path);
        abs = path_join(cwd, path);
    }
    normalise(abs);
    return abs;
}

char *path_relative_to(const char *path, const char *base)
{
    /* Both are absolute and normalised: drop the common directory prefix, then
     * climb out of what remains of base with "..". */
    size_t common = 0;
    for (size_t i = 0;; i++) {
        bool path_end = path[i] == '\0' || path[i] == '/';
        bool base_end = base[i] == '\0' || base[i] == '/';
        if (path_end && base_end)
            common = i;
        if (path[i] != base[i] || !path[i] || !base[i])
            break;
    }
    strbuf sb = {0};
    for (const char *b = base + common; *b; b++) {
        if (*b == '/')
            sb_puts(&sb, "../");
    }
    const char *rest = path + common + (path[common] == '/');
    sb_puts(&sb, rest);
    if (!sb.len)
        sb_puts(&sb, ".");
    return sb.data;
}

/* A word at a time (FNV-1a took a multiply per byte, a tenth of a no-op
 * build): each 8 bytes are multiplied in and rotated, then the murmur3
 * finalizer spreads every input bit over the result. */
static uint64_t hash_round(uint64_t h, uint64_t w)
{
    h ^= w * 0x87c37b91114253d5ull;
    h = (h << 31 | h >> 33) * 0x4cf5ad432745937full;
    return h;
}

static uint64_t hash_final(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    return h ^ h >> 33;
}

uint64_t hash64(const void *data, size_t size, uint64_t seed)
{
    const uint8_t *p = data;
    uint64_t a = seed ^ 0xcbf29ce484222325ull ^ size;
    for (; size >= 8; p += 8, size -= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        a = hash_round(a, w);
    }
    uint64_t tail = 0;
    if (size)
        memcpy(&tail, p, size);
    return hash_final(hash_round(a, tail ^ (uint64_t)size << 56));
}

int hex_digit(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

hash_slot *hash_index_first(hash_index *x, uint64_t h)
{
    size_t size = x->slots ? x->mask + 1 : 0;
    if (2 * (x->count + 1) > size) { /* double, and place every item again */
        hash_slot *old = x->slots;
        size_t new_size = size ? 2 * size : 64;
        x->slots = xcalloc(new_size, sizeof *x->slots);
        x->mask = new_size - 1;
        for (size_t i = 0; i < size; i++) {
            if (!old[i].item)
                continue;
            size_t k = old[i].hash & x->mask;
            while (x->slots[k].item)
                k = (k + 1) & x->mask;
            x->slots[k] = old[i];
        }
        free(old);
    }
    return &x->slots[h & x->mask];
}

hash_slot *hash_index_next(const hash_index *x, const hash_slot *s)
{
    return &x->slots[((size_t)(s - x->slots) + 1) & x->mask];
}

void hash_index_put(hash_index *x, hash_slot *empty, uint64_t h, size_t item)
{
    *empty = (hash_slot){h, item + 1};
    x->count++;
}

void hash_index_free(hash_index *x)
{
    free(x->slots);
    *x = (hash_index){0};
}

double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

void remove_tree(const char *path)
{
    nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}
