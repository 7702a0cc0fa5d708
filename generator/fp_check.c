/* fp_check.c - see fp_check.h. Whether an instruction writes the frame pointer
 * comes from LLVM's instruction descriptions (explicit and implicit register
 * definitions, including written-back base registers), not from the text. */
#include "fp_check.h"

#include "diag.h"

bool fp_check(const sg_stencil *s, lb_disasm *d, const sg_where *where)
{
    bool ok = true;
    for (size_t pc = 0; pc < s->code_size;) {
        lb_insn in;
        lb_disasm_one(d, s->code + pc, s->code_size - pc, pc, &in);
        if (!in.size) {
            diag_error_in(where, "%s at +0x%zx: cannot decode the instruction (byte 0x%02x), so cannot "
                       "prove it leaves the frame pointer alone",
                       where->label, pc, s->code[pc]);
            return false;
        }
        if (in.writes_fp) {
            diag_error_in(where, "%s at +0x%zx: %s: writes the frame pointer", where->label, pc, in.text);
            ok = false;
        }
        pc += in.size;
    }
    return ok;
}
