#!/usr/bin/env bash
# Runs every end-to-end test (tests/e2e/test-*.sh) against the binaries in
# $BK_BIN, as root. Each test prints "ok - ..." / "not ok - ..." /
# "skip - ..." lines and, last, its summary "# NAME: N passed, M failed,
# K skipped" (lib.sh's exit trap). A test that ends without that summary
# (killed by the timeout, a crash of the shell) dropped its remaining checks:
# that is reported as a failed check, not left out of the count.
set -u
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "not ok - e2e: the end-to-end tests need root"; exit 1; }
fail=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for t in tests/e2e/test-*.sh; do
	[ -n "${BK_E2E_ONLY:-}" ] && [[ $t != *"$BK_E2E_ONLY"* ]] && continue
	name=$(basename "$t" .sh)
	echo "== $t (${BK_BIN:-build})"
	timeout --kill-after=10 "${BK_E2E_TIMEOUT:-900}" bash "$t" 2>&1 | tee "$out"
	rc=${PIPESTATUS[0]}
	grep -qE "^# $name: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$" "$out" ||
		echo "not ok - $name: ended without its summary (exit $rc): its remaining checks did not run"
	[ "$rc" -eq 0 ] || fail=1
done
exit $fail
