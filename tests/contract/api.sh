#!/usr/bin/env bash
# The contract lane, part one (run.sh runs it): the reference sidecar's
# wire contract (EvAlssment/boxkite at cac4559), driven as its manager drives
# it (manager.py), over pinned HTTPS against a local sandbox (agent + shim +
# sandbox containers, as the e2e tests make them). One script per route
# group: t-*.py, each printing "ok -" / "not ok -" / "skip -" lines, and
# toolcall.py against two more sandboxes with a fake backend.
# BK_CONTRACT_ONLY=<substring> runs one group. Root; under the e2e lock.
cd "$(dirname "$0")/../.."
. tests/e2e/lib.sh
[ "$(id -u)" -eq 0 ] || { not_ok "the contract lane needs root (runc sandboxes)"; exit 1; }
command -v curl >/dev/null && command -v python3 >/dev/null || { not_ok "curl and python3 are needed"; exit 1; }

# pty.exec_enabled: /pty-exec served, as the reference with BOXKITE_AGENT_PTY_ENABLED (t-pty.py)
bk_start_agent '{"pty":{"exec_enabled":true}}' || { not_ok "agent starts"; exit 1; }
SB=bkctr-$$
bk_sandbox_create "$SB" || { not_ok "sandbox created"; exit 1; }
SECDIR=$(dirname "$(sb "$SB" token_file)")
# one granted secret, in the shim's secrets directory (SIDECAR_SECRETS_DIR)
SECRET_VALUE="ctrSecret$(head -c 32 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 24)"
mkdir -p "$SECDIR/granted" && chmod 755 "$SECDIR/granted"
printf '%s' "$SECRET_VALUE" > "$SECDIR/granted/contract-key" && chmod 444 "$SECDIR/granted/contract-key"
CNS=/run/netns/$(sb "$SB" client_netns)
ctl receipt pubkey > "$T/receipt-pub.pem" # t-stream.py: the exit event's receipt

# run_group SANDBOX SCRIPT [VAR=VALUE...]: one group of checks, as the manager of that sandbox
run_group() {
	local s=$1 t=$2; shift 2
	echo "# $t ($s)"
	out=$(env BK_URL="$(sb "$s" url)" BK_PIN="$(sb "$s" pin)" BK_TOKEN_FILE="$(sb "$s" token_file)" \
		BK_SECRET_VALUE="$SECRET_VALUE" BK_RECEIPT_PUB="$T/receipt-pub.pem" PYTHONPATH=tests/contract "$@" \
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
}

for t in tests/contract/t-*.py; do
	[ -n "${BK_CONTRACT_ONLY:-}" ] && [[ $t != *"$BK_CONTRACT_ONLY"* ]] && continue
	run_group "$SB" "$t"
done

# /tool-call forwarding: two more sandboxes whose shims have BACKEND_URL set
# (http, and https verified against a CA of this test's own), each with a
# fake backend (backend.py) in the pod's own network namespace.
if [ -z "${BK_CONTRACT_ONLY:-}" ] || [[ toolcall == *"$BK_CONTRACT_ONLY"* ]]; then
	BD=$T/backend && mkdir -p "$BD/http" "$BD/https"
	(
		cd "$BD/https" || exit 1
		ec() { openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 "$@" 2>/dev/null; }
		ec -keyout ca.key -out ca.crt -subj /CN=contract-test-ca -addext basicConstraints=critical,CA:TRUE \
			-addext keyUsage=critical,keyCertSign &&
		ec -keyout selfsigned.key -out selfsigned.crt -subj /CN=localhost -addext subjectAltName=DNS:localhost &&
		for n in server:localhost evil:evil.example; do
			openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "${n%%:*}.key" \
				-subj "/CN=${n#*:}" -out "${n%%:*}.csr" 2>/dev/null &&
			printf 'subjectAltName=DNS:%s\n' "${n#*:}" > ext &&
			openssl x509 -req -in "${n%%:*}.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
				-extfile ext -out "${n%%:*}.crt" 2>/dev/null || exit 1
		done
	) || not_ok "toolcall: test certificates made"
	for scheme in http https; do
		s=bkctr-$scheme-$$
		if [ "$scheme" = http ]; then
			bk_sandbox_create "$s" --shim-env BACKEND_URL=http://127.0.0.1:18080 || { not_ok "toolcall: $scheme sandbox created"; continue; }
		else
			bk_sandbox_create "$s" --shim-env BACKEND_URL=https://localhost:18443/ \
				--shim-env SSL_CERT_FILE=/run/secrets/boxkite/backend-ca.crt || { not_ok "toolcall: $scheme sandbox created"; continue; }
			install -m 0644 "$BD/https/ca.crt" "$(dirname "$(sb "$s" token_file)")/backend-ca.crt"
		fi
		port=18080; [ "$scheme" = https ] && port=18443
		ip netns exec "$(sb "$s" pod_netns)" python3 tests/contract/backend.py --port $port --dir "$BD/$scheme" \
			$([ "$scheme" = https ] && echo --tls) 2>"$BD/$scheme.log" &
		for _ in $(seq 100); do [ -e "$BD/$scheme/ready" ] && break; sleep 0.05; done
		[ -e "$BD/$scheme/ready" ] || { not_ok "toolcall: $scheme fake backend started ($(tail -3 "$BD/$scheme.log"))"; continue; }
		run_group "$s" tests/contract/toolcall.py BK_BACKEND_SCHEME=$scheme BK_BACKEND_DIR="$BD/$scheme"
	done
fi
