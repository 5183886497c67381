#!/usr/bin/env bash
# make bench: exec latency and throughput, next to baselines measured in the
# same run on the same machine (the machines are shared and noisy, so only
# the ratios mean something).
set -euo pipefail
BK_BIN=${BK_BIN:-$(cd "$(dirname "$0")/.." && pwd)/build}
N=${BENCH_N:-1000}
NRUNC=${BENCH_RUNC_N:-200}
D=$(mktemp -d /run/boxkite-bench-XXXXXX); chmod 755 "$D"
NAME=bench-$$
AGENT_PID=
COLD_PID=
FLOOR_CG=
FLOOR_V1=()
# the agent runs with the node's default pins and keepalive cgroup (what
# users run); an agent keeps both for the next one to recover from: the
# bench removes them again unless they were there before it
CG2=$(findmnt -t cgroup2 -n -o TARGET | head -1)
[ -e /sys/fs/bpf/boxkite ] && KEEP_PINS=1 || KEEP_PINS=
[ -e "$CG2/boxkite-keepalive" ] && KEEP_CG=1 || KEEP_CG=
# the report (report.md, the CDF plot, the raw samples) goes to build/bench
OUT=${BENCH_OUT:-$BK_BIN/bench}
S=$OUT/samples
rm -rf "$S" "$OUT/report.md" "$OUT/exec-cdf.png" "$OUT/terminal.txt" "$OUT/shim-rss.txt"
mkdir -p "$S"
cleanup() {
	set +e
	# the density run's pods (listed before each is made), then the bench's own
	[ -s "$D/density.names" ] && xargs -P4 -n1 "$BK_BIN/boxkitectl" sandbox delete <"$D/density.names" >/dev/null 2>&1
	"$BK_BIN/boxkitectl" sandbox delete "$NAME" >/dev/null 2>&1
	[ -n "$AGENT_PID" ] && kill -TERM "$AGENT_PID" 2>/dev/null && wait "$AGENT_PID"
	[ -n "$COLD_PID" ] && kill -TERM "$COLD_PID" 2>/dev/null && wait "$COLD_PID"
	rm -rf /sys/fs/bpf/boxkite-bench-cold; rmdir "$CG2/boxkite-bench-cold-keepalive" 2>/dev/null
	# the kernel floor's cgroups (each is removed as it ends; an interrupted one may stay)
	for d in $FLOOR_CG "${FLOOR_V1[@]}"; do rmdir "$d"/boxkite-floor-* 2>/dev/null; done
	# the DNS block's (issue 17): its fake resolver and server, pods, namespaces, agent
	for p in ${DNS_PIDS:-}; do kill "$p" 2>/dev/null; done
	for n in ${DNS_PODS:-}; do "$BK_BIN/boxkitectl" sandbox delete "$n" >/dev/null 2>&1; done
	for n in ${DNS_NETNS:-}; do ip netns del "$n" 2>/dev/null; done
	[ -n "${DNS_AGENT:-}" ] && kill -TERM "$DNS_AGENT" 2>/dev/null && wait "$DNS_AGENT"
	rm -rf /sys/fs/bpf/boxkite-bench-dns; rmdir "$CG2/boxkite-bench-dns-keepalive" 2>/dev/null
	[ -n "$KEEP_PINS" ] || rm -rf /sys/fs/bpf/boxkite
	[ -n "$KEEP_CG" ] || rmdir "$CG2/boxkite-keepalive" 2>/dev/null
	rm -rf "$D"
}
# everything printed from here on is also kept for the report, written at
# exit (also a failed or interrupted run's, marked as such), then cleanup
exec 3>&1 > >(tee "$OUT/terminal.txt")
TEE_PID=$!
on_exit() {
	local rc=$?
	set +e
	[ -n "${BENCH_KEEP_LOG:-}" ] && cp "$D/agent.log" "$BENCH_KEEP_LOG"
	exec >&3
	wait "$TEE_PID" 2>/dev/null
	"$(dirname "$0")/bench-report.sh" "$OUT" "$rc" "$D/agent.log"
	cleanup
}
trap on_exit EXIT
trap 'exit 130' INT TERM
"$BK_BIN/boxkite-agent" --socket "$D/pods/agent.sock" --admin-socket "$D/admin.sock" --state-dir "$D/state" --metrics 127.0.0.1:0 > "$D/agent.log" 2>&1 &
AGENT_PID=$!
for _ in $(seq 1 100); do [ -S "$D/admin.sock" ] && break; sleep 0.05; done
"$BK_BIN/boxkitectl" sandbox create "$NAME" --agent-socket "$D/pods/agent.sock" --shim-bin "$BK_BIN/boxkite-shim" > "$D/sb.json"
SID=$(jq -r .sandbox_container_id "$D/sb.json")
B=$BK_BIN/tests/bk-bench

# warm up
"$B" exec "$D/admin.sock" "$NAME" 50 1 >/dev/null
"$B" spawn 50 /bin/sh -c true >/dev/null

# Rounds: the machine's speed drifts over minutes (another tenant, the
# host), so a baseline measured once before the runs it is compared with
# can be 10% off for no reason of ours. The two sides of each target ratio
# are measured in R alternating rounds instead; a side's figures are those
# of all its rounds' samples pooled, and each ratio line also shows the
# range of the rounds' own ratios.
R=${BENCH_ROUNDS:-5}
# one round of a measure: bk-bench's (or bk-load's) summary appended to
# $D/NAME.rounds, its samples to $S/NAME.txt; the command's samples file
# is $D/round.txt
# and the CPU time the round took, as the kernel counts it: the whole
# machine's busy time (/proc/stat: user, nice, system, irq, softirq; not
# idle, iowait or steal), and the agent's own and its reaped children's
# (/proc/PID/stat: the commands it ran), the shim's (once the sandbox
# is up), and the client's (this script's reaped children: the measuring
# command, a few awk), in clock ticks, to $D/NAME.cpu
busy_ticks() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8}' /proc/stat; }
agent_ticks() { awk '{print $14 + $15, $16 + $17}' "/proc/$AGENT_PID/stat"; }
other_ticks() {
	local s=0
	[ -n "${SHIMPID:-}" ] && s=$(awk '{print $14 + $15}' "/proc/$SHIMPID/stat")
	echo "$s $(awk '{print $16 + $17}' "/proc/$$/stat")"
}
round() {
	local name=$1 m0 m1 a0 c0 a1 c1 s0 s1 k0 k1
	shift
	rm -f "$D/round.txt"
	m0=$(busy_ticks)
	read -r a0 c0 < <(agent_ticks)
	read -r s0 k0 < <(other_ticks)
	"$@" >>"$D/$name.rounds"
	m1=$(busy_ticks)
	read -r a1 c1 < <(agent_ticks)
	read -r s1 k1 < <(other_ticks)
	echo "$(tail -1 "$D/$name.rounds" | jq .n) $((m1 - m0)) $((a1 - a0)) $((c1 - c0)) $((s1 - s0)) $((k1 - k0))" >>"$D/$name.cpu"
	[ -s "$D/round.txt" ] && cat "$D/round.txt" >>"$S/$name.txt"
	return 0
}
# CPU ms per exec of a measure taken in rounds: "machine agent children
# shim client"
cpu_per() {
	awk -v hz="$(getconf CLK_TCK)" '{ n += $1; m += $2; a += $3; c += $4; s += $5; k += $6 }
		END { if (n > 0) printf "%.2f %.2f %.2f %.2f %.2f\n", m * 1000 / hz / n, a * 1000 / hz / n, c * 1000 / hz / n,
			s * 1000 / hz / n, k * 1000 / hz / n }' "$D/$1.cpu"
}
# the pooled figures of a measure taken in rounds (bk-bench's fields, and
# the rounds' p50s)
pooled() {
	jq -n --slurpfile r "$D/$1.rounds" --rawfile s "$S/$1.txt" '
		($s | split("\n") | map(select(length > 0) | tonumber) | sort) as $l | ($l | length) as $n
		| { n: $n, errors: ([$r[] | .errors // .transport_errors // 0] | add),
		    p50_us: $l[(($n - 1) / 2 | floor)], p99_us: $l[(($n - 1) * 0.99 | floor)],
		    mean_us: (($l | add) / $n), per_sec: ($n / ([$r[] | .n / .per_sec] | add)),
		    per_sec_with_connect: (if all($r[]; .per_sec_with_connect) then $n / ([$r[] | .n / .per_sec_with_connect] | add) else null end),
		    status_429: ([$r[] | .status_429 // 0] | add), status_other: ([$r[] | .status_other // 0] | add),
		    transport_errors: ([$r[] | .transport_errors // 0] | add),
		    rounds_p50: [$r[].p50_us], rounds_per_sec: [$r[].per_sec] }'
}
# the range of the rounds' own ratios of field F: "rounds a-b"
rounds_range() {
	jq -rn --argjson a "$1" --argjson b "$2" --arg f "$3" \
		'[range($a[$f] | length) | $a[$f][.] / $b[$f][.]] | "rounds \(min * 100 | round / 100)-\(max * 100 | round / 100)"'
}
NR=$(((N + R - 1) / R))
# the kernel floor (bk-bench floor): an exec's required kernel steps with
# no agent around them, into the sandbox container's mount namespace and
# in cgroups beside the agent's exec cgroups (under the pod's)
SPID=$(runc state "$SID" | jq .pid)
FLOOR_CG=$CG2$(dirname "$(awk -F: '$1 == "0" {print $3}' "/proc/$SPID/cgroup")")
# and where the pod is in v1 pids and memory hierarchies (hybrid hosts), there too, as the agent
for ctl in pids memory; do
	mnt=$(findmnt -n -t cgroup -o TARGET,OPTIONS | awk -v c="$ctl" '{ n = split($2, o, ","); for (i = 1; i <= n; i++) if (o[i] == c) print $1 }' | head -1)
	rel=$(awk -F: -v c="$ctl" '{ n = split($2, o, ","); for (i = 1; i <= n; i++) if (o[i] == c) print $3 }' "/proc/$SPID/cgroup" | head -1)
	[ -n "$mnt" ] && [ -n "$rel" ] && FLOOR_V1+=("$mnt$(dirname "$rel")")
done
: >"$D/one.log"
for _ in $(seq 1 "$R"); do
	round fork env BK_BENCH_SAMPLES="$D/round.txt" "$B" spawn "$NR" /bin/sh -c true
	l0=$(wc -l <"$D/agent.log")
	round admin env BK_BENCH_SAMPLES="$D/round.txt" "$B" exec "$D/admin.sock" "$NAME" "$NR" 1
	# (the 1-client execs' phases, below)
	l1=$(wc -l <"$D/agent.log")
	sed -n "$((l0 + 1)),${l1}p" "$D/agent.log" >>"$D/one.log"
	round floor env BK_BENCH_SAMPLES="$D/round.txt" "$B" floor "$NR" "$SPID" "$FLOOR_CG" "${FLOOR_V1[@]}"
done
fork=$(pooled fork)
boxk=$(pooled admin)
floor=$(pooled floor)
unsh=$(BK_BENCH_SAMPLES=$S/unshare.txt "$B" spawn "$N" unshare -n /bin/sh -c true)
runce=$(BK_BENCH_SAMPLES=$S/runc.txt "$B" spawn "$NRUNC" runc exec "$SID" /bin/sh -c true)
# whole processes, as a script calls them: `boxkitectl exec` against the
# reference sidecar's own mechanism (a fresh netns, then nsenter into the
# sandbox container's mount and pid namespaces as the pod's user)
SUID=$(awk '/^Uid:/ {print $2}' "/proc/$SPID/status"); SGID=$(awk '/^Gid:/ {print $2}' "/proc/$SPID/status")
NW=${BENCH_WHOLE_N:-$((N / 2))}
for _ in $(seq 1 "$R"); do
	round ctlw env BK_BENCH_SAMPLES="$D/round.txt" "$B" spawn "$(((NW + R - 1) / R))" \
		"$BK_BIN/boxkitectl" --admin-socket "$D/admin.sock" exec "$NAME" -- true
	round nsw env BK_BENCH_SAMPLES="$D/round.txt" "$B" spawn "$(((NW + R - 1) / R))" \
		unshare -n nsenter -t "$SPID" -m -p -S "$SUID" -G "$SGID" sh -c true
done
ctlw=$(pooled ctlw)
nsw=$(pooled nsw)
# the same execs from warm slots (exec.warm_slots 2; the default is 0, every
# exec made on request): a second agent, its own pins and sockets, on the
# same pod, in the same minute — what warm slots take off an exec, or add
echo '{"exec":{"warm_slots":2}}' > "$D/cold.json"
"$BK_BIN/boxkite-agent" --config "$D/cold.json" --socket "$D/cold/agent.sock" --admin-socket "$D/cold-admin.sock" \
	--state-dir "$D/cold-state" --bpffs /sys/fs/bpf/boxkite-bench-cold --metrics 127.0.0.1:0 > "$D/cold.log" 2>&1 &
COLD_PID=$!
for _ in $(seq 1 100); do [ -S "$D/cold-admin.sock" ] && break; sleep 0.05; done
"$B" exec "$D/cold-admin.sock" "$NAME" 50 1 >/dev/null
boxk_cold=$(BK_BENCH_SAMPLES=$S/admin-cold.txt "$B" exec "$D/cold-admin.sock" "$NAME" "$N" 1)
boxk_warm=$("$B" exec "$D/admin.sock" "$NAME" "$N" 1)
# paced: one request every ~10 ms (an AI agent's commands come with pauses
# between them; back to back, above, leaves the agent no moment to make
# slots), each against the same paced baseline
NP=${BENCH_PACED_N:-$((N / 2))}
fork_p=$(BK_BENCH_GAP_US=10000 "$B" spawn "$NP" /bin/sh -c true)
warm_p=$(BK_BENCH_GAP_US=10000 BK_BENCH_SAMPLES=$S/admin-paced.txt "$B" exec "$D/admin.sock" "$NAME" "$NP" 1)
cold_p=$(BK_BENCH_GAP_US=10000 "$B" exec "$D/cold-admin.sock" "$NAME" "$NP" 1)
kill -TERM "$COLD_PID"; wait "$COLD_PID"; COLD_PID=
# the agent's descriptors per live exec: K long execs at once, counted
# against the same agent idle; on the agent without warm slots, the
# default (a slot's descriptors would be in the idle count and not in the
# busy one)
K=${BENCH_FD_EXECS:-16}
clive() { "$BK_BIN/boxkitectl" --admin-socket "$D/admin.sock" status | jq .live_execs; }
cfds() { find "/proc/$AGENT_PID/fd" -mindepth 1 -maxdepth 1 | wc -l; }
fd0=$(cfds)
fdp=()
for _ in $(seq 1 "$K"); do "$BK_BIN/boxkitectl" --admin-socket "$D/admin.sock" exec "$NAME" -- sleep 4 >/dev/null 2>&1 & fdp+=($!); done
for _ in $(seq 1 150); do [ "$(clive)" -ge "$K" ] && break; sleep 0.05; done
fdl=$(clive); fd1=$(cfds)
wait "${fdp[@]}" || true

# --- through the shim: HTTPS with the pinned key, keep-alive ------------------------
URL=$(jq -r .url "$D/sb.json"); PIN=$(jq -r .pin "$D/sb.json"); TOK=$(jq -r .token_file "$D/sb.json")
MGR="nsenter --net=/run/netns/$(jq -r .client_netns "$D/sb.json")"
L=$BK_BIN/tests/bk-load
for _ in $(seq 1 50); do $MGR curl -sk --max-time 1 "$URL/health" | grep -q connected && break; sleep 0.1; done
# idle: after start-up and one health check, before any load
SHIMPID=$(runc state "$(jq -r .shim_container_id "$D/sb.json")" | jq .pid)
SHIMRSS=$(awk '/^VmRSS/ {print $2}' "/proc/$SHIMPID/status")
AGENTRSS=$(awk '/^VmRSS/ {print $2}' "/proc/$AGENT_PID/status")
# the shim's own pages (private: its heap, stacks, relocated data) and its
# share of the library pages it maps with other processes (PSS), beside
# RSS, which counts every mapped library page whole
SHIMPRIV=$(awk '/^Private_(Clean|Dirty):/ {s += $2} END {print s + 0}' "/proc/$SHIMPID/smaps_rollup")
SHIMPSS=$(awk '/^Pss:/ {print $2}' "/proc/$SHIMPID/smaps_rollup")
SHIMSHARED=$(awk '/^Shared_(Clean|Dirty):/ {s += $2} END {print s + 0}' "/proc/$SHIMPID/smaps_rollup")
# where the shim's RSS is, for the report: the kernel's split, then per
# mapped file (file-backed pages and anonymous ones: relocated data, heap)
{
	grep -E '^(VmRSS|RssAnon|RssFile|RssShmem|Threads)' "/proc/$SHIMPID/status"
	grep -E '^(Rss|Pss|Pss_Anon|Pss_File):' "/proc/$SHIMPID/smaps_rollup"
	echo
	printf '%8s %8s %8s  %s
' rss_kib file_kib anon_kib mapping
	awk '/^[0-9a-f]+-[0-9a-f]+ / { n = $6 == "" ? "[anon]" : $6; sub(".*/", "", n) }
		/^Rss:/ { r = $2 } /^Anonymous:/ { a[n] += $2; f[n] += r - $2 }
		END { for (k in a) if (a[k] + f[k] > 0) printf "%8d %8d %8d  %s\n", a[k] + f[k], f[k], a[k], k }' \
		"/proc/$SHIMPID/smaps" | sort -rn
} >"$OUT/shim-rss.txt"
$MGR "$L" "$URL" "$PIN" "$TOK" 50 1 >/dev/null
# the shim's overhead: HTTPS against admin execs, paired: bk-load follows
# each HTTPS request with the same exec over the admin socket, so the two
# are milliseconds apart, not a round apart (rounds of each in turn left
# the overhead's rounds between -0.8 and 1.5 ms here, on drift alone)
for _ in $(seq 1 "$R"); do
	round https env BK_LOAD_ADMIN="$D/admin.sock" BK_LOAD_SANDBOX="$NAME" BK_LOAD_ADMIN_SAMPLES="$D/round-admin.txt" \
		$MGR "$L" "$URL" "$PIN" "$TOK" "$NR" 1 true "$D/round.txt"
	tail -1 "$D/https.rounds" | jq -c .admin >>"$D/admin_again.rounds"
	cat "$D/round-admin.txt" >>"$S/admin_again.txt"
done
https=$(pooled https)
boxk_again=$(pooled admin_again)
# each round's median of its pairs' differences (HTTPS minus admin): their
# median and range
pairdiff=$(jq -rs '[.[].pair_diff_p50_us / 1000] | sort
	| "\(.[length / 2 | floor] * 100 | round / 100) ms (rounds \(.[0] * 100 | round / 100) to \(.[-1] * 100 | round / 100))"' \
	"$D/https.rounds")
"$BK_BIN/boxkitectl" --admin-socket "$D/admin.sock" exec "$NAME" -- sh -c 'head -c 102400 /dev/zero | tr "\\0" a > /workspace/view100k.txt' >/dev/null
view=$(BK_LOAD_ROUTE=/view BK_LOAD_BODY='{"path":"view100k.txt"}' $MGR "$L" "$URL" "$PIN" "$TOK" 300 1)
# 64 HTTPS clients against 2 admin clients, in alternating rounds (the
# 2-client figure is also the throughput target's); beside them, the
# host's own fork+exec in 2 parallel loops: what this machine's 2 cores do
# with no isolation at all (the throughput target's ceiling here)
fork_par() {
	local t0 t1 e1 e2
	t0=$(date +%s%N)
	"$B" spawn "$1" /bin/sh -c true >"$D/fp1.json" &
	local p1=$!
	"$B" spawn "$1" /bin/sh -c true >"$D/fp2.json"
	wait "$p1"
	t1=$(date +%s%N)
	e1=$(jq .errors "$D/fp1.json"); e2=$(jq .errors "$D/fp2.json")
	jq -nc --argjson n $((2 * $1)) --argjson ns $((t1 - t0)) --argjson e $((e1 + e2)) \
		'{n: $n, per_sec: ($n / ($ns / 1e9)), errors: $e}' >>"$D/fork2.rounds"
}
NC=${BENCH_CONC_N:-2000}
for _ in $(seq 1 "$R"); do
	round admin2 env BK_BENCH_SAMPLES="$D/round.txt" "$B" exec "$D/admin.sock" "$NAME" "$NR" 2
	round conc $MGR "$L" "$URL" "$PIN" "$TOK" "$(((NC + R - 1) / R))" 64 true "$D/round.txt"
	fork_par "$NR"
done
boxk2=$(pooled admin2)
conc=$(pooled conc)
fork2=$(jq -sc '{n: (map(.n) | add), errors: (map(.errors) | add), per_sec: ((map(.n) | add) / (map(.n / .per_sec) | add))}' "$D/fork2.rounds")

row() { printf '%-44s %6s %10.1f %10.1f %9.1f %s\n' "$1" "$(jq .n <<<"$2")" "$(jq .p50_us <<<"$2")" "$(jq .p99_us <<<"$2")" "$(jq .per_sec <<<"$2")" "errors=$(jq .errors <<<"$2")"; }
echo
printf '%-44s %6s %10s %10s %9s\n' "exec of /bin/sh -c true" n p50_us p99_us per_sec
row "host fork+exec+wait (baseline)" "$fork"
row "kernel floor: the exec's kernel steps alone" "$floor"
row "unshare -n (fresh netns only)" "$unsh"
row "boxkite admin exec, 1 client" "$boxk"
row "  ... from warm slots (exec.warm_slots 2)" "$boxk_cold"
row "  ... made on request again (same minute)" "$boxk_warm"
row "host fork+exec+wait, paced (10 ms apart)" "$fork_p"
row "boxkite admin exec, paced" "$warm_p"
row "  ... from warm slots (exec.warm_slots 2), paced" "$cold_p"
row "boxkite admin exec, 2 clients" "$boxk2"
row "runc exec into the same container" "$runce"
row "boxkitectl exec NAME -- true (whole process)" "$ctlw"
row "unshare -n nsenter -t PID -m -p -S -G (same)" "$nsw"
hrow() { printf '%-44s %6s %10.1f %10.1f %9.1f %s\n' "$1" "$(jq .n <<<"$2")" "$(jq .p50_us <<<"$2")" "$(jq .p99_us <<<"$2")" "$(jq .per_sec <<<"$2")" "$3"; }
hrow "HTTPS /exec via the shim, 1 client" "$https" "errors=$(jq .transport_errors <<<"$https")"
row "admin exec, paired with each HTTPS one above" "$boxk_again"
hrow "HTTPS /view 100 KB, 1 client" "$view" "errors=$(jq .transport_errors <<<"$view")"
hrow "HTTPS /exec, 64 clients" "$conc" "429s=$(jq .status_429 <<<"$conc") other=$(jq .status_other <<<"$conc") errors=$(jq .transport_errors <<<"$conc")"
echo
p50() { jq .p50_us <<<"$1"; }
r1=$(echo "$(p50 "$boxk") / $(p50 "$fork")" | bc -l)
r2=$(echo "$(p50 "$runce") / $(p50 "$boxk")" | bc -l)
tp=$(jq .per_sec <<<"$boxk2")
verdict() { if [ "$(echo "$1" | bc -l)" = 1 ]; then echo met; else echo MISSED; fi; }
# a target that the same run's own baseline misses too, with no isolation
# at all, is out of reach on this machine: said beside its MISSED, with
# that baseline's figure ($1: the condition, bc; $2: the figure)
reach() { if [ "$(echo "$1" | bc -l)" = 1 ]; then printf '; out of reach here: %s' "$2"; fi; }
# the targets of issue 16, each a ratio or figure of this run
tail99=$(echo "$(jq .p99_us <<<"$boxk") / $(p50 "$boxk")" | bc -l)
# bk-load's rate is of execs over open connections (a manager keeps its
# connections): each round's 64 TLS handshakes come before its clock. The
# rate with them inside it, one handshake per 6 execs at the default
# rounds, is reported beside it.
tp64=$(jq .per_sec <<<"$conc")
r64=$(echo "$tp64 / $tp" | bc -l)
tp64c=$(jq .per_sec_with_connect <<<"$conc")
n429=$(jq .status_429 <<<"$conc")
printf 'boxkite p50 / fork+exec p50   = %5.2fx   (%s; target <= 1.5x: %s)\n' "$r1" "$(rounds_range "$boxk" "$fork" rounds_p50)" "$(verdict "$r1 <= 1.5")"
# what of that is the kernel's: the floor's steps are fresh cgroups with
# the agent's limits (v2, CLONE_INTO_CGROUP; and v1 pids and memory where
# the pod is in them, joined by the child), pid and mount namespaces with
# a /proc of its own, a network namespace made beforehand (as the agent's
# pool does), the agent's own privilege drop (bk_privs_drop, its
# read-back included) and seccomp filter; not in it: the BPF links, the
# other v1 hierarchies, the /proc masks, the other read-backs
if [ "$(jq '.n > 0 and ([.rounds_p50[] > 0] | all)' <<<"$floor")" = true ]; then
	rf=$(echo "$(p50 "$floor") / $(p50 "$fork")" | bc -l)
	rbf=$(echo "$(p50 "$boxk") / $(p50 "$floor")" | bc -l)
	printf 'kernel floor p50 / fork+exec  = %5.2fx   (%s, %d errors; boxkite / floor %.2fx, %s; reported)\n' "$rf" \
		"$(rounds_range "$floor" "$fork" rounds_p50)" "$(jq .errors <<<"$floor")" "$rbf" "$(rounds_range "$boxk" "$floor" rounds_p50)"
else
	echo "kernel floor                  : not measured ($(jq .errors <<<"$floor") errors; bk-bench floor's first one is above)"
fi
# what an exec costs in CPU, 1 client: the latency above is bound by it
# (2 cores, both busy: work moved off an exec's way still delays the next)
read -r cf_m _ _ < <(cpu_per fork)
read -r ca_m ca_a ca_c _ < <(cpu_per admin)
read -r cl_m _ _ < <(cpu_per floor)
printf 'CPU per exec, whole machine   : boxkite %.2f ms (agent %.2f, its commands %.2f from clone to exit, the rest %.2f: kernel threads, the client), fork+exec %.2f ms, kernel floor %.2f ms; boxkite / fork+exec %.2fx (reported)\n' \
	"$ca_m" "$ca_a" "$ca_c" "$(echo "$ca_m - $ca_a - $ca_c" | bc -l)" "$cf_m" "$cl_m" "$(echo "$ca_m / $cf_m" | bc -l)"
rw=$(echo "$(p50 "$boxk_cold") / $(p50 "$boxk_warm")" | bc -l)
nwarm=$(jq -nR '[inputs | fromjson? | select(.event == "exec")] | "\([.[] | select(.warm)] | length) of \(length)"' "$D/cold.log")
printf 'warm slots / made on request, p50 = %5.2fx (exec.warm_slots 2 against the default 0; %s execs of that agent took a slot; reported)\n' "$rw" "$(jq -r . <<<"$nwarm")"
rpw=$(echo "$(p50 "$warm_p") / $(p50 "$fork_p")" | bc -l)
rpc=$(echo "$(p50 "$cold_p") / $(p50 "$warm_p")" | bc -l)
printf 'paced: boxkite p50 / fork+exec = %5.2fx  (warm slots / made on request: %.2fx; p99 %.1f vs %.1f ms; reported)\n' \
	"$rpw" "$rpc" "$(echo "$(jq .p99_us <<<"$warm_p") / 1000" | bc -l)" "$(echo "$(jq .p99_us <<<"$cold_p") / 1000" | bc -l)"
printf 'boxkite p99 / its p50         = %5.2fx   (target <= 3x: %s)\n' "$tail99" "$(verdict "$tail99 <= 3")"
rrf=$(jq -rn --argjson r "$runce" --argjson f "$floor" 'if $f.p50_us > 0 then "runc / kernel floor \($r.p50_us / $f.p50_us * 100 | round / 100)x" else "no kernel floor" end')
rrk=$(echo "$(p50 "$runce") / $(p50 "$fork")" | bc -l)
printf 'runc exec p50 / boxkite p50   = %5.2fx   (%s; target >= 20x: %s%s)\n' "$r2" "$rrf" "$(verdict "$r2 >= 20")" \
	"$(reach "$r2 < 20 && $rrk < 20" "$(printf 'runc / host fork+exec is %.2fx' "$rrk")")"
rctl=$(echo "$(p50 "$ctlw") / $(p50 "$nsw")" | bc -l)
printf 'boxkitectl exec / unshare+nsenter = %5.2fx (whole processes, p50; %s; target < 1x: %s)\n' "$rctl" "$(rounds_range "$ctlw" "$nsw" rounds_p50)" "$(verdict "$rctl < 1")"
tpf=$(jq .per_sec <<<"$fork2")
printf 'throughput, 2 clients         = %5.0f/s  (host fork+exec in 2 parallel loops, no isolation: %.0f/s, %d errors; target >= 600/s: %s%s)\n' \
	"$tp" "$tpf" "$(jq .errors <<<"$fork2")" "$(verdict "$tp >= 600")" \
	"$(reach "$tp < 600 && $tpf < 600" "$(printf 'the host itself does %.0f/s' "$tpf")")"
printf '64 HTTPS clients / 2 clients  = %5.2f    (%.0f/s on open connections; %s; the 64 connections opened within each round: %.2f, %.0f/s; target >= 0.9: %s; 429s: %d, target 0: %s)\n' \
	"$r64" "$tp64" "$(rounds_range "$conc" "$boxk2" rounds_per_sec)" "$(echo "$tp64c / $tp" | bc -l)" "$tp64c" \
	"$(verdict "$r64 >= 0.9")" "$n429" "$(verdict "$n429 == 0")"
# where the 64 clients' throughput goes: the CPU an exec costs on either
# side, by process (the machine is busy on both; the difference is what
# the HTTPS way and the concurrency add)
read -r c2_m c2_a c2_c c2_s c2_k < <(cpu_per admin2)
read -r c64_m c64_a c64_c c64_s c64_k < <(cpu_per conc)
printf 'CPU per exec, 2 / 64 clients  : machine %.2f / %.2f ms (agent %.2f / %.2f, commands %.2f / %.2f, shim %.2f / %.2f, client %.2f / %.2f, the rest %.2f / %.2f; reported)\n' \
	"$c2_m" "$c64_m" "$c2_a" "$c64_a" "$c2_c" "$c64_c" "$c2_s" "$c64_s" "$c2_k" "$c64_k" \
	"$(echo "$c2_m - $c2_a - $c2_c - $c2_s - $c2_k" | bc -l)" "$(echo "$c64_m - $c64_a - $c64_c - $c64_s - $c64_k" | bc -l)"
# the ratio split in two, exactly: how busy the machine was (throughput x
# CPU per exec, over its CPUs) and what an exec cost at either side. At
# 100% busy, only a cheaper exec raises the 64 clients' throughput. (The
# CPU is of whole rounds, handshakes included: the split is of the rate
# with them, per_sec_with_connect.)
NCPU=$(nproc)
if [ "$(echo "$c2_m > 0 && $c64_m > 0" | bc -l)" = 1 ]; then
	b2=$(echo "$tp * $c2_m / ($NCPU * 10)" | bc -l)
	b64=$(echo "$tp64c * $c64_m / ($NCPU * 10)" | bc -l)
	printf 'machine busy, 2 / 64 clients  : %.0f%% / %.0f%% of %d CPUs (throughput x CPU per exec, the rounds whole); 64 / 2 clients with the connections = busy %.2f x CPU per exec %.2f (2 / 64; reported)\n' \
		"$b2" "$b64" "$NCPU" "$(echo "$b64 / $b2" | bc -l)" "$(echo "$c2_m / $c64_m" | bc -l)"
fi
# the seccomp layer's own cost per exec, timed in the exec child: the
# install and the kernel's check (PR_GET_SECCOMP), from the audit line of
# every exec above; the receipt's read of the command's /proc/<pid>/status
# (by the agent, after execve) beside it
scq() { jq -nRc --arg k "$1" '[inputs | fromjson? | select(.event == "exec") | .phases_us[$k] // empty] | sort
	| {n: length, p50: (.[length / 2 | floor] // 0), p99: (.[length * 99 / 100 | floor] // 0)}' "${2:-$D/agent.log}"; }
si=$(scq seccomp); sr=$(scq seccomp_readback)
# where an exec's time goes: the agent's own per-phase timings, of the
# execs of the 1-client run (back to back, the p50 above) and of every exec
# above (the 64-client ones included, so those p50s are under load)
echo
printf '%-24s %8s %10s %10s   %8s %10s %10s\n' "exec phase (us)" "1 client" p50 p99 "all" p50 p99
for ph in cgroup bpf netns spawn run receipt teardown clone v1_join container privs landlock seccomp report seccomp_readback; do
	q1=$(scq "$ph" "$D/one.log"); q=$(scq "$ph")
	printf '%-24s %8d %10d %10d   %8d %10d %10d\n' "$ph" "$(jq .n <<<"$q1")" "$(jq .p50 <<<"$q1")" "$(jq .p99 <<<"$q1")" \
		"$(jq .n <<<"$q")" "$(jq .p50 <<<"$q")" "$(jq .p99 <<<"$q")"
done
echo
ms() { echo "$(jq ".$2" <<<"$1") / 1000" | bc -l; }
sct=$(ms "$si" p50)
# the install alone, in forked processes with no exec around it: the
# agent's filter against a 1-instruction one (what any filter costs here)
scm=$("$B" seccomp "${BENCH_SECCOMP_N:-500}")
scmin=$(echo "$(jq .minimal_p50_us <<<"$scm") / 1000" | bc -l)
printf 'seccomp layer, p50            = %5.3f ms  (install + check in the child; p99 %.3f; %d execs)  (target <= 0.1 ms: %s%s)\n' \
	"$sct" "$(ms "$si" p99)" "$(jq .n <<<"$si")" "$(verdict "$sct <= 0.1")" \
	"$(reach "$sct > 0.1 && $(jq .errors <<<"$scm") == 0 && $scmin > 0.1" "$(printf 'a 1-instruction filter alone takes %.3f ms' "$scmin")")"
printf 'seccomp receipt read, p50     = %5.3f ms  (the agent reads /proc/<pid>/status of the command; p99 %.3f)\n' \
	"$(ms "$sr" p50)" "$(ms "$sr" p99)"
printf 'seccomp install alone, p50    = %5.3f ms  (the agent'"'"'s filter; a 1-instruction filter: %.3f ms, the kernel'"'"'s fixed cost; %d errors; reported)\n' \
	"$(echo "$(jq .agent_p50_us <<<"$scm") / 1000" | bc -l)" "$scmin" "$(jq .errors <<<"$scm")"
ov=$(echo "($(p50 "$https") - $(p50 "$boxk_again")) / 1000" | bc -l)
ovr=$(jq -rn --argjson a "$https" --argjson b "$boxk_again" \
	'[range($a.rounds_p50 | length) | ($a.rounds_p50[.] - $b.rounds_p50[.]) / 1000] | "rounds \(min * 100 | round / 100) to \(max * 100 | round / 100) ms"')
printf 'shim overhead, p50            = %5.2f ms  (HTTPS p50 minus the paired admin execs'"'"' p50; %s; each pair'"'"'s difference, median: %s; %d admin errors; target <= 0.5 ms: %s)\n' \
	"$ov" "$ovr" "$pairdiff" "$(jq .errors <<<"$boxk_again")" "$(verdict "$ov <= 0.5")"
printf 'shim RSS, idle                = %5d KiB (target <= 8192 KiB: %s)\n' "$SHIMRSS" "$(verdict "$SHIMRSS <= 8192")"
printf 'shim memory of its own, idle  = %5d KiB (private pages; PSS %d KiB; RSS also counts %d KiB of library pages shared with other processes)\n' \
	"$SHIMPRIV" "$SHIMPSS" "$SHIMSHARED"
if [ "$fdl" -gt 0 ]; then
	fpe=$(echo "($fd1 - $fd0) / $fdl" | bc -l)
	printf 'agent fds per live exec       = %5.2f   (%d execs live: %d fds, %d idle; target <= 6: %s)\n' \
		"$fpe" "$fdl" "$fd1" "$fd0" "$(verdict "$fpe <= 6")"
else
	echo "agent fds per live exec       : MISSED: no exec was seen live"
fi
printf 'agent RSS, idle               = %5d KiB (after start-up, one sandbox and its shim'"'"'s health check; reported)\n' "$AGENTRSS"

# --- density: many local sandbox pods on one node, execs spread over them ------------------
# Every pod is a full local sandbox (sandbox container + shim: boxkitectl
# sandbox create always starts the shim, and the agent serves the pod the
# same way with or without its traffic). The 1-pod figure is this run's
# pod alone on the node, half its execs just before the others are made
# and half just after they are deleted, pooled: the machine's speed drifts
# over the minutes between (the main table's figure is older still).
# BENCH_DENSITY=0 skips it.
DPODS=${BENCH_DENSITY_PODS:-100}
DN=${BENCH_DENSITY_N:-1000}
echo
if [ "${BENCH_DENSITY:-1}" = 0 ]; then
	echo "density, $DPODS pods               : skipped (BENCH_DENSITY=0)"
else
	# the 1-pod figure, first half: this run's pod alone on the node, just before the others are made
	DH=$(((DN + 1) / 2))
	round admin-1pod env BK_BENCH_SAMPLES="$D/round.txt" "$B" exec "$D/admin.sock" "$NAME" "$DH" 1
	: >"$D/density.names"
	for i in $(seq 1 "$DPODS"); do echo "bd$$-$i" >>"$D/density.names"; done
	# created 4 at a time (their runc and ip commands overlap; each create
	# holds the local sandbox lock only while it makes its pod)
	dfail=0
	xargs -P4 -I{} sh -c '"$1" sandbox create "$2" --agent-socket "$3" --shim-bin "$4" >/dev/null 2>"$5/create-$2.err" || echo "$2" >>"$5/create.failed"' \
		sh "$BK_BIN/boxkitectl" {} "$D/pods/agent.sock" "$BK_BIN/boxkite-shim" "$D" <"$D/density.names" || dfail=1
	if [ -s "$D/create.failed" ] || [ "$dfail" = 1 ]; then
		f=$(head -1 "$D/create.failed" 2>/dev/null)
		echo "density, $DPODS pods               : MISSED: could not create every pod (first failure: ${f:-?}: $(head -c 300 "$D/create-$f.err" 2>/dev/null))"
	else
		pods=$(paste -sd, "$D/density.names")
		# one unmeasured exec in each pod first, as the 1-pod figure is warm too
		"$B" exec "$D/admin.sock" "$pods" "$DPODS" 1 >/dev/null
		many=$(BK_BENCH_SAMPLES=$S/admin-${DPODS}pods.txt "$B" exec "$D/admin.sock" "$pods" "$DN" 1)
		# and the one pod again with the others live (where a miss comes from: the number of pods, or moving between them)
		live=$("$B" exec "$D/admin.sock" "$NAME" "$DN" 1)
		arss=$(awk '/^VmRSS/ {print $2}' "/proc/$AGENT_PID/status")
		ahwm=$(awk '/^VmHWM/ {print $2}' "/proc/$AGENT_PID/status")
		afds=$(find "/proc/$AGENT_PID/fd" -mindepth 1 -maxdepth 1 | wc -l)
		athr=$(awk '/^Threads/ {print $2}' "/proc/$AGENT_PID/status")
		# the pods that exist now, and every exec answered (errors=0): none lost on the way
		npods=$("$BK_BIN/boxkitectl" sandbox list | grep -c "^bd$$-" || true)
		derr=$(jq .errors <<<"$many")
		# the 1-pod figure, second half: the others deleted (all of them:
		# none listed any more), then the same pod alone again
		xargs -P4 -n1 "$BK_BIN/boxkitectl" sandbox delete <"$D/density.names" >/dev/null 2>&1 || true
		ngone=$("$BK_BIN/boxkitectl" sandbox list | grep -c "^bd$$-" || true)
		[ "$ngone" = 0 ] && : >"$D/density.names"
		round admin-1pod env BK_BENCH_SAMPLES="$D/round.txt" "$B" exec "$D/admin.sock" "$NAME" "$DH" 1
		one=$(pooled admin-1pod)
		printf '%-44s %6s %10s %10s %9s\n' "exec of /bin/sh -c true, density" n p50_us p99_us per_sec
		row "admin exec, 1 pod alone (before + after)" "$one"
		row "admin exec, spread over $DPODS pods" "$many"
		row "admin exec, 1 pod, $DPODS others live" "$live"
		dr=$(echo "$(p50 "$many") / $(p50 "$one")" | bc -l)
		# the ratio against each half alone: how far the machine moved meanwhile
		dba=$(jq -rn --argjson m "$many" --argjson o "$one" \
			'[$o.rounds_p50[] | $m.p50_us / .] | "against before \(.[0] * 100 | round / 100), after \(.[1] * 100 | round / 100)"')
		printf 'density, %3d pods: p50 / 1-pod = %5.2fx   (%s; p99 %.1f us, 1 pod %.1f us; %d left after the delete; target <= 1.2x: %s)\n' \
			"$npods" "$dr" "$dba" "$(jq .p99_us <<<"$many")" "$(jq .p99_us <<<"$one")" "$ngone" \
			"$(verdict "$dr <= 1.2 && $npods == $DPODS && $derr == 0 && $ngone == 0")"
		printf 'agent RSS, %3d pods live      = %5d KiB (peak %d KiB; %d threads, %d fds; target <= 32768 KiB: %s)\n' \
			"$npods" "$arss" "$ahwm" "$athr" "$afds" "$(verdict "$arss <= 32768 && $npods == $DPODS")"
	fi
fi

# --- issue 18: streamed /exec (scripts/bench-stream.py), through the shim over HTTPS,
# alternated with the plain /exec in the same loop: time to the first stdout byte of
# a streamed `echo x` against the plain round trip, and per-chunk latency (a line
# stamped with CLOCK_REALTIME by the command every 20 ms, to its arrival here)
strm=$($MGR python3 "$(dirname "$0")/bench-stream.py" "$URL" "$PIN" "$TOK" "${BENCH_STREAM_N:-200}")
echo
printf '%-44s %6s %10s %10s\n' "streamed /exec via the shim (HTTPS)" n p50_us p99_us
printf '%-44s %6d %10.1f %10.1f\n' "plain /exec round trip (same loop)" "$(jq .n <<<"$strm")" "$(jq .plain_p50_us <<<"$strm")" "$(jq .plain_p99_us <<<"$strm")"
printf '%-44s %6d %10.1f %10.1f\n' "streamed: time to first stdout byte" "$(jq .n <<<"$strm")" "$(jq .ttfb_p50_us <<<"$strm")" "$(jq .ttfb_p99_us <<<"$strm")"
printf '%-44s %6d %10.1f %10.1f %s\n' "streamed: per-chunk latency (written->here)" "$(jq .chunk_n <<<"$strm")" "$(jq .chunk_p50_us <<<"$strm")" "$(jq .chunk_p99_us <<<"$strm")" "errors=$(jq .errors <<<"$strm")"
rs=$(echo "$(jq .ttfb_p50_us <<<"$strm") / $(jq .plain_p50_us <<<"$strm")" | bc -l)
printf 'stream TTFB p50 / plain p50    = %5.2fx   (target <= 1.2x: %s)\n' "$rs" "$(verdict "$rs <= 1.2")"

# --- issue 17: the DNS proxy's cost. An exec that resolves a name and connects
# to its address (bash: getaddrinfo, then a TCP connect), under an allow_domains
# profile (its DNS goes through the agent's proxy; the address opens from the
# answer) against the same exec under a pod-network profile that lets DNS go
# straight to the pod's resolver and admits the address (no proxy). Both on
# request (exec.warm_slots 0: allow_domains execs never take a warm slot), same
# agent, interleaved in chunks. Test-made world only: a fake resolver
# (tests/e2e/dnsfake.py: cdn.pythonhosted.org A 203.0.113.11) and a fake
# server (tests/e2e/world.py) in namespaces made here, linked to the two pods.
E2E=$(cd "$(dirname "$0")/../tests/e2e" && pwd)
cat >"$D/dns.json" <<'JSON'
{"exec":{"warm_slots":0},
 "profiles":{"bdns":{"allow_domains":[{"name":"*.pythonhosted.org","ports":"443"}]},
             "bnet":{"netns":"pod","dns":true,"allow":[{"cidr":"203.0.113.0/24","proto":"tcp","ports":"443"}]}}}
JSON
"$BK_BIN/boxkite-agent" --config "$D/dns.json" --socket "$D/dnsag/agent.sock" --admin-socket "$D/dns-admin.sock" \
	--state-dir "$D/dns-state" --bpffs /sys/fs/bpf/boxkite-bench-dns --metrics 127.0.0.1:0 > "$D/dns-agent.log" 2>&1 &
DNS_AGENT=$!
for _ in $(seq 1 100); do [ -S "$D/dns-admin.sock" ] && break; sleep 0.05; done
R=bkb-r$$; W=bkb-w$$
DNS_NETNS="$R $W"
for n in $R $W; do ip netns add "$n"; ip -n "$n" link set lo up; done
ip -n "$R" addr add 10.96.0.10/32 dev lo
ip -n "$W" addr add 203.0.113.11/32 dev lo
nsenter --net="/run/netns/$R" python3 "$E2E/dnsfake.py" "$D/upstream.log" 10.96.0.10 >"$D/dnsfake.out" 2>&1 &
DNS_PIDS=$!
nsenter --net="/run/netns/$W" python3 "$E2E/world.py" >"$D/world.out" 2>&1 &
DNS_PIDS="$DNS_PIDS $!"
i=0
for prof in bdns bnet; do
	i=$((i + 1)); pod=bk-$prof-$$
	DNS_PODS="${DNS_PODS:-} $pod"
	"$BK_BIN/boxkitectl" sandbox create "$pod" --policy "$prof" --agent-socket "$D/dnsag/agent.sock" \
		--shim-bin "$BK_BIN/boxkite-shim" >"$D/sb-$prof.json"
	P=$(jq -r .pod_netns "$D/sb-$prof.json")
	ip link add "bkbr$i$$" type veth peer name "bkbp$i$$"; ip link set "bkbr$i$$" netns "$R"; ip link set "bkbp$i$$" netns "$P"
	ip -n "$R" addr add "198.18.$i.1/24" dev "bkbr$i$$"; ip -n "$R" link set "bkbr$i$$" up
	ip -n "$P" addr add "198.18.$i.2/24" dev "bkbp$i$$"; ip -n "$P" link set "bkbp$i$$" up
	ip -n "$P" route add 10.96.0.10/32 via "198.18.$i.1"
	ip link add "bkbw$i$$" type veth peer name "bkbq$i$$"; ip link set "bkbw$i$$" netns "$W"; ip link set "bkbq$i$$" netns "$P"
	ip -n "$W" addr add "198.19.$i.1/24" dev "bkbw$i$$"; ip -n "$W" link set "bkbw$i$$" up
	ip -n "$P" addr add "198.19.$i.2/24" dev "bkbq$i$$"; ip -n "$P" link set "bkbq$i$$" up
	ip -n "$P" route add 203.0.113.0/24 via "198.19.$i.1"
done
for _ in $(seq 1 50); do grep -q ready "$D/dnsfake.out" && grep -q ready "$D/world.out" && break; sleep 0.1; done
# the name ends with a dot: absolute, no search domains tried (ndots:5)
RC="bash -c 'exec 3<>/dev/tcp/cdn.pythonhosted.org./443'"
DNSN=${BENCH_DNS_N:-300}
CH=50
: >"$S/dns-proxy.txt"; : >"$S/dns-direct.txt"; : >"$S/dns-proxy-true.txt"; : >"$S/dns-direct-true.txt"
derrs=0
for prof in bdns bnet; do BK_BENCH_CMD=$RC "$B" exec "$D/dns-admin.sock" "bk-$prof-$$" 20 1 >/dev/null; done
for _ in $(seq 1 $(((DNSN + CH - 1) / CH))); do
	for run in "bdns dns-proxy $RC" "bnet dns-direct $RC" "bdns dns-proxy-true true" "bnet dns-direct-true true"; do
		read -r prof f cmd <<<"$run"
		o=$(BK_BENCH_CMD=$cmd BK_BENCH_SAMPLES=$D/chunk.txt "$B" exec "$D/dns-admin.sock" "bk-$prof-$$" "$CH" 1)
		cat "$D/chunk.txt" >>"$S/$f.txt"
		derrs=$((derrs + $(jq .errors <<<"$o")))
	done
done
# p50 / p99 in microseconds of a samples file
pct() { sort -n "$1" | awk -v q="$2" '{ v[NR] = $1 } END { i = int(NR * q); if (i < 1) i = 1; printf "%.1f", v[i] }'; }
echo
printf '%-44s %6s %10s %10s\n' "DNS proxy (allow_domains), on request" n p50_us p99_us
for f in dns-proxy dns-direct dns-proxy-true dns-direct-true; do
	case $f in
	dns-proxy) l="resolve+connect, allow_domains (proxy)" ;;
	dns-direct) l="resolve+connect, pod network (no proxy)" ;;
	dns-proxy-true) l="true, allow_domains (proxy endpoint)" ;;
	dns-direct-true) l="true, pod network" ;;
	esac
	printf '%-44s %6d %10s %10s\n' "$l" "$(wc -l <"$S/$f.txt")" "$(pct "$S/$f.txt" 0.5)" "$(pct "$S/$f.txt" 0.99)"
done
dadd=$(echo "($(pct "$S/dns-proxy.txt" 0.5) - $(pct "$S/dns-direct.txt" 0.5)) / 1000" | bc -l)
dset=$(echo "($(pct "$S/dns-proxy-true.txt" 0.5) - $(pct "$S/dns-direct-true.txt" 0.5)) / 1000" | bc -l)
dres=$(grep -c '^cdn.pythonhosted.org 1$' "$D/upstream.log" || true)
printf 'DNS proxy added, p50          = %5.2f ms  (resolve+connect exec, proxy - no proxy; %.2fx; of it the endpoint per exec: %.2f ms; %d errors; the fake upstream saw %d A queries from both; target <= 1 ms: %s)\n' \
	"$dadd" "$(echo "$(pct "$S/dns-proxy.txt" 0.5) / $(pct "$S/dns-direct.txt" 0.5)" | bc -l)" "$dset" "$derrs" "$dres" \
	"$(verdict "$dadd <= 1 && $derrs == 0")"
