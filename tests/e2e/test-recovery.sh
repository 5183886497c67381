#!/usr/bin/env bash
# kill -9 of the agent during a long exec: the exec stays filtered at every
# sampled moment (its programs stay on its cgroup), the new agent kills it
# (recorded in the record table; without one, in a file) and cleans up, the
# in-flight request gets a clear error, the shim reconnects by itself.
. "$(dirname "$0")/lib.sh"

# BPF is the only network layer here, so a filter that went away would show
bk_start_agent '{"layers":{"netns":false}}' || { not_ok "agent starts"; exit 1; }
bk_sandbox_create rc1 || { not_ok "sandbox created"; exit 1; }
PODNS=$(sb rc1 pod_netns)
fake_metadata "$PODNS"
check "fake metadata server reachable from the pod network" nsenter --net="/run/netns/$PODNS" curl -s -o /dev/null --max-time 2 http://169.254.169.254/

# the exec: tries the metadata server every 20 ms, records any success; it
# must still run when the new agent starts (scaled for slow machines)
LOOP='import socket, time
reached = 0
end = time.time() + 25 * '$TIME_SCALE'
while time.time() < end:
    s = socket.socket(); s.settimeout(0.5)
    try:
        s.connect(("169.254.169.254", 80)); reached += 1
        open("/workspace/REACHED", "a").write("x")
    except OSError:
        pass
    s.close(); time.sleep(0.02)'
ctl exec rc1 --timeout $((60 * TIME_SCALE)) -- python3 -c "$LOOP" > "$T/inflight.out" 2> "$T/inflight.err" &
inflight=$!
cg=
for _ in $(seq 1 100); do
	cg=$(live_exec_cg "$(sb rc1 pod_uid)")
	[ -n "$cg" ] && grep -q . "$cg/cgroup.procs" 2>/dev/null && break; sleep 0.05
done
check "the long exec is running" test -n "$cg"
sample() { # count attached boxkite programs on the exec cgroup
	bpftool cgroup show "$cg" 2>/dev/null | grep -c ' bk_'
}
check "before the kill: 8 programs on the exec cgroup" test "$(sample)" = 8
in_table() { test "$(exec_records)" = 1 && ! ls "$T"/state/execs/*.json >/dev/null 2>&1 && grep -aq "${cg##*/}" "$T/state/execs.table"; }
check "before the kill: the exec is recorded in a slot of the record table, and in no file" in_table
OLD_IDS=$(agent_prog_ids | xargs)
kill -9 "$AGENT_PID"; wait "$AGENT_PID" 2>/dev/null; AGENT_PID=
rm -f "$T/admin.sock" "$SOCK"
bad=0 n=0
for _ in $(seq 1 40); do
	if grep -q . "$cg/cgroup.procs" 2>/dev/null; then
		n=$((n + 1)); [ "$(sample)" = 8 ] || bad=$((bad + 1))
	fi
	sleep 0.025
done
check "agent dead: the exec still runs, filtered in all $n samples" sh -c "test $n -gt 10 && test $bad = 0"
wait "$inflight"; rc=$?
check "the in-flight request got a clear error (exit $rc)" sh -c "test $rc -ne 0 && grep -q 'connection closed\|agent' $T/inflight.err"
bk_start_agent '{"layers":{"netns":false}}' || not_ok "new agent starts"
check "new agent killed the orphaned exec" sh -c "! test -d $cg"
check "recovery logged" grep -q '"recovered_exec".*"action":"killed"' "$T/agent.log"
check "no state record left ($(exec_records) in use)" test "$(exec_records)" = 0
old_freed() { test "$(echo $OLD_IDS | wc -w)" = 8 && gone_within 3 progs_alive $OLD_IDS; }
check "the old agent's 8 programs ($OLD_IDS) are freed once the kernel released the exec's cgroup" old_freed
left=$(exec_cgroups_left "$(sb rc1 pod_uid)")
check "no exec cgroup left in any hierarchy ${left:+($left)}" test -z "$left"
bk_exec rc1 -- sh -c 'cat /workspace/REACHED 2>/dev/null | wc -c'
check "the exec never reached the metadata server, before, during or after the kill" test "$(j .stdout)" = 0
check "the new agent runs execs" test "$(j .exit_code)" = 0

# the shim reconnects by itself
SHIMOK=0
for _ in $(seq 1 50); do
	if nsenter --net="/run/netns/$(sb rc1 client_netns)" curl -sk --max-time 2 --pinnedpubkey "$(sb rc1 pin)" \
		"$(sb rc1 url)/health" | grep -q '"agent":"connected"'; then SHIMOK=1; break; fi
	sleep 0.2
done
check "the shim reconnected to the new agent" test "$SHIMOK" = 1

# --- no record table: each exec in a file of its own, recovered from there -----------------------------
# (an agent that cannot make the table, or an earlier build's records)
kill -9 "$AGENT_PID"; wait "$AGENT_PID" 2>/dev/null; AGENT_PID=
rm -f "$T/admin.sock" "$SOCK"
mkdir "$T/state/execs.table.new" # the table's open fails (EISDIR)
START=$(wc -l < "$T/agent.log")
bk_start_agent '{"layers":{"netns":false}}' || not_ok "an agent starts without a record table"
check "  ... it says so" sh -c "tail -n +$((START + 1)) '$T/agent.log' | grep -q '\"records\".*cannot make the record table.*each exec is recorded in a file'"
ctl exec rc1 --timeout $((60 * TIME_SCALE)) -- sleep $((30 * TIME_SCALE)) > /dev/null 2>&1 &
cg=
for _ in $(seq 1 100); do
	cg=$(live_exec_cg "$(sb rc1 pod_uid)")
	[ -n "$cg" ] && grep -q . "$cg/cgroup.procs" 2>/dev/null && break; sleep 0.05
done
in_file() { test -n "$cg" && grep -q "${cg##*/}" "$T/state/execs/${cg##*boxkite-exec-}.json" && test "$(exec_records)" = 1; }
check "the running exec is recorded in its own file, execs/<id>.json" in_file
kill -9 "$AGENT_PID"; wait "$AGENT_PID" 2>/dev/null; AGENT_PID=
rm -f "$T/admin.sock" "$SOCK"
rmdir "$T/state/execs.table.new"
START=$(wc -l < "$T/agent.log")
bk_start_agent '{"layers":{"netns":false}}' || not_ok "the next agent starts"
check "the next agent killed the exec, from its file" \
	sh -c "tail -n +$((START + 1)) '$T/agent.log' | grep -q '\"recovered_exec\".*\"cgroup\":\"$cg\".*\"action\":\"killed\"' && ! test -d '$cg'"
check "  ... no record left, and the next agent has its table again" sh -c "test \"\$(python3 '$(dirname "$0")/records.py' '$T/state')\" = 0 && test -f '$T/state/execs.table'"
bk_exec rc1 -- true
check "  ... and runs execs" test "$(j .exit_code)" = 0
