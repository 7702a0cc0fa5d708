"""templates/stencilgen.mk, the GNU make recipe (docs/build.md, "GNU make"),
as `meson install` installs it: a VM's Makefile includes it, builds, an op is
edited and rebuilt (the generator, the one object that includes the header and
the link run; the other object does not), then rebuilt with nothing changed
(nothing runs). The negative control empties the depfile the recipe reads
(`-include jit_stencils.d`), and the same check then fails."""
import os
import re

from engines import edit_op, install, vm_project
from sgtest import check, read, write

ASAN = False

MAKEFILE = """STENCILGEN_MANIFEST := stencils.yaml
STENCILGEN_TRIPLES := x86_64-unknown-linux-gnu
include %(mk)s

CFLAGS += -std=c11 -I$(STENCILGEN_OUTDIR) -I%(include)s
myjit: main.o other.o
\t$(CC) -o $@ $^ -L%(lib)s -lstencilrt
main.o: main.c $(STENCILGEN_HEADERS)
other.o: other.c
"""


def what_ran(out):
    """What make's echoed commands ran: (generator, objects compiled, linked)."""
    return ("stencilgen build" in out, sorted(re.findall(r"-o (\w+\.o)\b", out)),
            bool(re.search(r"-o myjit ", out)))


def edit_problems(ctx, proj, env, after_build=None):
    """Build, edit an op, rebuild, rebuild again: what went wrong (empty when
    the generator and only what includes its header re-ran). after_build(proj)
    runs after the first build (the negative control empties the depfile)."""
    make = ["make", "-C", proj, "--no-print-directory"]
    out = ctx.run(make, env=env, check=True, timeout=300).stdout
    check(what_ran(out) == (True, ["main.o", "other.o"], True), "the first build ran %s:\n%s",
          what_ran(out), out)
    p = ctx.run([os.path.join(proj, "myjit")], env=env, check=True)
    check(p.stdout.strip() == "42", "the JIT printed %r", p.stdout)
    check(os.path.exists(os.path.join(proj, "jit", "jit_stencils.d")), "no depfile was written")
    if after_build:
        after_build(proj)
    header = os.path.join(proj, "jit", "jit_stencils-x86_64-unknown-linux-gnu.h")
    before = read(header)
    edit_op(proj)
    out = ctx.run(make, env=env, check=True, timeout=300).stdout
    problems = []
    if what_ran(out) != (True, ["main.o"], True):
        problems.append("after an op's edit make ran (generator, compiled, linked) = %s, not "
                        "(True, ['main.o'], True):\n%s" % (what_ran(out), out))
    elif read(header) == before:
        problems.append("the generator re-ran but the header did not change")
    out = ctx.run(make, env=env, check=True, timeout=300).stdout
    if what_ran(out) != (False, [], False):
        problems.append("a build with nothing changed ran %s:\n%s" % (what_ran(out), out))
    return problems


def test_make_recipe(ctx):
    prefix, env = install(ctx)
    mk = os.path.join(prefix, "share", "stencilgen", "stencilgen.mk")
    check(os.path.exists(mk), "meson install did not install share/stencilgen/stencilgen.mk")
    check(read(mk) == read(ctx.path("templates", "stencilgen.mk")),
          "the installed stencilgen.mk is not templates/stencilgen.mk")
    text = MAKEFILE % {"mk": mk, "include": os.path.join(prefix, "include"),
                       "lib": env["LD_LIBRARY_PATH"]}
    proj = vm_project(ctx, "myjit")
    write(os.path.join(proj, "Makefile"), text)
    problems = edit_problems(ctx, proj, env)
    check(not problems, "\n".join(problems))

    # Negative control: the depfile lists nothing.
    def empty_depfile(p):
        write(os.path.join(p, "jit", "jit_stencils.d"), "")
    control = vm_project(ctx, "control")
    write(os.path.join(control, "Makefile"), text)
    problems = edit_problems(ctx, control, env, after_build=empty_depfile)
    check(problems and "after an op's edit" in problems[0],
          "with an empty depfile the edit check still passed: it cannot catch a depfile that "
          "lists nothing (%s)", problems)
