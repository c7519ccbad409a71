"""Clean detach: however heaptap ends, no breakpoint stays in the target, no probe stays
attached, and the target computes what it computes untraced."""
import os
import random
import re
import signal
import subprocess
import time

from lib import (Failure, Heaptap, Target, check, check_true, probed_text_intact, uprobes_of,
                 test)

ROUNDS = 20000


def detach_by(sig, links=None):
    target = Target("storm")
    untraced = target.do(f"work {ROUNDS}")
    check_true("untraced run is sound", untraced.endswith("broken=0"), untraced)
    ht = Heaptap(["-p", str(target.target_pid), "-i", "1h"]
                 + (["--probe-links", links] if links else []))
    attached = ht.attached()
    # This kernel (6.18) has uprobe_multi links: heaptap's default.
    check("probe links", attached["settings"]["probe_links"], links or "multi")
    check_true("heaptap's links listed while attached", uprobes_of(ht.pid))
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


@test(sanitized=True)
def test_clean_detach_on_sigint():
    detach_by(signal.SIGINT)


@test
def test_clean_detach_on_sigterm():
    detach_by(signal.SIGTERM)


@test
def test_clean_detach_on_sigkill():
    detach_by(signal.SIGKILL)


@test
def test_clean_detach_of_a_perf_event_per_probe():
    """--probe-links single: as on kernels before 6.6, where heaptap has no other way."""
    detach_by(signal.SIGINT, "single")
    detach_by(signal.SIGKILL, "single")


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


def children_named(pid, name):
    """PIDs of process pid's children named name."""
    found = []
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            children = [int(c) for c in f.read().split()]
    except OSError:
        return found
    for child in children:
        try:
            with open(f"/proc/{child}/comm") as f:
                if f.read().strip() == name:
                    found.append(child)
        except OSError:
            pass
    return found


def living(pid):
    """Whether pid is a process that has not ended (a zombie has)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def kernel_leaks(pids):
    """The kernel log's lines saying a uprobe that one of pids made could not be taken out."""
    out = subprocess.run(["dmesg"], capture_output=True, text=True, errors="replace")
    if out.returncode:
        raise Failure(f"dmesg failed: {out.stderr.strip()}")
    return [line for line in out.stdout.splitlines() if "leaking uprobe" in line
            and any(f":{pid} failed" in line for pid in pids)]


@test
def test_sigkill_while_probes_go_in_leaves_no_breakpoint():
    """The same while probes go in: when the kernel cannot finish putting a link's probes in
    (its writes give up in a task being killed), it takes out those it had put in, in the same
    task, where that fails too, and keeps them. The target's map lock is busy, so each
    breakpoint waits its turn, and a SIGKILL sent at a random moment of the attach lands
    inside it. Kills until 5 have landed while the probes went in; none leaves a uprobe the
    kernel kept (its log says so) or code unlike the file."""
    seed = int(os.environ.get("HEAPTAP_TEST_SEED", time.time_ns() % 1000000))
    rng = random.Random(seed)
    target = Target("maplock")
    ht = Heaptap(["-p", str(target.target_pid), "-i", "1h", "-v"])
    attached = ht.attached()
    final, status = ht.finish(signal.SIGINT)
    check("a whole session's status", status, 0)
    said = ht.stderr_text()
    took = re.search(r"probes attached in ([0-9.]+) ms", said)
    check_true("-v says how long attaching took", took, said)
    window = max(float(took.group(1)) / 1e3, 0.005)
    inside = 0
    for attempt in range(1, 61):
        ht = Heaptap(["-p", str(target.target_pid), "-i", "1h", "-v"])
        while True:
            line = ht.popen.stderr.readline()
            if not line:
                raise Failure(f"heaptap ended before attaching (status {ht.wait()})")
            if b"attaching to 1 process" in line:
                break
        attachers = children_named(ht.pid, "heaptap-attach")
        check(f"heaptap's attacher (attempt {attempt})", len(attachers), 1)
        time.sleep(rng.uniform(0, 1.2 * window))
        ht.popen.send_signal(signal.SIGKILL)
        rest = ht.popen.stderr.read()
        while ht.read_line(timeout=120) is not None:
            pass
        check(f"heaptap killed (attempt {attempt})", ht.wait(), -signal.SIGKILL)
        done = re.search(r"probes attached in ([0-9.]+) ms", rest.decode(errors="replace"))
        inside += done is None
        # All in before the kill: the next kills aim within an attach as quick as this one.
        if done:
            window = max(min(window, float(done.group(1)) / 1e3), 0.005)
        # The attacher finishes the link it was making, closes it, and ends.
        deadline = time.monotonic() + 30
        while living(attachers[0]):
            check_true("heaptap-attach ends after heaptap", time.monotonic() < deadline)
            time.sleep(0.01)
        check(f"probed code bytes differing from the file (attempt {attempt})",
              probed_text_intact(target.target_pid, attached), [])
        # A uprobe the kernel could not take out is kept whether or not its breakpoint is
        # still in the code (its removal gives up before it reads the code): it says so.
        check(f"uprobes the kernel says it kept (attempt {attempt}, seed {seed})",
              kernel_leaks([ht.pid, attachers[0]]), [])
        check("the target answers", target.do("alloc"), "")
        if inside == 5:
            break
    print(f"  {attempt} kills, {inside} while the probes went in (the quickest attach "
          f"{window * 1e3:.0f} ms whole; seed {seed})", flush=True)
    check_true("5 kills landed while probes went in", inside == 5, f"{inside} of {attempt}")
