#!/usr/bin/env python3
"""The differential corpus at fuzzing scale (./run.sh fuzz).

  tests/pgstencil/fuzz_corpus.py --build build [--seed S] [--queries N]

Generates N queries (default 50,000) from seed S (default: today's date,
so each day's run explores queries the suite's fixed seed never made), runs
them with jit off, llvmjit and pgstencil on servers of its own, and reduces
each mismatch (differential.reduce) to the smallest query found that still
mismatches: the query to fix and keep as a regression test.
Prints the outcome counts; exit status 1 if any query mismatched.
"""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]
import corpus  # noqa: E402
import differential  # noqa: E402
import pgserver  # noqa: E402

REDUCED_AT_MOST = 10


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True)
    ap.add_argument("--seed", default=time.strftime("%Y%m%d"))
    ap.add_argument("--queries", type=int, default=50000)
    args = ap.parse_args()
    why = pgserver.available()
    if why:
        print("pgstencil corpus: skipped, %s" % why)
        return 0
    pgserver.install_provider(args.build)
    queries = corpus.queries(args.seed, args.queries)
    start = time.time()
    with pgserver.Server(None, "pgstencil") as pgs, pgserver.Server(None, "llvmjit") as llvm:
        for srv in (pgs, llvm):
            conn = srv.connect()
            for stmt in corpus.setup_sql(args.seed):
                conn.execute(stmt)
        mismatches, counts = differential.run(pgs, llvm, queries)
        print("pgstencil corpus: seed %s, %d queries in %.0f s, %d mismatches; with jit off %s"
              % (args.seed, len(queries), time.time() - start, len(mismatches),
                 ", ".join("%s %d" % kv for kv in sorted(counts.items()))))
        for m in mismatches[:REDUCED_AT_MOST]:
            print(differential.describe(m))
            reduced = differential.reduce(m[1], lambda q: differential.differs(pgs, llvm, q))
            print("  reduced: %s" % (reduced,))
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
