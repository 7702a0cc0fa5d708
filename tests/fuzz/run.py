#!/usr/bin/env python3
"""Build and run the libFuzzer targets (clang-22, ASan+UBSan) from a seed corpus.

  tests/fuzz/run.py --build build (--seconds N | --brief)
                    [--target cfi|win64_unwind|arm64_unwind|fp_chain|stencil_blob|manifest|registry|objfile|cache_index|
                     report_header]

--seconds: each target for N seconds, growing its corpus in build/fuzz/ from
run to run (./run.sh fuzz). --brief: each target a fixed number of inputs
(10-30 s here), from its seeds alone, with a fixed random seed (libFuzzer's
corpus still varies a little with timing): a clean checkout on a slower
machine explores about what a run here did, not less, and nothing that
earlier runs here found.

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
    # a seed "generator" that is a list of globs names seed files to copy instead,
    # one that is a .py script is run (with the seed directory) as it is
    "cfi": ("tests/fuzz/fuzz_cfi.c", ["generator/cfi.c"], "tests/fuzz/make_cfi_seeds.c", []),
    # the seeds are written by the encoder itself
    "stencil_blob": ("tests/fuzz/fuzz_stencil_blob.c",
                      ["generator/stencil_blob.c", "generator/util.c", "generator/digest.c",
                       "-lcrypto"],
                      "tests/fuzz/make_stencil_blob_seeds.c",
                      ["generator/stencil_blob.c", "generator/util.c", "generator/digest.c",
                       "-lcrypto"]),
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
    # a Windows ARM64 shim's .xdata record or packed .pdata word; the seeds
    # are real and documented ones
    "arm64_unwind": ("tests/fuzz/fuzz_arm64_unwind.c",
                     ["generator/arm64_unwind.c", "generator/cfi.c", "generator/util.c"],
                     "tests/fuzz/make_arm64_unwind_seeds.py", []),
    # a 32-bit x86 shim's code, or the prolog a cache entry keeps; the seeds
    # are clang's prologs and hand-made ones
    "fp_chain": ("tests/fuzz/fuzz_fp_chain.c",
                 ["generator/fp_chain.c", "generator/cfi.c", "generator/util.c"],
                 "tests/fuzz/make_fp_chain_seeds.py", []),
    # an object file, as the compiler or the cache hands it to the generator:
    # LLVM's object library and objreader.cpp's normalisation (C++, linked
    # with libLLVM, see build_cxx_target); the seeds are compiled by clang-22
    "objfile": ("tests/fuzz/fuzz_objfile.c",
                ["generator/objfile.c", "generator/util.c", "generator/property_notes.c",
                 "generator/llvm/objreader.cpp"],
                "tests/fuzz/make_objfile_seeds.py", []),
    # a shared cache directory's record index, which any run may have written
    # a generated header, as `stencilgen report` reads it from anywhere; the
    # seeds are the golden headers
    "report_header": ("tests/fuzz/fuzz_report_header.c",
                      ["generator/report_read.c", "generator/util.c", "generator/diag.c"],
                      ["tests/golden/*.h", "tests/golden/no-hot-cold/*.h"], []),
    "cache_index": ("tests/fuzz/fuzz_cache_index.c",
                    ["generator/cache.c", "generator/opunit.c", "generator/util.c",
                     "generator/digest.c", "-lcrypto"],
                    "tests/fuzz/make_cache_index_seeds.py", []),
}


# --brief: inputs per target, 10-30 s each on a 2-core AMD EPYC.
BRIEF_RUNS = {"cfi": 900000, "stencil_blob": 5000000, "manifest": 700000, "registry": 25000,
              "win64_unwind": 800000, "arm64_unwind": 40000, "fp_chain": 200000, "objfile": 1500000, "cache_index": 30000,
              "report_header": 200000}


def include_flags(build):
    """What every target and seed maker may include: the generator's and the
    reader's headers, the runtime's, and the bundled stencils' (generated)."""
    dirs = [os.path.join(ROOT, d) for d in ("generator", "generator/llvm", "tools/stack", "runtime", "stencils")]
    return sum((["-I", d] for d in dirs + [os.path.join(build, "stencils")]), [])


# Sources a glob may name that build only for Windows (the fuzzers run here).
WINDOWS_ONLY = {"runtime/winunwind.c"}


def sources(s):
    if s.startswith("-"):
        return [s]
    return sorted(f for f in glob.glob(os.path.join(ROOT, s))
                  if os.path.relpath(f, ROOT) not in WINDOWS_ONLY)


def llvm_config(*args):
    return subprocess.run(["llvm-config-22"] + list(args), check=True, stdout=subprocess.PIPE,
                          text=True).stdout.split()


def build_cxx_target(files, inc, fuzzer):
    """A target with C++ sources (objreader.cpp): each is compiled as
    generator/meson.build does (LLVM's flags, no RTTI, no exceptions) under
    the same sanitizers, and everything is linked by clang++-22 with libLLVM."""
    objs = []
    for f in (f for f in files if f.endswith(".cpp")):
        obj = "%s-%s.o" % (fuzzer, os.path.basename(f)[:-4])
        subprocess.run(["clang++-22"] + FLAGS + inc + llvm_config("--cxxflags") +
                       ["-fno-rtti", "-fno-exceptions", "-Wno-deprecated-declarations",
                        "-c", f, "-o", obj], check=True, timeout=600)
        objs.append(obj)
    libdir = llvm_config("--libdir")[0]
    subprocess.run(["clang++-22"] + FLAGS + inc + ["-x", "c"] +
                   [f for f in files if not f.endswith(".cpp")] + ["-x", "none"] + objs +
                   llvm_config("--ldflags") + llvm_config("--libs") +
                   ["-Wl,-rpath," + libdir, "-o", fuzzer], check=True, timeout=600)


def build_target(name, outdir, build):
    src, deps, seeds_src, seeds_deps = TARGETS[name]
    fuzzer = os.path.join(outdir, "fuzz_" + name)
    seeder = os.path.join(outdir, "seeds_" + name)
    inc = include_flags(build)
    files = sum(map(sources, [src] + deps), [])
    if any(f.endswith(".cpp") for f in files):
        build_cxx_target(files, inc, fuzzer)
    else:
        subprocess.run(["clang-22"] + FLAGS + inc + files + ["-o", fuzzer], check=True,
                       timeout=600)
    if isinstance(seeds_src, list) or seeds_src.endswith(".py"):
        return fuzzer, seeds_src
    subprocess.run(["clang-22", "-O1", "-D_GNU_SOURCE"] + inc +
                   sum(map(sources, [seeds_src] + seeds_deps), []) +
                   ["-o", seeder], check=True, timeout=600)
    return fuzzer, seeder


def make_seeds(name, seeder, seeds):
    """The target's seeds, then the inputs that once crashed it
    (tests/fuzz/regressions/NAME/), so that every run tries them first."""
    write_seeds(seeder, seeds)
    regressions = os.path.join(ROOT, "tests", "fuzz", "regressions", name)
    for f in sorted(os.listdir(regressions)) if os.path.isdir(regressions) else []:
        shutil.copy(os.path.join(regressions, f), os.path.join(seeds, "regression-" + f))


def write_seeds(seeder, seeds):
    if isinstance(seeder, str) and seeder.endswith(".py"):
        subprocess.run([sys.executable, os.path.join(ROOT, seeder), seeds], check=True,
                       timeout=600)
    elif isinstance(seeder, list):
        for pattern in seeder:
            for i, f in enumerate(sorted(glob.glob(os.path.join(ROOT, pattern), recursive=True))):
                shutil.copy(f, os.path.join(seeds, "%s-%d" % (os.path.basename(f), i)))
    else:
        subprocess.run([seeder, seeds], check=True, timeout=60)


def run_target(name, outdir, seconds, build):
    """Fuzz one target for `seconds`, or (None) its BRIEF_RUNS inputs."""
    fuzzer, seeder = build_target(name, outdir, build)
    seeds = os.path.join(outdir, "seeds-" + name)
    corpus = os.path.join(outdir, "corpus-" + name + ("" if seconds else "-brief"))
    if not seconds:
        shutil.rmtree(corpus, ignore_errors=True)
    os.makedirs(seeds, exist_ok=True)
    os.makedirs(corpus, exist_ok=True)
    make_seeds(name, seeder, seeds)
    limit = (["-max_total_time=%d" % seconds] if seconds else
             ["-runs=%d" % BRIEF_RUNS[name], "-seed=1"])
    bound = seconds or 120  # a brief run: at most 30 s here, bounded like a 2-minute one
    # Run from the repository, so that manifest paths can name real files;
    # -close_fd_mask=2: the manifest reader's error messages are expected.
    p = subprocess.run([fuzzer, "-close_fd_mask=2"] + limit +
                       ["-timeout=10", "-rss_limit_mb=2048", "-print_final_stats=1",
                        "-artifact_prefix=" + outdir + "/crash-" + name + "-", corpus, seeds],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=bound * 4 + 300, cwd=ROOT)
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
    how = ap.add_mutually_exclusive_group(required=True)
    how.add_argument("--seconds", type=int)
    how.add_argument("--brief", action="store_true")
    ap.add_argument("--target", choices=sorted(TARGETS), action="append")
    args = ap.parse_args()
    outdir = os.path.join(os.path.abspath(args.build), "fuzz")
    os.makedirs(outdir, exist_ok=True)
    ok = all([run_target(t, outdir, args.seconds, os.path.abspath(args.build))
              for t in (args.target or sorted(TARGETS))])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
