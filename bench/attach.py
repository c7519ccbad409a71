#!/usr/bin/env python3
"""Attach and detach, side by side: probes as uprobe_multi links (--probe-links multi) against
a perf event each (single), on a C target (glibc's family) and a C++ one linked with jemalloc
(its own API, operator new and delete, the C++ unwinder), in rounds whose order is drawn at
random. Each session: -v's "probes attached in" and "detached from ... in", and the time from
SIGINT to heaptap's exit.

    sudo python3 bench/attach.py [ROUNDS]      (default 5)
"""
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import lib  # noqa: E402
import results as results_md  # noqa: E402

MODES = ("multi", "single")
TARGETS = ("sizes", "newdelete_jemalloc")


def session(target, mode):
    """One attach and detach: (probes, attach ms, detach ms, SIGINT to exit ms)."""
    ht = lib.Proc([lib.HEAPTAP, "-v", "--probe-links", mode, "-p", str(target.target_pid),
                   "-i", "1h", "--json"])
    while True:
        line = ht.read_line(timeout=30)
        if line is None:
            raise lib.Failure(f"heaptap ended before attaching: {ht.stderr_text()}")
        if '"type":"attached"' in line:
            break
    time.sleep(0.2)
    sent = time.monotonic()
    os.kill(ht.pid, signal.SIGINT)
    while ht.read_line(timeout=30) is not None:
        pass
    ht.wait()
    took = (time.monotonic() - sent) * 1e3
    err = ht.stderr_text()
    attached = re.search(r"(\d+) probes attached in ([\d.]+) ms", err)
    detached = re.search(r"detached from \d+ processes in (\d+) ms", err)
    if not attached or not detached:
        raise lib.Failure(f"no timings in heaptap -v's words: {err[-500:]}")
    return int(attached.group(1)), float(attached.group(2)), float(detached.group(1)), took


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    targets = {name: lib.Target(name) for name in TARGETS}
    results = {(t, m): [] for t in TARGETS for m in MODES}
    try:
        for _ in range(rounds):
            order = [(t, m) for t in TARGETS for m in MODES]
            random.shuffle(order)
            for t, m in order:
                results[(t, m)].append(session(targets[t], m))
    finally:
        for t in targets.values():
            t.end()
    with results_md.section("attach"):
        print(f"{rounds} rounds, variants in random order; medians (min-max), ms")
        print(f"{'target':<20} {'links':<7} {'probes':>6} {'attach':>18} {'detach':>20} "
              f"{'SIGINT to exit':>20}")
        for t in TARGETS:
            for m in MODES:
                rows = results[(t, m)]
                cols = []
                for k in (1, 2, 3):
                    v = [r[k] for r in rows]
                    cols.append(f"{statistics.median(v):8.1f} ({min(v):.1f}-{max(v):.1f})")
                print(f"{t:<20} {m:<7} {rows[0][0]:>6} {cols[0]:>18} {cols[1]:>20} "
                      f"{cols[2]:>20}")
            single = statistics.median(r[2] for r in results[(t, "single")])
            multi = statistics.median(r[2] for r in results[(t, "multi")])
            print(f"{t:<20} detach, single / multi: {single / multi:.1f}x")


if __name__ == "__main__":
    main()
