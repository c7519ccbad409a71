"""--leak-check: memcheck's leak categories, on a process that keeps running."""
import ctypes
import os
import signal
import time

from lib import Heaptap, Target, check, check_true, functions, test

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


@test
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
