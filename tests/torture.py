#!/usr/bin/env python3
"""heaptap's torture run: python3 tests/torture.py [N] [--seed S] [--cycle-seed C]
[--target NAME]... [--max-time SECONDS] (as root, after make).

N cycles (default 200), each: build/heaptap attached to a running target, then ended by SIGINT
or SIGKILL at a random moment; once heaptap is gone (reaped, and its standard output closed:
heaptap-detach, which takes the probes out when heaptap was killed doing it, holds it until
they are out), the target is checked. The choices
(target, mode, signal, moment) come from the cycle's seed, drawn from the run's seed: both are
printed, `--seed S` replays a run's choices, `--cycle-seed C` repeats one cycle's N times.

Targets, each started once and kept from cycle to cycle (started again after a failure):
  storm      tests/targets/storm 8: 8 threads allocating, reallocating and freeing without
             pause; runs follow one another while heaptap lives, and every run's checksum
             must equal the untraced run's
  forker     tests/targets/forker: forks a child every 250 ms, each allocating for 4 s;
             children forked while heaptap is attached inherit its breakpoints. Once heaptap
             is gone the living children are held, and checked as the target is
  threads1k  tests/targets/threads1k: 1,000 threads, each a malloc/free every 20 to 50 ms
Modes: full (-i 200ms), leak (--leak-check -i 200ms), live (--live --window 300ms -i 200ms).
Moments: attach (a random time from heaptap's start: its probes in or not yet), report (within
an interval after the 1st to 3rd report), pause (leak: SIGUSR1, then the signal within 40 ms:
during the leak check's stop), window (live: within 1.5 s of attaching, windows and pauses).

Checks, once heaptap is gone:
  exit       after SIGINT, status 0 and a final record if the attached record came (a SIGINT
             before heaptap's first instruction ends it by the signal: allowed only with
             nothing printed); after SIGKILL, killed by it; never a crash, its output closed
             within 60 s, and every record valid under doc/report.schema.json
  leftovers  no process heaptap started (the leak check's tracer, the --live calibration
             child, heaptap-attach, heaptap-detach) still running 1.5 s later: torture.py is the subreaper of
             what it starts, so heaptap's orphans come to it
  stopped    no thread of the target, nor of a held child, in state t or T within 1.5 s (the
             leak check's tracer lets go when heaptap is gone)
  text       at every probe address, the target's code (and each held child's) equals the
             file's: no breakpoint left. The addresses are those of the attached record, or,
             when heaptap was ended before printing it, of earlier attaches to the target (the
             plan is the same: each target's plan is learnt by a clean attach when it starts)
  uprobes    bpftool perf list, and the uprobe_multi links every process holds (its
             /proc/PID/fdinfo): no uprobe owned by heaptap's PID, by a process running
             build/heaptap or left by heaptap, nor any perf-event uprobe on a file opened
             through the /proc/PID/root of a target of this run, gone or living (heaptap opens
             the target's files so: the name says for whom the probe was made)
  result     storm: every checksum equals the untraced run's; forker: every child reaped
             exited 0 (a child killed by SIGTRAP met a breakpoint nobody owned); each target
             answers afterwards (storm: an untraced run; threads1k: all 1,000 threads make
             progress)

What the uprobe check can see: bpftool lists the perf events that living processes hold
open. A reaped heaptap's own were closed by the kernel before it could be reaped, so one of
its uprobes can survive only in a process holding the event (one heaptap forked): the owner
and file name checks cover those. A uprobe the kernel keeps with no event at all (as it does
when it cannot take a breakpoint out: "leaking uprobe" in its log) is in no list: its
breakpoint is what the text check sees. Uprobes other processes hold on the same files,
opened for other processes (another heaptap, on another target), are counted, not judged.

Prints one line per cycle and a summary; exits 0 only when nothing failed.
"""
import argparse
import collections
import ctypes
import json
import os
import random
import re
import select
import signal
import statistics
import subprocess
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402
from lib import Failure, check, check_true  # noqa: E402

MODES = {
    "full": ["-i", "200ms"],
    "leak": ["--leak-check", "-i", "200ms"],
    "live": ["--live", "--window", "300ms", "-i", "200ms"],
}
MOMENTS = {
    "full": ("attach", "report"),
    "leak": ("attach", "report", "pause"),
    "live": ("attach", "report", "window"),
}
SIGNALS = (signal.SIGINT, signal.SIGKILL)
INTERVAL_S = 0.2
# The leak check's tracer is killed with heaptap (its parent-death signal): the threads it held
# are let go at its exit. Anything heaptap left gets this long to end.
GRACE_S = 1.5
# After SIGINT heaptap detaches (about 1 s of grace periods here, several on a loaded machine)
# and, with --leak-check, checks once more; killed, it leaves its probes to heaptap-detach,
# which holds its standard output until they are out. Its output ends within this, or it hung.
EXIT_WAIT_S = 60
STORM_ROUNDS = 2000
# Storm runs go on this long after heaptap's signal: through the probes' removal, not through
# the whole of a killed heaptap's slow end (its probes closed one by one by the kernel).
STORM_AFTER_SIGNAL_S = 2
# A breakpoint found: how long it is watched, to tell one left from one taken out late.
LATER_S = 5

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
_libc = ctypes.CDLL(None, use_errno=True)
HEAPTAP_EXE = os.path.realpath(lib.HEAPTAP)
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def die_with_parent():
    """In a child before exec: if torture.py dies, its targets and heaptap go with it."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def take_lines(proc):
    """The complete lines proc has written so far, without waiting for more. Uses Proc's
    buffer, so that Proc.read_line and Target.do go on where this stops."""
    fd = proc.popen.stdout.fileno()
    while not proc._eof and select.select([fd], [], [], 0)[0]:
        chunk = os.read(fd, 65536)
        if not chunk:
            proc._eof = True
        proc._buf += chunk
    *lines, proc._buf = proc._buf.split(b"\n")
    return [line.decode(errors="replace") for line in lines]


def stat_fields(path):
    """Fields of a /proc stat file after the command name (state first), or None if gone."""
    try:
        with open(path, "rb") as f:
            return f.read().rsplit(b")", 1)[1].decode().split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None


def stopped_threads(pid):
    """(tid, state) of pid's threads in state t (traced) or T (stopped)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return []
    out = []
    for tid in tids:
        f = stat_fields(f"/proc/{pid}/task/{tid}/stat")
        if f and f[0] in "tT":
            out.append((int(tid), f[0]))
    return out


def process_exists(pid):
    f = stat_fields(f"/proc/{pid}/stat")
    return f is not None and f[0] != "Z"


def start_boottime(pid):
    """When pid started, in seconds of CLOCK_BOOTTIME, or None if it is gone."""
    f = stat_fields(f"/proc/{pid}/stat")
    return int(f[19]) / CLOCK_TICKS if f else None


def boottime():
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def perf_list():
    return lib.perf_uprobes()


def exe_of(pid):
    try:
        return os.path.realpath(f"/proc/{pid}/exe")
    except OSError:
        return None


def descends_from(pid, ancestor):
    """Whether pid is ancestor's child, or its child's, and so on (other tests' heaptaps, run
    from the same binary beside the torture, are not)."""
    while pid and pid > 1:
        f = stat_fields(f"/proc/{pid}/stat")
        if not f:
            return False
        pid = int(f[1])
        if pid == ancestor:
            return True
    return False


def opened_for(filename):
    """(PID, path) of a file opened as /proc/PID/root/path; (None, filename) otherwise."""
    m = re.match(r"/proc/(\d+)/root(/.*)", filename or "")
    return (int(m.group(1)), m.group(2)) if m else (None, filename)


def mapped_files(pid):
    files = set()
    try:
        with open(f"/proc/{pid}/maps", errors="replace") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 6 and parts[5].startswith("/"):
                    files.add(parts[5])
    except FileNotFoundError:
        pass
    return files


class Orphans:
    """Processes that came to torture.py as subreaper: started by something it started (heaptap's
    helpers, a dead forker's children), whose parent is gone."""

    def __init__(self):
        if _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0):
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")
        self.me = os.getpid()

    def living(self):
        """Orphans still running; the ones that ended are reaped on the way."""
        ours = {p.pid for p in lib.started()}
        out = []
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) in ours:
                continue
            f = stat_fields(f"/proc/{name}/stat")
            if not f or int(f[1]) != self.me:
                continue
            if f[0] == "Z":
                try:
                    os.waitpid(int(name), os.WNOHANG)
                except ChildProcessError:
                    pass
            else:
                out.append(int(name))
        return out

    def end(self, pid):
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


# ---- targets: one interface, a class each ----

class TortureTarget:
    """What the torture does with a target: start() it (with its untraced baseline); begin() a
    cycle as heaptap starts; signalled() once heaptap has its signal; pump() its output while
    waiting (watch_fds() to wait on); settle() once heaptap is gone; processes() to check;
    after() the generic checks, the target's own. A failure goes to fails, or raises Failure."""
    name = None

    def begin(self):
        pass

    def signalled(self):
        pass

    def pump(self, tracing=True):
        pass

    def watch_fds(self):
        return []

    def settle(self, fails):
        pass

    def processes(self):
        return [self.pid]

    def after(self, fails):
        pass


class Storm(TortureTarget):
    """tests/targets/storm with 8 threads: runs back to back while heaptap lives."""
    name = "storm"

    def start(self):
        self.proc = lib.Target("storm", args=["8"], preexec_fn=die_with_parent)
        self.pid = self.proc.target_pid
        self.command = f"work {STORM_ROUNDS}"
        self.untraced = self.proc.do(self.command, timeout=120)
        check_true("untraced storm run sound", self.untraced.endswith("broken=0"), self.untraced)

    def begin(self):
        self.busy = True
        self.busy_until = float("inf")
        self.runs = []
        self.proc.send(self.command)

    def signalled(self):
        """heaptap has its signal: runs go on through the start of its detach, then stop."""
        self.busy_until = time.monotonic() + STORM_AFTER_SIGNAL_S

    def pump(self, tracing=True):
        """Checks finished runs; while tracing, starts the next one."""
        for line in take_lines(self.proc):
            if line.startswith("done " + self.command):
                self.runs.append(line[len("done " + self.command):].strip())
                self.busy = False
                if tracing and time.monotonic() < self.busy_until:
                    self.proc.send(self.command)
                    self.busy = True

    def watch_fds(self):
        return [self.proc.popen.stdout.fileno()]

    def settle(self, fails):
        """heaptap is gone: the run in flight ends, and every run's checksum is judged."""
        deadline = time.monotonic() + 120
        while self.busy and time.monotonic() < deadline:
            select.select(self.watch_fds(), [], [], 0.1)
            self.pump(tracing=False)
            if not self.proc.alive():
                break
        with_checks(fails, check_true, "storm run in flight when heaptap ended finished",
                    not self.busy, "no answer within 120 s")
        wrong = [r for r in self.runs if r != self.untraced]
        with_checks(fails, check, f"storm checksums unlike the untraced run's {self.untraced!r}"
                    f" (of {len(self.runs)} runs)", wrong, [])
        self.stats["storm runs checked"] += len(self.runs)
        self.note = f"{len(self.runs)} runs"

    def after(self, fails):
        check("storm run after heaptap", self.proc.do(self.command, timeout=120), self.untraced)


class Forker(TortureTarget):
    """tests/targets/forker: children forked all along; those alive after heaptap are held."""
    name = "forker"

    def start(self):
        self.proc = lib.Target("forker", preexec_fn=die_with_parent)
        self.pid = self.proc.target_pid
        self.proc.do("status")
        self.held = []

    def begin(self):
        self.heaptap_from = boottime()
        self.held = []

    def settle(self, fails):
        until = boottime()
        self.held = [int(p) for p in self.proc.do("hold").split()]
        starts = [start_boottime(p) for p in self.held]
        traced = sum(1 for s in starts if s is not None and self.heaptap_from <= s <= until)
        self.stats["forker children checked"] += len(self.held)
        self.stats["forker children checked, forked while heaptap ran"] += traced
        self.note = f"{len(self.held)} children held, {traced} forked while heaptap ran"

    def processes(self):
        return [self.pid] + self.held

    def after(self, fails):
        check("forker release", self.proc.do("release"), "")
        status = self.proc.do("status")
        fields = dict(f.split("=", 1) for f in status.split()[:2])
        self.stats["forker children reaped"] += int(fields["reaped"])
        check(f"children of the forker that did not exit 0 ({status})", fields["bad"], "0")


class Threads1k(TortureTarget):
    """tests/targets/threads1k: 1,000 threads, now and then an allocation each."""
    name = "threads1k"
    THREADS = 1000

    def start(self):
        self.proc = lib.Target("threads1k", args=[str(self.THREADS)],
                               preexec_fn=die_with_parent)
        self.pid = self.proc.target_pid

    def after(self, fails):
        check("threads1k threads making progress after heaptap",
              self.proc.do("progress 5000", timeout=30), f"{self.THREADS}/{self.THREADS}")


TARGETS = {t.name: t for t in (Storm, Forker, Threads1k)}


def with_checks(fails, fn, *args):
    """Runs a named check; its failure is collected rather than ending the cycle."""
    try:
        fn(*args)
    except Failure as e:
        fails.append(str(e))


# ---- one heaptap session ----

class Session:
    """heaptap attached to a target: its records and stderr read as they come, so that it
    never waits on a full pipe, each record validated against the schema."""

    def __init__(self, pid, args):
        self.started = time.monotonic()
        self.ht = lib.Heaptap(["-p", str(pid)] + args, preexec_fn=die_with_parent)
        self.pid = self.ht.pid
        self.records = []
        self.invalid = []
        self.stderr = b""
        self.stderr_eof = False
        self.attached_after = None  # seconds from start to the attached record

    def fds(self):
        fds = [] if self.ht._eof else [self.ht.popen.stdout.fileno()]
        return fds + ([] if self.stderr_eof else [self.ht.popen.stderr.fileno()])

    def read(self):
        """Whatever heaptap has written: records parsed, stderr kept."""
        efd = self.ht.popen.stderr.fileno()
        while not self.stderr_eof and select.select([efd], [], [], 0)[0]:
            chunk = os.read(efd, 65536)
            self.stderr += chunk
            self.stderr_eof = not chunk
        for line in take_lines(self.ht):
            try:
                rec = lib.parse_record(line)
            except Failure as e:
                self.invalid.append(str(e))
                continue
            self.records.append(rec)
            if rec["type"] == "attached" and self.attached_after is None:
                self.attached_after = time.monotonic() - self.started

    def ended(self):
        return self.ht.popen.poll() is not None

    def attached(self):
        return next((r for r in self.records if r["type"] == "attached"), None)

    def intervals(self):
        return [r for r in self.records if r["type"] == "interval"]

    def stderr_text(self):
        return self.stderr.decode(errors="replace").strip()

    def close(self):
        """Ends heaptap if it still runs, closes its pipes: 200 cycles must not pile them up."""
        self.ht.end()
        if self.ht in lib.started():
            lib.started().remove(self.ht)


def pump(session, target, seconds, until=None):
    """Reads heaptap and the target for `seconds`, or until until() is true (then True), or
    heaptap has ended (False)."""
    deadline = time.monotonic() + seconds
    while True:
        session.read()
        target.pump()
        if until and until():
            return True
        if session.ended() and not session.fds():
            return False
        left = deadline - time.monotonic()
        if left <= 0:
            return until is None
        select.select(session.fds() + target.watch_fds(), [], [], min(left, 0.05))


def wait_attached(session, target, timeout=30):
    if not pump(session, target, timeout, lambda: session.attached() is not None):
        raise Failure(f"heaptap: no attached record within {timeout}s"
                      f"{' (it ended: ' + session.stderr_text() + ')' if session.ended() else ''}")


def act(session, target, moment, sig, rng, attach_estimate):
    """Waits for the moment, sends sig; returns what the moment was."""
    if moment == "attach":
        delay = rng.uniform(0, 1.25) * attach_estimate
        pump(session, target, delay)
        where = f"attach+{delay * 1000:.0f}ms"
    elif moment == "report":
        k, frac = rng.randint(1, 3), rng.uniform(0, 1)
        wait_attached(session, target)
        if not pump(session, target, 30, lambda: len(session.intervals()) >= k):
            raise Failure(f"heaptap: not {k} interval records within 30s")
        pump(session, target, frac * INTERVAL_S)
        where = f"report{k}+{frac * INTERVAL_S * 1000:.0f}ms"
    elif moment == "pause":
        before, after = rng.uniform(0, 0.3), rng.uniform(0, 0.04)
        wait_attached(session, target)
        pump(session, target, before)
        os.kill(session.pid, signal.SIGUSR1)
        # The target's main thread, read until the signal: stopped for the scan or not yet.
        seen, end = False, time.monotonic() + after
        while time.monotonic() < end:
            f = stat_fields(f"/proc/{target.pid}/stat")
            seen = seen or bool(f and f[0] == "t")
            time.sleep(0.0005)
        where = f"pause+{after * 1000:.0f}ms ({'stopped' if seen else 'not seen stopped'})"
        target.pause_seen = seen
    else:
        delay = rng.uniform(0, 1.5)
        wait_attached(session, target)
        pump(session, target, delay)
        last = session.intervals()[-1:]
        state = ("tracing" if last[0]["live"]["tracing_now"] else "paused") if last else "-"
        where = f"window+{delay * 1000:.0f}ms (last report: {state})"
    if session.ended():
        raise Failure(f"heaptap ended before {sig.name} (status {session.ht.popen.poll()}): "
                      f"{session.stderr_text()}")
    os.kill(session.pid, sig)
    target.signalled()
    return where


def kernel_stacks(pid):
    out = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stack") as f:
                out.append(f"{tid}: " + " < ".join(l.split()[1] for l in f.read().splitlines()[:6]))
        except OSError:
            pass
    return "; ".join(out)


def hang_report(pid, records_at_signal, records_now):
    """What a hung heaptap is doing: its kernel stacks, signals, what its epoll sets watch,
    its own stack by gdb, and whether it still reported after the signal."""
    parts = [f"kernel stacks: {kernel_stacks(pid)}",
             f"records since the signal: {records_now - records_at_signal}"]
    try:
        with open(f"/proc/{pid}/status") as f:
            parts.append(" ".join(l.strip().replace(":\t", "=") for l in f
                                  if l.startswith(("SigPnd", "ShdPnd", "SigBlk", "SigIgn"))))
        fds = {}
        for fd in os.listdir(f"/proc/{pid}/fd"):
            fds[fd] = os.readlink(f"/proc/{pid}/fd/{fd}")
        for fd, what in sorted(fds.items(), key=lambda kv: int(kv[0])):
            if "eventpoll" in what or "signalfd" in what:
                with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                    watched = [l.split()[1] for l in f if l.startswith("tfd:")]
                parts.append(f"fd {fd} {what}" + (f" watches {watched}" if watched else ""))
    except OSError as e:
        parts.append(f"/proc: {e}")
    try:
        bt = subprocess.run(["gdb", "-p", str(pid), "-batch", "-ex", "thread apply all bt"],
                            capture_output=True, text=True, timeout=60).stdout
        parts.append("gdb: " + " < ".join(l.split(" in ", 1)[-1].split(" (")[0]
                                          for l in bt.splitlines() if l.startswith("#")))
    except (OSError, subprocess.TimeoutExpired) as e:
        parts.append(f"gdb: {e}")
    return "; ".join(parts)


def reap(session, target, sig, fails):
    """Reads heaptap to its end; judges how it ended. Returns its exit status."""
    wait = EXIT_WAIT_S
    at_signal = len(session.records)
    if not pump(session, target, wait, lambda: session.ended() and not session.fds()) \
            and not session.ended():
        fails.append(f"heaptap did not exit within {wait}s of {sig.name} "
                     f"({hang_report(session.pid, at_signal, len(session.records))})")
        session.read()   # what it said before it is ended (end() closes its pipes)
        session.ht.end()
    status = session.ht.popen.wait()
    if session.ht.popen.stdout and not session.ht.popen.stdout.closed:
        session.read()
    attached = session.attached() is not None
    finals = [r for r in session.records if r["type"] == "final"]
    if session.invalid:
        fails.append(f"heaptap printed {len(session.invalid)} invalid records: "
                     f"{session.invalid[0]}")
    # Killed in the middle of a write, a record is cut short: no fault of heaptap's. Ended by
    # SIGINT, it must finish what it writes.
    if sig == signal.SIGINT and session.ht._buf:
        fails.append(f"heaptap's output ends in the middle of a line: {session.ht._buf[:80]!r}")
    if sig == signal.SIGKILL:
        if status != -signal.SIGKILL:
            fails.append(f"heaptap exit after SIGKILL: expected killed by it, got status "
                         f"{status}: {session.stderr_text()}")
    elif status == -signal.SIGINT and not session.records and not session.stderr:
        pass  # ended by SIGINT before its first instruction could block it: nothing was done
    elif status != 0:
        fails.append(f"heaptap exit after SIGINT: expected status 0, got {status}: "
                     f"{session.stderr_text()}")
    elif attached and not finals:
        fails.append("heaptap printed its attached record, then no final record after SIGINT")
    return status


class Torture:
    def __init__(self, only=None, out=print):
        self.out = out
        self.names = list(only or TARGETS)
        self.targets = {}
        self.plans = {}  # target name -> {(path, offset): probe}
        self.attach_times = collections.defaultdict(list)  # mode -> seconds to attach
        self.orphans = Orphans()
        self.stats = collections.Counter()
        self.failures = []
        self.visible_uprobes = None
        self.cycle_times = []
        self.target_pids = set()  # every target's, this run: a uprobe opened for one is ours

    # -- targets --

    def target(self, name):
        t = self.targets.get(name)
        if t is None or not t.proc.alive():
            if t:
                t.proc.end()
            t = TARGETS[name]()
            t.stats = self.stats
            t.pause_seen = False
            t.note = ""
            try:
                t.start()
                self.target_pids.add(t.pid)
                if name not in self.plans:
                    self.learn_plan(t)
            except Failure:
                t.proc.end()
                raise
            self.targets[name] = t
        return t

    def learn_plan(self, t):
        """A clean attach (full mode, SIGINT) to the new target: its probes, and proof that
        bpftool's list shows heaptap's uprobes while they are in."""
        s = Session(t.pid, ["-i", "1h"])
        t.begin()
        try:
            wait_attached(s, t)
            listed = [e for e in perf_list() if e.get("pid") == s.pid]
            check_true(f"heaptap's uprobes on {t.name} listed while attached", listed)
            self.visible_uprobes = len(listed)
            self.note_plan(t.name, s.attached())
            os.kill(s.pid, signal.SIGINT)
            t.signalled()
            fails = []
            reap(s, t, signal.SIGINT, fails)
        finally:
            s.close()
        t.settle(fails)
        fails += self.check_processes(t, s)
        t.after(fails)
        if fails:
            raise Failure(f"learning the plan on {t.name}: " + "; ".join(fails))

    def note_plan(self, name, attached):
        plan = self.plans.setdefault(name, {})
        for p in attached["probes"]:
            plan[(p["path"], p["offset"])] = p

    # -- checks once heaptap is gone --

    def check_processes(self, t, s):
        fails = []
        reaped = time.monotonic()
        # Leftovers: whatever heaptap started must be gone (or end within the grace).
        deadline = time.monotonic() + GRACE_S
        left = self.orphans.living()
        while left and time.monotonic() < deadline:
            time.sleep(0.02)
            left = self.orphans.living()
        described = []
        for pid in left:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            except OSError:
                cmd = "?"
            described.append(f"{pid} ({cmd}, exe {exe_of(pid)})")
        # Uprobes: none owned by heaptap, its binary or what it left, and none on a file
        # opened through a target's /proc/PID/root (as heaptap opens them), gone or not.
        try:
            entries = perf_list()
            target_files = set()
            for pid in t.processes():
                target_files |= mapped_files(pid)
            mine = [e for e in entries
                    if e.get("pid") == s.pid or e.get("pid") in left
                    or (exe_of(e.get("pid")) == HEAPTAP_EXE
                        and descends_from(e.get("pid"), self.orphans.me))
                    or opened_for(e.get("filename"))[0] in self.target_pids
                    or e.get("target") in self.target_pids]
            foreign = [e for e in entries
                       if e not in mine and opened_for(e.get("filename"))[1] in target_files]
            self.stats["foreign uprobes seen"] += len(foreign)
            if mine:
                fails.append(f"uprobes left by heaptap: {len(mine)}, e.g. {mine[0]}")
        except Failure as e:
            fails.append(str(e))
        if left:
            fails.append(f"processes heaptap left running {GRACE_S}s after its end: "
                         + "; ".join(described))
            for pid in left:
                self.orphans.end(pid)
        # Threads stopped: none, once the grace is over.
        deadline = time.monotonic() + GRACE_S
        polls = 0
        while True:
            stopped = {pid: st for pid in t.processes() if (st := stopped_threads(pid))}
            polls += 1
            if not stopped or time.monotonic() >= deadline:
                break
            time.sleep(0.02)
        if stopped:
            fails.append("threads left stopped after heaptap's end: " + "; ".join(
                f"PID {pid}: {len(st)} threads, e.g. {st[:5]}" for pid, st in stopped.items()))
        elif polls > 1:
            self.stats["stopped threads let go within the grace"] += 1
        # Text: at every probe address, the file's bytes.
        plan = {"probes": list(self.plans.get(t.name, {}).values())}
        for pid in t.processes():
            if not process_exists(pid):
                if pid == t.pid:
                    fails.append(f"target {t.name} (PID {pid}) is gone")
                continue
            try:
                bad = lib.probed_text_intact(pid, plan)
            except (FileNotFoundError, ProcessLookupError):
                continue  # a held child cannot go; the target is judged above
            if bad:
                # Still there a while later, or only late? The failure says which.
                found, later = time.monotonic(), bad
                while later and time.monotonic() - found < LATER_S:
                    time.sleep(0.05)
                    later = lib.probed_text_intact(pid, plan)
                who = "target" if pid == t.pid else "child"
                fails.append(f"probed code differing from the file in the {who} PID {pid} "
                             f"{found - reaped:.2f}s after heaptap was reaped: {bad[:3]}"
                             f"{f' (and {len(bad) - 3} more)' if len(bad) > 3 else ''}; "
                             + (f"{len(later)} still differing {LATER_S}s later" if later else
                                f"gone {time.monotonic() - found:.2f}s later"))
        return fails

    # -- a cycle --

    def cycle(self, index, total, cseed):
        rng = random.Random(cseed)
        name = rng.choice(self.names)
        mode = rng.choice(sorted(MODES))
        sig = rng.choice(SIGNALS)
        moment = rng.choice(MOMENTS[mode])
        fails = []
        where = "-"
        try:
            t = self.target(name)
        except Failure as e:
            fails.append(f"starting {name}: {e}")
            t = None
        start = time.monotonic()  # the target's start and its plan are not the cycle's
        if t:
            t.note = ""
            t.pause_seen = False
            t.begin()
            s = Session(t.pid, MODES[mode])
            estimate = (statistics.median(self.attach_times[mode])
                        if self.attach_times[mode] else 0.6 if mode == "live" else 0.2)
            try:
                where = act(s, t, moment, sig, rng, estimate)
            except Failure as e:
                fails.append(str(e))
                if not s.ended():
                    os.kill(s.pid, sig)
                    t.signalled()
            reap(s, t, sig, fails)
            s.close()
            attached = s.attached()
            if attached:
                self.note_plan(name, attached)
                self.attach_times[mode].append(s.attached_after)
                self.attach_times[mode] = self.attach_times[mode][-20:]
            if moment == "attach":
                where += " (after its attached record)" if attached else " (before attaching)"
                self.stats["attach: killed before the attached record"] += not attached
            if moment == "pause":
                self.stats["pause: target seen stopped"] += t.pause_seen
            with_checks(fails, t.settle, fails)
            fails += self.check_processes(t, s)
            with_checks(fails, t.after, fails)
            if fails and name in self.targets:
                # A harmed target is started afresh, so that one fault is counted once.
                self.targets.pop(name).proc.end()
        took = time.monotonic() - start
        self.cycle_times.append(took)
        outcome = "ok" if not fails else "FAIL: " + "; ".join(fails)
        line = (f"cycle {index:4d}/{total}  seed {cseed:10d}  {name:9s}  {mode:4s}  "
                f"{sig.name:7s}  {where:44s}  {outcome}  {took:.1f}s"
                f"{'  ' + t.note if t and t.note and not fails else ''}")
        self.out(line)
        for key in (("target", name), ("mode", mode), ("signal", sig.name), ("moment", moment),
                    ("mode x signal", (mode, sig.name))):
            self.stats[key] += 1
        if fails:
            self.failures.append(line)

    def summary(self, done, seconds, seed):
        st = self.stats
        out = self.out
        out(f"{done} cycles in {seconds:.0f} s (seed {seed}): {len(self.failures)} failed")
        if self.cycle_times:
            out(f"a cycle took {statistics.median(self.cycle_times):.1f} s (median), "
                f"{max(self.cycle_times):.1f} s at most")
        out(f"{'':6s} {'SIGINT':>7s} {'SIGKILL':>7s}")
        for mode in sorted(MODES):
            out(f"{mode:6s} {st[('mode x signal', (mode, 'SIGINT'))]:7d} "
                f"{st[('mode x signal', (mode, 'SIGKILL'))]:7d}")
        out("targets: " + ", ".join(f"{n} {st[('target', n)]}" for n in self.names))
        out(f"moments: attach {st[('moment', 'attach')]} "
            f"({st['attach: killed before the attached record']} before the attached record), "
            f"report {st[('moment', 'report')]}, pause {st[('moment', 'pause')]} "
            f"({st['pause: target seen stopped']} with the target seen stopped), "
            f"window {st[('moment', 'window')]}")
        out(f"storm: {st['storm runs checked']} runs checked while heaptap ran or came out")
        out(f"forker: {st['forker children checked']} children checked after heaptap "
            f"({st['forker children checked, forked while heaptap ran']} forked while it ran), "
            f"{st['forker children reaped']} reaped")
        out(f"threads let go only after heaptap's end (within the grace): "
            f"{st['stopped threads let go within the grace']} cycles")
        out(f"uprobes: {self.visible_uprobes} of heaptap's links listed while attached (perf "
            f"events by bpftool, uprobe_multi links from /proc); "
            f"other processes' on the targets' files seen {st['foreign uprobes seen']} times "
            f"(not judged)")
        for line in self.failures:
            out("FAILED " + line)


def main(argv):
    ap = argparse.ArgumentParser(description="heaptap's torture run (see the docstring)")
    ap.add_argument("cycles", nargs="?", type=int, default=200)
    ap.add_argument("--seed", type=int, help="the run's seed (default: random, printed)")
    ap.add_argument("--cycle-seed", type=int, help="every cycle with this cycle's choices")
    ap.add_argument("--target", action="append", choices=sorted(TARGETS),
                    help="only this target (repeatable)")
    ap.add_argument("--max-time", type=float,
                    help="start no cycle after SECONDS (the summary says how many ran)")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("the torture attaches BPF programs: run it as root")
        return 1
    if not os.access(lib.HEAPTAP, os.X_OK):
        print(f"{lib.HEAPTAP} is missing: run make first")
        return 1
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    print(f"torture: {args.cycles} cycles, seed {seed}"
          f"{f', cycle seed {args.cycle_seed}' if args.cycle_seed is not None else ''}",
          flush=True)
    master = random.Random(seed)
    torture = Torture(args.target, out=lambda s: print(s, flush=True))
    start = time.monotonic()
    done = 0
    try:
        for i in range(1, args.cycles + 1):
            if args.max_time and time.monotonic() - start > args.max_time:
                print(f"--max-time {args.max_time:.0f}s reached: {done} of {args.cycles} "
                      f"cycles run", flush=True)
                break
            cseed = master.getrandbits(32) if args.cycle_seed is None else args.cycle_seed
            torture.cycle(i, args.cycles, cseed)
            done += 1
    except Failure as e:
        torture.failures.append(f"run stopped: {e}")
    except Exception as e:   # noqa: BLE001 -- said in the summary, not lost after it
        torture.failures.append(f"run stopped by {type(e).__name__}: {e} "
                                f"({traceback.format_exc(limit=3)!r})")
    except KeyboardInterrupt:
        torture.failures.append("run interrupted")
    finally:
        torture.summary(done, time.monotonic() - start, seed)
        lib.end_started()
        for pid in torture.orphans.living():
            torture.orphans.end(pid)
    return 1 if torture.failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
