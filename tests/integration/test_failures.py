"""Failure modes of the generator: every way a build can go wrong must end with the
documented exit code (docs/build.md, "Exit codes and diagnostics"), a diagnostic that
points at the cause (file:line:col, op, target, relocation, offset ...) and - since
outputs are published atomically - the previous outputs left exactly as they were.

The pattern of almost every test (Scenario below): a private copy of the bundled
project, an outdir holding the outputs of one successful build of it, a
snapshot of those outputs (bytes, mtime_ns, inode), ONE thing broken, a second
build, then the exit code, the message and the untouched outputs checked.

To keep the module fast the successful build is done once per generator binary
and source tree (module-level cache) and its outputs are copied per test; the
copy is of a real successful build of byte-identical sources (outputs carry no
absolute paths), keyed by a digest of the project copy, so it stays correct if
the bundled sources change under us.
"""
import atexit
import hashlib
import os
import re
import shutil
import tempfile

from sgtest import BUNDLED_OPS, BUNDLED_TRIPLES, TRIPLE, TestFailure, check, read, write

ASAN = True

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(os.path.dirname(HERE), "fixtures", "failures")
WORKDIR = ".stencilgen"  # the generator's work directory inside an outdir
# The bundled manifest has two targets: x86-64 (TRIPLE, the host) and AArch64.
OUTPUT_TRIPLES = BUNDLED_TRIPLES
# Every target compiles ops in batches (Mach-O too: docs/platforms.md, "Units").
BATCHED_TRIPLES = OUTPUT_TRIPLES
OUTPUTS = ["jit_stencils.h"] + ["jit_stencils-%s.h" % t for t in OUTPUT_TRIPLES]
BUILD_TIMEOUT = 180

EXIT_OK, EXIT_CHECK, EXIT_USAGE, EXIT_TOOLCHAIN = 0, 1, 2, 3
# The tests read the run of the default, batched units; llvm-readelf reads the
# op's own object, which a second run with per-op units keeps.
PER_OP = ("--units", "per-op")

SANITIZER_REPORT = re.compile(r"runtime error:|ERROR: AddressSanitizer|ERROR: LeakSanitizer|"
                              r"UndefinedBehaviorSanitizer|SUMMARY: \w+Sanitizer")
GCC_STYLE_ERROR = re.compile(r"^(?:stencilgen|\S+:\d+:\d+): error: ", re.M)


# --- small helpers ---------------------------------------------------------

def fixture(name):
    return read(os.path.join(FIXTURES, name))


def describe(p):
    return "exit %s\nstdout:\n%s\nstderr:\n%s" % (p.returncode, p.stdout[-3000:], p.stderr[-5000:])


def expect_exit(p, rc, what):
    check(p.returncode == rc, "%s: expected exit %d, got %s", what, rc, describe(p))
    # ASan/UBSan report to stderr and (UBSan by default) carry on with the
    # same exit code: an error path that trips a sanitizer must still fail.
    m = SANITIZER_REPORT.search(p.stderr)
    check(not m, "%s: sanitizer report in stderr (%r)\n%s", what, m and m.group(0), describe(p))


def expect_text(p, what, *needles):
    for n in needles:
        check(n in p.stderr, "%s: stderr lacks %r\n%s", what, n, describe(p))


def expect_line(p, what, *needles):
    """One stderr line must hold every needle (a str, or a compiled regex)."""
    def has(line, n):
        return n.search(line) if hasattr(n, "search") else n in line
    for line in p.stderr.splitlines():
        if all(has(line, n) for n in needles):
            return line
    raise TestFailure("%s: no stderr line holds all of %r\n%s" % (
        what, [getattr(n, "pattern", n) for n in needles], describe(p)))


def hexoff(off):
    """The offset as a hex token, leading zeros allowed: 0x5, 0x05, 0x0000000000000005."""
    return re.compile(r"\b0x0*%x\b" % off)


def file_loc(basename, line, col, kind):
    """`.../basename:line:col: kind: ` as clang prints it, whatever the directory."""
    return re.compile(r"(?:^|/)%s:%d:%d: %s: " % (re.escape(basename), line, col, kind))


def line_col_of(text, needle, first_line=1):
    """1-based (line, col) of the first occurrence of needle in text, whose first
    line is line first_line of its file."""
    i = text.index(needle)
    line = first_line + text.count("\n", 0, i)
    col = i - (text.rfind("\n", 0, i) + 1) + 1
    return line, col


def tree_digest(root):
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            p = os.path.join(dirpath, name)
            h.update(os.path.relpath(p, root).encode() + b"\0")
            if not os.path.islink(p):
                h.update(read(p, "rb"))
            h.update(b"\0")
    return h.hexdigest()


def snapshot(outdir):
    """{relative path: (kind, bytes, mtime_ns, inode)} of everything in outdir
    except the work directory."""
    snap = {}
    for dirpath, dirnames, filenames in os.walk(outdir):
        rel_dir = os.path.relpath(dirpath, outdir)
        if rel_dir == ".":
            dirnames[:] = [d for d in dirnames if d != WORKDIR]
        for d in dirnames:
            snap[os.path.normpath(os.path.join(rel_dir, d)) + "/"] = ("dir", None, None, None)
        for f in filenames:
            p = os.path.join(dirpath, f)
            st = os.lstat(p)
            data = None if os.path.islink(p) else read(p, "rb")
            snap[os.path.normpath(os.path.join(rel_dir, f))] = (
                "file", data, st.st_mtime_ns, st.st_ino)
    return snap


def assert_untouched(before, outdir, what):
    after = snapshot(outdir)
    new = sorted(set(after) - set(before))
    check(not new, "%s: new files in the outdir after a failed run: %s", what, new)
    gone = sorted(set(before) - set(after))
    check(not gone, "%s: outputs gone after a failed run: %s", what, gone)
    for rel in sorted(before):
        b, a = before[rel], after[rel]
        check(a[1] == b[1], "%s: %s changed (%s -> %s bytes) in a failed run", what, rel,
              b[1] and len(b[1]), a[1] and len(a[1]))
        check(a[2] == b[2], "%s: %s was rewritten (mtime %s -> %s) in a failed run", what, rel,
              b[2], a[2])
        check(a[3] == b[3], "%s: %s was replaced (inode %s -> %s) in a failed run", what, rel,
              b[3], a[3])


def listing(root):
    """Every path under root with its size and mtime: to see that nothing was written."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            out[os.path.relpath(p, root)] = (st.st_size if name in filenames else None,
                                             st.st_mtime_ns)
    return out


def readelf_relocs(ctx, obj):
    """[(section, offset, type, symbol)] of an object, from llvm-readelf-22 -r."""
    out = ctx.run(["llvm-readelf-22", "-r", obj], timeout=60, check=True).stdout
    relocs, section = [], None
    for line in out.splitlines():
        m = re.match(r"Relocation section '\.rela(\S+)'", line)
        if m:
            section = m.group(1)
            continue
        m = re.match(r"\s*([0-9a-f]{16})\s+[0-9a-f]+\s+(R_\w+)\s+[0-9a-f]{16}\s+(\S+)", line)
        if m and section:
            relocs.append((section, int(m.group(1), 16), m.group(2), m.group(3)))
    return relocs


def instruction_at(ctx, obj, offset):
    """The mnemonic of the instruction whose bytes cover offset, from llvm-objdump-22."""
    out = ctx.run(["llvm-objdump-22", "-d", "-M", "intel", obj], timeout=60, check=True).stdout
    for line in out.splitlines():
        m = re.match(r"\s*([0-9a-f]+):\s+((?:[0-9a-f]{2} )+)\s*(\S+)", line)
        if not m:
            continue
        start, size = int(m.group(1), 16), len(m.group(2).split())
        if start <= offset < start + size:
            return m.group(3)
    raise TestFailure("no instruction of %s covers offset 0x%x:\n%s" % (obj, offset, out))


# --- the one successful build, cached --------------------------------------

_golden = {}
_cache_root = []


def _cache_dir():
    if not _cache_root:
        d = tempfile.mkdtemp(prefix="sgtest-failures-cache-")
        atexit.register(shutil.rmtree, d, True)
        _cache_root.append(d)
    return _cache_root[0]


def golden(ctx, proj):
    """The outdir and the CompletedProcess of one successful build of a project
    identical to proj, built with this generator binary."""
    st = os.stat(ctx.stencilgen)  # a rebuilt generator gets a fresh build
    key = (ctx.stencilgen, st.st_mtime_ns, st.st_size, tree_digest(proj))
    if key not in _golden:
        base = tempfile.mkdtemp(prefix="g", dir=_cache_dir())
        shutil.copytree(proj, os.path.join(base, "proj"), symlinks=True)
        outdir = os.path.join(base, "out")
        p = ctx.build_stencils(os.path.join(base, "proj", "stencils", "stencils.yaml"), outdir,
                               check=False, timeout=BUILD_TIMEOUT)
        # Only the exit code here: a sanitizer report on this success path is
        # test_control_unmodified_copy_builds's to flag (its stderr must be
        # empty), not a reason to fail every error-path test before it starts.
        check(p.returncode == EXIT_OK, "the unmodified bundled project does not build: %s",
              describe(p))
        _golden[key] = (outdir, p)
    return _golden[key]


class Scenario:
    """A private copy of the bundled project whose outdir holds the outputs of a
    successful build, snapshotted; break one thing, then call fails()."""

    def __init__(self, ctx, name="proj"):
        self.ctx = ctx
        self.proj = ctx.bundled_copy(name)
        self.stencils = os.path.join(self.proj, "stencils")
        self.manifest = os.path.join(self.stencils, "stencils.yaml")
        good_out, self.good_run = golden(ctx, self.proj)
        self.outdir = os.path.join(ctx.tmp, name + "-out")
        shutil.copytree(good_out, self.outdir, symlinks=True,
                        ignore=lambda d, names: [WORKDIR] if d == good_out else [])
        self.good = snapshot(self.outdir)
        for f in OUTPUTS:
            check(f in self.good, "the successful build wrote no %s", f)
        self.originals = {}

    # -- breaking things
    def src(self, rel):
        return os.path.join(self.stencils, rel)

    def _remember(self, rel):
        if rel not in self.originals:
            self.originals[rel] = read(self.src(rel))

    def append(self, rel, text):
        """Append text to stencils/rel; returns the line number text starts on."""
        self._remember(rel)
        old = read(self.src(rel))
        if not old.endswith("\n"):
            old += "\n"
        write(self.src(rel), old + text)
        return old.count("\n") + 1

    def manifest_lines(self):
        return read(self.manifest).split("\n")

    def manifest_index(self, line):
        """0-based index of the manifest line equal to line."""
        lines = self.manifest_lines()
        check(line in lines, "the bundled manifest has no line %r", line)
        return lines.index(line)

    def edit_manifest(self, index, replacement_lines, count=1):
        """Replace count manifest lines from `index` (0-based) by the given lines."""
        self._remember("stencils.yaml")
        lines = self.manifest_lines()
        lines[index:index + count] = replacement_lines
        write(self.manifest, "\n".join(lines))

    def restore(self, rel):
        write(self.src(rel), self.originals.pop(rel))

    # -- running
    def build(self, *extra, **kw):
        kw.setdefault("timeout", BUILD_TIMEOUT)
        return self.ctx.build_stencils(kw.pop("manifest", self.manifest), self.outdir, *extra,
                                       check=False, **kw)

    def fails(self, rc, what, *extra, **kw):
        """Run the broken build: exit code rc, outputs untouched. Returns the run."""
        p = self.build(*extra, **kw)
        expect_exit(p, rc, what)
        check(GCC_STYLE_ERROR.search(p.stderr), "%s: no GCC-style 'error:' line\n%s", what,
              describe(p))
        check(not p.stdout.strip(), "%s: a failed run printed a summary\n%s", what, describe(p))
        assert_untouched(self.good, self.outdir, what)
        return p

    def obj(self, op):
        """The op's own object, kept by a build with per-op units (PER_OP)."""
        return os.path.join(self.outdir, WORKDIR, TRIPLE, "op_%s.o" % op)


def op_label(op):
    return "op %s (%s)" % (op, TRIPLE)


# --- positive controls -----------------------------------------------------

def test_control_unmodified_copy_builds(ctx):
    s = Scenario(ctx)
    p = s.good_run
    lines = p.stdout.splitlines()
    check(len(lines) == len(OUTPUT_TRIPLES),
          "expected a one-line summary per target on stdout, got:\n%s", p.stdout)
    for line, triple in zip(lines, OUTPUT_TRIPLES):
        want = "stencilgen: %s: %d ops" % (triple, BUNDLED_OPS)
        check(line.startswith(want), "summary %r does not start with %r", line, want)
    check(p.stderr == "", "a successful build off a terminal must be quiet, stderr:\n%s",
          p.stderr)
    files = sorted(k for k in s.good if not k.endswith("/"))
    check(files == sorted(OUTPUTS), "outdir holds %s, expected exactly %s", files, OUTPUTS)


def test_control_fix_after_failure_rebuilds(ctx):
    s = Scenario(ctx)
    good_bytes = {f: s.good[f][1] for f in OUTPUTS}
    s.append("ops/arith.c", fixture("undeclared_op.c"))
    s.fails(EXIT_TOOLCHAIN, "an undeclared identifier")
    # Fixed: same sources as the first build, so the same bytes.
    s.restore("ops/arith.c")
    p = s.build()
    expect_exit(p, EXIT_OK, "the fixed project")
    after = snapshot(s.outdir)
    for f in OUTPUTS:
        check(after[f][1] == good_bytes[f], "%s differs after fixing the break (sources are "
              "back to what they were)", f)
    check(sorted(after) == sorted(s.good), "outdir entries changed: %s -> %s", sorted(s.good),
          sorted(after))
    # A real source change: the per-target header changes, the dispatcher does not.
    s.append("ops/arith.c", fixture("new_op.c"))
    p = s.build()
    expect_exit(p, EXIT_OK, "a new op")
    check(p.stdout.startswith("stencilgen: %s: %d ops" % (TRIPLE, BUNDLED_OPS + 1)),
          "summary does not count the new op:\n%s", p.stdout)
    header = read(os.path.join(s.outdir, OUTPUTS[1]), "rb")
    check(header != good_bytes[OUTPUTS[1]], "the per-target header did not change after a new op")
    check(b"SG_OP_neg" in header, "the new op is not in the header")
    check(read(os.path.join(s.outdir, OUTPUTS[0]), "rb") == good_bytes[OUTPUTS[0]],
          "the dispatcher changed although the targets did not")


# --- manifest errors (exit 2) ----------------------------------------------

def test_malformed_yaml(ctx):
    s = Scenario(ctx)
    # Bad indentation: a shim key one column left of its sibling.
    i = s.manifest_index("  function: tinyvm_shim")
    s.edit_manifest(i, [" function: tinyvm_shim"])
    p = s.fails(EXIT_USAGE, "bad indentation")
    expect_line(p, "bad indentation", "%s:%d:2: error: " % (s.manifest, i + 1), "invalid YAML")
    s.restore("stencils.yaml")
    # A bracket opened and closed with the wrong kind: caught at the brace.
    i = s.manifest_index("cflags: [-Wall, -Wextra, -Werror]")
    bad = "cflags: [-Wall, -Wextra, -Werror}"
    s.edit_manifest(i, [bad])
    p = s.fails(EXIT_USAGE, "unclosed bracket")
    expect_line(p, "unclosed bracket", "%s:%d:%d: error: " % (s.manifest, i + 1, bad.index("}") + 1),
                "invalid YAML", "']'")
    s.restore("stencils.yaml")
    # A tab used for indentation.
    i = s.manifest_index("  source: shim.c")
    s.edit_manifest(i, ["\tsource: shim.c"])
    p = s.fails(EXIT_USAGE, "tab indentation")
    expect_line(p, "tab indentation", "%s:%d:1: error: " % (s.manifest, i + 1), "invalid YAML")


TOP_KEYS = "targets, template, shim, ops, include_dirs, defines, cflags, symbols"
TARGET_KEYS = "triple, cflags, shim_cflags, expect_frame"


def test_unknown_manifest_key(ctx):
    s = Scenario(ctx)
    i = s.manifest_index("template: stencil_template.h")
    s.edit_manifest(i, ["colour: blue", s.manifest_lines()[i]])
    p = s.fails(EXIT_USAGE, "unknown top-level key")
    line = expect_line(p, "unknown top-level key",
                       "%s:%d:1: error: unknown key 'colour'" % (s.manifest, i + 1))
    for key in TOP_KEYS.split(", "):
        check(key in line, "the message does not list the expected key %r: %s", key, line)
    s.restore("stencils.yaml")
    # Inside a target entry.
    i = s.manifest_index("  - triple: %s" % TRIPLE)
    s.edit_manifest(i, [s.manifest_lines()[i], "    opt_level: 3"])
    p = s.fails(EXIT_USAGE, "unknown key in a target")
    line = expect_line(p, "unknown key in a target",
                       "%s:%d:5: error: unknown key 'opt_level'" % (s.manifest, i + 2))
    for key in TARGET_KEYS.split(", "):
        check(key in line, "the message does not list the expected target key %r: %s", key, line)


def test_missing_op_file(ctx):
    s = Scenario(ctx)
    i = s.manifest_index("  - ops/calls.c")
    s.edit_manifest(i, ["  - ops/calls.c", "  - ops/missing.c"])
    p = s.fails(EXIT_USAGE, "a missing op file")
    expect_line(p, "a missing op file", "%s:%d:5: error: " % (s.manifest, i + 2), "ops/missing.c",
                "not found")
    s.restore("stencils.yaml")
    # The same in flow style: the column is that of the item, not of the list.
    lines = s.manifest_lines()
    i = s.manifest_index("ops:")
    j = i + 1
    while lines[j].startswith("  - "):
        j += 1
    flow = "ops: [%s]" % ", ".join([l[4:] for l in lines[i + 1:j]] + ["ops/missing.c"])
    s.edit_manifest(i, [flow], count=j - i)
    p = s.fails(EXIT_USAGE, "a missing op file, flow style")
    expect_line(p, "a missing op file, flow style",
                "%s:%d:%d: error: " % (s.manifest, i + 1, flow.index("ops/missing.c") + 1),
                "ops/missing.c", "not found")


def test_op_file_without_ops(ctx):
    s = Scenario(ctx)
    write(s.src("ops/no_ops.c"), fixture("no_ops.c"))
    i = s.manifest_index("  - ops/calls.c")
    s.edit_manifest(i, ["  - ops/calls.c", "  - ops/no_ops.c"])
    p = s.fails(EXIT_USAGE, "an op file without ops")
    expect_line(p, "an op file without ops", "%s:%d:5: error: " % (s.manifest, i + 2),
                "no_ops.c", "no ops")


def test_duplicate_op_name(ctx):
    s = Scenario(ctx)
    first = line_col_of(read(s.src("ops/arith.c")), "OP(add)")
    text = fixture("duplicate_op.c")
    start = s.append("ops/calls.c", text)
    second = line_col_of(text, "OP(add)", start)
    p = s.fails(EXIT_USAGE, "a duplicate op")
    err = expect_line(p, "a duplicate op",
                      "%s:%d:%d: error: " % (s.src("ops/calls.c"), second[0], second[1]), "'add'")
    note = expect_line(p, "a duplicate op",
                       "%s:%d:%d: note: first defined here" % (s.src("ops/arith.c"), *first))
    lines = p.stderr.splitlines()
    check(lines.index(note) == lines.index(err) + 1, "the note does not follow its error:\n%s",
          p.stderr)


def test_manifest_not_a_mapping_or_empty(ctx):
    s = Scenario(ctx)
    write(s.manifest, "# a list is not a manifest\n\n- ops/stack.c\n- ops/arith.c\n")
    p = s.fails(EXIT_USAGE, "a list manifest")
    expect_line(p, "a list manifest", "%s:3:1: error: " % s.manifest, "mapping")
    write(s.manifest, "")
    p = s.fails(EXIT_USAGE, "an empty manifest")
    expect_line(p, "an empty manifest", "%s:1:1: error: " % s.manifest, "empty")
    write(s.manifest, "# only a comment\n")
    p = s.fails(EXIT_USAGE, "a manifest of comments")
    expect_line(p, "a manifest of comments", "%s:1:1: error: " % s.manifest, "empty")


# --- toolchain failures (exit 3) -------------------------------------------

def expect_op_named(s, p, what, op, line, col):
    """The op a compile error is in is named: with batched units (the default,
    run p) by a note at the error, the file's ops being compiled in one unit;
    with per-op units by the error itself, built again here."""
    expect_line(p, what + ": the failing op named", file_loc("arith.c", line, col, "note"),
                "this error is in op %s " % op)
    # Each target's note sits under that target's failed batch, and names it.
    under, label = [], None
    for l in p.stderr.splitlines():
        m = re.match(r"stencilgen: error: ops \S+ of \S+ \(([\w-]+)\)", l)
        label = m.group(1) if m else label
        m = re.search(r": note: this error is in op %s \(([\w-]+);" % re.escape(op), l)
        if m:
            under.append((label, m.group(1)))
    check(under == [(t, t) for t in BATCHED_TRIPLES], "%s: notes not one per target under its "
          "batch's error: %s\n%s", what, under, describe(p))
    for t in OUTPUT_TRIPLES:
        if t not in BATCHED_TRIPLES:
            expect_line(p, "%s: the failing op named for %s" % (what, t), "op %s (%s)" % (op, t),
                        "compile failed")
    p = s.fails(EXIT_TOOLCHAIN, what + " (per-op units)", *PER_OP)
    expect_line(p, what + ": the failing op named (per-op units)", op_label(op),
                "compile failed")


def test_c_error_in_op(ctx):
    s = Scenario(ctx)
    text = fixture("undeclared_op.c")
    line, col = line_col_of(text, "undeclared_thing", s.append("ops/arith.c", text))
    p = s.fails(EXIT_TOOLCHAIN, "an undeclared identifier in an op")
    expect_line(p, "an undeclared identifier in an op",
                file_loc("arith.c", line, col, "error"), "undeclared_thing")
    expect_op_named(s, p, "an undeclared identifier in an op", "broken_undeclared", line, col)


def test_c_error_found_by_discovery(ctx):
    s = Scenario(ctx)
    text = fixture("file_scope_error.c")
    line, col = line_col_of(text, "undeclared_type_t", s.append("ops/arith.c", text))
    p = s.fails(EXIT_TOOLCHAIN, "a C error outside any op body")
    expect_line(p, "a C error outside any op body",
                "%s:%d:%d: error: " % (s.src("ops/arith.c"), line, col), "undeclared_type_t")


def test_warning_is_error(ctx):
    s = Scenario(ctx)
    text = fixture("unused_var_op.c")
    line, col = line_col_of(text, "unused_in_op", s.append("ops/arith.c", text))
    p = s.fails(EXIT_TOOLCHAIN, "an unused variable under -Werror")
    expect_line(p, "an unused variable under -Werror",
                file_loc("arith.c", line, col, "error"), "unused_in_op", "-Werror")
    expect_op_named(s, p, "an unused variable under -Werror", "broken_unused", line, col)


def test_clang_missing(ctx):
    s = Scenario(ctx)
    p = s.fails(EXIT_TOOLCHAIN, "--clang to a missing file", "--clang", "/nonexistent/clang-22")
    expect_line(p, "--clang to a missing file", "error: ", "/nonexistent/clang-22")
    # Not on PATH at all.
    p = s.fails(EXIT_TOOLCHAIN, "no clang-22 on PATH", env={"PATH": os.path.join(ctx.tmp, "empty")})
    expect_line(p, "no clang-22 on PATH", "error: ", "clang-22")
    # A "compiler" that runs and fails without a word: caught when it is asked
    # for its version, before any op.
    p = s.fails(EXIT_TOOLCHAIN, "a compiler that fails", "--clang", "/bin/false")
    expect_line(p, "a compiler that fails", "error: ", "'/bin/false'", "printed nothing")


def test_llvm_module_missing(ctx):
    """The executable alone, without its LLVM module (stencilgen-llvm.so beside
    it or under the install's libdir): a run that must discover ops is exit 3,
    saying where it looked, once, and the outputs are kept."""
    s = Scenario(ctx)
    alone = os.path.join(ctx.tmp, "alone")
    os.makedirs(alone)
    shutil.copy(ctx.stencilgen, alone)
    p = s.ctx.run([os.path.join(alone, "stencilgen"), "build", "--manifest", s.manifest,
                   "--outdir", s.outdir], timeout=BUILD_TIMEOUT)
    expect_exit(p, EXIT_TOOLCHAIN, "no LLVM module")
    want = "cannot load stencilgen's LLVM module stencilgen-llvm.so: not found (tried %s/" % alone
    check(want in p.stderr and p.stderr.count("error:") == 1, "no single error naming where "
          "it looked:\n%s", describe(p))
    assert_untouched(s.good, s.outdir, "no LLVM module")


# --- check failures (exit 1) -----------------------------------------------

TLS_RELOC = re.compile(r"^R_X86_64_(TLSGD|TLSLD|GOTTPOFF|CODE_\d+_GOTTPOFF|TPOFF32|TPOFF64|"
                       r"DTPOFF32|DTPOFF64|DTPMOD64|GOTPC32_TLSDESC|CODE_\d+_GOTPC32_TLSDESC|"
                       r"TLSDESC_CALL)$")


def test_unsupported_relocation(ctx):
    s = Scenario(ctx)
    s.append("ops/stack.c", fixture("tls_op.c"))  # the first op file: early in the job list
    p = s.fails(EXIT_CHECK, "a thread-local read")
    s.fails(EXIT_CHECK, "a thread-local read (per-op units)", *PER_OP)
    relocs = [r for r in readelf_relocs(ctx, s.obj("tls_read")) if r[3] == "tls_counter"]
    check(len(relocs) == 1, "expected one relocation against tls_counter, readelf has %s", relocs)
    section, offset, rtype, _ = relocs[0]
    check(TLS_RELOC.match(rtype), "clang emitted %s for a TLS read: not a TLS relocation", rtype)
    check(section == ".text", "the TLS relocation is in %s, expected .text", section)
    expect_line(p, "a thread-local read", op_label("tls_read"), "unsupported relocation",
                rtype, ".text", hexoff(offset))


def test_unknown_runtime_symbol(ctx):
    s = Scenario(ctx)
    s.append("ops/stack.c", fixture("unknown_symbol_op.c"))
    p = s.fails(EXIT_CHECK, "an unlisted run-time function")
    s.fails(EXIT_CHECK, "an unlisted run-time function (per-op units)", *PER_OP)
    relocs = [r for r in readelf_relocs(ctx, s.obj("call_unlisted"))
              if r[3] == "helper_not_listed"]
    check(len(relocs) == 1, "expected one relocation against helper_not_listed: %s", relocs)
    section, offset, rtype, _ = relocs[0]
    expect_line(p, "an unlisted run-time function", op_label("call_unlisted"),
                "'helper_not_listed'", "symbols:", section, hexoff(offset))


def test_writable_static_data(ctx):
    for fix, op, section in (("writable_bss_op.c", "count_bss", ".bss"),
                             ("writable_data_op.c", "count_data", ".data")):
        s = Scenario(ctx, "proj-" + op)
        s.append("ops/stack.c", fixture(fix))
        p = s.fails(EXIT_CHECK, "mutable static data in " + section)
        expect_line(p, "mutable static data in " + section, op_label(op),
                    re.compile(r"'?%s\b'?" % re.escape(section)), "writable")


def test_check_failure_names_instruction(ctx):
    """Diagnostics name the op, the target and, for code, the offset and the instruction
    (docs/build.md, "Exit codes and diagnostics"). The relocation check is about
    code."""
    s = Scenario(ctx)
    s.append("ops/stack.c", fixture("tls_op.c"))
    p = s.fails(EXIT_CHECK, "a thread-local read")
    s.fails(EXIT_CHECK, "a thread-local read (per-op units)", *PER_OP)
    obj = s.obj("tls_read")
    offset = [r for r in readelf_relocs(ctx, obj) if r[3] == "tls_counter"][0][1]
    mnemonic = instruction_at(ctx, obj, offset)
    line = expect_line(p, "a thread-local read", op_label("tls_read"), "unsupported relocation")
    check(re.search(r"\b%s" % re.escape(mnemonic), line, re.I),
          "the diagnostic does not name the instruction (%s at 0x%x): %s", mnemonic, offset, line)


# --- usage errors (exit 2) -------------------------------------------------

def test_usage_errors(ctx):
    s = Scenario(ctx)
    m, out = s.manifest, s.outdir

    def usage(what, args, *needles, has_usage=True):
        p = ctx.generator(*args, timeout=60)
        expect_exit(p, EXIT_USAGE, what)
        expect_line(p, what, "stencilgen: error: ", *needles)
        if has_usage:
            expect_text(p, what, "usage: stencilgen build")
        check(not p.stdout.strip(), "%s: wrote to stdout:\n%s", what, p.stdout)
        assert_untouched(s.good, out, what)

    usage("no command", [], "command")
    usage("an unknown command", ["frobnicate", "--manifest", m], "'frobnicate'")
    usage("build without --outdir", ["build", "--manifest", m], "--outdir")
    usage("build without --manifest", ["build", "--outdir", out], "--manifest")
    usage("-j 0", ["build", "--manifest", m, "--outdir", out, "-j", "0"], "-j", "'0'")
    usage("-j abc", ["build", "--manifest", m, "--outdir", out, "-j", "abc"], "-j", "'abc'")
    usage("an unknown option", ["build", "--manifest", m, "--outdir", out, "--colour"],
          "'--colour'")
    usage("a stray argument", ["build", "--manifest", m, "--outdir", out, "extra"], "'extra'")
    riscv = "riscv64-unknown-linux-gnu"
    usage("an unsupported --target",
          ["build", "--manifest", m, "--outdir", out, "--target", riscv],
          "'%s'" % riscv, TRIPLE, has_usage=False)
    # An unsupported triple in the manifest is a manifest error with its location.
    i = s.manifest_index("  - triple: %s" % TRIPLE)
    s.edit_manifest(i, ["  - triple: %s" % riscv])
    p = s.fails(EXIT_USAGE, "an unsupported target in the manifest")
    expect_line(p, "an unsupported target in the manifest", "%s:%d:" % (m, i + 1),
                "'%s'" % riscv, TRIPLE)


# --- check writes nothing --------------------------------------------------

def test_check_writes_nothing(ctx):
    proj = ctx.bundled_copy()
    manifest = os.path.join(proj, "stencils", "stencils.yaml")
    cwd = os.path.join(ctx.tmp, "cwd")
    os.makedirs(cwd)
    before_proj, before_cwd = listing(proj), listing(cwd)
    p = ctx.generator("check", "--manifest", manifest, cwd=cwd, timeout=BUILD_TIMEOUT)
    expect_exit(p, EXIT_OK, "check of the bundled project")
    check(listing(proj) == before_proj, "check wrote next to the manifest: %s",
          sorted(set(listing(proj)) ^ set(before_proj)) or "(files rewritten)")
    check(listing(cwd) == before_cwd, "check wrote into its working directory: %s",
          sorted(listing(cwd)))
    # check runs every check: a TLS op fails it (exit 1), and still nothing is written.
    stack = os.path.join(proj, "stencils", "ops", "stack.c")
    write(stack, read(stack) + fixture("tls_op.c"))
    before_proj = listing(proj)
    p = ctx.generator("check", "--manifest", manifest, cwd=cwd, timeout=BUILD_TIMEOUT)
    expect_exit(p, EXIT_CHECK, "check of a TLS op")
    expect_line(p, "check of a TLS op", op_label("tls_read"), "unsupported relocation")
    check(listing(proj) == before_proj, "a failing check wrote next to the manifest: %s",
          sorted(set(listing(proj)) ^ set(before_proj)) or "(files rewritten)")
    check(listing(cwd) == before_cwd, "a failing check wrote into its working directory: %s",
          sorted(listing(cwd)))
