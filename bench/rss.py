#!/usr/bin/env python3
"""What reading where the RSS is costs: sudo python3 bench/rss.py [SECONDS [MIB...]] [--against PATH]

bench/targets/rssheap fills a glibc heap of each size (default 1024 and 8192 MiB: blocks of 1
to 8 KiB, one in 8 freed), then runs SECONDS (default 20) untraced and SECONDS under
`heaptap -i 1s`. heaptap reads the parts at each report: a light read (status, maps, the
resident pages of the allocator's mappings) most of the time, a full read (the other
mappings' anonymous pages and glibc's chunks walked) at the first report, when due (at most
1% of the time) and at the final one. Prints, per size, the reads' times as heaptap's records
say them (read.read_ms; full reads apart), and the target's longest stall as the target
measures it: its ticker thread's longest gap between two readings of the clock, and its
longest mapping call (mmap and munmap of a page wait for any reader of the process's
mappings); then a real-time thread's longest mapping call, and how many of its calls (one a
millisecond) took 5 ms or more: the waits for heaptap's reads, without most of the waits for
a CPU that other processes share; untraced, and traced: while heaptap reads (the first
report's full read and the light ones), and apart, at its end (the final report's full read,
then the detach, whose removal of each breakpoint takes the mappings' lock to write).
--against PATH traces the same heap with that build of heaptap too (an older one), the
untraced run and each build's in random order.
"""
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import lib  # noqa: E402
import results as results_md  # noqa: E402

TARGET = os.path.join(lib.BUILD, "bench", "rssheap")


def gaps(target):
    """The target's longest gap and mapping call since the last asked, in ms, its real-time
    thread's longest mapping call, those of 5 ms or more, of how many."""
    gap, mapping, rt, slow, calls, realtime = target.do("gap").split()
    if realtime != "1":
        raise RuntimeError("the target's mapper is not real-time")
    return int(gap) / 1000, int(mapping) / 1000, int(rt) / 1000, int(slow), int(calls)


def traced(target, build, seconds):
    """SECONDS under heaptap build, its records read as they come: the target's stalls while
    heaptap reads (from its attach on), those of its end (the final report's full read and the
    detach, SIGINT to exit), and heaptap's reads."""
    lib.HEAPTAP = build
    ht = lib.Heaptap(["-p", str(target.target_pid), "-i", "1s"])
    ht.attached()
    gaps(target)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if ht.record(timeout=60) is None:
            raise RuntimeError(f"heaptap ended: {ht.stderr_text()[-300:]}")
    during = gaps(target)
    final, code = ht.finish()
    end = gaps(target)
    if code != 0:
        raise RuntimeError(f"heaptap exit status {code}: {ht.stderr_text()[-300:]}")
    reads = [r["rss_parts"]["read"] for r in ht.records
             if r["type"] in ("interval", "final") and r["rss_parts"]]
    return during, end, reads


def one_size(mib, seconds, builds):
    target = lib.Target(TARGET)
    try:
        start = time.monotonic()
        target.do(f"fill {mib}", timeout=1800)
        fill_s = time.monotonic() - start
        runs = {}
        order = [None] + list(builds)
        random.shuffle(order)
        for name in order:
            gaps(target)
            if name is None:
                time.sleep(seconds)
                runs[None] = gaps(target)
            else:
                runs[name] = traced(target, builds[name], seconds)
        with open(f"/proc/{target.target_pid}/status") as f:
            rss = next(int(x.split()[1]) for x in f if x.startswith("VmRSS:")) / 1024
        return {"mib": mib, "rss": rss, "fill_s": fill_s, "runs": runs,
                "order": ", ".join(n or "untraced" for n in order)}
    finally:
        lib.end_started()


def main(argv):
    builds = {"this build": lib.HEAPTAP}
    against = lib.take_against(argv)
    if against:
        builds[against] = against
    seconds = int(argv[0]) if argv else 20
    sizes = [int(x) for x in argv[1:]] or [1024, 8192]
    if os.geteuid() != 0:
        print("the benchmark attaches BPF programs: run it as root")
        return 1
    with results_md.section("rss", "against" if len(builds) > 1 else None):
        print(f"{seconds} s untraced, then {seconds} s under heaptap -i 1s, per heap size and "
              "build; times in ms; rt: the real-time thread's; slow: its mapping calls of 5 ms "
              "or more, of all; at end: the final read and the detach")
        print(f"{'heap':>6} {'build':>12} {'RSS MiB':>8} {'light reads':>11} {'median':>7} "
              f"{'max':>7} {'full reads':>10} {'median':>7} {'max':>7} "
              f"{'memory read MiB':>15} {'gap':>7} {'map':>7} {'rt map':>7} {'slow rt maps':>12} "
              f"{'rt map at end':>13} {'slow at end':>11}")
        full = {}
        for mib in sizes:
            r = one_size(mib, seconds, builds)
            g = r["runs"][None]
            print(f"{mib:>4}Mi {'untraced':>12} {r['rss']:8.0f} {'':>11} {'':>7} {'':>7} "
                  f"{'':>10} {'':>7} {'':>7} {'':>15} {g[0]:7.2f} {g[1]:7.2f} {g[2]:7.2f} "
                  f"{f'{g[3]}/{g[4]}':>12}")
            for name in builds:
                stalls, end, reads = r["runs"][name]
                light = [x["read_ms"] for x in reads if not x["full"]]
                fr = [x["read_ms"] for x in reads if x["full"]]
                full.setdefault(name, []).append((r, fr))
                memory = max(x["memory_read_bytes"] for x in reads) / 2**20
                print(f"{mib:>4}Mi {name[-12:]:>12} {r['rss']:8.0f} {len(light):11d} "
                      f"{statistics.median(light) if light else 0:7.2f} "
                      f"{max(light) if light else 0:7.2f} {len(fr):10d} "
                      f"{statistics.median(fr) if fr else 0:7.1f} "
                      f"{max(fr) if fr else 0:7.1f} {memory:15.0f} "
                      f"{stalls[0]:7.2f} {stalls[1]:7.2f} {stalls[2]:7.2f} "
                      f"{f'{stalls[3]}/{stalls[4]}':>12} {end[2]:13.2f} "
                      f"{f'{end[3]}/{end[4]}':>11}")
            print(f"{mib:>4}Mi order: {r['order']}", flush=True)
        for name, v in full.items():
            if len(v) == 2 and v[0][1] and v[1][1]:
                (a, fa), (b, fb) = v
                print(f"{name}: full read, {b['mib']} MiB / {a['mib']} MiB: "
                      f"{statistics.median(fb) / statistics.median(fa):.1f}x "
                      f"for {b['rss'] / a['rss']:.1f}x the RSS")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
