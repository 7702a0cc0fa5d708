"""The PostgreSQL rows of the bench (tests/bench/run.py calls pg_rows; run
alone: python3 tests/bench/pg_bench.py --build build): pgstencil beside jit
off and llvmjit on one server's data directory, restarted between providers
(jit_provider is a postmaster setting), the data loaded here. Modes:

  off        jit = off
  llvm       llvmjit, jit_above_cost = 0, no inlining, no optimization
  llvm-opt   llvmjit, jit_above_cost = 0, inlining and optimization at cost 0
  pgstencil  pgstencil, jit_above_cost = 0

A query's time is its client wall time, best of ROUNDS with the modes
interleaved; its execution alone is pg_stat_statements' execution time of
the same run less that run's JIT time (the leader's, as EXPLAIN's Total).
Compile times of the corpus are EXPLAIN (ANALYZE)'s JIT Total."""
import argparse
import json
import os
import re
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(os.path.dirname(HERE), "pgstencil"), os.path.dirname(HERE)]
import corpus  # noqa: E402
import libpq  # noqa: E402
import pgserver  # noqa: E402

MODES = {
    "off": ("llvmjit", {"jit": "off"}),
    "llvm": ("llvmjit", {"jit_above_cost": "0", "jit_inline_above_cost": "-1",
                         "jit_optimize_above_cost": "-1"}),
    "llvm-opt": ("llvmjit", {"jit_above_cost": "0", "jit_inline_above_cost": "0",
                             "jit_optimize_above_cost": "0"}),
    "pgstencil": ("pgstencil", {"jit_above_cost": "0"}),
}
MODES["llvm-nodeform"] = ("llvmjit", dict(MODES["llvm"][1], jit_tuple_deforming="off"))
ROUNDS = 3
TPCH_ROWS = 5000000
PGBENCH_SECONDS = 30
CORPUS_SEED = 20261202
CORPUS_COMPILES = 1000
MEMORY_QUERIES = 10000
SERVER = {"shared_preload_libraries": "'pg_stat_statements'", "shared_buffers": "'1GB'", "max_parallel_workers_per_gather": "0",
          "max_connections": "20", "work_mem": "'64MB'"}

# TPC-H's lineitem as Q1 and Q6 read it: numeric(15,2) as TPC-H declares it,
# and the same values as int8/float8.
LINEITEM = ("CREATE TABLE {t} (l_quantity {q}, l_extendedprice {m}, l_discount {m}, l_tax {m}, "
            "l_returnflag char(1), l_linestatus char(1), l_shipdate date)")
FILL = ("INSERT INTO {t} SELECT 1 + i % 50, (90000 + i % 1000000) / 100.0, (i % 11) / 100.0, "
        "(i % 9) / 100.0, substr('ANR', 1 + i % 3, 1), substr('OF', 1 + i % 2, 1), "
        "date '1992-01-01' + i % 2500 FROM generate_series(1, {rows}) i")
TABLES = [("lineitem", "numeric", {"q": "numeric(15,2)", "m": "numeric(15,2)"}),
          ("lineitem_f", "int8/float8", {"q": "int8", "m": "float8"})]
Q1 = ("SELECT l_returnflag, l_linestatus, sum(l_quantity), sum(l_extendedprice), "
      "sum(l_extendedprice * (1 - l_discount)), "
      "sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)), avg(l_quantity), "
      "avg(l_extendedprice), avg(l_discount), count(*) FROM {t} "
      "WHERE l_shipdate <= date '1998-12-01' - interval '90 days' "
      "GROUP BY l_returnflag, l_linestatus ORDER BY l_returnflag, l_linestatus")
Q6 = ("SELECT sum(l_extendedprice * l_discount) FROM {t} "
      "WHERE l_shipdate >= date '1994-01-01' AND l_shipdate < date '1995-01-01' "
      "AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24")
# A wide row whose last column is read: the cost is in deforming the tuple.
WIDE_COLUMNS = 30
WIDE = ["CREATE TABLE wide (%s)" % ", ".join("c%d int4" % i for i in range(WIDE_COLUMNS)),
        "INSERT INTO wide SELECT %s FROM generate_series(1, 1000000) i" %
        ", ".join("i %% %d" % (i + 7) for i in range(WIDE_COLUMNS))]
WIDE_QUERY = "SELECT sum(c%d) FROM wide WHERE c0 >= 0" % (WIDE_COLUMNS - 1)


class Bench:
    """One data directory, served by whichever provider the mode needs."""

    def __init__(self):
        self.srv = pgserver.Server(None, "llvmjit", SERVER, name="bench")
        self.conn = None

    def __enter__(self):
        self.srv.start()
        return self

    def __exit__(self, *exc):
        self.srv.__exit__(*exc)
        return False

    def use(self, mode):
        """The mode's settings, its provider serving."""
        provider, settings = MODES[mode]
        if self.srv.provider != provider:
            self.srv.restart(provider)
            self.conn = None
        return settings

    def session(self, mode, **extra):
        settings = self.use(mode)
        if self.conn:
            self.conn.close()
            self.srv.conns.remove(self.conn)
        self.conn = self.srv.connect(statement_timeout=600000, **dict(settings, **extra))
        return self.conn

    def setup(self, stmts):
        conn = self.session("off")
        for stmt in stmts:
            conn.execute(stmt)


def wall(conn, sql):
    start = time.perf_counter()
    conn.execute(sql)
    return (time.perf_counter() - start) * 1e3


def jit_section(conn, sql):
    plan = json.loads(conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql)[0][0])[0]
    return plan.get("JIT")


# One execution's time and its JIT's, from pg_stat_statements (the leader's
# JIT, as EXPLAIN's Total): no per-node timing slows the run measured.
LAST_RUN = ("SELECT total_exec_time, jit_functions, jit_generation_time + jit_inlining_time + "
            "jit_optimization_time + jit_emission_time FROM pg_stat_statements "
            "WHERE query NOT LIKE '%pg_stat_statements%'")


def timed_run(conn, sql):
    """(wall ms, execution ms, JIT ms, functions) of one run of sql."""
    conn.execute("SELECT pg_stat_statements_reset()")
    ms = wall(conn, sql)
    (exec_ms, functions, jit_ms), = conn.execute(LAST_RUN)
    return ms, float(exec_ms), float(jit_ms), int(functions)


def order(modes, round_):
    """Each round in the other order, so no mode always runs first after a restart."""
    return modes if round_ % 2 == 0 else modes[::-1]


def query_figures(b, sql, modes, workers):
    """{mode: (best wall ms, best execution less JIT ms, JIT ms, functions)}:
    the JIT's figures are of the run with the best wall time."""
    runs = {m: [] for m in modes}
    for r in range(ROUNDS):
        for mode in order(modes, r):
            conn = b.session(mode, max_parallel_workers_per_gather=workers)
            if r == 0:
                conn.execute(sql)  # the table's pages cached for every mode
            runs[mode].append(timed_run(conn, sql))
    figures = {}
    for m in modes:
        best = min(runs[m])
        figures[m] = (best[0], min(e - j for _, e, j, _ in runs[m]), best[2], best[3])
    return figures


def tpch_rows(b):
    rows = []
    modes = ["off", "llvm", "llvm-opt", "pgstencil"]
    for table, kind, types in TABLES:
        b.setup([LINEITEM.format(t=table, **types), FILL.format(t=table, rows=TPCH_ROWS),
                 "VACUUM ANALYZE " + table])
        for name, q in (("Q1", Q1), ("Q6", Q6)):
            for workers in (0, 2):
                f = query_figures(b, q.format(t=table), modes, workers)
                label = "%s shape, %s, %s rows, %d workers" % (name, kind, "{:,}".format(
                    TPCH_ROWS), workers)
                rows.append((label + ": total, ms: off / llvm / llvm-opt / pgstencil",
                             " / ".join("%.0f" % f[m][0] for m in modes),
                             "pgstencil %.2fx off, %.2fx llvm, %.2fx llvm-opt (lower: faster)" % (
                                 f["pgstencil"][0] / f["off"][0], f["pgstencil"][0] / f["llvm"][0],
                                 f["pgstencil"][0] / f["llvm-opt"][0])))
                rows.append((label + ": execution alone (its JIT's time taken out), ms",
                             " / ".join("%.0f" % f[m][1] for m in modes),
                             "pgstencil %.2fx llvm-opt; JIT ms: llvm %.1f, llvm-opt %.1f, "
                             "pgstencil %.3f (%d / %d / %d functions)" % (
                                 f["pgstencil"][1] / f["llvm-opt"][1], f["llvm"][2],
                                 f["llvm-opt"][2], f["pgstencil"][2], f["llvm"][3],
                                 f["llvm-opt"][3], f["pgstencil"][3])))
    return rows


def deform_rows(b):
    b.setup(WIDE + ["VACUUM ANALYZE wide"])
    modes = ["off", "llvm", "llvm-nodeform", "pgstencil"]
    f = query_figures(b, WIDE_QUERY, modes, 0)
    return [("1,000,000 rows of %d int4, the last one summed: total, ms: off / llvm / "
             "llvm without deforming / pgstencil" % WIDE_COLUMNS,
             " / ".join("%.0f" % f[m][0] for m in modes),
             "llvm's deforming saves %.0f ms; pgstencil %.2fx off" % (
                 f["llvm-nodeform"][0] - f["llvm"][0], f["pgstencil"][0] / f["off"][0]))]


def corpus_rows(b):
    """JIT Total per query (and per function) over the corpus's first queries
    that compile, under each JIT."""
    b.setup(corpus.setup_sql(CORPUS_SEED))
    queries = [q for q in corpus.queries(CORPUS_SEED, 2 * CORPUS_COMPILES)
               if isinstance(q, str)]
    modes = ["llvm", "llvm-opt", "pgstencil"]
    totals = {m: {} for m in modes}
    per_function = {m: [] for m in modes}
    for mode in modes:
        conn = b.session(mode)
        for i, q in enumerate(queries):
            if len(totals[mode]) == CORPUS_COMPILES:
                break
            if mode != modes[0] and i not in totals[modes[0]]:
                continue
            try:
                section = jit_section(conn, q)
            except libpq.Error:
                continue  # a query that raises: no plan to read
            if section and section["Functions"]:
                totals[mode][i] = section["Timing"]["Total"]
                per_function[mode].append(section["Timing"]["Total"] / section["Functions"])
    common = [i for i in totals["llvm"] if all(i in totals[m] for m in modes)]
    rows = []
    p = [totals["pgstencil"][i] for i in common]
    for mode in ("llvm", "llvm-opt"):
        ratios = sorted(totals[mode][i] / max(totals["pgstencil"][i], 1e-6) for i in common)
        t = [totals[mode][i] for i in common]
        rows.append(("JIT Total per query, %d corpus queries: %s / pgstencil, median" % (
            len(common), mode), "%.3f / %.4f ms" % (statistics.median(t), statistics.median(p)),
            "pgstencil %.0fx faster (median), %.0fx (worst query)" % (
                statistics.median(ratios), ratios[0])))
    rows.append(("JIT Total per function, corpus: llvm / llvm-opt / pgstencil, median",
                 " / ".join("%.4f" % statistics.median(per_function[m]) for m in modes) + " ms",
                 "max pgstencil %.4f ms" % max(per_function["pgstencil"])))
    return rows


def rss_anon_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"^RssAnon:\s+(\d+) kB", f.read(), re.M).group(1))


def memory_rows(b):
    """A backend's anonymous resident memory after MEMORY_QUERIES distinct
    queries (the corpus's; its table was loaded by corpus_rows)."""
    queries = corpus.queries(CORPUS_SEED + 1, MEMORY_QUERIES)
    rss = {}
    for mode in ("off", "llvm", "pgstencil"):
        conn = b.session(mode)
        for q in queries:
            for stmt in ([q] if isinstance(q, str) else q):
                try:
                    conn.execute(stmt)
                except libpq.Error:
                    pass
        rss[mode] = rss_anon_kb(conn.pid())
    return [("backend anonymous RSS after %s distinct queries: off / llvm / pgstencil" %
             "{:,}".format(MEMORY_QUERIES), " / ".join("%.1f" % (rss[m] / 1024) for m in
                                                       ("off", "llvm", "pgstencil")) + " MB",
             "pgstencil %+.1f MB over off" % ((rss["pgstencil"] - rss["off"]) / 1024))]


def tps(b, mode, args, db):
    p = b.srv.pgbench(args, db, timeout=PGBENCH_SECONDS + 120, **b.use(mode))
    m = re.search(r"^tps = ([0-9.]+)", p.stdout, re.M)
    failed = re.search(r"number of failed transactions: (\d+)", p.stdout)
    if p.returncode or not m or (failed and failed.group(1) != "0"):
        raise RuntimeError("pgbench %s (%s) failed:\n%s" % (" ".join(args), mode, p.stdout[-2000:]))
    return float(m.group(1))


def pgbench_rows(b):
    b.setup(["CREATE DATABASE bench"])
    p = b.srv.pgbench(["-i", "-s", "10", "-q"], "bench", timeout=600)
    if p.returncode:
        raise RuntimeError("pgbench -i failed:\n" + p.stdout[-2000:])
    rows = []
    run = ["-c", "2", "-j", "2", "-T", str(PGBENCH_SECONDS)]
    for script, modes in (("select-only", ["off", "llvm", "pgstencil"]),
                          ("simple-update", ["off", "pgstencil"]),
                          ("tpcb-like", ["off", "pgstencil"])):
        t = {m: tps(b, m, run + ["-b", script], "bench") for m in modes}
        rows.append(("pgbench -b %s, scale 10, 2 clients, %d s, jit_above_cost=0: tps %s" % (
            script, PGBENCH_SECONDS, " / ".join(modes)), " / ".join("%.0f" % t[m] for m in modes),
            "pgstencil %.3fx off%s" % (t["pgstencil"] / t["off"], "; llvm %.3fx off" % (
                t["llvm"] / t["off"]) if "llvm" in t else "")))
    return rows


def pg_rows(build):
    why = pgserver.available()
    if why:
        return [("PostgreSQL rows", "skipped", why)]
    pgserver.install_provider(build)
    with Bench() as b:
        b.setup(["CREATE EXTENSION pg_stat_statements"])
        return pgbench_rows(b) + corpus_rows(b) + memory_rows(b) + deform_rows(b) + tpch_rows(b)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True)
    args = ap.parse_args()
    rows = pg_rows(os.path.abspath(args.build))
    width = max(len(r[0]) for r in rows)
    for r in rows:
        print("%-*s  %-22s  %s" % (width, r[0], r[1], r[2]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
