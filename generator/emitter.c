/* emitter.c - see emitter.h. The code written here must do exactly what the
 * runtime's table-driven patcher does with the same holes (emit.c); a runtime
 * test emits random programs both ways and compares the bytes. */
#include "emitter.h"

/* The bytes of s that run in the instruction's own place: all of them, but
 * for an op laid out in two parts (hotcold_split.c), whose cold part the
 * emitter writes at env->cold. */
static size_t hot_bytes(const gen_stencil *s)
{
    return s->split ? s->hot_size : s->code_size;
}

/* S: the hole's value, as a C expression over the emitter's parameters and
 * its locals `at` and `data_at`, where its code and data run. */
static void put_value(strbuf *sb, const gen_stencil *s, const gen_hole *h, char *const *symbols)
{
    switch (h->value) {
    case SG_VALUE_CODE: sb_puts(sb, "at"); break;
    case SG_VALUE_DATA: sb_puts(sb, "data_at"); break;
    /* The next instruction's code follows this one's: a PC-relative jump there
     * is a constant the compiler folds, range check included. */
    case SG_VALUE_CONTINUE:
        sb_puts(sb, "at + ");
        sb_put_dec(sb, (int64_t)hot_bytes(s));
        break;
    case SG_VALUE_COLD: sb_puts(sb, "cold_at"); break; /* hotcold_split.c */
    case SG_VALUE_JUMP_TARGET: sb_puts(sb, "env->target"); break;
    case SG_VALUE_OPERAND:
        sb_puts(sb, "env->operand[");
        sb_put_dec(sb, h->index);
        sb_putc(sb, ']');
        break;
    case SG_VALUE_SYMBOL:
        sb_cat(sb, "(uintptr_t)env->symbol[SG_SYM_", symbols[h->index], "]", NULL);
        break;
    default: sb_puts(sb, "0"); break; /* cannot happen: extraction names every value */
    }
}

/* The local holding the instruction's GOT slot for the hole's value. */
static void put_got_name(strbuf *sb, const gen_hole *h)
{
    bool operand = h->value == SG_VALUE_OPERAND;
    sb_puts(sb, operand ? "got_operand" : "got_");
    sb_put_dec(sb, operand ? h->index : sg_got_key(h->value, h->index));
}

/* v = S + A, or G + A where G is the GOT slot holding S. */
static void put_final_value(strbuf *sb, const gen_stencil *s, const gen_hole *h,
                            char *const *symbols)
{
    if (sg_patch_uses_got(h->patch) && h->value == SG_VALUE_SYMBOL) {
        sb_cat(sb, "env->symbol_got[SG_SYM_", symbols[h->index], "]", NULL);
    } else if (sg_patch_uses_got(h->patch)) {
        put_got_name(sb, h);
    } else {
        put_value(sb, s, h, symbols);
    }
    if (h->addend) {
        sb_put_addend(sb, h->addend);
        sb_putc(sb, 'u'); /* unsigned arithmetic, as the formulas' */
    }
}

/* Hole i of the stencil: its code holes, then its data holes. */
static const gen_hole *nth_hole(const gen_stencil *s, size_t i)
{
    return i < s->ncode_holes ? &s->code_holes[i] : &s->data_holes[i - s->ncode_holes];
}

/* Which of the code's and the data's running addresses the emitter needs
 * (`at`, `data_at`): each hole's own, and those its value names. */
static void addresses_used(const gen_stencil *s, bool *code_at, bool *data_at)
{
    *code_at = s->ncode_holes > 0;
    *data_at = s->ndata_holes > 0;
    for (size_t i = 0; i < s->ncode_holes + s->ndata_holes; i++) {
        const gen_hole *h = nth_hole(s, i);
        *code_at |= h->value == SG_VALUE_CODE || h->value == SG_VALUE_CONTINUE;
        *data_at |= h->value == SG_VALUE_DATA;
    }
}

static void put_patch(strbuf *sb, const gen_stencil *s, const gen_hole *h, bool in_data,
                      size_t number, char *const *symbols)
{
    const char *kind = sg_patch_infos[h->patch].name;
    bool cold = !in_data && h->offset >= hot_bytes(s); /* in the cold part, written apart */
    const char *p = in_data ? "data" : cold ? "env->cold" : "code";
    const char *pc = in_data ? "data_at" : cold ? "cold_at" : "at";
    gen_hole moved = *h;
    if (cold) { /* its offset in the cold part */
        moved.offset = (uint32_t)(h->offset - hot_bytes(s));
        h = &moved;
    }
    /* "if (sg_patch_veneered(P + 0xOFF, PC + 0xOFF, SG_PATCH_KIND, V, env))" or
     * "if (sg_patch_KIND(P + 0xOFF, PC + 0xOFF, V))", without printf: every
     * hole of every stencil comes here. */
    bool via_veneer = sg_hole_may_use_veneer(h->patch, h->value);
    if (via_veneer)
        sb_cat(sb, "        if (sg_patch_veneered(", p, " + 0x", NULL);
    else
        sb_cat(sb, "        if (sg_patch_", kind, "(", p, " + 0x", NULL);
    sb_put_hex(sb, h->offset, 1);
    sb_cat(sb, ", ", pc, " + 0x", NULL);
    sb_put_hex(sb, h->offset, 1);
    sb_puts(sb, ", ");
    if (via_veneer)
        sb_cat(sb, "SG_PATCH_", kind, ", ", NULL);
    put_final_value(sb, s, h, symbols);
    sb_puts(sb, via_veneer ? ", env))\n            return " : "))\n            return ");
    sb_put_dec(sb, (int64_t)number);
    sb_puts(sb, ";\n");
}

/* One GOT slot per value the instruction's holes reach through the GOT
 * (sg_got_key), taken in the order the holes first name them. */
static void put_got_slots(strbuf *sb, const gen_stencil *s, char *const *symbols)
{
    bool taken[SG_GOT_KEYS] = {false};
    for (size_t i = 0; i < s->ncode_holes + s->ndata_holes; i++) {
        const gen_hole *h = nth_hole(s, i);
        unsigned key = sg_got_key(h->value, h->index);
        if (!sg_patch_uses_got(h->patch) || h->value == SG_VALUE_SYMBOL || key >= SG_GOT_KEYS ||
            taken[key])
            continue;
        taken[key] = true;
        sb_puts(sb, "        const uint64_t ");
        put_got_name(sb, h);
        sb_puts(sb, " = sg_got(env, ");
        put_value(sb, s, h, symbols);
        sb_puts(sb, ");\n");
    }
}

/* Whether sg_emit_table (stencilrt_abi.h) can patch hole h: its value is at
 * hand in the emitter's parameters, and it needs no veneer nor GOT slot of
 * its own. */
static bool tabled_hole(const gen_hole *h)
{
    if (sg_hole_may_use_veneer(h->patch, h->value))
        return false;
    switch (h->value) {
    case SG_VALUE_CODE:
    case SG_VALUE_CONTINUE:
    case SG_VALUE_JUMP_TARGET:
    case SG_VALUE_OPERAND: return !sg_patch_uses_got(h->patch);
    case SG_VALUE_SYMBOL: return true;
    default: return false;
    }
}

/* Whether s's emitter hands its holes to sg_emit_table instead of a patch
 * each: a VM's compile of the header grows with the patches, about 0.45 ms
 * each under gcc -O2, and the table walk emits at about 0.8x their speed
 * (docs/build.md, "What a header holds"); stencils of a few holes, most of
 * a small VM's, keep their patches. Only code holes, in one part. */
static bool tabled(const gen_stencil *s)
{
    if (s->ncode_holes <= EMIT_TABLE_MIN_HOLES || s->ndata_holes || hot_bytes(s) < s->code_size)
        return false;
    for (size_t i = 0; i < s->ncode_holes; i++)
        if (!tabled_hole(&s->code_holes[i]))
            return false;
    return true;
}

/* Stencil `s` as case `label` of its group's switch: copy, GOT slots, patches. */
static void put_case(strbuf *sb, const gen_stencil *s, const char *id, const char *label,
                     char *const *symbols)
{
    bool code_at, data_at;
    addresses_used(s, &code_at, &data_at);
    sb_cat(sb, "    case ", label, ": { /* ", s->name, " */\n", NULL);
    if (tabled(s)) {
        sb_cat(sb, "        return sg_emit_table(code, env, sg_code_", id, ", ", NULL);
        sb_put_dec(sb, (int64_t)s->code_size);
        sb_cat(sb, ", sg_code_holes_", id, ", ", NULL);
        sb_put_dec(sb, (int64_t)s->ncode_holes);
        sb_puts(sb, ");\n    }\n");
        return;
    }
    if (code_at)
        sb_puts(sb, "        const uint64_t at = (uintptr_t)code + env->delta;\n");
    if (data_at)
        sb_puts(sb, "        const uint64_t data_at = (uintptr_t)data + env->delta;\n");
    if (hot_bytes(s) < s->code_size) /* a cold part (hotcold_split.c), written apart */
        sb_printf(sb, "        const uint64_t cold_at = (uintptr_t)env->cold + env->delta;\n"
                      "        memcpy(env->cold, sg_code_%s + %zu, %zu);\n",
                  id, hot_bytes(s), s->code_size - hot_bytes(s));
    if (hot_bytes(s)) {
        sb_cat(sb, "        memcpy(code, sg_code_", id, ", ", NULL);
        sb_put_dec(sb, (int64_t)hot_bytes(s));
        sb_puts(sb, ");\n");
    }
    put_got_slots(sb, s, symbols);
    for (size_t i = 0; i < s->ncode_holes; i++)
        put_patch(sb, s, &s->code_holes[i], false, i + 1, symbols);
    for (size_t i = 0; i < s->ndata_holes; i++)
        put_patch(sb, s, &s->data_holes[i], true, s->ncode_holes + i + 1, symbols);
    sb_puts(sb, "        return 0;\n    }\n");
}

void emitter_write_attributes(strbuf *sb)
{
    sb_puts(sb, "/* Emitters are straight-line code: gcc makes it as fast at -O1 as at -O2, in\n"
                " * 0.7 of the compile time (docs/runtime.md, \"Emitters\"). Define\n"
                " * SG_EMITTER_ATTRIBUTES (empty: the file's own level) before including\n"
                " * this header to choose otherwise. */\n"
                "#ifndef SG_EMITTER_ATTRIBUTES\n"
                "#if defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE__) && \\\n"
                "    !defined(__OPTIMIZE_SIZE__)\n"
                "#define SG_EMITTER_ATTRIBUTES __attribute__((optimize(\"O1\")))\n"
                "#else\n"
                "#define SG_EMITTER_ATTRIBUTES\n"
                "#endif\n"
                "#endif\n\n");
}

void emitter_write_group(strbuf *sb, const char *fn, const emitter_case *cases, size_t n,
                         char *const *symbols)
{
    sb_printf(sb, "SG_EMITTER_ATTRIBUTES\n"
                  "static unsigned %s(unsigned which, uint8_t *code, uint8_t *data, "
                  "sg_emit_env *env)\n{\n"
                  "    (void)code, (void)data, (void)env; /* not every stencil uses each */\n"
                  "    switch (which) {\n", fn);
    for (size_t i = 0; i < n; i++)
        put_case(sb, cases[i].stencil, cases[i].id, cases[i].label, symbols);
    sb_puts(sb, "    default: return SG_EMIT_UNKNOWN;\n    }\n}\n\n");
}
