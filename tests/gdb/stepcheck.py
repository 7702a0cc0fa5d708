# stepcheck.py - GDB Python script: single-step every instruction of the JIT
# code a program runs and check GDB's backtrace at each PC
# (tests/integration/test_gdb.py).
#
#   GDBTEST_CONFIG=config.json gdb -batch -nx -x stepcheck.py --args PROGRAM ARGS...
#
# config.json: {"result": PATH, "op_names": [...] (SG_OP_* order), "shim_name",
#   "shim_entry", "shim_fde_start", "shim_fde_size" (from the generated header),
#   "host": how to read the program (below), "max_steps", "time_limit",
#   "max_failures", optional "wrong_op" (self-test: expect this name at frame 0
#   of every executor PC instead of the real one, so every such PC fails)}.
# host: {"start": where to stop once all executors are emitted and before JIT
#   code runs; "functions", "nfunctions", "shim": GDB expressions (in main's
#   frame) for the array of functions (fields name, code, n, executor), its
#   length, and the shim's entry; "instr": the expression of instruction k's
#   address in function fn, whose executor pointer is ex (a format string with
#   {ex}, {fn}, {k}; memory reads only, never a call into the program);
#   "glue": the C frames between a JIT frame
#   and the JIT frame below it that called vm_call; "glue_outer": the C frames
#   between the outermost JIT frame and main}.
#
# Ground truth comes from the runtime and the program, never from GDB's unwinder:
#   - every executor's instruction boundaries as the runtime recorded them, its ops
#     from the program's instruction arrays, so frame 0 must be "<op>@<fn>[<i>]"
#     (or the shim's name);
#   - a shadow stack of JIT activations kept by this script: a JIT frame that
#     left through a call to vm_call and came back in through the shim is an
#     outer JIT frame, named by the instruction that made the call;
#   - the registers at each shim entry (return address, rsp, rbp, rbx, r12-r15):
#     the caller frame GDB unwinds to from any PC of that activation must have
#     exactly those values (pc = the return address, rsp = entry rsp + 8).
# At each PC: the walk (gdb.newest_frame()/older()) reaches main, every frame up
# to main has a name and no unwind stop reason, `bt` prints no "??", "Backtrace
# stopped" or "corrupt", and the frames are exactly the expected ones. A PC
# holding a `ret` is only required to reach main through named frames: GDB's
# x86-64 epilogue unwinder, not the JIT's CFI, handles those PCs.
#
# The result (JSON) lists the PCs checked per executor and in the shim, the
# instructions never visited, and the first failures.
import json
import os
import time

import gdb

CFG = json.load(open(os.environ["GDBTEST_CONFIG"]))
HOST = CFG["host"]
REGS = ("rsp", "rbp", "rbx", "r12", "r13", "r14", "r15")
MAX_FRAMES = 64

result = {"steps": 0, "checked": 0, "checked_shim": 0, "checked_ret": 0, "checked_executor": 0,
          "failures": [], "nfailures": 0, "executors": {}, "shim": {}, "ret_pcs": [],
          "exited": False, "exit_code": None, "error": None, "entries": 0, "stops": 0,
          "elapsed": 0.0}
exited = []


def emitted_code(fn):
    """The instructions an executor was emitted from: tinyvm's JIT keeps its
    rewritten copy (jit_code: the cached ops' variants) beside the program's."""
    fields = [f.name for f in fn.type.strip_typedefs().fields()]
    if "jit_code" in fields and int(fn["jit_code"]) != 0:
        return fn["jit_code"]
    return fn["code"]


def on_exit(event):
    exited.append(getattr(event, "exit_code", None))


gdb.events.exited.connect(on_exit)


def u64(v):
    return int(v) & 0xFFFFFFFFFFFFFFFF


def fail(pc, what, **detail):
    result["nfailures"] += 1
    if len(result["failures"]) < CFG.get("max_failures", 20):
        d = {"pc": hex(pc), "what": what}
        d.update(detail)
        result["failures"].append(d)


def finish():
    result["elapsed"] = round(time.monotonic() - T0, 2)
    with open(CFG["result"], "w") as f:
        json.dump(result, f, indent=1)


T0 = time.monotonic()
gdb.execute("set pagination off")
gdb.execute("set confirm off")
gdb.execute("set width 0")

def disassemble(lo, hi):
    insns = arch.disassemble(lo, hi - 1)
    out = [(d["addr"], d["length"], d["asm"]) for d in insns]
    if not out or out[-1][0] + out[-1][1] != hi:
        raise RuntimeError("disassembly of [%#x, %#x) does not end at the end" % (lo, hi))
    return out


def in_jit(pc):
    return shim_lo <= pc < shim_hi or any(lo <= pc < hi for _, lo, hi, _, _, _ in executors)


def is_call(asm):
    return asm.split()[0].startswith("call")


def is_ret(asm):
    return asm.split()[0].startswith("ret")


def regs_of(frame):
    return {r: u64(frame.read_register(r)) for r in REGS}


try:
    # 1. Stop before any JIT code runs, once the executors are emitted (and so
    #    registered), at HOST["start"]; then read the executors, their ops and
    #    the shim from the program's own data, through HOST's GDB expressions
    #    (evaluated in main's frame; each function has name, code, n, executor).
    first = gdb.Breakpoint(HOST["start"], internal=True)
    gdb.execute("run", to_string=True)
    first.delete()
    frame = gdb.newest_frame()
    while frame is not None and frame.name() != "main":
        frame = frame.older()
    frame.select()
    arch = frame.architecture()

    shim_entry = u64(gdb.parse_and_eval(HOST["shim"]))
    shim_lo = shim_entry - CFG["shim_entry"] + CFG["shim_fde_start"]
    shim_hi = shim_lo + CFG["shim_fde_size"]

    executors = []  # (name, lo, hi, [instruction starts], [op names])
    functions = gdb.parse_and_eval(HOST["functions"])
    for i in range(int(gdb.parse_and_eval(HOST["nfunctions"]))):
        fn = functions[i]
        name = fn["name"].string()
        n = int(fn["n"])
        ex = u64(fn["executor"])
        # Plain reads of the program's memory: no function is called in the
        # inferior (GDB 13 cannot on CPUs with AMX state).
        bounds = [u64(gdb.parse_and_eval("(unsigned long)(%s)" % HOST["instr"].format(
            ex=ex, fn=i, k=k))) for k in range(n + 1)]
        code = emitted_code(fn)
        ops = [CFG["op_names"][int(code[k]["op"])] for k in range(n)]
        # Cold parts (docs/runtime.md, "Hot and cold parts"): after every hot
        # part, in instruction order, up to the end of the code.
        hi = bounds[-1]
        if "end" in HOST:
            hi = u64(gdb.parse_and_eval("(unsigned long)(%s)" % HOST["end"].format(ex=ex, fn=i)))
        colds = CFG.get("cold_sizes") or [0] * len(CFG["op_names"])
        at, cold = bounds[-1], []
        for k in range(n):
            size = colds[int(code[k]["op"])]
            cold.append((at, at + size))
            at += size
        executors.append((name, bounds[0], hi, bounds, ops, cold))
    gdb.newest_frame().select()

    # 2. Every instruction of the shim and of the executors, and which symbol
    #    GDB must name at it.
    insn_at = {}  # pc -> (length, asm text)
    owner = {}    # pc -> ("shim", None, shim name) or (executor, index, "<op>@<executor>[<index>]")
    for addr, length, asm in disassemble(shim_lo, shim_hi):
        insn_at[addr] = (length, asm)
        owner[addr] = ("shim", None, CFG["shim_name"])
    for name, lo, hi, bounds, ops, cold in executors:
        for addr, length, asm in disassemble(lo, hi):
            insn_at[addr] = (length, asm)
            if addr >= bounds[-1]:  # a cold part
                k = [j for j, (a, b) in enumerate(cold) if a <= addr < b][0]
            else:
                k = max(j for j in range(len(ops)) if bounds[j] <= addr)
            owner[addr] = (name, k, "%s@%s[%d]" % (ops[k], name, k))
        result["executors"][name] = {"instructions": sum(1 for a in owner if owner[a][0] == name),
                                     "visited": 0, "missing": [], "ret_pcs": 0,
                                     "range": [hex(lo), hex(hi)]}
    result["shim"] = {"instructions": sum(1 for a in owner if owner[a][0] == "shim"),
                      "visited": 0, "missing": [], "range": [hex(shim_lo), hex(shim_hi)]}

    # 3. Breakpoints where control comes back into JIT code: the shim's entry
    #    and the instruction after every call that leaves JIT code (to a helper).
    gdb.Breakpoint("*%#x" % shim_entry, internal=True)
    return_sites = {}
    for addr, (length, asm) in insn_at.items():
        if is_call(asm) and owner[addr][0] != "shim":
            return_sites[addr + length] = owner[addr][2]
            gdb.Breakpoint("*%#x" % (addr + length), internal=True)
except Exception as e:
    result["error"] = "setting up: %s: %s" % (type(e).__name__, e)
    finish()
    raise


def expected_chain(pc):
    """[(name, expected pc or None, expected registers or None)] from frame 0 to main."""
    chain = [(owner[pc][2], pc, None)]
    for lvl in reversed(levels):
        entry = lvl["entry"]
        glue = HOST["glue"] if lvl["site"] is not None else HOST["glue_outer"]
        chain.append((glue[0], entry["ra"], entry["regs"]))
        chain.extend((g, None, None) for g in glue[1:])
        if lvl["site"] is not None:
            chain.append((lvl["site"][0], lvl["site"][1], None))
    chain.append(("main", None, None))
    return chain


def walk():
    frames = []
    f = gdb.newest_frame()
    while f is not None and len(frames) < MAX_FRAMES:
        frames.append(f)
        if f.name() == "main":
            break
        f = f.older()
    return frames


def describe(frames):
    return ["%s@%#x" % (f.name(), f.pc()) for f in frames]


visited = set()


def check(pc):
    result["checked"] += 1
    who = "shim" if owner[pc][0] == "shim" else "ret" if is_ret(insn_at[pc][1]) else "executor"
    result["checked_" + who] += 1
    visited.add(pc)
    frames = walk()
    names = [f.name() for f in frames]
    if not frames or names[-1] != "main":
        fail(pc, "backtrace does not reach main", frames=describe(frames))
        return
    for f in frames:
        if f.unwind_stop_reason() != gdb.FRAME_UNWIND_NO_REASON:
            fail(pc, "unwinding stopped: %s" % gdb.frame_stop_reason_string(
                f.unwind_stop_reason()), frames=describe(frames))
            return
    if None in names:
        fail(pc, "unnamed (??) frame", frames=describe(frames))
        return
    text = gdb.execute("bt", to_string=True)
    for bad in ("??", "Backtrace stopped", "corrupt"):
        if bad in text:
            fail(pc, "'bt' prints %r" % bad, bt=text)
            return
    length, asm = insn_at[pc]
    want = expected_chain(pc)
    want_names = [w[0] for w in want]
    if is_ret(asm):
        # GDB's epilogue unwinder owns this PC: reaching main through named
        # frames is all that can be asked (recorded, not failed).
        result["ret_pcs"].append({"pc": hex(pc), "symbol": owner[pc][2], "frames": names,
                                  "as_expected": names == want_names})
        return
    if CFG.get("wrong_op") and owner[pc][0] != "shim":
        want_names[0] = CFG["wrong_op"]
    if names != want_names:
        fail(pc, "frames differ", got=names, want=want_names)
        return
    for f, (name, wpc, wregs) in zip(frames, want):
        if wpc is not None and f.pc() != wpc:
            fail(pc, "frame %s: pc %#x, expected %#x" % (name, f.pc(), wpc),
                 frames=describe(frames))
            return
        if wregs is not None:
            got = regs_of(f)
            bad = {r: "%#x != %#x" % (got[r], wregs[r]) for r in REGS if got[r] != wregs[r]}
            if bad:
                fail(pc, "frame %s: unwound registers differ from the shim entry" % name,
                     registers=bad, frames=describe(frames))
                return


# The shadow stack. levels[i] is one run of JIT code (one shim activation):
# its entry registers, and the call instruction (symbol, return address) of
# the JIT frame below it that called vm_call, or None for the outermost.
levels = []
pending = None      # (symbol, return address) of a call that left JIT code
returning = False   # the shim returned to C inside a vm_call


def on_stop(pc):
    """Control came back into JIT code at pc (a breakpoint)."""
    global pending, returning
    result["stops"] += 1
    if pc == shim_entry:
        result["entries"] += 1
        f = gdb.newest_frame()
        sp = u64(f.read_register("rsp"))
        ra = u64(gdb.parse_and_eval("*(unsigned long *)%d" % sp))
        regs = regs_of(f)
        regs["rsp"] = sp + 8
        if pending is None and levels:
            fail(pc, "shim entered with no pending call (shadow stack out of step)")
        levels.append({"site": pending, "entry": {"ra": ra, "regs": regs}})
        pending = None
    elif pc in return_sites:
        if returning:
            lvl = levels.pop()
            returning = False
            if lvl["site"] is None or lvl["site"][1] != pc:
                fail(pc, "returned to an unexpected call site", site=str(lvl["site"]))
        elif pending is None or pending[1] != pc:
            fail(pc, "returned to an unexpected call site", pending=str(pending))
        pending = None
    else:
        raise RuntimeError("stopped at %#x, neither the shim's entry nor a return site" % pc)


def pc_now():
    return u64(gdb.newest_frame().pc())


try:
    gdb.execute("continue", to_string=True)
    deadline = T0 + CFG.get("time_limit", 120)
    while not exited:
        if result["steps"] >= CFG.get("max_steps", 20000) or time.monotonic() > deadline:
            result["error"] = "step or time limit reached after %d steps" % result["steps"]
            break
        pc = pc_now()
        if not in_jit(pc):
            result["error"] = "stopped outside JIT code at %#x" % pc
            break
        on_stop(pc)
        while True:
            if pc not in insn_at:
                raise RuntimeError("PC %#x is not an instruction boundary of the disassembly"
                                   % pc)
            check(pc)
            length, asm = insn_at[pc]
            gdb.execute("stepi", to_string=True)
            result["steps"] += 1
            if exited:
                break
            new = pc_now()
            if in_jit(new):
                pc = new
                continue
            # Left JIT code: into a helper, or out of the shim's ret.
            if is_call(asm):
                pending = (owner[pc][2], pc + length)
            elif is_ret(asm) and owner[pc][0] == "shim":
                if not levels:
                    fail(pc, "shim returned with an empty shadow stack")
                elif levels[-1]["site"] is None:
                    levels.pop()
                else:
                    returning = True
            else:
                fail(pc, "left JIT code through %r" % asm)
            gdb.execute("continue", to_string=True)
            break
    result["exited"] = bool(exited)
    result["exit_code"] = exited[0] if exited else None
except Exception as e:  # report, never hang
    result["error"] = "%s: %s" % (type(e).__name__, e)

for addr, (name, _, sym) in owner.items():
    key = result["shim"] if name == "shim" else result["executors"][name]
    if addr in visited:
        key["visited"] += 1
    else:
        key["missing"].append("%#x %s %s" % (addr, sym, insn_at[addr][1]))
    if addr in visited and is_ret(insn_at[addr][1]) and name != "shim":
        key["ret_pcs"] += 1
finish()
if not exited:
    gdb.execute("kill", to_string=True)
