#!/usr/bin/env python3
"""What whole stacks cost: sudo python3 bench/stacks.py [RATE [SECONDS [PATHS]]]

Runs bench/targets/allocbench (-O2, no frame pointers) allocating RATE malloc+free pairs a
second (default 5000) for SECONDS (default 5) down PATHS distinct call paths 12 deep (default
1024), traced by heaptap in each stack mode, all in this one run, and prints per mode: the
rate the target kept, the stacks copied to heaptap and their bytes, heaptap's unwind time per
copied stack, samples lost for want of ring-buffer room, stacks cut short, and ns per
malloc+free pair in a tight loop (one path) against the untraced loop.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import lib  # noqa: E402
import results as results_md  # noqa: E402

ALLOCBENCH = os.path.join(lib.BUILD, "bench", "allocbench")
TIGHT = 20000


def value(answer, key):
    return float(answer.split(key + "=")[1].split()[0])


def traced(mode, rate, seconds, paths):
    target = lib.Target(ALLOCBENCH)
    try:
        untraced = value(target.do(f"tight {TIGHT}"), "ns_per_pair")
        ht = lib.Heaptap(["-p", str(target.target_pid), "-i", "1h", "--stack", mode])
        ht.attached()
        achieved = value(target.do(f"run {rate} {seconds} {paths}", timeout=seconds * 20 + 60),
                         "achieved")
        tight = value(target.do(f"tight {TIGHT}", timeout=600), "ns_per_pair")
        final, status = ht.finish()
        if status != 0 or not final:
            raise lib.Failure(f"heaptap --stack {mode} failed ({status})")
        return untraced, achieved, tight, final
    finally:
        lib.end_started()


def main(argv):
    rate = float(argv[0]) if argv else 5000
    seconds = float(argv[1]) if len(argv) > 1 else 5
    paths = int(argv[2]) if len(argv) > 2 else 1024
    if os.geteuid() != 0:
        print("the benchmark attaches BPF programs: run it as root")
        return 1
    with results_md.section("stacks"):
        print(f"allocbench: {rate:.0f} malloc+free pairs/s for {seconds:.0f} s down {paths} paths "
              f"12 calls deep (-O2, no frame pointers); tight loop: {TIGHT} pairs, one path")
        print(f"{'mode':6} {'kept/s':>8} {'events':>8} {'copied':>8} {'bytes/copy':>10} "
              f"{'bytes/event':>11} {'unwind us':>9} {'lost':>6} {'cut':>6} {'distinct':>8} "
              f"{'ns/pair':>8} {'untraced':>8} {'ratio':>6}")
        for mode in ("fp", "dwarf", "copy"):
            untraced, achieved, tight, final = traced(mode, rate, seconds, paths)
            st = final["stacks"]
            events = final["alloc_calls"]
            copied = st.get("unwound", 0)
            per_copy = st.get("sample_bytes", 0) / copied if copied else 0
            unwind = st.get("unwind_ns", 0) / copied / 1e3 if copied else 0
            print(f"{mode:6} {achieved:8.0f} {events:8d} {copied:8d} {per_copy:10.0f} "
                  f"{st.get('sample_bytes', 0) / events if events else 0:11.1f} {unwind:9.1f} "
                  f"{st['lost_samples']:6d} {st['truncated']:6d} {st['distinct']:8d} "
                  f"{tight:8.0f} {untraced:8.0f} {tight / untraced:6.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
