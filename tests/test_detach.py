"""Clean detach: however heaptap ends, no breakpoint stays in the target, no probe stays
attached, and the target computes what it computes untraced."""
import signal

from lib import Heaptap, Target, check, check_true, probed_text_intact, uprobes_of, test

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
