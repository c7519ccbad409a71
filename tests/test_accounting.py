"""Exact accounting: sizes, sites, every allocator entry point, threads, blocks from before
attach, launch mode."""
import os
import signal
import subprocess
import time

import lib
from lib import (Failure, Heaptap, Proc, Target, TARGETS, check, check_true, functions,
                 size_row, test)


def traced(target, command, *args):
    """Attaches to a running target, makes it run command, returns heaptap's final record."""
    ht = Heaptap(["-p", str(target.target_pid), "-i", "1h"] + list(args))
    attached = ht.attached()
    result = target.do(command)
    final, status = ht.finish()
    check("heaptap exit status", status, 0)
    check_true("final record", final is not None, "heaptap printed no final report")
    return attached, final, result


def check_row(final, size, allocs, frees, live_bytes, total_bytes):
    row = size_row(final, size)
    check_true(f"size table has a row for {size}", row is not None, f"rows: {final['sizes']}")
    check(f"allocs of size {size}", row["allocs"], allocs)
    check(f"frees of size {size}", row["frees"], frees)
    check(f"live count of size {size}", row["live"], allocs - frees)
    check(f"live bytes of size {size}", row["live_bytes"], live_bytes)
    check(f"total bytes of size {size}", row["total_bytes"], total_bytes)


def check_exact(final):
    for key, value in final["inexact"].items():
        check(f"inexact.{key}", value, 0)


def check_mix(final):
    """The "mix" of tests/targets/sizes.c, from any allocator."""
    check_row(final, 16, 10, 0, 160, 160)
    check_row(final, 100, 5, 5, 0, 500)
    check_row(final, 1000, 3, 0, 3000, 3000)
    check_row(final, 5000, 2, 0, 10000, 10000)
    check("size rows", len(final["sizes"]), 4)
    check("live bytes", final["live_bytes"], 13160)
    check("live allocations", final["live_allocs"], 15)
    check("peak bytes", final["peak_bytes"], 13160)
    check("allocation calls", final["alloc_calls"], 20)
    check("free calls", final["free_calls"], 5)
    check_exact(final)
    # Each leak_big call site is its own site; leak_medium's three calls share one.
    sites = {(s["live_bytes"], s["live"]): s for s in final["sites"]}
    check("sites", sorted(sites), [(160, 10), (3000, 3), (5000, 1)])
    check("top site's live bytes", final["sites"][0]["live_bytes"], 5000)
    check("top site's direct caller", functions(final["sites"][0])[1], "leak_big")
    check("top site's caller's caller", functions(final["sites"][0])[2], "do_mix")
    check("1000-byte site's direct caller", functions(sites[(3000, 3)])[1], "leak_medium")
    check("16-byte site's direct caller", functions(sites[(160, 10)])[1], "leak_small")
    check("16-byte site's sizes", sites[(160, 10)]["sizes"], [16])


@test(sanitized=True)
def test_size_mix_and_leaking_sites():
    target = Target("sizes")
    attached, final, _ = traced(target, "mix")
    check("allocator reason", attached["allocator"]["reason"],
          "first object in the link order that defines malloc (the C library)")
    check_true("allocator is libc", attached["allocator"]["path"].endswith("/libc.so.6"))
    check_mix(final)
    check("malloc frame", functions(final["sites"][0])[0], "malloc")
    check("size classes above 256 are ranges", (size_row(final, 1000)["min"],
          size_row(final, 1000)["max"], size_row(final, 5000)["min"],
          size_row(final, 5000)["max"]), (960, 1023, 4608, 5119))


@test(sanitized=True)
def test_every_entry_point_and_realloc_case():
    target = Target("apis")
    _, final, result = traced(target, "all")
    check("realloc outcomes the target produced", result,
          "moved=1 inplace=1 shrunk=1 failed_kept=1 einval=1 enomem=1")
    check_row(final, 201, 1, 0, 201, 201)        # realloc(NULL, n)
    check_row(final, 202, 1, 1, 0, 202)          # realloc(p, 0) frees p
    check_row(final, 203, 1, 1, 0, 203)          # moved: old block freed...
    check_row(final, 4000, 1, 0, 4000, 4000)     # ...new block live
    check_row(final, 204, 1, 0, 204, 204)
    check_row(final, 240, 1, 1, 0, 240)          # shrunk in place
    check_row(final, 207, 1, 0, 207, 207)
    check_row(final, 209, 1, 0, 209, 209)        # failed realloc keeps the block
    check_row(final, 210, 1, 0, 210, 210)        # reallocarray(NULL, 10, 21)
    check_row(final, 213, 1, 0, 213, 213)        # calloc(3, 71)
    check_row(final, 214, 1, 0, 214, 214)        # posix_memalign
    for size in (216, 217, 218, 219):            # aligned_alloc, memalign, valloc, pvalloc
        check_row(final, size, 1, 0, size, size)
    check_row(final, 0, 1, 0, 0, 0)              # malloc(0)
    check_row(final, 248, 1, 1, 0, 248)          # grown in place: old size freed...
    check_row(final, 3000, 1, 0, 3000, 3000)     # ...new size live
    check("size rows", len(final["sizes"]), 18)
    live = [201, 4000, 204, 207, 209, 210, 213, 214, 216, 217, 218, 219, 0, 3000]
    check("live bytes", final["live_bytes"], sum(live))
    check("live allocations", final["live_allocs"], len(live))
    check("failed calls", final["failed_calls"], 6)
    check("allocation calls", final["alloc_calls"], 25)
    check("free calls (neither free(NULL) nor realloc's inner free is one)",
          final["free_calls"], 0)
    check_exact(final)
    # What the program called, function by function: realloc(NULL, n) is a realloc call;
    # realloc(p, 0) frees p and returns nothing, neither a block nor a failure.
    calls = {f["function"]: (f["calls"], f["returned"], f["failed"], f["freed"])
             for f in final["functions"] if f["calls"]}
    check("calls, blocks returned, failures and blocks freed per function", calls,
          {"malloc": (8, 7, 1, 0), "calloc": (2, 1, 1, 0), "realloc": (6, 4, 1, 4),
           "reallocarray": (2, 1, 1, 0), "posix_memalign": (3, 1, 2, 0),
           "aligned_alloc": (2, 2, 0, 0), "valloc": (1, 1, 0, 0), "pvalloc": (1, 1, 0, 0)})
    check("allocation calls: the allocating functions' calls",
          final["alloc_calls"], sum(c[0] for c in calls.values()))


@test(sanitized=True)
def test_eight_threads_exact_totals():
    target = Target("threads")
    _, final, _ = traced(target, "go")
    threads, rounds, leaks = 8, 2000, 10
    expected = {}
    for t in range(threads):
        for i in range(rounds):
            size = 16 + (i % 50) * 8
            expected.setdefault(size, [0, 0])
            expected[size][0] += 1
            expected[size][1] += 1
        for i in range(leaks):
            expected.setdefault(1000 + t, [0, 0])
            expected[1000 + t][0] += 1
    rows = {}
    for size, (allocs, frees) in expected.items():
        row = size_row(final, size)
        check_true(f"row for size {size}", row is not None)
        got = rows.setdefault((row["min"], row["max"]), [0, 0, 0, 0])
        got[0] += allocs
        got[1] += frees
        got[2] += (allocs - frees) * size
        got[3] += allocs * size
    for (lo, hi), (allocs, frees, live_bytes, total) in rows.items():
        row = size_row(final, lo)
        check(f"row {lo}-{hi}", (row["allocs"], row["frees"], row["live_bytes"],
                                 row["total_bytes"]), (allocs, frees, live_bytes, total))
    check("size rows", len(final["sizes"]), len(rows))
    check("allocations", final["allocs"], threads * (rounds + leaks))
    check("frees", final["frees"], threads * rounds)
    check("live allocations", final["live_allocs"], threads * leaks)
    check("live bytes", final["live_bytes"], sum(leaks * (1000 + t) for t in range(threads)))
    check_exact(final)


@test
def test_frees_of_blocks_from_before_attach():
    target = Target("preattach")
    ht = Heaptap(["-p", str(target.target_pid), "-i", "1h"])
    ht.attached()
    target.do("free")
    target.do("leak")
    final, status = ht.finish()
    check("heaptap exit status", status, 0)
    check("unknown frees", final["inexact"]["unknown_frees"], 50)
    check("frees accounted", final["frees"], 0)
    check("free calls", final["free_calls"], 50)
    check("live bytes (never negative)", final["live_bytes"], 160)
    check("live allocations", final["live_allocs"], 5)
    check("no row for the early blocks", size_row(final, 100), None)
    check_row(final, 32, 5, 0, 160, 160)


@test
def test_launch_counts_from_the_first_malloc():
    ht = Heaptap(["-i", "100ms", "--", os.path.join(TARGETS, "launch")], stdin=subprocess.PIPE)
    attached = ht.attached()
    check_true("a launched command is traced from its own allocator",
               attached["allocator"]["path"].endswith("/libc.so.6"))
    # Symbols come from the live process: wait until a report has named the first site.
    while True:
        rec = ht.record()
        check_true("interval reports until the first site is named", rec is not None)
        first = [s for s in rec.get("sites", []) if s["sizes"] == [4242]]
        if first and len(functions(first[0])) > 1 and functions(first[0])[1]:
            break
    ht.popen.stdin.close()      # the command's stdin: it exits at end of input
    final, status = ht.finish(sig=None)
    check("heaptap exit status", status, 0)
    check_true("final report", final is not None)
    check("the command's exit status", final["target_exit"]["exit_code"], 7)
    check_row(final, 4242, 1, 0, 4242, 4242)
    check_row(final, 17, 3, 0, 51, 51)
    first = [s for s in final["sites"] if s["sizes"] == [4242]]
    check("sites of the first malloc", len(first), 1)
    check("its direct caller, named after the command exited", functions(first[0])[1], "main")


@test
def test_launch_of_a_missing_command():
    ht = Heaptap(["--", "/nonexistent/program"])
    final, status = ht.finish(sig=None)
    check("exit status", status, 1)
    check("message", ht.stderr_text().strip(),
          "heaptap: /nonexistent/program: command not found or not executable")
    if final is not None:
        raise Failure("a report for a command that never ran")


def threads_traced(max_allocs):
    """threads' run traced with --max-allocs max_allocs: its final record."""
    target = Target("threads")
    ht = Heaptap(["-p", str(target.target_pid), "-i", "1h", "--max-allocs", str(max_allocs)])
    ht.attached()
    target.do("go")
    final, status = ht.finish()
    target.end()
    check("heaptap exit status", status, 0)
    return final


def blocks_read():
    """threads' run traced with --max-allocs 1024 (a table of 1,248 slots; the eight threads
    hold up to 400 blocks at once): its final record."""
    final = threads_traced(1024)
    check_exact(final)
    return final


def live_figures(final):
    """What a report says of the live blocks, from reading them: by site (its functions),
    thread, process and age."""
    return {
        "sites": sorted((tuple(functions(s)), s["live"], s["live_bytes"], s["min_size"],
                         s["max_size"]) for s in final["sites"]),
        "threads": sorted((t["live"], t["live_bytes"]) for t in final["threads"] if t["live"]),
        "processes": [(p["live"], p["live_bytes"]) for p in final["processes"]],
        "ages": sum(a["blocks"] for a in final["ages"]),
    }


@test
def test_blocks_read_from_the_table():
    final = blocks_read()
    figures = live_figures(final)
    check("live blocks", final["live_allocs"], 80)
    check("threads' live blocks", figures["threads"],
          sorted((10, 10 * (1000 + t)) for t in range(8)))
    check("live blocks of the sites", sum(s[1] for s in figures["sites"]), 80)
    check("live bytes of the sites", sum(s[2] for s in figures["sites"]),
          sum(10 * (1000 + t) for t in range(8)))
    check("the process's live blocks", figures["processes"],
          [(80, sum(10 * (1000 + t) for t in range(8)))])
    check("blocks by age", figures["ages"], 80)


def held_blocks(rec):
    """The 64-byte blocks of bench/targets/blocks.c's site, in a report: live, live bytes.
    (One site, or two when the first stacks were unwound one frame short: see
    test_follow_counts_children_and_exec_per_process.)"""
    held = [s for s in rec["sites"] if s["min_size"] == 64 and s["max_size"] == 64]
    return sum(s["live"] for s in held), sum(s["live_bytes"] for s in held)


@test
def test_a_full_table_under_eight_threads_loses_no_free():
    """threads' eight threads churn through a table made for 40 blocks (--max-allocs 40, 8
    buckets), each holding up to 50 at once: blocks are dropped as they come, at random, at
    the limit, while others are put and taken on both CPUs. Whatever was dropped, every
    tracked block's free finds its record: the blocks left live are the leaked ones (1,000
    to 1,007 bytes), and every dropped block was either freed as an unknown free or is one of
    the leaks not tracked. (A table this small does not spill: the spills are
    test_the_table_holds_max_allocs_exactly's.)"""
    final = threads_traced(40)
    inexact = final["inexact"]
    check_true("blocks dropped", inexact["dropped_allocs"] > 0, inexact)
    check("allocation calls", final["alloc_calls"], 8 * 2010)
    check("free calls", final["free_calls"], 8 * 2000)
    check_true("live blocks, leaks only", final["live_allocs"] <= 80, final["live_allocs"])
    check("dropped blocks: freed unknown, or leaks not tracked", inexact["dropped_allocs"],
          inexact["unknown_frees"] + 80 - final["live_allocs"])
    check("live blocks of the sites", sum(s["live"] for s in final["sites"]),
          final["live_allocs"])
    check_true("the sites' blocks all leaks",
               all(1000 <= s["min_size"] and s["max_size"] <= 1007 for s in final["sites"]),
               [(s["min_size"], s["max_size"]) for s in final["sites"]])
    check("other inexact figures", {k: v for k, v in inexact.items()
                                    if k not in ("dropped_allocs", "unknown_frees", "total") and v}, {})


@test
def test_reports_read_the_table_while_eight_threads_change_it():
    """churn's eight threads hold 5,000 blocks each (600 + t bytes), all at once, in a table
    made for 200 more (as full as it goes: blocks spill past their two buckets, from both
    CPUs at once; a dozen did when counted once from the map with bpftool, which the test
    does not do); then they churn blocks for 6 seconds, 1 to 256 bytes from one site and 257
    to 512 from another, 8 live a thread, while heaptap reports every 200 ms. Every report
    made while the threads churned, read while slots are taken and given up around the held
    ones, has each thread's held blocks at least, every block of an unwound site the size of
    that site's, and nothing dropped; from the first one whose held blocks' stacks are
    unwound on, every report has the held blocks' site exact; the final report is exact.
    (A reader without its re-checks of a slot still passes: a slot given up and taken again
    while the reader is in it is too rare here to be met in seconds.)"""
    n = 5000
    held_bytes = n * sum(600 + t for t in range(8))
    target = Target("churn")
    ht = Heaptap(["-p", str(target.target_pid), "-i", "200ms", "--top", "100",
                  "--max-allocs", str(8 * n + 200)])
    lines = []
    try:
        ht.attached()
        target.do(f"hold {n}")
        target.send("churn 6")
        # Lines kept as they come (parsed after): heaptap drops the oldest reports of a
        # reader that falls behind.
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline:
            lines.append(ht.read_line(timeout=10))
            check_true("a report", lines[-1] is not None)
        check("churn", target.read_line(timeout=60), "done churn 6")
    finally:
        final, status = ht.finish()
    check("heaptap exit status", status, 0)
    check_true("final record", final is not None)
    # The reports made once the threads churned: the allocation calls past the held ones.
    reports = [r for r in map(lib.parse_record, lines)
               if r["type"] == "interval" and r["alloc_calls"] > 8 * n]
    check_true("reports while the threads churned", len(reports) >= 10, len(reports))

    sizes = {"hold_block": (600, 607), "churn_small": (1, 256), "churn_large": (257, 512)}

    def figures(rec):
        # A site's own function; a site whose stack is not yet unwound has none to check.
        sites = [(next((f for f in functions(s) if f in sizes), "another"), s)
                 for s in rec["sites"] if functions(s)]
        held = [s for f, s in sites if f == "hold_block"]
        workers = [t for t in rec["threads"] if t["live"] >= n]
        return {"held site": (sum(s["live"] for s in held), sum(s["live_bytes"] for s in held)),
                "threads holding": (len(workers), sum(t["live_bytes"] for t in workers)
                                    >= held_bytes),
                "sites' sizes": [(f, s["min_size"], s["max_size"]) for f, s in sites
                                 if f not in sizes or not (sizes[f][0] <= s["min_size"] and
                                                           s["max_size"] <= sizes[f][1])],
                "dropped": rec["inexact"]["dropped_allocs"]}

    expected = {"held site": (8 * n, held_bytes), "threads holding": (8, True),
                "sites' sizes": [], "dropped": 0}
    resolved = next((i for i, r in enumerate(reports)
                     if figures(r)["held site"] == expected["held site"]), len(reports))
    check_true("reports with the held blocks' stacks unwound", len(reports) - resolved >= 5,
               f"from report {resolved + 1} of {len(reports)}")
    for i, rec in enumerate(reports):
        want = dict(expected) if i >= resolved else \
            dict(expected, **{"held site": figures(rec)["held site"]})
        check(f"report {i + 1} of {len(reports)}", figures(rec), want)
    check("final report", figures(final), expected)
    check("final live blocks", final["live_allocs"], 8 * n)
    check("frees of blocks not tracked", final["inexact"]["unknown_frees"], 0)
    target.end()


@test
def test_the_table_holds_max_allocs_exactly():
    """bench/targets/blocks holds n 64-byte blocks (and the array of their pointers) under
    --max-allocs n + 1: the table full to its limit (5/6 of its slots: blocks spill past
    their two buckets) holds every one; freed and held again, the same; 100 more are not
    tracked, and counted."""
    n = 300000
    target = Proc([os.path.join(lib.BUILD, "bench", "blocks")])
    check_true("blocks target", (target.read_line() or "").startswith("ready"))
    ht = Heaptap(["-p", str(target.pid), "-i", "1h", "--max-allocs", str(n + 1)])

    def report():
        os.kill(ht.pid, signal.SIGUSR1)
        rec = ht.record(timeout=120)
        while rec is not None and rec["type"] != "interval":
            rec = ht.record(timeout=120)
        check_true("a report", rec is not None)
        return rec

    try:
        ht.attached()
        for round in ("first", "again"):
            target.send(f"hold {n}")
            check("blocks held", target.read_line(timeout=300), f"done hold {n}")
            rec = report()
            check(f"the held blocks ({round})", held_blocks(rec), (n, 64 * n))
            check(f"live blocks ({round})", rec["live_allocs"], n + 1)
            check(f"blocks not tracked ({round})", rec["inexact"]["dropped_allocs"], 0)
            check(f"frees of blocks not tracked ({round})", rec["inexact"]["unknown_frees"], 0)
            if round == "first":
                target.send("free")
                check("blocks freed", target.read_line(timeout=300), "done free")
        target.send("hold 100")
        check("more blocks held", target.read_line(timeout=60), "done hold 100")
        rec = report()
        check("the held blocks, the table full", held_blocks(rec), (n, 64 * n))
        check("blocks not tracked, the table full", rec["inexact"]["dropped_allocs"], 100)
        target.send("free")
        check("blocks freed at last", target.read_line(timeout=300), "done free")
        final, status = ht.finish()
        check("heaptap exit status", status, 0)
        check("frees of the blocks not tracked", final["inexact"]["unknown_frees"], 100)
        check("live blocks at the end", final["live_allocs"], 1)
    finally:
        if ht.popen.poll() is None:
            ht.end()
        target.send("exit")
        target.wait()