"""Every parser of bytes the target controls, fuzzed under AddressSanitizer and
UndefinedBehaviorSanitizer after the inputs that once crashed it: briefly in the unit tier
(HEAPTAP_FUZZ_TIME seconds each, default 5), longer in the soak tier (HEAPTAP_FUZZ_SOAK_TIME,
default 10); `make fuzz FUZZ_TIME=600` for long runs. A crash, a leak, undefined behaviour or
a hang fails the test, naming the input and how to rerun it."""
import os
import re
import sys

from lib import ROOT, Failure, check, test

sys.path.insert(0, os.path.join(ROOT, "tests", "fuzz"))
import run_fuzzers as fuzzers  # noqa: E402

SHORT = int(os.environ.get("HEAPTAP_FUZZ_TIME", "5"))
LONG = int(os.environ.get("HEAPTAP_FUZZ_SOAK_TIME", "10"))

# What each fuzzer reads, as its tests are named: one for each tests/fuzz/fuzz_NAME.c.
PARSERS = {
    "elfsyms": "elf_symbols_segments_and_dynamic_section",
    "cfi": "cfi_rule_derivation",
    "unwind": "stack_copy_unwinder",
    "maps": "proc_maps_and_smaps_lines",
    "heap": "glibc_heap_chunks_and_bins",
    "procfs": "proc_stat_status_and_cgroup_of_every_process",
    "dump": "block_dumps_strings_and_escaping",
    "options": "command_lines",
    "python": "python_location_tables",
}


def fuzzed(name, seconds):
    result = fuzzers.fuzz(name, seconds, work=f"{name}-{seconds}s")
    print(f"  {fuzzers.describe(result)}", flush=True)
    if not result.ok:
        raise Failure(f"fuzz_{name}: {result.problem}")
    if not result.executions:
        raise Failure(f"fuzz_{name} ran no input")


def register(name, what, tier, seconds, suffix=""):
    def run():
        fuzzed(name, seconds)
    run.__name__ = f"test_fuzz_{what}{suffix}"
    test(tier=tier)(run)


for _name, _what in PARSERS.items():
    register(_name, _what, "unit", SHORT)
for _name, _what in PARSERS.items():
    register(_name, _what, "soak", LONG, "_for_longer")


@test(tier="unit")
def test_every_fuzzer_is_run_and_documented():
    """Each fuzzer of tests/fuzz/ has its tests here and its row in doc/testing.md's table."""
    check("fuzzers with tests", sorted(PARSERS), fuzzers.FUZZERS)
    with open(os.path.join(ROOT, "doc", "testing.md")) as f:
        text = f.read()
    table = text[text.index("| fuzzer | what it reads"):].split("\n\n")[0]
    rows = re.findall(r"^\| `(\w+)` \|", table, re.M)
    check("fuzzers in doc/testing.md's table", sorted(rows), fuzzers.FUZZERS)
