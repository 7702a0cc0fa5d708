"""Batched units (--units batched, the default): the ops of a file compile in
batches, one clang per batch, and each op's stencil is cut out of the batch's
object. The headers must be byte-identical to per-op units' everywhere: the
bundled stencils, the golden manifest, the 300-op corpus and every fixture manifest
(for a failing fixture, the same exit code and the same error lines). Also:
what a batch cannot reproduce compiles alone and says why, a one-op edit
recompiles one batch, a file of many ops is cut into enough batches, and a
compile error in a batch is reported against its op. Generated shapes of
read-only data (tables in several orders, pointer and jump tables, named
sections, computed goto, strings, constant pools, shared tables) are built
both ways on every target, and incrementally against clean builds."""
import glob
import itertools
import os
import re
import sys

from sgtest import BUNDLED_TRIPLES, TRIPLE, check, read, write

ASAN = False  # every manifest in the tree is built twice; `tests/run.py --build build-asan
              # -k batched` runs this module against the sanitized generator


def build(ctx, manifest, out, units, *extra, **kw):
    kw.setdefault("check", False)
    kw.setdefault("timeout", 900)
    return ctx.build_stencils(manifest, out, "--units", units, "-j", "2", "-v", *extra, **kw)


def headers(out):
    return {os.path.basename(p): read(p, "rb")
            for p in sorted(glob.glob(os.path.join(out, "jit_stencils*.h")))}


def errors(stderr):
    """The diagnostics that say something is wrong (not -v's notes and times)."""
    return [l for l in stderr.splitlines() if ": error:" in l]


def compiler_runs(stderr):
    m = re.search(r"(\d+) compiler runs", stderr)
    check(m, "no compiler-run count in: %s", stderr[-2000:])
    return int(m.group(1))


def summary(stdout):
    m = re.search(r"^stencilgen: %s: (\d+) ops \((\d+) compiled, (\d+) cached\)" %
                  re.escape(TRIPLE), stdout, re.M)
    check(m, "no summary in: %s", stdout)
    return tuple(int(x) for x in m.groups())


def differences(a, b):
    """What differs between two builds (exit code, headers, errors): [] when
    nothing does. The negative control below shows it finds a difference."""
    (pa, ha), (pb, hb) = a, b
    diff = []
    if pa.returncode != pb.returncode:
        diff.append("exit %d vs %d" % (pa.returncode, pb.returncode))
    if ha.keys() != hb.keys():
        diff.append("headers %s vs %s" % (sorted(ha), sorted(hb)))
    for name in sorted(set(ha) & set(hb)):
        if ha[name] != hb[name]:
            diff.append("%s differs" % name)
    if errors(pa.stderr) != errors(pb.stderr):
        diff.append("errors differ:\n%s\nvs\n%s" % ("\n".join(errors(pa.stderr)),
                                                    "\n".join(errors(pb.stderr))))
    return diff


def both_ways(ctx, manifest, name, *extra):
    runs = []
    for units in ("per-op", "batched"):
        out = os.path.join(ctx.tmp, "%s-%s" % (name, units))
        p = build(ctx, manifest, out, units, *extra)
        runs.append((p, headers(out)))
    return runs


def test_batched_equals_per_op_on_bundled_golden_and_fixtures(ctx):
    manifests = [ctx.path("stencils", "stencils.yaml"), ctx.path("tests", "golden", "golden.yaml")]
    manifests += sorted(glob.glob(ctx.path("tests", "fixtures", "**", "*.yaml"), recursive=True))
    built = 0
    for i, m in enumerate(manifests):
        per_op, batched = both_ways(ctx, m, "m%d" % i)
        diff = differences(per_op, batched)
        check(not diff, "%s: batched units differ from per-op units: %s", m, "; ".join(diff))
        built += per_op[0].returncode == 0
        if per_op[0].returncode == 0:
            check(per_op[1], "%s: built but wrote no header", m)
    check(built >= 10, "only %d of %d manifests built: the comparison covered too little",
          built, len(manifests))


def test_batched_equals_per_op_when_every_op_compiles_alone(ctx):
    """The same manifests with an external constant added to every source: no
    batch can stand for any op (every op's own unit carries the constant), so
    each compiles from its own unit after its batch, and what its own object
    then says - a failed check included - must be what per-op units say."""
    root = os.path.join(ctx.tmp, "tree")
    for part in ("stencils", "templates", os.path.join("tests", "fixtures"),
                 os.path.join("tests", "golden")):
        ctx.copy_tree(ctx.path(part), os.path.join(root, part))
    for i, src in enumerate(sorted(glob.glob(os.path.join(root, "**", "*.c"), recursive=True))):
        with open(src, "a") as f:
            f.write("\nconst int sg_keeps_ops_alone_%d = %d;\n" % (i, i))
    manifests = [os.path.join(root, "stencils", "stencils.yaml"),
                 os.path.join(root, "tests", "golden", "golden.yaml")]
    manifests += sorted(glob.glob(os.path.join(root, "tests", "fixtures", "**", "*.yaml"),
                                  recursive=True))
    alone = failed = 0
    for i, m in enumerate(manifests):
        per_op, batched = both_ways(ctx, m, "a%d" % i, "-v")
        diff = differences(per_op, batched)
        check(not diff, "%s: batched units differ from per-op units: %s", m, "; ".join(diff))
        alone += batched[0].stderr.count("is compiled from its own unit")
        failed += per_op[0].returncode == 1
    check(alone >= 100, "only %d ops compiled alone: the variant did not force them", alone)
    check(failed >= 3, "only %d manifests failed a check: failures went unchecked", failed)


def test_batched_equals_per_op_on_the_corpus(ctx):
    corpus = os.path.join(ctx.tmp, "corpus")
    ctx.run([sys.executable, ctx.path("tests", "bench", "make_corpus.py"), corpus], check=True)
    per_op, batched = both_ways(ctx, os.path.join(corpus, "corpus.yaml"), "corpus")
    check(per_op[0].returncode == 0, "per-op build failed: %s", per_op[0].stderr[-2000:])
    diff = differences(per_op, batched)
    check(not diff, "corpus: batched units differ from per-op units: %s", "; ".join(diff))
    check(compiler_runs(per_op[0].stderr) == 301, "per-op: %s", per_op[0].stderr[-500:])
    runs = compiler_runs(batched[0].stderr)
    check(runs <= 100, "batched: %d compiler runs for 300 ops in 30 files", runs)


def test_negative_control_a_changed_op_is_a_difference(ctx):
    """The comparison is not blind: the same manifest with one op's constant
    changed, built batched, differs from the per-op build of the original."""
    base = ctx.bundled_copy()
    manifest = os.path.join(base, "stencils", "stencils.yaml")
    per_op = build(ctx, manifest, os.path.join(ctx.tmp, "a"), "per-op")
    arith = os.path.join(base, "stencils", "ops", "arith.c")
    text = read(arith)
    edited = re.sub(r"(OP\(add\)\s*\{[^}]*?)CONTINUE\(\);", r"\1tos += 1; CONTINUE();", text,
                    count=1)
    check(edited != text, "could not edit op add in %s", arith)
    write(arith, edited)
    batched = build(ctx, manifest, os.path.join(ctx.tmp, "b"), "batched")
    diff = differences((per_op, headers(os.path.join(ctx.tmp, "a"))),
                       (batched, headers(os.path.join(ctx.tmp, "b"))))
    check(any("differs" in d for d in diff), "an edited op went unnoticed: %s", diff)


HELPER_OPS = """
static __attribute__((noinline)) vm_value mix(vm_value a, vm_value b)
{
    return a * 31 + (b ^ (a >> 3));
}

OP(h_one)
{
    tos = mix(tos, *--sp);
    CONTINUE();
}

OP(h_two)
{
    tos = mix(*--sp, tos) + 7;
    CONTINUE();
}

OP(plain)
{
    tos += 11;
    CONTINUE();
}

OP(says)
{
    if (tos == 0)
        vm_trap(frame, "says: zero");
    CONTINUE();
}
"""


def project(ctx, files):
    """A copy of tinyvm whose manifest lists `files` ({name: text}) as its ops."""
    base = ctx.bundled_copy()
    stencils = os.path.join(base, "stencils")
    for name, text in files.items():
        write(os.path.join(stencils, "ops", name), text)
    manifest = os.path.join(stencils, "stencils.yaml")
    text = read(manifest)
    ops = "ops:\n" + "".join("  - ops/%s\n" % n for n in files)
    text = re.sub(r"^ops:\n(?:  - .*\n)+", ops, text, flags=re.M)
    write(manifest, text)
    return manifest


def test_what_a_batch_cannot_reproduce_compiles_alone(ctx):
    """A static helper the compiler did not inline (two callers in the batch)
    and a string literal: those ops compile from their own units, say why
    under -v, and the header is still the per-op one."""
    manifest = project(ctx, {"helpers.c": HELPER_OPS})
    per_op, batched = both_ways(ctx, manifest, "helpers", "--target", TRIPLE)
    check(per_op[0].returncode == 0, "per-op build failed: %s", per_op[0].stderr[-2000:])
    diff = differences(per_op, batched)
    check(not diff, "batched units differ from per-op units: %s", "; ".join(diff))
    err = batched[0].stderr
    for op, why in (("h_one", "did not inline"), ("h_two", "did not inline"),
                    ("says", "string literal")):
        check(re.search(r"note: op %s is compiled from its own unit: [^\n]*%s" % (op, why), err),
              "no note that op %s compiled alone (%s): %s", op, why, err[-3000:])
    check("op plain is compiled from its own unit" not in err, "plain compiled alone: %s", err)
    # Kept in the cache under its batch's key: a no-op run compiles nothing.
    out = os.path.join(ctx.tmp, "helpers-batched")
    p = build(ctx, manifest, out, "batched", "--target", TRIPLE)
    check(compiler_runs(p.stderr) == 0 and summary(p.stdout)[1] == 0,
          "no-op run after ops compiled alone: %s %s", p.stdout, p.stderr[-1000:])


def test_an_op_compiled_alone_that_fails_its_checks_fails_the_build(ctx):
    """A file defining an unrelated mutable global: every op compiles from its
    own unit (which carries the global), and there fails the writable-data
    check. The build fails as per-op units' does, run after run, with no
    header; it once passed with exit 0 and a header missing those ops."""
    manifest = project(ctx, {"helpers.c": HELPER_OPS + "\nint unrelated_counter;\n"})
    per_op, batched = both_ways(ctx, manifest, "global", "--target", TRIPLE)
    check(per_op[0].returncode == 1, "per-op: exit %d: %s", per_op[0].returncode,
          per_op[0].stderr[-1500:])
    diff = differences(per_op, batched)
    check(not diff, "batched units differ from per-op units: %s", "; ".join(diff))
    check(len(errors(batched[0].stderr)) == 4 and not batched[1],
          "batched: want 4 errors and no header: %s", batched[0].stderr[-2000:])
    out = os.path.join(ctx.tmp, "global-batched")
    p = build(ctx, manifest, out, "batched", "--target", TRIPLE)  # again, from the cache
    check(p.returncode == 1 and len(errors(p.stderr)) == 4, "second run: exit %d: %s",
          p.returncode, p.stderr[-1500:])


# Ops that each fail one of the checks run on a stencil cut out of its batch.
FAILING_BODIES = {
    "writable": "static int counter; tos += counter++; CONTINUE();",
    "unknown_symbol": "extern void not_a_vm_symbol(void); not_a_vm_symbol(); CONTINUE();",
    "frame_pointer": '__asm__ volatile("movq %%rsp, %%rbp" ::: "memory"); CONTINUE();',
}


def test_a_batch_member_that_fails_a_check_fails_the_build(ctx):
    """One op of a file of three fails a check (mutable static data, a call to
    a symbol the manifest does not list, a write of the frame pointer), as its
    batch's leader, a middle member or the last: batched units end as per-op
    units do (exit 1, the same errors, no header), from a clean build and
    again from the cache. A member's failure was once lost on a clean build:
    the compile round that ran beside discovery's preprocesses copied every
    job back over the member that had failed, so the build exited 0 and wrote
    the header."""
    manifest = project(ctx, {"member.c": ""})
    source = os.path.join(os.path.dirname(manifest), "ops", "member.c")
    for kind, body in FAILING_BODIES.items():
        for position in range(3):
            ops = ["OP(m%d) { CONTINUE(); }" % i for i in range(3)]
            ops[position] = "OP(m%d) { %s }" % (position, body)
            name = "%s-%d" % (kind, position)
            write(source, "\n".join(ops) + "\n")
            per_op, batched = both_ways(ctx, manifest, name, "--target", TRIPLE)
            what = "op m%d (%s, position %d)" % (position, kind, position)
            check(per_op[0].returncode == 1 and not per_op[1], "%s: per-op exit %d: %s", what,
                  per_op[0].returncode, per_op[0].stderr[-1500:])
            diff = differences(per_op, batched)
            check(not diff, "%s: batched units differ from per-op units: %s", what,
                  "; ".join(diff))
            again = build(ctx, manifest, os.path.join(ctx.tmp, "%s-batched" % name), "batched",
                          "--target", TRIPLE)
            check(again.returncode == 1 and errors(again.stderr) == errors(per_op[0].stderr),
                  "%s: second run: exit %d: %s", what, again.returncode, again.stderr[-1500:])


def edit_op(path, op, statement):
    text = read(path)
    at = text.index("OP(%s)" % op)
    cont = text.index("CONTINUE();", at)
    write(path, text[:cont] + statement + "\n    " + text[cont:])


def one_file_corpus(ctx, name):
    """The 300-op corpus as one file of 300 ops."""
    corpus = os.path.join(ctx.tmp, name)
    ctx.run([sys.executable, ctx.path("tests", "bench", "make_corpus.py"), corpus], check=True)
    files = sorted(glob.glob(os.path.join(corpus, "ops", "*.c")))
    write(os.path.join(corpus, "ops", "all.c"), "".join(read(f) for f in files))
    for f in files:
        os.unlink(f)
    manifest = os.path.join(corpus, "corpus.yaml")
    text = read(manifest)
    text = re.sub(r"^ops:.*?(?=^\w)", "ops: [ops/all.c]\n", text, flags=re.M | re.S)
    write(manifest, text)
    return corpus, manifest


def test_one_file_of_300_ops_is_cut_into_batches_and_an_edit_compiles_one_op(ctx):
    corpus, manifest = one_file_corpus(ctx, "one")
    out = os.path.join(corpus, "out")
    p = build(ctx, manifest, out, "batched")
    check(p.returncode == 0, "batched build failed: %s", p.stderr[-2000:])
    batches = compiler_runs(p.stderr) - 1  # and the shim
    check(2 * 2 <= batches <= 60, "%d batches for one file of 300 ops at -j2 (want work for "
          "every job, and far fewer compiles than ops)", batches)
    cold = headers(out)
    p = build(ctx, manifest, out, "batched")
    check(compiler_runs(p.stderr) == 0 and summary(p.stdout) == (300, 0, 300),
          "no-op build: %s %s", p.stdout, p.stderr[-1000:])
    # One op edited: it alone recompiles (one compiler run, its batch's unit
    # cut down to it), whatever moved below it.
    edit_op(os.path.join(corpus, "ops", "all.c"), "op134", "tos ^= 0x5a;")
    p = build(ctx, manifest, out, "batched")
    check(compiler_runs(p.stderr) == 1, "one-op edit: %s", p.stderr[-1000:])
    n, compiled, cached = summary(p.stdout)
    check((n, compiled, cached) == (300, 1, 299), "one-op edit recompiled %d ops: %s",
          compiled, p.stdout)
    units = glob.glob(os.path.join(out, ".stencilgen", "tu", "*", "unit.c"))
    entries = re.findall(r"^extern __typeof__\(\w+\) _JIT_ENTRY_(\w+) ",
                         read(max(units, key=os.path.getmtime)), re.M)
    check(entries == ["op134"], "the edit's unit compiled %s, want op134 alone", entries)
    # Two neighbours edited: the two alone (one run if they share a batch).
    edit_op(os.path.join(corpus, "ops", "all.c"), "op134", "tos += 3;")
    edit_op(os.path.join(corpus, "ops", "all.c"), "op135", "tos -= 3;")
    p = build(ctx, manifest, out, "batched")
    check(1 <= compiler_runs(p.stderr) <= 2 and summary(p.stdout) == (300, 2, 298),
          "two-op edit: %s %s", p.stdout, p.stderr[-1000:])
    edited = headers(out)
    check(edited != cold, "the edit did not change the header")
    fresh = os.path.join(corpus, "fresh")
    p = build(ctx, manifest, fresh, "per-op")
    check(headers(fresh) == edited, "the incremental batched header differs from a cold "
          "per-op build's")


BROKEN_OPS = """/* the second op does not compile */
OP(b_one)
{
    tos += 1;
    CONTINUE();
}

OP(b_two)
{
    tos += no_such_name;
    CONTINUE();
}

OP(b_three)
{
    tos += 3;
    CONTINUE();
}
"""


def test_a_compile_error_in_a_batch_names_its_op(ctx):
    manifest = project(ctx, {"broken.c": BROKEN_OPS})
    p = build(ctx, manifest, os.path.join(ctx.tmp, "out"), "batched", "--target", TRIPLE)
    check(p.returncode == 3, "exit %d, want 3: %s", p.returncode, p.stderr[-2000:])
    src = re.escape(os.path.join(os.path.dirname(manifest), "ops", "broken.c"))
    check(re.search(r"^%s:10:12: error: use of undeclared identifier 'no_such_name'" % src,
                    p.stderr, re.M), "no error at broken.c:10:12: %s", p.stderr)
    check(re.search(r"^%s:10:12: note: this error is in op b_two " % src, p.stderr, re.M),
          "no note naming op b_two: %s", p.stderr)
    check(not os.path.exists(os.path.join(ctx.tmp, "out", "jit_stencils.h")),
          "a header was written by a failed build")


FILE_OPS = """/* an op that compiles its file's name in */
OP(f_plain)
{
    tos += 2;
    CONTINUE();
}

OP(f_where)
{
    if (tos == 0)
        vm_trap(frame, __FILE__);
    CONTINUE();
}
"""


def test_a_batch_that_compiles_its_position_in_is_keyed_by_it(ctx):
    """The op file renamed (the same text, so the same unit): an op using
    __FILE__ rebuilds, and the header equals a clean per-op build's."""
    manifest = project(ctx, {"named.c": FILE_OPS})
    out = os.path.join(ctx.tmp, "out")
    p = build(ctx, manifest, out, "batched", "--target", TRIPLE)
    check(p.returncode == 0, "build failed: %s", p.stderr[-2000:])
    before = headers(out)
    ops = os.path.join(os.path.dirname(manifest), "ops")
    os.rename(os.path.join(ops, "named.c"), os.path.join(ops, "renamed.c"))
    write(manifest, read(manifest).replace("ops/named.c", "ops/renamed.c"))
    p = build(ctx, manifest, out, "batched", "--target", TRIPLE)
    check(p.returncode == 0, "build failed: %s", p.stderr[-2000:])
    after = headers(out)
    check(after != before, "__FILE__ changed but the header did not")
    clean = os.path.join(ctx.tmp, "clean")
    build(ctx, manifest, clean, "per-op", "--target", TRIPLE)
    check(headers(clean) == after, "the incremental batched header differs from a clean "
          "per-op build's")


def test_batch_ops_sets_the_batch_size(ctx):
    corpus, manifest = one_file_corpus(ctx, "sizes")
    per_size = {}
    for n in ("10000", "4"):
        out = os.path.join(corpus, "out" + n)
        p = build(ctx, manifest, out, "batched", "--batch-ops", n)
        check(p.returncode == 0, "--batch-ops %s: %s", n, p.stderr[-2000:])
        per_size[n] = (compiler_runs(p.stderr) - 1, headers(out))
    check(per_size["10000"][0] == 1, "--batch-ops 10000: %d batches of one file",
          per_size["10000"][0])
    check(per_size["4"][0] >= 300 // 8, "--batch-ops 4: only %d batches of 300 ops",
          per_size["4"][0])
    check(per_size["10000"][1] == per_size["4"][1], "the batch size changed the header")
    # Batched units are the default: --batch-ops needs no --units.
    out = os.path.join(corpus, "default")
    p = ctx.build_stencils(manifest, out, "--batch-ops", "8", "-j", "2", "-v", check=False)
    check(p.returncode == 0, "--batch-ops 8 without --units: %s", p.stderr[-2000:])
    check(compiler_runs(p.stderr) - 1 == -(-300 // 8), "--batch-ops 8 without --units: %d "
          "batches of 300 ops", compiler_runs(p.stderr) - 1)
    check(headers(out) == per_size["4"][1], "--batch-ops 8 without --units changed the header")
    p = build(ctx, manifest, os.path.join(corpus, "x"), "per-op", "--batch-ops", "8", check=False)
    check(p.returncode == 2 and "--batch-ops belongs to --units batched, not --units per-op"
          in p.stderr, "--batch-ops with --units per-op: exit %d: %s", p.returncode, p.stderr)


def test_dump_and_check_are_the_same_both_ways(ctx):
    manifest = ctx.path("stencils", "stencils.yaml")
    dumps = {}
    for units in ("per-op", "batched"):
        p = ctx.generator("dump", "--manifest", manifest, "--target", TRIPLE, "--units", units,
                          check=False, timeout=600)
        check(p.returncode == 0, "dump --units %s: %s", units, p.stderr[-2000:])
        dumps[units] = p.stdout
        p = ctx.generator("check", "--manifest", manifest, "--units", units, check=False,
                          timeout=600)
        check(p.returncode == 0, "check --units %s: %s", units, p.stderr[-2000:])
    check(dumps["per-op"] == dumps["batched"] and "op add" in dumps["batched"],
          "dump differs between per-op and batched units")


def batch_fault(ctx, name, misbehaviour, op="add"):
    """A compiler that runs `misbehaviour` (shell) when compiling the batch
    holding `op` (its unit names it last), clang-22 otherwise."""
    path = os.path.join(ctx.tmp, name)
    write(path, "#!/bin/sh\n"
                "case \" $* \" in *\" -DSTENCILGEN_BATCH \"*)\n"
                "  for a; do case $a in */unit.c) grep -q ' _JIT_ENTRY_%s ' \"$a\" && { %s; } ;; "
                "esac; done ;;\n"
                "esac\n"
                "exec clang-22 \"$@\"\n" % (op, misbehaviour))
    os.chmod(path, 0o755)
    return path


def test_a_failing_compiler_fails_the_batch_and_caches_nothing(ctx):
    base = ctx.bundled_copy()
    manifest = os.path.join(base, "stencils", "stencils.yaml")
    out = os.path.join(ctx.tmp, "out")
    for name, misbehaviour, want in (
            ("crash.sh", "kill -SEGV $$", "the compiler was killed by signal 11"),
            ("silent.sh", "exit 7", "the compiler exited with status 7 and printed nothing")):
        cc = batch_fault(ctx, name, misbehaviour)
        p = build(ctx, manifest, out, "batched", "--target", TRIPLE, "--clang", cc)
        check(p.returncode == 3, "%s: exit %d, want 3: %s", name, p.returncode, p.stderr[-2000:])
        check(re.search(r"error: ops? \S+ of ops/arith\.c \(%s\): [^\n]*%s" % (
            re.escape(TRIPLE), re.escape(want)), p.stderr),
              "%s: no error naming the batch of op add: %s", name, p.stderr[-2000:])
        check(not os.path.exists(os.path.join(out, "jit_stencils.h")), "a header was written")
    # The real compiler next: the failed batch was not cached, the header is right.
    p = build(ctx, manifest, out, "batched", "--target", TRIPLE)
    check(p.returncode == 0, "with clang-22: %s", p.stderr[-2000:])
    clean = os.path.join(ctx.tmp, "clean")
    build(ctx, manifest, clean, "per-op", "--target", TRIPLE)
    check(headers(out) == headers(clean), "after failed batches, the header differs from a "
          "clean per-op build's")


# Generated shapes of read-only data, on every target of the bundled manifest
# (x86-64 and AArch64 ELF, COFF, both Mach-O, where an op that uses data compiles alone),
# jump tables on the ELF targets (-fjump-tables). An explicit list, so every
# run builds the same sources; each file is one batch. What a batch cannot
# reproduce it must compile alone; what it can, it must reproduce byte for
# byte, and an incremental build must equal a clean one.

def shape_table(name, n, base, attrs=""):
    values = ", ".join(str(base + 7 * i) for i in range(n))
    return "static const vm_value %s[%d]%s = {%s};\n" % (name, n, attrs, values)


def shape_op(name, body):
    return "OP(%s)\n{\n%s    CONTINUE();\n}\n\n" % (name, body)


def tables_shapes():
    """Four tables (9 and 5 entries: no size a mergeable-constant section
    takes), used in every order of two and in orders of three and four, so
    that the batch creates them in an order most ops' own units do not; a
    function's local constant array (a private object); a static local."""
    text = "".join(shape_table("t%d" % i, 5 if i % 2 else 9, 100 * (i + 1)) for i in range(4))
    text += shape_op("f_fold", "    tos += t3[1] + t2[2] + t1[0];\n")
    orders = list(itertools.permutations(range(4), 2)) + [(2, 0, 1), (1, 2, 0), (3, 1, 2, 0)]
    for order in orders:
        terms = " + ".join("t%d[(tos >> %d) %% %d]" % (t, 3 * j, 5 if t % 2 else 9)
                           for j, t in enumerate(order))
        text += shape_op("tab_%s" % "".join(map(str, order)), "    tos = %s;\n" % terms)
    text += shape_op("tab_one", "    tos = t2[tos % 9] * 3;\n")
    text += shape_op("tab_local", "    const vm_value l[9] = {9, 8, 7, 6, 5, 4, 3, 2, 1};\n"
                                  "    tos = l[tos % 9] + t0[*--sp % 9];\n")
    text += shape_op("tab_local_only", "    const vm_value l[9] = {19, 18, 17, 16, 15, 14, 13, "
                                       "12, 11};\n    tos = l[tos % 9];\n")
    text += shape_op("tab_static_local", "    static const vm_value s[7] = {1, 3, 5, 7, 9, 11, "
                                         "13};\n    tos = s[tos % 7] + t1[tos % 5];\n")
    return text


def folded_shapes():
    """fold_first reads both tables at constant indices only: the optimizer
    folds the loads away, but clang created u2 before u1 for it, and the
    object no longer says so. fold_user's own unit creates u1 first."""
    text = shape_table("u1", 9, 300) + shape_table("u2", 5, 400)
    text += shape_op("fold_first", "    tos += u2[3] + u1[4];\n")
    text += shape_op("fold_user", "    tos = u1[tos % 9] + u2[*--sp % 5];\n")
    return text


# Mach-O stencils take no relative table (SUBTRACTOR relocations): there the
# table's address goes through an asm, and the table stays one of pointers.
POINTER_TABLE = (
    "#ifdef __APPLE__\n"
    "#define PT(t) __extension__({ const void *p_ = (t); __asm__(\"\" : \"+r\"(p_)); "
    "(__typeof__(&(t)[0]))p_; })\n"
    "#else\n#define PT(t) (t)\n#endif\n")


def pointer_shapes():
    """Tables of pointers to tables: made relative (the optimizer's relative
    lookup tables) when one op uses them, kept absolute when two do, and one
    pointer table used with its target directly."""
    text = POINTER_TABLE
    text += "".join(shape_table("p%d" % i, 5 if i % 2 else 9, 1000 * (i + 1)) for i in range(3))
    text += ("static const vm_value *const rel_one[3] = {p0, p1, p2};\n"
             "static const vm_value *const rel_two[3] = {p2, p0, p1};\n"
             "static const vm_value *const abs_shared[2] = {p1, p2};\n"
             "static const vm_value only0[9] = {5, 4, 3, 2, 1, 0, 1, 2, 3};\n"
             "static const vm_value *const rel_alone[1] = {only0};\n")
    text += shape_op("ptr_rel", "    tos = PT(rel_one)[tos % 3][*--sp % 5];\n")
    text += shape_op("ptr_rel_direct", "    tos = p1[tos % 5] + PT(rel_two)[tos % 3][1];\n")
    text += shape_op("ptr_shared_a", "    tos = PT(abs_shared)[tos & 1][2];\n")
    text += shape_op("ptr_shared_b", "    tos = PT(abs_shared)[(tos >> 1) & 1][3] + p0[tos % 9];\n")
    text += shape_op("ptr_alone", "    tos = PT(rel_alone)[0][tos % 9] + PT(rel_alone)[tos & 0][1];\n")
    return text


def switch_shapes():
    """Switches: jump tables (where -fjump-tables allows them), one beside a
    table, values a lookup could serve."""
    cases = "".join("    case %d: tos = %d; break;\n" % (i, 31 * i + 5) for i in range(12))
    text = shape_op("sw_values", "    switch (tos) {\n%s    default: tos = -1;\n    }\n" % cases)
    code = "".join("    case %d: tos = tos * %d + *--sp; break;\n" % (i, i + 3) for i in range(9))
    text += shape_op("sw_code", "    switch (tos & 15) {\n%s    default: tos ^= 77;\n    }\n" % code)
    text += "static const vm_value sw_t[9] = {3, 1, 4, 1, 5, 9, 2, 6, 5};\n"
    code = "".join("    case %d: tos = *--sp + %d; break;\n" % (i, 17 * i) for i in range(7))
    text += shape_op("sw_and_table", "    switch (tos & 7) {\n%s    default: tos = sw_t[tos %% 9];"
                                     "\n    }\n" % code)
    cases = "".join("    case %d: tos = %d; break;\n" % (i, 3 * i + 1) for i in range(10))
    text += shape_op("sw_table_first", "    tos = sw_t[tos %% 9];\n    switch (tos) {\n%s    "
                                       "default: break;\n    }\n" % cases)
    return text


def section_shapes():
    """Sections named in the source (through a macro, as a VM would): one
    named as -fdata-sections names its object's own (.rodata.tb holding tb),
    one holding two tables of different ops, one holding two of one op, one
    beside a plain table."""
    text = ("#if defined(__APPLE__)\n#define SEC(elf, coff, macho) __attribute__((section(macho)))\n"
            "#elif defined(_WIN32)\n#define SEC(elf, coff, macho) __attribute__((section(coff)))\n"
            "#else\n#define SEC(elf, coff, macho) __attribute__((section(elf)))\n#endif\n")
    for name, n, base, sec in (("tb", 9, 500, "tb"), ("other", 5, 600, "other2"),
                               ("pair_a", 9, 700, "pair"), ("pair_b", 5, 800, "pair"),
                               ("tc", 5, 850, "tc"), ("duo_a", 9, 870, "duo"),
                               ("duo_b", 5, 880, "duo")):
        text += shape_table(name, n, base, ' SEC(".rodata.%s", ".rdata$%s", "__TEXT,__%s")'
                            % (sec, sec, sec))
    text += shape_table("plain", 9, 900) + shape_table("plain2", 9, 950)
    text += shape_op("sec_tb", "    tos = tb[tos % 9];\n")
    text += shape_op("sec_named_other", "    tos = other[tos % 5] * 3;\n")
    text += shape_op("sec_pair_a", "    tos = pair_a[tos % 9];\n")
    text += shape_op("sec_pair_b", "    tos = pair_b[tos % 5];\n")
    text += shape_op("sec_both", "    tos = pair_b[tos % 5] + pair_a[*--sp % 9];\n")
    text += shape_op("sec_and_plain", "    tos = plain[tos % 9] + tc[*--sp % 5];\n")
    text += shape_op("sec_plain_only", "    tos = plain2[tos % 9] - 1;\n")
    # One section, two objects of one op, which another op's folded loads
    # had clang create in the other order.
    text += shape_op("sec_duo_fold", "    tos += duo_b[1] + duo_a[2];\n")
    text += shape_op("sec_duo", "    tos = duo_a[tos % 9] + duo_b[*--sp % 5];\n")
    return text


def goto_shapes():
    """Computed goto: a table of label addresses (data holes against the
    op's code) and one of label differences."""
    text = shape_op("goto_abs", "    static const void *const where[4] = {&&l0, &&l1, &&l2, &&l3};\n"
                    "    goto *where[tos & 3];\nl0:\n    tos += 1;\n    CONTINUE();\nl1:\n"
                    "    tos *= 3;\n    CONTINUE();\nl2:\n    tos = *--sp;\n    CONTINUE();\nl3:\n"
                    "    tos ^= 5;\n")
    text += shape_op("goto_rel", "    static const int offs[3] = {0, &&m1 - &&m0, &&m2 - &&m0};\n"
                     "    goto *(&&m0 + offs[tos % 3]);\nm0:\n    tos -= 1;\n    CONTINUE();\nm1:\n"
                     "    tos *= 7;\n    CONTINUE();\nm2:\n    tos = *--sp + tos;\n")
    return text


def string_shapes():
    text = POINTER_TABLE + "static const char *const names[3] = {\"zero\", \"one\", \"two\"};\n"
    text += shape_op("str_trap", "    if (tos == 0)\n        vm_trap(frame, \"str_trap: zero\");\n")
    text += shape_op("str_table", "    if (tos < 0)\n        vm_trap(frame, PT(names)[*--sp % 3]);\n")
    text += shape_op("str_after", "    tos += 2;\n")
    return text


def pool_shapes():
    """Constant pools: floating-point and vector constants, in both orders in
    one op (its own unit makes .rodata.cst8 and .rodata.cst16 in the order of
    its constants; the batch, after pool_vec, the other way round)."""
    text = ("typedef int v4si __attribute__((vector_size(16)));\n"
            "typedef float v4sf __attribute__((vector_size(16)));\n")
    vec = ("    v4si v = {(int)tos, (int)(tos >> 8), (int)(tos >> 16), (int)(tos >> 24)};\n"
           "    v = v * (v4si){%d, 3, 5, 7} + (v4si){11, 13, 17, %d};\n")
    dbl = "    double d = (double)tos;\n    d = d * %s + 2.5;\n"
    text += shape_op("pool_vec", vec % (9, 19) + "    tos = v[0] + v[1] + v[2] + v[3];\n")
    text += shape_op("pool_dbl", dbl % "1.2345" + "    tos = (vm_value)d;\n")
    text += shape_op("pool_dbl_vec", dbl % "7.25" + vec % (21, 23) +
                     "    tos = (vm_value)d + v[0] + v[3];\n")
    text += shape_op("pool_vec_dbl", vec % (25, 27) + dbl % "0.3125" +
                     "    tos = v[1] + v[2] + (vm_value)d;\n")
    text += shape_op("pool_float", "    float f = (float)tos * 1.75f - 0.5f;\n"
                     "    v4sf w = {f, 2.0f, f, 3.0f};\n"
                     "    w = w * (v4sf){0.5f, 1.5f, 2.5f, 3.5f};\n"
                     "    tos = (vm_value)(w[0] + w[1] + w[2] + w[3]);\n")
    text += "static const vm_value pool_t[9] = {2, 7, 1, 8, 2, 8, 1, 8, 2};\n"
    text += shape_op("pool_and_table", dbl % "3.75" + "    tos = (vm_value)d + pool_t[tos % 9];\n")
    return text


def shared_shapes():
    """Tables several ops share: one read by four; two equal ones (the batch's
    optimizer merges them); a 16-byte one whose address one op compares (in
    the other's own unit it becomes a mergeable constant); an inlined
    helper's local array (an unnamed object) two ops share."""
    text = shape_table("sh", 9, 40) + shape_table("same_a", 9, 60) + shape_table("same_b", 9, 60)
    text += shape_table("sh16", 2, 70)
    for i in range(4):
        text += shape_op("sh_%d" % i, "    tos = sh[(tos + %d) %% 9] * %d;\n" % (i, i + 2))
    text += shape_op("same_1", "    tos = same_a[tos % 9];\n")
    text += shape_op("same_2", "    tos = same_b[tos % 9] + 1;\n")
    text += shape_op("sh16_value", "    tos = sh16[tos & 1];\n")
    text += shape_op("sh16_address", "    tos = (vm_value)(&sh16[tos & 1] == (const vm_value *)*--sp);\n")
    # An inlined helper's local constant array: one unnamed object, shared.
    text += ("static inline vm_value sh_helper(vm_value x)\n{\n"
             "    const vm_value l[9] = {9, 8, 7, 6, 5, 4, 3, 2, 1};\n    return l[x % 9];\n}\n\n")
    text += shape_op("sh_local_1", "    tos = sh_helper(tos) + 1;\n")
    text += shape_op("sh_local_2", "    tos = sh_helper(tos) * 3;\n")
    return text


DATA_SHAPES = {
    "tables.c": tables_shapes, "folded.c": folded_shapes, "pointers.c": pointer_shapes,
    "switch.c": switch_shapes, "sections.c": section_shapes, "goto.c": goto_shapes,
    "strings.c": string_shapes, "pools.c": pool_shapes, "shared.c": shared_shapes,
}

# Ops a batch must reproduce on every target that batches (no note that they
# compiled alone), and ops it must compile alone, with why.
SPLIT_SHAPES = ["f_fold", "fold_first", "sec_duo_fold", "goto_abs", "goto_rel", "ptr_alone", "sec_named_other",
                "sec_plain_only", "sec_tb", "str_after", "sw_code", "sw_values", "tab_local_only"]
ALONE_SHAPES = {"tab_10": "several sections", "fold_user": "several sections ('u1' and 'u2')",
                "ptr_rel": "several sections", "sec_and_plain": "several sections",
                "tab_one": "use its data 't2' too", "same_1": "use its data",
                "sh16_value": "use its data 'sh16' too", "sec_pair_a": "pair",
                "str_trap": "string literal", "sec_duo": "holds several objects"}
# One op per file, edited for the incremental build.
EDITED_SHAPES = ["tab_01", "fold_user", "ptr_rel", "sw_code", "sec_tb", "goto_rel", "str_table",
                 "pool_dbl_vec", "sh16_value"]


def data_shapes_project(ctx):
    manifest = project(ctx, {name: make() for name, make in DATA_SHAPES.items()})
    text = read(manifest)
    # Jump tables where stencils take them (COFF stencils do not: relocations
    # in .rdata against the code).
    for triple_flags in ("[-fcf-protection=full]", "[-mbranch-protection=standard]"):
        check("    cflags: %s\n" % triple_flags in text, "no %s in %s", triple_flags, manifest)
        text = text.replace("    cflags: %s\n" % triple_flags,
                            "    cflags: %s, -fjump-tables]\n" % triple_flags[:-1])
    write(manifest, text)
    return manifest


def differing_ops(a, b):
    """'header: op, op' for each header whose stencils differ, by op."""
    out = []
    for name in sorted(set(a) & set(b)):
        if a[name] == b[name]:
            continue
        pa, pb = (dict(re.findall(rb"(?ms)^/\* (\w+) - ops/(.*?)(?=^/\*|\Z)", h))
                  for h in (a[name], b[name]))
        ops = sorted(op.decode() for op in set(pa) | set(pb) if pa.get(op) != pb.get(op))
        out.append("%s: %s" % (name, ", ".join(ops) or "outside the stencils"))
    return "; ".join(out)


def shape_notes(stderr, mach_o=False):
    """{op: why} for every op that compiled from its own unit, on ELF and COFF
    targets (or, mach_o, on Mach-O targets: their reasons say Mach-O)."""
    return {op: why for op, why in
            re.findall(r"note: op (\w+) is compiled from its own unit: ([^\n]*)", stderr)
            if ("Mach-O" in why) == mach_o}


def test_batched_equals_per_op_on_generated_data_shapes(ctx):
    manifest = data_shapes_project(ctx)
    per_op, batched = both_ways(ctx, manifest, "shapes")
    check(per_op[0].returncode == 0, "per-op build failed: %s", per_op[0].stderr[-3000:])
    check(len(per_op[1]) == len(BUNDLED_TRIPLES) + 1, "per-op build wrote %s", sorted(per_op[1]))
    diff = differences(per_op, batched)
    check(not diff, "batched units differ from per-op units: %s (ops: %s)", "; ".join(diff),
          differing_ops(per_op[1], batched[1]))
    notes = shape_notes(batched[0].stderr)
    split_alone = {op: notes[op] for op in SPLIT_SHAPES if op in notes}
    check(not split_alone, "ops a batch reproduces compiled alone: %s", split_alone)
    for op, why in ALONE_SHAPES.items():
        check(why in notes.get(op, ""), "op %s: want a note that it compiled alone (%s), got %r",
              op, why, notes.get(op))


def test_an_incremental_build_of_data_shapes_equals_a_clean_one(ctx):
    """Built batched, one op of each file edited, built again (each edited
    op alone in its batch): the headers must be those of a clean build of
    the edited sources, batched and per-op."""
    manifest = data_shapes_project(ctx)
    out = os.path.join(ctx.tmp, "incremental")
    p = build(ctx, manifest, out, "batched")
    check(p.returncode == 0, "batched build failed: %s", p.stderr[-3000:])
    ops = os.path.join(os.path.dirname(manifest), "ops")
    for op in EDITED_SHAPES:
        path = next(os.path.join(ops, f) for f in DATA_SHAPES
                    if "OP(%s)\n" % op in read(os.path.join(ops, f)))
        edit_op(path, op, "tos ^= 0x5a;")
    p = build(ctx, manifest, out, "batched")
    check(p.returncode == 0, "incremental build failed: %s", p.stderr[-3000:])
    n, compiled, _ = summary(p.stdout)
    check(compiled == len(EDITED_SHAPES), "the incremental build compiled %d of %d ops, want "
          "the %d edited", compiled, n, len(EDITED_SHAPES))
    incremental = (p, headers(out))
    failures = []
    for units in ("batched", "per-op"):
        clean = os.path.join(ctx.tmp, "clean-" + units)
        q = build(ctx, manifest, clean, units)
        diff = differences((q, headers(clean)), incremental)
        if diff:
            failures.append("from a clean %s build: %s (ops: %s)" % (
                units, "; ".join(diff), differing_ops(headers(clean), incremental[1])))
    check(not failures, "the incremental build differs %s", "\n".join(failures))


# Mach-O (docs/platforms.md, "Units"): one __text per batch, each op's
# function cut out of it. Plain ops, variants and a loop (alignment NOPs
# inside a function) are cut out, and variants that are the same fold (which
# compares what the header does not show, the entry's offset); string
# literals, a floating-point constant and a table are data the batch's ops
# share: those ops compile alone.
MACH_O_TRIPLES = [t for t in BUNDLED_TRIPLES if "-apple-" in t]
MACH_O_OPS = """\
OP(plain_mul)
{
    tos = tos * 3 + 1;
    CONTINUE();
}

OP(shift, VARIANT(k, 0, 3))
{
    tos = (tos << STENCIL_V(k)) ^ (STENCIL_V(k) + 5);
    CONTINUE();
}

OP(str_seven)
{
    if (tos == 7)
        vm_trap(frame, "seven");
    CONTINUE();
}

OP(str_nine)
{
    if (tos == 9)
        vm_trap(frame, "nine is not allowed here");
    CONTINUE();
}

OP(dbl_scale)
{
    tos = (vm_value)((double)tos * 1.375 + 0.25);
    CONTINUE();
}

OP(tab_pick)
{
    static const vm_value t[8] = {3, 1, 4, 1, 5, 9, 2, 6};
    tos = t[(uint64_t)tos & 7] + *--sp;
    CONTINUE();
}

OP(loop_sum)
{
    vm_value acc = 0;
    for (vm_value k = 0; k < (tos & 31); k++)
        acc += (k * 7) ^ (acc >> 3);
    tos = acc;
    CONTINUE();
}

OP(plain_xor)
{
    tos ^= *--sp;
    CONTINUE();
}

OP(twins, VARIANT(w, 0, 1))
{
    tos += 3;
    CONTINUE();
}
"""
MACH_O_CUT = ["plain_mul", "loop_sum", "plain_xor"]
MACH_O_STRINGS = ["str_seven", "str_nine"]


def test_mach_o_batches_equal_per_op_with_fewer_compiles(ctx):
    """The bundled stencils and MACH_O_OPS, built for both Mach-O triples
    batched and per-op: byte-identical headers, at most half the compiler
    runs batched, string ops compiled alone and plain ones cut out."""
    targets = [a for t in MACH_O_TRIPLES for a in ("--target", t)]
    manifests = [("bundled", ctx.path("stencils", "stencils.yaml")),
                 ("generated", project(ctx, {"mach_o.c": MACH_O_OPS}))]
    for name, manifest in manifests:
        per_op, batched = both_ways(ctx, manifest, "mach-o-" + name, *targets)
        check(per_op[0].returncode == 0, "%s: per-op build failed: %s", name,
              per_op[0].stderr[-3000:])
        check(len(per_op[1]) == 1 + len(MACH_O_TRIPLES), "%s: per-op build wrote %s", name,
              sorted(per_op[1]))
        diff = differences(per_op, batched)
        check(not diff, "%s: batched units differ from per-op units: %s (ops: %s)", name,
              "; ".join(diff), differing_ops(per_op[1], batched[1]))
        runs = [compiler_runs(p.stderr) for p, _ in (per_op, batched)]
        check(2 * runs[1] <= runs[0], "%s: %d compiler runs batched, %d per-op: Mach-O ops "
              "did not compile in batches", name, runs[1], runs[0])
    notes = shape_notes(batched[0].stderr, mach_o=True)
    for op in MACH_O_STRINGS:
        check("uses" in notes.get(op, ""), "op %s: want a note that it compiled alone for "
              "its string, got %r", op, notes.get(op))
    cut_alone = {op: notes[op] for op in MACH_O_CUT if op in notes}
    check(not cut_alone, "ops a Mach-O batch cuts out compiled alone: %s", cut_alone)
