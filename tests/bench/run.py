#!/usr/bin/env python3
"""./run.sh bench: figures measured side by side in one run, printed as one table.

Every ratio compares two measurements taken in this run on this machine; no
figure is compared against a fixed time.
"""
import argparse
import json
import os
import platform
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from hot_cold_bench import hot_cold_rows, _hot_and_whole  # tests/bench/hot_cold_bench.py
from pg_bench import pg_rows  # tests/bench/pg_bench.py

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROGRAMS = [("loop.tvm", 5), ("fib.tvm", 20)]


def run(cmd, timeout=600, env=None, cwd=None):
    full = dict(os.environ)
    full.update(env or {})
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=timeout, env=full, check=True, cwd=cwd)


def runtime_figures(build):
    out = run([os.path.join(build, "tests", "bench", "bench_runtime")]).stdout
    return {m.group(1): float(m.group(2)) for m in re.finditer(r"^(\S+) (\S+) \S+$", out, re.M)}


TINYVM = os.path.join("stencils", "tinyvm")
TINYVM_GOT = os.path.join("tests", "bench", "got", "tinyvm_got")  # operands from GOT slots


TINYVM_IMM32 = os.path.join("tests", "bench", "imm32", "tinyvm_imm32")  # 32-bit immediates


def tinyvm_ms(build, mode, program, repeat, exe=TINYVM, extra=()):
    p = run([os.path.join(build, exe), "--" + mode, "--time", "--repeat", str(repeat)] +
            list(extra) + [os.path.join(ROOT, "stencils", "programs", program)])
    return float(re.search(r"time: ([0-9.]+) ms", p.stderr).group(1)) / repeat


def tinyvm_variant_rows(build, pairs=25):
    """The JIT with the cached ops' variants (stencils/ops/cached.c) and
    without (--no-variants: the plain ops), in `pairs` back-to-back pairs, each
    other pair in the other order: the median of the pairs' ratios, as this
    machine's speed wanders between phases longer than a pair
    (docs/performance.md); then the plain ops' three operand forms
    (docs/ops.md "Operands"), alternated, best of 5 each."""
    rows = []
    for program, repeat in PROGRAMS:
        var, plain = [], []
        for k in range(pairs):
            runs = [(var, []), (plain, ["--no-variants"])]
            for times, extra in (runs if k % 2 == 0 else runs[::-1]):
                times.append(tinyvm_ms(build, "jit", program, repeat, extra=extra))
        ratios = sorted(p / v for v, p in zip(var, plain))
        rows.append(("tinyvm %s JIT: with variants / without (%d pairs)" % (program, pairs),
                     "%.2f / %.2f ms" % (statistics.median(var), statistics.median(plain)),
                     "variants %.2fx faster, the median pair (pairs %.2f-%.2f, %d of %d "
                     "faster; best runs %.2f / %.2f ms)" % (
                         statistics.median(ratios), ratios[0], ratios[-1],
                         sum(r > 1 for r in ratios), pairs, min(var), min(plain))))
    imm, imm32, got = [], [], []
    for _ in range(5):
        imm.append(tinyvm_ms(build, "jit", "loop.tvm", 5, extra=["--no-variants"]))
        imm32.append(tinyvm_ms(build, "jit", "loop.tvm", 5, TINYVM_IMM32, ["--no-variants"]))
        got.append(tinyvm_ms(build, "jit", "loop.tvm", 5, TINYVM_GOT, ["--no-variants"]))
    rows.append(("tinyvm loop.tvm JIT, plain ops: operands as 64-bit / 32-bit immediates / "
                 "from GOT slots (best of 5)",
                 "%.2f / %.2f / %.2f ms" % (min(imm), min(imm32), min(got)),
                 "64-bit at %.2fx, 32-bit at %.2fx the speed of GOT slots" % (
                     min(got) / min(imm), min(got) / min(imm32))))
    return rows


# bench_orc's programs: every bundled one that ends normally and whose result
# does not depend on how it was compiled (backtrace.tvm counts C frames), with
# runs per timing (countdown.tvm takes about 0.12 us and reenter.tvm 30 ns: many
# runs, or reading the clock is much of what is timed).
ORC_PROGRAMS = [("loop.tvm", 5), ("fib.tvm", 20), ("countdown.tvm", 2000), ("reenter.tvm", 2000)]
ORC_VERSIONS = ["sr", "o0", "o2"]


def orc_figures(build, program, repeat):
    """bench_orc's key=value line: each figure as (best, worst) over its rounds."""
    out = run([os.path.join(build, "tests", "bench", "bench_orc"), "--repeat", str(repeat),
               os.path.join(ROOT, "stencils", "programs", program)]).stdout
    line = re.search(r"^bench_orc \S+ (.*)$", out, re.M).group(1)
    figures = {}
    for item in line.split():
        key, value = item.split("=")
        figures[key] = tuple(float(v) for v in value.split("/"))
    return figures


def durations(us):
    """Times given in us, in one unit: ms if all are at least 0.1 ms."""
    if min(us) >= 100:
        return " / ".join("%.3g" % (t / 1e3) for t in us) + " ms"
    return " / ".join("%.3g" % t for t in us) + " us"


def orc_rows(build):
    """stencilrt against LLVM's LLJIT (-O0, -O2) on the same programs."""
    rows = []
    for program, repeat in ORC_PROGRAMS:
        o = orc_figures(build, program, repeat)
        c = [o["compile_us_per_instr_" + v][0] for v in ORC_VERSIONS]
        r = [o["run_us_" + v][0] for v in ORC_VERSIONS]
        rows.append(("vs ORC LLJIT: %s compile/instr, stencilrt / -O0 / -O2" % program,
                     "%.2f / %.1f / %.0f us" % tuple(c),
                     "stencilrt %.0fx faster than -O0, %.0fx than -O2 (%d instrs, %d functions; best "
                     "of 10; stencilrt %.2f-%.2f us)" % (c[1] / c[0], c[2] / c[0], o["instrs"][0],
                                                        o["functions"][0],
                                                        *o["compile_us_per_instr_sr"])))
        rows.append(("vs ORC LLJIT: %s run, stencilrt / -O0 / -O2 (best of 10)" % program,
                     durations(r),
                     "time / stencilrt's: -O0 %.2f, -O2 %.2f, interpreter %.2f (%s)" % (
                         r[1] / r[0], r[2] / r[0], o["run_us_interp"][0] / r[0],
                         durations([o["run_us_interp"][0]]))))
    return rows


def timed(cmd, **kw):
    t0 = time.monotonic()
    p = run(cmd, **kw)
    return time.monotonic() - t0, p


def cpu_timed(cmd, **kw):
    """Wall and CPU seconds (user + system, the command and its children) of cmd."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t, p = timed(cmd, **kw)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return t, cpu, p


def ninja_seconds(lines, directory, jobs):
    """Seconds ninja takes to run the build.ninja `lines` in `directory` at -j jobs."""
    with open(os.path.join(directory, "build.ninja"), "w") as f:
        f.write("\n".join(lines) + "\n")
    t0 = time.monotonic()
    run(["ninja", "-C", directory, "-j", str(jobs)], timeout=1800)
    elapsed = time.monotonic() - t0
    os.remove(os.path.join(directory, ".ninja_log"))  # the next run does everything again
    return elapsed


def floor_seconds(commands, jobs, tmp):
    """The same compiles at the same parallelism, run by ninja and nothing else."""
    import shlex
    lines = ["rule cc", "  command = cd $dir && $cmd", ""]
    for i, entry in enumerate(commands):
        lines.append("build floor%d: cc" % i)
        lines.append("  dir = %s" % entry["directory"])
        lines.append("  cmd = %s" % " ".join(shlex.quote(a) for a in entry["arguments"]))
    return ninja_seconds(lines, tmp, jobs)


# CPython's Tools/jit builds each op with four tools, one after another: clang
# -S, clang -c of that assembly, llvm-objdump for the disassembly it pastes as
# comments, and llvm-readobj's JSON, which it parses for sections, symbols and
# relocations.
READOBJ_ARGS = ["--elf-output-style=JSON", "--expand-relocs", "--sections", "--section-data",
                "--section-relocations", "--section-symbols"]


def pipeline_seconds(commands, jobs, tmp):
    """stencilgen's compiles (same units, same flags) through CPython's per-op
    pipeline, run by ninja at the same parallelism: the four steps of an op in
    sequence, ops in parallel."""
    import shlex

    def q(args):
        return " ".join(shlex.quote(a) for a in args)
    work = os.path.join(tmp, "pipeline")
    os.makedirs(work, exist_ok=True)
    lines = ["rule step", "  command = cd $dir && $cmd", ""]
    for i, entry in enumerate(commands):
        args = list(entry["arguments"])
        base = os.path.join(work, "op%d" % i)
        args[args.index("-c")] = "-S"
        args[args.index("-o") + 1] = base + ".s"
        args[args.index("-MF") + 1] = base + ".d"
        target = [a for a in args if a.startswith("--target=")]
        steps = [args,
                 [args[0]] + target + ["-c", base + ".s", "-o", base + ".o"],
                 ["llvm-objdump-22", "--disassemble", "--reloc", base + ".o"],
                 ["llvm-readobj-22"] + READOBJ_ARGS + [base + ".o"]]
        outs = [".s", ".o", ".dis", ".json"]
        for k, step in enumerate(steps):
            cmd = q(step) + (" > " + shlex.quote(base + outs[k]) if k >= 2 else "")
            lines.append("build p%d_%d: step%s" % (i, k, " p%d_%d" % (i, k - 1) if k else ""))
            lines.append("  dir = %s" % entry["directory"])
            lines.append("  cmd = %s" % cmd)
    return ninja_seconds(lines, work, jobs)


def new_corpus(tmp):
    """The 300-op corpus, made in tmp: (its directory, its manifest, an output directory)."""
    corpus = os.path.join(tmp, "corpus")
    run([sys.executable, os.path.join(ROOT, "tests", "bench", "make_corpus.py"), corpus])
    return corpus, os.path.join(corpus, "corpus.yaml"), os.path.join(corpus, "out")


def generator_figures(build, jobs=2):
    """Cold build of the 300-op corpus against its floor; no-op and one-op-edit rebuilds."""
    stencilgen = os.path.join(build, "generator", "stencilgen")
    tmp = tempfile.mkdtemp(prefix="sgbench-")
    try:
        corpus, manifest, out = new_corpus(tmp)
        cc = os.path.join(tmp, "compile_commands.json")
        # Per-op units, named: batched units are the default, and these rows are per-op's.
        build_cmd = [stencilgen, "build", "--manifest", manifest, "--outdir", out, "-j", str(jobs),
                     "--units", "per-op"]
        cold, _ = timed(build_cmd + ["--compile-commands", cc])
        with open(cc) as f:
            commands = json.load(f)
        units = os.path.join(tmp, "units")  # the op units, kept for the floor
        shutil.copytree(os.path.join(out, ".stencilgen", "tu"), units)
        # The floor compiles what stencilgen compiled: its per-op units (the
        # compile_commands name the op sources for clangd; put the units back).
        for e in commands:
            args = e["arguments"]
            op = os.path.basename(args[args.index("-o") + 1])[:-2]
            if op.startswith("op_"):
                args[args.index("-c") + 1] = os.path.join(units, op[len("op_"):], "unit.c")
            args[args.index("-o") + 1] = os.path.join(tmp, "floor-%s.o" % op)
            i = args.index("-MF")
            args[i + 1] = os.path.join(tmp, "floor-%s.d" % op)
        # Best of three, alternating, on a machine whose speed wanders.
        colds = [cold]
        floors = [floor_seconds(commands, jobs, tmp)]
        pipelines = [pipeline_seconds(commands, jobs, tmp)]
        execs = []  # the same build starting clang-22 for every compile (its cache, the
                    # same entries, is what the no-op and edit runs below start from)
        for k in range(3):
            if k:
                shutil.rmtree(out)
                colds.append(timed(build_cmd)[0])
                floors.append(floor_seconds(commands, jobs, tmp))
                pipelines.append(pipeline_seconds(commands, jobs, tmp))
            shutil.rmtree(out)
            execs.append(timed(build_cmd + ["--exec-clang"])[0])
        cold, floor, pipeline = min(colds), min(floors), min(pipelines)
        noops = sorted(timed(build_cmd)[0] for _ in range(10))
        src = os.path.join(corpus, "ops", "group13.c")
        with open(src) as f:
            text = f.read()
        at = text.index("CONTINUE();", text.index("OP(op134)"))
        one = next(e for e in commands if "-DSTENCILGEN_OP=op134" in e["arguments"])
        edit = one_compile = float("inf")
        for k in range(3):  # three different edits of op134: each one compile
            with open(src, "w") as f:
                f.write(text[:at] + "tos ^= 0x%x;\n    " % (0x5a + k) + text[at:])
            t, p = timed(build_cmd)
            edit = min(edit, t)
            one_compile = min(one_compile, timed(one["arguments"], cwd=one["directory"])[0])
        return {"cold": cold, "floor": floor, "pipeline": pipeline, "colds": colds,
                "exec": min(execs), "execs": execs,
                "pipelines": pipelines, "ops": len(commands), "noop": noops[0], "noop_median": noops[5],
                "edit": edit, "one_compile": one_compile,
                "edit_summary": re.search(r"\((\d+) compiled", p.stdout).group(1)}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def code_bytes(stdout):
    """{triple: bytes of code} from a build's summary lines."""
    return {m.group(1): int(m.group(2)) for m in
            re.finditer(r"^stencilgen: (\S+): \d+ ops .*?, (\d+) bytes of code", stdout, re.M)}


def compiler_rows(build, jobs=2, old="clang-19"):
    """Debian's clang-19 beside clang 22 on the same sources: the 300-op
    corpus's cold build (batched units, both compilers started per compile:
    clang 22 with --exec-clang; best of 3, alternating), and the code size of
    that corpus and of tinyvm's bundled stencils per target."""
    if not shutil.which(old):
        return [("stencils from %s" % old, "not measured", "%s is not installed" % old)]
    stencilgen = os.path.join(build, "generator", "stencilgen")
    tmp = tempfile.mkdtemp(prefix="sgbench-cc-")
    try:
        _, manifest, out = new_corpus(tmp)
        base = [stencilgen, "build", "--manifest", manifest, "--outdir", out, "-j", str(jobs)]
        times, sizes = {old: [], "clang-22": []}, {}
        for _ in range(3):
            for cc, extra in ((old, ["--clang", old]), ("clang-22", ["--exec-clang"])):
                shutil.rmtree(out, ignore_errors=True)
                t, p = timed(base + extra)
                times[cc].append(t)
                sizes[("300-op corpus", cc)] = code_bytes(p.stdout)
        for cc, extra in ((old, ["--clang", old]), ("clang-22", [])):
            p = run([stencilgen, "build", "--manifest", os.path.join(ROOT, "stencils",
                     "stencils.yaml"), "--outdir", os.path.join(tmp, cc)] + extra)
            sizes[("tinyvm's bundled stencils", cc)] = code_bytes(p.stdout)
        a, b = min(times[old]), min(times["clang-22"])
        rows = [("cold build, 300-op corpus, -j2: %s / clang-22, each started per compile" % old,
                 "%.2f / %.2f s" % (a, b), "ratio %.2f" % (a / b))]
        for what in ("300-op corpus", "tinyvm's bundled stencils"):
            new = sizes[(what, "clang-22")]
            for triple in sorted(new):
                x = sizes[(what, old)].get(triple, 0)
                rows.append(("%s, %s: code from %s / clang-22" % (what, triple, old),
                             "%d / %d bytes" % (x, new[triple]), "ratio %.2f" % (x / new[triple])))
        return rows
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def one_file_corpus(corpus):
    """The corpus's 300 ops as one file, as in a CPython-style interpreter;
    returns that file and its manifest."""
    ops = os.path.join(corpus, "ops")
    files = sorted(os.path.join(ops, f) for f in os.listdir(ops) if f.endswith(".c"))
    text = ""
    for f in files:
        with open(f) as src:
            text += src.read()
        os.remove(f)
    path = os.path.join(ops, "all.c")
    with open(path, "w") as f:
        f.write(text)
    manifest = os.path.join(corpus, "corpus.yaml")
    with open(manifest) as f:
        m = f.read()
    with open(manifest, "w") as f:
        f.write(re.sub(r"^ops:.*?(?=^\w)", "ops: [ops/all.c]\n", m, flags=re.M | re.S))
    return path, manifest


def batched_figures(build, g, jobs=2):
    """--units batched on the 300-op corpus (cold, against generator_figures'
    per-op floor and CPython's pipeline; no-op; one-op edit), and on the same
    ops as one file, against that file compiled as one unit by one clang."""
    stencilgen = os.path.join(build, "generator", "stencilgen")
    tmp = tempfile.mkdtemp(prefix="sgbatch-")
    try:
        corpus, manifest, out = new_corpus(tmp)
        build_cmd = [stencilgen, "build", "--manifest", manifest, "--outdir", out, "-j", str(jobs),
                     "--units", "batched", "-v"]
        colds = []
        for _ in range(3):
            shutil.rmtree(out, ignore_errors=True)
            t, p = timed(build_cmd)
            colds.append(t)
        runs = int(re.search(r"(\d+) compiler runs", p.stderr).group(1))
        noops = sorted(timed(build_cmd)[0] for _ in range(10))
        src = os.path.join(corpus, "ops", "group13.c")
        with open(src) as f:
            text = f.read()
        at = text.index("CONTINUE();", text.index("OP(op134)"))
        edit = float("inf")
        for k in range(3):  # three different edits of op134: each compiles op134 alone
            with open(src, "w") as f:
                f.write(text[:at] + "tos ^= 0x%x;\n    " % (0x5a + k) + text[at:])
            t, p = timed(build_cmd)
            edit = min(edit, t)
        edit_runs = int(re.search(r"(\d+) compiler runs", p.stderr).group(1))
        edit_ops = re.search(r"\((\d+) compiled", p.stdout).group(1)
        # The same 300 ops in one file: batches against one unit of all of them.
        one = os.path.join(tmp, "one")
        run([sys.executable, os.path.join(ROOT, "tests", "bench", "make_corpus.py"), one])
        path, manifest = one_file_corpus(one)
        out = os.path.join(one, "out")
        cc = os.path.join(tmp, "batched_commands.json")
        one_cmd = [stencilgen, "build", "--manifest", manifest, "--outdir", out, "-j", str(jobs),
                   "--units", "batched", "-v"]
        batches, units = [], []
        for i in range(3):  # alternating, best of three: the machine's speed wanders
            shutil.rmtree(out, ignore_errors=True)
            t, cpu, p = cpu_timed(one_cmd + (["--compile-commands", cc] if i == 0 else []))
            batches.append((t, cpu))
            one_runs = int(re.search(r"(\d+) compiler runs", p.stderr).group(1))
            shutil.rmtree(out, ignore_errors=True)
            units.append(cpu_timed(one_cmd + ["--batch-ops", "10000"])[:2])  # the file, one unit
        with open(cc) as f:
            entry = next(e for e in json.load(f) if "-DSTENCILGEN_BATCH" in e["arguments"])
        with open(path) as f:
            names = re.findall(r"^OP\((\w+)\)", f.read(), re.M)
        unit = os.path.join(tmp, "one_unit.c")
        with open(unit, "w") as f:
            f.write('#line 1 "%s"\n' % path)
            with open(path) as src:
                f.write(src.read())
            f.write("".join('extern __typeof__(op_%s) _JIT_ENTRY_%s __attribute__((alias("op_%s")));\n'
                            % (n, n, n) for n in names))
        args = list(entry["arguments"])
        args[args.index("-c") + 1] = unit
        args[args.index("-o") + 1] = os.path.join(tmp, "one_unit.o")
        args[args.index("-MF") + 1] = os.path.join(tmp, "one_unit.d")
        whole = min(timed(args, cwd=entry["directory"])[0] for _ in range(3))
        return {"cold": min(colds), "colds": colds, "runs": runs, "noop": noops[0],
                "noop_median": noops[5], "edit": edit, "edit_runs": edit_runs,
                "edit_ops": edit_ops, "one_file": min(batches)[0], "one_file_cpu": min(batches)[1],
                "one_file_runs": one_runs, "one_unit_clang": whole, "one_unit": min(units)[0],
                "one_unit_cpu": min(units)[1], "floor": g["floor"],
                "pipeline": g["pipeline"]}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def batched_rows(b, g, jobs=2):
    return [
        ("cold build, 300-op corpus, -j2, batched units / per-op floor",
         "%.2f / %.2f s" % (b["cold"], b["floor"]),
         "ratio %.2f (target <= 0.25; %d compiler runs; runs %.2f-%.2f s; per-op build %.2f s)" % (
             b["cold"] / b["floor"], b["runs"], min(b["colds"]), max(b["colds"]), g["cold"])),
        ("cold build, 300-op corpus, -j2, batched units / CPython's 4-tool pipeline",
         "%.2f / %.2f s" % (b["cold"], b["pipeline"]),
         "ratio %.2f (target <= 0.10)" % (b["cold"] / b["pipeline"])),
        ("cold build, one file of 300 ops, -j2, batched / the file as one unit",
         "%.2f / %.2f s" % (b["one_file"], b["one_unit"]),
         "%.2fx faster (target >= %dx; %d compiler runs against 2; that unit's clang alone "
         "%.2f s; CPU %.2f / %.2f s, so at most %.2fx on %d cores)" % (
             b["one_unit"] / b["one_file"], jobs, b["one_file_runs"], b["one_unit_clang"],
             b["one_file_cpu"], b["one_unit_cpu"], b["one_unit"] / (b["one_file_cpu"] / jobs),
             jobs)),
        ("batched units: no-op rebuild best / median of 10; one-op edit (best of 3)",
         "%.0f / %.0f; %.0f ms" % (b["noop"] * 1e3, b["noop_median"] * 1e3, b["edit"] * 1e3),
         "per-op units: %.0f / %.0f; %.0f ms; the edit: %d compiler run, %s ops compiled" % (
             g["noop"] * 1e3, g["noop_median"] * 1e3, g["edit"] * 1e3, b["edit_runs"],
             b["edit_ops"])),
    ]


# ---- CPython's scale: make_corpus.py --cpython (280 micro-ops, about 1,100
# stencils with their variants, one generated file), the 5 bundled triples.

def cpython_corpus(tmp, name="cpython", ops=None, triples="five"):
    corpus = os.path.join(tmp, name)
    run([sys.executable, os.path.join(ROOT, "tests", "bench", "make_corpus.py"), corpus,
         "--cpython", "--triples", triples] + (["--ops", str(ops)] if ops else []))
    return corpus, os.path.join(corpus, "corpus.yaml"), os.path.join(corpus, "out")


def peak_timed(cmd, **kw):
    """Wall seconds, peak resident KB (the largest of the command and what it
    forked, as GNU time reports it) and the process."""
    t, p = timed(["/usr/bin/time", "-f", "peak-kb %M"] + cmd, **kw)
    return t, int(re.search(r"^peak-kb (\d+)$", p.stderr, re.M).group(1)), p


def verbose_split(stderr):
    """-v's compile-and-read seconds, and the bytes the keys hashed."""
    compile_s = float(re.search(r"compile and read objects ([0-9.]+) s", stderr).group(1))
    keyed = int(re.search(r"keys: (\d+) bytes", stderr).group(1))
    return compile_s, keyed


def pipeline_sample_seconds(commands, out, jobs, tmp, sample=60):
    """CPython's 4-tool pipeline (pipeline_seconds) per stencil, on `sample`
    per-op units evenly spread over those the build compiled alone."""
    per_op = [e for e in commands if any(a.startswith("-DSTENCILGEN_OP=") for a in e["arguments"])]
    step = max(1, len(per_op) // sample)
    chosen = []
    for e in per_op[::step][:sample]:
        args = list(e["arguments"])
        op = next(a for a in args if a.startswith("-DSTENCILGEN_OP="))[len("-DSTENCILGEN_OP="):]
        args[args.index("-c") + 1] = os.path.join(out, ".stencilgen", "tu", op, "unit.c")
        chosen.append({"directory": e["directory"], "arguments": args})
    return pipeline_seconds(chosen, jobs, tmp) / len(chosen), len(chosen)


def scale_figures(stencilgen, jobs=2, seven=True):
    """The CPython-shaped corpus at -j2: cold build of the 5 triples against
    CPython's pipeline, no-op (and its work for twice the ops in one file),
    one-op edit, peak memory, header bytes per stencil; with `seven`, cold and
    no-op for CPython's 7 triples (a baseline release may not have them)."""
    tmp = tempfile.mkdtemp(prefix="sgscale-")
    try:
        corpus, manifest, out = cpython_corpus(tmp)
        build_cmd = [stencilgen, "build", "--manifest", manifest, "--outdir", out, "-j", str(jobs)]
        cc = os.path.join(tmp, "cc.json")
        cold, peak, p = peak_timed(build_cmd + ["--compile-commands", cc, "-v"], timeout=3600)
        summary = re.findall(r"^stencilgen: (\S+): (\d+) ops", p.stdout, re.M)
        stencils = sum(int(n) for _, n in summary)
        runs = int(re.search(r"(\d+) compiler runs", p.stderr).group(1))
        headers = sum(os.path.getsize(os.path.join(out, "jit_stencils-%s.h" % t))
                      for t, _ in summary)
        with open(cc) as f:
            commands = json.load(f)
        units_out = out
        if not any(a.startswith("-DSTENCILGEN_OP=") for e in commands for a in e["arguments"]):
            # Every op compiled in a batch: one target's per-op units to sample from.
            units_out, cc = os.path.join(tmp, "per-op"), os.path.join(tmp, "cc-per-op.json")
            run([stencilgen, "build", "--manifest", manifest, "--outdir", units_out, "-j",
                 str(jobs), "--units", "per-op", "--target", "x86_64-unknown-linux-gnu",
                 "--compile-commands", cc], timeout=3600)
            with open(cc) as f:
                commands = json.load(f)
        per_stencil, sampled = pipeline_sample_seconds(commands, units_out, jobs, tmp)
        noops, noop_peak = [], 0
        for _ in range(5):
            t, kb, p = peak_timed(build_cmd + ["-v"])
            noops.append(t)
            noop_peak = max(noop_peak, kb)
        noops.sort()
        keyed = verbose_split(p.stderr)[1]
        # One op edited: the first with 4 variants (axis in, 0..3).
        src = os.path.join(corpus, "ops", "generated_cases.c")
        with open(src) as f:
            text = f.read()
        at = text.index("CONTINUE();", text.index(", VARIANT(in, 0, 3))\n"))
        edits = []
        for k in range(3):
            with open(src, "w") as f:
                f.write(text[:at] + "frame->ip += %d;\n    " % (k + 1) + text[at:])
            t, p = timed(build_cmd + ["-v"])
            edits.append((t, verbose_split(p.stderr)[0],
                          sum(int(n) for n in re.findall(r"\((\d+) compiled", p.stdout))))
        edit = min(edits)
        # Twice the generated ops in one file, x86-64: the no-op's work.
        doubling = []
        for n in (270, 540):
            c, m, o = cpython_corpus(tmp, "one%d" % n, n)
            one_cmd = [stencilgen, "build", "--manifest", m, "--outdir", o, "-j", str(jobs),
                       "--target", "x86_64-unknown-linux-gnu"]
            run(one_cmd, timeout=1800)
            best, keyed_n = float("inf"), 0
            for _ in range(5):
                t, p = timed(one_cmd + ["-v"])
                best = min(best, t)
                keyed_n = verbose_split(p.stderr)[1]
            n_stencils = int(re.search(r"(\d+) ops \(", p.stdout).group(1))
            doubling.append((n_stencils, best, keyed_n))
        figures = {}
        if seven:  # CPython's own seven triples, cold and no-op, measured right after
            c7, m7, o7 = cpython_corpus(tmp, "cpython7", triples="seven")
            seven_cmd = [stencilgen, "build", "--manifest", m7, "--outdir", o7, "-j", str(jobs)]
            seven_cold, p = timed(seven_cmd)
            seven_noops = sorted(timed(seven_cmd)[0] for _ in range(5))
            figures["seven"] = {"cold": seven_cold, "noop": seven_noops[0],
                                "noop_median": seven_noops[2],
                                "stencils": sum(int(n) for n in re.findall(
                                    r"^stencilgen: \S+: (\d+) ops", p.stdout, re.M))}
        return dict(figures, **{"cold": cold, "peak_kb": peak, "stencils": stencils,
                                "triples": len(summary),
                "runs": runs, "header_bytes": headers, "pipeline": per_stencil * stencils,
                "pipeline_per_stencil": per_stencil, "sampled": sampled,
                "noop": noops[0], "noop_median": noops[2], "noop_peak_kb": noop_peak,
                "keyed": keyed, "edit": edit, "doubling": doubling})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


VARIANT_OP = """
OP(op{k}, VARIANT(in, 0, 2), VARIANT(out, 0, 2))
{{
#if STENCIL_V(in) >= 1
    tos += {k};
#endif
#if STENCIL_V(in) == 2
    tos ^= *--sp;
#endif
#if STENCIL_V(out) == 0
    *sp++ = tos;
#elif STENCIL_V(out) == 2
    tos *= {k} + 3;
#endif
    CONTINUE();
}}
"""


def variant_sources(n):
    """n ops in 3x3 variants, and the same 9n stencils written as 9n plain ops."""
    variants = "".join(VARIANT_OP.format(k=k) for k in range(n))
    plain = ""
    for k in range(n):
        for i in range(3):
            for o in range(3):
                op = VARIANT_OP.format(k=k).replace("STENCIL_V(in)", str(i))
                op = op.replace("STENCIL_V(out)", str(o))
                plain += op.replace("OP(op%d, VARIANT(in, 0, 2), VARIANT(out, 0, 2))" % k,
                                    "OP(op%d__in%d_out%d)" % (k, i, o))
    return variants, plain


def variant_project(tmp, kind, text):
    """A manifest of tinyvm's template and shim over one file `text`; its build command."""
    d = os.path.join(tmp, kind)
    os.makedirs(d)
    with open(os.path.join(d, "ops.c"), "w") as f:
        f.write(text)
    with open(os.path.join(d, "vm.yaml"), "w") as f:
        f.write("targets:\n  - triple: x86_64-unknown-linux-gnu\n"
                "template: %s\nshim:\n  source: %s\n  function: tinyvm_shim\n"
                "ops: [ops.c]\ninclude_dirs: [%s]\ncflags: [-Wall, -Wextra, -Werror]\n"
                "symbols: [vm_call, vm_print, vm_native, vm_trap]\n" % (
                    os.path.join(ROOT, "stencils", "stencil_template.h"),
                    os.path.join(ROOT, "stencils", "shim.c"), os.path.join(ROOT, "stencils")))
    return d


def variant_figures(build, n=40, jobs=2):
    """One file of n ops in 3x3 variants against the same stencils as 9n plain
    ops (x86-64, batched, -j2), the two alternated, best of 3 (5 for no-op
    rebuilds): cold build, no-op rebuild, one-op edit (op7's 9 variants, or
    the 9 plain ops holding its constant)."""
    stencilgen = os.path.join(build, "generator", "stencilgen")
    tmp = tempfile.mkdtemp(prefix="sgvariants-")
    try:
        texts = dict(zip(("variants", "plain"), variant_sources(n)))
        dirs = {k: variant_project(tmp, k, t) for k, t in texts.items()}
        cmds = {k: [stencilgen, "build", "--manifest", os.path.join(d, "vm.yaml"), "--outdir",
                    os.path.join(d, "out"), "-j", str(jobs)] for k, d in dirs.items()}
        f = {k: {"cold": [], "noop": [], "edit": []} for k in texts}
        for _ in range(3):
            for k in texts:
                shutil.rmtree(os.path.join(dirs[k], "out"), ignore_errors=True)
                f[k]["cold"].append(timed(cmds[k])[0])
        for _ in range(5):
            for k in texts:
                f[k]["noop"].append(timed(cmds[k])[0])
        for e in range(3):
            for k in texts:
                with open(os.path.join(dirs[k], "ops.c"), "w") as out:
                    out.write(texts[k].replace("tos += 7;", "tos += %d;" % (1000 + e)))
                t, p = timed(cmds[k])
                f[k]["edit"].append(t)
                f[k]["edit_compiled"] = re.search(r"\((\d+) compiled", p.stdout).group(1)
        return {k: dict({m: min(f[k][m]) for m in ("cold", "noop", "edit")},
                        edit_compiled=f[k]["edit_compiled"]) for k in texts}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def baseline_stencilgen(rev, tmp):
    """stencilgen as revision `rev` of this repository builds it (its sources
    from git, configured and built apart), to measure before and after a
    change in one run."""
    src, bdir = os.path.join(tmp, "src"), os.path.join(tmp, "build")
    os.makedirs(src)
    archive = subprocess.run(["git", "-C", ROOT, "archive", rev], stdout=subprocess.PIPE,
                             check=True, timeout=120).stdout
    subprocess.run(["tar", "-x", "-C", src], input=archive, check=True, timeout=120)
    run(["meson", "setup", bdir, src], timeout=600)
    run(["ninja", "-C", bdir, "generator/stencilgen"], timeout=3600)
    return os.path.join(bdir, "generator", "stencilgen")


def scale_before_after_rows(before, after, rev):
    """The scale work's no-op and one-op edit, this tree against `rev`, each
    measured in this run."""
    return [
        ("CPython-shaped corpus, 5 triples: no-op best, %s / this tree" % rev,
         "%.0f / %.0f ms" % (before["noop"] * 1e3, after["noop"] * 1e3),
         "ratio %.2f (target: no-op <= 50 ms)" % (after["noop"] / before["noop"])),
        ("CPython-shaped corpus, 5 triples: one-op edit best of 3, %s / this tree" % rev,
         "%.0f / %.0f ms" % (before["edit"][0] * 1e3, after["edit"][0] * 1e3),
         "ratio %.2f; outside the compiles %.0f / %.0f ms (target <= 150 ms)" % (
             after["edit"][0] / before["edit"][0], (before["edit"][0] - before["edit"][1]) * 1e3,
             (after["edit"][0] - after["edit"][1]) * 1e3)),
    ]


def scale_rows(c, jobs=2, label=""):
    """The rows of scale_figures' `c`, each measure prefixed with `label`."""
    (n1, t1, k1), (n2, t2, k2) = c["doubling"]
    rows = [
        ("CPython-shaped corpus, %d stencils on %d triples, -j%d: cold build / CPython's 4-tool "
         "pipeline" % (c["stencils"], c["triples"], jobs),
         "%.1f / %.1f s" % (c["cold"], c["pipeline"]),
         "ratio %.2f (target <= 12 s and <= 0.20; %d compiler runs; pipeline %.0f ms a stencil, "
         "from %d per-op units)" % (c["cold"] / c["pipeline"], c["runs"],
                                   c["pipeline_per_stencil"] * 1e3, c["sampled"])),
        ("CPython-shaped corpus, 5 triples: no-op rebuild best / median of 5",
         "%.0f / %.0f ms" % (c["noop"] * 1e3, c["noop_median"] * 1e3),
         "target <= 50 ms; keys hashed %d bytes of source" % c["keyed"]),

        ("no-op rebuild, one file of %d / %d stencils (x86-64), best of 5" % (n1, n2),
         "%.0f / %.0f ms" % (t1 * 1e3, t2 * 1e3),
         "time %.2fx, keys' bytes hashed %.2fx for %.2fx the stencils (linear: the same)" % (
             t2 / t1, k2 / k1, n2 / n1)),
        ("CPython-shaped corpus, 5 triples: one-op edit (4 variants), best of 3",
         "%.0f ms" % (c["edit"][0] * 1e3),
         "%d stencils compiled; %.0f ms outside their compile and read (target <= 150 ms)" % (
             c["edit"][2], (c["edit"][0] - c["edit"][1]) * 1e3)),
        ("CPython-shaped corpus, 5 triples: peak memory, cold / no-op",
         "%.0f / %.0f MB" % (c["peak_kb"] / 1024, c["noop_peak_kb"] / 1024),
         "target <= 512 MB (the largest process, stencilgen or a compile it forked)"),
        ("CPython-shaped corpus: header bytes per stencil",
         "%.2f KB" % (c["header_bytes"] / c["stencils"] / 1024),
         "%d headers, %.1f MB" % (c["triples"], c["header_bytes"] / 1e6)),
    ]
    if "seven" in c:
        s7 = c["seven"]
        rows[2:2] = [
            ("CPython-shaped corpus, CPython's 7 triples (%d stencils), -j%d: cold build / the "
             "5 triples'" % (s7["stencils"], jobs),
             "%.1f / %.1f s" % (s7["cold"], c["cold"]),
             "ratio %.2f (target <= 18 s)" % (s7["cold"] / c["cold"])),
            ("CPython-shaped corpus, CPython's 7 triples: no-op rebuild best / median of 5; "
             "the 5 triples' best",
             "%.0f / %.0f ms; %.0f ms" % (s7["noop"] * 1e3, s7["noop_median"] * 1e3,
                                          c["noop"] * 1e3),
             "ratio %.2f (target <= 70 ms)" % (s7["noop"] / c["noop"])),
        ]
    return [(label + measure, figure, comparison) for measure, figure, comparison in rows]


def variant_rows(v, n=40):
    a, b = v["variants"], v["plain"]
    return [
        ("%d ops in 3x3 variants / the same %d stencils as plain ops, one file, -j2: cold build"
         % (n, 9 * n), "%.2f / %.2f s" % (a["cold"], b["cold"]),
         "ratio %.2f" % (a["cold"] / b["cold"])),
        ("%d ops in 3x3 variants / %d plain ops: no-op rebuild (best of 5); one-op edit "
         "(best of 3)" % (n, 9 * n),
         "%.0f / %.0f ms; %.0f / %.0f ms" % (a["noop"] * 1e3, b["noop"] * 1e3, a["edit"] * 1e3,
                                             b["edit"] * 1e3),
         "the edit compiles %s variants / %s plain ops" % (a["edit_compiled"],
                                                           b["edit_compiled"])),
    ]

def header_compile_rows(build, f, ops=1100):
    """The VM's compile of one target's generated header (one .c file that
    includes it, as stencils/jit.c does) for an `ops`-op corpus: CPU seconds,
    best of 3, gcc -O2 against an empty file, clang -O2 and gcc -O0 beside;
    then emit speed of the header's emitters against the table-driven patcher,
    from bench_runtime in this run (`f`)."""
    tmp = tempfile.mkdtemp(prefix="sg-bench-header-")
    try:
        corpus = os.path.join(tmp, "corpus")
        run([sys.executable, os.path.join(ROOT, "tests", "bench", "make_corpus.py"), corpus,
             "--ops", str(ops)])
        out = os.path.join(corpus, "out")
        run([os.path.join(build, "generator", "stencilgen"), "build", "--manifest",
             os.path.join(corpus, "corpus.yaml"), "--outdir", out, "-j2"])
        vm, empty = os.path.join(tmp, "vm.c"), os.path.join(tmp, "empty.c")
        with open(vm, "w") as fh:
            fh.write('#include "stencilrt.h"\n#include "jit_stencils.h"\n'
                     "const sr_stencil_set *vm_set(void);\n"
                     "static const sr_stencil_set set = SR_STENCIL_SET_FROM_HEADER;\n"
                     "const sr_stencil_set *vm_set(void) { return &set; }\n")
        with open(empty, "w") as fh:
            fh.write("int vm_empty;\n")

        def cpu(cc, opt, src, extra=(), inc=out):
            return min(cpu_timed([cc, opt, "-c", "-I", inc, "-I", os.path.join(ROOT, "runtime"),
                                  src, "-o", os.path.join(tmp, "out.o")] + list(extra))[1]
                       for _ in range(3))
        gcc, none = cpu("gcc", "-O2", vm), cpu("gcc", "-O2", empty)
        # The emitters at the file's -O2 instead of the header's -O1 (docs/runtime.md, "Emitters").
        gcc_o2 = cpu("gcc", "-O2", vm, ["-DSG_EMITTER_ATTRIBUTES="])
        clang, gcc0 = cpu("clang-22", "-O2", vm), cpu("gcc", "-O0", vm)
        with open(os.path.join(out, "jit_stencils-x86_64-unknown-linux-gnu.h")) as fh:
            size = len(fh.read())
        holes = header_holes(os.path.join(out, "jit_stencils-x86_64-unknown-linux-gnu.h"))
        cpython = cpython_header_seconds(build, tmp, cpu, vm)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return [("VM's compile of the generated header, %s stencils, gcc -O2 / per 1,000" % (
                 format(ops, ",")),
             "%.2f / %.2f s" % (gcc, gcc * 1000 / ops),
             "CPU, best of 3; an empty file %.2f s; clang -O2 %.2f s, gcc -O0 %.2f s; "
             "header %.1f KB per stencil" % (none, clang, gcc0, size / 1024 / ops)),
            ("the same, emitters at -O1 (the header's default) / at -O2 (SG_EMITTER_ATTRIBUTES "
             "empty)", "%.2f / %.2f s" % (gcc, gcc_o2), "ratio %.2f" % (gcc / gcc_o2)),
            ("VM's compile of the CPython-shaped corpus's x86-64 header, gcc -O2 / per 1,000",
             "%.2f / %.2f s" % (cpython[0], cpython[0] * 1000 / cpython[1]),
             "CPU, best of 3; %d stencils, %d holes (%d in the 1,100-op corpus's)" % (
                 cpython[1], cpython[2], holes)),
            ("emit speed, generated emitters / table-driven patcher",
             "%.2fx" % (f["emit_core_bytes_per_s"] / f["emit_table_bytes_per_s"]),
             "%.2f / %.2f GB/s (1000-instruction executor)" % (
                 f["emit_core_bytes_per_s"] / 1e9, f["emit_table_bytes_per_s"] / 1e9))]


def header_holes(header):
    """The holes a header's hole tables list."""
    with open(header) as fh:
        return sum(int(n) for n in re.findall(r"^static const sg_hole \w+\[(\d+)\]", fh.read(),
                                              re.M))


def cpython_header_seconds(build, tmp, cpu, vm):
    """gcc -O2 on `vm` including the CPython-shaped corpus's x86-64 header:
    CPU seconds (best of 3), its stencils and holes. Its stencils have about
    4 holes each, the 1,100-op corpus's under 2, and a VM's compile of the
    emitters grows with the holes (docs/build.md, "What a header holds")."""
    corpus, manifest, out = cpython_corpus(tmp)
    run([os.path.join(build, "generator", "stencilgen"), "build", "--manifest", manifest,
         "--outdir", out, "--target", "x86_64-unknown-linux-gnu", "-j2"], timeout=1200)
    header = os.path.join(out, "jit_stencils-x86_64-unknown-linux-gnu.h")
    with open(header) as fh:
        stencils = len(re.findall(r"^    /\* SG_OP_\w+ \*/ \{", fh.read(), re.M))
    return cpu("gcc", "-O2", vm, inc=out), stencils, header_holes(header)


def gdb_figures(build):
    """Executors registered per second with 10,000 live, GDB attached."""
    prog = os.path.join(build, "tests", "bench", "bench_gdb")
    out = run(["gdb", "-batch", "-nx", "-ex", "run", prog], timeout=1200).stdout
    return {m.group(1): float(m.group(2)) for m in re.finditer(r"^(\S+) (\S+) \S+$", out, re.M)}


def machine():
    cpu = "unknown cpu"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = re.search(r"model name\s*: (.*)", f.read()).group(1)
    except (OSError, AttributeError):
        pass
    return "%s, %d cores, %s %s" % (cpu, os.cpu_count(), platform.system(), platform.release())


def stack_figures(build, threads=4, hz=1000, seconds=4):
    """stencilrt-stack --sample on churn with `threads` threads emitting and
    freeing executors: samples per second, and how long each sample holds
    the threads stopped (median, 99th percentile)."""
    tmp = tempfile.mkdtemp(prefix="sgstack-")
    churn = subprocess.Popen([os.path.join(build, "tests", "stack", "churn"), "--threads",
                              str(threads), "--seconds", str(seconds + 20), "--stop-on-stdin",
                              "--log", os.devnull, "--max-records", "2000000"],  # never full
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        line = churn.stdout.readline()
        if not line.startswith("churn: ready"):
            raise RuntimeError("churn did not start: %r" % line)
        out = os.path.join(tmp, "samples")
        p = run([os.path.join(build, "tools", "stack", "stencilrt-stack"), "--sample", str(hz),
                 "--duration", str(seconds), "--output", os.devnull, "--samples-out", out,
                 str(churn.pid)], timeout=seconds + 120)
        rate = float(re.search(r"([\d.]+) samples/s", p.stderr).group(1))
        held = set()
        with open(out) as f:
            for line in f:
                if line.startswith("S "):
                    w = line.split()
                    held.add((w[1], int(w[4]) - int(w[3])))  # per sample, not per thread
        held = sorted(h for _, h in held)
        return {"rate": rate, "held_median": held[len(held) // 2] / 1e3,
                "held_p99": held[int(len(held) * 0.99)] / 1e3, "threads": threads, "hz": hz}
    finally:
        churn.stdin.close()
        churn.wait(timeout=120)
        shutil.rmtree(tmp, ignore_errors=True)


def farm_rows(build, ops=3000, daemons=4, jobs=32):
    """A cold batched build of a 3,000-op corpus: -j2 on this machine against
    -j32 through distcc to 4 distccd on 127.0.0.1 (sharing this machine's
    CPUs: what the farm's batching and distcc's own work cost, not a
    speed-up). Remote
    compiles are counted from the daemons' logs."""
    stencilgen = os.path.join(build, "generator", "stencilgen")
    tmp = tempfile.mkdtemp(prefix="sgfarm-")
    procs = []
    try:
        os.chmod(tmp, 0o777)  # as root distccd runs as `nobody` and writes its log here
        corpus = os.path.join(tmp, "corpus")
        run([sys.executable, os.path.join(ROOT, "tests", "bench", "make_corpus.py"), corpus,
             "--ops", str(ops)])
        manifest, out = os.path.join(corpus, "corpus.yaml"), os.path.join(corpus, "out")
        logs, hosts = [], []
        for k in range(daemons):
            with socket.socket() as sock:  # a loopback port no one listens on now
                sock.bind(("127.0.0.1", 0))
                port = sock.getsockname()[1]
            log = os.path.join(tmp, "distccd-%d.log" % k)
            procs.append(subprocess.Popen(
                ["distccd", "--daemon", "--no-detach", "--allow", "127.0.0.1", "--listen",
                 "127.0.0.1", "--port", str(port), "--jobs", str(jobs // daemons), "--log-file",
                 log, "--enable-tcp-insecure", "--log-level", "info"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            for _ in range(400):  # at most 20 s until it listens
                with socket.socket() as sock:
                    if sock.connect_ex(("127.0.0.1", port)) == 0:
                        break
                time.sleep(0.05)
            logs.append(log)
            hosts.append("127.0.0.1:%d/%d" % (port, jobs // daemons))
        cmd = [stencilgen, "build", "--manifest", manifest, "--outdir", out, "-v"]
        local, p = timed(cmd + ["-j", "2"])
        local_runs = int(re.search(r"(\d+) compiler runs", p.stderr).group(1))
        shutil.rmtree(out)
        os.makedirs(os.path.join(tmp, "distcc"))
        env = {"DISTCC_HOSTS": " ".join(hosts), "DISTCC_DIR": os.path.join(tmp, "distcc"),
               "DISTCC_FALLBACK": "0"}
        farm, p = timed(cmd + ["-j", str(jobs), "--launcher", "distcc"], env=env)
        farm_runs = int(re.search(r"(\d+) compiler runs", p.stderr).group(1))
        remote = [len(re.findall(r"COMPILE_OK exit:0", open(log).read())) for log in logs]
        return [("cold build, %d-op corpus: -j%d through distcc, %d daemons on 127.0.0.1 / "
                 "-j2 local" % (ops, jobs, daemons), "%.1f / %.1f s" % (farm, local),
                 "ratio %.2f (the daemons share this machine's %d CPUs); compiler runs %d / %d; "
                 "remote compiles by daemon %s" % (farm / local, os.cpu_count(), farm_runs,
                                                   local_runs,
                                "/".join(str(r) for r in remote)))]
    finally:
        for proc in procs:  # the daemons this function started, by pid
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)

def prebuilt_rows(build, ops=3000, jobs=2):
    """check-prebuilt on the largest corpus make_corpus.py makes here
    (docs/build.md, "Prebuilt headers"): current and after a one-op edit,
    against a no-op `stencilgen build` of the same; header bytes per stencil
    with and without the listing, for it and the bundled stencils."""
    gen = os.path.join(build, "generator", "stencilgen")
    triple = "x86_64-unknown-linux-gnu"
    header = "jit_stencils-%s.h" % triple

    def best_ms(cmd, codes, n=20):
        """Best wall and best CPU (user + system) milliseconds of n runs."""
        times, cpus = [], []
        for _ in range(n):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.monotonic()
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
            times.append(time.monotonic() - t0)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
            if p.returncode not in codes:
                raise RuntimeError("%s: exit %d\n%s" % (cmd, p.returncode, p.stderr[-2000:]))
        return min(times) * 1e3, min(cpus) * 1e3

    def sizes(manifest, out, stencils, extra=()):
        full = os.path.join(out, "full")
        bare = os.path.join(out, "bare")
        run([gen, "build", "--manifest", manifest, "--outdir", full, "--target", triple,
             "-j", str(jobs)] + list(extra), timeout=3600)
        run([gen, "build", "--manifest", manifest, "--outdir", bare, "--target", triple,
             "--cache-dir", os.path.join(full, ".stencilgen"), "--no-listing"] + list(extra),
            timeout=3600)
        return (os.path.getsize(os.path.join(full, header)) / stencils,
                os.path.getsize(os.path.join(bare, header)) / stencils)

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        bundled = sizes(os.path.join(ROOT, "stencils", "stencils.yaml"), os.path.join(tmp, "b"), 23)
        corpus = os.path.join(tmp, "corpus")
        run([sys.executable, os.path.join(ROOT, "tests", "bench", "make_corpus.py"), corpus,
             "--ops", str(ops)])
        manifest = os.path.join(corpus, "corpus.yaml")
        big = sizes(manifest, os.path.join(tmp, "c"), ops + 1)
        check = [gen, "check-prebuilt", "--manifest", manifest, "--prebuilt",
                 os.path.join(tmp, "c", "bare")]
        current = best_ms(check, (0,))
        noop = best_ms([gen, "build", "--manifest", manifest, "--outdir",
                        os.path.join(tmp, "c", "bare"), "--target", triple, "--no-listing",
                        "--cache-dir", os.path.join(tmp, "c", "full", ".stencilgen")], (0,), 5)
        src = os.path.join(corpus, "ops", "group13.c")
        with open(src) as f:
            text = f.read()
        with open(src, "w") as f:
            f.write(text.replace("CONTINUE();", "tos += 1;\n    CONTINUE();", 1))
        stale = best_ms(check, (1,))
    rows.append(("check-prebuilt, %d-op corpus (one header, %d stencils): current / one op "
                 "edited, wall (CPU)" % (ops, ops + 1),
                 "%.1f (%.1f) / %.1f (%.1f) ms" % (current + stale),
                 "no-op `stencilgen build` of the same %.1f (%.1f) ms: check-prebuilt %.1fx "
                 "faster in wall time (best of 20 / 5)" % (noop + (noop[0] / current[0],))))
    rows.append(("header bytes per stencil, with / without the listing: bundled (23) / "
                 "%d-op corpus" % ops,
                 "%.0f / %.0f; %.0f / %.0f B" % (bundled + big),
                 "without the listing: ratio %.2f / %.2f" % (bundled[1] / bundled[0],
                                                             big[1] / big[0])))
    return rows


def hot_cold_windows_rows(build):
    """Hot bytes split / not split for Windows x64 (COFF), where STENCIL_COLD()
    is dropped (docs/design.md, "Hot and cold parts"): stencilgen dump, as the
    hot_cold rows do for Linux."""
    stencilgen = os.path.join(build, "generator", "stencilgen")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        run([sys.executable, os.path.join(ROOT, "tests", "bench", "guard_corpus.py"), tmp])
        for label, manifest in (("tinyvm", os.path.join(ROOT, "stencils", "stencils.yaml")),
                                ("guard-heavy corpus", os.path.join(tmp, "guards.yaml"))):
            hot, whole = _hot_and_whole(stencilgen, manifest, "x86_64-w64-windows-gnu")
            rows.append(("hot bytes per executor, %s, Windows x64: split / not split" % label,
                         "%d / %d B" % (hot, whole), "ratio %.2f" % (hot / whole)))
    return rows


def report_rows(build, opens=3):
    """`stencilgen report` at CPython's scale: the 5-triple corpus's page,
    its size and write time, and how soon headless Chromium has it drawn."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "common"))
    import browser
    stencilgen = os.path.join(build, "generator", "stencilgen")
    tmp = tempfile.mkdtemp(prefix="sgreport-")
    try:
        corpus, manifest, out = cpython_corpus(tmp)
        run([stencilgen, "build", "--manifest", manifest, "--outdir", out, "-j", "2"],
            timeout=3600)
        page = os.path.join(tmp, "report.html")
        write = min(timed([stencilgen, "report", "-o", page, out])[0] for _ in range(3))
        as_json = min(timed([stencilgen, "report", "--format", "json", "-o",
                             os.path.join(tmp, "r.json"), out])[0] for _ in range(3))
        headers = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out)
                      if f.startswith("jit_stencils-"))
        ready = []
        with browser.Browser(tmp) as b:
            for _ in range(opens):
                b.call("Page.navigate", {"url": "about:blank"})
                ready.append(float(b.open("file://" + page, "document.body.dataset.ready",
                                          timeout=120)))
        ready.sort()
        return [("stencilgen report, CPython-shaped corpus (5 triples): write the page / the JSON",
                 "%.2f / %.2f s" % (write, as_json),
                 "page %.1f MB from %.1f MB of headers (target < 5 MB)" % (
                     os.path.getsize(page) / 1e6, headers / 1e6)),
                ("stencilgen report, that page in headless Chromium: drawn after navigation, "
                 "median of %d" % opens, "%.0f ms" % ready[len(ready) // 2],
                 "target < 2 s; runs %.0f-%.0f ms" % (ready[0], ready[-1]))]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--scale-only", action="store_true",
                    help="only the CPython-shaped corpus's rows")
    ap.add_argument("--pg-only", action="store_true",
                    help="only the PostgreSQL rows (pgstencil, llvmjit, jit off)")
    ap.add_argument("--baseline", metavar="REV",
                    help="with --scale-only: also measure stencilgen as git revision REV "
                         "builds it, side by side")
    ap.add_argument("--html", metavar="FILE",
                    help="also write the table as an HTML page, with charts of the "
                         "CPython-shaped corpus's cold, no-op and edit against stencil count")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    if args.scale_only:
        return finish(build, args, scale_only_rows(build, args.baseline))
    if args.pg_only:
        return finish(build, args, pg_rows(build))
    f = runtime_figures(build)
    g = generator_figures(build)
    rows = []
    rows.append(("cold build, 300-op corpus, -j2 / floor (same clang commands)",
                 "%.2f / %.2f s" % (g["cold"], g["floor"]), "ratio %.2f" % (g["cold"] / g["floor"])))
    rows.append(("cold build, 300-op corpus, -j2: compiles forked from stencilgen / clang-22 "
                 "started per compile (--exec-clang)",
                 "%.2f / %.2f s" % (g["cold"], g["exec"]),
                 "ratio %.2f (runs %.2f-%.2f / %.2f-%.2f s)" % (
                     g["cold"] / g["exec"], min(g["colds"]), max(g["colds"]), min(g["execs"]),
                     max(g["execs"]))))
    rows.append(("cold build, 300-op corpus, -j2 / CPython's 4-tool pipeline per op",
                 "%.2f / %.2f s" % (g["cold"], g["pipeline"]),
                 "ratio %.2f (%d units through clang -S, clang -c, llvm-objdump, llvm-readobj; "
                 "runs: stencilgen %.1f-%.1f, pipeline %.1f-%.1f s)" % (
                     g["cold"] / g["pipeline"], g["ops"], min(g["colds"]), max(g["colds"]),
                     min(g["pipelines"]), max(g["pipelines"]))))
    rows += batched_rows(batched_figures(build, g), g)
    rows += compiler_rows(build)
    rows += scale_rows(scale_figures(os.path.join(build, "generator", "stencilgen")))
    rows += variant_rows(variant_figures(build))
    rows += farm_rows(build)
    rows.append(("no-op rebuild, 300 ops: best / median of 10", "%.0f / %.0f ms" % (
        g["noop"] * 1e3, g["noop_median"] * 1e3), ""))
    rows.append(("one-op edit rebuild / that op's compile alone (best of 3)",
                 "%.0f / %.0f ms" % (g["edit"] * 1e3, g["one_compile"] * 1e3),
                 "%s compiled; +%.0f ms over the compile" % (
                     g["edit_summary"], (g["edit"] - g["one_compile"]) * 1e3)))
    rows.append(("emit (copy+patch), 1000-instruction executor",
                 "%.2f GB/s" % (f["emit_core_bytes_per_s"] / 1e9),
                 "%.2fx memcpy of the same stencils (%.1f GB/s); %.1fx one bulk memcpy "
                 "(%.1f GB/s)" % (
                     f["emit_core_vs_stencil_copy"], f["stencil_copy_bytes_per_s"] / 1e9,
                     f["emit_core_vs_memcpy"], f["memcpy_bytes_per_s"] / 1e9)))
    rows.append(("emit, hole tables instead of generated emitters",
                 "%.2f GB/s" % (f["emit_table_bytes_per_s"] / 1e9),
                 "generated emitters %.2fx faster" % (
                     f["emit_core_bytes_per_s"] / f["emit_table_bytes_per_s"])))
    rows += header_compile_rows(build, f)
    def lives(tag):
        return [f["emit_free_8instr_%slive_%s" % (n, tag)] for n in ("100", "10000", "100000")]

    bare = lives("unregistered")
    rows.append(("sr_emit+free, 8 instrs, nothing registered: 100 / 10,000 / 100,000 live",
                 "%.2f / %.2f / %.2f us" % tuple(bare), "ratio %.2f (100,000 / 100)" % (
                     bare[2] / bare[0])))
    for tag, label in (("gdb_off", "libgcc"), ("gdb_on", "libgcc + GDB")):
        reg = [x - y for x, y in zip(lives(tag), bare)]
        rows.append(("registration per executor (%s): 100 / 10,000 / 100,000 live" % label,
                     "%.2f / %.2f / %.2f us" % tuple(reg), "emit+free minus the unregistered run"))
    reg = [x - y for x, y in zip(lives("gdb_off"), lives("no_registry"))]
    rows.append(("registry for other processes, per executor: 100 / 10,000 / 100,000 live",
                 "%.3f / %.3f / %.3f us" % tuple(reg),
                 "target <= 0.2 us: emit+free with libgcc, listed minus not listed"))
    for tag, label in (("gdb_off", "libgcc only"), ("gdb_on", "libgcc + GDB objects")):
        t = lives(tag)
        rows.append(("sr_emit+free, 8 instrs, %s: 100 / 10,000 / 100,000 live" % label,
                     "%.2f / %.2f / %.2f us" % tuple(t), "ratio %.2f (100,000 / 100)" % (
                         t[2] / t[0])))
        rows.append(("sr_emit+free, 1000 instrs, %s" % label,
                     "%.1f us" % f["emit_free_1000instr_" + tag], ""))
        a, b = f["backtrace_100live_" + tag], f["backtrace_10000live_" + tag]
        rows.append(("backtrace() through JIT, %s: 100 / 10,000 live" % label,
                     "%.2f / %.2f us" % (a, b), "ratio %.2f" % (b / a)))
    one = [f["emit_free_8instr_%slive_gdb_on_one_view" % n] for n in ("100", "10000")]
    two = lives("gdb_on")
    rows.append(("sr_emit+free, 8 instrs, libgcc + GDB, one code view: 100 / 10,000 live",
                 "%.1f / %.1f us" % tuple(one), "two views %.1fx faster (at 100 live); "
                 "1000 instrs %.1f us" % (one[0] / two[0],
                                          f["emit_free_1000instr_gdb_on_one_view"])))
    rows.append(("memory per 8-instr executor, 10,000 live: JIT chunk (code) / records / "
                 "GDB object",
                 "%.0f (%.0f) / %.0f / %.0f B" % (
                     f["memory_per_executor_chunk"], f["memory_per_executor_code"],
                     f["memory_per_executor_records"], f["memory_per_executor_gdb_object"]),
                 "records: executor, names, offsets, lookup table; FDE share %.2f B; one GDB "
                 "object per sr_emit" % f["memory_per_executor_fde_share"]))
    k = stack_figures(build)
    rows.append(("stencilrt-stack --sample %d on a %d-thread target emitting and freeing "
                 "executors" % (k["hz"], k["threads"]),
                 "%.0f samples/s" % k["rate"],
                 "threads held stopped %.0f us a sample (median), %.0f us (99th percentile)" % (
                     k["held_median"], k["held_p99"])))
    d = gdb_figures(build)
    rows.append(("GDB attached, 10,000 live: registered/s, batches of 100 / single",
                 "%.0f / %.0f per s" % (d["registered_per_s_batch100_at10000live"],
                                        d["registered_per_s_single_at10000live"]),
                 "%d GDB objects" % d["gdb_objects"]))
    rows.append(("GDB attached, 10,000 live: registered/s, batches of 1000 / single under "
                 "sr_gdb_hold",
                 "%.0f / %.0f per s" % (d["registered_per_s_batch1000_at10000live"],
                                        d["registered_per_s_single_held_at10000live"]),
                 "objects of at most 256 executors"))
    for program, repeat in PROGRAMS:
        # Alternate the two, best of five each: the machine's speed wanders,
        # JIT code's more than the interpreter's (both 1.5-2x between runs on
        # the 2-core Xeon VM; the range is shown).
        interp, jit = [], []
        for _ in range(5):
            interp.append(tinyvm_ms(build, "interp", program, repeat))
            jit.append(tinyvm_ms(build, "jit", program, repeat))
        i, j = min(interp), min(jit)
        rows.append(("tinyvm %s: interpreter / JIT (best of 5)" % program,
                     "%.2f / %.2f ms" % (i, j),
                     "JIT %.2fx faster (runs: interpreter %.1f-%.1f, JIT %.1f-%.1f ms)" % (
                         i / j, min(interp), max(interp), min(jit), max(jit))))
    rows += orc_rows(build)
    rows += prebuilt_rows(build)
    rows += hot_cold_rows(build)
    rows += hot_cold_windows_rows(build)
    rows += tinyvm_variant_rows(build)
    rows += report_rows(build)
    rows += pg_rows(build)
    return finish(build, args, rows)


# The scale curve's corpus sizes: generated micro-ops, about 4 stencils each.
CURVE_OPS = (35, 70, 140, 280)


def finish(build, args, rows):
    """Print the table; with --html, measure the scale curve and write the page."""
    rc = print_rows(rows)
    if args.html:
        import bench_html
        curve = bench_html.scale_curve(os.path.join(build, "generator", "stencilgen"),
                                       CURVE_OPS)
        for p in curve:
            print("scale curve: %d stencils x %d triples: cold %.2f s, no-op %.0f ms, "
                  "edit %.0f ms" % (p["stencils"], p["triples"], p["cold"], p["noop"] * 1e3,
                                    p["edit"] * 1e3))
        bench_html.write(args.html, "stencilgen benchmarks on %s" % machine(), rows, curve)
        print("wrote %s" % args.html)
    return rc


def scale_only_rows(build, baseline):
    after = scale_figures(os.path.join(build, "generator", "stencilgen"))
    if not baseline:
        return scale_rows(after)
    tmp = tempfile.mkdtemp(prefix="sgbaseline-")
    try:
        before = scale_figures(baseline_stencilgen(baseline, tmp), seven=False)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return (scale_rows(before, label="[%s] " % baseline) + scale_rows(after) +
            scale_before_after_rows(before, after, baseline))


def print_rows(rows):
    width = max(len(r[0]) for r in rows)
    print("stencilgen benchmarks on %s" % machine())
    print("%-*s  %-22s  %s" % (width, "measure", "figure", "comparison"))
    for r in rows:
        print("%-*s  %-22s  %s" % (width, r[0], r[1], r[2]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
