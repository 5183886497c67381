#!/usr/bin/env bash
# Runs every end-to-end test (tests/e2e/test-*.sh) against the binaries in
# $BK_BIN, as root. Each test prints "ok - ..." / "not ok - ..." lines.
set -u
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "e2e tests need root"; exit 1; }
fail=0
for t in tests/e2e/test-*.sh; do
	[ -n "${BK_E2E_ONLY:-}" ] && [[ $t != *"$BK_E2E_ONLY"* ]] && continue
	echo "== $t (${BK_BIN:-build})"
	timeout --kill-after=10 900 bash "$t" || fail=1
done
exit $fail
