#!/usr/bin/env python3
"""heaptap's own memory with every output on: sudo python3 bench/outputs_soak.py [MINUTES [SITES]]

heaptap reports every second, with --folded, --pprof, --html and --listen all on (a client
scrapes /metrics every second), on tests/targets/paths holding SITES (default 5000) live
blocks, each on a stack of its own, while it keeps allocating and freeing down every one of
those paths. heaptap's RSS is read every 30 s; the run passes when it stays within 5% from
minute 2 to the end (the issue: names made at every report and never freed grew it without
bound).
"""
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import lib  # noqa: E402
import results as results_md  # noqa: E402
from live import drain  # noqa: E402
from soak import vm_rss  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(url, stop, counts):
    while not stop.is_set():
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                r.read()
            counts[0] += 1
        except OSError:
            counts[1] += 1
        stop.wait(1)


def main(argv):
    minutes = float(argv[0]) if argv else 10
    sites = int(argv[1]) if len(argv) > 1 else 5000
    if os.geteuid() != 0:
        print("the benchmark attaches BPF programs: run it as root")
        return 1
    d = tempfile.mkdtemp(prefix="heaptap-soak-")
    port = free_port()
    target = lib.Target("paths")
    ht = lib.Heaptap(["-p", str(target.target_pid), "-i", "1s", "--top", "20",
                      "--max-stacks", str(4 * sites), "--folded", os.path.join(d, "heap.folded"),
                      "--pprof", os.path.join(d, "heap.pb.gz"), "--html",
                      os.path.join(d, "heap.html"), "--listen", str(port)])
    ht.attached()
    # One live block on each path, 40 paths at a time, so that each stack's first copy
    # reaches heaptap (a burst of thousands of new stacks would find the copy ring full).
    for first in range(0, sites, 40):
        target.do(f"paths {min(40, sites - first)} 1 {first}")
        time.sleep(0.02)
    stop, counts = threading.Event(), [0, 0]
    scraper = threading.Thread(target=scrape, args=(f"http://127.0.0.1:{port}/metrics", stop,
                                                    counts))
    scraper.start()
    start = time.monotonic()
    samples = []
    next_read = 0
    with results_md.section("outputs_soak") as run:
        print(f"paths: {sites} sites; heaptap -i 1s with --folded --pprof --html --listen, "
              f"for {minutes:.0f} min")
        print(f"{'min':>5} {'heaptap RSS':>12} {'sites':>6} {'reports':>8} {'scrapes':>8}")
        reports = 0
        last = None
        while time.monotonic() - start < minutes * 60:
            target.do(f"churn {sites} 1")
            for rec in drain(ht):
                if rec["type"] == "interval":
                    reports += 1
                    last = rec
            now = time.monotonic() - start
            if now >= next_read:
                rss = vm_rss(ht.pid)
                samples.append((now / 60, rss))
                print(f"{now / 60:5.1f} {rss / 2**20:9.1f} MiB "
                      f"{last and last['sites_total']:>6} {reports:8d} {counts[0]:8d}",
                      flush=True)
                next_read += 30
        stop.set()
        scraper.join()
        final, status = ht.finish()
        lib.end_started()
        shutil.rmtree(d)
        steady = [rss for m, rss in samples if m >= 2]
        if not steady:
            print("too short to judge: run it for more than 2 minutes")
            run.discard()
            return 1
        spread = (max(steady) - min(steady)) / min(steady)
        print(f"final: exit {status}, {reports} reports, {counts[0]} scrapes "
              f"({counts[1]} failed), {final['sites_total']} sites; heaptap RSS from minute 2: "
              f"{min(steady) / 2**20:.1f} to {max(steady) / 2**20:.1f} MiB ({spread * 100:.1f}%)")
    return 0 if status == 0 and spread <= 0.05 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
