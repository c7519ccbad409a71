"""Every parser of bytes the target controls, fuzzed for a bounded time (HEAPTAP_FUZZ_TIME
seconds each, default 25; `make fuzz FUZZ_TIME=600` for longer runs) under AddressSanitizer
and UndefinedBehaviorSanitizer, after the inputs that once crashed it. A crash, a leak,
undefined behaviour or a hang fails the test, naming the input and how to rerun it."""
import os
import sys

from lib import ROOT, Failure, test

sys.path.insert(0, os.path.join(ROOT, "tests", "fuzz"))
import run_fuzzers as fuzzers  # noqa: E402

SECONDS = int(os.environ.get("HEAPTAP_FUZZ_TIME", "25"))


def fuzzed(name):
    result = fuzzers.fuzz(name, SECONDS)
    print(f"  {fuzzers.describe(result)}", flush=True)
    if not result.ok:
        raise Failure(f"fuzz_{name}: {result.problem}")
    if not result.executions:
        raise Failure(f"fuzz_{name} ran no input")


@test
def test_fuzz_elf_symbols_segments_and_dynamic_section():
    fuzzed("elfsyms")


@test
def test_fuzz_cfi_rule_derivation():
    fuzzed("cfi")


@test
def test_fuzz_stack_copy_unwinder():
    fuzzed("unwind")


@test
def test_fuzz_proc_maps_and_smaps_lines():
    fuzzed("maps")


@test
def test_fuzz_proc_stat_status_and_cgroup_of_every_process():
    fuzzed("procfs")


@test
def test_fuzz_block_dumps_strings_and_escaping():
    fuzzed("dump")


@test
def test_fuzz_command_lines():
    fuzzed("options")


@test
def test_fuzz_python_location_tables():
    fuzzed("python")
