"""What the cache key must cover beyond the files a compile read: the paths it
looked for and did not find, and the environment clang reads (incremental.h
lists the ingredients). Each test builds, changes one thing that changes the
code (a header added earlier on the include path, a __has_include'd file, an
#include_next target, a header beside the including file, an environment
variable), rebuilds, and compares the published header byte for byte with a
clean build's (a fresh cache) under the same conditions. A stale cache entry
would keep the old code with exit 0."""
import os
import re
import stat

from sgtest import BUNDLED_OPS, BUNDLED_TRIPLES, TRIPLE, check, read, write

ASAN = True  # the cache's record index and "absent" lists are parsed on every run

DARWIN = "x86_64-apple-darwin"
MINGW = "x86_64-w64-windows-gnu"
TIMEOUT = 240


def manifest_of(proj):
    return os.path.join(proj, "stencils", "stencils.yaml")


def header_path(out, triple):
    return os.path.join(out, "jit_stencils-%s.h" % triple)


def build(ctx, proj, out, triple=TRIPLE, *extra, env=None):
    p = ctx.generator("build", "--manifest", manifest_of(proj), "--outdir", out,
                      "--target", triple, "-v", *extra, env=env, timeout=TIMEOUT)
    check(p.returncode == 0, "build of %s for %s (env %s) failed: exit %d\n%s", proj, triple,
          env, p.returncode, p.stderr[-4000:])
    return p


def counts(p, triple=TRIPLE):
    """(ops, compiled, cached) from the summary line."""
    m = re.search(r"%s: (\d+) ops \((\d+) compiled, (\d+) cached\)" % re.escape(triple),
                  p.stdout)
    check(m, "no summary line in:\n%s", p.stdout)
    return tuple(int(x) for x in m.groups())


def edit(path, old, new):
    text = read(path)
    check(old in text, "%s lacks %r", path, old)
    write(path, text.replace(old, new, 1))


def use_in_add(proj, prelude, term):
    """Op add (stencils/ops/arith.c) adds `term`, with `prelude` above it."""
    arith = os.path.join(proj, "stencils", "ops", "arith.c")
    edit(arith, "#define BINARY", prelude + "\n#define BINARY")
    edit(arith, "(uint64_t)a + (uint64_t)b", "(uint64_t)a + (uint64_t)(%s)" % term)


def include_dirs(proj, dirs):
    """The manifest's include_dirs, relative to stencils/."""
    edit(manifest_of(proj), "include_dirs: [.]", "include_dirs: [%s]" % ", ".join(dirs))


def add_op(text):
    """Op add's part of a header."""
    start = text.index("/* op add ")
    return text[start:text.index("/* op ", start + 1)]


def clean_build(ctx, proj, triple=TRIPLE, *extra, env=None):
    out = os.path.join(ctx.tmp, "clean-%d" % len(os.listdir(ctx.tmp)))
    build(ctx, proj, out, triple, *extra, env=env)
    return read(header_path(out, triple))


def rebuilt_equals_clean(ctx, proj, out, before, what, triple=TRIPLE, *extra, env=None):
    """Rebuild in `out`, which built `before`; the header must be a clean
    build's, and differ from `before` (else the change tested nothing)."""
    build(ctx, proj, out, triple, *extra, env=env)
    incremental = read(header_path(out, triple))
    clean = clean_build(ctx, proj, triple, *extra, env=env)
    check(clean != before, "%s: the clean build's header is the old one: the change "
          "changed no code, so this test tests nothing", what)
    if incremental != clean:
        try:
            detail = "incremental:\n%s\nclean:\n%s" % (add_op(incremental), add_op(clean))
        except ValueError:
            detail = ""
        check(False, "%s: the incremental build's header differs from a clean build's "
              "(stale cache entry)\n%s", what, detail)


# --- paths looked for and not found -------------------------------------------

def test_header_added_earlier_on_the_include_path(ctx):
    """<bias.h> is found in the second include directory; a bias.h added to
    the first changes op add. Also with --exec-clang, whose compiles
    clang's executable runs (their missing paths come from a preprocess by the
    clang module)."""
    for how in ([], ["--exec-clang"]):
        proj = ctx.bundled_copy("proj%s" % "".join(how).replace("-", ""))
        out = os.path.join(proj, "out")
        sten = os.path.join(proj, "stencils")
        os.makedirs(os.path.join(sten, "first"))
        include_dirs(proj, ["first", "."])
        write(os.path.join(sten, "bias.h"), "#define BIAS 77\n")
        use_in_add(proj, "#include <bias.h>", "BIAS")
        build(ctx, proj, out, TRIPLE, *how)
        before = read(header_path(out, TRIPLE))
        write(os.path.join(sten, "first", "bias.h"), "#define BIAS 1000\n")
        rebuilt_equals_clean(ctx, proj, out, before, "bias.h added to the first directory %s"
                             % how, TRIPLE, *how)


def test_has_include_of_a_file_added_later(ctx):
    """__has_include(<extra.h>) is false at first, and true once extra.h is
    added to an include directory."""
    proj = ctx.bundled_copy()
    out = os.path.join(proj, "out")
    use_in_add(proj, "#if __has_include(<extra.h>)\n#include <extra.h>\n#else\n"
               "#define EXTRA 5\n#endif", "EXTRA")
    build(ctx, proj, out)
    before = read(header_path(out, TRIPLE))
    write(os.path.join(proj, "stencils", "extra.h"), "#define EXTRA 900\n")
    rebuilt_equals_clean(ctx, proj, out, before, "extra.h added")


def test_include_next_finds_a_file_added_later(ctx):
    """first/n.h does #include_next <n.h>, found in the third directory; an
    n.h added to the second is what #include_next finds next."""
    proj = ctx.bundled_copy()
    out = os.path.join(proj, "out")
    sten = os.path.join(proj, "stencils")
    for d in ("first", "second"):
        os.makedirs(os.path.join(sten, d))
    include_dirs(proj, ["first", "second", "."])
    write(os.path.join(sten, "first", "n.h"), "#include_next <n.h>\n")
    write(os.path.join(sten, "n.h"), "#define NEXT 3\n")
    use_in_add(proj, "#include <n.h>", "NEXT")
    build(ctx, proj, out)
    before = read(header_path(out, TRIPLE))
    write(os.path.join(sten, "second", "n.h"), "#define NEXT 4000\n")
    rebuilt_equals_clean(ctx, proj, out, before, "n.h added to the second directory")


def test_quoted_include_beside_the_including_file_added_later(ctx):
    """"qq.h" from sub/q.h is found on the include path at first; a qq.h
    added beside sub/q.h comes first. The same for the template's own
    "stencil_op.h", which the generator puts on the path after the VM's
    directories: a stencil_op.h added beside the template replaces it."""
    proj = ctx.bundled_copy()
    out = os.path.join(proj, "out")
    sten = os.path.join(proj, "stencils")
    os.makedirs(os.path.join(sten, "sub"))
    write(os.path.join(sten, "sub", "q.h"), '#include "qq.h"\n')
    write(os.path.join(sten, "qq.h"), "#define QQ 6\n")
    use_in_add(proj, "#include <sub/q.h>\n#ifndef SHADOW\n#define SHADOW 0\n#endif", "QQ + SHADOW")
    build(ctx, proj, out)
    before = read(header_path(out, TRIPLE))
    write(os.path.join(sten, "sub", "qq.h"), "#define QQ 6000\n")
    rebuilt_equals_clean(ctx, proj, out, before, "qq.h added beside sub/q.h")
    before = read(header_path(out, TRIPLE))
    write(os.path.join(sten, "stencil_op.h"),
          read(ctx.path("templates", "stencil_op.h")) + "\n#define SHADOW 7000\n")
    rebuilt_equals_clean(ctx, proj, out, before, "stencil_op.h added beside the template")


def test_header_added_earlier_changes_which_ops_exist(ctx):
    """Discovery's cache: opts.h, found in the second directory, leaves op neg
    out; an opts.h added to the first puts it in. The op list must follow."""
    proj = ctx.bundled_copy()
    out = os.path.join(proj, "out")
    sten = os.path.join(proj, "stencils")
    os.makedirs(os.path.join(sten, "first"))
    include_dirs(proj, ["first", "."])
    write(os.path.join(sten, "opts.h"), "#define WITH_NEG 0\n")
    arith = os.path.join(sten, "ops", "arith.c")
    write(arith, read(arith) + "\n#include <opts.h>\n#if WITH_NEG\nOP(neg)\n{\n"
          "    tos = (vm_value)(0 - (uint64_t)tos);\n    CONTINUE();\n}\n#endif\n")
    p = build(ctx, proj, out)
    check(counts(p)[0] == BUNDLED_OPS, "expected %d ops at first: %s", BUNDLED_OPS, p.stdout)
    before = read(header_path(out, TRIPLE))
    write(os.path.join(sten, "first", "opts.h"), "#define WITH_NEG 1\n")
    p = build(ctx, proj, out)
    check(counts(p)[0] == BUNDLED_OPS + 1, "op neg was not discovered after opts.h was "
          "added earlier on the path (stale discovery):\n%s", p.stdout)
    rebuilt_equals_clean(ctx, proj, out, before, "opts.h added to the first directory")


def test_unchanged_rebuild_is_all_hits(ctx):
    """The new checks cause no false misses: a rebuild with nothing changed
    compiles nothing and takes every checked stencil from the cache, on every
    bundled target, also under keyed environment variables, with
    --exec-clang, and under CCC_OVERRIDE_OPTIONS (which makes the in-process
    compiles run clang's executable); and a rebuild under another value of
    such a variable compiles again."""
    proj = ctx.bundled_copy()
    sten = os.path.join(proj, "stencils")
    os.makedirs(os.path.join(sten, "first"))
    include_dirs(proj, ["first", "."])
    for name, extra, env in (("default", [], None), ("exec", ["--exec-clang"], None),
                             ("env", [], {"CPATH": os.path.join(ctx.tmp, "nowhere"),
                                          "SOURCE_DATE_EPOCH": "12345"}),
                             # clang's executable compiles (clang_main.cpp)
                             ("override", [], {"CCC_OVERRIDE_OPTIONS": "+-DUNUSED_HERE=1"})):
        out = os.path.join(proj, "out-" + name)
        args = ["--manifest", manifest_of(proj), "--outdir", out, "-v"] + extra
        p = ctx.generator("build", *args, env=env, timeout=TIMEOUT)
        check(p.returncode == 0, "%s: cold build failed:\n%s", name, p.stderr[-3000:])
        # An output removed: the rebuild renders, so it loads every stencil
        # (with the outputs as they were, its memo would load none).
        os.remove(os.path.join(out, "jit_stencils.h"))
        p = ctx.generator("build", *args, env=env, timeout=TIMEOUT)
        check(p.returncode == 0, "%s: rebuild failed:\n%s", name, p.stderr[-3000:])
        for line in re.findall(r"^stencilgen: \S+: \d+ ops \(.*", p.stdout, re.M):
            check(" (0 compiled, %d cached)" % BUNDLED_OPS in line,
                  "%s: an unchanged rebuild missed the cache: %s", name, line)
        cached = len(BUNDLED_TRIPLES) * (BUNDLED_OPS + 1)
        check(" 0 compiler runs" in p.stderr and "(%d cached stencils)" % cached in p.stderr,
              "%s: an unchanged rebuild compiled or read objects:\n%s", name, p.stderr[-2000:])
    env = {"CPATH": os.path.join(ctx.tmp, "elsewhere"), "SOURCE_DATE_EPOCH": "12345"}
    p = ctx.generator("build", "--manifest", manifest_of(proj), "--outdir",
                      os.path.join(proj, "out-env"), "--target", TRIPLE, env=env,
                      timeout=TIMEOUT)
    check(p.returncode == 0 and counts(p)[1] == BUNDLED_OPS,
          "another CPATH did not rebuild every op:\n%s\n%s", p.stdout, p.stderr[-2000:])


# --- the environment ----------------------------------------------------------

ENV_PRELUDE = """#if __has_include(<envprobe.h>)
#include <envprobe.h>
#else
#define ENVPROBE 1
#endif
#ifndef ENV_BIAS
#define ENV_BIAS 2
#endif
#ifdef __ENVIRONMENT_MAC_OS_X_VERSION_MIN_REQUIRED__
#define MINVER __ENVIRONMENT_MAC_OS_X_VERSION_MIN_REQUIRED__
#else
#define MINVER 0
#endif"""
ENV_TERM = "ENVPROBE * 3 + ENV_BIAS * 5 + __TIME__[7] * 7 + MINVER"


def env_case(ctx, name, triple, before_env, after_env):
    """Build under `before_env`, rebuild under `after_env`: the header must be
    a clean build's under `after_env`. SOURCE_DATE_EPOCH is 0 unless given
    (__TIME__ is part of the code)."""
    before_env = dict({"SOURCE_DATE_EPOCH": "0"}, **(before_env or {}))
    after_env = dict({"SOURCE_DATE_EPOCH": "0"}, **(after_env or {}))
    proj = ctx.bundled_copy("proj-" + name)
    out = os.path.join(proj, "out")
    use_in_add(proj, ENV_PRELUDE, ENV_TERM)
    build(ctx, proj, out, triple, env=before_env)
    before = read(header_path(out, triple))
    rebuilt_equals_clean(ctx, proj, out, before, "%s changed" % name, triple, env=after_env)


def probe_dir(ctx, name, value):
    d = os.path.join(ctx.tmp, name)
    os.makedirs(d, exist_ok=True)
    write(os.path.join(d, "envprobe.h"), "#define ENVPROBE %d\n" % value)
    return d


def test_include_path_variables_are_keyed(ctx):
    """CPATH and C_INCLUDE_PATH add include directories: an envprobe.h there
    makes __has_include true."""
    with_probe = probe_dir(ctx, "cpath", 40)
    for var in ("CPATH", "C_INCLUDE_PATH"):
        env_case(ctx, var, TRIPLE, None, {var: with_probe})


def test_override_options_and_source_date_epoch_are_keyed(ctx):
    """CCC_OVERRIDE_OPTIONS edits the command (a -D here), SOURCE_DATE_EPOCH
    sets __TIME__."""
    env_case(ctx, "CCC_OVERRIDE_OPTIONS", TRIPLE, None,
             {"CCC_OVERRIDE_OPTIONS": "+-DENV_BIAS=300"})
    env_case(ctx, "SOURCE_DATE_EPOCH", TRIPLE, {"SOURCE_DATE_EPOCH": "0"},
             {"SOURCE_DATE_EPOCH": "59"})


def test_darwin_variables_are_keyed(ctx):
    """MACOSX_DEPLOYMENT_TARGET and SDKROOT are keyed for Darwin targets:
    changing either compiles that target's ops again. (Neither can change the
    bundled stencils' code: the generator pins -mmacosx-version-min=11.0 and
    -nostdlibinc for Darwin; the key covers them all the same, as it does
    every variable clang reads for the target.) Other targets' entries stay
    hits."""
    proj = ctx.bundled_copy()
    out = os.path.join(proj, "out")
    use_in_add(proj, ENV_PRELUDE, ENV_TERM)
    sdk = os.path.join(ctx.tmp, "sdk")
    os.makedirs(os.path.join(sdk, "usr", "include"))
    base = {"SOURCE_DATE_EPOCH": "0"}
    for triple in (DARWIN, TRIPLE):
        build(ctx, proj, out, triple, env=base)
    for env in ({"MACOSX_DEPLOYMENT_TARGET": "10.13"}, {"SDKROOT": sdk}):
        env = dict(base, **env)
        p = build(ctx, proj, out, DARWIN, env=env)
        check(counts(p, DARWIN)[1] == BUNDLED_OPS, "%s did not compile %s again:\n%s", env,
              DARWIN, p.stdout)
        check(read(header_path(out, DARWIN)) == clean_build(ctx, proj, DARWIN, env=env),
              "%s: the header differs from a clean build's", env)
        p = build(ctx, proj, out, TRIPLE, env=env)
        check(counts(p)[2] == BUNDLED_OPS, "%s recompiled %s, which does not read it:\n%s", env,
              TRIPLE, p.stdout)


def test_mingw_finds_its_sysroot_on_path(ctx):
    """For a MinGW target, clang takes its sysroot from the
    x86_64-w64-mingw32-gcc that PATH finds: another one on PATH brings
    another include directory."""
    root = os.path.join(ctx.tmp, "mingw")
    gcc = os.path.join(root, "bin", "x86_64-w64-mingw32-gcc")
    os.makedirs(os.path.dirname(gcc))
    write(gcc, "#!/bin/sh\nexit 1\n")
    os.chmod(gcc, os.stat(gcc).st_mode | stat.S_IXUSR)
    inc = os.path.join(root, "x86_64-w64-mingw32", "include")
    os.makedirs(inc)
    write(os.path.join(inc, "envprobe.h"), "#define ENVPROBE 60\n")
    env_case(ctx, "PATH", MINGW, None,
             {"PATH": os.path.dirname(gcc) + os.pathsep + os.environ.get("PATH", "")})


def test_mingw_keeps_its_stencils_when_path_finds_the_same_gcc(ctx):
    """PATH is keyed for a MinGW target as the gcc it finds, not as its text:
    a directory without one put first (as perf and pyenv do), or an empty
    entry, keeps every MinGW stencil; the header is a clean build's."""
    proj = ctx.bundled_copy()
    out = os.path.join(proj, "out")
    build(ctx, proj, out, MINGW)
    tools = os.path.join(ctx.tmp, "tools-bin")
    os.makedirs(tools, exist_ok=True)
    write(os.path.join(tools, "x86_64-w64-mingw32-gcc.txt"), "not a program\n")
    path = tools + os.pathsep + os.pathsep + os.environ.get("PATH", "")
    p = build(ctx, proj, out, MINGW, env={"PATH": path})
    check(counts(p, MINGW)[2] == BUNDLED_OPS, "another PATH finding the same gcc compiled "
          "MinGW ops again:\n%s", p.stdout)
    check(read(header_path(out, MINGW)) == clean_build(ctx, proj, MINGW, env={"PATH": path}),
          "the header differs from a clean build's")


def test_an_edited_launcher_is_a_new_compiler(ctx):
    """A `--launcher` script edited to add a flag that changes the code (every operand a 32-bit
    immediate): the next build recompiles, and its header is a clean build's through the same
    launcher, not the stale one (launchers were keyed by name only). Found on PATH by name, as it
    runs."""
    proj = ctx.bundled_copy()
    bindir = os.path.join(ctx.tmp, "bin")
    os.makedirs(bindir)
    launcher = os.path.join(bindir, "wrap")
    write(launcher, '#!/bin/sh\nexec "$@"\n')
    os.chmod(launcher, 0o755)
    env = {"PATH": bindir + os.pathsep + os.environ.get("PATH", "")}
    out = os.path.join(ctx.tmp, "out")
    before = counts(build(ctx, proj, out, TRIPLE, "--launcher", "wrap", env=env))
    plain = read(header_path(out, TRIPLE))
    write(launcher, '#!/bin/sh\nexec "$@" -DTINYVM_OPERANDS32\n')
    after = counts(build(ctx, proj, out, TRIPLE, "--launcher", "wrap", env=env))
    clean = os.path.join(ctx.tmp, "clean")
    build(ctx, proj, clean, TRIPLE, "--launcher", "wrap", env=env)
    check(read(header_path(clean, TRIPLE)) != plain, "the flag the launcher adds changes nothing")
    check(after[1] == before[1] and read(header_path(out, TRIPLE)) ==
          read(header_path(clean, TRIPLE)),
          "after the launcher's edit: %d of %d recompiled, header %s a clean build's", after[1],
          before[1], "equal to" if read(header_path(out, TRIPLE)) ==
          read(header_path(clean, TRIPLE)) else "not")
