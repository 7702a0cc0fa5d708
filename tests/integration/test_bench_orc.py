"""bench_orc's own correctness guard (tests/bench/bench_orc.c): compiled by
stencilrt and by LLVM's LLJIT at -O0 and -O2, a program must return what the
interpreter returns, or bench_orc exits non-zero. One small program, compiled
and run once each way (well under a second), so the benchmark's IR translation
cannot rot between `./run.sh bench` runs."""
import os

from sgtest import check

T = 60


def test_bench_orc_versions_agree_with_the_interpreter(ctx):
    prog = ctx.path("stencils", "programs", "countdown.tvm")
    p = ctx.run([os.path.join(ctx.build, "tests", "bench", "bench_orc"), "--check", prog],
                timeout=T)
    check(p.returncode == 0, "bench_orc --check exited %d:\n%s", p.returncode, p.stderr[-2000:])
    # countdown prints 3 2 1 once per version, then the agreed result (0).
    check(p.stdout.count("3\n2\n1\n") == 4, "expected four runs printing 3 2 1, got:\n%s",
          p.stdout)
    check("0 from the interpreter, stencilrt, ORC -O0 and ORC -O2" in p.stdout,
          "no agreement line in:\n%s", p.stdout)
