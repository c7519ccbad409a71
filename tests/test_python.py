"""Python's objects (--allocator-family python): on Debian's python3.11, a server that keeps
Session objects at 10,000 a second while serving requests; heaptap, attached by PID, counts
the live objects of each class exactly as Python's own garbage collector does."""
import json
import os
import signal
import threading
import urllib.request

from lib import (ROOT, Heaptap, Target, check, check_true, functions, probed_text_intact,
                 run_heaptap, test)

SCRIPT = os.path.join(ROOT, "tests", "targets", "pyleak.py")


def by_type(final):
    """Per class name: (live objects, live bytes, sizes, the sites' first frames)."""
    out = {}
    for s in final["sites"]:
        if not s["object_type"]:
            continue
        live, live_bytes, sizes, tops = out.get(s["object_type"]["name"], (0, 0, set(), set()))
        out[s["object_type"]["name"]] = (live + s["live"], live_bytes + s["live_bytes"],
                                         sizes | set(s["sizes"]), tops | {functions(s)[0]})
    return out


def requests(port, n, errors):
    for _ in range(n):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as r:
                json.loads(r.read())
        except OSError as e:
            errors.append(e)


@test(sanitized=True)
def test_python_objects_counted_by_class_as_the_collector_counts_them():
    target = Target(SCRIPT)
    port = int(target.do("port"))
    # Every site the report has: the classes' and what else the interpreter does.
    ht = Heaptap(["-p", str(target.target_pid), "-i", "1h", "--allocator-family", "python",
                  "--top", "1000", "--dump-bytes", "0"])
    attached = ht.attached()
    check("PyType_GenericAlloc's probe",
          [p["kind"] for p in attached["probes"] if p["function"] == "PyType_GenericAlloc"],
          ["pyobject"])
    errors = []
    served = threading.Thread(target=requests, args=(port, 200, errors))
    served.start()
    target.do("leak 30000")
    target.do("decimals 1000")
    served.join()
    check("requests failed", errors, [])
    census = json.loads(target.do("census"))
    final, status = ht.finish()
    check("exit status", status, 0)
    check("kept", census["kept"], 30200)
    got = by_type(final)
    sizes = census["sizes"]
    # Exactly the collector's count, each class at its own sites; the requests' Session
    # objects (50 a request) all freed.
    for name, size, made_by in (
            ("Session", sizes["Session"], "PyType_GenericAlloc"),
            ("Slotted", sizes["Slotted"], "PyType_GenericAlloc"),
            # PyType_GenericAlloc makes room for one item more than a tuple holds.
            ("Row", sizes["Row"] + sizes["Row_itemsize"], "PyType_GenericAlloc"),
            # A C extension's type (_decimal's), made by _PyObject_New.
            ("decimal.Decimal", sizes["Decimal"], "_PyObject_New")):
        live, live_bytes, seen, tops = got.get(name, (0, 0, set(), set()))
        count = census["counts"][name.split(".")[-1]]
        check(f"{name}: live objects", live, count)
        check(f"{name}: sizes", seen, {size})
        check(f"{name}: live bytes", live_bytes, count * size)
        check(f"{name}: made by", tops, {made_by})
    check("Session objects live", census["counts"]["Session"], 30000)
    # The Python frames, right after the allocating function: each site's lines, as the
    # script's source has them.
    with open(SCRIPT) as f:
        source = f.read().splitlines()
    kept_line = source.index("        kept.append(Session(i))") + 1
    leak_line = source.index("            leak(int(words[1]))") + 1
    frames = {}
    for s in final["sites"]:
        if s["object_type"] and s["object_type"]["name"] == "Session":
            py = [(f["function"], os.path.basename(f["file"] or ""), f["line"])
                  for f in s["stack"] if f["module"] == "[python]"]
            frames[tuple(py)] = frames.get(tuple(py), 0) + s["live"]
    script = os.path.basename(SCRIPT)
    check("Session objects by Python stack", frames,
          {(("leak", script, kept_line), ("main", script, leak_line),
            ("<module>", script, len(source))): 30000})
    # The list that keeps them grows by realloc (malloc's), at the line that appends: the
    # thread's Python frames go with every allocation it makes.
    grown = [s for s in final["sites"] if not s["object_type"] and
             ("leak", script, kept_line) in
             [(f["function"], os.path.basename(f["file"] or ""), f["line"]) for f in s["stack"]]]
    if len(grown) != 1:
        # What the sites at that line are, for the failure below (seen once, beside a full run,
        # against the sanitized build: a second site of one small block).
        for s in grown:
            print(f"    site at the append: {s['live']} live, {s['live_bytes']} bytes, sizes "
                  f"{s['min_size']}-{s['max_size']}, oldest {s['oldest_age_s']} s; "
                  f"{[f['function'] for f in s['stack'] if f['module'] != '[python]'][:6]}")
    check("the kept list's items, where it grows",
          [(s["live"], s["live_bytes"] >= 8 * 30200) for s in grown], [(1, True)])
    check_true("the requests' objects were seen made", final["allocs"] >= 30200 + 200 * 50,
               f"allocs {final['allocs']}")
    check("target still answers", json.loads(target.do("census"))["kept"], 30200)
    check("no breakpoint left", probed_text_intact(target.target_pid, attached), [])


@test
def test_python_family_found_and_malloc_level_kept():
    """A Python program is told to have the python family (JSON allocator.families, a line on
    stderr), a C program none; --level malloc leaves the family's functions alone."""
    target = Target(SCRIPT)
    ht = Heaptap(["-p", str(target.target_pid), "-i", "1h"])
    attached = ht.attached()
    check("families found", attached["allocator"]["families"], ["python"])
    check("own probes", [p["function"] for p in attached["probes"] if "own" in p], [])
    final, status = ht.finish()
    check("exit status", status, 0)
    status, out, err = run_heaptap(["-p", str(target.target_pid), "-d", "200ms"])
    check("text: exit status", status, 0)
    check_true("told at attach", "heaptap: the program has python's allocator "
               "(PyType_GenericAlloc): --allocator-family python traces it\n" in err, err)
    check_true("and in the header", "\nfamilies   python (the program has them, not traced: "
               "--allocator-family NAME)\n" in out, out[:600])

    ht = Heaptap(["-p", str(target.target_pid), "-i", "1h", "--allocator-family", "python",
                  "--level", "malloc"])
    attached = ht.attached()
    check("level", attached["settings"]["level"], "malloc")
    check("own probes at malloc's level",
          [p["function"] for p in attached["probes"] if "own" in p], [])
    target.do("leak 1000")
    final, status = ht.finish()
    check("exit status", status, 0)
    check("sites of objects", [s["object_type"] for s in final["sites"] if s["object_type"]],
          [])
    check_true("the list's items seen at malloc's level", final["allocs"] > 0, final["allocs"])

    c = Target("arena")
    ht = Heaptap(["-p", str(c.target_pid), "-i", "1h"])
    check("a C program's families", ht.attached()["allocator"]["families"], [])
    final, status = ht.finish()
    check("exit status", status, 0)


def python_frames(site):
    return tuple((f["function"], os.path.basename(f["file"] or ""), f["line"])
                 for f in site["stack"] if f["module"] == "[python]")


@test
def test_python_frames_in_a_pid_namespace_and_a_forked_child():
    """Python frames where the thread's IDs are not the host's: the server in a PID namespace
    of its own (unshare --pid), and a child it forks (os.fork, --follow); each keeps Session
    objects, counted per process with the frames that made them. Every site the report has:
    objects with the same Python frames may be at more than one site (2 to 4 Session sites
    in 8 runs), and one of a single object fell out of the default top 10 in about one run
    of twenty (1,999 of 2,000 counted)."""
    target = Target(SCRIPT, wrapper=["unshare", "--pid", "--fork"])
    ht = Heaptap(["-p", str(target.target_pid), "-i", "1h", "--allocator-family", "python",
                  "--follow", "--top", "1000"])
    ht.attached()
    target.do("leak 2000")
    child = int(target.do("fork 500"))
    try:
        final, status = ht.finish()
    finally:
        os.kill(child, signal.SIGKILL)
    check("exit status", status, 0)
    with open(SCRIPT) as f:
        source = f.read().splitlines()
    script = os.path.basename(SCRIPT)

    def line(text):
        return source.index(text) + 1
    kept = ("leak", script, line("        kept.append(Session(i))"))
    module = ("<module>", script, len(source))
    by_frames = {}
    for s in final["sites"]:
        if s["object_type"] and s["object_type"]["name"] == "Session":
            for p in s["processes"]:
                key = (p["pid"], python_frames(s))
                by_frames[key] = by_frames.get(key, 0) + p["live"]
    # (The 2,000 the child inherited are counted once, as its parent's.)
    check("Session objects by process and Python frames", by_frames, {
        (target.target_pid, (kept, ("main", script, line("            leak(int(words[1]))")),
                             module)): 2000,
        (child, (kept, ("fork_leak", script, line("        leak(n)")),
                 ("main", script, line("            out = fork_leak(int(words[1]))")),
                 module)): 500})
