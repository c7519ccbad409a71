"""bench/RESULTS.md, written by the benches themselves: each run replaces its own section.

A bench prints its results inside `with results.section(NAME[, VARIANT]):`. What it prints
there goes to standard output as before and, when the block ends without an exception, into
the section NAME of bench/RESULTS.md (NAME (VARIANT) for a run of another kind, such as
`live_budget (paired)`), after the run's date and length, the exact command line, the commit
heaptap was built from, the machine (kernel, CPU model, CPUs, memory) and its load. A block
that ends by an exception writes nothing; run.discard() inside it keeps a run that measured
nothing worth keeping (too short) from replacing the last good one.

Sections are kept in the order of their names; the text before the first is left as it is.
The file is rewritten whole (a temporary file, renamed over it, with the old one's mode and
owner) while the folder is locked, so two benches that end at once both keep their sections.
HEAPTAP_RESULTS=PATH writes PATH instead (a trial run).
"""
import contextlib
import fcntl
import io
import os
import shlex
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.environ.get("HEAPTAP_RESULTS") or os.path.join(ROOT, "bench", "RESULTS.md")
FENCE = "```"

# The run starts when the bench imports this module, before it measures anything.
_START = time.monotonic()
_LOAD_AT_START = os.getloadavg()[0]


class _Tee:
    """Standard output that also keeps what goes through it."""

    def __init__(self, out):
        self.out = out
        self.kept = io.StringIO()

    def write(self, text):
        self.kept.write(text)
        return self.out.write(text)

    def flush(self):
        self.out.flush()

    def __getattr__(self, name):
        return getattr(self.out, name)


class _Run:
    def __init__(self):
        self.kept = True

    def discard(self):
        """Leave RESULTS.md as it is: this run's figures are not worth keeping."""
        self.kept = False


@contextlib.contextmanager
def section(name, variant=None):
    """What is printed in the block, also written to the section of name and variant."""
    run = _Run()
    tee = _Tee(sys.stdout)
    sys.stdout = tee
    try:
        yield run
    finally:
        sys.stdout = tee.out
    if run.kept:
        write(f"{name} ({variant})" if variant else name, tee.kept.getvalue())


def _read(path, key):
    """The value of the first line of file path that starts with key, or None."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(key):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def machine():
    """The kernel, the CPU model, the CPUs and the memory, from uname and /proc."""
    u = os.uname()
    model = _read("/proc/cpuinfo", "model name") or "CPU model unknown"
    flags = (_read("/proc/cpuinfo", "flags") or "").split()
    cpus = os.cpu_count()
    ours = len(os.sched_getaffinity(0))
    mem = _read("/proc/meminfo", "MemTotal")
    memory = f"{int(mem.split()[0]) / 2**20:.1f} GiB of memory" if mem else "memory unknown"
    return (f"Linux {u.release} ({u.version}, {u.machine}), {model}, {cpus} CPUs"
            + (f" ({ours} for this run)" if ours != cpus else "")
            + (", a virtual machine" if "hypervisor" in flags else "") + f", {memory}")


def commit():
    """The commit the tree is at, and whether it has changes not committed (RESULTS.md's
    own, which the benches make, aside)."""
    git = ["git", "-c", f"safe.directory={ROOT}", "-C", ROOT]
    try:
        head = subprocess.run(git + ["rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=30)
        dirty = subprocess.run(git + ["status", "--porcelain", "--untracked-files=no", "--",
                                      ".", ":!bench/RESULTS.md"],
                               capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "commit unknown"
    if head.returncode != 0:
        return "commit unknown"
    return head.stdout.strip() + (" with changes not committed" if dirty.stdout.strip() else "")


def command():
    """The command line as typed from the tree's root."""
    script = os.path.abspath(sys.argv[0])
    if script.startswith(ROOT + os.sep):
        script = os.path.relpath(script, ROOT)
    return "python3 " + shlex.join([script] + sys.argv[1:])


def duration(seconds):
    minutes, seconds = divmod(round(seconds), 60)
    return f"{minutes} min {seconds} s" if minutes else f"{seconds} s"


def render(key, text):
    """A section: its heading, where the figures come from, and what the bench printed."""
    binary = os.environ.get("HEAPTAP") or "build/heaptap"
    lines = text.strip("\n").splitlines()
    while lines and not lines[0].strip():
        lines.pop(0)
    return "\n".join([
        f"## {key}",
        "",
        f"- run: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{duration(time.monotonic() - _START)}",
        f"- command: `{command()}`" + (", as root" if os.geteuid() == 0 else ""),
        f"- heaptap: {binary} of commit {commit()}",
        f"- machine: {machine()}",
        f"- load average: {_LOAD_AT_START:.2f} at the start, {os.getloadavg()[0]:.2f} at the end",
        "",
        FENCE + "text",
        *(line.rstrip() for line in lines),
        FENCE,
        "",
    ])


def split(text):
    """(the text before the first section, {key: section's text}); a heading inside a
    fenced block is text."""
    head, sections, key, fenced = [], {}, None, False
    for line in text.splitlines(keepends=True):
        if line.startswith(FENCE):
            fenced = not fenced
        if line.startswith("## ") and not fenced:
            key = line[3:].strip()
            sections[key] = []
        (sections[key] if key is not None else head).append(line)
    return "".join(head), {k: "".join(v) for k, v in sections.items()}


def write(key, text, path=None):
    """Replaces (or adds) the section key of RESULTS.md with the figures in text."""
    path = path or RESULTS
    folder = os.path.dirname(os.path.abspath(path))
    lock = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            with open(path) as f:
                old = f.read()
            st = os.stat(path)
        except FileNotFoundError:
            old, st = "# Benchmark results\n\n", None
        head, sections = split(old)
        sections[key] = render(key, text) + "\n"
        body = head.rstrip("\n") + "\n\n" + "".join(
            sections[k].rstrip("\n") + "\n\n" for k in sorted(sections))
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".RESULTS.")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(body.rstrip("\n") + "\n")
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, st.st_mode & 0o7777 if st else 0o644)
            if st and os.geteuid() == 0:
                os.chown(tmp, st.st_uid, st.st_gid)
            os.rename(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    finally:
        os.close(lock)
    print(f"figures written to {os.path.relpath(path)}, section {key}", file=sys.stderr)
