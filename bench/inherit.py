#!/usr/bin/env python3
"""What --follow's inherited probes cost a traced process, side by side in one run:
sudo python3 bench/inherit.py [ROUNDS] (default 5)

bench/targets/taskbench, pinned to one CPU, makes threads (pthread_create and join), forks
(fork, exit, wait) and pipe round trips with a child (two context switches each, on that one
CPU), untraced, under `heaptap -p PID -f --probe-links multi` (children traced once their
own probes are in) and under `heaptap -p PID -f` (probes inherited: every new task gets the
kernel's copy of each member event, and each switch of a traced task in and out has one event,
its anchor, to schedule). A fresh target per variant; every round runs the variants in an
order drawn at random; figures are medians (min-max) over the rounds, in microseconds.
"""
import os
import random
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import lib  # noqa: E402
import results as results_md  # noqa: E402

TASKBENCH = os.path.join(lib.BUILD, "bench", "taskbench")
VARIANTS = {"untraced": None, "-f multi": ["-f", "--probe-links", "multi"], "-f inherit": ["-f"]}
WORK = {"threads": 2000, "forks": 300, "pingpong": 20000}


def run(args):
    """Microseconds per thread, fork and round trip, for one variant."""
    target = lib.Target(TASKBENCH, wrapper=["taskset", "-c", "0"])
    ht = None
    try:
        if args is not None:
            ht = lib.Heaptap(["-p", str(target.target_pid), "-i", "1h"] + args)
            ht.attached()
        return {w: float(target.do(f"{w} {n}").split()[0]) for w, n in WORK.items()}
    finally:
        if ht:
            ht.finish()
        target.end()


def main(argv):
    rounds = int(argv[0]) if argv else 5
    if os.geteuid() != 0:
        print("the benchmark attaches BPF programs: run it as root")
        return 1
    got = {v: [] for v in VARIANTS}
    for r in range(rounds):
        order = list(VARIANTS)
        random.shuffle(order)
        for v in order:
            got[v].append(run(VARIANTS[v]))
            print(f"round {r + 1}: {v}: " +
                  ", ".join(f"{w} {got[v][-1][w]:.1f} us" for w in WORK), flush=True)
    with results_md.section("inherit"):
        print(f"\n{rounds} rounds, variants in random order; us per task made or round trip: "
              f"median (min-max)")
        print(f"{'variant':12} " + " ".join(f"{w:>24}" for w in WORK))
        for v in VARIANTS:
            cells = []
            for w in WORK:
                xs = [x[w] for x in got[v]]
                cells.append(f"{statistics.median(xs):8.1f} ({min(xs):.1f}-{max(xs):.1f})")
            print(f"{v:12} " + " ".join(f"{c:>24}" for c in cells))
    lib.end_started()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
