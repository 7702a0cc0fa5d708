#!/usr/bin/env python3
"""./run.sh bench: figures measured side by side in one run, printed as one table.

Every ratio compares two measurements taken in this run on this machine; no
figure is compared against a fixed time.
"""
import argparse
import os
import platform
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROGRAMS = [("loop.tvm", 5), ("fib.tvm", 20)]


def run(cmd, timeout=600, env=None):
    full = dict(os.environ)
    full.update(env or {})
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=timeout, env=full, check=True)


def runtime_figures(build):
    out = run([os.path.join(build, "tests", "bench", "bench_runtime")]).stdout
    return {m.group(1): float(m.group(2)) for m in re.finditer(r"^(\S+) (\S+) \S+$", out, re.M)}


def tinyvm_ms(build, mode, program, repeat):
    p = run([os.path.join(build, "stencils", "tinyvm"), "--" + mode, "--time", "--repeat",
             str(repeat), os.path.join(ROOT, "stencils", "programs", program)])
    return float(re.search(r"time: ([0-9.]+) ms", p.stderr).group(1)) / repeat


def machine():
    cpu = "unknown cpu"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = re.search(r"model name\s*: (.*)", f.read()).group(1)
    except (OSError, AttributeError):
        pass
    return "%s, %d cores, %s %s" % (cpu, os.cpu_count(), platform.system(), platform.release())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    f = runtime_figures(build)
    rows = []
    rows.append(("emit (copy+patch), 1000-instruction executor",
                 "%.2f GB/s" % (f["emit_core_bytes_per_s"] / 1e9),
                 "%.1fx slower than memcpy (%.1f GB/s)" % (f["emit_core_vs_memcpy"],
                                                           f["memcpy_bytes_per_s"] / 1e9)))
    for tag, label in (("gdb_off", "libgcc only"), ("gdb_on", "libgcc + GDB objects")):
        a, b = f["emit_free_8instr_100live_" + tag], f["emit_free_8instr_10000live_" + tag]
        rows.append(("sr_emit+free, 8 instrs, %s: 100 / 10,000 live" % label,
                     "%.1f / %.1f us" % (a, b), "ratio %.2f" % (b / a)))
        rows.append(("sr_emit+free, 1000 instrs, %s" % label,
                     "%.1f us" % f["emit_free_1000instr_" + tag], ""))
        a, b = f["backtrace_100live_" + tag], f["backtrace_10000live_" + tag]
        rows.append(("backtrace() through JIT, %s: 100 / 10,000 live" % label,
                     "%.2f / %.2f us" % (a, b), "ratio %.2f" % (b / a)))
    for program, repeat in PROGRAMS:
        i = tinyvm_ms(build, "interp", program, repeat)
        j = tinyvm_ms(build, "jit", program, repeat)
        rows.append(("tinyvm %s: interpreter / JIT" % program, "%.2f / %.2f ms" % (i, j),
                     "JIT %.2fx faster" % (i / j)))
    width = max(len(r[0]) for r in rows)
    print("stencilgen benchmarks on %s" % machine())
    print("%-*s  %-22s  %s" % (width, "measure", "figure", "comparison"))
    for r in rows:
        print("%-*s  %-22s  %s" % (width, r[0], r[1], r[2]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
