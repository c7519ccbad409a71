"""A real service: PostgreSQL from Debian, its postmaster traced with --follow. A backend
forked for a connection after attach is traced; over the same queries, its figures equal
those of a second heaptap attached to that backend alone (the single-process mode, itself
checked against memcheck)."""
import os
import shutil
import signal
import subprocess
import tempfile
import time

from lib import Failure, Heaptap, Proc, check, check_true, functions, test
from test_services import wait_record

PG_BIN = "/usr/lib/postgresql/15/bin"
PORT = 54329
QUERIES = 40


def as_postgres(argv):
    return ["setpriv", "--reuid", "postgres", "--regid", "postgres", "--init-groups"] + argv


def backend_calls(rec, pid):
    p = next((p for p in rec["processes"] if p["pid"] == pid), None)
    return p and p["alloc_calls"]


def settled(ht, pid, what, timeout=30):
    """The latest interval record once pid's calls are the same in two in a row."""
    last = [None]

    def same(rec):
        calls = backend_calls(rec, pid)
        before, last[0] = last[0], calls
        return calls is not None and calls == before
    return wait_record(ht, same, what, timeout)


class Psql:
    """One connection, kept open: a backend of its own."""

    def __init__(self, sock_dir):
        self.p = subprocess.Popen(as_postgres([os.path.join(PG_BIN, "psql"), "-h", sock_dir,
                                               "-p", str(PORT), "-U", "postgres", "-X", "-q",
                                               "-A", "-t", "postgres"]),
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)

    def ask(self, sql):
        self.p.stdin.write(sql.encode() + b"\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        if not line:
            raise Failure(f"psql ended: {self.p.stderr.read().decode()[-500:]}")
        return line.decode().strip()

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=30)


@test
def test_postgres_backends_followed_as_attached_alone():
    if not os.path.exists(os.path.join(PG_BIN, "postgres")):
        raise Failure("PostgreSQL 15 is missing: .ci/run installs postgresql")
    d = tempfile.mkdtemp(prefix="heaptap-pg-")
    data = os.path.join(d, "data")
    server = psql = None
    try:
        os.chmod(d, 0o755)
        shutil.chown(d, "postgres", "postgres")
        init = subprocess.run(as_postgres([os.path.join(PG_BIN, "initdb"), "-D", data, "-A",
                                           "trust", "-U", "postgres", "--no-sync"]),
                              capture_output=True, text=True, timeout=120)
        check("initdb", init.returncode, 0)
        server = Proc(as_postgres([os.path.join(PG_BIN, "postgres"), "-D", data, "-k", d, "-p",
                                   str(PORT), "-c", "listen_addresses=", "-c", "fsync=off"]),
                      stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while not os.path.exists(os.path.join(d, f".s.PGSQL.{PORT}")):
            if time.monotonic() > deadline or server.popen.poll() is not None:
                server.end()
                raise Failure(f"the postmaster does not listen: {server.stderr_text()[-1000:]}")
            time.sleep(0.1)
        postmaster = server.pid

        follow = Heaptap(["-p", str(postmaster), "-f", "-i", "300ms"])
        follow.attached()
        psql = Psql(d)
        backend = int(psql.ask("select pg_backend_pid();"))
        before = settled(follow, backend, "the connection is set up")
        p = next(p for p in before["processes"] if p["pid"] == backend)
        check("the backend's parent", p["parent"], postmaster)
        check("its name", p["comm"], "postgres")

        alone = Heaptap(["-p", str(backend), "-i", "300ms"])
        alone.attached()
        for i in range(QUERIES):
            psql.ask(f"select count(*), max(length(s)) from (select repeat('x', g % {50 + i}) "
                     f"|| g::text as s from generate_series(1, 2000) g) q;")
        check("the connection is the same backend", int(psql.ask("select pg_backend_pid();")),
              backend)
        after = settled(follow, backend, "the queries are done")
        by_alone = settled(alone, backend, "the queries are done, attached alone")
        delta = backend_calls(after, backend) - backend_calls(before, backend)
        direct = backend_calls(by_alone, backend)
        check_true(f"the queries' calls, followed ({delta}) and attached alone ({direct})",
                   direct >= 3 * QUERIES and abs(delta - direct) <= 0.05 * direct, (delta, direct))
        check_true("the backend, traced from after its fork",
                   after["inexact"]["late_procs"] >= 1, after["inexact"])
        check("no fork notice lost", after["inexact"]["lost_procs"], 0)
        named = [s for s in after["sites"]
                 if any(x["pid"] == backend for x in s["processes"]) and
                 any(f and ("MemoryContext" in f or "AllocSet" in f or "palloc" in f)
                     for f in functions(s))]
        check_true("the backend's sites are named by PostgreSQL's allocator functions", named,
                   [functions(s)[:4] for s in after["sites"][:5]])
        procs = {p["pid"]: p for p in after["processes"]}
        others = [p for p in procs.values() if p["parent"] == postmaster and p["pid"] != backend]
        check_true("the postmaster's other children are traced too (its workers)", others,
                   procs)
        _, status = alone.finish()
        check("heaptap alone: exit status", status, 0)
        psql.close()
        psql = None
        deadline = time.monotonic() + 10
        while os.path.exists(f"/proc/{backend}") and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)   # a report's time for heaptap to hear of its exit
        final, status = follow.finish()
        check("heaptap following: exit status", status, 0)
        p = next(p for p in final["processes"] if p["pid"] == backend)
        check_true("the backend ended with its connection", not p["alive"], p)
    finally:
        if psql:
            psql.p.kill()
            psql.p.wait()
        if server and server.popen.poll() is None:
            os.kill(server.pid, signal.SIGINT)   # fast shutdown, by its PID
            try:
                server.popen.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.end()
        shutil.rmtree(d, ignore_errors=True)
