/* outputs.c - see outputs.h. */
#define _GNU_SOURCE
#include "outputs.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "diag.h"

void outputs_add(gen_outputs *o, char *path, strbuf content)
{
    gen_output out = {.path = path, .content = content};
    ARRAY_PUSH(o->items, o->count, o->cap, out);
}

/* The file a path names: its directory resolved (when it exists), then its name. */
static char *canonical(const char *path)
{
    char *abs = path_absolute(path);
    char *dir = path_dirname(abs);
    char *real = realpath(dir, NULL);
    char *c = real ? path_join(real, strrchr(abs, '/') + 1) : xstrdup(abs);
    free(real);
    free(dir);
    free(abs);
    return c;
}

static bool same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0)
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    return false;
}

bool outputs_distinct(const char *const *paths, const char *const *what, size_t n)
{
    char **c = xcalloc(n, sizeof *c);
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++) {
        c[i] = canonical(paths[i]);
        for (size_t j = 0; j < i && ok; j++) {
            if (strcmp(c[i], c[j]) && !same_file(paths[i], paths[j]))
                continue;
            diag_error("%s '%s' and %s '%s' are the same file", what[j], paths[j], what[i],
                       paths[i]);
            ok = false;
        }
    }
    for (size_t i = 0; i < n; i++)
        free(c[i]);
    free(c);
    return ok;
}

void outputs_discard(gen_outputs *o)
{
    for (size_t i = 0; i < o->count; i++) {
        if (o->items[i].temp)
            unlink(o->items[i].temp);
        free(o->items[i].temp);
        free(o->items[i].path);
        sb_free(&o->items[i].content);
    }
    free(o->items);
    *o = (gen_outputs){0};
}

/* Temporaries are "<output>.tmpXXXXXX" (write_temp_beside's pattern). One
 * older than this was left by a killed run; a younger one may be another
 * run's, publishing into the same directory right now. */
#define STALE_TEMP_S 60

static bool is_temp_of(const char *name, const char *base)
{
    size_t n = strlen(base);
    if (strncmp(name, base, n) || strncmp(name + n, ".tmp", 4) || strlen(name + n + 4) != 6)
        return false;
    for (const char *p = name + n + 4; *p; p++)
        if (!isalnum((unsigned char)*p))
            return false;
    return true;
}

void outputs_remove_stale_temps(const char *path)
{
    char *dir = path_dirname(path);
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (!is_temp_of(e->d_name, base))
            continue;
        char *p = path_join(dir, e->d_name);
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISREG(st.st_mode) && time(NULL) - st.st_mtime > STALE_TEMP_S)
            unlink(p);
        free(p);
    }
    if (d)
        closedir(d);
    free(dir);
}

/* A destination must be absent or a file (or a link) that a rename replaces. */
static bool replaceable(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT;
    if (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode))
        return true;
    errno = S_ISDIR(st.st_mode) ? EISDIR : EEXIST;
    return false;
}

/* A hard link to the file `path` names now, under a temporary name, so it can
 * be put back; NULL (errno ENOENT) when there is none. */
static char *keep_previous(const char *path)
{
    for (int attempt = 0; attempt < 16; attempt++) {
        char *backup = write_temp_beside(path, "", 0); /* reserves a fresh name */
        if (!backup)
            return NULL;
        unlink(backup);
        if (link(path, backup) == 0)
            return backup;
        int err = errno;
        free(backup);
        if (err != EEXIST) {
            errno = err;
            return NULL;
        }
    }
    errno = EEXIST;
    return NULL;
}

/* Put back the files replaced by the first `n` renames (those unchanged were
 * not replaced). */
static void roll_back(const gen_outputs *o, char **previous, const bool *unchanged, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (unchanged[i])
            continue;
        if (previous[i])
            rename(previous[i], o->items[i].path);
        else
            unlink(o->items[i].path);
    }
}

/* Whether `path` is a regular file holding exactly `content`: compared a
 * block at a time, so that a changed header (megabytes) is read only up to
 * its first difference. */
static bool holds(const char *path, const strbuf *content)
{
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size != content->len)
        return false;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    static const size_t block = 1 << 16;
    uint8_t *buf = xcalloc(1, block);
    size_t at = 0;
    bool same = true;
    while (same && at < content->len) {
        size_t want = content->len - at < block ? content->len - at : block;
        ssize_t n = read(fd, buf, want);
        if (n < 0 && errno == EINTR)
            continue;
        same = n > 0 && !memcmp(buf, content->data + at, (size_t)n);
        at += n > 0 ? (size_t)n : 0;
    }
    /* Nothing after the length it had when looked at. */
    same = same && read(fd, buf, 1) == 0;
    free(buf);
    close(fd);
    return same;
}

/* An output that already holds its content is not written again, only dated
 * now, as if written (build tools compare times): a no-op build creates no
 * file, which on ext4 cost more than everything else it does. Dated once
 * every other output is in place, so that a failed run changes no time; a
 * time that cannot be set leaves a right file, which the build tool may only
 * have us check again. */
static void date_unchanged(const gen_outputs *o, const bool *unchanged)
{
    for (size_t i = 0; i < o->count; i++)
        if (unchanged[i])
            utimensat(AT_FDCWD, o->items[i].path, NULL, 0);
}

bool outputs_ready(const gen_outputs *o)
{
    for (size_t i = 0; i < o->count; i++) {
        char *dir = path_dirname(o->items[i].path);
        bool made = mkdir_p(dir);
        if (!made)
            diag_error("cannot create directory '%s': %s", dir, strerror(errno));
        free(dir);
        if (!made)
            return false;
        if (!replaceable(o->items[i].path)) {
            diag_error("cannot write '%s': %s", o->items[i].path, strerror(errno));
            return false;
        }
    }
    return true;
}

bool outputs_stage(gen_output *item)
{
    if (item->staged)
        return true;
    outputs_remove_stale_temps(item->path);
    item->unchanged = holds(item->path, &item->content);
    if (!item->unchanged) {
        item->temp = write_temp_beside(item->path, item->content.data, item->content.len);
        if (!item->temp)
            return false;
    }
    item->staged = true;
    return true;
}

bool outputs_publish(gen_outputs *o)
{
    char **previous = xcalloc(o->count, sizeof *previous);
    bool *unchanged = xcalloc(o->count, sizeof *unchanged);
    bool ok = outputs_ready(o); /* nothing is written before all pass */
    for (size_t i = 0; i < o->count && ok; i++) {
        if (!outputs_stage(&o->items[i])) {
            diag_error("cannot write '%s': %s", o->items[i].path, strerror(errno));
            ok = false;
        }
        unchanged[i] = o->items[i].unchanged;
    }
    size_t renamed = 0;
    for (; ok && renamed < o->count; renamed++) {
        gen_output *item = &o->items[renamed];
        if (item->unchanged)
            continue;
        previous[renamed] = keep_previous(item->path);
        if (!previous[renamed] && errno != ENOENT) {
            diag_error("cannot keep the previous '%s' while replacing it: %s", item->path,
                       strerror(errno));
            ok = false;
        } else if (rename(item->temp, item->path) != 0) {
            diag_error("cannot rename '%s' to '%s': %s", item->temp, item->path,
                       strerror(errno));
            ok = false;
        } else {
            free(item->temp);
            item->temp = NULL;
            continue;
        }
        if (previous[renamed]) /* this one was not replaced: drop its link */
            unlink(previous[renamed]);
        free(previous[renamed]);
        previous[renamed] = NULL;
        break;
    }
    if (!ok)
        roll_back(o, previous, unchanged, renamed);
    else
        date_unchanged(o, unchanged);
    for (size_t i = 0; i < o->count; i++) {
        if (previous[i] && ok)
            unlink(previous[i]);
        free(previous[i]);
    }
    free(previous);
    free(unchanged);
    outputs_discard(o); /* and the temporaries not renamed */
    return ok;
}

/* Characters ninja's depfile reader ends a path at, whatever the escaping
 * (checked against ninja 1.11); make reads them, so they are written as they
 * are and ninja, finding no such file, re-runs the generator every time. */
static const char ninja_cannot_read[] = "\"&'*;<>?^`|\t";

/* Make-style escaping, as clang writes it and ninja and make read it: a space
 * as backslash-space (doubling the backslashes before it), '#' as "\#", '$'
 * as "$$". Returns false for a path no depfile can hold (a line break). */
static bool put_dep(strbuf *sb, const char *path, bool *unreadable)
{
    if (strpbrk(path, "\n\r")) {
        diag_error("--depfile cannot name '%s': a depfile cannot hold a path with a line break",
                   path);
        return false;
    }
    if (strpbrk(path, ninja_cannot_read) && !*unreadable) {
        *unreadable = true;
        diag_warning("--depfile names '%s', which holds a character ninja cannot read in a "
                     "depfile (one of %s or a tab): ninja will re-run stencilgen on every build",
                     path, "\"&'*;<>?^`|");
    }
    for (const char *p = path; *p; p++) {
        if (*p == ' ') {
            for (const char *q = p; q > path && q[-1] == '\\'; q--)
                sb_putc(sb, '\\');
            sb_putc(sb, '\\');
        } else if (*p == '#') {
            sb_putc(sb, '\\');
        } else if (*p == '$') {
            sb_putc(sb, '$');
        }
        sb_putc(sb, *p);
    }
    return true;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The inverse of put_dep, on what clang writes: paths separated by spaces
 * and escaped newlines (a tab is part of a path: clang writes it as is). */
void outputs_parse_deps(const uint8_t *text, size_t size, char ***list, size_t *count,
                        size_t *cap)
{
    const char *s = (const char *)text, *end = s + size;
    const char *p = memmem(s, size, ": ", 2);
    p = p ? p + 2 : end;
    strbuf word = {0};
    for (; p <= end; p++) {
        char c = p < end ? *p : ' ';
        if (c == '\\') {
            size_t n = 0; /* a run of backslashes */
            while (p + n < end && p[n] == '\\')
                n++;
            char next = p + n < end ? p[n] : '\0';
            if (next == ' ') { /* 2k+1 before a space: k and a space; 2k: k, then the end */
                for (size_t i = 0; i < n / 2; i++)
                    sb_putc(&word, '\\');
                p += n - 1;
                if (n % 2) {
                    sb_putc(&word, ' ');
                    p++;
                }
                continue;
            }
            if (n == 1 && (next == '#' || next == '\n' || next == '\r')) {
                if (next == '#')
                    sb_putc(&word, '#');
                p++; /* "\#", or a line continuation */
                continue;
            }
            for (size_t i = 0; i < n; i++)
                sb_putc(&word, '\\');
            p += n - 1;
            continue;
        }
        if (c == '$' && p + 1 < end && p[1] == '$') {
            sb_putc(&word, '$');
            p++;
            continue;
        }
        if (c == ' ' || c == '\n' || c == '\r') {
            if (word.len) {
                char *abs = path_absolute(word.data);
                ARRAY_PUSH(*list, *count, *cap, abs);
                word.len = 0;
            }
            continue;
        }
        sb_putc(&word, c);
    }
    sb_free(&word);
}

bool outputs_depfile(const gen_depfile_inputs *in, char *const *texts, size_t n,
                     const char *target, strbuf *out)
{
    char **deps = NULL;
    size_t count = 0, cap = 0;
    ARRAY_PUSH(deps, count, cap, path_absolute(in->manifest));
    for (size_t i = 0; i < in->nsources; i++)
        ARRAY_PUSH(deps, count, cap, xstrdup(in->sources[i]));
    for (size_t i = 0; i < n; i++) {
        if (texts[i])
            outputs_parse_deps((const uint8_t *)texts[i], strlen(texts[i]), &deps, &count, &cap);
    }
    size_t wlen = strlen(in->workdir), kept = 0;
    for (size_t i = 0; i < count; i++) {
        if (!strncmp(deps[i], in->workdir, wlen) && deps[i][wlen] == '/')
            free(deps[i]);
        else
            deps[kept++] = deps[i];
    }
    count = kept;
    qsort(deps, count, sizeof *deps, cmp_str);
    strbuf sb = {0};
    bool unreadable = false;
    bool ok = put_dep(&sb, target, &unreadable);
    sb_putc(&sb, ':');
    for (size_t i = 0; i < count && ok; i++) {
        if (i > 0 && !strcmp(deps[i], deps[i - 1]))
            continue;
        sb_puts(&sb, " \\\n  ");
        ok = put_dep(&sb, deps[i], &unreadable);
    }
    for (size_t i = 0; i < count; i++)
        free(deps[i]);
    sb_putc(&sb, '\n');
    free(deps);
    *out = sb;
    if (!ok)
        sb_free(out);
    return ok;
}


/* A path argument, with a run directory prefix replaced by the kept one. */
static void put_json_path(strbuf *sb, const char *s, const char *run_dir, const char *kept_dir)
{
    size_t n = strlen(run_dir);
    if (strncmp(s, run_dir, n) || s[n] != '/') {
        sb_put_quoted(sb, s, SB_QUOTE_JSON);
        return;
    }
    char *kept = xasprintf("%s%s", kept_dir, s + n);
    sb_put_quoted(sb, kept, SB_QUOTE_JSON);
    free(kept);
}

strbuf outputs_compile_commands(const gen_job *jobs, size_t n, const char *const *sources,
                                const char *run_dir, const char *kept_dir)
{
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd))
        snprintf(cwd, sizeof cwd, ".");
    strbuf sb = {0};
    sb_puts(&sb, "[");
    for (size_t i = 0; i < n; i++) {
        const char *file = NULL;
        for (char **a = jobs[i].argv; *a; a++) {
            if (!strcmp(*a, "-c") && a[1])
                file = a[1];
        }
        const char *unit = file;
        if (sources[i])
            file = sources[i];
        sb_puts(&sb, i ? ",\n  {\"directory\": " : "\n  {\"directory\": ");
        sb_put_quoted(&sb, cwd, SB_QUOTE_JSON);
        sb_puts(&sb, ", \"file\": ");
        sb_put_quoted(&sb, file ? file : "", SB_QUOTE_JSON);
        sb_puts(&sb, ", \"output\": ");
        put_json_path(&sb, jobs[i].output, run_dir, kept_dir);
        sb_puts(&sb, ", \"arguments\": [");
        for (char **a = jobs[i].argv; *a; a++) {
            if (a != jobs[i].argv)
                sb_puts(&sb, ", ");
            put_json_path(&sb, unit && !strcmp(*a, unit) ? file : *a, run_dir, kept_dir);
        }
        sb_puts(&sb, "]}");
    }
    sb_puts(&sb, "\n]\n");
    return sb;
}
