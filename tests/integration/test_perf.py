"""perf integration (runtime/perf.c), checked with the real perf.

STENCILRT_PERF=jitdump: perf record -k mono, perf inject --jit, then perf
report/script must name JIT samples by op ("mul@work[7]") and their call chains
must go from JIT frames through further JIT frames to main, both with frame
pointers (-g) and with --call-graph dwarf (which needs the unwinding records).
The dump itself is checked record by record: CLOCK_MONOTONIC timestamps, unique
code indices, an unwinding record before each load, whole records only, one
file per process (fork), many threads at once, an unwritable directory and a
file-size limit (a full disk as far as write() is concerned).
STENCILRT_PERF=map: perf report names samples in JIT code from the map.

If the kernel refuses perf events altogether (perf_event_paranoid, seccomp, no
PMU access in a container) the tests that need perf record print SKIP and
pass; everything else is a failure.

Programs: build/stencils/tinyvm and, from tests/perf/ (meson.build there),
tinyvm_fp (tinyvm with frame pointers), perf_threads and perf_fork."""
import glob
import os
import re
import struct
import subprocess
import time

from sgtest import TestFailure, check, plain_op_name, read

ASAN = False  # perf examines the JIT, not the sanitizers; once is enough

T = 120  # seconds per command; every perf step here takes a few at most
NESTED = os.path.join("tests", "perf", "nested.tvm")
NESTED_RESULT = "6000090"
LOOP = os.path.join("stencils", "programs", "loop.tvm")
LOOP_RESULT = "5999999"
JIT_CODE_LOAD, JIT_CODE_CLOSE, JIT_CODE_UNWINDING_INFO = 0, 3, 4
OP_SYMBOL = re.compile(r"\b\w+(?:\[[\w=,]+\])?@\w+\[\d+\]")  # op or op[axis=value,...]


# ---- running perf ---------------------------------------------------------

_perf_refusal = []  # the probe's result: [] not yet run, [None] usable, [reason] refused
_REFUSAL = re.compile(r"perf_event_open|[Pp]ermission|paranoid|not supported|No such device|"
                      r"Operation not permitted")


def perf_refused(ctx):
    """Why the kernel refuses perf events (None if perf record works)."""
    if not _perf_refusal:
        out = os.path.join(ctx.tmp, "probe.data")
        try:
            p = ctx.run(["perf", "record", "-q", "-k", "mono", "-e", "cpu-clock", "-o", out,
                         "--", "true"], timeout=T)
        except FileNotFoundError:
            raise TestFailure("perf is not installed (Debian: apt-get install linux-perf)")
        lines = (p.stdout + p.stderr).strip().splitlines()
        why = [l.strip() for l in lines if _REFUSAL.search(l)]
        if p.returncode != 0 and not why:
            raise TestFailure("perf record does not work:\n" + "\n".join(lines[-20:]))
        try:
            paranoid = read("/proc/sys/kernel/perf_event_paranoid").strip()
        except OSError:
            paranoid = "?"
        _perf_refusal.append("%s; perf_event_paranoid=%s" % (why[0], paranoid)
                             if p.returncode != 0 else None)
    return _perf_refusal[0]


def need_perf(ctx, skipped="this test"):
    """False (after saying so) when the kernel refuses perf events."""
    why = perf_refused(ctx)
    if why:
        print("     SKIP %s: the kernel refuses perf events (%s)" % (skipped, why), flush=True)
    return not why


def program(ctx, name):
    path = os.path.join(ctx.build, "tests", "perf", name)
    check(os.access(path, os.X_OK), "%s is not built (tests/perf/meson.build, "
          "subdir('perf') in tests/meson.build)", path)
    return path


def sample_rate(want):
    """`want` Hz, or the kernel's ceiling if it is lower: a VM's kernel lowers
    perf_event_max_sample_rate when sampling interrupts run long, and perf
    record then refuses a higher -F outright."""
    try:
        with open("/proc/sys/kernel/perf_event_max_sample_rate") as f:
            return str(min(want, int(f.read())))
    except (OSError, ValueError):
        return str(want)


def tinyvm(ctx):
    return os.path.join(ctx.build, "stencils", "tinyvm")


def record(ctx, data, cmd, env, callgraph=()):
    p = ctx.run(["perf", "record", "-q", "-k", "mono", "-e", "cpu-clock", "-o", data]
                + list(callgraph) + ["--"] + cmd, env=env, timeout=T)
    check(p.returncode == 0, "perf record %s failed (%d):\n%s", " ".join(cmd), p.returncode,
          p.stderr[-3000:])
    return p


def inject(ctx, data):
    out = data + ".jit"
    p = ctx.run(["perf", "inject", "--jit", "-i", data, "-o", out], timeout=T)
    check(p.returncode == 0, "perf inject --jit failed (%d):\n%s", p.returncode,
          p.stderr[-3000:])
    return out


def report(ctx, data, *args):
    p = ctx.run(["perf", "report", "-i", data, "--stdio", "--no-children"] + list(args),
                timeout=T, check=True)
    return p.stdout


_SAMPLE = re.compile(r"^\s*(\d+)\s*(.*)$")
_FRAME = re.compile(r"^\s*[0-9a-f]+ (.*) \((.*)\)$")


def samples(ctx, data):
    """perf script's samples: (pid, [(symbol, dso), ...] innermost first).
    With call chains a sample is a "pid" line and one indented line per
    frame; without, one "pid ip sym (dso)" line."""
    p = ctx.run(["perf", "script", "-i", data, "-F", "pid,ip,sym,dso"], timeout=T, check=True)
    out = []
    for line in p.stdout.splitlines():
        head = _SAMPLE.match(line) if not line.startswith("\t") else None
        if head:
            out.append((int(head.group(1)), []))
            line = head.group(2)
        frame = _FRAME.match(line)
        if frame and out:
            out[-1][1].append((re.sub(r"\+0x[0-9a-f]+$", "", frame.group(1)), frame.group(2)))
    return [s for s in out if s[1]]


def chains_into_main(ctx, data, exe, min_jit=20):
    """Check that the samples in JIT code unwind to exe's main, some of them
    through a second JIT frame (an executor that called another one)."""
    jit = [fr for _, fr in samples(ctx, data) if "jitted-" in fr[0][1]]
    check(len(jit) >= min_jit, "only %d samples in JIT code", len(jit))
    to_main = [fr for fr in jit if any(s == "main" and d == exe for s, d in fr)]
    nested = [fr for fr in to_main if sum("jitted-" in d for _, d in fr) >= 2]
    broken = [fr for fr in jit if fr not in to_main]
    check(len(to_main) >= 0.9 * len(jit),
          "%d of %d JIT samples do not unwind to main; e.g. %s", len(broken), len(jit),
          " <- ".join(s for s, _ in broken[0]) if broken else "")
    check(len(nested) >= 0.5 * len(jit), "only %d of %d chains pass a second JIT frame",
          len(nested), len(jit))
    # The shim lives in JIT memory too: a sample that lands in its few bytes is
    # named after it, not after an op.
    unnamed = [fr[0][0] for fr in jit if not OP_SYMBOL.match(fr[0][0])
               and fr[0][0] != "tinyvm_shim"]
    check(not unnamed, "JIT samples named neither by an op nor the shim: %s", unnamed[:5])
    return to_main


# ---- reading a jitdump ------------------------------------------------------

def read_jitdump(path):
    """Header fields and records; fails on anything but whole records."""
    data = read(path, "rb")
    check(len(data) >= 40, "%s: no header", path)
    magic, version, size, mach, _, pid, ts, flags = struct.unpack_from("<IIIIIIQQ", data)
    check(magic == 0x4A695444 and version == 1 and size == 40 and flags == 0,
          "%s: bad header", path)
    records, off = [], size
    while off < len(data):
        check(off + 16 <= len(data), "%s: torn record prefix at %d", path, off)
        kind, total, stamp = struct.unpack_from("<IIQ", data, off)
        check(16 <= total <= len(data) - off, "%s: torn record at %d", path, off)
        records.append((kind, stamp, data[off + 16:off + total]))
        off += total
    return {"pid": pid, "mach": mach, "time": ts, "records": records}


def code_loads(dump):
    """(name, code_index, addr, size) of every JIT_CODE_LOAD."""
    out = []
    for kind, _, body in dump["records"]:
        if kind == JIT_CODE_LOAD:
            pid, tid, vma, addr, size, index = struct.unpack_from("<IIQQQQ", body)
            name = body[40:body.index(b"\0", 40)].decode()
            check(len(body) == 40 + len(name) + 1 + size, "load %s: code size mismatch", name)
            out.append((name, index, addr, size))
    return out


def loaded_code(dump):
    """{name: [code bytes of each JIT_CODE_LOAD of it, in order]}."""
    out = {}
    for kind, _, body in dump["records"]:
        if kind == JIT_CODE_LOAD:
            end = body.index(b"\0", 40)
            out.setdefault(body[40:end].decode(), []).append(body[end + 1:])
    return out


def check_jitdump(path, t0, t1, closed=True):
    """The invariants every complete dump of ours keeps."""
    dump = read_jitdump(path)
    recs = dump["records"]
    stamps = [dump["time"]] + [r[1] for r in recs]
    check(all(t0 <= t <= t1 for t in stamps),
          "%s: timestamps outside the run (not CLOCK_MONOTONIC?)", path)
    check(stamps == sorted(stamps), "%s: timestamps go backwards", path)
    loads = code_loads(dump)
    check(loads, "%s: no code loads", path)
    check(len({l[1] for l in loads}) == len(loads), "%s: code indices repeat", path)
    for i, (kind, stamp, body) in enumerate(recs):
        if kind == JIT_CODE_LOAD:
            check(i > 0 and recs[i - 1][0] == JIT_CODE_UNWINDING_INFO
                  and recs[i - 1][1] == stamp, "%s: load %d has no unwinding record", path, i)
        elif kind == JIT_CODE_UNWINDING_INFO:
            size, hdr, mapped = struct.unpack_from("<QQQ", body)
            check(hdr == 28 and mapped == size and 24 + size <= len(body),
                  "%s: bad unwinding record %d", path, i)
    kinds = [r[0] for r in recs]
    if closed:  # one JIT_CODE_CLOSE, last: perf's reader stops at it
        check(kinds.count(JIT_CODE_CLOSE) == 1 and kinds[-1] == JIT_CODE_CLOSE,
              "%s: JIT_CODE_CLOSE is not the last record only", path)
    return dump


def monotonic_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def env_jitdump(directory=None):
    env = {"STENCILRT_PERF": "jitdump"}
    if directory:
        env["STENCILRT_PERF_DIR"] = directory
    return env


# ---- tests ------------------------------------------------------------------

def test_jitdump_frame_pointer_callchains(ctx):
    if not need_perf(ctx):
        return
    exe = program(ctx, "tinyvm_fp")
    data = os.path.join(ctx.tmp, "perf.data")
    t0 = monotonic_ns()
    p = record(ctx, data, [exe, "--jit", "--repeat", "3", ctx.path(NESTED)],
               env_jitdump(ctx.tmp), ["-g"])
    t1 = monotonic_ns()
    check(p.stdout.strip() == NESTED_RESULT, "tinyvm printed %r", p.stdout)
    dumps = glob.glob(os.path.join(ctx.tmp, "jit-*.dump"))
    check(len(dumps) == 1, "expected one jitdump, found %s", dumps)
    dump = check_jitdump(dumps[0], t0, t1)
    names = [l[0] for l in code_loads(dump)]
    check(names[0] == "tinyvm_shim" and "work" in names and "mul@work[7]" in map(plain_op_name, names),
          "loads: %s", names[:8])
    # The marker: an executable mapping of the dump, which perf record logged.
    p = ctx.run(["perf", "script", "-i", data, "--show-mmap-events"], timeout=T, check=True)
    check(re.search(r"PERF_RECORD_MMAP2 .* r-xp %s" % re.escape(dumps[0]), p.stdout),
          "perf record saw no executable mapping of %s", dumps[0])
    jit = inject(ctx, data)
    images = glob.glob(os.path.join(ctx.tmp, "jitted-%d-*.so" % dump["pid"]))
    check(len(images) == len(names), "%d images for %d loads", len(images), len(names))
    text = report(ctx, jit, "--sort", "sym")
    hot = OP_SYMBOL.findall(text)
    check(any(s.endswith(("@work[7]", "@work[9]")) for s in hot),
          "perf report names no hot op of work:\n%s", text[:3000])
    chains_into_main(ctx, jit, exe)


def test_jitdump_dwarf_callchains(ctx):
    """The default directory, as a user would run it, and the stock tinyvm
    (no frame pointers): only the unwinding records get perf past JIT frames."""
    if not need_perf(ctx):
        return
    exe = tinyvm(ctx)
    data = os.path.join(ctx.tmp, "perf.data")
    pid = None
    try:
        p = record(ctx, data, [exe, "--jit", "--repeat", "3", ctx.path(NESTED)],
                   env_jitdump(), ["--call-graph", "dwarf,65528", "-F", sample_rate(2000)])
        check(p.stdout.strip() == NESTED_RESULT, "tinyvm printed %r", p.stdout)
        # The recorded process's own dump (others may write theirs meanwhile).
        pids = {s[0] for s in samples(ctx, data)}
        check(len(pids) == 1, "samples from processes %s, want tinyvm's alone", pids)
        pid = pids.pop()
        dump = "/tmp/jit-%d.dump" % pid
        check(os.path.exists(dump) and read_jitdump(dump)["pid"] == pid, "no %s", dump)
        jit = inject(ctx, data)
        chains_into_main(ctx, jit, exe)
        check_images(ctx, sorted(glob.glob("/tmp/jitted-%d-*.so" % pid))[:6])
    finally:
        if pid is not None:
            for f in glob.glob("/tmp/jit-%d.dump" % pid) + glob.glob("/tmp/jitted-%d-*.so" % pid):
                os.unlink(f)


def check_images(ctx, images):
    """perf inject's ELF images: an FDE covers exactly the image's .text, as
    llvm-dwarfdump decodes it from the sections (so our pc-relative pointers
    match the layout perf gives the unwind data)."""
    check(images, "no jitted images")
    for image in images:
        sections = ctx.run(["readelf", "-SW", image], timeout=T, check=True).stdout
        m = re.search(r"\.text\s+PROGBITS\s+([0-9a-f]+) [0-9a-f]+ ([0-9a-f]+)", sections)
        check(m and ".eh_frame_hdr" in sections, "%s: sections:\n%s", image, sections)
        lo, size = int(m.group(1), 16), int(m.group(2), 16)
        frames = ctx.run(["llvm-dwarfdump-22", "--eh-frame", image], timeout=T,
                         check=True).stdout
        ranges = [(int(a, 16), int(b, 16)) for a, b in
                  re.findall(r"FDE cie=\w+ pc=([0-9a-f]+)\.\.\.([0-9a-f]+)", frames)]
        check((lo, lo + size) in ranges, "%s: no FDE for .text %#x+%#x: %s", image, lo, size,
              ranges)
        check("CFA=RBP+16" in frames or "CFA=RSP+8" in frames, "%s: CFI:\n%s", image, frames)


def test_perf_map_names_jit_samples(ctx):
    """The map of the recorded process alone (found by the pid of its JIT
    samples, so that other programs writing maps at the same time do not
    matter) names samples by op."""
    if not need_perf(ctx):
        return
    data = os.path.join(ctx.tmp, "perf.data")
    maps = []
    try:
        p = record(ctx, data, [tinyvm(ctx), "--jit", "--repeat", "5", ctx.path(LOOP)],
                   {"STENCILRT_PERF": "map"})
        check(p.stdout.strip() == LOOP_RESULT, "tinyvm printed %r", p.stdout)
        jit = [(pid, fr) for pid, fr in samples(ctx, data) if fr[0][1].startswith("[JIT]")
               or "perf-" in fr[0][1]]
        pids = {pid for pid, _ in jit}
        check(len(pids) == 1, "JIT samples from processes %s, want tinyvm's alone", pids)
        maps = ["/tmp/perf-%d.map" % pids.pop()]
        check(os.path.exists(maps[0]), "no %s", maps[0])
        lines = read(maps[0]).splitlines()
        check(all(re.match(r"^[0-9a-f]+ [0-9a-f]+ \S+$", l) for l in lines), "bad line")
        names = [l.split()[2] for l in lines]
        check(names[0] == "tinyvm_shim" and "main" in names and "mod@main[13]" in map(plain_op_name, names),
              "map names: %s", names[:6])
        named = [fr for _, fr in jit if OP_SYMBOL.match(fr[0][0])]
        check(len(jit) >= 20 and len(named) >= 0.95 * len(jit),
              "%d of %d JIT samples named by op", len(named), len(jit))
    finally:
        for path in maps:
            if os.path.exists(path):
                os.unlink(path)


def test_jitdump_from_many_threads(ctx):
    """Three runtimes, twelve threads, one file: every load whole and present,
    including those after all runtimes were gone and a new one reopened it."""
    exe = program(ctx, "perf_threads")
    data = os.path.join(ctx.tmp, "perf.data")
    perf = need_perf(ctx, "perf record and inject (the dump is still checked)")
    t0 = monotonic_ns()
    if perf:
        p = record(ctx, data, [exe], env_jitdump(ctx.tmp))
    else:
        p = ctx.run([exe], env=env_jitdump(ctx.tmp), timeout=T, check=True)
    t1 = monotonic_ns()
    expected = int(re.search(r"loads (\d+)", p.stdout).group(1))
    dumps = glob.glob(os.path.join(ctx.tmp, "jit-*.dump"))
    check(len(dumps) == 1, "expected one jitdump, found %s", dumps)
    dump = check_jitdump(dumps[0], t0, t1)
    loads = code_loads(dump)
    check(len(loads) == expected, "%d loads in the dump, %d expected", len(loads), expected)
    executors = {l[0] for l in loads if re.match(r"^t\d+_\d+$", l[0])}
    check(len(executors) == (expected - 3) // 13, "%d executors", len(executors))
    if not perf:
        return
    jit = inject(ctx, data)
    images = glob.glob(os.path.join(ctx.tmp, "jitted-%d-*.so" % dump["pid"]))
    check(len(images) == expected, "perf inject made %d images of %d loads", len(images),
          expected)
    mmaps = ctx.run(["perf", "script", "-i", jit, "--show-mmap-events"], timeout=T,
                    check=True).stdout
    check(len(re.findall(r"PERF_RECORD_MMAP2 .*jitted-", mmaps)) == expected,
          "not every load became an mmap event")


def test_jitdump_after_fork(ctx):
    """The child writes jit-<child>.dump; neither file holds the other's code."""
    exe = program(ctx, "perf_fork")
    data = os.path.join(ctx.tmp, "perf.data")
    perf = need_perf(ctx, "perf record and inject (the dumps are still checked)")
    t0 = monotonic_ns()
    cmd = [exe, "10000000"]
    if perf:
        p = record(ctx, data, cmd, env_jitdump(ctx.tmp))
    else:
        p = ctx.run(cmd, env=env_jitdump(ctx.tmp), timeout=T, check=True)
    t1 = monotonic_ns()
    parent = int(re.search(r"parent (\d+)", p.stdout).group(1))
    child = int(re.search(r"child (\d+)", p.stdout).group(1))
    names = {}
    for pid in (parent, child):
        path = os.path.join(ctx.tmp, "jit-%d.dump" % pid)
        check(os.path.exists(path), "no %s", path)
        dump = check_jitdump(path, t0, t1)
        check(dump["pid"] == pid, "%s: header pid %d", path, dump["pid"])
        names[pid] = {l[0] for l in code_loads(dump)}
    check({"before_fork", "after_fork"} <= names[parent] and "in_child" not in names[parent],
          "parent's loads: %s", sorted(names[parent])[:10])
    check("in_child" in names[child] and not names[child] & {"before_fork", "after_fork",
                                                             "tinyvm_shim"},
          "child's loads: %s", sorted(names[child])[:10])
    if not perf:
        return
    jit = inject(ctx, data)
    check(glob.glob(os.path.join(ctx.tmp, "jitted-%d-*.so" % child)),
          "perf inject made no images for the child")
    by_pid = {}
    for pid, frames in samples(ctx, jit):
        if OP_SYMBOL.match(frames[0][0]):
            by_pid.setdefault(pid, set()).add(frames[0][0].split("@")[1].split("[")[0])
    check(by_pid.get(child) == {"in_child"}, "child samples in %s", by_pid.get(child))
    check("after_fork" in by_pid.get(parent, set()), "parent samples in %s",
          by_pid.get(parent))


def test_jitdump_reloads_code_patched_after_emit(ctx):
    """Code patched after emit (tinyvm --chain links its blocks with
    sr_patch_jump) is loaded again, so perf annotates the bytes that run: each
    block is loaded once more per link from it, and a reload differs from the
    load before it only in the 4 bytes of the linked jump's rel32."""
    t0 = monotonic_ns()
    p = ctx.run([tinyvm(ctx), "--chain", "--stats", os.path.join(ctx.root, LOOP)],
                env=env_jitdump(ctx.tmp), timeout=T, check=True)
    t1 = monotonic_ns()
    check(p.stdout.strip() == LOOP_RESULT, "loop.tvm --chain printed %r", p.stdout)
    links = int(re.search(r"(\d+) jumps linked", p.stderr).group(1))
    dumps = glob.glob(os.path.join(ctx.tmp, "jit-*.dump"))
    check(len(dumps) == 1, "dumps: %s", dumps)
    code = loaded_code(check_jitdump(dumps[0], t0, t1))
    blocks = {n: c for n, c in code.items() if re.match(r"main\.b\d+$", n)}
    check(blocks and sum(len(c) - 1 for c in blocks.values()) == links,
          "%d links, but the blocks were reloaded %s times", links,
          {n: len(c) for n, c in blocks.items()})
    for name, loads in sorted(blocks.items()):
        for old, new in zip(loads, loads[1:]):
            changed = [i for i in range(len(old)) if old[i] != new[i]]
            check(len(old) == len(new) and changed and changed[-1] - changed[0] < 4,
                  "%s: a reload changed bytes %s, not one rel32", name, changed)


def test_unwritable_directory_warns_once(ctx):
    """No file, one warning per process, the JIT unaffected (also with three
    runtimes and a reopen in perf_threads)."""
    not_a_dir = os.path.join(ctx.tmp, "plain-file")
    open(not_a_dir, "w").close()
    for directory in ("/proc", os.path.join(ctx.tmp, "missing"), not_a_dir):
        p = ctx.run([tinyvm(ctx), "--jit", ctx.path(LOOP)], env=env_jitdump(directory),
                    timeout=T)
        check(p.returncode == 0 and p.stdout.strip() == LOOP_RESULT,
              "tinyvm with STENCILRT_PERF_DIR=%s: %d %r", directory, p.returncode, p.stdout)
        warnings = p.stderr.strip().splitlines()
        check(len(warnings) == 1 and warnings[0].startswith("stencilrt: warning: cannot create")
              and directory in warnings[0], "STENCILRT_PERF_DIR=%s: stderr %r", directory,
              p.stderr)
    p = ctx.run([program(ctx, "perf_threads")], env=env_jitdump("/proc"), timeout=T)
    check(p.returncode == 0 and len(p.stderr.strip().splitlines()) == 1,
          "perf_threads: %d, stderr %r", p.returncode, p.stderr[-2000:])


def limited(cmd, limit):
    """cmd with its file size limited to `limit` bytes: writes past it fail
    with EFBIG as they would with ENOSPC (SIGXFSZ ignored, as a full disk
    sends no signal)."""
    return ["sh", "-c", 'trap "" XFSZ; exec prlimit --fsize=%d "$@"' % limit, "sh"] + cmd


def test_full_disk_leaves_whole_records(ctx):
    if not need_perf(ctx):
        return
    data = os.path.join(ctx.tmp, "perf.data")
    limit = 6000
    p = record(ctx, data, limited([tinyvm(ctx), "--jit", ctx.path(NESTED)], limit),
               env_jitdump(ctx.tmp))
    check(p.stdout.strip() == NESTED_RESULT, "tinyvm printed %r", p.stdout)
    warnings = p.stderr.strip().splitlines()
    check(len(warnings) == 1 and "cannot write" in warnings[0], "stderr: %r", p.stderr)
    dumps = glob.glob(os.path.join(ctx.tmp, "jit-*.dump"))
    check(len(dumps) == 1 and os.path.getsize(dumps[0]) <= limit, "dumps: %s", dumps)
    dump = check_jitdump(dumps[0], 0, monotonic_ns(), closed=False)
    loads = code_loads(dump)
    check(0 < len(loads) and dump["records"][-1][0] == JIT_CODE_LOAD,
          "the dump should end with a whole code load")
    inject(ctx, data)
    images = glob.glob(os.path.join(ctx.tmp, "jitted-%d-*.so" % dump["pid"]))
    check(len(images) == len(loads), "%d images for %d loads", len(images), len(loads))
    # The perf map the same way: whole lines only. Its name has the pid, which
    # the wrapper keeps (sh and prlimit exec the program).
    env = dict(os.environ, STENCILRT_PERF="map")
    proc = subprocess.Popen(limited([program(ctx, "perf_threads")], 4096), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    path = "/tmp/perf-%d.map" % proc.pid
    try:
        try:
            _, err = proc.communicate(timeout=T)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise TestFailure("perf_threads timed out after %ss" % T)
        check(proc.returncode == 0 and len(err.strip().splitlines()) == 1,
              "perf_threads: %d, stderr %r", proc.returncode, err[-2000:])
        check(os.path.exists(path), "no %s", path)
        text = read(path)
        check(text.endswith("\n") and all(re.match(r"^[0-9a-f]+ [0-9a-f]+ \S+$", l)
                                          for l in text.splitlines()), "a torn map line")
    finally:
        if os.path.exists(path):
            os.unlink(path)
