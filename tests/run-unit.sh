#!/usr/bin/env bash
# Runs each cmocka unit-test binary; cmocka prints its own per-test lines
# and per-binary summary. A binary that ends without that summary ("[====]
# N test(s) run.": a crash, a signal, an abort in a group set-up) dropped
# its remaining tests: reported as a failed check, not left out of the count.
set -u
fail=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for t in "$@"; do
	echo "== $t"
	"$t" 2>&1 | tee "$out"
	rc=${PIPESTATUS[0]}
	[ "$rc" -eq 0 ] || fail=1
	if ! grep -qE '^\[==========\] ([a-z_]+: )?[0-9]+ test\(s\) run\.$' "$out"; then
		echo "not ok - unit $(basename "$t"): ended without its summary (exit $rc): its remaining tests did not run"
		fail=1
	fi
done
exit $fail
