#!/usr/bin/env bash
# Background processes (/process routes through the shim, issue 18): each
# is an exec with all its layers for its whole life — its network
# namespace holds only lo and the BPF filter refuses the metadata endpoint
# (connect: EPERM, from the cgroup's connect4 program) right after its
# start as seconds later, its 8 programs stay on its cgroup — and it dies
# (its cgroup gone, its processes gone) at its max_runtime_seconds, on
# stop, on kill-all, on /configure, when its pod goes away, when the agent
# stops and when the agent is killed (the next agent's recovery). One
# pod's output flood does not slow another pod's execs much.
. "$(dirname "$0")/lib.sh"

bk_start_agent || { not_ok "agent starts"; exit 1; }
bk_sandbox_create pr1 || { not_ok "sandbox pr1 created"; exit 1; }
bk_sandbox_create pr2 || { not_ok "sandbox pr2 created"; exit 1; }
UID1=$(sb pr1 pod_uid)
fake_metadata "$(sb pr1 pod_netns)" || not_ok "fake metadata server answers in pr1's pod network"

# papi SANDBOX METHOD PATH [JSON]: the shim's answer body (HTTPS, pinned, token)
papi() {
	local s=$1 m=$2 p=$3 body=${4:-}
	local a=(-sk --max-time 30 --pinnedpubkey "$(sb "$s" pin)" -H "X-Sidecar-Auth-Token: $(cat "$(sb "$s" token_file)")" -X "$m")
	[ -n "$body" ] && a+=(-H 'Content-Type: application/json' --data-binary "$body")
	nsenter --net="/run/netns/$(sb "$s" client_netns)" curl "${a[@]}" "$(sb "$s" url)$p"
}
# pstart SANDBOX COMMAND MAX_RUNTIME: the process id (retried while the
# shim reconnects to a new agent)
pstart() {
	local body id
	body=$(jq -nc --arg c "$2" --argjson m "$3" '{command: $c, max_runtime_seconds: $m}')
	for _ in $(seq 1 50); do
		id=$(papi "$1" POST /process/start "$body" | jq -r '.process_id // empty' 2>/dev/null)
		[ -n "$id" ] && { echo "$id"; return 0; }
		sleep 0.1
	done
	return 1
}
# the running process's exec cgroup (v2) and its pids: CG, PIDS
find_proc() {
	CG= PIDS=
	for _ in $(seq 1 100); do
		CG=$(live_exec_cg "$1")
		[ -n "$CG" ] && PIDS=$(cat "$CG/cgroup.procs" 2>/dev/null | tr '\n' ' ') && [ -n "${PIDS// /}" ] && return 0
		sleep 0.05
	done
	return 1
}
# gone CG PIDS...: the cgroup directory and every pid are gone
gone() {
	local cg=$1 p; shift
	[ -n "$cg" ] || return 1 # no process was seen: nothing can be said to be gone
	[ -d "$cg" ] && return 1
	for p in "$@"; do [ -d "/proc/$p" ] && return 1; done
	return 0
}
gone_in() { # SECONDS CG PIDS...
	local n=$(($1 * 10 * TIME_SCALE)); shift
	for _ in $(seq 1 "$n"); do gone "$@" && return 0; sleep 0.1; done
	return 1
}

# ---- isolation for its whole life ---------------------------------------------------------
PROBE='import socket, time, errno
t0 = time.time()
while time.time() - t0 < 4.5:
    s = socket.socket(); s.settimeout(0.5)
    try:
        s.connect(("169.254.169.254", 80)); r = "reached"
    except OSError as e:
        r = errno.errorcode.get(e.errno, str(e.errno))
    s.close(); print("%.2f %s" % (time.time() - t0, r), flush=True); time.sleep(0.2)
time.sleep(600)'
ID=$(pstart pr1 "python3 -c '$PROBE'" 30)
check "a background process starts (201, process_id)" test -n "$ID"
find_proc "$UID1" || not_ok "its exec cgroup holds its processes"
PID1=${PIDS%% *}
ifs0=$(nsenter --net="/proc/$PID1/ns/net" ip -o link show | awk -F': ' '{print $2}' | tr '\n' ' ')
progs0=$(bpftool cgroup show "$CG" 2>/dev/null | grep -c ' bk_')
podns=$(stat -Lc %i "/run/netns/$(sb pr1 pod_netns)")
netns=$(stat -Lc %i "/proc/$PID1/ns/net")
check "right after start: its network namespace holds only lo ($ifs0)" test "$ifs0" = "lo "
check "right after start: its own network namespace (inode $netns, the pod's $podns)" sh -c "test -n '$netns' && test '$netns' != '$podns'"
check "right after start: 8 boxkite programs on its cgroup ($progs0)" test "$progs0" = 8
sleep $((3 * TIME_SCALE))
ifs1=$(nsenter --net="/proc/$PID1/ns/net" ip -o link show | awk -F': ' '{print $2}' | tr '\n' ' ')
progs1=$(bpftool cgroup show "$CG" 2>/dev/null | grep -c ' bk_')
check "3 s later: still only lo ($ifs1), same namespace" sh -c "test '$ifs1' = 'lo ' && test $(stat -Lc %i /proc/$PID1/ns/net) = $netns"
check "3 s later: still 8 boxkite programs on its cgroup ($progs1)" test "$progs1" = 8
sleep 1.6
papi pr1 GET "/process/$ID/output" > "$T/probe.json"
jq -r .stdout_chunk "$T/probe.json" > "$T/probe.txt"
early=$(awk 'NF == 2 && $1 < 1 {print $2}' "$T/probe.txt" | sort -u | tr '\n' ' ')
late=$(awk 'NF == 2 && $1 >= 3 {print $2}' "$T/probe.txt" | sort -u | tr '\n' ' ')
n=$(grep -c . "$T/probe.txt")
echo "# metadata probe from the process: $n attempts; first second: $early; after 3 s: $late"
check "the metadata endpoint refused by BPF in the first second (EPERM: $early)" test "$early" = "EPERM "
check "... and after 3 s (EPERM: $late)" test "$late" = "EPERM "
check "... never reached ($n attempts)" sh -c "test $n -ge 15 && ! grep -q reached $T/probe.txt"
check "the denials are the exec's (agent log: denied to 169.254.169.254 for its exec)" \
	grep -q "\"denied\".*\"dst\":\"169.254.169.254\"" "$T/agent.log"

# ---- the ways it dies ---------------------------------------------------------------------
papi pr1 POST "/process/$ID/stop" > "$T/stop.json"
check "stop: status stopped ($(jq -c . "$T/stop.json"))" test "$(jq -r .status "$T/stop.json")" = stopped
check "stop: its cgroup and processes are gone" gone_in 3 "$CG" $PIDS

# stop as the reference's: SIGTERM to every process of the exec, its 5 s
# grace, then SIGKILL to the whole cgroup; exit_code is Python's
# returncode (-N: ended by signal N)
pstop() { # ID: the stop's answer in $T/stop.json, its duration in STOP_MS
	local t0; t0=$(date +%s%N)
	papi pr1 POST "/process/$1/stop" > "$T/stop.json"
	STOP_MS=$((($(date +%s%N) - t0) / 1000000))
}
poutput() { # ID TEXT: true once TEXT is in the process's output (5 s at most)
	for _ in $(seq 1 50); do papi pr1 GET "/process/$1/output" | jq -r .stdout_chunk | grep -q "$2" && return 0; sleep 0.1; done
	return 1
}
ID=$(pstart pr1 "trap 'echo got-term; exit 0' TERM; echo ready; while :; do sleep 0.1; done" 60)
find_proc "$UID1" || not_ok "stop (TERM trapped): the process runs"
poutput "$ID" ready || not_ok "stop (TERM trapped): the process set its trap"
pstop "$ID"
papi pr1 GET "/process/$ID/output" > "$T/term.json"
check "stop, TERM trapped: its trap's line is in its output ($(jq -c .stdout_chunk "$T/term.json"))" \
	grep -q got-term <(jq -r .stdout_chunk "$T/term.json")
check "stop, TERM trapped: status stopped, exit_code 0, its trap's exit ($(jq -c . "$T/stop.json"), ${STOP_MS} ms)" \
	test "$(jq -c '[.status, .exit_code]' "$T/stop.json")" = '["stopped",0]'
check "stop, TERM trapped: its cgroup and processes are gone" gone_in 3 "$CG" $PIDS
ID=$(pstart pr1 "sleep 600" 60)
find_proc "$UID1" || not_ok "stop (no handler): the process runs"
pstop "$ID"
check "stop, no TERM handler: ended by the TERM in ${STOP_MS} ms (< $(scaled_ms 2000)), exit_code -15 ($(jq -c . "$T/stop.json"))" \
	sh -c "test $STOP_MS -lt $(scaled_ms 2000) && test '$(jq -c '[.status, .exit_code]' "$T/stop.json")' = '[\"stopped\",-15]'"
check "stop, no TERM handler: its cgroup and processes are gone" gone_in 3 "$CG" $PIDS
ID=$(pstart pr1 "trap '' TERM; sleep 600" 60)
find_proc "$UID1" || not_ok "stop (TERM ignored): the process runs"
sleep 0.3
pstop "$ID"
check "stop, TERM ignored: SIGKILL after the 5 s grace (${STOP_MS} ms), exit_code -9 ($(jq -c . "$T/stop.json"))" \
	sh -c "test $STOP_MS -ge 4900 && test $STOP_MS -lt $(scaled_ms 7000) && test '$(jq -c '[.status, .exit_code]' "$T/stop.json")' = '[\"stopped\",-9]'"
check "stop, TERM ignored: its cgroup and processes are gone" gone_in 1 "$CG" $PIDS

ID=$(pstart pr1 "sleep 600" 2)
find_proc "$UID1" || not_ok "max_runtime: the process runs"
t0=$(date +%s%N)
gone_in 5 "$CG" $PIDS; r=$?
dt=$((($(date +%s%N) - t0) / 1000000))
check "max_runtime_seconds=2: its cgroup and processes gone (${dt} ms after it was seen)" test $r = 0
pstatus() { # ID STATUS: true once the process's status is STATUS (2 s at most)
	for _ in $(seq 1 20); do [ "$(papi pr1 GET "/process/$1/output" | jq -r .status)" = "$2" ] && return 0; sleep 0.1; done
	return 1
}
check "max_runtime_seconds=2: status killed" pstatus "$ID" killed
mr=$(papi pr1 GET "/process/$ID/output" | jq -c '[.status, .exit_code]')
check "max_runtime_seconds=2: exit_code -9, its SIGKILL ($mr)" test "$mr" = '["killed",-9]'

ID=$(pstart pr1 "sleep 600" 60)
find_proc "$UID1" || not_ok "kill-all: the process runs"
check "kill-all: killed 1" test "$(papi pr1 POST /process/kill-all | jq -r .killed)" = 1
check "kill-all: its cgroup and processes are gone" gone_in 3 "$CG" $PIDS

ID=$(pstart pr1 "sleep 600" 60)
find_proc "$UID1" || not_ok "configure: the process runs"
papi pr1 POST /configure '{"session_id": "next-tenant"}' > "$T/cf.json"
check "/configure (new session): its cgroup and processes are gone" gone_in 3 "$CG" $PIDS
# the wipe's file helper gets the sandbox's pidfd: it must still be one
# after the process's pipes were closed (a pipe closed twice once took the
# number of the /configure's pidfd: "cannot enter the sandbox container's
# mount namespace: Invalid argument")
check "/configure (new session): configured, the wipe done ($(jq -c . "$T/cf.json" | cut -c1-200))" \
	test "$(jq -r .status "$T/cf.json")" = configured
ID=$(pstart pr1 "sleep 600" 60)
find_proc "$UID1" || not_ok "configure null: the process runs"
papi pr1 POST /configure '{"session_id": null}' > "$T/cf.json"
check "/configure (session_id null): its cgroup and processes are gone" gone_in 3 "$CG" $PIDS
check "/configure (session_id null): configured, the wipe done ($(jq -c . "$T/cf.json" | cut -c1-200))" \
	test "$(jq -r .status "$T/cf.json")" = configured

bk_sandbox_create pr3 || not_ok "sandbox pr3 created"
ID=$(pstart pr3 "sleep 600" 60)
find_proc "$(sb pr3 pod_uid)" || not_ok "pod gone: the process runs"
bk_sandbox_delete pr3 > /dev/null 2>&1
check "its pod goes away: its cgroup and processes are gone" gone_in 5 "$CG" $PIDS

ID=$(pstart pr1 "sleep 600" 60)
find_proc "$UID1" || not_ok "agent stop: the process runs"
bk_stop_agent
check "the agent stops (SIGTERM): its cgroup and processes are gone" gone_in 3 "$CG" $PIDS
bk_start_agent || { not_ok "agent restarts"; exit 1; }

ID=$(pstart pr1 "sleep 600" 60)
find_proc "$UID1" || not_ok "agent killed: the process runs"
kill -9 "$AGENT_PID"; wait "$AGENT_PID" 2>/dev/null; AGENT_PID=
rm -f "$T/admin.sock" "$SOCK"
check "the agent killed (-9): the process outlives it, in its cgroup" sh -c "test -d $CG && grep -q . $CG/cgroup.procs"
bk_start_agent || { not_ok "agent restarts"; exit 1; }
check "... the next agent's recovery kills it: its cgroup and processes are gone" gone_in 3 "$CG" $PIDS
check "... recovery logged" grep -q '"recovered_exec".*"action":"killed"' "$T/agent.log"

# ---- one pod's flood, another pod's execs ---------------------------------------------------
exec_ms() { # median of 7 execs of pr2, in ms
	local i t0 v=()
	for i in 1 2 3 4 5 6 7; do
		t0=$(date +%s%N); ctl exec pr2 -- true > /dev/null; v+=($((($(date +%s%N) - t0) / 1000000)))
	done
	printf '%s\n' "${v[@]}" | sort -n | sed -n 4p
}
exec_ms > /dev/null # warm
base=$(exec_ms)
ID=$(pstart pr1 "yes flooooooooooooooooooooooooooooooooooooooooooooooooooood" 20)
sleep 0.5
during=$(exec_ms)
b1=$(papi pr1 GET "/process/$ID/output?since_offset=999999999999" | jq -r .next_offset)
papi pr1 POST "/process/$ID/stop" > /dev/null
echo "# pr2's exec round trip (median of 7): ${base} ms alone, ${during} ms while pr1's process wrote ${b1} bytes"
check "the flood flowed (over 10 MB through pr1's ring: $b1 bytes)" test "${b1:-0}" -gt 10000000
limit=$((2 * base + $(scaled_ms 100)))
check "pr2's execs during pr1's flood: ${during} ms, within 2x + 100 ms of ${base} ms" test "$during" -le "$limit"
gone_within 3 exec_cgroups_left
left=$(exec_cgroups_left)
check "no exec cgroup left ${left:+($left)}" test -z "$left"
