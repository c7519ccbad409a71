"""The torture run, short: tests/torture.py with 60 cycles of attaching heaptap and ending it
by SIGINT or SIGKILL at a random moment, each checked (the long run, 200 cycles, is in
doc/testing.md). A random seed each time; a failure says how to replay it."""
import os
import subprocess
import sys
import time

from lib import Proc, check, check_true, test

TORTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torture.py")
CYCLES = 60
# No cycle starts after this: on a loaded machine the test still ends within about 2 minutes.
MAX_TIME_S = 60
# A cycle's own bound (heaptap's output closed within 60 s, checks, the target's answers).
LAST_CYCLE_S = 150


@test(tier="soak")
def test_torture_short():
    """Against the 8-thread storm, the forker and 1,000 threads, in full, leak-check and live
    modes: no thread left stopped, no breakpoint or uprobe left, the untraced checksums, every
    target answering afterwards (tests/torture.py says how each is checked)."""
    seed = int.from_bytes(os.urandom(4), "little")
    replay = f"python3 tests/torture.py {CYCLES} --seed {seed}"
    run = Proc([sys.executable, TORTURE, str(CYCLES), "--seed", str(seed), "--max-time",
                str(MAX_TIME_S)], stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + MAX_TIME_S + LAST_CYCLE_S
    lines = []
    while True:
        line = run.read_line(timeout=max(1.0, deadline - time.monotonic()))
        if line is None:
            break
        lines.append(line)
    status = run.wait()
    stderr = run.stderr_text()   # read once: it is a pipe
    summary = next((line for line in lines if " cycles in " in line), None)
    check_true("the torture run's summary", summary,
               f"({replay}) last lines: {lines[-3:]}; stderr: {stderr[-2000:]}")
    failed = [line for line in lines if line.startswith("FAILED") or "  FAIL: " in line]
    check(f"failed torture cycles ({replay}): {failed[:3]}", len(failed), 0)
    check_true("torture cycles run", int(summary.split()[0]) > 0, summary)
    check_true(f"torture.py exit status ({replay})", status == 0,
               f"expected 0, got {status}: {lines[-12:]}; stderr: {stderr[-3000:]}")
