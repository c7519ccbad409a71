#!/bin/sh
# The README's test command: sudo tests/test.sh [TIER | NAME...]
# Installs what is missing, builds, runs the unit programs (seconds, unprivileged: make unit),
# then the tests of tests/run.py in tiers: unit, core, services, soak (lib.TIERS). A TIER runs
# that tier and those before it (`tests/test.sh core`: the quick check); a NAME the tests
# whose names hold it; nothing, every test. Beyond the core tier, the tests declared
# sanitized run once more against heaptap built with the sanitizers (build-san/): tests/run.py
# makes it, and runs its unit programs, while the other tests start. Ends with
# "N passed, N failed".
set -e
cd "$(dirname "$0")/.."
.ci/run deps
jobs=$(nproc)
# One make for both: the unit programs run as soon as they are linked, while the rest builds.
make -s -j"$jobs" WERROR="${WERROR:-0}" all unit
sanitize=1
for word in "$@"; do
	case "$word" in
	unit | core) sanitize=0 ;;
	services | soak) sanitize=1 && break ;;
	esac
done
if [ "$sanitize" = 1 ]; then
	export HEAPTAP_SANITIZED=build-san/heaptap
	export HEAPTAP_SANITIZED_BUILD="make -s -j$jobs WERROR=${WERROR:-0} SANITIZE=1 all unit"
fi
exec python3 tests/run.py "$@"
