"""Prebuilt headers (docs/build.md, "Prebuilt headers"): a header records what
each stencil was made from; `stencilgen check-prebuilt` says which are stale,
and why, without LLVM; a checkout with current prebuilt headers builds tinyvm
with gcc alone; an edit to one op changes only that op's part of the header."""
import difflib
import hashlib
import os
import re
import shutil

import sgtest
from sgtest import TRIPLE, check, read, write


def meson_version():
    """The project's version, which every header records (provenance.h)."""
    with open(os.path.join(sgtest.ROOT, "meson.build")) as f:
        return re.search(r"version: '([^']+)'", f.read()).group(1)

ASAN = True

TIMEOUT = 240
HEADER = "jit_stencils-%s.h" % TRIPLE
STENCILS = 23  # the bundled 22 ops and the shim
RUNTIME_SOURCES = ["base.c", "bytebuf.c", "jitmem.c", "emit.c", "ehframe.c", "gdbjit.c",
                   "gdbgroup.c", "lookup.c", "repatch.c", "config.c", "registry.c",
                   "executor.c", "runtime.c", "perf.c"]
TINYVM_SOURCES = ["main.c", "natives.c", "run.c", "loader.c", "interp.c", "jit.c", "chain.c"]


def project(ctx, name):
    """A fresh checkout of what a VM ships: stencils/, templates/, runtime/."""
    base = ctx.bundled_copy(name)
    ctx.copy_tree(ctx.path("runtime"), os.path.join(base, "runtime"))
    return base


def prebuild(ctx, base, *extra):
    out = os.path.join(base, "prebuilt")
    ctx.build_stencils(os.path.join(base, "stencils", "stencils.yaml"), out, "--target", TRIPLE,
                       *extra, timeout=TIMEOUT)
    shutil.rmtree(os.path.join(out, ".stencilgen"))  # a shipped directory has no cache
    return out


def check_prebuilt(ctx, base, *extra, stencilgen=None, env=None):
    """check-prebuilt of the x86-64 header (the only one prebuild makes),
    unless `extra` names targets."""
    cmd = [stencilgen or ctx.stencilgen, "check-prebuilt",
           "--manifest", os.path.join(base, "stencils", "stencils.yaml"),
           "--prebuilt", os.path.join(base, "prebuilt")] + list(extra)
    if "--target" not in extra and "--all" not in extra:
        cmd += ["--target", TRIPLE]
    cmd = [a for a in cmd if a != "--all"]
    return ctx.run(cmd, timeout=60, env=env)


def stale_lines(p):
    """The reasons check-prebuilt listed (its per-target line left out)."""
    return set(l for l in p.stdout.splitlines() if not l.startswith(TRIPLE + ":"))


# --- 1. a machine with no LLVM: check, then build tinyvm with gcc alone ------

def no_llvm_env(ctx):
    """PATH holds gcc and binutils' as and ld, nothing else; no library
    path."""
    bindir = os.path.join(ctx.tmp, "bin-gcc-only")
    os.makedirs(bindir, exist_ok=True)
    for tool in ("gcc", "as", "ld"):
        found = shutil.which(tool)
        check(found, "%s is not installed", tool)
        if not os.path.exists(os.path.join(bindir, tool)):
            os.symlink(os.path.realpath(found), os.path.join(bindir, tool))
    return {"PATH": bindir, "LD_LIBRARY_PATH": "", "LIBRARY_PATH": "", "CPATH": ""}


def lone_stencilgen(ctx):
    """The stencilgen executable alone, as docs/build.md says to install it on
    a machine with no LLVM: no LLVM module beside it or where it looks."""
    d = os.path.join(ctx.tmp, "lone", "bin")
    os.makedirs(d)
    exe = os.path.join(d, "stencilgen")
    shutil.copy2(ctx.stencilgen, exe)
    return exe


def test_fresh_checkout_builds_tinyvm_without_llvm(ctx):
    base = project(ctx, "checkout")
    prebuild(ctx, base, "--no-listing")
    env = no_llvm_env(ctx)
    exe = lone_stencilgen(ctx)
    # The executable links no LLVM and loads none while it checks.
    p = ctx.run(["ldd", exe], timeout=30, check=True)
    check(not re.search(r"libLLVM|libclang", p.stdout), "stencilgen links LLVM:\n%s", p.stdout)
    debug = dict(env, LD_DEBUG="files")
    p = check_prebuilt(ctx, base, stencilgen=exe, env=debug)
    check(p.returncode == 0 and p.stdout == "", "check-prebuilt on a current header: exit %d\n%s%s",
          p.returncode, p.stdout, p.stderr[-3000:])
    loaded = re.findall(r"file=(\S+)", p.stderr)
    check(loaded, "LD_DEBUG=files showed nothing: %s", p.stderr[-2000:])
    check(not [f for f in loaded if re.search(r"LLVM|clang|stencilgen-", f)],
          "check-prebuilt loaded %s", loaded)
    # The VM: the runtime's sources and tinyvm's, the prebuilt headers, gcc.
    vm = os.path.join(base, "tinyvm")
    cmd = ["gcc", "-std=gnu11", "-O1", "-D_GNU_SOURCE", "-fno-omit-frame-pointer",
           "-I", os.path.join(base, "runtime"), "-I", os.path.join(base, "prebuilt"),
           "-I", os.path.join(base, "stencils")]
    cmd += [os.path.join(base, "stencils", s) for s in TINYVM_SOURCES]
    cmd += [os.path.join(base, "runtime", s) for s in RUNTIME_SOURCES]
    cmd += ["-lpthread", "-rdynamic", "-o", vm]
    p = ctx.run(cmd, timeout=TIMEOUT, env=env)
    check(p.returncode == 0, "gcc with no LLVM: exit %d\n%s", p.returncode, p.stderr[-4000:])
    p = ctx.run([vm, "--jit", os.path.join(base, "stencils", "programs", "fib.tvm")], timeout=60,
                env=env)
    check(p.returncode == 0 and p.stdout.strip() == "46368", "tinyvm --jit fib: exit %d: %s%s",
          p.returncode, p.stdout, p.stderr[-2000:])
    # The same lone executable finds a stale header stale.
    arith = os.path.join(base, "stencils", "ops", "arith.c")
    write(arith, read(arith).replace("(uint64_t)a * (uint64_t)b", "(uint64_t)a * (uint64_t)b * 3"))
    p = check_prebuilt(ctx, base, stencilgen=exe, env=env)
    check(p.returncode == 1 and stale_lines(p) == {"op mul: ops/arith.c changed"},
          "lone check-prebuilt after an edit: exit %d\n%s%s", p.returncode, p.stdout,
          p.stderr[-2000:])


def tool_dir(ctx, name, tools):
    """A directory for PATH holding `tools` ({name: path}) and nothing else."""
    d = os.path.join(ctx.tmp, name)
    os.makedirs(d)
    for tool, path in tools.items():
        check(path, "%s is not installed", tool)
        os.symlink(path, os.path.join(d, tool))
    return d


def meson_build(ctx, base, path, name):
    build = os.path.join(base, name)
    env = {"PATH": path, "LD_LIBRARY_PATH": ""}
    p = ctx.run(["meson", "setup", build, base], timeout=TIMEOUT, env=env)
    if p.returncode == 0:
        q = ctx.run(["ninja", "-C", build], timeout=TIMEOUT, env=env)
        check(q.returncode == 0, "ninja: exit %d\n%s%s", q.returncode, q.stdout[-3000:],
              q.stderr[-3000:])
    return p, os.path.join(build, "tinyvm")


def test_meson_recipe_prebuilt_when_llvm_is_absent(ctx):
    """tests/fixtures/prebuilt/meson.build: with no LLVM, current headers are
    used and stale ones fail the setup with the list; with LLVM, the headers
    are regenerated whatever their state."""
    base = project(ctx, "recipe")
    prebuild(ctx, base)
    shutil.copy(ctx.path("tests", "fixtures", "prebuilt", "meson.build"), base)
    common = {t: shutil.which(t) for t in ("gcc", "as", "ld", "ar", "meson", "ninja")}
    no_llvm = tool_dir(ctx, "no-llvm", dict(common, stencilgen=lone_stencilgen(ctx)))
    p, vm = meson_build(ctx, base, no_llvm, "b-current")
    check(p.returncode == 0 and "stencils: prebuilt" in p.stdout, "setup: exit %d\n%s%s",
          p.returncode, p.stdout[-3000:], p.stderr[-3000:])
    q = ctx.run([vm, "--jit", os.path.join(base, "stencils", "programs", "fib.tvm")], timeout=60)
    check(q.returncode == 0 and q.stdout.strip() == "46368", "tinyvm: %s%s", q.stdout, q.stderr)
    arith = os.path.join(base, "stencils", "ops", "arith.c")
    write(arith, read(arith).replace("(uint64_t)a * (uint64_t)b", "(uint64_t)a * (uint64_t)b * 3"))
    p, _ = meson_build(ctx, base, no_llvm, "b-stale")
    check(p.returncode != 0 and "op mul: ops/arith.c changed" in p.stdout + p.stderr,
          "stale, no LLVM: exit %d\n%s%s", p.returncode, p.stdout[-3000:], p.stderr[-3000:])
    llvm = tool_dir(ctx, "llvm", dict(common, stencilgen=ctx.stencilgen,
                                      **{"clang-22": shutil.which("clang-22")}))
    p, vm = meson_build(ctx, base, llvm, "b-llvm")
    check(p.returncode == 0 and "stencils: regenerated" in p.stdout, "with LLVM: exit %d\n%s%s",
          p.returncode, p.stdout[-3000:], p.stderr[-3000:])
    q = ctx.run([vm, "--jit", os.path.join(base, "stencils", "programs", "fib.tvm")], timeout=60)
    check(q.returncode == 0 and q.stdout.strip() == "46368", "tinyvm: %s%s", q.stdout, q.stderr)


# --- 2. each kind of edit: exactly the ops it affects -------------------------

ARITH_OPS = ["add", "sub", "mul", "div", "mod", "addi"]


def edits(base):
    """(what, edit function, the lines check-prebuilt must print)."""
    s = os.path.join(base, "stencils")

    def sub(rel, old, new):
        def edit():
            path = os.path.join(s, rel)
            text = read(path)
            check(old in text, "%s does not hold %r", rel, old)
            write(path, text.replace(old, new, 1))
        return edit

    def version():
        path = os.path.join(base, "prebuilt", HEADER)
        text = read(path)
        check(" * sg-generator stencilgen " in text, "no generator line in %s", path)
        write(path, re.sub(r" \* sg-generator stencilgen \S+", " * sg-generator stencilgen 0.0",
                           text))

    this = "stencilgen " + meson_version()
    return [
        ("op body", sub("ops/arith.c", "(uint64_t)a - (uint64_t)b", "(uint64_t)a - (uint64_t)b - 1"),
         {"op sub: ops/arith.c changed"}),
        ("template", sub("stencil_template.h", "\n#", "\n/* edited */\n#"),
         {"every op: template stencil_template.h changed",
          "shim: template stencil_template.h changed"}),
        ("shim", sub("shim.c", "\n", "\n/* edited */\n"), {"shim: shim.c changed"}),
        ("included header", sub("ops/arith_extra.h", "1", "2"),
         {"op %s: header ops/arith_extra.h changed" % op for op in ARITH_OPS}),
        ("manifest flag", sub("stencils.yaml", "cflags: [-Wall, -Wextra, -Werror]",
                              "cflags: [-Wall, -Wextra, -Werror, -DEDITED]"),
         {"every op: flags changed (the manifest's cflags, defines or include_dirs)"}),
        ("ops files reordered", sub("stencils.yaml", "  - ops/stack.c\n  - ops/arith.c",
                                    "  - ops/arith.c\n  - ops/stack.c"),
         {"every op: the manifest's ops: files are in another order (every SG_OP_ enumerator "
          "renumbered)"}),
        ("generator version", version,
         {"every op: generator changed (header: stencilgen 0.0, this: %s)" % this,
          "shim: generator changed (header: stencilgen 0.0, this: %s)" % this}),
    ]


def snapshot(base):
    files = {}
    for d, _, names in os.walk(base):
        for n in names:
            files[os.path.join(d, n)] = read(os.path.join(d, n), "rb")
    return files


def restore(files):
    for path, data in files.items():
        with open(path, "wb") as f:
            f.write(data)


def test_each_edit_is_stale_for_exactly_its_ops(ctx):
    base = project(ctx, "edits")
    arith = os.path.join(base, "stencils", "ops", "arith.c")
    # A header only arith.c's ops read.
    write(os.path.join(base, "stencils", "ops", "arith_extra.h"), "#define ARITH_EXTRA 1\n")
    write(arith, '#include "arith_extra.h"\n' + read(arith))
    prebuild(ctx, base)
    pristine = snapshot(base)
    p = check_prebuilt(ctx, base)  # the negative control
    check(p.returncode == 0 and p.stdout == "" and p.stderr == "",
          "no edit: exit %d\n%s%s", p.returncode, p.stdout, p.stderr)
    for what, edit, expected in edits(base):
        edit()
        p = check_prebuilt(ctx, base)
        check(p.returncode == 1, "%s: exit %d, not 1\n%s%s", what, p.returncode, p.stdout,
              p.stderr)
        check(stale_lines(p) == expected, "%s: listed\n%s\nexpected\n%s", what,
              "\n".join(sorted(stale_lines(p))), "\n".join(sorted(expected)))
        restore(pristine)
        p = check_prebuilt(ctx, base)
        check(p.returncode == 0 and p.stdout == "", "%s undone: exit %d\n%s", what,
              p.returncode, p.stdout)


def test_a_file_a_compile_looked_for_is_stale_when_it_appears(ctx):
    """A header created earlier on the include path, shadowing the one an op includes
    (`include_dirs: [., over, inc]`, `over/bias.h` created), and a file an op's __has_include
    now finds: each makes exactly the ops whose compiles looked for it stale (check-prebuilt
    said current), as a clean build, which compiles other code, agrees; removed again, current."""
    base = project(ctx, "absent")
    s = os.path.join(base, "stencils")
    os.makedirs(os.path.join(s, "over"))
    os.makedirs(os.path.join(s, "inc"))
    write(os.path.join(s, "inc", "bias.h"), "#define BIAS 3\n")
    manifest = os.path.join(s, "stencils.yaml")
    write(manifest, read(manifest).replace("include_dirs: [.]", "include_dirs: [., over, inc]"))
    arith = os.path.join(s, "ops", "arith.c")
    write(arith, '#include "bias.h"\n#if __has_include("feature.h")\n#include "feature.h"\n'
                 '#else\n#define FEATURE 0\n#endif\n' +
          read(arith).replace("(uint64_t)a + (uint64_t)b", "(uint64_t)a + (uint64_t)b + BIAS + FEATURE"))
    before = read(os.path.join(prebuild(ctx, base), HEADER))
    pristine = snapshot(base)
    p = check_prebuilt(ctx, base)
    check(p.returncode == 0 and p.stdout == "", "before: exit %d\n%s%s", p.returncode, p.stdout,
          p.stderr)
    why = "op %s: %s now exists (its compile looked for it and found nothing)"
    for name, text in (("over/bias.h", "#define BIAS 5\n"), ("feature.h", "#define FEATURE 7\n")):
        path = os.path.join(s, name)
        write(path, text)
        p = check_prebuilt(ctx, base)
        check(p.returncode == 1 and stale_lines(p) == {why % (op, name) for op in ARITH_OPS},
              "%s created: exit %d, listed\n%s", name, p.returncode, p.stdout)
        rebuilt = read(os.path.join(prebuild(ctx, base), HEADER))
        check(changed_owners(before, rebuilt) >= {"add"}, "a clean build with %s changed %s",
              name, changed_owners(before, rebuilt))
        os.remove(path)
        restore(pristine)
        p = check_prebuilt(ctx, base)
        check(p.returncode == 0 and p.stdout == "", "%s removed: exit %d\n%s", name,
              p.returncode, p.stdout)


def test_a_project_header_outside_the_manifest_directory_is_recorded(ctx):
    """An op source includes a header outside the manifest's directory and its include
    directories (`#include "../../common/extra.h"`): it is the project's, not the compiler's,
    so it is recorded and its edit makes the ops that read it stale (check-prebuilt said
    current), as a clean build agrees. The C library's headers (under /usr) stay unrecorded."""
    base = project(ctx, "outside")
    os.makedirs(os.path.join(base, "common"))
    extra = os.path.join(base, "common", "extra.h")
    write(extra, "#define EXTRA 1\n")
    arith = os.path.join(base, "stencils", "ops", "arith.c")
    write(arith, '#include "../../common/extra.h"\n' +
          read(arith).replace("(uint64_t)a + (uint64_t)b", "(uint64_t)a + (uint64_t)b + EXTRA"))
    before = read(os.path.join(prebuild(ctx, base), HEADER))
    check(" * sg-file ../common/extra.h " in before and "/usr/" not in before.split(
          "/* Provenance")[-1], "the record: %s", before.split("/* Provenance")[-1][:600])
    p = check_prebuilt(ctx, base)
    check(p.returncode == 0 and p.stdout == "", "before: exit %d\n%s%s", p.returncode, p.stdout,
          p.stderr)
    pristine = snapshot(base)
    write(extra, "#define EXTRA 2\n")
    p = check_prebuilt(ctx, base)
    check(p.returncode == 1 and stale_lines(p) ==
          {"op %s: header ../common/extra.h changed" % op for op in ARITH_OPS},
          "extra.h edited: exit %d, listed\n%s", p.returncode, p.stdout)
    after = read(os.path.join(prebuild(ctx, base), HEADER))
    check("add" in changed_owners(before, after), "a clean build after the edit changed %s",
          changed_owners(before, after))
    restore(pristine)
    p = check_prebuilt(ctx, base)
    check(p.returncode == 0 and p.stdout == "", "undone: exit %d\n%s", p.returncode, p.stdout)


def test_reordered_op_files_are_stale_as_a_clean_build_says(ctx):
    """The manifest's ops: files reordered: no stencil changes, but a clean build renumbers
    every SG_OP_ enumerator, so check-prebuilt calls every op stale (it said current)."""
    base = project(ctx, "reorder")
    before = read(os.path.join(prebuild(ctx, base), HEADER))
    manifest = os.path.join(base, "stencils", "stencils.yaml")
    write(manifest, read(manifest).replace("  - ops/stack.c\n  - ops/arith.c",
                                           "  - ops/arith.c\n  - ops/stack.c"))
    p = check_prebuilt(ctx, base)
    after = read(os.path.join(prebuild(ctx, base), HEADER))
    check(after != before, "a clean build of the reordered manifest writes the same header")
    check(p.returncode == 1 and "every op: the manifest's ops: files are in another order" in
          p.stdout, "check-prebuilt after the reorder: exit %d\n%s", p.returncode, p.stdout)


def test_the_layout_is_recorded_and_checked(ctx):
    """Headers built with --no-hot-cold say so (sg-layout whole): check-prebuilt without
    --no-hot-cold calls every op stale, as a clean build without it writes other stencils;
    with it, current. And the other way round."""
    base = project(ctx, "layout")
    whole = read(os.path.join(prebuild(ctx, base, "--no-hot-cold"), HEADER))
    check(" * sg-layout whole\n" in whole, "no sg-layout whole line")
    split_reason = ("every op: layout changed (header: %s, this check: %s; --no-hot-cold lays ops "
                    "out whole)")
    p = check_prebuilt(ctx, base)
    check(p.returncode == 1 and stale_lines(p) == {split_reason % ("whole", "hot-cold")},
          "a --no-hot-cold header checked without it: exit %d\n%s%s", p.returncode, p.stdout,
          p.stderr)
    p = check_prebuilt(ctx, base, "--no-hot-cold")
    check(p.returncode == 0 and p.stdout == "", "checked with --no-hot-cold: exit %d\n%s%s",
          p.returncode, p.stdout, p.stderr)
    split = read(os.path.join(prebuild(ctx, base), HEADER))
    check(split != whole and " * sg-layout hot-cold\n" in split, "the layouts write one header")
    p = check_prebuilt(ctx, base, "--no-hot-cold")
    check(p.returncode == 1 and stale_lines(p) == {split_reason % ("hot-cold", "whole")},
          "a split header checked with --no-hot-cold: exit %d\n%s%s", p.returncode, p.stdout,
          p.stderr)
    path = os.path.join(base, "prebuilt", HEADER)
    write(path, split.replace(" * sg-layout hot-cold\n", ""))
    p = check_prebuilt(ctx, base)
    check(p.returncode == 2 and "lacks the generator, ABI, layout or shim line" in p.stderr,
          "a format-3 header without its layout: exit %d\n%s", p.returncode, p.stderr)


def older_digests(text, fmt):
    """The header as provenance format 1 or 2 wrote it: 32 hex digits a digest
    (those formats' 128-bit hash; any will do, as none can match)."""
    text = re.sub(r"\b([0-9a-f]{32})[0-9a-f]{32}\b", r"\1", text)
    text = text.replace(" * sg-provenance 3\n", " * sg-provenance %d\n" % fmt)
    return text.replace(" * sg-layout hot-cold\n", "") if fmt == 1 else text


def test_digests_are_sha256_and_older_formats_are_stale(ctx):
    """Every digest is SHA-256: an sg-file line's is hashlib's of the file's bytes.
    A header of provenance format 1 or 2 (digests of stencilgen's own 128-bit hash)
    is read, and every op called stale for that reason alone, never misread as
    current or as edited."""
    base = project(ctx, "sha256")
    out = prebuild(ctx, base)
    path = os.path.join(out, HEADER)
    text = read(path)
    manifest_dir = os.path.join(base, "stencils")
    files = re.findall(r"^ \* sg-file (\S+) ([0-9a-f]+)$", text, re.M)
    check(files, "no sg-file lines")
    for name, recorded in files:
        with open(os.path.join(manifest_dir, name), "rb") as f:
            actual = hashlib.sha256(f.read()).hexdigest()
        check(recorded == actual, "sg-file %s: %s, its SHA-256 is %s", name, recorded, actual)
    for fmt in (1, 2):
        write(path, older_digests(text, fmt))
        p = check_prebuilt(ctx, base)
        reason = ("provenance format %d digests files with a 128-bit hash of stencilgen's own, "
                  "format 3 with SHA-256: regenerate the header" % fmt)
        check(p.returncode == 1 and stale_lines(p) == {"every op: " + reason, "shim: " + reason},
              "a format-%d header: exit %d\n%s%s", fmt, p.returncode, p.stdout, p.stderr)


def test_an_op_body_edit_regenerates_what_check_prebuilt_listed(ctx):
    """What check-prebuilt calls stale is what a rebuild changes: the header
    built after the edit differs from the prebuilt one in mul's part only."""
    base = project(ctx, "rebuild")
    out = prebuild(ctx, base)
    before = read(os.path.join(out, HEADER))
    arith = os.path.join(base, "stencils", "ops", "arith.c")
    write(arith, read(arith).replace("(uint64_t)a * (uint64_t)b", "(uint64_t)a * (uint64_t)b * 5"))
    p = check_prebuilt(ctx, base)
    check(stale_lines(p) == {"op mul: ops/arith.c changed"}, "listed %s", p.stdout)
    after = read(os.path.join(prebuild(ctx, base), HEADER))
    check(changed_owners(before, after) == {"mul"}, "the rebuild changed %s",
          changed_owners(before, after))


# --- 3. diff locality ---------------------------------------------------------

def owners(text):
    """Which op (or "header") each line of a header belongs to: an op's part
    (from its "/* NAME - " comment to the next part), its enumerator, its
    #define, its case in an emitter function, its row of sg_stencils and of
    sg_cold_sizes, its provenance line."""
    result = []
    current = "header"
    in_case = None
    for line in text.split("\n"):
        m = re.match(r"/\* (\w+) - ", line)
        if m:
            current = m.group(1)
        elif re.match(r"/\* (Fields|The shim|The cases of|Unwind facts|Provenance|Per stencil)",
                      line) or \
                line.startswith("static unsigned sg_emit_"):
            current = "header"
        own = current
        m = re.match(r"    case SG_CASE_(\w+): \{", line)
        if m:
            in_case = m.group(1)
        if in_case:
            own = in_case
            if line == "    }":
                in_case = None
        for pattern in (r"    SG_OP_(\w+),$", r"    SG_CASE_(\w+),$",
                        r"#define SG_OP_(\w+) SG_OP_\w+$", r"    /\* SG_OP_(\w+) \*/ ",
                        r" \* sg-op (\w+) ",
                        r"    \d+, /\* (\w+) \*/$"):
            m = re.match(pattern, line)
            if m:
                own = m.group(1)
        result.append(own)
    return result


def parts(text):
    """{owner: its lines, in order}."""
    result = {}
    for line, own in zip(text.split("\n"), owners(text)):
        result.setdefault(own, []).append(line)
    return result


def changed_owners(old, new):
    """The ops (or "header") whose lines differ between two headers."""
    a, b = parts(old), parts(new)
    return set(k for k in set(a) | set(b) if a.get(k) != b.get(k))


def hunks_within(hunks, old, new, expected):
    """Every line a `diff -u` hunk removes is a line of an expected op's part
    in the old header, every line it adds one in the new header (diff may
    place an insertion a few identical lines higher: lines compare by text)."""
    a, b = parts(old), parts(new)
    removable = set(l for k in expected for l in a.get(k, []))
    addable = set(l for k in expected for l in b.get(k, []))
    for h in hunks:
        for line in h.split("\n")[1:]:
            if line.startswith("-") and line[1:] not in removable:
                return "removes %r" % line[1:]
            if line.startswith("+") and line[1:] not in addable:
                return "adds %r" % line[1:]
    return None


def unified_hunks(ctx, old_path, new_path):
    p = ctx.run(["diff", "-u", old_path, new_path], timeout=30)
    check(p.returncode == 1, "diff -u: exit %d (no difference?)\n%s", p.returncode, p.stderr)
    return [h for h in re.split(r"(?m)^@@ ", p.stdout)[1:]]


def test_diff_locality_edit_add_remove(ctx):
    base = project(ctx, "locality")
    arith = os.path.join(base, "stencils", "ops", "arith.c")
    pristine = read(arith)
    neg = "OP(neg)\n{\n    tos = (vm_value)(0 - (uint64_t)tos);\n    CONTINUE();\n}\n\n"
    cases = [
        ("edit sub's body", pristine.replace("(uint64_t)a - (uint64_t)b",
                                             "(uint64_t)a - (uint64_t)b - 7"), {"sub"}),
        ("add neg after sub", pristine.replace("OP(mul)", neg + "OP(mul)"), {"neg"}),
        ("remove mul", re.sub(r"OP\(mul\)\n\{.*?\n\}\n\n", "", pristine, flags=re.S), {"mul"}),
    ]
    out = prebuild(ctx, base)
    old_path = os.path.join(ctx.tmp, "before.h")
    shutil.copy(os.path.join(out, HEADER), old_path)
    old = read(old_path)
    for what, text, expected in cases:
        check(text != pristine, "%s: the edit changed nothing", what)
        write(arith, text)
        new_path = os.path.join(prebuild(ctx, base), HEADER)
        new = read(new_path)
        hunks = unified_hunks(ctx, old_path, new_path)
        check(hunks, "%s: no hunks", what)
        for h in hunks:
            changed = [l for l in h.split("\n")[1:] if l[:1] in "+-"]
            check(changed, "%s: a hunk changes nothing:\n%s", what, h)
        stray = hunks_within(hunks, old, new, expected)
        check(not stray, "%s: a hunk %s, outside %s's part", what, stray, sorted(expected))
        got = changed_owners(old, new)
        check(got == expected, "%s: the diff touches %s, expected %s only\n%s", what, sorted(got),
              sorted(expected), "\n@@ ".join(hunks)[:6000])
        write(arith, pristine)


# --- 4. bad input -------------------------------------------------------------

def test_check_prebuilt_bad_input(ctx):
    base = project(ctx, "bad")
    out = prebuild(ctx, base)
    header = os.path.join(out, HEADER)
    text = read(header)

    def refused(p, what, needle):
        check(p.returncode == 2 and needle in p.stderr, "%s: exit %d, want 2 with %r\n%s%s",
              what, p.returncode, needle, p.stdout, p.stderr)

    # Every target of the manifest by default: the others have no header.
    refused(check_prebuilt(ctx, base, "--all"), "missing header",
            "no prebuilt header for target aarch64-unknown-linux-gnu")
    refused(check_prebuilt(ctx, base, "--target", "riscv64-unknown-linux-gnu"), "unknown target",
            "unknown target 'riscv64-unknown-linux-gnu'")
    start = text.index("/* Provenance, read by")
    write(header, text[:start] + text[text.index(" */\n", start) + 4:])
    refused(check_prebuilt(ctx, base, "--target", TRIPLE), "no provenance",
            "records no provenance")
    lines = text.split("\n")
    bad = next(i for i, l in enumerate(lines) if l.startswith(" * sg-op add "))
    lines[bad] = " * sg-op add ops/arith.c at nothex"
    write(header, "\n".join(lines))
    refused(check_prebuilt(ctx, base, "--target", TRIPLE), "malformed line",
            "%s:%d:4: error: malformed provenance line" % (header, bad + 1))
    write(header, text)
    p = ctx.run([ctx.stencilgen, "check-prebuilt", "--manifest",
                 os.path.join(base, "stencils", "stencils.yaml")], timeout=30)
    refused(p, "no --prebuilt", "needs --prebuilt DIR")
    p = check_prebuilt(ctx, base, "--target", TRIPLE)
    check(p.returncode == 0, "restored: exit %d\n%s%s", p.returncode, p.stdout, p.stderr)


# --- 5. headers without the listing -------------------------------------------

def test_no_listing_leaves_only_the_listing_out(ctx):
    base = project(ctx, "nolisting")
    full = read(os.path.join(prebuild(ctx, base), HEADER))
    bare = read(os.path.join(prebuild(ctx, base, "--no-listing"), HEADER))
    listing = re.compile(r"^ \*   ([0-9a-f]{4}: |      \^ |data: |  data |---- ).*\n", re.M)
    check(listing.search(full) and not listing.search(bare), "the listing is not left out")
    check(listing.sub("", full) == bare, "--no-listing changed more than the listing")
    check(len(bare) < len(full) * 0.8, "no smaller: %d vs %d bytes", len(bare), len(full))


def test_a_target_the_manifest_does_not_list(ctx):
    """`build --target` takes a supported target the manifest does not list;
    its header records flags without the manifest's target entry, and
    check-prebuilt takes the same --target."""
    manifest = ctx.path("tests", "fixtures", "shim", "jit_and_c_call.yaml")
    out = os.path.join(ctx.tmp, "out")
    triple = "aarch64-unknown-linux-gnu"
    ctx.build_stencils(manifest, out, "--target", triple, timeout=TIMEOUT)
    p = ctx.run([ctx.stencilgen, "check-prebuilt", "--manifest", manifest, "--prebuilt", out,
                 "--target", triple], timeout=60)
    check(p.returncode == 0 and p.stdout == "", "exit %d\n%s%s", p.returncode, p.stdout,
          p.stderr)


VARIANT_OPS = """OP(vp, VARIANT(k, 0, 2))
{
    tos += STENCIL_V(k);
    CONTINUE();
}

OP(vq, VARIANT(k, 0, 1))
{
    tos -= STENCIL_V(k) + 1;
    CONTINUE();
}
"""


def test_variants_are_stale_with_their_op_alone(ctx):
    """Every variant of an op is recorded with its op's definition: editing one
    op with variants makes its variants stale, and not the other op's of the
    same file. (Variants were once recorded as their whole file, through a
    search for each variant's definition that went on past it: any edit of the
    file made them all stale, and a file of 1,100 variants took 0.2 s to
    record.)"""
    base = project(ctx, "variants")
    stencils = os.path.join(base, "stencils")
    write(os.path.join(stencils, "ops", "vary.c"), VARIANT_OPS)
    manifest = os.path.join(stencils, "stencils.yaml")
    write(manifest, read(manifest).replace("ops:\n", "ops:\n  - ops/vary.c\n", 1))
    prebuild(ctx, base)
    p = check_prebuilt(ctx, base)
    check(p.returncode == 0 and stale_lines(p) == set(), "fresh: exit %d\n%s%s", p.returncode,
          p.stdout, p.stderr)
    source = os.path.join(stencils, "ops", "vary.c")
    write(source, read(source).replace("tos -= STENCIL_V(k) + 1;", "tos -= STENCIL_V(k) + 2;"))
    p = check_prebuilt(ctx, base)
    want = {"op vq__k%d: ops/vary.c changed" % k for k in range(2)}  # the record's C names
    check(p.returncode == 1 and stale_lines(p) == want, "after editing vq: exit %d, stale %s, "
          "want %s\n%s", p.returncode, sorted(stale_lines(p)), sorted(want), p.stderr)
