#!/usr/bin/env python3
"""What tracing pools costs the server, side by side in rounds whose order is drawn at
random: nginx from Debian (one worker) serving requests on connections closed after each,
and a PostgreSQL 15 backend running queries over 2,000 rows, each untraced, traced at malloc's
level (heaptap's default) and with --allocator-family (nginx, postgres). Medians and spread.

    sudo python3 bench/pools.py [ROUNDS]      (default 3)
"""
import os
import random
import socket
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from lib import Heaptap  # noqa: E402
import results as results_md  # noqa: E402
from test_nginx import nginx  # noqa: E402
from test_postgres import Psql, cluster, some_queries  # noqa: E402

REQUESTS = 2000
QUERIES = 20


def requests(port):
    """REQUESTS requests, a connection each: seconds."""
    start = time.monotonic()
    for _ in range(REQUESTS):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"GET / HTTP/1.0\r\n\r\n")
        while s.recv(4096):
            pass
        s.close()
    return time.monotonic() - start


def queries(psql):
    start = time.monotonic()
    some_queries(psql, QUERIES)
    return time.monotonic() - start


def rounds(pid, family, work, n):
    """Seconds of work() per variant, over n rounds in random order."""
    out = {"untraced": [], "malloc": [], family: []}
    for _ in range(n):
        order = list(out)
        random.shuffle(order)
        for variant in order:
            ht = None
            if variant != "untraced":
                ht = Heaptap(["-p", str(pid), "-i", "1h"] +
                             (["--allocator-family", family] if variant == family else []))
                ht.attached()
            out[variant].append(work())
            if ht:
                ht.finish()
    return out


def say(what, res, unit):
    base = statistics.median(res["untraced"])
    for variant, xs in res.items():
        med = statistics.median(xs)
        print(f"{what:10s} {variant:9s} {unit(med)}  (spread {unit(max(xs))} to {unit(min(xs))})"
              f"  {base / med:.2f} of untraced")


def main(n):
    with results_md.section("pools"):
        with nginx(1) as (_, workers, port):
            requests(port)
            say("nginx", rounds(workers[0], "nginx", lambda: requests(port), n),
                lambda s: f"{REQUESTS / s:7.0f} req/s")
        with cluster() as (d, _):
            psql = Psql(d)
            backend = int(psql.ask("select pg_backend_pid();"))
            queries(psql)
            say("postgres", rounds(backend, "postgres", lambda: queries(psql), n),
                lambda s: f"{s * 1000 / QUERIES:7.1f} ms/query")
            psql.close()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
