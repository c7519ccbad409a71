#!/usr/bin/env python3
"""heaptap --leak-check against Valgrind's memcheck, wall time: sudo python3 bench/memcheck.py

Debian programs on inputs large enough for their own work to show (a few seconds untraced at
most), each run untraced, under `heaptap --leak-check` (launched, checked at its exit) and
under `valgrind --leak-check=full --show-leak-kinds=all`, one after the other, with the same
environment (tests/test_memcheck.py's); the table gives the wall times, the slowdowns, and
whether the two LEAK SUMMARYs are equal (blocks and bytes per category). Timings in a VM are
noisy: compare the ratios of one run.
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import lib  # noqa: E402
import results as results_md  # noqa: E402
import test_memcheck as tm  # noqa: E402

PROGRAMS = [
    ("xz -6 of 8 MiB", ["xz", "-6", "-k", "-f", "-T1", "big.txt"]),
    ("sort of 400,000 lines", ["sort", "-o", "sorted.txt", "big.txt"]),
    ("sqlite3, 100,000 rows", ["sqlite3", ":memory:",
                               "create table t(a, b); with recursive c(x) as (select 1 union all "
                               "select x + 1 from c where x < 100000) insert into t select x, "
                               "hex(randomblob(16)) from c; create index i on t(b); "
                               "select count(*), max(b) from t;"]),
    ("python3, zlib and json", ["/usr/bin/python3", "-c",
                                "import json, zlib; d = [{'k': i, 'v': str(i) * 5} for i in "
                                "range(20000)]; print(len(zlib.compress(json.dumps(d).encode())))"]),
    ("perl, a hash of 50,000", ["perl", "-e", "my %h; $h{$_} = [$_, $_ * 2] for 1..50000; "
                                "print scalar(keys %h), qq(\\n)"]),
    ("jq over 2 MiB", ["jq", "[.[] | .v] | length", "big.json"]),
]


def make_inputs():
    work = tm.inputs()
    with open(os.path.join(work, "big.txt"), "w") as f:
        for i in range(400000):
            f.write(f"line {(i * 7919) % 400009} of the input, {i}\n")
    with open(os.path.join(work, "big.json"), "w") as f:
        f.write("[" + ",".join(f'{{"k": {i}, "v": "value {i}"}}' for i in range(60000)) + "]")
    return work


def untraced(cmd):
    import subprocess
    start = time.monotonic()
    subprocess.run(cmd, env=tm.environments()[1], cwd=tm.inputs(), capture_output=True,
                   timeout=600, check=True)
    return time.monotonic() - start


def main():
    if os.geteuid() != 0:
        print("the benchmark attaches BPF programs: run it as root")
        return 1
    make_inputs()
    with results_md.section("memcheck"):
        # What heaptap costs whatever the program: attaching and detaching, on /bin/true.
        _, _, fixed = tm.heaptap(["/bin/true"])
        print(f"heaptap on /bin/true (attach, exit check, detach): {fixed:.2f} s")
        print(f"{'program':26} {'untraced s':>10} {'heaptap s':>9} {'memcheck s':>10} "
              f"{'heaptap x':>9} {'memcheck x':>10}  summaries")
        for name, cmd in PROGRAMS:
            base = untraced(cmd)
            final, status, ht_s = tm.heaptap(cmd)
            expected, _, vg_s = tm.memcheck(cmd)
            got = tm.categories(final["leak_check"]) if final["leak_check"] else None
            same = "equal" if got == expected else f"differ: {got} {expected}"
            print(f"{name:26} {base:10.2f} {ht_s:9.2f} {vg_s:10.2f} {ht_s / base:9.1f} "
                  f"{vg_s / base:10.1f}  {same}", flush=True)
    lib.end_started()
    return 0


if __name__ == "__main__":
    sys.exit(main())
