#!/usr/bin/env python3
"""Does --live keep its budget, as the target measures it? Side by side in one run:
sudo python3 bench/live_budget.py [SECONDS] [ROUNDS] [TARGET,...] [--against PATH]
                                  [--variants NAME,...]
(defaults 60, 3, all; --against: the --live variants with another build of heaptap too;
--variants: these only, e.g. "live 5%,live 2%" for long rounds of redis_paired, whose
untraced variant only measures the pairing; the other targets keep theirs)

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

A fourth target, "redis_paired", does the same for redis: two redis-servers, fresh for each
variant, pinned to one CPU, each under a redis-benchmark of its own (SET, random keys) pinned
with heaptap and this script to the other CPU; one traced, the other not, for SECONDS, then
the roles swapped on the same two servers. Each server's rate is its commands processed
(INFO's count, read at both ends of the run) per second of its own CPU time (every thread's
schedstat: the traps and heaptap's programs run in it, so the figure does not depend on how
the scheduler shared the CPU or on what else ran meanwhile), and per wall second beside it
(which also sees a server kept waiting without running: a lock heaptap's reads hold). The
geometric mean of the two runs' ratios cancels the two servers' own difference. Its untraced
variant runs both servers untraced the same way: how far from 1 the pairing itself is.
"""
import os
import random
import socket
import statistics
import subprocess
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
    """heaptap attached to pid with args; args that begin with a path: that build of it."""
    if args is None:
        return None
    binary = lib.HEAPTAP
    if args and os.path.isabs(args[0]):
        lib.HEAPTAP, args = args[0], args[1:]
    try:
        ht = lib.Heaptap(["-p", str(pid), "-i", "5s", "--top", "3"] + args)
    finally:
        lib.HEAPTAP = binary
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


def redis_counters(conn, pid):
    """A server's (commands processed, CPU seconds of all its threads, minor faults)."""
    conn.sendall(b"INFO stats\r\n")
    data = b""
    while not data.endswith(b"\r\n") or data.count(b"\r\n") < 2 or \
            len(data) < int(data[1:data.index(b"\r\n")]) + data.index(b"\r\n") + 4:
        more = conn.recv(65536)
        if not more:
            raise RuntimeError(f"redis (PID {pid}) closed the connection: {data[:200]!r}")
        data += more
    done = int(data.split(b"total_commands_processed:")[1].split(b"\r\n")[0])
    cpu = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        cpu += cpu_time(f"{pid}/task/{tid}")
    with open(f"/proc/{pid}/stat") as f:
        faults = int(f.read().rsplit(")", 1)[1].split()[7])
    return done, cpu, faults


def redis_pair(seconds, args, servers, traced_one):
    """servers[traced_one] traced with args (None: neither) while both serve their own
    redis-benchmark for seconds: per server (commands per CPU second, per wall second, minor
    faults a thousand commands), and heaptap's final record."""
    ht = traced(servers[traced_one][0].pid, args)
    loads = []
    try:
        for server, port, _ in servers:
            loads.append(subprocess.Popen(
                ["redis-benchmark", "-p", str(port), "-t", "set", "-r", "100000000",
                 "-n", "2000000000", "-q"], stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(2)
        before = [redis_counters(conn, server.pid) for server, _, conn in servers]
        start = time.monotonic()
        time.sleep(seconds)
        after = [redis_counters(conn, server.pid) for server, _, conn in servers]
        wall = time.monotonic() - start
        final = finish(ht) if ht else None
        ht = None
    finally:
        for b in loads:
            b.kill()
            b.wait()
        if ht:
            ht.end()
    rates = []
    for b, a in zip(before, after):
        done = a[0] - b[0]
        rates.append((done / (a[1] - b[1]), done / wall, (a[2] - b[2]) * 1000 / done,
                      (a[1] - b[1]) / wall))
    return rates, final


def redis_paired(seconds, args, workdir):
    """redis traced against itself untraced, at once and on one CPU: the geometric mean of the
    two orders' ratios per CPU second, with the per wall second one, the first run's final
    record."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise lib.Failure("the paired runs need two CPUs: one for the servers, one for the rest")
    servers = []
    os.sched_setaffinity(0, set(cpus[1:]))
    try:
        for i in range(2):
            port = free_port()
            server = start_server("redis-server", [
                "redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", workdir, "--dbfilename", f"pair{i}.rdb"], port,
                preexec_fn=lambda: os.sched_setaffinity(0, {cpus[0]}))
            servers.append((server, port, socket.create_connection(("127.0.0.1", port))))
        cpu_ratios, wall_ratios, first = [], [], None
        for traced_one in (0, 1):
            rates, final = redis_pair(seconds, args, servers, traced_one)
            first = first or final
            t, u = rates[traced_one], rates[1 - traced_one]
            print(f"  server {traced_one} {'traced' if args else 'as traced'}: per CPU s "
                  f"{t[0]:.0f}/{u[0]:.0f}, per wall s {t[1]:.0f}/{u[1]:.0f}, CPU shares "
                  f"{t[3]:.3f}/{u[3]:.3f}, minor faults a 1000 commands "
                  f"{t[2]:.3f}/{u[2]:.3f}", flush=True)
            cpu_ratios.append(t[0] / u[0])
            wall_ratios.append(t[1] / u[1])
    finally:
        os.sched_setaffinity(0, set(cpus))
        for server, _, conn in servers:
            conn.close()
            server.end()
    gm = lambda r: (r[0] * r[1]) ** 0.5  # noqa: E731
    return gm(cpu_ratios), first, gm(wall_ratios)


def uptime():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main(argv):
    if "--against" in argv:
        i = argv.index("--against")
        against = os.path.abspath(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
        for v in ("live 5%", "live 2%"):
            VARIANTS["against " + v] = [against] + VARIANTS[v]
            BUDGETS["against " + v] = BUDGETS[v]
    keep = None
    if "--variants" in argv:
        i = argv.index("--variants")
        keep = argv[i + 1].split(",")
        argv = argv[:i] + argv[i + 2:]
    seconds = float(argv[0]) if argv else 60
    rounds = int(argv[1]) if len(argv) > 1 else 3
    targets = argv[2].split(",") if len(argv) > 2 else ["redis", "tight", "paired",
                                                        "redis_paired"]
    if keep:
        unknown = [v for v in keep if v not in VARIANTS]
        if unknown:
            print(f"no such variant: {', '.join(unknown)} (there are {', '.join(VARIANTS)})")
            return 2
        # The other targets' ratios are over the round's untraced run.
        if any(t != "redis_paired" for t in targets):
            keep.append("untraced")
        for v in list(VARIANTS):
            if v not in keep:
                del VARIANTS[v]
    if os.geteuid() != 0:
        print("the benchmark attaches BPF programs: run it as root")
        return 1
    results = {}  # (target, variant) -> [(ratio, estimate, found, own CPU)]
    with tempfile.TemporaryDirectory(prefix="heaptap-budget-") as workdir:
        for r in range(rounds):
            order = [(t, v) for t in targets for v in VARIANTS]
            random.shuffle(order)
            rates = {}
            loop = [lib.Target(ALLOCBENCH)] if "tight" in targets else []
            pair = [lib.Target(ALLOCBENCH), lib.Target(ALLOCBENCH)] if "paired" in targets \
                else []
            for t, v in order:
                if t == "redis":
                    run = redis(seconds, VARIANTS[v], workdir)
                elif t == "tight":
                    run = tight(seconds, VARIANTS[v], loop[0])
                elif t == "paired":
                    run = paired(seconds, VARIANTS[v], pair)
                else:
                    run = redis_paired(seconds, VARIANTS[v], workdir)
                rates[(t, v)] = run
                if t == "redis_paired":
                    print(f"round {r + 1}: {t} {v}: {run[0]:.3f} per CPU s, {run[2]:.3f} per "
                          f"wall s; uptime: {uptime()}", flush=True)
                else:
                    print(f"round {r + 1}: {t} {v}: {run[0]:.3f}" if t == "paired" else
                          f"round {r + 1}: {t} {v}: {run[0]:.0f}/s", flush=True)
            for p in loop + pair:
                p.end()
            for (t, v), (rate, final, found) in rates.items():
                wall = found if t == "redis_paired" else None
                est = final["live"]["slowdown"] if final and "live" in final else None
                own = final["live"].get("own_cpu") if final and "live" in final else None
                # redis_paired's figures are ratios already, its untraced one measured.
                ratio = rate if t == "redis_paired" else rate / rates[(t, "untraced")][0]
                found = None if t == "redis_paired" else found
                results.setdefault((t, v), []).append((ratio, est, found, own, wall))
    # Rounds of another length keep a section of their own.
    variant = ", ".join(([argv[2]] if len(argv) > 2 else []) +
                        ([f"{seconds:g} s"] if seconds != 60 else [])) or None
    with results_md.section("live_budget", variant):
        print(f"\n{rounds} rounds of {seconds:.0f} s each, variants in random order; throughput "
              f"against the same round's untraced run: median (min-max)")
        print(f"{'target':12} {'variant':16} {'x untraced':>22} {'floor':>6} {'held':>5} "
              f"{'heaptap says':>14} {'growth on top after':>20}")
        for (t, v), rows in sorted(results.items()):
            if v == "untraced":
                if t == "redis_paired":
                    ratios = [x[0] for x in rows]
                    print(f"{t:12} {v:16} {statistics.median(ratios):8.3f} ({min(ratios):.3f}-"
                          f"{max(ratios):.3f})  (the pairing's own error)")
                continue
            ratios = [x[0] for x in rows]
            floor = 1 - BUDGETS[v] - 0.02
            held = sum(x >= floor for x in ratios)
            ests = [x[1] for x in rows if x[1] is not None]
            found = [x[2] for x in rows]
            on_top = ", ".join("-" if f is None else f"{f:.0f} s" for f in found) \
                if t == "redis" else ""
            print(f"{t:12} {v:16} {statistics.median(ratios):8.3f} ({min(ratios):.3f}-"
                  f"{max(ratios):.3f}) {floor:6.2f} {held:>2}/{len(rows)} "
                  f"{statistics.median(ests) * 100 if ests else 0:13.1f}% {on_top:>20}")
        paired_rows = [(v, i, x) for (t, v), rows in sorted(results.items())
                       if t == "redis_paired" and v != "untraced" for i, x in enumerate(rows)]
        if paired_rows:
            print("\nredis_paired by round: the loss measured (1 - x untraced per CPU second, "
                  "and per wall second) against heaptap's estimate")
            print(f"{'variant':16} {'round':>5} {'loss CPU':>9} {'loss wall':>9} "
                  f"{'heaptap says':>12} {'off by':>7}")
            for v, i, x in paired_rows:
                est = x[1] if x[1] is not None else float("nan")
                print(f"{v:16} {i + 1:5} {(1 - x[0]) * 100:8.1f}% {(1 - x[4]) * 100:8.1f}% "
                      f"{est * 100:11.1f}% {(1 - x[0] - est) * 100:6.1f}")
        print(f"\nheaptap's own CPU time in a run (what the budget counts of it, where it "
              f"shares CPUs with the target), by activity: median over the rounds, seconds")
        kinds = ("attach_s", "detach_s", "report_s", "other_s", "total_s")
        print(f"{'target':12} {'variant':16} " + " ".join(f"{k[:-2]:>8}" for k in kinds))
        for (t, v), rows in sorted(results.items()):
            owns = [x[3] for x in rows if x[3]]
            if v == "untraced" or not owns:
                continue
            print(f"{t:12} {v:16} " + " ".join(
                f"{statistics.median(o[k] for o in owns):8.3f}" for k in kinds))
    lib.end_started()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
