#!/usr/bin/env python3
"""Whether two builds of heaptap report the same, but for what differs from run to run.

Usage: sudo python3 tests/same_output.py OLD_HEAPTAP [NEW_HEAPTAP]  (NEW: build/heaptap)

Runs each build on the same launched commands (the tests' deterministic targets, address
space randomisation off), twice each, in JSON and in text. What differs between the two runs
of one build (times, PIDs, rates) is masked; anything else that differs between the builds is
printed, and the exit status is 1. A refactoring that keeps behaviour must exit 0.
"""
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGETS = os.environ.get("TARGETS") or os.path.join(ROOT, "build", "tests")
MASK = "<varies>"

# Each: a name, heaptap's options, the command launched, its standard input.
SCENARIOS = [
    ("sizes", ["-i", "1h", "--dump-bytes", "32"], ["sizes"], b"mix\nmix\nfree\nmix\nexit\n"),
    ("leak check", ["-i", "1h", "--leak-check"], ["reach"], b"make\nexit\n"),
    ("sorted by live, top 2", ["-i", "1h", "--sort", "live", "--top", "2"], ["sizes"],
     b"mix\nexit\n"),
]


def run(heaptap, options, command, stdin, json_out):
    argv = ["setarch", "-R", heaptap] + (["--json"] if json_out else []) + options + \
        ["--", os.path.join(TARGETS, command[0])] + command[1:]
    p = subprocess.run(argv, input=stdin, capture_output=True, timeout=120)
    return p.returncode, p.stdout.decode(errors="replace")


# The launched target's own lines ("ready PID", "done COMMAND"), which share heaptap's standard
# output and may land inside a long record (a pipe's write is atomic only up to 4 KiB).
TARGET_LINE = re.compile(r"(?:ready \d+|done [\w ]*)\n")


def records(text):
    return [json.loads(line) for line in TARGET_LINE.sub("", text).splitlines()
            if line.startswith("{")]


def mask(a, b):
    """a with every value that b (another run of the same build) does not share masked."""
    if isinstance(a, dict) and isinstance(b, dict):
        return {k: mask(v, b[k]) if k in b else MASK for k, v in a.items()}
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [mask(x, y) for x, y in zip(a, b)]
    return a if a == b else MASK


def apply_mask(value, masked):
    """value with the places masked holds masked."""
    if masked == MASK:
        return MASK
    if isinstance(value, dict) and isinstance(masked, dict):
        return {k: apply_mask(v, masked.get(k, MASK)) for k, v in value.items()}
    if isinstance(value, list) and isinstance(masked, list) and len(value) == len(masked):
        return [apply_mask(x, y) for x, y in zip(value, masked)]
    return value


def differences(old, new, path="$"):
    if isinstance(old, dict) and isinstance(new, dict):
        for k in sorted(set(old) | set(new)):
            if k not in new:
                yield f"{path}.{k}: only in the old build"
            elif k not in old:
                yield f"{path}.{k}: only in the new build"
            else:
                yield from differences(old[k], new[k], f"{path}.{k}")
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for i, (x, y) in enumerate(zip(old, new)):
            yield from differences(x, y, f"{path}[{i}]")
    elif old != new and MASK not in (old, new):
        yield f"{path}: {json.dumps(old)[:120]} -> {json.dumps(new)[:120]}"


NUMBER = re.compile(r"\d[\d,.]*")


def text_lines(text):
    """The text report's lines with numbers that vary masked: compared by shape and words."""
    return [NUMBER.sub("N", line) for line in text.splitlines()]


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__.strip())
        return 2
    old, new = argv[1], argv[2] if len(argv) == 3 else os.path.join(ROOT, "build", "heaptap")
    found = 0
    for name, options, command, stdin in SCENARIOS:
        runs = {}
        for build in (old, new):
            statuses, outs = [], []
            for _ in range(2):
                status, out = run(build, options, command, stdin, True)
                statuses.append(status)
                outs.append(records(out))
            runs[build] = (statuses, outs)
        (so, (o1, o2)), (sn, (n1, n2)) = runs[old], runs[new]
        if so != sn:
            print(f"{name}: exit statuses {so} -> {sn}")
            found += 1
        if len(o1) != len(n1) or len(o1) != len(o2) or len(n1) != len(n2):
            print(f"{name}: records {len(o1)}/{len(o2)} -> {len(n1)}/{len(n2)}")
            found += 1
            continue
        for i, (a1, a2, b1, b2) in enumerate(zip(o1, o2, n1, n2)):
            masked = mask(mask(a1, a2), mask(b1, b2))
            for line in differences(apply_mask(a1, masked), apply_mask(b1, masked),
                                    f"record {i} ({a1.get('type')})"):
                print(f"{name}: {line}")
                found += 1
        t_old = text_lines(run(old, options, command, stdin, False)[1])
        t_new = text_lines(run(new, options, command, stdin, False)[1])
        if t_old != t_new:
            for i, (a, b) in enumerate(zip(t_old + [""] * len(t_new), t_new + [""] * len(t_old))):
                if a != b:
                    print(f"{name}: text line {i + 1}: {a!r} -> {b!r}")
                    found += 1
                    break
        print(f"{name}: compared", flush=True)
    print("same output" if not found else f"{found} differences")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
