"""Builds the generator must get right even when the world around it misbehaves:
a cache directory shared by two checkouts building at once, writes that fail,
compilers that hang, crash, fail silently or claim success without output,
code that compiles its own line numbers in, quoted includes beside an op, runs
that are killed. In every case the header is exactly what a clean build writes,
or the run fails with exit 3 and a message saying what happened, leaving the
previous outputs as they were and nothing wrong in the cache.

Fault injection uses tests/fault/libfailopen.so (LD_PRELOAD), so those tests
run against the plain build only; fake compilers are small shell scripts passed
as --clang that misbehave for one op and run clang-22 for the others.
"""
import os
import re
import signal
import subprocess
import time

from sgtest import BUNDLED_OPS, GENERATOR_ENV, TRIPLE, Skip, TestFailure, check, read, write

ASAN = True

EXIT_OK, EXIT_TOOLCHAIN = 0, 3
HEADER = "jit_stencils-%s.h" % TRIPLE
X86 = ("--target", TRIPLE)
TIMEOUT = 240


def manifest_of(proj):
    return os.path.join(proj, "stencils", "stencils.yaml")


def build(ctx, proj, out, *extra, env=None, timeout=TIMEOUT):
    return ctx.generator("build", "--manifest", manifest_of(proj), "--outdir", out, *X86,
                         *extra, env=env, timeout=timeout)


def expect(p, rc, what, *needles):
    detail = "exit %s\nstdout:\n%s\nstderr:\n%s" % (p.returncode, p.stdout[-2000:],
                                                   p.stderr[-4000:])
    check(p.returncode == rc, "%s: expected exit %d, got %s", what, rc, detail)
    for n in needles:
        ok = n.search(p.stderr) if hasattr(n, "search") else n in p.stderr
        check(ok, "%s: stderr lacks %r\n%s", what, getattr(n, "pattern", n), detail)


def counts(p):
    """(compiled, cached) from the x86-64 summary line."""
    m = re.search(r"%s: \d+ ops \((\d+) compiled, (\d+) cached\)" % TRIPLE, p.stdout)
    check(m, "no summary line in:\n%s", p.stdout)
    return int(m.group(1)), int(m.group(2))


def header(out):
    return read(os.path.join(out, HEADER))


def outputs_snapshot(out):
    """Bytes, mtime and inode of every published output (not the work directory)."""
    snap = {}
    for name in sorted(os.listdir(out)):
        p = os.path.join(out, name)
        if os.path.isfile(p):
            st = os.stat(p)
            snap[name] = (read(p, "rb"), st.st_mtime_ns, st.st_ino)
    return snap


def clean_header(ctx, proj, *extra):
    out = os.path.join(ctx.tmp, "clean-%d" % len(os.listdir(ctx.tmp)))
    p = build(ctx, proj, out, *extra)
    expect(p, EXIT_OK, "clean build of %s" % proj)
    return header(out)


def edit(path, old, new):
    text = read(path)
    check(old in text, "%s lacks %r", path, old)
    write(path, text.replace(old, new, 1))


def fake_compiler(ctx, name, misbehaviour, op="add"):
    """A compiler that runs `misbehaviour` (shell) when compiling `op`, alone
    (per-op units) or in a batch (whose unit names it), clang-22 otherwise."""
    path = os.path.join(ctx.tmp, name)
    write(path, "#!/bin/sh\n"
                "case \" $* \" in\n"
                "  *\" -DSTENCILGEN_OP=%s \"*) %s ;;\n"
                "  *\" -DSTENCILGEN_BATCH \"*)\n"
                "    for a; do case $a in */unit.c) grep -q ' _JIT_ENTRY_%s ' \"$a\" && "
                "{ %s; } ;; esac; done ;;\n"
                "esac\n"
                "exec clang-22 \"$@\"\n" % (op, misbehaviour, op, misbehaviour))
    os.chmod(path, 0o755)
    return path


def batch_of(op, source, then=""):
    """How a run with batched units (the default) names the batch holding op,
    the first op of source (the bundled files compile in one batch each, or
    an edited op alone), and the message that follows (a regex)."""
    return re.compile(r"ops? %s(?:\.\.\w+)? of %s \(%s\)%s" % (op, re.escape(source), TRIPLE,
                                                             then))


def faults(ctx, **match):
    """The environment that makes tests/fault/libfailopen.so fail some writes
    (FAILOPEN_MATCH=..., FAILRENAME_MATCH=...: see failopen.c)."""
    lib = os.path.join(ctx.build, "tests", "fault", "libfailopen.so")
    check(os.path.exists(lib), "missing %s", lib)
    return dict(match, LD_PRELOAD=lib, ASAN_OPTIONS="verify_asan_link_order=0:detect_leaks=0")


def built_then_edited(ctx):
    """A project built once into its outdir, then op add edited (so the next
    build must replace the headers); returns (project, outdir, snapshot)."""
    proj = ctx.bundled_copy()
    out = os.path.join(ctx.tmp, "out")
    expect(build(ctx, proj, out), EXIT_OK, "first build")
    edit(os.path.join(proj, "stencils", "ops", "arith.c"), "(uint64_t)a + (uint64_t)b",
         "(uint64_t)b + (uint64_t)a + 1")
    return proj, out, outputs_snapshot(out)


# --- a cache shared by two checkouts ----------------------------------------

def test_shared_cache_two_checkouts_at_once(ctx):
    """Two checkouts whose op `add` differs build at the same time, round after
    round, with one --cache-dir; every op recompiles each round (a new define),
    so the two runs' compiles of `add` overlap. Each header must equal that
    checkout's own clean build every time, and so must later serial builds that
    take everything from the shared cache."""
    a, b = ctx.bundled_copy("a"), ctx.bundled_copy("b")
    arith = os.path.join("stencils", "ops", "arith.c")
    edit(os.path.join(b, arith), "(uint64_t)a + (uint64_t)b", "(uint64_t)a + (uint64_t)b + 7")
    want = {a: clean_header(ctx, a), b: clean_header(ctx, b)}
    check(want[a] != want[b], "the two checkouts' headers should differ")
    cache = os.path.join(ctx.tmp, "shared-cache")
    for rnd in range(5):
        procs = {}
        for proj in (a, b):
            cmd = [ctx.stencilgen, "build", "--manifest", manifest_of(proj), "--outdir",
                   os.path.join(proj, "out"), "--cache-dir", cache, *X86, "-j", "2",
                   "--extra-cflags", "-DROUND=%d" % rnd]
            procs[proj] = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                           text=True, env=dict(os.environ, **GENERATOR_ENV))
        for proj, p in procs.items():
            try:
                out, err = p.communicate(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                for q in procs.values():
                    q.kill()
                raise TestFailure("round %d: a build did not finish in %d s" % (rnd, TIMEOUT))
            check(p.returncode == 0, "round %d, %s: exit %d\n%s", rnd, proj, p.returncode, err)
            got = header(os.path.join(proj, "out"))
            check(got == want[proj], "round %d: %s got %s's header", rnd, os.path.basename(proj),
                  "the other checkout" if got in want.values() else "a wrong")
    for proj in (a, b):  # serial, from the shared cache alone
        out = os.path.join(proj, "serial")
        p = build(ctx, proj, out, "--cache-dir", cache, "--extra-cflags", "-DROUND=4")
        expect(p, EXIT_OK, "serial build from the shared cache")
        check(counts(p)[0] == 0, "serial build recompiled: %s", p.stdout)
        check(header(out) == want[proj], "serial build of %s from the shared cache is wrong",
              proj)
    leftovers = [d for d in os.listdir(cache) if d.startswith("run.")]
    check(not leftovers, "run directories left in the cache: %s", leftovers)


def test_header_edited_before_its_compile_is_not_cached_by_its_old_hash(ctx):
    """The generator hashes a header early in a run (discovery reads it); the
    header is then edited (here by the compile of an earlier op) before op add
    compiles it. add's object is of the new bytes and must not be recorded
    under the old hash: after restoring the old header, the next build must
    compile it again and equal a clean build."""
    proj = ctx.bundled_copy()
    out = os.path.join(ctx.tmp, "out")
    ops = os.path.join(proj, "stencils", "ops")
    bias = os.path.join(ops, "bias.h")
    write(bias, "#define BIAS 77\n")
    edit(os.path.join(ops, "arith.c"), "#define BINARY", '#include "bias.h"\n#define BINARY')
    edit(os.path.join(ops, "arith.c"), "(uint64_t)a + (uint64_t)b", "(uint64_t)a + BIAS")
    marker = os.path.join(ctx.tmp, "edited")
    cc = fake_compiler(ctx, "editing.sh", "[ -e %s ] || { echo '#define BIAS 78' > %s; "
                       "touch %s; }" % (marker, bias, marker), op="push")
    p = build(ctx, proj, out, "--clang", cc, "-j", "1")
    expect(p, EXIT_OK, "build while the header changes")
    check("$78," in header(out), "op add should have compiled the edited header")
    write(bias, "#define BIAS 77\n")
    p = build(ctx, proj, out, "--clang", cc)  # the same compiler: its objects stay valid
    expect(p, EXIT_OK, "next build")
    check("$77," in header(out), "the next build took an object of the edited header from "
          "the cache:\n%s", p.stdout)


# --- writes that fail -------------------------------------------------------

def test_unit_that_cannot_be_written_fails_the_build(ctx):
    """A unit write failing (EIO) is exit 3 naming the unit; nothing is compiled
    in its place, nothing is cached, the previous outputs stay."""
    proj, out, before = built_then_edited(ctx)
    p = build(ctx, proj, out, env=faults(ctx, FAILOPEN_MATCH="/tu/batch_add/"))
    expect(p, EXIT_TOOLCHAIN, "unit write fails",
           batch_of("add", "ops/arith.c", ": cannot write its translation unit .*"
                    "Input/output error"))
    check(outputs_snapshot(out) == before, "outputs changed in a failed run")
    p = build(ctx, proj, out)
    expect(p, EXIT_OK, "build after the fault")
    check(counts(p)[0] == 1, "op add should compile once more, nothing else: %s", p.stdout)
    check(header(out) == clean_header(ctx, proj), "header after the fault differs from clean")


def test_cache_writes_that_fail_only_cost_a_rebuild(ctx):
    """No cache entry can be written (the blob directory is a file): the header
    is still right, exit 0; the next run simply compiles again."""
    proj = ctx.bundled_copy()
    out = os.path.join(ctx.tmp, "out")
    blobs = os.path.join(out, ".stencilgen", "blobs")
    write(blobs, "not a directory\n")
    p = build(ctx, proj, out)
    expect(p, EXIT_OK, "cache writes fail")
    want = clean_header(ctx, proj)
    check(header(out) == want, "header differs from clean when the cache cannot be written")
    os.unlink(blobs)
    p = build(ctx, proj, out)
    expect(p, EXIT_OK, "next build")
    check(counts(p) == (BUNDLED_OPS, 0), "nothing should have been cached: %s", p.stdout)
    check(header(out) == want, "header differs from clean after the cache came back")


def test_object_write_that_fails_is_a_toolchain_failure(ctx):
    """The compiler cannot write op add's object (its batch's, named after it):
    exit 3, clang's own message."""
    proj, out, before = built_then_edited(ctx)
    p = build(ctx, proj, out, env=faults(ctx, FAILOPEN_MATCH="/batch_add.o",
                                         FAILOPEN_SPARE=".log"))
    expect(p, EXIT_TOOLCHAIN, "object write fails",
           batch_of("add", "ops/arith.c", ": compile failed"))
    check(outputs_snapshot(out) == before, "outputs changed in a failed run")


# --- compilers that misbehave -----------------------------------------------

def test_compiler_that_hangs(ctx):
    """A compiler that never exits is killed at --compile-timeout, said so while
    it runs and when it is killed; no compile starts after it; exit 3."""
    proj = ctx.bundled_copy()
    out = os.path.join(ctx.tmp, "out")
    expect(build(ctx, proj, out), EXIT_OK, "first build")
    before = outputs_snapshot(out)
    cc = fake_compiler(ctx, "hang.sh", "exec sleep 600", op="push")
    t0 = time.monotonic()
    p = build(ctx, proj, out, "--clang", cc, "--compile-timeout", "3", "-j", "1", timeout=120)
    elapsed = time.monotonic() - t0
    expect(p, EXIT_TOOLCHAIN, "hanging compiler",
           batch_of("push", "ops/stack.c", ": still compiling after"),
           batch_of("push", "ops/stack.c", r": compile timed out after 3 s"),
           "no further compile is started")
    check(elapsed < 60, "a 3 s deadline took %.0f s", elapsed)
    check(outputs_snapshot(out) == before, "outputs changed in a failed run")
    p = build(ctx, proj, out, "--compile-timeout", "0")
    expect(p, 2, "bad --compile-timeout", "--compile-timeout wants seconds")


def test_compiler_too_old_or_not_clang(ctx):
    """clang-14 (has no preserve_none, rejects -mframe-pointer=reserved) and gcc: one message naming
    the version found and the one needed, before any op compiles; exit 3. A
    build that needs no compile does not ask, and a compiler is asked once."""
    proj = ctx.bundled_copy()
    out = os.path.join(ctx.tmp, "out")
    for cc, needle in (("clang-14", "is clang 14; stencilgen needs clang 19 or newer"),
                       ("gcc", "is not clang (it does not define __clang_major__)")):
        p = build(ctx, proj, out, "--clang", cc)
        expect(p, EXIT_TOOLCHAIN, cc, needle)
        check(p.stderr.count("error:") == 1, "%s: one error expected:\n%s", cc, p.stderr)
    counter = os.path.join(ctx.tmp, "runs")
    cc = os.path.join(ctx.tmp, "counting.sh")
    write(cc, "#!/bin/sh\necho x >> %s\nexec clang-22 \"$@\"\n" % counter)
    os.chmod(cc, 0o755)
    expect(build(ctx, proj, out, "--clang", cc), EXIT_OK, "with clang-22")
    runs = len(read(counter).split())
    p = build(ctx, proj, out, "--clang", cc)
    expect(p, EXIT_OK, "a no-op build")
    check(counts(p)[0] == 0 and len(read(counter).split()) == runs,
          "a no-op build ran the compiler (%d more times)", len(read(counter).split()) - runs)
    # One op edited: one compile, and the compiler is not asked again.
    edit(os.path.join(proj, "stencils", "ops", "arith.c"), "(uint64_t)a + (uint64_t)b",
         "(uint64_t)b + (uint64_t)a")
    p = build(ctx, proj, out, "--clang", cc)
    expect(p, EXIT_OK, "a one-op edit")
    check(counts(p)[0] == 1 and len(read(counter).split()) == runs + 1,
          "a one-op edit ran the compiler %d times", len(read(counter).split()) - runs)


def test_launcher_runs_every_compile(ctx):
    """--launcher (env here) wraps every compile; the run exits 0 and, under the
    leak-checking ASan build, leaks nothing (its resolved path used to leak)."""
    proj = ctx.bundled_copy()
    p = build(ctx, proj, os.path.join(ctx.tmp, "out"), "--launcher", "env", "-vv")
    expect(p, EXIT_OK, "--launcher env")
    runs = re.search(r"(\d+) compiler runs", p.stderr)
    launched = len(re.findall(r"^env \S*clang", p.stderr, re.M))
    check(runs and launched == int(runs.group(1)) > 0 and "LeakSanitizer" not in p.stderr,
          "compiles not launched through env (%d of %s), or a leak:\n%s", launched,
          runs and runs.group(1), p.stderr[-2000:])


def test_compiler_killed_by_a_signal(ctx):
    proj = ctx.bundled_copy()
    cc = fake_compiler(ctx, "crash.sh", "kill -SEGV $$")
    p = build(ctx, proj, os.path.join(ctx.tmp, "out"), "--clang", cc)
    expect(p, EXIT_TOOLCHAIN, "crashing compiler",
           batch_of("add", "ops/arith.c",
                    r": the compiler was killed by signal 11 \(Segmentation fault\)"))


def test_compiler_that_fails_silently(ctx):
    proj = ctx.bundled_copy()
    cc = fake_compiler(ctx, "silent.sh", "exit 7")
    p = build(ctx, proj, os.path.join(ctx.tmp, "out"), "--clang", cc)
    expect(p, EXIT_TOOLCHAIN, "silent compiler",
           batch_of("add", "ops/arith.c",
                    ": compile failed: the compiler exited with status 7 and printed nothing"))


def test_compiler_that_writes_no_object(ctx):
    """Exit 0 without an object (or without its depfile) is exit 3 in a fresh
    outdir and in one holding the previous build's objects: an older object is
    never read in its place."""
    proj = ctx.bundled_copy()
    out = os.path.join(ctx.tmp, "out")
    expect(build(ctx, proj, out), EXIT_OK, "first build")
    before = outputs_snapshot(out)
    noobj = fake_compiler(ctx, "noobj.sh", "exit 0")
    nodeps = fake_compiler(ctx, "nodeps.sh", "exec clang-22 \"$@\" -MF /dev/null")
    for outdir in (out, os.path.join(ctx.tmp, "fresh")):
        p = build(ctx, proj, outdir, "--clang", noobj, "--extra-cflags", "-DFRESH")
        expect(p, EXIT_TOOLCHAIN, "no object",
               batch_of("add", "ops/arith.c", r": the compiler exited with status 0 but wrote "
                        r"no object \('[^']*/batch_add\.o'\)"))
        p = build(ctx, proj, outdir, "--clang", nodeps, "--extra-cflags", "-DFRESH2")
        expect(p, EXIT_TOOLCHAIN, "no depfile",
               "the compiler exited with status 0 but wrote no dependency file")
    check(outputs_snapshot(out) == before, "outputs changed in a failed run")


def test_compiler_that_targets_another_machine(ctx):
    """An object for another machine (an i386 ELF32 object with REL
    relocations, an AArch64 one) is refused with exit 1, saying what it is and
    what was expected; before, the i386 one became op add's x86-64 stencil."""
    proj = ctx.bundled_copy()
    out = os.path.join(ctx.tmp, "out")
    expect(build(ctx, proj, out), EXIT_OK, "first build")
    before = outputs_snapshot(out)
    for triple, found in (("i386-unknown-linux-gnu", "ELF32 i386 (3) little-endian"),
                          ("aarch64-unknown-linux-gnu", "ELF64 AArch64 (183) little-endian")):
        # (x86's -fcf-protection, which the bundled x86-64 target uses, is
        # dropped: clang refuses it for AArch64.)
        cc = fake_compiler(ctx, "to-%s.sh" % triple,
                           'for a; do shift; case "$a" in --target=*) set -- "$@" --target=%s ;; '
                           '-fcf-protection=*) ;; *) set -- "$@" "$a" ;; esac; done; '
                           'exec clang-22 "$@" -w -ffreestanding' % triple)
        p = build(ctx, proj, out, "--clang", cc)
        expect(p, 1, "object for " + triple,
               "op add (%s): the object is %s, expected ELF64 x86-64 (62) little-endian"
               % (TRIPLE, found))
    check(outputs_snapshot(out) == before, "outputs changed in a failed run")


def test_object_that_is_not_well_formed_is_refused(ctx):
    """An object whose tables run past its end (a COFF object declaring 2^32-1
    symbols, which LLVM 22 accepts and then reads past; the fuzzer found it)
    is refused with exit 1 naming the op and what is wrong, and the previous
    outputs stay as they were."""
    proj = ctx.bundled_copy()
    out = os.path.join(ctx.tmp, "out")
    expect(build(ctx, proj, out), EXIT_OK, "first build")
    before = outputs_snapshot(out)
    bad = ctx.path("tests", "fuzz", "regressions", "objfile", "coff-symbol-count-wraps")
    cc = fake_compiler(ctx, "badobj.sh",
                       'o=; d=; prev=; for a; do case "$prev" in -o) o=$a ;; -MF) d=$a ;; esac; '
                       'prev=$a; done; cp %s "$o" && echo "$o:" > "$d"; exit 0' % bad)
    p = build(ctx, proj, out, "--clang", cc, "--extra-cflags", "-DBADOBJ")
    expect(p, 1, "malformed object",
           re.compile(r"op add \(%s\): .*COFF symbol table: 4294967295 symbols at offset 0xe8 "
                      r"run past the end of the object \(248 bytes\)" % TRIPLE))
    check(outputs_snapshot(out) == before, "outputs changed in a failed run")


def test_log_file_name_too_long_is_named(ctx):
    """An outdir so deep that a compiler log's path exceeds PATH_MAX: the error
    names the log file, not the compiler."""
    proj = ctx.bundled_copy()
    # rundir = OUT/.stencilgen/run.XXXXXX; the shim's log is
    # rundir/<triple>/shim.o.log and must be just past 4095 bytes, while
    # its object (4 bytes shorter) and every directory still fit.
    tail = len("/.stencilgen/run.XXXXXX/%s/shim.o.log" % TRIPLE)
    out = ctx.tmp
    while len(out) + tail < 4096 - 200:
        out = os.path.join(out, "d" * 150)
    out = os.path.join(out, "e" * (4096 - tail - len(out) - 1))  # log: 4096 bytes
    p = build(ctx, proj, out)
    expect(p, EXIT_TOOLCHAIN, "log path too long", "cannot create the compiler's log file",
           "shim.o.log': File name too long")


# --- what code can see of its own position and neighbours -------------------

def test_line_numbers_compiled_in_stay_right(ctx):
    """An op that compiles __LINE__ in (directly, or through a macro defined in
    a header) is rebuilt when lines above it move; other ops are not."""
    proj = ctx.bundled_copy()
    out = os.path.join(ctx.tmp, "out")
    ops = os.path.join(proj, "stencils", "ops")
    write(os.path.join(proj, "stencils", "where.h"), "#define HERE ((vm_value)__LINE__)\n")
    edit(os.path.join(ops, "arith.c"), "BINARY((vm_value)((uint64_t)a * (uint64_t)b));",
         "BINARY((vm_value)((uint64_t)a * (uint64_t)b));\n    tos += __LINE__;")
    edit(os.path.join(ops, "compare.c"), "OP(", '#include "where.h"\nOP(')
    text = read(os.path.join(ops, "compare.c"))
    i = text.rindex("CONTINUE();")
    write(os.path.join(ops, "compare.c"), text[:i] + "tos += HERE;\n    " + text[i:])
    expect(build(ctx, proj, out), EXIT_OK, "first build")
    edit(os.path.join(ops, "arith.c"), "(uint64_t)a - (uint64_t)b));",
         "(uint64_t)a - (uint64_t)b));\n\n\n")
    edit(os.path.join(ops, "compare.c"), "OP(", "\n\nOP(")
    p = build(ctx, proj, out)
    expect(p, EXIT_OK, "incremental build")
    check(header(out) == clean_header(ctx, proj), "incremental header differs from a clean one")
    compiled, _ = counts(p)
    # arith.c: sub (edited) and mul (moved, uses __LINE__); compare.c: its
    # shared text changed, so all of its ops. Not the other files' ops.
    n_compare = len(re.findall(r"^OP\(", read(os.path.join(ops, "compare.c")), re.M))
    check(compiled == 2 + n_compare, "expected %d recompiles, got %s", 2 + n_compare, p.stdout)


def test_file_name_compiled_in_follows_a_rename(ctx):
    proj = ctx.bundled_copy()
    out = os.path.join(ctx.tmp, "out")
    ops = os.path.join(proj, "stencils", "ops")
    edit(os.path.join(ops, "arith.c"), "BINARY((vm_value)((uint64_t)a * (uint64_t)b));",
         "BINARY((vm_value)((uint64_t)a * (uint64_t)b));\n    tos += sizeof(__FILE__);")
    expect(build(ctx, proj, out), EXIT_OK, "first build")
    os.rename(os.path.join(ops, "arith.c"), os.path.join(ops, "arithmetic.c"))
    edit(manifest_of(proj), "ops/arith.c", "ops/arithmetic.c")
    expect(build(ctx, proj, out), EXIT_OK, "build after the rename")
    check(header(out) == clean_header(ctx, proj), "header after a rename differs from clean")


def test_quoted_include_beside_the_op(ctx):
    """`#include "x.h"` finds the header beside the op's file first, even when
    a same-named header is on the include path, as a compile of the file would;
    the depfile names that header, and editing it rebuilds the op."""
    proj = ctx.bundled_copy()
    out = os.path.join(ctx.tmp, "out")
    ops = os.path.join(proj, "stencils", "ops")
    write(os.path.join(ops, "local.h"), "#define LOCAL_BIAS 77\n")
    write(os.path.join(proj, "stencils", "local.h"), "#define LOCAL_BIAS 1000\n")
    edit(os.path.join(ops, "arith.c"), "#define BINARY", '#include "local.h"\n#define BINARY')
    edit(os.path.join(ops, "arith.c"), "(uint64_t)a + (uint64_t)b", "(uint64_t)a + LOCAL_BIAS")
    dep = os.path.join(ctx.tmp, "out.d")
    p = build(ctx, proj, out, "--depfile", dep)
    expect(p, EXIT_OK, "quoted include")
    text = header(out)
    check("$77," in text and "$1000," not in text,
          "op add did not use the local.h beside it:\n%s",
          text[text.index("op add"):][:1500] if "op add" in text else text[:1500])
    deps = read(dep)
    check(os.path.join(ops, "local.h") in deps, "depfile lacks ops/local.h")
    check(os.path.join(proj, "stencils", "local.h") not in deps, "depfile names the other local.h")
    write(os.path.join(ops, "local.h"), "#define LOCAL_BIAS 78\n")
    p = build(ctx, proj, out)
    expect(p, EXIT_OK, "after editing local.h")
    check("$78," in header(out), "editing ops/local.h did not rebuild op add")


# --- publishing: all outputs or none -----------------------------------------

def all_files(out):
    return sorted(f for f in os.listdir(out) if f != ".stencilgen")


def test_publish_refuses_before_writing_anything(ctx):
    """A destination that is a directory (the dispatcher, or --depfile) fails
    the run before any output is replaced: exit 3, the previous outputs keep
    their bytes, inode and mtime, and nothing is left beside them."""
    proj, out, before = built_then_edited(ctx)
    dep = os.path.join(ctx.tmp, "deps")
    os.makedirs(dep)
    p = build(ctx, proj, out, "--depfile", dep)
    expect(p, EXIT_TOOLCHAIN, "--depfile is a directory", "cannot write '%s': Is a directory" % dep)
    check(outputs_snapshot(out) == before, "headers replaced although the depfile cannot be")
    os.rmdir(dep)
    os.unlink(os.path.join(out, "jit_stencils.h"))
    os.makedirs(os.path.join(out, "jit_stencils.h"))
    before = outputs_snapshot(out)
    p = build(ctx, proj, out)
    expect(p, EXIT_TOOLCHAIN, "dispatcher is a directory", "jit_stencils.h': Is a directory")
    check(outputs_snapshot(out) == before, "headers replaced although the dispatcher cannot be")
    check(all_files(out) == ["jit_stencils-%s.h" % TRIPLE, "jit_stencils.h"],
          "left in the outdir: %s", all_files(out))


def test_publish_refuses_a_header_that_is_a_directory(ctx):
    """A target's header path that is a directory fails the run before any
    header is rendered and staged beside it (headers are staged by the
    threads that render them): exit 3, the header named, the dispatcher
    keeping its bytes, inode and mtime, and nothing left in the outdir."""
    proj, out, _ = built_then_edited(ctx)
    hdr = os.path.join(out, "jit_stencils-%s.h" % TRIPLE)
    os.unlink(hdr)
    os.makedirs(hdr)
    before = outputs_snapshot(out)
    p = build(ctx, proj, out)
    expect(p, EXIT_TOOLCHAIN, "a header is a directory",
           "cannot write '%s': Is a directory" % hdr)
    check(outputs_snapshot(out) == before, "the dispatcher replaced although a header cannot be")
    check(all_files(out) == ["jit_stencils-%s.h" % TRIPLE, "jit_stencils.h"],
          "left in the outdir: %s", all_files(out))


def test_publish_rolls_back_when_a_rename_fails(ctx):
    """The last rename (the dispatcher's) fails after the per-target header was
    already replaced: it is put back, exactly as it was. (The dispatcher is
    changed by hand first: an output that already holds its content is not
    written again, only dated.)"""
    proj, out, _ = built_then_edited(ctx)
    with open(os.path.join(out, "jit_stencils.h"), "a") as f:
        f.write("/* edited by hand */\n")
    before = outputs_snapshot(out)
    p = build(ctx, proj, out, env=faults(ctx, FAILRENAME_MATCH="/jit_stencils.h"))
    expect(p, EXIT_TOOLCHAIN, "rename fails", "cannot rename")
    check(outputs_snapshot(out) == before, "outputs not rolled back after a failed rename")
    check(all_files(out) == ["jit_stencils-%s.h" % TRIPLE, "jit_stencils.h"],
          "left in the outdir: %s", all_files(out))
    expect(build(ctx, proj, out), EXIT_OK, "build without the fault")
    check(header(out) == clean_header(ctx, proj), "header after the fault differs from clean")


def test_failed_publish_leaves_unchanged_outputs_undated(ctx):
    """Only the dispatcher differs from what the build makes (edited by hand)
    and its rename fails: the per-target header, which already held its bytes,
    keeps its time too (outputs that need no writing are dated only once every
    other output is in place)."""
    proj = ctx.bundled_copy()
    out = os.path.join(ctx.tmp, "out")
    expect(build(ctx, proj, out), EXIT_OK, "first build")
    with open(os.path.join(out, "jit_stencils.h"), "a") as f:
        f.write("/* edited by hand */\n")
    before = outputs_snapshot(out)
    time.sleep(0.05)
    p = build(ctx, proj, out, env=faults(ctx, FAILRENAME_MATCH="/jit_stencils.h"))
    expect(p, EXIT_TOOLCHAIN, "rename fails", "cannot rename")
    check(outputs_snapshot(out) == before, "a failed run changed an output's bytes, time or "
          "inode")
    expect(build(ctx, proj, out), EXIT_OK, "build without the fault")
    check(header(out) == clean_header(ctx, proj), "header after the fault differs from clean")


def test_outputs_that_collide_are_usage_errors(ctx):
    """--depfile or --compile-commands naming a header (directly, through "..",
    or a symlinked directory), or each other; --target twice; an empty path:
    exit 2 before anything is compiled or written."""
    proj = ctx.bundled_copy()
    out = os.path.join(ctx.tmp, "out")
    expect(build(ctx, proj, out), EXIT_OK, "first build")
    before = outputs_snapshot(out)
    link = os.path.join(ctx.tmp, "link")
    os.symlink(out, link)
    hdr = os.path.join(out, HEADER)
    cases = [
        (("--depfile", hdr), "--depfile '%s' are the same file" % hdr),
        (("--compile-commands", os.path.join(out, "sub", "..", "jit_stencils.h")),
         "the header '%s' and --compile-commands" % os.path.join(out, "jit_stencils.h")),
        (("--depfile", os.path.join(link, HEADER)), "are the same file"),
        (("--depfile", os.path.join(ctx.tmp, "x.d"), "--compile-commands",
          os.path.join(ctx.tmp, "x.d")), "--depfile '%s' and --compile-commands" %
         os.path.join(ctx.tmp, "x.d")),
        (("--target", TRIPLE), "--target '%s' is given twice" % TRIPLE),
    ]
    for extra, needle in cases:
        p = build(ctx, proj, out, *extra)
        expect(p, 2, " ".join(extra), needle)
        check(outputs_snapshot(out) == before, "%s: outputs changed", " ".join(extra))
    p = ctx.generator("build", "--manifest", manifest_of(proj), "--outdir", "", *X86,
                      cwd=ctx.tmp, timeout=TIMEOUT)
    expect(p, 2, "empty --outdir", "--outdir is empty")
    check(not [f for f in os.listdir(ctx.tmp) if f.startswith("jit_stencils")],
          "an empty --outdir wrote into the current directory")


def test_publish_removes_temporaries_of_killed_runs(ctx):
    """Temporaries a killed run left (older than a minute) go at the next
    publish; files that only look similar, and fresh temporaries (another run
    may be publishing), stay."""
    proj = ctx.bundled_copy()
    out = os.path.join(ctx.tmp, "out")
    expect(build(ctx, proj, out), EXIT_OK, "first build")
    stale = ["jit_stencils.h.tmpAb3dE9", HEADER + ".tmpzzzzzz"]
    keep = ["jit_stencils.h.tmpfresh1", "jit_stencils.h.tmpAb3dE9x", "notes.tmpAbcdef",
            "jit_stencils.h.tmp12345"]
    old = time.time() - 3600
    for name in stale + keep:
        write(os.path.join(out, name), "x")
        if name != "jit_stencils.h.tmpfresh1":
            os.utime(os.path.join(out, name), (old, old))
    expect(build(ctx, proj, out), EXIT_OK, "next build")
    left = all_files(out)
    for name in stale:
        check(name not in left, "stale temporary %s was not removed", name)
    for name in keep:
        check(name in left, "%s was removed", name)


# --- spares: a replaced header is written over, never a file someone has ----

SPARE = os.path.join(".stencilgen", "spare", HEADER)


def rebuilt(ctx, proj, out, n, env=None):
    """Op add edited to add n as well, then built; returns the header's bytes
    and inode."""
    path = os.path.join(proj, "stencils", "ops", "arith.c")
    write(path, re.sub(r"\(uint64_t\)a \+ \(uint64_t\)b[^)]*\)",
                       "(uint64_t)a + (uint64_t)b + %d)" % n, read(path), count=1))
    expect(build(ctx, proj, out, env=env), EXIT_OK, "build adding %d" % n)
    hdr = os.path.join(out, HEADER)
    return read(hdr, "rb"), os.stat(hdr).st_ino


def test_replaced_headers_are_written_over_not_deleted(ctx):
    """A header replaced by a build becomes the spare and the next build
    writes its new header over that same file (deleting megabytes cost ext4
    milliseconds a header); the header is what a clean build writes."""
    proj = ctx.bundled_copy()
    out = os.path.join(ctx.tmp, "out")
    first = rebuilt(ctx, proj, out, 1)
    second = rebuilt(ctx, proj, out, 2)
    spare = os.path.join(out, SPARE)
    check((read(spare, "rb"), os.stat(spare).st_ino) == first,
          "the spare is not the header the second build replaced")
    third = rebuilt(ctx, proj, out, 3)
    check(third[1] == first[1], "the third build's header is a new file, not the spare")
    check(os.stat(spare).st_ino == second[1], "the spare is not the second build's header")
    check(third[0] != second[0] and third[0] == clean_header(ctx, proj).encode(),
          "the header written over the spare differs from a clean build's")
    check(all_files(out) == [HEADER, "jit_stencils.h"], "left in the outdir: %s",
          all_files(out))


def test_a_replaced_header_someone_has_is_not_written_over(ctx):
    """A header replaced while another name links to it, while a process has
    it open, or while one has it mapped (as clang maps headers) keeps its
    bytes through later builds: such a spare is left to them and a fresh file
    takes its place."""
    import mmap
    proj = ctx.bundled_copy()
    out = os.path.join(ctx.tmp, "out")
    hdr = os.path.join(out, HEADER)
    n = 0
    kept = []
    for hold in ("link", "open", "map"):
        n += 1
        text, _ = rebuilt(ctx, proj, out, n)
        if hold == "link":
            os.link(hdr, os.path.join(ctx.tmp, "linked.h"))
            holder = lambda: read(os.path.join(ctx.tmp, "linked.h"), "rb")
        elif hold == "open":
            f = open(hdr, "rb")
            holder = lambda f=f: os.pread(f.fileno(), len(text) + 1, 0)
        else:
            with open(hdr, "rb") as f:
                m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            holder = lambda m=m: m[:]
        kept.append((hold, text, holder))
        for _ in range(2):  # replaced, then its spare would be written over
            n += 1
            rebuilt(ctx, proj, out, n)
        for what, bytes_, get in kept:
            check(get() == bytes_, "a header someone %s changed under them (after build %d)",
                  {"link": "linked", "open": "had open", "map": "had mapped"}[what], n)
    check(read(hdr, "rb") == clean_header(ctx, proj).encode(),
          "the header differs from a clean build's")


def test_spares_another_run_holds_are_left_alone(ctx):
    """While another run holds the spares (their lock), a build stages beside
    its outputs as without spares: its header right, the spare untouched,
    nothing left in the outdir."""
    import fcntl
    proj = ctx.bundled_copy()
    out = os.path.join(ctx.tmp, "out")
    rebuilt(ctx, proj, out, 1)
    rebuilt(ctx, proj, out, 2)
    spare = os.path.join(out, SPARE)
    before = (read(spare, "rb"), os.stat(spare).st_ino, os.stat(spare).st_mtime_ns)
    with open(os.path.join(out, ".stencilgen", "spare", "lock"), "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        rebuilt(ctx, proj, out, 3)
    check((read(spare, "rb"), os.stat(spare).st_ino, os.stat(spare).st_mtime_ns) == before,
          "the spare of a run holding the lock was written")
    check(header(out) == clean_header(ctx, proj), "header built beside a held spare differs")
    check(all_files(out) == [HEADER, "jit_stencils.h"], "left in the outdir: %s",
          all_files(out))


def test_publish_without_exchange_or_spare(ctx):
    """A filesystem without exchanges (renameat2 failing with EINVAL) and a
    spare that cannot be written: the headers are renamed into place as
    without spares, right and with nothing left beside them."""
    proj = ctx.bundled_copy()
    out = os.path.join(ctx.tmp, "out")
    rebuilt(ctx, proj, out, 1)
    for n, env in ((2, faults(ctx, FAILEXCHANGE_ERRNO="22")),
                   (3, faults(ctx, FAILOPEN_MATCH=SPARE))):
        text, _ = rebuilt(ctx, proj, out, n, env=env)
        check(text == clean_header(ctx, proj).encode(), "header %d differs from a clean build's",
              n)
        check(all_files(out) == [HEADER, "jit_stencils.h"], "left in the outdir: %s",
              all_files(out))


def test_publish_with_the_work_directory_on_another_mount(ctx):
    """`.stencilgen/` bind-mounted (another mount point of the same filesystem, as containers
    mount cache volumes): no rename crosses it, so the headers are staged beside themselves,
    the spare is not written, and each build's header is a clean build's. A spare that turns
    out not to rename into place (EXDEV, made by libfailopen) is staged beside its header and
    published all the same."""
    if os.geteuid() != 0:
        raise Skip("needs root to bind-mount in a mount namespace of its own")
    proj = ctx.bundled_copy()
    out = os.path.join(ctx.tmp, "out")
    rebuilt(ctx, proj, out, 1)
    rebuilt(ctx, proj, out, 2)
    spare = os.path.join(out, SPARE)
    before = (os.stat(spare).st_ino, os.stat(spare).st_mtime_ns)
    work = os.path.join(out, ".stencilgen")
    path = os.path.join(proj, "stencils", "ops", "arith.c")
    for n in (3, 4):
        write(path, re.sub(r"\(uint64_t\)a \+ \(uint64_t\)b[^)]*\)",
                           "(uint64_t)a + (uint64_t)b + %d)" % n, read(path), count=1))
        p = ctx.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                     'mount --bind "$1" "$1" && shift && exec "$@"', "sh", work,
                     ctx.stencilgen, "build", "--manifest", manifest_of(proj), "--outdir", out,
                     *X86], env=GENERATOR_ENV, timeout=TIMEOUT)
        expect(p, EXIT_OK, "build %d with .stencilgen/ bind-mounted" % n)
        check(header(out) == clean_header(ctx, proj), "header %d differs from a clean build's", n)
        check(all_files(out) == [HEADER, "jit_stencils.h"], "left in the outdir: %s",
              all_files(out))
    check((os.stat(spare).st_ino, os.stat(spare).st_mtime_ns) == before,
          "the spare was written though no rename reaches the outdir from it")
    exdev = faults(ctx, FAILRENAME_MATCH=HEADER, FAILRENAME_FROM=os.path.join(".stencilgen", "spare"),
                   FAILOPEN_ERRNO="18", FAILEXCHANGE_ERRNO="18")
    # An outdir with a header (exchange, then rename, refused) and a new one (rename refused).
    for n, target in ((5, out), (6, os.path.join(ctx.tmp, "fresh"))):
        text, _ = rebuilt(ctx, proj, target, n, env=exdev)
        check(text == clean_header(ctx, proj).encode(), "header %d differs from a clean build's", n)
        check(all_files(target) == [HEADER, "jit_stencils.h"], "left in the outdir: %s",
              all_files(target))


def test_a_full_disk_is_named_not_taken_for_a_compiler_failure(ctx):
    """An outdir on a nearly full filesystem (a 4 MB tmpfs with 64 KB left): the compiles fail
    without a word (the compiler's messages cannot be written either), and each error says
    "No space left on device" and where, not that the compiler printed nothing; exit 3 and no
    header written."""
    if os.geteuid() != 0:
        raise Skip("needs root to mount a small tmpfs in a mount namespace of its own")
    proj = ctx.bundled_copy()
    out = os.path.join(ctx.tmp, "out")
    os.makedirs(out)
    # The build, then what the outdir holds, before the tmpfs goes with the namespace.
    script = ('mount -t tmpfs -o size=4m tmpfs "$1" && '
              'dd if=/dev/zero of="$1/fill" bs=1k count=%d 2>/dev/null || exit 99; '
              'd=$1; shift; "$@"; rc=$?; ls -A "$d"; exit $rc' % (4096 - 64))
    p = ctx.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh",
                 out, ctx.stencilgen, "build", "--manifest", manifest_of(proj), "--outdir", out,
                 *X86], env=GENERATOR_ENV, timeout=TIMEOUT)
    errors = [l for l in p.stderr.splitlines() if ": error: " in l]
    full = [l for l in errors if "compile failed: No space left on device in '%s/.stencilgen/" % out
            in l and "KB free)" in l]
    expect(p, EXIT_TOOLCHAIN, "a build on a full disk")
    check(full and not any("printed nothing" in l for l in errors),
          "the errors do not say the disk is full:\n%s", p.stderr[-4000:])
    left = sorted(p.stdout.split())
    check(left == [".stencilgen", "fill"], "the outdir holds %s after the failed build", left)


# --- runs that end abruptly, temporary directories ---------------------------

def test_killed_run_leaves_nothing_for_long(ctx):
    """A killed run's private directory is removed by the next run; a live
    run's is never touched."""
    proj = ctx.bundled_copy()
    out = os.path.join(ctx.tmp, "out")
    work = os.path.join(out, ".stencilgen")
    cc = fake_compiler(ctx, "slow.sh", "sleep 600")
    cmd = [ctx.stencilgen, "build", "--manifest", manifest_of(proj), "--outdir", out, *X86,
           "--clang", cc]
    first = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True, env=dict(os.environ, **GENERATOR_ENV))
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (
                os.path.isdir(work) and any(d.startswith("run.") for d in os.listdir(work))):
            time.sleep(0.1)
        live = [d for d in os.listdir(work) if d.startswith("run.")]
        check(len(live) == 1, "expected one run directory, found %s", live)
        second = build(ctx, proj, os.path.join(ctx.tmp, "other"), "--cache-dir", work)
        expect(second, EXIT_OK, "a build beside a live run")
        check(live[0] in os.listdir(work), "a live run's directory was removed")
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
    check(live[0] in os.listdir(work), "the killed run's directory should still be there")
    expect(build(ctx, proj, out), EXIT_OK, "next build")
    left = [d for d in os.listdir(work) if d.startswith("run.")]
    check(not left, "run directories left after the next build: %s", left)


def test_check_and_dump_leave_no_temporary_directory(ctx):
    """check and dump work in a temporary directory under $TMPDIR (the compiler
    is seen writing there) and remove it."""
    tmp = os.path.join(ctx.tmp, "tmpdir")
    os.makedirs(tmp)
    seen = os.path.join(ctx.tmp, "outputs.txt")
    cc = os.path.join(ctx.tmp, "cc.sh")
    write(cc, '#!/bin/sh\nfor a; do case "$a" in *.o) echo "$a" >> %s ;; esac; done\n'
              'exec clang-22 "$@"\n' % seen)
    os.chmod(cc, 0o755)
    env = {"TMPDIR": tmp}
    manifest = ctx.path("stencils", "stencils.yaml")
    p = ctx.generator("check", "--manifest", manifest, *X86, "--clang", cc, env=env,
                      timeout=TIMEOUT)
    expect(p, EXIT_OK, "check")
    p = ctx.generator("dump", "--manifest", manifest, *X86, "--op", "add", "--clang", cc,
                      env=env, timeout=TIMEOUT)
    expect(p, EXIT_OK, "dump")
    objects = read(seen).split()
    check(objects and all(o.startswith(tmp + "/") for o in objects),
          "compiles outside TMPDIR: %s", [o for o in objects if not o.startswith(tmp)][:3])
    check(os.listdir(tmp) == [], "left in TMPDIR: %s", os.listdir(tmp))
