/* provenance.h - what a generated header was made from, recorded in the
 * header itself so that `stencilgen check-prebuilt` (prebuilt.c) can tell,
 * with no compiler and no LLVM, which ops of a shipped header are stale
 * (docs/build.md, "Prebuilt headers").
 *
 * The record is the last comment of a per-target header, one line per fact:
 *   sg-provenance 1
 *   sg-generator stencilgen 0.1
 *   sg-compiler clang, LLVM 22.1.8        (the LLVM stencilgen links, never a path)
 *   sg-abi 7
 *   sg-layout hot-cold                      (or "whole": built with --no-hot-cold)
 *   sg-file NAME DIGEST                     (every file a compile read, once)
 *   sg-absent L NAME...                     (list L of paths looked for, not found)
 *   sg-shim SOURCE unit D flags D [absent L] reads NAME...
 *   sg-op NAME SOURCE at D unit D flags D [absent L] reads NAME...   ("whole" for "at D")
 * Paths are relative to the manifest's directory. The compiler's and the
 * system's files (clang's installation, everything under /usr: the C
 * library's headers) are not recorded: they come with the compiler, which
 * the sg-compiler line names. Every other file a compile read is, also one
 * outside the manifest's directory ("../common/x.h"). A path an include or __has_include looked for and
 * did not find there (a header created earlier on the include path would
 * shadow the one found) is listed by sg-absent, each distinct list once. An op's unit digest covers its own definition and
 * the text of its file outside every op (opunit.h: what its unit holds), so
 * editing one op leaves the others of its file current.
 */
#ifndef STENCILGEN_PROVENANCE_H
#define STENCILGEN_PROVENANCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "digest.h"
#include "discover.h"
#include "manifest.h"
#include "util.h"

/* 2 added sg-layout (1: hot-cold, 0.3.0's default); 3 made every digest
 * SHA-256. check-prebuilt reads 1 and 2 to call every op stale: their
 * digests are of a 128-bit hash this stencilgen no longer makes. */
#define PROV_FORMAT_VERSION 3
#define PROV_SHA256_FORMAT 3
#define PROV_DIGEST_HEX DIGEST_HEX

/* A SHA-256 digest (digest.h) as 64 hex digits and a NUL. */
typedef struct prov_digest {
    char hex[PROV_DIGEST_HEX + 1];
} prov_digest;

prov_digest prov_digest_of(const void *data, size_t size);

/* "stencilgen 0.1" */
const char *prov_generator(void);

/* The flags every op (shim: false) or the shim (shim: true) of target
 * `triple` compiles with (`t`: its manifest entry, NULL for a --target the
 * manifest does not list), as the manifest gives them, with paths relative
 * to the manifest: checkouts elsewhere give the same digest. --extra-cflags
 * are the build's own and not recorded: headers stay what they were for any
 * that do not change the code (docs/build.md, "Prebuilt headers"). */
prov_digest prov_flags_digest(const gen_manifest *m, const char *triple,
                              const gen_manifest_target *t, bool shim);

/* Where one op sits in its file, found from its first line alone (no parse):
 * the line is recorded by digest, the definition runs to the brace that
 * closes its body. */
typedef struct prov_extent {
    size_t begin, end; /* whole lines, [begin, end) */
    bool found;
} prov_extent;

/* One op source's text cut into its ops (by `at` digests, in source order)
 * and the rest; each op's unit digest from both. unit[i] is filled for the
 * ops found (ext[i].found). */
typedef struct prov_file_cut {
    prov_extent *ext; /* one per op */
    prov_digest *unit;
} prov_file_cut;

/* Digest of the line that starts at `begin`. */
prov_digest prov_line_digest(const char *text, size_t size, size_t begin);
/* The extent of the definition whose first line starts at `line_begin`. */
prov_extent prov_extent_at(const char *text, size_t size, size_t line_begin);
/* Cut `text` (NUL-terminated at `size`, as read_file leaves it) at the ops
 * whose first lines have the digests at[0..n) (in source order) and compute
 * each found op's unit digest. */
void prov_cut(const char *text, size_t size, const prov_digest *at, size_t n, prov_file_cut *out);
void prov_cut_free(prov_file_cut *c);

/* Names in the record: bytes a line cannot hold as they are (blanks,
 * controls, '\', "*" before "/") as \xHH. */
void prov_put_name(strbuf *sb, const char *name);
/* The inverse, in place; false on a malformed escape. */
bool prov_decode_name(char *s);

/* What one target's record is made from. */
typedef struct prov_inputs {
    const gen_manifest *manifest;
    const char *triple;
    const gen_manifest_target *target; /* NULL: a --target the manifest does not list */
    const gen_oplist *ops;      /* every op, in op order */
    char *const *op_deps;       /* per op: its compile's depfile text (NULL: none) */
    const char *shim_deps;      /* the shim's */
    const char *workdir;        /* files under it are the generator's own */
    bool hot_cold;              /* ops laid out in hot and cold parts (not --no-hot-cold) */
    const char *const *op_absent; /* per op: paths its compile looked for and did not find,
                                     one a line (NULL: unknown) */
    const char *shim_absent;    /* the shim's */
    const char *compiler_prefix; /* clang's installation (its headers are its own), or NULL */
    const char *compiler_version; /* what that clang says it is: "19.1.7" */
} prov_inputs;

/* The record, as the header's closing comment. */
void prov_write(strbuf *sb, const prov_inputs *in);

#endif
