"""Where the RSS is (rss_parts, doc/rss.md): parts that add up to VmRSS, glibc's chunks
walked (live, free in whole pages) against what the program itself allocated and what
malloc_trim(0) gives back, threads' stacks, and what cannot be read: a heap changing as it is
read, a process without a heap, a kernel without PAGEMAP_SCAN, a process that exits."""
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

from lib import (HEAPTAP, Heaptap, Proc, Target, check, check_true, functions, record_time,
                 test)

PARTS = ("live", "allocator_free", "allocator_unknown", "stacks", "anon_other", "files",
         "shmem")


def status(pid):
    """/proc/PID/status's memory lines, in bytes."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile", "RssShmem"):
                out[key] = int(value.split()[0]) * 1024
    return out


def smaps(pid):
    """Each mapping of /proc/PID/smaps: (start, end, perms, name, Rss bytes)."""
    maps = []
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            parts = line.split()
            if "-" in parts[0] and len(parts) >= 5 and ":" not in parts[0]:
                start, end = (int(x, 16) for x in parts[0].split("-"))
                maps.append([start, end, parts[1], " ".join(parts[5:]), 0])
            elif parts[0] == "Rss:":
                maps[-1][4] = int(parts[1]) * 1024
    return maps


def first_report(ht):
    """The first interval record with rss_parts."""
    while True:
        rec = ht.record()
        if rec is None:
            check_true("an interval record", False, ht.stderr_text()[-400:])
        if rec["type"] == "interval":
            check_true("rss_parts read", rec["rss_parts"] is not None, rec["rss_parts_note"])
            return rec


def check_sum(parts, pid, what=""):
    """The parts add up to VmRSS, as the test reads it, within 3%."""
    vm_rss = status(pid)["VmRSS"]
    total = sum(parts[k] for k in PARTS)
    check_true(f"{what}parts add up to VmRSS within 3%", abs(total - vm_rss) <= 0.03 * vm_rss,
               f"parts {total}, VmRSS {vm_rss}: {dict((k, parts[k]) for k in PARTS)}")
    check_true(f"{what}the total is VmRSS within 3%",
               abs(parts["total"] - vm_rss) <= 0.03 * vm_rss, (parts["total"], vm_rss))
    check_true(f"{what}whole pages are part of the free memory",
               parts["allocator_free_whole_pages"] <= parts["allocator_free"], parts)


def fragmented(env=None):
    """The fragmenting program attached after its allocations: (target, its live bytes and
    blocks as it counted them, heaptap, the first report)."""
    target = Target("fragment")
    live, blocks = (int(x) for x in target.do("fill 20000", timeout=180).split())
    ht = Heaptap(["-p", str(target.target_pid), "-i", "1s"], env=env)
    ht.attached()
    return target, live, blocks, ht, first_report(ht)


@test(sanitized=True)
def test_rss_parts_of_a_fragmenting_glibc_program():
    """8 threads, each in an arena of its own, allocate 20,000 blocks of 500 to 1,499 bytes
    and free 19 of every 20; heaptap attaches after: live is the program's own sum within
    10%, the whole free pages what malloc_trim(0) then gives back within 15%, each arena is
    there with its thread, and the advice says MALLOC_ARENA_MAX."""
    target, live, blocks, ht, rec = fragmented()
    parts = rec["rss_parts"]
    check_sum(parts, target.target_pid)
    check("live from glibc's chunks", parts["live_from"], "chunks")
    check_true("live within 10% of the program's own sum",
               abs(parts["live"] - live) <= 0.10 * live, (parts["live"], live))
    check("read whole", (parts["read"]["walked"], parts["read"]["bins_read"]), (True, True))
    threads = [a for a in parts["arenas"] if not a["main"]]
    check("the threads' arenas", len(threads), 8)
    check("a thread attached to each", [a["threads"] for a in threads], [1] * 8)
    check("one main arena, its state found", [a["address"] is not None for a in
                                               parts["arenas"] if a["main"]], [True])
    check("nothing unknown", parts["allocator_unknown"], 0)
    check("the advice", parts["advice"]["kind"] if parts["advice"] else None, "arena_max")
    check("threads", parts["threads"], 9)
    # The oracle: what malloc_trim(0) gives back, measured around it.
    before = status(target.target_pid)["RssAnon"]
    target.do("trim", timeout=120)
    returned = before - status(target.target_pid)["RssAnon"]
    whole = parts["allocator_free_whole_pages"]
    check_true("whole free pages within 15% of what malloc_trim(0) gave back",
               abs(whole - returned) <= 0.15 * returned, (whole, returned))
    final, code = ht.finish()
    check("heaptap exit status", code, 0)
    check_true("the final report reads them again, whole",
               final["rss_parts"] and final["rss_parts"]["read"]["full"], final["rss_parts"])
    check_true("after the trim, few whole free pages are left",
               final["rss_parts"]["allocator_free_whole_pages"] < 0.05 * whole,
               final["rss_parts"]["allocator_free_whole_pages"])
    check_sum(final["rss_parts"], target.target_pid, "after the trim: ")


@test
def test_sites_that_pin_sparsely_used_pages():
    """100,000 blocks of 200 bytes, 19 of every 20 freed, allocated while heaptap traces:
    a live block on nearly every page and no page free whole. The advice says fragmentation,
    and names the site whose blocks pin the pages, with about one page a block kept."""
    target = Target("fragment")
    ht = Heaptap(["-p", str(target.target_pid), "-i", "1s"])
    ht.attached()
    target.do("sparse 100000", timeout=120)
    # The final report reads the parts whole, whenever the full read before was.
    final, code = ht.finish()
    check("heaptap exit status", code, 0)
    parts = final["rss_parts"]
    check_true("read whole", parts and parts["read"]["full"], final["rss_parts_note"])
    check("the advice", parts["advice"]["kind"] if parts["advice"] else None, "fragmentation")
    top = parts["pinners"][0]
    check_true("the site that pins them", top["caller"].startswith("keep_sparse"), top)
    kept = 100000 // 20
    check_true("about a page a block kept", 0.9 * kept <= top["pages"] <= 1.2 * kept, top)
    check_true("each a sparsely used page", top["pages"] <= parts["sparse_pages"], parts)
    check_true("named in the advice", "keep_sparse" in parts["advice"]["text"], parts["advice"])
    check_sum(parts, target.target_pid)


@test
def test_rss_parts_without_pagemap_scan():
    """HEAPTAP_NO_PAGEMAP_SCAN=1 reads resident pages from /proc/PID/pagemap, as on a kernel
    before 6.7: the same parts, the same oracles."""
    env = dict(os.environ, HEAPTAP_NO_PAGEMAP_SCAN="1")
    target, live, blocks, ht, rec = fragmented(env)
    parts = rec["rss_parts"]
    check("pages read from pagemap", parts["read"]["pages"], "pagemap")
    check_sum(parts, target.target_pid)
    check_true("live within 10% of the program's own sum",
               abs(parts["live"] - live) <= 0.10 * live, (parts["live"], live))
    _, code = ht.finish()
    check("heaptap exit status", code, 0)


@test
def test_threads_stacks_counted():
    """51 threads (50 waiting, blocked, and the main one): each stack found, and the stacks'
    resident bytes those of their mappings as the test reads smaps: the main thread's
    [stack] and the 50 mappings of pthread's default size with a guard page below."""
    target = Target("fragment")
    target.do("threads 50")
    ht = Heaptap(["-p", str(target.target_pid), "-i", "1s"])
    ht.attached()
    parts = first_report(ht)["rss_parts"]
    maps = smaps(target.target_pid)
    size = 8 << 20
    stacks = [m for i, m in enumerate(maps)
              if m[3] == "[stack]" or (m[1] - m[0] == size and m[2] == "rw-p" and i and
                                       maps[i - 1][2] == "---p" and maps[i - 1][1] == m[0])]
    check("stack mappings the test finds", len(stacks), 51)
    check("threads", parts["threads"], 51)
    check_true("every stack mapping found", parts["stack_mappings"] >= 51,
               parts["stack_mappings"])
    want = sum(m[4] for m in stacks)
    check_true("the stacks' resident bytes within 3% of their mappings' Rss",
               abs(parts["stacks"] - want) <= 0.03 * want, (parts["stacks"], want))
    check_true("each stack a page at least", parts["stacks"] >= 51 * 4096, parts["stacks"])
    check_sum(parts, target.target_pid)
    ht.finish()


@test
def test_rss_parts_while_the_heap_and_mappings_change():
    """Mappings made, unmapped and moved by mremap, and the heap's chunks changing, all
    while heaptap reads them (a report every 0.2 s, each a full read): every record valid,
    the parts read at each report, the target's memory intact, heaptap's exit 0."""
    target = Target("mappings")
    target.do("grow 8")
    target.do("churn")
    ht = Heaptap(["-p", str(target.target_pid), "-i", "200ms", "-d", "4s"])
    ht.attached()
    final, code = ht.finish(sig=None)
    check("heaptap exit status", code, 0)
    reports = [r for r in ht.records if r["type"] in ("interval", "final")]
    check_true("reports made", len(reports) >= 5, len(reports))
    check("every report read the parts", [r["rss_parts_note"] for r in reports],
          [None] * len(reports))
    calls = final["rss_parts"]["map_calls"]
    check_true("the program's munmap and mremap calls counted while it churned",
               calls["munmap"]["program"]["calls"] and calls["mremap"]["program"]["calls"],
               calls)
    # mremap's wrapper keeps a frame, unlike mmap's: with frame pointers its caller may not
    # show; the mapping it made while traced is a site of its own all the same.
    check_true("a mapping made while traced: a site with its stack",
               any(s["stack_id"] != "0x0" and s["stack"]
                   for s in final["rss_parts"]["map_sites"]), final["rss_parts"]["map_sites"])
    target.do("calm")
    check("the target's memory as it wrote it", target.do("check"), "ok")
    check_true("target alive", target.alive())


def policy(pid, tid):
    """A thread's scheduling policy (0: SCHED_OTHER, 1: SCHED_FIFO), from its stat."""
    with open(f"/proc/{pid}/task/{tid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[38])


@test
def test_reads_of_the_target_leave_heaptap_at_its_policy():
    """heaptap reads the target's memory and page tables at SCHED_FIFO, a read at a time
    (doc/rss.md): -v says so, and after a report's full read the thread that read is back at
    SCHED_OTHER. Started under nice 5, heaptap reads as it is, and the parts are read all
    the same."""
    target = Target("mappings")
    target.do("grow 8")
    target.do("big 16")
    said = "reads of the target's memory and page tables at SCHED_FIFO"
    for nice in (0, 5):
        ht = Heaptap(["-p", str(target.target_pid), "-i", "1h", "-v"],
                     preexec_fn=lambda: os.nice(nice))
        ht.attached()
        check(f"heaptap's thread at the usual policy before (nice {nice})",
              policy(ht.pid, ht.pid), 0)
        os.kill(ht.pid, signal.SIGUSR1)
        rec = ht.record()
        check("a report", rec and rec["type"], "interval")
        check_true("it read the heap", rec["rss_parts"]["live"] >= 16 * MIB, rec["rss_parts"])
        check(f"heaptap's thread at the usual policy after (nice {nice})",
              policy(ht.pid, ht.pid), 0)
        _, code = ht.finish()
        check("heaptap exit status", code, 0)
        check(f"-v says the reads were at SCHED_FIFO (nice {nice})",
              said in ht.stderr_text(), nice == 0)


@test
def test_rss_parts_of_a_process_without_a_heap():
    """A program that has not called malloc yet: no brk heap, no arena to walk; the parts
    are there all the same and add up."""
    target = Target("fragment")
    check("no brk heap", [m for m in smaps(target.target_pid) if m[3] == "[heap]"], [])
    ht = Heaptap(["-p", str(target.target_pid), "-i", "1s"])
    ht.attached()
    parts = first_report(ht)["rss_parts"]
    check("no arena with a heap", [a for a in parts["arenas"] if a["heaps"]], [])
    check("nothing live", parts["live"], 0)
    check_sum(parts, target.target_pid)
    _, code = ht.finish()
    check("heaptap exit status", code, 0)


@test
def test_rss_parts_of_a_process_that_exits():
    """The target exits while traced: the final report says why it has no parts, and
    heaptap ends as usual."""
    target = Target("fragment")
    ht = Heaptap(["-p", str(target.target_pid), "-i", "1s"])
    ht.attached()
    first_report(ht)
    target.send("exit")
    target.popen.wait(timeout=30)
    final, code = ht.finish(sig=None)
    check("heaptap exit status", code, 0)
    check("no parts", final["rss_parts"], None)
    check("why", final["rss_parts_note"], "the target has exited")


def metrics(port):
    """/metrics of heaptap's --listen, once it answers: {(name, part): value}."""
    import urllib.request
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                body = r.read().decode()
            break
        except OSError:
            check_true("/metrics answers", time.monotonic() < deadline)
            time.sleep(0.2)
    out = {}
    for line in body.splitlines():
        m = re.match(r'(heaptap_rss_\w+)(?:\{part="(\w+)"\})? (\S+)$', line)
        if m:
            out[(m.group(1), m.group(2))] = float(m.group(3))
    return out


@test(tier="services")
def test_rss_parts_in_prometheus_and_html():
    """The same parts in every output: Prometheus' series as the JSON record says them, and
    the HTML page (rendered by Chromium) with a row per part, the advice and the chart's
    areas."""
    from test_outputs import Dom, chromium, free_port, out_dir, page_checks
    target = Target("fragment")
    target.do("fill 5000", timeout=180)
    port = free_port()
    path = os.path.join(out_dir("rss-html"), "report.html")
    ht = Heaptap(["-p", str(target.target_pid), "-i", "1s", "--listen", str(port),
                  "--html", path])
    ht.attached()
    rec = first_report(ht)
    # The target waits: from one report to the next, its parts stay.
    while True:
        got = metrics(port)
        rec = ht.record()
        if rec["type"] == "interval" and got.get(("heaptap_rss_part_bytes", "live")) == \
                rec["rss_parts"]["live"]:
            break
    for part in PARTS + ("total", "allocator_free_whole_pages"):
        check(f"heaptap_rss_part_bytes{{part={part}}}", got[("heaptap_rss_part_bytes", part)],
              rec["rss_parts"][part])
    check("heaptap_rss_arenas", got[("heaptap_rss_arenas", None)], len(rec["rss_parts"]["arenas"]))
    final, code = ht.finish()
    check("heaptap exit status", code, 0)
    out, err = chromium(["--dump-dom", "file://" + path])
    dom = Dom(out)
    page_checks(dom, err)
    rows = dom.one("table", id="rss-parts").find("tbody")[0].find("tr")
    check("a row per part, and the whole pages", len(rows), len(PARTS) + 1)
    live = [r for r in rows if r.find("td")[0].text().startswith("Live")][0]
    check_true("live's bytes as the record says", f"{final['rss_parts']['live']:,} B" in
               live.text(), live.text())
    check("the advice", dom.one("p", id="rss-advice").text(), final["rss_parts"]["advice"]["text"])
    areas = [e for e in dom.one("svg", id="rss-chart").find("path") if e.attrs.get("fill")]
    check("an area per part", len(areas), len(PARTS))
    check_true("areas with numbers", all("NaN" not in a.attrs["d"] for a in areas))


MIB = 1 << 20

# A sample line of the text exposition format: name, {labels} or nothing, value.
SAMPLE = re.compile(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)')


def parse_exposition(body):
    """Prometheus' text format, strictly: promtool's check of it passes, and each sample line
    parses; {(name, ((label, value), ...)): value}, the label values unescaped."""
    check_prom = subprocess.run(["promtool", "check", "metrics"], input=body.encode(),
                                capture_output=True, timeout=60)
    check("promtool check metrics", (check_prom.returncode, check_prom.stdout.decode() +
                                     check_prom.stderr.decode()), (0, ""))
    out = {}
    for line in body.splitlines():
        if line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        check_true("a sample line", m, line)
        labels, rest = [], m.group(2) or ""
        while rest:
            lm = LABEL.match(rest)
            check_true("a label", lm, line)
            value = re.sub(r'\\(.)', lambda e: "\n" if e.group(1) == "n" else e.group(1),
                           lm.group(2))
            labels.append((lm.group(1), value))
            rest = rest[lm.end():]
        key = (m.group(1), tuple(labels))
        check_true("each series once", key not in out, line)
        out[key] = float(m.group(3))
    return out


def series(samples, name):
    """The samples of one family: [({label: value}, value)]."""
    return [(dict(labels), v) for (n, labels), v in samples.items() if n == name]


def map_cache_site(parts):
    """The map site of map_cache, the mappings target's mmap of "grow N"."""
    sites = [s for s in parts["map_sites"] if s["function"] == "map_cache"]
    check("one map site named map_cache", len(sites), 1)
    return sites[0]


@test
def test_map_site_named_in_text_and_json():
    """A program that grows by mappings of its own: one of 8 MiB mapped before the attach,
    five while traced (map_cache maps 8 MiB and writes every byte). The map site is named
    map_cache, with its stack, its resident bytes (those written), its calls and its growth;
    the mapping made before the attach has no name; the mmap calls are counted the
    program's, and the one glibc makes inside malloc for a block of 16 MiB the allocator's
    (no map site); the advice names the site; the text report says the same."""
    target = Target("mappings")
    target.do("grow 8")
    ht = Heaptap(["-p", str(target.target_pid), "-i", "200ms"])
    ht.attached()
    for _ in range(5):
        target.do("grow 8")
        time.sleep(0.4)
    check("a block of 16 MiB malloc'd", target.do("big 16"), "1")
    final, code = ht.finish()
    check("heaptap exit status", code, 0)
    parts = final["rss_parts"]
    site = map_cache_site(parts)
    check("its resident bytes: every byte written", site["bytes"], 5 * 8 * MIB)
    check("the bytes its mappings span", site["size"], 5 * 8 * MIB)
    check("its calls", site["mappings"], 5)
    check("its file", os.path.basename(site["file"] or ""), "mappings.c")
    check("its stack: map_cache, then main", [f["function"] for f in site["stack"]
                                              if f["function"] in ("map_cache", "main")],
          ["map_cache", "main"])
    check_true("it grows", (site["growth_bytes_per_hour"] or 0) > 0, site)
    before = [s for s in parts["map_sites"] if s["stack_id"] == "0x0"]
    check("the mapping made before the attach: no name", [s["function"] for s in before],
          [None])
    check_true("its 8 MiB", before[0]["bytes"] >= 8 * MIB, before[0])
    calls = parts["map_calls"]["mmap"]
    check_true("the program's mmap calls counted", calls["program"]["calls"] >= 5, calls)
    check_true("their bytes", calls["program"]["bytes"] >= 5 * 8 * MIB, calls)
    # glibc maps the 16 MiB block inside malloc: the allocator's call, no map site.
    check("the allocator's mmap calls", calls["allocator"]["calls"], 1)
    check_true("its bytes", 16 * MIB < calls["allocator"]["bytes"] <= 16 * MIB + 4096, calls)
    check("no map site of big_block or malloc", [s["function"] for s in parts["map_sites"]
                                                  if s["function"] not in ("map_cache", None)],
          [])
    check_true("the block live, from glibc's mmapped chunks",
               parts["mmapped"]["live"] >= 16 * MIB and parts["live"] >= 16 * MIB, parts)
    check_true("other anonymous memory holds them", parts["anon_other"] >= 6 * 8 * MIB, parts)
    check("the advice", parts["advice"]["kind"] if parts["advice"] else None, "map_site")
    check_true("names map_cache", "map_cache" in parts["advice"]["text"], parts["advice"])
    check_sum(parts, target.target_pid)
    # The text report: a process of heaptap's writing its latest report to a file.
    path = os.path.join(tempfile.mkdtemp(prefix="heaptap-rss-"), "report.txt")
    text = Proc([HEAPTAP, "-p", str(target.target_pid), "-i", "200ms", "-o", path],
                stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not os.path.exists(path):
        check_true("the first report written", time.monotonic() < deadline, path)
        time.sleep(0.1)
    target.do("grow 4")
    time.sleep(0.5)
    os.kill(text.pid, signal.SIGINT)
    check("text heaptap exit status", text.wait(), 0)
    with open(path) as f:
        report = f.read()
    shutil.rmtree(os.path.dirname(path))
    sites = report[report.index("MAP SITES"):]
    check_true("the map sites listed", "map_cache" in sites, sites[:600])
    check_true("its bytes", re.search(r"#\d+\s+4\.0 MiB resident in 1 mapping", sites),
               sites[:600])
    check_true("the mappings made before", "mapped before the attach" in sites, sites[:600])


def without_tracefs():
    """In the child before it runs heaptap: a mount namespace of its own in which the tracing
    filesystem is not mounted, nor debugfs, whose tracing directory would mount it at its
    first look (the host's mounts untouched)."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    ms_rec, ms_private, mnt_detach = 0x4000, 0x40000, 2
    if libc.unshare(0x20000) or libc.mount(b"none", b"/", None, ms_rec | ms_private, None):
        raise OSError(ctypes.get_errno(), "unshare or mount")
    for path in (b"/sys/kernel/debug/tracing", b"/sys/kernel/debug", b"/sys/kernel/tracing"):
        for _ in range(8):  # mounts stacked there, each
            if libc.umount2(path, mnt_detach):
                break


@test
def test_map_sites_named_where_tracefs_is_not_mounted():
    """On a host that has not mounted the tracing filesystem, where libbpf finds the system
    calls' tracepoints by their ids, heaptap mounts it and names the map sites as anywhere."""
    target = Target("mappings")
    ht = Heaptap(["-p", str(target.target_pid), "-i", "200ms", "-v"], preexec_fn=without_tracefs)
    ht.attached()
    for _ in range(2):
        target.do("grow 8")
    final, code = ht.finish()
    check("heaptap exit status", code, 0)
    check_true("it mounted the tracing filesystem", "tracefs mounted at" in ht.stderr_text(),
               ht.stderr_text()[-2000:])
    check("map_cache's mappings", map_cache_site(final["rss_parts"])["mappings"], 2)


@test(tier="services")
def test_map_sites_in_prometheus():
    """The map sites in --listen's metrics as the JSON record of the same report lists them:
    rank, function, file:line, resident bytes and growth, the scrape checked by promtool and
    parsed strictly; the site that maps while traced first, the mappings made before the
    attach without a name."""
    from test_outputs import free_port
    import urllib.request
    target = Target("mappings")
    target.do("grow 8")
    port = free_port()
    ht = Heaptap(["-p", str(target.target_pid), "-i", "1s", "--listen", str(port)])
    ht.attached()
    first_report(ht)
    for _ in range(3):
        target.do("grow 4")
        ht.record()
    # The report a scrape rendered: the one whose elapsed time it says.
    deadline = time.monotonic() + 60
    while True:
        check_true("a scrape of the report just read", time.monotonic() < deadline)
        rec = ht.record()
        if rec["type"] != "interval":
            continue
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            body = r.read().decode()
        got = parse_exposition(body)
        if abs(got[("heaptap_elapsed_seconds", ())] - rec["elapsed_s"]) < 0.002 and \
                all(s["growth_bytes_per_hour"] is not None
                    for s in rec["rss_parts"]["map_sites"] if s["function"] == "map_cache"):
            break
    sites = rec["rss_parts"]["map_sites"]
    check("the map sites in the record", [s["function"] for s in sites], ["map_cache", None])
    want_bytes, want_growth = {}, {}
    for rank, s in enumerate(sites, 1):
        labels = (("rank", str(rank)), ("function", s["function"] or "[unknown]"),
                  ("location", f"{os.path.basename(s['file'])}:{s['line']}" if s["file"]
                   else ""))
        want_bytes[labels] = s["bytes"]
        if s["growth_bytes_per_hour"] is not None:
            want_growth[labels] = s["growth_bytes_per_hour"]
    check("heaptap_rss_map_site_bytes as the record says",
          {tuple(l.items()): v for l, v in series(got, "heaptap_rss_map_site_bytes")},
          want_bytes)
    check("map_cache's bytes: the three mappings made while traced",
          want_bytes[(("rank", "1"), ("function", "map_cache"),
                      ("location", f"mappings.c:{sites[0]['line']}"))], 12 * MIB)
    growth = {tuple(l.items()): v
              for l, v in series(got, "heaptap_rss_map_site_growth_bytes_per_hour")}
    check("the growth series: those the record has", sorted(growth), sorted(want_growth))
    for labels, v in want_growth.items():
        check_true(f"growth of {labels}", abs(growth[labels] - v) <= 1e-6 * max(1, abs(v)),
                   (growth[labels], v))
    _, code = ht.finish()
    check("heaptap exit status", code, 0)


def live_or_watch(mode):
    """The mappings target under --live or --watch, growing by a mapping of its own while
    traced: the final record."""
    target = Target("mappings")
    ht = Heaptap(["-p", str(target.target_pid), mode, "-i", "300ms"])
    ht.attached()
    first_report(ht)
    target.do("grow 8")
    time.sleep(1)
    final, code = ht.finish()
    check("heaptap exit status", code, 0)
    check_true("parts in every report", all(r["rss_parts"] for r in ht.records
                                             if r["type"] in ("interval", "final")))
    parts = final["rss_parts"]
    check_sum(parts, target.target_pid)
    check("map_cache's bytes", map_cache_site(parts)["bytes"], 8 * MIB)
    return parts


@test
def test_rss_parts_in_live_reports():
    """--live: the parts in each report, glibc's chunks walked, the site of a mapping made
    while traced named."""
    parts = live_or_watch("--live")
    check("live from glibc's chunks", parts["live_from"], "chunks")


@test
def test_rss_parts_in_watch_reports():
    """--watch (no allocator probes): the parts in each report, the site of a mapping named;
    who made it (the program or its allocator) is not known without allocator probes."""
    parts = live_or_watch("--watch")
    calls = parts["map_calls"]["mmap"]
    check("no mmap call counted the program's or the allocator's",
          (calls["program"]["calls"], calls["allocator"]["calls"]), (0, 0))
    check_true("counted unknown", calls["unknown"]["calls"] >= 1, calls)


def watch_fills(target, after_first=None):
    """The mappings target maps both regions while heaptap --watch traces it, and writes a
    page of each first, then the rest: 30 pages of the pool and 10 of the table from fill_pool,
    20 of the table from fill_table. after_first() waits for the first pages' stacks."""
    check("both regions mapped", target.do("wmap 256"), "1")
    target.do("wfill 1 1 1")
    if after_first:
        after_first()
    target.do("wfill 29 9 19")
    time.sleep(0.5)


@test
def test_watch_new_pages_by_map_site():
    """--watch: the new pages' stacks say who touched what. map_pool and map_table each map 256
    pages while traced (the kernel merges the two mappings into one); fill_pool writes 30
    pages of the pool and 10 of the table, fill_table 20 more of the table. Each writer's site
    lists the mapping sites of its pages with their exact counts, in JSON and in the text
    report (a second run, writing it to a file: two heaptaps watching the same faults would
    not both see them)."""
    target = Target("mappings")
    ht = Heaptap(["-p", str(target.target_pid), "--watch", "-i", "200ms"])
    ht.attached()

    def unwound():
        # In dwarf or copy stack modes, a path's first stacks are unwound from copies, and
        # the next ones' by the rules those taught.
        deadline = time.monotonic() + 30
        rec = ht.record()
        while rec["stacks"]["mode"] != "fp" and (
                not rec["stacks"]["samples"] or
                rec["stacks"]["unwound"] + rec["stacks"]["lost_samples"] <
                rec["stacks"]["samples"]):
            check_true("the first pages' stacks are unwound", time.monotonic() < deadline,
                       rec["stacks"])
            rec = ht.record()
        return rec["stacks"]["mode"]

    watch_fills(target, unwound)
    final, code = ht.finish()
    check("heaptap exit status", code, 0)
    target.end()

    def writer(site):
        return next((f for f in functions(site) if f), None)

    sites = {writer(s): s for s in final["sites"] if writer(s) in ("fill_pool", "fill_table")}
    check("a site for each writer", sorted(sites), ["fill_pool", "fill_table"])
    got = {w: [(m["function"], os.path.basename(m["file"] or ""), m["pages"])
               for m in s["mapped_by"]] for w, s in sites.items()}
    check("fill_pool's pages: in the pool, then in the table", got["fill_pool"],
          [("map_pool", "mappings.c", 30), ("map_table", "mappings.c", 10)])
    check("fill_table's pages: in the table", got["fill_table"],
          [("map_table", "mappings.c", 20)])
    check("its pages, all of them mapped by a site", [sites[w]["live"] for w in sorted(sites)],
          [40, 20])
    for w in sites:
        for m in sites[w]["mapped_by"]:
            check_true(f"{w}: {m['function']}'s stack, the mapping call's",
                       m["function"] in functions(m), m)

    # The text report: heaptap writing its latest report to a file.
    target = Target("mappings")
    path = os.path.join(tempfile.mkdtemp(prefix="heaptap-watch-"), "report.txt")
    text = Proc([HEAPTAP, "-p", str(target.target_pid), "--watch", "-i", "200ms", "-o", path],
                stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not os.path.exists(path):
        check_true("the first report written", time.monotonic() < deadline, path)
        time.sleep(0.1)
    watch_fills(target, lambda: time.sleep(1))
    os.kill(text.pid, signal.SIGINT)
    check("text heaptap exit status", text.wait(), 0)
    target.end()
    with open(path) as f:
        report = f.read()
    shutil.rmtree(os.path.dirname(path))
    check_true("the text: fill_pool's 40 pages by map_pool and map_table, then its stack",
               re.search(r"in 40 new pages[^\n]*\n    in mappings of map_pool \(\S*mappings\.c:"
                         r"\d+\): 30 pages, map_table \(\S*mappings\.c:\d+\): 10 pages\n"
                         r"(?:      .*\n)*?      fill_pool", report), report[-3000:])
    check_true("the text: fill_table's 20 pages by map_table, then its stack",
               re.search(r"in 20 new pages[^\n]*\n    in mappings of map_table \(\S*mappings\.c:"
                         r"\d+\): 20 pages\n(?:      .*\n)*?      fill_table", report),
               report[-3000:])


@test
def test_rss_parts_of_a_tcmalloc_program_against_its_own_figures():
    """A program on tcmalloc, which heaptap does not walk, allocates 200,000 blocks of 500
    to 1,499 bytes while traced and frees 19 of every 20. heaptap's live is the blocks it
    tracked (the program's own sum exactly), at most tcmalloc's allocated bytes (its size
    classes round up); the allocator's resident memory as heaptap measures it (live and
    allocator_unknown: its mappings' resident pages) holds tcmalloc's allocated bytes and
    its page heap's free bytes, and is within its heap less what it unmapped, and its
    metadata; the advice says purge. After MallocExtension_ReleaseFreeMemory(), unknown
    falls by what tcmalloc says it returned, within 10%."""
    target = Target("tcfrag")
    ht = Heaptap(["-p", str(target.target_pid), "-i", "300ms"])
    ht.attached()
    live, blocks = (int(x) for x in target.do("fill 200000", timeout=180).split())
    allocated, heap, free, unmapped = (int(x) for x in target.do("stats").split())
    rec = next_record_after(ht, time.time())
    parts = rec["rss_parts"]
    check("live from heaptap's blocks", parts["live_from"], "blocks")
    check("live: the program's own sum", parts["live"], live)
    check_true("at most tcmalloc's allocated bytes", parts["live"] <= allocated,
               (parts["live"], allocated))
    resident = parts["live"] + parts["allocator_unknown"]
    print(f"  tcmalloc: allocated {allocated}, heap {heap}, free {free}, unmapped {unmapped};"
          f" heaptap: live {parts['live']}, allocator's resident {resident}")
    check_true("the allocator's resident memory holds its allocated and free bytes",
               resident >= allocated + free, (resident, allocated, free))
    check_true("within its heap less what it unmapped, and 10% for its metadata",
               resident <= 1.10 * (heap - unmapped), (resident, heap, unmapped))
    check("nothing called free that heaptap cannot tell", parts["allocator_free"], 0)
    check("the advice", parts["advice"]["kind"] if parts["advice"] else None, "purge")
    check_sum(parts, target.target_pid)
    target.do("release")
    _, _, free_after, unmapped_after = (int(x) for x in target.do("stats").split())
    returned = unmapped_after - unmapped
    after = next_record_after(ht, time.time())["rss_parts"]
    fell = parts["allocator_unknown"] - after["allocator_unknown"]
    check_true("unknown falls by what tcmalloc returned, within 10%",
               abs(fell - returned) <= 0.10 * returned, (fell, returned))
    _, code = ht.finish()
    check("heaptap exit status", code, 0)


def next_record_after(ht, t):
    """The first interval record made after the wall clock time t, by its own time (a reader
    that lags behind reads records made before t well after it)."""
    while True:
        rec = ht.record()
        if rec is None:
            check_true("an interval record", False, ht.stderr_text()[-400:])
        if rec["type"] == "interval" and record_time(rec) > t:
            return rec


def redis_info_memory(port):
    """redis-server's INFO memory, the numeric fields."""
    out = subprocess.run(["redis-cli", "-p", str(port), "info", "memory"], capture_output=True,
                         text=True, timeout=30).stdout
    info = {}
    for line in out.splitlines():
        key, _, value = line.strip().partition(":")
        if value.isdigit():
            info[key] = int(value)
    return info


@test(tier="services")
def test_rss_parts_of_redis_against_its_info_memory():
    """redis-server on jemalloc, which heaptap does not walk, filled by redis-benchmark's
    SETs while traced. What heaptap bounds, against redis's own INFO memory (jemalloc's
    stats) read at the same moment, redis idle: live (the blocks allocated while traced) at
    most jemalloc's allocated bytes; the allocator's resident memory as heaptap measures it
    (live and allocator_unknown: its mappings' resident pages) at least jemalloc's allocated
    bytes and at most its resident bytes (a maximum, by jemalloc's own account), with 5% for
    other mappings of redis's; the parts add up."""
    from test_redis import free_port, start_redis
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="heaptap-redis-") as workdir:
        redis = start_redis(port, workdir)
        ht = Heaptap(["-p", str(redis.pid), "-i", "300ms"])
        ht.attached()
        bench = subprocess.run(["redis-benchmark", "-p", str(port), "-t", "set", "-c", "5",
                                "-n", "200000", "-r", "200000", "-d", "300", "-q"],
                               capture_output=True, text=True, timeout=600)
        check("redis-benchmark exit status", bench.returncode, 0)
        time.sleep(1)
        info = redis_info_memory(port)
        parts = next_record_after(ht, time.time())["rss_parts"]
        info_after = redis_info_memory(port)
        _, code = ht.finish()
        check_sum(parts, redis.pid)
        redis.end()
    check("heaptap exit status", code, 0)
    allocated, resident = info["allocator_allocated"], info["allocator_resident"]
    print(f"  jemalloc: allocated {allocated}, active {info['allocator_active']}, resident "
          f"{resident}; heaptap: live {parts['live']}, unknown {parts['allocator_unknown']}")
    check_true("redis idle between the readings",
               abs(info_after["allocator_allocated"] - allocated) <= 0.01 * allocated,
               (allocated, info_after["allocator_allocated"]))
    check("live from heaptap's blocks", parts["live_from"], "blocks")
    check_true("live at most jemalloc's allocated bytes", parts["live"] <= allocated,
               (parts["live"], allocated))
    check_true("live: most of them (allocated while traced)", parts["live"] >= 0.5 * allocated,
               (parts["live"], allocated))
    mine = parts["live"] + parts["allocator_unknown"]
    check_true("the allocator's resident memory at least jemalloc's allocated bytes",
               mine >= allocated, (mine, allocated))
    # jemalloc's resident is a maximum: pages of its extents never touched count in it.
    check_true("and at most jemalloc's resident bytes, and 5% for redis's own mappings",
               mine <= 1.05 * resident, (mine, resident))
