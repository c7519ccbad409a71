#!/bin/sh
# Runs the unit test programs it is given (make unit): one line each, its own summary and how
# long it took, with every failed check shown above it. Unprivileged: started as root, each
# runs as nobody, so that it sees what a contributor without root sees (file permissions
# apply) and proves it needs nothing more. Exits 1 when any program failed.
set -u

as=""
if [ "$(id -u)" = 0 ]; then
	as="setpriv --reuid=65534 --regid=65534 --clear-groups --"
fi

now_ms() {
	echo $(($(date +%s%N) / 1000000))
}

start=$(now_ms)
failed=0
total=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for bin in "$@"; do
	total=$((total + 1))
	name=$(basename "$bin")
	t0=$(now_ms)
	$as "$bin" >"$out" 2>&1
	status=$?
	ms=$(($(now_ms) - t0))
	if [ $status -eq 0 ]; then
		printf '  %-8s %s (%d ms)\n' UNIT "$(tail -n 1 "$out")" "$ms"
	else
		failed=$((failed + 1))
		cat "$out"
		# A crash or a sanitizer's report leaves no summary line of the program's own.
		tail -n 1 "$out" | grep -q "^$name: " || echo "$name: exit status $status"
	fi
done
ms=$(($(now_ms) - start))
if [ $failed -ne 0 ]; then
	echo "unit tests: $failed of $total programs FAILED ($ms ms)"
	exit 1
fi
echo "unit tests: $total programs passed ($ms ms)"
