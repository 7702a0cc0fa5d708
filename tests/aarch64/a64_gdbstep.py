# a64_gdbstep.py - GDB Python script (gdb-multiarch, against qemu-aarch64 -g):
# single-step every instruction of the JIT code tinyvm runs on AArch64 and
# check GDB's backtrace at each PC (tests/integration/test_aarch64_qemu.py).
#
#   A64STEP_CONFIG=config.json gdb-multiarch -batch -nx -x a64_gdbstep.py
#
# config.json: {"result": PATH, "program": the tinyvm binary, "sysroot",
#   "port", "mode": "step" or "bt", "max_steps", "time_limit", "wrong_op"
#   (optional self-test: expect this name at frame 0 of every executor PC, so
#   every such PC fails), "break" (mode bt: the function to stop in)}.
#
# Mode bt: stop in CFG["break"] and report the backtrace (frame names, and
# `bt`'s text) in the result; the test checks it.
#
# Ground truth comes from the runtime's own data, read from the inferior (the
# static runtime has debug info): each executor's code and instruction offsets
# (struct sr_executor) and ops, so frame 0 must be "<op>@<function>[<i>]" in
# an executor and "tinyvm_shim" in the shim. At every JIT PC the walk
# (newest_frame().older()...) must reach main with every frame named and no
# unwind stop reason, and the frame after a JIT frame must be the shim's
# caller (vm_jit_run, or vm_run when that is a tail call).
#
# Stepping: `stepi` inside JIT code; when a stencil calls C (x30 points back
# into JIT code), a temporary breakpoint at that return address and one at the
# shim's entry (re-entry through vm_call) let the C code run at full speed.
import json
import os
import time

import gdb

CFG = json.load(open(os.environ["A64STEP_CONFIG"]))
MAX_FRAMES = 64
result = {"steps": 0, "checked": 0, "checked_shim": 0, "visited": {}, "unvisited": [],
          "failures": [], "nfailures": 0, "exited": False, "error": None, "elapsed": 0.0,
          "jit_instructions": 0}
exited = []
gdb.events.exited.connect(lambda e: exited.append(getattr(e, "exit_code", None)))


def fail(pc, what, **detail):
    result["nfailures"] += 1
    if len(result["failures"]) < 20:
        d = {"pc": hex(pc), "what": what}
        d.update(detail)
        result["failures"].append(d)


def u64(v):
    return int(v) & 0xFFFFFFFFFFFFFFFF


def run(cmd):
    return gdb.execute(cmd, to_string=True)


def jit_map():
    """{pc: expected frame-0 name} for every instruction of every executor and
    of the shim, from the runtime's structures in the inferior."""
    names = {}
    vm = gdb.parse_and_eval("frame->vm")  # in vm_jit_run(frame, sp)
    n = int(vm["nfunctions"])
    for i in range(n):
        fn = vm["functions"][i]
        fname = fn["name"].string()
        ex = fn["executor"].cast(gdb.lookup_type("struct sr_executor").pointer())
        mem, count = u64(ex["mem"]), int(ex["n"])
        for k in range(count):
            start, end = int(ex["offsets"][k]), int(ex["offsets"][k + 1])
            op = ex["rt"]["set"]["stencils"][int(ex["ops"][k])]["name"].string()
            for off in range(start, end, 4):
                names[mem + off] = "%s@%s[%d]" % (op, fname, k)
    rt = vm["rt"].cast(gdb.lookup_type("struct sr_runtime").pointer())
    shim, size = u64(rt["shim"]), int(rt["set"]["shim"]["code_size"])
    for off in range(0, size, 4):
        names[shim + off] = "tinyvm_shim"
    return names, u64(vm["shim"])


def check_pc(pc, names):
    result["checked"] += 1
    want = names[pc]
    if want == "tinyvm_shim":
        result["checked_shim"] += 1
    elif CFG.get("wrong_op"):
        want = CFG["wrong_op"]
    frame = gdb.newest_frame()
    chain = []
    reached = False
    while frame is not None and len(chain) < MAX_FRAMES:
        name = frame.name()
        chain.append(name or "??")
        if name == "main":
            reached = True
            break
        if name is None:
            break
        if frame.unwind_stop_reason() != gdb.FRAME_UNWIND_NO_REASON:
            chain.append("<stop: %s>" % gdb.frame_stop_reason_string(frame.unwind_stop_reason()))
            break
        frame = frame.older()
    if not reached:
        fail(pc, "the backtrace does not reach main", frames=chain)
    elif chain[0] != want:
        fail(pc, "frame 0 is %s, want %s" % (chain[0], want), frames=chain)
    else:
        for i, name in enumerate(chain[:-1]):
            if names_is_jit(name) and chain[i + 1] not in ("vm_jit_run", "vm_run"):
                fail(pc, "a JIT frame is followed by %s" % chain[i + 1], frames=chain)
                break


def names_is_jit(name):
    return name == "tinyvm_shim" or "@" in name


T0 = time.monotonic()


def connect():
    run("set pagination off")
    run("set confirm off")
    run("set sysroot %s" % CFG["sysroot"])
    run("file %s" % CFG["program"])
    for attempt in range(100):  # qemu may not listen yet
        try:
            run("target remote :%d" % CFG["port"])
            return
        except gdb.error:
            if attempt == 99:
                raise
            time.sleep(0.1)


def backtrace():
    gdb.Breakpoint(CFG["break"], internal=True)
    run("continue")
    names, frame = [], gdb.newest_frame()
    while frame is not None and len(names) < MAX_FRAMES:
        names.append(frame.name() or "??")
        frame = frame.older()
    result["frames"] = names
    result["bt"] = run("bt")


def main():
    t0 = T0
    connect()
    if CFG.get("mode") == "bt":
        backtrace()
        return
    bp = gdb.Breakpoint("vm_jit_run", internal=True)
    run("continue")
    bp.delete()
    names, shim_entry = jit_map()
    result["jit_instructions"] = len(names)
    visited = set()
    gdb.Breakpoint("*%#x" % shim_entry, internal=True)
    steps = 0
    pc = u64(gdb.parse_and_eval("$pc"))
    while not exited and steps < CFG["max_steps"] and time.monotonic() - t0 < CFG["time_limit"]:
        if pc in names:
            if pc not in visited:
                visited.add(pc)
            check_pc(pc, names)
            run("stepi")
            steps += 1
        else:
            lr = u64(gdb.parse_and_eval("$x30"))
            if lr in names:  # a stencil called C: run it, stop on return or re-entry
                gdb.Breakpoint("*%#x" % lr, internal=True, temporary=True)
            run("continue")
        if exited:
            break
        pc = u64(gdb.parse_and_eval("$pc"))
    result["steps"] = steps
    result["exited"] = bool(exited)
    result["visited"] = len(visited)
    result["unvisited"] = sorted("%s+%#x" % (names[p], p) for p in set(names) - visited)[:50]


try:
    main()
except Exception as e:  # noqa: BLE001 - report everything to the test
    result["error"] = "%s: %s" % (type(e).__name__, e)
result["elapsed"] = round(time.monotonic() - T0, 2)
with open(CFG["result"], "w") as f:
    json.dump(result, f, indent=1)
try:
    gdb.execute("kill", to_string=True)
except gdb.error:
    pass
