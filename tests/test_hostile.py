"""The target's own bytes are untrusted: a process, a thread and a function named with bytes
that are not UTF-8 and with terminal escape sequences, and a block holding markup. Every
output heaptap writes, through the real binaries, stays valid UTF-8 with nothing a terminal
or a browser would act on: each such byte shows as the four characters \\xNN."""
import os
import signal

from lib import (Heaptap, Proc, HEAPTAP, Target, check, check_true, functions, parse_record,
                 test)
from test_outputs import Dom, chromium, out_dir, page_checks

# As tests/targets/hostile.c names them, escaped as heaptap shows them.
COMM = r'\xff\x1b[31m<b>"x'
THREAD = r'\xfe\x1b]0;t\x07<i>'
SYMBOL = r"evil\xff\x1b[31mname<b>"


def clean_text(name, data):
    """data (bytes) is UTF-8 with no control character but newlines and tabs (heaptap's own
    layout): returns the text."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise AssertionError(f"{name} is not UTF-8: {e}")
    controls = sorted({f"{ord(c):#x}" for c in text
                       if (ord(c) < 0x20 and c not in "\n\t") or 0x7f <= ord(c) < 0xa0})
    check(f"control characters in {name}", controls, [])
    return text


def session(*args):
    """heaptap on a fresh hostile target that leaks; (its stdout and stderr as bytes)."""
    target = Target("hostile")
    ht = Proc([HEAPTAP, "-p", str(target.target_pid), "-i", "1h", "--dump-bytes", "48"]
              + list(args))
    # The attach line (stderr in text mode, the first record with --json) says it is in.
    if "--json" in args:
        ht.read_line()
    else:
        while b"attached to PID" not in ht.popen.stderr.readline():
            pass
    target.do("leak")
    os.kill(ht.pid, signal.SIGINT)
    out = ht.popen.stdout.read()
    err = ht.popen.stderr.read()
    check("heaptap exit status", ht.wait(), 0)
    return out, err


@test
def test_hostile_names_in_json_and_text():
    out, err = session("--json")
    text = clean_text("the JSON records", out)
    clean_text("heaptap's stderr", err)
    final = [parse_record(line) for line in text.splitlines()][-1]
    check("the process name, escaped", final["comm"], COMM)
    names = {t["name"] for t in final["threads"]}
    check_true("the thread's name, escaped", THREAD in names, names)
    site = [s for s in final["sites"] if s["live_bytes"] == 100][0]
    check("the function's name, escaped", functions(site)[1], SYMBOL)
    check_true("the block's markup kept as a string",
               "<img src=x onerror=alert(1)> " in site["blocks"][0]["strings"],
               site["blocks"][0]["strings"])

    out, err = session()
    text = clean_text("the text report", out)
    clean_text("heaptap's stderr", err)
    check_true("the text report names the function, escaped", SYMBOL in text, text)
    check_true("the text report names the process, escaped", COMM in text, text)
    check_true("the text report names the thread, escaped", THREAD in text, text)


@test
def test_hostile_names_in_folded_and_html():
    d = out_dir("hostile")
    folded, page = os.path.join(d, "heap.folded"), os.path.join(d, "report.html")
    session("--folded", folded, "--html", page)
    with open(folded, "rb") as f:
        lines = clean_text("the folded stacks", f.read()).splitlines()
    check_true("the folded stack of the function, escaped",
               any(f";{SYMBOL};malloc 100" in line for line in lines), lines)
    with open(page, "rb") as f:
        clean_text("the HTML page", f.read())
    out, err = chromium(["--dump-dom", "file://" + page])
    dom = Dom(out)
    page_checks(dom, err)
    check("images made from the target's bytes", dom.find("img"), [])
    check("scripts (the page's own three)", len(dom.find("script")), 3)
    check_true("the process name as text", COMM in dom.one("h1", id="title").text(),
               dom.one("h1", id="title").text())
    sites = dom.one("ol", id="sites").text()
    check_true("the function's name as text", SYMBOL in sites, sites)
    check_true("the block's markup as text", "<img src=x onerror=alert(1)>" in sites, sites)
