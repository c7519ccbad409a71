"""Whole services: several processes in one session (-p lists), their children (--follow),
programs they exec, and programs started later (--comm): each process counted exactly, a
site of forked processes merged with per-process counts, exec'd programs' old blocks
dropped, never live or lost."""
import os
import re
import socket
import subprocess
import shutil
import time
import urllib.request

from lib import (SLOW, TARGETS, Failure, Heaptap, Target, check, check_true, functions,
                 private_program, probed_text_intact, scratch_dir, test)

LAUNCH = os.path.join(TARGETS, "launch")


def by_pid(rec):
    return {p["pid"]: p for p in rec["processes"]}


def figures(p, *keys):
    return tuple(p[k] for k in keys)


CHILDREN = 8
WORK_BLOCKS = CHILDREN * (CHILDREN + 1) // 2
CALLS = ("alloc_calls", "free_calls", "allocs", "frees", "alloc_bytes", "free_bytes",
         "unknown_frees", "inherited_frees")


def layout(pid):
    """Where a process's program is mapped."""
    with open(f"/proc/{pid}/maps") as f:
        return f.readline().split("-")[0]


def wait_record(ht, cond, what, timeout=30):
    """Interval records until one meets cond (within timeout seconds, lib.SLOW times that)."""
    timeout *= SLOW
    deadline = time.monotonic() + timeout
    rec = None
    while time.monotonic() < deadline:
        rec = ht.record()
        if rec is None:
            raise Failure(f"heaptap ended before {what}: {ht.stderr_text()}")
        if rec["type"] == "interval" and cond(rec):
            return rec
    raise Failure(f"no report within {timeout} s where {what}: processes "
                  f"{rec and rec['processes']}")


@test
def test_follow_counts_children_and_exec_per_process():
    """family.c under --follow: the parent's 3 blocks of 100 bytes; children 1..8 each free
    one of them (inherited, not unknown), allocate i x 1000 bytes and 7 they free; a ninth
    child allocates 5 x 333 bytes and execs launch.c (4242 + 3 x 17 bytes), traced through
    the exec without a gap (the same C library: its probes stay). Every figure is the
    program's, per process; the children's site is one, in 8 processes; each child is traced
    from its fork (its probes inherited), none late. A process outside the set never traps;
    the children's code is the file's again after detach."""
    follow_family()


def follow_family():
    """test_follow_counts_children_and_exec_per_process's run: the report after the exec."""
    family = Target("family", args=[LAUNCH])
    host = Target("family")   # the same program, outside the set
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    profile = os.path.join(scratch_dir("heaptap-services-"), "heap.pb.gz")
    ht = Heaptap(["-p", str(family.target_pid), "--follow", "-i", "200ms", "--listen",
                  f"127.0.0.1:{port}", "--pprof", profile, "--folded", profile + ".folded"])
    attached = ht.attached()
    family.do("alloc 3 100")
    kids = [int(x) for x in family.do(f"fork {CHILDREN}").split()]
    execed = int(family.do("exec"))
    # A child inherits its parent's probes as it is forked: it may allocate at once (the
    # burst test does); these wait only so that every report below lists them.
    wait_record(ht, lambda r: all(pid in by_pid(r) for pid in kids + [execed]),
                "the children are in")
    family.do("go")
    rec = wait_record(ht, lambda r: by_pid(r)[execed]["comm"] == "launch" and
                      by_pid(r)[execed]["live"] == 4, "the exec'd program allocated")
    procs = by_pid(rec)
    check("processes traced", sorted(procs), sorted([family.target_pid] + kids + [execed]))
    check("the parent", figures(procs[family.target_pid], *CALLS), (3, 0, 3, 0, 300, 0, 0, 0))
    for i, pid in enumerate(kids, 1):
        p = procs[pid]
        check(f"child {i}", figures(p, *CALLS),
              (i + 1, 2, i + 1, 1, 1000 * i + 7, 7, 0, 1))
        check(f"child {i}'s parent", p["parent"], family.target_pid)
        check(f"child {i} live", (p["live"], p["live_bytes"]), (i, 1000 * i))
    p = procs[execed]
    check("the exec'd child", figures(p, *CALLS), (9, 0, 9, 0, 5 * 333 + 4242 + 51, 0, 0, 0))
    check("its name and program", (p["comm"], p["exe"], p["execs"]), ("launch", LAUNCH, 1))
    check("dropped at its exec", (p["dropped_at_exec"], p["dropped_at_exec_bytes"]),
          (5, 5 * 333))
    check("its live blocks, the new program's only", (p["live"], p["live_bytes"]),
          (4, 4242 + 51))
    check("dropped in all", (rec["dropped_blocks"], rec["dropped_bytes"]), (5, 5 * 333))
    check("inherited frees", rec["inherited_frees"], CHILDREN)
    check("inexact: nothing (the children traced from their forks)",
          (rec["inexact"]["total"], rec["inexact"]["late_procs"]), (0, 0))
    check("the children: traced from their forks",
          [procs[pid]["late_ms"] for pid in kids + [execed]], [None] * (CHILDREN + 1))
    check("live in all", (rec["live_allocs"], rec["live_bytes"]),
          (3 + WORK_BLOCKS + 4, 300 + 1000 * WORK_BLOCKS + 4242 + 51))
    # The children's stack is one: one site across them, each child's blocks counted in it.
    # (Known exception: a process's first stack is at times unwound one frame short of
    # _start, a site of its own; then two sites, the same blocks.)
    work = [s for s in rec["sites"] if s["sizes"] == [1000]]
    check_true("the children's site: one (two at most)", 1 <= len(work) <= 2,
               [(s["stack_id"], s["processes"], functions(s)) for s in work])
    check_true("... allocated in child_work", all("child_work" in functions(s) for s in work),
               [functions(s) for s in work])
    check_true("... most of them in one site", work[0]["processes_total"] >= CHILDREN - 1,
               work[0]["processes"])
    check("... in all the children", sum(s["processes_total"] for s in work), CHILDREN)
    check("... each's blocks",
          sorted((x["pid"], x["live"], x["live_bytes"]) for s in work for x in s["processes"]),
          sorted((pid, i, 1000 * i) for i, pid in enumerate(kids, 1)))
    check("... most bytes first", [x["live_bytes"] for x in work[0]["processes"]],
          sorted((x["live_bytes"] for x in work[0]["processes"]), reverse=True))
    launched = [s for s in rec["sites"] if s["sizes"] == [4242]]
    check_true("launch.c's first block: a site", launched,
               [(s["sizes"], s["processes"], functions(s)[:3]) for s in rec["sites"]])
    check("... named in the new program", functions(launched[0])[1], "main")
    check("no site of the dropped blocks", [s for s in rec["sites"] if s["sizes"] == [333]], [])
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
    metrics = metrics.decode()
    check_true("Prometheus: the processes traced",
               f"\nheaptap_processes {CHILDREN + 2}\n" in metrics, metrics)
    check_true("Prometheus: a child's live bytes, by pid and comm",
               f'heaptap_process_live_bytes{{pid="{kids[2]}",comm="family"}} 3000\n' in metrics,
               metrics)
    tags = subprocess.run(["go", "tool", "pprof", "-tags", "-sample_index=inuse_space", profile],
                          capture_output=True, text=True, timeout=120)
    by_pid_bytes = {int(m.group(2)): m.group(1) for m in
                    re.finditer(r"^\s*([\d.]+k?B) \(\s*[\d.]+%\): (\d+)$", tags.stdout, re.M)}
    check("pprof: live bytes by pid label (go tool pprof -tags)",
          [by_pid_bytes.get(pid) for pid in kids[:3]], ["1000.0B", "2.0kB", "2.9kB"])
    with open(profile + ".folded") as f:
        folded = [line.rsplit(" ", 1) for line in f.read().splitlines()]
    rooted = {}
    for stack, value in folded:
        root = stack.split(";")[0]
        rooted[root] = rooted.get(root, 0) + int(value)
    check("folded: each child's stacks under its own root frame",
          [rooted.get(f"family [{pid}]") for pid in kids], [1000 * i for i in range(1, 9)])
    check("folded: the values add up to the live bytes",
          sum(int(v) for _, v in folded), rec["live_bytes"])
    check("a process outside the set: its C library's code is the file's (no trap)",
          probed_text_intact(host.target_pid, attached), [])
    check_true("a child's has heaptap's breakpoints (what the check above would see)",
               probed_text_intact(kids[0], attached))
    check("the children ended well", family.do("end"), str(CHILDREN))
    final, status = ht.finish()
    check("heaptap exit status", status, 0)
    procs = by_pid(final)
    for pid in kids + [execed]:
        check_true(f"PID {pid} exited", not procs[pid]["alive"], procs[pid])
    check("an exited child keeps its end figures", figures(procs[kids[2]], "live", "live_bytes"),
          (3, 3000))
    check("only the parent's blocks are live at the end", (final["live_allocs"],
                                                            final["live_bytes"]), (3, 300))
    check("inexact at the end: nothing", final["inexact"]["total"], 0)
    return rec


FLASHES = 5000


@test
def test_children_that_end_at_once_are_traced_and_the_next_counted_exactly():
    """family.c forks 5,000 children that end at once (more than heaptap's BPF side holds
    processes at a time: 4,096), then 4 that allocate. Each child inherits its parent's
    probes as it is forked: every one is traced, none late or untraced, and one heaptap
    hears of only after it ended is listed all the same (exited); a child with no room in
    the BPF side's set is counted as not followed. They leave no entry behind there (before,
    they filled it, and every child forked after was silently not traced): the 4 after them
    are counted exactly."""
    family = Target("family")
    ht = Heaptap(["-p", str(family.target_pid), "--follow", "-i", "200ms"])
    ht.attached()
    family.do(f"flash {FLASHES}")

    def heard(r):
        return (len(r["processes"]) - 1 + r["processes_folded"]["processes"] +
                r["inexact"]["lost_procs"])
    # heaptap has heard of them all (its BPF side holds 4,096 processes at a time).
    rec = wait_record(ht, lambda r: heard(r) == FLASHES, "every short-lived child is counted")
    inexact = rec["inexact"]
    check("none late, none untraced", (inexact["late_procs"], inexact["untraced_procs"]),
          (0, 0))
    kids = [int(x) for x in family.do("fork 4").split()]
    rec = wait_record(ht, lambda r: all(pid in by_pid(r) for pid in kids),
                      "the 4 children are in")
    family.do("go")
    rec = wait_record(ht, lambda r: all(by_pid(r)[pid]["allocs"] for pid in kids),
                      "the children allocated")
    procs = by_pid(rec)
    for i, pid in enumerate(kids, 1):
        check(f"child {i}", figures(procs[pid], *CALLS[:6]), (i + 1, 1, i + 1, 1,
                                                              1000 * i + 7, 7))
        check(f"child {i}: traced from its fork", procs[pid]["late_ms"], None)
    check("the parent: traced from the start", procs[family.target_pid]["late_ms"], None)
    inexact = rec["inexact"]
    print(f"    {FLASHES} children ending at once: "
          f"{FLASHES - inexact['lost_procs']} traced, {inexact['lost_procs']} not followed")
    check("every child counted once: traced, or not followed (no room)",
          len(rec["processes"]) - 1 + rec["processes_folded"]["processes"] +
          inexact["lost_procs"], FLASHES + 4)
    check("none late, none untraced", (inexact["late_procs"], inexact["untraced_procs"]),
          (0, 0))
    check("the children ended well", family.do("end"), "4")
    final, status = ht.finish()
    check("heaptap exit status", status, 0)


BURST = 200


def busy_cpus():
    """A busy loop on every CPU (its own process each, ended by PID by the caller)."""
    return [subprocess.Popen(["sh", "-c", "while :; do :; done"])
            for _ in range(os.cpu_count() or 1)]


@test
def test_a_burst_of_children_each_counted_from_its_first_allocation():
    """family.c forks 200 children at once under --follow, each allocating 10 blocks of 48
    bytes as soon as it runs (before heaptap can hear of its fork) and exiting, while a busy
    loop runs on every CPU. Each inherits its parent's probes as the kernel copies it: every
    child's 10 blocks are counted, per process and in all, none late or untraced; those it
    held at its exit are its end figures."""
    family = Target("family")
    ht = Heaptap(["-p", str(family.target_pid), "--follow", "-i", "200ms"])
    ht.attached()
    load = busy_cpus()
    try:
        check("the children exited well", family.do(f"burst {BURST}", timeout=120),
              str(BURST))
    finally:
        for p in load:
            p.kill()
            p.wait()
    # Every child was reaped before the burst's answer: each is heard of, and of its exit.
    rec = wait_record(ht, lambda r: len(r["processes"]) - 1 +
                      r["processes_folded"]["processes"] + r["inexact"]["lost_procs"] == BURST
                      and not any(p["alive"] for p in r["processes"]
                                  if p["parent"] == family.target_pid),
                      "every child is heard of, and of its exit")
    inexact = rec["inexact"]
    check("children not followed, late or untraced",
          (inexact["lost_procs"], inexact["late_procs"], inexact["untraced_procs"]), (0, 0, 0))
    kids = [p for p in rec["processes"] if p["parent"] == family.target_pid]
    folded = rec["processes_folded"]
    check("children listed and summed", len(kids) + folded["processes"], BURST)
    for p in kids:
        check(f"child {p['pid']}: calls, blocks, bytes; held at its exit",
              (figures(p, "alloc_calls", "allocs", "alloc_bytes", "frees", "unknown_frees"),
               p["alive"], p["late_ms"], p["live"], p["live_bytes"]),
              ((10, 10, 480, 0, 0), False, None, 10, 480))
    check("the summed ones", {k: folded[k] for k in ("alloc_calls", "allocs", "alloc_bytes",
                                                      "live", "live_bytes")},
          {k: v * folded["processes"] for k, v in (("alloc_calls", 10), ("allocs", 10),
                                                   ("alloc_bytes", 480), ("live", 10),
                                                   ("live_bytes", 480))})
    final, status = ht.finish()
    check("heaptap exit status", status, 0)


MIX = 21


@test
def test_children_that_exit_while_their_siblings_allocate_are_each_counted():
    """family.c forks 21 children 20 ms apart under --follow: every third makes 2,000
    malloc/free pairs over about 0.3 s, the others 300 at once, so that children exit while
    their siblings allocate. Each child's calls are counted exactly: none stops being traced
    when a sibling exits (before, one did whenever the kernel had swapped the two siblings'
    inherited perf events at a context switch: the exiting one took the other's with it)."""
    children_of_a_mix_counted()


def children_of_a_mix_counted(env=None):
    """The children's test, heaptap run with env (a kernel as it sees it: test_kernels.py)."""
    family = Target("family")
    ht = Heaptap(["-p", str(family.target_pid), "--follow", "-i", "200ms"], env=env)
    ht.attached()
    check("the children exited well", family.do(f"mix {MIX}", timeout=120), str(MIX))
    check_mix_counted(ht, family.target_pid, "child")


def check_mix_counted(ht, parent, who):
    """Each of the MIX children of parent that "mix" forks counted exactly, in the order
    forked, once all have exited; none late; heaptap then ends well."""
    # The reports queued while they ran are read first: the one that counts has them all
    # exited.
    rec = wait_record(ht, lambda r: len([p for p in r["processes"] if p["parent"] == parent and
                                         not p["alive"]]) == MIX,
                      f"every {who} has exited")
    kids = sorted((p for p in rec["processes"] if p["parent"] == parent), key=lambda p: p["pid"])
    check(f"each {who}'s malloc and free calls, in the order forked",
          [(p["alloc_calls"], p["free_calls"]) for p in kids],
          [(2000, 2000) if k % 3 == 0 else (300, 300) for k in range(MIX)])
    check("none late", rec["inexact"]["late_procs"], 0)
    final, status = ht.finish()
    check("heaptap exit status", status, 0)


@test
def test_grandchildren_that_exit_while_their_siblings_allocate_are_each_counted():
    """The same family one generation down: family.c forks a child, heaptap takes it in
    (inherited probes), then the child forks 21 children 20 ms apart as "mix" does. Each
    grandchild's calls are counted exactly (before 6.12, the child's own perf event keeps
    their perf contexts apart from its own and one another's; without it, on 6.1.0-47, 7 to 12
    of the 21 lost calls in each of three runs)."""
    grandchildren_of_a_mix_counted()


def grandchildren_of_a_mix_counted(env=None):
    """The grandchildren's test, heaptap run with env."""
    family = Target("family")
    ht = Heaptap(["-p", str(family.target_pid), "--follow", "-i", "200ms"], env=env)
    ht.attached()
    child = int(family.do(f"nest {MIX}"))
    wait_record(ht, lambda r: child in by_pid(r), "the child is in")
    family.do("go", timeout=120)
    check("the child and its children exited well", family.do("end"), "1")
    check_mix_counted(ht, child, "grandchild")


@test
def test_workers_gone_beyond_the_latest_100_are_summed():
    """120 children of family.c, traced, exit: the latest 100 stay listed with their end
    figures, the 20 taken in first are summed on one line (a service's thousands of workers
    a day do not grow every report and heaptap's memory)."""
    family = Target("family")
    ht = Heaptap(["-p", str(family.target_pid), "--follow", "-i", "200ms"])
    ht.attached()
    kids = []
    for _ in range(2):
        kids += [int(x) for x in family.do("fork 60").split()]
        wait_record(ht, lambda r: all(pid in by_pid(r) for pid in kids), "the children are in")
        family.do("go")
        check("the children ended well", family.do("end"), "60")
    rec = wait_record(ht, lambda r: r["processes_folded"]["processes"] == 20,
                      "the oldest 20 are summed")
    check("listed: the first and the latest 100", [p["pid"] for p in rec["processes"]],
          [family.target_pid] + kids[20:])
    # Child i (1..60) allocated i blocks of 1000 bytes it kept and 7 bytes it freed.
    first = range(1, 21)
    folded = rec["processes_folded"]
    check("the 20 summed: their figures at their exits",
          {k: folded[k] for k in ("processes", "alloc_calls", "free_calls", "allocs", "frees",
                                  "alloc_bytes", "free_bytes", "live", "live_bytes")},
          {"processes": 20, "alloc_calls": sum(i + 1 for i in first), "free_calls": 20,
           "allocs": sum(i + 1 for i in first), "frees": 20,
           "alloc_bytes": sum(1000 * i + 7 for i in first), "free_bytes": 7 * 20,
           "live": sum(first), "live_bytes": 1000 * sum(first)})
    check("a listed one keeps its own", figures(by_pid(rec)[kids[20]], "allocs", "live"),
          (22, 21))
    final, status = ht.finish()
    check("heaptap exit status", status, 0)
    check("the final report too", final["processes_folded"]["processes"], 20)


@test
def test_a_reader_that_lags_holds_up_no_tracing():
    """heaptap's JSON on a pipe nobody reads for 3 s, a report every 20 ms: it fills, and
    the children family.c forks meanwhile are still taken in at once and counted exactly
    (before, the loop waited on the full pipe: they allocated untraced). Interval reports
    that did not fit are dropped and counted; the final one is whole."""
    family = Target("family")
    ht = Heaptap(["-p", str(family.target_pid), "--follow", "-i", "20ms", "--top", "1000"])
    ht.attached()
    family.do("alloc 200 10")  # sites enough for reports of some size
    time.sleep(3)              # nobody reads: the pipe fills
    kids = [int(x) for x in family.do("fork 4").split()]
    time.sleep(1)              # taken in meanwhile (milliseconds), the pipe still full
    family.do("go")
    # A report made while a child allocates has only some of its calls: the reports are
    # read until one has every call of every child (an exact count, or no such report).
    expected = {pid: (i + 1, 2, i + 1, 1, 1000 * i + 7, 7) for i, pid in enumerate(kids, 1)}
    wait_record(ht, lambda r: all(pid in by_pid(r) and
                                  figures(by_pid(r)[pid], *CALLS[:6]) == expected[pid]
                                  for pid in kids),
                "every call of the children was seen: (calls, frees, allocs, frees, bytes, "
                f"bytes freed) {expected}")
    check("the children ended well", family.do("end"), "4")
    final, status = ht.finish()
    check("heaptap exit status", status, 0)
    check_true("interval reports dropped while the pipe was full, counted",
               final["heaptap"]["reports_dropped"] > 0, final["heaptap"])


@test
def test_launch_follows_exec_through_wrappers():
    """heaptap -- env A=1 setarch -R launch: the program traced is launch.c, under its own
    name, from its first allocation; env's and setarch's blocks dropped at their exec."""
    ht = Heaptap(["-i", "200ms", "--", "env", "A=1", "setarch", "-R", LAUNCH],
                 stdin=subprocess.PIPE)
    ht.attached()
    # Named while it runs (a program that is gone has no maps to read its names from).
    wait_record(ht, lambda r: r["comm"] == "launch" and r["live_allocs"] == 4,
                "launch.c runs")
    ht.popen.stdin.close()
    final, status = ht.finish(sig=None)
    check("heaptap exit status", status, 0)
    check("the command's exit status", final["target_exit"]["exit_code"], 7)
    check("the name followed", final["comm"], "launch")
    p = final["processes"][0]
    check("one process, two execs", (len(final["processes"]), p["execs"]), (1, 2))
    check_true("the wrappers' blocks dropped", p["dropped_at_exec"] > 0, p)
    check("the live blocks are launch.c's", (final["live_allocs"], final["live_bytes"]),
          (4, 4242 + 51))
    first = [s for s in final["sites"] if s["sizes"] == [4242]]
    check("its first malloc, named", functions(first[0])[1], "main")
    check("inexact", final["inexact"]["total"], 0)


@test
def test_launch_follows_exec_into_a_cplusplus_program():
    """heaptap -- sh -c 'exec env newdelete_jemalloc': a C wrapper execs into a C++ program
    whose jemalloc's operator new may throw, which needs the unwinder probed (before,
    the first image's plan chose the BPF programs, and the program was not traced at all:
    "cannot attach a uprobe to _Unwind_RaiseException"). Its exceptions are caught."""
    program = os.path.join(TARGETS, "newdelete_jemalloc")
    ht = Heaptap(["-i", "200ms", "--", "sh", "-c", f"exec env A=1 {program} >/dev/null"],
                 stdin=subprocess.PIPE)
    ht.attached()
    wait_record(ht, lambda r: r["comm"] == "newdelete_jemal", "the C++ program is traced")
    ht.popen.stdin.write(b"throw\nmix\n")
    ht.popen.stdin.flush()
    rec = wait_record(ht, lambda r: r["unwound_calls"] == 3 and r["live_allocs"] >= 9,
                      "its exceptions and blocks seen")
    check("fixups that failed", rec["fixup_failures"], 0)
    check("failed calls: the three huge new[]", rec["failed_calls"], 3)
    ht.popen.stdin.close()
    final, status = ht.finish(sig=None)
    check("heaptap exit status", status, 0)
    check("the program's exit status: it caught them", final["target_exit"]["exit_code"], 0)


@test
def test_several_pids_and_programs_started_later():
    """-p A,B: two processes, each counted apart; their blocks from the same line of the same
    program are one site, though each was laid out apart (ASLR); --comm: a process of that
    name started after heaptap is traced (once its probes are in)."""
    a, b = Target("family"), Target("family")
    ht = Heaptap(["-p", f"{a.target_pid},{b.target_pid}", "-i", "200ms"])
    ht.attached()
    a.do("alloc 3 100")
    b.do("alloc 2 55")
    rec = wait_record(ht, lambda r: r["live_allocs"] == 5, "both allocated")
    procs = by_pid(rec)
    check("A", figures(procs[a.target_pid], "allocs", "alloc_bytes", "live"), (3, 300, 3))
    check("B", figures(procs[b.target_pid], "allocs", "alloc_bytes", "live"), (2, 110, 2))
    check_true("laid out apart (ASLR): else the merge below proves nothing",
               layout(a.target_pid) != layout(b.target_pid))
    # One site of both (without the merge: one of each). (Known exception, as above: a
    # process's first stack at times one frame short, a site of its own: two at most.)
    both = [s for s in rec["sites"]
            if {x["pid"] for x in s["processes"]} == {a.target_pid, b.target_pid}]
    check_true("a site of both, each's blocks in it", both and 1 <= len(rec["sites"]) <= 2,
               [(s["sizes"], s["live"], s["processes"]) for s in rec["sites"]])
    check("... every block in the sites, each's own",
          sorted((x["pid"], x["live"]) for x in
                 [{"pid": pid, "live": sum(y["live"] for s in rec["sites"]
                                           for y in s["processes"] if y["pid"] == pid)}
                  for pid in (a.target_pid, b.target_pid)]),
          sorted([(a.target_pid, 3), (b.target_pid, 2)]))
    check_true("... named in main", "main" in functions(both[0]), functions(both[0]))
    final, status = ht.finish()
    check("heaptap exit status", status, 0)

    # --comm with none running: waits, says so; Ctrl-C then ends it, nothing traced.
    program, comm = private_program("family")
    ht = Heaptap(["--comm", comm, "-i", "200ms"])
    waiting = f"heaptap: no process named {comm} runs yet: waiting for one (Ctrl-C to stop)"
    ht.stderr_until(waiting)
    final, status = ht.finish()
    check("--comm, none started, Ctrl-C: exit status and records", (status, final), (0, None))
    check("... and what it said", ht.stderr_text().strip(), waiting)
    first = Target(program)
    ht = Heaptap(["--comm", comm, "-i", "200ms"])
    ht.attached()
    later = Target(program)
    wait_record(ht, lambda r: later.target_pid in by_pid(r), "the new process is in")
    later.do("alloc 4 77")
    rec = wait_record(ht, lambda r: by_pid(r)[later.target_pid]["live"] == 4,
                      "the new process allocated")
    p = by_pid(rec)[later.target_pid]
    check("a process started later, traced", figures(p, "allocs", "alloc_bytes", "parent"),
          (4, 308, None))
    check_true("the one running at the start, too", first.target_pid in by_pid(rec))
    check("inexact: the one matched at its exec", rec["inexact"]["late_procs"], 1)
    final, status = ht.finish()
    check("heaptap exit status", status, 0)
    shutil.rmtree(os.path.dirname(program))


@test
def test_comm_and_exe_wait_for_the_first_process():
    """--comm or --exe with no such process running: heaptap waits for the first to start,
    traces it (and every later one) exactly, and reports it as the session's process. --exe
    on ext4 and on tmpfs (a file system with a device number of its own kind)."""
    disk, comm = private_program("family")
    shm, _ = private_program("family", "/dev/shm")
    for option in (["--comm", comm], ["--exe", disk], ["--exe", shm]):
        program = option[1] if option[0] == "--exe" else disk
        ht = Heaptap(option + ["-i", "200ms"])
        ht.stderr_until("waiting for one")
        first = Target(program)
        attached = ht.attached()
        check(f"{option[0]}: the session's process", (attached["pid"], attached["comm"]),
              (first.target_pid, comm))
        first.do("alloc 3 100")
        later = Target(program)
        wait_record(ht, lambda r: later.target_pid in by_pid(r), "the later process is in")
        later.do("alloc 2 55")
        rec = wait_record(ht, lambda r: by_pid(r)[later.target_pid]["live"] == 2,
                          "the later one allocated")
        procs = by_pid(rec)
        check(f"{option[0]}: the first", figures(procs[first.target_pid], "allocs",
                                                  "alloc_bytes", "live"), (3, 300, 3))
        check(f"{option[0]}: the later", figures(procs[later.target_pid], "allocs",
                                                  "alloc_bytes", "live"), (2, 110, 2))
        final, status = ht.finish()
        check(f"{option[0]}: heaptap exit status", status, 0)
        check_true(f"{option[0]}: both still running", first.alive() and later.alive())
        first.end()
        later.end()
    for path in (disk, shm):
        shutil.rmtree(os.path.dirname(path))


@test(tier="services")
def test_html_report_of_a_forked_family_in_chromium():
    """The HTML report of a session of several processes: its processes table, and its flame
    graph with each process's stacks under a root frame of its own (rendered in Chromium)."""
    from test_outputs import Dom, chromium, out_dir, page_checks
    path = os.path.join(out_dir("services-html"), "report.html")
    family = Target("family")
    ht = Heaptap(["-p", str(family.target_pid), "-f", "-i", "200ms", "--html", path])
    attached = ht.attached()
    family.do("alloc 3 100")
    kids = [int(x) for x in family.do("fork 2").split()]
    wait_record(ht, lambda r: all(pid in by_pid(r) for pid in kids), "the children are in")
    family.do("go")
    wait_record(ht, lambda r: r["live_allocs"] == 3 + 3, "the children allocated")
    final, status = ht.finish()
    check("heaptap exit status", status, 0)
    for pid in [family.target_pid] + kids:
        check(f"PID {pid}'s code after detach: the file's", probed_text_intact(pid, attached), [])
    out, err = chromium(["--dump-dom", "file://" + path])
    dom = Dom(out)
    page_checks(dom, err)
    rows = dom.one("table", id="processes").find("tr")
    check("processes table rows (header and one per process)", len(rows), 1 + 3)
    text = dom.root.text()
    for pid in kids:
        check_true(f"the flame graph's root frame of PID {pid}", f"family [{pid}]" in text)
    family.do("end")
