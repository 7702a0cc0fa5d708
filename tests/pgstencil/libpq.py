"""libpq - the few libpq calls pgstencil's tests make, through ctypes.

PostgreSQL's own client library (libpq5, which the server's packages bring),
so the tests need no Python driver. Values come back as PostgreSQL's text
output (None for NULL), errors as Error with their SQLSTATE.
"""
import ctypes
import ctypes.util

_lib = None

PGRES_COMMAND_OK, PGRES_TUPLES_OK = 1, 2
CONNECTION_OK = 0
PG_DIAG_SQLSTATE = ord("C")


class Error(Exception):
    def __init__(self, sqlstate, message):
        super().__init__("%s: %s" % (sqlstate, message))
        self.sqlstate = sqlstate
        self.message = message


def lib():
    global _lib
    if _lib is None:
        path = ctypes.util.find_library("pq") or "libpq.so.5"
        pq = ctypes.CDLL(path)
        p, i, s = ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p
        for name, res, args in [("PQconnectdb", p, [s]), ("PQstatus", i, [p]),
                                ("PQerrorMessage", s, [p]), ("PQfinish", None, [p]),
                                ("PQexec", p, [p, s]), ("PQresultStatus", i, [p]),
                                ("PQresultErrorMessage", s, [p]),
                                ("PQresultErrorField", s, [p, i]), ("PQntuples", i, [p]),
                                ("PQnfields", i, [p]), ("PQgetvalue", s, [p, i, i]),
                                ("PQgetisnull", i, [p, i, i]), ("PQclear", None, [p]),
                                ("PQbackendPID", i, [p])]:
            fn = getattr(pq, name)
            fn.restype, fn.argtypes = res, args
        _lib = pq
    return _lib


def quote(value):
    """A conninfo value."""
    return "'%s'" % str(value).replace("\\", "\\\\").replace("'", "\\'")


class Connection:
    def __init__(self, **params):
        pq = lib()
        conninfo = " ".join("%s=%s" % (k, quote(v)) for k, v in params.items())
        self.conn = pq.PQconnectdb(conninfo.encode())
        if not self.conn or pq.PQstatus(self.conn) != CONNECTION_OK:
            msg = pq.PQerrorMessage(self.conn).decode(errors="replace") if self.conn else ""
            self.close()
            raise Error("08006", "cannot connect: " + msg.strip())

    def pid(self):
        return lib().PQbackendPID(self.conn)

    def execute(self, sql):
        """Rows of text values (None for NULL); [] for a command; Error on error."""
        pq = lib()
        res = pq.PQexec(self.conn, sql.encode())
        if not res:
            raise Error("08006", pq.PQerrorMessage(self.conn).decode(errors="replace").strip())
        try:
            status = pq.PQresultStatus(res)
            if status == PGRES_COMMAND_OK:
                return []
            if status != PGRES_TUPLES_OK:
                state = pq.PQresultErrorField(res, PG_DIAG_SQLSTATE)
                msg = pq.PQresultErrorMessage(res) or b""
                raise Error(state.decode() if state else "?????",
                            msg.decode(errors="replace").strip())
            rows = []
            for r in range(pq.PQntuples(res)):
                rows.append(tuple(None if pq.PQgetisnull(res, r, c) else
                                  pq.PQgetvalue(res, r, c).decode(errors="replace")
                                  for c in range(pq.PQnfields(res))))
            return rows
        finally:
            pq.PQclear(res)

    def close(self):
        if self.conn:
            lib().PQfinish(self.conn)
            self.conn = None
