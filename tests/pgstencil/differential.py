"""differential - the same queries with jit off, llvmjit and pgstencil.

    mismatches, counts = differential.run(pgs_server, llvm_server, queries)

A query's outcome is its rows (PostgreSQL's text output) or its error's
SQLSTATE; the three must be equal. jit off and pgstencil run on the server
whose jit_provider is pgstencil, llvmjit on the other (jit_provider is a
server setting); both servers hold the same data. All three compile every
expression (jit_above_cost=0), llvmjit with inlining and optimization.
Queries are shared among `threads` workers, each with its own three sessions.
"""
import threading

import libpq

MODES = [
    ("off", "pgs", {"jit": "off"}),
    ("pgstencil", "pgs", {"jit": "on", "jit_above_cost": "0"}),
    ("llvmjit", "llvm", {"jit": "on", "jit_above_cost": "0", "jit_inline_above_cost": "0",
                         "jit_optimize_above_cost": "0"}),
]
# After a query made of several statements (corpus.queries).
CLEANUP = ["DEALLOCATE ALL", "RESET plan_cache_mode"]
CONNECTION_LOST = ("08006", "08003", "57P01", "57P02", "57P03")


def outcome(conn, query):
    """("rows", [...]) or ("error", SQLSTATE)."""
    stmts = [query] if isinstance(query, str) else list(query)
    result = ("rows", [])
    try:
        for sql in stmts:
            rows = conn.execute(sql)
            result = ("rows", rows)
    except libpq.Error as e:
        result = ("error", e.sqlstate)
    if len(stmts) > 1:
        for sql in CLEANUP:
            try:
                conn.execute(sql)
            except libpq.Error:
                pass
    return result


class _Sessions:
    def __init__(self, servers):
        self.servers = servers
        self.conns = {}

    def get(self, mode):
        name, server, settings = mode
        if name not in self.conns:
            self.conns[name] = self.servers[server].connect(**settings)
        return self.conns[name]

    def drop(self, name):
        conn = self.conns.pop(name, None)
        if conn:
            conn.close()


def _worker(servers, queries, indexes, mismatches, counts, lock):
    sessions = _Sessions(servers)
    for i in indexes:
        results = {}
        for mode in MODES:
            try:
                results[mode[0]] = outcome(sessions.get(mode), queries[i])
            except libpq.Error as e:  # cannot connect: the server went away
                results[mode[0]] = ("error", e.sqlstate)
            if results[mode[0]][0] == "error" and results[mode[0]][1] in CONNECTION_LOST:
                sessions.drop(mode[0])  # a crashed backend: a new session next time
        with lock:
            off = results["off"]
            kind = off[1] if off[0] == "error" else "rows"
            counts[kind] = counts.get(kind, 0) + 1
            if len({repr(r) for r in results.values()}) > 1:
                mismatches.append((i, queries[i], results))
    for name in list(sessions.conns):
        sessions.drop(name)


def run(pgs_server, llvm_server, queries, threads=2):
    """[(index, query, {mode: outcome})] of the queries whose outcomes differ,
    and how many queries gave rows, and each SQLSTATE, with jit off."""
    servers = {"pgs": pgs_server, "llvm": llvm_server}
    mismatches, counts, lock = [], {}, threading.Lock()
    workers = [threading.Thread(target=_worker,
                                args=(servers, queries, range(k, len(queries), threads),
                                      mismatches, counts, lock))
               for k in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return sorted(mismatches, key=lambda m: m[0]), counts


def describe(mismatch, limit=3000):
    i, query, results = mismatch
    lines = ["query %d: %s" % (i, query)]
    for mode, r in results.items():
        lines.append("  %-9s %s" % (mode, repr(r)[:400]))
    return "\n".join(lines)[:limit]
