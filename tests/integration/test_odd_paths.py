"""Checkouts at paths with characters that need escaping somewhere: in the
#line directive of every op's unit (a C string), in the compiler's dependency
files (make syntax: space, '#', '$'), in --depfile as ninja reads it back.

  space, '#', '$'           build, full cache hits, a depfile ninja reads back
                            exactly (a real ninja run: an edited header rebuilds)
  "'", tab                  build, full cache hits; ninja cannot read such a
                            path in a depfile, so stencilgen warns and ninja
                            re-runs it every time
  backslash                 build (clang's dependency files turn it into '/',
                            so those compiles are not cached)
  '"', line break           exit 2 naming the template: clang's -include
                            writes the path into an #include line unescaped
                            (a '"' elsewhere, e.g. in an op file's path, builds;
                            a line break in --depfile is exit 2 too)

Every header equals the one a plain checkout gives (headers carry no paths)."""
import os
import re
import shlex
import shutil

from sgtest import TRIPLE, check, read, write

ASAN = True

TIMEOUT = 240
HEADER = "jit_stencils-%s.h" % TRIPLE


def checkout_at(ctx, name):
    base = os.path.join(ctx.tmp, name)
    os.makedirs(base)
    for d in ("stencils", "templates"):
        shutil.copytree(ctx.path(d), os.path.join(base, d), symlinks=True)
    return base


def build(ctx, base, out, *extra):
    return ctx.generator("build", "--manifest", os.path.join(base, "stencils", "stencils.yaml"),
                         "--outdir", out, "--target", TRIPLE, *extra, timeout=TIMEOUT)


def ok(p, what):
    check(p.returncode == 0, "%s: exit %d\n%s", what, p.returncode, p.stderr[-4000:])
    check("Sanitizer" not in p.stderr, "%s: sanitizer report\n%s", what, p.stderr[-4000:])


def compiled(p):
    m = re.search(r"\((\d+) compiled, (\d+) cached\)", p.stdout)
    check(m, "no summary: %s", p.stdout)
    return int(m.group(1))


def plain_header(ctx):
    out = os.path.join(ctx.tmp, "plain-out")
    ok(build(ctx, checkout_at(ctx, "plain"), out), "plain checkout")
    return read(os.path.join(out, HEADER))


def test_space_hash_dollar_round_trip_through_ninja(ctx):
    base = checkout_at(ctx, "a b#c$d")
    out = os.path.join(base, "out")
    dep = os.path.join(base, "out", "stencils.d")
    p = build(ctx, base, out, "--depfile", dep)
    ok(p, "first build")
    check(read(os.path.join(out, HEADER)) == plain_header(ctx), "header differs from a plain "
          "checkout's")
    p = build(ctx, base, out, "--depfile", dep)
    ok(p, "second build")
    check(compiled(p) == 0, "nothing should recompile: %s", p.stdout)
    # ninja reads the depfile back: every dependency it recorded exists, and
    # editing a header the ops include makes it run stencilgen again.
    work = os.path.join(ctx.tmp, "ninja")
    os.makedirs(work)
    command = " ".join(shlex.quote(a) for a in [
        ctx.stencilgen, "build", "--manifest", os.path.join(base, "stencils", "stencils.yaml"),
        "--outdir", out, "--target", TRIPLE, "--depfile", dep])
    target = os.path.join(out, "jit_stencils.h")
    write(os.path.join(work, "build.ninja"),
          "rule gen\n  command = %s\n  depfile = %s\n  deps = gcc\nbuild %s: gen\n" % (
              command.replace("$", "$$"), dep.replace("$", "$$"),
              target.replace("$", "$$").replace(" ", "$ ").replace(":", "$:")))
    ninja = lambda *a: ctx.run(["ninja", "-C", work] + list(a), timeout=TIMEOUT)
    p = ninja()
    check(p.returncode == 0, "ninja failed:\n%s%s", p.stdout, p.stderr)
    deps = ninja("-t", "deps").stdout.splitlines()[1:]
    deps = [d.strip() for d in deps if d.strip()]
    missing = [d for d in deps if not os.path.exists(d)]
    check(deps and not missing, "ninja recorded dependencies that do not exist: %s", missing[:5])
    check(os.path.join(base, "stencils", "tinyvm.h") in deps, "ninja lacks tinyvm.h: %s",
          deps[:10])
    check("no work to do" in ninja().stdout, "ninja is not up to date after a build")
    write(os.path.join(base, "stencils", "tinyvm.h"),
          read(os.path.join(base, "stencils", "tinyvm.h")) + "\n/* edited */\n")
    p = ninja()
    check("stencilgen" in p.stdout or "[1/1]" in p.stdout,
          "editing tinyvm.h did not make ninja re-run stencilgen:\n%s", p.stdout)


def test_apostrophe_and_tab_build_and_cache_with_a_warning(ctx):
    base = checkout_at(ctx, "it's\ttabbed")
    out = os.path.join(base, "out")
    dep = os.path.join(ctx.tmp, "quotes.d")
    p = build(ctx, base, out, "--depfile", dep)
    ok(p, "first build")
    check("ninja will re-run stencilgen on every build" in p.stderr, "no warning:\n%s", p.stderr)
    check(read(os.path.join(out, HEADER)) == plain_header(ctx), "header differs")
    p = build(ctx, base, out, "--depfile", dep)
    ok(p, "second build")
    check(compiled(p) == 0, "nothing should recompile: %s", p.stdout)


def test_double_quote_builds_except_in_the_template_path(ctx):
    """A '"' in an op file's directory builds (the #line string is escaped);
    in the template's path it is exit 2 at the manifest's template entry."""
    base = checkout_at(ctx, "plain-with-quoted-ops")
    quoted = os.path.join(base, "stencils", 'op"s')
    os.rename(os.path.join(base, "stencils", "ops"), quoted)
    manifest = os.path.join(base, "stencils", "stencils.yaml")
    write(manifest, read(manifest).replace("  - ops/", '  - op"s/'))
    out = os.path.join(base, "out")
    ok(build(ctx, base, out), "op files under a quoted directory")
    check(read(os.path.join(out, HEADER)).replace('op"s/', "ops/") == plain_header(ctx),
          "header differs (beyond the op files' directory in the listings)")
    base = checkout_at(ctx, 'q"uote')
    p = build(ctx, base, os.path.join(base, "out"))
    check(p.returncode == 2 and "stencils.yaml:" in p.stderr and
          "clang's -include cannot take" in p.stderr,
          "expected exit 2 naming the template: %d\n%s", p.returncode, p.stderr[-3000:])


def test_backslash_builds(ctx):
    base = checkout_at(ctx, "back\\slash")
    out = os.path.join(base, "out")
    ok(build(ctx, base, out), "build")
    check(read(os.path.join(out, HEADER)) == plain_header(ctx), "header differs")


def test_line_break_in_the_template_path_is_refused(ctx):
    base = checkout_at(ctx, "line\nbreak")
    p = build(ctx, base, os.path.join(base, "out"))
    check(p.returncode == 2 and "clang's -include cannot take" in p.stderr,
          "expected exit 2: %d\n%s", p.returncode, p.stderr[-3000:])


def test_line_break_cannot_be_in_a_depfile(ctx):
    """Op files under a directory with a line break build; --depfile cannot
    name them: exit 2, nothing written."""
    base = checkout_at(ctx, "plain-with-broken-ops")
    os.rename(os.path.join(base, "stencils", "ops"), os.path.join(base, "stencils", "o\nps"))
    manifest = os.path.join(base, "stencils", "stencils.yaml")
    write(manifest, re.sub(r"^  - ops/(\w+\.c)$", r'  - "o\\nps/\1"', read(manifest), flags=re.M))
    out = os.path.join(base, "out")
    ok(build(ctx, base, out), "build")
    # The paths a compile looked for and did not find are listed one a line: with a line
    # break in one, the list is not made, and these ops' records name none.
    no_absent = lambda text: re.sub(r" absent \d+", "", re.sub(r" \* sg-absent [^\n]*\n", "", text))
    check(no_absent(read(os.path.join(out, HEADER)).replace("o\\nps/", "ops/")) ==
          no_absent(plain_header(ctx)),
          "header differs (beyond the op files' directory in the listings)")
    before = {f: read(os.path.join(out, f), "rb") for f in os.listdir(out) if f.endswith(".h")}
    p = build(ctx, base, out, "--depfile", os.path.join(ctx.tmp, "x.d"))
    check(p.returncode == 2 and "a depfile cannot hold a path with a line break" in p.stderr,
          "expected exit 2 for --depfile: %d\n%s", p.returncode, p.stderr[-3000:])
    after = {f: read(os.path.join(out, f), "rb") for f in os.listdir(out) if f.endswith(".h")}
    check(after == before and not os.path.exists(os.path.join(ctx.tmp, "x.d")),
          "outputs changed or a depfile was written")
