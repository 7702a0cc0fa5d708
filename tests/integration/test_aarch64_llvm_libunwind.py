"""LLVM's libunwind through JIT frames on AArch64, under qemu-user: programs
cross-compiled with `clang-22 --target=aarch64-linux-gnu` and linked with
ld.lld-22 against LLVM's arm64 libunwind.a (and libc++abi for C++), the
AArch64 cross build's libstencilrt.a, and libgcc only for compiler builtins
(`--unwindlib=none -rtlib=libgcc`: no compiler-rt builtins for arm64 here).
Each program must take _Unwind_Backtrace and _Unwind_RaiseException from
libunwind.a and must not need libgcc_s (checked at link time with
--trace-symbol, and with readelf); the libraries are static, so qemu needs
only the cross sysroot.

* tests/unwind/bt.c with -DBT_UNWIND_BACKTRACE: LLVM's _Unwind_Backtrace from
  a helper at re-entry depth 3 names every frame down to main, from four
  threads while runtimes are created and destroyed (as on x86-64,
  test_llvm_libunwind);
* tests/unwind/throw.cpp: C++ exceptions thrown by a helper (libc++abi's
  __cxa_throw, LLVM's _Unwind_RaiseException), caught below three JIT levels,
  rethrown, caught between JIT frames; linked *without* -rdynamic, so the
  runtime finds LLVM's __unw_add_dynamic_eh_frame_section through its weak
  reference (dlsym cannot see an unexported symbol);
* tests/aarch64/a64_sample.c under `qemu-aarch64 -singlestep`: a SIGPROF
  handler walks with LLVM's _Unwind_Backtrace at sampled PCs of JIT code and
  of the VM's C functions around it, and with libgcc's (libgcc_s.so.1 loaded
  by the program, so the runtime registers with both unwinders) as the
  reference. libgcc must be right at every sample. LLVM's walk must agree
  with libgcc's everywhere except at the first instruction of a CFI row
  (the shim's rows from the generated header, the C functions' rows from
  llvm-dwarfdump of the program) or of an executor: interrupted there, LLVM's
  libunwind 22 applies the row before, in the JIT's code and in compiled C
  code alike (at some C PCs its walk even faults). Those PCs are printed;
  if LLVM ever agrees everywhere, the test says so, to update docs/runtime.md
  ("Registration with unwinders").

Each has a control with STENCILRT_FRAMES=0 that must fail.

The arm64 libraries come from Debian's libunwind-22-dev, libc++abi-22-dev and
libc++-22-dev for arm64, which cannot be installed beside the amd64 ones:
`./run.sh test` downloads and extracts them into <build>-aarch64-llvm (or
$STENCILGEN_AARCH64_LLVM). The cross build is <build>-aarch64 (or
$STENCILGEN_AARCH64_BUILD), as for test_aarch64_qemu. Without the cross
toolchain or clang-22 these tests are not collected (a note says so on
stderr); with them, missing libraries or a missing cross build are failures.
"""
import os
import re
import signal
import sys

from sgtest import A64_QEMU, a64_cross_build, a64_missing, check, read

ASAN = False  # programs run under qemu, linked with the cross-built runtime

A64 = "aarch64-unknown-linux-gnu"
QEMU = A64_QEMU  # PAC and BTI on, as in test_aarch64_qemu
T = 300
ENV = {"STENCILRT_PERF": "off", "STENCILRT_FRAMES": "1"}
SAMPLE_SECONDS = 20

MISSING = a64_missing("clang-22", "clang++-22", "ld.lld-22", "llvm-nm-22", "llvm-dwarfdump-22")
cross_build = a64_cross_build


def llvm_libs(ctx):
    """(library directory, libc++ include directory) of the extracted arm64 packages."""
    d = os.path.abspath(os.environ.get("STENCILGEN_AARCH64_LLVM") or ctx.build + "-aarch64-llvm")
    lib = os.path.join(d, "usr", "lib", "aarch64-linux-gnu")
    inc = os.path.join(d, "usr", "lib", "llvm-22", "include", "c++", "v1")
    missing = [p for p in [os.path.join(lib, a) for a in ("libunwind.a", "libc++abi.a",
                                                           "libc++.a")] + [inc]
               if not os.path.exists(p)]
    check(not missing, "LLVM's arm64 libraries are missing (%s): `./run.sh test` downloads "
          "and extracts libunwind-22-dev:arm64, libc++abi-22-dev:arm64 and libc++-22-dev:arm64 "
          "into %s (dpkg --add-architecture arm64; apt-get update; apt-get download ...; "
          "dpkg-deb -x)", ", ".join(missing), d)
    return lib, inc


def build(ctx, name, sources, *flags, cxx=False):
    """Cross-compile sources (paths under the repository) into a program on
    LLVM's libunwind; checks that the unwinder is LLVM's."""
    xb = cross_build(ctx)
    lib, inc = llvm_libs(ctx)
    exe = os.path.join(ctx.tmp, name)
    cmd = ["clang++-22" if cxx else "clang-22", "--target=aarch64-linux-gnu", "-O2", "-g",
           "-D_GNU_SOURCE", "-I", ctx.path("stencils"), "-I", ctx.path("runtime"),
           "-I", ctx.path("tests", "common"),
           "-I", os.path.join(xb, "stencils")]
    if cxx:
        cmd += ["-stdlib=libc++", "-nostdinc++", "-isystem", inc, "-fexceptions"]
    cmd += list(flags)
    for s in sources:  # C sources stay C under clang++
        c = cxx and s.endswith(".c")
        cmd += (["-x", "c"] if c else []) + [ctx.path(s)] + (["-x", "none"] if c else [])
    cmd += [os.path.join(xb, "runtime", "libstencilrt.a")]
    if cxx:
        cmd += ["-nostdlib++", os.path.join(lib, "libc++.a"), os.path.join(lib, "libc++abi.a")]
    cmd += [os.path.join(lib, "libunwind.a"), "-lpthread", "-ldl", "-fuse-ld=lld",
            "--unwindlib=none", "-rtlib=libgcc", "-Wl,--trace-symbol=_Unwind_Backtrace",
            "-Wl,--trace-symbol=_Unwind_RaiseException", "-o", exe]
    p = ctx.run(cmd, timeout=T, check=True)
    trace = p.stdout + p.stderr
    for sym, member in (("_Unwind_Backtrace", "UnwindLevel1-gcc-ext.c.o"),
                        ("_Unwind_RaiseException", "UnwindLevel1.c.o")):
        if sym == "_Unwind_RaiseException" and not cxx:
            continue
        check(re.search(r"libunwind\.a\(%s\): definition of %s$" % (re.escape(member), sym),
                        trace, re.M),
              "%s: %s does not come from LLVM's libunwind.a:\n%s", name, sym, trace)
    needed = ctx.run(["readelf", "-d", exe], timeout=T, check=True).stdout
    check("libgcc_s" not in needed and "libunwind" not in needed and "libstdc++" not in needed,
          "%s needs a shared unwinder or C++ library:\n%s", name, needed)
    syms = ctx.run(["llvm-nm-22", "--defined-only", exe], timeout=T, check=True).stdout
    check(re.search(r" T __unw_add_dynamic_eh_frame_section$", syms, re.M),
          "%s has no __unw_add_dynamic_eh_frame_section", name)
    return exe


def run(ctx, exe, *args, env=None, singlestep=False, timeout=T):
    full = dict(ENV)
    full.update(env or {})
    p = ctx.run(QEMU + (["-singlestep"] if singlestep else []) + [exe] + list(args),
                timeout=timeout, env=full, cwd=ctx.tmp)
    # What LLVM's __register_frame says when given a whole table.
    check("bad fde" not in p.stderr, "libunwind refused a registration:\n%s", p.stderr[-3000:])
    return p


def show(p):
    return "exit %s\nstdout:\n%s\nstderr:\n%s" % (p.returncode, p.stdout[-3000:],
                                                  p.stderr[-3000:])


def test_aarch64_llvm_unwind_backtrace_through_jit_frames(ctx):
    exe = build(ctx, "bt_llvm", ["tests/unwind/bt.c", "tests/unwind/glue.c"],
                "-DBT_UNWIND_BACKTRACE", "-rdynamic")
    p = run(ctx, exe)
    check(p.returncode == 0 and "unwind_bt: PASS" in p.stdout and "depth 3: ok" in p.stdout
          and ", 0 workers wrong;" in p.stdout, "LLVM's _Unwind_Backtrace:\n%s", show(p))
    p = run(ctx, exe, env={"STENCILRT_FRAMES": "0"})
    check(p.returncode == 1 and "unwind_bt: FAIL" in p.stdout,
          "control (STENCILRT_FRAMES=0) should fail:\n%s", show(p))


def test_aarch64_llvm_cpp_exception_through_jit_frames(ctx):
    exe = build(ctx, "throw_llvm", ["tests/unwind/throw.cpp", "tests/unwind/glue.c"],
                cxx=True)
    dyn = ctx.run(["llvm-nm-22", "-D", "--defined-only", exe], timeout=T, check=True).stdout
    check("__unw_add_dynamic_eh_frame_section" not in dyn,
          "built to leave LLVM's entry points unexported, yet:\n%s", dyn)
    p = run(ctx, exe)
    check(p.returncode == 0 and "unwind_throw: PASS" in p.stdout,
          "libc++abi + LLVM's libunwind:\n%s", show(p))
    for line in ("A: 200 of 200", "B: 50 of 50", "C: 50 of 50", "D: plain(41) = 42",
                 "E: 40 of 40"):
        check(line in p.stdout, "missing %r:\n%s", line, show(p))
    p = run(ctx, exe, env={"STENCILRT_FRAMES": "0"})
    check(p.returncode in (-signal.SIGABRT, 128 + signal.SIGABRT) and
          "terminating due to uncaught exception" in p.stderr and "PASS" not in p.stdout,
          "control (STENCILRT_FRAMES=0): expected libc++abi's terminate:\n%s", show(p))


# --- sampled PCs ---------------------------------------------------------------------

C_FUNCTIONS = ("vm_run", "vm_call", "vm_jit_run", "vm_native", "vm_print")


def shim_row_starts(ctx):
    """Offsets in the shim where a CFI row begins, from the generated header."""
    text = read(os.path.join(cross_build(ctx), "stencils", "jit_stencils-%s.h" % A64))
    m = re.search(r"The shim's FDE instructions \(padding removed\); its rows:\n(.*?)\*/", text,
                  re.S)
    check(m, "no shim rows in the AArch64 header")
    start = int(re.search(r"#define SG_SHIM_FDE_START (0x[0-9a-f]+)", text).group(1), 16)
    return {start + int(x, 16) for x in re.findall(r"shim\+0x([0-9a-f]+):", m.group(1))}


def c_row_starts(ctx, exe):
    """{function: offsets where a CFI row begins}, from llvm-dwarfdump's rows."""
    nm = ctx.run(["llvm-nm-22", "--defined-only", exe], timeout=T, check=True).stdout
    addr = {n: int(a, 16) for a, n in re.findall(r"^([0-9a-f]+) [Tt] (\w+)$", nm, re.M)}
    dump = ctx.run(["llvm-dwarfdump-22", "--eh-frame", exe], timeout=T, check=True).stdout
    fdes = []
    for block in re.split(r"\n(?=[0-9a-f]+ [0-9a-f]+ [0-9a-f]+ (?:FDE|CIE))", dump):
        m = re.match(r"[0-9a-f]+ [0-9a-f]+ [0-9a-f]+ FDE cie=[0-9a-f]+ "
                     r"pc=([0-9a-f]+)\.\.\.([0-9a-f]+)", block)
        if m:
            rows = {int(r, 16) for r in re.findall(r"^\s+0x([0-9a-f]+): CFA=", block, re.M)}
            fdes.append((int(m.group(1), 16), int(m.group(2), 16), rows))
    out = {}
    for name in C_FUNCTIONS:
        check(name in addr, "%s is not in %s", name, exe)
        f = [rows for lo, hi, rows in fdes if lo <= addr[name] < hi]
        check(len(f) == 1, "%d FDEs cover %s", len(f), name)
        out[name] = {r - addr[name] for r in f[0]}
    return out


SUMMARY = (r"^jit_instructions (\d+) covered (\d+) coverage ([\d.]+) samples (\d+) "
           r"jit_samples (\d+) reached_main (\d+) bad (\d+) runs (\d+) wrong_results (\d+) "
           r"seconds ([\d.]+)$")


def test_aarch64_llvm_unwind_at_sampled_pcs(ctx):
    # Only main and the VM's functions are exported (a64_sample sizes them with
    # dladdr1): with -rdynamic the program would export LLVM's _Unwind_Find_FDE,
    # and libgcc_s's own calls to it would bind to LLVM's: no reference then.
    exe = build(ctx, "a64_sample_llvm",
                ["tests/aarch64/a64_sample.c", "tests/aarch64/a64_glue.c",
                 "tests/common/tvm_glue.c", "stencils/run.c", "stencils/loader.c",
                 "stencils/interp.c", "stencils/jit.c", "stencils/chain.c"],
                "-Wno-sometimes-uninitialized", "-Wl,--export-dynamic-symbol=main",
                "-Wl,--export-dynamic-symbol=vm_*")
    dyn = ctx.run(["llvm-nm-22", "-D", "--defined-only", exe], timeout=T, check=True).stdout
    check("_Unwind_" not in dyn, "the program exports unwinder symbols:\n%s", dyn)
    tvm = ctx.path("tests", "aarch64", "sample.tvm")
    # At least SAMPLE_SECONDS, and on a slow machine longer, until 98% of
    # the JIT instructions were sampled (the rare ones run once per run of
    # main): coverage counts samples, never seconds.
    p = run(ctx, exe, tvm, "--seconds", str(SAMPLE_SECONDS), "--until-coverage", "0.98",
            "--compare-libgcc", singlestep=True, timeout=6 * SAMPLE_SECONDS + 120)
    m = re.search(SUMMARY, p.stdout, re.M)
    mc = re.search(r"^c_instructions (\d+) c_covered (\d+) c_samples (\d+) c_bad (\d+) "
                   r"walk_faults (\d+)$", p.stdout, re.M)
    mg = re.search(r"^compare_libgcc samples (\d+) differ (\d+) libgcc_bad (\d+)$", p.stdout,
                   re.M)
    check(m and mc and mg, "no summary:\n%s", show(p))
    total, covered, cov = int(m.group(1)), int(m.group(2)), float(m.group(3))
    jit_samples, wrong = int(m.group(5)), int(m.group(9))
    c_total, c_covered, c_samples = (int(x) for x in mc.groups()[:3])
    faults = int(mc.group(5))
    compared, libgcc_bad = int(mg.group(1)), int(mg.group(3))
    check(wrong == 0, "wrong results:\n%s", show(p))
    check(total > 150 and jit_samples > 1000 and cov >= 0.95,
          "too little was sampled (%.1f%% of %d JIT instructions):\n%s", 100 * cov, total,
          p.stdout[-3000:])
    check(c_covered >= 0.9 * c_total, "only %d of %d C instructions sampled", c_covered, c_total)
    check(libgcc_bad == 0 and compared == jit_samples + c_samples,
          "libgcc, the reference, was wrong at %d of %d samples:\n%s", libgcc_bad, compared,
          p.stdout[-4000:])

    # Where LLVM's walk differed from libgcc's (or was judged bad): only at
    # the first instruction of a CFI row or of an executor.
    shim_rows, c_rows = shim_row_starts(ctx), c_row_starts(ctx, exe)
    pcs = re.findall(r"^pc (jit|c) (\w+)\+0x([0-9a-f]+) samples (\d+) bad (\d+) differ (\d+) "
                     r"faults (\d+) prev (\w+)((?:\n  .*)*)", p.stdout, re.M)
    stray, jit_pcs, c_pcs = [], [], []
    for kind, name, off, n, bad, differ, nfault, prev, chains in pcs:
        off = int(off, 16)
        where = "%s+0x%x" % (name, off)
        text = "%s (%s of %s samples, instruction before: %s)%s" % (where, differ, n, prev,
                                                                    chains)
        if kind == "jit":
            ok = off in shim_rows if name == "shim" else off == 0
            jit_pcs.append(where)
        else:
            ok = off in c_rows[name]
            c_pcs.append(where)
        if not ok:
            stray.append(text)
    print("     aarch64 LLVM libunwind at sampled PCs: %d of %d JIT instructions sampled, LLVM's "
          "walk = libgcc's at all but %d (%s); in C code it differs at %d of %d sampled "
          "instructions (%s), %d walks faulted; %d samples in %s s under qemu -singlestep" %
          (covered, total, len(jit_pcs), ", ".join(jit_pcs), len(c_pcs), c_covered,
           ", ".join(c_pcs), faults, compared, m.group(10)))
    check(not stray, "LLVM's walk differs from libgcc's at PCs that begin no CFI row "
          "(shim rows at %s; C rows %s):\n%s", sorted(hex(r) for r in shim_rows),
          {k: sorted(hex(r) for r in v) for k, v in c_rows.items()}, "\n".join(stray))
    check(jit_pcs and c_pcs and any(w.startswith("shim+") for w in jit_pcs),
          "LLVM's libunwind agreed with libgcc at every sampled JIT PC (%s) or every C PC (%s): "
          "if it now applies the row at an interrupted PC, update docs/runtime.md (Registration with unwinders)",
          jit_pcs, c_pcs)

    # Control: with no registration LLVM's walk fails at every JIT sample.
    p = run(ctx, exe, tvm, "--seconds", "3", singlestep=True, timeout=120,
            env={"STENCILRT_FRAMES": "0"})
    m = re.search(SUMMARY, p.stdout, re.M)
    check(m and int(m.group(5)) > 50 and int(m.group(6)) == 0 and
          int(m.group(7)) == int(m.group(5)) and p.returncode == 1,
          "control (STENCILRT_FRAMES=0) did not fail every sample:\n%s", p.stdout[-2000:])


if MISSING:
    sys.stderr.write("test_aarch64_llvm_libunwind: %s missing: its tests are not collected\n" %
                     ", ".join(MISSING))
    for _name in [n for n in list(globals()) if n.startswith("test_")]:
        del globals()[_name]
