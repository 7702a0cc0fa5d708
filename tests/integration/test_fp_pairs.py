"""AArch64 Mach-O: LLVM saves x29 with x30 whenever it saves x30 (compact
unwind's frame records), so tinyvm's call, print and native ops bracket their
call with `stp x29, x30, [sp, #-16]!` and `ldp x29, x30, [sp], #16`. The ldp
writes the frame pointer the value it had, and the check accepts it on that
target only when every path to it went through the stp, with nothing between
that moves sp or stores at sp (tests/fixtures/fpcheck/pairs.c). On Linux the same
op is refused: the allowance belongs to the target."""
import os

from sgtest import check, read

ASAN = True

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "fixtures", "fpcheck")
TRIPLE = "aarch64-apple-darwin"
REFUSED = {"pair_no_save": 0x4, "pair_sp_moved": 0xc, "pair_slot_stored": 0x8,
           "pair_branched_into": 0x8, "pair_other_register": 0x4, "pair_one_path_unsaved": 0x10}
ACCEPTED = ["pair_ok", "pair_two_exits"]


def errors_by_op(stderr, triple):
    found = {}
    for line in stderr.splitlines():
        for op in list(REFUSED) + ACCEPTED:
            if "op %s (%s) at +0x" % (op, triple) in line and "writes the frame pointer" in line:
                found[op] = int(line.split(" at +0x")[1].split(":")[0], 16)
    return found


def test_frame_record_restores_are_accepted_only_when_proven(ctx):
    out = os.path.join(ctx.tmp, "out")
    p = ctx.build_stencils(os.path.join(FIXTURES, "pairs.yaml"), out, check=False, timeout=240)
    check(p.returncode == 1, "expected exit 1, got %d:\n%s", p.returncode, p.stderr[-4000:])
    check("Sanitizer" not in p.stderr, "sanitizer report:\n%s", p.stderr[-4000:])
    found = errors_by_op(p.stderr, TRIPLE)
    check(found == REFUSED, "refused ops and offsets: want %s, got %s\n%s", REFUSED, found,
          p.stderr)
    check("not proven to reload" in p.stderr, "the error does not say why the ldp was refused")
    check(not os.path.exists(os.path.join(out, "jit_stencils.h")), "a header was written")


def test_the_allowance_is_the_targets(ctx):
    # The same ops for AArch64 Linux: the proven pair is refused there too.
    manifest = ctx.fixture_manifest(
        os.path.join(FIXTURES, "pairs.yaml"), os.path.join(ctx.tmp, "linux.yaml"),
        ("triple: %s" % TRIPLE, "triple: aarch64-unknown-linux-gnu"),
        ("pairs.c", os.path.join(FIXTURES, "pairs.c")))
    p = ctx.build_stencils(manifest, os.path.join(ctx.tmp, "out-linux"), check=False, timeout=240)
    check(p.returncode == 1, "expected exit 1, got %d:\n%s", p.returncode, p.stderr[-4000:])
    found = errors_by_op(p.stderr, "aarch64-unknown-linux-gnu")
    check(found.get("pair_ok") == 0x8, "pair_ok's ldp (+0x8) not refused on Linux:\n%s",
          p.stderr)
    check("not proven" not in p.stderr, "Linux errors speak of the Mach-O allowance:\n%s",
          p.stderr)


def test_bundled_calls_keep_their_frame_record(ctx):
    # tinyvm's ops that call out are what the allowance is for: they build,
    # and each restores x29 exactly once, right before its continuation.
    header = read(os.path.join(ctx.build, "stencils", "jit_stencils-%s.h" % TRIPLE))
    for op in ("call", "print", "native"):
        body = header[header.index("/* %s - " % op):]
        body = body[:body.index("*/")]
        check(body.count("ldp x29, x30, [sp], #16") == 1 and
              body.count("stp x29, x30, [sp, #-16]!") == 1,
              "op %s: not one stp/ldp frame record:\n%s", op, body)
