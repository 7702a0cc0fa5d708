/* abi_header.h - the ABI block every generated header starts with: the hole
 * enums, the stencil struct, the emitter interface and the patch formulas
 * that generated emitters and the runtime share. runtime/stencilrt.h carries
 * the identical block (a test compares them). */
#ifndef STENCILGEN_ABI_HEADER_H
#define STENCILGEN_ABI_HEADER_H

#include "util.h"

void abi_header_types(strbuf *sb);

#endif
