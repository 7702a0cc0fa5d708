# batchcheck.py - GDB Python script for tests/gdb/batchhost.c
# (tests/integration/test_gdb.py, test_batches): at each
# batchhost_checkpoint, what GDB knows of every executor batchhost emitted;
# at every other stop, the backtrace.
#
#   GDBTEST_CONFIG=config.json gdb -batch -nx -x batchcheck.py --args batchhost
#
# config.json: {"result": PATH, "break_on": EXECUTOR, "max_stops": N}. A
# breakpoint is set on the executor's name at the first checkpoint (and
# deleted once hit). The result (JSON): "checkpoints", each a list of
# executors {name, live, held, instr: [addresses], symbols: [what `info symbol`
# names at each instruction, or null], resolves: address of the executor's
# name or null} plus "jit_text_sections" (.text sections of JIT objects in
# `maint info sections`); "break_on_error" if that breakpoint could not be
# set; "stops", each {function, pc, frames: [names], bt}; and
# how the program ended.
import json
import os
import re

import gdb

CFG = json.load(open(os.environ["GDBTEST_CONFIG"]))
result = {"checkpoints": [], "stops": [], "exited": False, "exit_code": None, "error": None}
exited = []
gdb.events.exited.connect(lambda e: exited.append(getattr(e, "exit_code", None)))
gdb.execute("set pagination off")
gdb.execute("set confirm off")
gdb.execute("set width 0")
gdb.Breakpoint("batchhost_checkpoint")
gdb.Breakpoint("batchhost_breakpoint")
name_bp = None


def symbol_at(addr):
    out = gdb.execute("info symbol %#x" % addr, to_string=True).strip()
    if out.startswith("No symbol"):
        return None
    return out.split(" in section ")[0]


def resolves(name):
    try:
        return int(gdb.parse_and_eval("(unsigned long)&%s" % name))
    except gdb.error:
        return None


def checkpoint():
    table = gdb.parse_and_eval("batchhost_exec_table")
    execs = []
    for k in range(int(gdb.parse_and_eval("batchhost_nexec"))):
        e = table[k]
        name = e["name"].string()
        instr = [int(e["instr"][i]) for i in range(5)]
        execs.append({"name": name, "live": int(e["live"]), "held": int(e["held"]),
                      "instr": instr, "symbols": [symbol_at(a) for a in instr[:4]],
                      "resolves": resolves(name)})
    sections = gdb.execute("maint info sections -all-objects", to_string=True)
    jit = 0
    for block in sections.split("Object file: ")[1:]:
        if block.startswith("`<in-memory@"):  # how GDB 13 names a JIT object
            jit += len(re.findall(r": \.text ", block))
    result["checkpoints"].append({"executors": execs, "jit_text_sections": jit})


def stop():
    names = []
    f = gdb.newest_frame()
    while f is not None and len(names) < 32:
        names.append(f.name())
        if f.name() == "main":
            break
        f = f.older()
    result["stops"].append({"function": names[0], "pc": gdb.newest_frame().pc(), "frames": names,
                            "bt": gdb.execute("bt", to_string=True)})


try:
    gdb.execute("run", to_string=True)
    while not exited and len(result["stops"]) + len(result["checkpoints"]) < CFG["max_stops"]:
        if gdb.newest_frame().name() == "batchhost_checkpoint":
            checkpoint()
            if len(result["checkpoints"]) == 1:
                try:
                    name_bp = gdb.Breakpoint(CFG["break_on"])
                except gdb.error as e:  # GDB does not know the name
                    result["break_on_error"] = str(e)
        else:
            stop()
            if name_bp is not None and name_bp.hit_count:
                name_bp.delete()
                name_bp = None
        gdb.execute("continue", to_string=True)
except Exception as e:  # report, never hang
    result["error"] = "%s: %s" % (type(e).__name__, e)
result["exited"] = bool(exited)
result["exit_code"] = exited[0] if exited else None
with open(CFG["result"], "w") as out:
    json.dump(result, out, indent=1)
if not exited:
    gdb.execute("kill", to_string=True)
