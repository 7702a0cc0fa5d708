"""Stress, fork-safety, W^X and valgrind tests of stencilrt (registration is
thread-safe and fork-safe, nothing is ever writable and executable at once,
backtraces and C++ exceptions cross JIT frames).

The programs are built from tests/stress/ (see each source file's comment):
  stress_threads  8 threads creating/running/freeing executors of random valid
                  programs (checked against a reference interpreter), 2 threads
                  unwinding through JIT code (_Unwind_Backtrace, backtrace())
                  and throwing C++ exceptions through it; at the end no
                  executor is alive and nothing stays registered.
  fork_stress     fork() 50 times while another thread emits big executors
                  (holding the registry lock for milliseconds at a time); every
                  child must find a consistent GDB list, register, run and free
                  executors (also those created before the fork), destroy the
                  runtime and exit; a child that does not exit in time is a
                  hang (its GDB backtrace is reported). With STENCILRT_PERF on,
                  each process must write its own perf map / jitdump.
  wx_stress       a thread reading /proc/self/maps while executors are written:
                  no mapping is ever w and x; pages are r-x after sr_emit, ---
                  after sr_executor_free.
  code_reuse      executors emitted into chunks freed by earlier ones, every
                  result checked: natively with two views, under qemu-x86_64
                  and valgrind (without --smc-check=all) with the one view
                  sr_runtime_create falls back to when its probe sees stale code.
Each of the first three has a debug switch that breaks what it checks; the *_detects_* tests run
those negative controls and expect the failure to be reported.

With ASAN = True the tests also run against the ASan+UBSan build (the programs
are then built sanitized; LeakSanitizer runs at exit). Valgrind runs only with
the plain build."""
import json
import os
import re
import shutil

from sgtest import TestFailure, check

ASAN = True

SEED = 20240607
STRESS_SECONDS = 5
SAN_ENV = {
    "ASAN_OPTIONS": "detect_leaks=1:halt_on_error=1",
    "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
}
# --smc-check=all: under valgrind, JIT memory's two views are a memfd mapped
# twice (valgrind cannot alias with mremap), and valgrind re-checks code it
# translated from a file-backed mapping only with this option.
VALGRIND = ["valgrind", "--error-exitcode=99", "--leak-check=full",
            "--errors-for-leak-kinds=definite", "--smc-check=all"]


# --- helpers ---------------------------------------------------------------

def sanitized(ctx):
    """True for the ASan build (b_sanitize set), whatever its directory name."""
    try:
        with open(os.path.join(ctx.build, "meson-info", "intro-buildoptions.json")) as f:
            for opt in json.load(f):
                if opt.get("name") == "b_sanitize":
                    return opt.get("value") not in ("none", "", None)
    except (OSError, ValueError):
        pass
    return ctx.build.rstrip("/").endswith("build-asan")


def program(ctx, name):
    path = os.path.join(ctx.build, "tests", "stress", name)
    check(os.path.isfile(path), "%s is not built (ninja -C %s)", path, ctx.build)
    return path


def run(ctx, name, *args, timeout=120, env=None):
    full_env = dict(SAN_ENV)
    full_env.update(env or {})
    return ctx.run([program(ctx, name)] + [str(a) for a in args], timeout=timeout,
                   env=full_env)


def summary(p, prefix):
    """The program's last 'prefix: key=value ...' line, as a dict of numbers."""
    lines = [l for l in p.stdout.splitlines() if l.startswith(prefix + ": ")]
    if not lines:
        raise TestFailure("no '%s:' summary (exit %d)\nstdout:\n%s\nstderr:\n%s" % (
            prefix, p.returncode, p.stdout[-3000:], p.stderr[-5000:]))
    out = {}
    for key, value in re.findall(r"(\w+)=(\S+)", lines[-1]):
        try:
            out[key] = int(value)
        except ValueError:
            try:
                out[key] = float(value)
            except ValueError:
                out[key] = value
    out["_line"] = lines[-1]
    return out


def no_sanitizer_reports(p):
    for marker in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                   "WARNING: ThreadSanitizer"):
        check(marker not in p.stderr, "sanitizer report (%s):\n%s", marker, p.stderr[-6000:])


def expect_ok(p, s):
    check(p.returncode == 0 and s.get("failures") == 0,
          "exit %d, %s\nstderr:\n%s", p.returncode, s["_line"], p.stderr[-6000:])
    no_sanitizer_reports(p)


# --- 1. threads: emit/run/free, unwinding and exceptions through JIT code -----

def test_stress_threads(ctx):
    p = run(ctx, "stress_threads", "--seconds", STRESS_SECONDS, "--seed", SEED,
            "--workers", 8, "--unwinders", 2, timeout=150)
    s = summary(p, "stress")
    print("     " + s["_line"])
    expect_ok(p, s)
    check(s["workers"] == 8 and s["unwinders"] == 2, "thread counts: %s", s["_line"])
    # Every executor was freed, and the runtime agrees.
    check(s["final_executors"] == 0, "executors alive at the end: %s", s["_line"])
    check(s["executors_created"] == s["executors_freed"], "created != freed: %s", s["_line"])
    check(s["emit_errors"] == 0, "sr_emit failed: %s", s["_line"])
    # Enough happened to mean something (ASan runs ~2x slower than these floors need).
    check(s["executors_created"] >= 1000, "too few executors: %s", s["_line"])
    check(s["runs"] >= s["executors_created"], "an executor was never run: %s", s["_line"])
    check(s["results_checked"] == s["runs"], "unchecked runs: %s", s["_line"])
    check(s["reentries"] > 0 and s["lib_replacements"] > 0 and s["private_runtimes"] > 0,
          "re-entry, library churn and private runtimes all exercised: %s", s["_line"])
    # Unwinding through JIT code: both unwinders, one and two JIT levels deep.
    check(s["backtraces_unwind"] >= 1000 and s["backtraces_glibc"] >= 1000,
          "too few backtraces: %s", s["_line"])
    check(s["max_jit_depth"] >= 2, "never unwound through two JIT levels: %s", s["_line"])
    # C++ exceptions through JIT frames, all caught below the shim, cleanups run.
    check(s["throws"] >= 1000, "too few exceptions: %s", s["_line"])
    check(s["caught"] == s["throws"], "thrown %d, caught %d", s["throws"], s["caught"])
    check(s["cleanups_during_unwind"] > 0, "no C++ cleanup ran between JIT frames: %s",
          s["_line"])


def test_stress_detects_broken_unwinding_and_leaks(ctx):
    # Without libgcc registration (STENCILRT_FRAMES=0) the chain stops in JIT code:
    # the backtrace check must say so ...
    p = run(ctx, "stress_threads", "--seconds", 0.5, "--no-throw",
            env={"STENCILRT_FRAMES": "0"}, timeout=120)
    s = summary(p, "stress")
    check(p.returncode == 1 and s["failures"] > 0 and "chain does not reach" in p.stderr,
          "STENCILRT_FRAMES=0 went unnoticed by the backtrace check: exit %d, %s\n%s",
          p.returncode, s["_line"], p.stderr[-3000:])
    # ... and an exception thrown through JIT code finds no handler (terminate).
    p = run(ctx, "stress_threads", "--seconds", 0.3, "--workers", 0, "--unwinders", 1,
            "--no-backtrace", env={"STENCILRT_FRAMES": "0"}, timeout=120)
    check(p.returncode != 0 and "terminate called" in p.stderr,
          "STENCILRT_FRAMES=0: an exception through JIT frames was not fatal: exit %d\n%s",
          p.returncode, p.stderr[-3000:])
    # An executor left alive is reported.
    p = run(ctx, "stress_threads", "--seconds", 0.3, "--debug-leak-executor", timeout=120)
    check(p.returncode == 1 and "1 executors still alive" in p.stderr,
          "a leaked executor went unnoticed: exit %d\n%s", p.returncode, p.stderr[-3000:])
    # Under ASan, LeakSanitizer's report fails the run.
    if sanitized(ctx):
        p = run(ctx, "stress_threads", "--seconds", 0.3, "--debug-leak-malloc", timeout=120)
        check(p.returncode != 0 and "LeakSanitizer: detected memory leaks" in p.stderr,
              "LeakSanitizer did not report a leak: exit %d\n%s", p.returncode,
              p.stderr[-3000:])


# --- 2. fork while another thread registers executors -------------------------

FORKS = 50


def test_fork_while_registering(ctx):
    # --gdb-on-hang: a hung child's backtrace goes into the report. In the ASan build a
    # child stuck inside the sanitizer runtime (GCC 12's libasan has no fork handlers)
    # is reported but excused; a hang anywhere else fails.
    p = run(ctx, "fork_stress", "--forks", FORKS, "--child-timeout", 10, "--seed", 7,
            "--gdb-on-hang", timeout=300)
    s = summary(p, "fork")
    print("     " + s["_line"])
    expect_ok(p, s)
    check(s["bad_exit"] == 0, "children failed: %s\n%s", s["_line"], p.stderr[-6000:])
    if s["hung"]:
        check(sanitized(ctx) and s["hung"] == s["hung_in_sanitizer"],
              "children hung: %s\n%s", s["_line"], p.stderr[-6000:])
        print("     NOTE: %d child(ren) hung inside the sanitizer runtime (not stencilrt):\n%s"
              % (s["hung"], p.stderr[-3000:]))
    else:
        check(s["children_ok"] == FORKS, "children: %s", s["_line"])
    # The forks happened while thread A was in the runtime (most of that under the lock),
    # and A went on emitting in the parent afterwards.
    check(s["a_inside_runtime_at_fork"] >= FORKS // 2,
          "thread A was rarely inside the runtime at fork time: %s", s["_line"])
    check(s["a_emits_during_forks"] >= 1, "thread A made no progress: %s", s["_line"])


def test_fork_detects_fork_unsafe_lock(ctx):
    # Negative control: a lock of the program's own, held around each emission and
    # without atfork handlers, deadlocks the children; the parent must notice.
    p = run(ctx, "fork_stress", "--forks", 4, "--child-timeout", 1, "--debug-own-lock",
            timeout=120)
    s = summary(p, "fork")
    print("     " + s["_line"])
    check(p.returncode == 1 and s["hung"] >= 1 and "hung" in p.stderr,
          "a deadlocked child went unnoticed: exit %d, %s\n%s", p.returncode, s["_line"],
          p.stderr[-3000:])


def _perf_files(ctx, mode, pid):
    if mode == "map":
        return os.path.join("/tmp", "perf-%d.map" % pid)
    return os.path.join(ctx.tmp, "jit-%d.dump" % pid)


def test_fork_perf_files_per_process(ctx):
    """With perf output on, a forked child writes its own file (named by its pid) and
    never appends to the parent's: perf reads the file of the process it samples."""
    for mode in ("map", "jitdump"):
        p = run(ctx, "fork_stress", "--forks", 5, "--big", 2000, "--child-timeout", 10,
                "--print-pids", env={"STENCILRT_PERF": mode, "STENCILRT_PERF_DIR": ctx.tmp},
                timeout=120)
        parent = [int(x) for x in re.findall(r"^parent pid: (\d+)$", p.stdout, re.M)]
        children = [int(x) for x in re.findall(r"^child pid: (\d+)$", p.stdout, re.M)]
        files = [_perf_files(ctx, mode, pid) for pid in parent + children]
        try:
            s = summary(p, "fork")
            expect_ok(p, s)
            check(len(parent) == 1 and len(children) == 5, "pids: %s", p.stdout[-2000:])
            data = {}
            for pid, path in zip(parent + children, files):
                check(os.path.isfile(path), "STENCILRT_PERF=%s: %s was not written", mode, path)
                with open(path, "rb") as f:
                    data[pid] = f.read()
            if mode == "jitdump":
                import struct
                for pid in parent + children:
                    magic, _, _, _, _, hdr_pid = struct.unpack_from("<6I", data[pid], 0)
                    check(magic == 0x4A695444 and hdr_pid == pid,
                          "jit-%d.dump: magic %#x, pid %d in its header", pid, magic, hdr_pid)
            else:
                for pid in parent + children:
                    for line in data[pid].decode().splitlines():
                        check(re.match(r"^[0-9a-f]+ [0-9a-f]+ \S+$", line),
                              "perf-%d.map: bad line %r", pid, line)
            check(b"child" not in data[parent[0]],
                  "STENCILRT_PERF=%s: the parent's file names code emitted by a child", mode)
            for pid in children:
                check(b"child" in data[pid],
                      "STENCILRT_PERF=%s: child %d's file does not name its executors", mode, pid)
            inherited = sum(b"prefork" in data[pid] for pid in children)
            print("     STENCILRT_PERF=%s: parent + %d children wrote their own files; %d of "
                  "them name the executors inherited from the parent" % (mode, len(children),
                                                                         inherited))
        finally:
            for path in files:
                if path.startswith("/tmp/perf-") and os.path.exists(path):
                    os.unlink(path)


# --- 3. W^X -------------------------------------------------------------------

def test_wx_never_writable_and_executable(ctx):
    for views in (2, 1):
        p = run(ctx, "wx_stress", "--seconds", 3, "--seed", 11, timeout=120,
                env={"STENCILRT_CODE_VIEWS": str(views)})
        s = summary(p, "wx")
        print("     " + s["_line"])
        expect_ok(p, s)
        check(s["views"] == views, "STENCILRT_CODE_VIEWS=%d not in effect: %s", views,
              s["_line"])
        check(s["wx_violations"] == 0, "W+X mapping seen: %s", s["_line"])
        check(s["emits"] >= 10 and s["frees"] == s["emits"], "emits/frees: %s", s["_line"])
        check(s["scans"] >= 100, "the scanner hardly ran: %s", s["_line"])
        if views == 2:  # the writable view is elsewhere; freed code is traps
            check(s["pages_checked_rx"] > 0 and s["freed_code_trapped"] == s["frees"],
                  "r-x / trap checks: %s", s["_line"])
            continue
        # The scanner did look inside the write window (pages rw- while written).
        check(s["transient_rw_seen"] >= 1, "the scanner never saw a page being written: %s",
              s["_line"])
        check(s["pages_checked_rx"] > 0 and s["pages_checked_none"] == s["pages_checked_rx"],
              "r-x / --- page checks: %s", s["_line"])
    # jitdump maps its marker file PROT_EXEC (perf must see it): still never W+X.
    p = run(ctx, "wx_stress", "--seconds", 1, "--seed", 12,
            env={"STENCILRT_PERF": "jitdump", "STENCILRT_PERF_DIR": ctx.tmp}, timeout=120)
    s = summary(p, "wx")
    print("     STENCILRT_PERF=jitdump: " + s["_line"])
    expect_ok(p, s)
    check(s["wx_violations"] == 0 and s["emits"] >= 3, "with jitdump: %s", s["_line"])


def test_wx_detects_violations(ctx):
    p = run(ctx, "wx_stress", "--seconds", 1, "--debug-inject-wx", timeout=120)
    s = summary(p, "wx")
    check(p.returncode == 1 and s["wx_violations"] >= 1 and "rwxp" in p.stderr,
          "an injected W+X page went unnoticed: exit %d, %s\n%s", p.returncode, s["_line"],
          p.stderr[-3000:])
    p = run(ctx, "wx_stress", "--seconds", 0.5, "--debug-reprotect", timeout=120)
    s = summary(p, "wx")
    check(p.returncode == 1 and re.search(r"expected r-x[ps], found", p.stderr),
          "a read-only executor page went unnoticed: exit %d, %s\n%s", p.returncode,
          s["_line"], p.stderr[-3000:])


def test_lookup_pc_from_a_signal_handler(ctx):
    """sr_lookup_pc from a SIGPROF handler (tests/stress/lookup_stress.c):
    every sample in the running executor's code names that executor and the
    instruction whose code holds the PC, no sample elsewhere is claimed, while
    other threads emit and free executors and new arenas come; the control
    expects the next instruction and must be caught."""
    p = run(ctx, "lookup_stress", "--seconds", 3, timeout=120)
    s = summary(p, "lookup")
    print("     " + s["_line"])
    check(p.returncode == 0 and "lookup_stress: PASS" in p.stdout and s["wrong"] == 0,
          "sr_lookup_pc answered wrongly: exit %d\n%s%s", p.returncode, p.stdout, p.stderr)
    check(s["in_jit"] >= 50 and s["found"] == s["in_jit"] and s["outside"] > 0,
          "too few samples in JIT code, or not all found: %s", s["_line"])
    p = run(ctx, "lookup_stress", "--seconds", 1, "--debug-off-by-one", timeout=120)
    s = summary(p, "lookup")
    check(p.returncode == 1 and s["wrong"] > 0 and "the wrong instruction" in p.stdout,
          "the control's wrong expectation went unnoticed: exit %d\n%s", p.returncode,
          p.stdout)


# --- 5. code emitted into freed memory: the probe of two code views ---------

# sr_runtime_create's one line when code rewritten through JIT memory's
# writable view does not run (runtime/config.c, config_views_stale); %s: the
# variable, when it asked for two views.
STALE_WARNING = ("stencilrt: warning: %stwo code views do not work here: code rewritten "
                 "through the writable view still ran as before (an emulator such as qemu-user, "
                 "valgrind or FEX keeps its old translation); using one code view "
                 "(STENCILRT_CODE_VIEWS=1 skips this check)\n")
STALE_REFUSAL = ("code_reuse: sr_runtime_create: sr_config: code_views 2: two code views do "
                 "not work here")


def check_reuse(p, views, reason, stderr, what):
    """code_reuse (tests/stress/code_reuse.c) ran every executor right, many of
    them in freed executors' chunks, with `views` code views for `reason`,
    and wrote exactly `stderr`."""
    s = summary(p, "reuse")
    print("     %s: %s" % (what, s["_line"]))
    check(p.returncode == 0 and s["wrong"] == 0, "%s: wrong results (the old code ran): exit "
          "%d, %s\n%s", what, p.returncode, s["_line"], p.stdout[-2000:])
    check(s["runs"] >= 1500 and s["reused"] >= 500, "%s: too little reuse: %s", what, s["_line"])
    check((s["views"], s["reason"]) == (views, reason), "%s: %s, want views=%d reason=%s", what,
          s["_line"], views, reason)
    check(p.stderr == stderr, "%s: stderr %r, want %r", what, p.stderr, stderr)


def test_code_reuse_keeps_two_views_natively(ctx):
    """Natively the probe passes: two views, no warning, reused code right."""
    p = run(ctx, "code_reuse", env={"STENCILRT_CODE_VIEWS": ""})
    check_reuse(p, 2, "configured", "", "native")


def test_code_reuse_under_qemu_x86_64(ctx):
    """qemu-user keeps its translation of code rewritten through the other
    view (before the probe: about 1,440 of 1,528 runs wrong). The probe sees
    it: one view, one warning, every run right; sr_config code_views 2 is
    refused, STENCILRT_CODE_VIEWS=2 warns saying so, =1 skips the probe."""
    if sanitized(ctx):
        print("     skipped: sanitized programs do not run under qemu-user")
        return
    qemu = shutil.which("qemu-x86_64")
    check(qemu, "qemu-x86_64 is not installed (Debian: qemu-user)")
    cmd = [qemu, program(ctx, "code_reuse")]
    for value, views, reason, stderr in (
            ("", 1, "stale-code", STALE_WARNING % ""),
            ("2", 1, "stale-code", STALE_WARNING % "STENCILRT_CODE_VIEWS=2: "),
            ("1", 1, "configured", "")):
        p = ctx.run(cmd, timeout=120, env={"STENCILRT_CODE_VIEWS": value})
        check_reuse(p, views, reason, stderr, "qemu-x86_64, STENCILRT_CODE_VIEWS=%r" % value)
    p = ctx.run(cmd + ["--config-views", "2"], timeout=120, env={"STENCILRT_CODE_VIEWS": ""})
    check(p.returncode == 3 and p.stderr.startswith(STALE_REFUSAL) and "use code_views 1" in
          p.stderr, "sr_config code_views 2 under qemu: exit %d, stderr %r", p.returncode,
          p.stderr)


# --- 4. valgrind (plain build only) -----------------------------------------------

DEMO_PROGRAMS = ["fib.tvm", "reenter.tvm", "loop.tvm"]


def valgrind_or_skip(ctx):
    if sanitized(ctx):
        print("     skipped: valgrind does not run sanitized programs")
        return None
    vg = shutil.which("valgrind") or "/usr/bin/valgrind"
    check(os.path.exists(vg), "valgrind is not installed")
    return [vg] + VALGRIND[1:]


def test_valgrind_demo(ctx):
    vg = valgrind_or_skip(ctx)
    if not vg:
        return
    tinyvm = os.path.join(ctx.build, "stencils", "tinyvm")
    for prog in DEMO_PROGRAMS:
        path = ctx.path("stencils", "programs", prog)
        want = ctx.run([tinyvm, "--interp", path], timeout=60, check=True).stdout.split()
        p = ctx.run(vg + [tinyvm, "--jit", path], timeout=120)
        check(p.returncode == 0 and "ERROR SUMMARY: 0 errors" in p.stderr,
              "valgrind tinyvm --jit %s: exit %d\n%s", prog, p.returncode, p.stderr[-6000:])
        check(p.stdout.split() == want, "valgrind tinyvm --jit %s printed %r, the "
              "interpreter %r", prog, p.stdout.split(), want)
    # The threaded stress program too: executors freed and their pages reused under
    # valgrind's translation cache, exceptions and backtraces through JIT code.
    p = ctx.run(vg + [program(ctx, "stress_threads"), "--seconds", "2", "--workers", "2",
                      "--unwinders", "1", "--seed", str(SEED)], timeout=150)
    s = summary(p, "stress")
    print("     valgrind: " + s["_line"])
    check(p.returncode == 0 and s["failures"] == 0 and "ERROR SUMMARY: 0 errors" in p.stderr,
          "valgrind stress_threads: exit %d, %s\n%s", p.returncode, s["_line"],
          p.stderr[-6000:])
    check(s["throws"] > 0 and s["caught"] == s["throws"] and s["backtraces_unwind"] > 0,
          "valgrind stress_threads did little: %s", s["_line"])


def test_valgrind_code_reuse(ctx):
    """valgrind re-checks code it translated from a file-backed mapping (the
    memfd of two views under valgrind) only with --smc-check=all: without it
    the probe falls back to one view, with it two views stay; every run right."""
    vg = valgrind_or_skip(ctx)
    if not vg:
        return
    plain = [a for a in vg if not a.startswith("--smc-check")]
    for opts, views, reason, stderr in ((["-q"], 1, "stale-code", STALE_WARNING % ""),
                                        (["-q", "--smc-check=all"], 2, "configured", "")):
        p = ctx.run(plain + opts + [program(ctx, "code_reuse")], timeout=150,
                    env={"STENCILRT_CODE_VIEWS": ""})
        check_reuse(p, views, reason, stderr, "valgrind " + " ".join(opts))


def test_valgrind_detects_errors(ctx):
    vg = valgrind_or_skip(ctx)
    if not vg:
        return
    p = ctx.run(vg + [program(ctx, "stress_threads"), "--seconds", "0.2", "--workers", "1",
                      "--unwinders", "0", "--debug-leak-malloc"], timeout=150)
    check(p.returncode == 99 and "definitely lost" in p.stderr,
          "valgrind did not fail on a definite leak: exit %d\n%s", p.returncode,
          p.stderr[-3000:])
