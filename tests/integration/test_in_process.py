"""Compiles by the clang the generator links run clang's driver and cc1 in a forked
child of stencilgen instead of starting the executable (docs/build.md, "Compiles without
starting clang"). That must change nothing but the time: the same objects, byte for
byte, the same headers, exit codes and messages as the clang executable's, on every
manifest in the tree; and only that clang runs this way (a wrapper, a launcher or
--exec-clang start the executable)."""
import glob
import os
import re

from sgtest import TRIPLE, check, read, write

ASAN = True  # the fork path runs in the sanitized generator too

IN_PROCESS = "(clang's driver and cc1 in forked children)"


def build(ctx, manifest, out, *extra, **kw):
    kw.setdefault("check", False)
    kw.setdefault("timeout", 900)
    return ctx.build_stencils(manifest, out, "--units", "per-op", "-j", "2", "-v", *extra, **kw)


def outcome(p, out):
    """Exit code, headers, every kept object and the error lines of a build."""
    files = {}
    for path in sorted(glob.glob(os.path.join(out, "jit_stencils*.h")) +
                       glob.glob(os.path.join(out, ".stencilgen", "*-*-*", "*.o"))):
        files[os.path.relpath(path, out)] = read(path, "rb")
    errors = [re.sub(r"run\.\d+-[0-9a-f]+", "run.X", l.replace(out, "OUT"))
              for l in p.stderr.splitlines() if ": error:" in l or ": warning:" in l]
    return p.returncode, files, errors


def differences(a, b):
    (ra, fa, ea), (rb, fb, eb) = a, b
    diff = []
    if ra != rb:
        diff.append("exit %d vs %d" % (ra, rb))
    if fa.keys() != fb.keys():
        diff.append("files %s vs %s" % (sorted(set(fa) ^ set(fb)), "the other build's"))
    diff += ["%s differs" % n for n in sorted(set(fa) & set(fb)) if fa[n] != fb[n]]
    if ea != eb:
        diff.append("messages differ:\n%s\nvs\n%s" % ("\n".join(ea), "\n".join(eb)))
    return diff


def both_ways(ctx, manifest, name, *extra):
    """The manifest built in-process and by the executable; both outcomes."""
    runs = []
    for how in ("fork", "exec"):
        out = os.path.join(ctx.tmp, "%s-%s" % (name, how))
        p = build(ctx, manifest, out, *extra, *(["--exec-clang"] if how == "exec" else []))
        compiled = re.search(r"[1-9]\d* compiler runs", p.stderr) is not None
        if how == "fork" and compiled:
            check(IN_PROCESS in p.stderr, "%s: the default build started clang: %s", manifest,
                  p.stderr[-1500:])
        if how == "exec":
            check(IN_PROCESS not in p.stderr, "%s: --exec-clang compiled in-process", manifest)
        runs.append(outcome(p, out))
    return runs


def test_in_process_equals_the_executable_on_every_manifest(ctx):
    manifests = [ctx.path("stencils", "stencils.yaml"), ctx.path("tests", "golden", "golden.yaml")]
    manifests += sorted(glob.glob(ctx.path("tests", "fixtures", "**", "*.yaml"), recursive=True))
    objects = failed = 0
    for i, m in enumerate(manifests):
        fork, exe = both_ways(ctx, m, "m%d" % i)
        diff = differences(fork, exe)
        check(not diff, "%s: in-process compiles differ from clang's: %s", m, "; ".join(diff))
        objects += sum(n.endswith(".o") for n in fork[1])
        failed += fork[0] != 0
    # The bundled manifest alone has 30-odd ops on two targets.
    check(objects >= 100, "only %d objects compared: the comparison covered too little", objects)
    check(failed >= 3, "only %d failing manifests: error paths went unchecked", failed)


def test_compile_errors_read_as_the_executables(ctx):
    """A C error, a warning made an error and a flag the driver refuses: the same
    messages, with clang-22's own prefix for the driver's."""
    base = ctx.bundled_copy()
    manifest = os.path.join(base, "stencils", "stencils.yaml")
    arith = os.path.join(base, "stencils", "ops", "arith.c")
    write(arith, read(arith) + "\nOP(broken_a) { undeclared_thing++; CONTINUE(); }\n"
                               "OP(broken_b) { int unused_here = 1; CONTINUE(); }\n")
    fork, exe = both_ways(ctx, manifest, "c-error")
    check(fork[0] == 3, "a C error: exit %d, want 3", fork[0])
    check(any("undeclared_thing" in l for l in fork[2]) and
          any("unused_here" in l for l in fork[2]), "the errors are not reported: %s", fork[2])
    diff = differences(fork, exe)
    check(not diff, "a C error: %s", "; ".join(diff))
    fork, exe = both_ways(ctx, ctx.path("stencils", "stencils.yaml"), "flag",
                          "--extra-shim-cflags", "-fno-such-flag")  # discovery never sees it
    check(fork[0] == 3, "an unknown flag: exit %d, want 3", fork[0])
    check("clang-22: error: unknown argument: '-fno-such-flag'" in fork[2], "the driver's "
          "error is not clang-22's: %s", fork[2])
    diff = differences(fork, exe)
    check(not diff, "an unknown flag: %s", "; ".join(diff))


def test_only_the_linked_clang_runs_in_process(ctx):
    """The same file under another name runs in-process; a wrapper script, a
    launcher and --exec-clang start the executable. All build the same header."""
    manifest = ctx.path("tests", "golden", "golden.yaml")
    clang = os.path.realpath("/usr/bin/clang-22")
    link = os.path.join(ctx.tmp, "my-clang")
    os.symlink(clang, link)
    wrapper = os.path.join(ctx.tmp, "wrapped-clang")
    write(wrapper, '#!/bin/sh\nexec %s "$@"\n' % clang)
    os.chmod(wrapper, 0o755)
    cases = [("symlink", ["--clang", link], True), ("wrapper", ["--clang", wrapper], False),
             ("launcher", ["--launcher", "/usr/bin/env"], False),
             ("exec", ["--exec-clang"], False), ("default", [], True)]
    header = None
    for name, extra, in_process in cases:
        out = os.path.join(ctx.tmp, name)
        p = build(ctx, manifest, out, *extra)
        check(p.returncode == 0, "%s: exit %d: %s", name, p.returncode, p.stderr[-1500:])
        check((IN_PROCESS in p.stderr) == in_process, "%s: expected %s, got: %s", name,
              "in-process compiles" if in_process else "the executable", p.stderr[-600:])
        h = read(os.path.join(out, "jit_stencils-%s.h" % TRIPLE), "rb")
        check(header is None or h == header, "%s: another header than the first case's", name)
        header = h


def test_what_clangs_main_does_besides_compiling_is_the_executables(ctx):
    """What clang's main and cc1_main do beyond a plain compile - driver
    warnings under -Werror, response files, CCC_OVERRIDE_OPTIONS, -###, timing
    reports, -mllvm, a driver mode in the program's name - ends the same way in
    a forked child as with the executable: same exit code, headers, messages."""
    manifest = ctx.path("tests", "golden", "golden.yaml")
    rsp = os.path.join(ctx.tmp, "flags.rsp")
    write(rsp, "-DFROM_A_RESPONSE_FILE=1\n")
    cases = [
        ("driver warning made an error", ["--extra-cflags", "-L/tmp"], {}, 3),
        ("response file", ["--extra-shim-cflags", "@" + rsp], {}, 0),
        ("CCC_OVERRIDE_OPTIONS", [], {"CCC_OVERRIDE_OPTIONS": "+-DOVERRIDDEN=1"}, 0),
        ("-###", ["--extra-shim-cflags", "-###"], {}, 3),
        ("-ftime-report", ["--extra-shim-cflags", "-ftime-report"], {}, 0),
        ("unknown -mllvm option", ["--extra-shim-cflags", "-mllvm -no-such-option"], {}, 3),
        ("clang-cpp", ["--clang", "/usr/lib/llvm-22/bin/clang-cpp"], {}, 3),
    ]
    for i, (name, extra, env, rc) in enumerate(cases):
        runs = []
        for how in ("fork", "exec"):
            out = os.path.join(ctx.tmp, "c%d-%s" % (i, how))
            p = build(ctx, manifest, out, *extra, *(["--exec-clang"] if how == "exec" else []),
                      env=env)
            rc_, files, errors = outcome(p, out)
            # Headers, not kept files: clang-cpp "objects" are preprocessed
            # text naming their output directory.
            runs.append((rc_, {n: b for n, b in files.items() if n.endswith(".h")}, errors))
        check(runs[0][0] == rc, "%s: exit %d, want %d", name, runs[0][0], rc)
        diff = differences(*runs)
        check(not diff, "%s: the forked child differs from clang-22: %s", name, "; ".join(diff))
    # The driver's own warning, promoted as the executable promotes it.
    p = build(ctx, manifest, os.path.join(ctx.tmp, "warn"), "--extra-cflags", "-L/tmp")
    check("clang-22: error: argument unused during compilation: '-L/tmp' "
          "[-Werror,-Wunused-command-line-argument]" in p.stderr, "the driver's warning is not "
          "clang-22's error: %s", p.stderr[-1500:])
