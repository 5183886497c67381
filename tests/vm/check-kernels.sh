#!/usr/bin/env bash
# make check-kernels: the VM lane (tests/vm/run-lane.sh) for every kernel of
# the support matrix, each with its own log in build/test-results-kernels/;
# ends with one "N passed, M failed" line over all lanes.
# KERNELS="6.1 7" narrows the matrix. Run it under the e2e lock.
set -u
cd "$(dirname "$0")/../.." || exit 1
R=build/test-results-kernels
rm -rf "$R"; mkdir -p "$R"
status=0
for k in ${KERNELS:-6.1 6.12 7}; do
	echo "=== vm-$k"
	t0=$SECONDS
	tests/vm/run-lane.sh "$k" 2>&1 | tee "$R/vm-$k.txt"
	rc=${PIPESTATUS[0]}
	echo "=== vm-$k: exit $rc, $((SECONDS - t0)) s"
	[ "$rc" -eq 0 ] || status=1
done
echo
for f in "$R"/*.txt; do
	printf '%-12s %4d passed, %d failed, %d skipped\n' "$(basename "$f" .txt)" \
		"$(grep -c '^ok - ' "$f")" "$(grep -c '^not ok - ' "$f")" "$(grep -c '^skip - ' "$f")"
done
pass=$(cat "$R"/*.txt | grep -c '^ok - ')
failc=$(cat "$R"/*.txt | grep -c '^not ok - ')
skipc=$(cat "$R"/*.txt | grep -c '^skip - ')
[ "$failc" -eq 0 ] || status=1
echo "$pass passed, $failc failed, $skipc skipped"
exit $status
