#!/usr/bin/env python3
"""What a leak check costs: sudo python3 bench/reach.py [MIB...]

For each heap size (default 64 and 256 MiB), tests/targets/reach builds that many MiB of
4 KiB blocks (half held by a global list, half on a list dropped; every block holds pointers),
heaptap attaches with --leak-check, and a SIGUSR1 asks for a check: the table gives the blocks
tracked, the bytes scanned (roots and reached blocks), the scan time and speed, and how long
the target was stopped (listing the blocks from the BPF map included).
"""
import os
import signal
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import lib  # noqa: E402
import results as results_md  # noqa: E402


def check(mib):
    target = lib.Target("reach")
    try:
        ht = lib.Heaptap(["-p", str(target.target_pid), "-i", "1h", "--leak-check",
                          "--max-allocs", str(max(1 << 20, mib * 256 * 2)),
                          "--leak-check-max-pause", "60s"])
        ht.attached()
        target.do(f"big {mib}", timeout=600)
        os.kill(ht.pid, signal.SIGUSR1)
        rec = ht.record(timeout=600)
        ht.finish()
        return rec
    finally:
        lib.end_started()


def main(argv):
    sizes = [int(a) for a in argv] or [64, 256]
    if os.geteuid() != 0:
        print("the benchmark attaches BPF programs: run it as root")
        return 1
    with results_md.section("reach"):
        print(f"{'heap MiB':>8} {'blocks':>9} {'scanned MiB':>11} {'scan ms':>8} {'MB/s':>7} "
              f"{'paused ms':>9} {'lost':>8} {'reachable':>9} {'complete':>8}")
        for mib in sizes:
            rec = check(mib)
            lc = rec["leak_check"]
            cats = lc["categories"]
            blocks = sum(c["blocks"] for c in cats.values())
            lost = cats["definitely_lost"]["blocks"] + cats["indirectly_lost"]["blocks"]
            print(f"{mib:8d} {blocks:9d} {lc['scanned_bytes'] / 2**20:11.1f} "
                  f"{lc['scan_s'] * 1e3:8.1f} {lc['scanned_bytes'] / 1e6 / lc['scan_s']:7.0f} "
                  f"{lc['paused_s'] * 1e3:9.1f} {lost:8d} "
                  f"{cats['still_reachable']['blocks']:9d} {str(lc['complete']):>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
