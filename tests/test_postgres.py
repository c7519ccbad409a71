"""A real service: PostgreSQL from Debian, its postmaster traced with --follow. A backend
forked for a connection after attach is traced; over the same queries, its figures equal
those of a second heaptap attached to that backend alone (the single-process mode, itself
checked against memcheck)."""
import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time

from lib import (Failure, Heaptap, Proc, check, check_true, functions, probed_text_intact,
                 record_time, test)
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
    """The latest interval record once pid's calls are the same in two in a row, of those
    made from now on: records that waited in the pipe meanwhile are older than what the
    caller just did."""
    last = [None]
    since = time.time()

    def same(rec):
        if record_time(rec) < since:
            return False
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


@contextlib.contextmanager
def cluster():
    """A throwaway PostgreSQL 15 cluster listening on a socket in its own directory: (that
    directory, the postmaster's PID). Shut down fast, by its PID."""
    if not os.path.exists(os.path.join(PG_BIN, "postgres")):
        raise Failure("PostgreSQL 15 is missing: .ci/run installs postgresql")
    d = tempfile.mkdtemp(prefix="heaptap-pg-")
    data = os.path.join(d, "data")
    server = None
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
        # Its socket comes before it accepts connections ("the database system is starting
        # up"): pg_isready says when it does.
        deadline = time.monotonic() + 30
        while subprocess.run([os.path.join(PG_BIN, "pg_isready"), "-q", "-h", d, "-p",
                              str(PORT)], timeout=30).returncode != 0:
            if time.monotonic() > deadline or server.popen.poll() is not None:
                server.end()
                raise Failure(f"the postmaster does not accept connections: "
                              f"{server.stderr_text()[-1000:]}")
            time.sleep(0.1)
        yield d, server.pid
    finally:
        if server and server.popen.poll() is None:
            os.kill(server.pid, signal.SIGINT)   # fast shutdown, by its PID
            try:
                server.popen.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.end()
        shutil.rmtree(d, ignore_errors=True)


def some_queries(psql, n):
    """n queries, each building and sorting through 2,000 rows of strings."""
    for i in range(n):
        psql.ask(f"select count(*), max(length(s)) from (select repeat('x', g % {50 + i}) "
                 f"|| g::text as s from generate_series(1, 2000) g) q;")


@test(tier="services")
def test_postgres_backends_followed_as_attached_alone():
    psql = None
    with cluster() as (d, postmaster):
        try:
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
            some_queries(psql, QUERIES)
            check("the connection is the same backend",
                  int(psql.ask("select pg_backend_pid();")), backend)
            after = settled(follow, backend, "the queries are done")
            by_alone = settled(alone, backend, "the queries are done, attached alone")
            delta = backend_calls(after, backend) - backend_calls(before, backend)
            direct = backend_calls(by_alone, backend)
            check_true(f"the queries' calls, followed ({delta}) and attached alone ({direct})",
                       direct >= 3 * QUERIES and abs(delta - direct) <= 0.05 * direct,
                       (delta, direct))
            check("the backend, traced from its fork (its probes inherited)",
                  (after["inexact"]["late_procs"], p["late_ms"]), (0, None))
            check("no fork notice lost", after["inexact"]["lost_procs"], 0)
            named = [s for s in after["sites"]
                     if any(x["pid"] == backend for x in s["processes"]) and
                     any(f and ("MemoryContext" in f or "AllocSet" in f or "palloc" in f)
                         for f in functions(s))]
            check_true("the backend's sites are named by PostgreSQL's allocator functions",
                       named, [functions(s)[:4] for s in after["sites"][:5]])
            procs = {p["pid"]: p for p in after["processes"]}
            others = [p for p in procs.values()
                      if p["parent"] == postmaster and p["pid"] != backend]
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


def pgbench(d, *args, timeout=120):
    """pgbench from Debian against the cluster at d; its output."""
    out = subprocess.run(as_postgres([os.path.join(PG_BIN, "pgbench"), "-h", d, "-p", str(PORT),
                                      "-U", "postgres"] + list(args) + ["postgres"]),
                         capture_output=True, text=True, timeout=timeout)
    check(f"pgbench {' '.join(args)}: exit status ({out.stderr[-300:]})", out.returncode, 0)
    return out.stdout


def children(pid):
    out = set()
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/stat", errors="replace") as f:
                if name.isdigit() and int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                    out.add(int(name))
        except (OSError, IndexError):
            pass
    return out


@test(tier="services")
def test_pgbench_backends_through_the_postmaster():
    """pgbench's clients, each a backend forked after attach: heaptap --follow on the
    postmaster names them and merges their sites, and sees at least what heaptap attached to
    each backend directly sees; with a connection per transaction (-C), every short-lived
    backend is traced from its fork, each with the calls of its transaction; the text of a
    backend still running is the file's after detach."""
    psql = None
    with cluster() as (d, postmaster):
        try:
            pgbench(d, "-i", "-q", "-s", "1")
            psql = Psql(d)
            idle = int(psql.ask("select pg_backend_pid();"))
            follow = Heaptap(["-p", str(postmaster), "-f", "-i", "300ms", "--top", "1000"])
            attached = follow.attached()
            known = children(postmaster)
            # TPC-B's reads, each client then pausing in a query: both hold its executor's
            # blocks at the same sites most of the time, whenever a report is made.
            script = os.path.join(d, "bench.sql")
            with open(script, "w") as f:
                f.write("\\set aid random(1, 100000)\n"
                        "SELECT abalance FROM pgbench_accounts WHERE aid = :aid;\n"
                        "SELECT pg_sleep(0.02);\n")
            os.chmod(script, 0o644)
            bench = subprocess.Popen(as_postgres([os.path.join(PG_BIN, "pgbench"), "-h", d,
                                                  "-p", str(PORT), "-U", "postgres", "-c", "2",
                                                  "-T", "10", "-f", script, "postgres"]),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            # Its two clients' backends (its first connection, a check, comes and goes).
            deadline = time.monotonic() + 20
            seen = None
            while True:
                # The clients' backends run the script; the check's never does.
                pids = psql.ask("select string_agg(pid::text, ',' order by pid) from "
                                "pg_stat_activity where application_name = 'pgbench' and "
                                "(query like '%pg_sleep%' or query like '%abalance%');")
                if pids and len(pids.split(",")) == 2 and pids == seen:
                    break
                seen = pids
                check_true("pgbench's two backends start", time.monotonic() < deadline, pids)
                time.sleep(0.05)
            clients = [int(x) for x in pids.split(",")]
            alone = {pid: Heaptap(["-p", str(pid), "-i", "1h"]) for pid in clients}
            for ht in alone.values():
                ht.attached()
            merged = wait_record(follow, lambda rec: any(
                {x["pid"] for x in s["processes"]} >= set(clients) for s in rec["sites"]),
                "a site is merged across the two clients")
            out, err = bench.communicate(timeout=60)
            check(f"pgbench's exit status ({err[-300:]})", bench.returncode, 0)
            direct = {}
            for pid, ht in alone.items():
                final, status = ht.finish(sig=None)   # it ends with its backend
                check(f"heaptap on backend {pid}: exit status", status, 0)
                direct[pid] = final["alloc_calls"]
            wait_record(follow, lambda rec: not any(p["alive"] for p in rec["processes"]
                                                    if p["pid"] in clients),
                        "the follower hears of the clients' exits")
            short = pgbench(d, "-C", "-c", "2", "-t", "20")
            done = int(next(line for line in short.splitlines()
                            if "transactions actually processed" in line).split(":")[1]
                        .split("/")[0])

            def ended(rec):
                """The backends forked since attach, all heard of and ended."""
                new = [p for p in rec["processes"] if p["parent"] == postmaster and
                       p["pid"] not in known and p["pid"] not in clients]
                return len(new) >= done and not any(p["alive"] for p in new)
            wait_record(follow, ended, "the follower hears of every backend's exit")
            final, status = follow.finish()
            check("heaptap following: exit status", status, 0)
            check("the running backend's code after detach", probed_text_intact(idle, attached),
                  [])
            procs = {p["pid"]: p for p in final["processes"]}
            for pid in clients:
                p = procs.get(pid)
                check_true(f"backend {pid}, named", p and p["comm"] == "postgres" and
                           p["parent"] == postmaster and not p["alive"], p)
                check_true(f"backend {pid}: calls followed ({p['alloc_calls']}) against "
                           f"attached alone ({direct[pid]})",
                           direct[pid] > 100 and p["alloc_calls"] >= 0.95 * direct[pid],
                           (p["alloc_calls"], direct[pid]))
            check_true("the merged site is a backend's, named",
                       any(f and "PostgresMain" in f for s in merged["sites"]
                           for f in functions(s)), [functions(s)[:6] for s in merged["sites"]])
            # -C: a backend per transaction, 40 of them (and pgbench's own first one).
            check("transactions with a connection each", done, 40)
            # Each lives a few milliseconds: it inherits the postmaster's probes as it is
            # forked, and is traced whole (doc/services.md).
            check("none late, none untraced, no fork notice lost",
                  tuple(final["inexact"][k] for k in ("late_procs", "untraced_procs",
                                                      "lost_procs")), (0, 0, 0))
            traced = [p for p in procs.values() if p["parent"] == postmaster and
                      p["pid"] not in known and p["pid"] not in clients and p["alloc_calls"]]
            whole = [p for p in traced if p["alloc_calls"] >= 300]
            check_true(f"every short-lived backend traced with its transaction's calls "
                       f"({len(whole)} of {len(traced)} with 300 or more, {done} transactions)",
                       len(whole) >= done, sorted(p["alloc_calls"] for p in traced))
            print(f"    pgbench's clients: calls followed "
                  f"{', '.join(str(procs[c]['alloc_calls']) for c in clients)}, attached alone "
                  f"{', '.join(str(direct[c]) for c in clients)}; -C: {done} transactions, "
                  f"{len(traced)} backends traced, calls each "
                  f"{min(p['alloc_calls'] for p in traced)} to "
                  f"{max(p['alloc_calls'] for p in traced)}")
        finally:
            if psql:
                psql.close()
