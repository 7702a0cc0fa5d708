"""LLVM's libunwind through JIT frames: programs linked with `clang-22
--unwindlib=libunwind -rtlib=compiler-rt` (and `-stdlib=libc++`, so C++
exceptions go through libc++abi), as on Android, FreeBSD and macOS. LLVM's
__register_frame takes one FDE, not an .eh_frame, so the runtime decides at
run time which unwinders the process has and registers with each of them
(docs/runtime.md, "Registration with unwinders").

The programs are tests/unwind/'s, built here with LLVM's toolchain against the
plain build's libstencilrt.a:
* bt with -DBT_UNWIND_BACKTRACE: _Unwind_Backtrace (LLVM's) from a helper at
  re-entry depth 3, from four threads while runtimes are created and destroyed;
* bt as it is: glibc's backtrace(), which loads libgcc_s into the same process,
  so both unwinders are there and each must know the JIT code;
* throw: C++ exceptions thrown by a helper, caught below three JIT levels.
Each has a control with STENCILRT_FRAMES=0 that must fail.
"""
import os
import signal

from sgtest import check

ASAN = False  # the LLVM toolchain's programs link the plain runtime

T = 120
LLVM_LIB = "/usr/lib/llvm-22/lib"
ENV = {"STENCILRT_PERF": "off", "STENCILRT_FRAMES": "1"}


def build(ctx, name, sources, *flags, cxx=False):
    exe = os.path.join(ctx.tmp, name)
    cc = "clang++-22" if cxx else "clang-22"
    cmd = [cc, "-O1", "-g", "-D_GNU_SOURCE", "-I", ctx.path("stencils"), "-I",
           ctx.path("runtime"), "-I", os.path.join(ctx.build, "stencils")]
    cmd += list(flags)
    for s in sources:  # C sources stay C under clang++
        c = cxx and s.endswith(".c")
        cmd += (["-x", "c"] if c else []) + [ctx.path("tests", "unwind", s)] + (["-x", "none"]
                                                                                if c else [])
    cmd += [os.path.join(ctx.build, "runtime", "libstencilrt.a"), "-lpthread", "-rdynamic",
            "--unwindlib=libunwind", "-rtlib=compiler-rt", "-Wl,-rpath," + LLVM_LIB, "-o", exe]
    ctx.run(cmd, timeout=T, check=True)
    libs = ctx.run(["ldd", exe], timeout=T, check=True).stdout
    check(os.path.join(LLVM_LIB, "libunwind.so.1") in libs and "libgcc_s" not in libs,
          "%s is not linked against LLVM's libunwind alone:\n%s", name, libs)
    return exe


def run(ctx, exe, **env):
    full = dict(ENV)
    full.update(env)
    p = ctx.run([exe], timeout=T, env=full)
    # What the runtime's registration with LLVM's __register_frame used to print.
    check("bad fde" not in p.stderr, "libunwind refused a registration:\n%s", p.stderr[-3000:])
    return p


def show(p):
    return "exit %s\nstdout:\n%s\nstderr:\n%s" % (p.returncode, p.stdout[-3000:],
                                                  p.stderr[-3000:])


def test_llvm_unwind_backtrace_through_jit_frames(ctx):
    exe = build(ctx, "bt_llvm", ["bt.c", "glue.c"], "-DBT_UNWIND_BACKTRACE")
    p = run(ctx, exe)
    check(p.returncode == 0 and "unwind_bt: PASS" in p.stdout and "depth 3: ok" in p.stdout
          and ", 0 workers wrong;" in p.stdout, "LLVM's _Unwind_Backtrace:\n%s", show(p))
    p = run(ctx, exe, STENCILRT_FRAMES="0")
    check(p.returncode == 1 and "unwind_bt: FAIL" in p.stdout,
          "control (STENCILRT_FRAMES=0) should fail:\n%s", show(p))


def test_llvm_and_libgcc_in_one_process(ctx):
    """glibc's backtrace() loads libgcc_s and unwinds with it, in a program
    whose own unwinder is LLVM's: runtimes created from then on (the worker
    phase creates and destroys hundreds) are registered with both."""
    exe = build(ctx, "bt_both", ["bt.c", "glue.c"])
    p = run(ctx, exe)
    check(p.returncode == 0 and "unwind_bt: PASS" in p.stdout and ", 0 workers wrong;"
          in p.stdout, "glibc backtrace() in an LLVM-linked program:\n%s", show(p))


def test_llvm_cpp_exception_through_jit_frames(ctx):
    exe = build(ctx, "throw_llvm", ["throw.cpp", "glue.c"], "-fexceptions", "-stdlib=libc++",
                cxx=True)
    p = run(ctx, exe)
    check(p.returncode == 0 and "unwind_throw: PASS" in p.stdout, "libc++abi + LLVM's "
          "libunwind:\n%s", show(p))
    for line in ("A: 200 of 200", "B: 50 of 50", "C: 50 of 50", "D: plain(41) = 42",
                 "E: 40 of 40"):
        check(line in p.stdout, "missing %r:\n%s", line, show(p))
    p = run(ctx, exe, STENCILRT_FRAMES="0")
    check(p.returncode == -signal.SIGABRT and "terminating due to uncaught exception" in
          p.stderr and "PASS" not in p.stdout,
          "control (STENCILRT_FRAMES=0): expected libc++abi's terminate:\n%s", show(p))
