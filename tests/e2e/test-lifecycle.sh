#!/usr/bin/env bash
# Creating and deleting 20 local sandboxes in a row leaves nothing behind in
# any cgroup hierarchy, the netns list, runc list or bpffs.
# An exec made on request ends with its sandbox container's init.
. "$(dirname "$0")/lib.sh"

UIDS=()
IDS=()
# everything a sandbox of this test could leave, in every place it could be
leftovers() {
	for u in "${UIDS[@]}"; do find /sys/fs/cgroup/ -maxdepth 5 -type d -name "*$u*" 2>/dev/null; done
	for i in "${IDS[@]}"; do runc list -q 2>/dev/null | grep -x "$i"; find /sys/fs/cgroup/ -maxdepth 6 -type d -name "$i" 2>/dev/null; done
	ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^boxkite-lc[0-9]+$'
	ls "$BPFFS" 2>/dev/null | grep '^exec-'
	ls /run/boxkite/local 2>/dev/null | grep -E '^lc[0-9]+$'
}

bk_start_agent || { not_ok "agent starts"; exit 1; }
# one exec each, so every layer was built once
created=0 execd=0
for i in $(seq 1 20); do
	if bk_sandbox_create "lc$i"; then
		created=$((created + 1))
		UIDS+=("$(sb "lc$i" pod_uid)"); IDS+=("$(sb "lc$i" sandbox_container_id)" "$(sb "lc$i" shim_container_id)")
		bk_exec "lc$i" -- true && [ "$(j .exit_code)" = 0 ] && execd=$((execd + 1))
		bk_sandbox_delete "lc$i" >/dev/null 2>&1
	fi
done
check "20 sandboxes created" test "$created" = 20
check "20 execs ran" test "$execd" = 20
left=$(leftovers)
if [ -z "$left" ]; then ok "nothing left behind (cgroups in every hierarchy, netns, runc, bpffs, state)"; else
	not_ok "nothing left behind"; echo "$left" | sed 's/^/#   /' | head -20; fi

# an exec outlives nothing of its pod: made on request, the command is the
# init of a pid namespace of its own (not below the container's), so it is
# the agent that must end it when the sandbox container's init ends
if bk_sandbox_create lcend; then
	ctl exec lcend --timeout 60 --json -- sleep 45 > "$T/lcend.json" 2>&1 &
	EP=$!
	PU=$(sb lcend pod_uid)
	for _ in $(seq 1 100); do [ -n "$(live_exec_cg "$PU")" ] && break; sleep 0.05; done
	ECG=$(live_exec_cg "$PU")
	check "a long exec is running in its cgroup" test -n "$ECG"
	t0=$(date +%s%N)
	runc kill "$(sb lcend sandbox_container_id)" KILL
	ended=no
	for _ in $(seq 1 $((50 * TIME_SCALE))); do kill -0 "$EP" 2>/dev/null || { ended=yes; break; }; sleep 0.1; done
	ms=$((($(date +%s%N) - t0) / 1000000))
	check "it ended when its sandbox container's init was killed (after ${ms} ms, bound $(scaled_ms 5000))" test "$ended" = yes
	wait "$EP" 2>/dev/null
	check "its answer says it was killed (exit_code $(jq -r .exit_code "$T/lcend.json" 2>/dev/null))" \
		test "$(jq -r .exit_code "$T/lcend.json" 2>/dev/null)" = 137
	check "its cgroup and its command are gone" gone_within 3 sh -c "test -d '$ECG' && echo left; pgrep -x -f 'sleep 45'; true"
	bk_sandbox_delete lcend >/dev/null 2>&1
else
	not_ok "sandbox lcend created"
fi
bk_stop_agent
check "agent removed its pins and keepalive cgroup on stop" sh -c "! test -e $BPFFS && ! test -e $CG2/$(basename "$BPFFS")-keepalive"
check "no runc container of this test left" test -z "$(leftovers)"
