/* verify.c - see verify.h. */
#include "verify.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp_check.h"
#include "hotcold.h"
#include "objfile.h"
#include "property_notes.h"
#include "split.h"
#include "util.h"

void verify_name(const gen_verify_in *in, gen_stencil *s)
{
    const gen_manifest *m = in->manifest;
    s->name = xstrdup(in->op ? op_display(in->op) : m->shim_function);
    s->source = manifest_relpath(m, in->op ? in->op->source : m->shim_source);
    s->line = in->op ? in->op->line : 0;
    s->col = in->op ? in->op->col : 0;
}

static bool starts_with_pad(const gen_target *t, const gen_stencil *s)
{
    return s->entry < s->code_size && t->landing_pad(s->code + s->entry, s->code_size - s->entry);
}

bool verify_landing_pads(const gen_target *t, const gen_stencil *ops, size_t nops,
                         const gen_stencil *shim, bool *all)
{
    bool shim_pad = starts_with_pad(t, shim);
    const gen_stencil *odd = NULL; /* the first op that differs from the shim */
    for (size_t i = 0; i < nops && !odd; i++)
        odd = starts_with_pad(t, &ops[i]) != shim_pad ? &ops[i] : NULL;
    *all = shim_pad && !odd;
    if (!odd)
        return true;
    diag_error_at(odd->source, odd->line, odd->col,
                  "%s: op %s %s a landing pad for indirect calls and the shim %s %s: JIT "
                  "pages can be guarded (BTI, IBT) only when every way into them has one; "
                  "compile ops and shim alike (the target's cflags and shim_cflags), with or "
                  "without %s",
                  t->triple, odd->name, shim_pad ? "does not start with" : "starts with",
                  shim->name, shim_pad ? "does" : "does not", t->landing_pad_flag);
    return false;
}

/* Compare the derived shape with the manifest's expect_frame; on mismatch
 * print both side by side. */
static bool check_pin(const gen_unwind *u, const gen_frame_pin *pin, const gen_target *t,
                      const char *manifest, const gen_where *where)
{
    const gen_frame_shape *s = &u->shape;
    const char *cfa_reg = t->reg_name(s->cfa_reg) ? t->reg_name(s->cfa_reg) : "?";
    if (!strcmp(cfa_reg, pin->cfa_register) && s->cfa_offset == pin->cfa_offset &&
        s->fp_offset == pin->fp_offset && s->ra_offset == pin->ra_offset)
        return true;
    diag_error_at(manifest, pin->loc.line, pin->loc.col,
                  "%s: the shim's frame shape differs from expect_frame\n"
                  "                  derived      expected\n"
                  "  cfa_register    %-12s %s\n"
                  "  cfa_offset      %-12" PRId64 " %" PRId64 "\n"
                  "  fp_offset       %-12" PRId64 " %" PRId64 "\n"
                  "  ra_offset       %-12" PRId64 " %" PRId64,
                  where->label, cfa_reg, pin->cfa_register, s->cfa_offset, pin->cfa_offset,
                  s->fp_offset, pin->fp_offset, s->ra_offset, pin->ra_offset);
    return false;
}

/* clang 19 to 21 accept -mframe-pointer=reserved but their x86-64 backend does
 * not reserve %rbp (22's does), so an op that keeps more values across a call
 * than the other callee-saved registers hold is given %rbp: say so once per
 * refused op, as the way out is a compiler, not an edit the errors suggest. */
static void note_old_x86_clang(const gen_verify_in *in, const gen_where *where)
{
    int major = in->compiler_version ? atoi(in->compiler_version) : 0;
    if (major <= 0 || major >= 22 || in->target->elf_machine != 62 /* EM_X86_64 */)
        return;
    diag_note_at(where->file, where->line, where->col,
                 "%s: clang %s does not keep x86-64 code off %%rbp (-mframe-pointer=reserved "
                 "takes effect there from clang 22 on): build with clang 22, or let the op keep "
                 "fewer values across its calls", where->label, in->compiler_version);
}

/* A shim object without the property notes its flags ask for says the flags
 * did not reach the compiler as written (a launcher or wrapper that rewrites
 * them): a VM that links the shim's source with those flags would lose the
 * feature in the whole program, and its stencils are not what the manifest
 * says. A warning: the stencils themselves are sound. */
static void check_property_notes(const objfile *obj, const gen_verify_in *in)
{
    const char *flag;
    uint32_t asked = in->command ? pn_asked(in->command, obj->machine, &flag) : 0, has;
    char err[160];
    if (!asked || obj->kind != OBJ_FORMAT_ELF)
        return;
    if (!pn_object_features(obj, &has, err, sizeof err)) {
        diag_warning("%s: the shim's .note.gnu.property cannot be read: %s", in->label, err);
        return;
    }
    if ((asked & has) == asked)
        return;
    strbuf missing = {0};
    pn_describe(&missing, obj->machine, asked & ~has);
    diag_warning("%s: the shim's object has no %s property note, which %s asks for: the flag "
                 "did not reach the compiler as given (a launcher or wrapper that rewrites "
                 "flags?), and a program that links such an object loses the feature",
                 in->label, missing.data, flag);
    free(missing.data);
}

/* The shim's unwind facts, and its pin. */
static bool check_shim(const objfile *obj, const gen_verify_in *in, const gen_stencil *s,
                       const gen_where *where, gen_unwind *unwind)
{
    check_property_notes(obj, in);
    if (!frame_shape_analyze(obj, s, in->target, where, unwind))
        return false;
    if (in->mt && in->mt->has_pin)
        return check_pin(unwind, &in->mt->pin, in->target, in->manifest->path, where);
    return true;
}

int verify_cached_shim(const uint8_t *entry, size_t size, const gen_verify_in *in,
                       const gen_stencil *s, gen_unwind *unwind)
{
    const gen_manifest *m = in->manifest;
    gen_where where = {m->shim_source, 0, 0, in->label};
    if (!frame_shape_from_cache(entry, size, s, in->target, &where, unwind)) {
        unwind_free(unwind);
        return 0;
    }
    if (in->mt && in->mt->has_pin &&
        !check_pin(unwind, &in->mt->pin, in->target, m->path, &where))
        return -1;
    return 1;
}

/* The op's own object cut out of a batched unit's (split.h) into *own. */
static bool cut_out_op(const gen_verify_in *in, const objfile *obj, objfile *own)
{
    char why[512];
    split_result r = split_op_object(obj, in->batch_entry, in->disasm, own, why, sizeof why);
    if (r == SPLIT_OK)
        return true;
    if (r == SPLIT_ALONE && in->alone)
        snprintf(in->alone, in->alone_size, "%s", why);
    else
        diag_error("%s: %s", in->label, why);
    return false;
}

bool verify_read(const uint8_t *bytes, size_t size, const gen_verify_in *in, objfile *obj)
{
    char err[512];
    bool parsed = objfile_parse(bytes, size, obj, err, sizeof err);
    if (parsed && objfile_is_for(obj, in->target->object_format, in->target->elf_machine, err,
                                 sizeof err))
        return true;
    diag_error("%s: %s", in->label, err);
    if (parsed)
        objfile_free(obj);
    return false;
}

bool verify_objfile(const objfile *obj, const gen_verify_in *in, gen_stencil *s,
                    gen_unwind *unwind)
{
    const gen_manifest *m = in->manifest;
    objfile own;
    bool batched = in->batch_entry && objfile_find_defined(obj, SG_HOLE_ENTRY) < 0;
    if (batched && !cut_out_op(in, obj, &own))
        return false;
    const objfile *o = batched ? &own : obj;
    gen_where where = {in->op ? in->op->source : m->shim_source, in->op ? in->op->line : 0,
                      in->op ? in->op->col : 0, in->label};
    gen_extract_ctx ec = {
        .target = in->target,
        .where = &where,
        .entry_symbol = in->op ? SG_HOLE_ENTRY : m->shim_function,
        .symbols = m->symbols.items,
        .nsymbols = m->symbols.count,
        .remove_trailing_jump = in->op != NULL,
        .disasm = in->disasm,
    };
    verify_name(in, s);
    bool ok = stencil_extract(o, &ec, s);
    if (ok) /* once: the check, the header's listing and dump all use it */
        stencil_disassemble(s, in->disasm);
    if (ok && in->op) /* from the fresh decode; the cache keeps its result */
        hotcold_analyse(s, in->target);
    if (ok && in->op && !(ok = fp_check(s, in->target, &where)))
        note_old_x86_clang(in, &where);
    else if (ok && !in->op)
        ok = check_shim(o, in, s, &where, unwind);
    if (batched)
        objfile_free(&own);
    return ok;
}

bool verify_object(const uint8_t *bytes, size_t size, const gen_verify_in *in, gen_stencil *s,
                   gen_unwind *unwind)
{
    objfile obj;
    if (!verify_read(bytes, size, in, &obj))
        return false;
    bool ok = verify_objfile(&obj, in, s, unwind);
    objfile_free(&obj);
    return ok;
}
