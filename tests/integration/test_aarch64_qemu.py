"""AArch64 target, runtime side: stencilrt and tinyvm cross-compiled for
aarch64-linux-gnu and run under qemu-user.

* tinyvm: every bundled program gives the same output and exit status
  interpreted and JIT-compiled; glibc backtrace() from a helper walks through
  the JIT frames to main;
* relocation kinds run for real: every op of the relocation-kind fixtures
  (tests/fixtures/aarch64/relocs, built by the host generator) executed with
  checked results; range checks at the edges of MOVZ/MOVK, TBZ, CBZ and
  PC-relative data holes (SR_ERANGE, never a truncated patch); the alignment
  checks of the scaled LO12 forms; a call to a helper beyond +-128 MiB goes
  through a veneer;
* a patching differential against ld.lld-22 -m aarch64linux: every op of the
  bundled set and of the fixtures, linked by lld at the address and with the
  symbol values the runtime used, must have the same bytes (GOT loads and
  veneered calls compared by where they lead);
* libgcc unwinding at sampled PCs (tests/aarch64/a64_sample.c): a POSIX timer
  raises SIGPROF while executors run under `qemu-aarch64 -singlestep` (so a
  signal can land on any instruction); at every sample in JIT memory
  _Unwind_Backtrace must reach main through the right frames, and so must
  every sample in the VM's C functions around them; the share of JIT
  instruction addresses sampled is reported (must be >= 95%); a control with
  STENCILRT_FRAMES=0 must fail every sample;
* a C++ exception thrown in a helper, through JIT frames and re-entered JIT
  frames, caught below the shim (tests/aarch64/a64_exception.cpp);
* code emitted into memory freed by earlier executors, with default settings
  (tests/stress/code_reuse.c): qemu-user does not see code written through
  the second of two views, so sr_runtime_create's probe falls back to one
  view, says so once on stderr, and every result is right;
* GDB (gdb-multiarch against qemu-aarch64 -g): a backtrace from a helper
  names the stencils (GDB JIT interface) and reaches main; single-stepping
  the shim and an executor instruction by instruction, the backtrace reaches
  main at every PC.

The cross build is <build>-aarch64 next to the native build (or
$STENCILGEN_AARCH64_BUILD), configured with
`meson setup build-aarch64 --cross-file cross/aarch64-linux-gnu.ini`. Without
the cross toolchain (qemu-aarch64, aarch64-linux-gnu-gcc/g++) these tests are
not collected (a note says so on stderr); with it, a missing cross build is a
failure."""
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys

from sgtest import (A64_CC, A64_QEMU, A64_SYSROOT, Header, TestFailure, a64_cross_build,
                    a64_missing, check, emitted_patch_kinds, patch_kinds, plain_op_name, read,
                    write)

ASAN = False
# Again in the tree whose stencils clang-19 compiled (tests/run.py
# --clang19-build; its cross build beside it): AArch64 is where the two
# compilers' code differs.
CLANG19 = True

A64 = "aarch64-unknown-linux-gnu"
SYSROOT = A64_SYSROOT
QEMU = A64_QEMU
# qemu 7.2's GDB stub does not give GDB the pointer-authentication mask, so GDB
# cannot strip a signed return address in any frame, compiled C's included:
# under GDB, return addresses stay unsigned (BTI is still enforced).
QEMU_GDB = ["qemu-aarch64", "-cpu", "max,pauth=off", "-L", SYSROOT]
CC = A64_CC
CXX = "aarch64-linux-gnu-g++"
FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "fixtures", "aarch64", "relocs")
T = 300
SR_ERANGE = 3
M64 = (1 << 64) - 1

MISSING = a64_missing(CXX)


# --- the cross build and its programs ---------------------------------------------

cross_build = a64_cross_build


def qemu(ctx, argv, timeout=T, env=None, input=None, singlestep=False, seed=None):
    """argv under qemu -cpu max; seed fixes the guest's randomness, PAC keys included."""
    return ctx.run(QEMU + (["-singlestep"] if singlestep else []) +
                   (["-seed", str(seed)] if seed is not None else []) + argv,
                   timeout=timeout, env=env, input=input)


def fixture_program(ctx, manifest, name, *extra):
    """Generate manifest's AArch64 header with the host generator (extra: more
    of its options) and build tests/aarch64/a64_reloc.c (with
    tests/common/emit_plan.c) against it and the cross-built runtime. Returns (program, header, outdir)."""
    xb = cross_build(ctx)
    out = os.path.join(ctx.tmp, "gen-" + name)
    ctx.build_stencils(manifest, out, "--target", A64, *extra, timeout=T)
    exe = os.path.join(ctx.tmp, "a64_reloc-" + name)
    ctx.run([CC, "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE",
             "-I", out, "-I", ctx.path("runtime"), "-I", ctx.path("stencils"),
             "-I", ctx.path("tests", "common"),
             ctx.path("tests", "aarch64", "a64_reloc.c"),
             ctx.path("tests", "common", "emit_plan.c"),
             os.path.join(xb, "runtime", "libstencilrt.a"), "-lpthread", "-o", exe],
            check=True, timeout=T)
    header = Header(os.path.join(out, "jit_stencils-%s.h" % A64))
    return exe, header, out


def stencil_numbers(ctx, exe):
    out = qemu(ctx, [exe, "info"], timeout=60).stdout
    return {name: int(i) for i, name in re.findall(r"^stencil (\d+) (\S+) \d+$", out, re.M)}


def run_plan(ctx, exe, lines, timeout=T):
    p = qemu(ctx, [exe], input="\n".join(lines) + "\n", timeout=timeout)
    check(p.returncode == 0, "a64_reloc exited %d\nstderr:\n%s\nstdout (end):\n%s", p.returncode,
          p.stderr[-3000:], p.stdout[-3000:])
    return parse_results(p.stdout)


def parse_results(out):
    """{label: {"ok": bool, "status", "message", "addr": [..], "base", "mem", "result"}}."""
    res, cur = {}, None
    for line in out.splitlines():
        f = line.split(" ")
        if f[0] == "exec":
            cur = res[f[1]] = {"ok": f[2] == "ok", "addr": []}
            if f[2] == "ok":
                cur["code_size"] = int(f[4])
            else:
                cur["status"] = int(f[3])
                cur["message"] = " ".join(f[4:])
        elif f[0] == "addr":
            cur["addr"].append(int(f[2], 16))
        elif f[0] == "mem":
            cur["base"] = int(f[1], 16)
            cur["mem"] = bytes.fromhex(f[2]) if len(f) > 2 else b""
        elif f[0] == "result":
            res[f[1]]["result"] = int(f[2])
        elif f[0] == "sym":
            res.setdefault("_syms", {})[int(f[1])] = int(f[2], 16)
        elif f[0] == "far":
            res["_far"] = int(f[1], 16)
    return res


def exec_lines(label, instrs, run=True, dumplen=0x4000):
    """instrs: [(op number, target, [operands])]."""
    lines = ["exec %s %d %x %d" % (label, len(instrs), dumplen, 1 if run else 0)]
    for op, target, ops in instrs:
        ops = list(ops) + [0] * (4 - len(ops))
        lines.append("ins %d %d %s" % (op, target, " ".join(
            o if isinstance(o, str) else "%x" % (o & M64) for o in ops)))
    return lines


def signed(v):
    v &= M64
    return v - (1 << 64) if v >> 63 else v


def word(mem, off):
    return struct.unpack_from("<I", mem, off)[0]


def sext(v, bits):
    return v - (1 << bits) if v >> (bits - 1) else v


# --- 1. tinyvm --------------------------------------------------------------------

def test_aarch64_tinyvm_interp_and_jit_agree(ctx):
    xb = cross_build(ctx)
    tinyvm = os.path.join(xb, "stencils", "tinyvm")
    progs = sorted(f for f in os.listdir(ctx.path("stencils", "programs")) if f.endswith(".tvm"))
    check(len(progs) >= 6, "programs: %s", progs)
    for prog in progs:
        path = ctx.path("stencils", "programs", prog)
        i = qemu(ctx, [tinyvm, "--interp", path], timeout=120)
        j = qemu(ctx, [tinyvm, "--jit", path], timeout=120)
        check((i.stdout, i.returncode) == (j.stdout, j.returncode),
              "%s: interpreter %r (exit %d), JIT %r (exit %d)\nJIT stderr:\n%s", prog, i.stdout,
              i.returncode, j.stdout, j.returncode, j.stderr[-2000:])
        if prog == "backtrace.tvm":
            frames = j.stderr.splitlines()
            jit = [l for l in frames if re.match(r"^\[0x[0-9a-f]+\]$", l)]
            check(len(jit) == 3 and any("(main+" in l for l in frames),
                  "backtrace() from a helper: %d JIT frames (want 3), main %s:\n%s", len(jit),
                  any("(main+" in l for l in frames), j.stderr)
    # The JIT really ran the AArch64 stencils: a hot loop agrees too, also with
    # its blocks linked by patching after emit (B instructions re-pointed).
    j = qemu(ctx, [tinyvm, "--jit", "--time", ctx.path("stencils", "programs", "loop.tvm")])
    check(j.returncode == 0 and j.stdout.strip() == "5999999" and "(jit," in j.stderr,
          "loop.tvm: %r %r", j.stdout, j.stderr)
    # One code view: qemu-user keeps its translation of code that is patched
    # through the other view of two (it watches writes to the pages it
    # translated, not to their aliases), so patching is checked flipping pages.
    c = qemu(ctx, [tinyvm, "--chain", "--stats", ctx.path("stencils", "programs", "loop.tvm")],
             env={"STENCILRT_CODE_VIEWS": "1"})
    check(c.returncode == 0 and c.stdout.strip() == "5999999" and
          "4 jumps linked, 4 side exits taken" in c.stderr, "loop.tvm --chain: %r %r",
          c.stdout, c.stderr)


# --- 2. relocation kinds, run -------------------------------------------------------

def test_aarch64_relocation_kinds_run(ctx):
    K = 0x1111 * 0x2222
    for name in ("small", "tiny", "large"):
        exe, header, _ = fixture_program(ctx, os.path.join(FIXTURES, name + ".yaml"), name)
        n = stencil_numbers(ctx, exe)
        ret = n["ret"]
        lines = ["sym %d near" % i for i in range(4)]
        cases = {}  # label -> expected result

        def case(label, instrs, want):
            lines.extend(exec_lines(label, instrs))
            cases[label] = want
        for op, want in (("ld8", 0x81), ("ld16", 0x8182), ("ld32", 0x81828384),
                         ("ld64", 0x0102030405060708), ("ld128", K)):
            case(op, [(n[op], 0, []), (ret, 0, [])], want)
        case("table", [(n["add_operand"], 0, [6]), (n["table"], 0, []), (ret, 0, [])], 36)
        for v in (0x8877665544332211, 1, M64):
            case("operand_%x" % v, [(n["add_operand"], 0, [v]), (ret, 0, [])], signed(v))
        for v, want in ((1, 13), (-5, 1000)):  # vm_print(v) = v + 5; jump unless 0
            case("call_%d" % v, [(n["add_operand"], 0, [v]), (n["call_and_jump"], 4, []),
                                 (n["add_operand"], 0, [1000]), (ret, 0, []),
                                 (n["add_operand"], 0, [7]), (ret, 0, [])], want)
        if "call_table" in n:  # helpers[tos & 1](tos): vm_print for even tos
            case("call_table", [(n["add_operand"], 0, [2]), (n["call_table"], 0, []),
                                (ret, 0, [])], 7)
        if "tbz_even" in n:
            for op, v, jumps in (("tbz_even", 6, True), ("tbz_even", 7, False),
                                 ("cbz_zero", 0, True), ("cbz_zero", 3, False),
                                 ("blt_negative", -2, True), ("blt_negative", 2, False)):
                case("%s_%d" % (op, v), [(n["add_operand"], 0, [v]), (n[op], 4, []),
                                         (n["add_operand"], 0, [100]), (ret, 0, []),
                                         (n["add_operand"], 0, [200]), (ret, 0, [])],
                     v + (200 if jumps else 100))
            for op, v in (("push_u16", 0xFFFF), ("push_u32", 0xFFFFFFFF),
                          ("push_u48", (1 << 48) - 1), ("push_u64", 0xFEDCBA9876543210)):
                case("%s_max" % op, [(n[op], 0, [v]), (ret, 0, [])], signed(v))
                case("%s_0" % op, [(n[op], 0, [0]), (ret, 0, [])], 0)
            case("push_prel_near", [(n["push_prel"], 0, [0, "e+123450"]), (ret, 0, [])], None)
        p = qemu(ctx, [exe], input="\n".join(lines) + "\n")
        check(p.returncode == 0, "%s: exit %d\n%s", name, p.returncode, p.stderr[-3000:])
        res = parse_results(p.stdout)
        prev_entry = None
        for label in [l.split()[1] for l in lines if l.startswith("exec ")]:
            r = res.get(label)
            check(r and r["ok"], "%s/%s: not emitted: %s", name, label, r)
            want = cases[label]
            if label == "push_prel_near":
                want = prev_entry + 0x123450
            check(r.get("result") == want, "%s/%s: result %s, want %s", name, label,
                  r.get("result"), want)
            prev_entry = r["base"]


def test_aarch64_generated_emitters_match_tables(ctx):
    """tests/unit/test_emit.c under qemu: the generated emitters of the bundled
    and fixture headers (every AArch64 patch kind, veneers) give the same status,
    message and bytes as the runtime's table-driven patcher on random programs."""
    xb = cross_build(ctx)
    kinds = set()
    manifests = [("bundled", ctx.path("stencils", "stencils.yaml"))] + [
        (name, os.path.join(FIXTURES, name + ".yaml")) for name in ("small", "tiny", "large")]
    for name, manifest in manifests:
        out = os.path.join(ctx.tmp, "emit-" + name)
        ctx.build_stencils(manifest, out, "--target", A64, timeout=T)
        exe = os.path.join(ctx.tmp, "test_emit-" + name)
        ctx.run([CC, "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE",
                 "-I", out, "-I", ctx.path("runtime"), ctx.path("tests", "unit", "test_emit.c"),
                 os.path.join(xb, "runtime", "libstencilrt.a"), "-lpthread", "-o", exe],
                check=True, timeout=T)
        p = qemu(ctx, [exe, "2000"], timeout=T)
        m = re.search(r"^(\d+) passed, (\d+) failed$", p.stdout, re.M)
        check(p.returncode == 0 and m and m.group(2) == "0", "%s: exit %d\n%s%s", name,
              p.returncode, p.stdout[-3000:], p.stderr[-2000:])
        kinds |= emitted_patch_kinds(read(os.path.join(out, "jit_stencils-%s.h" % A64)))
    want = {"sg_patch_" + k for k in patch_kinds() if k.startswith("AARCH64_")}
    want.add("sg_patch_veneered")
    check(want <= kinds, "patch kinds never generated: %s", sorted(want - kinds))


def test_aarch64_corpus_emitters_match_tables(ctx):
    """tests/unit/test_emit.c under qemu on every stencil of a 200-op corpus
    (tests/bench/make_corpus.py, for AArch64): its grouped generated emitters
    and the table-driven patcher give the same bytes, every op emitted."""
    xb = cross_build(ctx)
    corpus = os.path.join(ctx.tmp, "corpus")
    ctx.run([sys.executable, ctx.path("tests", "bench", "make_corpus.py"), corpus, "--ops",
             "200"], timeout=60, check=True)
    manifest = os.path.join(corpus, "corpus.yaml")
    write(manifest, read(manifest).replace("x86_64-unknown-linux-gnu", A64))
    out = os.path.join(ctx.tmp, "emit-corpus")
    ctx.build_stencils(manifest, out, "--target", A64, "-j2", timeout=T)
    exe = os.path.join(ctx.tmp, "test_emit-corpus")
    ctx.run([CC, "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE",
             "-I", out, "-I", ctx.path("runtime"), ctx.path("tests", "unit", "test_emit.c"),
             os.path.join(xb, "runtime", "libstencilrt.a"), "-lpthread", "-o", exe],
            check=True, timeout=T)
    p = qemu(ctx, [exe, "2000"], timeout=T)
    m = re.search(r"^(\d+) passed, (\d+) failed$", p.stdout, re.M)
    check(p.returncode == 0 and m and m.group(2) == "0" and ", 0 ops never" in p.stdout,
          "corpus: exit %d\n%s%s", p.returncode, p.stdout[-3000:], p.stderr[-2000:])


def test_aarch64_range_and_alignment_checks(ctx):
    """Every checked hole kind refuses a value just out of its range with
    SR_ERANGE (naming the op) and accepts the value at the edge."""
    exe, header, _ = fixture_program(ctx, os.path.join(FIXTURES, "small.yaml"), "small")
    n = stencil_numbers(ctx, exe)
    ret, pad4k, pad = n["ret"], n["pad4k"], n["pad"]
    lines = ["sym %d near" % i for i in range(4)]
    want = {}  # label -> None (must fail with SR_ERANGE) or expected result

    def case(label, instrs, result, run=True):
        lines.extend(exec_lines(label, instrs, run=run, dumplen=0x100))
        want[label] = result
    for op, bits in (("push_u16", 16), ("push_u32", 32), ("push_u48", 48)):
        case(op + "_edge", [(n[op], 0, [(1 << bits) - 1]), (ret, 0, [])], (1 << bits) - 1)
        case(op + "_over", [(n[op], 0, [1 << bits]), (ret, 0, [])], None)
    # TBZ reaches +-32 KiB, CBZ/B.cond +-1 MiB: the target past k pads of 4 KiB.
    for op, pads, ok in (("tbz_even", 7, True), ("tbz_even", 8, False),
                         ("cbz_zero", 255, True), ("cbz_zero", 256, False)):
        instrs = [(n[op], pads + 3, [])] + [(pad4k, 0, [])] * pads + \
                 [(n["add_operand"], 0, [100]), (ret, 0, []), (n["add_operand"], 0, [200]),
                  (ret, 0, [])]
        case("%s_%d" % (op, pads), instrs, 200 if ok else None)
    # A PC-relative word in data: +-2 GiB of the data.
    case("push_prel_far", [(n["push_prel"], 0, [0, "e+100000000"]), (ret, 0, [])], None)
    case("push_prel_below", [(n["push_prel"], 0, [0, "e-7f000000"]), (ret, 0, [])], "below")
    # ADRP reaches pages +-4 GiB away, ADR +-1 MiB: the value computed by the
    # patched code is the operand itself, far and near, above and below. (The
    # operands are relative to the previous executor, a few pages away: the
    # edges keep a margin of 16 MiB and 64 KiB.)
    for off in ("e+ff000000", "e-ff000000", "e+7654321", "e-12345678", "e+0", "e+abc",
                "e-fedcba9", "e+80000000", "e-80000001"):
        case("adrp_%s" % off, [(n["adrp_add"], 0, [off]), (ret, 0, [])], ("rel", off))
    case("adrp_over", [(n["adrp_add"], 0, ["e+101000000"]), (ret, 0, [])], None)
    case("adrp_under", [(n["adrp_add"], 0, ["e-101000000"]), (ret, 0, [])], None)
    for off in ("e+f0000", "e-f0000", "e+3", "e-1", "e+abcde"):
        case("adr_%s" % off, [(n["adr"], 0, [off]), (ret, 0, [])], ("rel", off))
    case("adr_over", [(n["adr"], 0, ["e+110000"]), (ret, 0, [])], None)
    case("adr_under", [(n["adr"], 0, ["e-110000"]), (ret, 0, [])], None)
    # Scaled LO12 offsets: the value must be aligned to the access size.
    for bits, scale in ((16, 1), (32, 2), (64, 3), (128, 4)):
        op = n["lo12_%d" % bits]
        good = 0x12345000 + (0xab0 & ~((1 << scale) - 1))
        case("lo12_%d_aligned" % bits, [(op, 0, [good]), (ret, 0, [])], ("imm", good, scale),
             run=False)
        case("lo12_%d_misaligned" % bits, [(op, 0, [good + (1 << scale) // 2]), (ret, 0, [])],
             "misaligned", run=False)
    res = run_plan(ctx, exe, lines)
    problems = []
    prev = None
    for label, w in want.items():
        r = res.get(label)
        if r is None:
            problems.append("%s: no result" % label)
            continue
        if w is None or w == "misaligned":
            if r["ok"] or r["status"] != SR_ERANGE:
                problems.append("%s: emitted (%s), want SR_ERANGE" % (label, r))
            elif "instruction 0 (" not in r["message"]:
                problems.append("%s: the message does not name the op: %s" % (label,
                                                                              r["message"]))
            elif w == "misaligned" and "aligned" not in r["message"]:
                problems.append("%s: the message does not say why: %s" % (label, r["message"]))
        elif isinstance(w, tuple) and w[0] == "rel":
            off = int(w[1][2:], 16) * (1 if w[1][1] == "+" else -1)
            if not r["ok"] or r.get("result") != prev + off:
                problems.append("%s: %s, want %#x" % (label, {k: v for k, v in r.items()
                                                              if k != "mem"}, prev + off))
        elif isinstance(w, tuple):
            _, value, scale = w
            imm = (word(r["mem"], 0) >> 10) & 0xFFF if r["ok"] else None
            if imm != (value & 0xFFF) >> scale:
                problems.append("%s: imm12 %s, want 0x%x" % (label, imm, (value & 0xFFF) >> scale))
        elif w == "below":
            if not r["ok"] or r.get("result") != prev - 0x7F000000:
                problems.append("%s: %s, want %#x" % (label, r, prev - 0x7F000000))
        elif not r["ok"] or r.get("result") != w:
            problems.append("%s: %s, want result %s" % (label, {k: v for k, v in r.items()
                                                                 if k != "mem"}, w))
        if r.get("ok"):
            prev = r["base"]
    check(not problems, "%d problem(s):\n%s", len(problems), "\n".join(problems))


def test_aarch64_far_call_goes_through_a_veneer(ctx):
    """BL to a helper mapped far beyond +-128 MiB: the runtime places a veneer
    after the code (ldr x16, #8; br x16; .quad helper) and the call works; a
    near helper is called directly."""
    exe, header, _ = fixture_program(ctx, os.path.join(FIXTURES, "small.yaml"), "small")
    n = stencil_numbers(ctx, exe)
    hole = [h for h in header.code_holes("call_and_jump")
            if h["reloc"] == "R_AARCH64_CALL26" and h["symbol"] == "vm_print"]
    check(len(hole) == 1, "call_and_jump has no BL to vm_print: %s",
          header.code_holes("call_and_jump"))
    bl = hole[0]["offset"]
    program = [(n["add_operand"], 0, [1]), (n["call_and_jump"], 4, []),
               (n["add_operand"], 0, [1000]), (n["ret"], 0, []), (n["add_operand"], 0, [7]),
               (n["ret"], 0, [])]
    # Twice the call in one executor: the two calls share one veneer.
    program2 = [(n["add_operand"], 0, [1]), (n["call_and_jump"], 2, []),
                (n["call_and_jump"], 3, []), (n["ret"], 0, [])]
    results, veneers = {}, set()
    for where in ("far", "near"):
        lines = ["far 7000000000"] + ["sym %d %s" % (i, where if i == 1 else "near")
                                        for i in range(4)]
        lines += exec_lines("one", program) + exec_lines("two", program2)
        results[where] = run_plan(ctx, exe, lines)
    for where, res in results.items():
        target = res["_syms"][1]
        one, two = res["one"], res["two"]
        check(one["ok"] and one["result"] == 13, "%s helper: %s", where, one)
        check(two["ok"] and two["result"] == 1 + 5 + 5, "%s helper, two calls: %s", where, two)
        for r, calls in ((one, [1]), (two, [1, 2])):
            mem, base = r["mem"], r["base"]
            for i in calls:
                at = r["addr"][i] - base + bl
                w = word(mem, at)
                check(w & 0xFC000000 == 0x94000000, "%s: no BL at +0x%x: %08x", where, at, w)
                dest = base + at + 4 * sext(w & 0x3FFFFFF, 26)
                if where == "near":
                    if abs(target - base) < (120 << 20):
                        check(dest == target, "near: BL goes to %#x, vm_print is %#x", dest,
                              target)
                    continue
                off = dest - base
                code_end = (r["code_size"] + 15) & ~15
                check(code_end <= off < code_end + 32,
                      "far: BL goes to +0x%x, not to a veneer after the code (ends +0x%x)", off,
                      r["code_size"])
                check(word(mem, off) == 0x58000050 and word(mem, off + 4) == 0xD61F0200,
                      "far: the veneer is %s", mem[off:off + 16].hex())
                lit = struct.unpack_from("<Q", mem, off + 8)[0]
                check(lit == target, "far: the veneer jumps to %#x, not %#x", lit, target)
                if r is two:
                    veneers.add(off)
        if where == "far":
            check(abs(target - one["base"]) > (128 << 20),
                  "the far helper at %#x is near the code at %#x", target, one["base"])
    check(len(veneers) == 1, "two calls of one helper: veneers at %s", sorted(veneers))


# --- 3. patching differential against ld.lld -------------------------------------------

def elf_sections(data):
    """{name: (addr, bytes)} of an ELF64 little-endian file."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    hdrs = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    strtab = hdrs[shstrndx]
    names = data[strtab[4]:strtab[4] + strtab[5]]
    out = {}
    for h in hdrs:
        name = names[h[0]:names.index(b"\0", h[0])].decode()
        out[name] = (h[3], data[h[4]:h[4] + h[5]] if h[1] != 8 else b"\0" * h[5])
    return out


GOT_KINDS = ("AARCH64_GOT_ADRP", "AARCH64_GOT_LO12", "AARCH64_GOT_PCREL19")


def got_slot_of(pc, w, kind, page=None):
    """Where an instruction's GOT hole leads (ADRP: a page; LO12 needs it)."""
    if kind == "AARCH64_GOT_ADRP":
        imm = ((w >> 29) & 3) | (((w >> 5) & 0x7FFFF) << 2)
        return (pc & ~0xFFF) + (sext(imm, 21) << 12)
    if kind == "AARCH64_GOT_LO12":
        return page + ((w >> 10) & 0xFFF) * 8
    return pc + 4 * sext((w >> 5) & 0x7FFFF, 19)


def read_at(mems, addr, size=8):
    for base, data in mems:
        if base <= addr and addr + size <= base + len(data):
            return int.from_bytes(data[addr - base:addr - base + size], "little")
    raise TestFailure("address %#x is in no dumped memory" % addr)


def operand_values(holes):
    """Operands for an op's holes: each fits the narrowest hole it is used in;
    those used PC-relatively are near the JIT memory (e+...)."""
    vals = {}
    for h in holes:
        if h["value"] != "OPERAND":
            continue
        i, k = h["index"], h["patch"]
        if k in ("PCREL32", "AARCH64_BRANCH26", "AARCH64_ADRP", "AARCH64_ADR21",
                 "AARCH64_PCREL19"):
            v = "e+2345670"
        elif k == "AARCH64_MOVW_G0":
            v = 0xBEEF
        elif k == "AARCH64_MOVW_G1":
            v = 0x9ABCDEF0
        elif k == "AARCH64_MOVW_G2":
            v = 0x56789ABCDEF0
        else:
            v = [0x8877665544332211, 0xFEDCBA9876543210, 0x0123456789ABCDEF, 0x1122334455667788][i]
        if isinstance(vals.get(i), str) or (i in vals and not isinstance(v, str) and vals[i] < v):
            continue
        vals[i] = v
    return [vals.get(i, 0x100 + i) for i in range(4)]


def lld_link(ctx, obj, code_addr, data_addr, got_addr, defsyms, out):
    script = out + ".ld"
    write(script, """SECTIONS {
  . = %#x;
  .text : { *(.text .text.*) }
  . = %#x;
  .rodata : { *(.rodata .rodata.*) }
  . = %#x;
  .got : { *(.got) }
  /DISCARD/ : { *(.comment) *(.note.*) *(.eh_frame) }
}
""" % (code_addr, data_addr, got_addr))
    args = ["ld.lld-22", "-m", "aarch64linux", "-static", "--no-relax", "-O0", "-T", script,
            "-e", "0", "-o", out, obj]
    for k, v in sorted(defsyms.items()):
        args += ["--defsym", "%s=%#x" % (k, v)]
    p = ctx.run(args, timeout=T)
    check(p.returncode == 0, "ld.lld-22 failed linking %s:\n%s", obj, p.stderr[-3000:])
    return elf_sections(read(out, "rb"))


def compare_with_lld(ctx, exe, header, outdir, set_name):
    n = stencil_numbers(ctx, exe)
    symnames = re.findall(r'^    "(\w+)",$', header.text.split("sg_symbol_names")[1]
                          .split("};")[0], re.M)
    ops = header.ops
    lines = ["sym %d near" % i for i in range(len(symnames))]
    plan = {}
    for op in ops:
        holes = header.code_holes(op) + header.data_holes(op)
        operands = operand_values(holes)
        # [op, pad, ret]: continuation and jump target apart. The e+ operands
        # are relative to the previous executor: emit a probe first.
        lines += exec_lines("probe_" + op, [(n["pad"], 0, []), (n["ret"], 0, [])], run=False,
                            dumplen=0)
        lines += exec_lines(op, [(n[op], 2, operands), (n["pad"], 0, []), (n["ret"], 0, [])],
                            run=False)
        plan[op] = operands
    res = run_plan(ctx, exe, lines)
    syms = res["_syms"]
    problems = []
    for op in ops:
        r = res[op]
        if not r["ok"]:
            problems.append("%s/%s: not emitted: %s" % (set_name, op, r))
            continue
        base, mem = r["base"], r["mem"]
        probe = res["probe_" + op]["base"]
        operands = [probe + int(o[2:], 16) if isinstance(o, str) else o for o in plan[op]]
        code_holes = header.code_holes(op)
        code = header.code(op)
        data = header.data(op)
        veneers = sum(1 for h in code_holes if h["patch"] == "AARCH64_BRANCH26" and
                      h["value"] in ("SYMBOL", "OPERAND"))
        data_start = ((r["code_size"] + 15) & ~15) + 16 * veneers
        m = re.search(r"sg_code_%s, \d+, (?:sg_data_%s, (\d+), (\d+)|NULL, 0, 1)" % (op, op),
                      header.text)
        align = int(m.group(2)) if m.group(2) else 1
        data_addr = -(-(base + data_start) // align) * align
        defsyms = {"_JIT_CONTINUE": r["addr"][1], "_JIT_JUMP_TARGET": r["addr"][2]}
        for i, v in enumerate(operands):
            defsyms["_JIT_OPERAND%d" % i] = v & M64
        for i, s in enumerate(symnames):
            defsyms[s] = syms[i]
        obj = os.path.join(outdir, ".stencilgen", A64, "op_%s.o" % op)
        got_addr = base + 0x80000  # within reach of LDR literal (tiny code model)
        secs = lld_link(ctx, obj, r["addr"][0], data_addr, got_addr, defsyms,
                        os.path.join(ctx.tmp, "lld-%s-%s.elf" % (set_name, op)))
        text = secs[".text"][1]
        rt_code = mem[r["addr"][0] - base:r["addr"][0] - base + len(code)]
        where = "%s/%s" % (set_name, op)
        if len(text) == len(code) + 4:
            w = word(text, len(code))
            dest = r["addr"][0] + len(code) + 4 * sext(w & 0x3FFFFFF, 26)
            if w & 0xFC000000 != 0x14000000 or dest != r["addr"][1]:
                problems.append("%s: lld's trailing jump %08x goes to %#x, the next instruction "
                                "is at %#x" % (where, w, dest, r["addr"][1]))
        elif len(text) != len(code):
            problems.append("%s: lld .text %d bytes, stencil %d" % (where, len(text), len(code)))
            continue
        mems = [(base, mem), (secs[".got"][0], secs[".got"][1])] if ".got" in secs else \
            [(base, mem)]
        special = {}
        pages = {}
        for h in code_holes:
            k = h["patch"]
            if k in GOT_KINDS or (k == "AARCH64_BRANCH26" and h["value"] in ("SYMBOL", "OPERAND")):
                special[h["offset"]] = h
        for off in range(0, len(code), 4):
            a, b = word(rt_code, off), word(text, off)
            h = special.get(off)
            if h is None:
                if a != b:
                    problems.append("%s+0x%x: runtime %08x, lld %08x" % (where, off, a, b))
                continue
            pc = r["addr"][0] + off
            k = h["patch"]
            value = syms[symnames.index(h["symbol"])] if h["value"] == "SYMBOL" else \
                operands[h["index"]] & M64
            if k == "AARCH64_BRANCH26":
                dests = []
                for w, mm in ((a, [(base, mem)]), (b, None)):
                    d = pc + 4 * sext(w & 0x3FFFFFF, 26)
                    if mm and d != value and base <= d < base + len(mem) - 16 and \
                            read_at(mm, d, 4) == 0x58000050:
                        d = read_at(mm, d + 8)  # through the runtime's veneer
                    dests.append(d)
                if dests != [value, value] or (a ^ b) & 0xFC000000:
                    problems.append("%s+0x%x: branch leads to %s, want %#x" %
                                    (where, off, [hex(d) for d in dests], value))
                continue
            got = []
            for w, mm, who in ((a, [(base, mem)], "runtime"), (b, mems, "lld")):
                key = (who, h["symbol"])
                if k == "AARCH64_GOT_ADRP":
                    pages[key] = got_slot_of(pc, w, k)
                    got.append(None)
                    if (a ^ b) & ~((3 << 29) | (0x7FFFF << 5)):
                        problems.append("%s+0x%x: opcode bits differ: %08x vs %08x" %
                                        (where, off, a, b))
                    continue
                slot = got_slot_of(pc, w, k, pages.get(key))
                got.append(read_at(mm, slot))
                if (a ^ b) & ~(0xFFF << 10 if k == "AARCH64_GOT_LO12" else 0x7FFFF << 5):
                    problems.append("%s+0x%x: opcode bits differ: %08x vs %08x" % (where, off, a,
                                                                                   b))
            if got[0] is not None and got != [value, value]:
                problems.append("%s+0x%x: GOT slots hold %s, want %#x" % (where, off,
                                                                           [hex(g) for g in got],
                                                                           value))
        if data:
            rt_data = mem[data_addr - base:data_addr - base + len(data)]
            ld_data = secs[".rodata"][1][:len(data)] if ".rodata" in secs else b""
            if secs.get(".rodata", (None,))[0] != data_addr or rt_data != ld_data:
                problems.append("%s: data differs at %#x:\n  runtime %s\n  lld     %s" %
                                (where, data_addr, rt_data.hex(), ld_data.hex()))
    return problems


def test_aarch64_patching_matches_lld(ctx):
    problems = []
    sets = [("bundled", ctx.path("stencils", "stencils.yaml"))] + \
        [(k, os.path.join(FIXTURES, k + ".yaml")) for k in ("small", "tiny", "large")]
    kinds = set()
    for name, manifest in sets:
        # lld links each op's own object (op_<name>.o), which only per-op units keep,
        # as compiled: ops in one part (split ones run in the tinyvm and unwind tests).
        exe, header, out = fixture_program(ctx, manifest, name, "--units", "per-op",
                                           "--no-hot-cold")
        problems += compare_with_lld(ctx, exe, header, out, name)
        for op in header.ops:
            kinds |= {h["patch"] for h in header.code_holes(op) + header.data_holes(op)}
    want = {"ABS64", "PCREL32", "AARCH64_BRANCH26", "AARCH64_PCREL19", "AARCH64_TSTBR14",
            "AARCH64_ADR21", "AARCH64_ADRP", "AARCH64_ADD_LO12", "AARCH64_LDST8_LO12",
            "AARCH64_LDST16_LO12", "AARCH64_LDST32_LO12", "AARCH64_LDST64_LO12",
            "AARCH64_LDST128_LO12", "AARCH64_GOT_ADRP", "AARCH64_GOT_LO12",
            "AARCH64_GOT_PCREL19", "AARCH64_MOVW_G0", "AARCH64_MOVW_G0_NC", "AARCH64_MOVW_G1",
            "AARCH64_MOVW_G1_NC", "AARCH64_MOVW_G2", "AARCH64_MOVW_G2_NC", "AARCH64_MOVW_G3"}
    check(not want - kinds, "hole kinds the differential did not see: %s", sorted(want - kinds))
    check(not problems, "%d difference(s) from ld.lld-22:\n%s", len(problems),
          "\n".join(problems[:40]))


# --- 4. unwinding: sampled PCs, C++ exceptions ---------------------------------------------

SAMPLE_SECONDS = 90


def test_aarch64_unwind_at_sampled_pcs(ctx):
    xb = cross_build(ctx)
    prog = os.path.join(xb, "tests", "aarch64", "a64_sample")
    tvm = ctx.path("tests", "aarch64", "sample.tvm")
    p = qemu(ctx, [prog, tvm, "--seconds", str(SAMPLE_SECONDS), "--max-samples", "1000000"],
             singlestep=True, timeout=SAMPLE_SECONDS + 120)
    m = re.search(r"^jit_instructions (\d+) covered (\d+) coverage ([\d.]+) samples (\d+) "
                  r"jit_samples (\d+) reached_main (\d+) bad (\d+) runs (\d+) wrong_results (\d+) "
                  r"seconds ([\d.]+)$", p.stdout, re.M)
    check(m, "no summary (exit %d):\n%s\n%s", p.returncode, p.stdout[-3000:], p.stderr[-3000:])
    total, covered, cov, samples, jit, reached, bad, runs, wrong = (
        float(x) if "." in x else int(x) for x in m.groups()[:9])
    print("     aarch64 sampled unwinding: %d of %d JIT instructions sampled (%.1f%%), %d samples "
          "in JIT code, %d reached main, %d bad, %d runs, %s s under qemu -singlestep" %
          (covered, total, 100 * cov, jit, reached, bad, runs, m.group(10)))
    check(p.returncode == 0 and bad == 0 and wrong == 0 and reached == jit,
          "exit %d, %d bad samples, %d wrong results:\n%s", p.returncode, bad, wrong,
          p.stdout[-4000:])
    check(total > 150 and jit > 1000, "too little was sampled: %s", m.group(0))
    check(cov >= 0.95, "only %.1f%% of the JIT instructions were sampled:\n%s", 100 * cov,
          p.stdout[-3000:])
    # The VM's C functions around the JIT frames, sampled too: libgcc is right there as well.
    mc = re.search(r"^c_instructions (\d+) c_covered (\d+) c_samples (\d+) c_bad (\d+) ", p.stdout,
                   re.M)
    check(mc and int(mc.group(3)) > 100 and int(mc.group(4)) == 0,
          "samples in the VM's C functions:\n%s", p.stdout[-3000:])
    # Control: without libgcc registration every JIT sample must fail.
    p = qemu(ctx, [prog, tvm, "--seconds", "3"], singlestep=True, timeout=120,
             env={"STENCILRT_FRAMES": "0"})
    m = re.search(r"jit_samples (\d+) reached_main (\d+) bad (\d+)", p.stdout)
    check(m and int(m.group(1)) > 50 and int(m.group(2)) == 0 and
          int(m.group(3)) == int(m.group(1)) and p.returncode == 1,
          "control (STENCILRT_FRAMES=0) did not fail every sample:\n%s", p.stdout[-2000:])


def test_aarch64_cpp_exception_through_jit_frames(ctx):
    xb = cross_build(ctx)
    prog = os.path.join(xb, "tests", "aarch64", "a64_exception")
    tvm = ctx.path("tests", "aarch64", "throw.tvm")
    depths = [0, 1, 2, 5, 20]
    p = qemu(ctx, [prog, tvm] + [str(d) for d in depths], timeout=120)
    check(p.returncode == 0, "exit %d:\n%s\n%s", p.returncode, p.stdout, p.stderr[-3000:])
    for d in depths:
        want = 'depth %d caught "thrown at depth %d" cleanups 1' % (d, d)
        check(want in p.stdout.splitlines(), "want %r in:\n%s", want, p.stdout)
    # Control: without libgcc registration the exception cannot pass the JIT frames.
    p = qemu(ctx, [prog, tvm, "1"], timeout=120, env={"STENCILRT_FRAMES": "0"})
    check(p.returncode != 0 and "caught" not in p.stdout and "terminate" in p.stderr,
          "control (STENCILRT_FRAMES=0): exit %d\n%s\n%s", p.returncode, p.stdout, p.stderr)


# --- 5. GDB ---------------------------------------------------------------------------

GDB = ["gdb-multiarch", "-batch", "-nx", "-iex", "set debuginfod enabled off"]
GDBSTEP = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "aarch64",
                       "a64_gdbstep.py")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def gdb_session(ctx, args, config, env=None, timeout=600):
    """Run args (tinyvm and its arguments) under qemu-aarch64 -g and
    a64_gdbstep.py in gdb-multiarch; returns the script's result."""
    result = os.path.join(ctx.tmp, "gdb-result.json")
    if os.path.exists(result):
        os.unlink(result)
    port = free_port()
    cfg = dict(config, result=result, sysroot=SYSROOT, port=port, program=args[0])
    cfg_path = os.path.join(ctx.tmp, "gdb-config.json")
    write(cfg_path, json.dumps(cfg))
    full_env = dict(os.environ, **(env or {}))
    q = subprocess.Popen(QEMU_GDB + ["-g", str(port)] + args, env=full_env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        p = ctx.run(GDB + ["-x", GDBSTEP], env={"A64STEP_CONFIG": cfg_path}, timeout=timeout)
    finally:
        try:
            q.wait(timeout=30)
        except subprocess.TimeoutExpired:
            q.kill()  # this test's own qemu, by its pid
            q.wait()
    check(os.path.exists(result), "gdb wrote no result (exit %d):\n%s\n%s", p.returncode,
          p.stdout[-3000:], p.stderr[-3000:])
    r = json.loads(read(result))
    check(not r.get("error"), "the GDB script failed: %s\n%s", r.get("error"), p.stderr[-3000:])
    return r


def test_aarch64_gdb_backtrace_names_stencils(ctx):
    """A backtrace from a helper two re-entries deep (stencils/programs/
    reenter.tvm): each JIT frame named <op>@<function>[<i>] by the GDB JIT
    interface, each followed by the VM's C frame, down to main; no ?? and no
    early stop."""
    xb = cross_build(ctx)
    r = gdb_session(ctx, [os.path.join(xb, "stencils", "tinyvm"),
                          ctx.path("stencils", "programs", "reenter.tvm")],
                    {"mode": "bt", "break": "tinyvm_breakpoint"})
    frames, bt = r["frames"], r["bt"]
    check(frames and frames[0] == "tinyvm_breakpoint" and frames[-1] == "main",
          "frames %s\n%s", frames, bt)
    jit = [plain_op_name(f) for f in frames if "@" in f]  # the ops, whichever variant ran
    check(len(jit) == 4 and all(re.match(r"^\w+@\w+\[\d+\]$", f) for f in jit),
          "JIT frames %s in %s", jit, frames)
    check(jit[0].startswith("native@") and jit[-1].startswith("call@main["), "JIT frames %s", jit)
    for i, f in enumerate(frames):
        if "@" in f:
            check(frames[i + 1] in ("vm_run", "vm_jit_run"), "%s is followed by %s", f,
                  frames[i + 1])
    check("??" not in bt and "Backtrace stopped" not in bt and "corrupt" not in bt,
          "bt:\n%s", bt)


def test_aarch64_gdb_single_steps_every_jit_instruction(ctx):
    """stepi through every instruction of the shim and of tests/aarch64/
    step.tvm's executors (re-entries included); at every PC the backtrace
    reaches main with the stencil (or the shim) as frame 0. Controls: with a
    wrong expected name every executor PC fails; with STENCILRT_GDB=0 every
    PC fails."""
    xb = cross_build(ctx)
    args = [os.path.join(xb, "stencils", "tinyvm"), ctx.path("tests", "aarch64", "step.tvm")]
    cfg = {"mode": "step", "max_steps": 20000, "time_limit": 400}
    r = gdb_session(ctx, args, cfg)
    print("     aarch64 GDB single-step: %d steps, %d of %d JIT instructions visited (%d in the "
          "shim checks), %d failures, %.1f s" % (r["steps"], r["visited"], r["jit_instructions"],
                                                 r["checked_shim"], r["nfailures"], r["elapsed"]))
    check(r["exited"], "the program did not run to its end: %s", r)
    check(r["nfailures"] == 0, "%d PCs failed: %s", r["nfailures"],
          json.dumps(r["failures"][:5], indent=1))
    check(r["visited"] == r["jit_instructions"] > 150 and r["checked_shim"] > 0,
          "visited %d of %d JIT instructions; never: %s", r["visited"], r["jit_instructions"],
          r["unvisited"])
    wrong = gdb_session(ctx, args, dict(cfg, wrong_op="no-such-op@main[0]"))
    check(wrong["nfailures"] == wrong["checked"] - wrong["checked_shim"] > 0,
          "control (wrong name): %d failures of %d executor PCs", wrong["nfailures"],
          wrong["checked"] - wrong["checked_shim"])
    blind = gdb_session(ctx, args, cfg, env={"STENCILRT_GDB": "0"})
    check(blind["nfailures"] == blind["checked"] > 0,
          "control (STENCILRT_GDB=0): %d failures of %d PCs", blind["nfailures"],
          blind["checked"])


if MISSING:
    sys.stderr.write("test_aarch64_qemu: the AArch64 cross toolchain is missing (%s): "
                     "its tests are not collected\n" % ", ".join(MISSING))
    for _name in [n for n in list(globals()) if n.startswith("test_")]:
        del globals()[_name]
elif not shutil.which("gdb-multiarch"):
    sys.stderr.write("test_aarch64_qemu: gdb-multiarch is missing: the GDB tests are not "
                     "collected\n")
    del test_aarch64_gdb_backtrace_names_stencils
    del test_aarch64_gdb_single_steps_every_jit_instruction


# --- 6. hardened code: BTI and PAC ---------------------------------------------------

def hardened_program(ctx, name, edit=None):
    """tests/aarch64/a64_hardened.c built (hardened, like the cross build)
    against the bundled stencils' AArch64 header, after edit(header text)."""
    xb = cross_build(ctx)
    out = os.path.join(ctx.tmp, "gen-" + name)
    ctx.build_stencils(ctx.path("stencils", "stencils.yaml"), out, "--target", A64, timeout=T)
    path = os.path.join(out, "jit_stencils-%s.h" % A64)
    if edit:
        write(path, edit(read(path)))
    exe = os.path.join(ctx.tmp, "a64_hardened-" + name)
    ctx.run([CC, "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-mbranch-protection=standard",
             "-rdynamic", "-I", out, "-I", ctx.path("runtime"), "-I", ctx.path("stencils"),
             ctx.path("tests", "aarch64", "a64_hardened.c"),
             os.path.join(xb, "runtime", "libstencilrt.a"), "-lpthread", "-ldl", "-o", exe],
            check=True, timeout=T)
    return exe, path


def test_aarch64_bti_guards_jit_pages(ctx):
    """The bundled AArch64 stencils start with landing pads (bti c, or paciasp
    in ops that sign), so the runtime maps JIT code BTI-guarded: entering an
    executor at its start works, and an indirect branch past the landing pad
    dies of SIGILL under qemu -cpu max (the control that BTI is enforced)."""
    exe, header = hardened_program(ctx, "bti")
    check("#define SG_TARGET_LANDING_PADS 1" in read(header),
          "the bundled AArch64 header does not say every op has a landing pad")
    p = qemu(ctx, [exe, "enter", "0"], timeout=60)
    check(p.returncode == 0 and p.stdout.strip() == "42", "entered at its start: %d %r %s",
          p.returncode, p.stdout, p.stderr[-500:])
    p = qemu(ctx, [exe, "enter", "4"], timeout=60)
    check(p.returncode in (-signal.SIGILL, 128 + signal.SIGILL),
          "entered past its landing pad: exit %d %r, want SIGILL (BTI not enforced?)",
          p.returncode, p.stdout)


def test_aarch64_signed_return_address_unwinds(ctx):
    """With pac-ret the shim signs the return address it saves; executor frames
    declare it (DW_CFA_AARCH64_negate_ra_state in sg_executor_cfi), so libgcc
    authenticates it and backtrace() reaches main. The control: the same header
    without that one byte loses the stack at the executor.

    qemu-user applies top-byte-ignore to code addresses, which leaves seven PAC
    bits: about one signature in 128 is zero, and then the signed return
    address equals the plain one and the control reaches main as well. So each
    program runs under three fixed PAC keys (qemu -seed): the signed build must
    reach main under all of them, the control must lose the stack under at
    least one (all three zero: one chance in two million per code layout)."""
    seeds = (1, 2, 3)
    exe, header = hardened_program(ctx, "pac")
    text = read(header)
    check("#define SG_UNWIND_RA_SIGNED 1" in text, "the bundled AArch64 shim's RA is not signed")
    for seed in seeds:
        p = qemu(ctx, [exe, "backtrace"], timeout=60, seed=seed)
        check(p.returncode == 0 and p.stdout.startswith("reached main"),
              "backtrace from JIT code (qemu -seed %d): %d %r %s", seed, p.returncode, p.stdout,
              p.stderr[-500:])

    def unsigned(t):
        m = re.search(r"static const uint8_t sg_executor_cfi\[(\d+)\] = \{(.*?)\};", t, re.S)
        body = [b.strip() for b in m.group(2).replace("\n", " ").split(",") if b.strip()]
        check(body[-1] == "0x2d", "sg_executor_cfi does not end with negate_ra_state: %s",
              body[-3:])
        return t[:m.start()] + "static const uint8_t sg_executor_cfi[%d] = {%s};" % (
            len(body) - 1, ", ".join(body[:-1])) + t[m.end():]
    exe, _ = hardened_program(ctx, "pac-control", unsigned)
    reached = [seed for seed in seeds
               if qemu(ctx, [exe, "backtrace"], timeout=60, seed=seed).stdout.startswith(
                   "reached main")]
    check(len(reached) < len(seeds),
          "the control without negate_ra_state reached main under every PAC key (qemu -seed "
          "%s): the RA is not signed?", ", ".join(map(str, reached)))


# --- code emitted into freed memory, with default settings ---------------------

# sr_runtime_create's one line when code rewritten through JIT memory's
# writable view does not run (runtime/config.c, config_views_stale); %s: the
# variable, when it asked for two views.
STALE_WARNING = ("stencilrt: warning: %stwo code views do not work here: code rewritten "
                 "through the writable view still ran as before (an emulator such as qemu-user, "
                 "valgrind or FEX keeps its old translation); using one code view "
                 "(STENCILRT_CODE_VIEWS=1 skips this check)\n")


def reuse_summary(p, what):
    m = re.search(r"^reuse: runs=(\d+) wrong=(\d+) reused=(\d+) views=(\d) reason=(\S+)$",
                  p.stdout, re.M)
    check(m, "%s: no summary (exit %d)\nstdout:\n%s\nstderr:\n%s", what, p.returncode,
          p.stdout[-2000:], p.stderr[-2000:])
    runs, wrong, reused, views = map(int, m.groups()[:4])
    print("     %s: %s" % (what, m.group(0)))
    check(p.returncode == 0 and wrong == 0, "%s: %d of %d runs wrong (the old code ran)\n%s",
          what, wrong, runs, p.stdout[-2000:])
    check(runs >= 1500 and reused >= 500, "%s: too little reuse: %s", what, m.group(0))
    return views, m.group(5)


def test_aarch64_reused_code_runs(ctx):
    """Executors emitted into chunks freed by earlier ones
    (tests/stress/code_reuse.c, 1,528 runs, every result checked) under
    qemu-aarch64 with default settings. qemu-user does not see code written
    through the second view of two (before sr_runtime_create probed for it,
    about 1,430 runs gave the freed executor's value): the probe sees that,
    JIT memory gets one view, one line on stderr says why, and
    sr_runtime_views_reason says stale-code. STENCILRT_CODE_VIEWS=2 warns
    naming itself, =1 skips the probe, sr_config code_views 2 is refused.
    tinyvm --chain, which re-points jumps of code that ran, links each jump
    once with default settings too (before the probe it did not finish in a
    minute)."""
    xb = cross_build(ctx)
    exe = os.path.join(xb, "tests", "aarch64", "code_reuse")
    for value, views, reason, stderr in (
            ("", 1, "stale-code", STALE_WARNING % ""),
            ("2", 1, "stale-code", STALE_WARNING % "STENCILRT_CODE_VIEWS=2: "),
            ("1", 1, "configured", "")):
        what = "STENCILRT_CODE_VIEWS=%r" % value
        p = qemu(ctx, [exe], timeout=120, env={"STENCILRT_CODE_VIEWS": value})
        got = reuse_summary(p, what)
        check(got == (views, reason), "%s: views and reason %r, want %r", what, got,
              (views, reason))
        check(p.stderr == stderr, "%s: stderr %r, want %r", what, p.stderr, stderr)
    p = qemu(ctx, [exe, "--config-views", "2"], timeout=120, env={"STENCILRT_CODE_VIEWS": ""})
    check(p.returncode == 3 and p.stderr.startswith(
        "code_reuse: sr_runtime_create: sr_config: code_views 2: two code views do not work "
        "here") and "use code_views 1" in p.stderr,
        "sr_config code_views 2: exit %d, stderr %r", p.returncode, p.stderr)
    tinyvm = os.path.join(xb, "stencils", "tinyvm")
    # Without the probe this did not end within a minute: qemu kept running the
    # side exits it had translated before their jumps were linked.
    c = qemu(ctx, [tinyvm, "--chain", "--stats", ctx.path("stencils", "programs", "loop.tvm")],
             timeout=60, env={"STENCILRT_CODE_VIEWS": ""})
    check(c.returncode == 0 and c.stdout.strip() == "5999999" and
          "4 jumps linked, 4 side exits taken" in c.stderr and
          c.stderr.count("stencilrt: warning:") == 1 and (STALE_WARNING % "") in c.stderr,
          "loop.tvm --chain, default settings: %r %r", c.stdout, c.stderr)
