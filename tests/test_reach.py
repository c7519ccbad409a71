"""--leak-check: memcheck's leak categories, on a process that keeps running."""
import ctypes
import os
import signal
import time

from lib import Failure, Heaptap, Target, check, check_true, functions, test

PTRACE_DETACH = 17
PTRACE_SEIZE = 0x4206
PTRACE_INTERRUPT = 0x4207
WALL = 0x40000000

# (blocks, bytes) per category, for tests/targets/reach.c's "make".
EXPECTED = {"definitely_lost": (11, 10 * 100 + 48), "indirectly_lost": (3, 3 * 48),
            "possibly_lost": (1, 300), "still_reachable": (5, 5 * 200)}
# Per allocating function: its category and (blocks, bytes).
PER_SITE = {"lose_ten": {"definitely_lost": (10, 1000)},
            "keep_five": {"still_reachable": (5, 1000)},
            "lose_list": {"definitely_lost": (1, 48), "indirectly_lost": (3, 144)},
            "point_inside": {"possibly_lost": (1, 300)}}


def categories(counts):
    return {k: (v["blocks"], v["bytes"]) for k, v in counts.items() if v["blocks"]}


def check_record(name, rec):
    lc = rec["leak_check"]
    check_true(f"{name}: a leak check in the report", lc is not None, rec.get("leak_check"))
    check(f"{name}: the scan completed", lc["complete"], True)
    check(f"{name}: categories", categories(lc["categories"]), EXPECTED)
    check_true(f"{name}: the target was paused briefly", 0 < lc["paused_s"] < 5, lc)
    for function, expected in PER_SITE.items():
        site = next((s for s in rec["sites"] if function in functions(s)), None)
        check_true(f"{name}: site {function} listed", site is not None)
        check(f"{name}: {function}'s blocks", categories(site["leak_check"]), expected)


@test(sanitized=True)
def test_leak_check_categories_exact():
    target = Target("reach")
    ht = Heaptap(["-p", str(target.target_pid), "-i", "1h", "--leak-check"])
    ht.attached()
    target.do("make")
    # On demand: SIGUSR1 gives a report with a leak check, and tracing goes on.
    os.kill(ht.pid, signal.SIGUSR1)
    rec = ht.record()
    check("record after SIGUSR1", rec["type"], "interval")
    check_record("on SIGUSR1", rec)
    check("the target answers after the pause", target.do("ping"), "")
    # At the end, before detaching.
    final, status = ht.finish()
    check("exit status", status, 0)
    check_record("final", final)
    check_true("target still running", target.alive())
    check("the target answers after detach", target.do("ping"), "")


@test
def test_leak_check_refused_under_a_debugger():
    """A process some tracer holds cannot be stopped by heaptap: the check says so, the
    session goes on, and the target is untouched."""
    target = Target("reach")
    libc = ctypes.CDLL(None, use_errno=True)
    # The test itself holds the target, as a debugger would (seized: it keeps running).
    check("seized by the test", libc.ptrace(PTRACE_SEIZE, target.target_pid, None, None), 0)
    try:
        ht = Heaptap(["-p", str(target.target_pid), "-i", "1h", "--leak-check"])
        ht.attached()
        target.do("make")
        final, status = ht.finish()
        check("exit status", status, 0)
        check("no leak check in the report", final["leak_check"], None)
        check_true("stderr says why", "leak check not done" in ht.stderr_text(),
                   ht.stderr_text())
    finally:
        # Detaching takes a stopped tracee.
        libc.ptrace(PTRACE_INTERRUPT, target.target_pid, None, None)
        os.waitpid(target.target_pid, WALL)
        libc.ptrace(PTRACE_DETACH, target.target_pid, None, None)
    check("the target answers", target.do("ping"), "")


def process_state(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def tracer_of(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("TracerPid:"))


def parent_of(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("PPid:"))


def heaptaps(ht, tracer):
    """Whether tracer is heaptap's holder: with --leak-check, the child of heaptap that
    traces the target for the whole session (a check at its exit), stopping it only for a
    check."""
    return tracer != 0 and parent_of(tracer) == ht.pid


@test
def test_heaptap_killed_during_a_leak_check():
    """SIGKILL while the target is stopped for a scan: the kernel lets it go, it runs on."""
    target = Target("reach")
    ht = Heaptap(["-p", str(target.target_pid), "-i", "1h", "--leak-check",
                  "--max-allocs", "600000"])
    ht.attached()
    target.do("big 1024", timeout=300)
    os.kill(ht.pid, signal.SIGUSR1)
    # A scan of 1 GiB takes several hundred ms here: stopped meanwhile.
    deadline = time.monotonic() + 5
    while process_state(target.target_pid) != "t" and time.monotonic() < deadline:
        time.sleep(0.005)
    check("the target is stopped for the scan", process_state(target.target_pid), "t")
    os.kill(ht.pid, signal.SIGKILL)
    ht.popen.wait()
    time.sleep(0.1)
    check("no tracer left", tracer_of(target.target_pid), 0)
    check_true("running again", process_state(target.target_pid) in ("S", "R"),
               process_state(target.target_pid))
    check("the target answers", target.do("ping"), "")


def thread_state(pid, tid):
    with open(f"/proc/{pid}/task/{tid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def tracers_of_threads(pid):
    """TracerPid of every thread of pid."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                out[int(tid)] = next(int(l.split()[1]) for l in f if l.startswith("TracerPid:"))
        except (OSError, StopIteration):
            pass
    return out


def wait_for(what, cond, timeout=10):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise Failure(f"{what}: not within {timeout}s")
        time.sleep(0.005)


def record_or_end(ht, timeout):
    """The next record; if it does not come in time, heaptap is ended first (by PID), so that
    a heaptap stuck with the target stopped lets it go before the target is ended."""
    try:
        return ht.record(timeout=timeout)
    except Failure:
        ht.end()
        raise


@test
def test_leak_check_does_not_wait_for_a_thread_in_vfork():
    """A thread in an uninterruptible sleep (a vfork parent waiting for its child) cannot be
    stopped. The other threads are stopped no longer than --leak-check-max-pause allows, the
    check says it is incomplete and why, and the late thread is let go without waiting for it:
    once its child exits it runs on, untraced, and heaptap goes on and ends normally."""
    target = Target("vforker")
    pid = target.target_pid
    others = [int(t) for t in target.do("threads").split()]
    ht = Heaptap(["-p", str(pid), "-i", "1h", "--leak-check", "--leak-check-max-pause", "1s"])
    ht.attached()
    target.do("make")
    target.send("vfork 8000")
    wait_for("the main thread waits for its vfork child", lambda: thread_state(pid, pid) == "D")
    start = time.monotonic()
    os.kill(ht.pid, signal.SIGUSR1)
    stopped_seen = False
    while time.monotonic() - start < 20:
        states = [thread_state(pid, t) for t in others]
        if "t" in states:
            stopped_seen = True
        elif stopped_seen:
            break
        time.sleep(0.002)
    resumed_s = time.monotonic() - start
    check_true("the other threads were stopped for the check", stopped_seen)
    check_true("the other threads run again within --leak-check-max-pause (1 s) and 0.3 s",
               resumed_s < 1.3, f"{resumed_s:.2f} s")
    rec = record_or_end(ht, 5)
    check("the vforking thread is still waiting: heaptap did not wait for it",
          thread_state(pid, pid), "D")
    lc = rec["leak_check"]
    check_true("a leak check in the report", lc is not None, rec)
    check("the check is incomplete", lc["complete"], False)
    check("why", lc["incomplete_reasons"], ["threads_not_stopped"])
    check("threads not stopped", lc["threads_not_stopped"], 1)
    check("threads stopped and scanned", lc["threads"], 2)
    check_true("the pause reported within the limit", lc["paused_s"] < 1.0, lc)
    # The block a global holds is found; whether the dropped one is lost, nobody can tell.
    check("categories", categories(lc["categories"]), {"still_reachable": (1, 100)})
    check("unsettled blocks", lc["unsettled_blocks"], 1)
    # The child exits after 8 s: the main thread wakes and runs on, untraced.
    line = target.read_line(timeout=15)
    check("the vfork returns", line, "done vfork 8000")
    # The holder traces every thread for the session (a check at the exit), stopping none.
    tracers = set(tracers_of_threads(pid).values()) - {0}
    check_true("no thread is traced but by heaptap's holder",
               len(tracers) == 1 and heaptaps(ht, tracers.pop()), tracers_of_threads(pid))
    check_true("the main thread runs", thread_state(pid, pid) in ("S", "R"),
               thread_state(pid, pid))
    check("the target answers", target.do("threads"), " ".join(map(str, others)))
    final, status = ht.finish()
    check("exit status", status, 0)
    check("the final check stops every thread", final["leak_check"]["threads"], 3)
    check("the final check is complete", final["leak_check"]["complete"], True)
    check("no thread is traced after heaptap", set(tracers_of_threads(pid).values()), {0})


@test
def test_leak_check_skips_userfaultfd_memory():
    """Memory registered with userfaultfd is served by a thread of the target, which the
    check stops: a read of a page not filled yet would wait for it forever, heaptap and the
    target with it. The check reads nothing there: it reports the mapping as not read, its
    data as unreadable, and the blocks it could hold as unsettled; within its time limit."""
    target = Target("uffd")
    handler = int(target.do("handler"))
    ht = Heaptap(["-p", str(target.target_pid), "-i", "1h", "--leak-check",
                  "--leak-check-max-pause", "2s"])
    ht.attached()
    # One block held by a global, one only from the registered memory, one dropped.
    target.do("make")
    start = time.monotonic()
    os.kill(ht.pid, signal.SIGUSR1)
    rec = record_or_end(ht, 10)
    check_true("the check ends within --leak-check-max-pause (2 s)",
               time.monotonic() - start < 2.5, f"{time.monotonic() - start:.2f} s")
    lc = rec["leak_check"]
    check_true("a leak check in the report", lc is not None, rec)
    check("threads stopped, the handler among them", lc["threads"], 2)
    check("the registered mapping is not read", lc["skipped_regions"], 1)
    # Its filled page, and the three empty write-protected ones: pagemap cannot tell them
    # from pages swapped out.
    check("its bytes that may hold data are unreadable", lc["unreadable_bytes"], 4 * 4096)
    check("the check is incomplete", lc["complete"], False)
    check("why", lc["incomplete_reasons"], ["memory_not_read"])
    check("categories", categories(lc["categories"]), {"still_reachable": (1, 100)})
    check("the block held from there and the dropped one are not called lost",
          lc["unsettled_blocks"], 2)
    check("the handler thread serves again", thread_state(target.target_pid, handler) != "t",
          True)
    check("the target reads a page the handler fills", target.do("touch"), "0")
    final, status = ht.finish()
    check("exit status", status, 0)
    check("the final check skips it too", final["leak_check"]["skipped_regions"], 1)
    check("the target answers after detach", target.do("touch"), "0")


@test
def test_leak_check_on_a_stopped_target():
    """A target stopped by SIGSTOP is checked all the same: its threads are seized from the
    group stop and their registers and stacks scanned, so a block held only from a stack is
    still reachable; the target is left stopped, and runs on after SIGCONT."""
    target = Target("reach")
    pid = target.target_pid
    ht = Heaptap(["-p", str(pid), "-i", "1h", "--leak-check"])
    ht.attached()
    os.kill(pid, signal.SIGSTOP)
    # Traced by heaptap's holder, a group stop shows as a tracing stop (t).
    wait_for("the target stops", lambda: process_state(pid) in ("T", "t"))
    # Nothing tracked yet: no block to classify, but the thread was stopped and is counted.
    os.kill(ht.pid, signal.SIGUSR1)
    rec = record_or_end(ht, 10)
    lc = rec["leak_check"]
    check_true("a leak check of the stopped target", lc is not None, rec)
    check("its thread was stopped (no block to classify)", lc["threads"], 1)
    check_true("still stopped", process_state(pid) in ("T", "t"), process_state(pid))
    os.kill(pid, signal.SIGCONT)
    # hold: 64 bytes whose only pointer is in a frame, while the target waits for "drop".
    target.send("hold")
    check("held", target.read_line(), "done hold")
    os.kill(pid, signal.SIGSTOP)
    # Traced by heaptap's holder, a group stop shows as a tracing stop (t).
    wait_for("the target stops", lambda: process_state(pid) in ("T", "t"))
    os.kill(ht.pid, signal.SIGUSR1)
    rec = record_or_end(ht, 10)
    lc = rec["leak_check"]
    check("the check is complete", lc["complete"], True)
    check("registers and stack of the stopped thread scanned", lc["threads"], 1)
    site = next((s for s in rec["sites"] if "hold_one" in functions(s)), None)
    check_true("site hold_one listed", site is not None, rec["sites"])
    check("the block held from the stack", categories(site["leak_check"]),
          {"still_reachable": (1, 64)})
    time.sleep(0.2)
    check("left stopped, as found (under heaptap's holder)", process_state(pid), "t")
    check_true("traced by heaptap's holder only", heaptaps(ht, tracer_of(pid)), tracer_of(pid))
    os.kill(pid, signal.SIGCONT)
    check("the target goes on after SIGCONT", target.do("drop"), "")
    os.kill(ht.pid, signal.SIGUSR1)
    rec = record_or_end(ht, 10)
    site = next((s for s in rec["sites"] if "hold_one" in functions(s)), None)
    check("the block once dropped", categories(site["leak_check"]), {"definitely_lost": (1, 64)})
    # The final check on a stopped target leaves it stopped when heaptap is gone.
    os.kill(pid, signal.SIGSTOP)
    # Traced by heaptap's holder, a group stop shows as a tracing stop (t).
    wait_for("the target stops", lambda: process_state(pid) in ("T", "t"))
    final, status = ht.finish()
    check("exit status", status, 0)
    check("the final check scanned the stopped thread", final["leak_check"]["threads"], 1)
    time.sleep(0.2)
    check("stopped after heaptap is gone", process_state(pid), "T")
    check("not traced after heaptap", tracer_of(pid), 0)
    os.kill(pid, signal.SIGCONT)
    check("the target answers after SIGCONT", target.do("ping"), "")


def mapping(pid, start):
    """The mapping of /proc/PID/smaps that starts at start: (end, permissions, Rss in bytes)."""
    with open(f"/proc/{pid}/smaps") as f:
        lines = f.read().splitlines()
    for i, line in enumerate(lines):
        parts = line.split()
        if parts and "-" in parts[0] and int(parts[0].split("-")[0], 16) == start:
            rss = next(int(l.split()[1]) * 1024 for l in lines[i + 1:] if l.startswith("Rss:"))
            return int(parts[0].split("-")[1], 16), parts[1], rss
    raise Failure(f"no mapping of PID {pid} starts at {start:#x}")


@test(sanitized=True)
def test_leak_check_reads_memory_made_unreadable_and_faults_nothing_in():
    """tests/targets/protected.c, attached: the only pointer to a block lies in memory the
    program made PROT_NONE (a raw mprotect), beside a PROT_NONE guard it never touched. The
    check reads the former through its protection, as a debugger does, and so calls the block
    still reachable; it reads nothing of the guard, whose pages stay out of memory (Rss 0),
    and changes no protection. The target runs on: it makes its memory readable again and
    finds its block as it left it."""
    target = Target("protected")
    pid = target.target_pid
    ht = Heaptap(["-p", str(pid), "-i", "1h", "--leak-check"])
    ht.attached()
    start, end, gstart, gend = (int(x, 16) for x in target.do("make").split())
    check("the holder's pages: one mapping, made unreadable", mapping(pid, start),
          (end, "---p", end - start))
    check("the guard: one mapping, never touched", mapping(pid, gstart), (gend, "---p", 0))
    os.kill(ht.pid, signal.SIGUSR1)
    rec = record_or_end(ht, 10)
    lc = rec["leak_check"]
    check_true("a leak check in the report", lc is not None, rec)
    check("the check is complete", lc["complete"], True)
    check("categories: the block held through the protection, and its holder, reachable",
          categories(lc["categories"]),
          {"definitely_lost": (1, 48), "still_reachable": (2, 200 * 1024 + 1000)})
    check("mappings read through protections", lc["protected_regions"], 1)
    check("bytes read through protections: the holder's pages", lc["protected_bytes"],
          end - start)
    check("the guard counted, not read", (lc["unwritten_regions"], lc["unwritten_bytes"]),
          (1, gend - gstart))
    check("the guard's pages still out of memory", mapping(pid, gstart), (gend, "---p", 0))
    check("the holder's protection unchanged", mapping(pid, start), (end, "---p", end - start))
    check("the target finds its block as it left it", target.do("touch"), "7")
    final, status = ht.finish()
    check("exit status", status, 0)
    lc = final["leak_check"]
    check("final: the same categories", categories(lc["categories"]),
          {"definitely_lost": (1, 48), "still_reachable": (2, 200 * 1024 + 1000)})
    check("final: the holder readable again, nothing read through protections",
          (lc["protected_regions"], lc["protected_bytes"]), (0, 0))
    check("the target answers after detach", target.do("ping"), "")
