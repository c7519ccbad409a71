#!/usr/bin/env python3
"""heaptap against bcc's memleak, the BPF peer a user would pick instead, per call:
sudo python3 bench/memleak.py [ROUNDS] [CALLS]   (defaults 3 and 50000)

On one bench/targets/allocbench process (-O2, no frame pointers, glibc), each variant below
attached by PID in turn, in an order drawn at random in each round: CALLS mallocs of 64 bytes
held (ns per malloc; the blocks freed after each loop, untimed) and CALLS malloc(64)+free
pairs (ns per pair), each the median of 3 loops; and, from the kernel's run-time statistics
(kernel.bpf_stats_enabled, on for the run), the time the variant's BPF programs took per
malloc over the held mallocs' loops; and the memory of the tracer's maps at its defaults
(their memlock as bpftool shows it: both reserve their tables of blocks up front).

Variants: untraced; empty programs where memleak puts its probes (malloc's entry and return,
free's entry: the traps alone); memleak (Debian's bpfcc-tools, `memleak-bpfcc -p PID`: its
per-allocation records and frame-pointer stacks); heaptap with DWARF stacks (the default on
this target) and with frame-pointer stacks (`--stack fp`, memleak's kind). Both tools put
malloc's probes at its entry, so per malloc they pay the same traps.

memleak reports every second (heaptap once an hour): its walk of its map runs on another CPU
than the loop's. The loop's malloc is called from main (a stack of a few frames): a deeper
stack costs both tools' walks more.

memleak compiles its programs with the running kernel's headers. Where the kernel has no
headers package (a kernel not from the distribution, as 6.18 is here) and BCC_KERNEL_SOURCE
is not set, this takes the newest linux-headers-*-common installed with its architecture's
package (`apt-get install bpfcc-tools linux-headers-amd64`: Debian 12's are 6.1's) and hands
their merged copy to bcc: memleak's uprobe programs read the registers (struct pt_regs),
whose layout is the same in both.
"""
import glob
import os
import platform
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import lib  # noqa: E402
import results as results_md  # noqa: E402
from overhead import empty_probes, end_probes, plan  # noqa: E402
from progcost import bpf_stats, maps_held, programs  # noqa: E402

ALLOCBENCH = os.path.join(lib.BUILD, "bench", "allocbench")
LOOPS = 3
HELD_MAX = 1000000	# allocbench's


def version_key(path):
    """Sorts 6.1.0-9 before 6.1.0-28."""
    return [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", path)]


def kernel_headers(tmp):
    """The BCC_KERNEL_SOURCE memleak needs here (made in tmp), or None when the kernel has
    its own or the user gave one."""
    if "BCC_KERNEL_SOURCE" in os.environ or \
            os.path.exists(f"/lib/modules/{platform.release()}/build/include"):
        return None
    for common in sorted(glob.glob("/usr/src/linux-headers-*-common"), key=version_key,
                         reverse=True):
        arch = glob.glob(common[:-len("common")] + "amd64")
        if not arch:
            continue
        merged = os.path.join(tmp, "kernel-headers")
        shutil.copytree(common, merged, symlinks=True)
        for part in ("arch", "include"):
            shutil.copytree(os.path.join(arch[0], part), os.path.join(merged, part),
                            symlinks=True, dirs_exist_ok=True)
        shutil.copy(os.path.join(arch[0], ".config"), merged)
        return merged
    raise lib.Failure("no kernel headers for memleak: apt-get install linux-headers-amd64")


def answer(target, command, key):
    said = target.do(command, timeout=900)
    found = re.search(key + r"=([\d.]+)", said or "")
    if not found:
        raise lib.Failure(f"allocbench answered {command!r} with {said!r}")
    return float(found.group(1))


def mallocs(target, tracer, calls):
    """(ns per malloc, ns in the tracer's programs per malloc): medians of LOOPS loops."""
    ns, spent = [], []
    for _ in range(LOOPS):
        before = programs(tracer.pid) if tracer else {}
        ns.append(answer(target, f"mallocs {calls}", "ns_per_malloc"))
        after = programs(tracer.pid) if tracer else {}
        target.do("release", timeout=900)
        spent.append(sum(t - before.get(name, (0, 0))[1] for name, (_, t) in after.items())
                     / calls)
    return statistics.median(ns), statistics.median(spent)


class Empty:
    """Empty programs at memleak's sites: malloc's entry and return, free's entry."""

    def __init__(self, target, tmp):
        probes = {p["function"]: p for p in plan(target)["probes"]}
        self.proc = empty_probes(target, [(probes[f]["path"], probes[f]["entry_offset"], ret)
                                          for f, ret in (("malloc", True), ("free", False))])
        self.pid = self.proc.pid

    def end(self):
        end_probes(self.proc)


class Memleak:
    env = None  # memleak's environment: main sets it

    def __init__(self, target, tmp):
        self.out = os.path.join(tmp, "memleak.out")
        with open(self.out, "w") as out:
            self.proc = subprocess.Popen(["memleak-bpfcc", "-p", str(target.target_pid), "1"],
                                         stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=Memleak.env,
                                         preexec_fn=lib.as_from_a_terminal())
        self.pid = self.proc.pid
        deadline = time.monotonic() + 120
        # Its first report comes an interval after its probes are in.
        while "outstanding allocations" not in self.said():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.end()
                raise lib.Failure(f"memleak did not attach: {self.said()[-800:]}")
            time.sleep(0.1)

    def said(self):
        with open(self.out) as f:
            return f.read()

    def end(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Heaptap:
    def __init__(self, target, tmp, options=()):
        self.ht = lib.Heaptap(["-p", str(target.target_pid), "-i", "1h"] + list(options))
        self.ht.attached()
        self.pid = self.ht.pid

    def end(self):
        self.ht.finish()


VARIANTS = {
    "untraced": None,
    "empty programs at memleak's sites": Empty,
    "memleak (bcc)": Memleak,
    "heaptap": Heaptap,
    "heaptap --stack fp": lambda target, tmp: Heaptap(target, tmp, ["--stack", "fp"]),
}


def one(variant, target, tmp, calls):
    """A variant's figures: ns per malloc, per pair, in its programs per malloc; its maps'
    bytes."""
    tracer = VARIANTS[variant](target, tmp) if VARIANTS[variant] else None
    try:
        maps = sum(m["bytes_memlock"] for m in maps_held(tracer.pid)) if tracer else 0
        malloc, spent = mallocs(target, tracer, calls)
        pair = statistics.median(answer(target, f"tight {calls}", "ns_per_pair")
                                 for _ in range(LOOPS))
    finally:
        if tracer:
            tracer.end()
    return malloc, pair, spent, maps


def main(argv):
    if os.geteuid() != 0:
        print("the benchmark attaches BPF programs: run it as root")
        return 1
    if not shutil.which("memleak-bpfcc"):
        print("memleak-bpfcc is missing: apt-get install bpfcc-tools linux-headers-amd64")
        return 1
    rounds = int(argv[0]) if argv else 3
    calls = int(argv[1]) if len(argv) > 1 else 50000
    if not 0 < calls <= HELD_MAX:
        print(f"CALLS: 1 to {HELD_MAX}")
        return 1
    results = {v: [] for v in VARIANTS}
    target = lib.Target(ALLOCBENCH)
    try:
        with bpf_stats(), tempfile.TemporaryDirectory(prefix="heaptap-bench-") as tmp:
            headers = kernel_headers(tmp)
            Memleak.env = dict(os.environ, **({"BCC_KERNEL_SOURCE": headers} if headers
                                             else {}))
            for r in range(rounds):
                for v in random.sample(list(VARIANTS), len(VARIANTS)):
                    results[v].append(one(v, target, tmp, calls))
                    m, p, b, _ = results[v][-1]
                    print(f"round {r + 1}: {v}: {m:.0f} ns a malloc, {p:.0f} a pair, "
                          f"programs {b:.0f} a malloc", flush=True)
    finally:
        lib.end_started()

    def show(values):
        return f"{statistics.median(values):.0f} ({min(values):.0f}-{max(values):.0f})"

    with results_md.section("memleak"):
        memleak = statistics.median(r[0] for r in results["memleak (bcc)"])
        memleak_bpf = statistics.median(r[2] for r in results["memleak (bcc)"])
        print(f"\n{rounds} rounds, variants in random order; medians (ranges) of the rounds, each "
              f"round's figure the median of {LOOPS} loops of {calls:,} calls:")
        print(f"{'':34} {'ns a malloc':>20} {'x memleak':>9} {'ns a pair':>20} "
              f"{'programs a malloc':>20} {'x memleak':>9} {'maps MiB':>9}")
        for v, rows in results.items():
            malloc = [r[0] for r in rows]
            bpf = [r[2] for r in rows]
            if VARIANTS[v] is None:
                print(f"{v:34} {show(malloc):>20} {'':9} {show([r[1] for r in rows]):>20}")
                continue
            to_memleak = statistics.median(bpf) / memleak_bpf if memleak_bpf else float("nan")
            print(f"{v:34} {show(malloc):>20} {statistics.median(malloc) / memleak:9.2f} "
                  f"{show([r[1] for r in rows]):>20} {show(bpf):>20} {to_memleak:9.2f} "
                  f"{statistics.median(r[3] for r in rows) / 2**20:9.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
