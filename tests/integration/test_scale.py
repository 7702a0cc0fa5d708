"""Incremental builds at scale: the 300-op corpus, one-op edits, a damaged cache;
a no-op's work linear in the ops of one file; progress on a terminal only."""
import glob
import os
import re
import sys

from sgtest import BUNDLED_OPS, GENERATOR_ENV, TRIPLE, check, read, write

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
    check("outputs as the last build left them (memo)" in p.stderr and
          "(0 cached stencils)" in p.stderr, "no-op build loaded stencils: %s", p.stderr[-2000:])
    check(header(out) == cold, "no-op build changed the header")
    os.remove(os.path.join(out, "jit_stencils-%s.h" % TRIPLE))  # now it must render
    p = ctx.build_stencils(manifest, out, "-j", "2", "-v")
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
    index = os.path.join(out, ".stencilgen", "records3.idx")
    with open(index, "r+b") as f:  # tear the last record of the index
        f.truncate(os.path.getsize(index) - 3)
    # Its outputs as it left them, a no-op build would read no object (its memo).
    os.remove(os.path.join(out, "jit_stencils-%s.h" % TRIPLE))
    p = ctx.build_stencils(manifest, out, "--target", TRIPLE, "--units", "per-op")
    total, compiled, cached = counts(p.stdout)
    check(compiled >= 2 and cached + compiled == total, "damage not detected: %s", p.stdout)
    check(header(out) == good, "header after rebuilding damaged entries differs")
    p = ctx.build_stencils(manifest, out, "--target", TRIPLE, "--units", "per-op")
    check(counts(p.stdout)[1] == 0, "repaired cache still misses: %s", p.stdout)


def key_bytes(stderr):
    m = re.search(r"^stencilgen: keys: (\d+) bytes of op sources hashed for (\d+) ops$",
                  stderr, re.M)
    check(m, "-v does not say how much source the keys hashed: %s", stderr[-2000:])
    return int(m.group(1)), int(m.group(2))


def one_file_noop(ctx, ops):
    """A cold build of `ops` ops in one file, then a no-op: (bytes its keys
    hashed, the file's size)."""
    corpus = os.path.join(ctx.tmp, "one%d" % ops)
    ctx.run([sys.executable, ctx.path("tests", "bench", "make_corpus.py"), corpus, "--ops",
             str(ops), "--per-file", str(ops)], check=True)
    manifest = os.path.join(corpus, "corpus.yaml")
    out = os.path.join(corpus, "out")
    ctx.build_stencils(manifest, out, "-j", "2", timeout=900)
    p = ctx.build_stencils(manifest, out, "-j", "2", "-v")
    check(counts(p.stdout) == (ops, 0, ops), "no-op build compiled something: %s", p.stdout)
    hashed, keyed = key_bytes(p.stderr)
    check(keyed == ops, "keys for %d ops, want %d", keyed, ops)
    return hashed, os.path.getsize(os.path.join(corpus, "ops", "group00.c"))


def test_noop_key_work_is_linear_in_ops_per_file(ctx):
    # Every op's key used to be cut from a unit the size of its whole file:
    # twice the ops in one file, four times the bytes hashed. Now each file
    # is read for keys once (op_keys_for_file): about twice its size.
    small, small_file = one_file_noop(ctx, 150)
    large, large_file = one_file_noop(ctx, 300)
    check(small <= 3 * small_file and large <= 3 * large_file,
          "keys hashed %d and %d bytes of files of %d and %d bytes", small, large, small_file,
          large_file)
    ratio = large / small
    check(1.5 <= ratio <= 2.5, "2x the ops of one file: %.2fx the bytes hashed (%d / %d); "
          "linear is 2x, quadratic 4x", ratio, large, small)


# Runs argv under a pseudo-terminal 100 columns wide and prints what it wrote
# to the terminal (stderr) as hex on stdout; stdout goes to a pipe.
PTY_DRIVER = r"""
import fcntl, os, pty, select, struct, subprocess, sys, termios, time
master, slave = pty.openpty()
fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 100, 0, 0))
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=slave)
os.close(slave)
data, deadline = b"", time.monotonic() + 600
while time.monotonic() < deadline:
    if not select.select([master], [], [], 5)[0]:
        if p.poll() is not None:
            break
        continue
    try:
        chunk = os.read(master, 65536)
    except OSError:
        break
    if not chunk:
        break
    data += chunk
p.wait(timeout=60)
sys.stdout.write(data.hex())
sys.exit(p.returncode)
"""


def test_progress_on_a_terminal_only(ctx):
    manifest = ctx.path("stencils", "stencils.yaml")
    triples = ["x86_64-unknown-linux-gnu", "aarch64-apple-darwin"]
    args = ["build", "--manifest", manifest, "-j", "2"]
    for t in triples:
        args += ["--target", t]
    env = dict(GENERATOR_ENV)
    p = ctx.run([sys.executable, "-c", PTY_DRIVER, ctx.stencilgen] + args +
                ["--outdir", os.path.join(ctx.tmp, "tty")], env=env, timeout=700)
    check(p.returncode == 0, "build on a terminal exited %d: %s", p.returncode, p.stderr)
    shown = bytes.fromhex(p.stdout).decode("utf-8", "replace")
    # One line, rewritten in place: stencils compiled of those to compile,
    # in all and per triple, up to every stencil of each.
    lines = [l for l in shown.split("\r\x1b[K") if l]
    check(lines, "nothing shown on the terminal")
    # (the compiler's version check, once per compiler, shows its own "[1/1] ..." first)
    status = [l for l in lines if re.match(r"\[\d+/\d+ stencils\]", l)]
    check(status, "no status line: %r", shown[-2000:])
    n = BUNDLED_OPS
    last = "[%d/%d stencils] %s %d/%d %s %d/%d" % (2 * n, 2 * n, triples[0], n, n, triples[1],
                                                   n, n)
    check(last in status, "no final status %r among %r", last, status[-5:])
    check(all(len(l) <= 100 for l in status), "a status line is wider than the terminal: %r",
          max(status, key=len))
    check(all("\n" not in l for l in status), "the status line scrolls: %r", status[:3])
    check(shown.endswith("\r\x1b[K"), "the status line is not cleared at the end: %r",
          shown[-200:])
    counts_seen = [int(re.match(r"\[(\d+)/", l).group(1)) for l in status]
    check(counts_seen == sorted(counts_seen), "stencils compiled went down: %s", counts_seen)
    # Not a terminal: not one byte of it.
    p = ctx.build_stencils(manifest, os.path.join(ctx.tmp, "pipe"), *args[3:])
    check("\r" not in p.stderr and "\x1b" not in p.stderr and "stencils]" not in p.stderr,
          "progress written to a pipe: %r", p.stderr[:500])
