"""libgcc's unwinder through JIT frames (docs/unwind.md, and docs/runtime.md,
"Registration with unwinders"): _Unwind_Backtrace at every single-stepped instruction,
glibc backtrace() from helpers, C++ exceptions thrown by a helper and caught below the
shim, and the unwind rows libgcc actually holds for JIT code.

The programs are under tests/unwind/ (each has its own VM glue over the
bundled stencils, not tinyvm's sources); their own checks are described at the
top of each source. Every positive test has a control that must fail:
STENCILRT_FRAMES=0 (nothing registered with libgcc) and UNWIND_TEST_MUTATE,
which hands the runtime a broken executor rule (a dropped register rule or a
wrong CFA offset), so the checks are shown to notice both a missing and a
subtly wrong registration.

Instruction boundaries and the shim's CFI rows are derived here independently
of the programs: boundaries from the disassembly the generated header carries,
rows by decoding the CFI bytes libgcc returns (a small DW_CFA interpreter).
"""
import os
import re
import signal

import sgtest
from sgtest import TRIPLE, TestFailure, check, read, sleb, uleb

ASAN = True
CLANG19 = True  # again on stencils clang-19 compiled (tests/run.py --clang19-build)

T = 120  # seconds per program run; each takes well under 2 s, even under ASan

EXECUTORS = ("loop", "helpers", "mid", "top", "arith", "trapper", "long")  # unwind_step's

# A caller's environment cannot change what is tested: the positive runs use
# the runtime's default for STENCILRT_FRAMES (on) unless it is set outside,
# then they force it on.
BASE_ENV = {"STENCILRT_PERF": "off", "UNWIND_TEST_MUTATE": "", "UNWIND_TEST_ARENA": ""}
if "STENCILRT_FRAMES" in os.environ:
    BASE_ENV["STENCILRT_FRAMES"] = "1"


def _prog(ctx, name):
    path = os.path.join(ctx.build, "tests", "unwind", name)
    check(os.path.exists(path), "%s is not built (ninja -C %s)", path, ctx.build)
    return path


def _run(ctx, name, **env):
    full = dict(BASE_ENV)
    full.update(env)
    return ctx.run([_prog(ctx, name)], timeout=T, env=full)


def _show(p, limit=6000):
    return "exit %s\nstdout:\n%s\nstderr:\n%s" % (p.returncode, p.stdout[-limit:],
                                                  p.stderr[-limit:])


def _passed(p, name):
    check(p.returncode == 0 and p.stdout.rstrip().endswith("%s: PASS" % name),
          "%s did not pass:\n%s", name, _show(p))


def _failed(p, name, what):
    """A control run: the program must report failure itself (exit 1, FAIL)."""
    check(p.returncode == 1 and "%s: FAIL" % name in p.stdout and "%s: PASS" % name
          not in p.stdout, "control (%s): %s should have reported FAIL with exit 1:\n%s",
          what, name, _show(p))


# --- the generated header: disassembly and CFI blobs ---------------------------

_BLOCK = re.compile(r"^/\* (\w+) - \S+\n(.*?)^ \*/", re.M | re.S)
_INSN = re.compile(r"^ \*   ([0-9a-f]{4}): ((?:[0-9a-f]{2} )+)\s*(\S.*)$", re.M)


def _header(ctx):
    return read(os.path.join(ctx.build, "stencils", "jit_stencils-%s.h" % TRIPLE))


def _disassembly(text):
    """{stencil name: [(offset, instruction text)]} from the header's comments."""
    out = {}
    for name, body in _BLOCK.findall(text):
        insns = [(int(o, 16), t.strip()) for o, _, t in _INSN.findall(body)]
        if insns:
            out[name] = insns
    return out


def _hot_sizes(text):
    """{op: bytes of its hot part} from the header (sg_cold_sizes: the last bytes of an
    op's code that are its cold part, placed after every instruction's hot part)."""
    colds = sgtest.cold_sizes(text)
    check(colds is not None, "header has no sg_cold_sizes")
    return {op: len(_blob(text, "sg_code_" + op)) - c for op, c in colds.items()}


def _blob(text, name):
    m = re.search(r"static const uint8_t %s\[(\d+)\] = \{([^}]*)\};" % name, text)
    check(m is not None, "header has no %s", name)
    data = bytes(int(x, 16) for x in re.findall(r"0x([0-9a-f]{2})", m.group(2)))
    check(len(data) == int(m.group(1)), "%s: size mismatch", name)
    return data


def _define(text, name):
    m = re.search(r"^#define %s \(?(-?(?:0x[0-9a-f]+|\d+))\)?" % name, text, re.M)
    check(m is not None, "header has no #define %s", name)
    return int(m.group(1), 0)


# --- a small DWARF CFA interpreter ----------------------------------------------

def _cfa_rows(insns, code_align, data_align, init=None):
    """Rows [(loc, (cfa, regs))] of a CFA program; init is the CIE's row."""
    loc = 0
    cfa, regs = init if init else (None, {})
    cfa, regs = cfa, dict(regs)
    init_regs = dict(regs)
    stack, rows = [], []
    i = 0

    def emit():
        rows.append((loc, (cfa, tuple(sorted(regs.items())))))

    while i < len(insns):
        op = insns[i]
        i += 1
        hi, lo = op & 0xc0, op & 0x3f
        if hi == 0x40 or op in (0x02, 0x03, 0x04, 0x01):
            emit()
            if hi == 0x40:
                loc += lo * code_align
            elif op == 0x01:
                loc = int.from_bytes(insns[i:i + 8], "little")
                i += 8
            else:
                n = {0x02: 1, 0x03: 2, 0x04: 4}[op]
                loc += int.from_bytes(insns[i:i + n], "little") * code_align
                i += n
        elif hi == 0x80:
            off, i = uleb(insns, i)
            regs[lo] = ("at", off * data_align)
        elif hi == 0xc0:
            regs.pop(lo, None)
            if lo in init_regs:
                regs[lo] = init_regs[lo]
        elif op == 0x00:
            pass
        elif op in (0x05, 0x11, 0x14, 0x15):
            r, i = uleb(insns, i)
            off, i = (uleb if op in (0x05, 0x14) else sleb)(insns, i)
            regs[r] = ("at" if op in (0x05, 0x11) else "val", off * data_align)
        elif op == 0x06:
            r, i = uleb(insns, i)
            regs.pop(r, None)
            if r in init_regs:
                regs[r] = init_regs[r]
        elif op in (0x07, 0x08):
            r, i = uleb(insns, i)
            regs[r] = ("undefined",) if op == 0x07 else ("same",)
        elif op == 0x09:
            r, i = uleb(insns, i)
            r2, i = uleb(insns, i)
            regs[r] = ("reg", r2)
        elif op == 0x0a:
            stack.append((cfa, dict(regs)))
        elif op == 0x0b:
            cfa, regs = stack.pop()
        elif op in (0x0c, 0x12):
            r, i = uleb(insns, i)
            off, i = uleb(insns, i) if op == 0x0c else sleb(insns, i)
            cfa = (r, off if op == 0x0c else off * data_align)
        elif op == 0x0d:
            r, i = uleb(insns, i)
            cfa = (r, cfa[1])
        elif op in (0x0e, 0x13):
            off, i = uleb(insns, i) if op == 0x0e else sleb(insns, i)
            cfa = (cfa[0], off if op == 0x0e else off * data_align)
        elif op in (0x0f, 0x10, 0x16):
            if op != 0x0f:
                r, i = uleb(insns, i)
            n, i = uleb(insns, i)
            expr = bytes(insns[i:i + n])
            i += n
            if op == 0x0f:
                cfa = ("expr", expr)
            else:
                regs[r] = ("expr" if op == 0x10 else "valexpr", expr)
        elif op == 0x2e:
            _, i = uleb(insns, i)
        else:
            raise TestFailure("CFA opcode %#x not understood" % op)
    emit()
    return rows


def _row_at(rows, pc):
    row = None
    for loc, r in rows:
        if loc <= pc:
            row = r
    return row


_REGS = {0: "rax", 1: "rdx", 2: "rcx", 3: "rbx", 4: "rsi", 5: "rdi", 6: "rbp", 7: "rsp",
         16: "rip"}


def _fmt_row(row):
    (cfa, regs) = row
    reg = lambda r: _REGS.get(r, "r%d" % r)  # noqa: E731
    s = "CFA=%s%+d" % (reg(cfa[0]), cfa[1]) if cfa and cfa[0] != "expr" else "CFA=%r" % (cfa,)
    for r, rule in regs:
        s += " %s=%s" % (reg(r), "[CFA%+d]" % rule[1] if rule[0] == "at" else repr(rule))
    return s


# --- unwind_step output ------------------------------------------------------------

def _parse_step(out):
    res = {"layout": {}, "visited": {}, "executor": {}, "fde": {}, "last": {}}
    for line in out.splitlines():
        m = re.match(r"layout (\w+): (.*) end@(\d+)$", line)
        if m:
            res["layout"][m.group(1)] = ([(op, int(off)) for op, off in
                                          re.findall(r"(\w+)@(\d+)", m.group(2))],
                                         int(m.group(3)))
        m = re.match(r"visited (\w+):(.*)$", line)
        if m:
            res["visited"][m.group(1)] = sorted(int(x) for x in m.group(2).split())
        m = re.match(r"executor (\w+): (.*)$", line)
        if m:
            res["executor"][m.group(1)] = {k: int(v) for k, v in
                                           re.findall(r"(\w+)=(\d+)", m.group(2))}
        m = re.match(r"shim: (.*)$", line)
        if m:
            res["shim"] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(1))}
        m = re.match(r"traps=(\d+) jit_traps=(\d+) helper_traps=(\d+) max_depth=(\d+)", line)
        if m:
            res["traps"], res["jit_traps"], res["helper_traps"], res["max_depth"] = map(
                int, m.groups())
        m = re.match(r"checks: jit=(\d+) \(failed (\d+), main reached (\d+), not reached (\d+)\)"
                     r" helper=(\d+) \(failed (\d+)\)", line)
        if m:
            (res["jit_checks"], res["jit_failed"], res["main_reached"], res["main_not_reached"],
             res["helper_checks"], res["helper_failed"]) = map(int, m.groups())
        m = re.match(r"fde (\w+): last byte (.*)$", line)
        if m:
            res["last"][m.group(1)] = m.group(2)
            continue
        m = re.match(r"fde (\w+): (.*)$", line)
        if m:
            if m.group(2) == "none":
                res["fde"][m.group(1)] = None
            else:
                res["fde"][m.group(1)] = dict(re.findall(r"(\w+)=(\S+)", m.group(2)))
    return res


def _is_straight(insns):
    """No branch, return or non-returning call before the last instruction."""
    for _, text in insns[:-1]:
        mnem = text.split()[0]
        if mnem.startswith("j") or mnem.startswith("ret"):
            return False
    return not any("vm_trap" in t for _, t in insns)


def test_unwind_every_instruction(ctx):
    """_Unwind_Backtrace at every instruction of the shim and seven executors
    (loop, helpers, two levels of re-entry, div/mod paths, a div that calls
    vm_trap, more than a page of code): the program checks each chain
    frame by frame down to main and the restored CFA/RA/callee-saved
    registers; here: the stepping really covered the code, at instruction
    boundaries only (from the header's disassembly)."""
    p = _run(ctx, "unwind_step")
    _passed(p, "unwind_step")
    r = _parse_step(p.stdout)
    dis = _disassembly(_header(ctx))
    check("config: frames=1" in p.stdout, "libgcc registration is not on:\n%s", _show(p))
    check(r.get("jit_checks", 0) > 0 and r["jit_checks"] == r["jit_traps"]
          and r["jit_failed"] == 0 and r["main_not_reached"] == 0,
          "JIT checks: %s", {k: r.get(k) for k in ("jit_checks", "jit_traps", "jit_failed")})
    check(r["helper_checks"] > 0 and r["helper_failed"] == 0, "helper checks: %d failed of %d",
          r["helper_failed"], r["helper_checks"])
    check(r["max_depth"] >= 3, "re-entry depth reached only %d", r["max_depth"])
    _check_registrations(p, alive=True)

    # The shim: straight-line code, every instruction must have been stepped.
    shim_name = [n for n in dis if n not in r["layout"] and n.endswith("shim")]
    check(len(shim_name) == 1, "cannot find the shim's disassembly in the header")
    shim_offs = [o for o, _ in dis[shim_name[0]]]
    check(r["visited"]["shim"] == shim_offs,
          "shim: stepped offsets %s, its instructions are at %s", r["visited"]["shim"], shim_offs)

    check(set(r["layout"]) == set(EXECUTORS), "executors: %s", sorted(r["layout"]))
    hot = _hot_sizes(_header(ctx))
    cold_at = {}  # executor: {instruction: where its cold part starts}
    for ex, (ops, end) in r["layout"].items():
        visited = set(r["visited"][ex])
        boundaries, must = set(), set()
        # [hot parts][cold parts], each in instruction order (runtime/emit.c)
        cold = end - sum(len(_blob(_header(ctx), "sg_code_" + op)) - hot[op] for op, _ in ops)
        hot_end, cold_at[ex] = cold, {}
        for i, (op, off) in enumerate(ops):
            nxt = ops[i + 1][1] if i + 1 < len(ops) else hot_end
            check(op in dis, "no disassembly for op %s", op)
            insns = [(o, t) for o, t in dis[op] if o < hot[op] and off + o < nxt]
            boundaries |= {off + o for o, _ in insns}
            cold_at[ex][i] = cold
            boundaries |= {cold + o - hot[op] for o, _ in dis[op] if o >= hot[op]}
            cold += len(_blob(_header(ctx), "sg_code_" + op)) - hot[op]
            if _is_straight(insns) and hot[op] == len(_blob(_header(ctx), "sg_code_" + op)) \
                    and off in visited:  # it ran (C checked: = interpreter)
                must |= {off + o for o, _ in insns}
        stray = sorted(visited - boundaries)
        check(not stray, "%s: stepped at offsets %s, which are not instruction boundaries",
              ex, stray)
        missed = sorted(must - visited)
        check(not missed, "%s: instructions of straight-line stencils never stepped: %s",
              ex, missed)
        e = r["executor"][ex]
        # Every instruction runs, except trapper's ret (its div traps).
        check(e["executed"] == e["instructions"] - (ex == "trapper") == e["starts_visited"]
              and e["failed"] == 0 and e["checks"] >= e["distinct_pcs"] == len(visited),
              "%s: %s", ex, e)
    # trapper's div called vm_trap: the call at the very end of the stencil, in its
    # cold part when it has one (then after every hot part of the executor).
    ops, _ = r["layout"]["trapper"]
    k, div_at = [(k, off) for k, (op, off) in enumerate(ops) if op == "div"][0]
    last = dis["div"][-1][0]
    trap_call = (cold_at["trapper"][k] + last - hot["div"] if last >= hot["div"]
                 else div_at + last)
    check("call" in dis["div"][-1][1] and trap_call in r["visited"]["trapper"],
          "trapper: div's call of vm_trap (+%d) was not stepped", trap_call)
    cold_pcs = [pc for pc in r["visited"]["trapper"] if pc >= cold_at["trapper"][0]]
    check(hot["div"] == len(_blob(_header(ctx), "sg_code_div")) or len(cold_pcs) >= 4,
          "trapper: only %d PCs of cold code stepped (%s)", len(cold_pcs), cold_pcs)
    print("trapper: %d PCs of div's cold part stepped and unwound" % len(cold_pcs))
    m = re.search(r"^helper checks: (.*)$", p.stdout, re.M)
    counts = dict(re.findall(r"(\w+)=(\d+)", m.group(1))) if m else {}
    check(sorted(counts) == ["vm_call", "vm_native", "vm_print", "vm_trap"] and
          all(int(v) > 0 for v in counts.values()), "helper checks: %s", counts)


def _check_registrations(p, alive):
    m = re.search(r"^registrations: FDEs found for (\d+) of (\d+) code ranges while alive, "
                  r"(\d+) after sr_runtime_destroy$", p.stdout, re.M)
    check(m is not None, "no registrations line:\n%s", _show(p))
    found, total, stale = map(int, m.groups())
    check(found == (total if alive else 0) and stale == 0,
          "libgcc found FDEs for %d of %d JIT code ranges (expected %d) and %d after the "
          "runtime was destroyed (expected 0)", found, total, total if alive else 0, stale)


def test_unwind_every_instruction_small_arenas(ctx):
    """The same with one-page code arenas and one code view (with two,
    executors share pages): each executor in an arena of its own (the long
    one in three pages), eight libgcc registrations."""
    p = _run(ctx, "unwind_step", UNWIND_TEST_ARENA="4096", STENCILRT_CODE_VIEWS="1")
    _passed(p, "unwind_step")
    check(re.search(r"^config: frames=1 gdb=\d; %d arena\(s\), %d executors, %d libgcc "
                    r"registrations$" % (len(EXECUTORS), len(EXECUTORS), len(EXECUTORS) + 1),
                    p.stdout, re.M), "not one arena per executor:\n%s", _show(p))
    r = _parse_step(p.stdout)
    check(r["jit_failed"] == 0 and r["helper_failed"] == 0 and r["jit_checks"] > 0,
          "checks failed: %s", _show(p))
    check(int(r["fde"]["long"]["range"]) > 8192 and r["last"]["long"] == "same FDE",
          "the long executor's FDE: %s, last byte: %s", r["fde"]["long"], r["last"]["long"])
    _check_registrations(p, alive=True)


def test_unwind_every_instruction_control(ctx):
    """Control: with STENCILRT_FRAMES=0 the same checks fail at every JIT PC
    (the backtrace stops in JIT code and never reaches main)."""
    p = _run(ctx, "unwind_step", STENCILRT_FRAMES="0")
    _failed(p, "unwind_step", "STENCILRT_FRAMES=0")
    r = _parse_step(p.stdout)
    check(r.get("jit_checks", 0) > 0 and r["jit_failed"] == r["jit_checks"]
          and r["main_reached"] == 0, "control: %s", {k: r.get(k) for k in (
              "jit_checks", "jit_failed", "main_reached")})
    check("without reaching main" in p.stdout, "control: unexpected failure:\n%s", _show(p))
    _check_registrations(p, alive=False)
    check(all(v is None for v in r["fde"].values()) and r["fde"],
          "control: libgcc still finds FDEs for JIT code: %s", r["fde"])


def test_unwind_every_instruction_detects_broken_rules(ctx):
    """The per-PC checks see a subtly wrong executor rule, not only a missing
    one: each register the stencils clobber, dropped from the rule, is
    reported as wrongly restored; a CFA off by 8 makes the chain fail."""
    for reg, name in ((6, "rbp"), (12, "r12"), (13, "r13"), (14, "r14")):
        p = _run(ctx, "unwind_step", UNWIND_TEST_MUTATE="drop-%d" % reg)
        _failed(p, "unwind_step", "rule for %s dropped" % name)
        check("unwound %s=" % name in p.stdout,
              "dropping %s's rule was not reported as a wrong %s:\n%s", name, name, _show(p))
    p = _run(ctx, "unwind_step", UNWIND_TEST_MUTATE="cfa+8")
    check(p.returncode != 0 and "unwind_step: PASS" not in p.stdout,
          "a CFA off by 8 went unnoticed:\n%s", _show(p))


def test_unwind_fde_contract(ctx):
    """The rows libgcc holds for JIT code: the shim's FDE is the shim's
    compiled CFI and covers exactly the shim; every executor is covered, whole,
    by one FDE whose single row equals the shim's row at its call into JIT code
    (decoded here from the bytes libgcc returns, compared with the header)."""
    p = _run(ctx, "unwind_step")
    _passed(p, "unwind_step")
    r = _parse_step(p.stdout)
    text = _header(ctx)
    cie_want = _blob(text, "sg_shim_cie_insns")
    shim_want = _blob(text, "sg_shim_fde_insns")
    ex_want = _blob(text, "sg_executor_cfi")
    code_align = _define(text, "SG_UNWIND_CODE_ALIGN")
    data_align = _define(text, "SG_UNWIND_DATA_ALIGN")
    ra = _define(text, "SG_UNWIND_RA_COLUMN")
    call_off = _define(text, "SG_SHIM_CALL_OFFSET")
    fde_start = _define(text, "SG_SHIM_FDE_START")
    fde_size = _define(text, "SG_SHIM_FDE_SIZE")

    def strip(hexs):
        return bytes.fromhex(hexs if hexs != "-" else "").rstrip(b"\0")  # DW_CFA_nop padding

    check(set(r["fde"]) == {"shim"} | set(EXECUTORS) and
          all(r["fde"].values()), "libgcc has no FDE for some JIT code: %s", r["fde"])
    for name, f in r["fde"].items():
        check(f["aug"] == "zR" and int(f["code_align"]) == code_align and
              int(f["data_align"]) == data_align and int(f["ra"]) == ra,
              "%s: CIE %s differs from the header's factors", name, f)
        check(strip(f["cie_insns"]) == cie_want, "%s: CIE instructions %s, header has %s",
              name, f["cie_insns"], cie_want.hex())
        check(f["func_off"] == f["pc_begin_off"], "%s: bases.func != pc_begin: %s", name, f)
    cie_row = _cfa_rows(cie_want, code_align, data_align)[-1][1]
    init = (cie_row[0], dict(cie_row[1]))

    s = r["fde"]["shim"]
    check(int(s["pc_begin_off"]) == fde_start and int(s["range"]) == fde_size,
          "shim FDE covers [%s, +%s), expected [%d, +%d)", s["pc_begin_off"], s["range"],
          fde_start, fde_size)
    check(strip(s["fde_insns"]) == shim_want, "shim FDE instructions %s, header has %s",
          s["fde_insns"], shim_want.hex())
    shim_rows = _cfa_rows(strip(s["fde_insns"]), code_align, data_align, init)
    at_call = _row_at(shim_rows, call_off)
    check(at_call[0] and at_call[0][0] == 6,
          "the shim's row at its call is not frame-pointer based: %s", _fmt_row(at_call))

    for ex in EXECUTORS:
        f = r["fde"][ex]
        size = r["layout"][ex][1]
        begin, rng = int(f["pc_begin_off"]), int(f["range"])
        check(begin <= 0 and begin + rng >= size,
              "%s: FDE [%d, +%d) does not cover its %d bytes", ex, begin, rng, size)
        check(r["last"][ex] == "same FDE", "%s: its last byte is under %s", ex, r["last"][ex])
        check(strip(f["fde_insns"]) == ex_want, "%s: FDE instructions %s, header has %s",
              ex, f["fde_insns"], ex_want.hex())
        rows = _cfa_rows(strip(f["fde_insns"]), code_align, data_align, init)
        check(len({row for _, row in rows}) == 1,
              "%s: the executor FDE has several rows: %s", ex, rows)
        check(rows[-1][1] == at_call,
              "%s: executor row %s != the shim's row at its call (+%#x) %s", ex,
              _fmt_row(rows[-1][1]), call_off, _fmt_row(at_call))


# --- glibc backtrace() -------------------------------------------------------------

def test_unwind_backtrace_from_helper(ctx):
    """backtrace() in a helper at re-entry depth 3 returns the three JIT frames
    (each in the instruction that made the call), the C frames between them,
    and main; also from four threads while runtimes are created and destroyed."""
    p = _run(ctx, "unwind_bt")
    _passed(p, "unwind_bt")
    check("depth 1: ok" in p.stdout and "depth 3: ok" in p.stdout, "%s", _show(p))
    block = p.stdout.split("depth 3:", 1)[1]
    jit = re.findall(r"JIT (\w+)\[(\d+)\] (\w+)", block.split("depth 3: ok")[0])
    check(jit == [("c", "1", "native"), ("b", "3", "call"), ("a", "2", "call")],
          "JIT frames of the depth-3 backtrace: %s", jit)
    m = re.search(r"threads: (\d+) workers x (\d+) depth-3 backtraces, (\d+) workers wrong; "
                  r"(\d+) runtimes", p.stdout)
    check(m and m.group(3) == "0" and int(m.group(4)) > 0, "threads: %s", _show(p))


def test_unwind_backtrace_control(ctx):
    """Control: with STENCILRT_FRAMES=0 backtrace() stops at the first JIT frame."""
    p = _run(ctx, "unwind_bt", STENCILRT_FRAMES="0")
    _failed(p, "unwind_bt", "STENCILRT_FRAMES=0")
    block = p.stdout.split("depth 3:", 1)[-1].split("depth 3: WRONG", 1)
    frames = re.findall(r"^  #\d+ .*$", block[0], re.M)
    check(len(block) == 2 and frames and frames[-1].endswith("JIT c[1] native") and
          "expected glue_run, got nothing" in block[1],
          "control: the backtrace should end at the first JIT frame:\n%s", _show(p))


# --- C++ exceptions ----------------------------------------------------------------

def test_unwind_cpp_exception(ctx):
    """A C++ exception thrown by a helper crosses three JIT levels (and the C++
    frames between them, running their destructors) and is caught below the
    outermost shim with its payload and the catcher's register-held locals
    intact; also rethrown at each level, caught between JIT frames with the
    outer JIT code going on correctly, through runtimes registered and
    deregistered after the first throws, and from a helper called on a cold path
    (div's trap path, after every hot part)."""
    p = _run(ctx, "unwind_throw")
    _passed(p, "unwind_throw")
    for line in ("A: 200 of 200", "B: 50 of 50", "C: 50 of 50", "D: plain(41) = 42",
                 "E: 40 of 40", "F: 8 of 8 throws from div's cold part"):
        check(line in p.stdout, "missing %r:\n%s", line, _show(p))


def test_unwind_cpp_exception_control(ctx):
    """Control: with STENCILRT_FRAMES=0 the throw finds no handler through the
    JIT frames: std::terminate, abort (SIGABRT)."""
    p = _run(ctx, "unwind_throw", STENCILRT_FRAMES="0")
    check(p.returncode == -signal.SIGABRT and "terminate called after throwing" in p.stderr
          and "VmError" in p.stderr and "PASS" not in p.stdout,
          "control: expected std::terminate and SIGABRT:\n%s", _show(p))


def test_unwind_cpp_exception_detects_broken_rule(ctx):
    """Control: an executor rule without r12/r13/r14 lets the exception reach
    the handler, but with registers the program notices are wrong."""
    for reg in (12, 13, 14):
        p = _run(ctx, "unwind_throw", UNWIND_TEST_MUTATE="drop-%d" % reg)
        _failed(p, "unwind_throw", "rule for r%d dropped" % reg)
