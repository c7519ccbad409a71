#!/usr/bin/env python3
"""Runs heaptap's libFuzzer targets (built by make into build/fuzz/):
python3 tests/fuzz/run_fuzzers.py [--time SECONDS] [--keep] [NAME...]

Each fuzzer first replays the inputs that once crashed it (tests/fuzz/regressions/NAME/),
then fuzzes for SECONDS from the seeds made at build time (build/fuzz/corpus/NAME/), the
inputs it finds kept in build/fuzz/work/NAME/ (emptied first, unless --keep). A crash, a
leak, undefined behaviour or an input slower than 10 s ends it: the input is saved under
build/fuzz/crashes/. Prints, per fuzzer, the executions run and the coverage reached
(libFuzzer's cov: edges and ft: features). Exits 1 if any fuzzer failed.
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, "build", "fuzz")
REGRESSIONS = os.path.join(ROOT, "tests", "fuzz", "regressions")
# One fuzzer a tests/fuzz/fuzz_NAME.c, as the Makefile builds them.
FUZZERS = sorted(os.path.basename(f)[len("fuzz_"):-len(".c")]
                 for f in glob.glob(os.path.join(ROOT, "tests", "fuzz", "fuzz_*.c")))
# Inputs longer than heaptap ever reads are not worth mutating.
MAX_LEN = {"dump": 4096, "maps": 65536, "options": 4096}


class Result:
    def __init__(self, name):
        self.name = name
        self.ok = True
        self.executions = self.cov = self.ft = self.corpus = 0
        self.problem = ""   # what went wrong: the sanitizer's summary, the input, how to rerun


def _summary(output):
    """The line that says what went wrong, from a sanitizer's or libFuzzer's report."""
    for pattern in (r"^SUMMARY: .*$", r"^==\d+==ERROR: .*$", r"^.*runtime error: .*$",
                    r"^ALARM: .*$", r"^==\d+== ERROR: libFuzzer: .*$"):
        m = re.search(pattern, output, re.M)
        if m:
            return m.group(0).strip()
    lines = output.strip().splitlines()
    return lines[-1] if lines else "no output"


def sanitizer_env():
    """The fuzzers' environment. Allocations past 64 MiB fail here, as they may on any host:
    heaptap makes none that large, and libdw, which grows a frame's register array to the
    largest register number the CFI names (up to 2 GiB), is handed no CFI naming one past
    256 (user/target/cfi.c)."""
    return dict(os.environ, UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1",
                ASAN_OPTIONS="detect_leaks=1:max_allocation_size_mb=64:"
                             "allocator_may_return_null=1")


def replay(name, binary, result):
    """The committed inputs that once crashed this fuzzer, each run once."""
    directory = os.path.join(REGRESSIONS, name)
    if not os.path.isdir(directory):
        return
    inputs = sorted(os.path.join(directory, f) for f in os.listdir(directory))
    if not inputs:
        return
    # Each in a few seconds: an input once slow (libdw clearing 40 MB per lookup, 4 s for
    # one input) fails here if it is slow again.
    p = subprocess.run([binary, "-timeout=3"] + inputs, capture_output=True, text=True,
                       errors="replace", env=sanitizer_env(), timeout=300)
    if p.returncode:
        result.ok = False
        result.problem = (f"a regression input fails again: {_summary(p.stderr)}; rerun: "
                          f"{binary} {directory}/*")


def fuzz(name, seconds, keep=False, work=None):
    """Replays the regressions, then fuzzes name for seconds; returns a Result. work: the
    folder under build/fuzz/work/ for what it finds (default: name; runs at once need their
    own)."""
    result = Result(name)
    binary = os.path.join(BUILD, f"fuzz_{name}")
    if not os.access(binary, os.X_OK):
        result.ok = False
        result.problem = f"{binary} is missing: run make first"
        return result
    replay(name, binary, result)
    if not result.ok:
        return result
    work = os.path.join(BUILD, "work", work or name)
    crashes = os.path.join(BUILD, "crashes")
    if not keep:
        shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work, exist_ok=True)
    os.makedirs(crashes, exist_ok=True)
    corpora = [work, os.path.join(BUILD, "corpus", name)]
    if os.path.isdir(os.path.join(REGRESSIONS, name)):
        corpora.append(os.path.join(REGRESSIONS, name))
    argv = [binary, f"-max_total_time={seconds}", "-print_final_stats=1", "-timeout=10",
            "-rss_limit_mb=2048", "-close_fd_mask=3", f"-artifact_prefix={crashes}/{name}-"]
    if name in MAX_LEN:
        argv.append(f"-max_len={MAX_LEN[name]}")
    p = subprocess.run(argv + corpora, capture_output=True, text=True, errors="replace",
                       env=sanitizer_env(), timeout=seconds + 300)
    out = p.stderr
    m = re.search(r"stat::number_of_executed_units:\s*(\d+)", out)
    result.executions = int(m.group(1)) if m else 0
    status = re.findall(r"cov: (\d+) ft: (\d+) corp: (\d+)/", out)
    if status:
        result.cov, result.ft, result.corpus = (int(x) for x in status[-1])
    if p.returncode:
        result.ok = False
        # The last input saved is the one that ended the run (a slow one may come first).
        units = re.findall(r"Test unit written to (\S+)", out)
        unit = units[-1] if units else None
        result.problem = (f"{_summary(out)}; input: {unit or '?'}; rerun: {binary} "
                          f"{unit or ''}")
    return result


def describe(r):
    figures = (f"{r.executions:,} executions, cov {r.cov:,} edges, ft {r.ft:,} features, "
               f"corpus {r.corpus:,}")
    return f"fuzz_{r.name:8s} {figures}" + ("" if r.ok else f"  FAILED: {r.problem}")


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--time", type=int, default=25, help="seconds per fuzzer")
    parser.add_argument("--keep", action="store_true", help="keep what earlier runs found")
    parser.add_argument("names", nargs="*", help=f"fuzzers to run: {', '.join(FUZZERS)}")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in FUZZERS]
    if unknown:
        parser.error(f"no fuzzer {', '.join(unknown)}; there are {', '.join(FUZZERS)}")
    failed = 0
    for name in args.names or FUZZERS:
        r = fuzz(name, args.time, args.keep)
        print(describe(r), flush=True)
        failed += not r.ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
