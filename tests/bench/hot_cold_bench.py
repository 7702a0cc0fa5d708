"""The hot/cold rows of the bench (tests/bench/run.py calls hot_cold_rows):
hot bytes per executor split / not split on tinyvm, the 300-op corpus and the
guard-heavy corpus (stencilgen dump), run time of tinyvm built both ways on a
guard loop and on loop.tvm, and emit time per instruction both ways
(hot_cold_emit.c). Every figure is measured in this run."""
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRIPLE = "x86_64-unknown-linux-gnu"
TINYVM_SOURCES = ["main.c", "natives.c", "run.c", "loader.c", "interp.c", "jit.c", "chain.c"]

# A loop through guards: div and mod check their divisor (the trap path is their
# cold part) on every iteration; it never traps.
GUARD_LOOP = """# guard_loop.tvm - div and mod, whose guards never fail, 3,000,000 times
func main 0
    push 0
    store 0
    push 0
    store 1
top:
    load 0
    push 3000000
    lt
    jump_if_zero done
    load 1
    load 0
    push 7
    mod
    add
    push 3
    div
    load 0
    add
    store 1
    load 0
    addi 1
    store 0
    jump top
done:
    load 1
    ret
"""


def _run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=kw.pop("timeout", 900), check=True, **kw)


def _hot_and_whole(stencilgen, manifest, triple=TRIPLE):
    """(hot bytes of one instruction of each op, split; its bytes with --no-hot-cold)."""
    def dump(*extra):
        return _run([stencilgen, "dump", "--manifest", manifest, "--target", triple] +
                    list(extra)).stdout
    whole = sum(int(m) for m in re.findall(r"^op \w+ .*, (\d+) bytes$", dump("--no-hot-cold"),
                                           re.M))
    hot = 0
    for block in re.split(r"^(?=op \w+ )", dump(), flags=re.M)[1:]:
        size = int(re.match(r"op \w+ .*, (\d+) bytes$", block, re.M).group(1))
        m = re.search(r"^  hot \+0x0\.\.\+0x[0-9a-f]+ \((\d+) bytes", block, re.M)
        hot += int(m.group(1)) if m else size
    return hot, whole


def _build_tinyvm(build, tmp, label, *options):
    """tinyvm and hot_cold_emit against a header made with `options`, both built alike."""
    out = os.path.join(tmp, label)
    _run([os.path.join(build, "generator", "stencilgen"), "build", "--manifest",
          os.path.join(ROOT, "stencils", "stencils.yaml"), "--target", TRIPLE, "--outdir", out] +
         list(options))
    lib = os.path.join(build, "runtime", "libstencilrt.a")
    common = ["gcc", "-std=c11", "-O2", "-D_GNU_SOURCE", "-fno-omit-frame-pointer", "-I", out,
              "-I", os.path.join(ROOT, "runtime"), "-I", os.path.join(ROOT, "stencils")]
    vm = os.path.join(out, "tinyvm")
    _run(common + [os.path.join(ROOT, "stencils", s) for s in TINYVM_SOURCES] +
         [lib, "-lpthread", "-rdynamic", "-o", vm])
    emit = os.path.join(out, "hot_cold_emit")
    _run(common + [os.path.join(ROOT, "tests", "bench", "hot_cold_emit.c"), lib, "-lpthread",
                   "-o", emit])
    return vm, emit


def _ms(vm, program, repeat=5):
    p = _run([vm, "--jit", "--time", "--repeat", str(repeat), program])
    return float(re.search(r"time: ([0-9.]+) ms", p.stderr).group(1)) / repeat


def _emit_ns(emit):
    out = _run([emit], env=dict(os.environ, STENCILRT_FRAMES="0", STENCILRT_GDB="0")).stdout
    return float(re.search(r"emit_ns_per_instr ([0-9.]+)", out).group(1))


def hot_cold_rows(build):
    stencilgen = os.path.join(build, "generator", "stencilgen")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        guards = os.path.join(tmp, "guards")
        _run([sys.executable, os.path.join(ROOT, "tests", "bench", "guard_corpus.py"), guards])
        corpus = os.path.join(tmp, "corpus")
        _run([sys.executable, os.path.join(ROOT, "tests", "bench", "make_corpus.py"), corpus])
        for label, manifest in (("tinyvm", os.path.join(ROOT, "stencils", "stencils.yaml")),
                                ("300-op corpus", os.path.join(corpus, "corpus.yaml")),
                                ("guard-heavy corpus", os.path.join(guards, "guards.yaml"))):
            hot, whole = _hot_and_whole(stencilgen, manifest)
            rows.append(("hot bytes per executor, %s: split / not split" % label,
                         "%d / %d B" % (hot, whole),
                         "ratio %.2f%s" % (hot / whole, " (target <= 0.75)"
                                           if label.startswith("guard") else "")))
        split_vm, split_emit = _build_tinyvm(build, tmp, "split")
        whole_vm, whole_emit = _build_tinyvm(build, tmp, "whole", "--no-hot-cold")
        loop = os.path.join(tmp, "guard_loop.tvm")
        with open(loop, "w") as f:
            f.write(GUARD_LOOP)
        for label, program in (("guard loop (div, mod)", loop),
                               ("loop.tvm", os.path.join(ROOT, "stencils", "programs",
                                                         "loop.tvm"))):
            a, b = [], []
            for _ in range(5):  # interleaved: load on the machine hits both alike
                a.append(_ms(split_vm, program))
                b.append(_ms(whole_vm, program))
            rows.append(("tinyvm JIT run time, %s: split / not split (best of 5)" % label,
                         "%.2f / %.2f ms" % (min(a), min(b)),
                         "ratio %.2f (runs %.1f-%.1f / %.1f-%.1f ms)" % (
                             min(a) / min(b), min(a), max(a), min(b), max(b))))
        a, b = [], []
        for _ in range(3):
            a.append(_emit_ns(split_emit))
            b.append(_emit_ns(whole_emit))
        rows.append(("emit time per instruction, 1000 tinyvm instructions, 1/4 div or mod: "
                     "split / not split", "%.1f / %.1f ns" % (min(a), min(b)),
                     "ratio %.2f (target <= 1.15)" % (min(a) / min(b))))
    return rows


if __name__ == "__main__":
    for r in hot_cold_rows(os.path.abspath(sys.argv[1])):
        print("%s  %s  %s" % r)
