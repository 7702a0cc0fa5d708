"""What the build-engine suites share (test_cmake, test_make_recipe,
test_launcher_caches, test_distcc, test_icecc): an installed tree, a VM
project outside this repository, and daemons started and stopped by pid."""
import os
import shutil
import signal
import time

from sgtest import TestFailure, check, read, write

# The consumer's ops: tinyvm's, whose arith.c the edit tests change.
VM_FILES = ("ops", "shim.c", "tinyvm.h", "stencil_template.h")
EDITED_OP = os.path.join("ops", "arith.c")


def install(ctx):
    """`meson install` of the build under test into ctx.tmp/dest: (prefix, env
    that finds its stencilgen on PATH)."""
    dest = os.path.join(ctx.tmp, "dest")
    ctx.run(["meson", "install", "-C", ctx.build, "--destdir", dest, "--quiet"], check=True,
            timeout=600)
    prefix = os.path.join(dest, "usr", "local")
    bindir = os.path.join(prefix, "bin")
    check(os.path.exists(os.path.join(bindir, "stencilgen")), "stencilgen was not installed")
    libdirs = [root for root, _, files in os.walk(prefix) if "libstencilrt.so" in files]
    check(libdirs, "libstencilrt.so was not installed")
    return prefix, {"PATH": bindir + os.pathsep + os.environ.get("PATH", ""),
                    "LD_LIBRARY_PATH": libdirs[0]}


def vm_project(ctx, name, triples=("x86_64-unknown-linux-gnu",)):
    """A VM outside the repository: tinyvm's ops, shim and template, the
    consumer's main.c (includes jit_stencils.h), and other.c (does not)."""
    proj = os.path.join(ctx.tmp, name)
    os.makedirs(proj)
    for f in VM_FILES:
        src = ctx.path("stencils", f)
        (shutil.copytree if os.path.isdir(src) else shutil.copy)(src, os.path.join(proj, f))
    shutil.copy(ctx.path("templates", "stencil_op.h"), proj)
    shutil.copy(ctx.path("tests", "fixtures", "consumer", "main.c"), proj)
    write(os.path.join(proj, "other.c"), "int other(int x);\nint other(int x) { return x + 1; }\n")
    write(os.path.join(proj, "stencils.yaml"), "targets:\n%s" % "".join(
        "  - triple: %s\n" % t for t in triples) + """template: stencil_template.h
shim: {source: shim.c, function: tinyvm_shim}
ops: [ops/stack.c, ops/arith.c, ops/compare.c, ops/control.c, ops/calls.c]
include_dirs: [.]
symbols: [vm_call, vm_print, vm_native, vm_trap]
""")
    return proj


def edit_op(proj, k=0):
    """Change what op add computes (a new stencil), as a user's edit would."""
    path = os.path.join(proj, EDITED_OP)
    text = read(path)
    at = text.index("CONTINUE();", text.index("OP(add)"))
    write(path, text[:at] + "tos ^= 0x%x;\n    " % (0x40 + k) + text[at:])


def wait_for(what, cond, timeout=20.0):
    """Poll cond() until it is true, at most `timeout` seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.05)
    raise TestFailure("timed out after %ss waiting for %s" % (timeout, what))


def stop(pid, timeout=10.0):
    """Stop a process this test started: SIGTERM, then SIGKILL after `timeout`."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return

    def gone():
        try:
            os.kill(pid, 0)
            with open("/proc/%d/stat" % pid) as f:  # a zombie of ours counts as gone
                return f.read().split(")")[-1].split()[0] == "Z"
        except (ProcessLookupError, FileNotFoundError):
            return True
    try:
        wait_for("pid %d to exit" % pid, gone, timeout)
    except TestFailure:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
