/* writer.c - generated headers are for humans too: every stencil carries its
 * disassembly with the holes marked, so a review of a diff makes sense. The
 * output depends only on the inputs (no paths, no times), byte for byte. */
#include "writer.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emitter.h"
#include "hotcold.h"
#include "variant.h"

static const char *reg_or_number(const gen_target *t, uint32_t r)
{
    const char *n = t->reg_name(r);
    return n ? n : "?";
}

static void describe_hole(strbuf *sb, const gen_hole *h, char *const *symbols)
{
    sb_puts(sb, "hole +0x");
    sb_put_hex(sb, h->offset, 1);
    sb_puts(sb, ": ");
    sb_puts(sb, sg_patch_infos[h->patch].name);
    sb_puts(sb, " <- ");
    switch (h->value) { /* no printf: every hole of every stencil comes here */
    case SG_VALUE_OPERAND:
        sb_puts(sb, "OPERAND");
        sb_put_dec(sb, h->index);
        break;
    case SG_VALUE_SYMBOL:
        sb_puts(sb, "SYMBOL ");
        sb_puts(sb, symbols[h->index]);
        break;
    default: sb_puts(sb, sg_value_names[h->value]); break;
    }
    if (h->addend)
        sb_put_addend(sb, h->addend);
    sb_puts(sb, "  (");
    sb_puts(sb, h->reloc);
    sb_putc(sb, ' ');
    sb_puts(sb, h->symbol);
    sb_putc(sb, ')');
}

/* Instruction text goes into a C comment: never let it close the comment. */
static void put_comment_safe(strbuf *sb, const char *text)
{
    for (const char *end; (end = strstr(text, "*/")); text = end + 1) {
        sb_putn(sb, text, (size_t)(end - text) + 1);
        sb_putc(sb, ' ');
    }
    sb_puts(sb, text);
}

/* "%-30s" of an instruction's bytes in hex, without a printf per byte (every
 * instruction of every stencil goes through here). */
static void put_insn_bytes(strbuf *sb, const uint8_t *p, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t width = n ? 3 * n - 1 : 0;
    char *w = sb_extend(sb, width < 30 ? 30 : width);
    for (size_t i = 0; i < n; i++) {
        if (i)
            *w++ = ' ';
        *w++ = hex[p[i] >> 4];
        *w++ = hex[p[i] & 15];
    }
    if (width < 30)
        memset(w, ' ', 30 - width);
}

/* The listing comes from the instructions decoded once per stencil (s->insns):
 * no disassembly here. */
/* Where a split stencil's hot part ends and its cold part starts. */
static void put_cold_start(strbuf *sb, const gen_stencil *s, const char *prefix)
{
    if (s->removed_jump)
        sb_printf(sb, "%s%04zx: (jump to the continuation removed: %zu bytes; the next "
                      "instruction's hot part follows)\n", prefix, s->hot_size, s->removed_jump);
    sb_printf(sb, "%s---- cold part: %zu bytes, placed after the executor's hot parts\n", prefix,
              s->code_size - s->hot_size);
}

void writer_listing(strbuf *sb, char *const *symbols, const gen_stencil *s, const char *prefix)
{
    size_t h = 0;
    for (size_t k = 0; k < s->ninsns; k++) {
        const gen_insn *in = &s->insns[k];
        size_t pc = in->offset, len = in->size;
        if (s->split && pc == s->hot_size)
            put_cold_start(sb, s, prefix);
        sb_puts(sb, prefix); /* no printf: every instruction of every stencil comes here */
        sb_put_hex(sb, pc, 4);
        sb_puts(sb, ": ");
        put_insn_bytes(sb, s->code + pc, len);
        sb_putc(sb, ' ');
        put_comment_safe(sb, stencil_insn_text(s, in));
        sb_putc(sb, '\n');
        for (; h < s->ncode_holes && s->code_holes[h].offset < pc + len; h++) {
            sb_puts(sb, prefix);
            sb_puts(sb, "      ^ ");
            describe_hole(sb, &s->code_holes[h], symbols);
            sb_putc(sb, '\n');
        }
    }
    if (s->removed_jump && !s->split)
        sb_printf(sb, "%s%04zx: (jump to the continuation removed: %zu bytes)\n", prefix,
                  s->code_size, s->removed_jump);
    if (s->data_size)
        sb_printf(sb, "%sdata: %zu bytes, aligned to %zu\n", prefix, s->data_size, s->data_align);
    for (size_t i = 0; i < s->ndata_holes; i++) {
        sb_printf(sb, "%s  data ", prefix);
        describe_hole(sb, &s->data_holes[i], symbols);
        sb_putc(sb, '\n');
    }
}

/* "static const uint8_t <name><id>[n] = {...};" (id: "" when name is whole). */
static void put_bytes(strbuf *sb, const char *name, const char *id, const uint8_t *p, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    sb_cat(sb, "static const uint8_t ", name, id, "[", NULL);
    sb_put_dec(sb, (int64_t)n);
    sb_puts(sb, "] = {");
    /* Headers hold every code byte: written straight in, rows of 16. */
    char *w = sb_extend(sb, 6 * n + 4 * ((n + 15) / 16));
    for (size_t i = 0; i < n; i++) {
        if (i % 16 == 0) {
            memcpy(w, "\n    0x", 7);
            w += 7;
        } else {
            memcpy(w, " 0x", 3);
            w += 3;
        }
        *w++ = hex[p[i] >> 4];
        *w++ = hex[p[i] & 15];
        *w++ = ',';
    }
    sb_puts(sb, "\n};\n");
}

static void put_holes(strbuf *sb, const char *name, const char *id, const gen_hole *h, size_t n)
{
    sb_cat(sb, "static const sg_hole ", name, id, "[", NULL);
    sb_put_dec(sb, (int64_t)n);
    sb_puts(sb, "] = {\n");
    for (size_t i = 0; i < n; i++) { /* no printf: every hole of every stencil */
        sb_puts(sb, "    {0x");
        sb_put_hex(sb, h[i].offset, 1);
        sb_puts(sb, ", SG_PATCH_");
        sb_puts(sb, sg_patch_infos[h[i].patch].name);
        sb_puts(sb, ", SG_VALUE_");
        sb_puts(sb, sg_value_names[h[i].value]);
        sb_puts(sb, ", ");
        sb_put_dec(sb, h[i].index);
        sb_puts(sb, ", ");
        sb_put_dec(sb, h[i].addend);
        sb_puts(sb, "}, /* ");
        sb_puts(sb, h[i].reloc);
        sb_putc(sb, ' ');
        sb_puts(sb, h[i].symbol);
        sb_puts(sb, " */\n");
    }
    sb_puts(sb, "};\n");
}

static char *ident_upper(const char *s)
{
    char *r = xstrdup(s);
    for (char *p = r; *p; p++)
        *p = isalnum((unsigned char)*p) ? (char)toupper((unsigned char)*p) : '_';
    return r;
}

/* Text from outside (a path) inside a comment: it must not end the comment
 * or the line. */
static void put_in_comment(strbuf *sb, const char *text)
{
    for (const char *p = text; *p; p++) {
        if (*p == '\n')
            sb_puts(sb, "\\n");
        else if (*p == '\r')
            sb_puts(sb, "\\r");
        else if (*p == '/' && p > text && p[-1] == '*')
            sb_puts(sb, "\\/");
        else
            sb_putc(sb, *p);
    }
}

static void put_stencil_arrays(strbuf *sb, const gen_stencil *s, const char *id,
                               char *const *symbols, bool listing)
{
    sb_cat(sb, "/* ", s->name, " - ", NULL);
    /* The file alone, not the op's line: adding an op would otherwise rewrite
     * this line of every op after it (docs/build.md, "Prebuilt headers");
     * `stencilgen dump` gives the line. */
    put_in_comment(sb, s->source);
    sb_putc(sb, '\n');
    if (listing)
        writer_listing(sb, symbols, s, " *   ");
    sb_puts(sb, " */\n");
    put_bytes(sb, "sg_code_", id, s->code, s->code_size);
    if (s->data_size)
        put_bytes(sb, "sg_data_", id, s->data, s->data_size);
    if (s->ncode_holes)
        put_holes(sb, "sg_code_holes_", id, s->code_holes, s->ncode_holes);
    if (s->ndata_holes)
        put_holes(sb, "sg_data_holes_", id, s->data_holes, s->ndata_holes);
    sb_putc(sb, '\n');
}

static void put_stencil_init(strbuf *sb, const gen_stencil *s, const char *id,
                             const char *emit_fn, const char *emit_case)
{
    /* Without printf, as every stencil comes here: "{\"NAME\", sg_code_ID, SIZE, ..." */
    sb_cat(sb, "{\"", s->name, "\", sg_code_", id, ", ", NULL);
    sb_put_dec(sb, (int64_t)s->code_size);
    if (s->data_size) {
        sb_cat(sb, ", sg_data_", id, ", ", NULL);
        sb_put_dec(sb, (int64_t)s->data_size);
        sb_puts(sb, ", ");
        sb_put_dec(sb, (int64_t)s->data_align);
        sb_puts(sb, ", ");
    } else {
        sb_puts(sb, ", NULL, 0, 1, ");
    }
    if (s->ncode_holes) {
        sb_cat(sb, "sg_code_holes_", id, ", ", NULL);
        sb_put_dec(sb, (int64_t)s->ncode_holes);
        sb_puts(sb, ", ");
    } else {
        sb_puts(sb, "NULL, 0, ");
    }
    if (s->ndata_holes) {
        sb_cat(sb, "sg_data_holes_", id, ", ", NULL);
        sb_put_dec(sb, (int64_t)s->ndata_holes);
        sb_puts(sb, ", ");
    } else {
        sb_puts(sb, "NULL, 0, ");
    }
    bool runs_on = s->split ? s->hot_runs_on : s->removed_jump != 0;
    sb_cat(sb, runs_on ? "1, " : "0, ", emit_fn, ", ", emit_case, "}", NULL);
}

/* Whether op i has a stencil of its own (it is not folded into a twin). */
static bool own_stencil(const gen_header_model *m, size_t i)
{
    return !m->twin || m->twin[i] == i;
}

/* The header's stencils: SG_OP__COUNT. */
static size_t stencil_count(const gen_header_model *m)
{
    size_t n = 0;
    for (size_t i = 0; i < m->nops; i++)
        n += own_stencil(m, i);
    return n;
}

/* The emitter groups of a header with n stencils: EMITTER_GROUP stencils a
 * function on average. */
static size_t emitter_groups(size_t n)
{
    return (n + EMITTER_GROUP - 1) / EMITTER_GROUP;
}

/* The group of the stencil whose C name is `id`: by a hash of the name, not
 * by position, so adding or removing an op moves no other op's emitter to
 * another function (docs/build.md, "Prebuilt headers"). */
static size_t emitter_group_of(const char *id, size_t ngroups)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)id; *p; p++)
        h = (h ^ *p) * 16777619u;
    return ngroups ? h % ngroups : 0;
}

static char *emitter_fn_name(size_t group)
{
    return xasprintf("sg_emit_ops%zu", group);
}

/* The emitter functions of the stencils (folded variants have none), each
 * stencil a case of its group's function, labelled SG_CASE_<name>: an enum
 * before each function numbers its cases from 0, so that gcc makes its switch
 * one jump table (with the ops' own enumerators, sparse in a big header, it
 * made trees of compares) and still no number is written. A group no stencil
 * hashed to gets no function. */
static void put_op_emitters(strbuf *sb, const gen_header_model *m)
{
    size_t ngroups = emitter_groups(stencil_count(m));
    emitter_case *cases = xcalloc(m->nops ? m->nops : 1, sizeof *cases);
    char **labels = xcalloc(m->nops ? m->nops : 1, sizeof *labels);
    size_t *group = xcalloc(m->nops ? m->nops : 1, sizeof *group);
    for (size_t i = 0; i < m->nops; i++)
        group[i] = emitter_group_of(m->defs[i].name, ngroups);
    for (size_t g = 0; g < ngroups; g++) {
        size_t n = 0;
        for (size_t i = 0; i < m->nops; i++) {
            if (!own_stencil(m, i) || group[i] != g)
                continue;
            labels[n] = xasprintf("SG_CASE_%s", m->defs[i].name);
            cases[n] = (emitter_case){&m->ops[i], m->defs[i].name, labels[n]};
            n++;
        }
        if (n) {
            char *fn = emitter_fn_name(g);
            sb_cat(sb, "/* The cases of ", fn, ", numbered from 0: one jump table. */\n"
                       "enum {\n", NULL);
            for (size_t i = 0; i < n; i++)
                sb_cat(sb, "    ", labels[i], ",\n", NULL);
            sb_puts(sb, "};\n");
            emitter_write_group(sb, fn, cases, n, m->symbols);
            free(fn);
        }
        for (size_t i = 0; i < n; i++)
            free(labels[i]);
    }
    free(group);
    free(labels);
    free(cases);
}

static bool has_variants(const gen_header_model *m)
{
    for (size_t i = 0; i < m->nops; i++)
        if (m->defs[i].naxes)
            return true;
    return false;
}

/* sr_stencil_set.cold_sizes: the last bytes of each stencil's code that are
 * its cold part (docs/runtime.md, "Hot and cold parts"). */
static void put_cold_sizes(strbuf *sb, const gen_header_model *m)
{
    sb_puts(sb, "/* Per stencil: the bytes at the end of its code that are its cold part,\n"
                " * placed after the executor's hot parts (0: none). */\n"
                "static const size_t sg_cold_sizes[SG_OP__COUNT] = {\n");
    for (size_t i = 0; i < m->nops; i++) { /* a line each: an edit changes its op's line */
        const gen_stencil *s = &m->ops[i];
        if (own_stencil(m, i)) {
            sb_puts(sb, "    ");
            sb_put_dec(sb, s->split ? (int64_t)(s->code_size - s->hot_size) : 0);
            sb_cat(sb, ", /* ", m->defs[i].name, " */\n", NULL);
        }
    }
    sb_puts(sb, "};\n\n");
}

char *writer_target_filename(const gen_target *t)
{
    return xasprintf("jit_stencils-%s.h", t->triple);
}

void writer_unwind_rows(strbuf *sb, const gen_target *t, const gen_unwind *u, const char *prefix)
{
    char row[512];
    if (u->derived && u->win64_info)
        sb_printf(sb, "%sunwind rows of the shim, from its %s (return address in %s):\n", prefix,
                  unwind_record_name(t, u), reg_or_number(t, u->ra_column));
    else if (u->derived)
        sb_printf(sb, "%sCFI rows of the shim (code_align %" PRIu64 ", data_align %" PRId64
                      ", return address in %s):\n",
                  prefix, u->code_align, u->data_align, reg_or_number(t, u->ra_column));
    else /* a shim that failed its checks: what was found, for whoever debugs it */
        sb_printf(sb, "%sCFI rows of the shim (%zu; it failed its checks):\n", prefix,
                  u->rows.count);
    for (size_t i = 0; i < u->rows.count; i++) {
        cfi_format_row(&u->rows.rows[i], t->reg_name, row, sizeof row);
        sb_printf(sb, "%s  0x%04" PRIx64 "-0x%04" PRIx64 ": %s\n", prefix, u->rows.rows[i].loc,
                  u->rows.rows[i].end, row);
    }
    if (!u->derived)
        return;
    cfi_format_row(u->call_row, t->reg_name, row, sizeof row);
    sb_printf(sb, "%sat the call into JIT code, shim+0x%zx %s:\n%s  %s\n", prefix,
              u->call_offset, u->call_text, prefix, row);
    sb_printf(sb, "%sframe shape: CFA=%s%+" PRId64 ", %s saved at CFA%+" PRId64
                  ", return address at CFA%+" PRId64 "\n",
              prefix, reg_or_number(t, u->shape.cfa_reg), u->shape.cfa_offset,
              reg_or_number(t, t->fp_reg), u->shape.fp_offset,
              u->shape.ra_offset);
}

/* The frame shape as constants, and where the shim calls JIT code: both
 * unwind formats. */
static void put_shape(strbuf *sb, const gen_target *t, const gen_unwind *u)
{
    sb_printf(sb, "#define SG_UNWIND_FP_REGISTER %" PRIu32 " /* %s */\n", t->fp_reg,
              reg_or_number(t, t->fp_reg));
    sb_printf(sb, "#define SG_UNWIND_CFA_REGISTER %" PRIu32 " /* CFA=%s%+" PRId64 " */\n",
              u->shape.cfa_reg, reg_or_number(t, u->shape.cfa_reg), u->shape.cfa_offset);
    sb_printf(sb, "#define SG_UNWIND_CFA_OFFSET %" PRId64 "\n", u->shape.cfa_offset);
    sb_printf(sb, "#define SG_UNWIND_FP_OFFSET (%" PRId64 ") /* %s=[CFA%+" PRId64 "] */\n",
              u->shape.fp_offset, reg_or_number(t, t->fp_reg), u->shape.fp_offset);
    sb_printf(sb, "#define SG_UNWIND_RA_OFFSET (%" PRId64 ") /* %s=[CFA%+" PRId64 "] */\n",
              u->shape.ra_offset, reg_or_number(t, u->ra_column), u->shape.ra_offset);
    sb_printf(sb, "#define SG_UNWIND_RA_SIGNED %d /* %s */\n", u->ra_signed,
              u->ra_signed ? "the saved return address is signed (AArch64 pointer "
                             "authentication, A key)" : "the saved return address is plain");
    sb_printf(sb, "#define SG_SHIM_CALL_OFFSET 0x%zx /* %s */\n", u->call_offset, u->call_text);
    sb_printf(sb, "#define SG_SHIM_CALL_SIZE %zu\n", u->call_size);
}

/* The comment that opens the unwind facts: `intro`, then the row at the call. */
static void put_facts(strbuf *sb, const gen_target *t, const gen_unwind *u, const char *intro)
{
    char row[512];
    cfi_format_row(u->call_row, t->reg_name, row, sizeof row);
    sb_puts(sb, intro);
    sb_printf(sb, " *   %s   at shim+0x%zx %s\n */\n", row, u->call_offset, u->call_text);
}

/* The shim's rows, as the rest of a comment. */
static void put_rows(strbuf *sb, const gen_target *t, const gen_unwind *u)
{
    char row[512];
    for (size_t i = 0; i < u->rows.count; i++) {
        cfi_format_row(&u->rows.rows[i], t->reg_name, row, sizeof row);
        sb_printf(sb, " *   shim+0x%04" PRIx64 ": %s\n", u->rows.rows[i].loc, row);
    }
    sb_puts(sb, " */\n");
}

/* The facts every executor's unwind record and the shim's RUNTIME_FUNCTION
 * need (COFF targets). */
/* 32-bit x86 Windows: no unwind tables, the ebp chain. */
static void put_unwind_fp_chain(strbuf *sb, const gen_target *t, const gen_unwind *u)
{
    put_facts(sb, t, u,
              "/* Unwind facts, all derived from the shim's prolog (32-bit Windows has no\n"
              " * unwind tables: debuggers and stack walkers follow the ebp chain). No stencil\n"
              " * writes the frame pointer (checked), so the state after the shim's prolog, at\n"
              " * its call into JIT code, holds at every executor PC:\n");
    sb_puts(sb, "#define SG_UNWIND_FP_CHAIN 1 /* frames are walked by the ebp chain, no tables */\n");
    put_shape(sb, t, u);
    sb_printf(sb, "#define SG_SHIM_FUNCTION_START 0x%" PRIx64 " /* the shim covers "
                  "sg_shim.code[START, START + SIZE) */\n",
              u->fde_start);
    sb_printf(sb, "#define SG_SHIM_FUNCTION_SIZE 0x%" PRIx64 "\n\n", u->fde_size);
    sb_puts(sb, "/* The shim's prolog, replayed; its rows:\n");
    put_rows(sb, t, u);
    sb_putc(sb, '\n');
}

static void put_unwind_win(strbuf *sb, const gen_target *t, const gen_unwind *u)
{
    bool arm64 = t->win_unwind == WIN_UNWIND_ARM64;
    if (t->win_unwind == WIN_UNWIND_X86_FP) {
        put_unwind_fp_chain(sb, t, u);
        return;
    }
    put_facts(sb, t, u,
              arm64 ? "/* Unwind facts, all derived from the shim's compiled .pdata/.xdata (Windows\n"
                      " * ARM64 unwind codes). No stencil writes the frame pointer (checked), so the\n"
                      " * state after the shim's prolog, at its call into JIT code, holds at every\n"
                      " * executor PC:\n"
                    : "/* Unwind facts, all derived from the shim's compiled .pdata/.xdata (Windows\n"
                      " * x64 UNWIND_INFO). No stencil writes the frame pointer (checked), so the\n"
                      " * state after the shim's prolog, at its call into JIT code, holds at every\n"
                      " * executor PC:\n");
    if (arm64) {
        sb_puts(sb, "#define SG_UNWIND_WIN_ARM64 1 /* unwind facts are ARM64 .xdata codes, not "
                    "DWARF CFI */\n");
        sb_printf(sb, "#define SG_SHIM_UNWIND_PACKED %d /* %s */\n", u->win_packed,
                  u->win_packed ? "clang packed the shim's unwind data into its .pdata entry; "
                                  "sg_shim_unwind_info is the .xdata record it stands for"
                                : "the shim's unwind data is an .xdata record, copied");
    } else {
        sb_puts(sb, "#define SG_UNWIND_WIN64 1 /* unwind facts are UNWIND_INFO, not DWARF CFI */\n");
    }
    put_shape(sb, t, u);
    sb_printf(sb, "#define SG_SHIM_FUNCTION_START 0x%" PRIx64 " /* the shim's RUNTIME_FUNCTION "
                  "covers sg_shim.code[START, START + SIZE) */\n",
              u->fde_start);
    sb_printf(sb, "#define SG_SHIM_FUNCTION_SIZE 0x%" PRIx64 "\n\n", u->fde_size);
    sb_printf(sb, "/* The shim's %s; its rows:\n",
              arm64 ? "unwind data as an .xdata record" : "UNWIND_INFO as compiled");
    put_rows(sb, t, u);
    put_bytes(sb, "sg_shim_unwind_info", "", u->win64_info, u->win64_info_len);
    if (arm64)
        sb_puts(sb, "/* The executors' .xdata record: no prolog of their own (end_c), then the\n"
                    " * shim's prolog codes, so that every code applies at every executor PC; a\n"
                    " * single epilog with no instructions. Bits 0-17 (the length, in words) are\n"
                    " * 0: the runtime writes each executor's. */\n");
    else
        sb_puts(sb, "/* The executors' UNWIND_INFO: the shim's frame register, offset and codes\n"
                    " * with no prolog, so that every code applies at every executor PC. */\n");
    put_bytes(sb, "sg_executor_unwind_info", "", u->executor_win64_info,
              u->executor_win64_info_len);
    sb_putc(sb, '\n');
}

static void put_unwind(strbuf *sb, const gen_target *t, const gen_unwind *u)
{
    char row[512];
    if (t->object_format == OBJ_FORMAT_COFF) {
        put_unwind_win(sb, t, u);
        return;
    }
    put_facts(sb, t, u,
              "/* Unwind facts, all derived from the shim's compiled .eh_frame. No stencil\n"
              " * writes the frame pointer (checked), so the row in force at the shim's\n"
              " * call into JIT code holds at every executor PC:\n");
    sb_printf(sb, "#define SG_UNWIND_CODE_ALIGN %" PRIu64 "\n", u->code_align);
    sb_printf(sb, "#define SG_UNWIND_DATA_ALIGN (%" PRId64 ")\n", u->data_align);
    sb_printf(sb, "#define SG_UNWIND_RA_COLUMN %" PRIu32 " /* %s */\n", u->ra_column,
              reg_or_number(t, u->ra_column));
    put_shape(sb, t, u);
    sb_printf(sb, "#define SG_SHIM_FDE_START 0x%" PRIx64 " /* the shim's FDE covers "
                  "sg_shim.code[START, START + SIZE) */\n",
              u->fde_start);
    sb_printf(sb, "#define SG_SHIM_FDE_SIZE 0x%" PRIx64 "\n\n", u->fde_size);

    sb_puts(sb, "/* The shim's CIE initial instructions (padding removed). */\n");
    put_bytes(sb, "sg_shim_cie_insns", "", u->cie_insns, u->cie_insns_len);
    sb_puts(sb, "/* The shim's FDE instructions (padding removed); its rows:\n");
    put_rows(sb, t, u);
    put_bytes(sb, "sg_shim_fde_insns", "", u->fde_insns, u->fde_insns_len);
    cfi_format_row(u->call_row, t->reg_name, row, sizeof row);
    sb_printf(sb, "/* The row at the call as CFA instructions, for executor FDEs:\n *   %s\n */\n",
              row);
    put_bytes(sb, "sg_executor_cfi", "", u->executor_cfi, u->executor_cfi_len);
    sb_putc(sb, '\n');
}

/* One enumerator per stencil; a folded variant is a macro of its twin's. */
static void put_op_enum(strbuf *sb, const gen_header_model *m)
{
    /* Numbered by position, not written: an added op adds one line, it does
     * not renumber the lines of the ops after it (docs/build.md, "Prebuilt
     * headers"). */
    sb_puts(sb, "enum sg_op {\n");
    for (size_t i = 0; i < m->nops; i++)
        if (own_stencil(m, i))
            sb_cat(sb, "    SG_OP_", m->defs[i].name, ",\n", NULL);
    sb_puts(sb, "    SG_OP__COUNT\n};\n");
    sb_puts(sb, "/* Each also a macro of itself, for #ifdef. */\n");
    for (size_t i = 0; i < m->nops; i++) {
        const gen_op *twin = &m->defs[own_stencil(m, i) ? i : m->twin[i]];
        sb_printf(sb, "#define SG_OP_%s SG_OP_%s", m->defs[i].name, twin->name);
        if (twin != &m->defs[i])
            sb_printf(sb, " /* folded: the same stencil as %s */", op_display(twin));
        sb_putc(sb, '\n');
    }
    sb_putc(sb, '\n');
}

/* SG_OP_VARIANT_<op>(v_<axis>, ...): the variant's enumerator as a constant
 * expression, SG_OP__COUNT (which sr_emit refuses) for a value out of its
 * axis' range; unsigned throughout (C++ warns of enum and unsigned mixed in
 * a conditional). Without folding the op's enumerators are consecutive. */
static void put_variant_macro(strbuf *sb, const gen_header_model *m, size_t first)
{
    const gen_op *op = &m->defs[first];
    size_t n = variant_count(op->axes, op->naxes);
    bool folded = false;
    for (size_t v = 0; v < n; v++)
        folded |= !own_stencil(m, first + v);
    strbuf index = {0}, check = {0};
    size_t stride = n;
    sb_printf(sb, "#define SG_OP_VARIANT_%s(", op->base);
    for (size_t a = 0; a < op->naxes; a++) {
        const gen_axis *x = &op->axes[a];
        unsigned span = x->last - x->first + 1;
        stride /= span;
        sb_printf(sb, "%sv_%s", a ? ", " : "", x->name);
        sb_printf(&check, "%s(unsigned)(v_%s) - %uu <= %uu", a ? " && " : "", x->name, x->first,
                  span - 1);
        sb_printf(&index, "%s((unsigned)(v_%s) - %uu) * %zuu", a ? " + " : "", x->name, x->first,
                  stride);
    }
    sb_printf(sb, ") \\\n    (%s \\\n         ? ", check.data);
    if (!folded) {
        sb_printf(sb, "(unsigned)SG_OP_%s + %s", op->name, index.data);
    } else {
        sb_puts(sb, "(unsigned)(");
        for (size_t v = 0; v + 1 < n; v++)
            sb_printf(sb, "(%s) == %zuu ? SG_OP_%s : \\\n           ", index.data, v,
                      m->defs[first + v].name);
        sb_printf(sb, "SG_OP_%s)", m->defs[first + n - 1].name);
    }
    sb_puts(sb, " \\\n         : (unsigned)SG_OP__COUNT)\n");
    sb_free(&index);
    sb_free(&check);
}

/* Per op with variants: its axes, the stencil of each combination, the macro. */
static void put_variant_op(strbuf *sb, const gen_header_model *m, size_t first)
{
    const gen_op *op = &m->defs[first];
    size_t n = variant_count(op->axes, op->naxes);
    sb_printf(sb, "static const sg_variant_axis sg_variant_axes_%s[%zu] = {", op->base,
              op->naxes);
    for (size_t a = 0; a < op->naxes; a++)
        sb_printf(sb, "%s{\"%s\", %u, %u}", a ? ", " : "", op->axes[a].name, op->axes[a].first,
                  op->axes[a].last);
    sb_printf(sb, "};\nstatic const uint32_t sg_variant_stencils_%s[%zu] = {", op->base, n);
    for (size_t v = 0; v < n; v++)
        sb_printf(sb, "%sSG_OP_%s,", v % 4 ? " " : "\n    ", m->defs[first + v].name);
    sb_puts(sb, "\n};\n");
    put_variant_macro(sb, m, first);
}

/* The ops with variants, for a VM to pick one generically (docs/runtime.md,
 * "Variants"): sg_variant_ops, and SG_VARIANT_OP_<op> its index there. */
static void put_variant_tables(strbuf *sb, const gen_header_model *m)
{
    sb_puts(sb, "/* Ops with variants (docs/ops.md, \"Variants\"): each one's axes, and the\n"
                " * stencil of each combination of their values (the last axis varying\n"
                " * fastest); SG_OP_VARIANT_<op>(value, ...) is that stencil as a constant. */\n");
    size_t nv = 0;
    strbuf table = {0};
    for (size_t i = 0; i < m->nops; i++) {
        const gen_op *op = &m->defs[i];
        if (!op->naxes || op->variant)
            continue;
        put_variant_op(sb, m, i);
        sb_printf(&table, "    {\"%s\", %zu, sg_variant_axes_%s, %zu, sg_variant_stencils_%s},\n",
                  op->base, op->naxes, op->base, variant_count(op->axes, op->naxes), op->base);
        sb_printf(sb, "#define SG_VARIANT_OP_%s %zu\n\n", op->base, nv++);
    }
    sb_printf(sb, "#define SG_VARIANT_OP__COUNT %zu\n"
                  "/* Fields: name, axis_count, axes, count, stencils. */\n"
                  "static const sg_variant_op sg_variant_ops[SG_VARIANT_OP__COUNT] = {\n%s};\n\n",
              nv, table.data);
    sb_free(&table);
}

void writer_target_header(strbuf *sb, const gen_header_model *m)
{
    const gen_target *t = m->target;
    char *file = writer_target_filename(t);
    char *guard = ident_upper(file);
    /* About what a stencil takes with its listing: the header is not copied
     * over and over as it grows. */
    sb_reserve(sb, 5000 * m->nops + 65536);
    sb_printf(sb, "/* %s - stencils for %s.\n * Generated by stencilgen from ", file, t->triple);
    put_in_comment(sb, m->manifest_name);
    /* No totals here: an edit to one op would rewrite this line too (diff
     * locality, docs/build.md "Prebuilt headers"); `build` prints them. */
    sb_printf(sb, " with LLVM %s; do not edit.\n */\n", lb_llvm_version());
    sb_printf(sb, "#ifndef %s\n#define %s\n\n", guard, guard);
    sb_puts(sb, "#include <stddef.h>\n#include <stdint.h>\n#include <string.h>\n\n");
    /* The ABI comes from the runtime this header is compiled against, and
     * must be the one it was generated for. */
    sb_printf(sb, "#include \"stencilrt_abi.h\"\n"
                  "#if SG_ABI_VERSION != %d /* the stencil ABI this header was written for */\n"
                  "#error \"%s: stencilrt_abi.h is another ABI version; regenerate this header\"\n"
                  "#endif\n\n",
              SG_ABI_VERSION, file);
    if (has_variants(m))
        sb_printf(sb, "#ifndef SG_ABI_VARIANTS /* the variant tables' types */\n"
                      "#error \"%s: stencilrt_abi.h predates op variants; use stencilrt 0.3 or "
                      "later\"\n#endif\n\n",
                  file);
    sb_printf(sb, "#define SG_TARGET_TRIPLE \"%s\"\n", t->triple);
    sb_printf(sb, "#define SG_TARGET_ELF_MACHINE %u\n", t->elf_machine);
    sb_printf(sb, "#define SG_TARGET_LANDING_PADS %d /* %s */\n\n", m->landing_pads,
              m->landing_pads ? "every op and the shim start with a landing pad for indirect "
                                "calls: JIT pages may be guarded (BTI, IBT)"
                              : "no landing pads: JIT pages are never guarded");

    sb_puts(sb, "/* Run-time symbols the stencils may refer to (SG_VALUE_SYMBOL). */\n"
                "enum sg_symbol {\n");
    for (size_t i = 0; i < m->nsymbols; i++)
        sb_printf(sb, "    SG_SYM_%s = %zu,\n", m->symbols[i], i);
    sb_printf(sb, "    SG_SYM__COUNT = %zu\n};\n", m->nsymbols);
    sb_puts(sb, "/* Each also a macro of itself, for #ifdef. */\n");
    for (size_t i = 0; i < m->nsymbols; i++)
        sb_printf(sb, "#define SG_SYM_%s SG_SYM_%s\n", m->symbols[i], m->symbols[i]);
    sb_puts(sb, "static const char *const sg_symbol_names[SG_SYM__COUNT + 1] = {\n");
    for (size_t i = 0; i < m->nsymbols; i++)
        sb_printf(sb, "    \"%s\",\n", m->symbols[i]);
    sb_puts(sb, "    NULL\n};\n\n");

    put_op_enum(sb, m);
    for (size_t i = 0; i < m->nops; i++)
        if (own_stencil(m, i))
            put_stencil_arrays(sb, &m->ops[i], m->defs[i].name, m->symbols, !m->no_listing);
    emitter_write_attributes(sb);
    put_op_emitters(sb, m);
    /* In SG_OP_ order, positional: C++17 has neither array nor field designators. */
    sb_puts(sb, "/* Fields: name, code, code_size, data, data_size, data_align, code_holes,\n"
                " * code_hole_count, data_holes, data_hole_count, falls_through, emit,\n"
                " * emit_case. */\n"
                "static const sg_stencil sg_stencils[SG_OP__COUNT] = {\n");
    size_t ngroups = emitter_groups(stencil_count(m));
    for (size_t i = 0; i < m->nops; i++) {
        if (!own_stencil(m, i))
            continue;
        char *fn = emitter_fn_name(emitter_group_of(m->defs[i].name, ngroups));
        char *label = xasprintf("SG_CASE_%s", m->defs[i].name);
        sb_cat(sb, "    /* SG_OP_", m->defs[i].name, " */ ", NULL);
        put_stencil_init(sb, &m->ops[i], m->defs[i].name, fn, label);
        sb_puts(sb, ",\n");
        free(label);
        free(fn);
    }
    sb_puts(sb, "};\n\n");
    put_cold_sizes(sb, m);
    if (has_variants(m))
        put_variant_tables(sb, m);

    sb_puts(sb, "/* The shim: the C function that calls into JIT code. */\n");
    put_stencil_arrays(sb, m->shim, "shim", m->symbols, !m->no_listing);
    emitter_write_group(sb, "sg_emit_shim", &(emitter_case){m->shim, "shim", "0"}, 1, m->symbols);
    sb_puts(sb, "static const sg_stencil sg_shim = ");
    put_stencil_init(sb, m->shim, "shim", "sg_emit_shim", "0");
    sb_printf(sb, ";\n#define SG_SHIM_ENTRY %zu /* offset of %s in sg_shim.code */\n\n",
              m->shim->entry, m->shim->name);
    put_unwind(sb, t, m->unwind);
    if (m->provenance)
        sb_cat(sb, m->provenance, "\n", NULL);
    sb_printf(sb, "#endif /* %s */\n", guard);
    free(guard);
    free(file);
}

void writer_dispatcher(strbuf *sb, const gen_target *const *targets, size_t n)
{
    sb_puts(sb, "/* jit_stencils.h - includes the stencils generated for the host.\n"
                " * Generated by stencilgen; do not edit. */\n");
    strbuf list = {0};
    size_t k = 0; /* conditions written */
    for (int first = 1; first >= 0; first--)
        for (size_t i = 0; i < n; i++) {
            const gen_target *t = targets[i];
            if (t->dispatch_first != first)
                continue;
            char *file = writer_target_filename(t);
            sb_printf(sb, "#%s %s\n#include \"%s\"\n", k++ ? "elif" : "if", t->host_condition,
                      file);
            free(file);
        }
    for (size_t i = 0; i < n; i++)
        sb_printf(&list, "%s%s", i ? ", " : "", targets[i]->triple);
    sb_printf(sb, "#else\n#error \"jit_stencils.h: no stencils were generated for this host "
                  "(generated for: %s)\"\n#endif\n",
              list.data);
    sb_free(&list);
}

bool writer_dump(strbuf *sb, const gen_header_model *m, const char *only)
{
    bool found = false;
    for (size_t i = 0; i < m->nops; i++) {
        const gen_stencil *s = &m->ops[i];
        const gen_op *op = &m->defs[i]; /* by display, C or (every variant) written name */
        if (only && strcmp(only, s->name) && strcmp(only, op->name) &&
            (!op->base || strcmp(only, op->base)))
            continue;
        found = true;
        sb_printf(sb, "op %s (%s) - %s:%u:%u, %zu bytes\n", s->name, m->target->triple,
                  s->source, s->line, s->col, s->code_size);
        if (m->hot_cold)
            hotcold_describe(sb, s, "  ");
        writer_listing(sb, m->symbols, s, "  ");
        sb_putc(sb, '\n');
    }
    if (!only) {
        sb_printf(sb, "shim %s (%s) - %s, %zu bytes, entry +0x%zx\n", m->shim->name,
                  m->target->triple, m->shim->source, m->shim->code_size, m->shim->entry);
        writer_listing(sb, m->symbols, m->shim, "  ");
        writer_unwind_rows(sb, m->target, m->unwind, "  ");
    }
    return found;
}

void writer_summary(strbuf *sb, const gen_header_model *m, size_t compiled, size_t cached)
{
    gen_totals tot = stencil_totals(m->ops, m->nops, m->twin);
    size_t stencils = stencil_count(m);
    char folded[64] = "";
    if (stencils < m->nops)
        snprintf(folded, sizeof folded, ", %zu folded", m->nops - stencils);
    strbuf kinds = {0};
    for (int k = 0; k < SG_PATCH__COUNT; k++) {
        if (tot.by_patch[k])
            sb_printf(&kinds, "%s%s %zu", kinds.len ? ", " : "", sg_patch_infos[k].name,
                      tot.by_patch[k]);
    }
    sb_printf(sb, "stencilgen: %s: %zu ops (%zu compiled, %zu cached%s), %zu bytes of code, "
                  "%zu bytes of data, %zu holes (%s)\n",
              m->target->triple, stencils, compiled, cached, folded, tot.code, tot.data, tot.holes,
              kinds.len ? kinds.data : "none");
    sb_free(&kinds);
}
