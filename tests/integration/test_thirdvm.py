"""A third VM written from the README alone, now docs/ (tests/thirdvm: rvm, an
accumulator machine with a register file, its own op signature and a shim
whose parameters come in another order), built like a project outside this
repository: only the *installed* tree is used (`meson install --destdir`),
stencilgen from its bin/ on PATH, stencilrt's headers and library through
pkg-config, linked with an rpath.

* x86-64: programs give their known results (a loop, a factorial, 64-bit
  immediates, calls JIT -> C -> JIT); glibc backtrace() taken in a C helper
  called from JIT code names every JIT frame and every C frame of the VM down
  to main, and stops at the first JIT frame when the runtime does not
  register its unwind tables (STENCILRT_FRAMES=0); GDB's backtrace from the
  helper names the stencils (op@function[i]) and reaches main.
* AArch64: the cross build installed the same way, the VM cross-compiled
  against it with aarch64-linux-gnu-gcc and pkg-config, run under qemu-user:
  the same results and the same backtrace.

The cross build is <build>-aarch64 (or $STENCILGEN_AARCH64_BUILD), as for
test_aarch64_qemu. Without the cross toolchain the AArch64 test is not
collected (a note says so on stderr); with it, a missing cross build is a
failure."""
import atexit
import os
import re
import shlex
import shutil
import sys
import tempfile

from sgtest import check

ASAN = False  # nothing here exercises the generator's parsers or error paths

VM = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "thirdvm")
A64 = "aarch64-unknown-linux-gnu"
SYSROOT = "/usr/aarch64-linux-gnu"
QEMU = ["qemu-aarch64", "-L", SYSROOT]
T = 300

# (program, initial accumulator, what main returns)
PROGRAMS = [
    ("sum.rvm", "1000000", str(1000000 * 1000001 // 2)),
    ("fact.rvm", "20", "2432902008176640000"),
    ("imm.rvm", "0", "-45"),
    ("nested.rvm", "6", str((6 + 1) ** 2 + 100)),
]

# The backtrace nested.rvm's `trace` prints, innermost first, down to main:
# every JIT frame (executor and instruction, named by sr_lookup_pc) unwinds
# straight to the C code that entered the shim (rvm_run), and rvm_call is the
# helper that re-entered JIT code.
TRACE = ["c rvm_trace", "jit leaf[2]", "c rvm_run", "c rvm_call", "jit middle[0]",
         "c rvm_run", "c rvm_call", "jit main[1]", "c rvm_run", "c main"]

# The same stack as GDB names it: JIT frames are op@function[instruction].
GDB_FRAMES = ["rvm_trace", "trace@leaf[2]", "rvm_run", "rvm_call", "call@middle[0]",
              "rvm_run", "rvm_call", "call@main[1]", "rvm_run", "main"]

MISSING_A64 = [t for t in ("qemu-aarch64", "aarch64-linux-gnu-gcc") if not shutil.which(t)]
if not os.path.isdir(SYSROOT):
    MISSING_A64.append(SYSROOT)

# Installs and builds are shared by the tests of this module (once per build
# directory), in a directory of their own that outlives each test's ctx.tmp.
_work = tempfile.mkdtemp(prefix="sgtest-thirdvm-")
atexit.register(shutil.rmtree, _work, True)
_cache = {}  # ctx.build: {"dir", "gen", "x86"}


def work(ctx):
    """This module's directory for ctx.build's installs and programs."""
    if ctx.build not in _cache:
        _cache[ctx.build] = {"dir": tempfile.mkdtemp(dir=_work)}
    return _cache[ctx.build]


def install(ctx, build, name):
    """meson install build into a fresh destdir; returns (destdir, prefix)."""
    dest = os.path.join(work(ctx)["dir"], name)
    shutil.rmtree(dest, ignore_errors=True)
    # meson install runs ninja first, so a stale build is brought up to date.
    ctx.run(["meson", "install", "-C", build, "--destdir", dest, "--quiet"], check=True,
            timeout=1200)
    return dest, os.path.join(dest, "usr", "local")


def pc_dir(prefix):
    dirs = [root for root, _, files in os.walk(prefix) if "stencilrt.pc" in files]
    check(len(dirs) == 1, "stencilrt.pc installed %d times under %s", len(dirs), prefix)
    return dirs[0]


def generated(ctx):
    """The VM's sources copied out of the repository and its headers generated
    by the installed stencilgen (both targets, from the manifest); returns
    (vm directory, gen directory, installed x86-64 prefix, pkg-config env)."""
    w = work(ctx)
    if "gen" not in w:
        dest, prefix = install(ctx, ctx.build, "dest-x86_64")
        bindir = os.path.join(prefix, "bin")
        for f in ("bin/stencilgen", "include/stencilrt.h", "include/stencilrt_abi.h",
                  "include/stencilgen/stencil_op.h"):
            check(os.path.exists(os.path.join(prefix, f)), "%s was not installed", f)
        vm = os.path.join(w["dir"], "rvm")
        shutil.rmtree(vm, ignore_errors=True)
        shutil.copytree(VM, vm)
        # Nothing of the build tree: stencilgen is found on PATH, in the install.
        env = {"PATH": bindir + os.pathsep + os.environ.get("PATH", ""),
               "PKG_CONFIG_PATH": pc_dir(prefix), "PKG_CONFIG_SYSROOT_DIR": dest,
               "PKG_CONFIG_LIBDIR": ""}
        found = ctx.run(["sh", "-c", "command -v stencilgen"], env=env, timeout=60).stdout
        check(found.strip() == os.path.join(bindir, "stencilgen"),
              "stencilgen on PATH is %r, not the installed one", found)
        p = ctx.run(["stencilgen", "build", "--manifest", "rvm.yaml", "--outdir", "gen", "-v"],
                    cwd=vm, env=env, check=True, timeout=T)
        for triple in ("x86_64-unknown-linux-gnu", A64):
            check(re.search(r"^stencilgen: %s: 14 ops \(14 compiled, 0 cached\)" % triple,
                            p.stdout + p.stderr, re.M),
                  "stencilgen did not build rvm's 14 ops for %s:\n%s", triple,
                  p.stdout + p.stderr)
        w["gen"] = (vm, os.path.join(vm, "gen"), prefix, env)
    return w["gen"]


def compile_vm(ctx, cc, vm, gen, env, out):
    """docs/build.md's recipe, with the compiler and pkg-config the env names.
    -rdynamic lets backtrace_symbols name the VM's C functions."""
    cmd = ("{cc} -std=c11 -O2 -g -Wall -Wextra -Werror -fno-omit-frame-pointer -rdynamic "
           "-I {gen} -I {vm} $(pkg-config --cflags stencilrt) {vm}/main.c "
           "$(pkg-config --libs stencilrt) "
           "-Wl,-rpath,\"$(pkg-config --variable=libdir stencilrt)\" -o {out}").format(
        cc=cc, gen=shlex.quote(gen), vm=shlex.quote(vm), out=shlex.quote(out))
    ctx.run(["sh", "-ec", cmd], env=env, check=True, timeout=T)
    return out


def x86_vm(ctx):
    w = work(ctx)
    if "x86" not in w:
        vm, gen, prefix, env = generated(ctx)
        exe = compile_vm(ctx, "cc", vm, gen, env, os.path.join(w["dir"], "rvm-x86_64"))
        w["x86"] = (exe, vm, prefix)
    return w["x86"]


def check_linked_to(ctx, exe, machine, libdir):
    """exe is a program for machine that loads libstencilrt.so from the
    install, found through its rpath."""
    h = ctx.run(["readelf", "-h", exe], check=True, timeout=60).stdout
    check(re.search(r"Machine:\s+%s$" % machine, h, re.M), "%s is not for %s:\n%s", exe,
          machine, h)
    d = ctx.run(["readelf", "-d", exe], check=True, timeout=60).stdout
    check(re.search(r"\(NEEDED\)\s+Shared library: \[libstencilrt\.so\.0\]", d),
          "%s does not load libstencilrt.so.0:\n%s", exe, d)
    m = re.search(r"\((?:RUNPATH|RPATH)\)\s+Library r(?:un)?path: \[(.*)\]", d)
    check(m and m.group(1) == libdir, "%s: rpath %s, want the installed %s", exe,
          m and m.group(1), libdir)


def run_programs(ctx, argv0, vm):
    env = {"LD_LIBRARY_PATH": ""}  # the rpath alone finds the library
    for prog, acc, want in PROGRAMS:
        p = ctx.run(argv0 + [os.path.join(vm, "programs", prog), acc], env=env, timeout=120)
        check(p.returncode == 0 and p.stdout == want + "\n",
              "%s %s: printed %r (exit %d), want %s\nstderr:\n%s", prog, acc, p.stdout,
              p.returncode, want, p.stderr[-3000:])


def trace_frames(stderr):
    """nested.rvm's backtrace lines as 'c FUNCTION' / 'jit FUNC[i]'."""
    frames = []
    for line in stderr.splitlines():
        m = re.match(r"#\d+ (jit \S+|c \S*\((\w*)\+0x[0-9a-f]+\) \[0x[0-9a-f]+\])$", line)
        if m:
            frames.append("c " + m.group(2) if m.group(2) is not None else m.group(1))
        elif line.startswith("#"):
            frames.append(line.split(" ", 1)[1])
    return frames


def check_backtrace(ctx, argv0, vm):
    """backtrace() from rvm_trace walks the JIT frames down to main; with the
    runtime's unwind registration off it stops at the first JIT frame."""
    nested = [os.path.join(vm, "programs", "nested.rvm"), "6"]
    p = ctx.run(argv0 + nested, check=True, timeout=120)
    frames = trace_frames(p.stderr)
    check(frames[:len(TRACE)] == TRACE, "backtrace() from the helper:\n  %s\nwant:\n  %s\n%s",
          frames, TRACE, p.stderr)
    p = ctx.run(argv0 + nested, env={"STENCILRT_FRAMES": "0"}, check=True, timeout=120)
    frames = trace_frames(p.stderr)
    check(frames == TRACE[:2], "with STENCILRT_FRAMES=0 backtrace() went on past the JIT "
          "frame (so the unwinding above is not the runtime's doing?):\n%s", p.stderr)


def test_thirdvm_x86_64_installed_runs(ctx):
    """The VM, built from the installed stencilgen and stencilrt only, loads
    the installed library through its rpath and computes known results."""
    exe, vm, prefix = x86_vm(ctx)
    check_linked_to(ctx, exe, "Advanced Micro Devices X86-64", os.path.dirname(pc_dir(prefix)))
    run_programs(ctx, [exe], vm)


def test_thirdvm_x86_64_backtrace_through_jit(ctx):
    """glibc backtrace() (libgcc's unwinder) in a C helper called from JIT
    code: every JIT and C frame named, down to main."""
    exe, vm, _ = x86_vm(ctx)
    check_backtrace(ctx, [exe], vm)


def test_thirdvm_x86_64_gdb_backtrace(ctx):
    """GDB (JIT interface) stops in the helper and its backtrace names each
    JIT frame op@function[i] between the VM's C frames, down to main."""
    exe, vm, _ = x86_vm(ctx)
    p = ctx.run(["gdb", "-batch", "-nx", "-iex", "set debuginfod enabled off",
                 "-ex", "break rvm_trace", "-ex", "run", "-ex", "bt",
                 "--args", exe, os.path.join(vm, "programs", "nested.rvm"), "6"],
                timeout=120)
    bt = [m.group(1) for m in re.finditer(r"^#\d+\s+(?:0x[0-9a-f]+ in )?(\S+) \(", p.stdout,
                                          re.M)]
    check(bt[:len(GDB_FRAMES)] == GDB_FRAMES, "GDB's backtrace:\n  %s\nwant:\n  %s\n%s\n%s",
          bt, GDB_FRAMES, p.stdout[-3000:], p.stderr[-2000:])


def test_thirdvm_aarch64_installed_qemu(ctx):
    """The cross build's install, pkg-config pointed at it, the VM built with
    aarch64-linux-gnu-gcc from the header the installed (x86-64) stencilgen
    wrote: known results and backtrace() through JIT frames under qemu."""
    xb = os.path.abspath(os.environ.get("STENCILGEN_AARCH64_BUILD") or ctx.build + "-aarch64")
    check(os.path.exists(os.path.join(xb, "build.ninja")),
          "no AArch64 cross build at %s: configure it with\n"
          "  meson setup %s --cross-file cross/aarch64-linux-gnu.ini", xb, xb)
    vm, gen, _, _ = generated(ctx)
    dest, prefix = install(ctx, xb, "dest-aarch64")
    # The generator runs on the build machine: a cross build installs none.
    check(not os.path.exists(os.path.join(prefix, "bin", "stencilgen")),
          "the cross build installed a stencilgen")
    pcdir = pc_dir(prefix)
    env = {"PKG_CONFIG_LIBDIR": pcdir, "PKG_CONFIG_SYSROOT_DIR": dest, "PKG_CONFIG_PATH": ""}
    exe = compile_vm(ctx, "aarch64-linux-gnu-gcc", vm, gen, env, os.path.join(ctx.tmp, "rvm"))
    check_linked_to(ctx, exe, "AArch64", os.path.dirname(pcdir))
    run_programs(ctx, QEMU + [exe], vm)
    check_backtrace(ctx, QEMU + [exe], vm)


if MISSING_A64:
    sys.stderr.write("test_thirdvm: the AArch64 cross toolchain is missing (%s): its test is "
                     "not collected\n" % ", ".join(MISSING_A64))
    del test_thirdvm_aarch64_installed_qemu
