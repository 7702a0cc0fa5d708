"""The cached checked stencils ("stencil" blobs beside each object, and for the
shim an "unwind" blob, what its unwind facts are derived from): used on a no-op
run, which then reads no object, refused when damaged, from another format
version or made under another symbol list, and then rebuilt from the object,
with the same header."""
import glob
import os
import re
import struct
import time

from sgtest import TRIPLE, check, read, write

ASAN = True  # the blob decoder parses untrusted bytes

TRAILER_MAGIC = 0x31454843474753  # cache.c: "SGGCHE1"
MASK = (1 << 64) - 1


def rotl(v, r):
    return ((v << r) | (v >> (64 - r))) & MASK


def hash_round(h, w):
    h ^= (w * 0x87c37b91114253d5) & MASK
    return (rotl(h, 31) * 0x4cf5ad432745937f) & MASK


def hash_final(h):
    h ^= h >> 33
    h = (h * 0xff51afd7ed558ccd) & MASK
    h ^= h >> 33
    h = (h * 0xc4ceb9fe1a85ec53) & MASK
    return h ^ (h >> 33)


def hash64(data, seed):
    """util.c hash64: the blobs' checksum against damage."""
    n = len(data)
    a = seed ^ 0xcbf29ce484222325 ^ n
    whole = n - n % 8
    for i in range(0, whole, 8):
        a = hash_round(a, struct.unpack_from("<Q", data, i)[0])
    tail = int.from_bytes(data[whole:], "little")
    a = hash_round(a, tail ^ ((n % 8) << 56))
    return hash_final(a)


def payload(path):
    """A blob's bytes without cache.c's 24-byte trailer (magic, size, checksum)."""
    with open(path, "rb") as f:
        data = f.read()
    magic, size, _ = struct.unpack("<QQQ", data[-24:])
    check(magic == TRAILER_MAGIC and size == len(data) - 24, "not a cache blob: %s", path)
    return data[:-24]


def rewrite(path, body):
    """Store `body` with a correct trailer, so that only the stencil decoder can object."""
    # The checksum is seeded with the key's first 8 bytes (digest_word), little-endian.
    seed = int.from_bytes(bytes.fromhex(os.path.basename(path)[:16]), "little")
    with open(path, "wb") as f:
        f.write(body + struct.pack("<QQQ", TRAILER_MAGIC, len(body), hash64(body, seed)))


def header(out):
    return read(os.path.join(out, "jit_stencils-%s.h" % TRIPLE), "rb")


def drop_header(out):
    """Remove the target's header, so that the next build renders it from the
    cache's stencils: with its outputs as it left them, a no-op build loads
    nothing (its memo, docs/build.md "Incremental builds and the cache")."""
    os.remove(os.path.join(out, "jit_stencils-%s.h" % TRIPLE))


MEMO_HIT = "outputs as the last build left them (memo)"


def build(ctx, manifest, out, *extra):
    p = ctx.build_stencils(manifest, out, "--target", TRIPLE, "-v", *extra)
    m = re.search(r"^stencilgen: %s: (\d+) ops \((\d+) compiled, (\d+) cached\)" %
                  re.escape(TRIPLE), p.stdout, re.M)
    check(m, "no summary in: %s", p.stdout)
    s = re.search(r"\((\d+) cached stencils\)", p.stderr)
    check(s, "no cached-stencil count in: %s", p.stderr)
    return tuple(int(x) for x in m.groups()) + (int(s.group(1)),), p


def test_noop_build_dates_outputs_it_does_not_change(ctx):
    """A no-op build leaves each header's bytes and inode alone but dates it
    now (ninja compares times), and creates no file: neither a temporary beside
    the headers nor a run directory in the work directory (the directories'
    times stay). A header that is not what the build makes is replaced."""
    base = ctx.bundled_copy()
    manifest = os.path.join(base, "stencils", "stencils.yaml")
    out = os.path.join(base, "out")
    build(ctx, manifest, out)
    path = os.path.join(out, "jit_stencils-%s.h" % TRIPLE)
    work = os.path.join(out, ".stencilgen")
    before, st0 = header(out), os.stat(path)
    dirs0 = [os.stat(d).st_mtime_ns for d in (out, work)]
    time.sleep(0.05)
    build(ctx, manifest, out)
    st1 = os.stat(path)
    dirs1 = [os.stat(d).st_mtime_ns for d in (out, work)]
    check(dirs1 == dirs0, "a no-op build created or removed files in %s or %s", out, work)
    check(header(out) == before and st1.st_ino == st0.st_ino,
          "a no-op build wrote the header again (inode %d, was %d)", st1.st_ino, st0.st_ino)
    check(st1.st_mtime_ns > st0.st_mtime_ns, "a no-op build left the header's time: %d",
          st1.st_mtime_ns)
    with open(path, "ab") as f:  # no longer what the build makes: written again
        f.write(b"/* edited by hand */\n")
    build(ctx, manifest, out)
    st2 = os.stat(path)
    check(header(out) == before and st2.st_ino != st1.st_ino,
          "a header edited by hand was not replaced by the build's (inode %d)", st2.st_ino)


def index_parts(out):
    """The parts of the cache's record index: its first, then one a line "S <n>"
    (a build that only added records appended them, cache.c)."""
    text = read(os.path.join(out, ".stencilgen", "records3.idx"), "rb")
    return 1 + len(re.findall(rb"^S \d+$", text, re.M))


def test_record_index_grows_by_parts_and_is_written_whole_again(ctx):
    """A build that only adds records appends them to the cache's record index
    (rewriting a CPython-sized index cost an edit 8-10 ms), and later builds
    read them: an op edited back to a version built before compiles nothing.
    A torn part loses records from there on, never yields another header than
    an untorn twin's, and the next build that records writes the index whole,
    in one part. (Which record of a key is the newest: tests/unit/test_cache.)"""
    base = ctx.bundled_copy()
    manifest = os.path.join(base, "stencils", "stencils-cached.yaml")
    ops = os.path.join(base, "stencils", "ops", "cached.c")
    extra = os.path.join(base, "stencils", "ops", "extra.h")
    out = os.path.join(base, "out")
    original = read(ops)
    line = "    CACHED_BINARY((vm_value)((uint64_t)a + (uint64_t)b));"
    check(line in original, "cached.c lacks %r", line)

    def edit(n):
        """0: as bundled; n > 0: op tos_add adds n and EXTRA, which extra.h
        defines as n (each version its own unit, so its own records)."""
        write(extra, "enum { EXTRA = %d };\n" % n)
        write(ops, original.replace(line, '#include "extra.h"\n' + line.replace(
            "(uint64_t)b)", "(uint64_t)b + EXTRA + %d)" % n)) if n else original)
        time.sleep(0.05)  # files written in the tick a compile starts in are not trusted

    def built(n, into=out):
        edit(n)
        p = ctx.build_stencils(manifest, into, "--target", TRIPLE)
        m = re.search(r"^stencilgen: %s: \d+ ops \((\d+) compiled" % re.escape(TRIPLE), p.stdout,
                      re.M)
        check(m, "no summary in: %s", p.stdout)
        return int(m.group(1))

    twin = os.path.join(base, "twin")  # the same builds, its index never torn
    built(0)
    check(index_parts(out) == 1, "a cold build's index has %d parts", index_parts(out))
    compiled = [built(1), built(2)]
    check(all(compiled) and index_parts(out) == 3,
          "two edits compiled nothing or did not append two parts (%d parts)", index_parts(out))
    check(built(1) == 0, "edited back to a version built before: compiled again")
    idx = os.path.join(out, ".stencilgen", "records3.idx")
    text = read(idx, "rb")
    last = text.rindex(b"\nS ")
    with open(idx, "r+b") as f:  # the last part torn in its middle
        f.truncate(last + (len(text) - last) // 2)
    for n in (0, 1, 2, 1):
        built(n, twin)
    check(built(3) > 0 and built(3, twin) > 0 and header(out) == header(twin),
          "after a torn part: nothing compiled, or a header unlike the untorn twin's")
    check(index_parts(out) == 1, "the build after a torn part left %d parts", index_parts(out))
    check(built(1) == 0 and built(1, twin) == 0 and header(out) == header(twin),
          "after the index was written whole: a version built before compiled again")


def test_noop_build_uses_cached_stencils(ctx):
    base = ctx.bundled_copy()
    manifest = os.path.join(base, "stencils", "stencils.yaml")
    out = os.path.join(base, "out")
    (n, compiled, cached, stencils), _ = build(ctx, manifest, out)
    check(compiled == n and stencils == 0, "cold build: %d ops, %d compiled, %d stencils",
          n, compiled, stencils)
    cold = header(out)
    blobs = glob.glob(os.path.join(out, ".stencilgen", "blobs", "*.stencil"))
    check(len(blobs) == n + 1, "expected %d stencil blobs (ops and shim), found %d", n + 1,
          len(blobs))
    unwind = glob.glob(os.path.join(out, ".stencilgen", "blobs", "*.unwind"))
    check(len(unwind) == 1, "expected the shim's unwind blob, found %s", unwind)
    counts, p = build(ctx, manifest, out)
    check(counts == (n, 0, n, 0) and MEMO_HIT in p.stderr and header(out) == cold,
          "no-op build (outputs unchanged: nothing loaded): %s\n%s", counts, p.stderr)
    drop_header(out)
    counts, _ = build(ctx, manifest, out)
    check(counts == (n, 0, n, n + 1), "no-op build with the header removed: %s", counts)
    check(header(out) == cold, "header from cached stencils differs from the cold build's")
    # Damaged, the shim's unwind entry is a miss: its object is read again.
    with open(unwind[0], "r+b") as f:
        f.seek(8)
        b = f.read(1)
        f.seek(8)
        f.write(bytes([b[0] ^ 0x01]))
    drop_header(out)
    counts, _ = build(ctx, manifest, out)
    check(counts == (n, 0, n, n), "no-op build after damaging the unwind entry: %s", counts)
    check(header(out) == cold, "header after rebuilding the shim's facts differs")


def test_keys_are_sha256_names_and_an_older_cache_is_left_alone(ctx):
    """Keys are SHA-256 digests: every blob is named by 64 hex digits. A cache
    directory an older stencilgen filled (0.3's records2.idx and blobs named by
    its 128-bit hash) is neither read nor misread: the build compiles every op,
    writes the header a clean build writes, and leaves the old files to
    eviction."""
    base = ctx.bundled_copy()
    manifest = os.path.join(base, "stencils", "stencils.yaml")
    out, fresh = os.path.join(base, "out"), os.path.join(base, "fresh")
    blobs = os.path.join(out, ".stencilgen", "blobs")
    os.makedirs(blobs)
    old_index = os.path.join(out, ".stencilgen", "records2.idx")
    old_text = "L 0\n%s\n.\nR %016x %032x 0 %s/op_push_operand.o\n" % (
        os.path.join(base, "stencils", "tinyvm.h"), 0x1234, 0, TRIPLE)
    write(old_index, old_text)
    old_blob = os.path.join(blobs, "%032x.o" % 0x1234)
    write(old_blob, "not an object")
    (n, compiled, _, _), _ = build(ctx, manifest, out)
    check(compiled == n, "a build over an older cache compiled %d of %d ops", compiled, n)
    (_, fresh_compiled, _, _), _ = build(ctx, manifest, fresh)
    check(fresh_compiled == n and header(out) == header(fresh),
          "the header over an older cache differs from a clean build's")
    names = [f for f in os.listdir(blobs) if f != os.path.basename(old_blob)]
    bad = [f for f in names if not re.fullmatch(r"[0-9a-f]{64}\.[a-z-]+", f)]
    check(names and not bad, "blobs not named by a SHA-256 key: %s", bad or "none at all")
    check(read(old_blob) == "not an object" and os.path.exists(old_index) and
          read(old_index) == old_text, "the older cache's files were changed or removed")


def test_noop_memo_is_dropped_by_every_change_to_what_it_remembers(ctx):
    """A no-op build loads and renders nothing only while its outputs are as
    the last build left them and nothing they are made from changed: a header
    edited, touched or removed, an option that changes the outputs (the
    listing, hot and cold parts, the targets), a depfile or compile_commands.json
    asked for, an edited template, an added op, another cache directory. Each is
    then built the whole way, and every header equals a clean build's."""
    base = ctx.bundled_copy()
    manifest = os.path.join(base, "stencils", "stencils.yaml")
    out = os.path.join(base, "out")
    path = os.path.join(out, "jit_stencils-%s.h" % TRIPLE)

    def noop(*extra):
        _, p = build(ctx, manifest, out, *extra)
        return MEMO_HIT in p.stderr

    build(ctx, manifest, out)
    check(noop(), "an unchanged rebuild did not use its memo")
    cold = header(out)
    with open(path, "ab") as f:  # edited by hand: written again
        f.write(b"/* edited */\n")
    check(not noop() and header(out) == cold, "an edited header was kept")
    check(noop(), "the rebuild after the edit left no memo")
    os.utime(path, ns=(1, 1))  # same bytes, another time: checked the whole way
    check(not noop() and header(out) == cold and os.stat(path).st_mtime_ns > 1,
          "a header dated otherwise was not checked")
    os.remove(path)
    check(not noop() and header(out) == cold, "a removed header was not written again")
    check(not noop("--no-listing") and header(out) != cold, "--no-listing kept the listing")
    check(noop("--no-listing"), "an unchanged --no-listing rebuild did not use its memo")
    check(not noop() and header(out) == cold, "dropping --no-listing kept the short header")
    dep = os.path.join(base, "deps.d")
    check(not noop("--depfile", dep) and os.path.exists(dep), "the depfile was not written")
    check(not noop("--no-hot-cold") and header(out) != cold, "--no-hot-cold kept the split ops")
    check(not noop() and header(out) == cold, "dropping --no-hot-cold kept the whole ops")
    commands = os.path.join(base, "compile_commands.json")
    check(not noop("--compile-commands", commands) and os.path.exists(commands),
          "compile_commands.json was not written")
    other = os.path.join(out, "jit_stencils-aarch64-unknown-linux-gnu.h")
    check(not noop("--target", "aarch64-unknown-linux-gnu") and os.path.exists(other),
          "another set of targets used the memo")
    template = os.path.join(base, "stencils", "stencil_template.h")
    write(template, read(template) + "\n/* edited after the memo */\n")
    check(not noop(), "an edited template used the memo")
    edit = os.path.join(base, "stencils", "ops", "arith.c")
    write(edit, read(edit) + "\nOP(memo_probe)\n{\n    tos += 3;\n    CONTINUE();\n}\n")
    check(not noop() and b"memo_probe" in header(out), "an added op is not in the header")
    fresh = os.path.join(base, "fresh")
    build(ctx, manifest, fresh, "--cache-dir", os.path.join(base, "cache2"))
    check(header(fresh) == header(out), "after these builds the header differs from a clean one")
    check(not noop("--cache-dir", os.path.join(base, "cache3")),
          "another cache directory used the first one's memo")


def damaged_entries_are_rebuilt(ctx, units):
    base = ctx.bundled_copy()
    manifest = os.path.join(base, "stencils", "stencils.yaml")
    out = os.path.join(base, "out")
    build(ctx, manifest, out, "--units", units)
    good = header(out)
    blobs = sorted(glob.glob(os.path.join(out, ".stencilgen", "blobs", "*.stencil")))
    check(len(blobs) >= 8, "expected stencil blobs, found %d", len(blobs))
    original = {b: read(b, "rb") for b in blobs}
    body = [payload(b) for b in blobs]
    # Damage caught by the cache's checksum: a truncated blob, a flipped byte.
    with open(blobs[0], "r+b") as f:
        f.truncate(os.path.getsize(blobs[0]) // 2)
    with open(blobs[1], "r+b") as f:
        f.seek(40)
        b = f.read(1)
        f.seek(40)
        f.write(bytes([b[0] ^ 0x01]))
    # Damage behind a valid checksum, which only the stencil decoder can refuse.
    rewrite(blobs[2], body[2][:8] + struct.pack("<I", 2) + body[2][12:])  # another version
    rewrite(blobs[3], body[3] + b"\0")                                      # a byte too many
    rewrite(blobs[4], body[4][:12] + bytes([body[4][12] ^ 1]) + body[4][13:])  # context
    rewrite(blobs[5], body[5][:-1])                                         # a byte short
    # code size: after the magic, the version and the 32-byte context
    rewrite(blobs[6], body[6][:44] + struct.pack("<Q", 1 << 40) + body[6][52:])
    damaged = 7
    drop_header(out)
    (n, compiled, cached, stencils), p = build(ctx, manifest, out, "--units", units)
    if units == "per-op":
        # The objects are intact: every op comes from the cache, 7 of the
        # stencils (the shim's among them, maybe) by way of it.
        check((compiled, cached, stencils) == (0, n, n + 1 - damaged),
              "damage not detected or not recovered from the objects: %s\n%s",
              (n, compiled, cached, stencils), p.stderr)
    else:
        # A batch's object is kept with one of its ops: the others compile again.
        check(compiled <= damaged and compiled + cached == n and stencils == n + 1 - damaged,
              "damage not detected or not recovered: %s\n%s", (n, compiled, cached, stencils),
              p.stderr)
    for reason in ["format version 2", "bytes after the end", "another generator",
                   "truncated", "code size"]:
        check(reason in p.stderr, "no note saying '%s' in:\n%s", reason, p.stderr)
    check(header(out) == good, "header after rebuilding damaged stencils differs")
    for b in blobs if units == "per-op" else []:  # a compile's entry records its own run's paths
        check(read(b, "rb") == original[b], "%s was not rewritten as it was", b)
    drop_header(out)
    counts, _ = build(ctx, manifest, out, "--units", units)
    check(counts == (n, 0, n, n + 1), "repaired cache still misses: %s", counts)


def test_damaged_stencil_entries_are_rebuilt(ctx):
    damaged_entries_are_rebuilt(ctx, "per-op")


def test_damaged_stencil_entries_are_rebuilt_batched(ctx):
    damaged_entries_are_rebuilt(ctx, "batched")


def symbol_list_change_is_not_served_stale_stencils(ctx, units):
    # Holes name run-time symbols by number, and the symbol list is not part of
    # the objects' cache key: reordering it must re-extract every op.
    base = ctx.bundled_copy()
    manifest = os.path.join(base, "stencils", "stencils.yaml")
    out = os.path.join(base, "out")
    build(ctx, manifest, out, "--units", units)
    text = read(manifest)
    old = "symbols: [vm_call, vm_print, vm_native, vm_trap]"
    check(old in text, "the bundled manifest's symbol list changed; update this test")
    write(manifest, text.replace(old, "symbols: [vm_trap, vm_native, vm_print, vm_call]"))
    (n, compiled, cached, stencils), _ = build(ctx, manifest, out, "--units", units)
    # Per-op units re-extract every op from its object; a batch's object is
    # kept with one of its ops, so the others compile again.
    check(stencils == 0 and compiled + cached == n and (units != "per-op" or compiled == 0),
          "reordered symbols: %s", (n, compiled, cached, stencils))
    fresh = os.path.join(base, "fresh")
    build(ctx, manifest, fresh, "--cache-dir", os.path.join(base, "cache2"), "--units", units)
    check(header(out) == header(fresh), "header after reordering symbols differs from a cold build's")
    drop_header(out)
    counts, _ = build(ctx, manifest, out, "--units", units)
    check(counts == (n, 0, n, n + 1), "stencils not cached again: %s", counts)


def test_symbol_list_change_is_not_served_stale_stencils(ctx):
    symbol_list_change_is_not_served_stale_stencils(ctx, "per-op")


def test_symbol_list_change_is_not_served_stale_stencils_batched(ctx):
    """Also the batches of ops that lost their stencils: they are not the
    file's neighbours (ops between them are recovered from objects)."""
    symbol_list_change_is_not_served_stale_stencils(ctx, "batched")


def test_dump_from_cached_stencils(ctx):
    base = ctx.bundled_copy()
    manifest = os.path.join(base, "stencils", "stencils.yaml")
    out = os.path.join(base, "out")
    cache = os.path.join(out, ".stencilgen")
    build(ctx, manifest, out)
    warm = ctx.generator("dump", "--manifest", manifest, "--target", TRIPLE, "--cache-dir",
                         cache, check=True).stdout
    cold = ctx.generator("dump", "--manifest", manifest, "--target", TRIPLE, check=True).stdout
    check("op add (" in warm and "CFI rows" in warm, "unexpected dump:\n%s", warm[:2000])
    check(warm == cold, "dump from cached stencils differs from a cold dump")


def test_noop_build_loads_neither_llvm_nor_libclang(ctx):
    """With every stencil cached, a run needs no discovery, object reader or
    disassembler: the LLVM module (and with it libLLVM and libclang) is never
    loaded, which was about half of a no-op's time. The cold build that
    filled the cache is the control: it loads them."""
    base = ctx.bundled_copy()
    manifest = os.path.join(base, "stencils", "stencils.yaml")
    out = os.path.join(base, "out")
    env = {"LD_DEBUG": "files"}
    cold = ctx.build_stencils(manifest, out, env=env)
    check("stencilgen-llvm.so" in cold.stderr and "libLLVM" in cold.stderr and
          "libclang" in cold.stderr, "the cold build did not load the module:\n%s",
          cold.stderr[-2000:])
    noop = ctx.build_stencils(manifest, out, env=env)
    loaded = sorted(set(re.findall(r"file=(\S*(?:LLVM|clang|stencilgen-llvm)\S*)", noop.stderr)))
    check(not loaded, "the no-op build loaded %s", loaded)


def test_a_build_publishing_in_another_s_race_window_is_not_remembered_as_it(ctx):
    """Build A (default options) publishes its header; before it writes its memo, build B
    (--no-listing) publishes into the same outdir. A's memo must describe A's files, not B's:
    the next default build goes the whole way and leaves a clean build's header, never B's
    under A's memo. The window is held open by delaying A's first open of the manifest after its
    header is renamed into place (the memo's digest reads it; tests/fault/libfailopen.so)."""
    import subprocess
    import time
    from sgtest import GENERATOR_ENV
    base = ctx.bundled_copy()
    manifest = os.path.join(base, "stencils", "stencils.yaml")
    out = os.path.join(base, "out")
    path = os.path.join(out, "jit_stencils-%s.h" % TRIPLE)
    build(ctx, manifest, out)  # every stencil cached, both headers known
    default = header(out)
    build(ctx, manifest, out, "--no-listing")
    short = header(out)
    check(short != default, "--no-listing writes the same header")
    lib = os.path.join(ctx.build, "tests", "fault", "libfailopen.so")
    env = dict(os.environ, **GENERATOR_ENV, LD_PRELOAD=lib,
               ASAN_OPTIONS="verify_asan_link_order=0:detect_leaks=0",
               FAILOPEN_DELAY_MATCH=os.path.basename(manifest),
               FAILOPEN_DELAY_AFTER_RENAME=os.path.basename(path), FAILOPEN_DELAY_MS="4000")
    a = subprocess.Popen([ctx.stencilgen, "build", "--manifest", manifest, "--outdir", out,
                          "--target", TRIPLE], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while header(out) != default and a.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        check(header(out) == default and a.poll() is None,
              "build A did not publish and wait in its window (exit %s)", a.poll())
        build(ctx, manifest, out, "--no-listing")  # B, inside A's window
        check(header(out) == short and a.poll() is None, "B did not publish inside A's window")
        _, err = a.communicate(timeout=120)
        check(a.returncode == 0, "build A failed: %s", err)
    finally:
        if a.poll() is None:
            a.kill()
            a.wait()
    _, p = build(ctx, manifest, out)
    check(MEMO_HIT not in p.stderr and header(out) == default,
          "the default build after the race %s and left %s header", "used A's memo" if MEMO_HIT
          in p.stderr else "went the whole way", "B's" if header(out) == short else "another")
    _, p = build(ctx, manifest, out)
    check(MEMO_HIT in p.stderr, "the build after it did not use its memo")
