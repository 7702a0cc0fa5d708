"""corpus - seeded SQL queries for pgstencil's differential tests.

    for sql in corpus.queries(seed=1, count=10000): ...
    corpus.setup_sql(seed=1)   # the table they read, the same for every server

Queries over one table `t` of int2/int4/int8, float4/float8, numeric, text,
bool, date and timestamp columns with NULLs in each: arithmetic, comparisons,
CASE/COALESCE/NULLIF, IN lists (short, and long enough for PostgreSQL's hashed
form), row comparisons, IS [NOT] DISTINCT FROM, casts (I/O coercions among
them), strict and non-strict functions, AND/OR/NOT and boolean tests,
aggregates with FILTER and DISTINCT, GROUP BY and HAVING, window functions,
joins, subqueries (IN, EXISTS, correlated scalar), prepared statements with
parameters, and queries that raise errors (division by zero, overflow, bad
input). Every query orders its rows completely, so a result is one list.
The same seed gives the same queries and data on every machine.
"""
import random

ROWS = 240
COLUMNS = [("id", "int4"), ("a", "int2"), ("b", "int4"), ("c", "int8"), ("r", "float4"),
           ("f", "float8"), ("n", "numeric"), ("s", "text"), ("flag", "bool"),
           ("d", "date"), ("ts", "timestamp")]
# Expression types: int covers the three integer widths, float both widths.
TYPES = ["int", "float", "numeric", "text", "bool", "date", "timestamp"]
KIND_OF = {"int2": "int", "int4": "int", "int8": "int", "float4": "float", "float8": "float",
           "numeric": "numeric", "text": "text", "bool": "bool", "date": "date",
           "timestamp": "timestamp"}
WORDS = ["alpha", "beta", "Gamma", "delta", "12", "-7", "3.5", "", "x y", "ALPHA", "zeta%", "b_c"]


def _value(rng, col, typ):
    if col != "id" and rng.random() < 0.15:
        return "NULL"
    if typ == "int2":
        return str(rng.randint(-300, 300))
    if typ == "int4":
        return str(rng.randint(-1000, 1000))
    if typ == "int8":
        return str(rng.choice([rng.randint(-10**6, 10**6), rng.randint(-50, 50)]))
    if typ == "float4":
        return "'%s'" % round(rng.uniform(-100, 100), 2)
    if typ == "float8":
        return "'%r'" % rng.choice([rng.uniform(-1e4, 1e4), float(rng.randint(-20, 20)), 0.1])
    if typ == "numeric":
        return "%d.%02d" % (rng.randint(-5000, 5000), rng.randint(0, 99))
    if typ == "text":
        return "'%s'" % rng.choice(WORDS)
    if typ == "bool":
        return rng.choice(["true", "false"])
    if typ == "date":
        return "date '2000-01-01' + %d" % rng.randint(0, 11000)
    return "timestamp '2000-01-01' + interval '%d minutes'" % rng.randint(0, 16000000)


def setup_sql(seed):
    """The statements creating and filling t."""
    rng = random.Random("data-%s" % seed)
    stmts = ["CREATE TABLE t (%s)" % ", ".join("%s %s" % c for c in COLUMNS)]
    rows = []
    for i in range(1, ROWS + 1):
        vals = [str(i)] + [_value(rng, col, typ) for col, typ in COLUMNS[1:]]
        rows.append("(%s)" % ", ".join(vals))
    stmts.append("INSERT INTO t VALUES %s" % ", ".join(rows))
    stmts.append("ANALYZE t")
    return stmts


class Gen:
    """Expressions of a kind over the columns of the aliases in scope."""

    def __init__(self, rng, aliases=("t",)):
        self.rng = rng
        self.aliases = list(aliases)

    def col(self, kind):
        cols = [c for c, typ in COLUMNS if KIND_OF[typ] == kind]
        return "%s.%s" % (self.rng.choice(self.aliases), self.rng.choice(cols))

    def lit(self, kind):
        r = self.rng
        return {"int": lambda: str(r.randint(-20, 20)),
                "float": lambda: "(%s)::float8" % round(r.uniform(-50, 50), 1),
                "numeric": lambda: "%d.%d" % (r.randint(-99, 99), r.randint(0, 9)),
                "text": lambda: "'%s'" % r.choice(WORDS),
                "bool": lambda: r.choice(["true", "false", "NULL::bool"]),
                "date": lambda: "date '20%02d-%02d-01'" % (r.randint(0, 29), r.randint(1, 12)),
                "timestamp": lambda: "timestamp '2010-06-01 12:00'"}[kind]()

    def expr(self, kind, depth=2):
        r = self.rng
        if depth <= 0 or r.random() < 0.3:
            return self.col(kind) if r.random() < 0.75 else self.lit(kind)
        d = depth - 1
        e = lambda k=kind: self.expr(k, d)  # noqa: E731
        common = [lambda: "CASE WHEN %s THEN %s WHEN %s THEN %s ELSE %s END" %
                  (e("bool"), e(), e("bool"), e(), e()),
                  lambda: "CASE %s WHEN %s THEN %s ELSE %s END" % (e("int"), self.lit("int"),
                                                                  e(), e()),
                  lambda: "COALESCE(%s, %s, %s)" % (e(), e(), e()),
                  lambda: "NULLIF(%s, %s)" % (e(), e())]
        forms = {
            "int": [lambda: "(%s + %s)" % (e(), e()), lambda: "(%s - %s)" % (e(), e()),
                    lambda: "((%s)::int8 * %s)" % (e(), e()),
                    lambda: "(%s / NULLIF(%s, 0))" % (e(), e()),
                    lambda: "(%s %% NULLIF(%s, 0))" % (e(), e()), lambda: "abs(%s)" % e(),
                    lambda: "-(%s)" % e(), lambda: "length(%s)" % e("text"),
                    lambda: "greatest(%s, %s)" % (e(), e()),
                    lambda: "least(%s, %s, %s)" % (e(), e(), e()),
                    lambda: "(%s - %s)" % (e("date"), e("date")),
                    lambda: "(extract(year from %s))::int" % e("date"),
                    lambda: "(%s)::int4" % e("float"), lambda: "(round(%s))::int8" % e("numeric")],
            "float": [lambda: "(%s + %s)" % (e(), e()), lambda: "(%s * %s)" % (e(), e()),
                      lambda: "(%s / NULLIF(%s, 0))" % (e(), e()), lambda: "(%s)::float8" % e("int"),
                      lambda: "sqrt(abs(%s))" % e(), lambda: "floor(%s)" % e(),
                      lambda: "(%s)::float8" % e("numeric")],
            "numeric": [lambda: "(%s + %s)" % (e(), e()), lambda: "(%s * %s)" % (e(), e()),
                        lambda: "(%s / NULLIF(%s, 0))" % (e(), e()),
                        lambda: "(%s)::numeric" % e("int"), lambda: "round(%s, 1)" % e(),
                        lambda: "abs(%s)" % e()],
            "text": [lambda: "(%s || %s)" % (e(), e()), lambda: "upper(%s)" % e(),
                     lambda: "substr(%s, 2, 3)" % e(), lambda: "(%s)::text" % e("int"),
                     lambda: "(%s)::text" % e("numeric"), lambda: "(%s)::text" % e("date"),
                     lambda: "concat(%s, %s)" % (e(), e("int")),
                     lambda: "replace(%s, 'a', 'Z')" % e()],
            "bool": [lambda: self.compare(d), lambda: self.compare(d),
                     lambda: "(%s AND %s)" % (e(), e()), lambda: "(%s OR %s)" % (e(), e()),
                     lambda: "(%s AND %s AND %s)" % (e(), e(), e()),
                     lambda: "(%s OR %s OR %s)" % (e(), e(), e()), lambda: "(NOT %s)" % e(),
                     lambda: "((%s) IS %s)" % (e(), r.choice(["TRUE", "NOT TRUE", "FALSE",
                                                            "NOT FALSE", "UNKNOWN"])),
                     lambda: "(%s IS %sNULL)" % (self.expr(r.choice(TYPES), d),
                                               r.choice(["", "NOT "])),
                     lambda: self.in_list(d),
                     lambda: "(%s %sBETWEEN %s AND %s)" % (e("int"), r.choice(["", "NOT "]),
                                                        e("int"), e("int")),
                     lambda: self.distinct(d),
                     lambda: "((%s, %s) %s (%s, %s))" % (e("int"), e("text"),
                                                       r.choice(["<", "<=", ">", ">="]),
                                                       e("int"), e("text")),
                     lambda: "(%s LIKE %s)" % (e("text"), r.choice(["'a%'", "'%a%'", "'_e%'"])),
                     lambda: "(%s)::bool" % r.choice(["'t'", "'off'", "NULL::text"])],
            "date": [lambda: "(%s + %s)" % (e(), r.randint(-400, 400)),
                     lambda: "(%s)::date" % e("timestamp")],
            "timestamp": [lambda: "(%s + interval '%d hours')" % (e(), r.randint(-99, 99)),
                          lambda: "date_trunc('month', %s)" % e(),
                          lambda: "(%s)::timestamp" % e("date")],
        }[kind]
        return r.choice(forms + (common if kind != "bool" else common[2:]))()

    def compare(self, depth):
        kind = self.rng.choice(TYPES[:4] + ["date", "timestamp", "bool"])
        op = self.rng.choice(["=", "<>", "<", "<=", ">", ">="])
        return "(%s %s %s)" % (self.expr(kind, depth), op, self.expr(kind, depth))

    def distinct(self, depth):
        kind = self.rng.choice(TYPES)
        return "(%s IS %sDISTINCT FROM %s)" % (self.expr(kind, depth),
                                             self.rng.choice(["", "NOT "]),
                                             self.expr(kind, depth))

    def in_list(self, depth):
        kind = self.rng.choice(["int", "text", "numeric"])
        n = self.rng.choice([2, 3, 5, 12])  # 9 and more: a hashed ScalarArrayOp
        return "(%s %sIN (%s))" % (self.expr(kind, depth), self.rng.choice(["", "NOT "]),
                                 ", ".join(self.lit(kind) for _ in range(n)))


AGGS = {"int": ["sum(%s)", "avg(%s)", "min(%s)", "max(%s)", "count(%s)"],
        "float": ["sum(%s)", "max(%s)", "count(%s)"],
        "numeric": ["sum(%s)", "avg(%s)", "min(%s)"],
        "text": ["min(%s)", "max(%s)", "count(%s)", "string_agg(%s, ',' ORDER BY t.id)"],
        "bool": ["bool_and(%s)", "bool_or(%s)", "count(%s)"],
        "date": ["min(%s)", "max(%s)"], "timestamp": ["max(%s)"]}


def _aggregate(g, rng):
    kind = rng.choice(TYPES)
    agg = rng.choice(AGGS[kind])
    arg = g.expr(kind, 1)
    if rng.random() < 0.2 and "ORDER BY" not in agg:
        agg = agg.replace("(%s", "(DISTINCT %s")
    text = agg % arg
    if rng.random() < 0.3:
        text += " FILTER (WHERE %s)" % g.expr("bool", 1)
    return text


def _select(rng):
    g = Gen(rng)
    shape = rng.random()
    if shape < 0.35:  # projection and filter
        cols = ", ".join(g.expr(rng.choice(TYPES), 3) for _ in range(rng.randint(1, 3)))
        return "SELECT t.id, %s FROM t WHERE %s ORDER BY t.id" % (cols, g.expr("bool", 3))
    if shape < 0.55:  # grouping
        key = rng.choice(["t.a % 5", "t.s", "t.flag", "t.b / 300", "extract(month from t.d)"])
        aggs = ", ".join(["count(*)"] + [_aggregate(g, rng) for _ in range(rng.randint(1, 3))])
        having = " HAVING count(*) > %d" % rng.randint(0, 20) if rng.random() < 0.3 else ""
        where = " WHERE %s" % g.expr("bool", 2) if rng.random() < 0.6 else ""
        return "SELECT %s AS k, %s FROM t%s GROUP BY 1%s ORDER BY 1" % (key, aggs, where,
                                                                        having)
    if shape < 0.62:  # a whole-table aggregate
        return "SELECT %s FROM t WHERE %s" % (
            ", ".join(_aggregate(g, rng) for _ in range(rng.randint(1, 4))), g.expr("bool", 2))
    if shape < 0.70:  # window functions
        kind = rng.choice(["int", "numeric", "float"])
        w = rng.choice(["sum(%s) OVER (PARTITION BY t.a %% 3 ORDER BY t.id)",
                        "max(%s) OVER (ORDER BY t.id ROWS BETWEEN 2 PRECEDING AND CURRENT ROW)",
                        "lag(%s) OVER (ORDER BY t.id)", "first_value(%s) OVER (PARTITION BY t.flag"
                        " ORDER BY t.id)"]) % g.expr(kind, 2)
        return "SELECT t.id, %s, row_number() OVER (ORDER BY %s, t.id) FROM t WHERE %s " \
               "ORDER BY t.id" % (w, g.expr("int", 1), g.expr("bool", 2))
    if shape < 0.78:  # joins: inner and outer vars
        j = Gen(rng, ("t", "u"))
        return "SELECT t.id, u.id, %s FROM t %s JOIN t AS u ON t.a %% 7 = u.a %% 7 AND %s " \
               "WHERE %s ORDER BY 1, 2 LIMIT 60" % (
                   j.expr(rng.choice(TYPES), 2), rng.choice(["", "LEFT"]), j.expr("bool", 1),
                   Gen(rng).expr("bool", 2))
    if shape < 0.88:  # subqueries
        inner = Gen(rng, ("t2",))
        sub = rng.choice([
            "t.b IN (SELECT t2.b + 1 FROM t AS t2 WHERE %s)" % inner.expr("bool", 2),
            "EXISTS (SELECT 1 FROM t AS t2 WHERE t2.a = t.a + 1 AND %s)" % inner.expr("bool", 2),
            "t.c > (SELECT avg(t2.c) FROM t AS t2 WHERE t2.flag = t.flag)",
            "t.s = ANY (SELECT t2.s FROM t AS t2 WHERE %s)" % inner.expr("bool", 1)])
        return "SELECT t.id, %s, (SELECT max(t2.f) FROM t AS t2 WHERE t2.a = t.a) FROM t " \
               "WHERE %s ORDER BY t.id" % (g.expr(rng.choice(TYPES), 2), sub)
    if shape < 0.93:  # parameters: a prepared statement's generic plan
        kind = rng.choice(["int", "text", "numeric"])
        return ("SET plan_cache_mode = force_generic_plan",
                "PREPARE p(%s) AS SELECT t.id, %s FROM t WHERE %s AND %s = $1 ORDER BY t.id" % (
                    {"int": "int4", "text": "text", "numeric": "numeric"}[kind],
                    g.expr(rng.choice(TYPES), 2), g.expr("bool", 2), g.col(kind)),
                "EXECUTE p(%s)" % g.lit(kind))
    # errors, raised inside expressions (or not, when no row reaches them)
    return "SELECT t.id, %s FROM t WHERE %s ORDER BY t.id" % (rng.choice([
        "t.b / (t.a - t.a)", "t.c * 9223372036854775807", "t.s::int4", "(t.b * 1000000)::int2",
        "t.n / 0", "sqrt(t.f)", "t.d + 2147483647", "10 / (t.id - %d)" % rng.randint(1, ROWS),
        "t.a::int2 * 1000::int2"]), g.expr("bool", 2))


def queries(seed, count):
    """`count` queries; each is one statement or a tuple of statements, whose
    outcome is the last one's or the first error (differential.CLEANUP
    resets what they set)."""
    rng = random.Random("queries-%s" % seed)
    return [_select(rng) for _ in range(count)]
