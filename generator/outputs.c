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
#include <sys/file.h>
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
        if (o->items[i].temp && !o->items[i].in_spare)
            unlink(o->items[i].temp);
        if (o->items[i].staged && o->items[i].fd >= 0)
            close(o->items[i].fd);
        free(o->items[i].temp);
        free(o->items[i].spare);
        free(o->items[i].path);
        sb_free(&o->items[i].content);
    }
    free(o->items);
    if (o->locked)
        close(o->spare_lock);
    *o = (gen_outputs){0};
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* Whether a file in `spare_dir` can be renamed to `path`: not across mount
 * points, even of one filesystem (a bind mount, as containers mount cache
 * volumes), where st_dev is the same. The kernel refuses such a rename (EXDEV)
 * before it looks for the file, so moving a name that exists nowhere tells,
 * changing nothing: ENOENT says the rename would go. */
static bool renames_to(const char *spare_dir, const char *path)
{
    char *from = path_join(spare_dir, "no-such-spare");
    char *dir = path_dirname(path);
    char *to = path_join(dir, ".stencilgen-no-such-file");
    bool ok = renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) != 0 && errno == ENOENT;
    free(to);
    free(dir);
    free(from);
    return ok;
}

void outputs_use_spares(gen_outputs *o, const char *dir)
{
    if (o->locked || !mkdir_p(dir))
        return;
    char *lock = path_join(dir, "lock");
    int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    free(lock);
    if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (fd >= 0)
            close(fd);
        return;
    }
    o->spare_lock = fd;
    o->locked = true;
    for (size_t i = 0; i < o->count; i++) {
        bool named = false; /* one spare a name */
        for (size_t j = 0; j < i && !named; j++)
            named = !strcmp(base_name(o->items[i].path), base_name(o->items[j].path));
        if (!named && renames_to(dir, o->items[i].path))
            o->items[i].spare = path_join(dir, base_name(o->items[i].path));
    }
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
    const char *base = base_name(path);
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

/* How a published output replaced the file before it, to undo it. */
typedef struct replaced {
    char *previous; /* a hard link kept to the replaced file, or NULL */
    bool exchanged; /* exchanged with its spare: the spare is the replaced file */
    bool done;
} replaced;

static bool exchange(const char *a, const char *b)
{
    return renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) == 0;
}

/* Put back the files the published outputs replaced. */
static void roll_back(const gen_outputs *o, const replaced *r)
{
    for (size_t i = 0; i < o->count; i++) {
        if (!r[i].done)
            continue;
        if (r[i].exchanged)
            exchange(o->items[i].spare, o->items[i].path);
        else if (r[i].previous)
            rename(r[i].previous, o->items[i].path);
        else
            unlink(o->items[i].path);
    }
}

/* A spare that cannot be renamed into place after all (the spare directory
 * was mounted elsewhere since outputs_use_spares looked): the content staged
 * beside the output instead, and renamed. False (errno) if that fails too. */
static bool restage_beside(gen_output *item)
{
    if (!item->in_spare)
        return false;
    char *temp = write_temp_beside(item->path, item->content.data, item->content.len);
    if (!temp)
        return false;
    free(item->temp);
    item->temp = temp;
    item->in_spare = false;
    if (item->fd >= 0)
        close(item->fd);
    item->fd = open(item->temp, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    return rename(item->temp, item->path) == 0;
}

/* Put one staged output in place: exchanged with its spare, or renamed with a
 * hard link kept to the file it replaces (there was none to exchange with, or
 * the filesystem has no exchange). False says why. */
static bool replace(gen_output *item, replaced *r)
{
    if (item->in_spare && exchange(item->temp, item->path)) {
        r->exchanged = true;
    } else {
        r->previous = keep_previous(item->path);
        if (!r->previous && errno != ENOENT) {
            diag_error("cannot keep the previous '%s' while replacing it: %s", item->path,
                       strerror(errno));
            return false;
        }
        if (rename(item->temp, item->path) != 0 && !(errno == EXDEV && restage_beside(item))) {
            diag_error("cannot rename '%s' to '%s': %s", item->temp, item->path,
                       strerror(errno));
            if (r->previous) /* not replaced: its link goes */
                unlink(r->previous);
            free(r->previous);
            r->previous = NULL;
            return false;
        }
    }
    free(item->temp); /* now the output, or the spare holding the file replaced */
    item->temp = NULL;
    r->done = true;
    return true;
}

/* Whether `path` is a regular file holding exactly `content`: compared a
 * block at a time, so that a changed header (megabytes) is read only up to
 * its first difference. */
static bool holds(const char *path, const strbuf *content, int *held)
{
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size != content->len)
        return false;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
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
    if (same)
        *held = fd; /* the file found right, whatever path names later */
    else
        close(fd);
    return same;
}

/* An output that already holds its content is not written again, only dated
 * now, as if written (build tools compare times): a no-op build creates no
 * file, which on ext4 cost more than everything else it does. Dated once
 * every other output is in place, so that a failed run changes no time; a
 * time that cannot be set leaves a right file, which the build tool may only
 * have us check again. */
static void date_unchanged(const gen_outputs *o)
{
    for (size_t i = 0; i < o->count; i++)
        if (o->items[i].unchanged)
            futimens(o->items[i].fd, NULL);
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

/* Whether no other open file or mapping has fd's file: only then is a write
 * lease granted. It is let go at once: nobody else opens a spare by its name
 * (they are the run's, under its lock). */
static bool unshared(int fd)
{
    if (fcntl(fd, F_SETLEASE, F_WRLCK) != 0)
        return false;
    fcntl(fd, F_SETLEASE, F_UNLCK);
    return true;
}

/* Write item's content over its spare: the same blocks, nothing freed. A
 * spare someone else has (a hard link, an open file, a mapping: it held an
 * output once) is left to them and a fresh file takes its name. */
static bool write_spare(const gen_output *item)
{
    int fd = open(item->spare, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    struct stat st;
    if (fd >= 0 && !(fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1 &&
                     unshared(fd))) {
        close(fd);
        unlink(item->spare);
        fd = open(item->spare, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    }
    if (fd < 0)
        return false;
    bool ok = write_all(fd, item->content.data, item->content.len) &&
              ftruncate(fd, (off_t)item->content.len) == 0 && fchmod(fd, 0644) == 0;
    return close(fd) == 0 && ok;
}

bool outputs_stage(gen_output *item)
{
    if (item->staged)
        return true;
    outputs_remove_stale_temps(item->path);
    item->fd = -1;
    item->unchanged = holds(item->path, &item->content, &item->fd);
    if (!item->unchanged) {
        /* A spare that cannot be written leaves the temporary's way, which
         * says why if it fails too. */
        item->in_spare = item->spare && write_spare(item);
        item->temp = item->in_spare ? xstrdup(item->spare)
                                    : write_temp_beside(item->path, item->content.data,
                                                        item->content.len);
        if (!item->temp)
            return false;
        /* The temporary is this run's alone (a fresh name, or the spare under
         * its lock): no other build can have put another file there. */
        item->fd = open(item->temp, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    }
    item->staged = true;
    return true;
}

bool outputs_publish(gen_outputs *o, struct stat *published)
{
    replaced *r = xcalloc(o->count ? o->count : 1, sizeof *r);
    bool ok = outputs_ready(o); /* nothing is written before all pass */
    for (size_t i = 0; i < o->count && ok; i++) {
        ok = outputs_stage(&o->items[i]);
        if (!ok)
            diag_error("cannot write '%s': %s", o->items[i].path, strerror(errno));
    }
    for (size_t i = 0; i < o->count && ok; i++)
        ok = o->items[i].unchanged || replace(&o->items[i], &r[i]);
    if (!ok)
        roll_back(o, r);
    else
        date_unchanged(o);
    for (size_t i = 0; i < o->count && ok && published; i++)
        if (o->items[i].fd < 0 || fstat(o->items[i].fd, &published[i]) != 0)
            published[i] = (struct stat){.st_ino = 0};
    for (size_t i = 0; i < o->count; i++) {
        if (r[i].previous && ok)
            unlink(r[i].previous);
        free(r[i].previous);
    }
    free(r);
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
