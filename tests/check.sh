#!/usr/bin/env bash
# make check: every test lane, each with its own log; failures do not stop
# the other lanes. Ends with one "N passed, M failed" line over all lanes.
set -u
cd "$(dirname "$0")/.."
R=build/test-results
rm -rf "$R"; mkdir -p "$R"
status=0
lane() {
	local name=$1; shift
	echo "=== $name"
	local t0=$SECONDS
	"$@" 2>&1 | tee "$R/$name.txt"
	local rc=${PIPESTATUS[0]}
	echo "=== $name: exit $rc, $((SECONDS - t0)) s"
	[ "$rc" -eq 0 ] || status=1
}
make --no-print-directory all unit-bins >/dev/null || { echo "build failed"; exit 1; }
make --no-print-directory SANITIZE=1 all unit-bins >/dev/null || { echo "sanitizer build failed"; exit 1; }
lane layout tests/layout/check.py
lane unit tests/run-unit.sh build/tests/test-*
lane unit-asan tests/run-unit.sh build/san/tests/test-*
lane e2e env BK_BIN="$PWD/build" tests/run-e2e.sh
lane e2e-asan env BK_BIN="$PWD/build/san" tests/run-e2e.sh
# the most common production kernel, pure cgroup v2, in a VM (the other
# kernels: make check-kernels)
[ -x tests/vm/run-lane.sh ] && lane vm-6.1 env BK_VM_SET=check tests/vm/run-lane.sh 6.1
[ -x tests/shim/run.sh ] && lane shim env BK_BIN="$PWD/build" tests/shim/run.sh
[ -x tests/shim/run.sh ] && lane shim-asan env BK_BIN="$PWD/build/san" tests/shim/run.sh
[ -x tests/manifests/run.sh ] && lane manifests tests/manifests/run.sh
[ -x tests/valgrind.sh ] && lane valgrind env BK_BIN="$PWD/build" tests/valgrind.sh
[ -x tests/fuzz/run.sh ] && lane fuzz env FUZZ_SECONDS="${FUZZ_SECONDS:-5}" tests/fuzz/run.sh

# Count: "ok -"/"not ok -" lines (TAP style) and cmocka's per-test lines;
# "skip -" lines (a check that could not run here) are counted apart, never
# as passes.
pass=$(cat "$R"/*.txt | grep -cE '^ok - |^\[       OK \] ')
failc=$(cat "$R"/*.txt | grep -E '^not ok - |^\[  FAILED  \] ' | grep -vc 'test(s)')
skipc=$(cat "$R"/*.txt | grep -E '^skip - |^\[  SKIPPED \] ' | grep -vc 'test(s)')
echo
for f in "$R"/*.txt; do
	printf '%-12s %4d passed, %d failed, %d skipped\n' "$(basename "$f" .txt)" \
		"$(grep -cE '^ok - |^\[       OK \] ' "$f")" "$(grep -E '^not ok - |^\[  FAILED  \] ' "$f" | grep -vc 'test(s)')" \
		"$(grep -E '^skip - |^\[  SKIPPED \] ' "$f" | grep -vc 'test(s)')"
done
[ "$failc" -eq 0 ] || status=1
echo "$pass passed, $failc failed, $skipc skipped"
exit $status
