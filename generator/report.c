/* report.c - `stencilgen report`: the facts of one or more generated
 * headers (report_read.c), and with --against what changed since another
 * set, as one self-contained HTML page or as JSON for CI. The page is
 * report_page.html, carried inside the generator, with the facts as a JSON
 * island in it: no network, no external script, works opened from disk. */
#define _GNU_SOURCE
#include "report.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "diag.h"
#include "provenance.h"
#include "report_read.h"
#include "util.h"

extern const char sg_report_page[];
extern const size_t sg_report_page_size;

#define REPORT_FORMAT "stencilgen report 1" /* docs/tools.md, "Report": the JSON's version */
#define DATA_MARK "<!--SG-REPORT-DATA-->"

typedef struct rp_set {
    rp_target *targets;
    size_t n, cap;
} rp_set;

typedef struct rp_options {
    const char *out;
    bool json;
    char **against;
    size_t nagainst;
    char **dirs;
    size_t ndirs;
    double max_growth; /* percent; < 0: no budget */
} rp_options;

typedef enum change_kind { CH_ADDED, CH_REMOVED, CH_GROWN, CH_SHRUNK } change_kind;
static const char *const change_names[] = {"added", "removed", "grown", "shrunk"};

typedef struct rp_change {
    change_kind kind;
    const rp_target *target; /* the new set's, or the old one's for a removed target */
    const rp_stencil *old, *new; /* NULL when added / removed */
    int64_t delta;               /* bytes of code and data */
} rp_change;

typedef struct rp_totals {
    const char *triple;
    size_t old_bytes, new_bytes;
    size_t added, removed, grown, shrunk, unchanged;
} rp_totals;

typedef struct rp_comparison {
    rp_change *changes;
    size_t nchanges, cap;
    rp_totals *totals;
    size_t ntotals, cap_totals;
} rp_comparison;

/* ---- reading the sets ---- */

static bool is_target_header(const char *name)
{
    size_t n = strlen(name);
    return !strncmp(name, "jit_stencils-", 13) && n > 15 && !strcmp(name + n - 2, ".h");
}

static int by_string(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The target headers in dir, sorted: the report's order is the names'. */
static bool headers_in(const char *dir, char ***paths, size_t *n)
{
    DIR *d = opendir(dir);
    if (!d) {
        diag_error("report: cannot read directory %s: %s", dir, strerror(errno));
        return false;
    }
    size_t cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (is_target_header(e->d_name)) {
            char *p = path_join(dir, e->d_name);
            ARRAY_PUSH(*paths, *n, cap, p);
        }
    }
    closedir(d);
    if (*n) /* qsort wants an array, even of none */
        qsort(*paths, *n, sizeof **paths, by_string);
    return true;
}

static const rp_target *find_target(const rp_set *s, const char *triple)
{
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->targets[i].triple, triple))
            return &s->targets[i];
    return NULL;
}

/* Each argument a directory of generated headers or one header. */
static bool load_set(char **args, size_t nargs, rp_set *set)
{
    bool ok = true;
    for (size_t a = 0; a < nargs && ok; a++) {
        struct stat st;
        char **paths = NULL;
        size_t n = 0;
        if (stat(args[a], &st)) {
            diag_error("report: %s: %s", args[a], strerror(errno));
            return false;
        }
        if (S_ISDIR(st.st_mode)) {
            ok = headers_in(args[a], &paths, &n);
            if (ok && !n) {
                diag_error("report: %s holds no generated target header (jit_stencils-*.h)",
                           args[a]);
                ok = false;
            }
        } else {
            paths = xcalloc(1, sizeof *paths);
            paths[n++] = xstrdup(args[a]);
        }
        for (size_t i = 0; i < n; i++) {
            rp_target t;
            if (ok && !(ok = rp_read_header(paths[i], &t)))
                continue;
            if (ok && find_target(set, t.triple)) {
                diag_error_at(paths[i], 0, 0, "report: a second header for %s (the first: %s)",
                              t.triple, find_target(set, t.triple)->path);
                rp_target_free(&t);
                ok = false;
            } else if (ok) {
                ARRAY_PUSH(set->targets, set->n, set->cap, t);
            }
        }
        for (size_t i = 0; i < n; i++)
            free(paths[i]);
        free(paths);
    }
    return ok;
}

static void set_free(rp_set *s)
{
    for (size_t i = 0; i < s->n; i++)
        rp_target_free(&s->targets[i]);
    free(s->targets);
}

/* ---- comparing ---- */

static size_t bytes_of(const rp_stencil *s)
{
    return s ? s->code + s->data : 0;
}

/* A name index over one target's stencils. */
typedef struct name_index {
    const rp_target *t;
    hash_index x;
} name_index;

static void index_build(name_index *ix, const rp_target *t)
{
    *ix = (name_index){.t = t};
    for (size_t i = 0; t && i < t->nstencils; i++) {
        uint64_t h = hash64(t->stencils[i].name, strlen(t->stencils[i].name), 0);
        hash_slot *s = hash_index_first(&ix->x, h);
        while (s->item)
            s = hash_index_next(&ix->x, s);
        hash_index_put(&ix->x, s, h, i);
    }
}

static const rp_stencil *index_find(name_index *ix, const char *name)
{
    if (!ix->t)
        return NULL;
    uint64_t h = hash64(name, strlen(name), 0);
    for (hash_slot *s = hash_index_first(&ix->x, h); s->item; s = hash_index_next(&ix->x, s)) {
        const rp_stencil *st = &ix->t->stencils[s->item - 1];
        if (s->hash == h && !strcmp(st->name, name))
            return st;
    }
    return NULL;
}

static void add_change(rp_comparison *c, change_kind k, const rp_target *t,
                       const rp_stencil *old, const rp_stencil *new)
{
    rp_change ch = {k, t, old, new, (int64_t)bytes_of(new) - (int64_t)bytes_of(old)};
    ARRAY_PUSH(c->changes, c->nchanges, c->cap, ch);
}

static void compare_target(rp_comparison *c, const rp_target *old, const rp_target *new,
                           rp_totals *tot)
{
    name_index io, in;
    index_build(&io, old);
    index_build(&in, new);
    for (size_t i = 0; new && i < new->nstencils; i++) {
        const rp_stencil *n = &new->stencils[i], *o = index_find(&io, n->name);
        tot->new_bytes += bytes_of(n);
        if (!o) {
            add_change(c, CH_ADDED, new, NULL, n);
            tot->added++;
        } else if (bytes_of(n) != bytes_of(o)) {
            bool grew = bytes_of(n) > bytes_of(o);
            add_change(c, grew ? CH_GROWN : CH_SHRUNK, new, o, n);
            grew ? tot->grown++ : tot->shrunk++;
        } else {
            tot->unchanged++;
        }
    }
    for (size_t i = 0; old && i < old->nstencils; i++) {
        const rp_stencil *o = &old->stencils[i];
        tot->old_bytes += bytes_of(o);
        if (!index_find(&in, o->name)) {
            add_change(c, CH_REMOVED, new ? new : old, o, NULL);
            tot->removed++;
        }
    }
    hash_index_free(&io.x);
    hash_index_free(&in.x);
}

/* Largest change first; then by target and name, for a stable order. */
static int by_change(const void *pa, const void *pb)
{
    const rp_change *a = pa, *b = pb;
    int64_t da = a->delta < 0 ? -a->delta : a->delta, db = b->delta < 0 ? -b->delta : b->delta;
    if (da != db)
        return da > db ? -1 : 1;
    int t = strcmp(a->target->triple, b->target->triple);
    if (t)
        return t;
    return strcmp((a->new ? a->new : a->old)->name, (b->new ? b->new : b->old)->name);
}

static void compare(const rp_set *old, const rp_set *new, rp_comparison *c)
{
    for (size_t i = 0; i < new->n; i++) {
        rp_totals tot = {.triple = new->targets[i].triple};
        compare_target(c, find_target(old, tot.triple), &new->targets[i], &tot);
        ARRAY_PUSH(c->totals, c->ntotals, c->cap_totals, tot);
    }
    for (size_t i = 0; i < old->n; i++) {
        if (find_target(new, old->targets[i].triple))
            continue;
        rp_totals tot = {.triple = old->targets[i].triple};
        compare_target(c, &old->targets[i], NULL, &tot);
        ARRAY_PUSH(c->totals, c->ntotals, c->cap_totals, tot);
    }
    if (c->nchanges)
        qsort(c->changes, c->nchanges, sizeof *c->changes, by_change);
}

/* ---- the budget ---- */

static double growth_percent(size_t old, size_t new)
{
    return old ? 100.0 * ((double)new - (double)old) / (double)old : (new ? INFINITY : 0.0);
}

/* Every stencil and target over budget, named on stderr; true if none. */
static bool within_budget(const rp_comparison *c, double max)
{
    size_t over = 0;
    for (size_t i = 0; i < c->nchanges; i++) {
        const rp_change *ch = &c->changes[i];
        if (ch->kind != CH_GROWN || growth_percent(bytes_of(ch->old), bytes_of(ch->new)) <= max)
            continue;
        fprintf(stderr, "stencilgen: error: report: %s: %s grew %zu -> %zu bytes (+%.1f%%, "
                        "over --max-growth %g%%)\n",
                ch->target->triple, ch->new->name, bytes_of(ch->old), bytes_of(ch->new),
                growth_percent(bytes_of(ch->old), bytes_of(ch->new)), max);
        over++;
    }
    for (size_t i = 0; i < c->ntotals; i++) {
        const rp_totals *t = &c->totals[i];
        if (!t->old_bytes || growth_percent(t->old_bytes, t->new_bytes) <= max)
            continue;
        fprintf(stderr, "stencilgen: error: report: %s: its stencils grew %zu -> %zu bytes in "
                        "all (+%.1f%%, over --max-growth %g%%)\n",
                t->triple, t->old_bytes, t->new_bytes,
                growth_percent(t->old_bytes, t->new_bytes), max);
        over++;
    }
    return over == 0;
}

/* ---- JSON ---- */

/* A JSON string that is also safe inside an HTML <script> element. */
static void put_json_string(strbuf *sb, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    sb_putc(sb, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            sb_putc(sb, '\\');
            sb_putc(sb, (char)*p);
        } else if (*p < 0x20 || *p == '<' || *p == '>' || *p == '&') {
            sb_puts(sb, "\\u00");
            sb_putc(sb, hex[*p >> 4]);
            sb_putc(sb, hex[*p & 15]);
        } else {
            sb_putc(sb, (char)*p);
        }
    }
    sb_putc(sb, '"');
}

static void put_key(strbuf *sb, const char *key)
{
    put_json_string(sb, key);
    sb_putc(sb, ':');
}

static void put_field_str(strbuf *sb, const char *key, const char *value)
{
    put_key(sb, key);
    put_json_string(sb, value);
    sb_putc(sb, ',');
}

static void put_field_num(strbuf *sb, const char *key, size_t value)
{
    put_key(sb, key);
    sb_put_dec(sb, (int64_t)value);
    sb_putc(sb, ',');
}

/* Drop the comma after an object's or array's last member. */
static void close_with(strbuf *sb, char c)
{
    if (sb->len && sb->data[sb->len - 1] == ',')
        sb->len--;
    sb_putc(sb, c);
    sb->data[sb->len] = '\0';
}

static void put_counts(strbuf *sb, const char *key, const rp_count *c, size_t n)
{
    put_key(sb, key);
    sb_putc(sb, '{');
    for (size_t i = 0; i < n; i++)
        put_field_num(sb, c[i].name, c[i].n);
    close_with(sb, '}');
    sb_putc(sb, ',');
}

static void put_strings(strbuf *sb, const char *key, char *const *v, size_t n)
{
    put_key(sb, key);
    sb_putc(sb, '[');
    for (size_t i = 0; i < n; i++) {
        put_json_string(sb, v[i]);
        sb_putc(sb, ',');
    }
    close_with(sb, ']');
    sb_putc(sb, ',');
}

/* The listings' lines, each kept once: a big header's listings repeat the
 * same instructions thousands of times. A line "XXXX: rest" whose offset is
 * the running offset (the bytes before it counted) is kept as `rest` and
 * written as its index k; any other line verbatim, as -(k + 1). The page
 * undoes it (report_page.html, "listing"). */
typedef struct text_table {
    char **items;
    size_t n, cap;
    hash_index x;
} text_table;

static size_t text_index(text_table *t, const char *s)
{
    uint64_t h = hash64(s, strlen(s), 0);
    hash_slot *slot = hash_index_first(&t->x, h);
    for (; slot->item; slot = hash_index_next(&t->x, slot))
        if (slot->hash == h && !strcmp(t->items[slot->item - 1], s))
            return slot->item - 1;
    char *copy = xstrdup(s);
    ARRAY_PUSH(t->items, t->n, t->cap, copy);
    hash_index_put(&t->x, slot, h, t->n - 1);
    return t->n - 1;
}

/* The bytes a listing line's hex column shows: pairs of hex digits, each
 * followed by a space or the end, from its start. */
static size_t listed_bytes(const char *rest)
{
    size_t n = 0;
    while (hex_digit(rest[0]) >= 0 && hex_digit(rest[1]) >= 0 && (rest[2] == ' ' || !rest[2])) {
        n++;
        rest += rest[2] ? 3 : 2;
    }
    return n;
}

/* The offset a listing line starts with ("001c: "), or -1. */
static int64_t listed_offset(const char *line)
{
    int64_t v = 0;
    size_t i = 0;
    for (; hex_digit(line[i]) >= 0 && i < 8; i++)
        v = v * 16 + hex_digit(line[i]);
    return i >= 4 && line[i] == ':' && line[i + 1] == ' ' ? v : -1;
}

static void put_listing(strbuf *sb, const char *key, char *const *lines, size_t n,
                        text_table *texts)
{
    put_key(sb, key);
    sb_putc(sb, '[');
    int64_t pc = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t at = listed_offset(lines[i]);
        if (at >= 0 && at == pc) {
            const char *rest = strchr(lines[i], ':') + 2;
            sb_put_dec(sb, (int64_t)text_index(texts, rest));
            pc += (int64_t)listed_bytes(rest);
        } else {
            sb_put_dec(sb, -(int64_t)text_index(texts, lines[i]) - 1);
            if (at >= 0)
                pc = at + (int64_t)listed_bytes(strchr(lines[i], ':') + 2);
        }
        sb_putc(sb, ',');
    }
    close_with(sb, ']');
    sb_putc(sb, ',');
}

static void put_target(strbuf *sb, const rp_target *t, text_table *texts)
{
    size_t code = 0, data = 0, cold = 0, holes = 0;
    for (size_t i = 0; i < t->nstencils; i++) {
        code += t->stencils[i].code;
        data += t->stencils[i].data;
        cold += t->stencils[i].cold;
        holes += t->stencils[i].holes;
    }
    const char *slash = strrchr(t->path, '/');
    sb_putc(sb, '{');
    put_field_str(sb, "triple", t->triple);
    put_field_str(sb, "header", slash ? slash + 1 : t->path);
    put_field_str(sb, "compiler", t->compiler);
    put_field_str(sb, "generator", t->generator);
    put_field_str(sb, "layout", t->layout);
    put_field_num(sb, "stencils", t->nstencils);
    put_field_num(sb, "code", code);
    put_field_num(sb, "data", data);
    put_field_num(sb, "hot", code - cold);
    put_field_num(sb, "cold", cold);
    put_field_num(sb, "holes", holes);
    put_field_str(sb, "shim", t->shim);
    put_field_num(sb, "shim_code", t->shim_code);
    put_strings(sb, "frame", t->frame, t->nframe);
    if (texts)
        put_listing(sb, "shim_listing", t->shim_listing, t->nshim_listing, texts);
    close_with(sb, '}');
    sb_putc(sb, ',');
}

static void put_stencil(strbuf *sb, size_t target, const rp_stencil *s, text_table *texts)
{
    sb_putc(sb, '{');
    put_field_num(sb, "target", target);
    put_field_str(sb, "name", s->name);
    put_field_str(sb, "op", s->op);
    put_field_str(sb, "variant", s->variant);
    put_field_str(sb, "source", s->source);
    put_field_num(sb, "code", s->code);
    put_field_num(sb, "data", s->data);
    put_field_num(sb, "hot", s->code - s->cold);
    put_field_num(sb, "cold", s->cold);
    put_field_num(sb, "holes", s->holes);
    put_counts(sb, "kinds", s->kinds, s->nkinds);
    put_counts(sb, "calls", s->calls, s->ncalls);
    put_strings(sb, "folded", s->folded, s->nfolded);
    if (texts)
        put_listing(sb, "listing", s->listing, s->nlisting, texts);
    close_with(sb, '}');
    sb_putc(sb, ',');
}

static void put_sizes(strbuf *sb, const char *key, const rp_stencil *s)
{
    put_key(sb, key);
    if (!s) {
        sb_puts(sb, "null,");
        return;
    }
    sb_putc(sb, '{');
    put_field_num(sb, "code", s->code);
    put_field_num(sb, "data", s->data);
    put_field_num(sb, "hot", s->code - s->cold);
    put_field_num(sb, "cold", s->cold);
    put_field_num(sb, "holes", s->holes);
    close_with(sb, '}');
    sb_putc(sb, ',');
}

static void put_comparison(strbuf *sb, const rp_options *o, const rp_comparison *c)
{
    put_key(sb, "comparison");
    sb_putc(sb, '{');
    put_strings(sb, "against", o->against, o->nagainst);
    put_key(sb, "totals");
    sb_putc(sb, '[');
    for (size_t i = 0; i < c->ntotals; i++) {
        const rp_totals *t = &c->totals[i];
        sb_putc(sb, '{');
        put_field_str(sb, "triple", t->triple);
        put_field_num(sb, "old_bytes", t->old_bytes);
        put_field_num(sb, "new_bytes", t->new_bytes);
        put_key(sb, "delta");
        sb_put_dec(sb, (int64_t)t->new_bytes - (int64_t)t->old_bytes);
        sb_putc(sb, ',');
        put_field_num(sb, "added", t->added);
        put_field_num(sb, "removed", t->removed);
        put_field_num(sb, "grown", t->grown);
        put_field_num(sb, "shrunk", t->shrunk);
        put_field_num(sb, "unchanged", t->unchanged);
        close_with(sb, '}');
        sb_putc(sb, ',');
    }
    close_with(sb, ']');
    sb_putc(sb, ',');
    put_key(sb, "changes");
    sb_putc(sb, '[');
    for (size_t i = 0; i < c->nchanges; i++) {
        const rp_change *ch = &c->changes[i];
        sb_putc(sb, '{');
        put_field_str(sb, "change", change_names[ch->kind]);
        put_field_str(sb, "target", ch->target->triple);
        put_field_str(sb, "name", (ch->new ? ch->new : ch->old)->name);
        put_sizes(sb, "old", ch->old);
        put_sizes(sb, "new", ch->new);
        put_key(sb, "delta");
        sb_put_dec(sb, ch->delta);
        close_with(sb, '}');
        sb_putc(sb, ',');
    }
    close_with(sb, ']');
    close_with(sb, '}');
    sb_putc(sb, ',');
}

/* The whole report as one JSON object; with `texts`, the page's form (the
 * listings and the frame text besides). */
static void put_report(strbuf *sb, const rp_options *o, const rp_set *set,
                       const rp_comparison *c, bool with_listings)
{
    text_table texts = {0};
    text_table *tt = with_listings ? &texts : NULL;
    sb_putc(sb, '{');
    put_field_str(sb, "report", REPORT_FORMAT);
    put_field_str(sb, "generator", prov_generator());
    put_key(sb, "targets");
    sb_putc(sb, '[');
    for (size_t i = 0; i < set->n; i++)
        put_target(sb, &set->targets[i], tt);
    close_with(sb, ']');
    sb_putc(sb, ',');
    put_key(sb, "stencils");
    sb_putc(sb, '[');
    for (size_t i = 0; i < set->n; i++)
        for (size_t k = 0; k < set->targets[i].nstencils; k++)
            put_stencil(sb, i, &set->targets[i].stencils[k], tt);
    close_with(sb, ']');
    sb_putc(sb, ',');
    if (o->nagainst)
        put_comparison(sb, o, c);
    if (tt)
        put_strings(sb, "texts", texts.items, texts.n);
    close_with(sb, '}');
    for (size_t i = 0; i < texts.n; i++)
        free(texts.items[i]);
    free(texts.items);
    hash_index_free(&texts.x);
}

/* The page with the facts in place of its mark. */
static bool put_page(strbuf *sb, const rp_options *o, const rp_set *set,
                     const rp_comparison *c)
{
    /* embed.py's array has no NUL: searched by its size. */
    const char *page = sg_report_page;
    const char *mark = memmem(page, sg_report_page_size, DATA_MARK, strlen(DATA_MARK));
    if (!mark) {
        diag_error("report: the generator's page template has no data mark (a broken build)");
        return false;
    }
    sb_putn(sb, page, (size_t)(mark - page));
    sb_puts(sb, "<script id=\"sg-data\" type=\"application/json\">");
    put_report(sb, o, set, c, true);
    sb_puts(sb, "</script>");
    const char *rest = mark + strlen(DATA_MARK);
    sb_putn(sb, rest, sg_report_page_size - (size_t)(rest - page));
    return true;
}

/* ---- the command ---- */

static const char rp_usage[] =
    "usage: stencilgen report [-o FILE] [--format html|json] [--against DIR]...\n"
    "                         [--max-growth PERCENT] DIR...\n"
    "  DIR: a directory of generated headers (jit_stencils-*.h) or one header;\n"
    "  -o: the file to write (default: standard output); --against: the set to\n"
    "  compare with; --max-growth: exit 1 if a stencil or a target grew more\n"
    "  than PERCENT (e.g. 5%) since --against.\n"
    "Exit codes: 0 written, 1 written and over --max-growth (named), 2 bad input.\n";

static int rp_usage_error(const char *what, const char *arg)
{
    fprintf(stderr, "stencilgen: error: report: ");
    fprintf(stderr, what, arg);
    fprintf(stderr, "\n%s", rp_usage);
    return SG_EXIT_USAGE;
}

static bool parse_percent(const char *s, double *v)
{
    char *end;
    errno = 0;
    *v = strtod(s, &end);
    if (end == s || errno || !isfinite(*v) || *v < 0 || *v > 1e6)
        return false;
    return !*end || (end[0] == '%' && !end[1]);
}

enum { RP_FORMAT = 256, RP_AGAINST, RP_MAX_GROWTH, RP_HELP };

static int parse_rp_options(int argc, char **argv, rp_options *o)
{
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'},
        {"format", required_argument, NULL, RP_FORMAT},
        {"against", required_argument, NULL, RP_AGAINST},
        {"max-growth", required_argument, NULL, RP_MAX_GROWTH},
        {"help", no_argument, NULL, RP_HELP},
        {NULL, 0, NULL, 0},
    };
    size_t cap = 0;
    o->max_growth = -1;
    opterr = 0;
    for (int c; (c = getopt_long(argc, argv, "o:", opts, NULL)) != -1;) {
        switch (c) {
        case 'o': o->out = optarg; break;
        case RP_FORMAT:
            if (strcmp(optarg, "html") && strcmp(optarg, "json"))
                return rp_usage_error("--format wants html or json, got '%s'", optarg);
            o->json = !strcmp(optarg, "json");
            break;
        case RP_AGAINST: ARRAY_PUSH(o->against, o->nagainst, cap, optarg); break;
        case RP_MAX_GROWTH:
            if (!parse_percent(optarg, &o->max_growth))
                return rp_usage_error("--max-growth wants a percentage such as 5%%, got '%s'",
                                      optarg);
            break;
        case RP_HELP: fputs(rp_usage, stdout); return SG_EXIT_OK;
        default: return rp_usage_error("unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    o->dirs = argv + optind;
    o->ndirs = (size_t)(argc - optind);
    if (!o->ndirs)
        return rp_usage_error("%s", "needs a directory of generated headers");
    if (o->max_growth >= 0 && !o->nagainst)
        return rp_usage_error("%s", "--max-growth needs --against DIR");
    if (o->out && !*o->out)
        return rp_usage_error("%s", "-o is empty");
    return -1;
}

static bool write_out(const char *out, const strbuf *sb)
{
    if (!out || !strcmp(out, "-")) {
        if (fwrite(sb->data, 1, sb->len, stdout) != sb->len || fflush(stdout)) {
            diag_error("report: cannot write standard output: %s", strerror(errno));
            return false;
        }
        return true;
    }
    if (!write_file_atomic(out, sb->data, sb->len)) {
        diag_error("report: cannot write %s: %s", out, strerror(errno));
        return false;
    }
    return true;
}

static int run_report(const rp_options *o)
{
    rp_set set = {0}, old = {0};
    rp_comparison c = {0};
    strbuf sb = {0};
    int rc = SG_EXIT_USAGE;
    if (!load_set(o->dirs, o->ndirs, &set) || !load_set(o->against, o->nagainst, &old))
        goto out;
    compare(&old, &set, &c);
    sb_reserve(&sb, 1 << 20);
    if (o->json) {
        put_report(&sb, o, &set, &c, false);
        sb_putc(&sb, '\n');
    } else if (!put_page(&sb, o, &set, &c)) {
        goto out;
    }
    if (!write_out(o->out, &sb))
        goto out;
    rc = o->max_growth >= 0 && !within_budget(&c, o->max_growth) ? SG_EXIT_CHECK : SG_EXIT_OK;
out:
    sb_free(&sb);
    free(c.changes);
    free(c.totals);
    set_free(&set);
    set_free(&old);
    return rc;
}

int report_main(int argc, char **argv)
{
    rp_options o = {0};
    int rc = parse_rp_options(argc, argv, &o);
    if (rc < 0)
        rc = run_report(&o);
    free(o.against);
    return rc;
}
