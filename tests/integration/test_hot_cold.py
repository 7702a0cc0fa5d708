"""Hot and cold parts (docs/design.md, "Hot and cold parts"): stencilgen finds
the cold part of each op's code (paths that never reach a hot exit, blocks
marked STENCIL_COLD(), COLD_EXIT()s) and `dump` shows it; --no-hot-cold turns
it off. The guard-heavy corpus (tests/bench/guard_corpus.py) has most of its
code cold."""
import os
import re
import sys

from sgtest import (A64_CC, A64_QEMU, TRIPLE, a64_cross_build, a64_missing, check, for_targets,
                    write)

TARGETS = ("x86_64-unknown-linux-gnu", "aarch64-unknown-linux-gnu")
OP_LINE = re.compile(r"^op (\w+) \(\S+\) - \S+, (\d+) bytes$")
HOT_LINE = re.compile(r"^  hot \+0x0\.\.\+0x([0-9a-f]+) \((\d+) bytes(?:; its (\d+)-byte jump to "
                      r"the continuation removed)?\)(?:, cold \+0x([0-9a-f]+)\.\."
                      r"\+0x([0-9a-f]+) \((\d+) bytes(; kept in place: .*)?\)|, no cold part)$")
INSN = re.compile(r"^  ([0-9a-f]{4}): ")
HOLE = re.compile(r"^        \^ hole \+0x([0-9a-f]+): .*\((\S+) (\S+)\)$")


def parse_dump(text):
    """{op: {"size", "hot", "split", "holes": [(offset, symbol)]}}; "hot" is None when
    the dump has no hot/cold line."""
    ops, cur = {}, None
    for line in text.splitlines():
        m = OP_LINE.match(line)
        if m:
            cur = ops[m.group(1)] = {"size": int(m.group(2)), "hot": None, "holes": []}
            continue
        if cur is None:
            continue
        m = HOT_LINE.match(line)
        if m:
            cur["hot"] = int(m.group(2))
            cur["split"] = m.group(4) is not None and m.group(7) is None
            check(m.group(4) is None or int(m.group(4), 16) == cur["hot"],
                  "cold part does not start where the hot part ends: %r", line)
            continue
        m = HOLE.match(line)
        if m:
            cur["holes"].append((int(m.group(1), 16), m.group(3)))
        if line.startswith("shim "):
            cur = None
    return ops


def dump(ctx, manifest, triple, *extra):
    return parse_dump(ctx.generator("dump", "--manifest", manifest, "--target", triple, *extra,
                                    check=True, timeout=600).stdout)


def test_hot_cold_trap_path_is_the_cold_part(ctx):
    """tinyvm's div and mod: the trap path (vm_trap never returns) is their cold
    part, and the hot part holds no reference to vm_trap; the other ops have none."""
    manifest = ctx.path("stencils", "stencils.yaml")
    for triple in TARGETS:
        ops = dump(ctx, manifest, triple)
        for name in ("div", "mod"):
            op = ops[name]
            check(op["hot"] is not None and op["hot"] < op["size"],
                  "%s %s: no cold part (%r)", triple, name, op)
            traps = [at for at, sym in op["holes"] if sym == "vm_trap"]
            check(traps and all(at >= op["hot"] for at in traps),
                  "%s %s: vm_trap's holes %r are not all in the cold part +0x%x..",
                  triple, name, traps, op["hot"])
        split = sorted(n for n, op in ops.items() if op["hot"] < op["size"])
        check(split == ["div", "mod"], "%s: ops with a cold part: %r", triple, split)
        print("%s: div %d of %d bytes hot, mod %d of %d" % (
            triple, ops["div"]["hot"], ops["div"]["size"], ops["mod"]["hot"], ops["mod"]["size"]))


def test_hot_cold_off_shows_one_part(ctx):
    """--no-hot-cold: div, which has a cold part, is shown as one."""
    manifest = ctx.path("stencils", "stencils.yaml")
    on = dump(ctx, manifest, TARGETS[0], "--op", "div")["div"]
    check(on["hot"] is not None and on["hot"] < on["size"], "div has no cold part: %r", on)
    off = dump(ctx, manifest, TARGETS[0], "--no-hot-cold", "--op", "div")["div"]
    check(off["hot"] is None, "--no-hot-cold still shows a split: %r", off)


def test_hot_cold_guard_corpus(ctx):
    """Every op of the guard-heavy corpus has a cold part holding all of its
    error calls (noreturn), deallocations (STENCIL_COLD()) and deoptimizing
    exits (COLD_EXIT()), and its hot parts are at most 3/4 of its code as one part
    (--no-hot-cold)."""
    corpus = os.path.join(ctx.tmp, "guards")
    ctx.run([sys.executable, ctx.path("tests", "bench", "guard_corpus.py"), corpus, "--ops", "20"],
            check=True)
    for triple in TARGETS:
        ops = dump(ctx, os.path.join(corpus, "guards.yaml"), triple)
        whole = dump(ctx, os.path.join(corpus, "guards.yaml"), triple, "--no-hot-cold")
        check(len(ops) == 20, "%s: %d ops dumped", triple, len(ops))
        total = hot = 0
        for name, op in sorted(ops.items()):
            check(op["hot"] is not None and op["hot"] < op["size"], "%s %s: no cold part",
                  triple, name)
            cold_refs = [(at, sym) for at, sym in op["holes"]
                         if sym in ("vm_raise", "obj_dealloc", "vm_deopt")]
            check(cold_refs, "%s %s: no error, deallocation or deoptimization", triple, name)
            for at, sym in cold_refs:
                check(at >= op["hot"], "%s %s: %s at +0x%x is in the hot part (..+0x%x)",
                      triple, name, sym, at, op["hot"])
            check(op["split"], "%s %s: its cold part was kept in place", triple, name)
            total += whole[name]["size"]
            hot += op["hot"]
        ratio = hot / total
        print("%s: hot %d of %d bytes (ratio %.2f)" % (triple, hot, total, ratio))
        check(ratio <= 0.75, "%s: hot bytes ratio %.2f > 0.75", triple, ratio)


def test_hot_cold_mark_is_no_value(ctx):
    """_JIT_COLD only marks: an op that takes its address fails, naming it and STENCIL_COLD()."""
    proj = os.path.join(ctx.bundled_copy(), "stencils")
    write(os.path.join(proj, "ops", "control.c"),
          open(os.path.join(proj, "ops", "control.c")).read() +
          "\nextern char _JIT_COLD[];\nOP(coldaddr)\n{\n    tos = (vm_value)(uintptr_t)_JIT_COLD;"
          "\n    CONTINUE();\n}\n")
    # Per-op units: with batched units, `check` exits 0 after an op's verify
    # error (seen on main as well; left to batch.c's owners).
    r = ctx.generator("check", "--manifest", os.path.join(proj, "stencils.yaml"), "--target",
                      TARGETS[0], "--units", "per-op", timeout=600)
    check(r.returncode == 1, "exit %d, want 1: %s", r.returncode, r.stderr)
    check(re.search(r"control\.c:\d+:\d+: .*coldaddr.*refers to '_JIT_COLD', which only "
                    r"STENCIL_COLD\(\) may name", r.stderr, re.S),
          "no clear message: %s", r.stderr)



COLD_HOLE_OPS = """
/* Traps unless tos is operand 0; the trap, cold, passes operand 1 as its message. */
OP(guard_tos)
{
    if (__builtin_expect(tos != OPERAND0, 0))
        vm_trap(frame, (const char *)(uintptr_t)OPERAND1);
    CONTINUE();
}

/* Jumps when tos is 0, from a block marked cold. */
OP(cold_branch)
{
    if (__builtin_expect(tos == 0, 0)) {
        STENCIL_COLD();
        JUMP();
    }
    CONTINUE();
}
"""


class Native:
    """The host's own compiler, runtime and CPU."""
    name, triple = "x86_64", TRIPLE

    @staticmethod
    def program(ctx, *args):
        return ["gcc"] + list(args) + [os.path.join(ctx.build, "runtime", "libstencilrt.a")]

    @staticmethod
    def run(ctx, exe):
        return ctx.run([exe], timeout=60)


class Qemu64:
    """The AArch64 cross compiler and runtime, under qemu-user (PAC and BTI on)."""
    name, triple = "aarch64", TARGETS[1]

    @staticmethod
    def program(ctx, *args):
        lib = os.path.join(a64_cross_build(ctx, "runtime/libstencilrt.a"), "runtime",
                           "libstencilrt.a")
        return [A64_CC] + list(args) + [lib]

    @staticmethod
    def run(ctx, exe):
        return ctx.run(A64_QEMU + [exe], timeout=120)


@for_targets(Native, Qemu64)
def hot_cold_holes_in_cold_parts_are_repatched(ctx, target):
    """sr_patch_operand and sr_patch_jump re-point holes in an op's cold part
    (an operand its trap path passes on, a jump from a block marked
    STENCIL_COLD()), and the patched code runs (tests/patch/cold_repatch.c)."""
    if target.triple not in TARGETS:
        return
    proj = os.path.join(ctx.bundled_copy(), "stencils")
    control = os.path.join(proj, "ops", "control.c")
    write(control, open(control).read() + COLD_HOLE_OPS)
    out = os.path.join(ctx.tmp, "out")
    ctx.build_stencils(os.path.join(proj, "stencils.yaml"), out, "--target", target.triple,
                       timeout=600)
    for name, value in (("guard_tos", "_JIT_OPERAND1"), ("cold_branch", "_JIT_JUMP_TARGET")):
        op = dump(ctx, os.path.join(proj, "stencils.yaml"), target.triple, "--op", name)[name]
        check(op["hot"] is not None and op["hot"] < op["size"] and
              any(at >= op["hot"] and sym == value for at, sym in op["holes"]),
              "%s: no %s hole in a cold part: %r", name, value, op)
    exe = os.path.join(ctx.tmp, "cold_repatch")
    ctx.run(target.program(ctx, "-std=c11", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-I", out,
                           "-I", ctx.path("runtime"), "-I", proj,
                           ctx.path("tests", "patch", "cold_repatch.c"), "-o", exe) +
            ["-lpthread"], timeout=120, check=True)
    r = target.run(ctx, exe)
    check(r.returncode == 0 and "FAIL" not in r.stdout, "cold_repatch exited %d:\n%s%s",
          r.returncode, r.stdout, r.stderr[-2000:])
    print("\n".join("     " + line for line in r.stdout.splitlines()))


if a64_missing():
    sys.stderr.write("test_hot_cold: the AArch64 cross toolchain is missing (%s): "
                     "its cold re-patch test is not collected\n" % ", ".join(a64_missing()))
    del test_hot_cold_holes_in_cold_parts_are_repatched_aarch64


def test_hot_cold_layout_is_cached_with_its_setting(ctx):
    """Stencils are cached with their parts laid out, so a run that compiles
    nothing loads no disassembler (test_stencil_cache's no-op test); each
    setting has its own cache entries. Builds alternating the setting in one
    output directory equal clean builds of each, and once both were built,
    each compiles nothing and uses every cached stencil."""
    import glob
    from sgtest import read
    manifest = ctx.path("tests", "golden", "golden.yaml")

    def headers(out):
        return {os.path.basename(p): read(p, "rb")
                for p in glob.glob(os.path.join(out, "jit_stencils*.h"))}

    clean = {}
    for setting in ((), ("--no-hot-cold",)):
        out = os.path.join(ctx.tmp, "clean%d" % len(setting))
        ctx.build_stencils(manifest, out, "--target", TARGETS[0], *setting, timeout=300)
        clean[setting] = headers(out)
    check(clean[()] != clean[("--no-hot-cold",)], "the setting changed no header")
    shared = os.path.join(ctx.tmp, "shared")
    for n, setting in enumerate(((), ("--no-hot-cold",), (), ("--no-hot-cold",))):
        p = ctx.build_stencils(manifest, shared, "--target", TARGETS[0], "-v", *setting,
                               timeout=300)
        check(headers(shared) == clean[setting], "after building %s: headers differ from a "
              "clean build", setting or "split")
        check(n < 2 or (" 0 compiler runs" in p.stderr and
                        "cached stencil not used" not in p.stderr),
              "build %d (%s) compiled or left cached stencils: %s", n + 1, setting or "split",
              p.stderr[-1500:])
