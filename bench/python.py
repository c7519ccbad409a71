#!/usr/bin/env python3
"""What tracing Python's objects costs a Python program, side by side in rounds whose order is
drawn at random: tests/targets/pyleak.py on Debian's python3.11 making Session objects (each
made and dropped, as a server's per-request objects are; the target times its own work), and
serving HTTP requests (its http.server, a request a connection, each making 50 Session
objects), untraced, traced at malloc's level (heaptap's default: Python's objects are not
seen) and with --allocator-family python (every object, its class and Python frames); and,
as the peer a Python user would pick instead, Python's own tracemalloc, which must be there
from the program's start (PYTHONTRACEMALLOC=16: 16 frames, as heaptap's Python frames; a
second server, started so). Medians and spread.

    sudo python3 bench/python.py [ROUNDS]      (default 3)
"""
import os
import random
import statistics
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from lib import Heaptap, Target, end_started  # noqa: E402
import results as results_md  # noqa: E402
from test_python import SCRIPT  # noqa: E402

OBJECTS = 100000
REQUESTS = 300


def requests(port):
    """REQUESTS requests, one after another: seconds."""
    start = time.monotonic()
    for _ in range(REQUESTS):
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=60) as r:
            r.read()
    return time.monotonic() - start


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    target = Target(SCRIPT)
    traced = Target(SCRIPT, env=dict(os.environ, PYTHONTRACEMALLOC="16"))
    port = int(target.do("port"))
    ports = {"tracemalloc": int(traced.do("port"))}
    for t, p in ((target, port), (traced, ports["tracemalloc"])):
        t.do(f"work {OBJECTS}")  # warmed up
        requests(p)
    out = {"untraced": [], "malloc": [], "python": [], "tracemalloc": []}
    served = {variant: [] for variant in out}
    try:
        for _ in range(n):
            order = list(out)
            random.shuffle(order)
            for variant in order:
                ht = None
                if variant in ("malloc", "python"):
                    ht = Heaptap(["-p", str(target.target_pid), "-i", "1h"] +
                                 (["--allocator-family", "python"] if variant == "python"
                                  else []))
                    ht.attached()
                which = traced if variant == "tracemalloc" else target
                out[variant].append(float(which.do(f"work {OBJECTS}")))
                served[variant].append(REQUESTS / requests(ports.get(variant, port)))
                if ht:
                    ht.finish()
    finally:
        end_started()
    with results_md.section("python"):
        base = statistics.median(out["untraced"])
        print(f"{OBJECTS} Python objects made and dropped, {n} rounds in random order "
              "(median, min-max; the target's own timing)")
        for variant, secs in out.items():
            med = statistics.median(secs)
            print(f"  {variant:9s} {med * 1e9 / OBJECTS:9.0f} ns/object "
                  f"({min(secs) * 1e9 / OBJECTS:.0f}-{max(secs) * 1e9 / OBJECTS:.0f})  "
                  f"{med / base:6.2f}x untraced")
        base = statistics.median(served["untraced"])
        print(f"{REQUESTS} HTTP requests, a connection each (requests/s)")
        for variant, rates in served.items():
            med = statistics.median(rates)
            print(f"  {variant:9s} {med:9.0f} req/s ({min(rates):.0f}-{max(rates):.0f})"
                  f"  {med / base:6.2f} of untraced")


if __name__ == "__main__":
    main()
