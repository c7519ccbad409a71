"""What the reports hold: intervals, the end of a session, options that shape the report,
full maps, and the text format people read."""
import signal
import time

from lib import (HEAPTAP, Heaptap, Proc, Target, check, check_true, functions, size_row,
                 test)
from test_accounting import check_mix, traced


@test(sanitized=True)
def test_interval_reports_until_duration():
    target = Target("sizes")
    target.do("mix")
    ht = Heaptap(["-p", str(target.target_pid), "-i", "200ms", "-d", "1s"])
    attached = ht.attached()
    final, status = ht.finish(sig=None)
    check("exit status at the end of --duration", status, 0)
    kinds = [r["type"] for r in ht.records]
    check_true("interval reports before the final one", kinds.count("interval") >= 3, kinds)
    check("last record", kinds[-1], "final")
    check("every record names the allocator",
          {r["allocator"]["path"] for r in ht.records}, {attached["allocator"]["path"]})
    check_true("elapsed time reaches the duration", final["elapsed_s"] >= 1.0,
               final["elapsed_s"])
    check("blocks allocated before attach are not counted", final["live_bytes"], 0)
    check_true("target RSS read from /proc", final["rss_bytes"] > 0)
    check_true("heaptap's own memory shown",
               final["heaptap"]["rss_bytes"] > 0 and final["heaptap"]["map_bytes"] > 0)


@test
def test_target_exit_ends_the_session():
    target = Target("sizes")
    ht = Heaptap(["-p", str(target.target_pid), "-i", "1h"])
    ht.attached()
    target.do("mix")
    target.send("exit")
    final, status = ht.finish(sig=None)
    check("exit status when the target exits", status, 0)
    check("target exit recorded", final["target_exit"], {"exit_code": None, "signal": None})
    check_mix(final)
    check("top site still named after the target is gone", functions(final["sites"][0])[1],
          "leak_big")


@test
def test_min_age_hides_young_blocks():
    target = Target("sizes")
    _, final, _ = traced(target, "mix", "--min-age", "1h")
    check("sites when every block is younger than --min-age", final["sites"], [])
    check("blocks hidden", final["young_hidden"], 15)
    check("totals still count them", final["live_bytes"], 13160)
    target = Target("sizes")
    ht = Heaptap(["-p", str(target.target_pid), "-i", "1h", "--min-age", "100ms"])
    ht.attached()
    target.do("mix")
    time.sleep(0.3)     # every block is now older than --min-age
    final, _ = ht.finish()
    check("blocks hidden once old enough", final["young_hidden"], 0)
    check("sites shown once old enough", len(final["sites"]), 4)


@test
def test_sort_and_top():
    target = Target("sizes")
    for key, order in (("size", [16, 100, 960, 4608]), ("live", [4608, 960, 16, 100]),
                       ("calls", [16, 100, 960, 4608]), ("bytes", [4608, 960, 100, 16])):
        ht = Heaptap(["-p", str(target.target_pid), "-i", "1h", "--sort", key, "--top", "2"])
        ht.attached()
        target.do("mix")
        final, _ = ht.finish()
        target.do("free")
        check(f"size rows by {key}", [r["min"] for r in final["sizes"]], order)
        check(f"--top 2 with {key}", len(final["sites"]), 2)
        check("sites total", final["sites_total"], 4)


@test
def test_full_maps_are_counted_and_named():
    target = Target("sizes")
    _, final, _ = traced(target, "mix", "--max-allocs", "5")
    check("blocks not tracked", final["inexact"]["dropped_allocs"], 15)
    check("their frees, unknown", final["inexact"]["unknown_frees"], 5)
    check("live bytes of the tracked blocks", final["live_bytes"], 80)
    target.do("free")
    # Frame-pointer stacks: each allocation stores its stack at once (DWARF stacks go through
    # samples first, as fast as heaptap learns them).
    _, final, _ = traced(target, "mix", "--max-stacks", "1", "--stack", "fp")
    check("stacks not stored", final["inexact"]["dropped_stacks"], 10)
    check("accounting unaffected", final["live_bytes"], 13160)
    unnamed = [s for s in final["sites"] if s["stack"] is None]
    check_true("sites without a stored stack say so", len(unnamed) >= 1, final["sites"])
    # The map of site totals has room for as many sites as stacks: one. The blocks of the
    # stored stack have it; those of the dropped stacks (id 0) find it full.
    check("blocks whose site totals found the site map full", final["inexact"]["dropped_sites"],
          10)


@test
def test_full_stack_map_with_dwarf_stacks():
    """40 paths, room for 10 stacks: 10 whole stacks, the other paths' blocks counted as
    dropped, and never lumped onto a short stack nor lost for want of unwind rules."""
    target = Target("paths")
    ht = Heaptap(["-p", str(target.target_pid), "-i", "100ms", "--stack", "dwarf",
                  "--max-stacks", "10", "--top", "100"])
    ht.attached()
    # A first round teaches heaptap the paths' unwind rules (a copy of each stack goes to it),
    # so that the next rounds are walked by the BPF side: 40 copies fit the ring at once.
    # Fewer are sent when heaptap teaches the rules of the first paths before the round ends:
    # the last paths are then walked in the kernel already. Every copy sent must be unwound.
    target.do("paths 40 1")
    deadline = time.monotonic() + 30
    rec = ht.record()
    while (not rec["stacks"]["samples"] or
           rec["stacks"]["unwound"] + rec["stacks"]["lost_samples"] < rec["stacks"]["samples"]):
        check_true("the first round's copies are unwound", time.monotonic() < deadline, rec)
        rec = ht.record()
    check("copies of the first round lost", rec["stacks"]["lost_samples"], 0)
    target.do("paths 40 19")
    final, status = ht.finish()
    check("heaptap exit status", status, 0)
    check("live blocks", final["live_allocs"], 800)
    check("blocks whose stack was dropped", final["inexact"]["dropped_stacks"], 30 * 20)
    check("stacks stored", final["stacks"]["distinct"], 10)
    check("stack copies lost", final["stacks"]["lost_samples"], 0)
    check("stacks cut short", final["stacks"]["truncated"], 0)
    whole = [s for s in final["sites"] if s["stack"]]
    check("sites with a stack", len(whole), 10)
    for s in whole:
        check("a stored stack, whole", functions(s)[:8],
              ["malloc", "leaf", "level0", "level1", "level2", "level3", "level4", "level5"])
        check("its blocks, one a round", s["live"], 20)
    check("the blocks of the dropped stacks, together",
          [s["live"] for s in final["sites"] if s["stack"] is None], [600])


@test
def test_text_report():
    target = Target("sizes")
    ht = Proc([HEAPTAP, "-p", str(target.target_pid), "-i", "1h", "--max-allocs", "12"])
    deadline = time.monotonic() + 30
    while "attached to PID" not in ht.popen.stderr.readline().decode():
        check_true("heaptap announces the attach", time.monotonic() < deadline)
    target.do("mix")
    ht.popen.send_signal(signal.SIGINT)
    check("exit status", ht.wait(), 0)
    text = ht.popen.stdout.read().decode()
    lines = text.splitlines()
    check_true("title", any(l.startswith("=== heaptap final report") and
                            f"PID {target.target_pid} (sizes)" in l for l in lines), text)
    check_true("allocator line", any(l.startswith("allocator  ") and "libc.so.6" in l
                                     for l in lines), text)
    check_true("full map named with its option",
               "blocks not tracked: allocs map full, raise --max-allocs" in text, text)
    check_true("exact-size row", any(l.split()[:5] == ["16", "10", "0", "10", "160"]
                                     for l in lines), text)
    check_true("range row", any(l.split()[:7] == ["960", "-", "1023", "2", "0", "2", "2,000"]
                                for l in lines), text)
    check_true("site with its direct caller", any(l.strip().startswith("leak_small+0x")
                                                 for l in lines), text)
    check_true("module named", any("leak_small+0x" in l and l.rstrip().endswith("/sizes")
                                   for l in lines), text)
