"""The frame-pointer check reads each stencil with a linear sweep; control flow
that lands inside one of the instructions it read would run bytes it never
checked (tests/fixtures/fpcheck/jumps.c hides `movq %rax, %rbp` in a movabs
immediate). Every direct branch, every RIP-relative code address and every
absolute code address in the data must be an instruction start or the end of
the code, or the build fails with exit 1 naming the instruction and the
target; branches to instruction starts, loops and taking an instruction's
address pass (controls.c)."""
import os

from sgtest import TRIPLE, check

ASAN = True

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "fixtures", "fpcheck")
EXPECTED = [
    ("j_into_immediate", "jmp 0x4: jumps to +0x4, inside the instruction at +0x2 (movabsq"),
    ("j_past_the_end", "jumps to +0x42, outside the stencil's"),
    ("j_table_into_immediate", "data at +0x0 holds the code address +0x2, inside the "
                               "instruction (movabsq"),
    ("j_lea_into_immediate", "leaq 2(%rip), %rax: takes the address +0x9, inside the "
                             "instruction at +0x7 (movabsq"),
]


def test_control_flow_into_unchecked_bytes_is_refused(ctx):
    out = os.path.join(ctx.tmp, "out")
    p = ctx.build_stencils(os.path.join(FIXTURES, "jumps.yaml"), out, check=False, timeout=240)
    check(p.returncode == 1, "expected exit 1, got %d:\n%s", p.returncode, p.stderr[-4000:])
    check("Sanitizer" not in p.stderr, "sanitizer report:\n%s", p.stderr[-4000:])
    for op, needle in EXPECTED:
        lines = [l for l in p.stderr.splitlines()
                 if "op %s (%s)" % (op, TRIPLE) in l and needle in l]
        check(len(lines) == 1, "op %s: no single error with %r:\n%s", op, needle, p.stderr)
    check(not os.path.exists(os.path.join(out, "jit_stencils.h")), "a header was written")


def test_branches_to_instruction_starts_pass(ctx):
    p = ctx.generator("check", "--manifest", os.path.join(FIXTURES, "controls.yaml"),
                      timeout=240)
    check(p.returncode == 0, "controls refused (exit %d):\n%s", p.returncode, p.stderr[-4000:])
