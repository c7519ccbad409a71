#!/usr/bin/env python3
"""What the planned probe sites save, side by side in one run:
sudo python3 bench/sites.py [ROUNDS] [--against PATH] [--redis] [--depths D,D...] [--sample SIZE]

1. A tight malloc(64)+free loop (bench/targets/allocbench, -O2) against glibc, jemalloc,
   tcmalloc and mimalloc (preloaded): ns per pair untraced; with empty BPF programs at the
   functions' entries and at heaptap's planned sites (bench/probecost: the traps alone); with
   programs at the planned sites that read one word of the stack at each call (probecost
   --read: the least a stack costs, its caller's return address); with heaptap at the entries
   (--probe-at entry) and at its planned sites.
2. redis-server from Debian (jemalloc) under redis-benchmark -t set (50 clients, random keys
   of a 100,000 key space): requests per second untraced, with empty programs at heaptap's
   planned sites (the traps alone: entries, and the returns heaptap probes; and the entries
   alone, which is what a floor without returns would say), with the one read a call at them,
   with heaptap --probe-at entry, and with heaptap at its planned sites; each run on a fresh
   server. Then where the time goes: calls per SET, and what each of heaptap's programs takes
   a run (the kernel's bpf_stats, on for the runs).

--against PATH adds heaptap at its planned sites again with that build (an older one), in
both parts, in the same random order; its programs' ns a run are printed beside.
--redis runs the second part alone. --depths D,D... adds, on redis, heaptap at its planned
sites with --stack-depth D for each D: what its walks cost by depth. --sample SIZE adds, on
redis, heaptap at its planned sites with --sample SIZE (and --against's build with it too).

Every variant runs once per round (ROUNDS, default 5), the variants of a round in random
order; figures are medians over the rounds, ratios against the untraced median. The machine
is shared and noisy: compare the ratios, not the absolute figures.
"""
import json
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import lib  # noqa: E402
import results as results_md  # noqa: E402

ALLOCBENCH = os.path.join(lib.BUILD, "bench", "allocbench")
PROBECOST = os.path.join(lib.BUILD, "bench", "probecost")
LIBS = "/usr/lib/x86_64-linux-gnu"
ALLOCATORS = {
    "glibc": None,
    "jemalloc": f"{LIBS}/libjemalloc.so.2",
    "tcmalloc": f"{LIBS}/libtcmalloc_minimal.so.4",
    "mimalloc": f"{LIBS}/libmimalloc.so.2",
}
PAIRS = 20000
REDIS_REQUESTS = 100000
REDIS_REQUESTS_SLOW = 30000     # at the entries: a tenth of the speed
REDIS_KEYSPACE = 100000
PROGRAMS = ("malloc_enter", "alloc_return", "free_enter")
AGAINST = "heaptap, planned sites (against)"
ONE_READ = "one read a call, planned sites"
# --against's build of heaptap, or None.
against = None
# --depths: the --stack-depth variants on redis.
DEPTH = "heaptap, planned sites, --stack-depth "
depths = []
# --sample: heaptap sampling on redis (and --against's build too).
SAMPLED = "heaptap, planned sites, --sample "
sample = None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def heaptap(pid, entries, verbose=False, binary=None, args=()):
    """heaptap attached to pid, at the entries or its planned sites; binary: another build;
    args: more options."""
    ours = lib.HEAPTAP
    lib.HEAPTAP = binary or ours
    try:
        ht = lib.Heaptap(["-p", str(pid), "-i", "1h"] +
                         (["--probe-at", "entry"] if entries else []) +
                         (["-v"] if verbose else []) + list(args))
    finally:
        lib.HEAPTAP = ours
    attached = ht.attached()
    return ht, attached


def stop(ht):
    final, status = ht.finish()
    if status != 0:
        raise lib.Failure(f"heaptap exited {status}: {ht.stderr_text()}")
    return final


def empty_probes(pid, sites, read=False, mode=None):
    """Empty programs at sites [(file, offset, return?)] of process pid, or with read, ones
    that read the word at the stack pointer (returns stay empty), or with mode, probecost's
    option (--session-skip: uprobe sessions at the sites with returns); a Proc to end."""
    args = [f"{f}:{o}" + (":ret" if r else "") for f, o, r in sites]
    option = ["--read"] if read else [mode] if mode else []
    p = lib.Proc([PROBECOST] + option + [str(pid)] + args)
    line = p.read_line()
    if line != "attached":
        raise lib.Failure(f"probecost: {line}: {p.stderr_text()}")
    return p


def end_probes(p):
    p.popen.stdin.close()
    p.wait()


def tight(target):
    answer = target.do(f"tight {PAIRS}", timeout=900)
    return float(answer.split("ns_per_pair=")[1].split()[0])


def alloc_loop(name, preload, rounds):
    """ns per pair for each variant against one allocator: {variant: [ns, ...]}."""
    env = dict(os.environ, LD_PRELOAD=preload) if preload else None
    target = lib.Target(ALLOCBENCH, env=env)
    pid = target.target_pid
    # The two plans, read from heaptap itself.
    plans = {}
    model = None
    for entries in (True, False):
        ht, attached = heaptap(pid, entries, verbose=not entries)
        stop(ht)
        plans[entries] = [(p["path"], p["offset"], p["return"]) for p in attached["probes"]
                          if p["kind"] != "unwind"]
        # heaptap -v's model of the planned sites' cost, measured at its start.
        found = re.search(r"floor of a malloc and free pair here: ([0-9.]+) us",
                          ht.stderr_text()) if not entries else None
        model = float(found.group(1)) * 1000 if found else model
    emulated = sum(1 for p in attached["probes"] if p["emulated"] and p["kind"] != "unwind")
    probed = sum(1 for p in attached["probes"] if p["kind"] != "unwind")

    def untraced():
        return tight(target)

    def empty(entries, read=False):
        p = empty_probes(pid, plans[entries], read)
        try:
            return tight(target)
        finally:
            end_probes(p)

    def traced(entries, binary=None):
        ht, _ = heaptap(pid, entries, binary=binary)
        try:
            return tight(target)
        finally:
            stop(ht)

    variants = {
        "untraced": untraced,
        "empty programs, entries": lambda: empty(True),
        "empty programs, planned sites": lambda: empty(False),
        ONE_READ: lambda: empty(False, True),
        "heaptap --probe-at entry": lambda: traced(True),
        "heaptap, planned sites": lambda: traced(False),
    }
    if against:
        variants[AGAINST] = lambda: traced(False, against)
    results = {v: [] for v in variants}
    for _ in range(rounds):
        order = list(variants)
        random.shuffle(order)
        for v in order:
            results[v].append(variants[v]())
    target.end()
    return results, emulated, probed, model


def program_ids(pid):
    """The BPF programs process pid holds, by the ids its file descriptors' fdinfo give."""
    ids = set()
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                ids |= {int(l.split()[1]) for l in f if l.startswith("prog_id:")}
        except OSError:
            pass
    return ids


def program_stats(proc, names=PROGRAMS):
    """Run count and time of the programs named of process proc (bpf_stats)."""
    out = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True)
    ids = program_ids(proc.pid)
    return {p["name"]: (p.get("run_cnt", 0), p.get("run_time_ns", 0))
            for p in json.loads(out.stdout or "[]")
            if p.get("name") in names and p["id"] in ids}


def redis_run(variant):
    """One fresh redis-server, SETs under the variant: (requests per second, details)."""
    port = free_port()
    details = {}
    with tempfile.TemporaryDirectory(prefix="heaptap-bench-") as workdir:
        server = lib.Proc(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                           "--save", "", "--appendonly", "no", "--dir", workdir],
                          stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise lib.Failure("redis-server did not start")
                time.sleep(0.05)
        ht = probes = None
        if variant.startswith("heaptap"):
            ht, _ = heaptap(server.pid, variant == "heaptap --probe-at entry",
                            binary=against if variant.startswith(AGAINST) else None,
                            args=(["--stack-depth", variant[len(DEPTH):]]
                                  if variant.startswith(DEPTH) else
                                  ["--sample", sample] if variant.endswith(f"--sample {sample}")
                                  else []))
        elif variant.startswith("empty") or variant == ONE_READ:
            plan, attached = heaptap(server.pid, False)
            stop(plan)
            # heaptap needs each allocating function's return too: a return probe is a trap
            # more a call. The entries alone are a floor heaptap cannot reach.
            returns = "entries only" not in variant
            probes = empty_probes(server.pid, [(p["path"], p["offset"], p["return"] and returns)
                                               for p in attached["probes"]
                                               if p["kind"] != "unwind"], variant == ONE_READ)
        requests = REDIS_REQUESTS_SLOW if "entry" in variant else REDIS_REQUESTS
        out = subprocess.run(["redis-benchmark", "-p", str(port), "-t", "set",
                              "-n", str(requests), "-r", str(REDIS_KEYSPACE), "-q"],
                             capture_output=True, text=True, timeout=1800).stdout
        if ht:
            details["programs"] = program_stats(ht)
        elif variant == ONE_READ:
            details["programs"] = program_stats(probes, ("read_word",))
        final = stop(ht) if ht else None
        if probes:
            end_probes(probes)
        server.end()
    found = re.findall(r"SET: ([0-9.]+) requests per second", out)
    if not found:
        raise lib.Failure(f"redis-benchmark: {out[-300:]!r}")
    if final is not None:
        if final["inexact"]["total"] != final["inexact"]["unknown_frees"]:
            raise lib.Failure(f"heaptap under redis: inexact {final['inexact']}")
        details["calls"] = {f["function"]: f["calls"] / requests for f in final["functions"]
                            if f["calls"]}
    return float(found[-1]), details


def redis(rounds):
    variants = ["untraced", "empty programs, planned sites",
                "empty programs, planned sites, entries only", ONE_READ, "heaptap --probe-at entry",
                "heaptap, planned sites"] + ([AGAINST] if against else []) + \
               [f"{DEPTH}{d}" for d in depths] + \
               ([SAMPLED + sample] if sample else []) + \
               ([f"{AGAINST}, --sample {sample}"] if sample and against else [])
    results = {v: [] for v in variants}
    subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=1"])
    try:
        for _ in range(rounds):
            order = list(variants)
            random.shuffle(order)
            for v in order:
                results[v].append(redis_run(v))
    finally:
        subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=0"])
    return results


def main(argv):
    if os.geteuid() != 0:
        print("the benchmark attaches BPF programs: run it as root")
        return 1
    global against, depths, sample
    if "--sample" in argv:
        at = argv.index("--sample")
        sample = argv[at + 1]
        del argv[at:at + 2]
    if "--depths" in argv:
        at = argv.index("--depths")
        depths = [int(d) for d in argv[at + 1].split(",")]
        del argv[at:at + 2]
    against = lib.take_against(argv)
    redis_only = "--redis" in argv
    if redis_only:
        argv.remove("--redis")
    rounds = int(argv[0]) if argv else 5
    part = ", ".join(p for p, on in (("redis", redis_only), ("against", against),
                                     ("depths", depths), ("sample", sample)) if on)
    with results_md.section("sites", part or None):
        if not redis_only:
            print(f"malloc(64)+free pairs in a tight loop (allocbench), ns per pair, median of "
                  f"{rounds} rounds x {PAIRS} pairs, variants in random order each round:")
        for name, preload in ({} if redis_only else ALLOCATORS).items():
            results, emulated, probed, model = alloc_loop(name, preload, rounds)
            base = statistics.median(results["untraced"])
            entry = statistics.median(results["heaptap --probe-at entry"])
            print(f"\n{name} ({emulated} of {probed} planned sites emulated; heaptap -v's "
                  f"model of a pair's traps at them: "
                  f"{f'{model:.0f} ns' if model else 'not printed'})")
            print(f"  {'':34} {'ns/pair':>9} {'x untraced':>11} {'x heaptap@entry':>16}")
            for v, ns in results.items():
                m = statistics.median(ns)
                print(f"  {v:34} {m:9.0f} {m / base:11.1f} {m / entry:16.2f}")
            floor = statistics.median(results["empty programs, planned sites"])
            print("  x the empty programs at the planned sites: " +
                  ", ".join(f"{v} {statistics.median(results[v]) / floor:.2f}"
                            for v in (ONE_READ, "heaptap, planned sites", AGAINST)
                            if v in results))
        results = redis(rounds)
        base = statistics.median(r for r, _ in results["untraced"])
        print(f"\nredis-server (jemalloc), redis-benchmark -t set -r {REDIS_KEYSPACE} -n "
              f"{REDIS_REQUESTS} ({REDIS_REQUESTS_SLOW} at the entries), 50 clients, a fresh "
              f"server per run, median of {rounds} rounds in random order:")
        print(f"  {'':34} {'SET/s':>9} {'x untraced':>11}   (each run)")
        for v, runs in results.items():
            m = statistics.median(r for r, _ in runs)
            each = ", ".join(f"{r:.0f}" for r, _ in runs)
            print(f"  {v:34} {m:9.0f} {m / base:11.3f}   ({each})")
        runs = [d for _, d in results["heaptap, planned sites"]]
        calls = {f: statistics.median(d["calls"].get(f, 0) for d in runs) for f in runs[0]["calls"]}
        print("  heaptap at its planned sites, per SET: " +
              ", ".join(f"{c:.2f} {f}" for f, c in sorted(calls.items(), key=lambda x: -x[1])))
        floor = statistics.median(r for r, _ in results["empty programs, planned sites"])
        read = [d["programs"].get("read_word", (0, 0)) for _, d in results[ONE_READ]]
        print(f"  one read of the stack a call keeps "
              f"{statistics.median(r for r, _ in results[ONE_READ]) / floor:.3f} of the floor; "
              f"the read, ns a run (bpf_stats): "
              f"{statistics.median(t / n for n, t in read if n):.0f}")
        for v, who in [("heaptap, planned sites", "its"), (AGAINST, f"{against}'s")] + \
                [(f"{DEPTH}{d}", f"--stack-depth {d}'s") for d in depths] + \
                [(SAMPLED + str(sample), f"--sample {sample}'s"),
                 (f"{AGAINST}, --sample {sample}", f"{against} --sample {sample}'s")]:
            if v not in results:
                continue
            runs = [d for _, d in results[v]]
            ns = {p: statistics.median(d["programs"][p][1] / d["programs"][p][0] for d in runs
                                       if d["programs"].get(p, (0,))[0]) for p in PROGRAMS}
            print(f"  {who} programs, ns a run (bpf_stats): " +
                  ", ".join(f"{p} {v:.0f}" for p, v in ns.items()))
            traced = statistics.median(r for r, _ in results[v])
            print(f"  {v} keeps {traced / floor:.3f} of what empty programs at its sites leave "
                  f"(its entries and returns: the floor; entries alone leave more, but heaptap "
                  f"needs the returns)")
    lib.end_started()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
