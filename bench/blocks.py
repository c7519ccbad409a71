#!/usr/bin/env python3
"""What many live blocks cost heaptap: sudo python3 bench/blocks.py [ROUNDS] [MILLIONS ...]
                                        [--against PATH] [--fit]

For each count (default 1 and 4 million), in ROUNDS rounds (default 3), bench/targets/blocks
holds that many 64-byte blocks, allocated from one site after heaptap attached by PID
(`--max-allocs` a quarter more than the count; with --fit, the power of two at or above the
count, as the default 1,048,576 is for a million): the memory of the BPF side's table of blocks
(its map's memlock, as bpftool shows it) per live block, and of all heaptap's maps; how long
a report takes (SIGUSR1 to its record), of which reading the blocks (heaptap.blocks_read_ms);
how long heaptap takes to stop (SIGINT to its exit: the final report and the detach).
Medians, with the rounds' range; heaptap's RSS (its own, the table it maps left out) and the
target's for scale. --against PATH runs that build of heaptap too (an older one), the two
in random order in each round; no record of such a run is checked against the schema.
"""
import os
import random
import signal
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import lib  # noqa: E402
import results as results_md  # noqa: E402
from progcost import maps_held  # noqa: E402
from soak import vm_rss  # noqa: E402


def table_bytes(pid):
    """The memlock of the map named allocs that process pid holds."""
    for m in maps_held(pid):
        if m.get("name") == "allocs":
            return m["bytes_memlock"]
    raise lib.Failure(f"no allocs map of PID {pid}")


def report(ht):
    """A report asked for now: (its record, seconds until it came)."""
    t0 = time.monotonic()
    os.kill(ht.pid, signal.SIGUSR1)
    while True:
        rec = ht.record(timeout=120)
        if rec is None:
            raise lib.Failure("heaptap ended before its report")
        if rec["type"] == "interval":
            return rec, time.monotonic() - t0


def max_allocs(n, fit):
    """heaptap's --max-allocs for n blocks."""
    return 1 << (n - 1).bit_length() if fit else n + n // 4


def one(n, build, fit):
    """One round at n blocks with heaptap build (its table fitted to n with fit): its
    figures."""
    lib.HEAPTAP = build
    target = lib.Proc([os.path.join(lib.BUILD, "bench", "blocks")])
    if not (target.read_line() or "").startswith("ready"):
        raise lib.Failure("blocks did not start")
    ht = lib.Heaptap(["-p", str(target.pid), "-i", "1h", "--max-allocs",
                      str(max_allocs(n, fit))])
    try:
        ht.attached()
        target.send(f"hold {n}")
        if target.read_line(timeout=600) != f"done hold {n}":
            raise lib.Failure("blocks did not answer")
        after, took = report(ht)
        table = table_bytes(ht.pid)
        t0 = time.monotonic()
        _, status = ht.finish()
        stop = time.monotonic() - t0
    finally:
        if ht.popen.poll() is None:
            ht.end()
    rss = vm_rss(target.pid)
    target.send("exit")
    target.wait()
    if status != 0 or after["live_allocs"] < n:
        raise lib.Failure(f"status {status}, {after['live_allocs']} live blocks")
    return {"table": table / n, "maps": after["heaptap"]["map_bytes"] / n, "report": took,
            "read": after["heaptap"]["blocks_read_ms"] / 1e3, "stop": stop,
            "rss": after["heaptap"]["rss_bytes"], "target": rss, "live": after["live_allocs"]}


def show(v, unit, scale=1.0):
    return (f"{statistics.median(v) * scale:.2f}{unit} "
            f"({min(v) * scale:.2f}-{max(v) * scale:.2f})")


def main(argv):
    builds = {"this build": lib.HEAPTAP}
    against = lib.take_against(argv)
    if against:
        builds[against] = against
    fit = "--fit" in argv
    if fit:
        argv.remove("--fit")
    rounds = int(argv[0]) if argv else 3
    counts = [int(float(a) * 1e6) for a in argv[1:]] or [1000000, 4000000]
    variant = ", ".join(w for w, on in (("against", len(builds) > 1), ("fit", fit)) if on)
    with results_md.section("blocks", variant):
        for n in counts:
            runs = {name: [] for name in builds}
            for _ in range(rounds):
                order = list(builds)
                random.shuffle(order)
                for name in order:
                    runs[name].append(one(n, builds[name], fit))
            for name, r in runs.items():
                col = {k: [x[k] for x in r] for k in r[0]}
                print(f"{name}: {n:,} blocks, --max-allocs {max_allocs(n, fit)} ({rounds} "
                      f"rounds): the table {show(col['table'], ' bytes')} "
                      f"a block, all maps {show(col['maps'], ' bytes')}; report "
                      f"{show(col['report'], ' s')} (the blocks read in "
                      f"{show(col['read'], ' s')}); stop {show(col['stop'], ' s')}; heaptap RSS "
                      f"{statistics.median(col['rss']) / 2**20:.0f} MiB; the target's RSS "
                      f"{statistics.median(col['target']) / 2**20:.0f} MiB", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
