#!/usr/bin/env python3
"""heaptap against the peer a user would pick instead: sudo python3 bench/peers.py [ROUNDS]

heaptrack (Debian's package), preloaded into a launched program and injected into a running
one by PID (its gdb injection), and heaptap attached by PID, each on a fresh
bench/targets/allocbench (-O2, glibc): ns per malloc+free pair in a tight loop (20,000
pairs, median of 3 loops), with the untraced loop of the same process before each traced
one. ROUNDS rounds (default 3), the variants in random order within each round; prints
medians, spreads and each variant's ratio to untraced.
"""
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import lib  # noqa: E402
import results as results_md  # noqa: E402

ALLOCBENCH = os.path.join(lib.BUILD, "bench", "allocbench")
PAIRS = 20000
LOOPS = 3


def tight(target):
    return statistics.median(
        float(target.do(f"tight {PAIRS}", timeout=900).split("ns_per_pair=")[1].split()[0])
        for _ in range(LOOPS))


def heaptap_by_pid(tmp):
    target = lib.Target(ALLOCBENCH)
    try:
        untraced = tight(target)
        ht = lib.Heaptap(["-p", str(target.target_pid), "-i", "1h"])
        ht.attached()
        traced = tight(target)
        ht.finish()
        return untraced, traced
    finally:
        target.end()


def heaptrack_preload(tmp):
    """Untraced: a plain process; traced: one launched by heaptrack (LD_PRELOAD)."""
    plain = lib.Target(ALLOCBENCH)
    try:
        untraced = tight(plain)
    finally:
        plain.end()
    # heaptrack's script says a few lines of its own before the program's "ready".
    target = lib.Proc(["heaptrack", "-o", os.path.join(tmp, "pre"), ALLOCBENCH])
    pid = None
    try:
        said = []
        while not said or not said[-1].startswith("ready "):
            said.append(target.read_line(timeout=120))
            if said[-1] is None:
                raise lib.Failure(f"heaptrack ended: {said}: {target.stderr_text()[-500:]}")
        pid = int(said[-1].split()[1])
        target.do = lambda command, timeout: lib.Target.do(target, command, timeout)
        traced = tight(target)
        target.send("exit")
        target.popen.wait(timeout=600)
        return untraced, traced
    finally:
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        target.end()


def heaptrack_by_pid(tmp):
    target = lib.Target(ALLOCBENCH)
    ht = None
    try:
        untraced = tight(target)
        ht = subprocess.Popen(["heaptrack", "-o", os.path.join(tmp, "pid"), "-p",
                               str(target.target_pid)], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
                              preexec_fn=lib.as_from_a_terminal())
        said = ""
        deadline = time.monotonic() + 120
        # heaptrack says when its library is in (gdb injects it).
        while "injection finished" not in said and time.monotonic() < deadline:
            line = ht.stdout.readline()
            if not line:
                break
            said += line
        if "injection finished" not in said:
            raise lib.Failure(f"heaptrack -p did not attach: {said[-500:]}")
        traced = tight(target)
        return untraced, traced
    finally:
        target.end()
        if ht:
            if ht.poll() is None:
                ht.send_signal(signal.SIGINT)
            try:
                ht.wait(timeout=60)
            except subprocess.TimeoutExpired:
                ht.kill()
                ht.wait()


VARIANTS = {
    "heaptap -p": heaptap_by_pid,
    "heaptrack (preload)": heaptrack_preload,
    "heaptrack -p": heaptrack_by_pid,
}


def main(argv):
    rounds = int(argv[0]) if argv else 3
    if os.geteuid() != 0:
        print("the benchmark attaches BPF programs: run it as root")
        return 1
    results = {v: [] for v in VARIANTS}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            for name in random.sample(list(VARIANTS), len(VARIANTS)):
                untraced, traced = VARIANTS[name](tmp)
                results[name].append((untraced, traced))
                print(f"round {r + 1}: {name}: untraced {untraced:.0f} ns/pair, traced "
                      f"{traced:.0f}", flush=True)
    with results_md.section("peers"):
        print(f"\nns per malloc+free pair, tight loop, {rounds} rounds (median, min-max):")
        for name, rows in results.items():
            traced = [t for _, t in rows]
            ratio = [t / u for u, t in rows]
            print(f"  {name:22} {statistics.median(traced):8.0f} ({min(traced):.0f}-"
                  f"{max(traced):.0f}), x untraced {statistics.median(ratio):.1f} "
                  f"({min(ratio):.1f}-{max(ratio):.1f}); untraced "
                  f"{statistics.median(u for u, _ in rows):.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
