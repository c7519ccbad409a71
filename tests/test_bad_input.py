"""Bad input: one clear line, the documented exit status, and the target untouched."""
import os

from lib import TARGETS, Proc, Target, check, check_true, run_heaptap, test
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
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/comm") as f:
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


@test
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
            "heaptap: invalid PID 'twelve': expected a process ID (see heaptap --help)")
    refused(["--bogus", "-p", pid], 2, "heaptap: unknown option '--bogus' (see heaptap --help)")
    refused(["-p"], 2, "heaptap: option '-p' needs a value (see heaptap --help)")
    refused([], 2, "heaptap: nothing to trace: give -p PID or -- COMMAND (see heaptap --help)")
    refused(["-p", pid, "--", "true"], 2,
            "heaptap: give either -p PID or a COMMAND, not both (see heaptap --help)")
    refused(["--max-allocs", "0", "-p", pid], 2,
            "heaptap: invalid --max-allocs '0': expected a number from 1 to 268435456 "
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
