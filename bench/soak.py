#!/usr/bin/env python3
"""A soak run: sudo python3 bench/soak.py [MINUTES [THREADS [MODE]]]

heaptap (MODE: full, the default, or live) attached for MINUTES (default 10) to
tests/targets/storm with THREADS threads (default 8) allocating, reallocating and freeing
without pause. Every minute: heaptap's RSS and BPF map memory, what it counted as not exact,
and whether the storm's checksums still equal those of the untraced run.
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import lib  # noqa: E402
import results as results_md  # noqa: E402
from live import drain  # noqa: E402

ROUNDS = 2000


def vm_rss(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def main(argv):
    minutes = float(argv[0]) if argv else 10
    threads = argv[1] if len(argv) > 1 else "8"
    mode = argv[2] if len(argv) > 2 else "full"
    if os.geteuid() != 0:
        print("the benchmark attaches BPF programs: run it as root")
        return 1
    target = lib.Target("storm", args=[threads])
    expected = target.do(f"work {ROUNDS}", timeout=600)
    ht = lib.Heaptap(["-p", str(target.target_pid), "-i", "60s", "--top", "3"] +
                     (["--live"] if mode == "live" else []))
    ht.attached()
    start = time.monotonic()
    runs = mismatches = 0
    with results_md.section("soak", mode if mode != "full" else None):
        print(f"storm: {threads} threads, {ROUNDS} rounds a run, untraced checksum {expected}; "
              f"heaptap {mode} for {minutes:.0f} min")
        print(f"{'min':>4} {'runs':>5} {'mismatch':>8} {'heaptap RSS':>12} {'BPF maps':>10} "
              f"{'live blocks':>11} {'inexact':>8} {'lost':>6}")
        while time.monotonic() - start < minutes * 60:
            answer = target.do(f"work {ROUNDS}", timeout=3600)
            runs += 1
            mismatches += answer != expected
            for rec in drain(ht):
                if rec["type"] != "interval":
                    continue
                print(f"{rec['elapsed_s'] / 60:4.0f} {runs:5d} {mismatches:8d} "
                      f"{vm_rss(ht.pid) / 2**20:9.1f} MiB "
                      f"{rec['heaptap']['map_bytes'] / 2**20:6.1f} MiB "
                      f"{rec['live_allocs']:11d} {rec['inexact']['total']:8d} "
                      f"{rec['stacks']['lost_samples'] + rec['lost_events']:6d}", flush=True)
        final, status = ht.finish()
        print(f"final: exit {status}, {runs} runs, {mismatches} checksum mismatches, "
              f"inexact {final['inexact']}, lost samples {final['stacks']['lost_samples']}, "
              f"lost events {final['lost_events']}, heaptap maps "
              f"{final['heaptap']['map_bytes'] / 2**20:.1f} MiB")
    lib.end_started()
    return 0 if not mismatches and status == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
