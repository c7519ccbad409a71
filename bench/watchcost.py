#!/usr/bin/env python3
"""What --watch costs per new page: sudo python3 bench/watchcost.py [PAGES]

tests/targets/growth touches PAGES (default 40000) new pages of one malloc'd block, three
times, untraced, under `heaptap --watch` (DWARF stacks, as on Debian) and under `heaptap
--watch --stack fp`, side by side in this one run; prints the best time per page of each.
A server's slowdown under --watch is about its rate of new pages times the difference.
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import lib  # noqa: E402
import results as results_md  # noqa: E402


def per_page(args, pages):
    target = lib.Target("growth")
    try:
        ht = None
        if args is not None:
            ht = lib.Heaptap(["-p", str(target.target_pid), "-i", "1h"] + args)
            ht.attached()
        target.do("touch 100")
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            target.do(f"touch {pages}", timeout=600)
            best = min(best, time.perf_counter() - start)
        if ht:
            ht.finish()
        return best / pages * 1e6
    finally:
        lib.end_started()


def main(argv):
    pages = int(argv[0]) if argv else 40000
    if os.geteuid() != 0:
        print("the benchmark attaches BPF programs: run it as root")
        return 1
    with results_md.section("watchcost"):
        untraced = per_page(None, pages)
        print(f"{'mode':22} {'us/page':>8} {'extra us':>8}")
        print(f"{'untraced':22} {untraced:8.2f}")
        for name, args in (("--watch", ["--watch"]),
                           ("--watch --stack fp", ["--watch", "--stack", "fp"])):
            us = per_page(args, pages)
            print(f"{name:22} {us:8.2f} {us - untraced:8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
