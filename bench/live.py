#!/usr/bin/env python3
"""Live mode on a loaded server, side by side in one run: sudo python3 bench/live.py [SECONDS]

For redis-server (SET with random keys: its key set grows) and bench/targets/leakserver
(PING; one request in 100 leaks a 160-byte session), each under redis-benchmark on loopback:
throughput untraced, then throughput with `heaptap --live` (default settings) attached for
SECONDS (default 300), the time until heaptap's top growing site is the leak, and heaptap's
own CPU and memory.
"""
import os
import re
import select
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import lib  # noqa: E402
from overhead import Waited, free_port  # noqa: E402

LEAKSERVER = os.path.join(lib.BUILD, "bench", "leakserver")
CHUNK = 100000


def load(port, test, requests, keyspace):
    """One redis-benchmark run: (requests, seconds)."""
    args = ["redis-benchmark", "-p", str(port), "-t", test, "-n", str(requests), "-q"]
    if keyspace:
        args += ["-r", str(keyspace)]
    start = time.monotonic()
    out = subprocess.run(args, capture_output=True, text=True, timeout=300).stdout
    if not re.search(r"requests per second", out):
        raise lib.Failure(f"redis-benchmark: {out[-300:]!r}")
    return requests, time.monotonic() - start


def drain(ht):
    """Records heaptap has printed so far, without waiting."""
    out = []
    while select.select([ht.popen.stdout], [], [], 0)[0] or b"\n" in ht._buf:
        rec = ht.record(timeout=5)
        if rec is None:
            break
        out.append(rec)
    return out


def leak_on_top(rec, functions):
    sites = rec.get("sites") or []
    names = lib.functions(sites[0]) if sites else []
    return bool(sites) and any(f in names for f in functions), names


def run_case(name, server_argv, port, test, keyspace, functions, seconds):
    server = lib.Proc(server_argv, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise lib.Failure(f"{name} did not start")
            time.sleep(0.05)
    untraced = statistics.median(n / t for n, t in (load(port, test, CHUNK, keyspace)
                                                    for _ in range(3)))
    ht = lib.Heaptap(["-p", str(server.pid), "--live", "-i", "10s", "--top", "3"])
    ht.attached()
    start = time.monotonic()
    done = spent = 0
    found = None
    top = []
    while time.monotonic() - start < seconds:
        if server.popen.poll() is not None:
            raise lib.Failure(f"{name} exited ({server.popen.returncode})")
        n, t = load(port, test, CHUNK, keyspace)
        done += n
        spent += t
        for rec in drain(ht):
            hit, names = leak_on_top(rec, functions)
            top = names
            if hit and found is None:
                found = rec["elapsed_s"]
    os.kill(ht.pid, 2)
    while ht.record() is not None:
        pass
    waited = Waited(ht)
    elapsed = time.monotonic() - start
    final = [r for r in ht.records if r["type"] == "final"][-1]
    hit, names = leak_on_top(final, functions)
    if hit and found is None:
        found = final["elapsed_s"]
    server.end()
    return {
        "name": name, "untraced": untraced, "traced": done / spent,
        "found": found, "top": names or top, "cpu": waited.cpu / elapsed,
        "memory": waited.max_rss + final["heaptap"]["map_bytes"],
        "slowdown": final["live"]["slowdown"], "traced_share": final["live"]["traced"],
    }


def main(argv):
    seconds = float(argv[0]) if argv else 300
    if os.geteuid() != 0:
        print("the benchmark attaches BPF programs: run it as root")
        return 1
    rows = []
    with tempfile.TemporaryDirectory(prefix="heaptap-live-") as workdir:
        port = free_port()
        rows.append(run_case("redis-server (SET, random keys)",
                             ["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                              "--save", "", "--appendonly", "no", "--dir", workdir],
                             port, "set", 100000000, ["setGenericCommand", "dbAdd"], seconds))
    port = free_port()
    rows.append(run_case("leakserver (PING, 1 in 100 leaks)", [LEAKSERVER, str(port), "100"],
                         port, "ping_inline", 0, ["remember_session"], seconds))
    print(f"\nheaptap --live, default settings, attached {seconds:.0f} s under redis-benchmark "
          f"(chunks of {CHUNK} requests):")
    print(f"{'':36} {'untraced/s':>10} {'traced/s':>9} {'ratio':>6} {'leak on top after':>18} "
          f"{'CPU':>6} {'memory':>9} {'est. slowdown':>13} {'traced':>7}")
    for r in rows:
        found = f"{r['found']:.0f} s" if r["found"] is not None else "not found"
        print(f"{r['name']:36} {r['untraced']:10.0f} {r['traced']:9.0f} "
              f"{r['traced'] / r['untraced']:6.3f} {found:>18} {r['cpu'] * 100:5.1f}% "
              f"{r['memory'] / 2**20:6.1f} MiB {r['slowdown'] * 100:12.1f}% "
              f"{r['traced_share'] * 100:6.1f}%")
        print(f"{'':36} top growing site: {' <- '.join(str(f) for f in r['top'][:6])}")
    for p in lib.started():
        p.end()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
