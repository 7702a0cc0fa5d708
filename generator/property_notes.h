/* property_notes.h - the control-flow protection an ELF object says it was
 * built with (its .note.gnu.property: x86 IBT and SHSTK, AArch64 BTI, PAC and
 * GCS), and what a compile command asks for. A linker keeps a feature only
 * when every object it links has it, so an object that lacks one its flags
 * ask for silently turns it off in the whole program. */
#ifndef STENCILGEN_PROPERTY_NOTES_H
#define STENCILGEN_PROPERTY_NOTES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "objfile.h"
#include "util.h"

/* GNU_PROPERTY_X86_FEATURE_1_AND and GNU_PROPERTY_AARCH64_FEATURE_1_AND bits. */
enum {
    PN_X86_IBT = 1u << 0,
    PN_X86_SHSTK = 1u << 1,
    PN_AARCH64_BTI = 1u << 0,
    PN_AARCH64_PAC = 1u << 1,
    PN_AARCH64_GCS = 1u << 2,
};

/* The feature bits of the FEATURE_1_AND property for ELF machine `machine`
 * (EM_X86_64, EM_AARCH64) in a .note.gnu.property section's bytes; 0 when it
 * has none. False (with a message in err, and 0) when the bytes are not notes. */
bool pn_parse(const uint8_t *bytes, size_t size, unsigned machine, uint32_t *features,
              char *err, size_t errsz);

/* The same for an object: 0 when it has no .note.gnu.property section. */
bool pn_object_features(const objfile *o, uint32_t *features, char *err, size_t errsz);

/* The features a clang command line asks for on `machine`, with the flag
 * that asks (its last -fcf-protection or -mbranch-protection) in *flag, or
 * NULL and 0 when it asks for none. */
uint32_t pn_asked(char *const *argv, unsigned machine, const char **flag);

/* "IBT, SHSTK": the names of `features` on `machine`, appended to sb. */
void pn_describe(strbuf *sb, unsigned machine, uint32_t features);

#endif
