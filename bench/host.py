#!/usr/bin/env python3
"""The host's agent (issue 27): what it costs a loaded server, and its own memory over a long
run: sudo python3 bench/host.py [SECONDS] [ROUNDS] | soak [MINUTES [cgroup]]

Cost (defaults 60 s, 3 rounds): redis-server under redis-benchmark's SETs (-t set -r 1000000,
chunks of 50,000 requests, for SECONDS after a warm-up of 500,000), from a fresh start each
run, in a cgroup of the bench's own, in three variants: untraced; `heaptap --all -i 1s
--max-traced 0`, every process of the host watched from /proc and by the agent's programs on
the scheduler's fork, exec and exit tracepoints, nothing traced (the goal: at least 0.98 of the
untraced throughput); and `heaptap --cgroup CG -i 1s --max-traced 1` on the cgroup that holds
redis alone, redis escalated to `--live` within the default budget of 5% (the goal: at least
0.95). The third watches the cgroup rather than the host so that redis, not another process of
a shared machine (a test's leaking target), is the one escalated; watching one process from
/proc costs less than watching all of them, so its ratio is the cost of the escalation, and the
second variant's shortfall is what --all adds to it. Its warm-up goes on until redis is traced;
the run then prints in how many of the agent's reports during the measurement redis's tier was
"live", and how its escalation ended if it did. -i 1s reads /proc five times as often as the
default. Every round runs the three in an order drawn at random. Per variant: the throughput
against the same round's untraced run (median, min-max), heaptap's CPU time during the
measurement (the agent's and its escalation's, from its host records), the agent's RSS, the
traced heaptap's RSS, and the largest share of the budget spent.

Soak (default 10 minutes): `heaptap --all -i 1s --max-traced 1 --escalation-time 2m` for
MINUTES while tests/targets/spawnstorm forks 100 short processes a second and /bin/true is run
10 times a second (forks, execs and exits), and a leaking tests/targets/hostproc (200 KB/s) is
escalated and brought back again and again: each one ended once its escalation has ended, a new
one started. The agent's RSS (/proc/PID/status) at its first report, every minute and at the
end; its memory is flat when it stays within 5% from minute 2 to the end. With `cgroup`, the
agent watches a cgroup of the bench's own, which holds these processes (on a machine whose
other processes must not be traced).
"""
import os
import random
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
from live import drain, free_port, load, start_server  # noqa: E402
from soak import vm_rss  # noqa: E402
from test_host import Cgroup, end_cgroups, finish, host_record, row, tiers  # noqa: E402

BUDGET = 0.05
GOALS = {"--all, nothing traced": 0.98, "--cgroup, redis traced": 1 - BUDGET}
KEYSPACE = 1000000
CHUNK = 50000
WARMUP = 500000
TRACE_WAIT = 60
STORM_RATE = 100
EXEC_RATE = 10
LEAK = ["50", "4000"]


def agent_args(variant, cgroup):
    if variant == "--all, nothing traced":
        return ["--all", "-i", "1s", "--top", "3", "--max-traced", "0"]
    return ["--cgroup", cgroup, "-i", "1s", "--top", "3", "--max-traced", "1",
            "--max-overhead", f"{BUDGET * 100:g}"]


def keep_stderr(ht):
    """Reads the agent's standard error as it comes (its tier changes), so that a long run
    never fills the pipe and stops it; the lines read."""
    lines = []

    def read():
        for line in ht.popen.stderr:
            lines.append(line.decode(errors="replace").rstrip("\n"))
    threading.Thread(target=read, daemon=True).start()
    return lines


class Reports:
    """The agent's records as they are read: redis's tier in its host records, heaptap's own
    figures in them."""

    def __init__(self, pid):
        self.pid = pid
        self.last = None
        self.reports = self.live = 0
        self.spent = self.rss = self.traced_rss = 0.0

    def take(self, recs, measuring):
        for rec in recs:
            if rec["type"] != "host" or rec["final"]:
                continue
            self.last = rec
            if not measuring:
                continue
            me = rec["heaptap"]
            p = row(rec, self.pid)
            self.reports += 1
            self.live += bool(p and p["tier"] == "live")
            self.spent = max(self.spent, me["spent"])
            self.rss = max(self.rss, me["rss_bytes"])
            self.traced_rss = max(self.traced_rss, me["traced_rss_bytes"])

    def tier(self):
        p = self.last and row(self.last, self.pid)
        return p["tier"] if p else None


def cost_run(variant, seconds, workdir):
    """One fresh redis-server loaded for `seconds` after the warm-up: requests per second, and
    for a variant with the agent, what its records said."""
    cg = Cgroup("bench-redis")
    agent = None
    try:
        port = free_port()
        server = start_server("redis-server", [
            "redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--dir", workdir], port)
        with open(os.path.join(cg.path, "cgroup.procs"), "w") as f:
            f.write(str(server.pid))
        seen = Reports(server.pid)
        if variant != "untraced":
            agent = lib.Heaptap(agent_args(variant, cg.path))
            keep_stderr(agent)
            seen.take([host_record(agent, what="the agent's first report")], False)
        start, done = time.monotonic(), 0
        while done < WARMUP or (variant == "--cgroup, redis traced" and seen.tier() != "live"
                                and time.monotonic() - start < TRACE_WAIT):
            done += load(port, "set", CHUNK, KEYSPACE)[0]
            if agent:
                seen.take(drain(agent), False)
        traced_after = time.monotonic() - start if seen.tier() == "live" else None
        cpu0 = seen.last["heaptap"]["cpu_s"] if seen.last else 0
        start, done, spent = time.monotonic(), 0, 0.0
        while time.monotonic() - start < seconds:
            n, t = load(port, "set", CHUNK, KEYSPACE)
            done += n
            spent += t
            if agent:
                seen.take(drain(agent), True)
        out = {"rate": done / spent}
        if agent:
            cpu = seen.last["heaptap"]["cpu_s"] - cpu0
            final, status = finish(agent)
            if status != 0:
                raise lib.Failure(f"the agent's exit status: {status}")
            out.update(cpu=cpu, seconds=time.monotonic() - start, seen=seen,
                       traced_after=traced_after,
                       downs=[t["reason"] for t in tiers(agent, server.pid, "proc")])
        server.end()
        return out
    finally:
        if agent:
            agent.end()
        end_cgroups()


def cost(seconds, rounds):
    variants = ["untraced"] + list(GOALS)
    results = {v: [] for v in variants}
    with tempfile.TemporaryDirectory(prefix="heaptap-host-") as workdir:
        for r in range(rounds):
            order = variants[:]
            random.shuffle(order)
            runs = {}
            for v in order:
                runs[v] = cost_run(v, seconds, workdir)
                line = f"round {r + 1}: {v}: {runs[v]['rate']:.0f}/s"
                if "seen" in runs[v]:
                    s = runs[v]["seen"]
                    line += f", heaptap {runs[v]['cpu']:.2f} s CPU"
                    if v == "--cgroup, redis traced":
                        line += (f", redis live in {s.live} of {s.reports} reports during the "
                                 f"measurement" + "".join(f"; back to proc: {d}"
                                                          for d in runs[v]["downs"]))
                print(line, flush=True)
            for v in variants:
                runs[v]["ratio"] = runs[v]["rate"] / runs["untraced"]["rate"]
                results[v].append(runs[v])
    with results_md.section("host"):
        print(f"\n{rounds} rounds of {seconds:.0f} s each, variants in random order; "
              f"redis-server (a fresh one each run) under redis-benchmark -t set -r {KEYSPACE} "
              f"in chunks of {CHUNK}, after a warm-up of {WARMUP} requests (and, traced, until "
              f"redis was); throughput against the same round's untraced run: median (min-max)")
        print(f"{'variant':24} {'requests/s':>10} {'x untraced':>22} {'goal':>5} {'met':>5} "
              f"{'heaptap CPU':>12} {'agent RSS':>10} {'traced RSS':>11} {'spent':>6}")
        for v, runs in results.items():
            ratios = [x["ratio"] for x in runs]
            line = (f"{v:24} {statistics.median(x['rate'] for x in runs):10.0f} "
                    f"{statistics.median(ratios):8.3f} ({min(ratios):.3f}-{max(ratios):.3f})")
            if v in GOALS:
                met = sum(x >= GOALS[v] for x in ratios)
                cpu = statistics.median(x["cpu"] / x["seconds"] for x in runs)
                line += (f" {GOALS[v]:5.2f} {met:>2}/{len(runs)} {cpu * 100:11.2f}% "
                         f"{statistics.median(x['seen'].rss for x in runs) / 2**20:6.1f} MiB "
                         f"{statistics.median(x['seen'].traced_rss for x in runs) / 2**20:7.1f} "
                         f"MiB {max(x['seen'].spent for x in runs) * 100:5.2f}%")
            print(line)
        print("\nheaptap CPU: its CPU time during the measurement (the agent's and its "
              "escalation's) over the measurement's time; RSS: the largest in its reports; "
              "spent: the largest share of the budget its reports said")
        for x in results["--cgroup, redis traced"]:
            s = x["seen"]
            after = f"{x['traced_after']:.0f} s" if x["traced_after"] is not None else \
                f"not within {WARMUP} requests and {TRACE_WAIT} s"
            print(f"redis traced after {after} of load; live in {s.live} of {s.reports} reports "
                  f"during the measurement" + "".join(f"; back to proc: {d}" for d in x["downs"]))
    lib.end_started()
    return 0


class Stream:
    """A thread doing one thing again and again until stopped; the errors it met."""

    def __init__(self, step):
        self.step, self.stopped, self.errors, self.count = step, threading.Event(), [], 0
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stopped.is_set() and len(self.errors) < 20:
            try:
                self.count += self.step(self.stopped)
            except Exception as e:  # noqa: BLE001 -- said at the end
                self.errors.append(repr(e))

    def stop(self):
        self.stopped.set()
        self.thread.join(timeout=60)


def soak(minutes, scope):
    cg = Cgroup("bench-soak")
    agent, streams = None, []
    try:
        storm = lib.Target("spawnstorm", preexec_fn=cg.join)
        streams.append(Stream(lambda stop: int(storm.do(f"storm {STORM_RATE} 5", timeout=60))))

        def run_true(stop):
            subprocess.run(["/bin/true"], preexec_fn=cg.join, check=True)
            stop.wait(1 / EXEC_RATE)
            return 1
        streams.append(Stream(run_true))
        agent = lib.Heaptap((["--all"] if scope == "all" else ["--cgroup", cg.path]) +
                            ["-i", "1s", "--top", "3", "--max-traced", "1",
                             "--escalation-time", "2m"])
        keep_stderr(agent)
        leaker = lib.Target("hostproc", args=LEAK, preexec_fn=cg.join)
        first = host_record(agent, what="the agent's first report")
        start = time.monotonic()
        samples = [(0.0, vm_rss(agent.pid), first["heaptap"]["rss_bytes"])]
        outcomes, leakers = [], 1
        with results_md.section("host", "soak" if scope == "all" else "soak, cgroup") as run:
            print(f"heaptap {'--all' if scope == 'all' else '--cgroup (its own)'} -i 1s "
                  f"--max-traced 1 --escalation-time 2m for {minutes:g} min; {STORM_RATE} forks "
                  f"a second (spawnstorm), {EXEC_RATE} runs of /bin/true a second, a leaking "
                  f"hostproc {' '.join(LEAK)} replaced once its escalation ends")
            print(f"{'min':>5} {'VmRSS':>10} {'its RSS':>10} {'seen':>8} {'exited':>8} "
                  f"{'lost':>5} {'escalations':>11} {'named':>5}")

            def show(m, rss, said, rec):
                p, e = rec["processes"], rec["escalations"]
                print(f"{m:5.1f} {rss / 2**20:6.1f} MiB {said / 2**20:6.1f} MiB {p['seen']:8d} "
                      f"{p['exited']:8d} {p['lost_notices']:5d} {e['started']:11d} "
                      f"{e['named']:5d}", flush=True)
            show(0, samples[0][1], samples[0][2], first)
            rec, next_read = first, 1
            while time.monotonic() - start < minutes * 60:
                rec = host_record(agent, what="a report")
                down = tiers(agent, leaker.target_pid, "proc")
                if down:
                    outcomes.append(down[0]["reason"])
                    leaker.end()
                    leaker = lib.Target("hostproc", args=LEAK, preexec_fn=cg.join)
                    leakers += 1
                now = (time.monotonic() - start) / 60
                if now >= next_read:
                    samples.append((now, vm_rss(agent.pid), rec["heaptap"]["rss_bytes"]))
                    show(*samples[-1], rec)
                    next_read += 1
            end = (time.monotonic() - start) / 60
            if end - samples[-1][0] > 0.05:
                samples.append((end, vm_rss(agent.pid), rec["heaptap"]["rss_bytes"]))
                show(*samples[-1], rec)
            for s in streams:
                s.stop()
            final, status = finish(agent)
            agent = None
            e = final["escalations"]
            print(f"final: exit {status}; {final['processes']['seen']} processes seen, "
                  f"{final['processes']['lost_notices']} notices lost; {leakers} leakers, "
                  f"escalations {e['started']} started, {e['named']} named, {e['given_up']} "
                  f"given up, {e['failed']} failed, {e['ended']} ended by an exit; "
                  f"heaptap {final['heaptap']['cpu_s']:.1f} s CPU")
            for reason in sorted(set(outcomes)):
                print(f"  {outcomes.count(reason)} x {reason}")
            for s in streams:
                if s.errors:
                    print(f"  load errors: {s.errors[:3]}")
            growth = samples[-1][1] - samples[0][1]
            print(f"heaptap VmRSS {samples[0][1] / 2**20:.1f} MiB at its first report, "
                  f"{samples[-1][1] / 2**20:.1f} MiB at the end: {growth / 2**20:+.1f} MiB")
            steady = [rss for m, rss, _ in samples if m >= 2]
            if not steady:
                print("too short to judge: run it for more than 2 minutes")
                run.discard()
                return 1
            spread = (max(steady) - min(steady)) / min(steady)
            print(f"from minute 2: {min(steady) / 2**20:.1f} to {max(steady) / 2**20:.1f} MiB "
                  f"({spread * 100:.1f}%): {'flat' if spread <= 0.05 else 'NOT flat'} "
                  f"(within 5%)")
        return 0 if status == 0 and spread <= 0.05 else 1
    finally:
        for s in streams:
            s.stop()
        if agent:
            agent.end()
        lib.end_started()
        end_cgroups()


def main(argv):
    if os.geteuid() != 0:
        print("the benchmark attaches BPF programs: run it as root")
        return 1
    try:
        if argv and argv[0] == "soak":
            scope = argv[2] if len(argv) > 2 else "all"
            if scope not in ("all", "cgroup"):
                print(__doc__.splitlines()[1])
                return 2
            return soak(float(argv[1]) if len(argv) > 1 else 10, scope)
        return cost(float(argv[0]) if argv else 60, int(argv[1]) if len(argv) > 1 else 3)
    finally:
        lib.end_started()
        end_cgroups()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
