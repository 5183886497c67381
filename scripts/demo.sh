#!/usr/bin/env bash
# make demo: start an agent, create a local sandbox pod (runc), drive it
# through its shim over HTTPS with the pinned key, show the isolation
# report, and tear everything down again.
set -euo pipefail
BK_BIN=${BK_BIN:-$(cd "$(dirname "$0")/.." && pwd)/build}
# the demo's own files (logs, the create's JSON); the agent and the sandbox
# use the node's default paths, as a user's would: /run/boxkite/pods/agent.sock
# (the shims'), /run/boxkite/admin.sock, /run/boxkite/state, pins under
# /sys/fs/bpf/boxkite. What the demo made there goes again at the end;
# what was there before stays.
D=$(mktemp -d /tmp/boxkite-demo-XXXXXX)
NAME=demo-$$
AGENT_PID=
CG2=$(findmnt -t cgroup2 -n -o TARGET | head -1)
KEEP=()
for p in /run/boxkite/pods /run/boxkite/state /run/boxkite /sys/fs/bpf/boxkite "$CG2/boxkite-keepalive"; do
	[ -e "$p" ] && KEEP+=("$p")
done
kept() { local k; for k in "${KEEP[@]}"; do [ "$k" = "$1" ] && return 0; done; return 1; }
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
cleanup() {
	set +e
	"$BK_BIN/boxkitectl" sandbox delete "$NAME" >/dev/null 2>&1
	if [ -n "$AGENT_PID" ]; then kill -TERM "$AGENT_PID"; wait "$AGENT_PID"; fi
	kept /run/boxkite/pods || rm -rf /run/boxkite/pods
	kept /run/boxkite/state || rm -rf /run/boxkite/state
	if ! kept /run/boxkite; then
		[ "$(ls -A /run/boxkite/local 2>/dev/null)" = .lock ] && rm -rf /run/boxkite/local
		rmdir /run/boxkite 2>/dev/null
	fi
	kept /sys/fs/bpf/boxkite || rm -rf /sys/fs/bpf/boxkite
	kept "$CG2/boxkite-keepalive" || rmdir "$CG2/boxkite-keepalive" 2>/dev/null
	rm -rf "$D"
	say "torn down: sandbox, agent, pins and cgroups are gone"
}
trap cleanup EXIT

say "starting boxkite-agent with its defaults (logs: JSON lines in $D/agent.log)"
# the verify/self-test probe targets: documentation and cluster-internal
# addresses (nothing is sent anywhere: the probes are refused in the kernel);
# every path is the default
cat > "$D/config.json" <<'EOF2'
{ "verify_targets": { "metadata": "169.254.169.254:80", "kubernetes_api": "10.96.0.1:443",
                      "pod": "10.244.0.10:80", "public": "203.0.113.10:443" } }
EOF2
"$BK_BIN/boxkite-agent" --config "$D/config.json" > "$D/agent.log" 2>&1 &
AGENT_PID=$!
for _ in $(seq 1 100); do
	[ -S /run/boxkite/admin.sock ] && break
	kill -0 "$AGENT_PID" 2>/dev/null || break
	sleep 0.05
done
[ -S /run/boxkite/admin.sock ] || { cat "$D/agent.log"; AGENT_PID=; exit 1; }

say "boxkitectl sandbox create $NAME   (runc: pod netns, sandbox + shim containers; returns once the shim reaches the agent)"
"$BK_BIN/boxkitectl" sandbox create "$NAME" | tee "$D/sb.json" | jq .
URL=$(jq -r .url "$D/sb.json"); PIN=$(jq -r .pin "$D/sb.json")
TOKEN_FILE=$(jq -r .token_file "$D/sb.json"); CLIENT_NS=$(jq -r .client_netns "$D/sb.json")

# The client plays the manager: it lives in the manager network namespace
# and pins the pod's public key; the token goes in a header file, never on
# a command line.
printf 'X-Sidecar-Auth-Token: %s\n' "$(cat "$TOKEN_FILE")" > "$D/auth-header"
chmod 600 "$D/auth-header"
api() {
	local route=$1; shift
	nsenter --net="/run/netns/$CLIENT_NS" curl -sS -k --pinnedpubkey "$PIN" -H @"$D/auth-header" \
		-H 'Content-Type: application/json' "$URL$route" "$@"
}
say "GET /health through the shim (no token needed)"
api /health | jq -c .

say "POST /exec  {\"command\": \"id; ip -o link; ls /workspace\"}"
api /exec -d '{"command":"id; ip -o link | cut -d: -f2; echo hello > /workspace/hello.txt; ls -l /workspace"}' | tee "$D/exec.json" | jq -r .stdout

say "a file round trip: POST /file-create, then /view and /ls (paths resolved beneath the allowed roots)"
api /file-create -d '{"path":"notes/plan.md","content":"step 1: isolate\nstep 2: verify\n"}' | jq -c .
api /view -d '{"path":"notes/plan.md","view_range":[2,2]}' | jq -c '{content, lines}'
api /ls -d '{"path":"notes"}' | jq -c .
echo "and a path that leaves the roots:"
api /view -d '{"path":"../../etc/shadow"}' | jq -c .

say "the metadata-endpoint check: curl http://169.254.169.254/ from inside the sandbox"
api /exec -d '{"command":"curl --max-time 3 -sS http://169.254.169.254/latest/meta-data/; echo \"exit: $?\""}' > "$D/md.json"
jq -r '.stdout, .stderr' "$D/md.json"
echo "denied by the BPF layer:"; jq -c '.denied[]' "$D/md.json"

say "the isolation receipt of that exec (read back from the kernel)"
jq .isolation "$D/md.json"

say "signed by the node key: checked with stock openssl, and one byte changed"
"$BK_BIN/boxkitectl" receipt pubkey > "$D/pub.pem"
jq -j .receipt.document "$D/md.json" > "$D/doc"
jq -r .receipt.signature "$D/md.json" | base64 -d > "$D/sig.bin"
openssl pkeyutl -verify -pubin -inkey "$D/pub.pem" -rawin -in "$D/doc" -sigfile "$D/sig.bin"
sed -i 's/"exit_code":0/"exit_code":9/' "$D/doc"
openssl pkeyutl -verify -pubin -inkey "$D/pub.pem" -rawin -in "$D/doc" -sigfile "$D/sig.bin" || echo "(altered: refused, as it must be)"

say "the same through the admin socket: boxkitectl exec $NAME -- uname -n"
"$BK_BIN/boxkitectl" exec "$NAME" -- uname -n

say "an operator's own check with stock bpftool: the pinned connect4 program"
bpftool prog show pinned /sys/fs/bpf/boxkite/bk_connect4

say "boxkitectl verify $NAME   (probes from a real exec context of the sandbox)"
"$BK_BIN/boxkitectl" verify "$NAME"

say "boxkitectl events --last 6   (what the node did: execs, each denial as it happened)"
"$BK_BIN/boxkitectl" events --last 6

say "boxkitectl top -n 1   (per sandbox: live execs, rates, memory and pids against the pod's caps)"
"$BK_BIN/boxkitectl" top -n 1 --interval 1

say "boxkitectl status (excerpt)"
"$BK_BIN/boxkitectl" status | jq -c '{node_safe, selftest, live_execs, execs_ok, denied_total, sandboxes: [.sandboxes[] | {pod, policy, layers, denials}]}'

MPORT=$(grep -o 'http://127.0.0.1:[0-9]*/metrics' "$D/agent.log" | head -1 | sed 's/.*:\([0-9]*\)\/metrics/\1/')
say "Prometheus metrics (excerpt) from http://127.0.0.1:$MPORT/metrics"
curl -s "http://127.0.0.1:$MPORT/metrics" | grep -E '^boxkite_(execs_total|denials_total|selftest_ok|live_execs)'

