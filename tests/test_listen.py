"""--listen as scrapers meet it: a real Prometheus scraping every second while 500 idle
connections and a slowloris client hold on, and heaptap's exit under them; the heap profile
read by go tool pprof over HTTP; names that are not UTF-8 through the real binaries."""
import gzip
import os
import resource
import signal
import sys
import time
import urllib.error
import urllib.request

from lib import HEAPTAP, Failure, Heaptap, Proc, Target, check, check_true, parse_record, test
from test_hostile import COMM, SYMBOL, clean_text
from test_outputs import (MIX_ALLOCATED, MIX_LIVE, by_caller, free_port, out_dir, pprof_top,
                          start_prometheus)

# tests/targets/hostile.c's mapping function, escaped as heaptap shows it.
MAPPER = r"evilmap\xff\x1b[31mname<i>"

# A child holding connections open to 127.0.0.1:PORT: N that send nothing, and a slowloris
# client sending a request one byte every 1.5 s. It says how many it could open (it stops at
# the first the server does not accept within a second); whatever the server closes is
# opened again at once. "report" on its stdin: how long each slowloris connection lasted
# before the server closed it, how many idle ones it closed, and connections that failed.
HOLDER = r'''
import resource, selectors, socket, sys, time

port, n = int(sys.argv[1]), int(sys.argv[2])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, n + 64)), hard))
sel = selectors.DefaultSelector()
sel.register(sys.stdin, selectors.EVENT_READ, ("stdin", 0))
slow_lived, idle_closed, answered, failed = [], 0, 0, 0


def connect(kind):
    s = socket.create_connection(("127.0.0.1", port), timeout=1)
    s.setblocking(False)
    if kind == "slowloris":
        s.send(b"GET /metrics HTTP/1.1\r\nHost: heaptap\r\nX-Slow: ")
    sel.register(s, selectors.EVENT_READ, (kind, time.monotonic()))
    return s


opened = 0
try:
    slow = connect("slowloris")
    while opened < n:
        connect("idle")
        opened += 1
except OSError:
    pass
print(f"holding {opened} idle connections and a slowloris client", flush=True)
next_byte = time.monotonic() + 1.5
while True:
    for key, _ in sel.select(timeout=max(0, next_byte - time.monotonic())):
        kind, since = key.data
        if kind == "stdin":
            if not sys.stdin.readline():
                sys.exit(0)
            print(f"slowloris lasted {' '.join(f'{t:.1f}' for t in slow_lived)}; "
                  f"idle closed {idle_closed}; answered {answered}; failed {failed}",
                  flush=True)
            continue
        try:
            data = key.fileobj.recv(65536)
        except OSError:
            data = b""
        if data:
            answered += 1
            continue
        sel.unregister(key.fileobj)
        key.fileobj.close()
        if kind == "slowloris":
            slow_lived.append(time.monotonic() - since)
        else:
            idle_closed += 1
        try:
            s = connect(kind)
            if kind == "slowloris":
                slow = s
        except OSError:
            failed += 1
    if time.monotonic() >= next_byte:
        try:
            slow.send(b"x")
        except OSError:
            pass
        next_byte += 1.5
'''


def timed_get(url, timeout=5):
    """(HTTP status, body, seconds from connecting to the last byte); a fresh connection."""
    start = time.monotonic()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            status, body = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, body = e.code, e.read()
    return status, body, time.monotonic() - start


def wait_status(url, status, timeout=30):
    """Waits until url answers status; returns the body."""
    deadline = time.monotonic() + timeout
    got = None
    while time.monotonic() < deadline:
        try:
            got, body, _ = timed_get(url)
        except OSError:
            got = None
        if got == status:
            return body
        time.sleep(0.1)
    raise Failure(f"{url} did not answer {status} within {timeout}s (last: {got})")


def wait_query(query, q, timeout=30):
    """Waits until Prometheus' query q returns something; returns it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = query(q)
        if result:
            return result
        time.sleep(0.25)
    raise Failure(f"Prometheus has no {q} after {timeout}s")


def soft_nofile_1024():
    """preexec_fn: 1024 open files, the usual default soft limit."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), hard))


def soft_nofile(pid):
    with open(f"/proc/{pid}/limits") as f:
        for line in f:
            if line.startswith("Max open files"):
                return int(line.split()[3])
    raise Failure(f"no open-file limit in /proc/{pid}/limits")


@test(tier="services", needs=("alone",))
def test_listen_answers_every_scrape_under_idle_and_slowloris_clients():
    """Every scrape and every direct GET answered within 100 ms while 500 idle and slowloris
    clients hold connections. Alone: the bound is on heaptap's server, which other tests'
    load would delay."""
    d = out_dir("listen-load")
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    prom, query = start_prometheus(d, port)
    target = Target("sizes")
    # --watch: no uprobes, whose removal waits for kernel grace periods (doc/limits.md),
    # so the exit measured is heaptap's own. -o: stdout stays quiet while the test
    # does other things than read it.
    ht = Heaptap(["-p", str(target.target_pid), "--watch", "-i", "200ms", "--listen", str(port),
                  "-o", os.path.join(d, "report.json")], preexec_fn=soft_nofile_1024)
    ht.attached()
    wait_status(url, 200)
    wait_query(query, 'up{job="heaptap"} == 1')

    holder = Proc([sys.executable, "-c", HOLDER, str(port), "500"])
    check("connections the server accepted", holder.read_line(),
          "holding 500 idle connections and a slowloris client")
    # Longer than the 10 s a request may take: the slowloris connection is cut meanwhile.
    start = time.time()
    gets = []
    while time.time() < start + 16:
        status, body, took = timed_get(url)
        check("a direct GET's status", status, 200)
        check_true("a direct GET's metrics", b"\nheaptap_up 1\n" in body, body[:200])
        gets.append(took)
        time.sleep(0.25)
    end = time.time()
    holder.send("report")
    said = holder.read_line()
    check_true("the socket holder still holds", holder.popen.poll() is None, said)

    # Prometheus' own account of its scrapes meanwhile.
    window = f"[{int(end - start) + 5}s]"

    def samples(q):
        result = query(q + window)
        return [(float(t), float(v)) for t, v in (result[0]["values"] if result else [])
                if start <= float(t) <= end]

    durations = [v for _, v in samples('scrape_duration_seconds{job="heaptap"}')]
    ups = [v for _, v in samples('up{job="heaptap"}')]
    check_true("Prometheus scraped about every second", len(durations) >= 14, durations)
    check("scrapes that failed", [v for v in ups if v != 1], [])
    durations.sort()
    gets.sort()
    print(f"    scrapes {len(durations)}: median {durations[len(durations) // 2] * 1000:.1f} ms, "
          f"max {durations[-1] * 1000:.1f} ms; direct GETs {len(gets)}: median "
          f"{gets[len(gets) // 2] * 1000:.1f} ms, max {gets[-1] * 1000:.1f} ms; {said}")
    check_true("every scrape answered within 100 ms", durations[-1] < 0.1, durations)
    check_true("every direct GET answered within 100 ms", gets[-1] < 0.1, gets)
    lasted = [float(t) for t in said.split(";")[0].split()[2:]]
    check_true("the slowloris client cut off at the 10 s deadline",
               lasted and all(9.5 <= t <= 11.5 for t in lasted), said)
    check_true("idle connections closed after 10 s and opened again",
               int(said.split("idle closed ")[1].split(";")[0]) >= 500, said)
    check_true("no connection failed", said.endswith("; failed 0"), said)
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    check("heaptap's soft limit of open files, raised for its connections",
          soft_nofile(ht.pid), min(hard, 2048))

    # SIGINT with every connection still open.
    sent = time.monotonic()
    os.kill(ht.pid, signal.SIGINT)
    status = ht.wait()
    took = time.monotonic() - sent
    print(f"    exit {took * 1000:.0f} ms after SIGINT")
    check("heaptap exit status", status, 0)
    check_true("heaptap exits within 1 s of SIGINT", took < 1.0, f"{took:.3f}s")
    with open(os.path.join(d, "report.json")) as f:
        check("the final report written", parse_record(f.read())["type"], "final")
    os.kill(prom.pid, signal.SIGTERM)
    prom.wait()


@test(tier="services")
def test_listen_serves_heap_profiles_to_go_tool_pprof():
    target = Target("sizes")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    # -i 1h: the one report is the one SIGUSR1 asks for, once the mix is made.
    ht = Heaptap(["-p", str(target.target_pid), "-i", "1h", "--listen", str(port)])
    ht.attached()
    for path in ("/metrics", "/debug/pprof/heap", "/debug/pprof/allocs"):
        check(f"{path} before the first report", timed_get(base + path)[0], 503)
    target.do("mix")
    os.kill(ht.pid, signal.SIGUSR1)
    rec = ht.record()
    check("heaptap's report", rec["live_bytes"], 13160)

    status, body, _ = timed_get(base + "/debug/pprof/heap")
    check("HTTP status of /debug/pprof/heap", status, 200)
    check_true("a gzip'd profile", len(gzip.decompress(body)) > 0)
    heap, text = pprof_top(base + "/debug/pprof/heap")
    check_true("/debug/pprof/heap: inuse_space by default", "Type: inuse_space" in text, text)
    check("/debug/pprof/heap by function, as heaptap's JSON report", heap, by_caller(rec))
    check("/debug/pprof/heap by function", heap, MIX_LIVE)
    allocs, text = pprof_top(base + "/debug/pprof/allocs")
    check_true("/debug/pprof/allocs: alloc_space by default", "Type: alloc_space" in text, text)
    check("/debug/pprof/allocs by function", allocs, MIX_ALLOCATED)
    live, _ = pprof_top(base + "/debug/pprof/allocs", "inuse_space")
    check("/debug/pprof/allocs' inuse_space: the same profile", live, MIX_LIVE)
    final, status = ht.finish()
    check("heaptap exit status", status, 0)


def string_table(profile):
    """The string_table (field 6) of an encoded profile.proto message, as bytes."""
    def varint(i):
        value = shift = 0
        while True:
            b = profile[i]
            value |= (b & 0x7f) << shift
            shift += 7
            i += 1
            if b < 0x80:
                return value, i

    strings, i = [], 0
    while i < len(profile):
        key, i = varint(i)
        kind = key & 7
        if kind == 0:
            _, i = varint(i)
        elif kind == 1:
            i += 8
        elif kind == 5:
            i += 4
        elif kind == 2:
            n, i = varint(i)
            if key >> 3 == 6:
                strings.append(profile[i:i + n])
            i += n
        else:
            raise Failure(f"not a protobuf message: wire type {kind} at {i}")
    return strings


@test(tier="services")
def test_listen_and_pprof_with_names_that_are_not_utf8():
    d = out_dir("listen-hostile")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    profile = os.path.join(d, "heap.pb.gz")
    prom, query = start_prometheus(d, port)
    target = Target("hostile")
    ht = Proc([HEAPTAP, "-p", str(target.target_pid), "-i", "1h", "--listen", str(port),
               "--pprof", profile, "-o", os.path.join(d, "report.txt")])
    while True:
        line = ht.popen.stderr.readline()
        check_true("heaptap attaches", line, f"exit status {ht.popen.poll()}")
        if b"attached to PID" in line:
            break
    # The thread with the hostile name leaks 200 bytes, the hostile symbol 100; another maps
    # 64 KiB and writes them.
    target.do("leak")
    target.do("map")
    os.kill(ht.pid, signal.SIGUSR1)
    metrics = clean_text("the metrics", wait_status(base + "/metrics", 200))
    check_true("the process name in the metrics, escaped", COMM.replace("\\", "\\\\")
               .replace('"', '\\"') in metrics, metrics)

    wait_query(query, "heaptap_target_info")
    up = query('up{job="heaptap"}')
    check("Prometheus' up: the scrape was accepted", up and up[0]["value"][1], "1")
    info = query("heaptap_target_info")
    check("the comm label", info[0]["metric"]["comm"], COMM)
    sites = {r["metric"]["function"]: r["value"][1] for r in query("heaptap_site_live_bytes")}
    check("the function label of the hostile symbol's site", sites.get(SYMBOL), "100")
    check("the hostile thread's site", sites.get("worker"), "200")
    maps = {r["metric"]["function"]: r["value"][1] for r in query("heaptap_rss_map_site_bytes")}
    check("the function label of the hostile mapper's map site", maps.get(MAPPER), "65536")
    check_true("its label in the metrics, escaped",
               'function="' + MAPPER.replace("\\", "\\\\") + '"' in metrics, metrics)

    status, body, _ = timed_get(base + "/debug/pprof/heap")
    check("HTTP status of /debug/pprof/heap", status, 200)
    with open(profile, "rb") as f:
        written = f.read()
    for name, source, data in (("/debug/pprof/heap", base + "/debug/pprof/heap", body),
                               ("--pprof", profile, written)):
        strings = string_table(gzip.decompress(data))
        for s in strings:
            clean_text(f"{name}'s string {s!r}", s)
        check_true(f"{name}: the hostile symbol, escaped, in the string table",
                   SYMBOL.encode() in strings, strings)
        flat, text = pprof_top(source)
        # pprof shows names without what looks like C++ template arguments ("<b>").
        check(f"{name}: the hostile symbol's bytes", flat.get(SYMBOL.split("<")[0]), 100)
        check(f"{name}: the hostile thread's bytes", flat.get("worker"), 200)
        check_true(f"{name}: the process name, escaped", f"({COMM})" in text, text)
    os.kill(ht.pid, signal.SIGINT)
    check("heaptap exit status", ht.wait(), 0)
    os.kill(prom.pid, signal.SIGTERM)
    prom.wait()
