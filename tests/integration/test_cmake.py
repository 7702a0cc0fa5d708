"""The CMake package `meson install` writes (docs/build.md, "CMake"):
find_package(stencilgen CONFIG), stencilgen_add_stencils and
stencilgen::stencilrt, with cmake's Ninja and Unix Makefiles generators. A VM
project is configured and built; an op edited, rebuilt (the generator, the one
source that includes the header and the link run, the other source does not);
rebuilt with nothing changed (nothing runs). The negative control empties the
depfile the generator writes, and the same check then fails."""
import os
import re
import stat

from engines import edit_op, install, vm_project
from sgtest import check, read, write

ASAN = False  # the sanitized generator adds nothing to what the build tools see

CMAKELISTS = """cmake_minimum_required(VERSION 3.20)
project(myjit C)
find_package(stencilgen 0.3 CONFIG REQUIRED)
add_executable(myjit main.c other.c)
stencilgen_add_stencils(myjit MANIFEST stencils.yaml TRIPLES x86_64-unknown-linux-gnu)
target_link_libraries(myjit PRIVATE stencilgen::stencilrt)
"""
GENERATOR_RAN = "stencilgen: stencils of myjit"

# A stencilgen whose depfile names no input but the manifest (which the
# rule depends on anyway; a depfile naming nothing at all makes ninja re-run
# the rule every time): the negative control's generator.
EMPTY_DEPFILE = """#!/bin/sh
"%s" "$@" || exit $?
while [ $# -gt 0 ]; do
    case "$1" in
    --manifest) manifest=$2 ;;
    --depfile) depfile=$2 ;;
    esac
    shift
done
target=$(sed -n '1s/:.*//p' "$depfile")
printf '%%s: %%s\\n' "$target" "$manifest" > "$depfile"
"""


def what_ran(out):
    """What a build's output says it ran: (generator ran, sources compiled, linked)."""
    compiled = sorted(set(re.findall(r"Building C object \S*?(\w+\.c)\.o", out)))
    return GENERATOR_RAN in out, compiled, "Linking C executable" in out


def edit_problems(ctx, generator, proj, env, stencilgen=None):
    """Configure, build, edit an op, rebuild, rebuild again: what went wrong
    (empty when the generator and only what includes its header re-ran)."""
    b = os.path.join(proj, "b-" + generator.split()[0].lower())
    cfg = ["cmake", "-S", proj, "-B", b, "-G", generator, "-DCMAKE_PREFIX_PATH=" + env["prefix"]]
    if stencilgen:
        cfg.append("-DSTENCILGEN_EXECUTABLE=" + stencilgen)
    ctx.run(cfg, env=env, check=True, timeout=120)
    out = ctx.run(["cmake", "--build", b], env=env, check=True, timeout=300).stdout
    check(what_ran(out) == (True, ["main.c", "other.c"], True),
          "%s: the first build ran %s:\n%s", generator, what_ran(out), out)
    p = ctx.run([os.path.join(b, "myjit")], env=env, check=True)
    check(p.stdout.strip() == "42", "%s: the JIT printed %r", generator, p.stdout)
    header = os.path.join(b, "stencilgen", "myjit", "jit_stencils-x86_64-unknown-linux-gnu.h")
    before = read(header)
    edit_op(proj)
    out = ctx.run(["cmake", "--build", b], env=env, check=True, timeout=300).stdout
    problems = []
    if what_ran(out) != (True, ["main.c"], True):
        problems.append("after an op's edit the build ran (generator, compiled, linked) = %s, "
                        "not (True, ['main.c'], True):\n%s" % (what_ran(out), out))
    elif read(header) == before:
        problems.append("the generator re-ran but the header did not change")
    out = ctx.run(["cmake", "--build", b], env=env, check=True, timeout=300).stdout
    if what_ran(out) != (False, [], False):
        problems.append("a build with nothing changed ran %s:\n%s" % (what_ran(out), out))
    return problems


def check_generator(ctx, generator):
    prefix, env = install(ctx)
    env["prefix"] = prefix
    for name in ("stencilgenConfig.cmake", "stencilgenConfigVersion.cmake"):
        found = [r for r, _, files in os.walk(prefix) if name in files]
        check(found and found[0].endswith(os.path.join("cmake", "stencilgen")),
              "meson install wrote no %s under lib*/cmake/stencilgen", name)
    proj = vm_project(ctx, "myjit")
    write(os.path.join(proj, "CMakeLists.txt"), CMAKELISTS)
    problems = edit_problems(ctx, generator, proj, env)
    check(not problems, "%s: %s", generator, "\n".join(problems))

    # Negative control: the same flow with a depfile that lists nothing.
    wrapper = os.path.join(ctx.tmp, "stencilgen-empty-depfile")
    write(wrapper, EMPTY_DEPFILE % os.path.join(prefix, "bin", "stencilgen"))
    os.chmod(wrapper, os.stat(wrapper).st_mode | stat.S_IXUSR)
    control = vm_project(ctx, "control")
    write(os.path.join(control, "CMakeLists.txt"), CMAKELISTS)
    problems = edit_problems(ctx, generator, control, env, stencilgen=wrapper)
    check(problems and "after an op's edit" in problems[0],
          "%s: with an empty depfile the edit check still passed: it cannot catch a depfile "
          "that lists nothing (%s)", generator, problems)


def test_cmake_ninja(ctx):
    check_generator(ctx, "Ninja")


def test_cmake_unix_makefiles(ctx):
    check_generator(ctx, "Unix Makefiles")
