#!/usr/bin/env bash
# Warm exec slots (issue 16): execs made ahead of their requests, turned on
# (exec.warm_slots 2; the default is 0). What the test holds them to, read
# from the kernel: a slot is made after a pod's exec, carries every layer
# before its request (its own cgroups, every BPF program, a fresh
# network namespace, no process: the request's child is born into them);
# the request that takes it gets a
# complete receipt read back as for an exec made on request; a slot serves
# one exec, never two (cgroup, namespace, IPC and pid namespace all new);
# it goes when unused (exec.warm_idle_s), when its pod goes, when the agent
# stops, and a new agent sweeps what a killed one left. With
# exec.warm_slots 0, the default, there are none, which is what makes the
# checks able to fail (and what the code before them did).
. "$(dirname "$0")/lib.sh"

RUNC=(runc --root /run/runc)
WARM='{"exec":{"warm_slots":2}}'
bk_start_agent "$WARM" || exit 1
bk_sandbox_create w1 || exit 1
PUID=$(sb w1 pod_uid)
slots() { slot_cgroups "$PUID" | wc -l; }
wait_slots() { for _ in $(seq 1 $((60 * TIME_SCALE))); do [ "$(slots)" -ge "$1" ] && return 0; sleep 0.05; done; return 1; }

bk_exec w1 -- true
NPROGS=$(j '.isolation.bpf | length')   # every program of the agent's object (the first exec's receipt)
check "its receipt names the agent's programs ($NPROGS, read back from the exec cgroup)" test "${NPROGS:-0}" -ge 6
check "the pod's first exec is made on request" test "$(j .isolation.made)" = on_request
check "then two slots are made for the pod (exec.warm_slots 2)" wait_slots 2
check "  ... and no more" test "$(slots)" = 2
ctl status > "$T/st.json"
check "status counts them (warm_slots.ready 2, per_pod 2)" \
	jq -e '.warm_slots.ready == 2 and .warm_slots.per_pod == 2 and .warm_slots.made >= 2' "$T/st.json"
# each slot, before any request: its own cgroups with the caps, every
# program, no process (no copy of the agent parked in it); and the fresh
# network namespaces the agent holds (its pool's and its slots') have lo
# alone
held=1; empty=1; n=0
for cg in $(slot_cgroups "$PUID"); do
	n=$((n + 1))
	[ "$(bpftool cgroup show "$cg" | grep -c ' bk_')" = "$NPROGS" ] || held=0
	[ -z "$(cat "$cg/cgroup.procs")" ] || empty=0
done
hostnet=$(readlink /proc/"$AGENT_PID"/ns/net) # (its own)
nets=$(for f in /proc/"$AGENT_PID"/fd/*; do l=$(readlink "$f"); case $l in net:*) [ "$l" != "$hostnet" ] && echo "$f" ;; esac; done)
lone=1
for f in $nets; do [ "$(nsenter --net="$f" ip -o link show | awk -F': ' '{print $2}' | xargs)" = lo ] || lone=0; done
held_nets=$(for f in $nets; do readlink "$f"; done | tr -dc '0-9\n')
check "every slot's cgroup ($n) carries the $NPROGS programs before its request, and no process" test "$held$empty$n" = 112
check "the agent holds $(wc -w <<< "$nets") fresh network namespaces (at least the 2 slots'), each with lo alone" \
	test "$lone" = 1 -a "$(wc -w <<< "$nets")" -ge 2
before=$(slot_cgroups "$PUID" | xargs)

# the next execs take them: complete receipts, each exec its own
: > "$T/ids"
for i in 1 2 3 4 5; do
	bk_exec w1 -- exec sh -c 'ipcmk -M 4096 >/dev/null; tail -n +2 /proc/sysvipc/shm | wc -l; echo $$'
	echo "$(j .isolation.made) $(j .isolation.cgroup_id) $(j .isolation.netns_inode) $(j .exec_id) $(j .stdout | xargs)" >> "$T/ids"
	[ "$i" = 1 ] && cp "$T/last.json" "$T/warm1.json"
	for _ in $(seq 1 40); do [ "$(slots)" -ge 2 ] && break; sleep 0.05; done
done
J() { jq -r "$1" "$T/warm1.json"; }
sed 's/^/# exec: /' "$T/ids"
check "an exec after them took a slot made ahead (isolation.made: ahead)" test "$(J .isolation.made)" = ahead
check "  ... one of the slots that were there before its request" \
	grep -qw "$(basename "$(J .isolation.cgroup)")" <<< "$(for c in $before; do basename "$c"; done)"
check "  ... the network namespace it ran in was held by the agent before its request" \
	grep -qxF "$(J .isolation.netns_inode)" <<< "$held_nets"
check "  ... its receipt: fresh netns with lo alone, $NPROGS programs held to the end, caps read back" \
	jq -e --argjson np "$NPROGS" '.isolation.netns == "fresh" and .isolation.interfaces == ["lo"] and (.isolation.bpf | length) == $np
		and .isolation.bpf_held_to_end and .isolation.pids_max == 256 and .isolation.seccomp.mode == 2
		and .isolation.seccomp.filters >= 1 and .isolation.no_new_privs and .isolation.capabilities == 0
		and .isolation.process.source == "proc_status_after_execve" and (.isolation.policy_rules | length) > 0' "$T/warm1.json"
check "  ... the cgroup id it names is the kernel's for that cgroup path's exec" test "$(J .isolation.cgroup_id)" -gt 0
check "five execs, all made ahead" test "$(grep -c '^ahead ' "$T/ids")" = 5
check "  ... five cgroups (ids never reused), five exec ids (a slot serves one exec)" \
	test "$(cut -d' ' -f2 "$T/ids" | sort -u | wc -l)$(cut -d' ' -f4 "$T/ids" | sort -u | wc -l)" = 55
check "  ... each sees one SysV segment, its own, and runs as pid 1 (its IPC and pid namespaces new)" \
	test "$(cut -d' ' -f5- "$T/ids" | sort -u | xargs)" = "1 1"
check "  ... and the cgroup of each is gone after it" test -z "$(for c in $before; do [ -d "$c" ] && echo "$c"; done)"

# a warm exec's BPF layer holds: the metadata address is refused, and said
bk_exec w1 -- python3 -c 'import socket; s = socket.socket(); s.settimeout(2)
try: s.connect(("169.254.169.254", 80))
except OSError as e: print("refused", e.errno)'
check "a warm exec cannot reach the metadata address (the BPF layer, read back in denied)" \
	bash -c "[ \"$(j .isolation.made)\" = ahead ] && grep -q '^refused' <<< \"$(j .stdout)\" && [ \"$(j '.denied | length')\" -ge 1 ]"

# the pod goes: its slots go with it
runc_pid=$("${RUNC[@]}" state "$(sb w1 sandbox_container_id)" | jq -r .pid)
wait_slots 2
kill -9 "$runc_pid"
check "the pod's sandbox container killed: its slots are torn down within 2 s (no exec cgroup of the pod left)" \
	gone_within $((2 * TIME_SCALE)) find $CG_ROOTS -path "*/pod$PUID/boxkite-exec-*" -type d
ctl status > "$T/st.json"
jq -c '"# " + (.warm_slots | tostring)' "$T/st.json"
check "  ... counted as gone" jq -e '.warm_slots.gone >= 2 and .warm_slots.ready == 0' "$T/st.json"
bk_sandbox_delete w1 >/dev/null 2>&1

# unused slots go after exec.warm_idle_s; the agent's stop takes the rest
bk_stop_agent
bk_start_agent '{"exec":{"warm_slots":2,"warm_idle_s":2}}' || exit 1
bk_sandbox_create w2 || exit 1
P2=$(sb w2 pod_uid)
bk_exec w2 -- true
for _ in $(seq 1 40); do [ "$(slot_cgroups "$P2" | wc -l)" -ge 2 ] && break; sleep 0.05; done
check "exec.warm_idle_s 2: slots made" test "$(slot_cgroups "$P2" | wc -l)" = 2
sleep 3
check "  ... and gone after 2 s unused" test -z "$(slot_cgroups "$P2")"
bk_exec w2 -- true
for _ in $(seq 1 40); do [ "$(slot_cgroups "$P2" | wc -l)" -ge 2 ] && break; sleep 0.05; done
bk_stop_agent
check "the agent's stop tears its slots down (no exec cgroup of the pod, no record)" \
	test -z "$(find $CG_ROOTS -path "*/pod$P2/boxkite-exec-*" -type d)$(ls "$T/state/execs" 2>/dev/null)"

# a killed agent leaves slots; the next one sweeps them
bk_start_agent "$WARM" || exit 1
bk_exec w2 -- true
for _ in $(seq 1 40); do [ "$(slot_cgroups "$P2" | wc -l)" -ge 2 ] && break; sleep 0.05; done
check "slots made again" test "$(slot_cgroups "$P2" | wc -l)" = 2
kill -9 "$AGENT_PID"; wait "$AGENT_PID" 2>/dev/null; AGENT_PID=
rm -f "$T/admin.sock" "$SOCK"
bk_start_agent "$WARM" || exit 1
check "a killed agent's slots are swept by the next one at its start" \
	gone_within $((3 * TIME_SCALE)) find $CG_ROOTS -path "*/pod$P2/boxkite-exec-*" -type d

# a pod deleted while its slots wait: no delay, nothing left (a slot's
# monitor not reaped would hold the pod's init in its exit)
bk_sandbox_create w3 || exit 1
P3=$(sb w3 pod_uid)
bk_exec w3 -- true
for _ in $(seq 1 40); do [ "$(slot_cgroups "$P3" | wc -l)" -ge 2 ] && break; sleep 0.05; done
t0=$(date +%s%N)
bk_sandbox_delete w3 >/dev/null 2>&1
ms=$((($(date +%s%N) - t0) / 1000000))
check "a pod with two waiting slots is deleted in ${ms} ms (< 3 s), its containers gone" \
	test "$ms" -lt $((3000 * TIME_SCALE)) -a -z "$("${RUNC[@]}" list | grep "/w3/")"
check "  ... no zombie of the agent's left" test -z "$(ps -o stat= --ppid "$AGENT_PID" | grep Z)"

# none with exec.warm_slots 0 (the default)
bk_stop_agent
bk_start_agent || exit 1
bk_exec w2 -- true; bk_exec w2 -- true
sleep 0.3
check "exec.warm_slots 0: every exec is made on request, no slot" \
	test "$(j .isolation.made)$(find $CG_ROOTS -path "*/pod$P2/boxkite-exec-*" -type d | wc -l)" = on_request0
bk_sandbox_delete w2 >/dev/null 2>&1
