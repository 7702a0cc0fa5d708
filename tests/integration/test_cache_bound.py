"""The cache directory is bounded: past `--cache-max-size` the run that closes the cache removes
the least recently used blobs (never its own) down to 8/10 of the bound, safe while other
builds share the directory; `stencilgen cache --stats` and `--clean` show and empty it
(docs/build.md, "Incremental builds and the cache"). Every header stays a clean build's."""
import os
import re
import threading

from sgtest import TRIPLE, check, read, write

ASAN = False  # hundreds of builds; the index and blob readers are fuzzed and run under ASan elsewhere

TIMEOUT = 240
# Edits per builder: 4 builders x 60 in the suite; STENCILGEN_CACHE_EDITS=250 makes 1,000.
EDITS = int(os.environ.get("STENCILGEN_CACHE_EDITS", "60"))
BUILDERS = 4


def manifest_of(proj):
    return os.path.join(proj, "stencils", "stencils.yaml")


def header(out):
    return read(os.path.join(out, "jit_stencils-%s.h" % TRIPLE))


def build(ctx, proj, out, *extra):
    p = ctx.build_stencils(manifest_of(proj), out, "--target", TRIPLE, "-v", *extra,
                           timeout=TIMEOUT)
    m = re.search(r"%s: \d+ ops \((\d+) compiled" % re.escape(TRIPLE), p.stdout)
    check(m, "no summary in %s", p.stdout)
    return int(m.group(1))


def edit_add(proj, n):
    """Op add adds n as well: a stencil of its own, so blobs of its own."""
    path = os.path.join(proj, "stencils", "ops", "arith.c")
    write(path, re.sub(r"\(uint64_t\)a \+ \(uint64_t\)b[^)]*\)",
                       "(uint64_t)a + (uint64_t)b + %d)" % n, read(path), count=1))


def blobs(cache):
    """{name: bytes} of the cache's blobs (temporaries of a write in progress left out)."""
    d = os.path.join(cache, "blobs")
    found = {}
    for name in os.listdir(d) if os.path.isdir(d) else []:
        if ".tmp" in name:
            continue
        try:
            found[name] = os.stat(os.path.join(d, name)).st_size
        except FileNotFoundError:  # removed by a build evicting right now
            pass
    return found


def clean_header(ctx, proj):
    out = os.path.join(ctx.tmp, "clean-%d" % len(os.listdir(ctx.tmp)))
    build(ctx, proj, out, "--cache-dir", os.path.join(out, "own-cache"))
    return header(out)


def test_the_cache_stays_under_its_bound_through_edits_and_concurrent_builds(ctx):
    """4 builds at once, each editing its own checkout EDITS times, share one cache directory
    bounded to 256 KB (one build's blobs are about 60 KB): after the last build the blobs take
    at most the bound, and while the builds run never more than the bound plus what 4 whole
    builds write (a run keeps the blobs of runs younger than itself: they may be in use); the
    first edits' blobs are gone; each checkout's header is what a clean build of it writes."""
    bound = 256 * 1024
    cache = os.path.join(ctx.tmp, "shared-cache")
    projects = [ctx.bundled_copy("b%d" % k) for k in range(BUILDERS)]
    outs = [os.path.join(ctx.tmp, "out%d" % k) for k in range(BUILDERS)]
    failures, peak, first = [], [0], {}
    lock = threading.Lock()

    def builder(k):
        try:
            for i in range(EDITS):
                edit_add(projects[k], 1000 * (k + 1) + i)
                build(ctx, projects[k], outs[k], "--cache-dir", cache, "--cache-max-size", "256K")
                size = sum(blobs(cache).values())
                with lock:
                    peak[0] = max(peak[0], size)
                    if i == 0 and not first:
                        first.update(blobs(cache))
        except Exception as e:  # noqa: BLE001 - reported below, with the others
            with lock:
                failures.append("builder %d: %s" % (k, e))

    threads = [threading.Thread(target=builder, args=(k,)) for k in range(BUILDERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=1800)
    check(not any(t.is_alive() for t in threads), "a builder did not finish in 30 minutes")
    check(not failures, "%s", "\n".join(failures))
    now = blobs(cache)
    total = sum(now.values())
    check(total <= bound, "after %d builds the blobs take %d bytes, over the bound %d",
          BUILDERS * EDITS, total, bound)
    one = os.path.join(ctx.tmp, "one-build")
    build(ctx, projects[0], one, "--cache-dir", os.path.join(one, "cache"))
    whole = sum(blobs(os.path.join(one, "cache")).values())
    check(peak[0] <= bound + BUILDERS * whole, "while building the blobs took %d bytes (bound "
          "%d, a whole build's blobs %d)", peak[0], bound, whole)
    gone = [n for n in first if n not in now]
    check(gone, "none of the first edits' %d blobs was evicted", len(first))
    for k in range(BUILDERS):
        check(header(outs[k]) == clean_header(ctx, projects[k]),
              "checkout %d's header differs from a clean build's", k)


def test_the_least_recently_used_blobs_go_first(ctx):
    """State A built, then state B (op add edited); every blob dated two hours back, B's own
    three; a build of A reads its stencils and dates them now. An edit past a bound that
    leaves room for what A used and one edit's blobs: B's blobs go first, none that A used,
    so A builds again with nothing to compile and B compiles its edited op."""
    proj = ctx.bundled_copy()
    out = os.path.join(ctx.tmp, "out")
    cache = os.path.join(ctx.tmp, "cache")
    d = os.path.join(cache, "blobs")
    unbounded = ("--cache-dir", cache, "--cache-max-size", "0")
    edit_add(proj, 1)
    build(ctx, proj, out, *unbounded)
    of_a = blobs(cache)
    edit_add(proj, 2)
    build(ctx, proj, out, *unbounded)
    of_b = {n: s for n, s in blobs(cache).items() if n not in of_a}
    now = os.stat(cache).st_mtime
    for name in blobs(cache):
        when = now - (3 if name in of_b else 2) * 3600
        os.utime(os.path.join(d, name), (when, when))
    edit_add(proj, 1)
    check(build(ctx, proj, out, *unbounded) == 0, "state A was not served from the cache")
    used = {n: s for n, s in blobs(cache).items() if os.stat(os.path.join(d, n)).st_mtime > now - 60}
    check(used and len(used) < len(of_a), "A's build dated %d of its %d blobs", len(used),
          len(of_a))
    room = sum(used.values()) + sum(of_b.values()) * 3 // 2  # 8/10 of the bound
    edit_add(proj, 3)
    build(ctx, proj, out, "--cache-dir", cache, "--cache-max-size", str(room * 10 // 8))
    left = blobs(cache)
    check(sum(left.values()) <= room * 10 // 8, "the blobs are over the bound")
    check(not any(n in left for n in of_b), "B's blobs, the least recently used, were kept")
    check(all(n in left for n in used), "blobs A used were evicted: %s",
          sorted(n for n in used if n not in left))
    edit_add(proj, 1)
    check(build(ctx, proj, out, *unbounded) == 0, "state A, used last, lost blobs")
    edit_add(proj, 2)
    check(build(ctx, proj, out, *unbounded) > 0, "state B kept its blobs")
    check(header(out) == clean_header(ctx, proj), "the header differs from a clean build's")


def test_cache_stats_and_clean(ctx):
    """`stencilgen cache --stats` counts the blobs and bytes there are; `--clean` removes them
    and the record index (an older stencilgen's too), and the next build compiles everything; bad usage and a bad
    --cache-max-size exit 2 naming what is wrong."""
    proj = ctx.bundled_copy()
    out = os.path.join(ctx.tmp, "out")
    ops = build(ctx, proj, out)
    p = ctx.generator("cache", "--stats", "--outdir", out, check=True)
    there = blobs(os.path.join(out, ".stencilgen"))
    m = re.search(r"^blobs: (\d+), (\d+) bytes$", p.stdout, re.M)
    check(m and (int(m.group(1)), int(m.group(2))) == (len(there), sum(there.values())),
          "--stats says %r; the directory holds %d blobs, %d bytes", p.stdout, len(there),
          sum(there.values()))
    check(re.search(r"^record index: [1-9]\d* bytes$", p.stdout, re.M), "--stats: %s", p.stdout)
    check(build(ctx, proj, out) == 0 and build(ctx, proj, out, "--no-listing") == 0,
          "the warm cache compiled")
    older = os.path.join(out, ".stencilgen", "records2.idx")  # an older stencilgen's index
    with open(older, "w") as f:
        f.write("R 0000000000001234 %032x 0 x/op.o\n" % 0)
    p = ctx.generator("cache", "--clean", "--outdir", out, check=True)
    check("removed %d bytes" % sum(there.values()) in p.stdout, "--clean says %r", p.stdout)
    check(blobs(os.path.join(out, ".stencilgen")) == {} and not os.path.exists(
          os.path.join(out, ".stencilgen", "records3.idx")) and not os.path.exists(older),
          "--clean left blobs, the index or an older stencilgen's index")
    check(build(ctx, proj, out, "--no-hot-cold") == ops, "after --clean not every op compiled")
    for args, needle in ((["--stats"], "exactly one of --cache-dir DIR and --outdir DIR"),
                         (["--stats", "--clean", "--outdir", out], "exactly one of --stats"),
                         (["--stats", "--cache-dir", os.path.join(ctx.tmp, "none")],
                          "is not a stencilgen cache directory")):
        p = ctx.generator("cache", *args)
        check(p.returncode == 2 and needle in p.stderr, "cache %s: exit %d\n%s", args,
              p.returncode, p.stderr)
    for bad in ("12Q", "-1", "", "99999999999G"):
        p = ctx.generator("build", "--manifest", manifest_of(proj), "--outdir", out,
                          "--cache-max-size", bad)
        check(p.returncode == 2 and "--cache-max-size wants bytes" in p.stderr,
              "--cache-max-size %r: exit %d\n%s", bad, p.returncode, p.stderr)
