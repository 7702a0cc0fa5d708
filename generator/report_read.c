/* report_read.c - a generated target header read back for `stencilgen
 * report`. The header is its own record: the stencil table gives the order,
 * names and sizes, the hole arrays the holes, the enum's folded macros and
 * the variant tables which variants share a stencil, the comments the
 * listings, the frame facts and the provenance. Nothing here needs LLVM.
 * The file may come from anywhere (an old release, a CI artifact), so
 * every read is checked and a damaged file is an error that names its line. */
#include "report_read.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "diag.h"
#include "util.h"

typedef struct pending {
    rp_stencil s;
    bool has_code;  /* sg_code_<id> seen */
    bool in_table;  /* a row of sg_stencils */
    char *listing_name; /* the comment's "NAME - SOURCE" name */
} pending;

typedef struct folded_pair {
    char *id, *twin; /* SG_OP_<id> is SG_OP_<twin> */
} folded_pair;

typedef struct variant_name {
    char *id, *name; /* a variant's C name and its "op[axis=value]" name */
} variant_name;

typedef struct reader {
    const char *path;
    char **lines; /* into text, each NUL-terminated */
    size_t nlines;
    size_t at; /* the line being read */
    rp_target *t;
    pending *ids; /* every sg_code_<id> and sg_stencils row, by id */
    size_t nids, cap_ids;
    hash_index index;
    char **symbols;
    size_t nsymbols, cap_symbols;
    folded_pair *folded;
    size_t nfolded, cap_folded;
    variant_name *variants;
    size_t nvariants, cap_variants;
    size_t *order; /* ids' indexes in sg_stencils order */
    size_t norder, cap_order;
    bool failed;
} reader;

static bool fail(reader *r, size_t col, const char *what)
{
    if (!r->failed)
        diag_error_at(r->path, (unsigned)r->at + 1, (unsigned)col, "%s", what);
    r->failed = true;
    return false;
}

static bool starts(const char *s, const char *prefix)
{
    return !strncmp(s, prefix, strlen(prefix));
}

/* The pending stencil of C name [id, id + n), made on first mention. */
static pending *by_id(reader *r, const char *id, size_t n)
{
    uint64_t h = hash64(id, n, 0);
    hash_slot *s = hash_index_first(&r->index, h);
    for (; s->item; s = hash_index_next(&r->index, s)) {
        pending *p = &r->ids[s->item - 1];
        if (s->hash == h && strlen(p->s.id) == n && !memcmp(p->s.id, id, n))
            return p;
    }
    pending fresh = {.s = {.id = xstrndup(id, n)}};
    ARRAY_PUSH(r->ids, r->nids, r->cap_ids, fresh);
    hash_index_put(&r->index, s, h, r->nids - 1);
    return &r->ids[r->nids - 1];
}

static size_t ident_len(const char *s)
{
    size_t n = 0;
    while (s[n] == '_' || (s[n] >= 'a' && s[n] <= 'z') || (s[n] >= 'A' && s[n] <= 'Z') ||
           (s[n] >= '0' && s[n] <= '9'))
        n++;
    return n;
}

/* A decimal or 0x number at *p, moved past; false if there is none or it
 * is out of range. */
static bool read_number(const char **p, int64_t *v)
{
    const char *s = *p;
    bool neg = *s == '-';
    s += neg;
    int base = (s[0] == '0' && s[1] == 'x') ? 16 : 10;
    s += base == 16 ? 2 : 0;
    uint64_t x = 0;
    const char *digits = s;
    for (;; s++) {
        int d = base == 16 ? hex_digit(*s) : (*s >= '0' && *s <= '9') ? *s - '0' : -1;
        if (d < 0)
            break;
        if (x > (UINT64_MAX - (uint64_t)d) / (uint64_t)base || x > INT64_MAX)
            return false;
        x = x * (uint64_t)base + (uint64_t)d;
    }
    if (s == digits || x > INT64_MAX)
        return false;
    *v = neg ? -(int64_t)x : (int64_t)x;
    *p = s;
    return true;
}

static bool expect(reader *r, const char **p, const char *text)
{
    if (!starts(*p, text)) {
        strbuf m = {0};
        sb_printf(&m, "expected '%s' here", text);
        fail(r, (size_t)(*p - r->lines[r->at]) + 1, m.data);
        sb_free(&m);
        return false;
    }
    *p += strlen(text);
    return true;
}

/* "[<N>] = {" or "[<N>] = {...": the array's declared length. */
static bool array_length(reader *r, const char **p, size_t *n)
{
    int64_t v;
    if (!expect(r, p, "["))
        return false;
    if (!read_number(p, &v) || v < 0 || v > (int64_t)(1u << 30))
        return fail(r, (size_t)(*p - r->lines[r->at]) + 1, "an array length is not a number");
    *n = (size_t)v;
    return expect(r, p, "]");
}

/* A C string at *p (the generator writes names and paths with \ escapes
 * of '"' and '\\' only), moved past. */
static char *read_string(reader *r, const char **p)
{
    if (!expect(r, p, "\""))
        return NULL;
    strbuf sb = {0};
    sb_puts(&sb, "");
    const char *s = *p;
    for (; *s && *s != '"'; s++) {
        if (*s == '\\' && s[1])
            s++;
        sb_putc(&sb, *s);
    }
    if (*s != '"') {
        sb_free(&sb);
        fail(r, (size_t)(s - r->lines[r->at]) + 1, "a string is not closed");
        return NULL;
    }
    *p = s + 1;
    return sb.data;
}

static void count_add(rp_count **items, size_t *n, const char *name)
{
    for (size_t i = 0; i < *n; i++) {
        if (!strcmp((*items)[i].name, name)) {
            (*items)[i].n++;
            return;
        }
    }
    size_t cap = *n; /* grown one at a time: a stencil has a few kinds */
    rp_count c = {xstrdup(name), 1};
    ARRAY_PUSH(*items, *n, cap, c);
}

/* "    {0x10, SG_PATCH_X86_BRANCH32, SG_VALUE_SYMBOL, 1, -4}, ..." */
static bool read_hole(reader *r, const char *line, rp_stencil *s)
{
    const char *p = line;
    int64_t offset, index, addend;
    if (!expect(r, &p, "    {") || !read_number(&p, &offset) || !expect(r, &p, ", SG_PATCH_"))
        return r->failed ? false : fail(r, 6, "a hole's offset is not a number");
    size_t kind = ident_len(p);
    char *patch = xstrndup(p, kind);
    p += kind;
    bool ok = expect(r, &p, ", SG_VALUE_");
    size_t value = ok ? ident_len(p) : 0;
    bool symbol = ok && value == 6 && !memcmp(p, "SYMBOL", 6);
    p += value;
    ok = ok && expect(r, &p, ", ") && read_number(&p, &index) && expect(r, &p, ", ") &&
         read_number(&p, &addend) && expect(r, &p, "}");
    if (ok && (!kind || !value))
        ok = fail(r, 1, "a hole names no patch kind or value");
    if (ok && (offset < 0 || (size_t)offset >= s->code + s->data))
        ok = fail(r, 6, "a hole's offset is outside its stencil");
    if (ok && symbol && (index < 0 || (size_t)index >= r->nsymbols))
        ok = fail(r, 1, "a hole names a symbol that sg_symbol_names does not list");
    if (!ok) {
        if (!r->failed)
            fail(r, (size_t)(p - line) + 1, "a hole row is malformed");
        free(patch);
        return false;
    }
    s->holes++;
    count_add(&s->kinds, &s->nkinds, patch);
    if (symbol)
        count_add(&s->calls, &s->ncalls, r->symbols[index]);
    free(patch);
    return true;
}

/* The rows after an array's "= {" up to its "};", each given to row(). */
static bool read_rows(reader *r, size_t expected, bool (*row)(reader *, const char *, void *),
                      void *arg)
{
    size_t n = 0;
    for (r->at++; r->at < r->nlines && strcmp(r->lines[r->at], "};"); r->at++, n++)
        if (!row(r, r->lines[r->at], arg))
            return false;
    if (r->at == r->nlines)
        return fail(r, 1, "an array is not closed by '};'");
    if (expected != (size_t)-1 && n != expected)
        return fail(r, 1, "an array has another number of rows than its declared length");
    return true;
}

static bool hole_row(reader *r, const char *line, void *s)
{
    return read_hole(r, line, s);
}

static bool symbol_row(reader *r, const char *line, void *unused)
{
    (void)unused;
    const char *p = line;
    if (!strcmp(line, "    NULL"))
        return true;
    if (!expect(r, &p, "    "))
        return false;
    char *name = read_string(r, &p);
    if (!name)
        return false;
    ARRAY_PUSH(r->symbols, r->nsymbols, r->cap_symbols, name);
    return expect(r, &p, ",");
}

/* "    /\* SG_OP_<id> *\/ {"<name>", sg_code_<id>, <code>, <data or NULL>, <data size>, ..." */
static bool stencil_row(reader *r, const char *line, void *unused)
{
    (void)unused;
    const char *p = line;
    if (!expect(r, &p, "    /* SG_OP_"))
        return false;
    size_t n = ident_len(p);
    pending *s = by_id(r, p, n);
    if (s->in_table)
        return fail(r, 14, "a stencil has two rows in sg_stencils");
    p += n;
    if (!expect(r, &p, " */ {"))
        return false;
    char *name = read_string(r, &p);
    if (!name)
        return false;
    free(s->s.name);
    s->s.name = name;
    int64_t code, data;
    if (!expect(r, &p, ", sg_code_"))
        return false;
    p += ident_len(p);
    if (!expect(r, &p, ", ") || !read_number(&p, &code) || !expect(r, &p, ", "))
        return r->failed ? false : fail(r, (size_t)(p - line) + 1, "a code size is not a number");
    if (starts(p, "NULL"))
        p += 4;
    else if (expect(r, &p, "sg_data_"))
        p += ident_len(p);
    else
        return false;
    if (!expect(r, &p, ", ") || !read_number(&p, &data))
        return r->failed ? false : fail(r, (size_t)(p - line) + 1, "a data size is not a number");
    if (!s->has_code || (size_t)code != s->s.code || (data && (size_t)data != s->s.data) ||
        (!data && s->s.data))
        return fail(r, 1, "a row of sg_stencils disagrees with its stencil's arrays");
    s->in_table = true;
    size_t at = (size_t)(s - r->ids);
    ARRAY_PUSH(r->order, r->norder, r->cap_order, at);
    return true;
}

typedef struct cold_state {
    size_t next;
} cold_state;

/* "    17, /\* name *\/", in sg_stencils order. */
static bool cold_row(reader *r, const char *line, void *arg)
{
    cold_state *c = arg;
    const char *p = line;
    int64_t v;
    if (!expect(r, &p, "    ") || !read_number(&p, &v) || v < 0)
        return r->failed ? false : fail(r, 5, "a cold size is not a number");
    if (c->next >= r->norder)
        return fail(r, 1, "sg_cold_sizes has more rows than sg_stencils");
    rp_stencil *s = &r->ids[r->order[c->next++]].s;
    if ((size_t)v > s->code)
        return fail(r, 5, "a cold part is larger than its stencil's code");
    s->cold = (size_t)v;
    return true;
}

typedef struct variant_state {
    const char *op;
    size_t *first, *last; /* per axis */
    char **axes;
    size_t naxes;
    size_t next; /* the combination the next SG_OP_ names */
} variant_state;

/* "    SG_OP_a, SG_OP_b," : the stencil of each combination in order. */
static bool variant_row(reader *r, const char *line, void *arg)
{
    variant_state *v = arg;
    for (const char *p = line; *p;) {
        if (*p == ' ' || *p == ',') {
            p++;
            continue;
        }
        if (!expect(r, &p, "SG_OP_"))
            return false;
        size_t n = ident_len(p);
        strbuf name = {0};
        sb_printf(&name, "%s[", v->op);
        size_t rest = v->next++;
        size_t *values = xcalloc(v->naxes ? v->naxes : 1, sizeof *values);
        for (size_t a = v->naxes; a-- > 0;) {
            size_t span = v->last[a] - v->first[a] + 1;
            values[a] = v->first[a] + rest % span;
            rest /= span;
        }
        for (size_t a = 0; a < v->naxes; a++)
            sb_printf(&name, "%s%s=%zu", a ? "," : "", v->axes[a], values[a]);
        sb_putc(&name, ']');
        free(values);
        variant_name vn = {xstrndup(p, n), name.data};
        ARRAY_PUSH(r->variants, r->nvariants, r->cap_variants, vn);
        p += n;
    }
    return true;
}

/* "static const sg_variant_axis sg_variant_axes_<op>[K] = {{"n", 0, 3}, ...};"
 * and the next line's sg_variant_stencils_<op>. */
static bool read_variant_op(reader *r, const char *p)
{
    variant_state v = {0};
    size_t nop = ident_len(p), k;
    char *op = xstrndup(p, nop);
    p += nop;
    bool ok = array_length(r, &p, &k) && expect(r, &p, " = {");
    size_t cap = 0, total = 1;
    v.first = xcalloc(k ? k : 1, sizeof *v.first);
    v.last = xcalloc(k ? k : 1, sizeof *v.last);
    for (size_t a = 0; ok && a < k; a++) {
        int64_t lo, hi;
        ok = (!a || expect(r, &p, ", ")) && expect(r, &p, "{");
        char *axis = ok ? read_string(r, &p) : NULL;
        ok = axis && expect(r, &p, ", ") && read_number(&p, &lo) && expect(r, &p, ", ") &&
             read_number(&p, &hi) && expect(r, &p, "}");
        if (axis)
            ARRAY_PUSH(v.axes, v.naxes, cap, axis);
        if (ok && (lo < 0 || hi < lo || hi - lo >= 1 << 16))
            ok = fail(r, 1, "a variant axis' range is malformed");
        if (ok) {
            v.first[a] = (size_t)lo;
            v.last[a] = (size_t)hi;
            total *= (size_t)(hi - lo + 1);
            if (total > 1u << 20)
                ok = fail(r, 1, "a variant op has more combinations than a header can hold");
        }
    }
    ok = ok && expect(r, &p, "};");
    if (ok) {
        r->at++;
        const char *q = r->at < r->nlines ? r->lines[r->at] : "";
        size_t n;
        ok = expect(r, &q, "static const uint32_t sg_variant_stencils_") &&
             (q += ident_len(q), array_length(r, &q, &n)) && expect(r, &q, " = {");
        if (ok && n != total)
            ok = fail(r, 1, "a variant op's stencils do not match its axes");
        v.op = op;
        ok = ok && read_rows(r, (size_t)-1, variant_row, &v);
        if (ok && v.next != total)
            ok = fail(r, 1, "a variant op's stencils do not match its axes");
    }
    for (size_t a = 0; a < v.naxes; a++)
        free(v.axes[a]);
    free(v.axes);
    free(v.first);
    free(v.last);
    free(op);
    return ok;
}

/* "#define SG_OP_<a> SG_OP_<b> /\* folded: ...": a folded variant. */
static void read_op_macro(reader *r, const char *p)
{
    size_t a = ident_len(p);
    if (!starts(p + a, " SG_OP_"))
        return;
    const char *b = p + a + strlen(" SG_OP_");
    size_t nb = ident_len(b);
    if (a == nb && !memcmp(p, b, a))
        return;
    folded_pair f = {xstrndup(p, a), xstrndup(b, nb)};
    ARRAY_PUSH(r->folded, r->nfolded, r->cap_folded, f);
}

static char *comment_text(const char *line)
{
    return xstrdup(starts(line, " *   ") ? line + 5 : starts(line, " * ") ? line + 3 : line);
}

/* The comment block ending on the line before this one: "/\* NAME - SOURCE"
 * and its listing. Returns its first line, or (size_t)-1. */
static size_t comment_above(const reader *r)
{
    if (!r->at || strcmp(r->lines[r->at - 1], " */"))
        return (size_t)-1;
    size_t i = r->at - 1;
    while (i > 0 && !starts(r->lines[i], "/* "))
        i--;
    return starts(r->lines[i], "/* ") ? i : (size_t)-1;
}

/* "static const uint8_t sg_code_<id>[N] = {": its size, and the listing above. */
static bool read_code(reader *r, const char *p, bool data)
{
    size_t n = ident_len(p), size;
    pending *s = by_id(r, p, n);
    bool shim = n == 4 && !memcmp(p, "shim", 4);
    p += n;
    if (!array_length(r, &p, &size))
        return false;
    if (data) {
        s->s.data = size;
        return true;
    }
    if (s->has_code)
        return fail(r, 1, "a stencil's code is given twice");
    s->has_code = true;
    s->s.code = size;
    size_t top = comment_above(r);
    if (top == (size_t)-1)
        return true; /* not a generated listing: the table's name stands */
    const char *head = r->lines[top] + 3, *dash = strstr(head, " - ");
    if (dash) {
        s->listing_name = xstrndup(head, (size_t)(dash - head));
        free(s->s.source);
        s->s.source = xstrdup(dash + 3);
    }
    char ***lines = shim ? &r->t->shim_listing : &s->s.listing;
    size_t *count = shim ? &r->t->nshim_listing : &s->s.nlisting, cap = 0;
    for (size_t i = top + 1; i + 1 < r->at; i++) {
        char *text = comment_text(r->lines[i]);
        ARRAY_PUSH(*lines, *count, cap, text);
    }
    if (shim) {
        free(r->t->shim);
        r->t->shim = s->listing_name ? xstrdup(s->listing_name) : xstrdup("shim");
        r->t->shim_code = size;
    }
    return true;
}

/* From "Unwind facts" on: the comments and constants, not the byte arrays. */
static void read_frame(reader *r)
{
    size_t cap = 0;
    for (; r->at < r->nlines; r->at++) {
        const char *l = r->lines[r->at];
        if (starts(l, "/* Provenance") || starts(l, "#endif /* JIT_STENCILS")) {
            r->at--;
            return;
        }
        if (starts(l, "static const") || starts(l, "    0x") || !strcmp(l, "};") || !*l)
            continue;
        bool comment = starts(l, "/* ") || starts(l, " *");
        char *text = starts(l, "/* ") ? xstrdup(l + 3) : comment_text(l);
        size_t len = strlen(text);
        if (comment && len >= 2 && !strcmp(text + len - 2, "*/"))
            text[len - 2 - (len > 2 && text[len - 3] == ' ')] = '\0';
        if (!*text) {
            free(text);
            continue;
        }
        ARRAY_PUSH(r->t->frame, r->t->nframe, cap, text);
    }
}

static void read_provenance_line(reader *r, const char *l)
{
    static const struct {
        const char *key;
        size_t field;
    } keys[] = {
        {" * sg-compiler ", offsetof(rp_target, compiler)},
        {" * sg-generator ", offsetof(rp_target, generator)},
        {" * sg-layout ", offsetof(rp_target, layout)},
    };
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        if (starts(l, keys[k].key)) {
            char **field = (char **)((char *)r->t + keys[k].field);
            free(*field);
            *field = xstrdup(l + strlen(keys[k].key));
        }
    }
}

static bool read_line(reader *r)
{
    const char *l = r->lines[r->at], *p;
    if (starts(l, "#define SG_TARGET_TRIPLE ")) {
        p = l + strlen("#define SG_TARGET_TRIPLE ");
        char *triple = read_string(r, &p);
        if (!triple)
            return false;
        free(r->t->triple);
        r->t->triple = triple;
    } else if (starts(l, "static const uint8_t sg_code_")) {
        return read_code(r, l + strlen("static const uint8_t sg_code_"), false);
    } else if (starts(l, "static const uint8_t sg_data_")) {
        return read_code(r, l + strlen("static const uint8_t sg_data_"), true);
    } else if (starts(l, "static const sg_hole sg_code_holes_") ||
               starts(l, "static const sg_hole sg_data_holes_")) {
        p = l + strlen("static const sg_hole sg_code_holes_");
        size_t n = ident_len(p), count;
        pending *s = by_id(r, p, n);
        p += n;
        if (!s->has_code)
            return fail(r, 1, "holes come before their stencil's code");
        return array_length(r, &p, &count) && read_rows(r, count, hole_row, &s->s);
    } else if (starts(l, "static const char *const sg_symbol_names[")) {
        return read_rows(r, (size_t)-1, symbol_row, NULL);
    } else if (starts(l, "#define SG_OP_")) {
        read_op_macro(r, l + strlen("#define SG_OP_"));
    } else if (starts(l, "static const sg_variant_axis sg_variant_axes_")) {
        return read_variant_op(r, l + strlen("static const sg_variant_axis sg_variant_axes_"));
    } else if (starts(l, "static const sg_stencil sg_stencils[")) {
        return read_rows(r, (size_t)-1, stencil_row, NULL);
    } else if (starts(l, "static const size_t sg_cold_sizes[")) {
        cold_state c = {0};
        if (!read_rows(r, (size_t)-1, cold_row, &c))
            return false;
        if (c.next != r->norder)
            return fail(r, 1, "sg_cold_sizes has fewer rows than sg_stencils");
    } else if (starts(l, "/* Unwind facts")) {
        read_frame(r);
    } else if (starts(l, " * sg-")) {
        read_provenance_line(r, l);
    }
    return true;
}

/* "load[n=3]" -> op "load", variant "n=3". */
static void split_name(rp_stencil *s)
{
    const char *open = strchr(s->name, '[');
    size_t len = strlen(s->name);
    if (open && len && s->name[len - 1] == ']') {
        s->op = xstrndup(s->name, (size_t)(open - s->name));
        s->variant = xstrndup(open + 1, len - (size_t)(open - s->name) - 2);
    } else {
        s->op = xstrdup(s->name);
        s->variant = xstrdup("");
    }
}

static const char *variant_display(const reader *r, const char *id)
{
    for (size_t i = 0; i < r->nvariants; i++)
        if (!strcmp(r->variants[i].id, id))
            return r->variants[i].name;
    return id;
}

/* The table's stencils, in order, with their folded variants. */
static bool finish(reader *r)
{
    rp_target *t = r->t;
    const char *missing = !t->triple ? "it defines no SG_TARGET_TRIPLE"
                          : !r->norder ? "it has no sg_stencils table"
                                       : NULL;
    if (missing) { /* about the whole file: no line */
        diag_error_at(r->path, 0, 0, "not a stencilgen target header: %s", missing);
        return false;
    }
    t->stencils = xcalloc(r->norder, sizeof *t->stencils);
    for (size_t i = 0; i < r->norder; i++) {
        pending *p = &r->ids[r->order[i]];
        for (size_t f = 0; f < r->nfolded; f++) {
            if (strcmp(r->folded[f].twin, p->s.id))
                continue;
            size_t cap = p->s.nfolded;
            char *name = xstrdup(variant_display(r, r->folded[f].id));
            ARRAY_PUSH(p->s.folded, p->s.nfolded, cap, name);
        }
        if (!p->s.source)
            p->s.source = xstrdup("");
        split_name(&p->s);
        t->stencils[t->nstencils++] = p->s;
        p->s = (rp_stencil){0}; /* moved */
    }
    char **provenance[] = {&t->compiler, &t->generator, &t->layout};
    for (size_t i = 0; i < sizeof provenance / sizeof provenance[0]; i++)
        if (!*provenance[i])
            *provenance[i] = xstrdup("");
    if (!t->shim)
        t->shim = xstrdup("");
    return true;
}

static void stencil_free(rp_stencil *s)
{
    free(s->id);
    free(s->name);
    free(s->op);
    free(s->variant);
    free(s->source);
    for (size_t i = 0; i < s->nkinds; i++)
        free(s->kinds[i].name);
    for (size_t i = 0; i < s->ncalls; i++)
        free(s->calls[i].name);
    for (size_t i = 0; i < s->nfolded; i++)
        free(s->folded[i]);
    for (size_t i = 0; i < s->nlisting; i++)
        free(s->listing[i]);
    free(s->kinds);
    free(s->calls);
    free(s->folded);
    free(s->listing);
}

static void reader_free(reader *r)
{
    for (size_t i = 0; i < r->nids; i++) {
        stencil_free(&r->ids[i].s);
        free(r->ids[i].listing_name);
    }
    for (size_t i = 0; i < r->nsymbols; i++)
        free(r->symbols[i]);
    for (size_t i = 0; i < r->nfolded; i++) {
        free(r->folded[i].id);
        free(r->folded[i].twin);
    }
    for (size_t i = 0; i < r->nvariants; i++) {
        free(r->variants[i].id);
        free(r->variants[i].name);
    }
    free(r->ids);
    free(r->symbols);
    free(r->folded);
    free(r->variants);
    free(r->order);
    free(r->lines);
    hash_index_free(&r->index);
}

/* The text split into lines in place; false if it holds a NUL byte. */
static bool split_lines(char *text, size_t size, reader *r)
{
    if (memchr(text, '\0', size))
        return false;
    size_t cap = 0;
    for (char *p = text; p < text + size;) {
        char *nl = memchr(p, '\n', (size_t)(text + size - p));
        char *end = nl ? nl : text + size;
        if (end > p && end[-1] == '\r')
            end[-1] = '\0';
        *end = '\0';
        ARRAY_PUSH(r->lines, r->nlines, cap, p);
        p = end + 1;
    }
    return true;
}

bool rp_read_header(const char *path, rp_target *t)
{
    uint8_t *data;
    size_t size;
    if (!read_file(path, &data, &size)) {
        *t = (rp_target){0};
        diag_error("cannot read %s: %s", path, strerror(errno));
        return false;
    }
    bool ok = rp_read_text(path, data, size, t);
    free(data);
    return ok;
}

bool rp_read_text(const char *path, const void *data, size_t size, rp_target *t)
{
    *t = (rp_target){.path = xstrdup(path)};
    char *text = xmalloc(size + 1); /* split into lines in place */
    memcpy(text, data, size);
    text[size] = '\0';
    reader r = {.path = path, .t = t};
    bool ok = split_lines(text, size, &r);
    if (!ok)
        diag_error_at(path, 0, 0, "not a stencilgen target header: it holds NUL bytes");
    for (r.at = 0; ok && r.at < r.nlines; r.at++)
        ok = read_line(&r);
    ok = ok && finish(&r);
    reader_free(&r);
    free(text);
    if (!ok)
        rp_target_free(t);
    return ok;
}

void rp_target_free(rp_target *t)
{
    for (size_t i = 0; i < t->nstencils; i++)
        stencil_free(&t->stencils[i]);
    for (size_t i = 0; i < t->nshim_listing; i++)
        free(t->shim_listing[i]);
    for (size_t i = 0; i < t->nframe; i++)
        free(t->frame[i]);
    free(t->stencils);
    free(t->shim_listing);
    free(t->frame);
    free(t->path);
    free(t->triple);
    free(t->compiler);
    free(t->generator);
    free(t->layout);
    free(t->shim);
    *t = (rp_target){0};
}
