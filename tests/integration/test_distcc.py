"""`--launcher distcc` against real distccd daemons this test starts on
127.0.0.1 (docs/build.md, "distcc"): the bundled stencils for x86-64 and
AArch64, and the 300-op corpus, compiled remotely (each daemon's log names
every compile it ran) into headers byte-identical to a local build; distcc
3.4's rewrite of a bare `clang-22` command to `-target x86_64-pc-linux-gnu`
caught by the generator's object-machine check; a host that is down or refuses
named in the error. Negative control: a build whose compiles all fell back to
local ones passes every other check and is caught by the log check."""
import os
import re
import socket
import subprocess
import sys

from engines import stop, vm_project, wait_for
from sgtest import TRIPLE, check, read

ASAN = False  # the daemons compile: the sanitized generator adds nothing here

AARCH64 = "aarch64-unknown-linux-gnu"
BUNDLED = ("stencils", "stencils.yaml")


def free_port():
    """A loopback port no one listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port):
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


class Daemons:
    """distccd daemons on 127.0.0.1, each with its own log; started in the
    foreground (--no-detach), so each one's pid is known from the start, and
    stopped by it."""

    def __init__(self, ctx, count, allow="127.0.0.1"):
        self.ctx, self.procs, self.logs, self.ports = ctx, [], [], []
        d = os.path.join(ctx.tmp, "distccd")
        os.makedirs(d, exist_ok=True)
        # As root the daemon runs as `nobody`, and writes its log here.
        os.chmod(ctx.tmp, 0o755)
        os.chmod(d, 0o777)
        try:
            for k in range(count):
                port = free_port()
                log = os.path.join(d, "%d.log" % port)
                self.procs.append(subprocess.Popen(
                    ["distccd", "--daemon", "--no-detach", "--allow", allow, "--listen",
                     "127.0.0.1", "--port", str(port), "--jobs", "1", "--log-file", log,
                     "--enable-tcp-insecure", "--log-level", "info"],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL))
                self.logs.append(log)
                self.ports.append(port)
                wait_for("distccd on 127.0.0.1:%d" % port, lambda: listening(port))
        except BaseException:
            self.stop()
            raise

    def hosts(self):
        return " ".join("127.0.0.1:%d/1" % p for p in self.ports)

    def compiles(self):
        """Compiles each daemon ran and finished with success (its log's job summaries)."""
        return [len(re.findall(r"COMPILE_OK exit:0", read(log) if os.path.exists(log) else ""))
                for log in self.logs]

    def stop(self):
        for p in self.procs:
            stop(p.pid)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self.procs = []


def distcc_env(ctx, hosts, fallback=False):
    d = os.path.join(ctx.tmp, "distcc-client-%d" % len(os.listdir(ctx.tmp)))
    os.makedirs(d)
    env = {"DISTCC_HOSTS": hosts, "DISTCC_DIR": d}
    if not fallback:
        env["DISTCC_FALLBACK"] = "0"
    return env


def compiler_runs(stderr):
    m = re.search(r"(\d+) compiler runs", stderr)
    check(m, "no 'compiler runs' in stencilgen -v:\n%s", stderr[-2000:])
    return int(m.group(1))


def remote_problems(daemons, before, runs):
    """The log check: every compile the generator started ran on a daemon."""
    after = daemons.compiles()
    ran = [a - b for a, b in zip(after, before)]
    if sum(ran) != runs:
        return ["the daemons' logs show %d compiles (%s per daemon), the generator started %d"
                % (sum(ran), ran, runs)]
    return []


def headers(out, triples):
    return {t: read(os.path.join(out, "jit_stencils-%s.h" % t)) for t in triples}


def build_both_ways(ctx, daemons, manifest, triples, name, jobs="4"):
    """A local build and a distcc build: (local headers, distcc headers, runs, problems)."""
    targets = [a for t in triples for a in ("--target", t)]
    local = os.path.join(ctx.tmp, name + "-local")
    ctx.build_stencils(manifest, local, *targets)
    out = os.path.join(ctx.tmp, name + "-distcc")
    before = daemons.compiles()
    p = ctx.build_stencils(manifest, out, *targets, "-j", jobs, "--launcher", "distcc", "-v",
                           env=distcc_env(ctx, daemons.hosts()))
    runs = compiler_runs(p.stderr)
    return headers(local, triples), headers(out, triples), runs, remote_problems(daemons, before,
                                                                                 runs)


def test_distcc_bundled_x86_64_and_aarch64(ctx):
    daemons = Daemons(ctx, 2)
    try:
        local, remote, runs, problems = build_both_ways(ctx, daemons, ctx.path(*BUNDLED),
                                                        [TRIPLE, AARCH64], "bundled")
        check(not problems, "\n".join(problems))
        check(all(daemons.compiles()), "a daemon ran nothing: %s", daemons.compiles())
        for t in local:
            check(local[t] == remote[t], "%s: the distcc build's header differs from a local "
                  "build's", t)
    finally:
        daemons.stop()


def test_distcc_corpus(ctx):
    corpus = os.path.join(ctx.tmp, "corpus")
    ctx.run([sys.executable, ctx.path("tests", "bench", "make_corpus.py"), corpus], check=True)
    daemons = Daemons(ctx, 2)
    try:
        local, remote, runs, problems = build_both_ways(
            ctx, daemons, os.path.join(corpus, "corpus.yaml"), [TRIPLE], "corpus")
        check(not problems, "\n".join(problems))
        check(runs >= 30, "the corpus compiled in %d runs", runs)
        check(local == remote, "the corpus's distcc header differs from a local build's")
    finally:
        daemons.stop()


def test_distcc_target_rewrite_is_caught(ctx):
    """distcc 3.4 appends `-target x86_64-pc-linux-gnu` to a command whose
    compiler is a bare `clang-22` (as through a masquerade link), which beats
    --target=aarch64-...: the x86-64 object must be refused, not used. (A
    VM whose flags x86-64 rejects, such as the bundled stencils' AArch64
    -mbranch-protection, fails to compile instead: exit 3.)"""
    manifest = os.path.join(vm_project(ctx, "vm", triples=(AARCH64,)), "stencils.yaml")
    masq = os.path.join(ctx.tmp, "masquerade")
    os.makedirs(masq)
    os.symlink("/usr/bin/distcc", os.path.join(masq, "clang-22"))
    daemons = Daemons(ctx, 1)
    try:
        env = distcc_env(ctx, daemons.hosts())
        env["PATH"] = masq + os.pathsep + os.environ["PATH"]
        p = ctx.build_stencils(manifest, os.path.join(ctx.tmp, "out"), "--clang",
                               os.path.join(masq, "clang-22"), check=False,
                               env=env)
        check(sum(daemons.compiles()) > 0, "the masquerade build ran nothing remotely:\n%s",
              p.stderr[-2000:])
        check(p.returncode == 1, "an x86-64 object for %s: exit %d, not 1:\n%s", AARCH64,
              p.returncode, p.stderr[-3000:])
        check(re.search(r"error: op \w+ \(%s\): the object is ELF64 x86-64 .*, expected ELF64 "
                        r"AArch64" % AARCH64, p.stderr),
              "the error does not say which machine the object is for and which target:\n%s",
              p.stderr[-3000:])
    finally:
        daemons.stop()


def test_distcc_host_down_or_refusing_is_named(ctx):
    out = os.path.join(ctx.tmp, "out")
    port = free_port()  # nothing listens there
    p = ctx.build_stencils(ctx.path(*BUNDLED), out, "--target", TRIPLE, "--launcher", "distcc",
                           env=distcc_env(ctx, "127.0.0.1:%d" % port), check=False, timeout=120)
    check(p.returncode == 3, "a host that is down: exit %d, not 3:\n%s", p.returncode,
          p.stderr[-2000:])
    check("127.0.0.1:%d" % port in p.stderr, "the error does not name the host:\n%s",
          p.stderr[-2000:])
    check(not os.path.exists(os.path.join(out, "jit_stencils.h")), "a failed build wrote headers")
    daemons = Daemons(ctx, 1, allow="10.255.255.0/24")  # refuses 127.0.0.1
    try:
        p = ctx.build_stencils(ctx.path(*BUNDLED), out, "--target", TRIPLE, "--launcher",
                               "distcc", env=distcc_env(ctx, daemons.hosts()), check=False,
                               timeout=120)
        check(p.returncode == 3, "a host that refuses: exit %d, not 3:\n%s", p.returncode,
              p.stderr[-2000:])
        # distcc names a host it cannot connect to, not one that hangs up: the
        # generator's note does.
        check("failed to distribute" in p.stderr, "distcc's error is not shown:\n%s",
              p.stderr[-2000:])
        check(re.search(r"note: .*distcc could not compile it on its hosts \(DISTCC_HOSTS="
                        r"127\.0\.0\.1:%d/1; its exit 1\d\d" % daemons.ports[0], p.stderr),
              "no note names the refusing host:\n%s", p.stderr[-2000:])
    finally:
        daemons.stop()


def test_distcc_fallback_is_caught_by_the_log_check(ctx):
    """Negative control: with distcc's default fallback and a host that is
    down, every compile runs locally and the build succeeds with the right
    headers; the log check is what says nothing ran remotely (and distcc's
    warning is shown under each compile)."""
    daemons = Daemons(ctx, 1)
    try:
        manifest = ctx.path(*BUNDLED)
        out = os.path.join(ctx.tmp, "out")
        before = daemons.compiles()
        down = "127.0.0.1:%d" % free_port()
        p = ctx.build_stencils(manifest, out, "--target", TRIPLE, "--launcher", "distcc", "-v",
                               env=distcc_env(ctx, down, fallback=True))
        check("running locally instead" in p.stderr,
              "distcc's fallback warning is not shown:\n%s", p.stderr[-2000:])
        local = os.path.join(ctx.tmp, "local")
        ctx.build_stencils(manifest, local, "--target", TRIPLE)
        check(headers(out, [TRIPLE]) == headers(local, [TRIPLE]), "the fallback's header differs")
        problems = remote_problems(daemons, before, compiler_runs(p.stderr))
        check(problems, "the log check passed a build that ran nothing remotely")
    finally:
        daemons.stop()


def one_file_corpus(ctx, ops):
    """The benchmark corpus's `ops` ops as one file (as in a CPython-style
    interpreter): its manifest."""
    corpus = os.path.join(ctx.tmp, "one")
    ctx.run([sys.executable, ctx.path("tests", "bench", "make_corpus.py"), corpus, "--ops",
             str(ops)], check=True)
    d = os.path.join(corpus, "ops")
    files = sorted(f for f in os.listdir(d) if f.endswith(".c"))
    text = "".join(read(os.path.join(d, f)) for f in files)
    for f in files:
        os.remove(os.path.join(d, f))
    with open(os.path.join(d, "all.c"), "w") as f:
        f.write(text)
    manifest = os.path.join(corpus, "corpus.yaml")
    m = re.sub(r"^ops:.*?(?=^\w)", "ops: [ops/all.c]\n", read(manifest), flags=re.M | re.S)
    with open(manifest, "w") as f:
        f.write(m)
    return manifest


def test_distcc_wide_farm_batches_fill_every_slot(ctx):
    """-j 32 (or more, beyond this machine's CPUs): 300 ops in one file are cut
    into at least one batch a job (16-op batches, the local floor, made 19),
    all compiled remotely."""
    jobs = max(32, os.cpu_count() + 1)
    manifest = one_file_corpus(ctx, 300)
    daemons = Daemons(ctx, 4)
    try:
        before = daemons.compiles()
        p = ctx.build_stencils(manifest, os.path.join(ctx.tmp, "out"), "-j", str(jobs),
                               "--launcher", "distcc", "-v", env=distcc_env(ctx, daemons.hosts()),
                               timeout=600)
        runs = compiler_runs(p.stderr)
        check(runs >= jobs + 1, "-j %d: %d compiler runs (the shim and %d batches), not one "
              "batch a job at least", jobs, runs, runs - 1)
        problems = remote_problems(daemons, before, runs)
        check(not problems, "\n".join(problems))
    finally:
        daemons.stop()
