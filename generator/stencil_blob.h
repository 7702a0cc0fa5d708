/* stencil_blob.h - an op's checked stencil as bytes, so that a later run can
 * skip reading, extracting, checking and disassembling its object.
 *
 * The pipeline stores one such blob (kind "stencil") under the same cache key
 * as the op's object, and only after the stencil passed every check. It holds
 * everything the writer needs that the run does not know by itself: code, data,
 * holes, entry, the removed jump, the decoded instructions (sizes and texts),
 * and the compile's depfile text. The op's name, source and position are not
 * stored: they come from this run's discovery.
 *
 * Layout (integers little-endian; "str" is a length then that many bytes, no NUL):
 *   magic "SGSTNCL\0", u32 version, 32-byte context (a digest),
 *   u64 code_size, data_size, data_align, entry, removed_jump,
 *   u32 code holes, data holes, instructions, u32-length str deps,
 *   code bytes, data bytes,
 *   per hole: u32 offset, u8 patch, u8 value, u32 index, u64 addend,
 *             u8-length str reloc, u8-length str symbol,
 *   per instruction: u8 size, u8-length str text.
 *
 * The bytes come from disk and are untrusted: decoding checks every length
 * against what is left and every field against what the writer and runtime
 * rely on (kinds in range, symbol numbers below the manifest's count, holes
 * inside and in order, instructions tiling the code), and rejects trailing
 * bytes, so that it accepts only what stencil_blob_encode writes. Any failure
 * is a cache miss. */
#ifndef STENCILGEN_STENCIL_BLOB_H
#define STENCILGEN_STENCIL_BLOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "digest.h"
#include "stencil.h"
#include "util.h"

/* Bump on any change to the layout above; older blobs are then misses. */
#define STENCIL_BLOB_VERSION 4u

/* Appends the blob of `s` (its instructions all decoded, none writing the frame
 * pointer: a checked stencil) to `out`. `context` digests what the stencil was
 * made under besides its object (the generator build, the LLVM version, the
 * run-time symbols); `deps` is the compile's depfile text. */
void stencil_blob_encode(strbuf *out, const gen_stencil *s, const char *deps,
                         const digest *context);

/* Fills s's code, data, holes, entry, removed jump and instructions, and
 * *deps (caller frees), from a blob written under the same `context`, for a
 * manifest with `nsymbols` run-time symbols. On any problem leaves s and *deps
 * alone, writes the reason into err and returns false. */
bool stencil_blob_decode(const uint8_t *buf, size_t size, const digest *context, size_t nsymbols,
                          gen_stencil *s, char **deps, char *err, size_t errsz);

#endif
