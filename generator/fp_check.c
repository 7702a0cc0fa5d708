/* fp_check.c - see fp_check.h. Whether an instruction writes the frame pointer
 * comes from LLVM's instruction descriptions (explicit and implicit register
 * definitions, including written-back base registers), not from the text. */
#include "fp_check.h"

#include <inttypes.h>

#include "diag.h"

bool fp_check(const sg_stencil *s, const sg_where *where)
{
    bool ok = true;
    for (size_t i = 0; i < s->ninsns; i++) {
        const sg_insn *in = &s->insns[i];
        if (!in->decoded) {
            diag_error_in(where, "%s at +0x%" PRIx32 ": cannot decode the instruction (byte 0x%02x), so cannot "
                       "prove it leaves the frame pointer alone",
                       where->label, in->offset, s->code[in->offset]);
            return false;
        }
        if (in->writes_fp) {
            diag_error_in(where, "%s at +0x%" PRIx32 ": %s: writes the frame pointer", where->label,
                          in->offset, stencil_insn_text(s, in));
            ok = false;
        }
    }
    return ok;
}
