#!/usr/bin/env python3
"""What reading where the RSS is costs: sudo python3 bench/rss.py [SECONDS [MIB...]]

bench/targets/rssheap fills a glibc heap of each size (default 1024 and 8192 MiB: blocks of 1
to 8 KiB, one in 8 freed), then runs SECONDS (default 20) untraced and SECONDS under
`heaptap -i 1s`. heaptap reads the parts at each report: a light read (status, maps, the
resident pages of the allocator's mappings) most of the time, a full read (smaps and glibc's
chunks walked) at the first report, when due (at most 1% of the time) and at the final one.
Prints, per size, the reads' times as heaptap's records say them (read.read_ms; full reads
apart), and the target's longest stall as the target measures it: its ticker thread's
longest gap between two readings of the clock, and its longest mapping call (mmap and munmap
of a page wait for any reader of the process's mappings), untraced and traced.
"""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import lib  # noqa: E402
import results as results_md  # noqa: E402

TARGET = os.path.join(lib.BUILD, "bench", "rssheap")


def gaps(target):
    """The target's longest gap and mapping call since the last asked, in ms."""
    gap, mapping = target.do("gap").split()
    return int(gap) / 1000, int(mapping) / 1000


def one_size(mib, seconds):
    target = lib.Target(TARGET)
    try:
        start = time.monotonic()
        target.do(f"fill {mib}", timeout=1800)
        fill_s = time.monotonic() - start
        gaps(target)
        time.sleep(seconds)
        untraced = gaps(target)
        ht = lib.Heaptap(["-p", str(target.target_pid), "-i", "1s", "-d", f"{seconds}s"])
        ht.attached()
        gaps(target)
        final, code = ht.finish(sig=None)
        traced = gaps(target)
        if code != 0:
            raise RuntimeError(f"heaptap exit status {code}: {ht.stderr_text()[-300:]}")
        reads = [r["rss_parts"]["read"] for r in ht.records
                 if r["type"] in ("interval", "final") and r["rss_parts"]]
        with open(f"/proc/{target.target_pid}/status") as f:
            rss = next(int(x.split()[1]) for x in f if x.startswith("VmRSS:")) / 1024
        return {"mib": mib, "rss": rss, "fill_s": fill_s, "untraced": untraced,
                "traced": traced, "reads": reads, "final": final["rss_parts"]}
    finally:
        lib.end_started()


def main(argv):
    seconds = int(argv[0]) if argv else 20
    sizes = [int(x) for x in argv[1:]] or [1024, 8192]
    if os.geteuid() != 0:
        print("the benchmark attaches BPF programs: run it as root")
        return 1
    with results_md.section("rss"):
        print(f"{seconds} s untraced, then {seconds} s under heaptap -i 1s, per heap size; "
              "times in ms")
        print(f"{'heap':>6} {'RSS MiB':>8} {'light reads':>11} {'median':>7} {'max':>7} "
              f"{'full reads':>10} {'median':>7} {'max':>7} {'memory read MiB':>15} "
              f"{'gap untraced':>12} {'gap traced':>10} {'map untraced':>12} "
              f"{'map traced':>10}")
        rows = []
        for mib in sizes:
            r = one_size(mib, seconds)
            rows.append(r)
            light = [x["read_ms"] for x in r["reads"] if not x["full"]]
            full = [x["read_ms"] for x in r["reads"] if x["full"]]
            memory = max(x["memory_read_bytes"] for x in r["reads"]) / 2**20
            print(f"{mib:>4}Mi {r['rss']:8.0f} {len(light):11d} "
                  f"{statistics.median(light) if light else 0:7.2f} "
                  f"{max(light) if light else 0:7.2f} {len(full):10d} "
                  f"{statistics.median(full) if full else 0:7.1f} "
                  f"{max(full) if full else 0:7.1f} {memory:15.0f} "
                  f"{r['untraced'][0]:12.2f} {r['traced'][0]:10.2f} "
                  f"{r['untraced'][1]:12.2f} {r['traced'][1]:10.2f}")
        if len(rows) == 2:
            a, b = rows
            fa = [x["read_ms"] for x in a["reads"] if x["full"]]
            fb = [x["read_ms"] for x in b["reads"] if x["full"]]
            if fa and fb:
                print(f"full read, {b['mib']} MiB / {a['mib']} MiB: "
                      f"{statistics.median(fb) / statistics.median(fa):.1f}x "
                      f"for {b['rss'] / a['rss']:.1f}x the RSS")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
