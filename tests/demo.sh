#!/bin/sh
# The README's first command (sudo tests/demo.sh [PID]): installs what is missing, builds,
# and attaches heaptap to a running process, the bundled leaking demo server unless a PID
# is given.
set -e
cd "$(dirname "$0")/.."
.ci/run deps
make -s
if [ -n "$1" ]; then
	echo "heaptap -p $1 -i 5   (Ctrl-C prints the final report and detaches)"
	exec build/heaptap -p "$1" -i 5
fi
build/tests/demo &
demo=$!
trap 'kill "$demo" 2>/dev/null || true' INT TERM
sleep 1
echo "heaptap -p $demo -i 2 -d 12 --top 3 --dump-bytes 32   (attaching to the running demo server)"
status=0
build/heaptap -p "$demo" -i 2 -d 12 --top 3 --dump-bytes 32 || status=$?
kill "$demo"
wait "$demo" 2>/dev/null || true
exit "$status"
