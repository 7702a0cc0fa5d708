"""differential - the same queries with jit off, llvmjit and pgstencil.

    mismatches, counts = differential.run(pgs_server, llvm_server, queries)

A query's outcome is its rows (PostgreSQL's text output) or its error's
SQLSTATE; the three must be equal. jit off and pgstencil run on the server
whose jit_provider is pgstencil, llvmjit on the other (jit_provider is a
server setting); both servers hold the same data. All three compile every
expression (jit_above_cost=0); llvmjit inlines and optimizes every
OPTIMIZED_EVERY-th query (at about 70 ms a query, optimizing all of them would
be nine tenths of the run) and compiles the others unoptimized.
Queries are shared among `threads` workers, each with its own three sessions.

    smaller = differential.reduce(query, lambda q: differs(pgs, llvm, q))

shrinks a mismatching query to one that still mismatches, for a regression
test (regressions.sql).
"""
import re
import threading

import libpq

OFF = ("off", "pgs", {"jit": "off"})
PGSTENCIL = ("pgstencil", "pgs", {"jit": "on", "jit_above_cost": "0"})
LLVMJIT = ("llvmjit", "llvm", {"jit": "on", "jit_above_cost": "0"})
LLVMJIT_OPT = ("llvmjit-opt", "llvm", {"jit": "on", "jit_above_cost": "0",
                                       "jit_inline_above_cost": "0",
                                       "jit_optimize_above_cost": "0"})
OPTIMIZED_EVERY = 10


def modes(i, optimized_every=OPTIMIZED_EVERY):
    """The three modes query i runs in."""
    return [OFF, PGSTENCIL, LLVMJIT_OPT if i % optimized_every == 0 else LLVMJIT]
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


def _worker(servers, queries, indexes, optimized_every, mismatches, counts, lock):
    sessions = _Sessions(servers)
    for i in indexes:
        results = {}
        for mode in modes(i, optimized_every):
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


def run(pgs_server, llvm_server, queries, threads=2, optimized_every=OPTIMIZED_EVERY):
    """[(index, query, {mode: outcome})] of the queries whose outcomes differ,
    and how many queries gave rows, and each SQLSTATE, with jit off; llvmjit
    optimizes every optimized_every-th query."""
    servers = {"pgs": pgs_server, "llvm": llvm_server}
    mismatches, counts, lock = [], {}, threading.Lock()
    workers = [threading.Thread(target=_worker,
                                args=(servers, queries, range(k, len(queries), threads),
                                      optimized_every, mismatches, counts, lock))
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


def differs(pgs_server, llvm_server, query):
    """Whether the query's outcomes differ among jit off, pgstencil and
    llvmjit optimizing (fresh sessions, so no state of an earlier query is
    involved)."""
    sessions = _Sessions({"pgs": pgs_server, "llvm": llvm_server})
    try:
        return len({repr(outcome(sessions.get(mode), query)) for mode in modes(0)}) > 1
    finally:
        for name in list(sessions.conns):
            sessions.drop(name)


LEAF = re.compile(r"\b[a-z]\w*\.[a-z]\w*\b|'[^']*'|-?\b\d+(\.\d+)?\b|\bNULL\b")


def _groups(sql):
    """(start, end) of each balanced parenthesis group and CASE ... END
    outside string literals, the longest first."""
    stack, groups, quoted = [], [], False
    for i, ch in enumerate(sql):
        if ch == "'":
            quoted = not quoted
        elif quoted:
            continue
        elif ch == "(":
            stack.append((i, ")"))
        elif ch == ")" and stack and stack[-1][1] == ")":
            groups.append((stack.pop()[0], i + 1))
        elif _word_at(sql, i, "CASE"):
            stack.append((i, "END"))
        elif _word_at(sql, i, "END") and stack and stack[-1][1] == "END":
            groups.append((stack.pop()[0], i + 3))
    return sorted(groups, key=lambda g: (g[0] - g[1], g[0]))


def _word_at(sql, i, word):
    def boundary(k):
        return k < 0 or k >= len(sql) or not (sql[k].isalnum() or sql[k] == "_")
    return sql.startswith(word, i) and boundary(i - 1) and boundary(i + len(word))


def _split_top(text, sep):
    """text split at each `sep` outside parentheses and string literals."""
    parts, depth, quoted, last = [], 0, False, 0
    for i, ch in enumerate(text):
        if ch == "'":
            quoted = not quoted
        elif not quoted:
            depth += (ch == "(") - (ch == ")")
            if depth == 0 and text.startswith(sep, i):
                parts.append(text[last:i])
                last = i + len(sep)
    return parts + [text[last:]]


def _top_index(text, word, start=0):
    """Where `word` first occurs at or after start outside parentheses and
    string literals, or -1."""
    depth, quoted = 0, False
    for i in range(start, len(text)):
        ch = text[i]
        if ch == "'":
            quoted = not quoted
        elif not quoted:
            depth += (ch == "(") - (ch == ")")
            if depth == 0 and text.startswith(word, i):
                return i
    return -1


def _candidates(sql):
    """Smaller variants of sql, the most promising first: fewer select-list
    items, a WHERE of `true`, then each group replaced by an inner group or
    by one of its columns or literals."""
    select = sql.find("SELECT ")
    frm = _top_index(sql, " FROM ", select + 1) if select >= 0 else -1
    if frm > 0:
        items = _split_top(sql[select + 7:frm], ", ")
        for k in range(len(items) if len(items) > 1 else 0):
            yield sql[:select + 7] + ", ".join(items[:k] + items[k + 1:]) + sql[frm:]
    where = _top_index(sql, " WHERE ")
    if where > 0:
        ends = [i for i in (_top_index(sql, w, where) for w in (" GROUP BY", " ORDER BY",
                                                                 " LIMIT")) if i > 0]
        end = min(ends) if ends else len(sql)
        if sql[where + 7:end] != "true":
            yield sql[:where + 7] + "true" + sql[end:]
    for start, end in _groups(sql):
        while start > 0 and (sql[start - 1].isalnum() or sql[start - 1] == "_"):
            start -= 1  # a call: replaced whole, by an argument
        inner = sql[start:end]
        subs = [inner[a:b] for a, b in _groups(inner) if (a, b) != (0, len(inner))]
        for sub in subs + [x.group(0) for x in LEAF.finditer(inner)] + ["NULL"]:
            if len(sub) < len(inner):
                yield sql[:start] + sub + sql[end:]


def reduce(query, still_differs, budget=400):
    """The smallest variant of query found (greedily, at most `budget`
    checks) for which still_differs holds. Of a tuple of statements, the
    one holding the query (SELECT or PREPARE ... AS SELECT) is reduced."""
    if not isinstance(query, str):
        k = max(range(len(query)), key=lambda i: ("SELECT" in query[i], len(query[i])))
        rest = lambda q: tuple(query[:k]) + (q,) + tuple(query[k + 1:])  # noqa: E731
        return rest(reduce(query[k], lambda q: still_differs(rest(q)), budget))
    best, checked, seen = query, 0, {query}
    progress = True
    while progress and checked < budget:
        progress = False
        for cand in _candidates(best):
            if cand in seen:
                continue
            seen.add(cand)
            checked += 1
            if still_differs(cand):
                best, progress = cand, True
                break
            if checked >= budget:
                break
    return best
