#!/bin/sh
# The README's test command (sudo tests/test.sh [NAME...]): installs what is missing,
# builds, and runs every test against real targets (the fuzzers among them), then a share
# of them again against heaptap built with the sanitizers (build-san/, see tests/run.py).
# Ends with "N passed, N failed".
set -e
cd "$(dirname "$0")/.."
.ci/run deps
make -s WERROR="${WERROR:-0}"
make -s WERROR="${WERROR:-0}" SANITIZE=1
HEAPTAP_SANITIZED=build-san/heaptap exec python3 tests/run.py "$@"
