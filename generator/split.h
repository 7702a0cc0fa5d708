/* split.h - one op's object cut out of a batched unit's object.
 *
 * A batched unit compiles several ops of one source file at once, each op an
 * external function (_JIT_ENTRY_<op>, an alias the template makes) in a
 * section of its own (-ffunction-sections -fdata-sections). An op's stencil
 * must be what its own unit would have compiled to, so split_op_object
 * takes, as a linker's section garbage collection would, the op's function
 * section and every section its relocations reach, transitively (its tables,
 * its constant pool), and renames them as its own unit's object names them
 * (.text, .rodata, .LCPI0_<n>, _JIT_ENTRY; ELF batches are compiled with
 * -fno-unique-section-names, so their sections already carry those names, and
 * a section named in the source keeps its own): everything after it (the
 * extraction, the checks, the header's comments) is the same in both modes.
 *
 * What a batch cannot reproduce is refused rather than guessed (SPLIT_ALONE):
 * a call to a static function the compiler did not inline (in the op's own
 * unit it has one caller and may well be inlined), string literals (their
 * merged section's order is the module's, not the op's), data in more than
 * one object (its own unit lays them out in the order clang created them,
 * which the batch's object cannot tell), data other ops of the batch use too
 * (optimized for all their uses), and a file that defines external symbols
 * (every op's own unit carries them). Such an op is compiled from its own
 * unit instead.
 *
 * Mach-O has neither aliases nor a section per function: there each entry
 * is a function tail-calling its op, cut out of the batch's one __text from
 * its symbol to the padding before the next, and an op whose code reaches
 * anything but holes compiles alone (docs/platforms.md, "Units").
 */
#ifndef STENCILGEN_SPLIT_H
#define STENCILGEN_SPLIT_H

#include <stddef.h>

#include "llvm_bridge.h"
#include "objfile.h"

/* The symbol a batched unit gives op `name`: "_JIT_ENTRY_<name>". */
#define SPLIT_ENTRY_PREFIX "_JIT_ENTRY_"

typedef enum split_result {
    SPLIT_OK,
    SPLIT_ALONE, /* compile this op from its own unit; `why` says why */
    SPLIT_BAD,   /* not an object a batched unit makes; `why` says what is missing */
} split_result;

/* Fills *out (free with objfile_free) with the object op `entry` (its
 * _JIT_ENTRY_<name> symbol) would have had from its own unit. `disasm`
 * decodes a Mach-O batch's code, to tell where each function ends. */
split_result split_op_object(const objfile *batch, const char *entry, lb_disasm *disasm,
                             objfile *out, char *why, size_t whysz);

#endif
