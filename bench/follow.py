#!/usr/bin/env python3
"""How much of children's lives --follow sees: bench/targets/forkbench forks children one
after another, each living MS milliseconds and making a malloc every 100 us (MS * 10 of
them); heaptap -p PARENT --follow (reports every hour: none meanwhile) traces it. For each
lifetime: the children taken in, those that ended first, and the share of each one's calls
seen, over the children of ROUNDS rounds (medians and range).

    sudo python3 bench/follow.py [ROUNDS] [CHILDREN]      (default 3 rounds of 10)
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import lib  # noqa: E402
import results as results_md  # noqa: E402

FORKBENCH = os.path.join(lib.BUILD, "bench", "forkbench")
LIFETIMES_MS = (5, 20, 100)


def one_round(ms, children):
    """(children taken in, untraced, share of calls seen per child taken in)."""
    target = lib.Target(FORKBENCH)
    try:
        ht = lib.Heaptap(["-p", str(target.target_pid), "--follow", "-i", "1h"])
        ht.attached()
        target.do(f"children {children} {ms}")
        final, status = ht.finish()
        if status != 0:
            raise lib.Failure(f"heaptap exit status {status}: {ht.stderr_text()[-500:]}")
        kids = [p for p in final["processes"] if p["pid"] != target.target_pid]
        shares = [p["alloc_calls"] / (ms * 10) for p in kids]
        return len(kids), final["inexact"]["untraced_procs"], shares
    finally:
        target.end()


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    children = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    with results_md.section("follow"):
        print(f"{children} children a round, one after another, {rounds} rounds; share of each "
              "child's calls seen, over the children taken in")
        print("| lifetime | taken in | ended first | calls seen, median | min-max |")
        print("| --- | --- | --- | --- | --- |")
        for ms in LIFETIMES_MS:
            taken = untraced = 0
            shares = []
            for _ in range(rounds):
                t, u, s = one_round(ms, children)
                taken += t
                untraced += u
                shares += s
            median = statistics.median(shares) if shares else 0
            low, high = (min(shares), max(shares)) if shares else (0, 0)
            print(f"| {ms} ms | {taken} of {rounds * children} | {untraced} | {median:.0%} | "
                  f"{low:.0%}-{high:.0%} |")


if __name__ == "__main__":
    main()
