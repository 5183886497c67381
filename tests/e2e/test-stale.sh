#!/usr/bin/env bash
# A socket is filtered for its whole life (issue 13, critical): exec A makes
# TCP and UDP sockets and hands them (SCM_RIGHTS over a Unix socket in the
# sandbox's /tmp) to exec B, a long exec started first; once A has ended, B
# uses them. Every use is refused at once (EPERM) and reported as a denial
# (stale_socket) in B's receipt — in a pod-network profile (internet: the
# shim's port on 127.0.0.1, the fake internet A itself was allowed to reach,
# the resolver, over IPv4 and IPv6) and in isolated mode (A's own network
# namespace, which its sockets keep). The same for sockets a process left
# behind by a timed-out exec hands over; that process is killed anyway.
# Once A's cgroup is removed no one can take its programs off (a
# descriptor of the cgroup opened before is refused); taken off by hand
# while A runs, a hole is told in the receipt of the exec that ran across
# it; and an agent killed while the creating exec runs leaves the socket
# (held by a process of the sandbox container, not an exec) filtered: the
# new agent kills the exec and removes its entry from the maps the old
# programs read, and the old programs go once the socket is closed.
# Every host is a test host in a namespace this test made.
. "$(dirname "$0")/lib.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
STALE=$(cat "$HERE/stale.py")

bk_start_agent || { not_ok "agent starts"; exit 1; }

world_for() { # NAME IDX: a test world linked to the sandbox's pod netns
	bk_world "$1" "s$2" "203.0.113.10 169.254.169.254 10.96.0.10" "2001:db8::10" \
		"203.0.113.0/24 169.254.169.254/32 10.96.0.0/12" "2001:db8::10/128"
}

bk_sandbox_create st-inet --policy internet && world_for st-inet 1 || { not_ok "internet sandbox + world"; exit 1; }
bk_sandbox_create st-iso --policy isolated || { not_ok "isolated sandbox"; exit 1; }
ok "two sandboxes (internet with its test world, isolated)"

# hold SANDBOX TAG SPEC...: start the holder (exec B) in the background
hold() {
	local sbx=$1 tag=$2; shift 2
	ctl exec "$sbx" --json --timeout "$((60 * TIME_SCALE))" -- python3 -c "$STALE" hold "$tag" "$@" > "$T/hold-$tag.json" 2> "$T/hold-$tag.err" &
	HOLDER=$!
}
# go SANDBOX TAG: the sender has ended; the holder may use its sockets
go() { ctl exec "$1" -- touch "/tmp/bk-stale-$2.go" >/dev/null; }
res() { jq -r .stdout "$T/hold-$1.json" | awk -v n="$2" '$1 == n { print $2 }'; }
hj() { jq -j "$2" "$T/hold-$1.json"; }
refused() { # TAG NAME...: each use refused with EPERM
	local tag=$1; shift
	for n in "$@"; do
		local r; r=$(res "$tag" "$n")
		check "$tag: $n on the ended exec's socket refused (EPERM; got ${r:-nothing})" test "$r" = EPERM
	done
}
PUID=$(sb st-inet pod_uid)
SPID=$(runc --root /run/runc state "$(sb st-inet sandbox_container_id)" | jq -r .pid)
pod_cgs() { ls -d "$CG2"/kubepods/*/pod"$PUID"/boxkite-exec-* "$CG2"/kubepods/pod"$PUID"/boxkite-exec-* 2>/dev/null; }
# sender TAG TIMEOUT KIND...: exec A sends its sockets to the holder and
# stays until its timeout; A_CG is its cgroup (a new one of the pod, with
# processes, once the holder's is there: it listens)
sender() {
	local tag=$1 to=$2 before d; shift 2
	for _ in $(seq 1 $((100 * TIME_SCALE))); do test -S "/proc/$SPID/root/tmp/bk-stale-$tag.sock" && break; sleep 0.05; done
	before=$(pod_cgs)
	ctl exec st-inet --json --timeout "$to" -- python3 -c "$STALE" sendwait "$tag" "$@" > "$T/send-$tag.json" 2>&1 &
	SENDER=$! A_CG=
	for _ in $(seq 1 $((100 * TIME_SCALE))); do
		for d in $(pod_cgs); do
			grep -qxF "$d" <<< "$before" && continue
			grep -q . "$d/cgroup.procs" 2>/dev/null && A_CG=$d
		done
		[ -n "$A_CG" ] && test -e "/proc/$SPID/root/tmp/bk-stale-$tag.sent" && return 0
		sleep 0.05
	done
	return 1
}

# --- pod-network profile (internet) --------------------------------------------------
hold st-inet inet \
	lo-shim,tcp,127.0.0.1,8080 inet-tcp80,tcp,203.0.113.10,80 md-tcp80,tcp,169.254.169.254,80 \
	dns-udp,udp,10.96.0.10,53 inet-udp,udp,203.0.113.10,8080 inet6-tcp80,tcp,2001:db8::10,80 \
	inet6-udp,udp,2001:db8::10,8080 own-tcp80,new-tcp,203.0.113.10,80 own-shim,new-tcp,127.0.0.1,8080
bk_exec st-inet --timeout 30 -- python3 -c "$STALE" send inet tcp tcp tcp udp udp tcp6 udp6
check "internet: exec A made 7 sockets and sent them" test "$(j .stdout)" = "sent 7"
A_ID=$(j .exec_id)
check "internet: exec A has ended and its cgroup is removed" sh -c "! test -d '$(j .isolation.cgroup)'"
go st-inet inet
wait "$HOLDER"
check "internet: holder got the 7 sockets" sh -c "jq -r .stdout $T/hold-inet.json | grep -qx 'received 7'"
refused inet lo-shim inet-tcp80 md-tcp80 dns-udp inet-udp inet6-tcp80 inet6-udp
check "internet: control, the holder's own socket reaches the fake internet ($(res inet own-tcp80))" \
	test "$(res inet own-tcp80)" = ok
check "internet: control, the holder's own socket to the shim's port is refused ($(res inet own-shim))" \
	test "$(res inet own-shim)" = EPERM
stale_n=$(hj inet '[.denied[] | select(.reason == "stale_socket")] | length')
check "internet: the uses are reported as stale_socket denials in B's receipt ($stale_n)" test "${stale_n:-0}" -ge 7
check "internet: ... the shim's port among them" \
	test "$(hj inet '[.denied[] | select(.reason == "stale_socket" and .dst == "127.0.0.1" and .port == 8080)] | length > 0')" = true
check "internet: ... UDP sendmsg among them" \
	test "$(hj inet '[.denied[] | select(.reason == "stale_socket" and .hook == "sendmsg4")] | length > 0')" = true
check "internet: ... and in the audit log" \
	sh -c "grep '\"event\":\"denied\"' $T/agent.log | grep '\"pod\":\"st-inet\"' | grep -q '\"reason\":\"stale_socket\"'"
check "internet: B's receipt: the BPF layer held to the end (no unfiltered socket existed)" \
	test "$(hj inet .isolation.bpf_held_to_end)" = true

# --- isolated: A's own network namespace lives on with its sockets ------------------
hold st-iso iso lo-tcp,tcp,127.0.0.1,9 lo-udp,udp,127.0.0.1,9 inet-tcp80,tcp,203.0.113.10,80 \
	own-lo-udp,new-udp,127.0.0.1,9
bk_exec st-iso --timeout 30 -- python3 -c "$STALE" send iso tcp udp tcp
check "isolated: exec A made 3 sockets and sent them" test "$(j .stdout)" = "sent 3"
go st-iso iso
wait "$HOLDER"
refused iso lo-tcp lo-udp inet-tcp80
check "isolated: control, the holder's own loopback socket works ($(res iso own-lo-udp))" test "$(res iso own-lo-udp)" = ok
check "isolated: reported as stale_socket denials" \
	test "$(hj iso '[.denied[] | select(.reason == "stale_socket")] | length >= 3')" = true

# --- a process a timed-out exec left behind -----------------------------------------
hold st-inet left lo-shim,tcp,127.0.0.1,8080 inet-tcp80,tcp,203.0.113.10,80 dns-udp,udp,10.96.0.10,53
bk_exec st-inet --timeout "$((2 * TIME_SCALE))" -- python3 -c "$STALE" leave left tcp tcp udp
check "leftover: exec A timed out" test "$(j .timed_out) $(j .exit_code)" = "true 124"
A_CG=$(j .isolation.cgroup)
check "leftover: A's cgroup is gone (nothing of it runs)" sh -c "! test -d '$A_CG'"
bk_exec st-inet -- cat /tmp/bk-stale-left.beat; b1=$(j .stdout)
sleep "$TIME_SCALE"
bk_exec st-inet -- cat /tmp/bk-stale-left.beat; b2=$(j .stdout)
check "leftover: the process that left A's process tree was killed (beat $b1 -> $b2)" \
	sh -c "test -n '$b1' && test '$b1' = '$b2'"
go st-inet left
wait "$HOLDER"
refused left lo-shim inet-tcp80 dns-udp
check "leftover: reported as stale_socket denials" \
	test "$(hj left '[.denied[] | select(.reason == "stale_socket")] | length >= 3')" = true

# --- once A's cgroup is removed, no one can take its programs off ------------------
# (BPF_PROG_DETACH needs a descriptor of the cgroup; one opened while A ran
# is refused once the cgroup is removed)
hold st-inet off inet-tcp80,tcp,203.0.113.10,80
if sender off "$((3 * TIME_SCALE))" tcp; then ok "off: A sent its socket and runs ($A_CG)"; else not_ok "off: A sent its socket and runs"; fi
python3 "$HERE/bpfdetach.py" "$A_CG" "$BPFFS" "$T/off.try" > "$T/off.out" 2>&1 &
DPID=$!
for _ in $(seq 1 50); do grep -qs '^open' "$T/off.out" && break; sleep 0.05; done
check "off: a descriptor of A's cgroup is open" grep -qs '^open' "$T/off.out"
wait "$SENDER"
check "off: A timed out ($(jq -r .exit_code "$T/send-off.json"))" test "$(jq -r .exit_code "$T/send-off.json")" = 124
a_removed() { ! test -d "$A_CG"; }
check "off: A's cgroup is removed" wait_for $((3 * TIME_SCALE)) a_removed
touch "$T/off.try"; wait "$DPID"
check "off: then all 8 detaches through that descriptor are refused ($(grep -v '^open' "$T/off.out" | awk '{print $2}' | sort | uniq -c | xargs))" \
	sh -c "test \$(grep -c '^bk_' $T/off.out) = 8 && ! grep -q ' ok\$' $T/off.out"
go st-inet off
wait "$HOLDER"
refused off inet-tcp80
check "off: B's receipt: the BPF layer held to the end" test "$(hj off .isolation.bpf_held_to_end)" = true

# --- a hole is told: A's programs taken off its cgroup by hand while B holds its socket --
hold st-inet hole inet-tcp80,tcp,203.0.113.10,80
if sender hole "$((3 * TIME_SCALE))" tcp; then ok "hole: A sent its socket and runs ($A_CG)"; else not_ok "hole: A sent its socket and runs"; fi
python3 "$HERE/bpfdetach.py" "$A_CG" "$BPFFS" > "$T/hole.out" 2>&1
check "hole: the 8 programs taken off A's cgroup by hand ($(awk '{print $2}' "$T/hole.out" | sort | uniq -c | xargs))" \
	test "$(grep -c ' ok$' "$T/hole.out")" = 8
wait "$SENDER"
check "hole: A's own receipt does not claim bpf_held_to_end" test "$(jq -r .isolation.bpf_held_to_end "$T/send-hole.json")" = false
hole_logged() { grep -q '"event":"bpf_hole"' "$T/agent.log"; }
check "hole: A's removal finds the programs gone and the agent logs it (bpf_hole)" wait_for $((3 * TIME_SCALE)) hole_logged
go st-inet hole
wait "$HOLDER"
check "hole: with A's programs gone its socket gets through ($(res hole inet-tcp80)): the test sees a hole" \
	test "$(res hole inet-tcp80)" = ok
check "hole: B's receipt does not claim bpf_held_to_end" test "$(hj hole .isolation.bpf_held_to_end)" = false
bk_exec st-inet -- true
check "hole: a later exec holds again" test "$(j .isolation.bpf_held_to_end)" = true

# --- the agent killed while A runs; the socket held by a sandbox-container process ---
in_cgroup_of "$(container_cg st-inet sandbox_container_id)" \
	nsenter -t "$SPID" -m -u -i -n -p -S 1000 -G 1000 python3 -c "$STALE" hold rs \
	inet-tcp80,tcp,203.0.113.10,80 lo-shim,tcp,127.0.0.1,8080 dns-udp,udp,10.96.0.10,53 > "$T/rs.out" 2>&1 &
RSPID=$!
OLD_IDS=$(agent_prog_ids | xargs)
ctl exec st-inet --timeout "$((60 * TIME_SCALE))" -- python3 -c "$STALE" sendwait rs tcp tcp udp > /dev/null 2>&1 &
for _ in $(seq 1 $((100 * TIME_SCALE))); do grep -qs received "$T/rs.out" && break; sleep 0.1; done
check "restart: a sandbox-container process holds A's 3 sockets while A runs" grep -qx 'received 3' "$T/rs.out"
kill -9 "$AGENT_PID"; wait "$AGENT_PID" 2>/dev/null; AGENT_PID=
rm -f "$T/admin.sock" "$SOCK"
bk_start_agent || not_ok "restart: a new agent starts"
check "restart: the new agent killed A" grep -q '"recovered_exec".*"action":"killed"' "$T/agent.log"
check "restart: the old agent's 8 programs ($OLD_IDS) live on while A's sockets do" \
	test "$(progs_alive $OLD_IDS | wc -l)" = 8
go st-inet rs
wait "$RSPID"
rsres() { awk -v n="$1" '$1 == n { print $2 }' "$T/rs.out"; }
for n in inet-tcp80 lo-shim dns-udp; do
	check "restart: $n on A's socket refused after the restart (EPERM; got $(rsres $n))" test "$(rsres $n)" = EPERM
done
check "restart: the old programs are freed once the holder let go" gone_within $((5 * TIME_SCALE)) progs_alive $OLD_IDS
