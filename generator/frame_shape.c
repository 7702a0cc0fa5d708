/* frame_shape.c - see frame_shape.h. The .eh_frame of a relocatable object
 * is unrelocated; we lay the shim's code out at 0 and .eh_frame right after
 * it, as a linker would, apply the relocations, and parse the result. */
#include "frame_shape.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag.h"
#include "util.h"
#include "arm64_unwind.h"
#include "fp_chain.h"
#include "win64_unwind.h"

/* Symbols in code sections other than the shim's land here: far away, so an
 * FDE describing them never covers the shim. */
#define ELSEWHERE ((uint64_t)1 << 40)

static bool apply_relocs(const objfile *obj, int eh, int entry_sec, uint64_t eh_addr,
                         const gen_target *t, const gen_where *where, uint8_t *bytes)
{
    const obj_section *sec = &obj->secs[eh];
    for (size_t i = 0; i < obj->nrelocs; i++) {
        const obj_reloc *r = &obj->relocs[i];
        if (r->section != eh)
            continue;
        sg_patch patch;
        const obj_symbol *sym = r->symbol >= 0 ? &obj->syms[r->symbol] : NULL;
        uint64_t s = ELSEWHERE;
        if (sym && sym->section == entry_sec)
            s = sym->is_section ? 0 : sym->value;
        uint64_t v = s + (uint64_t)r->addend;
        bool ok = t->classify_reloc(r->type, sec->bytes, sec->size, r->offset, &patch) &&
                  (patch == SG_PATCH_PCREL32 || patch == SG_PATCH_ABS64);
        size_t width = ok && patch == SG_PATCH_ABS64 ? 8 : 4;
        if (!ok || r->offset > sec->size || sec->size - r->offset < width) {
            diag_error_in(where, "cannot apply relocation %s at .eh_frame+0x%" PRIx64, r->type_name,
                          r->offset);
            return false;
        }
        if (patch == SG_PATCH_PCREL32) {
            int64_t rel = (int64_t)(v - (eh_addr + r->offset));
            int32_t v32 = (int32_t)rel;
            if (s == ELSEWHERE)
                v32 = INT32_MAX; /* out of reach on purpose, see ELSEWHERE */
            memcpy(bytes + r->offset, &v32, 4);
        } else {
            memcpy(bytes + r->offset, &v, 8);
        }
    }
    return true;
}

uint8_t *eh_frame_relocated(const objfile *obj, int code_sec, uint64_t code_size,
                            const gen_target *t, const gen_where *where, cfi_section *out)
{
    int eh = -1;
    for (size_t i = 0; i < obj->nsecs; i++)
        eh = obj->secs[i].kind == OBJ_SEC_EH_FRAME ? (int)i : eh;
    if (eh < 0) {
        diag_error_in(where, "the object has no .eh_frame; compile it with "
                             "-fasynchronous-unwind-tables");
        return NULL;
    }
    const obj_section *ehs = &obj->secs[eh];
    uint64_t eh_addr = (code_size + 15) & ~(uint64_t)15; /* right after the code */
    /* The Mach-O reader has resolved it where the object places it (objfile.h). */
    if (obj->kind == OBJ_FORMAT_MACHO)
        eh_addr = ehs->addr - obj->secs[code_sec].addr;
    uint8_t *bytes = xmalloc(ehs->size ? ehs->size : 1);
    memcpy(bytes, ehs->bytes, ehs->size);
    if (!apply_relocs(obj, eh, code_sec, eh_addr, t, where, bytes)) {
        free(bytes);
        return NULL;
    }
    *out = (cfi_section){bytes, ehs->size, eh_addr, 8};
    return bytes;
}

static void put_uleb(strbuf *sb, uint64_t v)
{
    do {
        uint8_t b = v & 0x7f;
        v >>= 7;
        sb_putc(sb, (char)(b | (v ? 0x80 : 0)));
    } while (v);
}

static void put_sleb(strbuf *sb, int64_t v)
{
    for (;;) {
        uint8_t b = v & 0x7f;
        v >>= 7; /* arithmetic shift: implementation-defined, but gcc/clang define it */
        bool done = (v == 0 && !(b & 0x40)) || (v == -1 && (b & 0x40));
        sb_putc(sb, (char)(b | (done ? 0 : 0x80)));
        if (done)
            return;
    }
}

/* Re-encode a row as CFA instructions that establish it from any state. */
static bool encode_row(const cfi_row *row, int64_t data_align, strbuf *sb)
{
    enum { DEF_CFA = 0x0c, DEF_CFA_SF = 0x12, OFFSET = 0x80, OFFSET_EXT_SF = 0x11,
           SAME_VALUE = 0x08, UNDEFINED = 0x07 };
    if (row->cfa.kind != CFI_CFA_REG_OFFSET)
        return false;
    if (row->cfa.offset >= 0) {
        sb_putc(sb, DEF_CFA);
        put_uleb(sb, row->cfa.reg);
        put_uleb(sb, (uint64_t)row->cfa.offset);
    } else {
        if (row->cfa.offset % data_align)
            return false;
        sb_putc(sb, DEF_CFA_SF);
        put_uleb(sb, row->cfa.reg);
        put_sleb(sb, row->cfa.offset / data_align);
    }
    for (uint32_t r = 0; r < CFI_MAX_REGS; r++) {
        const cfi_reg_rule *rule = &row->regs[r];
        switch (rule->kind) {
        case CFI_REG_UNSPECIFIED: break;
        case CFI_REG_SAME_VALUE: sb_putc(sb, SAME_VALUE); put_uleb(sb, r); break;
        case CFI_REG_UNDEFINED: sb_putc(sb, UNDEFINED); put_uleb(sb, r); break;
        case CFI_REG_OFFSET: {
            if (rule->offset % data_align)
                return false;
            int64_t f = rule->offset / data_align;
            if (r < 64 && f >= 0) {
                sb_putc(sb, (char)(OFFSET | r));
                put_uleb(sb, (uint64_t)f);
            } else {
                sb_putc(sb, OFFSET_EXT_SF);
                put_uleb(sb, r);
                put_sleb(sb, f);
            }
            break;
        }
        default: return false;
        }
    }
    return true;
}

static const char *reg_name(const gen_target *t, uint32_t r, char *buf, size_t n)
{
    const char *s = t->reg_name(r);
    if (s)
        return s;
    snprintf(buf, n, "reg%" PRIu32, r);
    return buf;
}

/* Whether instruction `in` loads a run-time symbol's address from its GOT
 * slot: one of its holes is a GOT kind naming a symbol. */
static bool loads_symbol_from_got(const gen_stencil *shim, const gen_insn *in)
{
    for (size_t h = 0; h < shim->ncode_holes; h++) {
        const gen_hole *hole = &shim->code_holes[h];
        if (hole->offset >= in->offset && hole->offset < in->offset + in->size &&
            hole->value == SG_VALUE_SYMBOL && sg_patch_uses_got(hole->patch))
            return true;
    }
    return false;
}

/* The single indirect call into JIT code, among the instructions the FDE
 * covers (decoded once, by stencil_disassemble). An indirect call is a call
 * to C, not to JIT code, when it calls a run-time symbol through its GOT slot:
 * the slot is its operand (x86-64 `call *sym@GOTPCREL(%rip)`), or the register
 * it calls through was last written by a load from the slot (AArch64 with
 * -fno-plt: `adrp x8, :got:sym; ldr x8, [x8, :got_lo12:sym]; blr x8`, as for
 * __stack_chk_fail). The code argument reaches the call some other way. */
static bool find_jit_call(const gen_stencil *shim, const cfi_fde *fde, const gen_where *where,
                          gen_unwind *u)
{
    strbuf found = {0}, others = {0};
    size_t n = 0;
    uint64_t end = fde->pc_begin + fde->pc_range;
    const gen_insn *last_def[64] = {0}; /* per DWARF register, in the sweep's order */
    for (size_t k = 0; k < shim->ninsns; k++) {
        const gen_insn *in = &shim->insns[k];
        const char *text = stencil_insn_text(shim, in);
        if (in->offset < fde->pc_begin || in->offset >= end)
            continue;
        if (!in->decoded) {
            diag_error_in_code(where, in->offset, "cannot decode the instruction");
            sb_free(&found);
            sb_free(&others);
            return false;
        }
        bool to_c = loads_symbol_from_got(shim, in);
        if (in->call_reg >= 0 && in->call_reg < 64 && last_def[in->call_reg])
            to_c |= loads_symbol_from_got(shim, last_def[in->call_reg]);
        for (unsigned r = 0; r < 64; r++) {
            if (in->defs >> r & 1)
                last_def[r] = in;
        }
        if (in->is_call && in->is_indirect && !to_c) {
            sb_printf(&found, "\n  +0x%" PRIx32 ": %s", in->offset, text);
            u->call_offset = in->offset;
            u->call_size = in->size;
            snprintf(u->call_text, sizeof u->call_text, "%s", text);
            n++;
        } else if (in->is_call) {
            sb_printf(&others, "\n  +0x%" PRIx32 ": %s (a call to C, not JIT code)", in->offset,
                      text);
        }
    }
    if (n != 1) {
        diag_error_in(where, "expected exactly one indirect call into JIT code, found %zu%s%s%s", n,
                      n ? ":" : "", found.len ? found.data : "", others.len ? others.data : "");
        if (!n)
            diag_note("the shim must call the executor through a function pointer, once");
    }
    sb_free(&found);
    sb_free(&others);
    return n == 1;
}

static bool check_shape(const cfi_row *row, const gen_target *t, uint32_t ra, const gen_where *where,
                        const gen_unwind *u, gen_frame_shape *shape)
{
    char rowtext[512], a[16], b[16], c[16];
    cfi_format_row(row, t->reg_name, rowtext, sizeof rowtext);
    const char *fp = reg_name(t, t->fp_reg, a, sizeof a);
    const char *ran = reg_name(t, ra, b, sizeof b);
    const char *problem = NULL;
    if (row->cfa.kind != CFI_CFA_REG_OFFSET || row->cfa.reg != t->fp_reg)
        problem = "the CFA is not computed from the frame pointer";
    else if (row->regs[t->fp_reg].kind != CFI_REG_OFFSET)
        problem = "the caller's frame pointer is not saved at a fixed CFA offset";
    else if (ra >= CFI_MAX_REGS || row->regs[ra].kind != CFI_REG_OFFSET)
        problem = "the return address is not saved at a fixed CFA offset";
    for (uint32_t r = 0; !problem && r < CFI_MAX_REGS; r++) {
        cfi_reg_kind k = row->regs[r].kind;
        if (k != CFI_REG_UNSPECIFIED && k != CFI_REG_OFFSET && k != CFI_REG_SAME_VALUE &&
            k != CFI_REG_UNDEFINED) {
            problem = "a register has a rule other than saved-at-offset, same or undefined";
            (void)reg_name(t, r, c, sizeof c);
        }
    }
    if (problem) {
        diag_error_in(where,
                      "the frame is not frame-pointer based at the call into JIT code: %s\n"
                      "  found:    %s   at shim+0x%zx %s\n"
                      "  expected: CFA=%s+k, %s=[CFA+m], %s=[CFA+n] (fixed offsets)\n"
                      "  fix:      compile the shim with frame pointers: -fno-omit-frame-pointer, "
                      "and no -fomit-frame-pointer in shim_cflags",
                      problem, rowtext, u->call_offset, u->call_text, fp, fp, ran);
        return false;
    }
    *shape = (gen_frame_shape){row->cfa.reg, row->cfa.offset, row->regs[t->fp_reg].offset,
                              row->regs[ra].offset};
    return true;
}

/* A return address the shim signed (pointer authentication) is signed in
 * every executor frame too: say so in their CFI, so unwinders authenticate
 * it. The runtime's CIE has no 'B' augmentation, so only the A key can be
 * expressed. */
static bool sign_state(const cfi_row *row, const cfi_cie *cie, const gen_where *where,
                       strbuf *enc)
{
    if (!row->ra_signed)
        return true;
    if (strchr(cie->augmentation, 'B')) {
        diag_error_in(where, "the shim signs its return address with the B key "
                             "(augmentation \"%s\"), which executor frames cannot express: "
                             "compile it with -mbranch-protection=pac-ret or standard (A key)",
                      cie->augmentation);
        return false;
    }
    sb_putc(enc, 0x2d); /* DW_CFA_AARCH64_negate_ra_state */
    return true;
}

static uint8_t *copy_insns(const uint8_t *p, size_t n, size_t *len)
{
    *len = n;
    uint8_t *r = xmalloc(n ? n : 1);
    if (n)
        memcpy(r, p, n);
    return r;
}

static bool locate_fde(const cfi_section *sec, uint64_t entry, const gen_where *where, cfi_cie *cie,
                       cfi_fde *fde)
{
    size_t cursor = 0;
    cfi_error err = {0};
    for (size_t guard = 0; guard <= sec->size; guard++) {
        int rc = cfi_next_fde(sec, &cursor, cie, fde, &err);
        if (rc < 0) {
            diag_error_in(where, "malformed .eh_frame at 0x%zx: %s", err.offset, err.msg);
            return false;
        }
        if (rc == 0)
            break;
        if (fde->pc_begin <= entry && entry - fde->pc_begin < fde->pc_range)
            return true;
    }
    diag_error_in(where, "no FDE in .eh_frame covers the shim; compile it with "
                         "-fasynchronous-unwind-tables");
    return false;
}

/* The rows of the shim's FDE, from the section. */
static bool run_rows(const cfi_section *sec, uint64_t entry, const gen_where *where,
                     cfi_cie *cie, cfi_fde *fde, gen_unwind *u)
{
    cfi_error err = {0};
    if (!locate_fde(sec, entry, where, cie, fde))
        return false;
    if (cfi_run(sec, cie, fde, &u->rows, &err) != 0) {
        diag_error_in(where, "malformed CFI in the FDE at .eh_frame+0x%zx: %s", err.offset,
                      err.msg);
        return false;
    }
    return true;
}

/* Given the rows and the call into JIT code: the row there, its checks, and
 * everything the header carries. */
static bool derive(const cfi_cie *cie, const cfi_fde *fde, const gen_target *t,
                   const gen_where *where, gen_unwind *u)
{
    u->call_row = cfi_row_at(&u->rows, u->call_offset);
    if (!u->call_row) {
        diag_error_in(where, "no CFI row covers the call at shim+0x%zx", u->call_offset);
        return false;
    }
    if (!check_shape(u->call_row, t, (uint32_t)cie->ra_reg, where, u, &u->shape))
        return false;
    strbuf enc = {0};
    bool ok = encode_row(u->call_row, cie->data_align, &enc);
    if (!ok) {
        char rowtext[512];
        cfi_format_row(u->call_row, t->reg_name, rowtext, sizeof rowtext);
        diag_error_in(where, "cannot re-encode the row at the call as CFA instructions: %s",
                      rowtext);
    }
    ok = ok && sign_state(u->call_row, cie, where, &enc);
    u->ra_signed = u->call_row->ra_signed;
    u->executor_cfi = (uint8_t *)enc.data;
    u->executor_cfi_len = enc.len;
    if (!ok)
        return false;
    u->code_align = cie->code_align;
    u->data_align = cie->data_align;
    u->ra_column = (uint32_t)cie->ra_reg;
    u->cie_insns = copy_insns(cie->initial_insns, u->rows.cie_insns_used, &u->cie_insns_len);
    u->fde_insns = copy_insns(fde->insns, u->rows.fde_insns_used, &u->fde_insns_len);
    u->fde_start = fde->pc_begin;
    u->fde_size = fde->pc_range;
    u->derived = true;
    return true;
}

/* ---- Windows (COFF): .pdata and .xdata ------------------------------------ */

/* What the .pdata field at `off` names (an ADDR32NB relocation resolved):
 * its section and offset there. */
static bool pdata_field(const objfile *obj, int pdata, uint64_t off, int *sec, uint64_t *value)
{
    for (size_t i = 0; i < obj->nrelocs; i++) {
        const obj_reloc *r = &obj->relocs[i];
        if (r->section != pdata || r->offset != off)
            continue;
        size_t n = strlen(r->type_name);
        if (n < 9 || strcmp(r->type_name + n - 9, "_ADDR32NB") || r->symbol < 0)
            return false;
        const obj_symbol *s = &obj->syms[r->symbol];
        if (s->undefined || s->section < 0)
            return false;
        *sec = s->section;
        *value = (s->is_section ? 0 : s->value) + (uint64_t)r->addend;
        return true;
    }
    return false;
}

/* The shim's RUNTIME_FUNCTION: the one whose start is the shim's entry (x64:
 * begin, end and UNWIND_INFO, 12 bytes; ARM64: begin and the unwind word,
 * packed or the .xdata record's address, 8 bytes). *at: its offset in .pdata
 * section *pdata. */
static bool find_runtime_function(const objfile *obj, const gen_target *t, int entry_sec,
                                  uint64_t entry, const gen_where *where, int *pdata,
                                  uint64_t *at)
{
    uint64_t stride = t->win_unwind == WIN_UNWIND_ARM64 ? 8 : 12;
    for (size_t p = 0; p < obj->nsecs; p++) {
        if (obj->secs[p].kind != OBJ_SEC_PDATA)
            continue;
        for (*at = 0; *at + stride <= obj->secs[p].size; *at += stride) {
            int bsec;
            uint64_t begin;
            if (pdata_field(obj, (int)p, *at, &bsec, &begin) && bsec == entry_sec &&
                begin == entry) {
                *pdata = (int)p;
                return true;
            }
        }
    }
    diag_error_in(where, "no .pdata entry (RUNTIME_FUNCTION) covers the shim; Windows "
                         "objects have one for every function that is not a leaf");
    return false;
}

static bool malformed_function(const objfile *obj, int pdata, uint64_t at,
                               const gen_where *where, const char *what)
{
    diag_error_in(where, "malformed RUNTIME_FUNCTION for the shim at %s+0x%" PRIx64 ": %s",
                  obj->secs[pdata].name, at, what);
    return false;
}

/* x64: the function's end and its UNWIND_INFO in .xdata. */
static bool win64_function(const objfile *obj, int pdata, uint64_t at, int entry_sec,
                           const gen_where *where, gen_unwind *u, int *xdata, uint64_t *xoff)
{
    int esec;
    uint64_t begin, end;
    if (!pdata_field(obj, pdata, at, &esec, &begin) ||
        !pdata_field(obj, pdata, at + 4, &esec, &end) || esec != entry_sec || end <= begin ||
        !pdata_field(obj, pdata, at + 8, xdata, xoff) ||
        obj->secs[*xdata].kind != OBJ_SEC_XDATA)
        return malformed_function(obj, pdata, at, where,
                                  "its end or unwind-data field is not a relocation to the "
                                  "shim's code and to .xdata");
    u->fde_start = begin;
    u->fde_size = end - begin;
    return true;
}

/* Windows on ARM64 defines its one signing unwind code (pac_sign_lr) as
 * pacibsp: a shim that signs with the A key would be authenticated with the
 * wrong one by every Windows unwinder. */
static bool b_key_signed(const gen_stencil *shim, uint64_t at, const gen_where *where)
{
    enum { PACIBSP = 0xd503237f, PACIASP = 0xd503233f };
    uint32_t insn = at <= shim->code_size - 4 ? (uint32_t)load_le(shim->code + at, 4) : 0;
    if (insn == PACIBSP)
        return true;
    diag_error_in(where, "the shim's unwind codes say it signs its return address with "
                         "pacibsp (B key) at shim+0x%" PRIx64 ", but the instruction there is "
                         "%s (0x%08" PRIx32 "): compile it with "
                         "-mbranch-protection=pac-ret+b-key (or standard+b-key)",
                  at, insn == PACIASP ? "paciasp (A key)" : "another one", insn);
    return false;
}

const char *unwind_record_name(const gen_target *t, const gen_unwind *u)
{
    if (t->win_unwind == WIN_UNWIND_X86_FP)
        return "prolog's instructions";
    if (t->win_unwind == WIN_UNWIND_ARM64)
        return u->win_packed ? "packed .pdata entry" : ".xdata record";
    return "UNWIND_INFO";
}

/* The rows of the shim's unwind record (u->win64_info), and where its prolog
 * ends. */
static bool win_rows(const gen_target *t, const gen_stencil *shim, gen_unwind *u,
                     const gen_where *where, uint64_t *prolog_end)
{
    cfi_error err = {0};
    int rc;
    uint64_t sign_at = UINT64_MAX;
    if (t->win_unwind == WIN_UNWIND_X86_FP) {
        size_t size;
        rc = fpc_rows(u->win64_info, u->win64_info_len, u->fde_start, u->fde_start + u->fde_size,
                      &u->rows, &size, &err);
        *prolog_end = u->fde_start + size;
    } else if (t->win_unwind == WIN_UNWIND_ARM64) {
        a64w_info info;
        rc = a64w_parse_xdata(u->win64_info, u->win64_info_len, 0, &info, &err);
        if (rc == 0 && (uint64_t)info.function_words * 4 != u->fde_size)
            rc = -1, snprintf(err.msg, sizeof err.msg, "it covers %" PRIu64 " bytes, the "
                                                       "shim's RUNTIME_FUNCTION %" PRIu64,
                              (uint64_t)info.function_words * 4, u->fde_size);
        rc = rc ? rc
                : a64w_rows(&info, u->fde_start, u->fde_start + u->fde_size, &u->rows,
                            &sign_at, &err);
        strbuf enc = {0};
        rc = rc ? rc : a64w_after_prolog(&info, &enc, &err);
        u->executor_win64_info = (uint8_t *)enc.data;
        u->executor_win64_info_len = enc.len;
        if (rc == 0)
            *prolog_end = u->rows.rows[u->rows.count - 1].loc;
    } else {
        w64_info info;
        rc = w64_parse_info(u->win64_info, u->win64_info_len, 0, &info, &err);
        rc = rc ? rc : w64_rows(&info, u->fde_start, u->fde_start + u->fde_size, &u->rows, &err);
        if (rc == 0) {
            strbuf enc = {0};
            w64_after_prolog(&info, &enc);
            u->executor_win64_info = (uint8_t *)enc.data;
            u->executor_win64_info_len = enc.len;
            *prolog_end = u->fde_start + info.prolog_size;
        }
    }
    if (rc != 0) {
        diag_error_in(where, "the shim's %s (at its byte 0x%zx): %s", unwind_record_name(t, u),
                      err.offset, err.msg);
        return false;
    }
    u->ra_signed = sign_at != UINT64_MAX;
    return !u->ra_signed || b_key_signed(shim, sign_at, where);
}

/* The COFF counterpart of derive(): the row at the call and its checks. */
static bool derive_win(const gen_target *t, const gen_where *where, uint64_t prolog_end,
                       gen_unwind *u)
{
    if (u->call_offset < prolog_end) {
        diag_error_in(where, "the call into JIT code at shim+0x%zx (%s) is inside the shim's "
                             "prolog (0x%" PRIx64 "-0x%" PRIx64 ")",
                      u->call_offset, u->call_text, u->fde_start, prolog_end);
        return false;
    }
    u->call_row = cfi_row_at(&u->rows, u->call_offset);
    if (!u->call_row) {
        diag_error_in(where, "no unwind row covers the call at shim+0x%zx", u->call_offset);
        return false;
    }
    u->ra_column = t->win_unwind == WIN_UNWIND_ARM64    ? A64W_RA_COLUMN
                   : t->win_unwind == WIN_UNWIND_X86_FP ? FPC_RA_COLUMN
                                                        : W64_RA_COLUMN;
    if (!check_shape(u->call_row, t, u->ra_column, where, u, &u->shape))
        return false;
    u->derived = true;
    return true;
}

/* ARM64: the unwind word, packed (then expanded into the record it stands
 * for) or a relocation to the .xdata record, copied. */
static bool arm64_function(const objfile *obj, int pdata, uint64_t at, const gen_where *where,
                           gen_unwind *u)
{
    const obj_section *ps = &obj->secs[pdata];
    int bsec, xdata;
    uint64_t begin, xoff;
    (void)pdata_field(obj, pdata, at, &bsec, &begin);
    u->fde_start = begin;
    cfi_error err = {0};
    a64w_info info;
    if (pdata_field(obj, pdata, at + 4, &xdata, &xoff)) {
        const obj_section *xs = &obj->secs[xdata];
        if (xs->kind != OBJ_SEC_XDATA)
            return malformed_function(obj, pdata, at, where,
                                      "its unwind word is a relocation to a section other "
                                      "than .xdata");
        if (a64w_parse_xdata(xs->bytes, xs->size, xoff, &info, &err) != 0) {
            diag_error_in(where, "malformed .xdata record in %s at 0x%zx: %s", xs->name,
                          err.offset, err.msg);
            return false;
        }
        u->win64_info = copy_insns(xs->bytes + xoff, info.size, &u->win64_info_len);
    } else {
        if (!ps->bytes || at + 8 > ps->size)
            return malformed_function(obj, pdata, at, where, "it is past the section's end");
        uint32_t word = (uint32_t)load_le(ps->bytes + at + 4, 4);
        strbuf rec = {0};
        u->win_packed = true;
        if ((word & 3) == A64W_PDATA_XDATA)
            return malformed_function(obj, pdata, at, where,
                                      "its unwind word points at .xdata without a relocation");
        if (a64w_expand_packed(word, &rec, &err) != 0) {
            free(rec.data);
            diag_error_in(where, "malformed packed unwind data of the shim (%s+0x%" PRIx64
                                 ", word 0x%08" PRIx32 "): %s",
                          ps->name, at + 4, word, err.msg);
            return false;
        }
        u->win64_info = (uint8_t *)rec.data;
        u->win64_info_len = rec.len;
    }
    if (a64w_parse_xdata(u->win64_info, u->win64_info_len, 0, &info, &err) != 0)
        return false; /* copied or expanded just above: never */
    u->fde_size = (uint64_t)info.function_words * 4;
    return true;
}

/* 32-bit x86: the function's range from its symbol, and its code up to the
 * end, of which fp_chain keeps the prolog as the shim's "record". */
static bool x86_fp_function(const objfile *obj, const gen_stencil *shim, int entry,
                            const gen_where *where, gen_unwind *u)
{
    const obj_symbol *s = &obj->syms[entry];
    uint64_t size = s->size ? s->size : shim->code_size - s->value;
    if (s->value >= shim->code_size || size > shim->code_size - s->value) {
        diag_error_in(where, "the shim's symbol (0x%" PRIx64 ", %" PRIu64 " bytes) is not "
                             "inside its code (%zu bytes)", s->value, size, shim->code_size);
        return false;
    }
    u->fde_start = s->value;
    u->fde_size = size;
    u->win64_info = copy_insns(shim->code + s->value, (size_t)size, &u->win64_info_len);
    return true;
}

/* Between the prolog and the call, nothing may move ebp off the chain (at
 * the call the frame is read from it). */
static bool chain_kept(const gen_stencil *shim, uint64_t prolog_end, const gen_where *where,
                       const gen_unwind *u)
{
    for (size_t k = 0; k < shim->ninsns; k++) {
        const gen_insn *in = &shim->insns[k];
        if (in->offset >= prolog_end && in->offset < u->call_offset && in->writes_fp) {
            diag_error_in_code(where, in->offset, "%s writes ebp between the shim's prolog and "
                                                  "its call into JIT code: the ebp chain breaks",
                               stencil_insn_text(shim, in));
            return false;
        }
    }
    return true;
}

static bool analyze_win(const objfile *obj, const gen_stencil *shim, int entry,
                        const gen_target *t, const gen_where *where, gen_unwind *u)
{
    if (t->win_unwind == WIN_UNWIND_X86_FP) {
        uint64_t prolog_end = 0;
        if (!x86_fp_function(obj, shim, entry, where, u) ||
            !win_rows(t, shim, u, where, &prolog_end))
            return false;
        /* The record kept is the prolog: what the cache replays. */
        u->win64_info_len = (size_t)(prolog_end - u->fde_start);
        cfi_fde fde = {.pc_begin = u->fde_start, .pc_range = u->fde_size};
        return find_jit_call(shim, &fde, where, u) && chain_kept(shim, prolog_end, where, u) &&
               derive_win(t, where, prolog_end, u);
    }
    int pdata, sec = obj->syms[entry].section;
    uint64_t at, prolog_end = 0;
    if (!find_runtime_function(obj, t, sec, obj->syms[entry].value, where, &pdata, &at))
        return false;
    if (t->win_unwind == WIN_UNWIND_ARM64) {
        if (!arm64_function(obj, pdata, at, where, u))
            return false;
    } else {
        int xdata;
        uint64_t xoff;
        w64_info info;
        cfi_error err = {0};
        if (!win64_function(obj, pdata, at, sec, where, u, &xdata, &xoff))
            return false;
        const obj_section *xs = &obj->secs[xdata];
        if (w64_parse_info(xs->bytes, xs->size, xoff, &info, &err) != 0) {
            diag_error_in(where, "malformed UNWIND_INFO in %s at 0x%zx: %s", xs->name,
                          err.offset, err.msg);
            return false;
        }
        u->win64_info = copy_insns(xs->bytes + xoff, info.size, &u->win64_info_len);
    }
    cfi_fde fde = {.pc_begin = u->fde_start, .pc_range = u->fde_size};
    return win_rows(t, shim, u, where, &prolog_end) && find_jit_call(shim, &fde, where, u) &&
           derive_win(t, where, prolog_end, u);
}

bool frame_shape_analyze(const objfile *obj, const gen_stencil *shim, const gen_target *t,
                         const gen_where *where, gen_unwind *u)
{
    *u = (gen_unwind){0};
    int entry = objfile_find_defined(obj, shim->name);
    if (entry < 0) {
        diag_error_in(where, "the object defines no function '%s'", shim->name);
        return false;
    }
    if (t->object_format == OBJ_FORMAT_COFF)
        return analyze_win(obj, shim, entry, t, where, u);
    cfi_section sec;
    cfi_cie cie;
    cfi_fde fde;
    uint8_t *bytes = eh_frame_relocated(obj, obj->syms[entry].section, shim->code_size, t, where,
                                        &sec);
    bool ok = bytes && run_rows(&sec, shim->entry, where, &cie, &fde, u) &&
              find_jit_call(shim, &fde, where, u) && derive(&cie, &fde, t, where, u);
    if (ok) { /* what frame_shape_from_cache needs, for the next run */
        u->eh_frame = bytes;
        u->eh_frame_size = sec.size;
        u->eh_frame_addr = sec.addr;
        u->eh_addr_size = sec.addr_size;
    } else {
        free(bytes);
    }
    return ok;
}

/* The cache entry: the unwind tables the facts come from (the relocated
 * .eh_frame, or the shim's unwind record and RUNTIME_FUNCTION range, field 1
 * then saying whether the record was expanded from packed data) and where
 * the call into JIT code is (finding it takes the disassembler's call and
 * register facts, which a cached stencil does not keep). Little-endian
 * fields, then the bytes. */
enum { UNWIND_CACHE_VERSION = 2, NFIELDS = 8 };

void unwind_cache_encode(strbuf *out, const gen_unwind *u)
{
    bool win64 = u->win64_info != NULL;
    uint64_t fields[NFIELDS] = {UNWIND_CACHE_VERSION,
                                win64 ? (uint64_t)u->win_packed : u->eh_frame_addr,
                                u->eh_addr_size,
                                u->call_offset, u->call_size,
                                win64 ? u->win64_info_len : u->eh_frame_size,
                                win64 ? u->fde_start : 0, win64 ? u->fde_size : 0};
    for (size_t i = 0; i < NFIELDS; i++)
        sb_put_le(out, fields[i], 8);
    sb_putn(out, u->call_text, sizeof u->call_text);
    sb_putn(out, win64 ? (const char *)u->win64_info : (const char *)u->eh_frame,
            (size_t)fields[5]);
}

static bool win_from_cache(const uint8_t *bytes, size_t size, const uint64_t *f,
                           const gen_stencil *shim, const gen_target *t,
                           const gen_where *where, gen_unwind *u)
{
    uint64_t prolog_end = 0;
    u->win64_info = copy_insns(bytes, size, &u->win64_info_len);
    u->win_packed = f[1] != 0;
    u->fde_start = f[6];
    u->fde_size = f[7];
    return win_rows(t, shim, u, where, &prolog_end) && derive_win(t, where, prolog_end, u);
}

bool frame_shape_from_cache(const uint8_t *buf, size_t size, const gen_stencil *shim,
                            const gen_target *t, const gen_where *where, gen_unwind *u)
{
    *u = (gen_unwind){0};
    enum { HEAD = 8 * NFIELDS + sizeof u->call_text };
    bool win64 = t->object_format == OBJ_FORMAT_COFF;
    uint64_t f[NFIELDS] = {0};
    for (size_t i = 0; size >= HEAD && i < NFIELDS; i++)
        f[i] = load_le(buf + 8 * i, 8);
    if (size < HEAD || f[0] != UNWIND_CACHE_VERSION || f[5] != size - HEAD ||
        (!win64 && f[2] != 4 && f[2] != 8) || f[3] >= shim->code_size ||
        (win64 && (f[1] > 1 || f[7] == 0 || f[6] > shim->code_size ||
                   f[7] > shim->code_size - f[6])) ||
        buf[8 * NFIELDS + sizeof u->call_text - 1] != '\0')
        return false; /* not an entry this generator wrote: a miss */
    u->call_offset = (size_t)f[3];
    u->call_size = (size_t)f[4];
    memcpy(u->call_text, buf + 8 * NFIELDS, sizeof u->call_text);
    if (win64)
        return win_from_cache(buf + HEAD, (size_t)f[5], f, shim, t, where, u);
    u->eh_frame_size = (size_t)f[5];
    u->eh_frame = xmalloc(u->eh_frame_size ? u->eh_frame_size : 1);
    memcpy(u->eh_frame, buf + HEAD, u->eh_frame_size);
    u->eh_frame_addr = f[1];
    u->eh_addr_size = (uint8_t)f[2];
    cfi_section sec = {u->eh_frame, u->eh_frame_size, u->eh_frame_addr, u->eh_addr_size};
    cfi_cie cie;
    cfi_fde fde;
    return run_rows(&sec, shim->entry, where, &cie, &fde, u) && derive(&cie, &fde, t, where, u);
}

void unwind_free(gen_unwind *u)
{
    free(u->eh_frame);
    free(u->cie_insns);
    free(u->fde_insns);
    free(u->executor_cfi);
    free(u->win64_info);
    free(u->executor_win64_info);
    cfi_table_free(&u->rows);
    *u = (gen_unwind){0};
}
