"""Bad input: one clear line, the documented exit status, and the target untouched."""
import os
import signal
import subprocess
import time

from lib import (HEAPTAP, TARGETS, Failure, Proc, Target, check, check_true, run_heaptap, test,
                 uprobes_of)
from test_accounting import check_mix, traced

PRIVS = ("heaptap: not enough privileges: run it as root (sudo heaptap ...), or give it "
         "CAP_BPF + CAP_PERFMON + CAP_SYS_PTRACE (missing:{})")
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def unused_pid():
    with open("/proc/sys/kernel/pid_max") as f:
        pid = int(f.read()) - 1
    while os.path.exists(f"/proc/{pid}"):
        pid -= 1
    return pid


def kernel_thread():
    for entry in sorted(os.listdir("/proc"), key=lambda e: (not e.isdigit(), e.zfill(10))):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/comm", errors="replace") as f:
                comm = f.read().strip()
        except OSError:
            continue
        if int(fields[6]) & 0x00200000:        # PF_KTHREAD
            return int(entry), comm
    raise AssertionError("no kernel thread visible in /proc")


def refused(args, status, message, wrapper=()):
    got_status, out, err = run_heaptap(args, wrapper)
    check(f"exit status of heaptap {' '.join(args)}", got_status, status)
    check(f"message of heaptap {' '.join(args)}", err.strip(), message)
    check(f"no report from heaptap {' '.join(args)}", out, "")


@test(sanitized=True)
def test_bad_input_is_refused_and_harms_nothing():
    target = Target("sizes")
    pid = str(target.target_pid)
    # Usage errors: exit status 2.
    refused(["--sort", "often", "-p", pid], 2,
            "heaptap: invalid --sort 'often': expected size, live, calls or bytes "
            "(see heaptap --help)")
    refused(["-i", "0", "-p", pid], 2,
            "heaptap: invalid interval '0': expected a time of at least 1ms, like 5, 0.5s or "
            "200ms (see heaptap --help)")
    refused(["-p", "twelve"], 2,
            "heaptap: invalid PID 'twelve': expected a process ID, or several separated by "
            "commas (see heaptap --help)")
    refused(["--bogus", "-p", pid], 2, "heaptap: unknown option '--bogus' (see heaptap --help)")
    # A value is echoed cut to 64 characters, and escaped: one short, printable line.
    refused(["--listen", "x" * 100000, "-p", pid], 2,
            f"heaptap: invalid --listen '{'x' * 64}...': expected [ADDR:]PORT, like 9464, "
            "127.0.0.1:9464 or [::1]:9464 (see heaptap --help)")
    refused(["--sort", "\x1b[2Jnew\udcff", "-p", pid], 2,
            "heaptap: invalid --sort '\\x1b[2Jnew\\xff': expected size, live, calls or "
            "bytes (see heaptap --help)")
    refused(["-p"], 2, "heaptap: option '-p' needs a value (see heaptap --help)")
    refused([], 2, "heaptap: nothing to trace: give -p PID or -- COMMAND (see heaptap --help)")
    refused(["-p", pid, "--", "true"], 2,
            "heaptap: give either -p PID or a COMMAND, not both (see heaptap --help)")
    refused(["--max-allocs", "0", "-p", pid], 2,
            "heaptap: invalid --max-allocs '0': expected a number from 1 to 67108864 "
            "(see heaptap --help)")
    refused(["--alert-live", "17179869185g", "-p", pid], 2,         # (2^34 + 1) << 30 wraps
            "heaptap: invalid --alert-live '17179869185g': expected bytes, like 100m or 1g "
            "(see heaptap --help)")
    # Targets that cannot be traced: exit status 1.
    missing = unused_pid()
    refused(["-p", str(missing)], 1, f"heaptap: no process with PID {missing}")
    kpid, kcomm = kernel_thread()
    refused(["-p", str(kpid)], 1, f"heaptap: PID {kpid} ({kcomm}) is a kernel thread: it has "
            "no user-space allocator to trace")
    bare = Proc([os.path.join(TARGETS, "noalloc")])
    refused(["-p", str(bare.pid)], 1,
            f"heaptap: no object in PID {bare.pid} defines malloc (a static program without a C "
            "allocator, or a runtime with its own, such as Go); name one with --allocator PATH "
            "if it has one")
    refused(["-p", pid, "--allocator", "/nonexistent/libfoo.so"], 1,
            f"heaptap: --allocator /nonexistent/libfoo.so is not mapped in PID {pid} "
            f"(see /proc/{pid}/maps)")
    # Privileges: none at all, then all but one.
    refused(["-p", pid], 1, PRIVS.format(" CAP_BPF CAP_PERFMON CAP_SYS_PTRACE"), wrapper=NOBODY)
    refused(["-p", pid], 1, PRIVS.format(" CAP_SYS_PTRACE"),
            wrapper=NOBODY + ["--inh-caps=+bpf,+perfmon", "--ambient-caps=+bpf,+perfmon"])
    # The target went on as if nothing had happened: it works, and heaptap still traces it.
    check_true("target still running", target.alive())
    _, final, _ = traced(target, "mix")
    check_mix(final)


def signals_held(pid):
    """Whether process pid blocks SIGINT (heaptap does from before its main)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("SigBlk:"):
                    return bool(int(line.split()[1], 16) & (1 << (signal.SIGINT - 1)))
    except OSError:
        pass
    return False


@test
def test_ctrl_c_at_any_moment_harms_nothing():
    """SIGINT from the first moments on (while heaptap loads its programs, calibrates,
    attaches) ends the session with status 0 and every probe out again. Only a signal within
    the few milliseconds the program loader takes to load heaptap's own libraries, before any
    of heaptap's code runs, can end it by the signal, before it touched anything."""
    target = Target("sizes")
    for delay in (0, 0.01, 0.03, 0.06, 0.1, 0.15, 0.2, 0.3):
        ht = Proc([HEAPTAP, "-p", str(target.target_pid), "-i", "1h", "--json"])
        # From when heaptap's own code first runs: its signals are then held (SigBlk).
        deadline = time.monotonic() + 10
        while not signals_held(ht.pid):
            check_true("heaptap holds its signals", time.monotonic() < deadline)
            time.sleep(0.0005)
        time.sleep(delay)
        os.kill(ht.pid, signal.SIGINT)
        check(f"exit status after SIGINT at {delay * 1000:.0f} ms", ht.wait(), 0)
        check(f"uprobes left after SIGINT at {delay * 1000:.0f} ms", uprobes_of(ht.pid), [])
        err = ht.stderr_text().strip()
        check_true("said when nothing was traced",
                   err in ("", "heaptap: interrupted while attaching: no probe is left, nothing "
                           "was traced"), err)
    _, final, _ = traced(target, "mix")
    check_mix(final)


@test
def test_ctrl_c_before_heaptap_runs_even_under_a_background_shell():
    """A shell that runs the tests in the background ignores SIGINT, and its children keep
    that: a SIGINT reaching heaptap before its first instruction (which holds it) was then
    lost, and heaptap ran on (the torture test's hang, 1 cycle in 40). Started as from a
    terminal (tests/lib.py), heaptap is ended by it, or ends its session cleanly."""
    target = Target("sizes")
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        for attempt in range(10):
            ht = Proc([HEAPTAP, "-p", str(target.target_pid), "-i", "100ms", "--json"])
            time.sleep(0.0005 * (attempt % 3))
            os.kill(ht.pid, signal.SIGINT)
            try:
                status = ht.popen.wait(timeout=20)
            except subprocess.TimeoutExpired:
                raise Failure(f"SIGINT {0.5 * (attempt % 3):.1f} ms after heaptap's start was "
                              "lost: it still runs 20 s later")
            check_true("ended by SIGINT, or cleanly", status in (0, -signal.SIGINT),
                       f"status {status}: {ht.stderr_text()}")
            check("uprobes left", uprobes_of(ht.pid), [])
    finally:
        signal.signal(signal.SIGINT, before)
    check("target still answers", target.do("mix"), "")


@test
def test_target_exiting_while_heaptap_attaches():
    target = Target("sizes")
    pid = target.target_pid
    ht = Proc([HEAPTAP, "-v", "-p", str(pid), "-i", "1h", "--json"])
    # The allocator is found, the programs are still to be loaded: hold heaptap there while
    # the target goes.
    said = b""
    while f"heaptap: PID {pid} (sizes): allocator ".encode() not in said:
        line = ht.popen.stderr.readline()
        if not line:
            raise Failure(f"heaptap ended before finding the allocator: {said!r}")
        said = line
    os.kill(ht.pid, signal.SIGSTOP)
    target.end()
    os.kill(ht.pid, signal.SIGCONT)
    check("exit status", ht.wait(), 1)
    err = ht.stderr_text()
    check_true("the target's exit is said", f"heaptap: PID {pid} exited while heaptap was "
               "attaching: nothing was traced\n" in err, err)
    check("uprobes left", uprobes_of(ht.pid), [])
