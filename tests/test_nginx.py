"""A prefork server: nginx from Debian, a master and 2 workers already running. Attached to the
master with --follow, heaptap traces the workers too; over the same requests, a worker's
figures equal those of a second heaptap attached to that worker alone."""
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request

from lib import Failure, Heaptap, Proc, check, check_true, test
from test_postgres import backend_calls, settled

NGINX = "/usr/sbin/nginx"
REQUESTS = 200


def children_of(pid):
    out = []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/stat", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if name.isdigit() and int(fields[1]) == pid:
            out.append(int(name))
    return sorted(out)


@contextlib.contextmanager
def nginx(workers):
    """nginx from Debian serving "hello" on a free loopback port, with its workers running:
    (master, [workers], port). Ended gracefully by its PID."""
    if not os.access(NGINX, os.X_OK):
        raise Failure("nginx is missing: .ci/run installs nginx-light")
    d = tempfile.mkdtemp(prefix="heaptap-nginx-")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    conf = os.path.join(d, "nginx.conf")
    with open(conf, "w") as f:
        f.write(f"daemon off;\nmaster_process on;\nworker_processes {workers};\n"
                f"pid {d}/nginx.pid;\nerror_log {d}/error.log;\n"
                f"events {{ worker_connections 64; }}\n"
                f"http {{\n  access_log off;\n  client_body_temp_path {d};\n"
                f"  proxy_temp_path {d};\n  fastcgi_temp_path {d};\n  uwsgi_temp_path {d};\n"
                f"  scgi_temp_path {d};\n  server {{\n    listen 127.0.0.1:{port};\n"
                f"    location / {{ return 200 \"hello\\n\"; }}\n  }}\n}}\n")
    server = None
    try:
        server = Proc([NGINX, "-c", conf, "-p", d, "-e", f"{d}/error.log"],
                      stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while len(children_of(server.pid)) < workers:
            if time.monotonic() > deadline or server.popen.poll() is not None:
                raise Failure(f"nginx did not start its workers: {server.stderr_text()[-500:]}")
            time.sleep(0.05)
        yield server.pid, children_of(server.pid), port
    finally:
        if server and server.popen.poll() is None:
            os.kill(server.pid, signal.SIGQUIT)   # graceful, by its PID
            try:
                server.popen.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.end()
        shutil.rmtree(d, ignore_errors=True)


def get(port, path, close=True):
    """One request answered "hello"."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}",
                                 headers={"Connection": "close"} if close else {})
    check("answer", urllib.request.urlopen(req, timeout=10).read(), b"hello\n")


@test(tier="services")
def test_nginx_workers_followed_as_attached_alone():
    with nginx(2) as (master, workers, port):
        follow = Heaptap(["-p", str(master), "-f", "-i", "300ms"])
        follow.attached()
        before = settled(follow, workers[0], "the workers are in")
        procs = {p["pid"]: p for p in before["processes"]}
        check("the master and its workers, traced", sorted(procs), sorted([master] + workers))
        for w in workers:
            check(f"worker {w}'s parent", procs[w]["parent"], master)
        alone = Heaptap(["-p", str(workers[0]), "-i", "300ms"])
        alone.attached()
        for i in range(REQUESTS):
            get(port, f"/{i}")
        after = settled(follow, workers[0], "the requests are served")
        by_alone = settled(alone, workers[0], "the requests are served, attached alone")
        delta = backend_calls(after, workers[0]) - backend_calls(before, workers[0])
        direct = backend_calls(by_alone, workers[0])
        check_true(f"worker {workers[0]}'s calls, followed ({delta}) and attached alone "
                   f"({direct})", direct > 0 and abs(delta - direct) <= 0.05 * direct,
                   (delta, direct))
        served = sum(backend_calls(after, w) - backend_calls(before, w) for w in workers)
        check_true(f"the workers' calls for {REQUESTS} requests ({served})",
                   served >= REQUESTS, served)
        check("no notice lost, no worker late (they ran before attach)",
              (after["inexact"]["lost_procs"], after["inexact"]["late_procs"]), (0, 0))
        _, status = alone.finish()
        check("heaptap alone: exit status", status, 0)
        _, status = follow.finish()
        check("heaptap following: exit status", status, 0)
