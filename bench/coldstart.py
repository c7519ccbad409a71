#!/usr/bin/env python3
"""A launched command's start on a cold page cache: sudo python3 bench/coldstart.py [--warm]
[ROUNDS [HEAPTAP ...]]

Launches gdb (Debian's, stripped C++, 28,000 allocations at its start, thousands of new
paths) under each heaptap binary given (default: this build's), ROUNDS times (default 3), the
binaries in random order within each round, after dropping the page cache before each run
(sync, then 3 into /proc/sys/vm/drop_caches), as a machine that pages out file pages leaves
it. Prints per binary, medians and spreads: the stack copies sent and lost, the waits for room
and the longest, the run's length from attach (elapsed_s) and heaptap's whole (wall_s), and
with two binaries the second's medians over the first's. Compare builds of two commits.
--warm keeps the page cache (what the run costs once the files are read).
"""
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import lib  # noqa: E402
import results as results_md  # noqa: E402

GDB = ["gdb", "-q", "-nx", "-batch", "-ex", "file /usr/bin/gdb", "-ex", "info types foo"]


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def run(heaptap, warm):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "gdb.json")
        if not warm:
            drop_caches()
        start = time.monotonic()
        p = subprocess.run([heaptap, "--json", "-o", out, "-i", "1h", "--stack-depth", "127",
                            "--"] + GDB, capture_output=True, timeout=600)
        wall = time.monotonic() - start
        if p.returncode != 0:
            raise lib.Failure(f"{heaptap}: exit status {p.returncode}: {p.stderr[-500:]!r}")
        with open(out) as f:
            final = [json.loads(line) for line in f][-1]
    st = final["stacks"]
    return {"sent": st["samples"], "lost": st["lost_samples"], "waits": st["waits"],
            "wait_max_s": st["wait_max_us"] / 1e6, "elapsed_s": final["elapsed_s"],
            "wall_s": wall, "allocs": final["alloc_calls"]}


def main(argv):
    warm = bool(argv) and argv[0] == "--warm"
    argv = argv[1:] if warm else argv
    rounds = int(argv[0]) if argv else 3
    binaries = argv[1:] or [lib.HEAPTAP]
    if os.geteuid() != 0:
        print("the benchmark attaches BPF programs and drops the page cache: run it as root")
        return 1
    results = {b: [] for b in binaries}
    for r in range(rounds):
        order = random.sample(binaries, len(binaries))
        for b in order:
            results[b].append(run(b, warm))
            print(f"round {r + 1}: {b}: {results[b][-1]}", flush=True)
    with results_md.section("coldstart", "warm" if warm else None):
        cache = "a warm" if warm else "a cold"
        print(f"\ngdb launched on {cache} page cache, {rounds} rounds (median, min-max):")
        for b in binaries:
            line = []
            for key in ("allocs", "sent", "lost", "waits", "wait_max_s", "elapsed_s", "wall_s"):
                v = [x[key] for x in results[b]]
                line.append(f"{key} {statistics.median(v):g} ({min(v):g}-{max(v):g})")
            lossy = sum(1 for x in results[b] if x["lost"])
            print(f"  {b}: " + ", ".join(line) + f"; runs that lost copies {lossy} of {rounds}")
        if len(binaries) == 2:
            ratio = {k: statistics.median(x[k] for x in results[binaries[1]]) /
                     statistics.median(x[k] for x in results[binaries[0]])
                     for k in ("elapsed_s", "wall_s")}
            print(f"  second over first, medians: elapsed {ratio['elapsed_s']:.3f}, "
                  f"wall {ratio['wall_s']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
