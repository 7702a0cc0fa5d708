"""`meson install` and the docs' snippet for another meson project: the
snippet is taken verbatim from docs/build.md, built against the installed
stencilgen and stencilrt (pkg-config), and the JIT it builds runs."""
import os
import re
import shutil

from sgtest import check, read, write

ASAN = False  # an install of the sanitized build adds nothing the plain one does not test


def readme_snippet(ctx):
    text = read(ctx.path("docs", "build.md"))
    m = re.search(r"## Using stencilgen from another meson project\n\n```meson\n(.*?)```", text,
                  re.S)
    check(m, "docs/build.md has no meson snippet under 'Using stencilgen from another meson "
          "project'")
    return m.group(1)


def test_readme_meson_snippet_builds_a_jit(ctx):
    dest = os.path.join(ctx.tmp, "dest")
    ctx.run(["meson", "install", "-C", ctx.build, "--destdir", dest, "--quiet"], check=True,
            timeout=600)
    prefix = os.path.join(dest, "usr", "local")
    bindir = os.path.join(prefix, "bin")
    pcdirs = [os.path.join(root) for root, _, files in os.walk(prefix) if "stencilrt.pc" in files]
    check(os.path.exists(os.path.join(bindir, "stencilgen")), "stencilgen was not installed")
    check(os.path.exists(os.path.join(bindir, "stencilrt-stack")),
          "stencilrt-stack was not installed")
    check(os.path.exists(os.path.join(prefix, "include", "stencilrt_registry.h")),
          "the registry's layout header was not installed")
    check(pcdirs, "stencilrt.pc was not installed")
    libdir = os.path.dirname(pcdirs[0])

    proj = os.path.join(ctx.tmp, "myjit")
    os.makedirs(proj)
    check(os.path.exists(os.path.join(prefix, "include", "stencilgen", "stencil_op.h")),
          "the generic op template was not installed")
    # The VM's own files only: its template includes stencil_op.h, which the
    # installed stencilgen provides.
    for name in ("ops", "shim.c", "tinyvm.h", "stencil_template.h"):
        src = ctx.path("stencils", name)
        (shutil.copytree if os.path.isdir(src) else shutil.copy)(src, os.path.join(proj, name))
    shutil.copy(ctx.path("tests", "fixtures", "consumer", "main.c"), proj)
    write(os.path.join(proj, "stencils.yaml"), """targets:
  - triple: x86_64-unknown-linux-gnu
template: stencil_template.h
shim: {source: shim.c, function: tinyvm_shim}
ops: [ops/stack.c, ops/arith.c, ops/compare.c, ops/control.c, ops/calls.c]
include_dirs: [.]
symbols: [vm_call, vm_print, vm_native, vm_trap]
""")
    write(os.path.join(proj, "meson.build"),
          "project('myjit', 'c', default_options: ['c_std=c11'])\n" + readme_snippet(ctx))
    env = {"PATH": bindir + os.pathsep + os.environ.get("PATH", ""),
           "PKG_CONFIG_PATH": pcdirs[0], "PKG_CONFIG_SYSROOT_DIR": dest,
           "LD_LIBRARY_PATH": libdir}
    ctx.run(["meson", "setup", "b"], cwd=proj, env=env, check=True)
    ctx.run(["ninja", "-C", "b"], cwd=proj, env=env, check=True)
    # The installed generator finds its clang module too: compiles run in forked children.
    p = ctx.run([os.path.join(bindir, "stencilgen"), "build", "--manifest",
                 os.path.join(proj, "stencils.yaml"), "--outdir", os.path.join(proj, "out"), "-v"],
                env=env, check=True)
    check("(clang's driver and cc1 in forked children)" in p.stderr, "the installed stencilgen "
          "started clang for its compiles (its clang module not found?): %s", p.stderr[-800:])
    p = ctx.run([os.path.join(proj, "b", "myjit")], env=env, check=True)
    check(p.stdout.strip() == "42", "the JIT built from the docs' snippet printed %r", p.stdout)
