"""--leak-check at a command's exit, side by side with Valgrind's memcheck.

Each program runs twice, under memcheck and under heaptap, with the same environment: memcheck
adds variables to the program's (LD_PRELOAD with its own libraries, GLIBCXX_FORCE_NEW, ...),
and a program that copies its environment allocates by their number and length; so heaptap's
run gets the environment memcheck's run sees, its LD_PRELOAD as long but naming no library.
memcheck runs without its freeres (--run-libc-freeres=no, --run-cxx-freeres=no): heaptap runs
no code in the target, so glibc's and libstdc++'s own buffers are still there at the exit.
"""
import os
import re
import signal
import subprocess
import time

from lib import (HEAPTAP, ROOT, TARGETS, Failure, Heaptap, Target, check, check_true, functions,
                 parse_record, scratch_dir, test)

KINDS = ["definitely_lost", "indirectly_lost", "possibly_lost", "still_reachable"]
HEURISTICS = ["stdstring", "length64", "newarray", "multipleinheritance"]
MEMCHECK = ["valgrind", "--leak-check=full", "--show-leak-kinds=all", "--run-libc-freeres=no",
            "--run-cxx-freeres=no"]
# Fixed seeds: perl's and python's hashes are otherwise laid out anew at each run.
BASE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C", "PERL_HASH_SEED": "0",
            "PERL_PERTURB_KEYS": "0", "PYTHONHASHSEED": "0"}
REACH = os.path.join(TARGETS, "reach")

# Debian programs, not written for these tests, on small inputs (memcheck is slow): the
# package, and the command, run in the work folder (inputs made by inputs()).
PROGRAMS = [
    ("coreutils", ["sort", "words.txt"]),
    ("sqlite3", ["sqlite3", ":memory:",
                 "create table t(a, b); insert into t values(1, 'x'), (2, 'y'); select * from t;"]),
    ("xz-utils", ["xz", "-1", "-k", "-f", "words.txt"]),
    ("jq", ["jq", ".a", "in.json"]),
    ("tar", ["tar", "-cf", "out.tar", "tree"]),
    ("git", ["git", "-C", ROOT, "log", "--oneline", "-3"]),
    ("perl", ["perl", "-e", "my %h = map { $_ => [$_] } 1..100; print scalar(keys %h), qq(\\n)"]),
    # Two C extensions: zlib, and _sqlite3 with SQLite itself.
    ("python3", ["/usr/bin/python3", "-c",
                 "import sqlite3, zlib; c = sqlite3.connect(':memory:'); "
                 "c.execute('create table t(a)'); print(len(zlib.compress(b'x' * 1000)))"]),
    ("mawk", ["mawk", "{ n += length($0) } END { print n }", "words.txt"]),
    ("sed", ["sed", "s/line/LINE/", "words.txt"]),
    ("grep", ["grep", "-c", "line 1", "words.txt"]),
]

_work = None


def inputs():
    """The folder the programs run in, with their inputs."""
    global _work
    if _work is None:
        _work = scratch_dir("heaptap-memcheck-")
        with open(os.path.join(_work, "words.txt"), "w") as f:
            f.writelines(f"line {i}\n" for i in range(300, 0, -1))
        with open(os.path.join(_work, "in.json"), "w") as f:
            f.write('{"a": [1, 2, {"b": "c"}], "d": "e"}\n')
        os.mkdir(os.path.join(_work, "tree"))
        for name in ("a", "b"):
            with open(os.path.join(_work, "tree", name), "w") as f:
                f.write(name * 1000)
    return _work


_env = None


def environments():
    """(memcheck's environment, heaptap's): the same variables, as the program sees them."""
    global _env
    if _env is None:
        base = dict(BASE_ENV, HOME=inputs(), PWD=inputs())
        out = subprocess.run(["valgrind", "-q", "/usr/bin/env"], env=base, cwd=inputs(),
                             capture_output=True, text=True, timeout=60).stdout
        seen = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
        # The loader reads a list of nothing: every name empty.
        seen["LD_PRELOAD"] = ":" * len(seen.get("LD_PRELOAD", ""))
        _env = (base, seen)
    return _env


def count(text):
    return int(text.replace(",", ""))


def memcheck(cmd, heuristics="all", stdin=None):
    """memcheck's LEAK SUMMARY: ({kind: (blocks, bytes)}, {heuristic: (blocks, bytes)},
    seconds)."""
    start = time.monotonic()
    p = subprocess.run(MEMCHECK + [f"--leak-check-heuristics={heuristics}"] + cmd,
                       env=environments()[0], cwd=inputs(), input=stdin, capture_output=True,
                       timeout=600)
    took = time.monotonic() - start
    err = p.stderr.decode(errors="replace")
    cats = {k: (0, 0) for k in KINDS}
    if "All heap blocks were freed" not in err:
        for k in KINDS:
            m = re.search(k.replace("_", " ") + r": ([\d,]+) bytes in ([\d,]+) blocks", err)
            if not m:
                raise Failure(f"memcheck printed no {k} for {cmd[0]}: {err[-2000:]}")
            cats[k] = (count(m.group(2)), count(m.group(1)))
    heur = {h: (count(m.group(2)), count(m.group(1))) for h in HEURISTICS
            for m in [re.search(rf"\b{h}\s*: ([\d,]+) bytes in ([\d,]+) blocks", err)] if m}
    # Loss records of blocks held by chance alignment, as ALIGNED_BY_CHANCE says.
    for m in re.finditer(r"([\d,]+) bytes in ([\d,]+) blocks are possibly lost in loss record"
                         r"[^\n]*\n((?:==\d+==\s+(?:at|by) [^\n]*\n)+)", err):
        if any(f in m.group(3) for f in ALIGNED_BY_CHANCE):
            moved = (count(m.group(2)), count(m.group(1)))
            cats = held_by_chance(cats, moved)
    return cats, heur, took


# Blocks allocated here are held by a pointer to their first aligned address (ld.so's
# _dl_find_object segments): the block's start when the allocator happened to return an
# aligned one, else an interior pointer. memcheck's allocator and glibc's return different
# addresses, so either tool may call such a block possibly lost where the other finds it
# reachable; both are counted reachable for the comparison.
ALIGNED_BY_CHANCE = ("_dlfo_mappings_segment_allocate", "_dl_find_object_update")


def held_by_chance(cats, moved):
    """cats with moved (blocks, bytes) taken from possibly lost into still reachable."""
    out = dict(cats)
    out["possibly_lost"] = tuple(a - b for a, b in zip(cats["possibly_lost"], moved))
    out["still_reachable"] = tuple(a + b for a, b in zip(cats["still_reachable"], moved))
    return out


def heaptap(cmd, args=(), stdin=None, output=None):
    """heaptap --leak-check on the command: (final record, exit status, seconds); what the
    command wrote on its standard output into output["stdout"], if output is a dict."""
    out = os.path.join(inputs(), "report.json")
    start = time.monotonic()
    p = subprocess.run([HEAPTAP, "--json", "-o", out, "-i", "1h", "--leak-check", *args, "--"]
                       + cmd, env=environments()[1], cwd=inputs(), input=stdin,
                       capture_output=True, timeout=600)
    took = time.monotonic() - start
    if output is not None:
        output["stdout"] = p.stdout.decode(errors="replace")
    try:
        with open(out) as f:
            final = parse_record(f.read())
    except OSError:
        raise Failure(f"heaptap wrote no report for {cmd[0]} (status {p.returncode}): "
                      f"{p.stderr.decode(errors='replace')[-2000:]}")
    os.unlink(out)
    return final, p.returncode, took


def categories(lc):
    return {k: (lc["categories"][k]["blocks"], lc["categories"][k]["bytes"]) for k in KINDS}


def heuristic_reachable(lc):
    return {h: (v["blocks"], v["bytes"]) for h, v in lc["heuristics"]["reachable"].items()
            if v["blocks"]}


def check_at_exit(name, final):
    lc = final["leak_check"]
    check_true(f"{name}: a leak check in the final report", lc is not None,
               final.get("leak_check_note"))
    check(f"{name}: made at the exit", lc["trigger"], "exit")
    check(f"{name}: complete", lc["complete"], True)
    check_true(f"{name}: exited", final.get("target_exit") is not None)
    return lc


@test(tier="services")
def test_leak_summary_equals_memcheck_on_debian_programs():
    """For each program: heaptap's categories (blocks and bytes) at the exit equal memcheck's;
    the allocator's heap is not a root (every block known); no stack copy lost."""
    times = []
    for package, cmd in PROGRAMS:
        name = f"{cmd[0]} ({package})"
        expected, _, vg_s = memcheck(cmd)
        final, status, ht_s = heaptap(cmd)
        lc = check_at_exit(name, final)
        got = categories(lc)
        for r in lc["loss_records"]:
            if r["kind"] == "possibly_lost" and \
                    any(f in ALIGNED_BY_CHANCE for f in functions({"stack": r["stack"]})):
                got = held_by_chance(got, (r["blocks"], r["bytes"]))
        check(f"{name}: categories as memcheck's", got, expected)
        check(f"{name}: the heap is not a root", (lc["heap"]["roots"], lc["heap"]["why"]),
              (False, "every_block_known"))
        check(f"{name}: the program's own status", status, 0)
        st, own = final["stacks"], final["heaptap"]
        check(f"{name}: no stack copy lost (waits for room {st['waits']}, the longest "
              f"{st['wait_max_us']:.0f} us; the loop served a record at most "
              f"{own['backlog_max_ms']:.0f} ms after it was read)", st["lost_samples"], 0)
        times.append(f"{cmd[0]} {vg_s:.1f}s/{ht_s:.1f}s")
    print("  memcheck/heaptap wall time: " + ", ".join(times), flush=True)


# tests/targets/reach.c's "make", then its exit.
TEXTBOOK = {"definitely_lost": (11, 1048), "indirectly_lost": (3, 144), "possibly_lost": (1, 300),
            "still_reachable": (5, 1000)}


@test(tier="services", sanitized=True)
def test_leak_summary_of_the_textbook_program():
    """Definitely, indirectly, possibly lost and still reachable, as memcheck has them; loss
    records largest first, the lost list's head leading its 3 indirectly lost nodes."""
    expected, _, _ = memcheck([REACH], stdin=b"make\nexit\n")
    check("memcheck's categories", expected, TEXTBOOK)
    final, status, _ = heaptap([REACH], stdin=b"make\nexit\n")
    lc = check_at_exit("reach", final)
    check("categories", categories(lc), TEXTBOOK)
    records = [(r["kind"], r["blocks"], r["bytes"], r["indirect_bytes"],
                functions({"stack": r["stack"]})[1]) for r in lc["loss_records"]]
    check("loss records, largest first", records,
          [("definitely_lost", 10, 1000, 0, "lose_ten"),
           ("still_reachable", 5, 1000, 0, "keep_five"),
           ("possibly_lost", 1, 300, 0, "point_inside"),
           ("definitely_lost", 1, 48, 144, "lose_list"),
           ("indirectly_lost", 3, 144, 0, "lose_list")])
    check("the allocator function names the first frame",
          lc["loss_records"][0]["stack"][0]["function"], "malloc")
    # The text: memcheck's lines.
    p = subprocess.run([HEAPTAP, "-i", "1h", "--leak-check", "--", REACH], input=b"make\nexit\n",
                       capture_output=True, timeout=120)
    text = p.stdout.decode()
    for line in ("   definitely lost: 1,048 bytes in 11 blocks",
                 "   indirectly lost: 144 bytes in 3 blocks",
                 "     possibly lost: 300 bytes in 1 blocks",
                 "   still reachable: 1,000 bytes in 5 blocks",
                 "LOSS RECORD 4 of 5  192 (48 direct, 144 indirect) bytes in 1 blocks are "
                 "definitely lost"):
        check_true(f"the text has {line.strip()!r}", line in text, text[-3000:])
    check_true("LEAK SUMMARY at the exit", "LEAK SUMMARY  at the target's exit" in text,
               text[-3000:])


PROTECTED = os.path.join(TARGETS, "protected")


def made_unreadable(stdout):
    """tests/targets/protected.c's answer to "make": ((start, end) of the pages it made
    unreadable, (start, end) of its guard)."""
    m = re.search(r"done make ([0-9a-f]+) ([0-9a-f]+) ([0-9a-f]+) ([0-9a-f]+)", stdout)
    if not m:
        raise Failure(f"protected: no answer to make: {stdout[-500:]!r}")
    a, b, c, d = (int(x, 16) for x in m.groups())
    return (a, b), (c, d)


@test(tier="services")
def test_leak_check_reads_through_protections_where_memcheck_does_not():
    """tests/targets/protected.c: the only pointer to a block of 1,000 bytes lies in a block of
    200 KiB that a global points to, whose pages the program made PROT_NONE (a raw mprotect)
    before its exit; one block of 48 bytes is dropped. memcheck reads no memory the program
    made unreadable and counts no pointer into it: for it the holder and the block it holds
    are definitely lost. heaptap reads that memory as a debugger does (doc/leaks.md): both are
    still reachable, and the rest of the summary is memcheck's. Its JSON says how much it read
    through protections: the holder's pages, every one written; the guard, never written, is
    counted and not read."""
    held = (2, 200 * 1024 + 1000)
    expected, _, _ = memcheck([PROTECTED], stdin=b"make\nexit\n")
    check("memcheck's summary", expected,
          {"definitely_lost": (1 + held[0], 48 + held[1]), "indirectly_lost": (0, 0),
           "possibly_lost": (0, 0), "still_reachable": (0, 0)})
    output = {}
    final, status, _ = heaptap([PROTECTED], stdin=b"make\nexit\n", output=output)
    (start, end), (gstart, gend) = made_unreadable(output["stdout"])
    lc = check_at_exit("protected", final)
    check("heaptap's summary: memcheck's, the blocks held through the protection reachable",
          categories(lc), {"definitely_lost": (expected["definitely_lost"][0] - held[0],
                                               expected["definitely_lost"][1] - held[1]),
                           "indirectly_lost": (0, 0), "possibly_lost": (0, 0),
                           "still_reachable": held})
    check("loss records", [(r["kind"], r["blocks"], r["bytes"], functions(r)[1])
                           for r in lc["loss_records"]],
          [("still_reachable", 1, 200 * 1024, "hold"), ("still_reachable", 1, 1000, "hold"),
           ("definitely_lost", 1, 48, "hold")])
    check("mappings read through protections", lc["protected_regions"], 1)
    check("bytes read through protections: the holder's pages", lc["protected_bytes"],
          end - start)
    check("the guard: never written, not read", (lc["unwritten_regions"], lc["unwritten_bytes"]),
          (1, gend - gstart))
    check("nothing skipped, nothing unreadable",
          (lc["skipped_regions"], lc["skipped_bytes"], lc["unreadable_bytes"]), (0, 0, 0))
    check("the program's own status", status, 0)


@test(tier="services")
def test_heuristics_as_memcheck():
    """tests/targets/heuristics.cc: one block for each of memcheck's heuristics. With all,
    none, and each one alone, the categories and the share of each heuristic equal
    memcheck's."""
    prog = os.path.join(TARGETS, "heuristics")
    for h in ["all", "none"] + HEURISTICS:
        expected, expected_heur, _ = memcheck([prog], heuristics=h)
        final, _, _ = heaptap([prog], args=["--leak-check-heuristics", h])
        lc = check_at_exit(f"heuristics {h}", final)
        check(f"{h}: categories", categories(lc), expected)
        check(f"{h}: reachable via each heuristic", heuristic_reachable(lc), expected_heur)
        check(f"{h}: heuristics enabled", lc["heuristics"]["enabled"],
              HEURISTICS if h == "all" else [] if h == "none" else [h])
        if h == "all":
            check("all four at work", sorted(heuristic_reachable(lc)), sorted(HEURISTICS))


@test
def test_leak_exit_code():
    """--leak-exit-code N: N when bytes are definitely or indirectly lost, else the command's
    own status (as memcheck's --error-exitcode)."""
    p = subprocess.run([HEAPTAP, "--leak-check", "--leak-exit-code", "7", "--", REACH],
                       input=b"make\nexit\n", capture_output=True, timeout=120)
    check("a leaking program", p.returncode, 7)
    p = subprocess.run([HEAPTAP, "--leak-check", "--leak-exit-code", "7", "--", REACH],
                       input=b"exit\n", capture_output=True, timeout=120)
    check("a clean program: its own status", p.returncode, 0)
    p = subprocess.run([HEAPTAP, "--leak-check", "--leak-exit-code", "7", "--", "/bin/sh", "-c",
                        "exit 3"], capture_output=True, timeout=120)
    check("a clean program that fails: its own status", p.returncode, 3)
    p = subprocess.run([HEAPTAP, "--leak-exit-code", "7", "--", "/bin/true"],
                       capture_output=True, timeout=120)
    check("--leak-exit-code alone is bad usage", p.returncode, 2)
    check_true("and says why", "--leak-exit-code needs --leak-check" in p.stderr.decode(),
               p.stderr.decode())


def process_state(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def tracer_of(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("TracerPid:"))


@test
def test_leak_check_at_an_attached_process_exit():
    """Attached with --leak-check, heaptap holds the process to its exit too: the final check
    is made there, with the exit status; the heap is a root (blocks from before attach are
    unknown), and says so."""
    target = Target("reach")
    ht = Heaptap(["-p", str(target.target_pid), "-i", "1h", "--leak-check"])
    ht.attached()
    target.do("make")
    target.send("exit")
    final, status = ht.finish(sig=None)
    check("exit status", status, 0)
    lc = check_at_exit("attached", final)
    check("categories", categories(lc), TEXTBOOK)
    check("the exit status, known", final["target_exit"], {"exit_code": 0, "signal": None})
    check("the heap is a root, and why", (lc["heap"]["roots"], lc["heap"]["why"]),
          (True, "blocks_before_attach"))
    check("the target has ended", target.popen.wait(timeout=10), 0)


@test
def test_categories_of_an_earlier_check_stay_when_the_exit_cannot_be_checked():
    """The holder killed (as a debugger taking over would need): the target runs on,
    untraced; it exits unchecked, and the final report keeps the SIGUSR1 check's categories
    and says why there is none at the exit."""
    target = Target("reach")
    pid = target.target_pid
    ht = Heaptap(["-p", str(pid), "-i", "1h", "--leak-check"])
    ht.attached()
    target.do("make")
    os.kill(ht.pid, signal.SIGUSR1)
    rec = ht.record()
    check("categories on SIGUSR1", categories(rec["leak_check"]), TEXTBOOK)
    holder = tracer_of(pid)
    check_true("held by heaptap's holder", holder != 0)
    os.kill(holder, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while tracer_of(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    check("untraced once the holder is gone", tracer_of(pid), 0)
    check("the target runs on", target.do("ping"), "")
    target.send("exit")
    final, status = ht.finish(sig=None)
    check("exit status", status, 0)
    lc = final["leak_check"]
    check_true("the SIGUSR1 check kept", lc is not None, final)
    check("made on SIGUSR1", lc["trigger"], "signal")
    check("its categories", categories(lc), TEXTBOOK)
    check_true("the report says why there is no check at the exit",
               "holder" in (final["leak_check_note"] or ""), final["leak_check_note"])


@test
def test_heaptap_killed_while_the_target_is_held_at_its_exit():
    """SIGKILL to heaptap while the target is held at its exit, 512 MiB being scanned: the
    holder dies with heaptap, and the kernel lets the target finish its exit."""
    target = Target("reach")
    pid = target.target_pid
    ht = Heaptap(["-p", str(pid), "-i", "1h", "--leak-check", "--max-allocs", "300000"])
    ht.attached()
    target.do("big 512", timeout=300)
    target.send("exit")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if process_state(pid) == "t":
                break
        except OSError:
            break
        time.sleep(0.002)
    os.kill(ht.pid, signal.SIGKILL)
    ht.popen.wait()
    check("the target finishes its exit", target.popen.wait(timeout=10), 0)
