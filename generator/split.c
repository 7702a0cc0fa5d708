/* split.c - see split.h. */
#define _GNU_SOURCE
#include "split.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llvm_bridge.h"
#include "stencil.h"
#include "util.h"

/* A batch section, or the block of one in a merged constant section, that
 * goes into the op's object. */
typedef struct member {
    int sec;           /* in the batch object */
    uint64_t from, to; /* the bytes taken */
    bool whole;        /* the whole section (a pool block has no relocations of its own) */
    bool ranged;       /* a Mach-O function: [from, to) of __text, with its relocations */
    int group;         /* the output section */
    uint64_t at;       /* where `from` lands in it */
    long pool_first;   /* a pool block: the index of its first constant; -1: not a pool */
} member;

typedef struct splitter {
    const objfile *in;
    member *members;
    size_t nmembers, cap;
    long pool_function; /* n of the .LCPI<n>_ labels of the op's constants; -1: none yet */
    bool *theirs;       /* per batch section: another op of the batch reaches it */
    char *why;
    size_t whysz;
} splitter;

static int member_of(const splitter *s, int sec)
{
    for (size_t i = 0; i < s->nmembers; i++)
        if (s->members[i].sec == sec)
            return (int)i;
    return -1;
}

/* COFF: -ffunction-sections and -fdata-sections give each definition a
 * COMDAT section named after the kind of section and the definition
 * (.text$op_add, .rdata$table), which folds back into the kind's section in
 * the op's own unit. A section named in the source (section(".rdata$x")) is
 * no COMDAT and keeps its name, as it does there. (ELF names need no folding:
 * flags_batch compiles with -fno-unique-section-names, so a definition's
 * section is named .rodata, .text, .data.rel.ro, as in its own unit, and
 * one named in the source, .rodata.tb say, keeps that name.) */
static const char *const coff_kinds[] = {".rdata", ".data", ".bss", ".text", NULL};

static const char *output_name(const objfile *o, int sec)
{
    const char *name = o->secs[sec].name;
    if (o->kind != OBJ_FORMAT_COFF || !o->secs[sec].comdat)
        return name;
    for (const char *const *p = coff_kinds; *p; p++) {
        size_t n = strlen(*p);
        if (!strncmp(name, *p, n) && name[n] == '$')
            return *p;
    }
    return name;
}

/* The n and k of a constant-pool label ".LCPI<n>_<k>", or false. */
static bool pool_label(const char *name, long *n, const char **k)
{
    if (strncmp(name, ".LCPI", 5))
        return false;
    char *end;
    *n = strtol(name + 5, &end, 10);
    if (end == name + 5 || *end != '_' || !end[1])
        return false;
    *k = end + 1;
    return true;
}

/* The block of the op's constants in a merged constant section: from its
 * first .LCPI<n>_ label to the next label of another function (or the end).
 * A function's pool is emitted in one piece, before its code. */
static void add_pool_block(splitter *s, int sec, long n)
{
    const objfile *o = s->in;
    uint64_t from = UINT64_MAX, last = 0;
    long first = -1;
    for (size_t i = 0; i < o->nsyms; i++) {
        long m;
        const char *k;
        if (o->syms[i].section != sec || !pool_label(o->syms[i].name, &m, &k) || m != n)
            continue;
        from = o->syms[i].value < from ? o->syms[i].value : from;
        last = o->syms[i].value > last ? o->syms[i].value : last;
        long index = strtol(k, NULL, 10);
        first = first < 0 || index < first ? index : first;
    }
    uint64_t to = o->secs[sec].size;
    for (size_t i = 0; i < o->nsyms; i++)
        if (o->syms[i].section == sec && !o->syms[i].is_section && o->syms[i].value > last &&
            o->syms[i].value < to)
            to = o->syms[i].value;
    member m = {sec, from, to, false, false, 0, 0, first};
    ARRAY_PUSH(s->members, s->nmembers, s->cap, m);
}

static split_result refuse(splitter *s, split_result r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static split_result refuse(splitter *s, split_result r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->why, s->whysz, fmt, ap);
    va_end(ap);
    return r;
}

/* What a relocation of the op's code or data reaches joins the op's object. */
static split_result follow(splitter *s, const obj_reloc *r, int entry_sec)
{
    const objfile *o = s->in;
    if (r->symbol < 0)
        return SPLIT_OK; /* stencil_extract names it */
    const obj_symbol *sym = &o->syms[r->symbol];
    if (sym->undefined || sym->section < 0 || o->secs[sym->section].kind == OBJ_SEC_OTHER)
        return SPLIT_OK; /* a hole, or something stencil_extract refuses in both modes */
    const obj_section *t = &o->secs[sym->section];
    if (t->merge) {
        long n;
        const char *k;
        if (t->strings)
            return refuse(s, SPLIT_ALONE, "it uses a string literal (in '%s', whose order is "
                          "the whole unit's)", t->name);
        if (sym->is_section || !pool_label(sym->name, &n, &k) ||
            (s->pool_function >= 0 && n != s->pool_function))
            return refuse(s, SPLIT_ALONE, "it refers to merged constants ('%s') that are not "
                          "its own constant pool", sym->name);
        s->pool_function = n;
        if (member_of(s, sym->section) < 0)
            add_pool_block(s, sym->section, n);
        return SPLIT_OK;
    }
    if (t->kind == OBJ_SEC_CODE && sym->section != entry_sec)
        return refuse(s, SPLIT_ALONE, "it calls '%s', which the compiler did not inline (in "
                      "the op's own unit it may be)", sym->name);
    if (member_of(s, sym->section) < 0) {
        member m = {sym->section, 0, t->size, true, false, 0, 0, -1};
        ARRAY_PUSH(s->members, s->nmembers, s->cap, m);
    }
    return SPLIT_OK;
}

/* The first of section sec's relocations (they are sorted by section): a
 * batch of hundreds of ops is split hundreds of times, so each section's
 * relocations are found without scanning them all. */
static size_t first_reloc(const objfile *o, int sec)
{
    size_t lo = 0, hi = o->nrelocs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (o->relocs[mid].section < sec)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Iterate over section sec's relocations as r. */
#define FOR_RELOCS(o, sec, r)                                                         \
    for (const obj_reloc *r = (o)->relocs + first_reloc(o, sec);                      \
         r < (o)->relocs + (o)->nrelocs && r->section == (sec); r++)

/* Marks every section `sec` reaches through relocations, transitively. */
static void mark_reached(const objfile *o, int sec, bool *mark)
{
    if (mark[sec])
        return;
    mark[sec] = true;
    FOR_RELOCS(o, sec, r)
        if (r->symbol >= 0 && o->syms[r->symbol].section >= 0)
            mark_reached(o, o->syms[r->symbol].section, mark);
}

static bool loaded(const obj_section *sec)
{
    return sec->size && (sec->kind == OBJ_SEC_CODE || sec->kind == OBJ_SEC_RODATA ||
                         sec->kind == OBJ_SEC_DATA || sec->kind == OBJ_SEC_BSS);
}

/* A section no op's code reaches is in the own object of the op it comes
 * from: data an op's asm put in a section of its own (.pushsection), which
 * refers back to that op's code. One that refers to this op's sections alone
 * joins its object, one that refers to other ops' alone is theirs; one that
 * refers to both, or to nothing, cannot be placed by the batch. */
static split_result adopt_orphans(splitter *s, int entry)
{
    const objfile *o = s->in;
    const bool *theirs = s->theirs;
    bool *mine = xcalloc(o->nsecs, sizeof *mine);
    mark_reached(o, o->syms[entry].section, mine);
    split_result res = SPLIT_OK;
    for (size_t sec = 0; sec < o->nsecs && res == SPLIT_OK; sec++) {
        if (!loaded(&o->secs[sec]) || mine[sec] || theirs[sec])
            continue;
        bool to_mine = false, to_theirs = false;
        FOR_RELOCS(o, (int)sec, r) {
            int t = r->symbol >= 0 ? o->syms[r->symbol].section : -1;
            to_mine |= t >= 0 && mine[t] && !theirs[t];
            to_theirs |= t >= 0 && theirs[t];
        }
        if (to_mine && !to_theirs) {
            member m = {(int)sec, 0, o->secs[sec].size, true, false, 0, 0, -1};
            ARRAY_PUSH(s->members, s->nmembers, s->cap, m);
        } else if (to_mine || !to_theirs) {
            res = refuse(s, SPLIT_ALONE, "section '%s' holds what no op's code refers to, and "
                         "the batch cannot tell whose it is", o->secs[sec].name);
        }
    }
    free(mine);
    return res;
}

/* Every section the other ops of the batch reach (s->theirs). */
static bool *reached_by_others(const objfile *o, int entry)
{
    bool *theirs = xcalloc(o->nsecs ? o->nsecs : 1, sizeof *theirs);
    for (size_t i = 0; i < o->nsyms; i++) {
        const obj_symbol *y = &o->syms[i];
        if ((int)i != entry && y->global && !y->undefined && y->section >= 0 &&
            !strncmp(y->name, SPLIT_ENTRY_PREFIX, strlen(SPLIT_ENTRY_PREFIX)) &&
            y->section != o->syms[entry].section)
            mark_reached(o, y->section, theirs);
    }
    return theirs;
}

/* Every section the entry's section (and the orphans it adopts) reach,
 * transitively. */
static split_result closure(splitter *s, int entry)
{
    const objfile *o = s->in;
    int entry_sec = o->syms[entry].section;
    member first = {entry_sec, 0, o->secs[entry_sec].size, true, false, 0, 0, -1};
    ARRAY_PUSH(s->members, s->nmembers, s->cap, first);
    split_result adopted = adopt_orphans(s, entry);
    if (adopted != SPLIT_OK)
        return adopted;
    for (size_t i = 0; i < s->nmembers; i++) {
        FOR_RELOCS(o, s->members[i].sec, r) {
            if (!s->members[i].whole)
                return refuse(s, SPLIT_ALONE, "its merged constants in '%s' have relocations",
                              o->secs[r->section].name);
            split_result res = follow(s, r, entry_sec);
            if (res != SPLIT_OK)
                return res;
        }
    }
    return SPLIT_OK;
}

/* A defined external symbol other than the entries is in every op's own
 * unit, and so in every per-op stencil; a batch cannot say which. */
static split_result no_shared_externals(splitter *s)
{
    const objfile *o = s->in;
    for (size_t i = 0; i < o->nsyms; i++) {
        const obj_symbol *y = &o->syms[i];
        if (y->global && !y->undefined && y->section >= 0 &&
            strncmp(y->name, SPLIT_ENTRY_PREFIX, strlen(SPLIT_ENTRY_PREFIX)))
            return refuse(s, SPLIT_ALONE, "its file defines the external symbol '%s', which "
                          "every op's own unit carries", y->name);
    }
    return SPLIT_OK;
}

/* A symbol naming an object (not a section, nor an AArch64 ELF mapping
 * symbol: $d, $x, $d.<n> mark data and code in a section, not objects). */
static bool names_object(const obj_symbol *y)
{
    const char *n = y->name;
    bool mapping = n[0] == '$' && n[1] && strchr("adtx", n[1]) && (!n[2] || n[2] == '.');
    return !y->is_section && n[0] && !mapping;
}

/* The name of what section `sec` holds, for a message: its symbol, or the
 * section's own name. */
static const char *held(const objfile *o, int sec)
{
    for (size_t i = 0; i < o->nsyms; i++)
        if (o->syms[i].section == sec && names_object(&o->syms[i]))
            return o->syms[i].name;
    return o->secs[sec].name;
}

/* How many objects section `sec` holds, as far as its symbols tell (a
 * private one, a function's constants say, has none). */
static int objects_in(const objfile *o, int sec)
{
    int n = 0;
    for (size_t i = 0; i < o->nsyms; i++)
        n += o->syms[i].section == sec && names_object(&o->syms[i]);
    return n;
}

/* The op's data, besides its constant pool, must be one object of its own.
 * Its own unit lays several out in the order clang created them in its
 * module: as each was first referred to while the unit was compiled, in code
 * the optimizer may since have folded away. In a batch, another op's code,
 * folded or not, may have created them first and in another order (two
 * tables used by two ops in opposite orders; a pointer table and the tables
 * it points to), and its object cannot tell. An object other ops of the
 * batch use too was optimized for all their uses, its own unit sees the
 * op's alone: it may then make it a mergeable constant (.rodata.cst16), or
 * keep it apart from an equal one the batch merged it with (and whose name
 * the batch's relocations then carry). The op compiles alone. */
static split_result one_data_object(splitter *s, int entry_sec)
{
    const objfile *o = s->in;
    int first = -1;
    for (size_t i = 0; i < s->nmembers; i++) {
        int sec = s->members[i].sec;
        obj_sec_kind k = o->secs[sec].kind;
        if (sec == entry_sec || !s->members[i].whole ||
            (k != OBJ_SEC_RODATA && k != OBJ_SEC_DATA && k != OBJ_SEC_BSS))
            continue;
        if (first >= 0)
            return refuse(s, SPLIT_ALONE, "its data is in several sections ('%s' and '%s'), "
                          "which its own unit lays out in the order it creates them, and "
                          "a batch of several ops cannot tell that order",
                          held(o, first), held(o, sec));
        first = sec;
    }
    if (first < 0)
        return SPLIT_OK;
    int objects = objects_in(o, first);
    if (s->theirs[first] && !objects)
        return refuse(s, SPLIT_ALONE, "other ops of the batch use its data section '%s' too "
                      "(unnamed: the constants of several functions, or one object they "
                      "share), which its own unit would have otherwise", o->secs[first].name);
    if (s->theirs[first])
        return refuse(s, SPLIT_ALONE, "other ops of the batch use its data '%s' too, and its "
                      "own unit, which sees its uses alone, may optimize it otherwise",
                      held(o, first));
    if (objects > 1)
        return refuse(s, SPLIT_ALONE, "its data section '%s' holds several objects, which its "
                      "own unit lays out in the order it creates them, and a batch of several "
                      "ops cannot tell that order", o->secs[first].name);
    return SPLIT_OK;
}

/* The op's own unit makes its sections in this order: its code's (the
 * object's first), its constant pool's (before its code is emitted: one
 * section after another as its constants' indices first reach each, which a
 * batch's object need not follow, another op having made .rodata.cst16
 * before .rodata.cst8, say), what its asm pushes (as its code is emitted),
 * then its data. Pool blocks first, by their first constant's index, then
 * the rest in the batch's order. */
static int cmp_member(const void *a, const void *b)
{
    const member *x = a, *y = b;
    bool xp = x->pool_first >= 0, yp = y->pool_first >= 0;
    if (xp != yp)
        return yp - xp;
    if (xp && x->pool_first != y->pool_first)
        return (x->pool_first > y->pool_first) - (x->pool_first < y->pool_first);
    return (x->sec > y->sec) - (x->sec < y->sec);
}

static uint64_t align_to(uint64_t v, uint64_t align)
{
    return align > 1 ? (v + align - 1) / align * align : v;
}

/* Output sections in the order their first member has (cmp_member; the
 * entry's first, as in its own object), members packed as an assembler
 * packs objects into one section. */
static void lay_out_groups(splitter *s, int entry_sec, objfile *out)
{
    const objfile *o = s->in;
    qsort(s->members, s->nmembers, sizeof *s->members, cmp_member);
    for (int pass = 0; pass < 2; pass++) { /* the entry's section, then the rest */
        for (size_t i = 0; i < s->nmembers; i++) {
            member *m = &s->members[i];
            if ((pass == 0) != (m->sec == entry_sec))
                continue;
            const obj_section *sec = &o->secs[m->sec];
            const char *name = output_name(o, m->sec);
            size_t g = 0;
            while (g < out->nsecs && strcmp(out->secs[g].name, name))
                g++;
            if (g == out->nsecs) {
                out->secs = xrealloc(out->secs, (g + 1) * sizeof *out->secs);
                out->secs[g] = (obj_section){.name = xstrdup(name), .kind = sec->kind,
                                             .align = 1, .merge = sec->merge};
                out->nsecs++;
            }
            obj_section *d = &out->secs[g];
            uint64_t at = align_to(d->size, sec->align), n = m->to - m->from;
            if (sec->bytes) {
                d->bytes = xrealloc(d->bytes, at + n ? at + n : 1);
                memset(d->bytes + d->size, 0, at - d->size); /* as the assembler pads */
                memcpy(d->bytes + at, sec->bytes + m->from, n);
            }
            d->size = at + n;
            d->align = sec->align > d->align ? sec->align : d->align;
            m->group = (int)g;
            m->at = at;
        }
    }
}

static int add_symbol(objfile *out, obj_symbol sym)
{
    out->syms = xrealloc(out->syms, (out->nsyms + 1) * sizeof *out->syms);
    out->syms[out->nsyms] = sym;
    return (int)out->nsyms++;
}

/* The op-object symbol for batch symbol `i`, and how much a relocation's
 * addend moves when it refers to it (a section symbol names the output
 * section, whose member may not start at 0). */
/* -fdata-sections gives a COFF private object (a string literal, a
 * function's local constant array: .str.1, __const.op_add.t) a COMDAT
 * section named .rdata (no '$' suffix) and a local symbol, for the COMDAT's
 * sake; in the op's own unit it sits in .rdata, unnamed, and is reached
 * through the section's symbol, as the batch's is here. */
static bool coff_private_label(const objfile *o, const obj_symbol *y)
{
    return o->kind == OBJ_FORMAT_COFF && !y->global && !y->is_section && y->section >= 0 &&
           o->secs[y->section].comdat && !strchr(o->secs[y->section].name, '$');
}

static int map_symbol(const splitter *s, objfile *out, int *map, int i, int64_t *shift)
{
    const obj_symbol *y = &s->in->syms[i];
    int m = y->section >= 0 ? member_of(s, y->section) : -1;
    const member *mb = m >= 0 ? &s->members[m] : NULL;
    bool as_section = y->is_section || coff_private_label(s->in, y);
    *shift = mb && as_section ? (int64_t)mb->at - (int64_t)mb->from +
                                    (int64_t)(y->is_section ? 0 : y->value)
                              : 0;
    if (map[i] >= 0)
        return map[i];
    obj_symbol c = *y;
    long n;
    const char *k;
    c.section = mb ? mb->group : -1;
    if (mb && as_section) {
        c.name = xstrdup(out->secs[mb->group].name);
        c.value = 0;
        c.is_section = true;
    } else {
        if (mb)
            c.value = y->value - mb->from + mb->at;
        /* Its own unit has one function, numbered 0, so its pool is .LCPI0_<k>. */
        c.name = mb && pool_label(y->name, &n, &k) ? xasprintf(".LCPI0_%s", k) : xstrdup(y->name);
        if (!mb && y->section >= 0)
            c.section = -1; /* outside the op's object: stencil_extract says so */
    }
    map[i] = add_symbol(out, c);
    return map[i];
}

static int cmp_reloc(const void *a, const void *b)
{
    const obj_reloc *x = a, *y = b;
    if (x->section != y->section)
        return (x->section > y->section) - (x->section < y->section);
    return (x->offset > y->offset) - (x->offset < y->offset);
}

static void copy_relocs(const splitter *s, objfile *out, int *map)
{
    const objfile *o = s->in;
    size_t cap = 0;
    for (size_t i = 0; i < s->nmembers; i++) {
        const member *m = &s->members[i];
        FOR_RELOCS(o, m->whole || m->ranged ? m->sec : -1, at) {
            if (m->ranged && (at->offset < m->from || at->offset >= m->to))
                continue;
            obj_reloc r = *at;
            int64_t shift = 0;
            if (r.symbol >= 0)
                r.symbol = map_symbol(s, out, map, r.symbol, &shift);
            r.section = m->group;
            r.offset = r.offset - m->from + m->at; /* from is 0 for a whole section */
            r.addend += shift;
            ARRAY_PUSH(out->relocs, out->nrelocs, cap, r);
        }
    }
    if (out->nrelocs)
        qsort(out->relocs, out->nrelocs, sizeof *out->relocs, cmp_reloc);
}

/* ---- Mach-O (docs/platforms.md, "Units"): -ffunction-sections does
 * nothing there, so the batch's entries share one __text, each a function
 * from its symbol to the next less the padding the assembler put before the
 * next. Its data sections are shared too: an op whose code reaches any
 * compiles alone. */

enum { MACHINE_X86_64 = 62 /* EM_X86_64 */ };

/* The NOPs LLVM's x86 assembler pads with; the longest after up to five
 * 0x66 prefixes. */
static const uint8_t x86_nops[10][10] = {
    {0x90},
    {0x66, 0x90},
    {0x0f, 0x1f, 0x00},
    {0x0f, 0x1f, 0x40, 0x00},
    {0x0f, 0x1f, 0x44, 0x00, 0x00},
    {0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00},
    {0x0f, 0x1f, 0x80, 0x00, 0x00, 0x00, 0x00},
    {0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00},
    {0x66, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00},
    {0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00},
};

/* The length of the x86 padding NOP at b[0, n), or 0. */
static size_t x86_nop_at(const uint8_t *b, size_t n)
{
    size_t prefixes = 0;
    while (prefixes < 5 && prefixes < n && b[prefixes] == 0x66)
        prefixes++;
    for (size_t p = 0; p <= prefixes; p++)
        for (size_t k = 10; k-- > 0;)
            if ((!p || k == 9) && p + k + 1 <= n && !memcmp(b + p, x86_nops[k], k + 1))
                return p + k + 1;
    return 0;
}

/* Whether b[0, n) is nothing but the NOPs the assembler pads with. */
static bool padding_only(const objfile *o, const uint8_t *b, size_t n)
{
    static const uint8_t a64_nop[4] = {0x1f, 0x20, 0x03, 0xd5};
    for (size_t at = 0, len; at < n; at += len) {
        if (o->machine == MACHINE_X86_64)
            len = x86_nop_at(b + at, n - at);
        else
            len = n - at >= 4 && !memcmp(b + at, a64_nop, 4) ? 4 : 0;
        if (!len)
            return false;
    }
    return true;
}

/* Where the function at [from, next) of section `sec` ends: at its first
 * instruction boundary after which only padding is left. Decoding from its
 * start, an operand byte that looks like a NOP is never taken for one. An
 * indirect branch may be followed by a jump table, data that decodes as
 * anything: such an op compiles alone. */
static split_result macho_function_end(splitter *s, lb_disasm *d, int sec, uint64_t from,
                                       uint64_t next, uint64_t *end)
{
    const obj_section *text = &s->in->secs[sec];
    for (uint64_t at = from; at < next;) {
        if (at > from && padding_only(s->in, text->bytes + at, next - at)) {
            *end = at;
            return SPLIT_OK;
        }
        lb_insn insn;
        lb_disasm_one(d, text->bytes + at, next - at, at, &insn);
        if (!insn.size)
            return refuse(s, SPLIT_ALONE, "its code at offset %" PRIu64 " of the Mach-O "
                          "batch's '%s' does not decode, so where it ends cannot be told", at, text->name);
        if (insn.is_branch && insn.is_indirect)
            return refuse(s, SPLIT_ALONE, "it branches indirectly, maybe through a jump table "
                          "in its code, so where it ends in the Mach-O batch cannot be told");
        at += insn.size;
    }
    *end = next;
    return SPLIT_OK;
}

/* Where the next symbol of the entry's section starts (or the section's end). */
static uint64_t next_symbol(const objfile *o, int entry)
{
    const obj_symbol *e = &o->syms[entry];
    uint64_t next = o->secs[e->section].size;
    for (size_t i = 0; i < o->nsyms; i++) {
        const obj_symbol *y = &o->syms[i];
        if (y->section == e->section && !y->is_section && y->value > e->value && y->value < next)
            next = y->value;
    }
    return next;
}

/* The op's code reaches holes only: anything defined in the batch is either
 * code other ops share __text with or data they share sections with. */
static split_result macho_reaches_holes_only(splitter *s, int sec, uint64_t from, uint64_t to)
{
    const objfile *o = s->in;
    FOR_RELOCS(o, sec, r) {
        if (r->offset < from || r->offset >= to || r->symbol < 0)
            continue;
        const obj_symbol *y = &o->syms[r->symbol];
        if (y->undefined || y->section < 0 || o->secs[y->section].kind == OBJ_SEC_OTHER)
            continue; /* a hole, or what stencil_extract refuses in both modes */
        if (o->secs[y->section].kind == OBJ_SEC_CODE)
            return refuse(s, SPLIT_ALONE, "it calls '%s', which the compiler did not inline in "
                          "the Mach-O batch (in the op's own unit it may be)", y->name);
        return refuse(s, SPLIT_ALONE, "it uses %s%s%s'%s', and a Mach-O batch's ops share "
                      "their data sections, which only its own unit lays out as it does",
                      y->is_section ? "" : "'", y->is_section ? "" : y->name,
                      y->is_section ? "data in " : "' in ", o->secs[y->section].name);
    }
    return SPLIT_OK;
}

/* Every loaded section but __text must be data some op's code reaches (and
 * compiles alone for), with no relocations: one that refers to code or data,
 * or that no op refers to, cannot be told whose it is. */
static split_result macho_no_orphans(splitter *s, int text)
{
    const objfile *o = s->in;
    bool *reached = xcalloc(o->nsecs ? o->nsecs : 1, sizeof *reached);
    FOR_RELOCS(o, text, r)
        if (r->symbol >= 0 && o->syms[r->symbol].section >= 0)
            reached[o->syms[r->symbol].section] = true;
    split_result res = SPLIT_OK;
    for (size_t sec = 0; sec < o->nsecs && res == SPLIT_OK; sec++) {
        if ((int)sec == text || !loaded(&o->secs[sec]))
            continue;
        bool has_relocs = first_reloc(o, (int)sec) < o->nrelocs &&
                          o->relocs[first_reloc(o, (int)sec)].section == (int)sec;
        if (has_relocs || !reached[sec])
            res = refuse(s, SPLIT_ALONE, "section '%s' holds what %s, and the Mach-O batch "
                         "cannot tell whose it is", o->secs[sec].name,
                         has_relocs ? "refers to code or data" : "no op's code refers to");
    }
    free(reached);
    return res;
}

/* The entry's function, cut out of the batch's __text (split_op_object). */
static split_result macho_closure(splitter *s, int entry, lb_disasm *d)
{
    const objfile *o = s->in;
    int sec = o->syms[entry].section;
    uint64_t from = o->syms[entry].value, next = next_symbol(o, entry), end = next;
    if (!o->secs[sec].bytes || from >= next)
        return refuse(s, SPLIT_BAD, "the batch's function '%s' has no code",
                      o->syms[entry].name);
    split_result r = macho_no_orphans(s, sec);
    if (r == SPLIT_OK)
        r = macho_function_end(s, d, sec, from, next, &end);
    if (r == SPLIT_OK)
        r = macho_reaches_holes_only(s, sec, from, end);
    if (r == SPLIT_OK) {
        member m = {sec, from, end, false, true, 0, 0, -1};
        ARRAY_PUSH(s->members, s->nmembers, s->cap, m);
    }
    return r;
}

split_result split_op_object(const objfile *batch, const char *entry, lb_disasm *disasm,
                             objfile *out, char *why, size_t whysz)
{
    *out = (objfile){0};
    splitter s = {batch, NULL, 0, 0, -1, NULL, why, whysz};
    int e = objfile_find_defined(batch, entry);
    if (e < 0 || !batch->syms[e].global || batch->secs[batch->syms[e].section].kind != OBJ_SEC_CODE)
        return refuse(&s, SPLIT_BAD, "the batch's object defines no function '%s'", entry);
    int entry_sec = batch->syms[e].section;
    s.theirs = reached_by_others(batch, e);
    split_result r = no_shared_externals(&s);
    bool macho = batch->kind == OBJ_FORMAT_MACHO;
    if (r == SPLIT_OK)
        r = macho ? macho_closure(&s, e, disasm) : closure(&s, e);
    if (r == SPLIT_OK && !macho)
        r = one_data_object(&s, entry_sec);
    free(s.theirs);
    if (r != SPLIT_OK) {
        free(s.members);
        return r;
    }
    memcpy(out->format, batch->format, sizeof out->format);
    out->kind = batch->kind;
    out->machine = batch->machine;
    out->is64 = batch->is64;
    out->little_endian = batch->little_endian;
    memcpy(out->rel_section, batch->rel_section, sizeof out->rel_section);
    lay_out_groups(&s, entry_sec, out);
    int *map = xcalloc(batch->nsyms ? batch->nsyms : 1, sizeof *map);
    for (size_t i = 0; i < batch->nsyms; i++)
        map[i] = -1;
    const member *em = &s.members[member_of(&s, entry_sec)];
    add_symbol(out, (obj_symbol){.name = xstrdup(SG_HOLE_ENTRY), .section = em->group,
                                 .value = batch->syms[e].value - em->from + em->at,
                                 .size = em->ranged ? em->to - em->from : batch->syms[e].size,
                                 .global = true,
                                 .is_function = true});
    copy_relocs(&s, out, map);
    free(map);
    free(s.members);
    return SPLIT_OK;
}
