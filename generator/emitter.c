/* emitter.c - see emitter.h. The code written here must do exactly what the
 * runtime's table-driven patcher does with the same holes (emit.c); a runtime
 * test emits random programs both ways and compares the bytes. */
#include "emitter.h"

#include <inttypes.h>

/* S: the hole's value, as a C expression over the emitter's parameters. */
static void put_value(strbuf *sb, const gen_stencil *s, const gen_hole *h, char *const *symbols)
{
    switch (h->value) {
    case SG_VALUE_CODE: sb_puts(sb, "(uintptr_t)code"); break;
    case SG_VALUE_DATA: sb_puts(sb, "(uintptr_t)data"); break;
    /* The next instruction's code follows this one's: a PC-relative jump there
     * is a constant the compiler folds, range check included. */
    case SG_VALUE_CONTINUE: sb_printf(sb, "(uintptr_t)code + %zu", s->code_size); break;
    case SG_VALUE_JUMP_TARGET: sb_puts(sb, "env->target"); break;
    case SG_VALUE_OPERAND: sb_printf(sb, "env->operand[%" PRIu32 "]", h->index); break;
    case SG_VALUE_SYMBOL:
        sb_printf(sb, "(uintptr_t)env->symbol[SG_SYM_%s]", symbols[h->index]);
        break;
    default: sb_puts(sb, "0"); break; /* cannot happen: extraction names every value */
    }
}

/* v = S + A, or G + A where G is the GOT slot holding S. */
static void put_final_value(strbuf *sb, const gen_stencil *s, const gen_hole *h,
                            char *const *symbols)
{
    if (sg_patch_uses_got(h->patch) && h->value == SG_VALUE_SYMBOL) {
        sb_printf(sb, "env->symbol_got[SG_SYM_%s]", symbols[h->index]);
    } else if (sg_patch_uses_got(h->patch)) {
        sb_puts(sb, "sg_got(env, ");
        put_value(sb, s, h, symbols);
        sb_putc(sb, ')');
    } else {
        put_value(sb, s, h, symbols);
    }
    if (h->addend > 0)
        sb_printf(sb, " + 0x%" PRIx64 "u", (uint64_t)h->addend);
    else if (h->addend < 0)
        sb_printf(sb, " - 0x%" PRIx64 "u", (uint64_t)0 - (uint64_t)h->addend);
}

static bool uses_env(const gen_hole *h)
{
    return h->value == SG_VALUE_JUMP_TARGET || h->value == SG_VALUE_OPERAND ||
           h->value == SG_VALUE_SYMBOL || sg_patch_uses_got(h->patch);
}

/* Which parameters the emitter reads (the others are marked unused). */
static void parameters_used(const gen_stencil *s, bool *data_used, bool *env_used)
{
    *data_used = s->ndata_holes > 0;
    *env_used = false;
    for (size_t i = 0; i < s->ncode_holes + s->ndata_holes; i++) {
        const gen_hole *h = i < s->ncode_holes ? &s->code_holes[i]
                                              : &s->data_holes[i - s->ncode_holes];
        *data_used |= h->value == SG_VALUE_DATA;
        *env_used |= uses_env(h);
    }
}

static void put_patch(strbuf *sb, const gen_stencil *s, const gen_hole *h, const char *base,
                      size_t number, char *const *symbols)
{
    const char *kind = sg_patch_infos[h->patch].name;
    bool via_veneer = sg_hole_may_use_veneer(h->patch, h->value);
    if (via_veneer)
        sb_printf(sb, "    if (sg_patch_veneered(%s + 0x%" PRIx32 ", SG_PATCH_%s, ", base,
                  h->offset, kind);
    else
        sb_printf(sb, "    if (sg_patch_%s(%s + 0x%" PRIx32 ", ", kind, base, h->offset);
    put_final_value(sb, s, h, symbols);
    sb_printf(sb, "%s))\n        return %zu;\n", via_veneer ? ", env" : "", number);
}

void emitter_write(strbuf *sb, const gen_stencil *s, const char *id, char *const *symbols)
{
    bool data_used, env_used;
    parameters_used(s, &data_used, &env_used);
    sb_printf(sb, "static unsigned sg_emit_%s(uint8_t *code, uint8_t *data, "
                  "sg_emit_env *env)\n{\n", id);
    if (!s->code_size) /* an op that only falls through: nothing to copy */
        sb_puts(sb, "    (void)code;\n");
    if (!data_used)
        sb_puts(sb, "    (void)data;\n");
    if (!env_used)
        sb_puts(sb, "    (void)env;\n");
    if (s->code_size)
        sb_printf(sb, "    memcpy(code, sg_code_%s, %zu);\n", id, s->code_size);
    for (size_t i = 0; i < s->ncode_holes; i++)
        put_patch(sb, s, &s->code_holes[i], "code", i + 1, symbols);
    for (size_t i = 0; i < s->ndata_holes; i++)
        put_patch(sb, s, &s->data_holes[i], "data", s->ncode_holes + i + 1, symbols);
    sb_puts(sb, "    return 0;\n}\n\n");
}
