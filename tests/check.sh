#!/usr/bin/env bash
# make check: every test lane, each with its own log; failures do not stop
# the other lanes. Ends with one "N passed, M failed, K skipped" line over
# all lanes.
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
	# a lane that stopped early (set-up failed, killed, crashed) without a
	# failing check of its own would drop its remaining checks from the
	# count unseen: it counts as one failed check
	if [ "$rc" -ne 0 ] && [ "$(failed "$R/$name.txt")" -eq 0 ]; then
		echo "not ok - $name: the lane exited $rc without reporting a failing check (aborted)" | tee -a "$R/$name.txt"
	fi
	echo "=== $name: exit $rc, $((SECONDS - t0)) s"
	[ "$rc" -eq 0 ] || status=1
}
# Count: "ok -"/"not ok -" lines (TAP style) and cmocka's per-test lines.
# A check that could not run here ("skip -", cmocka's SKIPPED, or a TAP
# ok-line carrying the SKIP directive) is counted apart, never as a pass.
passed() { cat "$@" | grep -E '^ok - |^\[       OK \] ' | grep -vcE '^ok - .*# *SKIP'; }
failed() { cat "$@" | grep -E '^not ok - |^\[  FAILED  \] ' | grep -vc 'test(s)'; }
skipped() { cat "$@" | grep -E '^skip - |^ok - .*# *SKIP|^\[  SKIPPED \] ' | grep -vc 'test(s)'; }
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
# containerd + CRI + CNI running the shipped manifests (issue 15)
[ -x tests/cri/run.sh ] && lane cri env BK_BIN="$PWD/build" tests/cri/run.sh
[ -x tests/shim/run.sh ] && lane shim env BK_BIN="$PWD/build" tests/shim/run.sh
[ -x tests/shim/run.sh ] && lane shim-asan env BK_BIN="$PWD/build/san" tests/shim/run.sh
[ -x tests/contract/run.sh ] && lane contract env BK_BIN="$PWD/build" tests/contract/run.sh
[ -x tests/manifests/run.sh ] && lane manifests tests/manifests/run.sh
# operator files: alert rules, dashboard, man pages, --help/--version, completion, systemd unit
[ -x tests/ops/run.sh ] && lane ops tests/ops/run.sh
[ -x tests/valgrind.sh ] && lane valgrind env BK_BIN="$PWD/build" tests/valgrind.sh
[ -x tests/fuzz/run.sh ] && lane fuzz env FUZZ_SECONDS="${FUZZ_SECONDS:-5}" tests/fuzz/run.sh

pass=$(passed "$R"/*.txt)
failc=$(failed "$R"/*.txt)
skipc=$(skipped "$R"/*.txt)
echo
for f in "$R"/*.txt; do
	printf '%-12s %4d passed, %d failed, %d skipped\n' "$(basename "$f" .txt)" "$(passed "$f")" "$(failed "$f")" "$(skipped "$f")"
done
[ "$failc" -eq 0 ] || status=1
echo "$pass passed, $failc failed, $skipc skipped"
exit $status
