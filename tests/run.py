#!/usr/bin/env python3
"""Runs heaptap's tests: python3 tests/run.py [NAME...] (as root; NAME selects by substring).

Ends with the line "N passed, N failed"; exits 0 only when nothing failed.
"""
import glob
import importlib
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402


def main(argv):
    if os.geteuid() != 0:
        print("heaptap's tests attach BPF programs: run them as root (sudo make test)")
        return 1
    if not os.access(lib.HEAPTAP, os.X_OK):
        print(f"{lib.HEAPTAP} is missing: run make first")
        return 1
    for path in sorted(glob.glob(os.path.join(os.path.dirname(__file__), "test_*.py"))):
        importlib.import_module(os.path.basename(path)[:-3])
    selected = [t for t in lib.TESTS if not argv or any(a in t.__name__ for a in argv)]
    passed = failed = 0
    for t in selected:
        start = time.monotonic()
        try:
            t()
            passed += 1
            verdict = "ok"
        except lib.Failure as e:
            failed += 1
            verdict = f"FAIL: {e}"
        except Exception:
            failed += 1
            verdict = "ERROR:\n" + traceback.format_exc()
        finally:
            lib.end_started()
        print(f"{t.__name__:48s} {time.monotonic() - start:6.1f}s  {verdict}", flush=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
