#!/bin/sh
# The README's test command (sudo tests/test.sh [NAME...]): installs what is missing,
# builds, runs the unit tests (seconds, unprivileged: make unit), then every test against
# real targets (the fuzzers among them), then a share of them again against heaptap built
# with the sanitizers (build-san/, see tests/run.py). Ends with "N passed, N failed".
set -e
cd "$(dirname "$0")/.."
.ci/run deps
make -s WERROR="${WERROR:-0}"
make -s WERROR="${WERROR:-0}" unit
make -s WERROR="${WERROR:-0}" SANITIZE=1 all unit
HEAPTAP_SANITIZED=build-san/heaptap exec python3 tests/run.py "$@"
