"""stencilrt-stack (tools/stack/) against live JIT processes: the registry
(runtime/stencilrt_registry.h) read from another process while the JIT runs,
and every JIT frame it names checked against what the process itself logged.
Programs: tests/stack/ (churn, its broken-writer builds, dlspin), tinyvm.

  test_churn_names_every_jit_frame
        tests/stack/churn (threads emitting, running and freeing executors
        on one runtime, code addresses and registry slots reused all the
        time) sampled by `stencilrt-stack --sample` at 1000 Hz, a run with 8
        threads then runs with 2, until 10,000+ samples in all;
        every J line of --samples-out checked against churn's log: the id
        exists and carries that name, the executor belongs to the sampled
        thread, its code holds the PC (innermost: the instruction's range,
        hot or cold part; outer frames: PC-1) at that index, with that op
        (frames in div's cold part, from churn's trap shape, must be seen and
        named by their instruction, not as veneers), and it was live at
        the sample (emitted before the threads resumed, not freed before
        they stopped); the same judged by name alone. No JIT frame of a live
        executor is left unnamed and the summary counts no unresolved one;
        the main thread reaches main (reached_main 1) and every other thread
        its start routine (churn_worker, churn_watch; reached_main 0: main is
        not on their stacks) in every sample; the summary line, the hottest
        ops, the folded stacks and the samples file agree. Reports torn
        reads retried.
  test_negative_controls
        the same check against churn built on writers broken on purpose:
        churn_nogen (a slot keeps its generation when reused) must be caught
        naming executors wrongly (by id and by stale name); churn_noseq
        (slot counters never change) is run and reported: a fast reader does
        not catch it, for the reason given in the test.
  test_slow_reader
        the tool with tests/stack/libslowread.so preloaded (its remote copies
        backwards, a slot at a time, paused mid-slot: a reader preempted
        mid-copy), judged as the positive test's runs are: churn must have no
        wrong or unresolved frame (its torn copies rejected by the counters),
        churn_noseq must have frames wrongly named or stale by name.
  test_registry_reader_controls
        tests/stack/test_registry_reader built against both broken writers
        fails its churn case (in-process, a reader that copies backwards and
        is preempted mid-copy catches the missing counters).
  test_tinyvm_matches_gdb
        tinyvm programs stopped (SIGSTOP) at a few moments: `stencilrt-stack
        PID` and `gdb -p PID` (`thread apply all bt`, GDB's JIT interface)
        give the same frames (names and PCs), JIT frames `op@function[i]`,
        every thread reaching main; four stops each (a stop on a `ret` is
        not compared, GDB ignoring JIT CFI there: another is taken).
        Control: with STENCILRT_REGISTRY=0 the tool names no JIT frame and
        the comparison fails.
  test_stripped_tinyvm
        a stripped copy of tinyvm: the registry is found in .dynsym and JIT
        frames are named, with the exact frames below them.
  test_dlopened_library
        tests/stack/dlspin runs JIT code through a stripped copy of
        libstencilrt.so opened with dlopen(): the registry is found in the
        library's .dynsym. (Both fail with STENCILRT_REGISTRY=0.)
  test_refusals
        exit codes and messages: version 2 (churn_v2) exit 1 naming both
        versions; a process without stencilrt exit 1 "no registry"; no such
        process exit 3; attach refused (another user, no CAP_SYS_PTRACE)
        exit 3 naming the owner's uid and CAP_SYS_PTRACE, not Yama; bad
        usage exit 2; --help 0.
  test_zombie
        a zombie (a child that exited, its parent never waiting) is refused
        with exit 3 "it has exited (state Z: zombie) and is not yet reaped by
        its parent, process N", in both modes; no permission or Yama hint.
  test_traced
        a process its parent traces (PTRACE_TRACEME) is refused with exit 3
        "it is already traced by process N", no Yama hint.
  test_registry_reader_aarch64
        tests/stack/test_registry_reader (the reader library in one process,
        threads emitting while another reads) built for AArch64 and run
        under qemu-aarch64; on x86-64 it runs with the unit programs.
"""
import bisect
import collections
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time

from sgtest import A64_QEMU, TestFailure, a64_cross_build, a64_missing, check, plain_op_name, write

ASAN = False  # the tool reads another process; the sanitized build adds nothing here

T = 120  # seconds for one command
CHURN_SAMPLES = 10000  # samples the positive test takes in all
SUMMARY = re.compile(r"^stencilrt-stack: (\d+) samples, (\d+) stacks, (\d+) JIT frames, "
                     r"(\d+) torn reads retried, (\d+) unresolved JIT frames$", re.M)
JIT_NAME = re.compile(r"^(\w+(?:\[[\w=,]+\])?)@(\S+)\[(\d+)\]$")  # op, or op[axis=value,...]


# --- programs ------------------------------------------------------------------

def stack_tool(ctx):
    p = os.path.join(ctx.build, "tools", "stack", "stencilrt-stack")
    check(os.path.exists(p), "%s is missing (build the stencilrt-stack target)", p)
    return p


def stack_program(ctx, name):
    return os.path.join(ctx.build, "tests", "stack", name)


def tinyvm(ctx):
    return os.path.join(ctx.build, "stencils", "tinyvm")


class Target:
    """A process started for the tool to look at: waits for its ready line
    (a regex on stdout); killed at the end."""

    def __init__(self, ctx, argv, ready=None, env=None, stdin=False):
        self.argv = argv
        self.err_path = os.path.join(ctx.tmp, "target-%d.err" % time.monotonic_ns())
        self.err = open(self.err_path, "w")
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.err,
                                     stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                                     env=dict(os.environ, **(env or {})))
        self.pid = self.proc.pid
        self.out = ""
        if ready:
            self.wait_line(ready)

    def read_some(self, timeout):
        """What stdout has within timeout seconds; False at its end."""
        r, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not r:
            return True
        data = os.read(self.proc.stdout.fileno(), 65536)
        self.out += data.decode(errors="replace")
        return bool(data)

    def wait_line(self, pattern, timeout=30):
        deadline = time.monotonic() + timeout
        while not re.search(pattern, self.out, re.M):
            left = deadline - time.monotonic()
            check(left > 0, "%s: no %r within %ss; stdout %r", self.argv[0], pattern, timeout,
                  self.out[-500:])
            if not self.read_some(left):
                raise TestFailure("%s exited (%s) before %r\nstderr:\n%s" % (
                    self.argv[0], self.proc.wait(), pattern, self.stderr()))

    def finish(self, timeout=T):
        """Close stdin (churn --stop-on-stdin stops) and wait for the exit."""
        if self.proc.stdin:
            self.proc.stdin.close()
        deadline = time.monotonic() + timeout
        while self.read_some(max(0.0, deadline - time.monotonic())):
            if time.monotonic() > deadline:
                self.kill()
                raise TestFailure("%s did not exit within %ss" % (self.argv[0], timeout))
        return self.proc.wait(timeout=max(1.0, deadline - time.monotonic()))

    def stderr(self):
        self.err.flush()
        with open(self.err_path) as f:
            return f.read()[-3000:]

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.err.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.kill()


def cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def proc_state(pid):
    with open("/proc/%d/stat" % pid) as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def wait_for(cond, what, timeout=30):
    deadline = time.monotonic() + timeout
    while not cond():
        check(time.monotonic() < deadline, "%s: not within %ss", what, timeout)
        time.sleep(0.01)


# --- the tool's outputs -----------------------------------------------------------

def parse_stacks(text):
    """`stencilrt-stack PID`'s output: {tid: (thread name, [frame])}, each frame a
    dict with pc, kind (jit, native, shim, unknown) and name (JIT: op@fn[i];
    native: the symbol without offset; unknown: None)."""
    threads, frames = {}, None
    for line in text.splitlines():
        m = re.match(r'^thread (\d+) "(.*)":$', line)
        if m:
            frames = []
            threads[int(m.group(1))] = (m.group(2), frames)
            continue
        m = re.match(r"^\s+#(\d+)\s+0x([0-9a-f]+) (.*)$", line)
        if not m:
            continue
        check(frames is not None and int(m.group(1)) == len(frames),
              "frame out of order: %r", line)
        pc, rest = int(m.group(2), 16), m.group(3)
        j = re.match(r"^(\w+(?:\[[\w=,]+\])?@\S+\[\d+\]) \(executor (\S+), id (\d+)\)$", rest)
        n = re.match(r"^(\S+?)(?:\+0x[0-9a-f]+)? \((\S+)\)$", rest)
        if j:
            frames.append(dict(pc=pc, kind="jit", name=j.group(1), executor=j.group(2),
                               id=int(j.group(3))))
        elif rest == "[stencilrt shim]":
            frames.append(dict(pc=pc, kind="shim", name=None))
        elif n and n.group(1) != "??":
            frames.append(dict(pc=pc, kind="native", name=n.group(1), module=n.group(2)))
        else:
            check(n, "unreadable frame line %r", line)
            frames.append(dict(pc=pc, kind="unknown", name=None, module=n.group(2)))
    return threads


def summary(stderr):
    m = SUMMARY.search(stderr)
    check(m, "no summary line in stderr:\n%s", stderr[-3000:])
    keys = ("samples", "stacks", "jit_frames", "torn", "unresolved")
    return dict(zip(keys, (int(x) for x in m.groups())))


def read_samples(path):
    """--samples-out: {(sample, tid): stack}; a stack has t_stop, t_resume,
    nframes, reached_main and frames {depth: (kind, pc, ...)}."""
    stacks = {}
    with open(path) as f:
        for line in f:
            w = line.split()
            key = (int(w[1]), int(w[2]))
            if w[0] == "S":
                check(key not in stacks, "sample %s thread %s listed twice", *key)
                stacks[key] = dict(t_stop=int(w[3]), t_resume=int(w[4]), nframes=int(w[5]),
                                   reached_main=w[6] == "1", frames={})
            elif w[0] == "J":  # an empty executor name (a torn read) leaves no word
                stacks[key]["frames"][int(w[3])] = ("J", int(w[4], 16), int(w[5]), int(w[6]),
                                                   w[7], w[8] if len(w) > 8 else "")
            elif w[0] == "N":
                stacks[key]["frames"][int(w[3])] = ("N", int(w[4], 16), w[5])
            else:
                raise TestFailure("%s: unknown line %r" % (path, line))
    for key, st in stacks.items():
        check(sorted(st["frames"]) == list(range(st["nframes"])),
              "sample %s thread %s: %d frames listed, S says %d", key[0], key[1],
              len(st["frames"]), st["nframes"])
    return stacks


class Truth:
    """churn's log: every executor it emitted, with id, thread, name, code,
    instruction map and the times it was emitted and freed. A run logs some
    100,000 executors a second: each line is indexed when read and made a
    record (rec) only when a frame asks for it."""

    def __init__(self, path):
        self.lines = []
        self.by_id = collections.defaultdict(list)  # id: line numbers
        self.by_name = {}
        self.by_tid = collections.defaultdict(list)  # emit order
        self.emits = collections.defaultdict(list)  # t_emit, in the same order
        self.tids = []
        self.records = {}
        with open(path) as f:
            for line in f:
                w = line.split(None, 6)
                if w[0] == "T":
                    self.tids.append(int(w[2]))
                    continue
                i = len(self.lines)
                self.lines.append(line)
                self.by_id[int(w[1])].append(i)
                self.by_name[w[3]] = i
                self.by_tid[int(w[2])].append(i)
                self.emits[int(w[2])].append(int(w[5]))

    def __len__(self):
        return len(self.lines)

    def rec(self, i):
        r = self.records.get(i)
        if r is None:
            w = self.lines[i].split()
            ops = w[8].split(",")
            offs = [int(x) for x in w[9].split(",")]
            colds = [int(x) for x in w[10].split(",")]
            check(len(ops) == int(w[7]) and len(offs) == len(colds) == len(ops) + 1 and
                  colds[-1] == offs[-1], "churn log: %r", self.lines[i])
            r = self.records[i] = dict(id=int(w[1]), tid=int(w[2]), name=w[3],
                                       start=int(w[4], 16), t_emit=int(w[5]),
                                       t_free=int(w[6]) or None, ops=ops, offs=offs,
                                       colds=colds)
        return r

    def with_id(self, ident):
        return [self.rec(i) for i in self.by_id.get(ident, ())]

    def named(self, name):
        i = self.by_name.get(name)
        return None if i is None else self.rec(i)

    def live_on(self, tid, t_stop, t_resume):
        """The thread's executors live through the whole sample."""
        k = bisect.bisect_right(self.emits.get(tid, []), t_stop)
        rs = [self.rec(i) for i in self.by_tid.get(tid, [])[max(0, k - 4):k]]
        return [r for r in rs if r["t_free"] is None or r["t_free"] > t_resume]


VENEERS_MAX = 256  # bytes of veneers an executor of churn's may have after its code


def holds(r, index, pc, depth):
    """Instruction `index` of r holds pc, in its hot part or its cold part
    (r["colds"]: after every hot part); index n is the veneers after the code
    (jumps, so only ever an innermost frame), which the log does not size."""
    n, off = len(r["ops"]), pc - r["start"]
    if index == n:
        return depth == 0 and 0 <= off - r["offs"][n] < VENEERS_MAX
    hot_end = r["offs"][index + 1] if index + 1 < n else r["colds"][0]
    return 0 <= index < n and (r["offs"][index] <= off < hot_end or
                               r["colds"][index] <= off < r["colds"][index + 1])


def in_cold_part(truth, frame, depth):
    """Whether a J frame's PC is in a cold part of the executor it names."""
    r = next((c for c in truth.with_id(frame[2]) if c["name"] == frame[5]), None)
    off = frame[1] - (depth > 0) - r["start"] if r else -1
    return r is not None and r["colds"][0] <= off < r["colds"][-1]


def check_jit_frame(truth, st, tid, depth, frame):
    """Why a J frame is wrong (None if right). An outer frame's PC is a return
    address: the call is at PC-1."""
    _, pc, ident, index, op, name = frame
    pc -= depth > 0
    cands = truth.with_id(ident)
    if not cands:
        return "unknown id"
    r = next((c for c in cands if c["name"] == name), None)
    if not r:
        return "wrong name (id %d is %s)" % (ident, "/".join(c["name"] for c in cands))
    if r["tid"] != tid:
        return "another thread's executor (of %d)" % r["tid"]
    if not holds(r, index, pc, depth):
        return "PC not in instruction %d" % index
    if (r["ops"] + ["veneer"])[index] != op:
        return "wrong op (is %s)" % (r["ops"] + ["veneer"])[index]
    if r["t_emit"] > st["t_resume"] or (r["t_free"] is not None and r["t_free"] < st["t_stop"]):
        return "not live at the sample"
    return None


def check_by_name(truth, st, depth, frame):
    """The J frame judged by its name alone, ids aside: 'stale' when the named
    executor was not live or does not hold the PC (None if it does)."""
    _, pc, _, index, _, name = frame
    r = truth.named(name)
    if not r:
        return "no executor has this name"
    pc -= depth > 0
    live = r["t_emit"] <= st["t_resume"] and (r["t_free"] is None or r["t_free"] >= st["t_stop"])
    return None if live and holds(r, index, pc, depth) else "stale"


def check_roots(truth, main_tid, tid, st):
    """None if the stack reaches the thread's root: main for the main thread,
    the start routine (churn_worker, churn_watch) for the others."""
    symbols = {f[2] for f in st["frames"].values() if f[0] == "N"}
    if tid == main_tid:
        return None if st["reached_main"] and "main" in symbols else "main thread: no main"
    if st["reached_main"]:
        return "reached_main on a thread that is not the main thread"
    root = "churn_worker" if tid in truth.tids else "churn_watch"
    return None if root in symbols else "thread: no %s" % root


class Findings:
    def __init__(self):
        self.count = collections.Counter()
        self.examples = {}

    def add(self, what, example):
        self.count[what] += 1
        self.examples.setdefault(what, example)

    def total(self, prefix=""):
        return sum(n for k, n in self.count.items() if k.startswith(prefix))

    def report(self):
        return "\n".join("  %d x %s, e.g. %s" % (n, k, self.examples[k])
                         for k, n in self.count.most_common())


def check_churn_samples(truth, stacks, main_tid):
    """Every problem of one run's samples, by kind; plus counts of what was seen."""
    bad, seen = Findings(), collections.Counter()
    for (sample, tid), st in sorted(stacks.items()):
        where = "sample %d thread %d" % (sample, tid)
        why = check_roots(truth, main_tid, tid, st)
        if why:
            bad.add("root: " + why, "%s: %s" % (where, sorted(st["frames"].items())[-4:]))
        live = truth.live_on(tid, st["t_stop"], st["t_resume"])
        njit = 0
        for depth, f in sorted(st["frames"].items()):
            if f[0] == "J":
                njit += 1
                why = check_jit_frame(truth, st, tid, depth, f)
                if why:
                    bad.add("jit: " + why, "%s depth %d: %s" % (where, depth, f))
                stale = check_by_name(truth, st, depth, f)
                if stale:
                    bad.add("by name: " + stale, "%s depth %d: %s" % (where, depth, f))
                seen["cold_frames"] += not why and in_cold_part(truth, f, depth)
            elif f[2] in ("?", "??"):  # a native frame without a symbol; unresolved
                pc = f[1] - (depth > 0)
                if any(r["start"] <= pc < r["start"] + r["offs"][-1] for r in live):
                    bad.add("jit: a live executor's frame left unnamed",
                            "%s depth %d: %#x" % (where, depth, f[1]))
                if f[2] == "??":
                    seen["unresolved"] += 1
                    seen.setdefault("unresolved_example", "%s depth %d: %#x; stack %s" % (
                        where, depth, f[1], sorted(st["frames"].items())))
        seen["stacks"] += 1
        seen["with_jit"] += njit > 0
        seen["nested_jit"] += njit > 1
        seen["jit_frames"] += njit
    return bad, seen


def check_folded(path, nstacks, comm):
    """--output: one `root;...;leaf COUNT` per stack seen, rooted at the thread's name."""
    total = 0
    with open(path) as f:
        for line in f:
            m = re.match(r"^(\S.*) (\d+)$", line.rstrip("\n"))  # "[stencilrt shim]" has a space
            check(m, "folded output: %r", line)
            check(m.group(1).split(";")[0] == comm, "folded stack rooted elsewhere: %r", line)
            total += int(m.group(2))
    check(total == nstacks, "folded stacks count %d stacks, the samples file has %d", total,
          nstacks)


def check_hottest_ops(stderr, stacks):
    """The summary's hottest ops: each count is the stacks whose innermost JIT
    frame is that op, and no op left out counts more than one listed."""
    listed = re.findall(r"^\s+(\S+)\s+(\d+)\s+[\d.]+%$", stderr, re.M)
    counts = collections.Counter()
    for st in stacks.values():
        jit = [f for _, f in sorted(st["frames"].items()) if f[0] == "J"]
        if jit:
            counts[jit[0][4]] += 1
    check(listed, "no hottest ops in the summary:\n%s", stderr[-2000:])
    for op, n in listed:
        check(counts[op] == int(n), "hottest ops: %s %s, the samples file has %d", op, n,
              counts[op])
    least = min(int(n) for _, n in listed)
    others = [op for op, n in counts.items() if op not in dict(listed) and n > least]
    check(len(listed) == 10 or not others, "hottest ops leave out %s", others)


def sample_churn(ctx, program, tag, hz=1000, seconds=4, threads=8, tool_env=None):
    """Run churn under `stencilrt-stack --sample` (in tool_env, added to the
    environment), check what can be checked of the run as a whole, and return
    its parts (truth, stacks, summary, the findings of check_churn_samples and
    what it saw)."""
    log = os.path.join(ctx.tmp, "%s.log" % tag)
    samples_out = os.path.join(ctx.tmp, "%s.samples" % tag)
    folded = os.path.join(ctx.tmp, "%s.folded" % tag)
    argv = [stack_program(ctx, program), "--threads", str(threads), "--seconds",
            str(seconds + 60), "--stop-on-stdin", "--log", log, "--iters", "300",
            "--max-records", "1000000"]
    with Target(ctx, argv, ready=r"^churn: ready pid \d+", stdin=True) as churn:
        p = ctx.run([stack_tool(ctx), "--sample", str(hz), "--duration", str(seconds),
                     "--output", folded, "--samples-out", samples_out, str(churn.pid)],
                    timeout=seconds + T, env=tool_env)
        check(p.returncode == 0, "%s: stencilrt-stack --sample exited %d\nstderr:\n%s", tag,
              p.returncode, p.stderr[-3000:])
        rc = churn.finish()
        check(rc == 0 and "churn: done" in churn.out, "%s: churn exited %s\nstderr:\n%s", tag,
              rc, churn.stderr())
        check("log is full" not in churn.stderr(), "%s: %s", tag, churn.stderr())
    truth = Truth(log)
    stacks = read_samples(samples_out)
    s = summary(p.stderr)
    check(s["samples"] == len({k[0] for k in stacks}) and s["stacks"] == len(stacks),
          "%s: summary %s, samples file %d samples %d stacks", tag, s,
          len({k[0] for k in stacks}), len(stacks))
    check(s["jit_frames"] == sum(1 for st in stacks.values() for f in st["frames"].values()
                                 if f[0] == "J"),
          "%s: the summary's JIT frames differ from the samples file's", tag)
    check_folded(folded, len(stacks), program[:15])  # a thread's name: its comm
    check_hottest_ops(p.stderr, stacks)
    bad, seen = check_churn_samples(truth, stacks, churn.pid)
    return dict(truth=truth, stacks=stacks, summary=s, bad=bad, seen=seen, pid=churn.pid,
                stderr=p.stderr)


# --- tests -----------------------------------------------------------------------

# Runs of the positive test. A sample stops every thread, so its cost grows
# with them (here, on 2 shared cores: 120-500 samples a second with 8
# threads, 400-900 with 2): the first run has 8 threads for 6 s, the others
# 2, each as long as the rate seen so far says CHURN_SAMPLES needs (4 to 20
# s), for 3 or 4 runs in all (45-75 s).
CHURN_FIRST = (8, 6)
CHURN_MAX_RUNS = 8


def churn_runs(taken):
    """(threads, seconds) of each run, given the samples each earlier run took."""
    yield CHURN_FIRST
    seconds = 8
    while len(taken) < CHURN_MAX_RUNS and sum(taken) < CHURN_SAMPLES:
        yield 2, seconds
        rate = max(taken[-1] / seconds, 1)
        seconds = int(min(20, max(4, (CHURN_SAMPLES - sum(taken)) / rate + 1)))


def judge_run(r, tag, total):
    """Adds to total every problem of one churn run (sample_churn's result):
    check_churn_samples' findings and the unresolved frames of the summary;
    and checks that enough of its stacks had a JIT frame to mean something."""
    for k, n in r["bad"].count.items():
        total.count[k] += n
        total.examples.setdefault(k, r["bad"].examples[k])
    if r["summary"]["unresolved"]:
        what = "tool: unresolved JIT frames (summary line)"
        total.count[what] += r["summary"]["unresolved"]
        total.examples.setdefault(what, "%s; one of its %d: %s" % (
            tag, r["seen"]["unresolved"], r["seen"].get("unresolved_example")))
    check(r["seen"]["unresolved"] == r["summary"]["unresolved"],
          "%s: the summary counts %d unresolved frames, the samples file %d", tag,
          r["summary"]["unresolved"], r["seen"]["unresolved"])
    check(r["seen"]["with_jit"] > r["seen"]["stacks"] // 10,
          "%s: only %d of %d stacks have a JIT frame", tag, r["seen"]["with_jit"],
          r["seen"]["stacks"])


def test_churn_names_every_jit_frame(ctx):
    total = Findings()
    samples = torn = jit = nested = cold = runs = executors = 0
    t0 = time.monotonic()
    taken = []
    for threads, seconds in churn_runs(taken):
        runs += 1
        r = sample_churn(ctx, "churn", "churn%d" % runs, seconds=seconds, threads=threads)
        samples += r["summary"]["samples"]
        taken.append(r["summary"]["samples"])
        torn += r["summary"]["torn"]
        jit += r["seen"]["jit_frames"]
        nested += r["seen"]["nested_jit"]
        cold += r["seen"]["cold_frames"]
        executors += len(r["truth"])
        print("     run %d: %d threads, %d samples, %d JIT frames, %d torn reads retried" % (
            runs, threads, r["summary"]["samples"], r["seen"]["jit_frames"],
            r["summary"]["torn"]), flush=True)
        judge_run(r, "run %d" % runs, total)
    print("     %d samples in %d runs (%.0f s), %d executors churned, %d JIT frames checked "
          "(%d stacks with JIT -> C -> JIT, %d frames in cold code), %d torn reads retried" % (
              samples, runs, time.monotonic() - t0, executors, jit, nested, cold, torn),
          flush=True)
    check(samples >= CHURN_SAMPLES, "only %d samples in %d runs", samples, runs)
    check(nested > 0, "no stack had two JIT frames (nest -> leaf)")
    check(cold > 0, "no JIT frame was in cold code (trap -> div's cold part -> vm_trap)")
    check(not total.count, "%d problems:\n%s", total.total(), total.report())


def test_negative_controls(ctx):
    """churn_nogen: a slot's generation stays when the slot is reused, so the
    tool's cache (keyed by generation) names new code after the old executor,
    and ids are slot numbers: it must be caught. churn_noseq: slot counters
    never change; run with the tool as it is and reported: not caught by a
    fast reader (see below); test_slow_reader catches it.

    Why churn_noseq is not caught by a fast reader: the tool copies slots
    while the JIT runs only in its snapshot, a whole block (256 slots, 16 KiB)
    in one process_vm_readv, which copies forward and fast; a writer frees a
    slot by zeroing it from the generation up and fills it from the
    generation up, so a forward copy crossing a free and an emit shows the old
    executor, an empty slot (generation 0, skipped), or new fields followed by
    zeros (no instructions: not named), never a new generation with the old
    executor's name and map. Single slots are copied only while the threads
    are stopped, when no writer runs. The tear that matters needs a copy that
    overtakes the writer: backwards, preempted mid-slot."""
    r = sample_churn(ctx, "churn_nogen", "churn_nogen", seconds=4, threads=4)
    bad = r["bad"]
    print("     churn_nogen: %d samples, %d JIT frames; found:\n%s" % (
        r["summary"]["samples"], r["seen"]["jit_frames"], bad.report() or "  nothing"),
        flush=True)
    check(bad.total("jit:") > 0 and bad.total("by name:") > 0,
          "churn_nogen: not caught in %d samples (%d JIT frames):\n%s", r["summary"]["samples"],
          r["seen"]["jit_frames"], bad.report())
    r = sample_churn(ctx, "churn_noseq", "churn_noseq", seconds=4, threads=4)
    print("     churn_noseq, fast reader: %d samples, %d JIT frames, %d torn reads retried; "
          "found:\n%s" % (r["summary"]["samples"], r["seen"]["jit_frames"], r["summary"]["torn"],
                          kinds(r["bad"]) or "  nothing (as explained above)"), flush=True)


def kinds(bad):
    """Findings counted by kind (their text up to the first parenthesis, numbers
    as N), with one example each: a broken writer's findings are many, and
    each is unique."""
    count, example = collections.Counter(), {}
    for k, n in bad.count.items():
        kind = re.sub(r"\d+", "N", k.split(" (")[0])
        count[kind] += n
        example.setdefault(kind, "%s: %s" % (k, bad.examples[k]))
    return "\n".join("  %d x %s, e.g. %s" % (n, k, example[k]) for k, n in count.most_common())


SLOWREAD_STATS = re.compile(r"^slowread: (\d+) small copies \((\d+) changed while copied\), "
                            r"(\d+) large copies, (\d+) passed through, (\d+) 64-byte pieces "
                            r"changed while copied$", re.M)


def slow_churn(ctx, program, seconds, threads):
    """sample_churn with tests/stack/libslowread.so preloaded into the tool
    (its defaults: slots copied backwards, paused mid-slot); also returns its
    counts, which say the copies were slow and crossed writes."""
    lib = os.path.join(ctx.build, "tests", "stack", "libslowread.so")
    check(os.path.exists(lib), "%s is missing (build the slowread target)", lib)
    r = sample_churn(ctx, program, program + "_slow", seconds=seconds, threads=threads,
                     tool_env={"LD_PRELOAD": lib, "SLOWREAD_STATS": "1"})
    m = SLOWREAD_STATS.search(r["stderr"])
    check(m, "%s: no slowread line in the tool's stderr (not preloaded?):\n%s", program,
          r["stderr"][-2000:])
    r["slow"] = dict(zip(("small", "small_changed", "large", "passed", "changed"),
                         (int(x) for x in m.groups())))
    print("     %s under slowread: %d threads, %d samples, %d JIT frames, %d torn reads "
          "retried; %s" % (program, threads, r["summary"]["samples"], r["seen"]["jit_frames"],
                           r["summary"]["torn"], m.group(0)), flush=True)
    check(r["slow"]["large"] > 0 and r["slow"]["changed"] > 0,
          "%s: slowread made no large copy that a writer crossed: %s", program, m.group(0))
    return r


def test_slow_reader(ctx):
    """stencilrt-stack with its remote copies slow and backwards
    (tests/stack/libslowread.so: a reader preempted mid-copy), judged by the
    positive test's own check (judge_run). churn: the counters must reject
    every copy a writer crossed (torn reads retried > 0) and no frame may be
    wrong or unresolved. churn_noseq (no counters): a slot copied across a
    free and an emit mixes two executors (the new generation and range, the
    old name or instruction map, or the old length with the new name), and
    frames must come out wrongly named or stale by name. Seen here in four
    runs (4 threads, 17-18 s each): churn 8 s, 193-262 samples, 827-1019 JIT
    frames, 0 wrong, 3302-6107 torn reads retried; churn_noseq 6 s, 684-972
    samples, 88-135 frames wrong by name (158-210 findings in all). The tool
    without the library finds nothing in churn_noseq (test_negative_controls)."""
    total = Findings()
    r = slow_churn(ctx, "churn", seconds=8, threads=4)
    judge_run(r, "churn under slowread", total)
    check(r["summary"]["torn"] > 0, "churn under slowread: no torn read retried, so no copy "
          "crossed a write and the run shows nothing about the counters")
    check(not total.count, "churn under slowread: %d problems:\n%s", total.total(),
          total.report())
    r = slow_churn(ctx, "churn_noseq", seconds=6, threads=4)
    bad = r["bad"]
    print("     churn_noseq under slowread found:\n%s" % (kinds(bad) or "  nothing"), flush=True)
    check(bad.total("by name:") > 0,
          "churn_noseq under slowread: no wrong or stale name in %d samples (%d JIT frames), "
          "%d pieces changed while copied; found:\n%s", r["summary"]["samples"],
          r["seen"]["jit_frames"], r["slow"]["changed"], kinds(bad) or "  nothing")


def test_registry_reader_controls(ctx):
    """tests/stack/test_registry_reader built against the broken writers must
    fail its churn case (its refusal cases still pass)."""
    for variant in ("nogen", "noseq"):
        p = ctx.run([stack_program(ctx, "test_registry_reader_" + variant)], timeout=T)
        churn = re.search(r"^(ok  |FAIL) churn(.*)$", p.stdout, re.M)
        check(p.returncode != 0 and churn and churn.group(1) == "FAIL" and
              re.search(r"^(\d+) passed, 1 failed$", p.stdout, re.M),
              "test_registry_reader_%s: exit %d, its churn case should fail:\n%s", variant,
              p.returncode, p.stdout[-2000:])
        print("     %s: FAIL churn%s" % (variant, churn.group(2)[:300]), flush=True)


def gdb_attached(ctx, pid, *args):
    """GDB in batch mode attached to pid, running args (-ex ..., -x FILE)."""
    return ctx.run(["gdb", "-batch", "-nx", "-iex", "set debuginfod enabled off", "-p", str(pid),
                    *args], timeout=T)


def gdb_stacks(ctx, pid):
    """`thread apply all bt` through GDB's JIT interface: {tid: [frame]}, each
    (pc or None, name); inlined frames (no address of their own) dropped."""
    p = gdb_attached(ctx, pid, "-ex", "thread apply all bt")
    threads, frames = {}, None
    for line in p.stdout.splitlines():
        m = re.match(r"^Thread \d+ \(.*LWP (\d+)\)", line)
        if m:
            frames = threads.setdefault(int(m.group(1)), [])
            continue
        m = re.match(r"^#(\d+)\s+(?:0x([0-9a-f]+) in )?(\S+) \(", line)
        if m and frames is not None:
            if m.group(2) or m.group(1) == "0":
                frames.append((int(m.group(2), 16) if m.group(2) else None, m.group(3)))
    check(threads, "gdb -p %d: no threads\nstdout:\n%s\nstderr:\n%s", pid, p.stdout[-3000:],
          p.stderr[-3000:])
    return threads


def compare_with_gdb(tag, ours, gdbs):
    check(sorted(ours) == sorted(gdbs), "%s: threads %s, GDB's %s", tag, sorted(ours),
          sorted(gdbs))
    for tid, (_, frames) in ours.items():
        mine = [(f["pc"], f["name"] or "shim") for f in frames]
        theirs = [(pc, "shim" if "shim" in name else name) for pc, name in gdbs[tid]]
        check(mine and mine[-1][1] == "main", "%s thread %d does not reach main: %s", tag, tid,
              mine)
        check(len(mine) == len(theirs) and all(
            a[1] == b[1] and (b[0] is None or a[0] == b[0]) for a, b in zip(mine, theirs)),
            "%s thread %d:\n  stencilrt-stack %s\n  gdb             %s", tag, tid,
            [(hex(pc), n) for pc, n in mine],
            [(hex(pc) if pc else None, n) for pc, n in theirs])


TINYVM_RUNS = [  # program, extra arguments, JIT frames expected at least once
    ("tests/gdb/spin.tvm", [], {"call@main[1]"}),
    ("stencils/programs/fib.tvm", ["--repeat", "100000"], {"call@fib[8]", "call@main[1]"}),
    ("stencils/programs/loop.tvm", ["--repeat", "100000"], set()),
]


def stopped_stacks(ctx, vm, tag):
    """The tool's and GDB's stacks of a process stopped with SIGSTOP."""
    os.kill(vm.pid, signal.SIGSTOP)
    wait_for(lambda: proc_state(vm.pid) == "T", "%s stopped" % tag)
    p = ctx.run([stack_tool(ctx), str(vm.pid)], timeout=T)
    check(p.returncode == 0, "%s: exit %d\n%s", tag, p.returncode, p.stderr[-2000:])
    # Detached, a thread passes through "R" on its way back into the group stop.
    wait_for(lambda: proc_state(vm.pid) == "T", "%s: stopped again after stencilrt-stack" % tag,
             timeout=5)
    return parse_stacks(p.stdout), gdb_stacks(ctx, vm.pid)


# GDB stops churn's one thread inside longjmp, on the jump to its target (the
# instruction glibc's CFI describes as the target's frame: CFA the jmp_buf,
# the stack pointer in r8, the return address in rdx), then leaves it stopped.
LONGJMP_STOP = r"""
python
import gdb
gdb.execute("break longjmp")
gdb.execute("continue")
steps = 0
while steps < 2000 and "jmp    *%rdx" not in gdb.execute("x/i $pc", to_string=True):
    gdb.execute("stepi", to_string=True)
    steps += 1
print("stopped after %d steps at: %s" % (steps, gdb.execute("x/i $pc", to_string=True).strip()))
gdb.execute("queue-signal SIGSTOP")
gdb.execute("detach")
end
"""


def test_a_thread_inside_longjmp_unwinds_to_its_target(ctx):
    """A thread stopped on longjmp's last instruction, where glibc's CFI gives
    the frame the jump goes to (its stack pointer in r8, not the CFA): the
    tool names that frame (run_trap) and its callers, as GDB does. Taking the
    CFA for the stack pointer there read run_trap's return address 16 bytes
    off and ended the stack in "??" (the churn test caught it once in 10,000
    samples)."""
    argv = [stack_program(ctx, "churn"), "--threads", "1", "--seconds", "120",
            "--stop-on-stdin", "--log", os.path.join(ctx.tmp, "longjmp.log")]
    with Target(ctx, argv, ready=r"^churn: ready pid \d+", stdin=True) as churn:
        script = os.path.join(ctx.tmp, "longjmp.gdb")
        write(script, LONGJMP_STOP)
        g = gdb_attached(ctx, churn.pid, "-x", script)
        stop = re.search(r"^stopped after .*jmp    \*%rdx.*$", g.stdout, re.M)
        check(stop, "GDB did not stop on longjmp's jump:\n%s\n%s", g.stdout[-2000:],
              g.stderr[-2000:])
        print("     GDB " + stop.group(0), flush=True)
        wait_for(lambda: proc_state(churn.pid) == "T", "churn stopped in longjmp")
        p = ctx.run([stack_tool(ctx), str(churn.pid)], timeout=T)
        check(p.returncode == 0, "exit %d\n%s", p.returncode, p.stderr[-2000:])
        stacks = [fs for _, fs in parse_stacks(p.stdout).values()
                  if any(f["name"] == "run_trap" for f in fs)]
        check(len(stacks) == 1, "not one thread in run_trap:\n%s", p.stdout[-3000:])
        frames = stacks[0]
        names = [f["name"] for f in frames]
        check(frames[0]["kind"] == "native" and "libc" in frames[0]["module"] and
              names[1:4] == ["run_trap", "churn_round", "churn_worker"] and names[-1] == "main",
              "a thread in longjmp: %s\n%s", names, p.stdout[-2000:])


def at_ret(pid, stacks):
    """True when a thread is stopped on a `ret`: there GDB's x86-64 epilogue
    unwinder takes over and ignores the JIT code's CFI (tests/integration/
    test_gdb.py says the same), so GDB is no reference at that PC."""
    with open("/proc/%d/mem" % pid, "rb") as mem:
        for _, frames in stacks.values():
            mem.seek(frames[0]["pc"])
            if mem.read(1) in (b"\xc3", b"\xc2"):
                return True
    return False


def test_tinyvm_matches_gdb(ctx):
    for prog, extra, expect in TINYVM_RUNS:
        argv = [tinyvm(ctx), "--jit"] + extra + [ctx.path(prog)]
        seen, compared = set(), 0
        with Target(ctx, argv) as vm:
            wait_for(lambda: cpu_ticks(vm.pid) >= 5, "%s running" % prog)
            for stop in range(8):
                if compared == 4:
                    break
                tag = "%s, stop %d" % (prog, stop + 1)
                ours, gdbs = stopped_stacks(ctx, vm, tag)
                if not at_ret(vm.pid, ours):
                    compare_with_gdb(tag, ours, gdbs)
                    compared += 1
                for _, frames in ours.values():
                    for f in frames:
                        if f["kind"] == "jit":
                            check(JIT_NAME.match(f["name"]).group(2) == f["executor"],
                                  "%s: %s in executor %s", tag, f["name"], f["executor"])
                            seen.add(plain_op_name(f["name"]))  # the op, any variant
                os.kill(vm.pid, signal.SIGCONT)
                time.sleep(0.05 + 0.07 * stop)
        check(compared == 4, "%s: only %d stops compared (the others at a ret)", prog, compared)
        check(expect <= seen and any(JIT_NAME.match(n) for n in seen),
              "%s: JIT frames seen %s, expected at least %s", prog, seen, expect)
    # Control: without the registry (STENCILRT_REGISTRY=0) GDB still names the
    # JIT frames (its JIT interface) and the tool cannot: the comparison fails.
    argv = [tinyvm(ctx), "--jit", ctx.path("tests", "gdb", "spin.tvm")]
    with Target(ctx, argv, env={"STENCILRT_REGISTRY": "0"}) as vm:
        wait_for(lambda: cpu_ticks(vm.pid) >= 5, "spin.tvm running")
        ours, gdbs = stopped_stacks(ctx, vm, "STENCILRT_REGISTRY=0")
        try:
            compare_with_gdb("STENCILRT_REGISTRY=0", ours, gdbs)
        except TestFailure:
            pass
        else:
            raise TestFailure("STENCILRT_REGISTRY=0: the tool's stack equals GDB's: %s" % ours)
        check(not any(f["kind"] == "jit" for _, fr in ours.values() for f in fr),
              "STENCILRT_REGISTRY=0: JIT frames named: %s", ours)


def spin_stack(ctx, argv, jit, below, ready=None):
    """stencilrt-stack's view of a single-threaded process spinning in JIT code:
    asked until the innermost frame is one of `jit` (it nearly always is: a
    stop can land in the C code around the loop), whose callers must then be
    `below` exactly. Returns the frame names."""
    with Target(ctx, argv, ready=ready) as t:
        wait_for(lambda: cpu_ticks(t.pid) >= 5, "%s running" % argv[0])
        for _ in range(20):
            p = ctx.run([stack_tool(ctx), str(t.pid)], timeout=T)
            check(p.returncode == 0, "%s: exit %d\n%s", argv[0], p.returncode, p.stderr[-2000:])
            threads = parse_stacks(p.stdout)
            check(list(threads) == [t.pid], "%s: threads %s", argv[0], list(threads))
            names = [plain_op_name(f["name"]) for f in threads[t.pid][1]]  # ops, any variant
            check(names and names[-1] == "main", "%s: frames %s\n%s", argv[0], names, p.stdout)
            if names[0] in jit:
                check(names[1:] == below, "%s: frames %s, expected %s below %s\n%s", argv[0],
                      names, below, names[0], p.stdout)
                return names
    raise TestFailure("%s: 20 stops and none in JIT code: %s" % (argv[0], names))


def test_stripped_tinyvm(ctx):
    exe = os.path.join(ctx.tmp, "tinyvm")
    shutil.copyfile(tinyvm(ctx), exe)
    os.chmod(exe, 0o755)
    ctx.run(["strip", "--strip-all", exe], check=True, timeout=60)
    symtab = ctx.run(["readelf", "-S", "-W", exe], check=True, timeout=60).stdout
    check(".symtab" not in symtab, "strip left a .symtab")
    spin_stack(ctx, [exe, "--jit", ctx.path("tests", "gdb", "spin.tvm")],
               ("push@spin[0]", "jump_if_nonzero@spin[1]"),
               ["vm_run", "call@main[1]", "vm_run", "main"])


def test_dlopened_library(ctx):
    lib = os.path.join(ctx.tmp, "libstencilrt.so")
    shutil.copyfile(os.path.realpath(os.path.join(ctx.build, "runtime", "libstencilrt.so")), lib)
    ctx.run(["strip", lib], check=True, timeout=60)
    check(".symtab" not in ctx.run(["readelf", "-S", "-W", lib], check=True, timeout=60).stdout,
          "strip left a .symtab in %s", lib)
    exe = stack_program(ctx, "dlspin")
    dyn = ctx.run(["readelf", "--dyn-syms", "-W", exe], check=True, timeout=60).stdout
    check("stencilrt_registry" not in dyn, "dlspin itself exports the registry")
    spin_stack(ctx, [exe, lib, "60"], ("addi@spin[1]", "dup@spin[2]", "jump_if_nonzero@spin[3]"),
               ["dlspin_loop", "main"], ready=r"^dlspin: ready")


def refusal(ctx, args, code, *patterns):
    p = ctx.run([stack_tool(ctx)] + args, timeout=T)
    check(p.returncode == code, "stencilrt-stack %s: exit %d, expected %d\nstderr:\n%s",
          " ".join(args), p.returncode, code, p.stderr[-2000:])
    for pat in patterns:
        check(re.search(pat, p.stderr), "stencilrt-stack %s: stderr lacks %r:\n%s",
              " ".join(args), pat, p.stderr[-2000:])
    return p


def test_refusals(ctx):
    with Target(ctx, [stack_program(ctx, "churn_v2"), "--seconds", "60", "--threads", "2",
                      "--stop-on-stdin", "--log", os.path.join(ctx.tmp, "v2.log")],
                ready=r"^churn: ready", stdin=True) as v2:
        refusal(ctx, [str(v2.pid)], 1, r"^stencilrt-stack: .*registry version 2, "
                r"this reader reads 1")
        refusal(ctx, ["--sample", "100", "--duration", "1", str(v2.pid)], 1,
                r"registry version 2, this reader reads 1")
    with Target(ctx, ["sleep", "60"]) as plain:
        wait_for(lambda: os.readlink("/proc/%d/exe" % plain.pid).endswith("/sleep"),
                 "sleep exec'd")  # this case is about no registry, not a process mid-exec
        refusal(ctx, [str(plain.pid)], 1, r"^stencilrt-stack: .*no registry")
    gone = subprocess.Popen(["true"])
    gone.wait()
    if not os.path.exists("/proc/%d" % gone.pid):
        refusal(ctx, [str(gone.pid)], 3, r"^stencilrt-stack: ")
    with Target(ctx, [tinyvm(ctx), "--jit", ctx.path("tests", "gdb", "spin.tvm")]) as vm:
        if os.getuid() == 0 and shutil.which("setpriv"):
            # Another user without CAP_SYS_PTRACE may not attach to root's process.
            p = ctx.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                         "--inh-caps=-all", "--bounding-set=-all", stack_tool(ctx),
                         str(vm.pid)], timeout=T)
            # The credentials are the reason, checked before Yama: the owner is
            # named, and Yama's file never (it is not why, and may not exist).
            check(p.returncode == 3 and p.stderr.startswith("stencilrt-stack: ") and
                  "belongs to uid 0" in p.stderr and "CAP_SYS_PTRACE" in p.stderr and
                  "ptrace_scope" not in p.stderr,
                  "attach refused: exit %d\n%s", p.returncode, p.stderr[-2000:])
        else:
            print("     not root: the attach refusal is not checked", flush=True)
    refusal(ctx, [], 2, r"^stencilrt-stack: ")
    refusal(ctx, ["--frobnicate", "1"], 2, r"^stencilrt-stack: ")
    refusal(ctx, ["notapid"], 2, r"^stencilrt-stack: ")
    refusal(ctx, ["--sample", "100", "1"], 2, r"^stencilrt-stack: ")  # no --duration
    refusal(ctx, ["--sample", "fast", "--duration", "1", "1"], 2, r"^stencilrt-stack: ")
    p = ctx.run([stack_tool(ctx), "--help"], timeout=T)
    check(p.returncode == 0 and "--sample" in p.stdout + p.stderr, "--help: exit %d\n%s",
          p.returncode, p.stdout + p.stderr)


ZOMBIE_PARENT = """
import os, sys, time
pid = os.fork()
if pid == 0:
    os._exit(7)
print(pid, flush=True)
sys.stdin.read()  # never waits for its child: it stays a zombie until we exit
"""


def test_zombie(ctx):
    """A process that exited but is not yet reaped (a zombie: its parent, a
    Python process, never waits) is refused with exit 3 saying so, naming its
    parent; ptrace's EPERM is not blamed on permissions or on Yama."""
    with Target(ctx, [sys.executable, "-c", ZOMBIE_PARENT], ready=r"^\d+$",
                stdin=True) as parent:
        zombie = int(parent.out.split()[0])
        wait_for(lambda: proc_state(zombie) == "Z", "process %d a zombie" % zombie)
        for args in ([str(zombie)], ["--sample", "100", "--duration", "1", str(zombie)]):
            p = refusal(ctx, args, 3, r"^stencilrt-stack: cannot attach to process %d: it has "
                        r"exited \(state Z: zombie\) and is not yet reaped by its parent, "
                        r"process %d" % (zombie, parent.pid))
            check("ptrace_scope" not in p.stderr and "not permitted" not in p.stderr,
                  "zombie: a permission problem is named:\n%s", p.stderr)
        check(proc_state(zombie) == "Z", "process %d is no longer a zombie", zombie)


TRACED_PARENT = """
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    ok = libc.ptrace(0, 0, None, None) == 0  # PTRACE_TRACEME: the parent traces it
    os.write(w, b"1" if ok else b"0")
    time.sleep(60)  # no signal comes, so it never stops
    os._exit(0)
ok = os.read(r, 1) == b"1"
print(pid if ok else "no PTRACE_TRACEME", flush=True)
sys.stdin.read()
os.kill(pid, 9)
"""


def test_traced(ctx):
    """A process another tracer holds (its parent, by PTRACE_TRACEME) is
    refused with exit 3 naming that tracer, not blamed on Yama."""
    with Target(ctx, [sys.executable, "-c", TRACED_PARENT], ready=r"^\S+$",
                stdin=True) as parent:
        check(parent.out.split()[0].isdigit(), "the child could not be traced: %s", parent.out)
        child = int(parent.out.split()[0])
        p = refusal(ctx, [str(child)], 3, r"^stencilrt-stack: cannot attach to process %d: it "
                    r"is already traced by process %d" % (child, parent.pid))
        check("ptrace_scope" not in p.stderr, "traced: Yama is named:\n%s", p.stderr)


A64_MISSING = a64_missing()


def test_registry_reader_aarch64(ctx):
    """The reader's unit program, cross-built (tests/aarch64/meson.build), under
    qemu-aarch64 -cpu max (PAC and BTI on, as the cross build is hardened)."""
    d = a64_cross_build(ctx, "tests/aarch64/test_registry_reader")
    # One view: qemu-user does not see code written through the other (the
    # program runs one executor).
    p = ctx.run(A64_QEMU + [os.path.join(d, "tests", "aarch64", "test_registry_reader")],
                env={"STENCILRT_CODE_VIEWS": "1"}, timeout=T)
    m = re.search(r"^(\d+) passed, (\d+) failed$", p.stdout, re.M)
    check(p.returncode == 0 and m and m.group(2) == "0" and int(m.group(1)) >= 8,
          "AArch64 test_registry_reader: exit %d\n%s\n%s", p.returncode, p.stdout[-3000:],
          p.stderr[-2000:])
    print("     " + next(l for l in p.stdout.splitlines() if " churn" in l)[:300], flush=True)


if A64_MISSING:
    sys.stderr.write("test_stack: the AArch64 cross toolchain is missing (%s): "
                     "test_registry_reader_aarch64 is not collected\n" % ", ".join(A64_MISSING))
    del test_registry_reader_aarch64

