#!/usr/bin/env bash
# The agent's own resources cannot be taken by one peer or one pod:
#  connections: a per-peer (per-pod; per uid outside pods) limit, a
#    deadline for the first frame, a separate admin budget; refused
#    callers cost no thread;
#  descriptors: RLIMIT_NOFILE raised to its hard limit at start, few fds
#    per live exec, a per-pod share of the node's exec budget (429
#    pod_exec_limit) so that one pod cannot make another's exec fail.
. "$(dirname "$0")/lib.sh"

FLOOD=$(dirname "$0")/flood.py
mkdir -m 1777 "$T/flood"
call_as() { in_cgroup_of "$(container_cg "$1" "$2")" "$CTL" call --socket "$SOCK" "${@:3}"; }
nofile() { awk '/^Max open files/ {print $4 " " $5}' "/proc/$AGENT_PID/limits"; }
agent_fds() { ls "/proc/$AGENT_PID/fd" | wc -l; }
ms() { echo $(($(date +%s%N) / 1000000)); }

# soft below hard: the agent must raise it
BK_AGENT_WRAP="prlimit --nofile=1024:8192" bk_start_agent || { not_ok "agent starts"; exit 1; }
bk_sandbox_create lima || { not_ok "sandbox lima created"; exit 1; }
bk_sandbox_create limb || { not_ok "sandbox limb created"; exit 1; }

# --- RLIMIT_NOFILE -------------------------------------------------------------------------------
read -r soft hard <<< "$(nofile)"
check "RLIMIT_NOFILE soft raised to the hard limit ($soft/$hard)" test "$soft" = "$hard"
check "the raise is logged" grep -q '"nofile_raised"' "$T/agent.log"

# --- a flood of silent connections ---------------------------------------------------------------
# 300 from an unprivileged host user, 300 from pod lima (keyed by its pod)
N=300
HOLD=$((12 * TIME_SCALE))
setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 - "$SOCK" $N "$T/flood/host.ready" $HOLD \
	< "$FLOOD" > "$T/flood/host.out" 2>&1 &
fh=$!
in_cgroup_of "$(container_cg lima shim_container_id)" python3 - "$SOCK" $N "$T/flood/pod.ready" $HOLD \
	< "$FLOOD" > "$T/flood/pod.out" 2>&1 &
fp=$!
for _ in $(seq 1 100); do [ -f "$T/flood/host.ready" ] && [ -f "$T/flood/pod.ready" ] && break; sleep 0.1; done
t0=$(ms)
st=$(timeout 20 "$CTL" --admin-socket "$T/admin.sock" status 2>&1 | jq -r .node_safe 2>/dev/null)
t1=$(ms)
check "during the flood boxkitectl status answers ($((t1 - t0)) ms)" \
	test "$st" = true -a $((t1 - t0)) -lt "$(scaled_ms 3000)"
t0=$(ms)
st=$(timeout 20 bash -c "$(declare -f call_as in_cgroup_of container_cg sb); T=$T; SOCK=$SOCK; CG2=$CG2; CTL=$CTL; \
	call_as limb shim_container_id exec '{\"command\":\"echo alive\"}'" 2>&1 | jq -r .body.stdout 2>/dev/null)
t1=$(ms)
check "during the flood another pod's exec runs ($((t1 - t0)) ms)" \
	test "$st" = alive -a $((t1 - t0)) -lt "$(scaled_ms 5000)"
wait $fh $fp
echo "# host flood: $(tr '\n' ' ' < "$T/flood/host.out")"
echo "# pod flood:  $(tr '\n' ' ' < "$T/flood/pod.out")"
check "the host peer's connections beyond its limit were refused at once (429)" \
	awk '/^connected/ { exit !($4 >= 200) }' "$T/flood/host.out"
check "the pod's connections beyond its limit were refused at once (429)" \
	awk '/^connected/ { exit !($4 >= 200) }' "$T/flood/pod.out"
check "silent host connections dropped after the first-frame deadline" \
	awk -v lim=$((8 * TIME_SCALE)) '/^closed/ { exit !($4 == 0 && $6 <= lim) }' "$T/flood/host.out"
check "silent pod connections dropped after the first-frame deadline" \
	awk -v lim=$((8 * TIME_SCALE)) '/^closed/ { exit !($4 == 0 && $6 <= lim) }' "$T/flood/pod.out"
check "the flooding pod works again afterwards" test "$(ctl exec lima -- echo back 2>&1)" = back
check "refusals are logged" grep -q '"connection_refused"' "$T/agent.log"

# --- descriptors per live exec -------------------------------------------------------------------
ctl exec limb -- true >/dev/null   # whatever an exec opens once for good
sleep 0.5
base=$(agent_fds)
NE=8
pids=()
for i in $(seq 1 $NE); do ctl exec limb --json -- sleep $((4 * TIME_SCALE)) > "$T/fd$i.json" & pids+=($!); done
live=0
for _ in $(seq 1 $((60 * TIME_SCALE))); do
	live=$(ctl status | jq .live_execs); [ "$live" = $NE ] && break; sleep 0.1
done
# An exec counts as live from the moment it is accepted, while the agent is still setting it up
# (with setup's passing descriptors open; on a slow sanitizer build that takes a second or more for
# eight). The steady state is the smallest count seen while all of them are still live.
during=$(agent_fds)
for _ in $(seq 1 $((15 * TIME_SCALE))); do
	sleep 0.1
	n=$(agent_fds); [ "$(ctl status | jq .live_execs)" = $NE ] || break
	[ "$n" -lt "$during" ] && during=$n
done
wait "${pids[@]}"
per=$(awk -v a="$during" -v b="$base" -v n=$NE 'BEGIN { printf "%.1f", (a - b) / n }')
echo "# agent fds: $base idle, $during with $live live execs: $per per exec"
check "$NE execs were live together" test "$live" = $NE
check "at most 6 agent fds per live exec ($per)" awk -v p="$per" 'BEGIN { exit !(p <= 6) }'
sleep 1
check "no fd left behind after the execs ($(agent_fds) vs $base)" test "$(agent_fds)" -le "$base"

# --- one pod cannot starve another of descriptors ------------------------------------------------
# soft 512 (what the old agent kept: ~15 fds per exec made ~32 execs its
# end), hard 1024 (the exec child's own limit)
bk_stop_agent
BK_AGENT_WRAP="prlimit --nofile=512:1024" bk_start_agent || { not_ok "agent restarts with nofile 512:1024"; exit 1; }
NA=36
pids=()
for i in $(seq 1 $NA); do ctl exec lima --json -- sleep $((8 * TIME_SCALE)) > "$T/a$i.json" 2>&1 & pids+=($!); done
sleep $((3 * TIME_SCALE))
ctl exec limb --json -- echo fine > "$T/b.json" 2>&1
check "while pod lima runs $NA execs, pod limb's exec works" test "$(jq -r .stdout "$T/b.json" 2>/dev/null)" = fine
wait "${pids[@]}"
ran=$(cat "$T"/a*.json | jq -s '[.[] | select(.exit_code == 0)] | length' 2>/dev/null)
limited=$(cat "$T"/a*.json | jq -s '[.[] | select(.code == "pod_exec_limit")] | length' 2>/dev/null)
echo "# pod lima: $ran ran, $limited refused pod_exec_limit of $NA; limb: $(head -c 300 "$T/b.json")"
check "pod lima's execs beyond its share refused with pod_exec_limit" test "${limited:-0}" -gt 0
check "no exec failed with EMFILE" sh -c "! grep -qi 'too many open files' $T/a*.json $T/b.json"
check "status shows the budget" test "$(ctl status | jq '.limits.exec_per_pod > 0 and .limits.nofile == 1024')" = true
