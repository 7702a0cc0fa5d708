"""Incremental builds at scale: the 300-op corpus, one-op edits, a damaged cache."""
import glob
import os
import re
import sys

from sgtest import BUNDLED_OPS, TRIPLE, check, read, write

ASAN = False  # minutes of extra compiles under ASan buy nothing here: the generator
              # paths involved are the same ones the other suites cover sanitized


def counts(stdout, triple=TRIPLE):
    m = re.search(r"^stencilgen: %s: (\d+) ops \((\d+) compiled, (\d+) cached\)" %
                  re.escape(triple), stdout, re.M)
    check(m, "no summary for %s in: %s", triple, stdout)
    return tuple(int(x) for x in m.groups())


def header(out):
    return read(os.path.join(out, "jit_stencils-%s.h" % TRIPLE), "rb")


def edit_op(path, op, statement):
    text = read(path)
    at = text.index("OP(%s)" % op)
    cont = text.index("CONTINUE();", at)
    write(path, text[:cont] + statement + "\n    " + text[cont:])


def test_300_ops_edit_one_recompiles_one(ctx):
    corpus = os.path.join(ctx.tmp, "corpus")
    ctx.run([sys.executable, ctx.path("tests", "bench", "make_corpus.py"), corpus], check=True)
    manifest = os.path.join(corpus, "corpus.yaml")
    out = os.path.join(corpus, "out")
    p = ctx.build_stencils(manifest, out, "-j", "2", timeout=900)
    check(counts(p.stdout) == (300, 300, 0), "cold build: %s", p.stdout)
    cold = header(out)
    p = ctx.build_stencils(manifest, out, "-j", "2", "-v")
    check(counts(p.stdout) == (300, 0, 300), "no-op build compiled something: %s", p.stdout)
    check("(301 cached stencils)" in p.stderr, "no-op build read objects (300 ops and the "
          "shim are cached stencils): %s", p.stderr[-2000:])
    check(header(out) == cold, "no-op build changed the header")
    # One op edited in the middle of a file: the ops around it move, but only it
    # recompiles.
    edit_op(os.path.join(corpus, "ops", "group13.c"), "op134", "tos ^= 0x5a;")
    p = ctx.build_stencils(manifest, out, "-j", "2", "-v")
    check(counts(p.stdout) == (300, 1, 299), "one-op edit: %s", p.stdout)
    check("(300 cached stencils)" in p.stderr, "one-op edit: %s", p.stderr[-2000:])
    edited = header(out)
    check(edited != cold, "the edit did not change the header")
    fresh = os.path.join(ctx.tmp, "fresh")
    ctx.build_stencils(manifest, fresh, "-j", "2", "--cache-dir", os.path.join(ctx.tmp, "c2"),
                       timeout=900)
    check(header(fresh) == edited, "incremental header differs from a cold build's")


def test_damaged_cache_entries_are_rebuilt(ctx):
    base = ctx.bundled_copy()
    manifest = os.path.join(base, "stencils", "stencils.yaml")
    out = os.path.join(base, "out")
    # Per-op units: each op's object is in the cache, read in place of its stencil.
    ctx.build_stencils(manifest, out, "--target", TRIPLE, "--units", "per-op")
    good = header(out)
    blobs = sorted(glob.glob(os.path.join(out, ".stencilgen", "blobs", "*.o")))
    check(len(blobs) >= BUNDLED_OPS + 1, "expected cached objects, found %d", len(blobs))
    # Ops' objects only: the shim's (the one with unwind facts beside it) is not
    # counted in the summary, so damaging it would show as one compile fewer.
    blobs = [b for b in blobs if not os.path.exists(b[:-2] + ".unwind")]
    # Cached stencils would stand in for the objects: without them, the objects
    # are read (test_stencil_cache.py damages the stencils themselves).
    for b in glob.glob(os.path.join(out, ".stencilgen", "blobs", "*.stencil")):
        os.remove(b)
    # Truncate one object, flip a byte inside another, cut the record index short.
    with open(blobs[0], "r+b") as f:
        f.truncate(os.path.getsize(blobs[0]) // 2)
    with open(blobs[1], "r+b") as f:
        f.seek(64)
        b = f.read(1)
        f.seek(64)
        f.write(bytes([b[0] ^ 0xFF]))
    index = os.path.join(out, ".stencilgen", "records.idx")
    with open(index, "r+b") as f:  # tear the last record of the index
        f.truncate(os.path.getsize(index) - 3)
    p = ctx.build_stencils(manifest, out, "--target", TRIPLE, "--units", "per-op")
    total, compiled, cached = counts(p.stdout)
    check(compiled >= 2 and cached + compiled == total, "damage not detected: %s", p.stdout)
    check(header(out) == good, "header after rebuilding damaged entries differs")
    p = ctx.build_stencils(manifest, out, "--target", TRIPLE, "--units", "per-op")
    check(counts(p.stdout)[1] == 0, "repaired cache still misses: %s", p.stdout)
