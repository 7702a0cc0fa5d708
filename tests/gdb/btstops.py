# btstops.py - GDB Python script: run a program with breakpoints on helper
# functions and record the backtrace at every stop (tests/integration/test_gdb.py).
#
#   GDBTEST_CONFIG=config.json gdb -batch -nx -x btstops.py --args PROGRAM ARGS...
#
# config.json: {"result": PATH, "breakpoints": [LOCATION...], "max_stops": N}.
# The result (JSON) holds, per stop: the function stopped in, the text of `bt`,
# and the frames from a walk of the Python API (name or null for "??", pc,
# unwind stop reason of each frame); plus `info sharedlibrary` at the first
# stop, and how the program ended.
import json
import os

import gdb

CFG = json.load(open(os.environ["GDBTEST_CONFIG"]))
MAX_FRAMES = 64
result = {"stops": [], "exited": False, "exit_code": None, "error": None, "sharedlibrary": ""}
exited = []


def on_exit(event):
    exited.append(getattr(event, "exit_code", None))


gdb.events.exited.connect(on_exit)
gdb.execute("set pagination off")
gdb.execute("set confirm off")
gdb.execute("set width 0")
for loc in CFG["breakpoints"]:
    gdb.Breakpoint(loc)


def record():
    frames = []
    f = gdb.newest_frame()
    while f is not None and len(frames) < MAX_FRAMES:
        reason = f.unwind_stop_reason()
        frames.append({"name": f.name(), "pc": hex(f.pc()), "reason": reason,
                       "reason_text": gdb.frame_stop_reason_string(reason)})
        f = f.older()
    result["stops"].append({"function": frames[0]["name"] if frames else None,
                            "bt": gdb.execute("bt", to_string=True), "frames": frames})


try:
    gdb.execute("run", to_string=True)
    while not exited and len(result["stops"]) < CFG.get("max_stops", 50):
        if not result["sharedlibrary"]:
            result["sharedlibrary"] = gdb.execute("info sharedlibrary", to_string=True)
        record()
        gdb.execute("continue", to_string=True)
except Exception as e:  # report, never hang
    result["error"] = "%s: %s" % (type(e).__name__, e)
result["exited"] = bool(exited)
result["exit_code"] = exited[0] if exited else None
with open(CFG["result"], "w") as out:
    json.dump(result, out, indent=1)
if not exited:
    gdb.execute("kill", to_string=True)
