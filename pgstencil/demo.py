#!/usr/bin/env python3
"""demo.py BUILD: one query's EXPLAIN (ANALYZE) JIT section, llvmjit beside
pgstencil, each on a PostgreSQL 15 server of the demo's own (initdb into a
temporary directory, a Unix socket in it, stopped on every exit path).
stencils/demo.sh runs it; README.md shows what it prints.

The query has TPC-H Q1's shape (grouped sums and averages of arithmetic
over a filtered scan); every expression is compiled (jit_above_cost=0),
llvmjit's with inlining and optimization, as a costly query gets them.
"""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "tests", "pgstencil"), os.path.join(ROOT, "tests")]
import pgserver  # noqa: E402

ROWS = 200000
SETUP = [
    "CREATE TABLE lineitem (l_quantity numeric, l_extendedprice numeric, l_discount numeric, "
    "l_tax numeric, l_returnflag char(1), l_linestatus char(1), l_shipdate date)",
    "INSERT INTO lineitem SELECT 1 + i %% 50, (900 + i %% 10000) / 10.0, (i %% 11) / 100.0, "
    "(i %% 9) / 100.0, substr('ANR', 1 + i %% 3, 1), substr('OF', 1 + i %% 2, 1), "
    "date '1992-01-01' + i %% 2500 FROM generate_series(1, %d) i" % ROWS,
    "VACUUM ANALYZE lineitem",
]
QUERY = ("SELECT l_returnflag, l_linestatus, sum(l_quantity), sum(l_extendedprice), "
         "sum(l_extendedprice * (1 - l_discount)), "
         "sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)), avg(l_quantity), "
         "avg(l_extendedprice), avg(l_discount), count(*) FROM lineitem "
         "WHERE l_shipdate <= date '1998-12-01' - interval '90 days' "
         "GROUP BY l_returnflag, l_linestatus ORDER BY l_returnflag, l_linestatus")
PROVIDERS = [("llvmjit", {"jit_above_cost": "0", "jit_inline_above_cost": "0",
                          "jit_optimize_above_cost": "0"}),
             ("pgstencil", {"jit_above_cost": "0"})]
ONE_PROCESS = {"max_parallel_workers_per_gather": "0"}


def explain(provider, settings):
    """(EXPLAIN (ANALYZE, FORMAT JSON)'s top object, the rows, jit off's rows)."""
    with pgserver.Server(None, provider, ONE_PROCESS) as srv:
        conn = srv.connect(**settings)
        for stmt in SETUP:
            conn.execute(stmt)
        conn.execute(QUERY)  # the table's pages in shared buffers for both runs
        plan = json.loads(conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + QUERY)[0][0])[0]
        return plan, conn.execute(QUERY), srv.query(QUERY, jit="off")


def table(results):
    """The JIT sections as rows of (label, value per provider)."""
    jit = [plan["JIT"] for plan, _, _ in results]
    rows = [("JIT functions", [j["Functions"] for j in jit])]
    rows += [("  " + k, [str(j["Options"][k]).lower() for j in jit])
             for k in ("Inlining", "Optimization", "Expressions", "Deforming")]
    rows.append(("Timing, ms", []))
    rows += [("  " + k, ["%.3f" % j["Timing"][k] for j in jit])
             for k in ("Generation", "Inlining", "Optimization", "Emission", "Total")]
    rows.append(("Execution Time, ms", ["%.3f" % plan["Execution Time"]
                                        for plan, _, _ in results]))
    return rows


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: pgstencil/demo.py BUILD")
    why = pgserver.available()
    if why:
        sys.exit("pgstencil/demo.py: " + why)
    pgserver.install_provider(sys.argv[1])
    results = [explain(name, settings) for name, settings in PROVIDERS]
    print("%-20s%12s%14s" % ("", "llvmjit", "pgstencil"))
    for label, values in table(results):
        print(("%-20s%12s%14s" % ((label,) + tuple(values))) if values else label)
    same = all(rows == off and rows == results[0][1] for _, rows, off in results)
    print("%-20s%12d%14s" % ("Rows", len(results[0][1]),
                             "the same" if same else "DIFFERENT"))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
