#!/usr/bin/env python3
"""What many live blocks cost heaptap: sudo python3 bench/blocks.py [MILLIONS ...]

For each count (default 1 and 4 million), bench/targets/blocks holds that many 64-byte
blocks, allocated from one site after heaptap attached by PID (`--max-allocs` raised to
fit): the BPF maps' memory per live block (heaptap.map_bytes of a report before and after,
the maps' memlock; and which of the kernel's slab caches, from /proc/slabinfo, took the
elements: the BPF allocator rounds an element up to a kmalloc size class), how long a report takes (SIGUSR1 to its record), and how long heaptap
takes to stop (SIGINT to its exit: the final report and the detach), and of a report's time
how long reading the blocks took, and how (heaptap.blocks_read_ms and blocks_read_by).
The target's own RSS is printed for scale.
"""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import lib  # noqa: E402
from soak import vm_rss  # noqa: E402


def slab():
    """Objects of the kmalloc caches a map element can fall in (96 and 128 bytes, memcg
    accounted or not), by name: where the BPF allocator put the elements."""
    counts = {}
    with open("/proc/slabinfo") as f:
        for line in f:
            name = line.split()[0]
            if name in ("kmalloc-96", "kmalloc-128", "kmalloc-cg-96", "kmalloc-cg-128"):
                counts[name] = int(line.split()[1])
    return counts


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


def one(n):
    target = lib.Proc([os.path.join(lib.BUILD, "bench", "blocks")])
    if not (target.read_line() or "").startswith("ready"):
        raise lib.Failure("blocks did not start")
    ht = lib.Heaptap(["-p", str(target.pid), "-i", "1h", "--max-allocs", str(n + n // 4)])
    try:
        ht.attached()
        before, _ = report(ht)
        slab0 = slab()
        target.send(f"hold {n}")
        if target.read_line(timeout=600) != f"done hold {n}":
            raise lib.Failure("blocks did not answer")
        slab1 = slab()
        grew = {k: slab1[k] - slab0.get(k, 0) for k in slab1}
        cache = max(grew, key=grew.get)
        after, took = report(ht)
        live = after["live_allocs"]
        per_block = (after["heaptap"]["map_bytes"] - before["heaptap"]["map_bytes"]) / n
        t0 = time.monotonic()
        final, status = ht.finish()
        stop = time.monotonic() - t0
    finally:
        if ht.popen.poll() is None:
            ht.end()
    print(f"{n:>10,} blocks: live {live:,}; maps {per_block:.0f} bytes a block "
          f"(slab: {grew[cache]:,} more objects of {cache}) "
          f"({after['heaptap']['map_bytes'] / 2**20:.0f} MiB in all); report {took:.2f} s "
          f"(the blocks read in {after['heaptap']['blocks_read_ms'] / 1e3:.2f} s by "
          f"{after['heaptap']['blocks_read_by']}); "
          f"stop {stop:.2f} s (status {status}); heaptap RSS "
          f"{after['heaptap']['rss_bytes'] / 2**20:.0f} MiB; the target's RSS "
          f"{vm_rss(target.pid) / 2**20:.0f} MiB", flush=True)
    target.send("exit")
    target.wait()


def main(argv):
    for m in [float(a) for a in argv] or [1, 4]:
        one(int(m * 1e6))


if __name__ == "__main__":
    main(sys.argv[1:])
