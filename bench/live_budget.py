#!/usr/bin/env python3
"""Does --live keep its budget, as the target measures it? Side by side in one run:
sudo python3 bench/live_budget.py [SECONDS] [ROUNDS] [TARGET,...] (defaults 60, 3, all)

Two targets, for SECONDS each: redis-server under redis-benchmark (SET with random keys: the
key set grows), from a fresh start each time, and bench/targets/allocbench's tight malloc+free
loop (one process for a round's three variants, heaptap attached and gone again). Three
variants: untraced, `heaptap --live` (budget 5%) and `heaptap --live --max-overhead 2`. Every
round runs the six in an order drawn at random. Per variant: the throughput against the
untraced run of the same round (median, min-max over the rounds), against the floor the issue
sets (1 - budget - 0.02), heaptap's own estimate of its slowdown, and for redis when the growing
key set's site was first on top of the growth ranking.

Throughput here moves by 5-10% between one minute and the next, more than the budgets, and
each CPU's speed drifts on its own, so a third target, "paired", measures the tight loop
against itself on one CPU: two allocbench processes pinned to the same CPU, which they take
turns on over the same interval (the traps and heaptap's programs run in the traced one's CPU
time), one traced and one not, for SECONDS; then again with the roles swapped. heaptap and
this script keep to the other CPUs. Each run's ratio is the traced one's pairs per second of
its CPU time (/proc/PID/schedstat) over the untraced one's; the runs print each one's share
of the CPU, which the scheduler keeps equal. The two processes' own difference in speed (up
to 10%: their layouts in memory) cancels in the geometric mean of the two runs, which is the
variant's figure for the round (its untraced row is 1 by construction).
"""
import os
import random
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import lib  # noqa: E402
import results as results_md  # noqa: E402
from live import drain, free_port, leak_on_top, load, start_server  # noqa: E402

ALLOCBENCH = os.path.join(lib.BUILD, "bench", "allocbench")
VARIANTS = {"untraced": None, "live 5%": ["--live"],
            "live 2%": ["--live", "--max-overhead", "2"]}
BUDGETS = {"live 5%": 0.05, "live 2%": 0.02}
REDIS_GROWTH = ["setGenericCommand", "dbAdd", "createEmbeddedStringObject"]
TIGHT_CHUNK = 2000000


def traced(pid, args):
    if args is None:
        return None
    ht = lib.Heaptap(["-p", str(pid), "-i", "5s", "--top", "3"] + args)
    ht.attached()
    return ht


def finish(ht):
    """heaptap ended by SIGINT: its final record."""
    if ht is None:
        return None
    os.kill(ht.pid, 2)
    while ht.record() is not None:
        pass
    ht.wait()
    return [r for r in ht.records if r["type"] == "final"][-1]


def redis(seconds, args, workdir):
    """Requests per second over the run, heaptap's estimate, seconds until the key set on top."""
    port = free_port()
    server = start_server("redis-server", ["redis-server", "--port", str(port), "--bind",
                                           "127.0.0.1", "--save", "", "--appendonly", "no",
                                           "--dir", workdir], port)
    ht = traced(server.pid, args)
    start = time.monotonic()
    done = spent = 0
    found = None
    while time.monotonic() - start < seconds:
        n, t = load(port, "set", 50000, 100000000)
        done += n
        spent += t
        for rec in drain(ht) if ht else []:
            if found is None and leak_on_top(rec, REDIS_GROWTH)[0]:
                found = rec["elapsed_s"]
    final = finish(ht)
    server.end()
    return done / spent, final, found


def tight(seconds, args, target):
    """malloc+free pairs per second over the run, on the round's allocbench (one process for
    the round's variants: fresh processes of it differ by up to 10% in speed, where a layout
    in memory happens to suit the loop better)."""
    ht = traced(target.target_pid, args)
    start = time.monotonic()
    pairs = 0
    while time.monotonic() - start < seconds:
        target.do(f"tight {TIGHT_CHUNK}", timeout=600)
        pairs += TIGHT_CHUNK
    rate = pairs / (time.monotonic() - start)
    final = finish(ht)
    return rate, final, None


def cpu_time(pid):
    """Seconds process pid (one thread) has run on a CPU."""
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0]) / 1e9


def busy(loop, seconds, out):
    """loop's tight pairs for seconds: into out, (pairs per second of its CPU time, its share
    of the CPU), or the exception that stopped it."""
    try:
        start, cpu = time.monotonic(), cpu_time(loop.target_pid)
        pairs = 0
        while time.monotonic() - start < seconds:
            loop.do(f"tight {TIGHT_CHUNK}", timeout=600)
            pairs += TIGHT_CHUNK
        cpu = cpu_time(loop.target_pid) - cpu
        out.append((pairs / cpu, cpu / (time.monotonic() - start)))
    except Exception as e:  # noqa: BLE001 -- raised again by the caller
        out.append(e)


def paired(seconds, args, loops):
    """The tight loop traced against itself untraced, at once and on one CPU: loops[0] traced
    with args, loops[1] not, then the roles swapped: the geometric mean of the two ratios, the
    first run's final record."""
    if args is None:
        return 1.0, None, None
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise lib.Failure("the paired runs need two CPUs: one for the loops, one for heaptap")
    for loop in loops:
        os.sched_setaffinity(loop.target_pid, {cpus[0]})
    # This thread's CPUs are those of the threads it starts and of heaptap it runs.
    os.sched_setaffinity(0, set(cpus[1:]))
    ratios, first, ht = [], None, None
    try:
        for traced_loop, other in (loops, loops[::-1]):
            ht = traced(traced_loop.target_pid, args)
            rates = [[], []]
            threads = [threading.Thread(target=busy, args=(loop, seconds, rates[i]))
                       for i, loop in enumerate((traced_loop, other))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            final, ht = finish(ht), None
            first = first or final
            for r in rates:
                if isinstance(r[0], Exception):
                    raise r[0]
            print(f"  CPU shares: traced {rates[0][0][1]:.3f}, untraced {rates[1][0][1]:.3f}",
                  flush=True)
            ratios.append(rates[0][0][0] / rates[1][0][0])
    finally:
        if ht:
            ht.end()
        os.sched_setaffinity(0, set(cpus))
    return (ratios[0] * ratios[1]) ** 0.5, first, None


def main(argv):
    seconds = float(argv[0]) if argv else 60
    rounds = int(argv[1]) if len(argv) > 1 else 3
    targets = argv[2].split(",") if len(argv) > 2 else ["redis", "tight", "paired"]
    if os.geteuid() != 0:
        print("the benchmark attaches BPF programs: run it as root")
        return 1
    results = {}  # (target, variant) -> [(ratio, estimate, found, own CPU)]
    with tempfile.TemporaryDirectory(prefix="heaptap-budget-") as workdir:
        for r in range(rounds):
            order = [(t, v) for t in targets for v in VARIANTS]
            random.shuffle(order)
            rates = {}
            loop = lib.Target(ALLOCBENCH)
            pair = [lib.Target(ALLOCBENCH), lib.Target(ALLOCBENCH)] if "paired" in targets \
                else []
            for t, v in order:
                if t == "redis":
                    run = redis(seconds, VARIANTS[v], workdir)
                elif t == "tight":
                    run = tight(seconds, VARIANTS[v], loop)
                else:
                    run = paired(seconds, VARIANTS[v], pair)
                rates[(t, v)] = run
                print(f"round {r + 1}: {t} {v}: {run[0]:.3f}" if t == "paired" else
                      f"round {r + 1}: {t} {v}: {run[0]:.0f}/s", flush=True)
            for p in [loop] + pair:
                p.end()
            for (t, v), (rate, final, found) in rates.items():
                est = final["live"]["slowdown"] if final and "live" in final else None
                own = final["live"].get("own_cpu") if final and "live" in final else None
                results.setdefault((t, v), []).append((rate / rates[(t, "untraced")][0], est,
                                                        found, own))
    with results_md.section("live_budget", argv[2] if len(argv) > 2 else None):
        print(f"\n{rounds} rounds of {seconds:.0f} s each, variants in random order; throughput "
              f"against the same round's untraced run: median (min-max)")
        print(f"{'target':8} {'variant':10} {'x untraced':>22} {'floor':>6} {'held':>5} "
              f"{'heaptap says':>14} {'growth on top after':>20}")
        for (t, v), rows in sorted(results.items()):
            if v == "untraced":
                continue
            ratios = [x[0] for x in rows]
            floor = 1 - BUDGETS[v] - 0.02
            held = sum(x >= floor for x in ratios)
            ests = [x[1] for x in rows if x[1] is not None]
            found = [x[2] for x in rows]
            on_top = ", ".join("-" if f is None else f"{f:.0f} s" for f in found) \
                if t == "redis" else ""
            print(f"{t:8} {v:10} {statistics.median(ratios):8.3f} ({min(ratios):.3f}-"
                  f"{max(ratios):.3f}) {floor:6.2f} {held:>2}/{len(rows)} "
                  f"{statistics.median(ests) * 100 if ests else 0:13.1f}% {on_top:>20}")
        print(f"\nheaptap's own CPU time in a run (what the budget counts of it, where it "
              f"shares CPUs with the target), by activity: median over the rounds, seconds")
        kinds = ("attach_s", "detach_s", "report_s", "other_s", "total_s")
        print(f"{'target':8} {'variant':10} " + " ".join(f"{k[:-2]:>8}" for k in kinds))
        for (t, v), rows in sorted(results.items()):
            owns = [x[3] for x in rows if x[3]]
            if v == "untraced" or not owns:
                continue
            print(f"{t:8} {v:10} " + " ".join(
                f"{statistics.median(o[k] for o in owns):8.3f}" for k in kinds))
    lib.end_started()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
