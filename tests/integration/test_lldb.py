"""LLDB through JIT frames (docs/runtime.md, "GDB and LLDB"): lldb-22 reads the runtime's
GDB-JIT-interface objects once `plugin.jit-loader.gdb.enable` is on. Its Python
API drives tinyvm: tests/lldb/stepcheck.py single-steps every instruction of
the shim and of every executor of tests/gdb/step.tvm, re-entry and helpers
included, and checks at each PC that frame 0 is the instruction holding it (by
the runtime's own records, read from memory) and that the chain reaches main
with every frame named; the same through a cold part (div0.tvm's division by
zero runs div's trap path, laid out after every hot part); and a breakpoint on
a stencil's symbol, set before the code exists, stops at that instruction. The control runs with STENCILRT_GDB=0:
LLDB then has nothing to name JIT code with, and must fail."""
import json
import os

import sgtest
from sgtest import TRIPLE, TestFailure, check, shim_facts

ASAN = False  # LLDB drives the plain build's tinyvm

T = 240


def stepcheck(ctx, tag, env=None, **extra):
    header = os.path.join(ctx.build, "stencils", "cached", "jit_stencils-%s.h" % TRIPLE)
    cfg = shim_facts(header)
    with open(header) as f:
        cold = sgtest.cold_sizes(f.read()) or {}
    cfg["cold_sizes"] = [cold[op] for op in sgtest.Header(header).ops] if cold else []
    result = os.path.join(ctx.tmp, tag + ".json")
    cfg.update({"program": os.path.join(ctx.build, "stencils", "tinyvm"),
                "args": [ctx.path("tests", "gdb", "step.tvm")], "result": result,
                "max_steps": 20000, "time_limit": 120, "breakpoint": None})
    cfg.update(extra)
    path = os.path.join(ctx.tmp, tag + "-config.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    full = {"LLDBTEST_CONFIG": path, "STENCILRT_PERF": "off"}
    full.update(env or {})
    p = ctx.run(["lldb-22", "-b", "-o", "command script import " +
                 ctx.path("tests", "lldb", "stepcheck.py")], timeout=T, env=full)
    if not os.path.exists(result):
        raise TestFailure("%s: LLDB wrote no result (exit %d)\n%s%s" % (
            tag, p.returncode, p.stdout[-3000:], p.stderr[-3000:]))
    with open(result) as f:
        res = json.load(f)
    check(not res.get("error"), "%s: %s", tag, res.get("error"))
    return res


def test_lldb_single_step(ctx):
    res = stepcheck(ctx, "step")
    check(res["exit_code"] == 0, "tinyvm exited %s under LLDB", res["exit_code"])
    check(res["nfailures"] == 0, "%d of %d PCs failed, first: %s", res["nfailures"],
          res["checked"], "\n".join(res["failures"]))
    missed = {fn: sorted(set(range(n)) - set(res["visited"][fn]))
              for fn, n in res["instructions"].items()}
    check(not any(missed.values()), "instructions never visited: %s", missed)
    check(res["checked_shim"] > 0 and len(res["shim_visited"]) >= 10,
          "the shim was hardly stepped: %s", res["shim_visited"])
    print("     %d PCs checked (%d in the shim), every instruction of %s visited" % (
        res["checked"], res["checked_shim"], ", ".join(sorted(res["instructions"]))))


def test_lldb_single_step_through_a_cold_path(ctx):
    """div0.tvm's div runs its cold trap path: LLDB names every PC of it as the
    instruction (the cold part's own symbol) and the chain reaches main."""
    res = stepcheck(ctx, "cold", args=[ctx.path("stencils", "programs", "div0.tvm")])
    check(res["exit_code"] == 3, "div0.tvm exited %s under LLDB, want 3 (the trap)",
          res["exit_code"])
    check(res["nfailures"] == 0, "%d of %d PCs failed, first: %s", res["nfailures"],
          res["checked"], "\n".join(res["failures"]))
    check(res["checked_cold"] > 0 and res["cold_visited"].get("main"),
          "no PC of a cold part was stepped (%d PCs checked)", res["checked"])
    print("     %d PCs checked, %d of them in a cold part (instructions %s of main)" % (
        res["checked"], res["checked_cold"], sorted(set(res["cold_visited"]["main"]))))


def stencil_name(ctx, suffix):
    """The name of step.tvm's instruction `suffix` ("@helpers[4]"), with the
    variant tinyvm's JIT chose for it (tinyvm --list)."""
    p = ctx.run([os.path.join(ctx.build, "stencils", "tinyvm"), "--list",
                 ctx.path("tests", "gdb", "step.tvm")], timeout=60)
    names = [n for n in p.stderr.split() if n.endswith(suffix)]
    check(len(names) == 1, "tinyvm --list names %s for %s:\n%s", names, suffix, p.stderr[-2000:])
    return names[0]


def test_lldb_breakpoint_on_a_stencil(ctx):
    name = stencil_name(ctx, "@helpers[4]")  # tos_native[in=...]@helpers[4]
    res = stepcheck(ctx, "break", breakpoint=name)
    hits = res["breakpoint_hits"]
    check(len(hits) == 1 and hits[0]["name"] == name and
          hits[0]["pc"] == res.get("want_pc") and hits[0]["chain"] is None,
          "breakpoint on %s: hits %s, its instruction at %s", name, hits, res.get("want_pc"))


def test_lldb_control_without_gdb_objects(ctx):
    res = stepcheck(ctx, "control", env={"STENCILRT_GDB": "0"})
    check(res["nfailures"] > 0, "with STENCILRT_GDB=0 every PC still passed (%d checked)",
          res["checked"])
