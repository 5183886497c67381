#!/usr/bin/env bash
# The contract lane: the reference sidecar's wire contract (EvAlssment/boxkite
# at cac4559), driven as its manager drives it (manager.py), over pinned
# HTTPS against a local sandbox (agent + shim + sandbox containers, as the
# e2e tests make them). One script per route group: t-*.py, each printing
# "ok -" / "not ok -" / "skip -" lines. BK_CONTRACT_ONLY=<substring> runs
# one group. Root; run under the e2e lock (machine-global state).
cd "$(dirname "$0")/../.."
TEST_NAME=contract
. tests/e2e/lib.sh
[ "$(id -u)" -eq 0 ] || { not_ok "the contract lane needs root (runc sandboxes)"; exit 1; }
command -v curl >/dev/null && command -v python3 >/dev/null || { not_ok "curl and python3 are needed"; exit 1; }

bk_start_agent || { not_ok "agent starts"; exit 1; }
SB=bkctr-$$
bk_sandbox_create "$SB" || { not_ok "sandbox created"; exit 1; }
SECDIR=$(dirname "$(sb "$SB" token_file)")
# one granted secret, in the shim's secrets directory (SIDECAR_SECRETS_DIR)
SECRET_VALUE="ctrSecret$(head -c 32 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 24)"
mkdir -p "$SECDIR/granted" && chmod 755 "$SECDIR/granted"
printf '%s' "$SECRET_VALUE" > "$SECDIR/granted/contract-key" && chmod 444 "$SECDIR/granted/contract-key"
CNS=/run/netns/$(sb "$SB" client_netns)

for t in tests/contract/t-*.py; do
	[ -n "${BK_CONTRACT_ONLY:-}" ] && [[ $t != *"$BK_CONTRACT_ONLY"* ]] && continue
	echo "# $t"
	out=$(env BK_URL="$(sb "$SB" url)" BK_PIN="$(sb "$SB" pin)" BK_TOKEN_FILE="$SECDIR/token" \
		BK_SECRET_VALUE="$SECRET_VALUE" PYTHONPATH=tests/contract \
		timeout 300 nsenter --net="$CNS" python3 "$t" 2>&1)
	rc=$?
	printf '%s\n' "$out"
	# fold the script's lines into this lane's count
	PASS=$((PASS + $(grep -c '^ok - ' <<<"$out")))
	FAIL=$((FAIL + $(grep -c '^not ok - ' <<<"$out")))
	SKIP=$((SKIP + $(grep -c '^skip - ' <<<"$out")))
	if [ "$rc" -ne 0 ] && ! grep -q '^not ok - ' <<<"$out"; then
		not_ok "$t exited $rc without a failing check (aborted)"
	fi
done
