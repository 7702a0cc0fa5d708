/* memo.h - a build's outputs remembered by what made them.
 *
 * A run whose every stencil key hits would load each cached stencil and
 * render every header only to find them equal to the files on disk: at
 * CPython's scale (5,490 stencils, five 5 MB headers) that is most of a
 * no-op. After a build publishes, the memo records a digest of everything its
 * outputs are made from (the generator and compiler, the options, the
 * manifest's bytes, each op's place, and each job's cache key and context)
 * and what each output file is on disk (device, inode, size, mtime, ctime).
 * A later run with the same digest whose outputs are all as recorded loads
 * and renders nothing: it prints the summary the memo kept. Any difference,
 * or an output changed, touched, replaced or removed since, and the run goes
 * the whole way, then records a new memo. One memo per set of outputs, in the
 * cache directory (docs/build.md, "Incremental builds and the cache"). */
#ifndef STENCILGEN_MEMO_H
#define STENCILGEN_MEMO_H

#include <stdbool.h>
#include <sys/stat.h>

#include "cache.h"
#include "jobs.h"
#include "run.h"
#include "util.h"

/* The digest of what a build's outputs are made from; false when some job
 * has no cache key (it must compile, or there is no stencil cache). */
bool memo_digest(const gen_run *run, const job_set *js, gen_key *out);

/* The summary kept with the memo of `digest`, when every output recorded
 * with it is still as it was written; else false. A hit dates the outputs
 * now, as publishing dates those it leaves unchanged, and records that. */
bool memo_replay(const gen_run *run, const gen_key *digest, strbuf *summary);

/* Record the outputs at `paths` (just published: `published` is what each
 * file this run wrote or left there is, outputs_publish) under `digest`, with
 * the summary a run that compiles nothing prints. Facts of the files, not of
 * the paths: another build may have published over them since, and its files
 * must not pass for this run's. Best effort: a memo that cannot be written
 * only makes the next no-op slower. */
void memo_record(const gen_run *run, const gen_key *digest, char *const *paths,
                 const struct stat *published, size_t n, const char *summary);

#endif
