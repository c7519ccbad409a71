"""What heaptap's tests share: starting targets and heaptap, handshakes, named checks.

Every process a test starts is registered and ended by its PID when the test ends, pass or
fail. Reads have timeouts, so a broken handshake fails a test instead of hanging the run.
"""
import json
import os
import re
import select
import signal
import subprocess
import sys
import time

import jsonschema
from jsonschema.exceptions import best_match

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, "build")
# The binary under test: build/heaptap, or another build of it (HEAPTAP=build-san/heaptap,
# the sanitized one; an older heaptap, to see a regression test fail).
HEAPTAP = os.path.abspath(os.environ.get("HEAPTAP") or os.path.join(BUILD, "heaptap"))
TARGETS = os.path.join(BUILD, "tests")
# What tests fetch or make from Debian's archive (kernels, a container's base), kept across
# clones of the tree on this machine: root's alone, as the tests run as root.
CACHE = os.environ.get("HEAPTAP_TEST_CACHE") or "/var/cache/heaptap-tests"
TIMEOUT = 60.0
SCHEMA = os.path.join(ROOT, "doc", "report.schema.json")
# The host's agent's records (--all): a schema of their own.
HOST_SCHEMA = os.path.join(ROOT, "doc", "host.schema.json")
HOST_TYPES = {"host": "host", "tier": "tier", "host_alert": "host_alert"}


class Failure(Exception):
    pass


def _validators(path, types):
    """The schema's validator, and one per record type for precise messages: the same
    schema with the type's definition in place of the root's oneOf of all of them."""
    with open(path) as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    root = {k: v for k, v in schema.items() if k != "oneOf"}
    by_type = {t: jsonschema.Draft202012Validator(dict(root, **{"$ref": "#/$defs/" + d}))
               for t, d in types.items()}
    return jsonschema.Draft202012Validator(schema), by_type


_SCHEMA_VALIDATOR, _TYPE_VALIDATORS = _validators(
    SCHEMA, {"attached": "attached", "interval": "report", "final": "report",
             "alert": "alert_record"})
_HOST_VALIDATOR, _HOST_TYPE_VALIDATORS = _validators(HOST_SCHEMA, HOST_TYPES)


def _json_path(path):
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def _short(value, limit=200):
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def validate_record(rec):
    """Raises Failure unless rec is valid under doc/report.schema.json (doc/host.schema.json
    for the host's agent's records): the record's type, the JSON path of each offending
    value, what is wrong with it, and the schema's rule."""
    rtype = rec.get("type") if isinstance(rec, dict) else None
    host = isinstance(rtype, str) and rtype in HOST_TYPES
    validator, by_type = ((_HOST_VALIDATOR, _HOST_TYPE_VALIDATORS) if host
                          else (_SCHEMA_VALIDATOR, _TYPE_VALIDATORS))
    if not validator.is_valid(rec):
        v = by_type.get(rtype) if isinstance(rtype, str) else None
        errors = list(v.iter_errors(rec)) if v else []
        if not errors:
            errors = list(validator.iter_errors(rec))
        # In a oneOf or anyOf, the branch that came closest says what is wrong. Properties
        # left unevaluated because something failed are mostly a consequence: they come
        # last, the deepest (the likeliest cause) first.
        def order(e):
            unevaluated = e.validator == "unevaluatedProperties"
            return (unevaluated, -len(e.absolute_path) if unevaluated else 0,
                    [str(p) for p in e.absolute_path])

        leaves = sorted((best_match([e]) for e in errors), key=order)
        said = [f"at {_json_path(e.absolute_path)} = {_short(e.instance, 120)}: "
                f"{e.message if len(e.message) <= 240 else e.message[:240] + '...'} "
                f"(schema {'/'.join(str(p) for p in e.absolute_schema_path)})"
                for e in leaves[:5]]
        more = f"; and {len(leaves) - 5} more" if len(leaves) > 5 else ""
        raise Failure(f"heaptap's {rtype!r} record does not match doc/"
                      f"{'host' if host else 'report'}.schema.json: "
                      + "; ".join(said) + more)
    return rec


def take_against(argv):
    """A bench's --against PATH, taken out of argv: the other build's absolute path, or None.
    Its records are no longer checked against the schema: another build's may have fields
    this one's has not."""
    global validate_record
    if "--against" not in argv:
        return None
    at = argv.index("--against")
    path = os.path.abspath(argv[at + 1])
    del argv[at:at + 2]
    validate_record = lambda rec: rec  # noqa: E731
    return path


def _not_json_number(name):
    raise ValueError(f"{name} is not a JSON number")


def parse_record(text):
    """One heaptap JSON record (a --json line, or a --json -o file), parsed and validated
    against doc/report.schema.json; Failure when it is not JSON or not valid."""
    try:
        rec = json.loads(text, parse_constant=_not_json_number)
    except ValueError as e:
        raise Failure(f"heaptap printed a record that is not JSON ({e}): {text!r}")
    return validate_record(rec)


def check(name, actual, expected):
    """Named equality check: a failure says which fact was wrong, and how."""
    if actual != expected:
        raise Failure(f"{name}: expected {expected!r}, got {actual!r}")


def check_true(name, cond, detail=""):
    if not cond:
        raise Failure(f"{name}: {detail}" if detail else name)


_started = []


def started():
    return _started


def end_started():
    """Ends, by PID, every process started through this module so far, then removes the
    folders scratch_dir made."""
    import shutil
    for p in _started:
        p.end()
    _started.clear()
    for folder in _scratch:
        shutil.rmtree(folder, ignore_errors=True)
    _scratch.clear()


_scratch = []


def scratch_dir(prefix):
    """A new folder under the system's temporary folder, removed when the test ends
    (end_started), whichever way it ends."""
    import tempfile
    folder = tempfile.mkdtemp(prefix=prefix)
    _scratch.append(folder)
    return folder


# The signals tests send heaptap and targets. A child keeps what its parent ignores: under a
# shell that started the tests in the background, SIGINT and SIGQUIT would be ignored, and a
# SIGINT reaching heaptap before its first instructions block it would be lost (it then runs
# on) where, from a terminal, it ends heaptap. Children start with them as a terminal's are.
SENT_SIGNALS = (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1)


def as_from_a_terminal(preexec_fn=None):
    """A preexec_fn: the signals tests send at their default action, then preexec_fn."""
    def prepare():
        for sig in SENT_SIGNALS:
            signal.signal(sig, signal.SIG_DFL)
        if preexec_fn:
            preexec_fn()
    return prepare


class Proc:
    """A child process with line-based, time-bounded reads of its stdout."""

    def __init__(self, argv, env=None, stdin=subprocess.PIPE, stderr=subprocess.PIPE,
                 preexec_fn=None):
        self.argv = argv
        self.popen = subprocess.Popen(argv, stdin=stdin, stdout=subprocess.PIPE,
                                      stderr=stderr, env=env,
                                      preexec_fn=as_from_a_terminal(preexec_fn))
        self.pid = self.popen.pid
        self._buf = b""
        self._err = b""
        self._eof = False
        _started.append(self)

    def read_line(self, timeout=TIMEOUT):
        """The next stdout line, or None at end of output."""
        deadline = time.monotonic() + timeout
        fd = self.popen.stdout.fileno()
        while b"\n" not in self._buf:
            if self._eof:
                break
            left = deadline - time.monotonic()
            if left <= 0:
                raise Failure(f"{os.path.basename(self.argv[0])}: no output line within "
                              f"{timeout:.0f}s")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    self._eof = True
                self._buf += chunk
        if b"\n" in self._buf:
            line, self._buf = self._buf.split(b"\n", 1)
            return line.decode()
        if self._buf:
            line, self._buf = self._buf, b""
            return line.decode()
        return None

    def send(self, line):
        self.popen.stdin.write((line + "\n").encode())
        self.popen.stdin.flush()

    def wait(self, timeout=TIMEOUT):
        try:
            return self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise Failure(f"{os.path.basename(self.argv[0])} did not exit within {timeout:.0f}s")

    def stderr_text(self):
        """What it wrote to stderr, to its end (read so far, then the rest)."""
        rest = self.popen.stderr.read() if self.popen.stderr else b""
        return (self._err + rest).decode(errors="replace")

    def stderr_until(self, text, timeout=TIMEOUT):
        """Waits until its stderr holds text; Failure when it ends or the time is up first."""
        deadline = time.monotonic() + timeout
        fd = self.popen.stderr.fileno()
        while text.encode() not in self._err:
            left = deadline - time.monotonic()
            ready = select.select([fd], [], [], max(0, left))[0] if left > 0 else []
            chunk = os.read(fd, 65536) if ready else b""
            if not chunk:
                raise Failure(f"{os.path.basename(self.argv[0])}: {text!r} not on stderr "
                              f"{'by its end' if ready else f'within {timeout:.0f}s'}: "
                              f"{self._err.decode(errors='replace')[-400:]!r}")
            self._err += chunk

    def end(self):
        """Ends the process by its PID (SIGKILL) if it still runs, and reaps it."""
        if self.popen.poll() is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.popen.wait()
        for f in (self.popen.stdin, self.popen.stdout, self.popen.stderr):
            if f:
                f.close()


class Target(Proc):
    """A test target speaking tests/targets/proto.h: "ready PID", then commands."""

    def __init__(self, name, env=None, wrapper=(), args=(), preexec_fn=None):
        path = name if os.path.isabs(name) else os.path.join(TARGETS, name)
        super().__init__(list(wrapper) + [path] + list(args), env=env, preexec_fn=preexec_fn)
        line = self.read_line()
        if not line or not line.startswith("ready "):
            raise Failure(f"{name}: expected 'ready PID', got {line!r}: {self.stderr_text()}")
        # Through a wrapper (unshare, setpriv), the target's PID is not the child's.
        self.target_pid = int(line.split()[1])

    def do(self, command, timeout=TIMEOUT):
        """Runs a command; returns the rest of its "done" line, after the command."""
        self.send(command)
        while True:
            line = self.read_line(timeout)
            if line is None:
                raise Failure(f"target exited during {command!r}: {self.death()}")
            if line.startswith("done " + command):
                return line[len("done " + command):].strip()

    def alive(self):
        return self.popen.poll() is None

    def death(self):
        """How the target ended, and the end of what it wrote to stderr."""
        try:
            status = self.popen.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "closed its output, still running"
        how = (f"killed by {signal.Signals(-status).name}" if status < 0
               else f"exit status {status}")
        return f"{how}; stderr: {self.stderr_text()[-600:]!r}"

    def end(self):
        if self.alive() and self.target_pid != self.pid:
            try:
                os.kill(self.target_pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        super().end()


class Heaptap(Proc):
    """heaptap with --json; records are parsed as they are read."""

    def __init__(self, args, env=None, stdin=subprocess.DEVNULL, preexec_fn=None):
        super().__init__([HEAPTAP, "--json"] + list(args), env=env, stdin=stdin,
                         preexec_fn=preexec_fn)
        self.records = []

    def record(self, timeout=TIMEOUT):
        line = self.read_line(timeout)
        if line is None:
            return None
        rec = parse_record(line)
        self.records.append(rec)
        return rec

    def attached(self):
        """Waits until the probes are in: the first record."""
        rec = self.record()
        if rec is None:
            raise Failure(f"heaptap exited before attaching "
                          f"(status {self.popen.wait()}): {self.stderr_text()}")
        check("first record type", rec["type"], "attached")
        return rec

    def finish(self, sig=signal.SIGINT):
        """Signals heaptap, reads to the end; returns (final record or None, exit status)."""
        if sig is not None:
            os.kill(self.pid, sig)
        while self.record() is not None:
            pass
        status = self.wait()
        finals = [r for r in self.records if r["type"] == "final"]
        return (finals[-1] if finals else None), status


def private_program(name, directory=None):
    """A copy of the target name, under a name no other test's processes have (--comm and
    --exe match every process of a name or file, and tests run side by side): (path, its
    comm), in a new folder under directory (the system's temporary folder by default)."""
    import shutil
    import tempfile
    folder = tempfile.mkdtemp(prefix="heaptap-own-", dir=directory)
    comm = f"{name[:8]}{os.getpid() % 10**7:07d}"
    path = os.path.join(folder, comm)
    shutil.copy(os.path.join(TARGETS, name), path)
    return path, comm


def copy_tree(dest, tracked=False, built=False):
    """The source tree into dest: its tracked files (and new ones not ignored) when tracked
    and git can list them, else all but what builds and runs make. built: the tree's build
    folder too, its times kept, so that make in dest rebuilds only what dest changes (the
    package, the test times and the sanitized build stay out)."""
    import shutil
    if tracked and os.path.exists(os.path.join(ROOT, ".git")):
        names = subprocess.run(["git", "-C", ROOT, "ls-files", "-z", "--cached", "--others",
                                "--exclude-standard"], capture_output=True, check=True,
                               timeout=60).stdout.decode().split("\0")
        for name in filter(None, names):
            src = os.path.join(ROOT, name)
            if os.path.isfile(src):
                os.makedirs(os.path.join(dest, os.path.dirname(name)), exist_ok=True)
                shutil.copy2(src, os.path.join(dest, name))
    else:
        shutil.copytree(ROOT, dest, ignore=shutil.ignore_patterns(
            "build", "build-san", ".git", "__pycache__"))
    if built and os.path.isdir(BUILD):
        shutil.copytree(BUILD, os.path.join(dest, "build"), symlinks=True,
                        ignore=shutil.ignore_patterns("package", "test-times.json", "*.lock"))


def run_heaptap(args, wrapper=(), timeout=TIMEOUT):
    """heaptap (run through wrapper, such as setpriv) to completion: (status, stdout, stderr)."""
    p = subprocess.run(list(wrapper) + [HEAPTAP] + list(args), capture_output=True,
                       timeout=timeout, stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def stop_and_wait(pid, timeout=10):
    """SIGSTOP to pid, then back once every thread of it is stopped (a thread that was
    running, or waiting for a CPU, may still run its code until it reaches the kernel)."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + timeout
    while True:
        states = []
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            except OSError:
                pass
        if states and all(s in "tT" for s in states):
            return
        if time.monotonic() > deadline:
            raise Failure(f"PID {pid} not stopped {timeout} s after SIGSTOP: {states}")
        time.sleep(0.005)


def record_time(rec):
    """A record's "time" (ISO 8601, UTC), in seconds since the epoch, as time.time()'s."""
    from datetime import datetime, timezone
    return datetime.strptime(rec["time"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=timezone.utc).timestamp()


def size_row(final, size):
    """The size-table row whose range holds size, or None."""
    for row in final["sizes"]:
        if row["min"] <= size <= row["max"]:
            return row
    return None


def functions(site):
    return [f["function"] for f in site["stack"]] if site["stack"] else []


def probed_text_intact(pid, attached):
    """For every probed function: the target's code bytes equal the file's.

    Returns a list of (function, file bytes, memory bytes) that differ.
    """
    maps = []
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6:
                start, end = (int(x, 16) for x in parts[0].split("-"))
                maps.append((parts[5], start, end, int(parts[2], 16)))
    bad = []
    with open(f"/proc/{pid}/mem", "rb") as mem:
        for probe in attached["probes"]:
            off = probe["offset"]
            with open(f"/proc/{pid}/root{probe['path']}", "rb") as elf:
                elf.seek(off)
                want = elf.read(16)
            for path, start, end, moff in maps:
                if path == probe["path"] and moff <= off < moff + (end - start):
                    mem.seek(start + off - moff)
                    got = mem.read(16)
                    if got != want:
                        bad.append((probe["function"], want.hex(), got.hex()))
                    break
            else:
                bad.append((probe["function"], want.hex(), "not mapped"))
    return bad


def multi_links(holders=None):
    """uprobe_multi links the processes holders (every process when None) hold open, from
    their /proc/PID/fdinfo (bpftool lists perf events, not these): as bpftool's perf list
    entries are, with pid the holder's, and target the process probed."""
    found = []
    for pid in holders if holders is not None else [int(p) for p in os.listdir("/proc")
                                                    if p.isdigit()]:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") != "anon_inode:bpf_link":
                    continue
                with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                    info = f.read().splitlines()
            except OSError:
                continue
            fields = dict(line.split(":\t", 1) for line in info if ":\t" in line)
            if fields.get("link_type") not in ("uprobe_multi", "uretprobe_multi"):
                continue
            offsets = [line.split()[1] for line in info if line.split()[1:2]
                       and line.split()[1].startswith("0x")]
            found.append({"pid": pid, "fd": int(fd), "fd_type": fields["link_type"],
                          "target": int(fields.get("pid", "0")), "filename": fields.get("path"),
                          "offsets": [int(o, 16) for o in offsets]})
    return found


def uprobe_events():
    """The uprobe events heaptaps made in the tracing filesystem (for probes a process's
    children inherit, --follow), by the heaptap whose group holds them: with pid its PID.
    heaptap takes its group out when it ends, and a killed one's is the next one's to."""
    found = []
    try:
        with open("/sys/kernel/tracing/uprobe_events") as f:
            lines = f.read().splitlines()
    except OSError:
        return found
    for line in lines:
        m = re.match(r"([pr]):heaptap_(\d+)/(\S+) (\S+):(0x[0-9a-f]+)", line)
        if m:
            found.append({"pid": int(m.group(2)), "fd_type": "uprobe_event",
                          "tracepoint": m.group(3), "filename": m.group(4),
                          "offset": int(m.group(5), 16)})
    return found


def perf_uprobes():
    """Every uprobe bpftool lists (perf-event links), every uprobe_multi link, and every
    uprobe event of heaptap's in the tracing filesystem."""
    out = subprocess.run(["bpftool", "-j", "perf", "list"], capture_output=True, text=True)
    if out.returncode != 0:
        raise Failure(f"bpftool perf list failed: {out.stderr.strip()}")
    return [e for e in json.loads(out.stdout or "[]")
            if e.get("fd_type") in ("uprobe", "uretprobe")] + multi_links() + uprobe_events()


def uprobes_of(pid):
    """Uprobes still attached by process pid: perf-event links bpftool lists, and
    uprobe_multi links."""
    return [e for e in perf_uprobes() if e.get("pid") == pid]


def use_heaptap(path):
    """Makes path the binary under test from now on: here, and in every test module that
    imported HEAPTAP by name."""
    global HEAPTAP
    old, HEAPTAP = HEAPTAP, os.path.abspath(path)
    for module in list(sys.modules.values()):
        if getattr(module, "HEAPTAP", None) == old:
            module.HEAPTAP = HEAPTAP


# How much slower than this machine the tests run: their waits for a report are that many
# times longer. Guests under QEMU without KVM (test_kernels.py) set it; 1 elsewhere.
SLOW = float(os.environ.get("HEAPTAP_TEST_SLOW") or 1)

# The tiers, in the order the test command runs them; asking for one runs those before it too.
# unit: no root, seconds to a minute (the unit programs' neighbours: docs against --help,
# short fuzzing). core: heaptap against the tests' own targets, as root. services: real
# servers and tools from Debian (PostgreSQL, nginx, redis, Chromium, Go, Prometheus,
# valgrind, the host agent, the package). soak: long runs (the torture test).
TIERS = ("unit", "core", "services", "soak")
# What a test may need beyond its tier: "alone" runs it with no other test beside it (it reads
# the whole host, as the agent does, or asserts on timing that other tests' load would skew);
# "waits" says it spends most of its time waiting (for a report's timers), and runs beside
# the others rather than in one of their places.
NEEDS = ("alone", "waits", "spins")
TESTS = []


def test(fn=None, *, tier="core", needs=(), sanitized=False):
    """Registers a test: @test, or @test(tier=..., needs=(...), sanitized=True). sanitized: run
    once more against heaptap built with the sanitizers, where the test command builds it.
    Tests run in the order their modules define them, unless run in parallel (tests/run.py)."""
    def register(fn):
        if tier not in TIERS:
            raise ValueError(f"{fn.__name__}: no tier {tier!r} (tiers: {', '.join(TIERS)})")
        unknown = set(needs) - set(NEEDS)
        if unknown:
            raise ValueError(f"{fn.__name__}: unknown needs {sorted(unknown)}")
        fn.tier, fn.needs, fn.sanitized = tier, frozenset(needs), sanitized
        TESTS.append(fn)
        return fn
    return register(fn) if fn else register
