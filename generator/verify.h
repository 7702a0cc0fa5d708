/* verify.h - from an object file's bytes to a checked stencil: read the
 * object (for the right machine), extract code, data and holes, decode the
 * code once, and check it: no op may write the frame pointer, and the shim's
 * frame must be frame-pointer based (and equal its pin, if the manifest has
 * one). Every failure is a diagnostic naming the op or shim; exit code 1. */
#ifndef STENCILGEN_VERIFY_H
#define STENCILGEN_VERIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "discover.h"
#include "frame_shape.h"
#include "llvm_bridge.h"
#include "manifest.h"
#include "objfile.h"
#include "stencil.h"
#include "target.h"

typedef struct gen_verify_in {
    const gen_manifest *manifest; /* run-time symbols, the shim, paths for messages */
    const gen_target *target;
    const gen_manifest_target *mt; /* the manifest's entry for the target (its pin), or NULL */
    lb_disasm *disasm;
    const gen_op *op;   /* NULL: the shim */
    const char *label; /* "op add (x86_64-unknown-linux-gnu)" */
    /* The compile command that made the object (the shim's property notes are
     * checked against what it asks for), or NULL. */
    char *const *command;
    /* What the compiler says it is ("19.1.7"), or "" when not asked yet. */
    const char *compiler_version;
    /* An op whose object may be a batched unit's: its entry symbol there
     * (split.h), else NULL. An object that defines _JIT_ENTRY is the op's own,
     * whatever this says (an op a batch could not reproduce was compiled alone). */
    const char *batch_entry;
    /* When the batch cannot reproduce the op's own object: why, written here
     * (no diagnostic; the caller compiles the op alone). */
    char *alone;
    size_t alone_size;
} gen_verify_in;

/* What the run itself knows of a stencil: its name and source position (no
 * cache entry holds them: an op moved down its file still hits the cache). */
void verify_name(const gen_verify_in *in, gen_stencil *s);

/* Whether every op and the shim start with a landing pad for indirect calls
 * (BTI, IBT): then every way into JIT code has one, and the runtime may
 * guard its pages. All or none: a mix is a diagnostic naming the first one
 * without, and false. */
bool verify_landing_pads(const gen_target *t, const gen_stencil *ops, size_t nops,
                         const gen_stencil *shim, bool *all);

/* The shim's unwind facts from its cache entry (unwind_cache_encode) and its
 * already checked stencil, without the object: 1, or 0 when the entry is not
 * usable (read the object instead), or -1 after a diagnostic (the pin). */
int verify_cached_shim(const uint8_t *entry, size_t size, const gen_verify_in *in,
                       const gen_stencil *s, gen_unwind *unwind);

/* Fills and checks *s; for the shim also derives *unwind. False with
 * in->alone set (non-empty) when a batched object cannot stand for the op. */
bool verify_object(const uint8_t *bytes, size_t size, const gen_verify_in *in, gen_stencil *s,
                   gen_unwind *unwind);

/* verify_object in two steps, for a batched unit's object, which is read
 * once for all its ops: the object for the right machine (a diagnostic and
 * false otherwise; objfile_free it after), then one op's stencil from it. */
bool verify_read(const uint8_t *bytes, size_t size, const gen_verify_in *in, objfile *obj);
bool verify_objfile(const objfile *obj, const gen_verify_in *in, gen_stencil *s,
                    gen_unwind *unwind);

#endif
