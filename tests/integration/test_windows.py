"""Windows x64 target, runtime side: stencilrt and tinyvm cross-compiled for
x86_64-w64-windows-gnu (clang-22, lld, MinGW-w64) and run under Wine (wine64).

* tinyvm: every bundled program gives the same output and exit status
  interpreted and JIT-compiled (trap.tvm: the same end, the breakpoint
  exception's code, printed by tinyvm's top-level filter and its exit status);
  a hot loop, and its blocks linked by patching after emit (--chain); the
  switches Windows does not have (GDB, perf, the registry, a second code view)
  say so once and change nothing; sealed JIT code is execute+read (W^X);
* the system's unwinder at every JIT instruction (tests/windows/win_unwind.c
  step): the trap flag single-steps tinyvm's main from a vectored exception
  handler, and at every PC in an executor or the shim the stack is walked with
  RtlLookupFunctionEntry + RtlVirtualUnwind to main, through the right frames
  (each JIT frame's caller is vm_run, one JIT frame per tinyvm call active,
  the stack pointer growing at every step); every VM instruction must run; the
  PCs checked are reported per program (tests/windows/step.tvm, which runs
  every op, and two bundled programs);
* cold code (tests/windows/cold.tvm: div by zero, whose trap path is div's
  cold part, placed after every hot part of the executor) single-stepped and
  walked the same way at each of its PCs (win_unwind cold), and a C++
  exception thrown from it caught in main (win_throw);
* RtlCaptureStackBackTrace from a helper called by JIT code, three tinyvm
  calls deep, sees the three JIT frames and reaches main; the same in four
  threads at once while they emit and free executors;
* an SEH exception (RaiseException in a helper) crosses JIT frames to __except
  in main, whose filter walks from the raise to main by the rules of the
  single-step test; a C++ exception (MinGW-w64's libstdc++, statically linked)
  thrown in a helper crosses them to catch in main, destructors run;
* negative controls, judged by the same checks, which must fail: unwind
  registration off (STENCILRT_FRAMES=0), and the executors' UNWIND_INFO with a
  wrong FrameOffset (WIN_TEST_MUTATE=frame-offset, applied by the test program
  to the set it hands the runtime);
* the runtime's own checks: each platform refuses the other's stencil set
  (wrong_target.c), Linux-only sr_config requests and a set whose veneer could
  be entered by a jump are refused (win_config.c), memory failures name the
  Windows call and its error (win_jitmem.c), no function table outlives its
  code (win_unwind dereg), at every veneer PC [rsp] is its call's return
  address, and a C++ frame between JIT frames runs its destructor with main's
  nonvolatile registers intact (win_throw.cpp, nested.tvm).

The cross build is <build>-windows next to the native build (or
$STENCILGEN_WINDOWS_BUILD), configured with `meson setup build-windows
--cross-file cross/x86_64-w64-mingw32.ini`. Without that build these tests are
not collected (a note on stderr says why); with it, a missing wine64 (on PATH
or in /usr/lib/wine) or cross toolchain fails them. Wine gets a prefix inside
the cross build (never the user's ~/.wine), every run is bounded by a timeout,
and the wineserver of that prefix is stopped after each test."""
import os
import re
import shutil
import subprocess
import sys

from sgtest import TestFailure, check, read


def _find(name):
    """A Wine program on PATH, else where Debian's wine64 package puts it."""
    path = shutil.which(name)
    if path:
        return path
    path = "/usr/lib/wine/" + name
    return path if os.path.exists(path) else None


WINE = _find("wine64")
WINESERVER = _find("wineserver")
CLANG = "clang-22"
MINGW_INCLUDE = "/usr/share/mingw-w64/include"
T = 300

# Bundled programs that end in an exception nothing handles: tinyvm's
# top-level filter (stencils/main.c) prints its code and exits with it, so
# how each run ends is compared by that line and the exit status.
EXIT_ONLY_PROGRAMS = {"trap.tvm": "tinyvm: unhandled exception 0x80000003 at "}

MISSING = [n for n, t in (("wine64", WINE), ("wineserver", WINESERVER)) if not t]
MISSING += [t for t in (CLANG, "ld.lld-22") if not shutil.which(t)]
if not os.path.isdir(MINGW_INCLUDE):
    MISSING.append(MINGW_INCLUDE + " (mingw-w64-x86-64-dev)")


def _native_build_from_argv():
    """run.py's --build, to find the cross build next to it at collection."""
    argv = sys.argv
    for i, a in enumerate(argv):
        if a == "--build" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--build="):
            return a.split("=", 1)[1]
    return None


def windows_build_dir(native_build):
    d = os.environ.get("STENCILGEN_WINDOWS_BUILD") or native_build + "-windows"
    return os.path.abspath(d)


_checked = {}


def cross_build(ctx):
    """The Windows cross build, brought up to date (once per run)."""
    d = windows_build_dir(ctx.build)
    if d not in _checked:
        check(os.path.exists(os.path.join(d, "build.ninja")),
              "no Windows cross build at %s: configure it with\n"
              "  meson setup %s --cross-file cross/x86_64-w64-mingw32.ini", d, d)
        ctx.run(["ninja", "-C", d], check=True, timeout=1200)
        _checked[d] = True
    return d


def wine_env(xb, extra=None):
    env = {"WINEPREFIX": os.path.join(xb, "wineprefix"), "WINEDEBUG": "-all",
           "WINEDLLOVERRIDES": "mscoree,mshtml=", "DISPLAY": ""}
    # The runtime's switches come from the test alone, not from the caller's shell.
    for k in list(os.environ):
        if k.startswith("STENCILRT_") or k == "WIN_TEST_MUTATE":
            env[k] = ""
    env.update(extra or {})
    return env


def wine(ctx, xb, argv, env=None, timeout=T):
    """Run a Windows program of the cross build under wine64."""
    return ctx.run([WINE] + argv, env=wine_env(xb, env), timeout=timeout)


def stop_wineserver(ctx, xb):
    """Kill the prefix's wineserver, if any, and wait until it is gone."""
    ctx.run([WINESERVER, "-k"], env=wine_env(xb), timeout=60)
    ctx.run([WINESERVER, "-w"], env=wine_env(xb), timeout=60)


def start_wine(ctx, xb):
    """A wineserver that lives until stop_wineserver, and Wine's own programs
    (wineboot, services, winedevice, explorer, ...) started now, their output
    in a log. Without it the server exits 3 s after its last program, and the
    next run starts them all again inside a test's run, where what they print
    lands in that run's stderr: winedevice once crashed there ("Unhandled page
    fault ... at 000000031CAA2391", in its ntoskrnl.exe) and failed
    test_windows_tinyvm_interp_and_jit_agree."""
    stop_wineserver(ctx, xb)  # one left by an interrupted run would refuse -p
    env = dict(os.environ)
    env.update(wine_env(xb))
    os.makedirs(env["WINEPREFIX"], exist_ok=True)  # the server starts in it; wineboot fills it
    # A file, not a pipe: the server and those programs outlive the command
    # that starts them and keep its output open.
    with open(os.path.join(xb, "wineboot.log"), "w") as log:
        for argv in ([WINESERVER, "-p"], [WINE, "wineboot"]):
            try:
                subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                               timeout=T, check=True)
            except (subprocess.TimeoutExpired, subprocess.CalledProcessError) as e:
                raise TestFailure("cannot start Wine for the tests: %s (see %s)" % (e, log.name))


class wine_session:
    """The cross build, up to date, a wineserver with Wine's own programs
    running for the session, and that server stopped at the end."""

    def __init__(self, ctx):
        self.ctx = ctx

    def __enter__(self):
        check(not MISSING, "there is a Windows cross build, but %s is missing (./run.sh test "
              "installs wine64, mingw-w64-x86-64-dev and g++-mingw-w64-x86-64-win32)",
              ", ".join(MISSING))
        self.xb = cross_build(self.ctx)
        start_wine(self.ctx, self.xb)
        return self.xb

    def __exit__(self, *exc):
        stop_wineserver(self.ctx, self.xb)
        return False


def exe(xb, *parts):
    return os.path.join(xb, *parts)


# --- 1. tinyvm ----------------------------------------------------------------------

def test_windows_tinyvm_interp_and_jit_agree(ctx):
    with wine_session(ctx) as xb:
        tinyvm = exe(xb, "stencils", "tinyvm.exe")
        progs = sorted(f for f in os.listdir(ctx.path("stencils", "programs"))
                       if f.endswith(".tvm"))
        ran = []
        for prog in progs:
            path = ctx.path("stencils", "programs", prog)
            i = wine(ctx, xb, [tinyvm, "--interp", path], timeout=120)
            j = wine(ctx, xb, [tinyvm, "--jit", path], timeout=120)
            if prog in EXIT_ONLY_PROGRAMS:
                what = EXIT_ONLY_PROGRAMS[prog]
                check(i.returncode == j.returncode != 0 and i.stderr.startswith(what) and
                      j.stderr.startswith(what),
                      "%s: interpreter exit %d, JIT exit %d, want %r in both\n%s\n%s", prog,
                      i.returncode, j.returncode, what, i.stderr[-1000:], j.stderr[-1000:])
                ran.append(prog)
                continue
            check((i.stdout, i.returncode) == (j.stdout, j.returncode),
                  "%s: interpreter %r (exit %d), JIT %r (exit %d)\nJIT stderr:\n%s", prog,
                  i.stdout, i.returncode, j.stdout, j.returncode, j.stderr[-2000:])
            ran.append(prog)
        check(len(ran) == len(progs) >= 8, "programs run: %s", ran)
        # The JIT really ran: a hot loop agrees, also with its blocks linked by
        # patching after emit (jumps re-pointed with VirtualProtect flips).
        loop = ctx.path("stencils", "programs", "loop.tvm")
        j = wine(ctx, xb, [tinyvm, "--jit", "--time", loop])
        check(j.returncode == 0 and j.stdout.strip() == "5999999" and "(jit," in j.stderr,
              "loop.tvm: %r %r", j.stdout, j.stderr)
        c = wine(ctx, xb, [tinyvm, "--chain", "--stats", loop])
        check(c.returncode == 0 and c.stdout.strip() == "5999999" and
              "4 jumps linked, 4 side exits taken" in c.stderr, "loop.tvm --chain: %r %r",
              c.stdout, c.stderr)


def test_windows_switches_not_on_this_platform(ctx):
    """GDB's JIT interface, perf, the registry and two code views are Linux's:
    asked for, each says so once, and the JIT runs as without them."""
    with wine_session(ctx) as xb:
        tinyvm = exe(xb, "stencils", "tinyvm.exe")
        fib = ctx.path("stencils", "programs", "fib.tvm")
        want = wine(ctx, xb, [tinyvm, "--interp", fib]).stdout
        env = {"STENCILRT_GDB": "1", "STENCILRT_PERF": "jitdump", "STENCILRT_REGISTRY": "on",
               "STENCILRT_CODE_VIEWS": "2"}
        p = wine(ctx, xb, [tinyvm, "--jit", fib], env=env)
        check(p.returncode == 0 and p.stdout == want, "fib.tvm with %s: exit %d, %r (want %r)\n%s",
              env, p.returncode, p.stdout, want, p.stderr)
        for var, what in (("STENCILRT_GDB=1", "the GDB JIT interface"),
                          ("STENCILRT_PERF=jitdump", "perf"),
                          ("STENCILRT_REGISTRY=on", "the registry"),
                          ("STENCILRT_CODE_VIEWS=2", "a second code view")):
            line = "stencilrt: warning: %s: %s is not on this platform (Windows); off" % (var,
                                                                                         what)
            check(p.stderr.count(line) == 1, "want once: %r\nstderr:\n%s", line, p.stderr)


def test_windows_config_refuses_linux_only_requests(ctx):
    """Asked for in sr_config, gdb, perf, the registry and a second code view
    are SR_EUNSUPPORTED on Windows; a variable that leaves them off warns of
    nothing (tests/windows/win_config.c), and one that turns them on warns
    once each, from the runs that left them to the environment. The same
    program checks that a set whose op reaches a veneer by jmp is refused."""
    with wine_session(ctx) as xb:
        prog = [exe(xb, "tests", "windows", "win_config.exe")]
        off = {"STENCILRT_GDB": "0", "STENCILRT_PERF": "off", "STENCILRT_REGISTRY": "0",
               "STENCILRT_CODE_VIEWS": "1"}
        p = wine(ctx, xb, prog, env=off, timeout=120)
        check(p.returncode == 0 and "win_config: 0 wrong" in p.stdout and
              "call made a jmp: ok" in p.stdout and
              "warning" not in p.stderr, "variables off: exit %d\n%s%s", p.returncode, p.stdout,
              p.stderr[-2000:])
        on = {"STENCILRT_GDB": "1", "STENCILRT_PERF": "map", "STENCILRT_REGISTRY": "1",
              "STENCILRT_CODE_VIEWS": "2"}
        p = wine(ctx, xb, prog, env=on, timeout=120)
        warnings = [l for l in p.stderr.splitlines() if l.startswith("stencilrt: warning:")]
        check(p.returncode == 0 and "win_config: 0 wrong" in p.stdout and len(warnings) == 4 and
              all("=1:" in l or "=map:" in l or "=2:" in l for l in warnings),
              "variables on: exit %d\n%s%s", p.returncode, p.stdout, p.stderr[-2000:])


def test_windows_jit_memory_is_execute_read(ctx):
    """W^X: sealed JIT code (every executor, the shim) is execute+read."""
    with wine_session(ctx) as xb:
        p = wine(ctx, xb, [exe(xb, "tests", "windows", "win_unwind.exe"), "memory",
                           ctx.path("tests", "windows", "step.tvm")])
        check(p.returncode == 0 and re.search(r"^memory: 5 code ranges, [5-9]\d* pages, 0 not "
                                              r"execute\+read$", p.stdout, re.M),
              "exit %d\n%s\n%s", p.returncode, p.stdout, p.stderr[-2000:])
        # Again after every jump was patched (its pages flipped and sealed again).
        c = wine(ctx, xb, [exe(xb, "tests", "windows", "win_unwind.exe"), "memory",
                           ctx.path("tests", "windows", "step.tvm"), "--chain"])
        check(c.returncode == 0 and re.search(r"^memory after repatching: 5 code ranges, \d+ "
                                              r"pages, 0 not execute\+read$", c.stdout, re.M) and
              re.search(r"^memory: [1-9]\d* jumps patched$", c.stdout, re.M),
              "--chain: exit %d\n%s\n%s", c.returncode, c.stdout, c.stderr[-2000:])


def test_windows_no_function_table_outlives_its_code(ctx):
    """After a failed batch emit, each sr_executor_free and sr_runtime_destroy,
    frames_registered drops as it should (executors + shim, then the shim's
    alone) and the old PCs have no RUNTIME_FUNCTION (win_unwind dereg)."""
    with wine_session(ctx) as xb:
        p = wine(ctx, xb, [exe(xb, "tests", "windows", "win_unwind.exe"), "dereg",
                           ctx.path("tests", "windows", "step.tvm")])
        check(p.returncode == 0 and "dereg: 0 failures" in p.stdout and
              p.stdout.count("dereg: ok: ") >= 10 and "FAIL" not in p.stdout,
              "exit %d\n%s\n%s", p.returncode, p.stdout, p.stderr[-2000:])


def test_windows_header_for_another_target_is_refused(ctx):
    """Each runtime refuses the other target's stencil set (SR_EINVAL, "the
    stencil set is for another target: ..."), with registration on and off:
    tests/windows/wrong_target.c, built natively against the Windows header
    and for Windows against the Linux one."""
    linux = os.path.join(ctx.tmp, "wrong_target")
    ctx.run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror",
             '-DWRONG_HEADER="jit_stencils-x86_64-w64-windows-gnu.h"',
             "-I", os.path.join(ctx.build, "stencils"), "-I", ctx.path("runtime"),
             ctx.path("tests", "windows", "wrong_target.c"),
             os.path.join(ctx.build, "runtime", "libstencilrt.a"), "-lpthread", "-ldl", "-o",
             linux], check=True, timeout=120)
    p = ctx.run([linux], timeout=60)
    check(p.returncode == 0 and p.stdout.count("for another target: it has Windows "
                                               "UNWIND_INFO") == 2,
          "Linux runtime, Windows set: exit %d\n%s%s", p.returncode, p.stdout, p.stderr)
    with wine_session(ctx) as xb:
        w = wine(ctx, xb, [exe(xb, "tests", "windows", "wrong_target.exe")], timeout=120)
        check(w.returncode == 0 and w.stdout.count("for another target: it has no shim's "
                                                   "UNWIND_INFO") == 2,
              "Windows runtime, Linux set: exit %d\n%s%s", w.returncode, w.stdout,
              w.stderr[-2000:])


def test_windows_jit_memory_errors_name_the_call(ctx):
    """A failed VirtualAlloc or VirtualProtect is reported as itself, with its
    arguments and GetLastError's code and text (tests/windows/win_jitmem.c)."""
    with wine_session(ctx) as xb:
        p = wine(ctx, xb, [exe(xb, "tests", "windows", "win_jitmem.exe")], timeout=120)
        check(p.returncode == 0 and "win_jitmem: 0 wrong" in p.stdout and
              p.stdout.count(": ok: ") == 4, "exit %d\n%s%s", p.returncode, p.stdout,
              p.stderr[-2000:])
        sys.stderr.write("test_windows: %s" % "".join(
            l + "\n" for l in p.stdout.splitlines() if ": ok: " in l))


# --- 2. the unwinder at every JIT instruction -------------------------------------------

STEP_RE = re.compile(r"^step: result (-?\d+), (\d+) JIT PCs checked \((\d+) in the shim, (\d+) at "
                     r"an executor's ret, (\d+) in veneers\), (\d+) distinct, (\d+) failures$",
                     re.M)


# Programs single-stepped whole: their helpers never enter the system (the
# trap flag would follow a system call into Wine's own code), and they run
# thousands of instructions, not millions. step.tvm runs every op.
STEP_PROGRAMS = [("tests", "windows", "step.tvm"), ("stencils", "programs", "countdown.tvm"),
                 ("stencils", "programs", "reenter.tvm")]


def run_step(ctx, xb, env=None, prog=STEP_PROGRAMS[0], program="win_unwind.exe"):
    p = wine(ctx, xb, [exe(xb, "tests", "windows", program), "step",
                       ctx.path(*prog)], env=env, timeout=600)
    m = STEP_RE.search(p.stdout)
    check(m, "win_unwind step (env %s): exit %d, no summary\nstdout:\n%s\nstderr:\n%s", env,
          p.returncode, p.stdout[-3000:], p.stderr[-3000:])
    r = {"result": int(m.group(1)), "checked": int(m.group(2)), "shim": int(m.group(3)),
         "ret": int(m.group(4)), "veneer": int(m.group(5)), "distinct": int(m.group(6)),
         "failures": int(m.group(7)), "rc": p.returncode, "out": p.stdout}
    return r


def test_windows_unwind_at_every_jit_instruction(ctx):
    with wine_session(ctx) as xb:
        for prog in STEP_PROGRAMS:
            name = prog[-1]
            interp = wine(ctx, xb, [exe(xb, "stencils", "tinyvm.exe"), "--interp",
                                    ctx.path(*prog)])
            r = run_step(ctx, xb, prog=prog)
            check(r["rc"] == 0 and r["failures"] == 0,
                  "%s: the unwinder failed at %d of %d JIT PCs:\n%s", name, r["failures"],
                  r["checked"], r["out"][-4000:])
            m = re.search(r"^step: (\d+) of (\d+) VM instructions reached$", r["out"], re.M)
            check(m and m.group(1) == m.group(2) and int(m.group(2)) >= 10,
                  "%s: not every instruction ran:\n%s", name, r["out"][-3000:])
            # The interpreter prints what `print` gets, then main's result.
            check(interp.returncode == 0 and str(r["result"]) == interp.stdout.split()[-1],
                  "%s: %d under the single-step, %r interpreted", name, r["result"],
                  interp.stdout)
            check(r["shim"] > 0 and r["distinct"] >= 80, "%s: too few PCs: %s", name, r)
            # step.tvm's helpers are out of rel32's reach under Wine (the .exe
            # at 0x140000000, JIT memory low), so its veneers are stepped, each
            # checked to be entered by a call from an executor.
            check(name != "step.tvm" or r["veneer"] > 0, "%s: no veneer PC stepped: %s", name,
                  r)
            sys.stderr.write("test_windows: %s: RtlVirtualUnwind to main at %d JIT PCs "
                             "single-stepped (%d distinct, %d in the shim, %d in veneers)\n" % (
                                 name, r["checked"], r["distinct"], r["shim"], r["veneer"]))


def test_windows_unwind_negative_controls(ctx):
    """The same check must fail without registration (every JIT PC, the
    shim's included) and with a wrong FrameOffset: at every executor PC but
    its `ret`s (which Windows unwinds as an epilog, by the return address on
    top of the stack, without UNWIND_INFO), and at the shim's PCs of
    re-entered calls, whose walks cross executor frames (the shim's own
    UNWIND_INFO is untouched)."""
    with wine_session(ctx) as xb:
        off = run_step(ctx, xb, {"STENCILRT_FRAMES": "0"})
        check(off["rc"] == 1 and off["checked"] > 0 and off["failures"] == off["checked"],
              "registration off: %d failures of %d PCs (want all)\n%s", off["failures"],
              off["checked"], off["out"][-2000:])
        check("no RUNTIME_FUNCTION for pc" in off["out"], "registration off: %s",
              off["out"][-2000:])
        bad = run_step(ctx, xb, {"WIN_TEST_MUTATE": "frame-offset"})
        executors = bad["checked"] - bad["shim"] - bad["ret"]
        check(bad["rc"] == 1 and executors > 0 and executors <= bad["failures"] < bad["checked"],
              "wrong FrameOffset: %d failures of %d PCs, %d of them executor PCs but rets "
              "(want those and the shim's of re-entered calls)\n%s", bad["failures"],
              bad["checked"], executors, bad["out"][-2000:])


COLD_RE = re.compile(r"^cold: main\(3\) = (-?\d+); main\(0\) trapped \(([^)]*)\) from (\S+) in "
                     r"its (cold|hot) part; (\d+) JIT PCs in cold parts checked \((\d+) "
                     r"distinct\), (\d+) failures there$", re.M)


def run_cold_step(ctx, xb, env=None):
    """win_unwind cold on tests/windows/cold.tvm: main(3) single-stepped
    (every instruction), then main(0), whose div traps from its cold part."""
    p = wine(ctx, xb, [exe(xb, "tests", "windows", "win_unwind.exe"), "cold",
                       ctx.path("tests", "windows", "cold.tvm"), "3"], env=env, timeout=600)
    m, s = COLD_RE.search(p.stdout), STEP_RE.search(p.stdout)
    check(m and s, "win_unwind cold (env %s): exit %d, no summary\nstdout:\n%s\nstderr:\n%s",
          env, p.returncode, p.stdout[-3000:], p.stderr[-3000:])
    return {"rc": p.returncode, "out": p.stdout, "result": int(m.group(1)), "why": m.group(2),
            "from": m.group(3), "part": m.group(4), "cold": int(m.group(5)),
            "cold_distinct": int(m.group(6)), "cold_failures": int(m.group(7)),
            "failures": int(s.group(7)), "checked": int(s.group(2))}


def test_windows_unwind_at_every_pc_of_a_cold_path(ctx):
    """div's trap path is its cold part (docs/runtime.md, "Hot and cold
    parts"), placed after every hot part of the executor: single-stepped
    three tinyvm calls deep, RtlVirtualUnwind walks to main from each of its
    PCs by the executor's one UNWIND_INFO. The controls (no registration, a
    wrong FrameOffset) must fail there too."""
    with wine_session(ctx) as xb:
        r = run_cold_step(ctx, xb)
        check(r["rc"] == 0 and r["failures"] == 0 and r["result"] == 36,
              "the unwinder failed at %d of %d JIT PCs (result %d):\n%s", r["failures"],
              r["checked"], r["result"], r["out"][-4000:])
        check(re.search(r"^step: (\d+) of \1 VM instructions reached$", r["out"], re.M),
              "not every instruction ran:\n%s", r["out"][-3000:])
        check(r["why"] == "division by zero or overflow" and r["from"].startswith("div@recurse[")
              and r["part"] == "cold", "the trap was not called from div's cold part: %s", r)
        # Its cold part: the message's address, its argument, the call (a veneer follows).
        check(r["cold_distinct"] >= 3 and r["cold_failures"] == 0,
              "cold code: %d PCs stepped, %d failed\n%s", r["cold_distinct"], r["cold_failures"],
              r["out"][-3000:])
        for env in ({"STENCILRT_FRAMES": "0"}, {"WIN_TEST_MUTATE": "frame-offset"}):
            c = run_cold_step(ctx, xb, env)
            check(c["rc"] == 1 and c["cold"] > 0 and c["cold_failures"] == c["cold"],
                  "control %s: %d of %d cold PCs failed (want all)\n%s", env,
                  c["cold_failures"], c["cold"], c["out"][-2000:])
        sys.stderr.write("test_windows: cold.tvm: RtlVirtualUnwind to main at %d PCs of %s's "
                         "cold part (%d JIT PCs in all)\n" % (r["cold_distinct"], r["from"],
                                                               r["checked"]))


# --- 3. backtraces and exceptions through JIT frames ---------------------------------------

BT_RE = re.compile(r"^backtrace: result (-?\d+), (\d+) frames, (-?\d+) JIT frames with (\d+) "
                   r"tinyvm calls active, main (reached|not reached)$", re.M)


def test_windows_backtrace_through_jit_frames(ctx):
    with wine_session(ctx) as xb:
        prog = [exe(xb, "tests", "windows", "win_unwind.exe"), "backtrace",
                ctx.path("tests", "windows", "backtrace.tvm")]
        p = wine(ctx, xb, prog)
        m = BT_RE.search(p.stdout)
        check(p.returncode == 0 and m and m.group(3) == "3" and m.group(4) == "3" and
              m.group(5) == "reached", "RtlCaptureStackBackTrace: exit %d\n%s\n%s", p.returncode,
              p.stdout[-3000:], p.stderr[-2000:])
        for env in ({"STENCILRT_FRAMES": "0"}, {"WIN_TEST_MUTATE": "frame-offset"}):
            c = wine(ctx, xb, prog, env=env)
            m = BT_RE.search(c.stdout)
            check(c.returncode != 0 and not (m and m.group(5) == "reached" and
                                             m.group(3) == "3"),
                  "control %s passed: exit %d\n%s", env, c.returncode, c.stdout[-2000:])


def test_windows_backtraces_in_threads_while_emitting(ctx):
    """Four threads each take 1000 backtraces three tinyvm calls deep while
    emitting and freeing executors (function tables added and deleted under
    the other threads' walks, the SRWLOCK taken from every thread)."""
    with wine_session(ctx) as xb:
        prog = [exe(xb, "tests", "windows", "win_unwind.exe"), "threads",
                ctx.path("tests", "windows", "backtrace.tvm")]
        p = wine(ctx, xb, prog, timeout=200)
        check(p.returncode == 0 and "threads: 4 threads, 4000 backtraces, 0 failures" in p.stdout,
              "exit %d\n%s\n%s", p.returncode, p.stdout[-3000:], p.stderr[-2000:])
        for env in ({"STENCILRT_FRAMES": "0"}, {"WIN_TEST_MUTATE": "frame-offset"}):
            c = wine(ctx, xb, prog, env=env, timeout=200)
            check(c.returncode != 0 and "4000 backtraces, 0 failures" not in c.stdout,
                  "control %s passed: exit %d\n%s", env, c.returncode, c.stdout[-2000:])


def test_windows_seh_exception_through_jit_frames(ctx):
    with wine_session(ctx) as xb:
        prog = [exe(xb, "tests", "windows", "win_unwind.exe"), "seh",
                ctx.path("tests", "windows", "throw.tvm")]
        for depth in ("0", "1", "4"):
            p = wine(ctx, xb, prog + [depth])
            want = ("seh: caught in main (result 0, %d tinyvm calls were active), walk from the "
                    "raise: ok" % (int(depth) + 2))
            check(p.returncode == 0 and want in p.stdout, "depth %s: exit %d, want %r\n%s\n%s",
                  depth, p.returncode, want, p.stdout[-2000:], p.stderr[-2000:])
        for env in ({"STENCILRT_FRAMES": "0"}, {"WIN_TEST_MUTATE": "frame-offset"}):
            # Without registration Wine's dispatcher may still land in main:
            # it takes a frame it cannot unwind for a leaf and pops stack slots
            # until one holds a return address (registers then come back
            # wrong). The walk from the raise, checked in the filter, fails.
            c = wine(ctx, xb, prog + ["2"], env=env, timeout=120)
            check(c.returncode != 0 and "walk from the raise: ok" not in c.stdout,
                  "control %s passed: exit %d\n%s", env, c.returncode, c.stdout[-2000:])


def test_windows_cpp_exception_through_jit_frames(ctx):
    """throw.tvm: JIT frames and C frames between the throw and main's catch.
    nested.tvm: also a C++ frame with a destructor between two JIT frames
    (`native backtrace` calls back into tinyvm). Each run checks that main's
    values kept in nonvolatile registers came back after the catch."""
    with wine_session(ctx) as xb:
        for prog, outer in (("throw.tvm", 0), ("nested.tvm", 1)):
            argv = [exe(xb, "tests", "windows", "win_throw.exe"),
                    ctx.path("tests", "windows", prog)]
            p = wine(ctx, xb, argv + ["0", "1", "4"])
            lines = p.stdout.splitlines()
            # Depth d: d + 1 recurse levels and main's, each re-entered through
            # vm_call; the helper's own cleanup object is destroyed too.
            want = ['depth %d caught "thrown at depth %d" cleanups 1 outer %d registers kept'
                    % (d, d, outer) for d in (0, 1, 4)]
            check(p.returncode == 0 and lines == want, "%s: exit %d\n%s\nwant:\n%s\nstderr:\n%s",
                  prog, p.returncode, p.stdout, "\n".join(want), p.stderr[-2000:])
            # The controls fail these checks: without registration Wine's
            # dispatcher may still reach the catch by popping stack slots, with
            # main's registers wrong (seen: "depth 0 caught ... outer 0
            # registers WRONG" for depth 2, exit 1).
            want = 'depth 2 caught "thrown at depth 2" cleanups 1 outer %d registers kept' % outer
            for env in ({"STENCILRT_FRAMES": "0"}, {"WIN_TEST_MUTATE": "frame-offset"}):
                c = wine(ctx, xb, argv + ["2"], env=env, timeout=120)
                check(c.returncode != 0 and want not in c.stdout,
                      "%s: control %s passed: exit %d\n%s", prog, env, c.returncode,
                      c.stdout[-2000:])
                sys.stderr.write("test_windows: %s control %s: exit %d, %s\n" % (
                    prog, env, c.returncode, (c.stdout.strip().splitlines() or ["no line"])[-1]))


def test_windows_cpp_exception_from_a_cold_path(ctx):
    """cold.tvm: div by zero three tinyvm calls deep; its cold part calls
    vm_trap, which throws (win_throw.cpp, naming the calling instruction and
    part); main catches it with its nonvolatile registers intact. Without
    registration the same run must not."""
    with wine_session(ctx) as xb:
        argv = [exe(xb, "tests", "windows", "win_throw.exe"),
                ctx.path("tests", "windows", "cold.tvm"), "0"]
        want = ('depth 0 caught "division by zero or overflow at div@recurse[10] in its cold '
                'part" cleanups 0 outer 0 registers kept')
        p = wine(ctx, xb, argv)
        check(p.returncode == 0 and p.stdout.splitlines() == [want],
              "exit %d\n%s\nwant:\n%s\nstderr:\n%s", p.returncode, p.stdout, want,
              p.stderr[-2000:])
        c = wine(ctx, xb, argv, env={"STENCILRT_FRAMES": "0"}, timeout=120)
        check(c.returncode != 0 and want not in c.stdout, "control passed: exit %d\n%s",
              c.returncode, c.stdout[-2000:])


def _collectable():
    """Why the tests are not collected, or None. With a cross build present
    they are collected even when Wine or the toolchain is missing, and fail
    saying so (wine_session): that build is there to be tested."""
    native = _native_build_from_argv()
    has_build = native is not None and os.path.exists(
        os.path.join(windows_build_dir(native), "build.ninja"))
    if MISSING and not has_build:
        return "wine64 or the cross toolchain is missing (%s)" % ", ".join(MISSING)
    if native is not None and not has_build:
        d = windows_build_dir(native)
        return ("there is no Windows cross build at %s (meson setup %s --cross-file "
                "cross/x86_64-w64-mingw32.ini)" % (d, d))
    return None


_why_not = _collectable()
if _why_not:
    sys.stderr.write("test_windows: %s: its tests are not collected\n" % _why_not)
    for _name in [n for n in list(globals()) if n.startswith("test_")]:
        del globals()[_name]


MSVC_UNWIND = "win_unwind_msvc.exe"  # the same program on x86_64-pc-windows-msvc's stencils


def test_windows_msvc_triple_stencils_name_their_triple(ctx):
    """The stencils of MSVC's triple are COFF x86-64, made with clang's own
    headers, and the header the MSVC test program includes is theirs: its
    dispatcher tests _MSC_VER before MinGW's _WIN32."""
    with wine_session(ctx) as xb:
        d = os.path.join(xb, "tests", "windows", "msvc")
        text = read(os.path.join(d, "jit_stencils-x86_64-pc-windows-msvc.h"))
        check('#define SG_TARGET_TRIPLE "x86_64-pc-windows-msvc"' in text and
              "#define SG_UNWIND_WIN64 1" in text, "not MSVC's triple's header")
        dispatcher = read(os.path.join(d, "jit_stencils.h"))
        check(dispatcher.splitlines()[2].startswith("#if defined(_M_X64) && defined(_MSC_VER)"),
              "the dispatcher:\n%s", dispatcher)


def test_windows_msvc_triple_unwind_at_every_jit_instruction(ctx):
    """tinyvm's VM on x86_64-pc-windows-msvc's stencils, single-stepped under
    Wine: RtlVirtualUnwind reaches main from every PC of every JIT frame, and
    each program's result is the interpreter's."""
    with wine_session(ctx) as xb:
        for prog in STEP_PROGRAMS:
            name = prog[-1]
            interp = wine(ctx, xb, [exe(xb, "stencils", "tinyvm.exe"), "--interp",
                                    ctx.path(*prog)])
            r = run_step(ctx, xb, prog=prog, program=MSVC_UNWIND)
            check(r["rc"] == 0 and r["failures"] == 0 and r["shim"] > 0 and
                  r["distinct"] >= 80, "%s: the unwinder failed at %d of %d JIT PCs:\n%s",
                  name, r["failures"], r["checked"], r["out"][-4000:])
            check(interp.returncode == 0 and str(r["result"]) == interp.stdout.split()[-1],
                  "%s: %d under the single-step, %r interpreted", name, r["result"],
                  interp.stdout)
        bad = run_step(ctx, xb, env={"WIN_TEST_MUTATE": "frame-offset"}, program=MSVC_UNWIND)
        check(bad["failures"] > 0, "a wrong frame offset passed: %s", bad)


def test_windows_msvc_triple_backtrace_and_seh(ctx):
    """On MSVC's triple's stencils: RtlCaptureStackBackTrace from a helper
    called by JIT code sees its three tinyvm calls and reaches main; an SEH
    exception raised there crosses the JIT frames to main's __except."""
    with wine_session(ctx) as xb:
        p = wine(ctx, xb, [exe(xb, "tests", "windows", MSVC_UNWIND), "backtrace",
                           ctx.path("tests", "windows", "backtrace.tvm")])
        m = BT_RE.search(p.stdout)
        check(p.returncode == 0 and m and m.group(3) == "3" and m.group(5) == "reached",
              "backtrace: exit %d\n%s\n%s", p.returncode, p.stdout[-3000:], p.stderr[-2000:])
        p = wine(ctx, xb, [exe(xb, "tests", "windows", MSVC_UNWIND), "seh",
                           ctx.path("tests", "windows", "throw.tvm"), "4"])
        want = "seh: caught in main (result 0, 6 tinyvm calls were active), walk from the raise: ok"
        check(p.returncode == 0 and want in p.stdout, "seh: exit %d\n%s\n%s", p.returncode,
              p.stdout[-2000:], p.stderr[-2000:])

