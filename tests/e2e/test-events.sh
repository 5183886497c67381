#!/usr/bin/env bash
# boxkitectl events: the node's event stream (issue 19). Execs starting and
# ending, denials as they happen (not when the exec ends), self-test
# results; --follow streams them within 100 ms, --pod filters, --json gives
# the agent's own log lines; a follower that hangs up costs the agent
# nothing, and one still connected when the agent stops is told so.
. "$(dirname "$0")/lib.sh"

now_ms() { echo $(($(date +%s%N) / 1000000)); }
# ts_ms TS: an agent timestamp (2026-12-02T01:02:03.456Z) in ms since the epoch
ts_ms() { local s; s=$(date -u -d "${1%.*}" +%s) && echo $((s * 1000 + 10#$(sed 's/.*\.\([0-9]*\)Z/\1/' <<<"$1"))); }

bk_start_agent '{"selftest_interval":0}' || { not_ok "agent starts"; exit 1; }
bk_sandbox_create ev1 || { not_ok "sandbox ev1 created"; exit 1; }
bk_sandbox_create ev2 || { not_ok "sandbox ev2 created"; exit 1; }

# --- the recent events, without following ---------------------------------------------------------
ctl exec ev1 -- true >/dev/null
ctl exec ev2 -- true >/dev/null   # (whatever an exec opens once for good)
sleep 0.3
socks() { ls -l "/proc/$AGENT_PID/fd" | grep -c 'socket:'; }
fds0=$(socks)
ctl events --json --last 100 > "$T/recent.json"
check "events --json: the start-up self-test result is there" \
	grep -q '"event":"selftest".*passed' "$T/recent.json"
check "events --json: an exec_start and an exec line of ev1's exec" \
	test "$(jq -r 'select(.pod == "ev1") | .event' "$T/recent.json" | sort | tr '\n' ' ')" = "exec exec_start "
check "events --json: each line is the agent's log line (level, event, exec_id, namespace)" \
	test "$(jq -r 'select(.event == "exec") | [.level, .exec_id != null, .namespace] | join(",")' "$T/recent.json" | head -1)" = "info,true,boxkite-local"
check "the same lines are in the agent's log" \
	grep -qF "$(jq -c 'select(.event == "exec")' "$T/recent.json" | head -1)" "$T/agent.log"

# --- following ------------------------------------------------------------------------------------
# (each line as received, with the time it arrived: "ms {json}")
"$CTL" --admin-socket "$T/admin.sock" events --follow --json 2> "$T/follow.err" > >(while IFS= read -r l; do printf '%s %s\n' "$(now_ms)" "$l"; done > "$T/follow.json") &
FOL=$!
"$CTL" --admin-socket "$T/admin.sock" events --follow --pod ev2 > "$T/follow-ev2.txt" 2>&1 &
FOL2=$!
# live once a fresh exec of ev1 shows up
for i in $(seq 1 50); do
	ctl exec ev1 -- true >/dev/null
	grep -q '"event":"exec"' "$T/follow.json" 2>/dev/null && break
	sleep 0.1
done
check "--follow: streams from the moment it connected" grep -q '"event":"exec"' "$T/follow.json"

# an exec: its end is streamed within 100 ms of the agent logging it
ctl exec ev1 --json -- sh -c 'echo marker-ev1' > "$T/x1.json"
id1=$(jq -r .exec_id "$T/x1.json")
for _ in $(seq 1 100); do grep -q "\"event\":\"exec\",\"exec_id\":\"$id1\"" "$T/follow.json" && break; sleep 0.01; done
line=$(grep "\"event\":\"exec\",\"exec_id\":\"$id1\"" "$T/follow.json")
lat=$(( ${line%% *} - $(ts_ms "$(cut -d' ' -f2- <<<"$line" | jq -r .ts 2>/dev/null || echo 1970-01-01T00:00:00.000Z)") ))
check "--follow: an exec's end arrives within 100 ms of the agent logging it ($lat ms)" \
	test -n "$line" -a "$lat" -le "$(scaled_ms 100)"
check "--follow: its start was streamed before its end" \
	awk -v id="$id1" 'index($0, id) { if ($0 ~ /"event":"exec_start"/) s = NR; else if ($0 ~ /"event":"exec"/) e = NR } END { exit !(s && e && s < e) }' "$T/follow.json"

# a denial: streamed as it happens, while its exec still runs
ctl exec ev1 --json --timeout $((30 * TIME_SCALE)) -- \
	sh -c 'curl -s --max-time 1 http://169.254.169.254/ ; sleep '$((3 * TIME_SCALE)) > "$T/x2.json" &
XP=$!
line=
for _ in $(seq 1 $((400 * TIME_SCALE))); do
	line=$(grep '"event":"denied"' "$T/follow.json" | grep '169.254.169.254' | head -1)
	[ -n "$line" ] && break
	sleep 0.005
done
running=no; kill -0 $XP 2>/dev/null && running=yes
check "--follow: a denial is streamed while its exec still runs (exec running: $running)" test -n "$line" -a "$running" = yes
if [ -n "$line" ]; then
	t_seen=${line%% *}; line=${line#* }
	lat=$(( t_seen - $(ts_ms "$(jq -r .ts <<<"$line")") ))
	check "--follow: the denial arrives within 100 ms of the agent's ring-buffer read ($lat ms)" test "$lat" -le "$(scaled_ms 100)"
	check "the denial names destination, port, reason, the process and the pod" \
		test "$(jq -r '[.dst, .port, .proto, .reason, .comm, .pod] | join(",")' <<<"$line")" = "169.254.169.254,80,tcp,$(jq -r .reason <<<"$line"),curl,ev1"
	check "  ... with a reason the BPF layer gave" test -n "$(jq -r '.reason // empty' <<<"$line")"
else
	not_ok "--follow: the denial's latency (no denial seen)"
	not_ok "the denial's fields (no denial seen)"
	not_ok "  ... its reason (no denial seen)"
fi
wait $XP
id2=$(jq -r .exec_id "$T/x2.json")
check "  ... and it carries the exec's id (the receipt's)" test "$(jq -r .exec_id <<<"$line")" = "$id2"
check "  ... the receipt lists the same denial" test "$(jq -r '.denied[0].dst' "$T/x2.json")" = 169.254.169.254
check "a denial is logged once (not again when its exec ends)" \
	test "$(grep '"event":"denied"' "$T/agent.log" | grep -c "$id2")" = 1

# --pod: only that pod's events; human-readable lines
ctl exec ev2 -- sh -c 'curl -s --max-time 1 http://169.254.169.254/ ; true' >/dev/null
for _ in $(seq 1 100); do grep -q 'exec ended' "$T/follow-ev2.txt" && break; sleep 0.02; done
check "--pod ev2: ev2's exec and denial are there" \
	sh -c "grep -q 'exec ended .*boxkite-local/ev2' '$T/follow-ev2.txt' && grep -q 'DENIED .*169.254.169.254:80/tcp' '$T/follow-ev2.txt'"
check "--pod ev2: none of ev1's" bash -c "! grep -q '/ev1 ' '$T/follow-ev2.txt'"
ctl events --last 100 > "$T/human.txt"
check "human-readable: start, end (exit, duration, layers), denials" \
	sh -c "grep -q 'exec started .*policy=' '$T/human.txt' && grep -q 'exec ended .*exit=0 .*ms .*netns=fresh bpf=on' '$T/human.txt' && grep -q 'DENIED .*reason=.*comm=curl' '$T/human.txt'"
check "human-readable: the self-test result" grep -q 'self-test .*passed' "$T/human.txt"

# --- errors -----------------------------------------------------------------------------------------
out=$(ctl events --last 5000 2>&1); rc=$?
check "--last out of range: exit 2, one line saying the range ($out)" test $rc = 2 -a "$(wc -l <<<"$out")" = 1
out=$("$CTL" --admin-socket "$T/nope.sock" events 2>&1); rc=$?
check "no agent: exit 1, one line naming the socket" test $rc = 1 -a "$(wc -l <<<"$out")" = 1
check "  ... and the socket path" grep -q "$T/nope.sock" <<<"$out"

# --- boxkitectl top --------------------------------------------------------------------------------
# ev2 runs 10 execs during one 2 s screen, with a process holding 64 MiB, while ev1 idles
"$CTL" --admin-socket "$T/admin.sock" exec ev2 --timeout 30 -- python3 -c "b = b'x' * (64 << 20); open('/tmp/held', 'w').close(); import time; time.sleep($((8 * TIME_SCALE)))" >/dev/null &
HP=$!
for _ in $(seq 1 $((100 * TIME_SCALE))); do ctl exec ev2 -- test -e /tmp/held && break; sleep 0.1; done
ctl top --json --interval $((2 * TIME_SCALE)) -n 1 > "$T/top.json" &
TP=$!
for i in $(seq 1 10); do ctl exec ev2 -- true >/dev/null; done
wait $TP; rc=$?
ev2=$(jq -c '.sandboxes[] | select(.pod == "ev2")' "$T/top.json")
ev1=$(jq -c '.sandboxes[] | select(.pod == "ev1")' "$T/top.json")
check "top --json: exits 0 with a row per sandbox ($rc; $(jq -c '[.sandboxes[].pod]' "$T/top.json"))" \
	test $rc = 0 -a -n "$ev1" -a -n "$ev2"
check "top: ev2's execs/s counts its 10 execs in the screen ($(jq .execs_per_s <<<"$ev2"))" \
	awk -v r="$(jq .execs_per_s <<<"$ev2")" -v t=$TIME_SCALE 'BEGIN { exit !(r >= 10 / (2 * t + 10) && r <= 10 / (2 * t) + 1) }'
check "top: ev1, idle, shows 0 execs/s and 0 live" test "$(jq -c '[.execs_per_s, .live_execs]' <<<"$ev1")" = "[0,0]"
check "top: ev2's live exec (the one holding memory) is counted" test "$(jq .live_execs <<<"$ev2")" -ge 1
mcur=$(jq .memory_current <<<"$ev2"); pcur=$(jq .pids_current <<<"$ev2")
check "top: ev2's memory and pids in use, read from its cgroup ($mcur bytes, $pcur pids)" \
	test "$mcur" -gt 0 -a "$pcur" -ge 1
check "top: the caps are the pod cgroup's (memory 4 GiB, pids 4096 by default)" \
	test "$(jq -c '[.memory_max, .pids_max]' <<<"$ev2")" = "[4294967296,4096]"
mem_ev1=$(jq .memory_current <<<"$ev1")
check "top: the 64 MiB held by ev2's exec are ev2's, not ev1's (ev1 $mem_ev1, ev2 $mcur)" \
	test "$mcur" -gt $((mem_ev1 + (48 << 20)))
ctl top -n 1 --interval 0.2 > "$T/top.txt"
check "top: the table has a header and a line per sandbox" \
	sh -c "grep -q 'NAMESPACE/POD .*LIVE .*EXECS/S .*DENIALS/S .*MEMORY .*PIDS' '$T/top.txt' && grep -q 'boxkite-local/ev1 ' '$T/top.txt' && grep -q 'boxkite-local/ev2 .* / 4.0G .* / 4096' '$T/top.txt'"
out=$(ctl top -n 0 2>&1); rc=$?
check "top -n 0: exit 2, one line ($out)" test $rc = 2 -a "$(wc -l <<<"$out")" = 1
kill $HP 2>/dev/null; wait $HP 2>/dev/null

# --- the agent's log lines: one format (issue 19) ------------------------------------------------
bad=$(python3 -c '
import json, sys
bad = []
for l in open(sys.argv[1]):
    try:
        o = json.loads(l)
    except ValueError:
        bad.append(l[:100]); continue
    if not all(isinstance(o.get(k), str) and o[k] for k in ("ts", "level", "event", "msg")):
        bad.append(l[:100])
    elif o["event"] in ("exec", "exec_start", "denied") and not (o.get("exec_id") and o.get("pod") and o.get("namespace")):
        bad.append(l[:100])
print(len(bad), *bad[:3], sep="\n")' "$T/agent.log")
check "every agent log line has ts, level, event and msg; exec and denial lines their exec and pod ($(head -1 <<<"$bad") not)" \
	test "$(head -1 <<<"$bad")" = 0

# --- a follower that hangs up; the agent stopping --------------------------------------------------
kill $FOL2; wait $FOL2 2>/dev/null
for _ in $(seq 1 50); do [ "$(socks)" -le $((fds0 + 1)) ] && break; sleep 0.1; done
fds1=$(socks)
check "a follower that hung up leaves no socket in the agent ($fds0 before, $fds1 with one follower left)" \
	test "$fds1" -le $((fds0 + 1))
bk_stop_agent
for _ in $(seq 1 50); do kill -0 $FOL 2>/dev/null || break; sleep 0.1; done
st=running; kill -0 $FOL 2>/dev/null || { wait $FOL; st="exit $?"; }
check "the agent stopping ends --follow ($st)" test "$st" = "exit 0"
check "  ... with the agent's last word" grep -q ' {"event":"end","msg":"agent stopping"}' "$T/follow.json"
check "the follower printed no error" test ! -s "$T/follow.err"
