"""Clean detach: however heaptap ends, no breakpoint stays in the target, no probe stays
attached, and the target computes what it computes untraced."""
import os
import signal
import time

from lib import (Failure, Heaptap, Target, check, check_true, probed_text_intact, uprobes_of,
                 test)

ROUNDS = 20000


def detach_by(sig):
    target = Target("storm")
    untraced = target.do(f"work {ROUNDS}")
    check_true("untraced run is sound", untraced.endswith("broken=0"), untraced)
    ht = Heaptap(["-p", str(target.target_pid), "-i", "1h"])
    attached = ht.attached()
    # End heaptap while the target's threads are busy in the allocator.
    target.send(f"work {ROUNDS}")
    line = target.read_line()
    check_true("target busy under tracing", line.startswith("progress"), line)
    if sig == signal.SIGKILL:
        ht.popen.send_signal(sig)
        check("heaptap killed", ht.wait(), -signal.SIGKILL)
    else:
        final, status = ht.finish(sig)
        check(f"heaptap exit status after {sig.name}", status, 0)
        check_true(f"final report after {sig.name}", final is not None)
    while not line.startswith("done"):
        line = target.read_line()
    check("result of the run heaptap was torn down in", line, f"done work {ROUNDS} {untraced}")
    check("probed code bytes differing from the file", probed_text_intact(target.target_pid,
                                                                          attached), [])
    check("uprobes left attached", uprobes_of(ht.pid), [])
    check("result of a run after heaptap", target.do(f"work {ROUNDS}"), untraced)


@test
def test_clean_detach_on_sigint():
    detach_by(signal.SIGINT)


@test
def test_clean_detach_on_sigterm():
    detach_by(signal.SIGTERM)


@test
def test_clean_detach_on_sigkill():
    detach_by(signal.SIGKILL)


@test
def test_final_report_is_the_state_when_tracing_ended():
    """Probes come out over a grace period: accounting freezes before the first does, so an
    allocation whose return probe is already gone is never followed by a free of a block
    heaptap "never saw", and the final report is the state when tracing ended."""
    target = Target("storm")
    ht = Heaptap(["-p", str(target.target_pid), "-i", "1h"])
    ht.attached()
    target.send("work 200000")
    line = target.read_line()
    check_true("target busy under tracing", line.startswith("progress"), line)
    final, status = ht.finish(signal.SIGINT)
    check("heaptap exit status", status, 0)
    check("frees of blocks heaptap never saw allocated", final["inexact"]["unknown_frees"], 0)
    check("returns missed", final["inexact"]["missed_returns"], 0)
    check("inexact", final["inexact"]["total"], 0)
    check("live blocks: allocated less freed", final["live_allocs"],
          final["allocs"] - final["frees"])
    check("live bytes: allocated less freed", final["live_bytes"],
          final["alloc_bytes"] - final["free_bytes"])
    calls = {f["function"]: f for f in final["functions"]}
    check("allocating calls: blocks returned and failures",
          final["alloc_calls"], sum(f["returned"] + f["failed"] for f in calls.values()
                                    if f["function"] not in ("free",))
          + calls["realloc"]["calls"] - calls["realloc"]["returned"]
          - calls["realloc"]["failed"])
    check_true("the storm was traced", final["allocs"] > 1000, final["allocs"])
    while not line.startswith("done"):
        line = target.read_line()


def open_links(pid):
    """BPF links heaptap holds open: its probes still in."""
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            n += os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:bpf_link"
        except OSError:
            pass
    return n


@test
def test_sigkill_mid_detach_leaves_no_breakpoint():
    """The kernel cannot take a breakpoint out on behalf of a task that is being killed: it
    gives up, keeps the uprobe, and the breakpoint stays in the target's code for good (every
    call of the function traps from then on). So a SIGKILL that reaches heaptap while its probes
    come out must still leave none. The target's memory map lock is busy, so each breakpoint's
    removal waits its turn: the kill lands while the entries' come out."""
    target = Target("maplock")
    for attempt in range(3):
        ht = Heaptap(["-p", str(target.target_pid), "-i", "1h"])
        attached = ht.attached()
        entries = len(attached["probes"])
        os.kill(ht.pid, signal.SIGINT)
        # Return probes come out first, then entries: fewer links than entries, and the
        # entries are coming out.
        deadline = time.monotonic() + 60
        while ht.popen.poll() is None and open_links(ht.pid) >= entries:
            if time.monotonic() > deadline:
                raise Failure("heaptap did not start taking its entry probes out within 60s")
            time.sleep(0.001)
        ht.popen.send_signal(signal.SIGKILL)
        # To the end of its output: whatever heaptap left to finish the job is done by then.
        while ht.read_line(timeout=120) is not None:
            pass
        check(f"heaptap killed while detaching (attempt {attempt + 1})", ht.wait(),
              -signal.SIGKILL)
        check(f"probed code bytes differing from the file (attempt {attempt + 1})",
              probed_text_intact(target.target_pid, attached), [])
        check("the target answers", target.do("alloc"), "")
