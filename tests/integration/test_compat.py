"""Upgrades never break a VM: frozen copies of what earlier releases' users
wrote (tests/fixtures/compat) build with this release's defaults and run.

* release-0.1: the first release's tinyvm, verbatim: its self-contained op
  template (no stencil_op.h; operands through GOT slots), its manifest, shim
  and ops.
* before-batched: tinyvm as it was just before batched units, carrying its
  own copy of that release's stencil_op.h (found first through include_dirs),
  which has no STENCIL_ENTRY: a VM that copied the template, as the README
  then suggested, and never updated it.

Each builds with the default options (batched units) with no diagnostic, to
the same headers as per-op units, and a VM program of that release's shape
(tests/fixtures/compat/consumer.c) runs on them: a loop's result through the
shim, and glibc's backtrace() from a C helper called by JIT code reaching main
(and not reaching it with the runtime's unwind registration off, the control).
"""
import glob
import json
import os
import re

from sgtest import check, read

ASAN = False  # the generator's paths here are the ordinary ones, run in every other module

TRIPLE = "x86_64-unknown-linux-gnu"
FIXTURES = {
    # name: (ops, targets)
    "release-0.1": (21, [TRIPLE]),
    "before-batched": (22, [TRIPLE, "aarch64-unknown-linux-gnu"]),
}


def fixture(ctx, name, *parts):
    return ctx.path("tests", "fixtures", "compat", name, *parts)


def headers(out):
    return {os.path.basename(p): read(p, "rb")
            for p in sorted(glob.glob(os.path.join(out, "jit_stencils*.h")))}


def build(ctx, name, out, *extra):
    manifest = fixture(ctx, name, "stencils", "stencils.yaml")
    return ctx.build_stencils(manifest, out, "-j", "2", *extra, check=False, timeout=600)


def check_builds_batched(ctx, name):
    nops, targets = FIXTURES[name]
    out = os.path.join(ctx.tmp, name)
    commands = os.path.join(ctx.tmp, name + ".json")
    p = build(ctx, name, out, "--compile-commands", commands)
    check(p.returncode == 0 and not p.stderr, "%s: the default build exited %d and said:\n%s",
          name, p.returncode, p.stderr[-3000:])
    with open(commands) as f:
        batches = [c for c in json.load(f) if "-DSTENCILGEN_BATCH" in c["arguments"]]
    check(batches and len(batches) < len(targets) * nops,
          "%s: not compiled in batches (%d batched units for %d ops and %d targets)", name,
          len(batches), nops, len(targets))
    for triple in targets:
        check(re.search(r"^stencilgen: %s: %d ops " % (re.escape(triple), nops), p.stdout,
                        re.M), "%s: %s: not %d ops: %s", name, triple, nops, p.stdout)
    per_op = os.path.join(ctx.tmp, name + "-per-op")
    q = build(ctx, name, per_op, "--units", "per-op")
    check(q.returncode == 0, "%s: per-op build: %s", name, q.stderr[-2000:])
    check(headers(out) == headers(per_op) and len(headers(out)) == len(targets) + 1,
          "%s: batched headers differ from per-op ones", name)
    return out


def check_runs(ctx, name, out):
    exe = os.path.join(ctx.tmp, "consumer-" + name)
    ctx.run(["gcc", "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-rdynamic",
             "-I", out, "-I", ctx.path("runtime"), "-I", fixture(ctx, name, "stencils"),
             fixture(ctx, "consumer.c"), os.path.join(ctx.build, "runtime", "libstencilrt.a"),
             "-lpthread", "-o", exe], timeout=120, check=True)
    p = ctx.run([exe, "100000"], timeout=60)
    check(p.returncode == 0 and "sum 5000050000\n" in p.stdout and
          "backtrace reaches main: yes" in p.stdout,
          "%s: the VM's program: exit %d\n%s%s", name, p.returncode, p.stdout, p.stderr)
    p = ctx.run([exe, "100000"], timeout=60, env={"STENCILRT_FRAMES": "0"})
    check(p.returncode == 1 and "backtrace reaches main: no" in p.stdout,
          "%s: control: with the unwind registration off the walk still reached main: %s",
          name, p.stdout)


def test_the_first_releases_tinyvm_builds_batched_and_runs(ctx):
    out = check_builds_batched(ctx, "release-0.1")
    check_runs(ctx, "release-0.1", out)


def test_a_vm_with_its_own_pre_batching_stencil_op_h_builds_batched_and_runs(ctx):
    copy = read(fixture(ctx, "before-batched", "stencils", "stencil_op.h"))
    check("STENCIL_ENTRY" not in copy and "#include \"stencil_op.h\"" in
          read(fixture(ctx, "before-batched", "stencils", "stencil_template.h")),
          "the fixture no longer carries a copy of stencil_op.h without STENCIL_ENTRY")
    out = check_builds_batched(ctx, "before-batched")
    check_runs(ctx, "before-batched", out)
