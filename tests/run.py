#!/usr/bin/env python3
"""Runs heaptap's tests: python3 tests/run.py [NAME...] (as root; NAME selects by substring).

With HEAPTAP_SANITIZED=build-san/heaptap (made by `make SANITIZE=1`; tests/test.sh sets
it), the tests of SANITIZED among those selected run once more against that binary, and
fail on any report of AddressSanitizer, LeakSanitizer or UndefinedBehaviorSanitizer.

Ends with the line "N passed, N failed"; exits 0 only when nothing failed.
"""
import glob
import importlib
import os
import shutil
import signal
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

# Run again under the sanitizers: a test per area of heaptap's user side, chosen to run
# most of its code in about a minute: accounting, DWARF stacks (and crafted stacks and ELF
# files), every output, block dumps, threads, the leak check (on SIGUSR1 and at an exit),
# sampling, bad input, detaching, a plan made anew at exec. Not --watch's test: its exact page count needs each fault's stack unwound
# before the final report, which the slower sanitized build misses now and then.
SANITIZED = [
    "test_size_mix_and_leaking_sites",
    "test_every_entry_point_and_realloc_case",
    "test_eight_threads_exact_totals",
    "test_stack_without_frame_pointers_matches_gdb",
    "test_cplusplus_names_are_demangled",
    "test_no_cfi_frame_with_rbp_near_2_to_the_64",
    "test_crafted_elf_files_mapped_executable",
    "test_pprof_read_by_go_tool_pprof",
    "test_folded_values_add_up_to_live_bytes",
    "test_prometheus_scrapes_listen",
    "test_html_report_keeps_target_strings_as_text",
    "test_interval_reports_until_duration",
    "test_dump_shows_string_and_class",
    "test_live_bytes_by_thread_exited_included",
    "test_leak_check_categories_exact",
    "test_leak_summary_of_the_textbook_program",
    "test_sampled_estimates_hold_the_truth",
    "test_bad_input_is_refused_and_harms_nothing",
    "test_clean_detach_on_sigint",
    "test_own_allocator_through_two_execs",
    "test_python_objects_counted_by_class_as_the_collector_counts_them",
]


def sanitizer_reports(directory):
    """The first line that says what each report in directory found, and its file."""
    found = []
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        with open(path, errors="replace") as f:
            text = f.read()
        lines = [line for line in text.splitlines()
                 if "SUMMARY:" in line or "runtime error:" in line or "ERROR:" in line]
        found.append(f"{lines[0].strip() if lines else text[:200]} (report: {path})")
    return found


def run_test(t, label, reports=None):
    """Runs one test; reports: a directory the sanitizers write to, checked after it."""
    start = time.monotonic()
    if reports:
        shutil.rmtree(reports, ignore_errors=True)
        os.makedirs(reports)
        # LeakSanitizer stays on: heaptap frees what it holds before it exits, libdw and
        # libelf included (dwfl_end, elf_end), so a leak report is heaptap's own.
        os.environ["ASAN_OPTIONS"] = f"log_path={reports}/asan:detect_leaks=1"
        os.environ["UBSAN_OPTIONS"] = f"log_path={reports}/ubsan:print_stacktrace=1"
    try:
        t()
        verdict = "ok"
    except lib.Failure as e:
        verdict = f"FAIL: {e}"
    except Exception:
        verdict = "ERROR:\n" + traceback.format_exc()
    finally:
        lib.end_started()
    if reports:
        found = sanitizer_reports(reports)
        if found:
            verdict = ("FAIL: " if verdict == "ok" else verdict + "; ") + "sanitizer: " + \
                "; ".join(found)
    print(f"{label:48s} {time.monotonic() - start:6.1f}s  {verdict}", flush=True)
    return verdict == "ok"


def main(argv):
    # Started in the background by a shell, the runner would ignore SIGINT, and so would
    # every program it starts: tests stop servers' clients (pgbench) with SIGINT.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if os.geteuid() != 0:
        print("heaptap's tests attach BPF programs: run them as root (sudo make test)")
        return 1
    sanitized = os.environ.get("HEAPTAP_SANITIZED")
    for binary in [lib.HEAPTAP] + ([sanitized] if sanitized else []):
        if not os.access(binary, os.X_OK):
            print(f"{binary} is missing: run make first (make SANITIZE=1 for build-san/)")
            return 1
    for path in sorted(glob.glob(os.path.join(os.path.dirname(__file__), "test_*.py"))):
        importlib.import_module(os.path.basename(path)[:-3])
    selected = [t for t in lib.TESTS if not argv or any(a in t.__name__ for a in argv)]
    passed = failed = 0
    for t in selected:
        if run_test(t, t.__name__):
            passed += 1
        else:
            failed += 1
    if sanitized:
        by_name = {t.__name__: t for t in lib.TESTS}
        for name in SANITIZED:
            if name not in by_name and not argv:
                print(f"{name + ' (sanitized)':48s}    0.0s  FAIL: no such test", flush=True)
                failed += 1
        lib.use_heaptap(sanitized)
        reports = os.path.join(os.path.dirname(os.path.abspath(sanitized)), "reports")
        for t in [by_name[n] for n in SANITIZED if by_name.get(n) in selected]:
            if run_test(t, t.__name__ + " (sanitized)", os.path.join(reports, t.__name__)):
                passed += 1
            else:
                failed += 1
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
