#!/usr/bin/env python3
"""What tracing costs, side by side in one run: sudo python3 bench/overhead.py [SECONDS]

1. ns per malloc+free pair in a tight loop (bench/targets/allocbench, -O2, glibc): untraced;
   empty BPF programs at the allocator functions' entries (the kernel's default sites, as any
   tracer puts them); empty programs at heaptap's own sites; heaptap in each mode.
2. redis-server under redis-benchmark on loopback (SET, 50 clients, a growing key set):
   requests per second untraced and with heaptap in each mode.
3. heaptap's own CPU time (share of one core) and peak memory (RSS plus BPF maps) in each
   mode, over the redis run.
4. --live and --watch, whose windows and pauses last seconds, over SECONDS (default 300) on
   fresh servers under load: bench/live.py's table.

Every tight-loop figure is a median of REPEAT runs, and ratios are against the untraced run
of the same moment.
"""
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import lib  # noqa: E402
import results as results_md  # noqa: E402
import live  # noqa: E402
from live import Waited, free_port  # noqa: E402

ALLOCBENCH = os.path.join(lib.BUILD, "bench", "allocbench")
PROBECOST = os.path.join(lib.BUILD, "bench", "probecost")
PAIRS = 20000
REPEAT = 3
REDIS_REQUESTS_UNTRACED = 200000
REDIS_REQUESTS_TRACED = 20000	# full tracing: a tenth of the speed

# heaptap's modes, by name: the options that select them.
MODES = {
    "full": [],
    "full-fp": ["--stack", "fp"],
    "watch": ["--watch"],
}


def value(answer, key):
    return float(answer.split(key + "=")[1].split()[0])


def tight(target):
    return statistics.median(value(target.do(f"tight {PAIRS}", timeout=900), "ns_per_pair")
                             for _ in range(REPEAT))


def plan(target):
    """heaptap's attach plan for the target: the first record, then it is stopped."""
    ht = lib.Heaptap(["-p", str(target.target_pid), "-i", "1h"])
    attached = ht.attached()
    ht.finish()
    return attached


def empty_probes(target, sites):
    """Empty programs at sites [(file, offset, return?)] of the target; a Proc to end."""
    args = [f"{f}:{o}" + (":ret" if r else "") for f, o, r in sites]
    p = lib.Proc([PROBECOST, str(target.target_pid)] + args)
    line = p.read_line()
    if line != "attached":
        raise lib.Failure(f"probecost: {line}: {p.stderr_text()}")
    return p


def end_probes(p):
    p.popen.stdin.close()
    p.wait()


def heaptap_for(pid, options):
    ht = lib.Heaptap(["-p", str(pid), "-i", "1h"] + options)
    ht.attached()
    return ht


def finish(ht):
    """Stops heaptap; its final record and what it cost: (record, CPU s, peak memory)."""
    os.kill(ht.pid, 2)
    while ht.record() is not None:
        pass
    waited = Waited(ht)
    final = [r for r in ht.records if r["type"] == "final"][-1]
    return final, waited.cpu, waited.max_rss + final["heaptap"]["map_bytes"]


def alloc_loop(modes):
    target = lib.Target(ALLOCBENCH)
    attached = plan(target)
    rows = [("untraced", tight(target))]
    probed = [p for p in attached["probes"] if p["kind"] != "unwind"]
    for label, key in (("empty programs, function entries", "entry_offset"),
                       ("empty programs, heaptap's sites", "offset")):
        p = empty_probes(target, [(x["path"], x[key], x["return"]) for x in probed])
        rows.append((label, tight(target)))
        end_probes(p)
    for name in modes:
        ht = heaptap_for(target.target_pid, MODES[name])
        rows.append((f"heaptap {name}", tight(target)))
        finish(ht)
    target.end()
    return rows


def benchmark(port, requests):
    out = subprocess.run(["redis-benchmark", "-p", str(port), "-t", "set", "-n", str(requests),
                          "-r", "10000000", "-q"], capture_output=True, text=True,
                         timeout=1800).stdout
    found = re.findall(r"SET: ([0-9.]+) requests per second", out)
    if not found:
        raise lib.Failure(f"redis-benchmark: {out[-300:]!r}")
    return float(found[-1])


def redis(modes):
    port = free_port()
    rows = []
    with tempfile.TemporaryDirectory(prefix="heaptap-bench-") as workdir:
        server = lib.Proc(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                           "--save", "", "--appendonly", "no", "--dir", workdir],
                          stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise lib.Failure("redis-server did not start")
                time.sleep(0.05)
        untraced = statistics.median(benchmark(port, REDIS_REQUESTS_UNTRACED)
                                     for _ in range(REPEAT))
        rows.append(("untraced", untraced, None, None))
        for name in modes:
            ht = heaptap_for(server.pid, MODES[name])
            start = time.monotonic()
            rps = benchmark(port, REDIS_REQUESTS_UNTRACED if name == "watch"
                            else REDIS_REQUESTS_TRACED)
            final, cpu, memory = finish(ht)
            rows.append((f"heaptap {name}", rps, cpu / (time.monotonic() - start), memory))
        server.end()
    return rows


def main(argv):
    if os.geteuid() != 0:
        print("the benchmark attaches BPF programs: run it as root")
        return 1
    with results_md.section("overhead"):
        modes = list(MODES)
        loop = alloc_loop(modes)
        base = loop[0][1]
        entries = loop[1][1]
        print(f"\nmalloc(64)+free pairs in a tight loop (allocbench, glibc), median of "
              f"{REPEAT} x {PAIRS}:")
        print(f"{'':40} {'ns/pair':>9} {'x untraced':>11} {'x empty@entry':>14}")
        for label, ns in loop:
            print(f"{label:40} {ns:9.0f} {ns / base:11.1f} {ns / entries:14.2f}")
        rows = redis(modes)
        print(f"\nredis-server (jemalloc) under redis-benchmark -t set, 50 clients, random keys "
              f"(untraced: median of {REPEAT} x {REDIS_REQUESTS_UNTRACED}; watch: "
              f"{REDIS_REQUESTS_UNTRACED}; full: {REDIS_REQUESTS_TRACED}; heaptap's CPU over the "
              f"run, its start included):")
        print(f"{'':40} {'requests/s':>11} {'x untraced':>11} {'heaptap CPU':>12} "
              f"{'heaptap memory':>15}")
        for label, rps, cpu, memory in rows:
            extra = f"{cpu * 100:11.1f}% {memory / 2**20:12.1f} MiB" if cpu is not None else ""
            print(f"{label:40} {rps:11.0f} {rps / rows[0][1]:11.3f} {extra}")
        lib.end_started()
        return live.main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
