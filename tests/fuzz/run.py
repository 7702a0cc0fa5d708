#!/usr/bin/env python3
"""Build and run the libFuzzer targets (clang-22, ASan+UBSan) from a seed corpus.

  tests/fuzz/run.py --build build --seconds N [--target cfi|win64_unwind|stencil_blob|manifest|registry]

Prints one line per target: executions, executions/s, corpus size, crashes.
Exit status 1 if any target crashed (its reproducer is kept in build/fuzz/).
"""
import argparse
import glob
import os
import shutil
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FLAGS = ["-g", "-O1", "-fsanitize=fuzzer,address,undefined", "-fno-sanitize-recover=all"]

TARGETS = {
    # name: (fuzz target source, other sources, seed generator, its other sources);
    # a seed "generator" that is a list of globs names seed files to copy instead
    "cfi": ("tests/fuzz/fuzz_cfi.c", ["generator/cfi.c"], "tests/fuzz/make_cfi_seeds.c", []),
    # the seeds are written by the encoder itself
    "stencil_blob": ("tests/fuzz/fuzz_stencil_blob.c",
                      ["generator/stencil_blob.c", "generator/util.c"],
                      "tests/fuzz/make_stencil_blob_seeds.c",
                      ["generator/stencil_blob.c", "generator/util.c"]),
    # every manifest in the repository
    "manifest": ("tests/fuzz/fuzz_manifest.c",
                 ["generator/manifest.c", "generator/util.c", "generator/diag.c", "-lyaml"],
                 ["stencils/*.yaml", "tests/**/*.yaml"], []),
    # another process's memory, as stencilrt-stack reads it; the seeds are a
    # real runtime's registry as the reader copied it
    "registry": ("tests/fuzz/fuzz_registry.c", ["tools/stack/registry_reader.c"],
                 "tests/fuzz/make_registry_seeds.c",
                 ["tools/stack/registry_reader.c", "runtime/*.c", "-lpthread"]),
    # a shim's UNWIND_INFO (.xdata); the seeds are real and hand-made ones
    "win64_unwind": ("tests/fuzz/fuzz_win64_unwind.c",
                     ["generator/win64_unwind.c", "generator/cfi.c", "generator/util.c"],
                     "tests/fuzz/make_win64_unwind_seeds.c", []),
}


def include_flags(build):
    """What every target and seed maker may include: the generator's and the
    reader's headers, the runtime's, and the bundled stencils' (generated)."""
    dirs = [os.path.join(ROOT, d) for d in ("generator", "tools/stack", "runtime", "stencils")]
    return sum((["-I", d] for d in dirs + [os.path.join(build, "stencils")]), [])


# Sources a glob may name that build only for Windows (the fuzzers run here).
WINDOWS_ONLY = {"runtime/winunwind.c"}


def sources(s):
    if s.startswith("-"):
        return [s]
    return sorted(f for f in glob.glob(os.path.join(ROOT, s))
                  if os.path.relpath(f, ROOT) not in WINDOWS_ONLY)


def build_target(name, outdir, build):
    src, deps, seeds_src, seeds_deps = TARGETS[name]
    fuzzer = os.path.join(outdir, "fuzz_" + name)
    seeder = os.path.join(outdir, "seeds_" + name)
    inc = include_flags(build)
    subprocess.run(["clang-22"] + FLAGS + inc + sum(map(sources, [src] + deps), []) +
                   ["-o", fuzzer], check=True, timeout=600)
    if isinstance(seeds_src, list):
        return fuzzer, seeds_src
    subprocess.run(["clang-22", "-O1", "-D_GNU_SOURCE"] + inc +
                   sum(map(sources, [seeds_src] + seeds_deps), []) +
                   ["-o", seeder], check=True, timeout=600)
    return fuzzer, seeder


def make_seeds(seeder, seeds):
    if isinstance(seeder, list):
        for pattern in seeder:
            for i, f in enumerate(sorted(glob.glob(os.path.join(ROOT, pattern), recursive=True))):
                shutil.copy(f, os.path.join(seeds, "%s-%d" % (os.path.basename(f), i)))
    else:
        subprocess.run([seeder, seeds], check=True, timeout=60)


def run_target(name, outdir, seconds, build):
    fuzzer, seeder = build_target(name, outdir, build)
    seeds = os.path.join(outdir, "seeds-" + name)
    corpus = os.path.join(outdir, "corpus-" + name)
    os.makedirs(seeds, exist_ok=True)
    os.makedirs(corpus, exist_ok=True)
    make_seeds(seeder, seeds)
    # Run from the repository, so that manifest paths can name real files;
    # -close_fd_mask=2: the manifest reader's error messages are expected.
    p = subprocess.run([fuzzer, "-close_fd_mask=2", "-max_total_time=%d" % seconds, "-timeout=10",
                        "-rss_limit_mb=2048", "-print_final_stats=1",
                        "-artifact_prefix=" + outdir + "/crash-" + name + "-", corpus, seeds],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=seconds + 300, cwd=ROOT)
    execs = re.search(r"stat::number_of_executed_units:\s*(\d+)", p.stdout)
    rate = re.search(r"stat::average_exec_per_sec:\s*(\d+)", p.stdout)
    crashed = p.returncode != 0
    print("fuzz %s: %s executions, %s exec/s, %d corpus files, %s" % (
        name, execs.group(1) if execs else "?", rate.group(1) if rate else "?",
        len(os.listdir(corpus)), "CRASH (see %s)" % outdir if crashed else "0 crashes"))
    if crashed:
        print(p.stdout[-6000:])
    return not crashed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--seconds", type=int, default=600)
    ap.add_argument("--target", choices=sorted(TARGETS), action="append")
    args = ap.parse_args()
    outdir = os.path.join(os.path.abspath(args.build), "fuzz")
    os.makedirs(outdir, exist_ok=True)
    ok = all([run_target(t, outdir, args.seconds, os.path.abspath(args.build))
              for t in (args.target or sorted(TARGETS))])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
