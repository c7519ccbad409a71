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
import stat
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request

from lib import (BUILD, HEAPTAP, ROOT, TARGETS as TARGETS_DIR, Failure, Heaptap, Proc, Target,
                 check, check_true, copy_tree, functions, parse_record, run_heaptap, test,
                 uprobes_of)
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


def pprof_top(source, index=None):
    """go tool pprof -top on a file or URL: {function: flat bytes} for one sample type (the
    profile's default when index is None), in bytes; and pprof's text. A fetched profile is
    saved under OUT, not in $HOME."""
    index = [f"-sample_index={index}"] if index else []
    out = subprocess.run(["go", "tool", "pprof", "-top", "-unit=B"] + index + [source],
                         capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PPROF_TMPDIR=os.path.join(OUT, "pprof-fetched")))
    if out.returncode != 0:
        raise Failure(f"go tool pprof failed: {out.stderr.strip()}")
    flat = {}
    for line in out.stdout.splitlines():
        m = re.match(r"\s*(\d+)B?\s+[\d.]+%\s+[\d.]+%\s+(\d+)B?\s+[\d.]+%\s+(.+)$", line)
        if m and int(m.group(1)):
            flat[m.group(3).strip()] = int(m.group(1))
    return flat, out.stdout


@test(tier="services", sanitized=True)
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


@test(sanitized=True)
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
    """Fills the file system of path (what is free, a filler there already kept); returns the
    filler's name."""
    filler = os.path.join(path, "filler")
    with open(filler, "ab") as f:
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
        # Reports fail for want of space. Not at once when the filler ended while a report
        # was written whole but not yet renamed over the last: the rename frees the last
        # one's pages, and each report after fits in those its predecessor frees. The filler
        # takes what is free again until heaptap says a report failed.
        said = (f"heaptap: cannot write --output {path}: No space left on device "
                "(the previous one is kept)")
        for _ in range(10):
            filler = fill(d)
            try:
                ht.stderr_until(said, timeout=0.5)
                break
            except Failure:
                pass
        with open(path) as f:
            kept = parse_record(f.read())
        check_true("the last good report is kept while the disk is full",
                   kept["type"] == "interval" and kept["live_bytes"] == 13160, kept)
        # A report being written has its temporary file for a moment; none may stay.
        passing = set(os.listdir(d)) - {"filler", "report.json"}
        time.sleep(0.3)
        check("no temporary files left behind", sorted(passing & set(os.listdir(d))), [])
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
        check_true("the failure is said", said in err, err)
    finally:
        subprocess.run(["umount", d])
        os.rmdir(d)


def launch_true(*args, wrapper=()):
    """heaptap --json ARGS -- /usr/bin/true: a whole session, launch to exit."""
    return run_heaptap(["--json", "-i", "1h"] + list(args) + ["--", "/usr/bin/true"], wrapper)


def kind(path):
    st = os.lstat(path)
    return stat.S_IFMT(st.st_mode), st.st_rdev, st.st_ino


@test
def test_output_files_never_replace_what_heaptap_did_not_make():
    d = tempfile.mkdtemp(prefix="heaptap-kinds-")
    os.chmod(d, 0o755)
    readers = []
    try:
        # A character device (this one is /dev/null's twin) is written in place, never
        # replaced by a regular file.
        null = os.path.join(d, "null")
        os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        before = kind(null)
        status, out, err = launch_true("-o", null)
        check("exit status, --output to a character device", status, 0)
        check("the character device is left as it was", kind(null), before)
        check("what was said", err, "")
        # /dev/stdout: the final report comes out on standard output.
        status, out, err = launch_true("-o", "/dev/stdout")
        check("exit status, --output /dev/stdout", status, 0)
        records = [parse_record(line) for line in out.splitlines()]
        check("records on standard output", [r["type"] for r in records],
              ["attached", "final"])
        # A FIFO is written in place, for whoever reads it.
        fifo = os.path.join(d, "fifo")
        os.mkfifo(fifo, 0o600)
        got = os.path.join(d, "from-fifo")
        reader = Proc(["sh", "-c", f"exec cat {fifo} > {got}"])
        readers.append(reader)
        status, out, err = launch_true("-o", fifo)
        check("exit status, --output to a FIFO being read", status, 0)
        reader.wait()
        with open(got) as f:
            check("the report read from the FIFO", parse_record(f.read())["type"], "final")
        check("the FIFO is still a FIFO", stat.S_ISFIFO(os.lstat(fifo).st_mode), True)
        # A FIFO nobody reads: said, the session still runs to its end, exit status 1 (the
        # final report could not be written), and heaptap never waits for a reader.
        start = time.monotonic()
        status, out, err = launch_true("-o", fifo)
        check("exit status, --output to a FIFO nobody reads", status, 1)
        check("what was said", err.strip(), f"heaptap: cannot write --output {fifo}: no process "
              "has the FIFO open to read it")
        check_true("no wait for a reader", time.monotonic() - start < 10)
        # A symbolic link to a regular file: written through, the link left a link.
        real = os.path.join(d, "real.json")
        with open(real, "w") as f:
            f.write("old")
        link = os.path.join(d, "link.json")
        os.symlink(real, link)
        status, out, err = launch_true("-o", link)
        check("exit status, --output through a symbolic link", status, 0)
        check_true("the link is still a link", os.path.islink(link))
        with open(real) as f:
            check("the file it points to holds the report", parse_record(f.read())["type"],
                  "final")
        # Refused before anything is attached: a directory, a socket, a block device.
        sock_path = os.path.join(d, "sock")
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(sock_path)
        blk = os.path.join(d, "blk")
        os.mknod(blk, 0o600 | stat.S_IFBLK, os.makedev(7, 0))
        for path, why in ((d, "is a directory"),
                          (sock_path, "is a socket (heaptap writes files, FIFOs and character "
                                      "devices)"),
                          (blk, "is a block device: it is never written")):
            before = kind(path)
            status, out, err = launch_true("--folded", path)
            check(f"exit status, --folded {path}", status, 1)
            check(f"message, --folded {path}", err.strip(),
                  f"heaptap: cannot write --folded {path}: {why}")
            check(f"{path} left as it was", kind(path), before)
        sock.close()
        # Files heaptap makes, or replaces, are 0600 unless --file-mode says otherwise: a
        # report may hold the target's memory.
        made = os.path.join(d, "made.json")
        old = os.path.join(d, "old.json")
        with open(old, "w") as f:
            f.write("old")
        os.chmod(old, 0o644)
        status, _, _ = launch_true("-o", made, "--pprof", old)
        check("exit status", status, 0)
        check("mode of a file heaptap made", stat.S_IMODE(os.stat(made).st_mode), 0o600)
        check("mode of a file heaptap replaced", stat.S_IMODE(os.stat(old).st_mode), 0o600)
        os.unlink(made)
        status, _, _ = launch_true("-o", made, "--file-mode", "0640")
        check("mode with --file-mode 0640", stat.S_IMODE(os.stat(made).st_mode), 0o640)
        status, out, err = run_heaptap(["--file-mode", "999", "--", "/usr/bin/true"])
        check("exit status for a bad --file-mode", status, 2)
        check("message", err.strip(), "heaptap: invalid --file-mode '999': expected an octal "
              "mode, like 0600 or 0640 (see heaptap --help)")
        check("files left in the directory", sorted(os.listdir(d)),
              ["blk", "fifo", "from-fifo", "link.json", "made.json", "null", "old.json",
               "real.json", "sock"])
    finally:
        for r in readers:
            r.end()
        shutil.rmtree(d)


@test
def test_output_options_refused_before_attaching():
    target = Target("sizes")
    pid = str(target.target_pid)
    status, out, err = run_heaptap(["-p", pid, "--pprof", "/nonexistent/dir/heap.pb.gz"])
    check("exit status for an unwritable --pprof", status, 1)
    check("message", err.strip(), "heaptap: cannot write --pprof /nonexistent/dir/heap.pb.gz: "
          "no file can be made in /nonexistent/dir (No such file or directory)")
    status, out, err = run_heaptap(["-p", pid, "--pprof", "/proc/version"])
    check("exit status for a --pprof in /proc", status, 1)
    check("message", err.strip(), "heaptap: cannot write --pprof /proc/version: no file can be "
          "made in /proc (No such file or directory)")
    # A launched command is held before its exec when the outputs are checked: it ends with
    # heaptap (which, its attacher's socket held by the command, once waited for good).
    status, out, err = run_heaptap(["--pprof", "/proc/version", "--",
                                    os.path.join(TARGETS_DIR, "sizes")], timeout=30)
    check("exit status for a --pprof in /proc, launched", status, 1)
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


def start_prometheus(d, port):
    """A real Prometheus (its data in d) scraping heaptap at 127.0.0.1:port every second;
    returns its Proc and query(q): an instant query's result through its HTTP API, [] while
    it does not answer."""
    web = free_port()
    with open(os.path.join(d, "prometheus.yml"), "w") as f:
        f.write("global:\n  scrape_interval: 1s\n"
                "scrape_configs:\n  - job_name: heaptap\n"
                f"    static_configs:\n      - targets: ['127.0.0.1:{port}']\n")
    prom = Proc(["prometheus", f"--config.file={d}/prometheus.yml",
                 f"--storage.tsdb.path={d}/data", f"--web.listen-address=127.0.0.1:{web}"],
                stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def query(q):
        url = f"http://127.0.0.1:{web}/api/v1/query?" + urllib.parse.urlencode({"query": q})
        try:
            _, body = http_get(url)
        except OSError:
            return []
        return json.loads(body)["data"]["result"]

    return prom, query


@test(tier="services", sanitized=True)
def test_prometheus_scrapes_listen():
    d = out_dir("prometheus")
    port = free_port()
    prom, query = start_prometheus(d, port)
    target = Target("sizes")
    ht = Heaptap(["-p", str(target.target_pid), "-i", "200ms", "--listen", str(port)])
    ht.attached()
    target.do("mix")
    while ht.record()["live_bytes"] != 13160:
        pass
    status, text = http_get(f"http://127.0.0.1:{port}/metrics")
    check("HTTP status of /metrics", status, 200)
    check_true("text exposition format", "# TYPE heaptap_live_bytes gauge" in text, text)

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


def help_options(help_text):
    """--help's option lines, each option's text joined: {"--name": text}. An option's line
    starts "  -x, --name" or "      --name"; its next lines are indented to its text."""
    options, current = {}, None
    for line in help_text.splitlines():
        m = re.match(r"  (?:-\w, |    )(--[a-z][a-z-]*)", line)
        if m:
            current = m.group(1)
            options[current] = line
        elif current and line.startswith(" " * 25):
            options[current] += " " + line.strip()
        else:
            current = None
    return options


def help_defaults(text):
    """The defaults an option's --help text prints, from its rows, in the parentheses that
    end it: its own ("default 5s"), and the modes' ("512k with --live")."""
    m = re.search(r"\(([^()]*)\)$", text)
    parts = m.group(1).split("; ") if m else []
    first = next((i for i, p in enumerate(parts) if p.startswith("default")), len(parts))
    found = []
    for part in parts[first:]:
        if part.startswith("default "):
            part = part[len("default "):]
            if " with --" not in part:
                found.append("default " + part)
        if " with --" in part:
            found.append(part)
    return found


def roff_text(lines):
    """roff lines as the words they print: macros, font changes and quotes gone."""
    out = []
    for line in lines:
        line = re.sub(r"\\f[BIRP]", "", line.replace("\\-", "-").replace("\\(em", "-"))
        if line.startswith("."):
            line = line.split(" ", 1)[1] if " " in line else ""
            line = line.replace('"', "")
            words = line.split()
            line = "".join(words) if len(words) > 1 and line.startswith(("(", ",")) else \
                " ".join(words)
        out.append(line)
    return re.sub(r"\s+", " ", " ".join(out))


def man_options(roff):
    """The OPTIONS section of the man page: its text, and each .TP entry as (the options its
    heading names, its text)."""
    section = roff.split("\n.SH OPTIONS\n", 1)[1].split("\n.SH ", 1)[0]
    entries = []
    for item in re.split(r"\n\.TP\n", section)[1:]:
        lines = re.split(r"\n\.(?:SS|TP) ", item)[0].split("\n")
        heading = lines[0].replace("\\-", "-")
        entries.append((set(re.findall(r"--[a-z][a-z-]*", heading)), roff_text(lines)))
    return roff_text(section.split("\n")), entries


def doc_options(table):
    """doc/options.md's table of options: each row as (the options its first cell names, its
    meaning), backquotes gone."""
    rows = []
    for line in table.splitlines():
        cells = [c.strip() for c in line.split(" | ")]
        if line.startswith("| `") and len(cells) >= 3:
            rows.append((set(re.findall(r"--[a-z][a-z-]*", cells[0])),
                         cells[1].replace("`", "")))
    return rows


def named(option, text):
    return re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text) is not None


@test(tier="unit")
def test_man_page_matches_help():
    """--help is made from the command line's table, a row an option: the man page's OPTIONS
    and doc/options.md list every option of it and none besides, with the defaults it
    prints; both name the agent's verb, heaptap host."""
    page = os.path.join(ROOT, "doc", "heaptap.8")
    help_text = subprocess.run([HEAPTAP, "--help"], capture_output=True, text=True).stdout
    options = help_options(help_text)
    check_true("--help lists the options", len(options) > 50, help_text)
    with open(page) as f:
        roff = f.read()
    text, entries = man_options(roff)
    with open(os.path.join(ROOT, "doc", "options.md")) as f:
        md = f.read()
    rows = doc_options(md)
    check("options of --help missing from the man page's OPTIONS",
          sorted(o for o in options if not named(o, text)), [])
    check("options in the man page's OPTIONS headings that --help does not have",
          sorted({o for names, _ in entries for o in names} - set(options)), [])
    check("options of --help missing from doc/options.md's table",
          sorted(set(options) - {o for names, _ in rows for o in names}), [])
    check("options in doc/options.md's table that --help does not have",
          sorted({o for names, _ in rows for o in names} - set(options)), [])
    for option, line in options.items():
        for default in help_defaults(line):
            value = default.split(" ", 1)[1] if default.startswith("default ") else default
            mans = [t for names, t in entries if option in names]
            check_true(f"the man page's {option}: {default}", any(
                re.search(rf"(?i)default:? {re.escape(value)}\b", t) if default != value
                else value in t for t in mans), mans)
            docs = [t for names, t in rows if option in names]
            check_true(f"doc/options.md's {option}: {default}", any(
                re.search(rf"(?i)default:? {re.escape(value)}\b", t) if default != value
                else value in t for t in docs), docs)
    check_true("the man page's synopsis names heaptap host",
               re.search(r"\.SY heaptap\n\.B host\n", roff) is not None)
    check_true("doc/options.md names heaptap host", "heaptap host" in md)
    out = subprocess.run(["man", "--warnings", "-l", page], capture_output=True, text=True,
                         env=dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8"))
    check("man page warnings", out.stderr.strip(), "")
    check_true("man page renders", "heaptap" in out.stdout)


# Elements without an end tag in HTML.
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr"}


class Node:
    """One element of the rendered page: tag, id, classes, attributes, and what it holds."""

    def __init__(self, tag, attrs, parent):
        self.tag = tag
        self.attrs = attrs
        self.id = attrs.get("id")
        self.cls = set((attrs.get("class") or "").split())
        self.parent = parent
        self.children = []      # Nodes and strings, in order

    def text(self):
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def iter(self):
        for c in self.children:
            if isinstance(c, Node):
                yield c
                yield from c.iter()

    def find(self, tag=None, id=None, cls=None):
        """The elements inside this one that match, in document order."""
        return [e for e in self.iter() if (tag is None or e.tag == tag) and
                (id is None or e.id == id) and (cls is None or cls in e.cls)]

    def one(self, tag=None, id=None, cls=None):
        found = self.find(tag, id, cls)
        check(f"elements {tag or ''}{'#' + id if id else ''}{'.' + cls if cls else ''}",
              len(found), 1)
        return found[0]


class Dom(html.parser.HTMLParser):
    """The rendered page (Chromium's --dump-dom) as a tree of Nodes."""

    def __init__(self, text):
        super().__init__()
        self.root = Node("#document", {}, None)
        self.cur = self.root
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        node = Node(tag, dict(attrs), self.cur)
        self.cur.children.append(node)
        if tag not in VOID:
            self.cur = node

    def handle_startendtag(self, tag, attrs):
        self.cur.children.append(Node(tag, dict(attrs), self.cur))

    def handle_endtag(self, tag):
        node = self.cur
        while node is not self.root and node.tag != tag:
            node = node.parent
        if node is not self.root:
            self.cur = node.parent

    def handle_data(self, data):
        self.cur.children.append(data)

    def find(self, tag=None, id=None, cls=None):
        return self.root.find(tag, id, cls)

    def one(self, tag=None, id=None, cls=None):
        return self.root.one(tag, id, cls)


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


def hex_lines(hexstr):
    """A block's bytes as heaptap's text report prints them: offset, 16 bytes, ASCII."""
    data = bytes.fromhex(hexstr)
    return [f"{i:04x} " + "".join(f" {b:02x}" for b in data[i:i + 16]) +
            "   " * (16 - len(data[i:i + 16])) + "  " +
            "".join(chr(b) if 32 <= b < 127 else "." for b in data[i:i + 16])
            for i in range(0, len(data), 16)]


def check_stack(what, ol, stack):
    """A drawn stack (ol.stack): one line per frame, each starting with the frame's
    function (allocator first)."""
    lines = [li.text() for li in ol.find("li")]
    check(f"{what}: frames drawn", len(lines), len(stack))
    for line, frame in zip(lines, stack):
        if frame["function"]:
            check_true(f"{what}: frame {frame['function']}",
                       line.startswith(frame["function"]), line)
        if frame["file"] and frame["line"]:
            check_true(f"{what}: {frame['function']}'s file:line",
                       f"{frame['file']}:{frame['line']}" in line, line)


LEAK_KINDS = (("definitely_lost", "definitely lost"), ("indirectly_lost", "indirectly lost"),
              ("possibly_lost", "possibly lost"), ("still_reachable", "still reachable"))


def page_checks(dom, err):
    """What every rendered page must be: rendered, with no script error and a quiet console."""
    body = dom.find("body")
    check_true("the page rendered", body and body[0].attrs.get("data-rendered") == "1",
               body and body[0].attrs)
    check("script errors", body[0].attrs.get("data-error"), None)
    console = [line for line in err.splitlines() if "CONSOLE" in line]
    check("console messages", console, [])


@test(tier="services")
def test_html_report_renders_in_chromium():
    d = out_dir("html")
    path = os.path.join(d, "report.html")
    target = Target("sizes")
    # --leak-check: the final report carries a leak check (the page's section and each
    # site's categories); --dump-bytes 32: two lines of hex a block, one for 16-byte ones.
    ht = Heaptap(["-p", str(target.target_pid), "-i", "100ms", "--leak-check",
                  "--dump-bytes", "32", "--html", path])
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
    page_checks(dom, err)
    frames = dom.find("g", cls="frame")
    check_true("flame graph frames drawn", len(frames) >= 5, len(frames))
    text = dom.root.text()
    for name in ("leak_big", "leak_medium", "leak_small", "do_mix", "main"):
        check_true(f"flame graph names {name}", name in text)
    for line in ("live", "peak", "rss"):
        paths = [e for e in dom.find("path", cls=line) if e.attrs.get("d")]
        check(f"timeline's {line} line", len(paths), 1)
        check_true(f"timeline's {line} line has numbers", "NaN" not in paths[0].attrs["d"],
                   paths[0].attrs["d"])
    rows = dom.one("table", id="sizes").find("tr")
    check("size table rows (header and one per size class)", len(rows),
          1 + len(final["sizes"]))

    # The page shows the final report: its leak intelligence as the JSON record has it.
    # sizes' "mix" is allocated once, so nothing grows steadily: no suspect, and it says so.
    suspects = dom.one("section", id="suspects")
    check("suspects of a one-off mix", final["suspects"], [])
    check("suspect items", suspects.find("li", cls="suspect"), [])
    check_true("the suspects section says none",
               any(p.text().startswith("None") for p in suspects.find("p", cls="none")),
               suspects.text())
    check("alerts banner (no alarm set)", dom.find(id="alerts"), [])

    peak = dom.one("section", id="peak")
    check_true("peak sites in the record", len(final["peak_sites"]) >= 1, final["peak_sites"])
    items = peak.find("li", cls="peak-site")
    check("peak sites drawn", len(items), len(final["peak_sites"]))
    summary = peak.one("p", id="peak-summary").text()
    check_true("the peak's bytes", f"{final['peak_bytes']:,} B" in summary, summary)
    check_true("the peak's time", final["peak_time"] in summary, summary)
    for i, (li, ps) in enumerate(zip(items, final["peak_sites"])):
        check_true(f"peak site #{i + 1}'s blocks",
                   f" in {ps['live']:,} block" in li.text(), li.text())
        check_stack(f"peak site #{i + 1}", li.one("ol", cls="stack"), ps["stack"])
    check_true("leak_big held the most at the peak",
               items[0].find("ol", cls="stack")[0].find("li")[1].text().startswith("leak_big"),
               items[0].text())

    threads = dom.one("table", id="threads").find("tbody")[0].find("tr")
    check_true("threads in the record", len(final["threads"]) >= 1, final["threads"])
    check("threads table", [[td.text() for td in tr.find("td")] for tr in threads],
          [[str(t["tid"]), t["name"] or "?", f"{t['live_bytes']:,}", f"{t['live']:,}",
            "exited" if t["exited"] else ""] for t in final["threads"]])
    check("the allocating thread is the target's main thread", threads[0].find("td")[0].text(),
          str(target.target_pid))

    lc = final["leak_check"]
    check_true("the final report has a leak check", lc is not None)
    section = dom.one("section", id="leak-check")
    check("leak check categories",
          [[td.text() for td in tr.find("td")] for tr in section.find("tbody")[0].find("tr")],
          [[label, f"{lc['categories'][k]['blocks']:,}", f"{lc['categories'][k]['bytes']:,}"]
           for k, label in LEAK_KINDS])
    check_true("the leak check's pause", f"{lc['paused_s'] * 1000:.1f} ms" in section.text(),
               section.text())
    check_true("the leak check's scanned bytes", f"{lc['scanned_bytes']:,} B" in section.text(),
               section.text())
    facts = dict(zip([dt.text() for dt in section.find("dt")],
                     [dd.text() for dd in section.find("dd")]))
    check("the leak check is complete", facts.get("Complete", "").startswith("yes"),
          lc["complete"])

    sites = dom.one("ol", id="sites").find("li", cls="site")
    check("sites drawn", len(sites), len(final["sites"]))
    for i, (li, site) in enumerate(zip(sites, final["sites"])):
        what = f"site #{i + 1}"
        check_true(f"{what} has a trend", site["trend"] is not None, site)
        check(f"{what}'s trend badge", [b.text() for b in li.find("span", cls="trend")],
              [site["trend"]["kind"]])
        check_stack(what, li.one("ol", cls="stack"), site["stack"])
        # Live blocks of the first five sites are dumped while the target runs.
        check_true(f"{what}'s blocks dumped", site["blocks"], site)
        dumps = li.find("pre", cls="dump")
        check(f"{what}'s hex dumps", [p.text().split("\n") for p in dumps],
              [hex_lines(b["bytes"]) for b in site["blocks"] if b["bytes"]])
        check_true(f"{what}: --dump-bytes 32, at most two lines a block",
                   all(len(p.text().split("\n")) <= 2 for p in dumps))
        check(f"{what}'s strings", [s.text() for s in li.find("span", cls="string")],
              [f'"{s}"' for b in site["blocks"] for s in b["strings"]])
        check(f"{what}'s C++ classes", [c.text() for c in li.find(cls="cxx-class")],
              [b["class"] for b in site["blocks"] if b["class"]])
        check_true(f"{what} classified by the leak check", site["leak_check"] is not None, site)
        leak = li.one("p", cls="leak-check").text()
        for k, label in LEAK_KINDS:
            check(f"{what}'s leak check names {label}", label in leak,
                  site["leak_check"][k]["blocks"] > 0)

    shot = os.path.join(d, "report.png")
    chromium(["--window-size=1400,1600", f"--screenshot={shot}", "file://" + path])
    check_true("screenshot saved", os.path.getsize(shot) > 10000, shot)


# A string the traced process could put in its memory, its symbols or its threads' names.
HOSTILE = '<img src=x onerror="document.body.dataset.pwned=1">'
HOSTILE_END = "</script><script>document.body.dataset.pwned=2</script>"


def hostile_report():
    """A report record whose target-made strings are markup, with every section filled."""
    def frame(function, file=None, line=None):
        return {"address": "0x55a786fa2080", "module": "/srv/app", "function": function,
                "offset": 16, "file": file, "line": line, "inlined": False}

    stack = [frame("malloc", "./malloc/malloc.c", 3281), frame(HOSTILE, "app.c", 25),
             frame("main", "app.c", 60)]
    block = {"address": "0x55a786fa2080", "size": 96, "age_s": 12.8,
             "bytes": (b"\x8c\0\0\0\0\0\0\0" + HOSTILE.encode()).hex(), "error": None,
             "class": "shop::Box<int>", "strings": [HOSTILE, HOSTILE_END]}
    unreadable = {"address": "0x55a786fa3000", "size": 64, "age_s": 1.5, "bytes": "",
                  "error": "Bad address", "class": None, "strings": []}
    cats = {"definitely_lost": {"blocks": 580, "bytes": 55680},
            "indirectly_lost": {"blocks": 0, "bytes": 0},
            "possibly_lost": {"blocks": 0, "bytes": 0},
            "still_reachable": {"blocks": 1, "bytes": 96}}
    trend = {"kind": "leak", "points": 7, "span_s": 12.4, "growth_bytes_per_hour": 178e6,
             "fit": 0.99, "steadiness": 0.96, "confidence": 0.67, "swing": 1.0}
    site = {"live_bytes": 55776, "live": 581, "est_bytes": 55776, "est_blocks": 581,
            "est_bytes_margin": 0, "growth_bytes_per_hour": 178e6, "sizes": [96],
            "more_sizes": False, "min_size": 96, "max_size": 96, "oldest_age_s": 12.8,
            "function": "malloc", "stack_id": "0xabc", "stack": stack, "trend": trend,
            "blocks": [block, unreadable], "leak_check": cats}
    suspect = {"rank": 1, "growth_bytes_per_hour": 178e6, "projected_24h_bytes": 178e6 * 24,
               "fit": 0.99, "steadiness": 0.96, "confidence": 0.67, "span_s": 12.4,
               "live_bytes": 4096, "live": 4, "est_bytes": 4096, "function": "malloc",
               "stack_id": "0xdef", "stack": stack, "blocks": [block]}
    now = "2024-05-01T16:38:48.123Z"
    return {
        "type": "final", "version": 1, "time": now, "pid": 42, "comm": HOSTILE[:15],
        "allocator": {"path": "/usr/lib/x86_64-linux-gnu/libc.so.6", "reason": "test"},
        "elapsed_s": 12.9, "live_bytes": 59872, "live_allocs": 585, "peak_bytes": 60000,
        "peak_time": now, "peak_elapsed_s": 12.5, "alloc_calls": 600, "free_calls": 15,
        "mode": "full", "sample_bytes": 0, "rss_bytes": 1 << 20, "inexact": {"total": 0},
        "sizes": [], "sites": [site], "suspects": [suspect], "growth_bytes_per_hour": 178e6,
        "threads": [{"tid": 42, "name": HOSTILE[:15], "live_bytes": 59872, "live": 585,
                     "exited": False},
                    {"tid": 43, "name": None, "live_bytes": 0, "live": 0, "exited": True}],
        "peak_sites": [{"live_bytes": 55776, "live": 581, "stack_id": "0xabc",
                        "stack": stack}],
        "leak_check": {"time": now, "paused_s": 0.0123, "scan_s": 0.01,
                       "scanned_bytes": 1048576, "unreadable_bytes": 0, "regions": 8,
                       "threads": 2, "threads_not_stopped": 0, "skipped_regions": 0,
                       "complete": False, "incomplete_reasons": ["max_pause"],
                       "unsettled_blocks": 3,
                       "categories": cats},
        "alerts": [{"alert": "live", "option": "--alert-live", "value": 12582912,
                    "threshold": 10485760, "time": now}],
    }


@test(sanitized=True)
def test_html_report_keeps_target_strings_as_text():
    """Names, thread names and block contents come from the traced process: the page shows
    them as text, never as markup. The page is the one heaptap builds in
    (user/report/report.html), filled as user/report/report_html.c fills it."""
    d = out_dir("html-hostile")
    path = os.path.join(d, "report.html")
    rep = hostile_report()
    data = {"version": 1, "report": rep,
            "stacks": [{"frames": ["main", HOSTILE, "malloc"], "bytes": 55776, "blocks": 581}],
            "timeline": [{"t": t, "live": 4000 * t, "peak": 4000 * t, "rss": 1 << 20}
                         for t in range(1, 13)]}
    with open(os.path.join(ROOT, "user", "report", "report.html")) as f:
        template = f.read()
    with open(path, "w") as f:
        f.write(template.replace("@HEAPTAP_DATA@", json.dumps(data).replace("<", "\\u003c")))
    out, err = chromium(["--dump-dom", "file://" + path])
    dom = Dom(out)
    page_checks(dom, err)
    body = dom.find("body")[0]
    check("markup of the target run", body.attrs.get("data-pwned"), None)
    check("images made from the target's strings", dom.find("img"), [])
    check("scripts (the page's own three)", len(dom.find("script")), 3)
    check_true("the command name as text", HOSTILE[:15] in dom.one("h1", id="title").text())

    alerts = dom.one(id="alerts").text()
    check_true("the alert banner", "--alert-live 10,485,760" in alerts and
               "12,582,912 B" in alerts, alerts)

    item = dom.one("section", id="suspects").one("li", cls="suspect")
    check_true("the suspect's growth and projection",
               item.text().startswith("+170 MiB/h (+3.98 GiB in 24 h), fit 0.99, "
                                      "steadiness 0.96, confidence 0.67"), item.text())
    check_stack("the suspect", item.one("ol", cls="stack"), rep["suspects"][0]["stack"])
    check("the suspect's block (its site is not listed)",
          [p.text().split("\n") for p in item.find("pre", cls="dump")],
          [hex_lines(rep["suspects"][0]["blocks"][0]["bytes"])])

    section = dom.one("section", id="leak-check")
    check_true("an incomplete leak check says so and why",
               "stopped at --leak-check-max-pause, 3 blocks not settled" in section.text(),
               section.text())

    site = dom.one("ol", id="sites").one("li", cls="site")
    check("the site's trend badge", site.one("span", cls="trend").text(), "leak")
    check_stack("the site", site.one("ol", cls="stack"), rep["sites"][0]["stack"])
    check("the site's strings", [s.text() for s in site.find("span", cls="string")],
          [f'"{HOSTILE}"', f'"{HOSTILE_END}"'])
    check("the site's C++ class", site.one("span", cls="cxx-class").text(), "shop::Box<int>")
    check_true("the unreadable block", "Bad address" in site.one(cls="unreadable").text())
    dump = site.one("pre", cls="dump").text().split("\n")
    check("the site's dump", dump, hex_lines(rep["sites"][0]["blocks"][0]["bytes"]))
    check_true("the dump's ASCII column", dump[0].endswith("  ........<img src"), dump[0])
    check("the site's leak check", site.one("p", cls="leak-check").text(),
          "Leak check: 54.4 KiB in 580 blocks definitely lost, 96 B in 1 block still reachable")

    peak = dom.one("section", id="peak").one("li", cls="peak-site")
    check("the peak site links to its site", [a.attrs.get("href") for a in peak.find("a")],
          ["#site-1"])
    rows = dom.one("table", id="threads").find("tbody")[0].find("tr")
    check("threads table", [[td.text() for td in tr.find("td")] for tr in rows],
          [["42", HOSTILE[:15], "59,872", "585", ""], ["43", "?", "0", "0", "exited"]])


def add_row(path, after, row, declare=None):
    """Adds row to the table in path (a file of the tree) after the line(s) after, which
    must be there; declare goes after the file's includes."""
    with open(path) as f:
        text = f.read()
    check_true(f"{os.path.basename(path)}: the row the toy goes after", after in text, text)
    text = text.replace(after, after + row)
    if declare:
        end = [m.end() for m in re.finditer(r'#include .*\n', text)][-1]
        text = text[:end] + "\n" + declare + "\n" + text[end:]
    with open(path, "w") as f:
        f.write(text)


class ToyOutput:
    """A format is its formatter's file and a row of user/report/outputs.c's table: the
    option, its help, the check before attaching and the publishing all follow."""

    def add(self, tree):
        with open(os.path.join(tree, "user", "report", "report_toy.c"), "w") as f:
            f.write('#include <inttypes.h>\n#include "report/report.h"\n\n'
                    "int report__toy(FILE *f, const struct report *r)\n{\n"
                    '\tfprintf(f, "toy %llu\\n", '
                    "(unsigned long long)r->snap->counters.alloc_calls);\n"
                    "\treturn ferror(f) ? -1 : 0;\n}\n")
        add_row(os.path.join(tree, "user", "report", "outputs.c"),
                '\t{ "html", 0, "a self-contained HTML report (flame graph, timeline, sizes)", '
                "report__html },\n",
                '\t{ "toy", 0, "a toy format", report__toy },\n',
                "int report__toy(FILE *f, const struct report *r);")

    def check(self, toy, d):
        help_text = subprocess.run([toy, "--help"], capture_output=True, text=True).stdout
        check_true("--help lists the toy", "      --toy FILE         a toy format" in help_text,
                   help_text)
        out = os.path.join(d, "toy.txt")
        run = subprocess.run([toy, "--json", "--toy", out, "--",
                              os.path.join(TARGETS_DIR, "launch")],
                             input=b"", capture_output=True, timeout=60)
        check("exit status of the toy", run.returncode, 0)
        with open(out) as f:
            check_true("the toy's file, written at the report", f.read().startswith("toy "))
        run = subprocess.run([toy, "--toy", out, "--html", out, "--", "true"],
                             capture_output=True, text=True, timeout=60)
        check("the toy's file checked against the others", run.stderr.strip(),
              f"heaptap: --html and --toy both write {out}: give each its own file "
              "(see heaptap --help)")


class ToyOption:
    """An option is a row of user/cli/cmdline.c's table: --toy-top N, a second --top of 1 to
    3 sites, 2 by default. Its --help line with its limits and default, the shells'
    completion, its parsing into the field, its default and its range message all follow."""

    def add(self, tree):
        add_row(os.path.join(tree, "user", "cli", "cmdline.c"),
                '\t{ "json", 0, NULL, KIND_FLAG, OPTION_AT(json), .scope = SCOPE_BOTH,\n'
                '\t  .help = "one JSON object per report instead of text" },\n',
                '\t{ "toy-top", 0, "N", KIND_UINT, OPTION_AT(top), .min = 1, .max = 3,\n'
                '\t  .noun = "a number of toy sites", .by_default = "2",\n'
                '\t  .help = "a toy: the N sites with the most live bytes" },\n')

    @staticmethod
    def sites(toy, *options):
        """The sites of the final report of sizes.c's mix, with options: their number."""
        p = subprocess.run([toy, "--json", "-i", "1h", *options, "--",
                            os.path.join(TARGETS_DIR, "sizes")], input=b"mix\nexit\n",
                           capture_output=True, timeout=60)
        check(f"exit status of the toy with {options}", p.returncode, 0)
        final = [r for r in map(parse_record, (line for line in p.stdout.decode().splitlines()
                                               if line.startswith("{")))
                 if r.get("type") == "final"]
        check(f"final records with {options}", len(final), 1)
        return len(final[0]["sites"])

    def check(self, toy, d):
        from test_install import bash_offers
        help_text = subprocess.run([toy, "--help"], capture_output=True, text=True).stdout
        check("--help's line of the toy option", help_options(help_text).get("--toy-top"),
              "      --toy-top N        a toy: the N sites with the most live bytes (1 to 3; "
              "default 2)")
        script = os.path.join(d, "heaptap.bash")
        with open(script, "w") as f:
            f.write(subprocess.run([toy, "--completion", "bash"], capture_output=True,
                                   text=True, check=True).stdout)
        check("bash offers the toy option", bash_offers(script, ["heaptap --toy-t"])[1:],
              ["heaptap --toy-t: --toy-top"])
        check("sites by the toy's default", self.sites(toy), 2)
        check("sites with --toy-top 1", self.sites(toy, "--toy-top", "1"), 1)
        check("sites with --toy-top 3", self.sites(toy, "--toy-top", "3"), 3)
        bad = subprocess.run([toy, "--toy-top", "4", "--", "true"], capture_output=True,
                             text=True, timeout=60)
        check("exit status of --toy-top 4", bad.returncode, 2)
        check("--toy-top 4 refused", bad.stderr,
              "heaptap: invalid --toy-top '4': expected a number of toy sites from 1 to 3 "
              "(see heaptap --help)\n")


class ToyMode:
    """A mode is its tracer's file and a row of session/tracers.c's table: --toy-mode, the
    probe tracer's ops under a mode of its own name, whose reports say "toy". Its option,
    its --help line, its exclusion of the other modes, and its reports all follow."""

    TRACER = """#include <stdlib.h>

#include "report/report.h"
#include "session/tracer_probes.h"

extern const struct tracer_ops toy_tracer;

static int open_toy(struct session *s, struct tracer **out)
{
\tstruct probe_tracer *pt = malloc(sizeof(*pt));

\tif (!pt)
\t\treturn -12;
\tprobe_tracer__init(pt, s);
\tpt->base.ops = &toy_tracer;
\t*out = &pt->base;
\treturn 0;
}

static int loaded(struct tracer *t)
{
\treturn probe_tracer__loaded(probe_tracer__of(t), false);
}

static void describe(struct tracer *t, struct report *r)
{
\tstatic const struct figures toy = { .mode = "toy" };

\tr->figures = &toy;
}

static void free_toy(struct tracer *t)
{
\tprobe_tracer__end(probe_tracer__of(t));
\tfree(probe_tracer__of(t));
}

const struct tracer_ops toy_tracer = {
\t.open = open_toy,
\t.plan = probe_tracer__plan,
\t.configure = probe_tracer__configure,
\t.loaded = loaded,
\t.attach = probe_tracer__attach,
\t.snapshot = probe_tracer__snapshot,
\t.detach = probe_tracer__detach,
\t.describe = describe,
\t.free = free_toy,
};
"""

    def add(self, tree):
        with open(os.path.join(tree, "user", "session", "tracer_toy.c"), "w") as f:
            f.write(self.TRACER)
        add_row(os.path.join(tree, "user", "session", "tracers.c"),
                '\t  .check = fault_tracer__check },\n',
                '\t{ "toy-mode", &toy_tracer, .help = "a toy mode: full mode by another name" },\n',
                "extern const struct tracer_ops toy_tracer;")

    def check(self, toy, d):
        help_text = subprocess.run([toy, "--help"], capture_output=True, text=True).stdout
        check("--help's line of the toy mode", help_options(help_text).get("--toy-mode"),
              "      --toy-mode         a toy mode: full mode by another name")
        p = subprocess.run([toy, "--json", "-i", "1h", "--toy-mode", "--",
                            os.path.join(TARGETS_DIR, "sizes")], input=b"mix\nexit\n",
                           capture_output=True, timeout=60)
        check("exit status of the toy mode", p.returncode, 0)
        # The schema knows heaptap's own modes: the toy's records are read as JSON alone.
        records = [json.loads(line) for line in p.stdout.decode().splitlines()
                   if line.startswith("{")]
        check("the modes the records name", [r["settings"]["mode"] if r["type"] == "attached"
                                             else r["mode"] for r in records],
              ["toy", "toy"])
        final = records[-1]
        check("the toy mode's figures: sizes.c's mix, every call traced",
              (final["live_allocs"], final["live_bytes"]), (15, sum(MIX_LIVE.values())))
        both = subprocess.run([toy, "--toy-mode", "--watch", "--", "true"],
                              capture_output=True, text=True, timeout=60)
        check("exit status of two modes", both.returncode, 2)
        check_true("two modes refused, naming both", "--watch" in both.stderr and
                   "--toy-mode" in both.stderr, both.stderr)


# What the toy tree gets, each toy added and then checked against one build of it: a toy
# is a class with add(tree) and check(heaptap, tmp).
TOYS = (ToyOutput, ToyOption, ToyMode)


@test(tier="services")
def test_a_new_output_option_and_mode_are_a_row_each():
    """The structure's promise, kept in a copy of the tree and its build: a new format is its
    formatter's file and a row of report/outputs.c's table, a new option a row of
    cli/cmdline.c's, a new mode its tracer's file and a row of session/tracers.c's (TOYS);
    each is run."""
    d = tempfile.mkdtemp(prefix="heaptap-toy-")
    try:
        tree = os.path.join(d, "tree")
        copy_tree(tree, built=True)
        toys = [toy() for toy in TOYS]
        for toy in toys:
            toy.add(tree)
        build = subprocess.run(["make", "-s", "-j3", "-C", tree, "build/heaptap"],
                               capture_output=True, text=True, timeout=600)
        check_true("the toy tree builds", build.returncode == 0,
                   f"make exited {build.returncode}: {build.stdout[-2000:]}{build.stderr[-4000:]}")
        for toy in toys:
            toy.check(os.path.join(tree, "build", "heaptap"), d)
    finally:
        shutil.rmtree(d)
