"""pgserver - a PostgreSQL 15 server of the test's own, for pgstencil's tests.

    with pgserver.Server(ctx, "pgstencil") as srv:      # jit_provider
        rows = srv.query("SELECT 1")

initdb into a temporary directory, the server on a Unix socket in it (no TCP),
run as the `postgres` user when the suite runs as root (PostgreSQL refuses
root), stopped on every exit path: the with block's end, an exception, or the
interpreter's exit (atexit), `immediate` if a fast stop does not finish.
"""
import atexit
import json
import os
import pwd
import shutil
import subprocess
import tempfile

import libpq
import sgtest

PG_BIN = "/usr/lib/postgresql/15/bin"
STATEMENT_TIMEOUT_MS = 60000


def available():
    """Why the tests cannot run here, or None."""
    if not os.path.exists(os.path.join(PG_BIN, "postgres")):
        return "no PostgreSQL 15 server (Debian: postgresql-15)"
    try:
        libpq.lib()
    except OSError:
        return "no libpq (Debian: libpq5)"
    if os.getuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and no postgres user to run the server as"
    return None


def pkglibdir():
    return subprocess.run(["pg_config", "--pkglibdir"], stdout=subprocess.PIPE, text=True,
                          check=True, timeout=30).stdout.strip()


def install_provider(build, name="pgstencil"):
    """Put the build's provider where PostgreSQL loads providers from
    (pg_config --pkglibdir/NAME.so), replacing any older copy atomically."""
    src = os.path.join(build, "pgstencil", "pgstencil.so")
    if not os.path.exists(src):
        raise sgtest.TestFailure("%s was not built (meson found no PostgreSQL 15 headers?)" % src)
    dest = os.path.join(pkglibdir(), name + ".so")
    tmp = dest + ".tmp%d" % os.getpid()
    shutil.copyfile(src, tmp)
    os.chmod(tmp, 0o755)
    os.replace(tmp, dest)
    return dest


class Server:
    def __init__(self, ctx, provider, settings=None, name=None):
        self.ctx = ctx
        self.provider = provider
        self.settings = dict(settings or {})
        self.dir = tempfile.mkdtemp(prefix="pg-%s-" % (name or provider))
        self.data = os.path.join(self.dir, "data")
        self.log = os.path.join(self.dir, "server.log")
        self.running = False
        self.user = None
        if os.getuid() == 0:
            self.user = "postgres"
            pw = pwd.getpwnam("postgres")
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        os.chmod(self.dir, 0o755)
        self.conns = []

    def _as_server_user(self, cmd):
        return (["runuser", "-u", self.user, "--"] if self.user else []) + cmd

    def _run(self, cmd, timeout=120):
        p = subprocess.run(self._as_server_user(cmd), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=timeout)
        if p.returncode != 0:
            raise sgtest.TestFailure("%s failed (%d):\n%s" % (" ".join(cmd), p.returncode,
                                                               p.stdout[-3000:]))
        return p.stdout

    def start(self):
        self._run([os.path.join(PG_BIN, "initdb"), "-D", self.data, "-U", "postgres",
                   "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync"])
        conf = {"listen_addresses": "''", "unix_socket_directories": "'%s'" % self.dir,
                "jit_provider": "'%s'" % self.provider, "fsync": "off",
                "shared_buffers": "'128MB'", "max_connections": "20"}
        conf.update(self.settings)
        with open(os.path.join(self.data, "postgresql.auto.conf"), "a") as f:
            for k, v in conf.items():
                f.write("%s = %s\n" % (k, v))
        atexit.register(self.stop)
        self._run([os.path.join(PG_BIN, "pg_ctl"), "-D", self.data, "-l", self.log, "-w",
                   "-t", "60", "start"])
        self.running = True
        return self

    def stop(self):
        for c in self.conns:
            try:
                c.close()
            except Exception:
                pass
        self.conns = []
        if not self.running:
            return
        self.running = False
        ctl = [os.path.join(PG_BIN, "pg_ctl"), "-D", self.data, "-w", "-t", "30", "stop"]
        try:
            self._run(ctl + ["-m", "fast"], timeout=60)
        except (sgtest.TestFailure, subprocess.TimeoutExpired):
            subprocess.run(self._as_server_user(ctl + ["-m", "immediate"]), timeout=60)

    def restart(self, provider):
        """The same data directory served again with another jit_provider
        (a postmaster setting: only a restart changes it)."""
        self.stop()
        self.provider = provider
        with open(os.path.join(self.data, "postgresql.auto.conf"), "a") as f:
            f.write("jit_provider = '%s'\n" % provider)
        self._run([os.path.join(PG_BIN, "pg_ctl"), "-D", self.data, "-l", self.log, "-w",
                   "-t", "60", "start"])
        self.running = True

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
        return False

    def connect(self, dbname="postgres", **settings):
        """A session (libpq.Connection) to dbname; settings become `-c
        name=value` options."""
        opts = {"statement_timeout": STATEMENT_TIMEOUT_MS}
        opts.update(settings)
        options = " ".join("-c %s=%s" % (k, v) for k, v in opts.items())
        conn = libpq.Connection(host=self.dir, dbname=dbname, user="postgres",
                                options=options, connect_timeout=30)
        self.conns.append(conn)
        return conn

    def query(self, sql, conn=None, **settings):
        """Rows of one statement, in a new session unless `conn` is given."""
        if conn:
            return conn.execute(sql)
        conn = self.connect(**settings)
        try:
            return conn.execute(sql)
        finally:
            conn.close()
            self.conns.remove(conn)

    def pgbench(self, args, dbname="postgres", timeout=600, **settings):
        """Run pgbench (PostgreSQL 15's) against this server; settings reach
        its sessions as PGOPTIONS. The CompletedProcess, stderr in stdout."""
        env = dict(os.environ, PGOPTIONS=" ".join("-c %s=%s" % kv for kv in settings.items()))
        return subprocess.run([os.path.join(PG_BIN, "pgbench"), "-h", self.dir, "-U",
                               "postgres"] + list(args) + [dbname], env=env, timeout=timeout,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def log_text(self):
        try:
            with open(self.log, errors="replace") as f:
                return f.read()
        except OSError:
            return ""


def stats(conn):
    """pgstencil_stats() of this session's backend."""
    conn.execute("CREATE OR REPLACE FUNCTION pg_temp.pgstencil_stats() RETURNS json "
                 "AS 'pgstencil' LANGUAGE C")
    return json.loads(conn.execute("SELECT pg_temp.pgstencil_stats()")[0][0])
