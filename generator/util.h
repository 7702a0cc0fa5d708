/* util.h - small shared helpers: checked allocation, growable buffers, files. */
#ifndef STENCILGEN_UTIL_H
#define STENCILGEN_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

/* Allocation failure is not an input error: the tool prints a message and exits. */
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Grow *items (of elem_size bytes) so that it can hold at least need elements. */
void grow_array(void **items, size_t *cap, size_t need, size_t elem_size);
#define ARRAY_PUSH(arr, count, cap, value)                                                     \
    do {                                                                                       \
        grow_array((void **)&(arr), &(cap), (count) + 1, sizeof *(arr));                       \
        (arr)[(count)++] = (value);                                                            \
    } while (0)

/* A growable byte/string buffer; data is always NUL-terminated. */
typedef struct strbuf {
    char *data;
    size_t len;
    size_t cap;
} strbuf;

void sb_putc(strbuf *sb, char c);
void sb_puts(strbuf *sb, const char *s);
/* The strings up to a NULL, one after another: printf's "%s%s..." without
 * printf, for what the generated headers write per stencil. */
void sb_cat(strbuf *sb, ...);
/* v in lowercase hex, zero-padded to min_digits (at most 16): printf's "%0*" PRIx64
 * without printf, for the generated headers' hot loops. */
void sb_put_hex(strbuf *sb, uint64_t v, unsigned min_digits);
void sb_putn(strbuf *sb, const void *p, size_t n);
/* Room for `extra` more bytes and the NUL, so that appends up to then do
 * not move the data. */
void sb_reserve(strbuf *sb, size_t extra);
/* Room for n more bytes at the end, counted as written: the caller fills
 * them (the generated headers' hot loops write bytes straight in). */
char *sb_extend(strbuf *sb, size_t n);
/* v in decimal, as printf's "%" PRId64 */
void sb_put_dec(strbuf *sb, int64_t v);
/* " + 0x<v>" or " - 0x<-v>": an addend after a value, in hex. */
void sb_put_addend(strbuf *sb, int64_t v);
/* v as `bytes` (at most 8) little-endian bytes, as cache entries store numbers. */
void sb_put_le(strbuf *sb, uint64_t v, unsigned bytes);
/* The little-endian number in p[0, bytes). */
uint64_t load_le(const uint8_t *p, unsigned bytes);
void sb_printf(strbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sb_vprintf(strbuf *sb, const char *fmt, va_list ap);
void sb_free(strbuf *sb);
/* s between double quotes, with '"' and '\\' escaped by a backslash and
 * control characters as a C octal escape (SB_QUOTE_C, what clang decodes in
 * #line names) or a JSON \\u escape (SB_QUOTE_JSON). */
typedef enum sb_quote_style { SB_QUOTE_C, SB_QUOTE_JSON } sb_quote_style;
void sb_put_quoted(strbuf *sb, const char *s, sb_quote_style style);

/* Whole-file read; returns false and sets errno on failure. */
bool read_file(const char *path, uint8_t **data, size_t *size);
/* The same, with what the file was when opened (*st). */
bool read_file_stat(const char *path, uint8_t **data, size_t *size, struct stat *st);

/* Write `data` to `path` through a temporary file in the same directory and a
 * rename, so readers never see a partial file. */
bool write_file_atomic(const char *path, const void *data, size_t size);

/* Plain write (create or truncate), for files whose readers verify them. */
bool write_file(const char *path, const void *data, size_t size);
bool write_all(int fd, const void *data, size_t size); /* through short writes and EINTR */

/* Temporary-file half of write_file_atomic, for callers that must write several
 * files and only publish them once all were written. */
char *write_temp_beside(const char *path, const void *data, size_t size);

bool mkdir_p(const char *path);
/* rm -r, best effort (for the generator's own temporary directories). */
void remove_tree(const char *path);
char *path_join(const char *dir, const char *name);
/* The first dir/name over the ':'-separated `dirs` that is a regular file
 * access(2) allows `mode` on, or NULL. An empty entry is the current
 * directory when empty_is_cwd (as the shell looks for programs), else none
 * (as LLVM's findProgramByName looks). */
char *path_search(const char *dirs, const char *name, int mode, bool empty_is_cwd);
char *path_dirname(const char *path);
/* Absolute, normalised path (the file need not exist). */
char *path_absolute(const char *path);
/* `path` relative to directory `base` (both absolute and normalised), e.g. "../templates/t.h". */
char *path_relative_to(const char *path, const char *base);

/* A fast 64-bit hash of bytes, for in-memory indexes, checksums against
 * damage and names of temporaries: never for what an attacker may choose
 * (cache keys and digests are SHA-256, digest.h). */
uint64_t hash64(const void *data, size_t size, uint64_t seed);

/* An open-addressing index over an array its user owns: each slot holds an
 * item's hash and its index + 1 (0: empty); the user compares the keys.
 * hash_index_first returns where a probe for h starts, with room made for
 * one more item; hash_index_next steps until a slot of the item, or the
 * empty slot where hash_index_put adds it. At most half full. */
typedef struct hash_slot {
    uint64_t hash;
    size_t item; /* index + 1; 0: empty */
} hash_slot;

typedef struct hash_index {
    hash_slot *slots;
    size_t mask;  /* slots - 1, a power of two */
    size_t count; /* items added */
} hash_index;

hash_slot *hash_index_first(hash_index *x, uint64_t h);
hash_slot *hash_index_next(const hash_index *x, const hash_slot *s);
void hash_index_put(hash_index *x, hash_slot *empty, uint64_t h, size_t item);
void hash_index_free(hash_index *x);

/* The value of lowercase hex digit c, or -1 (the generator writes lowercase). */
int hex_digit(char c);

/* The index of the first of sorted[0, n) that is at least `value` (n if none). */
size_t first_at_least(const size_t *sorted, size_t n, size_t value);

double now_seconds(void);

#endif
