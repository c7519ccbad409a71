#!/usr/bin/env python3
"""Live and watch modes on a loaded server, side by side in one run:
sudo python3 bench/live.py [SECONDS]

For redis-server (SET with random keys: its key set grows) and bench/targets/leakserver
(PING; one request in 100 leaks a 160-byte session), each under redis-benchmark on loopback
for SECONDS (default 300) from a fresh start, three times: untraced, with `heaptap --live`,
with `heaptap --watch` (default settings otherwise). Per run: the throughput over the whole
run, the time until heaptap's top growing site is the leak, heaptap's own CPU and memory.
"""
import os
import re
import select
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import lib  # noqa: E402
import results as results_md  # noqa: E402


LEAKSERVER = os.path.join(lib.BUILD, "bench", "leakserver")


class Waited:
    """A child run to its end, with the CPU time and peak RSS the kernel kept for it."""

    def __init__(self, proc):
        _, status, usage = os.wait4(proc.pid, 0)
        proc.popen.returncode = os.waitstatus_to_exitcode(status)
        self.cpu = usage.ru_utime + usage.ru_stime
        self.max_rss = usage.ru_maxrss * 1024


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
CHUNK = 100000


def load(port, test, requests, keyspace):
    """One redis-benchmark run: (requests, seconds)."""
    args = ["redis-benchmark", "-p", str(port), "-t", test, "-n", str(requests), "-q"]
    if keyspace:
        args += ["-r", str(keyspace)]
    start = time.monotonic()
    out = subprocess.run(args, capture_output=True, text=True, timeout=300).stdout
    if not re.search(r"requests per second", out):
        raise lib.Failure(f"redis-benchmark: {out[-300:]!r}")
    return requests, time.monotonic() - start


def drain(ht):
    """Records heaptap has printed so far, without waiting."""
    out = []
    while select.select([ht.popen.stdout], [], [], 0)[0] or b"\n" in ht._buf:
        rec = ht.record(timeout=5)
        if rec is None:
            break
        out.append(rec)
    return out


def leak_on_top(rec, functions):
    sites = rec.get("sites") or []
    names = lib.functions(sites[0]) if sites else []
    return bool(sites) and any(f in names for f in functions), names


def start_server(name, argv, port, preexec_fn=None):
    server = lib.Proc(argv, stdin=subprocess.DEVNULL, preexec_fn=preexec_fn)
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return server
        except OSError:
            if time.monotonic() > deadline:
                raise lib.Failure(f"{name} did not start")
            time.sleep(0.05)


def run_case(name, server_argv, port, test, keyspace, functions, seconds, mode):
    """One fresh server loaded for `seconds`, untraced (mode None) or with heaptap."""
    server = start_server(name, server_argv, port)
    ht = None
    if mode:
        ht = lib.Heaptap(["-p", str(server.pid), mode, "-i", "10s", "--top", "3"])
        ht.attached()
    start = time.monotonic()
    done = spent = 0
    found = None
    top = []
    while time.monotonic() - start < seconds:
        if server.popen.poll() is not None:
            raise lib.Failure(f"{name} exited ({server.popen.returncode})")
        n, t = load(port, test, CHUNK, keyspace)
        done += n
        spent += t
        for rec in drain(ht) if ht else []:
            hit, names = leak_on_top(rec, functions)
            top = names
            if hit and found is None:
                found = rec["elapsed_s"]
    row = {"name": name, "mode": mode or "untraced", "rate": done / spent}
    if ht:
        os.kill(ht.pid, 2)
        while ht.record() is not None:
            pass
        waited = Waited(ht)
        elapsed = time.monotonic() - start
        final = [r for r in ht.records if r["type"] == "final"][-1]
        hit, names = leak_on_top(final, functions)
        if hit and found is None:
            found = final["elapsed_s"]
        row.update(found=found, top=names or top, cpu=waited.cpu / elapsed,
                   memory=waited.max_rss + final["heaptap"]["map_bytes"],
                   slowdown=final.get("live", {}).get("slowdown"))
    server.end()
    return row


def main(argv):
    seconds = float(argv[0]) if argv else 300
    if os.geteuid() != 0:
        print("the benchmark attaches BPF programs: run it as root")
        return 1
    cases = []
    with tempfile.TemporaryDirectory(prefix="heaptap-live-") as workdir:
        port = free_port()
        cases.append(("redis-server (SET, random keys)",
                      ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                       "--appendonly", "no", "--dir", workdir],
                      port, "set", 100000000,
                      # The key set: its entries and keys (dbAdd), and its values (made by the
                      # request parser, kept by the SET).
                      ["setGenericCommand", "dbAdd", "createEmbeddedStringObject"]))
        port = free_port()
        cases.append(("leakserver (PING, 1 in 100 leaks)", [LEAKSERVER, str(port), "100"],
                      port, "ping_inline", 0, ["remember_session"]))
        rows = [run_case(*case, seconds, mode) for case in cases
                for mode in (None, "--live", "--watch")]
    with results_md.section("live"):
        print(f"\n{seconds:.0f} s under redis-benchmark (chunks of {CHUNK} requests), each run "
              f"on a fresh server:")
        print(f"{'':36} {'mode':9} {'requests/s':>10} {'x untraced':>10} "
              f"{'leak on top after':>18} {'CPU':>6} {'memory':>10} {'est. slowdown':>13}")
        for r in rows:
            base = [x for x in rows if x["name"] == r["name"] and x["mode"] == "untraced"][0]
            line = (f"{r['name']:36} {r['mode']:9} {r['rate']:10.0f} "
                    f"{r['rate'] / base['rate']:10.3f}")
            if r["mode"] != "untraced":
                found = f"{r['found']:.0f} s" if r["found"] is not None else "not found"
                slow = f"{r['slowdown'] * 100:12.1f}%" if r["slowdown"] is not None else ""
                line += (f" {found:>18} {r['cpu'] * 100:5.1f}% {r['memory'] / 2**20:6.1f} MiB "
                         f"{slow}")
            print(line)
            if r["mode"] != "untraced":
                print(f"{'':46} top growing: {' <- '.join(str(f) for f in r['top'][:6])}")
    lib.end_started()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
