#!/usr/bin/env bash
# The default-path flow, as a new user runs it (issue 19): boxkite-agent
# with no flags on a machine where /run/boxkite does not exist yet, then
# `boxkitectl sandbox create` with no flags, then HTTPS /exec through the
# shim with the pinned key — the first exec right after create must run
# (no 503). Then: what the shim container sees of /run/boxkite, modes set
# again on a restart whatever was there before, relative paths, and the
# one-line errors of a create that cannot work.
#
# In a mount namespace of its own with a fresh tmpfs on /run (as tests/cri
# does): the paths are the node's defaults, and the machine's own /run
# (other tests' sandboxes, a real /run/boxkite) is never touched.
if [ -z "${BK_DEFAULTS_NS:-}" ]; then
	exec env BK_DEFAULTS_NS=1 unshare --mount --propagation private bash "$0" "$@"
fi
mount -t tmpfs -o mode=0755 bk-defaults-run /run || { echo "not ok - test-defaults: cannot mount a tmpfs on /run"; exit 1; }
source "$(dirname "$0")/lib.sh"

# the agent with no flags uses the node's pins, keepalive cgroup and metrics
# port: removed again unless they were there before (bench.sh does the same)
[ -e /sys/fs/bpf/boxkite ] && KEEP_PINS=1 || KEEP_PINS=
[ -e "$CG2/boxkite-keepalive" ] && KEEP_CG=1 || KEEP_CG=
# the pod cgroups that exist before; any other one at the end is this test's
pod_cgroups() { find $CG_ROOTS -maxdepth 3 -path '*/kubepods/*pod*' -type d 2>/dev/null | sort; }
PODS_BEFORE=$(pod_cgroups)
defaults_cleanup() {
	local rc=$?
	for s in "${SANDBOXES[@]}"; do "$CTL" sandbox delete "$s" >/dev/null 2>&1; done
	SANDBOXES=()
	# Whatever boxkitectl could not delete: runc's state lives on this
	# namespace's /run and is gone with it, so every container still
	# listed there is killed and removed now, and the pod cgroups this
	# test made go too (else they would outlive it, unreachable).
	local id
	for id in $(runc --root /run/runc list -q 2>/dev/null); do
		runc --root /run/runc kill -a "$id" KILL 2>/dev/null
		runc --root /run/runc delete -f "$id" >/dev/null 2>&1
	done
	local d
	for d in $(comm -13 <(echo "$PODS_BEFORE") <(pod_cgroups)); do
		find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null
		rmdir "$(dirname "$d")" "$(dirname "$(dirname "$d")")" 2>/dev/null
	done
	bk_stop_agent >/dev/null 2>&1
	[ -n "$KEEP_PINS" ] || rm -rf /sys/fs/bpf/boxkite
	[ -n "$KEEP_CG" ] || rmdir "$CG2/boxkite-keepalive" 2>/dev/null
	(exit "$rc")
	bk_cleanup
}
trap defaults_cleanup EXIT

# start_default: boxkite-agent, no flags at all; true once the default
# admin socket answers
start_default() {
	"$AGENT" >> "$T/agent.log" 2>&1 &
	AGENT_PID=$!
	for _ in $(seq 1 200); do
		"$CTL" status >/dev/null 2>&1 && return 0
		kill -0 "$AGENT_PID" 2>/dev/null || break
		sleep 0.05
	done
	echo "# agent failed to start:"; tail -5 "$T/agent.log" | sed 's/^/#   /'
	return 1
}
# api NAME ROUTE [curl args]: HTTPS through NAME's shim from the manager
# netns, the pod's key pinned, the token from a header file; prints the
# body, then the HTTP code on a line of its own
api() {
	local n=$1 route=$2; shift 2
	printf 'X-Sidecar-Auth-Token: %s\n' "$(cat "$(sb "$n" token_file)")" > "$T/hdr-$n"
	nsenter --net="/run/netns/$(sb "$n" client_netns)" curl -sS --max-time 20 -k --pinnedpubkey "$(sb "$n" pin)" \
		-H @"$T/hdr-$n" -H 'Content-Type: application/json' -w '\n%{http_code}\n' "$(sb "$n" url)$route" "$@"
}
mode_of() { stat -c '%a %U %F' "$1" 2>&1; }
# what the shim container of NAME has under /run/boxkite (its own mount
# namespace, read through /proc/PID/root)
shim_sees() {
	local pid; pid=$(runc --root /run/runc state "$(sb "$1" shim_container_id)" | jq -r .pid)
	(cd "/proc/$pid/root/run/boxkite" && find . -mindepth 1 | sort | tr '\n' ' ')
}

if ss -ltnH 'sport = :9464' | grep -q .; then
	skip "the default metrics port 127.0.0.1:9464 is taken on this machine: the agent cannot start with no flags"
	exit 0
fi
check "a fresh /run: no /run/boxkite yet" test ! -e /run/boxkite
check "boxkite-agent with no flags starts" start_default
check "pods' directory /run/boxkite/pods: 755, root ($(mode_of /run/boxkite/pods))" \
	test "$(mode_of /run/boxkite/pods)" = "755 root directory"
check "agent socket /run/boxkite/pods/agent.sock: 666 ($(mode_of /run/boxkite/pods/agent.sock))" \
	test "$(mode_of /run/boxkite/pods/agent.sock)" = "666 root socket"
check "admin socket /run/boxkite/admin.sock: 600 ($(mode_of /run/boxkite/admin.sock))" \
	test "$(mode_of /run/boxkite/admin.sock)" = "600 root socket"
check "state /run/boxkite/state: 700 ($(mode_of /run/boxkite/state))" \
	test "$(mode_of /run/boxkite/state)" = "700 root directory"
check "the pods' directory holds the agent socket only ($(ls -A /run/boxkite/pods | tr '\n' ' '))" \
	test "$(ls -A /run/boxkite/pods)" = agent.sock

# --- create with no flags, then the first exec through the shim at once ----------------
SANDBOXES+=(dflt)
t0=$(date +%s%N)
"$CTL" sandbox create dflt > "$T/sb-dflt.json" 2> "$T/create.err"; rc=$?
create_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
check "sandbox create dflt (no flags) succeeds in ${create_ms} ms (exit $rc: $(head -c 300 "$T/create.err"))" test "$rc" = 0
api dflt /exec -d '{"command":"echo first-exec; id -u"}' > "$T/first.out" 2>&1
code=$(tail -1 "$T/first.out")
check "the first HTTPS /exec right after create: 200 (got $code)" test "$code" = 200
check "  ... and it ran in the sandbox ($(head -1 "$T/first.out" | head -c 200))" \
	sh -c "head -1 '$T/first.out' | jq -e '.exit_code == 0 and .stdout == \"first-exec\n1000\n\"' >/dev/null"
api dflt /health > "$T/health.out" 2>&1
check "/health through the shim: agent connected ($(head -1 "$T/health.out"))" \
	sh -c "head -1 '$T/health.out' | jq -e '.agent == \"connected\"' >/dev/null"
check "the shim container sees the pods' directory only: $(shim_sees dflt)" \
	test "$(shim_sees dflt)" = "./pods ./pods/agent.sock "

# --- a restart sets the modes again, whatever was there before -------------------------
bk_stop_agent >/dev/null 2>&1
rm -f /run/boxkite/admin.sock /run/boxkite/pods/agent.sock
chmod 0700 /run/boxkite /run/boxkite/pods; chown 65534:65534 /run/boxkite/pods; chmod 0755 /run/boxkite/state
check "restart with no flags over a 0700 /run/boxkite and a 0700 pods' directory of another owner" start_default
check "  ... pods' directory back to 755 root ($(mode_of /run/boxkite/pods))" test "$(mode_of /run/boxkite/pods)" = "755 root directory"
check "  ... state back to 700 ($(mode_of /run/boxkite/state))" test "$(mode_of /run/boxkite/state)" = "700 root directory"
for _ in $(seq 1 100); do api dflt /health 2>/dev/null | head -1 | grep -q '"agent":"connected"' && break; sleep 0.1; done
api dflt /exec -d '{"command":"echo again"}' > "$T/again.out" 2>&1
check "  ... the running sandbox's shim reaches the new agent: /exec $(tail -1 "$T/again.out")" \
	sh -c "test \"\$(tail -1 '$T/again.out')\" = 200 && head -1 '$T/again.out' | jq -e '.stdout == \"again\n\"' >/dev/null"

# --- relative paths are resolved before runc sees them ---------------------------------
SANDBOXES+=(drel)
(cd "$BK_BIN" && "$CTL" sandbox create drel --shim-bin ./boxkite-shim > "$T/sb-drel.json" 2> "$T/rel.err"); rc=$?
check "create with a relative --shim-bin (exit $rc: $(head -c 300 "$T/rel.err"))" test "$rc" = 0
api drel /exec -d '{"command":"echo rel"}' > "$T/rel.out" 2>&1
check "  ... its first /exec: $(tail -1 "$T/rel.out")" test "$(tail -1 "$T/rel.out")" = 200

# --- a create that cannot work says so in one line --------------------------------------
# an agent socket nobody answers on: the shim comes up, never connects
mkdir -p "$T/dead"
python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET).bind(sys.argv[1])' "$T/dead/agent.sock"
SANDBOXES+=(ddead)
t0=$(date +%s%N)
"$CTL" sandbox create ddead --agent-socket "$T/dead/agent.sock" --wait 2 > "$T/sb-ddead.json" 2> "$T/dead.err"; rc=$?
dead_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
echo "# $(cat "$T/dead.err")"
check "create against a dead agent socket fails after its --wait 2 (exit $rc, ${dead_ms} ms)" \
	sh -c "[ $rc = 1 ] && [ $dead_ms -ge 2000 ] && [ $dead_ms -lt $(scaled_ms 10000) ]"
check "  ... in one line naming the shim's log and what to do next" \
	sh -c "[ \$(wc -l < '$T/dead.err') = 1 ] && grep -q 'did not reach the agent at $T/dead/agent.sock within 2 s: read /run/boxkite/local/ddead/shim.log.*sandbox delete ddead' '$T/dead.err'"
check "  ... and that log is there to read" test -s /run/boxkite/local/ddead/shim.log
"$CTL" sandbox delete ddead
check "--no-wait: the same create returns without waiting" \
	sh -c "'$CTL' sandbox create ddead --agent-socket '$T/dead/agent.sock' --no-wait > /dev/null 2>&1"
"$CTL" sandbox delete ddead
bk_stop_agent >/dev/null 2>&1
SANDBOXES+=(dnone)   # (a create that should fail: deleted at the end if it did not)
"$CTL" sandbox create dnone > /dev/null 2> "$T/none.err"; rc=$?
echo "# $(cat "$T/none.err")"
check "create with no agent running: exit 1 at once, one line saying to start it" \
	sh -c "[ $rc = 1 ] && [ \$(wc -l < '$T/none.err') = 1 ] && grep -q 'no agent socket at /run/boxkite/pods/agent.sock: start boxkite-agent' '$T/none.err' && [ ! -e /run/boxkite/local/dnone ]"
