"""The formats other tools read: --output, --folded, --pprof (read by go tool pprof), --listen
(scraped by a real Prometheus), --html (rendered by headless Chromium), the JSON schema and
the man page."""
import gzip
import html.parser
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request

from lib import (BUILD, HEAPTAP, ROOT, Failure, Heaptap, Proc, Target, check, check_true,
                 functions, parse_record, run_heaptap, test, uprobes_of)
from test_accounting import check_mix, traced

OUT = os.path.join(BUILD, "tests", "out")
# tests/targets/sizes.c's "mix": live bytes by the allocator's caller, and all bytes
# allocated by it (churn's five 100-byte blocks are freed).
MIX_LIVE = {"leak_big": 10000, "leak_medium": 3000, "leak_small": 160}
MIX_ALLOCATED = dict(MIX_LIVE, churn=500)


def out_dir(name):
    path = os.path.join(OUT, name)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def by_caller(final):
    """Live bytes of heaptap's own sites, summed by the allocator's direct caller."""
    sums = {}
    for site in final["sites"]:
        caller = functions(site)[1]
        sums[caller] = sums.get(caller, 0) + site["live_bytes"]
    return sums


def pprof_top(path, index):
    """go tool pprof -top: {function: flat bytes} for one sample type, in bytes."""
    out = subprocess.run(["go", "tool", "pprof", "-top", "-unit=B", f"-sample_index={index}",
                          path], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise Failure(f"go tool pprof failed: {out.stderr.strip()}")
    flat = {}
    for line in out.stdout.splitlines():
        m = re.match(r"\s*(\d+)B?\s+[\d.]+%\s+[\d.]+%\s+(\d+)B?\s+[\d.]+%\s+(.+)$", line)
        if m and int(m.group(1)):
            flat[m.group(3).strip()] = int(m.group(1))
    return flat, out.stdout


@test
def test_pprof_read_by_go_tool_pprof():
    d = out_dir("pprof")
    path = os.path.join(d, "heap.pb.gz")
    target = Target("sizes")
    _, final, _ = traced(target, "mix", "--pprof", path)
    check_mix(final)
    with gzip.open(path) as f:
        check_true("--pprof writes a gzip'd profile", len(f.read()) > 0)
    live, text = pprof_top(path, "inuse_space")
    check("pprof's inuse_space by function, as heaptap's sites", live, by_caller(final))
    check("pprof's inuse_space by function", live, MIX_LIVE)
    allocated, _ = pprof_top(path, "alloc_space")
    check("pprof's alloc_space by function", allocated, MIX_ALLOCATED)
    objects, _ = pprof_top(path, "inuse_objects")
    check("pprof's inuse_objects by function", objects,
          {"leak_big": 2, "leak_medium": 3, "leak_small": 10})
    check_true("inuse_space is the default sample type", "Type: inuse_space" in text, text)
    # Lines and inlined frames: the line of each leak site, as heaptap's own stacks give it.
    out = subprocess.run(["go", "tool", "pprof", "-traces", "-lines", path],
                         capture_output=True, text=True, timeout=120).stdout
    for site in final["sites"]:
        caller = site["stack"][1]
        want = f"{caller['function']} {os.path.relpath(caller['file'], ROOT)}:{caller['line']}"
        check_true(f"pprof -traces shows {want}",
                   want in out or f"{caller['function']} {caller['file']}:{caller['line']}" in out,
                   out)


@test
def test_folded_values_add_up_to_live_bytes():
    d = out_dir("folded")
    path = os.path.join(d, "live.folded")
    target = Target("sizes")
    _, final, _ = traced(target, "mix", "--folded", path)
    with open(path) as f:
        lines = f.read().splitlines()
    total = 0
    stacks = {}
    for line in lines:
        frames, value = line.rsplit(" ", 1)
        total += int(value)
        stacks[frames] = stacks.get(frames, 0) + int(value)
    check("sum of the folded values", total, final["live_bytes"])
    leak_big = [s for s in stacks if s.endswith(";do_mix;leak_big;malloc")]
    check("leak_big's stack, outermost first, allocator last", len(leak_big), 1)
    check("leak_big's live bytes", stacks[leak_big[0]], 10000)
    check_true("stacks start at main", leak_big[0].split(";").count("main") == 1, leak_big)


def fill(path):
    """Fills the file system of path; returns the filler's name."""
    filler = os.path.join(path, "filler")
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
    return filler


@test
def test_output_file_replaced_whole_and_kept_on_failure():
    d = tempfile.mkdtemp(prefix="heaptap-out-")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "heaptap-test", d], check=True)
    try:
        path = os.path.join(d, "report.json")
        target = Target("sizes")
        ht = Heaptap(["-p", str(target.target_pid), "-i", "100ms", "-o", path])
        ht.attached()
        target.do("mix")
        # A report after the mix is in the file: complete JSON, replaced whole each time.
        deadline = time.monotonic() + 30
        good = None
        while time.monotonic() < deadline:
            if os.path.exists(path):
                with open(path) as f:
                    good = parse_record(f.read())
                if good["live_bytes"] == 13160:
                    break
            time.sleep(0.05)
        check("live bytes in the --output file", good and good["live_bytes"], 13160)
        check("the file holds one report", good["type"], "interval")
        filler = fill(d)
        time.sleep(0.5)      # reports fail for want of space
        with open(path) as f:
            kept = parse_record(f.read())
        check_true("the last good report is kept while the disk is full",
                   kept["type"] == "interval" and kept["live_bytes"] == 13160, kept)
        check("no temporary files left behind", sorted(os.listdir(d)),
              ["filler", "report.json"])
        check_true("heaptap still runs", ht.popen.poll() is None)
        os.unlink(filler)
        time.sleep(0.5)
        with open(path) as f:
            later = parse_record(f.read())
        check_true("reports resume once there is room", later["elapsed_s"] > kept["elapsed_s"],
                   (later["elapsed_s"], kept["elapsed_s"]))
        final, status = ht.finish()
        check("exit status", status, 0)
        check("nothing but the attached record on stdout", [r["type"] for r in ht.records],
              ["attached"])
        with open(path) as f:
            final = parse_record(f.read())
        check("the final report is the file's last", final["type"], "final")
        check_mix(final)
        err = ht.stderr_text()
        check_true("the failure is said",
                   f"heaptap: cannot write --output {path}: No space left on device "
                   "(the previous one is kept)" in err, err)
    finally:
        subprocess.run(["umount", d])
        os.rmdir(d)


@test
def test_output_options_refused_before_attaching():
    target = Target("sizes")
    pid = str(target.target_pid)
    status, out, err = run_heaptap(["-p", pid, "--pprof", "/nonexistent/dir/heap.pb.gz"])
    check("exit status for an unwritable --pprof", status, 1)
    check("message", err.strip(),
          "heaptap: cannot write --pprof /nonexistent/dir/heap.pb.gz: No such file or directory")
    status, out, err = run_heaptap(["-p", pid, "--folded", "x", "--html", "x"])
    check("exit status for one file given twice", status, 2)
    check("message", err.strip(), "heaptap: --folded and --html both write x: give each its "
          "own file (see heaptap --help)")
    status, out, err = run_heaptap(["-p", pid, "--listen", "localhost"])
    check("exit status for a --listen without a port", status, 2)
    check("message", err.strip(), "heaptap: invalid --listen 'localhost': expected "
          "[ADDR:]PORT, like 9464, 127.0.0.1:9464 or [::1]:9464 (see heaptap --help)")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        status, out, err = run_heaptap(["-p", pid, "--listen", str(port)])
    check("exit status for a port in use", status, 1)
    check("message", err.strip(),
          f"heaptap: cannot listen on {port}: Address already in use")
    check("no probe left in the target", uprobes_of(target.target_pid), [])
    _, final, _ = traced(target, "mix")
    check_mix(final)


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read().decode()


@test
def test_prometheus_scrapes_listen():
    d = out_dir("prometheus")
    port, web = free_port(), free_port()
    with open(os.path.join(d, "prometheus.yml"), "w") as f:
        f.write("global:\n  scrape_interval: 1s\n"
                "scrape_configs:\n  - job_name: heaptap\n"
                f"    static_configs:\n      - targets: ['127.0.0.1:{port}']\n")
    prom = Proc(["prometheus", f"--config.file={d}/prometheus.yml",
                 f"--storage.tsdb.path={d}/data", f"--web.listen-address=127.0.0.1:{web}"],
                stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    target = Target("sizes")
    ht = Heaptap(["-p", str(target.target_pid), "-i", "200ms", "--listen", str(port)])
    ht.attached()
    target.do("mix")
    while ht.record()["live_bytes"] != 13160:
        pass
    status, text = http_get(f"http://127.0.0.1:{port}/metrics")
    check("HTTP status of /metrics", status, 200)
    check_true("text exposition format", "# TYPE heaptap_live_bytes gauge" in text, text)

    def query(q):
        url = f"http://127.0.0.1:{web}/api/v1/query?" + urllib.parse.urlencode({"query": q})
        try:
            _, body = http_get(url)
        except OSError:
            return []
        return json.loads(body)["data"]["result"]

    deadline = time.monotonic() + 60
    live = []
    while time.monotonic() < deadline:
        live = query("heaptap_live_bytes")
        if live and live[0]["value"][1] == "13160":
            break
        time.sleep(0.5)
    check("live bytes as Prometheus' query API returns them",
          live and live[0]["value"][1], "13160")
    top = query('heaptap_site_live_bytes{rank="1"}')
    check("top site's function label", top and top[0]["metric"]["function"], "leak_big")
    check("top site's live bytes", top and top[0]["value"][1], "5000")
    classes = {r["metric"]["class"]: r["value"][1]
               for r in query("heaptap_size_class_live_bytes")}
    check("live bytes by power-of-two size class", classes,
          {"9-16": "160", "65-128": "0", "513-1024": "3000", "4097-8192": "10000"})
    calls = query('heaptap_calls_total{function="malloc"}')
    check("malloc calls", calls and calls[0]["value"][1], "20")
    os.kill(prom.pid, signal.SIGTERM)
    prom.wait()
    final, status = ht.finish()
    check("heaptap exit status", status, 0)
    check_mix(final)


@test
def test_man_page_matches_help():
    page = os.path.join(ROOT, "doc", "heaptap.8")
    help_text = subprocess.run([HEAPTAP, "--help"], capture_output=True, text=True).stdout
    options = set(re.findall(r"(--[a-z-]+)", help_text))
    with open(page) as f:
        roff = f.read().replace("\\-", "-")
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    check("options of --help missing from the man page",
          sorted(o for o in options if o not in roff), [])
    check("options of --help missing from the README",
          sorted(o for o in options if o not in readme), [])
    out = subprocess.run(["man", "--warnings", "-l", page], capture_output=True, text=True,
                         env=dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8"))
    check("man page warnings", out.stderr.strip(), "")
    check_true("man page renders", "heaptap" in out.stdout)


class Dom(html.parser.HTMLParser):
    """The rendered page's elements: (tag, id, classes, attributes), and its text."""

    def __init__(self, text):
        super().__init__()
        self.elements = []
        self.text = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.elements.append((tag, a.get("id"), set((a.get("class") or "").split()), a))

    def handle_data(self, data):
        self.text.append(data)

    def find(self, tag=None, id=None, cls=None):
        return [e for e in self.elements if (tag is None or e[0] == tag) and
                (id is None or e[1] == id) and (cls is None or cls in e[2])]


def chromium(args, timeout=120):
    """Headless Chromium on a throwaway profile; (stdout, stderr). The whole process group
    it makes is ended with it."""
    profile = tempfile.mkdtemp(prefix="heaptap-chromium-")
    p = subprocess.Popen(["chromium", "--headless", "--no-sandbox", "--disable-gpu",
                          "--enable-logging=stderr", "--v=0", f"--user-data-dir={profile}"]
                         + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()
        shutil.rmtree(profile, ignore_errors=True)
    return out.decode(), err.decode()


@test
def test_html_report_renders_in_chromium():
    d = out_dir("html")
    path = os.path.join(d, "report.html")
    target = Target("sizes")
    ht = Heaptap(["-p", str(target.target_pid), "-i", "100ms", "--html", path])
    ht.attached()
    target.do("mix")
    while ht.record()["live_bytes"] != 13160:
        pass
    ht.record()
    final, status = ht.finish()
    check("heaptap exit status", status, 0)
    with open(path) as f:
        page = f.read()
    check_true("no network: nothing fetched from elsewhere",
               not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page))
    out, err = chromium(["--dump-dom", "file://" + path])
    dom = Dom(out)
    body = dom.find("body")
    check_true("the page rendered", body and body[0][3].get("data-rendered") == "1",
               body and body[0][3])
    check("script errors", body[0][3].get("data-error"), None)
    console = [l for l in err.splitlines() if "CONSOLE" in l]
    check("console messages", console, [])
    frames = dom.find("g", cls="frame")
    check_true("flame graph frames drawn", len(frames) >= 5, len(frames))
    text = "".join(dom.text)
    for name in ("leak_big", "leak_medium", "leak_small", "do_mix", "main"):
        check_true(f"flame graph names {name}", name in text)
    for line in ("live", "peak", "rss"):
        paths = [e for e in dom.find("path", cls=line) if e[3].get("d")]
        check(f"timeline's {line} line", len(paths), 1)
        check_true(f"timeline's {line} line has numbers", "NaN" not in paths[0][3]["d"],
                   paths[0][3]["d"])
    rows = [e for e in dom.elements if e[0] == "tr"]
    check("size table rows (header and one per size class)", len(rows),
          1 + len(final["sizes"]))
    shot = os.path.join(d, "report.png")
    chromium(["--window-size=1400,1600", f"--screenshot={shot}", "file://" + path])
    check_true("screenshot saved", os.path.getsize(shot) > 10000, shot)
