#!/usr/bin/env bash
# make bench-ab A=AGENT B=AGENT: two agent binaries against each other, for
# a change's effect on an exec's latency. Each agent runs with a sandbox
# pod of its own; their execs (bk-bench, over the admin socket) alternate
# in rounds, so that the machine's drift, which moves the p50 of runs a
# minute apart by 5-10% here, falls on both alike. Prints each round's p50,
# the pooled p25/p50/p75/p90/p99 of each, B/A, and each agent's phases (p50
# and p99 of its exec log lines). A measure, not a test: the targets are
# `make bench`'s.
#   AB_ROUNDS (10), AB_N (execs per round, 100), AB_CONC (clients, 1),
#   AB_GAP_US (pause between a client's execs, 0: back to back).
set -euo pipefail
BK_BIN=${BK_BIN:-$(cd "$(dirname "$0")/.." && pwd)/build}
if [ $# -ne 2 ] || [ ! -x "$1" ] || [ ! -x "$2" ]; then
	echo "usage: $0 AGENT_A AGENT_B (two boxkite-agent binaries)" >&2
	exit 2
fi
BIN=("$1" "$2")
R=${AB_ROUNDS:-10}
N=${AB_N:-100}
C=${AB_CONC:-1}
GAP=${AB_GAP_US:-0}
B=$BK_BIN/tests/bk-bench
D=$(mktemp -d /run/boxkite-ab-XXXXXX)
chmod 755 "$D"
CG2=$(findmnt -t cgroup2 -n -o TARGET | head -1)
PIDS=()
# pins and keepalive cgroup of their own: not the node's default agent's
TAG=boxkite-ab-${D##*-}
cleanup() {
	set +e
	for k in 0 1; do
		"$BK_BIN/boxkitectl" sandbox delete "ab$k-$$" >/dev/null 2>&1
		[ -n "${PIDS[$k]:-}" ] && kill -TERM "${PIDS[$k]}" 2>/dev/null && wait "${PIDS[$k]}"
		rm -rf "/sys/fs/bpf/$TAG$k"
		rmdir "$CG2/$TAG$k-keepalive" 2>/dev/null
	done
	rm -rf "$D"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
for k in 0 1; do
	mkdir -p "$D/$k"
	"${BIN[$k]}" --socket "$D/$k/pods/agent.sock" --admin-socket "$D/$k/admin.sock" --state-dir "$D/$k/state" \
		--bpffs "/sys/fs/bpf/$TAG$k" --metrics off > "$D/$k/agent.log" 2>&1 &
	PIDS[$k]=$!
	for _ in $(seq 1 100); do [ -S "$D/$k/admin.sock" ] && break; kill -0 "${PIDS[$k]}" 2>/dev/null || break; sleep 0.05; done
	if [ ! -S "$D/$k/admin.sock" ]; then
		echo "agent ${BIN[$k]} did not start:" >&2
		tail -5 "$D/$k/agent.log" >&2
		exit 1
	fi
	"$BK_BIN/boxkitectl" sandbox create "ab$k-$$" --agent-socket "$D/$k/pods/agent.sock" \
		--shim-bin "$BK_BIN/boxkite-shim" > /dev/null
	"$B" exec "$D/$k/admin.sock" "ab$k-$$" 30 1 > /dev/null # warm up
done
errors=0
printf 'round p50 us (A B):'
for _ in $(seq 1 "$R"); do
	for k in 0 1; do
		out=$(BK_BENCH_SAMPLES="$D/round" BK_BENCH_GAP_US=$GAP "$B" exec "$D/$k/admin.sock" "ab$k-$$" "$N" "$C")
		errors=$((errors + $(jq .errors <<<"$out")))
		cat "$D/round" >> "$D/samples.$k"
		printf ' %s' "$(sort -n "$D/round" | awk '{a[NR]=$1} END {printf "%d", a[int((NR + 1) / 2)]}')"
	done
	printf ' |'
done
echo
# nearest rank: the ceil(q * n)-th of the sorted samples
pooled() {
	sort -n "$D/samples.$1" | awk '
		function q(f) { i = int(f * NR); if (i < f * NR) i++; return a[i < 1 ? 1 : i] }
		{a[NR]=$1} END {printf "%d %d %d %d %d %d\n", NR, q(0.25), q(0.5), q(0.75), q(0.9), q(0.99)}'
}
read -r na a25 a50 a75 a90 a99 < <(pooled 0)
read -r nb b25 b50 b75 b90 b99 < <(pooled 1)
printf 'A %s: n %d, p25 %d, p50 %d, p75 %d, p90 %d, p99 %d us\n' "${BIN[0]}" "$na" "$a25" "$a50" "$a75" "$a90" "$a99"
printf 'B %s: n %d, p25 %d, p50 %d, p75 %d, p90 %d, p99 %d us\n' "${BIN[1]}" "$nb" "$b25" "$b50" "$b75" "$b90" "$b99"
printf 'B / A, p50: %.3f (%+d us); p99: %.3f (%+d us)\n' "$(echo "$b50 / $a50" | bc -l)" $((b50 - a50)) \
	"$(echo "$b99 / $a99" | bc -l)" $((b99 - a99))
# each agent's phases, p50 and p99 over its measured execs (the last R*N
# exec lines)
for q in 50 99; do
	for k in 0 1; do
		printf '%s phases p%s us: ' "$([ $k = 0 ] && echo A || echo B)" $q
		jq -nrR --argjson n $((R * N)) --argjson q $q '
			[inputs | fromjson? | select(.event == "exec")] | .[-$n:] as $l
			| def p(f): ([$l[] | f] | sort | .[(length - 1) * $q / 100 | floor]);
			  ["cgroup", "bpf", "netns", "spawn", "run", "receipt", "teardown"]
			  | map(. as $k | "\($k) \(p(.phases_us[$k] // 0))") | join(", ")
			  + ", duration \(p(.duration_ms) * 1000 | floor)"' "$D/$k/agent.log"
	done
done
if [ "$errors" -gt 0 ]; then
	echo "$errors exec(s) failed: the figures above leave them out" >&2
	exit 1
fi
