# Shared helpers for the end-to-end tests (bash, run as root).
# Every test makes its own temp dir, agent, sandboxes and test namespaces,
# and removes all of them on exit, also when it fails (trap).
set -u
BK_BIN=${BK_BIN:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/build}
AGENT=$BK_BIN/boxkite-agent
CTL=$BK_BIN/boxkitectl
SHIM=$BK_BIN/boxkite-shim
T=$(mktemp -d /run/bkt-XXXXXX)
# pins of this test's agents (the node's default is /sys/fs/bpf/boxkite)
BPFFS=/sys/fs/bpf/$(basename "$T")
chmod 755 "$T"
# the test agent's socket, in a directory of its own like the node's
# /run/boxkite/pods (the agent refuses one that holds its admin socket or
# state: sandbox pods mount that directory)
SOCK=$T/pods/agent.sock
AGENT_PID=
SANDBOXES=()
NETNSES=()
PASS=0
FAIL=0
SKIP=0
TEST_NAME=$(basename "$0" .sh)

ok() { PASS=$((PASS + 1)); echo "ok - $TEST_NAME: $*"; }
# A check that does not apply here (another cgroup layout, a missing
# facility): counted apart, never as a pass.
skip() { SKIP=$((SKIP + 1)); echo "skip - $TEST_NAME: $*"; }
not_ok() { FAIL=$((FAIL + 1)); echo "not ok - $TEST_NAME: $*"; }
# check NAME COMMAND...: ok when the command succeeds
check() { local n=$1; shift; if "$@"; then ok "$n"; else not_ok "$n"; fi; }

# The cgroup layout of this machine, read from its mounts (never assumed):
#   CG2        the cgroup2 mount (/sys/fs/cgroup/unified on a hybrid host,
#              /sys/fs/cgroup on a pure v2 node)
#   CG_ROOTS   every hierarchy's root, v2 and v1
#   CG_LAYOUT  "hybrid" (v1 hierarchies mounted too) or "v2"
CG2=$(findmnt -t cgroup2 -n -o TARGET | head -1)
CG_V1=$(findmnt -t cgroup -n -o TARGET | tr '\n' ' ')
CG_ROOTS="$CG2 $CG_V1"
if [ -n "${CG_V1// /}" ]; then CG_LAYOUT=hybrid; else CG_LAYOUT=v2; fi
# check_on LAYOUT NAME COMMAND...: a check that only means something on one
# layout (e.g. the v1 pids/memory hierarchies of a hybrid host); a skip
# elsewhere.
check_on() {
	local layout=$1; shift
	if [ "$CG_LAYOUT" = "$layout" ]; then check "$@"; else skip "$1 (only on a $layout cgroup layout; this one is $CG_LAYOUT)"; fi
}
# Exec cgroups of the pod (or of every pod) left in any hierarchy.
# A warm slot (exec.warm_slots: an exec made ahead of its request) is an
# exec cgroup the agent names in its status (.warm_slots.exec_ids); every
# other exec cgroup is a running or a left-over exec (no agent answering:
# none is a slot).
slot_ids() { ctl status 2>/dev/null | jq -r '.warm_slots.exec_ids[]?' 2>/dev/null; }
is_slot_id() { [ -n "$2" ] && grep -qxF "${1##*/boxkite-exec-}" <<< "$2"; } # DIR IDS
exec_cgroups_left() { local d ids; ids=$(slot_ids); for d in $(find $CG_ROOTS -path "*/kubepods/*${1:+pod$1/}boxkite-exec-*" -type d 2>/dev/null); do is_slot_id "$d" "$ids" || echo "$d"; done; }
slot_cgroups() { local d ids; ids=$(slot_ids); for d in $(find $CG2 -path "*/kubepods/*${1:+pod$1/}boxkite-exec-*" -type d 2>/dev/null); do is_slot_id "$d" "$ids" && echo "$d"; done; }
# the v2 cgroup of a running exec of pod $1 (one with a process that is
# neither the agent's nor a parked slot's), empty if none yet
live_exec_cg() { local d p c; for d in "$CG2"/kubepods/*/pod"$1"/boxkite-exec-* "$CG2"/kubepods/pod"$1"/boxkite-exec-*; do
	[ -d "$d" ] || continue
	for p in $(cat "$d/cgroup.procs" 2>/dev/null); do c=$(cat /proc/$p/comm 2>/dev/null); case $c in ''|boxkite-agent|boxkite-slot|boxkite-slotmon) ;; *) echo "$d"; return 0 ;; esac; done
done; }

# Per-exec pin directories in the bpffs directory: there are none (an
# exec's programs are attached to its cgroup itself, which holds them
# until the kernel releases it; agents before December 2026 pinned links
# under exec-<id>/).
exec_pins() { ls "$BPFFS" 2>/dev/null | grep '^exec-'; }
# The exec records in the state directory, counted: files and table slots in use.
exec_records() { python3 "$(dirname "${BASH_SOURCE[0]}")/records.py" "$T/state"; }
# The agent's programs attached to a cgroup (a directory), counted.
cg_progs() { bpftool -j cgroup show "$1" 2>/dev/null | jq '[.[] | select(.name | startswith("bk_"))] | length'; }
# The ids of the running agent's eight programs (from its pins).
agent_prog_ids() {
	local n
	for n in bk_sock_create bk_connect4 bk_connect6 bk_sendmsg4 bk_sendmsg6 bk_egress bk_recvmsg4 bk_recvmsg6; do
		bpftool -j prog show pinned "$BPFFS/$n" 2>/dev/null | jq -r .id
	done
}
# progs_alive ID...: those of the programs the kernel still has
progs_alive() { local i; for i in "$@"; do bpftool prog show id "$i" >/dev/null 2>&1 && echo "$i"; done; }
# wait_for SECONDS COMMAND...: true once COMMAND succeeds, polled every 0.05 s
wait_for() { local t=$(($1 * 20)); shift; while ! "$@"; do t=$((t - 1)); [ "$t" -gt 0 ] || return 1; sleep 0.05; done; }
# gone_within SECONDS COMMAND...: true once COMMAND fails (or prints
# nothing), polled every 0.1 s
gone_within() {
	local n=$(($1 * 10)); shift
	for _ in $(seq 1 "$n"); do
		local out; out=$("$@" 2>/dev/null) || return 0
		[ -z "$out" ] && return 0
		sleep 0.1
	done
	return 1
}

# Time bounds are for this machine; slower ones (a VM under TCG) scale them
# with BK_TIME_SCALE (an integer factor, default 1).
TIME_SCALE=${BK_TIME_SCALE:-1}
scaled_ms() { echo $(($1 * TIME_SCALE)); }

ctl() { "$CTL" --admin-socket "$T/admin.sock" "$@"; }

bk_start_agent() {
	local cfg=${1:-'{}'}
	# probe targets of verify and the self-test: test hosts only
	jq '{"verify_targets":{"metadata":"169.254.169.254:80","kubernetes_api":"10.96.0.1:443",
		"pod":"10.244.1.5:8080","public":"203.0.113.10:443"}} + .' <<< "$cfg" > "$T/config.json"
	# BK_AGENT_WRAP: a command the agent runs under (e.g. "prlimit --nofile=256:512"; it must exec)
	${BK_AGENT_WRAP:-} "$AGENT" --config "$T/config.json" --socket "$SOCK" --admin-socket "$T/admin.sock" \
		--state-dir "$T/state" --bpffs "$BPFFS" --metrics "${BK_METRICS:-127.0.0.1:0}" >> "$T/agent.log" 2>&1 &
	AGENT_PID=$!
	for _ in $(seq 1 200); do
		[ -S "$T/admin.sock" ] && return 0
		kill -0 "$AGENT_PID" 2>/dev/null || break
		sleep 0.05
	done
	echo "# agent failed to start:"; sed 's/^/#   /' "$T/agent.log" | tail -5
	return 1
}

bk_stop_agent() {
	[ -n "$AGENT_PID" ] || return 0
	kill -TERM "$AGENT_PID" 2>/dev/null
	local rc=0
	wait "$AGENT_PID" 2>/dev/null || rc=$?
	AGENT_PID=
	rm -f "$T/admin.sock" "$SOCK"
	return $rc
}

bk_sandbox_create() {
	local name=$1; shift
	# listed first: a create that fails waiting for the shim leaves the
	# sandbox (for its logs), and the cleanup deletes it
	SANDBOXES+=("$name")
	"$CTL" sandbox create "$name" --agent-socket "$SOCK" --shim-bin "$SHIM" "$@" > "$T/sb-$name.json"
}

bk_sandbox_delete() {
	"$CTL" sandbox delete "$1"
}

# field of the sandbox create JSON
sb() { jq -r ".$2" "$T/sb-$1.json"; }

# bk_exec NAME [ctl exec options] -- CMD: the full JSON response in $T/last.json
bk_exec() {
	local name=$1; shift
	ctl exec "$name" --json "$@" > "$T/last.json"
}
j() { jq -j "$1" "$T/last.json"; }

bk_netns_add() { ip netns add "$1" && NETNSES+=("$1") && ip -n "$1" link set lo up; }

bk_cleanup() {
	local rc=$?
	# an exit before the end (a failed set-up, an unbound variable, a
	# signal): the checks after that point never ran, so the test must not
	# look like it passed them
	[ "$rc" -eq 0 ] || not_ok "aborted (exit $rc): the checks after this point did not run"
	bk_stop_agent >/dev/null 2>&1
	for s in "${SANDBOXES[@]}"; do "$CTL" sandbox delete "$s" >/dev/null 2>&1; done
	for n in "${NETNSES[@]}"; do ip netns del "$n" 2>/dev/null; done
	# an agent killed on purpose leaves its pins and keepalive cgroup
	rm -rf "$BPFFS" 2>/dev/null
	rmdir "$CG2/$(basename "$BPFFS")-keepalive" 2>/dev/null
	jobs -p | xargs -r kill 2>/dev/null
	if [ "$FAIL" -gt 0 ] && [ -f "$T/agent.log" ]; then
		# what the agent warned of (a cgroup it could not remove, a wipe
		# that failed) is often far from the tail
		echo "# agent log (its last warnings and errors):"
		grep -E '"level":"(warn|error)"' "$T/agent.log" | grep -v '"event":"denied"' | tail -15 | cut -c1-600 | sed 's/^/#   /'
		echo "# agent log (tail):"; tail -20 "$T/agent.log" | sed 's/^/#   /'
	fi
	[ -n "${BK_KEEP:-}" ] && cp "$T/agent.log" /tmp/last-agent.log; rm -rf "$T"
	echo "# $TEST_NAME: $PASS passed, $FAIL failed, $SKIP skipped"
	[ "$FAIL" -eq 0 ] && [ "$rc" -eq 0 ] || exit 1
	exit 0
}
trap bk_cleanup EXIT
trap 'exit 130' INT TERM

# The v2 cgroup directory of a container of a local sandbox.
container_cg() {
	local uid=$(sb "$1" pod_uid) id=$(sb "$1" "$2")
	echo "$CG2/kubepods/besteffort/pod$uid/$id"
}

# Run a command from inside a container's cgroup (what the agent's identity
# check sees for a process of that container).
in_cgroup_of() {
	local cg=$1; shift
	sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$cg" "$@"
}

# fake_metadata PODNS: a test namespace holding 169.254.169.254, linked to
# the pod's network namespace, serving $T/md over HTTP on port 80
# (/latest/meta-data says "metadata-secret"). Returns once it answers.
fake_metadata() {
	local pod=$1 md=bk-t-md-$$
	bk_netns_add "$md"
	ip link add bkmd$$ type veth peer name bkmp$$
	ip link set bkmd$$ netns "$md"; ip link set bkmp$$ netns "$pod"
	ip -n "$md" addr add 169.254.169.254/16 dev bkmd$$; ip -n "$md" link set bkmd$$ up
	ip -n "$pod" addr add 169.254.1.1/16 dev bkmp$$; ip -n "$pod" link set bkmp$$ up
	mkdir -p "$T/md/latest"; echo metadata-secret > "$T/md/latest/meta-data"
	nsenter --net="/run/netns/$md" python3 -m http.server 80 --bind 169.254.169.254 --directory "$T/md" >/dev/null 2>&1 &
	for _ in $(seq 1 50); do
		nsenter --net="/run/netns/$pod" curl -s -o /dev/null --max-time 1 http://169.254.169.254/latest/meta-data && return 0
		sleep 0.1
	done
	return 1
}

# bk_world SANDBOX TAG "LO4" "LO6" "ROUTES4" "ROUTES6": a test world (a
# network namespace this test made) linked to the sandbox's pod netns by a
# veth, 192.0.2.1 <-> 192.0.2.2 and 2001:db8:ffff::1 <-> ::2; the world
# holds the LO4/LO6 addresses on its lo, the pod netns routes
# ROUTES4/ROUTES6 through it, and world.py serves there (log
# $T/world-TAG.log). Returns once world.py is ready.
bk_world() {
	local P W a b x
	P=$(sb "$1" pod_netns); W=bk-t-w$2-$$; a=bkw$2a$$; b=bkw$2b$$
	bk_netns_add "$W" || return 1
	ip link add "$a" type veth peer name "$b" || return 1
	ip link set "$a" netns "$W"; ip link set "$b" netns "$P"
	ip -n "$W" addr add 192.0.2.1/24 dev "$a"; ip -n "$W" -6 addr add 2001:db8:ffff::1/64 dev "$a" nodad
	ip -n "$W" link set "$a" up
	for x in $3; do ip -n "$W" addr add "$x/32" dev lo || return 1; done
	for x in $4; do ip -n "$W" -6 addr add "$x/128" dev lo nodad || return 1; done
	ip -n "$P" addr add 192.0.2.2/24 dev "$b"; ip -n "$P" -6 addr add 2001:db8:ffff::2/64 dev "$b" nodad
	ip -n "$P" link set "$b" up
	for x in $5; do ip -n "$P" route add "$x" via 192.0.2.1 || return 1; done
	for x in $6; do ip -n "$P" -6 route add "$x" via 2001:db8:ffff::1 || return 1; done
	nsenter --net="/run/netns/$W" python3 "$(dirname "${BASH_SOURCE[0]}")/world.py" > "$T/world-$2.log" 2>&1 &
	for _ in $(seq 1 50); do grep -q ready "$T/world-$2.log" && return 0; sleep 0.1; done
	return 1
}
