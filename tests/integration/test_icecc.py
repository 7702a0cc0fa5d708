"""`--launcher icecc` against a real icecream farm this test starts
(docs/build.md, "icecream"): in a network namespace it creates (`unshare -n`:
iceccd cannot bind loopback only), a scheduler, the client's daemon (which
takes no job itself) and a compile daemon, each in its own /run (a private
mount namespace). The bundled stencils for x86-64 and AArch64 compile on the
compile daemon (its log names every remote compile) into headers
byte-identical to a local build. Negative control: icecc compiles locally,
silently, when it cannot place a job (no compile daemon): the build succeeds
with the same headers, and the log check catches it. The compiler
environment (icecc-create-env, about 93 MB) is made once, in the test's
temporary directory. Needs root (chroot for remote jobs, namespaces)."""
import os
import re
import shutil
import time

from sgtest import TRIPLE, Skip, check, read, write

ASAN = False

AARCH64 = "aarch64-unknown-linux-gnu"
TRIPLES = [TRIPLE, AARCH64]
DAEMON_SECONDS = 600  # every daemon is started under `timeout`: none outlives a killed test

# Runs as root in a new network and mount namespace: lo up, /run private, the
# scheduler, the client's daemon (-m 0 --no-remote: it places every job
# elsewhere) and, unless $NO_COMPILE_DAEMON, a compile daemon with its own
# /run; waits until the daemons logged in; runs the build; stops its daemons
# by pid.
FARM = r"""
set -u
ip link set lo up
# The scheduler tells daemons apart by address: two of lo's, each the source
# of the connections made to it.
ip addr add 10.77.0.1/32 dev lo
ip addr add 10.77.0.2/32 dev lo
mount -t tmpfs none /run
timeout %(t)d icecc-scheduler -l "$W/scheduler.log" -p "$PORT" -n sgtest -vv &
S=$!
timeout %(t)d iceccd -l "$W/client.log" -s "10.77.0.1:$PORT" -n sgtest -N client \
    --no-remote -m 0 -b "$W/envA" -p $((PORT + 1)) -vv &
A=$!
B=
daemons=client
if [ -z "${NO_COMPILE_DAEMON:-}" ]; then
    unshare -m sh -c "mount -t tmpfs none /run && exec timeout %(t)d iceccd \
        -l '$W/remote.log' -s 10.77.0.2:$PORT -n sgtest -N remote -b '$W/envB' \
        -p $((PORT + 2)) -vv -m 2" &
    B=$!
    daemons="client remote"
fi
ok=1
for d in $daemons; do
    for i in $(seq 300); do
        grep -q "Connected to scheduler" "$W/$d.log" 2>/dev/null && break
        sleep 0.1
    done
    grep -q "Connected to scheduler" "$W/$d.log" 2>/dev/null ||
        { echo "daemon $d never connected to the scheduler"; ok=0; }
done
rc=99
if [ $ok = 1 ]; then
    ICECC_VERSION="$ICECC_ENV" timeout 500 "$@"
    rc=$?
fi
kill $S $A $B 2>/dev/null
wait
exit $rc
"""


def can_run_a_farm(ctx):
    if os.geteuid() != 0:
        raise Skip("icecc's remote jobs need root (iceccd chroots them), and this runs as uid %d"
                   % os.geteuid())
    p = ctx.run(["unshare", "-n", "-m", "true"], timeout=30)
    if p.returncode != 0:
        raise Skip("cannot create network and mount namespaces (unshare -n -m: %s)"
                   % p.stderr.strip())


def compiler_environment(ctx):
    """icecc-create-env's tarball of clang-22, made in the test's temporary directory."""
    d = os.path.join(ctx.tmp, "icecc-env")
    os.makedirs(d)
    t0 = time.monotonic()
    ctx.run(["icecc-create-env", "--clang", "/usr/bin/clang-22",
             "/usr/lib/icecc/compilerwrapper"], cwd=d, check=True, timeout=600)
    tars = [f for f in os.listdir(d) if f.endswith(".tar.gz")]
    check(len(tars) == 1, "icecc-create-env made %s", tars)
    path = os.path.join(d, tars[0])
    print("     icecc-create-env: %.1f s, %.0f MB" % (time.monotonic() - t0,
                                                    os.path.getsize(path) / 1e6))
    return path


def farm_build(ctx, env_tarball, name, compile_daemon=True):
    """The bundled stencils built through icecc in a farm of this test's own:
    (headers, the compiler runs, the remote compiles the compile daemon logged)."""
    w = os.path.join(ctx.tmp, name)
    os.makedirs(w)
    os.chmod(ctx.tmp, 0o755)
    os.chmod(w, 0o777)  # the daemons run as user icecc and log here
    script = os.path.join(w, "farm.sh")
    write(script, FARM % {"t": DAEMON_SECONDS})
    out = os.path.join(w, "out")
    env = {"W": w, "PORT": str(20000 + os.getpid() % 20000), "ICECC_ENV": env_tarball}
    if not compile_daemon:
        env["NO_COMPILE_DAEMON"] = "1"
    cmd = ["unshare", "-n", "-m", "--propagation", "private", "sh", script, ctx.stencilgen,
           "build", "--manifest", ctx.path("stencils", "stencils.yaml"), "--outdir", out,
           "--launcher", "icecc", "-v"] + [a for t in TRIPLES for a in ("--target", t)]
    p = ctx.run(cmd, env=env, timeout=600)
    check(p.returncode == 0, "the icecc build exited %d:\n%s\n%s", p.returncode,
          p.stdout[-2000:], p.stderr[-3000:])
    runs = int(re.search(r"(\d+) compiler runs", p.stderr).group(1))
    log = os.path.join(w, "remote.log")
    remote = len(re.findall(r"Remote compilation completed with exit code 0",
                            read(log) if os.path.exists(log) else ""))
    return ({t: read(os.path.join(out, "jit_stencils-%s.h" % t)) for t in TRIPLES}, runs,
            remote)


def local_headers(ctx):
    out = os.path.join(ctx.tmp, "local")
    ctx.build_stencils(ctx.path("stencils", "stencils.yaml"), out,
                       *[a for t in TRIPLES for a in ("--target", t)])
    return {t: read(os.path.join(out, "jit_stencils-%s.h" % t)) for t in TRIPLES}


def test_icecc_remote_compiles_equal_local(ctx):
    can_run_a_farm(ctx)
    tarball = compiler_environment(ctx)
    local = local_headers(ctx)
    headers, runs, remote = farm_build(ctx, tarball, "farm")
    for t in TRIPLES:
        check(headers[t] == local[t], "%s: the icecc build's header differs from a local one", t)
    check(remote == runs, "the compile daemon's log shows %d remote compiles; the generator "
          "started %d", remote, runs)

    # Negative control: no compile daemon; icecc compiles locally and says nothing.
    headers, runs, remote = farm_build(ctx, tarball, "alone", compile_daemon=False)
    check(headers == local, "the local fallback's headers differ")
    check(remote != runs, "the log check passed a build that ran nothing remotely")
    shutil.rmtree(os.path.dirname(tarball), ignore_errors=True)
