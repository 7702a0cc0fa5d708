#!/usr/bin/env python3
"""Run every test suite; the last line is "N passed, N failed".

  tests/run.py --build build [--asan-build build-asan] [--clang19-build build-clang19]
               [-k SUBSTRING]

Integration tests (tests/integration/test_*.py) run against --build; the unit
test programs run from both builds; with --asan-build the generator tests that
exercise parsing and error paths run again with the sanitized generator; with
--clang19-build the modules that set CLANG19 run again on that tree, whose
stencils clang-19 compiled (meson option stencil_clang), and on its AArch64
cross build beside it (DIR-aarch64).
"""
import argparse
import importlib.util
import os
import re
import subprocess
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest  # noqa: E402

UNIT_PROGRAMS = ["tests/unit/test_cfi", "tests/unit/test_stencil_blob", "tests/unit/test_util", "tests/unit/test_cache",
                 "tests/unit/test_emit", "tests/unit/test_runtime_api", "tests/unit/test_alloc_failures",
                 "tests/unit/test_registry", "tests/stack/test_registry_reader",
                 "tests/unit/test_win64_unwind", "tests/unit/test_arm64_unwind", "tests/unit/test_fp_chain",
                 "tests/unit/test_property_notes",
                 "tests/unit/test_misuse"]
# Built and run in the unsanitized build only: ThreadSanitizer cannot be
# combined with the other build's ASan.
PLAIN_BUILD_PROGRAMS = ["tests/unit/test_misuse_tsan"]
UNIT_TIMEOUT = 300


def load_tests(pattern):
    tests = []
    d = os.path.join(sgtest.ROOT, "tests", "integration")
    for fname in sorted(os.listdir(d)):
        if not (fname.startswith("test_") and fname.endswith(".py")):
            continue
        spec = importlib.util.spec_from_file_location(fname[:-3], os.path.join(d, fname))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        for name in sorted(vars(mod)):
            fn = getattr(mod, name)
            full = "%s.%s" % (fname[:-3], name)
            if name.startswith("test_") and callable(fn) and (not pattern or pattern in full):
                tests.append((full, fn, {"asan": getattr(mod, "ASAN", False),
                                         "clang-19": getattr(mod, "CLANG19", False)}))
    return tests


def run_unit(build, label):
    """Run the C unit-test programs; each prints its own 'N passed, N failed'."""
    passed = failed = 0
    for prog in UNIT_PROGRAMS + ([] if label else PLAIN_BUILD_PROGRAMS):
        path = os.path.join(build, prog)
        name = "%s%s" % (prog, label)
        try:
            p = subprocess.run([path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, timeout=UNIT_TIMEOUT)
            out, rc = p.stdout, p.returncode
        except (OSError, subprocess.TimeoutExpired) as e:
            out, rc = str(e), -1
        m = re.search(r"^(\d+) passed, (\d+) failed$", out, re.M)
        if m and rc == 0 and int(m.group(2)) == 0:
            passed += int(m.group(1))
            print("ok   %s (%s cases)" % (name, m.group(1)), flush=True)
        else:
            failed += 1 + (int(m.group(2)) if m else 0)
            print("FAIL %s (exit %s)\n%s" % (name, rc, out[-3000:]), flush=True)
    return passed, failed


def run_one(full, fn, build, label):
    ctx = sgtest.Ctx(build, full.split(".")[-1])
    t0 = time.monotonic()
    try:
        fn(ctx)
    except Exception as e:  # a failure or a harness error fails the test; sgtest.Skip skips it
        if isinstance(e, sgtest.Skip):
            print("skip %s%s: %s" % (full, label, e), flush=True)
            return None
        detail = str(e) if isinstance(e, sgtest.TestFailure) else traceback.format_exc()
        print("FAIL %s%s (%.1fs)\n     %s" % (full, label, time.monotonic() - t0,
                                             detail.replace("\n", "\n     ")), flush=True)
        return False
    finally:
        ctx.cleanup()
    print("ok   %s%s (%.1fs)" % (full, label, time.monotonic() - t0), flush=True)
    return True


def main():
    # Sanitizer findings must fail the run, not scroll by.
    os.environ.setdefault("UBSAN_OPTIONS", "halt_on_error=1:print_stacktrace=1")
    os.environ.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--asan-build")
    ap.add_argument("--clang19-build")
    ap.add_argument("-k", dest="pattern")
    args = ap.parse_args()
    passed = failed = 0
    p, f = run_unit(args.build, "")
    passed, failed = passed + p, failed + f
    builds = [(args.build, "", None)]
    if args.asan_build:
        p, f = run_unit(args.asan_build, " [asan]")
        passed, failed = passed + p, failed + f
        builds.append((args.asan_build, " [asan]", "asan"))
    if args.clang19_build:
        builds.append((args.clang19_build, " [clang-19]", "clang-19"))
    for full, fn, runs_in in load_tests(args.pattern):
        for build, label, kind in builds:
            if kind and not runs_in[kind]:
                continue
            ok = run_one(full, fn, build, label)
            if ok:
                passed += 1
            elif ok is not None:  # None: skipped
                failed += 1
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
