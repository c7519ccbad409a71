#!/usr/bin/env python3
"""What each thing heaptap's BPF programs do costs on this machine, as the kernel counts it:
sudo python3 bench/unitcost.py [ROUNDS] [PAIRS] (defaults 5 and 100000)

bench/probecost --units puts the empty program and every unit_ program of
bench/probecost.bpf.c at malloc's planned site in bench/targets/allocbench (its tight
malloc(64)+free loop), in an order drawn at random each round; each unit program does its
one thing UNIT_REPEAT times a run. From the kernel's run-time statistics (bpf_stats_enabled,
on for the run): each program's ns a run, and what one operation costs, its program's time
less the empty program's over UNIT_REPEAT. All programs run at each call, one after the
other, so that every figure of a round is measured under the same load.
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import lib  # noqa: E402
import results as results_md  # noqa: E402
from progcost import ALLOCBENCH, bpf_stats, ns_per_pair, programs  # noqa: E402
from sites import PROBECOST  # noqa: E402

UNIT_REPEAT = 8
UNITS = [
    ("unit_task_storage", "bpf_task_storage_get, the thread's state found"),
    ("unit_hash", "hash map look-up (preallocated, 4-byte key: proc_counters')"),
    ("unit_array", "array map look-up by slot (inlined)"),
    ("unit_ktime", "bpf_ktime_get_ns"),
    ("unit_jiffies", "bpf_jiffies64 (bpf_ktime_get_coarse_ns is refused to uprobes)"),
    ("unit_ktime_boot", "bpf_ktime_get_boot_ns"),
    ("unit_add_locked", "locked add (__sync_fetch_and_add) to a global"),
    ("unit_add_plain", "plain add to a global"),
    ("unit_read_task", "bpf_probe_read_user, 8 bytes into task storage (12 KiB value)"),
    ("unit_read_percpu", "bpf_probe_read_user, 8 bytes into a per-CPU array's value"),
    ("unit_read_global", "bpf_probe_read_user, 8 bytes into a global (.bss)"),
    ("unit_read_stack", "bpf_probe_read_user, 8 bytes into the BPF stack"),
]


def malloc_site(pid):
    """malloc's planned site in process pid: (file, offset)."""
    ht = lib.Heaptap(["-p", str(pid), "-i", "1h"])
    attached = ht.attached()
    ht.finish()
    for p in attached["probes"]:
        if p["function"] == "malloc" and p["kind"] != "unwind":
            return p["path"], p["offset"]
    raise lib.Failure("no malloc probe planned")


def main(argv):
    rounds = int(argv[0]) if argv else 5
    pairs = int(argv[1]) if len(argv) > 1 else 100000
    runs = {name: [] for name in ["empty"] + [u for u, _ in UNITS]}
    with bpf_stats():
        target = lib.Target(ALLOCBENCH)
        try:
            path, offset = malloc_site(target.target_pid)
            for _ in range(rounds):
                proc = lib.Proc([PROBECOST, "--units", str(target.target_pid),
                                 f"{path}:{offset}"])
                line = proc.read_line()
                if line != "attached":
                    raise lib.Failure(f"probecost: {line}: {proc.stderr_text()}")
                before = programs(proc.pid)
                ns_per_pair(target, pairs)
                after = programs(proc.pid)
                proc.popen.stdin.close()
                proc.wait()
                for name in runs:
                    cnt = after[name][0] - before.get(name, (0, 0))[0]
                    ns = after[name][1] - before.get(name, (0, 0))[1]
                    if cnt:
                        runs[name].append(ns / cnt)
        finally:
            target.end()
    with results_md.section("unitcost"):
        print(f"{rounds} rounds of {pairs} malloc(64)+free pairs, every program at malloc's "
              f"planned site, in random order each round; medians of the rounds (range). "
              f"Each unit program does its thing {UNIT_REPEAT} times a run.")
        empty = statistics.median(runs["empty"])
        print(f"\n  {'program':20} {'ns a run':>9} {'ns one':>7}  what")
        print(f"  {'empty':20} {empty:9.0f} {'':>7}  nothing: the run-time's own wrapper")
        for name, what in UNITS:
            if not runs[name]:
                continue
            ns = statistics.median(runs[name])
            each = [(r - e) / UNIT_REPEAT for r, e in zip(runs[name], runs["empty"])]
            print(f"  {name:20} {ns:9.0f} {statistics.median(each):7.1f}  {what} "
                  f"({min(each):.1f} to {max(each):.1f})")
    lib.end_started()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
