"""pgstencil, the PostgreSQL 15 JIT provider, against a real server.

Each test starts servers of its own from Debian's postgresql-15
(tests/pgstencil/pgserver.py) with the provider just built, installed where
PostgreSQL loads providers from, and llvmjit, the provider that ships with
PostgreSQL, as the peer: same data, same queries, and the outcomes (rows, or
the error's SQLSTATE) must be equal with jit off, llvmjit and pgstencil.
"""
import contextlib
import os
import re
import struct
import subprocess
import sys
import threading

import sgtest

sys.path.insert(0, os.path.join(sgtest.ROOT, "tests", "pgstencil"))
import corpus  # noqa: E402
import differential  # noqa: E402
import libpq  # noqa: E402
import pgserver  # noqa: E402

SEED = 20261202
CORPUS_QUERIES = 10000
JIT_ALL = {"jit_above_cost": "0"}


def _need_server(ctx):
    why = pgserver.available()
    if why:
        raise sgtest.Skip(why)
    pgserver.install_provider(ctx.build)


@contextlib.contextmanager
def _pair(ctx, setup):
    """A pgstencil server and an llvmjit server, both after `setup`."""
    _need_server(ctx)
    with pgserver.Server(ctx, "pgstencil") as pgs, pgserver.Server(ctx, "llvmjit") as llvm:
        for srv in (pgs, llvm):
            conn = srv.connect()
            for stmt in setup:
                conn.execute(stmt)
        yield pgs, llvm


def _check_no_mismatch(mismatches, what):
    sgtest.check(not mismatches, "%d of %s differ between jit off, llvmjit and pgstencil:\n%s",
                 len(mismatches), what,
                 "\n".join(differential.describe(m) for m in mismatches[:10]))


def test_pgstencil_corpus_matches_jit_off_and_llvmjit(ctx):
    queries = corpus.queries(SEED, CORPUS_QUERIES)
    with _pair(ctx, corpus.setup_sql(SEED)) as (pgs, llvm):
        mismatches, counts = differential.run(pgs, llvm, queries)
        _check_no_mismatch(mismatches, "%d generated queries" % len(queries))
        # The corpus must keep meaning something: mostly rows, some errors
        # of several kinds, and pgstencil really compiling.
        errors = sum(v for k, v in counts.items() if k != "rows")
        sgtest.check(counts.get("rows", 0) >= 0.85 * len(queries) and errors >= 50 and
                     len(counts) >= 4, "the corpus's outcomes degenerated: %s", counts)
        conn = pgs.connect(**JIT_ALL)
        plan = "\n".join(r[0] for r in conn.execute("EXPLAIN (ANALYZE) " + queries[0]))
        sgtest.check(re.search(r"Functions: [1-9]", plan), "pgstencil compiled nothing:\n%s", plan)


def _balanced(sql):
    depth = 0
    for ch in sql:
        depth += (ch == "(") - (ch == ")")
        if depth < 0:
            return False
    return depth == 0


def test_pgstencil_reducer_shrinks_a_mismatch(ctx):
    # The reducer is driven by a predicate; here the "mismatch" is a NULLIF
    # call in a well-formed SELECT, so what it keeps is checkable without a
    # server. Each corpus query must shrink to under half its length, keep
    # the predicate true and stay within its budget of checks.
    queries = [q for q in corpus.queries(SEED, 3000)
               if isinstance(q, str) and "NULLIF(" in q and len(q) > 200][:20]
    sgtest.check(len(queries) == 20, "the corpus has %d long NULLIF queries", len(queries))
    for query in queries:
        calls = []

        def still_differs(sql):
            calls.append(sql)
            return ("NULLIF(" in sql and _balanced(sql) and sql.startswith("SELECT ") and
                    " FROM t" in sql)
        reduced = differential.reduce(query, still_differs, budget=60)
        sgtest.check(still_differs(reduced) and len(reduced) * 2 < len(query) and
                     len(calls) <= 61, "%r reduced to %r in %d checks", query, reduced,
                     len(calls))
    # Of a sequence of statements, the SELECT is reduced and the rest kept.
    setup = "PREPARE p AS SELECT 1"
    reduced = differential.reduce((setup, queries[0]), lambda q: q[0] == setup and
                                  still_differs(q[1]))
    sgtest.check(reduced[0] == setup and len(reduced[1]) * 2 < len(queries[0]),
                 "a statement sequence reduced to %r", reduced)
    # Nothing smaller differs: the query comes back whole.
    sgtest.check(differential.reduce(queries[1], lambda q: q == queries[1]) == queries[1],
                 "a query that cannot shrink changed")


def _step_kinds():
    setup, queries, part = [], [], None
    with open(os.path.join(sgtest.ROOT, "tests", "pgstencil", "step_kinds.sql")) as f:
        for line in f:
            line = line.rstrip("\n")
            if line in ("-- setup", "-- queries"):
                part = line
            elif line and not line.startswith("--"):
                (setup if part == "-- setup" else queries).append(line.split(" -- ")[0])
    return setup, queries


def test_pgstencil_step_kinds_match_jit_off_and_llvmjit(ctx):
    setup, queries = _step_kinds()
    with _pair(ctx, setup) as (pgs, llvm):
        # one worker: the statements that write are in order
        mismatches, counts = differential.run(pgs, llvm, queries, threads=1,
                                               optimized_every=1)
        _check_no_mismatch(mismatches, "the step-kind queries")
        sgtest.check(counts.get("rows", 0) >= len(queries) - 8, "%s", counts)


def _jit_section(conn, sql):
    plan = [r[0] for r in conn.execute("EXPLAIN (ANALYZE) " + sql)]
    i = plan.index("JIT:") if "JIT:" in plan else len(plan)
    return plan[i:i + 4]


def test_pgstencil_explain_shows_its_jit_section(ctx):
    _need_server(ctx)
    with pgserver.Server(ctx, "pgstencil") as pgs:
        # Inlining and optimization asked for at any cost: pgstencil does
        # neither, nor deforming, and the section says so.
        conn = pgs.connect(jit_above_cost=0, jit_inline_above_cost=0, jit_optimize_above_cost=0)
        conn.execute("CREATE TABLE e AS SELECT i, i % 7 AS b FROM generate_series(1, 10000) i")
        section = _jit_section(conn, "SELECT sum(b), count(*) FILTER (WHERE i > 5) FROM e "
                                     "WHERE b <> 3")
        text = "\n".join(section)
        sgtest.check(len(section) == 4 and re.match(r"\s*Functions: [2-9]", section[1]) and
                     re.match(r"\s*Options: Inlining false, Optimization false, Expressions "
                              r"true, Deforming false", section[2]) and
                     re.match(r"\s*Timing: Generation [\d.]+ ms, Inlining 0\.000 ms, "
                              r"Optimization 0\.000 ms, Emission [\d.]+ ms, Total [\d.]+ ms",
                              section[3]), "EXPLAIN's JIT section:\n%s", text)
        total = float(re.search(r"Total ([\d.]+) ms", section[3]).group(1))
        sgtest.check(0 < total < 50, "pgstencil's Total JIT time is %s ms", total)
        conn.execute("SET jit = off")
        off = _jit_section(conn, "SELECT count(*) FROM e")
        sgtest.check(off == [], "jit off still shows a JIT section: %s", off)


PGBENCH_SCRIPTS = ("tpcb-like", "simple-update", "select-only")
PGBENCH_SEED = "20261202"
BALANCES = ["SELECT aid, abalance FROM pgbench_accounts WHERE abalance <> 0 ORDER BY aid",
            "SELECT tid, tbalance FROM pgbench_tellers ORDER BY tid",
            "SELECT bid, bbalance FROM pgbench_branches ORDER BY bid",
            "SELECT count(*), sum(delta) FROM pgbench_history"]


def test_pgstencil_pgbench_balances_equal_jit_off(ctx):
    """pgbench's built-in scripts, 2 clients, a fixed seed: with pgstencil
    compiling every statement, no transaction fails and every balance ends
    as it does with jit off. Each client draws its own deterministic
    sequence and the updates add, so the balances do not depend on how the
    clients interleave."""
    _need_server(ctx)
    settings = {"shared_preload_libraries": "'pg_stat_statements'"}
    with pgserver.Server(ctx, "pgstencil", settings) as pgs:
        conn = pgs.connect()
        for db in ("bench_off", "bench_pgs"):
            conn.execute("CREATE DATABASE " + db)
            p = pgs.pgbench(["-i", "-s", "1", "-q"], dbname=db)
            sgtest.check(p.returncode == 0, "pgbench -i %s failed:\n%s", db, p.stdout[-2000:])
        conn.execute("CREATE EXTENSION pg_stat_statements")
        for script in PGBENCH_SCRIPTS:
            for db, jit in (("bench_off", {"jit": "off"}), ("bench_pgs", JIT_ALL)):
                p = pgs.pgbench(["-b", script, "-c", "2", "-j", "2", "-t", "500",
                                 "--random-seed", PGBENCH_SEED], dbname=db, **jit)
                sgtest.check(p.returncode == 0 and
                             re.search(r"number of failed transactions: 0 ", p.stdout),
                             "pgbench -b %s on %s:\n%s", script, db, p.stdout[-3000:])
        for sql in BALANCES:
            off, pgs_rows = (pgs.connect(db).execute(sql) for db in ("bench_off", "bench_pgs"))
            sgtest.check(off == pgs_rows and off, "%s: %d rows with jit off, %d with pgstencil "
                         "(first difference %s)", sql, len(off), len(pgs_rows),
                         next((a, b) for a, b in zip(off + [None], pgs_rows + [None]) if a != b)
                         if off != pgs_rows else None)
        jitted = conn.execute("SELECT sum(s.jit_functions) FROM pg_stat_statements s "
                              "JOIN pg_database d ON d.oid = s.dbid "
                              "WHERE d.datname = 'bench_pgs' AND s.query LIKE 'UPDATE%'")
        sgtest.check(jitted[0][0] and int(jitted[0][0]) > 0,
                     "pgbench's UPDATEs were not JIT-compiled: %s", jitted)


PARALLEL = {"max_parallel_workers_per_gather": "2", "parallel_setup_cost": "0",
            "parallel_tuple_cost": "0", "min_parallel_table_scan_size": "0"}
PARALLEL_QUERY = ("SELECT b, count(*), sum(i * 2 + b), avg(f) FROM p WHERE i % 5 <> 1 "
                  "GROUP BY b ORDER BY b")


def test_pgstencil_parallel_workers_compile_their_own(ctx):
    """A parallel scan: each worker compiles its own expressions (EXPLAIN
    VERBOSE shows a JIT section per worker) and the rows are jit off's."""
    _need_server(ctx)
    with pgserver.Server(ctx, "pgstencil") as pgs:
        conn = pgs.connect(**JIT_ALL, **PARALLEL)
        conn.execute("CREATE TABLE p AS SELECT i, i % 9 AS b, i * 0.5::float8 AS f "
                     "FROM generate_series(1, 300000) i")
        conn.execute("ANALYZE p")
        plan = "\n".join(r[0] for r in conn.execute("EXPLAIN (ANALYZE, VERBOSE) " +
                                                      PARALLEL_QUERY))
        # PostgreSQL 15 prints a worker's JIT section under "Worker N:" of
        # the node the worker ran; the leader's ends the plan.
        launched = re.search(r"Workers Launched: (\d+)", plan)
        workers = set(re.findall(r"Worker (\d+): [^\n]*\n(?:[^\n]*\n)?\s+JIT:\n"
                                 r"\s+Functions: [1-9]", plan))
        sgtest.check(launched and int(launched.group(1)) >= 1 and
                     len(workers) == int(launched.group(1)) and
                     re.search(r"^\s*JIT:\n\s+Functions: [1-9]\d*\n(.*\n){2}\s*Execution Time",
                               plan, re.M),
                     "no JIT section for the leader and each worker:\n%s", plan)
        rows = conn.execute(PARALLEL_QUERY)
        off = pgs.query(PARALLEL_QUERY, jit="off", **PARALLEL)
        sgtest.check(rows == off and len(rows) == 9, "parallel rows differ:\n%s\n%s",
                     rows, off)


def test_pgstencil_missing_provider_disables_jit(ctx):
    """jit_provider names no library: PostgreSQL runs every query without
    JIT, as it does for a missing llvmjit."""
    _need_server(ctx)
    with pgserver.Server(ctx, "nosuch_provider") as srv:
        conn = srv.connect(**JIT_ALL)
        rows = conn.execute("SELECT sum(g * 3) FROM generate_series(1, 1000) g WHERE g % 2 = 0")
        sgtest.check(rows == [("751500",)], "wrong rows without a provider: %s", rows)
        off = _jit_section(conn, "SELECT count(*) FROM generate_series(1, 100) g WHERE g > 3")
        sgtest.check(off == [], "a JIT section without a provider: %s", off)
        sgtest.check("terminated by signal" not in srv.log_text(), "%s", srv.log_text())


def _as_major(path, dest, major):
    """A copy of the provider at dest whose module magic says PostgreSQL
    `major` (what a build against that version's headers would carry)."""
    with open(path, "rb") as f:
        data = f.read()
    # fmgr.h's Pg_magic_struct: len, version (major * 100), FUNC_MAX_ARGS,
    # INDEX_MAX_KEYS, NAMEDATALEN, FLOAT8PASSBYVAL, then abi_extra.
    magic = struct.pack("<6i", 56, 1500, 100, 32, 64, 1) + b"PostgreSQL\0"
    sgtest.check(data.count(magic) == 1, "%s: %d copies of PostgreSQL 15's module magic",
                 path, data.count(magic))
    with open(dest, "wb") as f:
        f.write(data.replace(magic, struct.pack("<6i", 56, major * 100, 100, 32, 64, 1) +
                             b"PostgreSQL\0"))
    os.chmod(dest, 0o755)


def test_pgstencil_built_for_another_major_refuses_to_load(ctx):
    """A provider carrying PostgreSQL 16's magic: the first query that would
    compile gets PostgreSQL's version-mismatch error, later ones run
    without JIT; nothing crashes."""
    _need_server(ctx)
    dest = os.path.join(pgserver.pkglibdir(), "pgstencil_as16.so")
    _as_major(pgserver.install_provider(ctx.build), dest, 16)
    try:
        with pgserver.Server(ctx, "pgstencil_as16") as srv:
            conn = srv.connect(**JIT_ALL)
            try:
                conn.execute("SELECT sum(g) FROM generate_series(1, 10) g WHERE g > 1")
                raise sgtest.TestFailure("a provider built for PostgreSQL 16 was loaded")
            except libpq.Error as e:
                sgtest.check("incompatible library" in str(e) and
                             "Server is version 15, library is version 16" in str(e),
                             "the refusal: %s", e)
            rows = conn.execute("SELECT sum(g) FROM generate_series(1, 10) g WHERE g > 1")
            sgtest.check(rows == [("54",)], "after the refusal: %s", rows)
            sgtest.check("terminated by signal" not in srv.log_text(), "%s", srv.log_text())
    finally:
        os.unlink(dest)


def test_pgstencil_errors_leave_the_backend_usable_and_free(ctx):
    """100,000 queries failing inside JIT code in one backend: it still
    answers, and its JIT memory and registrations end where they started."""
    _need_server(ctx)
    with pgserver.Server(ctx, "pgstencil") as pgs:
        conn = pgs.connect(**JIT_ALL)
        conn.execute("CREATE TABLE z AS SELECT i, i - 3 AS d, 'x' || i AS s, i * 1000000 AS m "
                     "FROM generate_series(1, 5) i")
        before = pgserver.stats(conn)
        failing = [("SELECT i / (d - d) FROM z", "22012"),
                   ("SELECT m * m * m FROM z", "22003"),
                   ("SELECT s::int FROM z", "22P02"),
                   ("SELECT (m * 10000)::int2 FROM z WHERE i > 2", "22003")]
        rounds = 100000
        for k in range(rounds):
            sql, state = failing[k % len(failing)]
            try:
                conn.execute(sql)
                raise sgtest.TestFailure("%s did not fail" % sql)
            except libpq.Error as e:
                sgtest.check(e.sqlstate == state, "%s: %s, not %s", sql, e, state)
            if k % 5000 == 0:
                sgtest.check(conn.execute("SELECT sum(i) FROM z") == [("15",)],
                             "the backend gives wrong results after errors")
        sgtest.check(conn.execute("SELECT sum(i * 2) FROM z WHERE d > 0") == [("18",)],
                     "the backend gives wrong results after %d errors", rounds)
        after = pgserver.stats(conn)
        sgtest.check(after == before, "after %d failed queries the backend's JIT state is %s, "
                     "before it was %s", rounds, after, before)
        sgtest.check(before["executors"] >= 1 and before["frames_registered"] >= 2,
                     "pgstencil_stats does not see the compiled code: %s", before)


LONG_QUERY = "SELECT count(*) FROM generate_series(1, 400000000) g WHERE g % 7 = 3"


def test_pgstencil_timeout_and_cancel_leave_the_backend_usable(ctx):
    """statement_timeout and pg_cancel_backend interrupt a query while its
    JIT code runs; the backend answers afterwards and has freed the code."""
    _need_server(ctx)
    with pgserver.Server(ctx, "pgstencil") as pgs:
        conn = pgs.connect(**JIT_ALL)
        before = pgserver.stats(conn)
        conn.execute("SET statement_timeout = '300ms'")
        try:
            conn.execute(LONG_QUERY)
            raise sgtest.TestFailure("the long query was not stopped by statement_timeout")
        except libpq.Error as e:
            sgtest.check(e.sqlstate == "57014", "statement_timeout: %s", e)
        conn.execute("SET statement_timeout = '60s'")
        other = pgs.connect()
        pid = conn.pid()
        timer = threading.Timer(0.5, lambda: other.execute(
            "SELECT pg_cancel_backend(%d)" % pid))
        timer.start()
        try:
            conn.execute(LONG_QUERY)
            raise sgtest.TestFailure("the long query was not cancelled")
        except libpq.Error as e:
            sgtest.check(e.sqlstate == "57014", "pg_cancel_backend: %s", e)
        finally:
            timer.join()
        sgtest.check(conn.execute("SELECT count(*) FROM generate_series(1, 1000) g "
                                  "WHERE g % 7 = 3") == [("143",)], "wrong result afterwards")
        after = pgserver.stats(conn)
        sgtest.check(after == before, "JIT state after the interrupts %s, before %s", after,
                     before)


# ---- unwinding where PostgreSQL's users look --------------------------------

DIV_TABLE = "CREATE TABLE w AS SELECT i, i - 3 AS d FROM generate_series(1, 5) i"
JIT_NAME = re.compile(r"[a-z_]+(\[[a-z0-9=,]+\])?@evalexpr_\d+_\d+\[\d+\]")
SCAN_LOAD = ("CREATE TABLE big AS SELECT i, i % 13 AS d, i::float8 AS f "
             "FROM generate_series(1, 200000) i")
SCAN_QUERY = "SELECT count(*) FROM big WHERE d + i > 5 AND f * 2 > 3"


def _perf_map(pid):
    """{start: (size, name)} of a backend's perf map (jit_profiling_support)."""
    entries = {}
    with open("/tmp/perf-%d.map" % pid) as f:
        for line in f:
            start, size, name = line.rstrip("\n").split(" ", 2)
            entries[int(start, 16)] = (int(size, 16), name)
    return entries


def _name_at(entries, pc):
    """The innermost (instruction) name covering pc."""
    best = None
    for start, (size, name) in entries.items():
        if start <= pc < start + size and (best is None or size < best[0]):
            best = (size, name)
    return best[1] if best else None


def test_pgstencil_backtrace_functions_passes_through_jit_frames(ctx):
    """backtrace_functions = 'int4div': the backtrace PostgreSQL logs for a
    division by zero in JIT code goes through the JIT frame (named by the
    backend's perf map) on to ExecScan, PostgresMain and main."""
    _need_server(ctx)
    with pgserver.Server(ctx, "pgstencil", {"backtrace_functions": "'int4div'"}) as pgs:
        conn = pgs.connect(jit_profiling_support="on", **JIT_ALL)
        conn.execute(DIV_TABLE)
        try:
            conn.execute("SELECT i / (d - d) FROM w")
            raise sgtest.TestFailure("no division by zero")
        except libpq.Error as e:
            sgtest.check(e.sqlstate == "22012", "%s", e)
        log = pgs.log_text()
        m = re.search(r"BACKTRACE:\s*\n((?:\t.*\n)+)", log)
        sgtest.check(m, "no BACKTRACE in the server's log:\n%s", log[-3000:])
        frames = m.group(1).strip("\n").split("\n")
        pcs = [int(re.search(r"\[(0x[0-9a-f]+)\]", f).group(1), 16) for f in frames]
        names = _perf_map(conn.pid())
        jit = [i for i, pc in enumerate(pcs) if _name_at(names, pc)]
        sgtest.check(jit, "no JIT frame in the backtrace:\n%s", m.group(1))
        named = _name_at(names, pcs[jit[0]])
        sgtest.check(jit[-1] + 1 < len(frames), "the backtrace ends at the JIT frame %s "
                     "(JIT code not registered with libgcc's unwinder?):\n%s", named, m.group(1))
        after = "\n".join(frames[jit[-1] + 1:])
        sgtest.check(named.startswith("funcexpr_strict") and JIT_NAME.fullmatch(named) and
                     "(ExecScan+" in frames[jit[-1] + 1] and "(PostgresMain+" in after and
                     "(main+" in after, "the backtrace, with %s at its JIT frame:\n%s", named,
                     m.group(1))
        os.unlink("/tmp/perf-%d.map" % conn.pid())


def test_pgstencil_gdb_names_jit_frames_down_to_main(ctx):
    """GDB attached to a backend (batch, no inferior calls), stopped in
    int4div called from JIT code: a named JIT frame, then every native frame
    down to main."""
    _need_server(ctx)
    with pgserver.Server(ctx, "pgstencil") as pgs:
        conn = pgs.connect(jit_debugging_support="on", **JIT_ALL)
        conn.execute(DIV_TABLE)
        gdb = subprocess.Popen(["timeout", "120", "gdb", "-batch", "-nx", "-p", str(conn.pid()),
                                "-ex", "break int4div", "-ex", "echo READY\\n", "-ex", "continue",
                                "-ex", "bt", "-ex", "detach"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        out = []
        for line in gdb.stdout:  # bounded by timeout(1) above
            out.append(line)
            if line.startswith("READY"):
                break
        query = threading.Thread(target=lambda: _ignore(conn.execute, "SELECT i / d FROM w"))
        query.start()
        out.append(gdb.communicate(timeout=150)[0])
        query.join(60)
        bt = [l for l in "".join(out).split("\n") if re.match(r"#\d+ ", l)]
        text = "\n".join(bt)
        sgtest.check(len(bt) > 4 and " int4div " in bt[0] and JIT_NAME.search(bt[1]) and
                     " ExecScan " in bt[2] and any(" PostgresMain " in l for l in bt) and
                     " main " in bt[-1], "GDB's backtrace:\n%s\n%s", text, "".join(out)[-2000:])


def _ignore(fn, *args):
    try:
        fn(*args)
    except libpq.Error:
        pass


def _busy(conn, stop):
    while not stop:
        conn.execute(SCAN_QUERY)


def test_pgstencil_perf_names_stencils_per_backend(ctx):
    """perf record of a backend attributes samples to named stencils, read
    from the backend's own perf map (jit_profiling_support)."""
    _need_server(ctx)
    with pgserver.Server(ctx, "pgstencil") as pgs:
        conn = pgs.connect(jit_profiling_support="on", **JIT_ALL)
        conn.execute(SCAN_LOAD)
        stop = []
        busy = threading.Thread(target=_busy, args=(conn, stop))
        busy.start()
        data = os.path.join(ctx.tmp, "perf.data")
        try:
            rec = ctx.run(["perf", "record", "-q", "-e", "cpu-clock", "-p", str(conn.pid()),
                           "-o", data, "--", "sleep", "2"], timeout=60)
        finally:
            stop.append(True)
            busy.join(60)
        if rec.returncode != 0 and re.search(r"paranoid|ermission|not permitted", rec.stderr):
            raise sgtest.Skip("the kernel refuses perf events: " + rec.stderr.strip()[-200:])
        sgtest.check(rec.returncode == 0, "perf record failed:\n%s", rec.stderr[-2000:])
        rep = ctx.run(["perf", "report", "-f", "-i", data, "--stdio", "--sort", "sym"],
                      timeout=120)
        named = [l for l in rep.stdout.split("\n") if JIT_NAME.search(l)]
        sgtest.check(any("var[slot=2]@" in l for l in named) and
                     any("funcexpr_strict[nargs=2]@" in l for l in named),
                     "perf report names no stencils:\n%s", rep.stdout[:3000])
        os.unlink("/tmp/perf-%d.map" % conn.pid())


def test_pgstencil_stencilrt_stack_names_jit_frames(ctx):
    """stencilrt-stack sampling a backend in a JIT-compiled scan names its
    JIT frames from the registry the runtime publishes."""
    _need_server(ctx)
    tool = os.path.join(ctx.build, "tools", "stack", "stencilrt-stack")
    with pgserver.Server(ctx, "pgstencil") as pgs:
        conn = pgs.connect(**JIT_ALL)
        conn.execute(SCAN_LOAD)
        stop = []
        busy = threading.Thread(target=_busy, args=(conn, stop))
        busy.start()
        try:
            p = ctx.run([tool, "--sample", "200", "--duration", "2", str(conn.pid())], timeout=60)
        finally:
            stop.append(True)
            busy.join(60)
        sgtest.check(p.returncode == 0, "stencilrt-stack exited %d:\n%s", p.returncode, p.stderr)
        stacks = [l for l in p.stdout.split("\n") if JIT_NAME.search(l)]
        sgtest.check(any(";ExecScan" in l and ";main" in l for l in stacks),
                     "no sampled stack has a named JIT frame under ExecScan and main:\n%s",
                     p.stdout[:3000])
