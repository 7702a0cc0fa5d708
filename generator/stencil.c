/* stencil.c - lay out an object's code and read-only data, and classify every
 * relocation into a hole: which bytes to patch (sg_patch) with what (sg_value). */
#include "stencil.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag.h"
#include "util.h"

/* Where each section lands: in code or data, at which offset. */
typedef struct layout {
    int64_t *code_base; /* per section, -1 if not in code */
    int64_t *data_base; /* per section, -1 if not in data */
} layout;

static size_t align_up(size_t v, uint64_t align)
{
    if (align <= 1)
        return v;
    return (v + align - 1) / align * align;
}

static void place(const obj_section *sec, uint8_t **buf, size_t *size, size_t *max_align,
                  int64_t *base)
{
    size_t at = align_up(*size, sec->align);
    *buf = xrealloc(*buf, at + sec->size);
    memset(*buf + *size, 0, at - *size); /* deterministic padding */
    if (sec->size)
        memcpy(*buf + at, sec->bytes, sec->size);
    *base = (int64_t)at;
    *size = at + sec->size;
    if (sec->align > *max_align)
        *max_align = sec->align;
}

static bool lay_out(const objfile *obj, const gen_extract_ctx *ctx, int entry_sec, layout *l,
                    gen_stencil *s)
{
    size_t code_align = 1;
    s->data_align = 1;
    for (size_t i = 0; i < obj->nsecs; i++)
        l->code_base[i] = l->data_base[i] = -1;
    place(&obj->secs[entry_sec], &s->code, &s->code_size, &code_align, &l->code_base[entry_sec]);
    for (size_t i = 0; i < obj->nsecs; i++) {
        const obj_section *sec = &obj->secs[i];
        if (sec->size == 0)
            continue; /* e.g. an empty .text beside .ltext: no padding for it */
        if (sec->kind == OBJ_SEC_CODE && (int)i != entry_sec)
            place(sec, &s->code, &s->code_size, &code_align, &l->code_base[i]);
        else if (sec->kind == OBJ_SEC_RODATA)
            place(sec, &s->data, &s->data_size, &s->data_align, &l->data_base[i]);
        else if (sec->kind == OBJ_SEC_DATA || sec->kind == OBJ_SEC_BSS) {
            diag_error_in(ctx->where,
                          "writable section '%s' (%" PRIu64 " bytes): stencils cannot have "
                          "mutable static data; make it const or pass it as an operand",
                          sec->name, sec->size);
            return false;
        }
    }
    return true;
}

/* ": <instruction>" for the code-section instruction containing `offset`, so a
 * diagnostic names what the relocation belongs to; "" outside code. */
static void insn_at(const objfile *obj, const gen_extract_ctx *ctx, const obj_reloc *r,
                    char *buf, size_t size)
{
    const obj_section *sec = &obj->secs[r->section];
    buf[0] = '\0';
    if (sec->kind != OBJ_SEC_CODE || !ctx->disasm)
        return;
    for (uint64_t pc = 0; pc < sec->size;) {
        lb_insn in;
        lb_disasm_one(ctx->disasm, sec->bytes + pc, sec->size - pc, pc, &in);
        if (!in.size)
            return;
        if (r->offset < pc + in.size) {
            snprintf(buf, size, " (instruction at +0x%" PRIx64 ": %s)", pc, in.text);
            return;
        }
        pc += in.size;
    }
}

/* Undefined symbols name holes by convention: the template's _JIT_* and the
 * manifest's run-time symbols. */
static bool classify_undefined(const char *name, const gen_extract_ctx *ctx, gen_hole *h)
{
    size_t plen = strlen(SG_HOLE_OPERAND_PREFIX);
    if (!strcmp(name, SG_HOLE_CONTINUE)) {
        h->value = SG_VALUE_CONTINUE;
        return true;
    }
    if (!strcmp(name, SG_HOLE_JUMP_TARGET)) {
        h->value = SG_VALUE_JUMP_TARGET;
        return true;
    }
    if (!strncmp(name, SG_HOLE_OPERAND_PREFIX, plen) && name[plen] >= '0' &&
        name[plen] < '0' + SG_OPERANDS && !name[plen + 1]) {
        h->value = SG_VALUE_OPERAND;
        h->index = (uint32_t)(name[plen] - '0');
        return true;
    }
    for (size_t i = 0; i < ctx->nsymbols; i++) {
        if (!strcmp(name, ctx->symbols[i])) {
            h->value = SG_VALUE_SYMBOL;
            h->index = (uint32_t)i;
            return true;
        }
    }
    return false;
}

static bool classify_reloc(const objfile *obj, const gen_extract_ctx *ctx, const layout *l,
                           const obj_reloc *r, gen_hole *h)
{
    const obj_section *sec = &obj->secs[r->section];
    const char *symname = r->symbol >= 0 ? obj->syms[r->symbol].name : "";
    snprintf(h->reloc, sizeof h->reloc, "%s", r->type_name);
    snprintf(h->symbol, sizeof h->symbol, "%s", symname);
    h->addend = r->addend;
    char insn[200]; /* filled only for a diagnostic: decoding costs time on every hole */
    if (!ctx->target->classify_reloc(r->type, sec->bytes, sec->size, r->offset, &h->patch)) {
        insn_at(obj, ctx, r, insn, sizeof insn);
        diag_error_in(ctx->where,
                      "unsupported relocation %s (type %u) in %s at offset 0x%" PRIx64
                      " against '%s'%s",
                      r->type_name, r->type, sec->name, r->offset, symname, insn);
        return false;
    }
    if (r->symbol < 0) {
        diag_error_in(ctx->where, "relocation %s in %s at offset 0x%" PRIx64 " has no symbol",
                      r->type_name, sec->name, r->offset);
        return false;
    }
    const obj_symbol *sym = &obj->syms[r->symbol];
    if (sym->undefined) {
        if (classify_undefined(sym->name, ctx, h))
            return true;
        insn_at(obj, ctx, r, insn, sizeof insn);
        diag_error_in(ctx->where,
                      "%s at %s+0x%" PRIx64 "%s refers to unknown symbol '%s'; list it "
                      "under 'symbols:' in the manifest if the runtime provides it",
                      r->type_name, sec->name, r->offset, insn, sym->name);
        return false;
    }
    int64_t base = sym->section >= 0 ? l->code_base[sym->section] : -1;
    h->value = SG_VALUE_CODE;
    if (base < 0 && sym->section >= 0) {
        base = l->data_base[sym->section];
        h->value = SG_VALUE_DATA;
    }
    if (base < 0) {
        diag_error_in(ctx->where,
                      "%s at %s+0x%" PRIx64 " refers to '%s', which is in a section that is "
                      "not part of the stencil",
                      r->type_name, sec->name, r->offset, sym->name);
        return false;
    }
    int64_t at = base + (int64_t)(sym->is_section ? 0 : sym->value);
    if (sg_patch_uses_got(h->patch) && at != 0) {
        /* The slot would have to hold the start plus `at`, which a hole
         * cannot say: its addend applies to the slot's address. */
        insn_at(obj, ctx, r, insn, sizeof insn);
        diag_error_in(ctx->where,
                      "%s at %s+0x%" PRIx64 "%s loads the address of '%s' from a GOT slot, "
                      "and '%s' is at +0x%" PRIx64 " in the stencil's %s: a GOT slot can hold "
                      "only the start of the stencil's code or data; make '%s' static or "
                      "hidden, so that the code addresses it directly",
                      r->type_name, sec->name, r->offset, insn, sym->name, sym->name,
                      (uint64_t)at, h->value == SG_VALUE_CODE ? "code" : "data", sym->name);
        return false;
    }
    h->addend += at;
    return true;
}

static bool collect_holes(const objfile *obj, const gen_extract_ctx *ctx, const layout *l,
                          gen_stencil *s)
{
    size_t code_cap = 0, data_cap = 0;
    for (size_t i = 0; i < obj->nrelocs; i++) {
        const obj_reloc *r = &obj->relocs[i];
        int64_t cbase = l->code_base[r->section], dbase = l->data_base[r->section];
        if (cbase < 0 && dbase < 0)
            continue; /* e.g. .eh_frame: not part of the stencil */
        gen_hole h = {0};
        if (!classify_reloc(obj, ctx, l, r, &h))
            return false;
        h.offset = (uint32_t)((cbase >= 0 ? cbase : dbase) + (int64_t)r->offset);
        if (cbase >= 0)
            ARRAY_PUSH(s->code_holes, s->ncode_holes, code_cap, h);
        else
            ARRAY_PUSH(s->data_holes, s->ndata_holes, data_cap, h);
    }
    return true;
}

/* The last hole may be a jump to the continuation: the next stencil will be
 * placed right there, so the jump can go. Only when the entry section is the
 * last code (no other code follows it). */
static void remove_trailing_jump(const gen_extract_ctx *ctx, gen_stencil *s)
{
    if (!s->ncode_holes)
        return;
    gen_hole *last = &s->code_holes[s->ncode_holes - 1];
    if (last->value != SG_VALUE_CONTINUE)
        return;
    size_t n = ctx->target->trailing_jump(s->code, s->code_size, last->offset, last->patch,
                                          last->addend);
    if (!n)
        return;
    s->code_size -= n;
    s->removed_jump = n;
    s->ncode_holes--;
}

static int cmp_hole(const void *a, const void *b)
{
    const gen_hole *x = a, *y = b;
    return (x->offset > y->offset) - (x->offset < y->offset);
}

bool stencil_extract(const objfile *obj, const gen_extract_ctx *ctx, gen_stencil *s)
{
    int entry = objfile_find_defined(obj, ctx->entry_symbol);
    if (entry < 0 || obj->secs[obj->syms[entry].section].kind != OBJ_SEC_CODE) {
        diag_error_in(ctx->where, "the object defines no function '%s'", ctx->entry_symbol);
        return false;
    }
    int entry_sec = obj->syms[entry].section;
    layout l = {xcalloc(obj->nsecs, sizeof(int64_t)), xcalloc(obj->nsecs, sizeof(int64_t))};
    bool ok = lay_out(obj, ctx, entry_sec, &l, s) && collect_holes(obj, ctx, &l, s);
    if (ok) {
        s->entry = (size_t)l.code_base[entry_sec] + obj->syms[entry].value;
        if (s->ncode_holes) /* qsort(NULL, 0, ...) is undefined */
            qsort(s->code_holes, s->ncode_holes, sizeof *s->code_holes, cmp_hole);
        if (s->ndata_holes)
            qsort(s->data_holes, s->ndata_holes, sizeof *s->data_holes, cmp_hole);
        bool entry_is_last_code = true;
        for (size_t i = 0; i < obj->nsecs; i++)
            entry_is_last_code &= (int)i == entry_sec || l.code_base[i] < 0;
        if (ctx->remove_trailing_jump && entry_is_last_code)
            remove_trailing_jump(ctx, s);
    }
    free(l.code_base);
    free(l.data_base);
    return ok;
}

void stencil_disassemble(gen_stencil *s, lb_disasm *d)
{
    strbuf text = {0};
    size_t cap = 0;
    for (size_t pc = 0; pc < s->code_size;) {
        lb_insn in;
        lb_disasm_one(d, s->code + pc, s->code_size - pc, pc, &in);
        gen_insn i = {.offset = (uint32_t)pc,
                     .size = in.size ? in.size : 1,
                     .text = (uint32_t)text.len,
                     .decoded = in.size != 0,
                     .writes_fp = in.writes_fp,
                     .is_call = in.is_call,
                     .is_indirect = in.is_indirect,
                     .call_reg = in.call_reg,
                     .defs = in.defs};
        if ((in.is_call || in.is_branch) && !in.is_indirect) {
            i.has_target = i.target_is_branch = true;
            i.target = (int64_t)in.target;
        } else if (in.has_address) {
            i.has_target = true;
            i.target = (int64_t)in.address;
        }
        sb_putn(&text, in.text, strlen(in.text) + 1);
        ARRAY_PUSH(s->insns, s->ninsns, cap, i);
        pc += i.size;
    }
    s->insn_text = text.data;
    s->insn_text_size = text.len;
}

void stencil_free(gen_stencil *s)
{
    free(s->insns);
    free(s->insn_text);
    free(s->name);
    free(s->source);
    free(s->code);
    free(s->data);
    free(s->code_holes);
    free(s->data_holes);
    *s = (gen_stencil){0};
}

gen_totals stencil_totals(const gen_stencil *s, size_t n, const size_t *twin)
{
    gen_totals t = {0};
    for (size_t k = 0; k < n; k++) {
        if (twin && twin[k] != k)
            continue;
        t.code += s[k].code_size;
        t.data += s[k].data_size;
        t.holes += s[k].ncode_holes + s[k].ndata_holes;
        for (size_t i = 0; i < s[k].ncode_holes; i++)
            t.by_patch[s[k].code_holes[i].patch]++;
        for (size_t i = 0; i < s[k].ndata_holes; i++)
            t.by_patch[s[k].data_holes[i].patch]++;
    }
    return t;
}
