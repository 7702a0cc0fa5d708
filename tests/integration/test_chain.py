"""Patching after emit, end to end: tinyvm --chain compiles each basic block
into an executor when it first runs and links the jumps between blocks with
sr_patch_jump, so that after the first pass control goes from executor to
executor without leaving JIT code. Results must be the interpreter's, the
links must really be taken (side exits stop once a jump is linked), and GDB
and libgcc's backtrace() must walk through code reached over a linked jump.
(test_runtime_api has the API's own cases; test_perf the jitdump reloads.)"""
import os
import re

from sgtest import check, write

T = 120
# (backtrace.tvm is left out: its result is the depth of the C stack, which
# differs by mode; test_backtraces_through_a_linked_jump walks it instead.)
PROGRAMS = ["countdown", "fib", "loop", "reenter", "div0", "trap"]

# Three passes through one loop block; each calls a native helper, the last
# two after the loop's back edge was linked to the block itself.
LOOP3 = """func main 0
    push 0
    store 0
top:
    load 0
    native %s
    pop
    load 0
    addi 1
    store 0
    load 0
    push 3
    lt
    jump_if_nonzero top
    load 0
    ret
"""


def tinyvm(ctx):
    return os.path.join(ctx.build, "stencils", "tinyvm")


def stats(stderr):
    m = re.search(r"chain: (\d+) blocks compiled, (\d+) jumps linked, (\d+) side exits taken",
                  stderr)
    check(m, "no chain statistics in:\n%s", stderr[-2000:])
    return tuple(int(x) for x in m.groups())


def test_chained_blocks_give_the_interpreters_results(ctx):
    """Every bundled program: same output and exit status as the interpreter;
    every side exit is taken once, then its jump is linked for good."""
    for name in PROGRAMS:
        prog = ctx.path("stencils", "programs", name + ".tvm")
        want = ctx.run([tinyvm(ctx), "--interp", prog], timeout=T)
        got = ctx.run([tinyvm(ctx), "--chain", "--stats", prog], timeout=T)
        check((got.returncode, got.stdout) == (want.returncode, want.stdout),
              "%s: --chain gave %d %r, the interpreter %d %r", name, got.returncode,
              got.stdout, want.returncode, want.stdout)
        if got.returncode == 0:
            blocks, links, exits = stats(got.stderr)
            check(links == exits, "%s: %d side exits for %d links: a linked jump exited again",
                  name, exits, links)
    _, links, exits = stats(ctx.run([tinyvm(ctx), "--chain", "--stats",
                                     ctx.path("stencils", "programs", "loop.tvm")],
                                    timeout=T).stderr)
    check(links >= 3 and exits == links,
          "loop.tvm (3,000,000 iterations): %d links, %d side exits", links, exits)


def test_backtraces_through_a_linked_jump(ctx):
    """At the third pass through the loop block, entered over its linked back
    edge: libgcc's backtrace() and GDB both go from the helper through the
    block's executor to the dispatcher and main."""
    bt = os.path.join(ctx.tmp, "bt.tvm")
    write(bt, LOOP3 % "backtrace")
    p = ctx.run([tinyvm(ctx), "--chain", "--stats", bt], timeout=T, check=True)
    check(p.stdout.strip() == "3", "bt.tvm printed %r", p.stdout)
    check(stats(p.stderr) == (3, 3, 3), "blocks, links, exits: %s", stats(p.stderr))
    traces = p.stderr.split("backtrace: ")[1:]
    check(len(traces) == 3, "%d backtraces", len(traces))
    last = traces[2]
    for fn in ("vm_native", "vm_chain_run", "vm_run", "main"):
        check("(%s+" % fn in last, "the third backtrace misses %s:\n%s", fn, last)

    gdb_prog = os.path.join(ctx.tmp, "gdb.tvm")
    write(gdb_prog, LOOP3 % "breakpoint")
    p = ctx.run(["gdb", "-batch", "-nx", "-ex", "break tinyvm_breakpoint if v == 2",
                 "-ex", "run", "-ex", "bt", "--args", tinyvm(ctx), "--chain", gdb_prog],
                timeout=T)
    frames = re.findall(r"^#\d+\s+(?:0x[0-9a-f]+ in )?(\S+)", p.stdout, re.M)
    # (vm_native tail-calls tinyvm_breakpoint: it has no frame of its own)
    want = ["tinyvm_breakpoint", "native@main.b1[2]", "vm_chain_run", "vm_run", "main"]
    check(frames == want, "GDB's backtrace %s, want %s\n%s", frames, want, p.stdout[-3000:])
