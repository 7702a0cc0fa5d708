# stepcheck.py - LLDB script (tests/integration/test_lldb.py): single-step the
# JIT code tinyvm runs and check LLDB's backtrace at each PC, with LLDB reading
# the runtime's GDB-JIT-interface objects (plugin.jit-loader.gdb).
#
#   LLDBTEST_CONFIG=config.json lldb-22 -b -o 'command script import stepcheck.py'
#
# config.json: {"program", "args", "result": PATH, "op_names" (SG_OP_* order),
#   "shim_name", "shim_entry", "shim_fde_start", "shim_fde_size" (from the
#   generated header), "cold_sizes" (per op, the bytes of its cold part: the
#   header's sg_cold_sizes), "max_steps", "time_limit", "breakpoint": a stencil
#   symbol to break on, or null}.
#
# Ground truth is read from tinyvm's memory through LLDB's value API (never by
# running code in it): every executor's code address and instruction offsets
# (struct sr_executor) and its ops (vm.functions[i].code), so frame 0 must be
# "<op>@<function>[<i>]" of the instruction holding the PC, in its hot part or
# in its cold part (the cold parts follow every hot part in instruction order,
# each named as its instruction), or the shim.
#
# Stepping: instruction by instruction while in JIT code (the shim and
# executors); a call out of it into C is stepped out of, and a breakpoint on
# the shim's entry stops any re-entry on the way, so nested executors are
# stepped as well. At each JIT PC: frame 0's name is the expected one, and the
# chain reaches main with every frame named (no frame LLDB cannot name).
import json
import os
import re
import time

import lldb

MAX_FRAMES = 64


def read_truth(frame):
    """{fn name: (code address, [n + 1 instruction addresses], [op numbers])}"""
    funcs = frame.GetValueForVariablePath("vm.functions")
    n = frame.GetValueForVariablePath("vm.nfunctions").GetValueAsUnsigned()
    truth = {}
    for i in range(n):
        f = funcs.GetChildAtIndex(i, lldb.eNoDynamicValues, True)
        name = f.GetChildMemberWithName("name").GetSummary().strip('"')
        ex = f.GetChildMemberWithName("executor").Dereference()
        mem = ex.GetChildMemberWithName("mem").GetValueAsUnsigned()
        count = ex.GetChildMemberWithName("n").GetValueAsUnsigned()
        offs = ex.GetChildMemberWithName("offsets")
        # tinyvm's JIT emits from its rewritten copy (the cached ops' variants)
        code = f.GetChildMemberWithName("jit_code")
        if not code.IsValid() or code.GetValueAsUnsigned() == 0:
            code = f.GetChildMemberWithName("code")
        addrs = [mem + offs.GetChildAtIndex(k, lldb.eNoDynamicValues, True).GetValueAsUnsigned()
                 for k in range(count + 1)]
        ops = [code.GetChildAtIndex(k, lldb.eNoDynamicValues, True)
               .GetChildMemberWithName("op").GetValueAsUnsigned() for k in range(count)]
        truth[name] = (addrs, ops)
    return truth


def cold_instruction(cfg, addrs, ops, pc):
    """The instruction whose cold part holds pc, or None."""
    end = addrs[-1]
    for k, op in enumerate(ops):
        end += cfg["cold_sizes"][op] if cfg["cold_sizes"] else 0
        if pc < end:
            return k
    return None


def expected_names(cfg, truth, shim, pc):
    """The names frame 0 may have at pc (None: not JIT code), its function,
    index, and whether pc is in a cold part."""
    if shim[0] <= pc < shim[1]:
        return [cfg["shim_name"]], "shim", None, False
    for fn, (addrs, ops) in truth.items():
        if addrs[0] <= pc < addrs[-1]:
            k = max(i for i in range(len(ops)) if addrs[i] <= pc)
            names = ["%s@%s[%d]" % (cfg["op_names"][ops[k]], fn, k)]
            if k == 0:
                # The executor's own (zero-sized) symbol starts there too, and
                # LLDB names the first instruction after it.
                names.append(fn)
            return names, fn, k, False
        k = cold_instruction(cfg, addrs, ops, pc) if pc >= addrs[-1] else None
        if k is not None:
            return ["%s@%s[%d]" % (cfg["op_names"][ops[k]], fn, k)], fn, k, True
    return None, None, None, False


def in_jit_module(frame):
    return (frame.GetModule().GetFileSpec().GetFilename() or "").startswith("JIT")


def check_chain(thread):
    """Every frame named, up to main: None, or what is wrong."""
    names = []
    for f in list(thread.frames)[:MAX_FRAMES]:
        name = f.GetFunctionName() or (f.GetSymbol().GetName() if f.GetSymbol() else None)
        names.append(name or "??%#x" % f.GetPC())
        if not name:
            return "frame %d at %#x has no name: %s" % (len(names) - 1, f.GetPC(), names)
        if name == "main" and not in_jit_module(f):  # an executor may be called main too
            return None
    return "main not reached: %s" % names


def run(debugger, cfg):
    res = {"steps": 0, "checked": 0, "checked_shim": 0, "checked_cold": 0, "cold_visited": {},
           "failures": [], "nfailures": 0,
           "visited": {}, "shim_visited": [], "breakpoint_hits": [], "exit_code": None,
           "error": None}
    debugger.SetAsync(False)
    debugger.HandleCommand("settings set plugin.jit-loader.gdb.enable on")
    target = debugger.CreateTarget(cfg["program"])
    start = target.BreakpointCreateByName("vm_jit_run")
    if cfg.get("breakpoint"):
        # Set before the code exists: LLDB resolves it when the runtime
        # registers the object that defines the name.
        bp = target.BreakpointCreateByName(cfg["breakpoint"])
        m = re.match(r"^\w+(?:\[[\w=,]+\])?@(\w+)\[(\d+)\]$", cfg["breakpoint"])
        process = target.LaunchSimple(cfg["args"], None, os.getcwd())
        while process.GetState() == lldb.eStateStopped:
            thread = process.GetSelectedThread()
            frame = thread.GetFrameAtIndex(0)
            if thread.GetStopReason() == lldb.eStopReasonBreakpoint and \
                    thread.GetStopReasonDataAtIndex(0) == start.GetID() and m:
                main = next(f for f in thread.frames if f.GetFunctionName() == "main")
                res["want_pc"] = read_truth(main)[m.group(1)][0][int(m.group(2))]
            elif thread.GetStopReason() == lldb.eStopReasonBreakpoint:
                res["breakpoint_hits"].append({"name": frame.GetFunctionName() or
                                               frame.GetSymbol().GetName(),
                                               "pc": frame.GetPC(),
                                               "chain": check_chain(thread)})
            process.Continue()
        res["exit_code"] = process.GetExitStatus()
        return res
    process = target.LaunchSimple(cfg["args"], None, os.getcwd())
    thread = process.GetSelectedThread()
    main = next(f for f in thread.frames if f.GetFunctionName() == "main")
    truth = read_truth(main)
    shim_base = main.GetValueForVariablePath("vm.shim").GetValueAsUnsigned() - cfg["shim_entry"]
    shim = (shim_base + cfg["shim_fde_start"], shim_base + cfg["shim_fde_start"] +
            cfg["shim_fde_size"])
    target.BreakpointDelete(start.GetID())
    target.BreakpointCreateByAddress(shim[0])  # every entry into JIT code
    visited = {fn: set() for fn in truth}
    t0 = time.time()
    process.Continue()
    while process.GetState() == lldb.eStateStopped and res["steps"] < cfg["max_steps"] and \
            time.time() - t0 < cfg["time_limit"]:
        thread = process.GetSelectedThread()
        pc = thread.GetFrameAtIndex(0).GetPC()
        want, fn, k, cold = expected_names(cfg, truth, shim, pc)
        if want is None:  # C code: out of it, or to the next entry into JIT code
            thread.StepOut()
            res["steps"] += 1
            continue
        frame = thread.GetFrameAtIndex(0)
        got = frame.GetFunctionName() or (frame.GetSymbol().GetName() if frame.GetSymbol()
                                          else None)
        if got not in want:
            problem = "frame 0 is %s, want %s" % (got, " or ".join(want))
        else:
            problem = check_chain(thread)
        res["checked"] += 1
        if fn == "shim":
            res["checked_shim"] += 1
            res["shim_visited"].append(pc - shim[0])
        else:
            visited[fn].add(k)
        if cold:
            res["checked_cold"] += 1
            res["cold_visited"].setdefault(fn, []).append(k)
        if problem:
            res["nfailures"] += 1
            if len(res["failures"]) < 10:
                res["failures"].append("pc %#x (%s): %s" % (pc, want[0], problem))
        thread.StepInstruction(False)
        res["steps"] += 1
    if process.GetState() == lldb.eStateExited:
        res["exit_code"] = process.GetExitStatus()
    else:
        res["error"] = "stopped stepping in state %d after %d steps" % (process.GetState(),
                                                                         res["steps"])
        process.Kill()
    res["visited"] = {fn: sorted(v) for fn, v in visited.items()}
    res["instructions"] = {fn: len(ops) for fn, (addrs, ops) in truth.items()}
    res["shim_visited"] = sorted(set(res["shim_visited"]))
    return res


def __lldb_init_module(debugger, _):
    cfg = json.load(open(os.environ["LLDBTEST_CONFIG"]))
    try:
        res = run(debugger, cfg)
    except Exception as e:  # the test reads the error from the result
        res = {"error": "%s: %s" % (type(e).__name__, e)}
    with open(cfg["result"], "w") as f:
        json.dump(res, f)
