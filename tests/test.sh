#!/bin/sh
# The README's test command (sudo tests/test.sh [NAME...]): installs what is missing,
# builds, and runs every test against real targets. Ends with "N passed, N failed".
set -e
cd "$(dirname "$0")/.."
.ci/run deps
make -s WERROR="${WERROR:-0}"
exec python3 tests/run.py "$@"
