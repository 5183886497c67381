#!/usr/bin/env bash
# Protections SECURITY.md claims, each checked against the kernel and shown
# able to fail (a control beside each refusal shows the same path working):
#  - an exec's credentials: no supplementary groups (the agent and the
#    container user hold some), no inherited descriptor (the agent holds 40
#    without close-on-exec), RLIMIT_NOFILE 1024 and RLIMIT_CORE 0 (the
#    agent's are higher);
#  - the target: a sandbox container running as root is refused, two
#    "sandbox" containers in one pod are refused (also once a target was
#    found and remembered);
#  - the caller: a pid reused by another pod's shim is not taken for it
#    (SO_PEERPIDFD and the SO_PEERCRED fallback); a cgroup naming pod A
#    for a container the runtime says is pod B's is refused;
#  - DNS: an exec that writes a nameserver into its own resolv.conf still
#    reaches only the pod's resolvers (read by the agent from the sandbox
#    container's root);
#  - the agent: one per pin directory; an exec with no state record is
#    found by the next agent from the old agent's programs on its cgroup
#    and killed (an exec cgroup carrying another agent's programs is left
#    alone), and the old programs go with its cgroup; link pins an earlier
#    build left under exec-<id>/ are handled as before (the exec killed,
#    the pins removed by a start after its cgroup is released); a missing
#    required kernel facility stops the start with one line; a layer
#    switched off is logged as UNSAFE.
. "$(dirname "$0")/lib.sh"

RUNC=(runc --root /run/runc)
HANDMADE=()
hm_cleanup() {
	local rc=$?
	for id in "${HANDMADE[@]}"; do
		"${RUNC[@]}" kill "$id" KILL >/dev/null 2>&1
		"${RUNC[@]}" delete --force "$id" >/dev/null 2>&1
	done
	for d in "${CGDIRS[@]}"; do rmdir "$d" 2>/dev/null; done
	return $rc
}
CGDIRS=()
trap 'hm_cleanup; bk_cleanup' EXIT

# hand_container SANDBOX ID JQ: a container of the sandbox's pod made by
# hand from its "sandbox" bundle (same rootfs, annotations, pod cgroup),
# changed by the jq filter JQ, run by runc as ID
hand_container() {
	local src=/run/boxkite/local/$1/sandbox b=$T/hm-$2
	mkdir -p "$b" || return 1
	jq --arg root "$src/rootfs" --arg cg "/kubepods/besteffort/pod$(sb "$1" pod_uid)/$2" \
		'.root.path = $root | .linux.cgroupsPath = $cg | '"$3" "$src/config.json" > "$b/config.json" || return 1
	HANDMADE+=("$2")
	"${RUNC[@]}" run -d --bundle "$b" "$2" > "$b/log" 2>&1 < /dev/null || { sed 's/^/# runc: /' "$b/log"; return 1; }
}
hm_gone() { "${RUNC[@]}" kill "$1" KILL >/dev/null 2>&1; "${RUNC[@]}" delete --force "$1" >/dev/null 2>&1; }
hm_pid() { "${RUNC[@]}" state "$1" | jq -r .pid; }
newid() { od -An -N32 -tx1 /dev/urandom | tr -d ' \n'; }
call_as() { in_cgroup_of "$(container_cg "$1" "$2")" "$CTL" call --socket "$SOCK" "${@:3}"; }

# --- the agent holds groups, descriptors and high limits of its own ---------------------------
cat > "$T/wrap.sh" <<'EOF'
#!/bin/bash
# the agent: supplementary groups 4 27 100, descriptors 10..49 without
# close-on-exec, core dumps up to the hard limit (the agent raises its
# RLIMIT_NOFILE to the hard limit itself)
for i in $(seq 10 49); do eval "exec $i</dev/null"; done
exec prlimit --core="$(ulimit -Hc):" setpriv --groups 4,27,100 "$@"
EOF
chmod +x "$T/wrap.sh"
BK_AGENT_WRAP=$T/wrap.sh bk_start_agent || { not_ok "agent starts"; exit 1; }
bk_sandbox_create pa || { not_ok "sandbox pa created"; exit 1; }
bk_sandbox_create pb || { not_ok "sandbox pb created"; exit 1; }
UA=$(sb pa pod_uid); UB=$(sb pb pod_uid)

agent_groups=$(awk '/^Groups:/ {$1 = ""; print}' "/proc/$AGENT_PID/status" | xargs)
agent_fds=$(ls "/proc/$AGENT_PID/fd" | wc -l)
agent_nofile=$(awk '/^Max open files/ {print $4 "/" $5}' "/proc/$AGENT_PID/limits")
agent_core=$(awk '/^Max core file size/ {print $5 "/" $6}' "/proc/$AGENT_PID/limits")
check "control: the agent holds groups ($agent_groups), $agent_fds fds, nofile $agent_nofile, core $agent_core" \
	sh -c "[ '$agent_groups' = '4 27 100' ] && [ $agent_fds -gt 40 ] && [ '$agent_nofile' != 1024/1024 ] && [ '$agent_core' != 0/0 ]"

# --- 1-3: the exec's groups, descriptors and limits, from its own /proc ------------------------
# (the fds of a child the shell forked with nothing open of its own, once
# it runs sleep: the shell itself holds pipe ends or saved copies while it
# redirects, and the forked shell briefly opens /dev/null for a background
# job's stdin before its exec)
bk_exec pa -- sh -c 'grep "^Groups:" /proc/$$/status; sleep 10 & p=$!;
	i=0; while [ $i -lt 500 ] && [ "$(cat /proc/$p/comm 2>/dev/null)" != sleep ]; do i=$((i + 1)); done; echo $(ls /proc/$p/fd); kill $p;
	awk "/^Max open files/ {n = \$4 \"/\" \$5} /^Max core file size/ {c = \$5 \"/\" \$6} END {print n; print c}" /proc/$$/limits'
mapfile -t L < <(j .stdout)
check "exec: no supplementary groups (${L[0]:-})" test "$(echo "${L[0]:-x}" | xargs)" = "Groups:"
check "exec: only fds 0 1 2 (${L[1]:-})" test "$(echo "${L[1]:-x}" | xargs)" = "0 1 2"
check "exec: RLIMIT_NOFILE 1024/1024 (${L[2]:-})" test "${L[2]:-}" = 1024/1024
check "exec: RLIMIT_CORE 0/0 (${L[3]:-})" test "${L[3]:-}" = 0/0

# --- 4: a sandbox container running as root is refused ----------------------------------------
bk_sandbox_create phm || { not_ok "sandbox phm created"; exit 1; }
hm_gone "$(sb phm sandbox_container_id)"
ROOTID=$(newid)
hand_container phm "$ROOTID" '.process.user = {"uid": 0, "gid": 0}' || not_ok "a root sandbox container runs"
check "control: the hand-made sandbox container runs as uid 0" \
	sh -c "awk '/^Uid:/ {exit \$3 != 0}' /proc/$(hm_pid "$ROOTID")/status"
bk_exec phm -- id -u
check "root sandbox container: refused ($(j .code)), saying why: $(j .detail)" \
	sh -c "[ '$(j .code)' = isolation_failed ] && grep -q 'the sandbox container runs as root' '$T/last.json' && [ '$(j '.exit_code // "none"')' = none ]"
hm_gone "$ROOTID"

# --- 1 again: the container user's own groups are not the exec's ------------------------------
GRPID=$(newid)
hand_container phm "$GRPID" '.process.user = {"uid": 1000, "gid": 1000, "additionalGids": [4, 27, 1001]}' ||
	not_ok "a sandbox container with supplementary groups runs"
cgr=$(awk '/^Groups:/ {$1 = ""; print}' "/proc/$(hm_pid "$GRPID")/status" | xargs)
check "control: the container user holds groups ($cgr)" test "$cgr" = "4 27 1001"
bk_exec phm -- sh -c 'id -u; grep "^Groups:" /proc/$$/status'
check "exec as that user (uid $(j .stdout | head -1)), no supplementary groups" \
	test "$(j .stdout | tr '\n' ' ' | xargs)" = "1000 Groups:"

# --- 5: two "sandbox" containers in one pod are refused ----------------------------------------
TWOID=$(newid)
hand_container phm "$TWOID" '.process.user = {"uid": 1000, "gid": 1000}' || not_ok "a second sandbox container runs"
bk_exec phm -- true
check "two sandbox containers (one of them found before): refused as ambiguous ($(j .code): $(j .detail))" \
	grep -q '2 \\"sandbox\\" containers match' "$T/last.json"
out=$(call_as phm shim_container_id exec '{"command":"true"}')
check "  ... also for the pod's shim" grep -q '2 \\"sandbox\\" containers match' <<< "$out"
hm_gone "$TWOID"
bk_exec phm -- id -u
check "control: one sandbox container again, the exec runs ($(j .stdout | xargs))" test "$(j .exit_code) $(j .stdout | xargs)" = "0 1000"

# --- 12: the caller's cgroup says pod A, the runtime says pod B ---------------------------------
MIS=$CG2/kubepods/besteffort/pod$UA/$(sb pb shim_container_id)
mkdir "$MIS" && CGDIRS+=("$MIS")
out=$(in_cgroup_of "$MIS" "$CTL" call --socket "$SOCK" identity)
check "cgroup of pod pa naming pod pb's shim container: refused (403)" test "$(jq -r .status <<< "$out")" = 403
check "  ... saying why" grep -q 'belongs to another pod than its cgroup says' <<< "$out"
out=$(call_as pb shim_container_id identity)
check "control: the same container in its own pod's cgroup is pod pb" test "$(jq -r .body.pod_uid <<< "$out")" = "$UB"

# --- 11: a pid reused by another pod's shim --------------------------------------------------------
# A host process connects, hands the connection to its parent and exits;
# the test makes a process with the same pid (ns_last_pid) inside pb's shim
# container cgroup; only then is the first frame sent. Identified by the
# pid as it is now, the connection would be pb's shim.
cat > "$T/pidreuse.py" <<'EOF'
import json, os, socket, struct, sys, time
path, cg = sys.argv[1], sys.argv[2]
def frame(o):
    p = json.dumps(o).encode()
    return struct.pack("<IHHII", 0x314b5442, 1, 0, len(p), 0) + p
for attempt in range(1, 41):
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()
    if pid == 0:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.connect(path)
        time.sleep(0.2)  # accepted while its connector lives
        socket.send_fds(a, [b"x"], [s.fileno()])
        os._exit(0)
    _, fds, _, _ = socket.recv_fds(b, 1, 1)
    os.waitpid(pid, 0)
    conn = socket.socket(fileno=fds[0])
    r, w = os.pipe()
    with open("/proc/sys/kernel/ns_last_pid", "w") as f:
        f.write(str(pid - 1))
    q = os.fork()
    if q == 0:
        conn.close(); a.close(); b.close()  # another process: it does not hold the connection
        if os.getpid() == pid:
            with open(cg + "/cgroup.procs", "w") as f:
                f.write(str(pid))
        os.write(w, b"1")
        time.sleep(60)
        os._exit(0)
    os.read(r, 1)
    if q != pid:
        os.kill(q, 9); os.waitpid(q, 0); conn.close()
        continue
    conn.send(frame({"op": "identity", "args": {}}))
    body = json.loads(conn.recv(1 << 20)[16:])
    with open("/proc/%d/cgroup" % q) as f:
        where = f.read()
    os.kill(q, 9); os.waitpid(q, 0)
    print(json.dumps({"pid": pid, "attempts": attempt, "reuser_in": cg.split("/")[-1] in where,
                      "status": body["status"], "body": body["body"]}))
    sys.exit(0)
print(json.dumps({"error": "the pid was never reused"}))
EOF
pid_reuse() { # LABEL
	local out
	out=$(python3 "$T/pidreuse.py" "$SOCK" "$(container_cg pb shim_container_id)")
	echo "# $1: $(jq -c '{pid, attempts, reuser_in, status, code: .body.code, pod: .body.pod_name}' <<< "$out" 2>/dev/null || echo "$out")"
	if [ "$(jq -r '.reuser_in' <<< "$out")" != true ]; then
		skip "$1: the pid could not be reused here ($out)"
		return
	fi
	check "$1: the connection of a gone host process, its pid now pb's shim's, is refused (403), not pod pb" \
		test "$(jq -r '.status' <<< "$out")" = 403
}
pid_reuse "pid reuse ($(ctl status | jq -r .features.identity))"

# --- 10: DNS allowance is the pod's resolv.conf, not the exec's ---------------------------------
bk_sandbox_create pdns --policy internet || { not_ok "sandbox pdns created"; exit 1; }
bk_world pdns d "203.0.113.53 10.96.0.10" "" "203.0.113.0/24 10.96.0.0/12" "" || { not_ok "pdns world"; exit 1; }
HERE=$(cd "$(dirname "$0")" && pwd)
# the exec waits until its /etc/resolv.conf is writable (the test binds a
# file of its /tmp there, in the exec's own mount namespace only: the
# sandbox user cannot), writes a nameserver, then asks it and the pod's
PROG="$(cat "$HERE/probe.py")"
ctl exec pdns --json --timeout 40 -- sh -c 'echo "nameserver 10.96.0.10" > /tmp/resolv.mine
	for i in $(seq 1 200); do [ -w /etc/resolv.conf ] && break; sleep 0.1; done
	echo "nameserver 203.0.113.53" > /etc/resolv.conf && echo "wrote: $(cat /etc/resolv.conf)"
	sleep 2; python3 -c "$0" own,udp,203.0.113.53,53 pod,udp,10.96.0.10,53' "$PROG" > "$T/dns1.json" &
dnsjob=$!
# the command: once it runs (its file is in the container's /tmp), the
# process of the exec's cgroup in a mount namespace of its own (neither the
# container's nor the host's)
SBPID=$("${RUNC[@]}" state "$(sb pdns sandbox_container_id)" | jq -r .pid)
SBNS=$(readlink "/proc/$SBPID/ns/mnt"); MYNS=$(readlink /proc/self/ns/mnt)
for _ in $(seq 1 200); do [ -s "/proc/$SBPID/root/tmp/resolv.mine" ] && break; sleep 0.05; done
epid=
for _ in $(seq 1 100); do lcg=$(live_exec_cg "$(sb pdns pod_uid)"); [ -n "$lcg" ] && break; sleep 0.05; done
for p in $(cat "$lcg/cgroup.procs" 2>/dev/null); do
	# the first such process: the command's shell (a later one may be a
	# short-lived child, gone before nsenter opens it)
	m=$(readlink "/proc/$p/ns/mnt" 2>/dev/null) && [ "$m" != "$SBNS" ] && [ "$m" != "$MYNS" ] && [ -z "$epid" ] && epid=$p
done
if [ -n "$epid" ]; then
	nsenter -t "$epid" -m mount --bind /tmp/resolv.mine /etc/resolv.conf || not_ok "bind a writable resolv.conf in the exec"
else
	not_ok "the exec's own mount namespace found"
fi
# a second exec while the first has its own nameserver in its resolv.conf
bk_exec pdns --timeout 20 -- sh -c 'sleep 1; cat /etc/resolv.conf; python3 -c "$0" own,udp,203.0.113.53,53' "$PROG"
second=$(j .stdout)
wait "$dnsjob"
r1=$(jq -r .stdout "$T/dns1.json")
echo "# exec 1: $(echo "$r1" | tr '\n' ';')"
echo "# exec 2: $(echo "$second" | tr '\n' ';')"
check "the exec wrote its own resolv.conf" grep -q '^wrote: nameserver 203.0.113.53' <<< "$r1"
check "  ... and still cannot ask that nameserver on 53" sh -c "echo '$r1' | awk '\$1 == \"own\" {exit \$2 == \"ok\"}' && echo '$r1' | grep -q '^own '"
check "  ... the pod's resolver still answers it (control)" sh -c "echo '$r1' | awk '\$1 == \"pod\" {f = 1; exit \$2 != \"ok\"} END {exit !f}'"
check "another exec meanwhile: the pod's resolv.conf, the written nameserver refused" \
	sh -c "echo '$second' | grep -qx 'nameserver 10.96.0.10' && echo '$second' | awk '\$1 == \"own\" {f = 1; exit \$2 == \"ok\"} END {exit !f}'"
check "  ... and its receipt lists only the pod's resolver" \
	test "$(jq -c '[.isolation.policy_rules | if type == "array" then .[] else splits("\n") end | select(startswith("resolver"))]' "$T/last.json")" = '["resolver 10.96.0.10"]'
# control: where the agent reads it (the pod's file, root's), a nameserver counts
PODRC=/run/boxkite/local/pdns/resolv.conf
cp "$PODRC" "$T/resolv.saved"
printf 'nameserver 10.96.0.10\nnameserver 203.0.113.53\n' > "$PODRC"
bk_exec pdns --timeout 20 -- python3 -c "$PROG" own,udp,203.0.113.53,53
check "control: named in the pod's own resolv.conf (root's), the same query is answered ($(j .stdout | xargs))" \
	test "$(j .stdout | awk '{print $1, $2}')" = "own ok"
cp "$T/resolv.saved" "$PODRC"

# --- 6: one agent per pin directory ---------------------------------------------------------------
timeout 20 "$AGENT" --config "$T/config.json" --socket "$T/twop/two.sock" --admin-socket "$T/two-admin.sock" \
	--state-dir "$T/two-state" --bpffs "$BPFFS" --metrics 127.0.0.1:0 > "$T/two.out" 2> "$T/two.err"
rc=$?
echo "# second agent (exit $rc): $(cat "$T/two.err")"
check "a second agent on the same pins refuses to start (exit $rc), naming why" \
	sh -c "[ $rc = 1 ] && grep -q 'another boxkite-agent is running with pins in $BPFFS' '$T/two.err' && [ ! -e '$T/twop/two.sock' ]"
bk_exec pa -- echo still
check "  ... the first agent still runs execs" test "$(j .stdout)" = still

# --- 7: an exec without a state record ---------------------------------------------------------------
ctl exec pa --timeout 60 -- sleep 50 > /dev/null 2>&1 &
cg=
for _ in $(seq 1 100); do
	cg=$(live_exec_cg "$UA")
	[ -n "$cg" ] && grep -q . "$cg/cgroup.procs" 2>/dev/null && break; sleep 0.05
done
check "a long exec runs, the agent's 8 programs on its cgroup ($(cg_progs "$cg"))" test -n "$cg" -a "$(cg_progs "$cg")" = 8
OLD_IDS=$(agent_prog_ids | xargs)
# another agent's exec (its own bpffs directory, its own copy of the programs) in the same pod
OTHER_CG=$(dirname "$cg")/boxkite-exec-0123456789abcdef
OTHER_PINS=$BPFFS-other
mkdir -p "$OTHER_PINS" "$OTHER_CG"
bpftool prog loadall "$BK_BIN/bpf/boxkite.bpf.o" "$OTHER_PINS" 2>/dev/null
bpftool cgroup attach "$OTHER_CG" cgroup_inet4_connect pinned "$OTHER_PINS/bk_connect4" multi
sleep 300 & OTHER_PID=$!
echo "$OTHER_PID" > "$OTHER_CG/cgroup.procs"
check "another agent's exec runs in the same pod, its own program on its cgroup" \
	sh -c "test \"\$(cat '$OTHER_CG/cgroup.procs')\" = $OTHER_PID && test \"\$(bpftool -j cgroup show '$OTHER_CG' | jq length)\" = 1"
kill -9 "$AGENT_PID"; wait "$AGENT_PID" 2>/dev/null; AGENT_PID=
rm -f "$T/admin.sock" "$SOCK" "$T"/state/execs/*.json "$T/state/execs.table"
unrecorded_runs() { grep -q . "$cg/cgroup.procs" && test "$(exec_records)" = 0; }
check "agent killed, its state record removed by hand (the record table), the exec still runs" unrecorded_runs
START=$(wc -l < "$T/agent.log")
bk_start_agent || not_ok "the next agent starts"
check "the next agent killed the unrecorded exec, found by the old agent's programs on its cgroup" \
	sh -c "tail -n +$((START + 1)) '$T/agent.log' | grep -q '\"recovered_exec\".*killed unrecorded exec in $cg'"
check "  ... its cgroup is gone" sh -c "! test -d '$cg'"
old_freed() { test "$(echo $OLD_IDS | wc -w)" = 8 && gone_within 5 progs_alive $OLD_IDS; }
check "  ... and the old agent's 8 programs are freed with it" old_freed
check "  ... another agent's exec is left alone (its cgroup, its process, its program)" \
	sh -c "test \"\$(cat '$OTHER_CG/cgroup.procs' 2>/dev/null)\" = $OTHER_PID && kill -0 $OTHER_PID && test \"\$(bpftool -j cgroup show '$OTHER_CG' | jq length)\" = 1"
kill -9 "$OTHER_PID"; wait "$OTHER_PID" 2>/dev/null
for _ in $(seq 1 50); do rmdir "$OTHER_CG" 2>/dev/null && break; sleep 0.05; done
rm -rf "$OTHER_PINS"

# --- 7b: link pins an earlier build left (until December 2026 each exec's links were pinned) ---------
OLD_ID=00c0ffee00c0ffee
OLD_CG=$(dirname "$cg")/boxkite-exec-$OLD_ID
mkdir -p "$OLD_CG"
sleep 300 & OLD_PID=$!
echo "$OLD_PID" > "$OLD_CG/cgroup.procs"
python3 "$(dirname "$0")/bpflink.py" "$OLD_CG" "$BPFFS" "$BPFFS/exec-$OLD_ID" > "$T/bpflink.out" 2>&1
n_old=$(cg_progs "$OLD_CG")
check "an earlier build's exec: a process in its cgroup, $n_old programs on it as links pinned under exec-$OLD_ID ($(cat "$T/bpflink.out"))" \
	sh -c "grep -qx $OLD_PID '$OLD_CG/cgroup.procs' && test \$(ls '$BPFFS/exec-$OLD_ID' | wc -l) = 8 && test '$n_old' = 8"
kill -9 "$AGENT_PID"; wait "$AGENT_PID" 2>/dev/null; AGENT_PID=
rm -f "$T/admin.sock" "$SOCK"
START=$(wc -l < "$T/agent.log")
bk_start_agent || not_ok "the next agent starts"
check "the next agent killed it (its link pins name the cgroup; so do the old programs on it)" \
	sh -c "tail -n +$((START + 1)) '$T/agent.log' | grep -q '\"recovered_exec\".*killed unrecorded exec in $OLD_CG' && ! test -d '$OLD_CG'"
wait "$OLD_PID" 2>/dev/null
bk_stop_agent
bk_start_agent || not_ok "an agent starts again"
check "  ... and an agent started after the kernel released its cgroup removed the pins" sh -c "! test -e '$BPFFS/exec-$OLD_ID'"

# --- 11 again, on the SO_PEERCRED fallback -----------------------------------------------------------
bk_stop_agent
bk_start_agent '{"testing":{"allow_unsafe":true,"mask_features":["so_peerpidfd"]}}' || not_ok "agent starts with SO_PEERPIDFD masked"
check "control: callers are identified by SO_PEERCRED now" test "$(ctl status | jq -r .features.identity)" = so_peercred
out=$(call_as pb shim_container_id identity)
check "control: pb's shim is pod pb on the fallback" test "$(jq -r .body.pod_uid <<< "$out")" = "$UB"
pid_reuse "pid reuse (so_peercred)"
bk_stop_agent

# --- 8: a required kernel facility missing stops the start -------------------------------------------
for f in clone3_into_cgroup pidfd_open openat2 bpf_link_cgroup seccomp_filter; do
	echo "{\"testing\":{\"allow_unsafe\":true,\"mask_features\":[\"$f\"]}}" > "$T/mask.json"
	timeout 20 "$AGENT" --config "$T/mask.json" --socket "$T/mp/m.sock" --admin-socket "$T/m-admin.sock" \
		--state-dir "$T/m-state" --bpffs "$BPFFS-m" --metrics 127.0.0.1:0 > "$T/mask.out" 2> "$T/mask.err"
	rc=$?
	check "$f missing: the start stops (exit $rc) with one line naming it" \
		sh -c "[ $rc = 1 ] && [ \$(wc -l < '$T/mask.err') = 1 ] && grep -q '^boxkite-agent: refusing to start: kernel .* lacks $f' '$T/mask.err' && [ ! -e '$T/mp/m.sock' ]"
done
echo "# e.g. $(cat "$T/mask.err")"
rm -rf "$BPFFS-m"
# a facility only the BPF layer needs: without that layer the agent starts
echo '{"layers":{"bpf":false},"testing":{"allow_unsafe":true,"mask_features":["bpf_link_cgroup"]}}' > "$T/mask.json"
"$AGENT" --config "$T/mask.json" --socket "$T/mp/m.sock" --admin-socket "$T/m-admin.sock" \
	--state-dir "$T/m-state" --bpffs "$BPFFS-m" --metrics 127.0.0.1:0 > "$T/mask.out" 2> "$T/mask.err" &
mpid=$!
for _ in $(seq 1 200); do [ -S "$T/m-admin.sock" ] && break; kill -0 "$mpid" 2>/dev/null || break; sleep 0.05; done
check "control: bpf_link_cgroup missing with the BPF layer off, the agent starts" test -S "$T/m-admin.sock"
kill -TERM "$mpid" 2>/dev/null; wait "$mpid" 2>/dev/null
rm -rf "$BPFFS-m"; rmdir "$CG2/$(basename "$BPFFS")-m-keepalive" 2>/dev/null

# --- 9: a layer switched off is logged as UNSAFE ------------------------------------------------------
unsafe_line() { # CONFIG -> $line: the agent's UNSAFE line, if any
	bk_stop_agent >/dev/null 2>&1
	local s; s=$(wc -l < "$T/agent.log")
	line="agent did not start"
	bk_start_agent "$1" >/dev/null || return
	line=$(tail -n +$((s + 1)) "$T/agent.log" | grep '"layer_disabled"' | grep -o 'UNSAFE: [^"]*')
}
unsafe_line '{}'
check "control: all layers on, no UNSAFE line${line:+ ($line)}" test -z "$line"
for l in bpf netns landlock seccomp; do
	unsafe_line "{\"layers\":{\"$l\":false},\"testing\":{\"allow_unsafe\":true}}"
	check "$l off: logged as UNSAFE naming it ($line)" grep -q "UNSAFE: layers turned off by configuration: .*$l=off" <<< "$line"
done
bk_stop_agent
