"""Manifests that are too big, too deep, or say one thing twice: each is exit 2
at once, at the manifest's line:column, with a note pointing at the first of
two duplicates; no key's earlier value is silently dropped (or leaked: this
module also runs under the leak-checking ASan build), and the previous outputs
of a build stay as they were."""
import os
import time

from sgtest import TRIPLE, check, read, write

ASAN = True

TIMEOUT = 60


def expect_usage(p, what, *needles):
    detail = "exit %s\nstderr:\n%s" % (p.returncode, p.stderr[-3000:])
    check(p.returncode == 2, "%s: expected exit 2, got %s", what, detail)
    check("Sanitizer" not in p.stderr, "%s: sanitizer report\n%s", what, detail)
    for n in needles:
        check(n in p.stderr, "%s: stderr lacks %r\n%s", what, n, detail)


def check_manifest(ctx, path):
    return ctx.generator("check", "--manifest", path, "--target", TRIPLE, timeout=TIMEOUT)


def test_deep_nesting_is_refused_at_once(ctx):
    """100,000 nested lists (200 KB): libyaml alone takes minutes on this."""
    path = os.path.join(ctx.tmp, "deep.yaml")
    write(path, "targets: " + "[" * 100000 + "]" * 100000 + "\n")
    t0 = time.monotonic()
    p = check_manifest(ctx, path)
    expect_usage(p, "deep nesting", "deep.yaml:1:", "nests deeper than 8 levels")
    print("refused in %.2f s" % (time.monotonic() - t0))


def test_unbounded_and_oversized_input_is_refused(ctx):
    p = check_manifest(ctx, "/dev/zero")
    expect_usage(p, "/dev/zero", "manifest '/dev/zero' is larger than 1048576 bytes")
    path = os.path.join(ctx.tmp, "big.yaml")
    write(path, "# padding\n" * 110000)
    expect_usage(check_manifest(ctx, path), "2 MB manifest", "is larger than 1048576 bytes")


def bundled_manifest_copy(ctx):
    base = ctx.bundled_copy()
    return base, os.path.join(base, "stencils", "stencils.yaml")


def test_duplicate_keys_name_both_places(ctx):
    base, manifest = bundled_manifest_copy(ctx)
    text = read(manifest)
    cases = [
        ("top-level scalar", text + "template: stencil_template.h\n",
         "duplicate key 'template' in the manifest"),
        ("top-level list", text + "cflags: [-O1]\n", "duplicate key 'cflags' in the manifest"),
        ("mapping", text + "shim:\n  source: shim.c\n  function: tinyvm_shim\n",
         "duplicate key 'shim' in the manifest"),
        ("inside a target", text.replace("  - triple: x86_64-unknown-linux-gnu\n",
                                         "  - triple: x86_64-unknown-linux-gnu\n"
                                         "    cflags: []\n    cflags: [-O1]\n"),
         "duplicate key 'cflags' in target"),
        ("inside expect_frame", text.replace("ra_offset: -8}", "ra_offset: -8, cfa_offset: 8}"),
         "duplicate key 'cfa_offset' in expect_frame"),
    ]
    for what, body, needle in cases:
        path = os.path.join(os.path.dirname(manifest), "dup.yaml")
        write(path, body)
        p = check_manifest(ctx, path)
        expect_usage(p, what, needle, "first given here")
        lines = [l for l in p.stderr.splitlines() if "dup.yaml:" in l]
        check(len(lines) == 2 and lines[0] != lines[1], "%s: want an error and a note at two "
              "places:\n%s", what, p.stderr)


def test_repeated_symbols_and_op_files(ctx):
    """A symbol listed twice made a header that does not compile (exit 0)."""
    base, manifest = bundled_manifest_copy(ctx)
    out = os.path.join(ctx.tmp, "out")
    ctx.build_stencils(manifest, out, "--target", TRIPLE, timeout=240)
    before = {f: read(os.path.join(out, f), "rb") for f in os.listdir(out) if f.endswith(".h")}
    text = read(manifest)
    write(manifest, text.replace("symbols: [vm_call, vm_print, vm_native, vm_trap]",
                                 "symbols: [vm_call, vm_print, vm_native, vm_trap, vm_print]"))
    p = ctx.generator("build", "--manifest", manifest, "--outdir", out, "--target", TRIPLE,
                      timeout=240)
    expect_usage(p, "symbol twice", "'vm_print' is listed twice in 'symbols'",
                 "first listed here")
    after = {f: read(os.path.join(out, f), "rb") for f in os.listdir(out) if f.endswith(".h")}
    check(after == before, "outputs changed after a manifest error")
    write(manifest, text.replace("  - ops/arith.c\n", "  - ops/arith.c\n  - ops/arith.c\n"))
    expect_usage(check_manifest(ctx, manifest), "op file twice",
                 "is listed twice in 'ops'", "first listed here")
