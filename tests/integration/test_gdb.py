"""GDB through JIT frames (docs/runtime.md, "GDB and LLDB"; docs/unwind.md): GDB is
driven for real, in batch mode, with its Python API, against tinyvm and a host
that dlopen()s a stripped libstencilrt.so. Programs and GDB scripts: tests/gdb/.

  test_backtrace_at_helpers   `bt` at breakpoints in C helpers called from JIT
                              code (vm_call, vm_print, tinyvm_breakpoint; 4 JIT
                              levels, recursion 7 levels deep, 301 executors in
                              two code arenas) and at a SIGTRAP raised in one:
                              the exact frame list, stencil symbols
                              ("native@inner[1]") and the VM's C frames down to
                              main, no "??", no "Backtrace stopped".
  test_single_step            stepi through every instruction of the shim and of
                              every executor of tests/gdb/step.tvm, deep.tvm,
                              stencils/programs/countdown.tvm and of dlhost (a
                              loop, print/native helper calls, re-entry,
                              recursion); at each PC the backtrace is checked
                              against a shadow stack (tests/gdb/stepcheck.py).
                              The checker is shown to fail on a wrong
                              expectation and on a deliberately wrong CFI.
  test_stripped_shared_library
                              the JIT interface is found in the .dynsym of a
                              stripped copy of libstencilrt.so opened with
                              dlopen() (tests/gdb/dlhost.c); symbols of a freed
                              executor are gone when another takes its memory.
  test_attach_to_running_jit  GDB attached to a process already running JIT code
                              (registered before GDB came) names and unwinds it,
                              at each of a few stepi.
  test_batches                executors emitted by sr_emit_batch (300: two GDB
                              objects, one .text section each), freed one by
                              one and by sr_executor_free_batch, and emitted
                              under sr_gdb_hold (tests/gdb/batchhost.c): at
                              each checkpoint GDB names every instruction of
                              every live, released executor and resolves its
                              name, and knows nothing of freed or held ones;
                              backtraces through them and a breakpoint on an
                              executor's name. Shown to fail with
                              STENCILRT_GDB=0.
  test_gdb_interface_off      STENCILRT_GDB=0: the same stops show "??" where the
                              stencil symbols were (same PCs), and the
                              single-step checker fails at every JIT PC: names
                              and unwinding come from the registration.
                              STENCILRT_FRAMES=0 changes nothing for GDB.

GDB facts this relies on (shared/NOTES.md): reaching main is not enough (a
wrong CFA can reach main through a stale slot), so every frame up to main must
be named and, in the single-step check, the caller's pc and callee-saved
registers must be those saved at the shim's entry. At a `ret` GDB's x86-64
epilogue unwinder ignores the JIT's CFI: those PCs are only required to reach
main through named frames, and are reported apart.

The executor FDE describes every executor PC with the shim's row at its call,
so an executor frame unwinds straight to the shim's caller: the shim has a
frame of its own only while its own code runs. With tinyvm's -O2 build,
vm_call -> vm_run, vm_jit_run -> shim and vm_native -> tinyvm_breakpoint are
sibling calls, so the only C frame between two JIT frames is vm_run.
"""
import json
import os
import re
import shutil
import subprocess
import time

import sgtest
from sgtest import TRIPLE, TestFailure, check, plain_op_name, read, shim_facts

GDB = ["gdb", "-batch", "-nx", "-iex", "set debuginfod enabled off"]
T = 120  # seconds for one GDB run; the slowest (single-step) takes about 1 s here
HERE = os.path.dirname(os.path.abspath(__file__))
GDB_DIR = os.path.join(os.path.dirname(HERE), "gdb")
STEPCHECK = os.path.join(GDB_DIR, "stepcheck.py")
BTSTOPS = os.path.join(GDB_DIR, "btstops.py")
FRAME_LINE = re.compile(r"^#(\d+)\s+(?:0x[0-9a-f]+ in )?(\S+) \(", re.M)
STENCIL_SYMBOL = re.compile(r"\b\w+(?:\[[\w=,]+\])?@\w+\[\d+\]")  # "<op>@<executor>[<index>]"
GLUE = ["vm_run"]  # tinyvm's C frames between a JIT frame and the next one down


# --- helpers ---------------------------------------------------------------

def tinyvm(ctx):
    return os.path.join(ctx.build, "stencils", "tinyvm")


def program(ctx, name):
    """A .tvm program: tests/gdb/NAME, else stencils/programs/NAME."""
    p = os.path.join(GDB_DIR, name)
    return p if os.path.exists(p) else ctx.path("stencils", "programs", name)


def run_gdb(ctx, script, config, args, env=None, tag="gdb"):
    """Run GDB in batch mode with a Python script; return (result JSON, process)."""
    result = os.path.join(ctx.tmp, "%s-result.json" % tag)
    cfg = dict(config, result=result)
    cfg_path = os.path.join(ctx.tmp, "%s-config.json" % tag)
    with open(cfg_path, "w") as f:
        json.dump(cfg, f)
    full_env = {"GDBTEST_CONFIG": cfg_path, "STENCILRT_GDB": "1", "STENCILRT_PERF": "off"}
    full_env.update(env or {})
    if os.path.exists(result):
        os.unlink(result)
    p = ctx.run(GDB + ["-x", script, "--args"] + list(args), env=full_env, timeout=T)
    if not os.path.exists(result):
        raise TestFailure("%s: GDB wrote no result (exit %d)\nstdout:\n%s\nstderr:\n%s" % (
            tag, p.returncode, p.stdout[-3000:], p.stderr[-3000:]))
    res = json.loads(read(result))
    check(res["error"] is None, "%s: %s\nstderr:\n%s", tag, res["error"], p.stderr[-3000:])
    return res, p


def jit_stack(*jit_frames, below="main"):
    """Expected names: each JIT frame followed by the VM's glue frames, then main."""
    out = []
    for name in jit_frames:
        out.append(name)
        out.extend(GLUE)
    out.append(below)
    return out


def names_to_main(frames):
    names = []
    for f in frames:
        names.append(plain_op_name(f["name"]))  # the op, whichever variant ran
        if f["name"] == "main":
            break
    return names


def clean_to_main(frames):
    """True if the walk reaches main through named frames only."""
    for f in frames:
        if f["name"] is None:
            return False
        if f["name"] == "main":
            return True
    return False


def check_stop(tag, stop, want):
    """One stop of btstops.py: the walk and the `bt` text both give exactly want."""
    names = names_to_main(stop["frames"])
    check(names == want, "%s: frames\n  got  %s\n  want %s\nbt:\n%s", tag, names, want, stop["bt"])
    text_names = FRAME_LINE.findall(stop["bt"])
    check([plain_op_name(n) for _, n in text_names] == want,
          "%s: `bt` text frames differ from %s:\n%s",
          tag, want, stop["bt"])
    check([int(i) for i, _ in text_names] == list(range(len(want))), "%s: bt numbering:\n%s",
          tag, stop["bt"])
    for bad in ("??", "Backtrace stopped", "corrupt"):
        check(bad not in stop["bt"], "%s: `bt` prints %r:\n%s", tag, bad, stop["bt"])
    for f in stop["frames"][:len(want)]:
        check(f["reason"] == 0, "%s: frame %s: unwinding stopped: %s\nbt:\n%s", tag, f["name"],
              f["reason_text"], stop["bt"])


def check_stops(tag, res, wants):
    got = [s["function"] for s in res["stops"]]
    check(got == [w[0] for w in wants], "%s: stopped in %s, expected %s", tag, got,
          [w[0] for w in wants])
    for i, (stop, want) in enumerate(zip(res["stops"], wants)):
        check_stop("%s stop %d" % (tag, i + 1), stop, want)
    check(res["exited"] and res["exit_code"] == 0, "%s: program did not exit with 0 (%s)", tag,
          res["exit_code"])


def header_config(ctx, host):
    """What the single-step checker needs from the generated header."""
    # tinyvm's own set (the bundled ops and its cached ones, stencils/cached), or the bundled one
    where = ["stencils", "cached"] if host is TINYVM_HOST else ["stencils"]
    header = os.path.join(ctx.build, *where, "jit_stencils-%s.h" % TRIPLE)
    cfg = shim_facts(header)
    cfg.update({"max_steps": 20000, "time_limit": 90, "max_failures": 10})
    # Per op: the bytes of its cold part, after every hot part (sg_cold_sizes).
    text = read(header)
    cold = sgtest.cold_sizes(text) or {}
    cfg["cold_sizes"] = [cold[op] for op in sgtest.Header(header).ops] if cold else []
    return cfg


# How stepcheck.py reads each program's executors (see its header).
# Instruction addresses are read from memory, never computed by calling into
# the program: GDB 13 cannot call functions on CPUs with AMX state. tinyvm
# links stencilrt statically with debug info, so GDB knows its executor struct;
# the stripped library under dlhost does not, so dlhost keeps a table.
TINYVM_HOST = {"start": "vm_jit_run", "functions": "vm.functions", "nfunctions": "vm.nfunctions",
               "shim": "vm.shim",
               "instr": "((struct sr_executor *){ex})->mem + "
                        "((struct sr_executor *){ex})->offsets[{k}]",
               "end": "((struct sr_executor *){ex})->mem + ((struct sr_executor *){ex})->code_size",
               "glue": GLUE, "glue_outer": GLUE}
DLHOST_HOST = {"start": "run_function", "functions": "dlhost_functions",
               "nfunctions": "dlhost_nfunctions", "shim": "dlhost_shim",
               "instr": "dlhost_instr[{fn}][{k}]", "glue": ["run_function", "vm_call"],
               "glue_outer": ["run_function"]}


def stepcheck(ctx, args, tag, host=TINYVM_HOST, env=None, **extra):
    cfg = header_config(ctx, host)
    cfg.update(extra, host=host)
    if isinstance(args, str):  # a tinyvm program
        args = [tinyvm(ctx), "--jit", program(ctx, args)]
    return run_gdb(ctx, STEPCHECK, cfg, args, env=env, tag=tag)[0]


def check_stepped(tag, r, required, entries):
    """A clean single-step run: no failure, every instruction visited."""
    check(r["exited"] and r["exit_code"] == 0, "%s: did not run to a clean exit (%s)", tag,
          r["exit_code"])
    check(r["nfailures"] == 0, "%s: %d of %d PCs failed; first failures:\n%s", tag,
          r["nfailures"], r["checked"], json.dumps(r["failures"], indent=1))
    check(set(r["executors"]) == required, "%s: executors %s, expected %s", tag,
          sorted(r["executors"]), sorted(required))
    check(r["checked"] == r["steps"] > 0, "%s: %d PCs checked for %d steps", tag, r["checked"],
          r["steps"])
    for name, e in sorted(r["executors"].items()) + [("shim", r["shim"])]:
        check(e["instructions"] > 0 and not e["missing"],
              "%s: %s: %d of %d instructions never reached:\n  %s", tag, name,
              len(e["missing"]), e["instructions"], "\n  ".join(e["missing"]))
    check(r["entries"] == entries, "%s: %d shim entries, expected %d", tag, r["entries"],
          entries)
    rets = r["ret_pcs"]
    check(rets and all(x["frames"][-1] == "main" and None not in x["frames"] for x in rets),
          "%s: ret PCs: %s", tag, rets)
    return ("%s: %d PCs checked (%d executor, %d shim, %d at an executor ret); %s; shim %d/%d "
            "instructions; "
            "%d shim entries; ret PCs giving the exact chain anyway: %d/%d (%.1fs)" % (
                tag, r["checked"], r["checked_executor"], r["checked_shim"], r["checked_ret"],
                ", ".join("%s %d/%d" % (n, e["visited"], e["instructions"])
                          for n, e in r["executors"].items()),
                r["shim"]["visited"], r["shim"]["instructions"], r["entries"],
                sum(x["as_expected"] for x in rets), len(rets), r["elapsed"]))


def stripped_library(ctx):
    """A stripped copy of libstencilrt.so (symbol table gone, .dynsym kept)."""
    src = os.path.join(ctx.build, "runtime", "libstencilrt.so")
    check(os.path.exists(src), "%s is missing (build the stencilrt target)", src)
    libdir = os.path.join(ctx.tmp, "lib")
    os.makedirs(libdir, exist_ok=True)
    dst = os.path.join(libdir, "libstencilrt.so")
    shutil.copyfile(os.path.realpath(src), dst)
    ctx.run(["strip", dst], timeout=60, check=True)
    return dst


def dlhost(ctx):
    return os.path.join(ctx.build, "tests", "gdb", "dlhost")


# Expected stops of the VM programs (breakpoint locations, then per stop the
# frames from the helper down to main).
REENTER_STOPS = [
    ["vm_call"] + jit_stack("call@main[1]"),
    ["vm_call"] + jit_stack("call@outer[2]", "call@main[1]"),
    ["vm_call"] + jit_stack("call@middle[3]", "call@outer[2]", "call@main[1]"),
    ["tinyvm_breakpoint"] + jit_stack("native@inner[1]", "call@middle[3]", "call@outer[2]",
                                      "call@main[1]"),
]
COUNTDOWN_STOPS = [["vm_print"] + jit_stack("print@main[3]")] * 3
DEEP_STOPS = [["tinyvm_breakpoint"] + jit_stack(
    "native@rec[7]", "call@rec[4]", "call@rec[4]", "call@rec[4]", "call@rec[4]", "call@via[1]",
    "call@main[1]")]
# dlhost's C frames are its own (no sibling calls): see tests/gdb/dlhost.c. It
# stops twice: in leaf, then in leaf2, emitted after leaf was freed (into the
# memory leaf had): the second stop shows that leaf's symbols were dropped.
DLHOST_STOPS = [["dlhost_breakpoint", "vm_native", native, "run_function", "vm_call",
                 "call@root[1]", "run_function", "main"]
                for native in ("native@leaf[1]", "native@leaf2[3]")]


# --- tests -------------------------------------------------------------------

def many_functions(ctx, n=300):
    """A program of n + 1 executors of one page each: more than the 256 pages of
    one default (1 MiB) code arena, so they live in two arenas, each with its
    own GDB registration. main calls functions on both sides of the boundary."""
    path = os.path.join(ctx.tmp, "many.tvm")
    calls = [0, n - 1, 256, 255]
    with open(path, "w") as f:
        for i in range(n):
            f.write("func f%d 1\n    load 0\n    addi %d\n    native breakpoint\n    ret\n"
                    % (i, i))
        f.write("func main 0\n    push 1\n")
        f.writelines("    call f%d 1\n" % i for i in calls)
        f.write("    ret\n")
    stops = [["tinyvm_breakpoint"] + jit_stack("native@f%d[2]" % i, "call@main[%d]" % (k + 1))
             for k, i in enumerate(calls)]
    return path, stops


def test_backtrace_at_helpers(ctx):
    many, many_stops = many_functions(ctx)
    cases = [
        ("reenter.tvm", ["vm_call", "tinyvm_breakpoint"], REENTER_STOPS),
        ("countdown.tvm", ["vm_print"], COUNTDOWN_STOPS),
        ("deep.tvm", ["tinyvm_breakpoint"], DEEP_STOPS),
        (many, ["tinyvm_breakpoint"], many_stops),
    ]
    for prog, bps, wants in cases:
        tag = os.path.basename(prog)
        res, p = run_gdb(ctx, BTSTOPS, {"breakpoints": bps, "max_stops": 20},
                         [tinyvm(ctx), "--jit", program(ctx, prog)], tag=tag)
        check_stops(tag, res, wants)

    # Two code views forced under GDB (a runtime created under a debugger gets
    # one): the same frames, GDB's breakpoints being in C code only.
    res, p = run_gdb(ctx, BTSTOPS, {"breakpoints": ["vm_call", "tinyvm_breakpoint"],
                                    "max_stops": 20},
                     [tinyvm(ctx), "--jit", program(ctx, "reenter.tvm")],
                     env={"STENCILRT_CODE_VIEWS": "2"}, tag="reenter.tvm, two views")
    check_stops("reenter.tvm, two views", res, REENTER_STOPS)

    # A stop on a signal raised in a helper (raise(SIGTRAP) in vm_native): the
    # frames above vm_native are libc's, the rest is exact.
    res, _ = run_gdb(ctx, BTSTOPS, {"breakpoints": [], "max_stops": 5},
                     [tinyvm(ctx), "--jit", program(ctx, "trap.tvm")], tag="trap.tvm")
    check(len(res["stops"]) == 1, "trap.tvm: %d stops, expected 1 (SIGTRAP)", len(res["stops"]))
    stop = res["stops"][0]
    names = names_to_main(stop["frames"])
    tail = ["vm_native"] + jit_stack("native@main[1]")
    check(names[-len(tail):] == tail and clean_to_main(stop["frames"]) and
          all(f["reason"] == 0 for f in stop["frames"][:len(names)]) and "??" not in stop["bt"],
          "trap.tvm: at SIGTRAP, frames %s, expected to end with %s:\n%s", names, tail, stop["bt"])


def test_single_step_through_a_cold_path(ctx):
    """GDB single-steps div0.tvm, whose div runs its cold trap path (placed after
    every hot part): at every PC, cold ones included, GDB names the instruction
    (its cold part is a second symbol of the same name) and the backtrace reaches
    main (docs/runtime.md, "Hot and cold parts")."""
    header = read(os.path.join(ctx.build, "stencils", "jit_stencils-%s.h" % TRIPLE))
    cold = sgtest.cold_sizes(header) or {}
    check(cold.get("div", 0) > 0, "div has no cold part in the bundled header")
    r = stepcheck(ctx, "div0.tvm", "div0.tvm")
    check(r["exited"] and r["exit_code"] == 3, "div0.tvm: exit %s, want 3 (the trap)",
          r["exit_code"])
    check(r["nfailures"] == 0, "%d of %d PCs failed: %s", r["nfailures"], r["checked"],
          r["failures"])
    e = r["executors"]["main"]
    cold_start = int(e["range"][1], 16) - cold["div"]
    missed = [x for x in e["missing"] if int(x.split()[0], 16) >= cold_start]
    check(not missed and e["visited"] + len(e["missing"]) == e["instructions"],
          "cold instructions never stepped: %s", missed)
    print("div0.tvm: %d PCs checked, %d of them in main's executor, none failed; "
          "div's cold part (%d bytes) stepped" % (r["checked"], r["checked_executor"],
                                                   cold["div"]))


def test_single_step(ctx):
    figures = []
    # Each program, its executors (a loop, helper calls to print and native,
    # re-entry through call, recursion; countdown: print inside a loop) and how
    # many times it enters the shim (once per function run).
    for prog, required, entries in (("step.tvm", {"loop", "helpers", "reenter", "main"}, 5),
                                    ("deep.tvm", {"rec", "via", "main"}, 7),
                                    ("countdown.tvm", {"main"}, 1)):
        figures.append(check_stepped(prog, stepcheck(ctx, prog, prog), required, entries))
    # The same through a stripped libstencilrt.so opened with dlopen().
    lib = stripped_library(ctx)
    r = stepcheck(ctx, [dlhost(ctx), lib, "--once"], "dlhost", host=DLHOST_HOST)
    figures.append(check_stepped("dlhost (stripped .so)", r, {"leaf", "root"}, 2))

    # The checker must be able to fail. A wrong expectation: another name at
    # frame 0 of every executor PC.
    r = stepcheck(ctx, "reenter.tvm", "wrong-op", wrong_op="no-such-op@main[0]")
    check(r["checked_executor"] > 0 and r["nfailures"] == r["checked_executor"],
          "self-test: a wrong expectation failed at %d of %d executor PCs", r["nfailures"],
          r["checked_executor"])
    check(all(f["what"] == "frames differ" for f in r["failures"]),
          "self-test: unexpected failure kinds: %s", r["failures"])
    # A wrong JIT: executor CFI with the save slots of r12 and r13 swapped. The
    # names and the chain to main are still right; the registers GDB unwinds
    # through an executor frame are not: at every executor PC, and at the shim
    # PCs of the nested run (the shim has its own, correct, FDE, but the chain
    # goes on through the calling executor's frame).
    r = stepcheck(ctx, [dlhost(ctx), lib, "--once", "--bad-cfi"], "bad-cfi", host=DLHOST_HOST)
    check(r["checked_executor"] > 0 and r["nfailures"] >= r["checked_executor"],
          "self-test: swapped r12/r13 CFI failed at %d of %d executor PCs:\n%s", r["nfailures"],
          r["checked_executor"], json.dumps(r["failures"][:3], indent=1))
    check(all("registers differ" in f["what"] and set(f["registers"]) == {"r12", "r13"}
              for f in r["failures"]),
          "self-test: swapped r12/r13 CFI: unexpected failures:\n%s",
          json.dumps(r["failures"][:3], indent=1))
    for line in figures:
        print("     single-step " + line)


def test_stripped_shared_library(ctx):
    lib = stripped_library(ctx)
    nm = ctx.run(["nm", lib], timeout=60)
    check("no symbols" in nm.stderr and not nm.stdout.strip(),
          "strip left a symbol table in %s:\n%s", lib, nm.stdout[:2000])
    dyn = ctx.run(["nm", "-D", "--defined-only", lib], timeout=60, check=True).stdout
    for sym, kinds in (("__jit_debug_descriptor", "DB"), ("__jit_debug_register_code", "T")):
        m = re.search(r"^[0-9a-f]+ ([A-Za-z]) %s$" % sym, dyn, re.M)
        check(m and m.group(1) in kinds, "nm -D %s: %s is not a global %s symbol:\n%s", lib, sym,
              "/".join(kinds), dyn)

    # The host runs on its own, and does not link stencilrt.
    p = ctx.run([dlhost(ctx), lib], timeout=60)
    check(p.returncode == 0 and "result 42\n" in p.stdout and "result 82 " in p.stdout,
          "dlhost exited %d:\n%s%s", p.returncode, p.stdout, p.stderr)
    needed = ctx.run(["readelf", "-d", dlhost(ctx)], timeout=60, check=True).stdout
    check("stencilrt" not in needed, "dlhost links stencilrt:\n%s", needed)

    res, _ = run_gdb(ctx, BTSTOPS, {"breakpoints": ["dlhost_breakpoint"], "max_stops": 5},
                     [dlhost(ctx), lib], tag="dlhost")
    check(lib in res["sharedlibrary"], "GDB did not load %s:\n%s", lib, res["sharedlibrary"])
    check_stops("dlhost", res, DLHOST_STOPS)


BATCHCHECK = os.path.join(GDB_DIR, "batchcheck.py")


def check_batches(res):
    """What tests/gdb/batchhost.c's phases must leave GDB knowing (see there)."""
    check(res["exited"] and res["exit_code"] == 0, "batchhost exited %s", res["exit_code"])
    check(len(res["checkpoints"]) == 5, "%d checkpoints, expected 5", len(res["checkpoints"]))
    ops = ["load", "native", "addi", "ret"]
    for phase, cp in enumerate(res["checkpoints"], 1):
        for e in cp["executors"]:
            where = "checkpoint %d: %s" % (phase, e["name"])
            if e["live"] and not e["held"]:
                want = ["%s@%s[%d]" % (op, e["name"], i) for i, op in enumerate(ops)]
                check(e["symbols"] == want, "%s: GDB names its instructions %s, expected %s",
                      where, e["symbols"], want)
                check(e["resolves"] == e["instr"][0], "%s: its name resolves to %s, not %#x",
                      where, e["resolves"], e["instr"][0])
            elif e["live"]:
                check(e["symbols"] == [None] * 4 and e["resolves"] is None,
                      "%s (live but held): GDB already knows it: %s, name at %s", where,
                      e["symbols"], e["resolves"])
            else:  # its memory may hold a newer executor, which GDB names
                stale = [s for s in e["symbols"] if s and "@%s[" % e["name"] in s]
                check(not stale and e["resolves"] is None,
                      "%s (freed): GDB still knows it: %s, name at %s", where, e["symbols"],
                      e["resolves"])
    # Shim, then b0..b255 and b256..b299 (two objects of at most 256, each
    # executor in fresh, adjacent pages): one .text section per object, not
    # one per executor.
    first = res["checkpoints"][0]
    check(first["jit_text_sections"] <= 4, "checkpoint 1: %d .text sections in JIT objects for "
          "300 executors emitted by one batch", first["jit_text_sections"])
    check("break_on_error" not in res, "break b150: %s", res.get("break_on_error"))
    want = [["batchhost_breakpoint", "vm_native", "native@%s[1]" % n, "run_function", "main"]
            for n in ("b0", "b150", "b299", "c5", "h3")]
    want.insert(1, ["load@b150[0]", "run_function", "main"])  # the breakpoint on b150
    got = [s["frames"] for s in res["stops"]]
    check(got == want, "stops:\n  got  %s\n  want %s\nlast bt:\n%s", got, want,
          res["stops"][-1]["bt"] if res["stops"] else "")
    b150 = [e for e in first["executors"] if e["name"] == "b150"][0]
    check(res["stops"][1]["pc"] == b150["instr"][0], "break b150 stopped at %#x, not its entry "
          "%#x", res["stops"][1]["pc"], b150["instr"][0])
    for s in res["stops"]:
        for bad in ("??", "Backtrace stopped", "corrupt"):
            check(bad not in s["bt"], "`bt` prints %r:\n%s", bad, s["bt"])


def test_batches(ctx):
    host = os.path.join(ctx.build, "tests", "gdb", "batchhost")
    cfg = {"break_on": "b150", "max_stops": 20}
    res, p = run_gdb(ctx, BATCHCHECK, cfg, [host], tag="batchhost")
    check("batchhost: ok" in p.stdout, "batchhost did not report ok:\n%s%s", p.stdout[-2000:],
          p.stderr[-2000:])
    check_batches(res)
    first = res["checkpoints"][0]
    print("     300 executors in one batch: %d .text sections in GDB's JIT objects (shim "
          "included)" % first["jit_text_sections"])

    # Two code views forced (breakpoints in C only): executors of one batch
    # sit in adjacent chunks, not pages, and must still share one section.
    two, _ = run_gdb(ctx, BATCHCHECK, dict(cfg, break_on="batchhost_breakpoint"), [host],
                     env={"STENCILRT_CODE_VIEWS": "2"}, tag="batchhost-two-views")
    cp = two["checkpoints"][0] if two.get("checkpoints") else {}
    check(two["exited"] and two["exit_code"] == 0 and cp.get("jit_text_sections", 99) <= 4,
          "two code views: %s .text sections for 300 executors emitted by one batch, exit %s",
          cp.get("jit_text_sections"), two["exit_code"])
    named = [e for e in cp.get("executors", []) if e["live"] and not e["held"]]
    check(named and all(e["symbols"][0] == "load@%s[0]" % e["name"] for e in named),
          "two code views: GDB does not name the executors: %s", named[:2])

    # The checks must be able to fail: without the GDB interface nothing is named.
    off, _ = run_gdb(ctx, BATCHCHECK, cfg, [host], env={"STENCILRT_GDB": "0"},
                     tag="batchhost-off")
    try:
        check_batches(off)
    except TestFailure:
        pass
    else:
        raise TestFailure("STENCILRT_GDB=0: the batch checks passed")


def test_gdb_interface_off(ctx):
    """The same stops with and without the GDB JIT interface: same PCs, names only
    with it, so the names and the unwinding through JIT frames come from the
    registration. STENCILRT_FRAMES=0 (no libgcc registration) changes nothing
    for GDB."""
    lib = stripped_library(ctx)
    cases = [
        # tag, command, breakpoint, expected stops, index of the innermost JIT frame
        ("reenter", [tinyvm(ctx), "--jit", program(ctx, "reenter.tvm")], "tinyvm_breakpoint",
         REENTER_STOPS[-1:], 1),
        ("dlhost", [dlhost(ctx), lib], "dlhost_breakpoint", DLHOST_STOPS, 2),
    ]
    for tag, args, bp, wants, jit in cases:
        cfg = {"breakpoints": [bp], "max_stops": 5}
        on, _ = run_gdb(ctx, BTSTOPS, cfg, args, tag=tag + "-on")
        check_stops(tag + " STENCILRT_GDB=1", on, wants)
        noframes, _ = run_gdb(ctx, BTSTOPS, cfg, args, env={"STENCILRT_FRAMES": "0"},
                              tag=tag + "-noframes")
        check_stops(tag + " STENCILRT_FRAMES=0", noframes, wants)

        off, _ = run_gdb(ctx, BTSTOPS, cfg, args, env={"STENCILRT_GDB": "0"}, tag=tag + "-off")
        check(off["exited"] and off["exit_code"] == 0, "%s: STENCILRT_GDB=0 run did not exit 0",
              tag)
        check(len(off["stops"]) == len(wants), "%s STENCILRT_GDB=0: %d stops, expected %d", tag,
              len(off["stops"]), len(wants))
        for k, (son, soff, want) in enumerate(zip(on["stops"], off["stops"], wants)):
            fon, foff, bt = son["frames"], soff["frames"], soff["bt"]
            where = "%s stop %d, STENCILRT_GDB=0" % (tag, k + 1)
            # The frames above the JIT frame are the same C frames, and the
            # JIT frame is at the same PC...
            check([f["name"] for f in foff[:jit]] == want[:jit] and
                  [f["pc"] for f in foff[:jit + 1]] == [f["pc"] for f in fon[:jit + 1]],
                  "%s: stopped elsewhere:\n%s", where, bt)
            # ...but it is "??", no stencil symbol shows, and the walk does not
            # reach main through named frames.
            check(foff[jit]["name"] is None and "?? ()" in bt,
                  "%s: JIT frame #%d is named:\n%s", where, jit, bt)
            check(not STENCIL_SYMBOL.search(bt), "%s: shows stencil symbols:\n%s", where, bt)
            check(not clean_to_main(foff), "%s: still unwinds cleanly to main:\n%s", where, bt)

    # The single-step checker, without the interface, fails at every JIT PC.
    r = stepcheck(ctx, "reenter.tvm", "stepcheck-off", env={"STENCILRT_GDB": "0"})
    check(r["exited"] and r["exit_code"] == 0, "STENCILRT_GDB=0 stepcheck: no clean exit")
    check(r["checked"] > 0 and r["nfailures"] == r["checked"],
          "STENCILRT_GDB=0: the single-step checker failed at only %d of %d PCs",
          r["nfailures"], r["checked"])


def cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def test_attach_to_running_jit(ctx):
    """The JIT code was registered before GDB came: GDB must find it by walking
    __jit_debug_descriptor's list when it attaches."""
    steps = 12
    proc = subprocess.Popen([tinyvm(ctx), "--jit", program(ctx, "spin.tvm")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=dict(os.environ, STENCILRT_GDB="1"))
    try:
        deadline = time.monotonic() + 30
        while cpu_ticks(proc.pid) < 5:  # spinning in JIT code for 50 ms of CPU
            check(proc.poll() is None, "spin.tvm exited (%s)", proc.returncode)
            check(time.monotonic() < deadline, "spin.tvm does not spin")
            time.sleep(0.02)
        cmds = []
        for _ in range(steps):
            cmds += ["-ex", "echo @@STOP\\n", "-ex", "bt", "-ex", "stepi"]
        p = ctx.run(GDB + ["-p", str(proc.pid)] + cmds, timeout=T)
        if "ptrace: Operation not permitted" in p.stdout + p.stderr:
            print("     attach not permitted here (ptrace_scope): nothing checked")
            return
        blocks = p.stdout.split("@@STOP\n")[1:]
        check(len(blocks) == steps, "gdb -p: %d of %d stops\nstdout:\n%s\nstderr:\n%s",
              len(blocks), steps, p.stdout[-3000:], p.stderr[-3000:])
        loop_ops = {"push@spin[0]", "jump_if_nonzero@spin[1]"}
        seen = set()
        for i, block in enumerate(blocks):
            names = [plain_op_name(n) for _, n in FRAME_LINE.findall(block)]
            check(names and names[0] in loop_ops and
                  names[1:] == GLUE + jit_stack("call@main[1]") and
                  not any(bad in block for bad in ("??", "Backtrace stopped", "corrupt")),
                  "gdb -p, stop %d: frames %s:\n%s", i + 1, names, block)
            seen.add(names[0])
        check(seen == loop_ops, "gdb -p: stepi never left %s", seen)
    finally:
        proc.kill()
        proc.wait()
