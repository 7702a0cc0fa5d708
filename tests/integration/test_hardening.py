"""Hardened programs stay hardened (docs/runtime.md, "Hardened programs"): a
linker keeps a CET or BTI/PAC property note only when every object it links
carries it, so one object of stencilrt's built without -fcf-protection (or
-mbranch-protection) turns the feature off in every VM that links it.

Three views of tinyvm's link, on x86-64 and in the AArch64 cross build: each
object the project links into it (stencilrt's archive member by member, and
libstencilrt.so's) read with binutils' readelf -n; those objects linked
together (a relocatable link, the linker's own AND of their notes); and the
real link command run again with the linker's report (-z cet-report=warning,
-z force-bti), which names every input without the feature: none may be the
project's. Debian 12's C library startup files (Scrt1.o, crti.o, crtn.o) carry
no notes, so there the linked program has none whatever the project does;
the test says so when it is that, and otherwise wants the note on tinyvm.
And the generator's warning when the shim's object lacks the notes its flags
ask for (a launcher that drops them)."""
import glob
import os
import re
import shlex

from sgtest import TRIPLE, a64_cross_build, a64_missing, check, read, write

ASAN = False  # the build trees' own programs and libraries are what is read

T = 120
A64 = "aarch64-unknown-linux-gnu"


class Arch:
    def __init__(self, name, note, report, reported):
        self.name = name
        self.note = note          # the property line readelf prints
        self.report = report      # the link flag that makes ld name inputs without it
        self.reported = reported  # a pattern for those lines: group 1 is the input


X86 = Arch("x86_64", "x86 feature: IBT, SHSTK", "-Wl,-z,cet-report=warning",
           r"^\S*ld: (.*): warning: missing (?:IBT and SHSTK|IBT|SHSTK) propert")
AARCH64 = Arch("aarch64", "AArch64 feature: BTI, PAC", "-Wl,-z,force-bti",
               r"^\S*ld: (.*): warning: BTI turned on by -z force-bti")


def features(ctx, path):
    """{file or archive member: its property-note lines} from readelf -n."""
    out = ctx.run(["readelf", "-nW", path], check=True, timeout=T).stdout
    found, cur = {path: []}, path
    for line in out.splitlines():
        m = re.match(r"^File: (.*)$", line)
        if m:
            cur = m.group(1)
        found.setdefault(cur, [])
        m = re.search(r"Properties: (.*)$", line)
        if m:
            found[cur].append(m.group(1).strip())
    return found


def has_note(props, note):
    """Whether a property line holds every feature of `note` (later clangs
    add GCS beside BTI and PAC)."""
    kind, names = note.split(": ")
    want = set(names.split(", "))
    return any(p.startswith(kind + ":") and want <= set(p.split(": ", 1)[1].split(", "))
               for p in props)


def objects_without(ctx, paths, note):
    """The objects among `paths` (archives read member by member) whose notes
    lack `note`."""
    missing = []
    for path in paths:
        for name, props in sorted(features(ctx, path).items()):
            if not (name.endswith(".a") and not props) and not has_note(props, note):
                missing.append("%s: %s" % (name, "; ".join(props) or "no property note"))
    return missing


def link_command(ctx, build, output):
    """The command ninja links `output` with, as a list, run from `build`."""
    lines = ctx.run(["ninja", "-C", build, "-t", "commands", output], check=True,
                    timeout=T).stdout.strip().splitlines()
    return shlex.split(lines[-1])


def project_inputs(ctx, build, output):
    """The objects and archives of the project in `output`'s link command."""
    return [os.path.join(build, a) for a in link_command(ctx, build, output)
            if a.endswith((".o", ".a")) and not a.startswith("-")]


def relink(ctx, build, output, dest, *extra):
    """`output`'s link command again, writing `dest`, with `extra` flags."""
    cmd = link_command(ctx, build, output)
    at = cmd.index("-o")
    cmd[at + 1] = dest
    return ctx.run(cmd + list(extra), cwd=build, check=True, timeout=T)


def linker_named(p, arch):
    """The inputs a link run with arch.report names as lacking the feature."""
    return [m.group(1) for m in (re.match(arch.reported, l) for l in p.stderr.splitlines()) if m]


def check_link(ctx, build, output, arch):
    """`output`'s project inputs all carry the note and the linker names none
    of them; returns (those inputs, every input the linker names)."""
    inputs = project_inputs(ctx, build, output)
    missing = objects_without(ctx, inputs, arch.note)
    check(not missing, "objects linked into %s without '%s':\n  %s", output, arch.note,
          "\n  ".join(missing))
    named = linker_named(relink(ctx, build, output, os.path.join(ctx.tmp, "relinked"),
                                arch.report), arch)
    ours = [i for i in named
            if os.path.abspath(os.path.join(build, i.split("(")[0])).startswith(ctx.root)]
    check(not ours, "the linker names the project's inputs of %s as lacking '%s':\n  %s",
          output, arch.note, "\n  ".join(ours))
    return inputs, named


def check_program(ctx, build, arch):
    inputs, named = check_link(ctx, build, "stencils/tinyvm", arch)
    check_link(ctx, build, os.path.relpath(
        sorted(glob.glob(os.path.join(build, "runtime", "libstencilrt.so.*.*.*")))[0], build),
        arch)
    # PostgreSQL's provider links stencilrt too (built where the server's
    # headers are, x86-64 only).
    if os.path.exists(os.path.join(build, "pgstencil", "pgstencil.so")):
        check_link(ctx, build, "pgstencil/pgstencil.so", arch)
    # The project's inputs together, as the linker ANDs their notes.
    together = os.path.join(ctx.tmp, "tinyvm-r.o")
    cc = link_command(ctx, build, "stencils/tinyvm")[0]
    objs = [i for i in inputs if i.endswith(".o")]
    libs = [i for i in inputs if i.endswith(".a")]
    ctx.run([cc, "-r", "-nostdlib", "-o", together] + objs + ["-Wl,--whole-archive"] + libs +
            ["-Wl,--no-whole-archive"], check=True, timeout=T)
    props = features(ctx, together)[together]
    check(has_note(props, arch.note), "tinyvm's objects and stencilrt linked together keep "
          "'%s', not '%s'", "; ".join(props) or "no property note", arch.note)
    # The program itself: the note, unless the C library's inputs drop it.
    tinyvm = os.path.join(build, "stencils", "tinyvm")
    if not named:
        props = features(ctx, tinyvm)[tinyvm]
        check(has_note(props, arch.note), "%s keeps '%s' of its inputs' '%s'", tinyvm,
              "; ".join(props) or "no property note", arch.note)


def test_x86_64_tinyvm_keeps_ibt_and_shstk(ctx):
    """Every object linked into tinyvm, libstencilrt.so and pgstencil.so carries
    GNU_PROPERTY_X86_FEATURE_1_AND (IBT, SHSTK); tinyvm's linked together keep
    it; ld names none of them as lacking it."""
    check(os.path.exists(os.path.join(ctx.build, "pgstencil", "pgstencil.so")),
          "pgstencil.so is not built in %s", ctx.build)
    check_program(ctx, ctx.build, X86)


def test_aarch64_tinyvm_keeps_bti_and_pac(ctx):
    """The same in the cross build for GNU_PROPERTY_AARCH64_FEATURE_1_AND (BTI,
    PAC)."""
    missing = a64_missing()
    check(not missing, "missing for the AArch64 cross build: %s", ", ".join(missing))
    check_program(ctx, a64_cross_build(ctx), AARCH64)


def test_the_linker_names_an_object_without_notes(ctx):
    """The checks themselves: an object compiled without -fcf-protection, beside
    stencilrt's archive, is the one readelf's reading names, and the one the
    linker's report names among the project's inputs."""
    src = os.path.join(ctx.tmp, "plain.c")
    write(src, "int plain(int (*f)(void)) { return f() + 1; }\n")
    obj = os.path.join(ctx.tmp, "plain.o")
    ctx.run(["gcc", "-fcf-protection=none", "-c", src, "-o", obj], check=True, timeout=T)
    lib = os.path.join(ctx.build, "runtime", "libstencilrt.a")
    missing = objects_without(ctx, [obj, lib], X86.note)
    check(missing == ["%s: no property note" % obj], "readelf's reading named: %r", missing)
    p = relink(ctx, ctx.build, "stencils/tinyvm", os.path.join(ctx.tmp, "relinked"), obj,
               X86.report)
    named = linker_named(p, X86)
    check(obj in named, "the linker's report does not name %s:\n%s", obj, p.stderr)


def dropping_launcher(ctx):
    """A launcher that runs the compiler without its control-flow flags, as a
    wrapper that rewrites flags would."""
    path = os.path.join(ctx.tmp, "drop-cf")
    write(path, '#!/bin/sh\n'
                'for a; do shift\n'
                '  case "$a" in -fcf-protection*|-mbranch-protection=*) ;;\n'
                '  *) set -- "$@" "$a" ;; esac\n'
                'done\n'
                'exec "$@"\n')
    os.chmod(path, 0o755)
    return path


def warnings_about_notes(stderr):
    return [l for l in stderr.splitlines() if "property note" in l]


def test_generator_warns_when_the_shims_notes_are_lost(ctx):
    """The bundled manifest asks for -fcf-protection=full (x86-64) and
    -mbranch-protection=standard (AArch64): built through a launcher that drops
    both, the generator says, for each target, which features the shim's
    object lacks and which flag asked for them; built without it, it says
    nothing of notes. Both builds succeed (the stencils are sound, only not
    hardened)."""
    manifest = ctx.path("stencils", "stencils.yaml")
    args = ["--target", TRIPLE, "--target", A64]
    plain = ctx.build_stencils(manifest, os.path.join(ctx.tmp, "plain"), *args, timeout=T)
    check(not warnings_about_notes(plain.stderr), "a plain build warns:\n%s", plain.stderr)
    p = ctx.build_stencils(manifest, os.path.join(ctx.tmp, "dropped"), *args, "--launcher",
                           dropping_launcher(ctx), "--cache-dir",
                           os.path.join(ctx.tmp, "cache"), timeout=T)
    lines = warnings_about_notes(p.stderr)
    for triple, missing, flag in ((TRIPLE, "IBT, SHSTK", "-fcf-protection=full"),
                                  (A64, "BTI, PAC", "-mbranch-protection=standard")):
        hits = [l for l in lines if triple in l and "shim" in l]
        check(len(hits) == 1, "%d warnings for %s, not 1:\n%s", len(hits), triple, p.stderr)
        check("warning:" in hits[0] and "no %s property note" % missing in hits[0] and
              flag in hits[0], "the warning names neither %s nor %s:\n%s", missing, flag,
              hits[0])
    header = read(os.path.join(ctx.tmp, "dropped", "jit_stencils-%s.h" % TRIPLE))
    check("#define SG_TARGET_LANDING_PADS 0" in header,
          "the launcher did not drop -fcf-protection (the ops still start with endbr64)")
