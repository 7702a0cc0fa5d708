"""ccache and sccache as `--launcher` (docs/build.md, "ccache and sccache"): a
second clean build (empty output directory, so an empty stencil cache) is
served by the launcher's own cache, counted from its statistics, and its
headers are byte-identical to the first build's and to a local build's. Each
uses a private cache directory in the test's temporary directory; the sccache
server is this test's own (a private port), stopped by pid."""
import json
import os
import re
import shutil
import socket
import subprocess

from engines import stop, wait_for
from sgtest import BUNDLED_TRIPLES, check, read

ASAN = False


def compiler_runs(stderr):
    m = re.search(r"(\d+) compiler runs", stderr)
    check(m, "no 'compiler runs' in stencilgen -v:\n%s", stderr[-2000:])
    return int(m.group(1))


def two_clean_builds(ctx, launcher, env, between=None):
    """The bundled stencils built twice through `launcher`, the output
    directory removed in between (between() runs then): (the second build's
    compiler runs, its headers, the first's)."""
    out = os.path.join(ctx.tmp, "out")
    manifest = ctx.path("stencils", "stencils.yaml")
    ctx.build_stencils(manifest, out, "--launcher", launcher, env=env)
    first = {t: read(os.path.join(out, "jit_stencils-%s.h" % t)) for t in BUNDLED_TRIPLES}
    shutil.rmtree(out)
    if between:
        between()
    p = ctx.build_stencils(manifest, out, "--launcher", launcher, "-v", env=env)
    second = {t: read(os.path.join(out, "jit_stencils-%s.h" % t)) for t in BUNDLED_TRIPLES}
    local = os.path.join(ctx.tmp, "local")
    ctx.build_stencils(manifest, local)
    for t in BUNDLED_TRIPLES:
        check(second[t] == first[t], "%s: the second %s build's header differs from the first's",
              t, launcher)
        check(second[t] == read(os.path.join(local, "jit_stencils-%s.h" % t)),
              "%s: the %s build's header differs from a build without a launcher", t, launcher)
    check(re.search(r"\b0 cached\b", p.stdout) and not re.search(r"\b[1-9]\d* cached", p.stdout),
          "the second build was served by stencilgen's own cache, not the launcher's:\n%s",
          p.stdout)
    return compiler_runs(p.stderr)


def ccache_stats(ctx, env):
    out = ctx.run(["ccache", "--print-stats"], env=env, check=True).stdout
    return {k: int(v) for k, v in re.findall(r"^(\w+)\t(\d+)$", out, re.M)}


def test_ccache_serves_a_second_clean_build(ctx):
    env = {"CCACHE_DIR": os.path.join(ctx.tmp, "ccache")}
    runs = two_clean_builds(ctx, "ccache", env,
                            between=lambda: ctx.run(["ccache", "--zero-stats"], env=env,
                                                    check=True))
    s = ccache_stats(ctx, env)
    hits = s.get("direct_cache_hit", 0) + s.get("preprocessed_cache_hit", 0)
    check(runs > 0 and hits == runs and s.get("cache_miss", 0) == 0,
          "ccache served %d of the second build's %d compiles (%d misses)", hits, runs,
          s.get("cache_miss", 0))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_sccache_serves_the_cacheable_compiles(ctx):
    """sccache 0.4 caches no compile with -Xclang (the ops' -mframe-pointer=
    reserved): the second clean build is served for the shims, one compile a
    target, and the ops are counted as not cacheable for that reason."""
    env = dict(os.environ, SCCACHE_DIR=os.path.join(ctx.tmp, "sccache"),
               SCCACHE_SERVER_PORT=str(free_port()), SCCACHE_IDLE_TIMEOUT="0")
    server = subprocess.Popen(["sccache"], env=dict(env, SCCACHE_START_SERVER="1",
                                                    SCCACHE_NO_DAEMON="1"),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def stats():
            p = ctx.run(["sccache", "--show-stats", "--stats-format", "json"], env=env,
                        timeout=30)
            return json.loads(p.stdout)["stats"] if p.returncode == 0 else None
        wait_for("the sccache server", lambda: stats() is not None, 20)
        runs = two_clean_builds(ctx, "sccache", env,
                                between=lambda: ctx.run(["sccache", "--zero-stats"], env=env,
                                                        check=True, timeout=30))
        s = stats()
        hits = sum(s["cache_hits"]["counts"].values())
        misses = sum(s["cache_misses"]["counts"].values())
        refused = s["not_cached"]
        check(hits == len(BUNDLED_TRIPLES) and misses == 0,
              "sccache served %d compiles, missed %d; expected one shim a target (%d)", hits,
              misses, len(BUNDLED_TRIPLES))
        check(list(refused) == ["Can't handle UnknownFlag arguments with -Xclang"] and
              refused[list(refused)[0]] == runs - hits,
              "sccache's uncached compiles are not the ops' -Xclang ones: %s (%d runs)",
              refused, runs)
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            stop(server.pid)
            server.wait(timeout=10)
