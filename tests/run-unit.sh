#!/usr/bin/env bash
# Runs each cmocka unit-test binary; cmocka prints its own per-binary summary.
set -u
fail=0
for t in "$@"; do
	echo "== $t"
	if ! "$t"; then fail=1; fi
done
exit $fail
