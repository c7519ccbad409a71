#!/usr/bin/env python3
"""Runs heaptap's tests: python3 tests/run.py [-j N] [--list] [WORD...]

A WORD that is a tier (unit, core, services, soak: lib.TIERS) selects that tier and those
before it; any other WORD selects the tests whose names contain it, whatever their tier. No
WORD: every test. Tests run N at a time (default: the CPUs plus one), each in a process of its
own, the longest first (by the durations of earlier runs, kept in build/test-times.json);
a test that mostly waits runs beside those N, WAITING at most (-w); a test that needs to be
alone runs with nothing beside it, after the others; of the tests whose launched command's
threads spin for room in heaptap's ring, one runs at a time. Each prints one
line when it ends, with what it printed above it. Root is needed for every tier but unit.

With HEAPTAP_SANITIZED=build-san/heaptap (made by `make SANITIZE=1`; tests/test.sh sets it),
the selected tests declared sanitized run once more against that binary, and fail on any
report of AddressSanitizer, LeakSanitizer or UndefinedBehaviorSanitizer. With
HEAPTAP_SANITIZED_BUILD too, a shell command that makes that binary (tests/test.sh's), the
runner runs it first, in one of the N places, while the other tests start: the sanitized
runs start once it has succeeded, and fail unrun if it fails.

Ends with the tests that did not pass, each with the first line of what it said, and the line
"N passed, N failed"; exits 0 only when nothing failed.
"""
import argparse
import glob
import importlib
import json
import os
import select
import signal
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

TIMES = os.path.join(lib.BUILD, "test-times.json")
# The CPU seconds each test took (user and system time of its process and of everything it
# started and waited for), as test-times.json keeps the wall seconds: a file of its own, so
# that an older runner reads and writes that one as it did.
CPU_TIMES = os.path.join(lib.BUILD, "test-cpu.json")
# A test not timed before (a fresh clone) is taken for one of this many seconds by its tier:
# a later tier's tests are the longer, and start first.
UNTIMED_S = {"unit": 5.0, "core": 10.0, "services": 30.0, "soak": 60.0}
# A test still running after this long is interrupted (and fails): no run hangs for good.
LIMIT_S = 900


def sanitizer_reports(directory):
    """The first line that says what each report in directory found, and its file."""
    found = []
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        with open(path, errors="replace") as f:
            text = f.read()
        lines = [line for line in text.splitlines()
                 if "SUMMARY:" in line or "runtime error:" in line or "ERROR:" in line]
        found.append(f"{lines[0].strip() if lines else text[:200]} (report: {path})")
    return found


class Job:
    """One run of a test: against the binary under test, or the sanitized one."""

    def __init__(self, test, sanitized=None, reports=None):
        self.test = test
        self.sanitized = sanitized
        self.reports = reports
        self.label = test.__name__ + (" (sanitized)" if sanitized else "")
        self.pid = None
        self.pipe = None
        self.output = None
        self.start = None
        self.cpu = None
        self.verdict = None
        self.interrupted = False


def sanitized_build(command):
    """A job's test that runs command, the sanitized build: Failure if it fails."""
    def build_sanitized():
        import subprocess
        status = subprocess.run(command, shell=True, stdin=subprocess.DEVNULL).returncode
        if status:
            raise lib.Failure(f"the sanitized build failed: {command}: exit status {status}")
    build_sanitized.tier, build_sanitized.needs, build_sanitized.sanitized = \
        "unit", frozenset(), False
    return build_sanitized


def verdict_of(job):
    """Runs the job's test in this process: its verdict."""
    if job.sanitized:
        lib.use_heaptap(job.sanitized)
    if job.reports:
        # LeakSanitizer stays on: heaptap frees what it holds before it exits, libdw and
        # libelf included (dwfl_end, elf_end), so a leak report is heaptap's own.
        os.environ["ASAN_OPTIONS"] = f"log_path={job.reports}/asan:detect_leaks=1"
        os.environ["UBSAN_OPTIONS"] = f"log_path={job.reports}/ubsan:print_stacktrace=1"
    try:
        job.test()
        verdict = "ok"
    except lib.Failure as e:
        verdict = f"FAIL: {e}"
    except KeyboardInterrupt:
        verdict = f"FAIL: interrupted (still running after {LIMIT_S} s, or Ctrl-C)"
    except Exception:
        verdict = "ERROR:\n" + traceback.format_exc()
    finally:
        lib.end_started()
    if job.reports:
        found = sanitizer_reports(job.reports)
        if found:
            verdict = ("FAIL: " if verdict == "ok" else verdict + "; ") + "sanitizer: " + \
                "; ".join(found)
    return verdict


def start(job):
    """Forks a process that runs the job, its output into a file of its own."""
    if job.reports:
        import shutil
        shutil.rmtree(job.reports, ignore_errors=True)
        os.makedirs(job.reports)
    job.output = tempfile.TemporaryFile()
    r, w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        # A process group of its own: interrupting the test reaches it, not its siblings.
        os.setpgid(0, 0)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.dup2(job.output.fileno(), 1)
        os.dup2(job.output.fileno(), 2)
        verdict = verdict_of(job)
        sys.stdout.flush()
        sys.stderr.flush()
        os.write(w, verdict.encode())
        os._exit(0)
    os.close(w)
    job.pid, job.pipe, job.start = pid, r, time.monotonic()


def finish(job):
    """Reaps the job's process: its verdict, and what it printed. Its CPU time goes into
    job.cpu: the rusage of a reaped child counts the children it reaped in turn, so every
    program the test started and waited for (targets, heaptap, servers, QEMU) is in it."""
    chunks = []
    while True:
        chunk = os.read(job.pipe, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(job.pipe)
    _, status, usage = os.wait4(job.pid, 0)
    job.cpu = usage.ru_utime + usage.ru_stime
    verdict = b"".join(chunks).decode(errors="replace")
    if not verdict:
        verdict = f"ERROR: the test's process ended without a verdict (wait status {status})"
    job.output.seek(0)
    printed = job.output.read().decode(errors="replace")
    job.output.close()
    return verdict, printed


def load_times(path=TIMES):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def save_times(times, path=TIMES):
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path + ".new", "w") as f:
            json.dump(times, f, indent=0, sort_keys=True)
        os.replace(path + ".new", path)
    except OSError:
        pass


def select_tests(words):
    """The tests the words select, in their modules' order."""
    tiers = [w for w in words if w in lib.TIERS]
    names = [w for w in words if w not in lib.TIERS]
    upto = max((lib.TIERS.index(t) for t in tiers), default=-1)
    chosen = []
    for t in lib.TESTS:
        by_tier = lib.TIERS.index(t.tier) <= upto
        by_name = any(n in t.__name__ for n in names)
        if not words or by_tier or by_name:
            chosen.append(t)
    return chosen


def schedule(jobs, times):
    """The order to start jobs in: the longest first, whatever their tier, so that a long
    test of the last tier does not start last and end alone; those alone after them all."""
    def key(job):
        return ("alone" in job.test.needs, -times.get(job.label, UNTIMED_S[job.test.tier]))
    return sorted(jobs, key=key)


def run(jobs, parallel, times, cpu, build=None, waiting=1):
    queue = ([build] if build else []) + list(jobs)
    running = {}
    try:
        return serve(queue, running, parallel, times, cpu, build, waiting)
    except KeyboardInterrupt:
        # Each test runs in a process group of its own: Ctrl-C reaches only the runner, which
        # hands it on, and the tests end their processes before the runner ends.
        for job in running.values():
            os.killpg(job.pid, signal.SIGINT)
        for job in running.values():
            finish(job)
        raise


def waits(job):
    return "waits" in job.test.needs


def next_job(queue, running, build, room):
    """The next job of the queue to start now, taken from it; None when none may start yet.
    room(job): whether there is a place for it. The sanitized runs wait for the build job, if
    any, to have succeeded."""
    for i, job in enumerate(queue):
        if (job.sanitized and build and build.verdict != "ok") or not room(job):
            continue
        alone = "alone" in job.test.needs
        if running and (alone or any("alone" in j.test.needs for j in running.values())):
            return None
        if "spins" in job.test.needs and any("spins" in j.test.needs for j in running.values()):
            continue
        return queue.pop(i)
    return None


def serve(queue, running, parallel, times, cpu, build=None, waiting=1):
    """Starts the queue's jobs as room frees up, at most parallel of them and waiting of those
    that mostly wait beside them; (passed, failed) once all have ended. The wall and CPU
    seconds of each job that ended go into times and cpu, by its label. build: the job that
    makes the sanitized binary, counted only if it fails."""
    def room(job):
        beside = waiting and waits(job)
        same = sum(bool(waiting and waits(j)) == beside for j in running.values())
        return same < (waiting if beside else parallel)

    passed = failed = 0
    while queue or running:
        while True:
            job = next_job(queue, running, build, room)
            if job is None:
                break
            start(job)
            running[job.pipe] = job
        ready, _, _ = select.select(list(running), [], [], 5)
        now = time.monotonic()
        for job in running.values():
            if not job.interrupted and now - job.start > LIMIT_S:
                job.interrupted = True
                os.killpg(job.pid, signal.SIGINT)
        for fd in ready:
            job = running.pop(fd)
            verdict, printed = finish(job)
            took = time.monotonic() - job.start
            times[job.label] = round(took, 1)
            cpu[job.label] = round(job.cpu, 1)
            if printed.strip():
                print(printed.rstrip())
            print(f"{job.label:48s} {took:6.1f}s {job.cpu:6.1f}s CPU  {verdict}", flush=True)
            job.verdict = verdict
            if verdict == "ok":
                passed += job is not build
            else:
                failed += 1
            if job is build and verdict != "ok":
                for unrun in [j for j in queue if j.sanitized]:
                    queue.remove(unrun)
                    print(f"{unrun.label:48s}   not run: the sanitized build failed")
                    unrun.verdict = "not run: the sanitized build failed"
                    failed += 1
    return passed, failed


def print_cpu(cpu, most=10):
    """The CPU seconds of the jobs that ran, in all, and the jobs that took the most."""
    if len(cpu) < 2:
        return
    print(f"CPU: {sum(cpu.values()):.0f} s in all; the most:")
    for label, secs in sorted(cpu.items(), key=lambda item: -item[1])[:most]:
        print(f"  {secs:7.1f} s  {label}")


def print_failed(jobs, width=300):
    """The jobs that did not pass, each with its verdict's first line, again at the end: a
    log read from its tail (CI's) shows them beside the count."""
    failed = [j for j in jobs if j.verdict not in (None, "ok")]
    if failed:
        print("Not passed:")
    for job in failed:
        first = job.verdict.strip().splitlines()[0] if job.verdict.strip() else job.verdict
        if job.verdict.startswith("ERROR:"):
            first = "ERROR: " + job.verdict.strip().splitlines()[-1]
        print(f"  {job.label}: {first[:width]}")


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-j", type=int, default=(os.cpu_count() or 1) + 1, metavar="N",
                        help="tests run at a time (default: the CPUs plus one)")
    parser.add_argument("-w", type=int, default=1, metavar="WAITING",
                        help="tests that mostly wait run beside those, at most WAITING "
                        "(default: 1)")
    parser.add_argument("--list", action="store_true",
                        help="list the tests selected, with their tier and needs, and exit")
    parser.add_argument("words", nargs="*", help=f"tiers ({', '.join(lib.TIERS)}) or names")
    args = parser.parse_args(argv)
    # Started in the background by a shell, the runner would ignore SIGINT, and so would
    # every program it starts: tests stop servers' clients (pgbench) with SIGINT.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for path in sorted(glob.glob(os.path.join(os.path.dirname(__file__), "test_*.py"))):
        importlib.import_module(os.path.basename(path)[:-3])
    selected = select_tests(args.words)
    if args.list:
        for t in selected:
            extra = ", ".join(sorted(t.needs) + (["sanitized"] if t.sanitized else []))
            print(f"{t.tier:9s} {t.__name__}" + (f"  ({extra})" if extra else ""))
        return 0
    if os.geteuid() != 0 and any(t.tier != "unit" for t in selected):
        print("heaptap's tests attach BPF programs: run them as root (sudo make test); "
              "without root, only the unit tier runs (python3 tests/run.py unit)")
        return 1
    sanitized = os.environ.get("HEAPTAP_SANITIZED")
    command = os.environ.get("HEAPTAP_SANITIZED_BUILD") if sanitized else None
    for binary in [lib.HEAPTAP] + ([sanitized] if sanitized and not command else []):
        if not os.access(binary, os.X_OK):
            print(f"{binary} is missing: run make first (make SANITIZE=1 for build-san/)")
            return 1
    jobs = [Job(t) for t in selected]
    build = Job(sanitized_build(command)) if command else None
    if sanitized:
        reports = os.path.join(os.path.dirname(os.path.abspath(sanitized)), "reports")
        jobs += [Job(t, os.path.abspath(sanitized), os.path.join(reports, t.__name__))
                 for t in selected if t.sanitized]
    times, cpu = load_times(), {}
    began = time.monotonic()
    try:
        passed, failed = run(schedule(jobs, times), max(1, args.j), times, cpu, build,
                             max(0, args.w))
    finally:
        save_times(times)
        save_times(dict(load_times(CPU_TIMES), **cpu), CPU_TIMES)
    print_cpu(cpu)
    print_failed(jobs + ([build] if build else []))
    print(f"{passed} passed, {failed} failed ({time.monotonic() - began:.0f} s, "
          f"{max(1, args.j)} at a time, {max(0, args.w)} waiting beside)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
