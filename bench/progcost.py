#!/usr/bin/env python3
"""Where heaptap's time per allocation goes, program by program, as the kernel counts it:
sudo python3 bench/progcost.py [PAIRS] [ROUNDS] [--against PATH] (defaults 200000 and 3)

bench/targets/allocbench's tight malloc(64)+free loop (one path, -O2, no frame pointers),
traced in full mode with each variant below, in rounds whose order is drawn at random. For
each, the loop's ns per pair against untraced, and from the kernel's run-time statistics
(bpf_enable_stats, on while heaptap runs with --live; here turned on with the sysctl for the
run) each of heaptap's programs' runs and ns per run. What is left of a pair's time is the
kernel's: the traps and the return trampoline.

Variants: dwarf stacks (the default on this target), frame-pointer stacks, sampled (--sample
64k: most calls skip the stack), --stack-depth 1 (a stack of the caller alone). And two that
are not heaptap, at heaptap's planned sites (bench/probecost): empty programs, the traps
alone, against which full mode is measured; and programs that read the word at the stack
pointer at each entry, the least any stack costs. And empty programs at the planned entries
alone, no return probed: the least a call can cost that skips its return's trap (what an
uprobe session's entry could tell the kernel for a call not sampled), over the three-site
floor. Where the kernel has uprobe sessions (6.13 and later), two more: a session's empty
program at each allocating function (an empty probe at free), returning 1 at the entry (no
return trap: what every call not sampled would cost) or 0 (the return runs it again: what a
sampled call would). --against PATH adds each heaptap variant
again with that build of heaptap (an older one), in the same random order; no record of such
a run is checked against the schema.
"""
import contextlib
import json
import os
import random
import re
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import lib  # noqa: E402
import results as results_md  # noqa: E402
from sites import empty_probes, end_probes  # noqa: E402

ALLOCBENCH = os.path.join(lib.BUILD, "bench", "allocbench")
EMPTY = "empty programs, planned sites"
ONE_READ = "one read a call, planned sites"
ENTRIES = "empty programs, planned entries only"
SESSION_SKIP = "sessions returning 1, planned sites"
SESSION_RUN = "sessions returning 0, planned sites"
PROBECOST_MODES = {SESSION_SKIP: "--session-skip", SESSION_RUN: "--session-run"}
VARIANTS = {
    "dwarf": [],
    "fp": ["--stack", "fp"],
    "sampled 64k": ["--sample", "64k"],
    "depth 1": ["--stack-depth", "1"],
}


def program_ids(pid):
    """The ids of the BPF programs process pid holds open (its /proc/PID/fdinfo)."""
    ids = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") != "anon_inode:bpf-prog":
                continue
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                ids |= {int(line.split()[1]) for line in f if line.startswith("prog_id:")}
        except OSError:
            pass
    return ids


@contextlib.contextmanager
def bpf_stats():
    """The kernel's run-time statistics of BPF programs, on while in the block."""
    with open("/proc/sys/kernel/bpf_stats_enabled") as f:
        was = f.read().strip()
    with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
        f.write("1")
    try:
        yield
    finally:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write(was)


def maps_held(pid):
    """The BPF maps process pid holds open (its file descriptors' map ids), as bpftool shows
    them."""
    ids = set()
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                ids.update(int(line.split()[1]) for line in f if line.startswith("map_id:"))
        except OSError:
            pass
    maps = json.loads(subprocess.run(["bpftool", "-j", "map", "show"], capture_output=True,
                                     text=True, check=True).stdout)
    return [m for m in maps if m["id"] in ids]


def programs(ht_pid):
    """heaptap's uprobe programs, by name: (runs, run time ns)."""
    ids = program_ids(ht_pid)
    out = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True)
    return {p["name"]: (p.get("run_cnt", 0), p.get("run_time_ns", 0))
            for p in json.loads(out.stdout or "[]")
            if p.get("type") == "kprobe" and p.get("id") in ids}


def ns_per_pair(target, pairs):
    return float(re.search(r"ns_per_pair=([\d.]+)", target.do(f"tight {pairs}",
                                                              timeout=600)).group(1))


def planned_sites(pid):
    """heaptap's planned sites in process pid: [(file, offset, return?)]."""
    ht = lib.Heaptap(["-p", str(pid), "-i", "1h"])
    attached = ht.attached()
    ht.finish()
    return [(p["path"], p["offset"], p["return"]) for p in attached["probes"]
            if p["kind"] != "unwind"]


def sessions():
    """Whether the running kernel has uprobe sessions (its BTF names the attach type)."""
    out = subprocess.run(["bpftool", "btf", "dump", "file", "/sys/kernel/btf/vmlinux"],
                         capture_output=True, text=True)
    return "'BPF_TRACE_UPROBE_SESSION'" in out.stdout


def main(argv):
    builds = {"": lib.HEAPTAP}
    against = lib.take_against(argv)
    if against:
        builds[f" ({against})"] = against
    variants = {v + b: (args, path) for b, path in builds.items()
                for v, args in VARIANTS.items()}
    pairs = int(argv[0]) if argv else 200000
    rounds = int(argv[1]) if len(argv) > 1 else 3
    others = [EMPTY, ONE_READ, ENTRIES] + (list(PROBECOST_MODES) if sessions() else [])
    results = {v: [] for v in ["untraced"] + others + list(variants)}
    with bpf_stats():
        target = lib.Target(ALLOCBENCH)
        try:
            sites = planned_sites(target.target_pid)
            for _ in range(rounds):
                order = list(results)
                random.shuffle(order)
                for v in order:
                    if v == "untraced":
                        results[v].append((ns_per_pair(target, pairs), {}))
                        continue
                    if v in others:
                        proc = empty_probes(target.target_pid,
                                            [(f, o, r and v != ENTRIES) for f, o, r in sites],
                                            v == ONE_READ, PROBECOST_MODES.get(v))
                    else:
                        lib.HEAPTAP = variants[v][1]
                        proc = lib.Heaptap(["-p", str(target.target_pid), "-i", "1h"]
                                           + variants[v][0])
                        proc.attached()
                    before = programs(proc.pid)
                    ns = ns_per_pair(target, pairs)
                    after = programs(proc.pid)
                    if v in others:
                        end_probes(proc)
                    else:
                        proc.finish()
                    results[v].append((ns, {k: (after[k][0] - before.get(k, (0, 0))[0],
                                                after[k][1] - before.get(k, (0, 0))[1])
                                            for k in after}))
        finally:
            target.end()
    with results_md.section("progcost", "against" if len(builds) > 1 else None):
        base = statistics.median(r[0] for r in results["untraced"])
        programs_ns, traps_ns = {}, {}
        print(f"{rounds} rounds of {pairs} malloc(64)+free pairs, variants in random order; "
              f"medians. Untraced: {base:.0f} ns per pair")
        for v in others + list(variants):
            ns = statistics.median(r[0] for r in results[v])
            print(f"\n{v}: {ns:.0f} ns per pair ({min(r[0] for r in results[v]):.0f}-"
                  f"{max(r[0] for r in results[v]):.0f}), {ns / base:.0f}x untraced")
            names = sorted({k for r in results[v] for k in r[1]})
            in_programs = 0
            for name in names:
                runs = [r[1][name][0] for r in results[v] if name in r[1]]
                per = [r[1][name][1] / r[1][name][0] for r in results[v]
                       if name in r[1] and r[1][name][0]]
                if not per:
                    continue
                per_pair = statistics.median(runs) / pairs * statistics.median(per)
                in_programs += per_pair
                print(f"  {name:24} {statistics.median(runs) / pairs:5.2f} runs per pair, "
                      f"{statistics.median(per):7.0f} ns per run, {per_pair:7.0f} ns per pair")
            print(f"  {'in its programs':24} {in_programs:7.0f} ns per pair; the rest, "
                  f"{ns - base - in_programs:.0f} ns, the kernel's traps and trampoline")
            programs_ns[v] = in_programs
            traps_ns[v] = ns - base - in_programs
        # The floor: the traps at the planned sites, with empty programs in them. Each
        # variant's traps as it measured them (they move between variants by more than the
        # programs do), plus its programs, against them with the empty programs'.
        print("\nx the empty programs at the planned sites: by the kernel's times (the "
              "variant's traps and programs over the same traps and the empty programs), and "
              "by the loop's ns per pair")
        empty_ns = statistics.median(r[0] for r in results[EMPTY])
        for v in [ONE_READ] + list(variants):
            by_kernel = (traps_ns[v] + programs_ns[v]) / (traps_ns[v] + programs_ns[EMPTY])
            by_loop = statistics.median(r[0] for r in results[v]) / empty_ns
            print(f"  {v:36} {by_kernel:5.2f} {by_loop:6.2f}   (programs: "
                  f"{programs_ns[v] - programs_ns[EMPTY]:+.0f} ns a pair)")
        # The traps' cost moves between rounds by more than these variants differ: each
        # against the floor of its own round too.
        print("\nx the floor by the loop's ns per pair, medians' ratio; the median (and range) "
              "of each round's ratio to that round's floor:")
        for v in others[2:]:
            per_round = sorted(r[0] / e[0] for r, e in zip(results[v], results[EMPTY]))
            print(f"  {v:36} {statistics.median(r[0] for r in results[v]) / empty_ns:5.2f} "
                  f"{statistics.median(per_round):6.2f} ({per_round[0]:.2f}-{per_round[-1]:.2f})")
        print("  (no return probed at all: a call that skips its return costs no less)")
    lib.end_started()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
