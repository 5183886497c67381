#!/usr/bin/env bash
# make bench-ab-shim A=SHIM B=SHIM: two shim binaries against each other,
# for a change's effect on the shim's overhead. One agent, two sandbox
# pods, each with one of the shims; in alternating rounds, one HTTPS
# client (bk-load) sends each pod's shim N execs of `true`, each followed
# by the same exec over the admin socket (BK_LOAD_ADMIN): a pair's
# difference is that shim's overhead, measured milliseconds apart from its
# baseline. Prints each round's median pair difference, the pooled p50s,
# B - A, and each shim's CPU per request (/proc/PID/stat). A measure, not
# a test: the target is `make bench`'s.
#   AB_ROUNDS (10), AB_N (requests per round, 200).
set -euo pipefail
BK_BIN=${BK_BIN:-$(cd "$(dirname "$0")/.." && pwd)/build}
if [ $# -ne 2 ] || [ ! -x "$1" ] || [ ! -x "$2" ]; then
	echo "usage: $0 SHIM_A SHIM_B (two boxkite-shim binaries)" >&2
	exit 2
fi
SHIM=("$(realpath "$1")" "$(realpath "$2")")
R=${AB_ROUNDS:-10}
N=${AB_N:-200}
L=$BK_BIN/tests/bk-load
D=$(mktemp -d /run/boxkite-abs-XXXXXX)
chmod 755 "$D"
CG2=$(findmnt -t cgroup2 -n -o TARGET | head -1)
# pins and keepalive cgroup of its own: not the node's default agent's
TAG=boxkite-abs-${D##*-}
AGENT_PID=
cleanup() {
	set +e
	for k in 0 1; do "$BK_BIN/boxkitectl" sandbox delete "abs$k-$$" >/dev/null 2>&1; done
	[ -n "$AGENT_PID" ] && kill -TERM "$AGENT_PID" 2>/dev/null && wait "$AGENT_PID"
	rm -rf "/sys/fs/bpf/$TAG"
	rmdir "$CG2/$TAG-keepalive" 2>/dev/null
	rm -rf "$D"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
"$BK_BIN/boxkite-agent" --socket "$D/pods/agent.sock" --admin-socket "$D/admin.sock" --state-dir "$D/state" \
	--bpffs "/sys/fs/bpf/$TAG" --metrics off > "$D/agent.log" 2>&1 &
AGENT_PID=$!
for _ in $(seq 1 100); do [ -S "$D/admin.sock" ] && break; kill -0 "$AGENT_PID" 2>/dev/null || break; sleep 0.05; done
if [ ! -S "$D/admin.sock" ]; then
	echo "the agent did not start:" >&2
	tail -5 "$D/agent.log" >&2
	exit 1
fi
declare -a URL PIN TOK MGR SPID
for k in 0 1; do
	"$BK_BIN/boxkitectl" sandbox create "abs$k-$$" --agent-socket "$D/pods/agent.sock" \
		--shim-bin "${SHIM[$k]}" > "$D/sb$k.json"
	URL[$k]=$(jq -r .url "$D/sb$k.json")
	PIN[$k]=$(jq -r .pin "$D/sb$k.json")
	TOK[$k]=$(jq -r .token_file "$D/sb$k.json")
	MGR[$k]="nsenter --net=/run/netns/$(jq -r .client_netns "$D/sb$k.json")"
	for _ in $(seq 1 50); do ${MGR[$k]} curl -sk --max-time 1 "${URL[$k]}/health" | grep -q connected && break; sleep 0.1; done
	SPID[$k]=$(runc state "$(jq -r .shim_container_id "$D/sb$k.json")" | jq .pid)
	# warm up
	BK_LOAD_ADMIN="$D/admin.sock" BK_LOAD_SANDBOX="abs$k-$$" ${MGR[$k]} "$L" "${URL[$k]}" "${PIN[$k]}" "${TOK[$k]}" 30 1 > /dev/null
done
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
errors=0
declare -a T=(0 0)
printf 'round: median pair difference us (A B):'
for _ in $(seq 1 "$R"); do
	for k in 0 1; do
		t0=$(ticks "${SPID[$k]}")
		out=$(BK_LOAD_ADMIN="$D/admin.sock" BK_LOAD_SANDBOX="abs$k-$$" BK_LOAD_ADMIN_SAMPLES="$D/round-admin" \
			${MGR[$k]} "$L" "${URL[$k]}" "${PIN[$k]}" "${TOK[$k]}" "$N" 1 true "$D/round-https")
		T[$k]=$((T[k] + $(ticks "${SPID[$k]}") - t0))
		errors=$((errors + $(jq '.transport_errors + .status_other + .exit_nonzero + .admin.errors' <<<"$out")))
		cat "$D/round-https" >> "$D/https.$k"
		cat "$D/round-admin" >> "$D/admin.$k"
		jq .pair_diff_p50_us <<<"$out" >> "$D/diff.$k"
		printf ' %.0f' "$(jq .pair_diff_p50_us <<<"$out")"
	done
	printf ' |'
done
echo
med() { sort -n "$1" | awk '{a[NR]=$1} END {printf "%.0f", NR ? a[int((NR + 1) / 2)] : 0}'; }
hz=$(getconf CLK_TCK)
for k in 0 1; do
	h=$(med "$D/https.$k"); a=$(med "$D/admin.$k")
	printf '%s %s: HTTPS p50 %d us, admin p50 %d us, overhead %d us; rounds'"'"' median pair difference, median %d us; shim CPU %.0f us a request\n' \
		"$([ $k = 0 ] && echo A || echo B)" "${SHIM[$k]}" "$h" "$a" $((h - a)) "$(med "$D/diff.$k")" \
		"$(echo "${T[$k]} * 1000000 / $hz / ($R * $N)" | bc -l)"
done
printf 'B - A: rounds'"'"' median pair difference %+d us; shim CPU %+.0f us a request\n' \
	$(($(med "$D/diff.1") - $(med "$D/diff.0"))) "$(echo "(${T[1]} - ${T[0]}) * 1000000 / $hz / ($R * $N)" | bc -l)"
if [ "$errors" -gt 0 ]; then
	echo "$errors request(s) failed: the figures above leave them out" >&2
	exit 1
fi
