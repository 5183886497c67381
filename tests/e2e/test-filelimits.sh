#!/usr/bin/env bash
# The file helper inside the pod's limits (issue 13, "the file helper runs
# outside the pod's limits"): every helper runs in its own cgroup below the
# pod's (v2, and the v1 pids/memory hierarchies on a hybrid host) under
# RLIMIT_AS and RLIMIT_CPU; regex bombs are refused up front (422
# pattern_too_complex) within a bounded time; backtracking stops at PCRE2's
# match limit; a pattern within the bounds that still burns CPU is stopped
# by the helper's work budget or limits; a huge glob and
# a walk of a directory thousands of levels deep are answered; the agent's
# own memory does not move; no helper cgroup is left; a helper cgroup that
# cannot be made refuses the file op naming the layer.
#
# The agent runs in a cgroup of this test with a 1 GiB memory limit, so
# that an agent whose helper is charged to it (the old code) fails the
# memory checks here instead of taking the machine's memory.
. "$(dirname "$0")/lib.sh"

AG_CG2=$CG2/bkt-agent-$$
AG_MEM=
mkdir "$AG_CG2" || { not_ok "agent cgroup made"; exit 1; }
if [ "$CG_LAYOUT" = hybrid ]; then
	MEMROOT=$(findmnt -t cgroup -n -o TARGET,OPTIONS | awk '$2 ~ /(^|,)memory(,|$)/ {print $1; exit}')
	AG_MEM=$MEMROOT/bkt-agent-$$
	mkdir "$AG_MEM" && echo $((1 << 30)) > "$AG_MEM/memory.limit_in_bytes"
else
	echo $((1 << 30)) > "$AG_CG2/memory.max" 2>/dev/null
fi
cleanup_cgs() {
	local rc=$?
	bk_stop_agent >/dev/null 2>&1
	for s in "${SANDBOXES[@]}"; do "$CTL" sandbox delete "$s" >/dev/null 2>&1; done
	SANDBOXES=()
	rmdir "$AG_CG2" ${AG_MEM:+"$AG_MEM"} 2>/dev/null
	(exit $rc)
	bk_cleanup
}
trap cleanup_cgs EXIT
cat > "$T/agent-in-cg" <<EOF
#!/bin/sh
echo \$\$ > "$AG_CG2/cgroup.procs" || exit 97
${AG_MEM:+echo \$\$ > "$AG_MEM/cgroup.procs" || exit 97}
exec "$AGENT" "\$@"
EOF
chmod +x "$T/agent-in-cg"
REAL_AGENT=$AGENT
AGENT=$T/agent-in-cg

bk_start_agent || { not_ok "agent starts"; exit 1; }
bk_sandbox_create fl1 || { not_ok "sandbox fl1 created"; exit 1; }
SB=fl1
UID_POD=$(sb fl1 pod_uid)
SANDBOX_PID=$(runc --root /run/runc state "$(sb fl1 sandbox_container_id)" | jq -r .pid)
chmod 1777 "/proc/$SANDBOX_PID/root/tmp"

req() {
	local a
	a=$(jq -c --arg sb "$SB" '. + {sandbox: $sb}' <<< "$2") || return 1
	"$CTL" call --socket "$T/admin.sock" "$1" "$a" > "$T/r.json"
}
st() { jq -r .status "$T/r.json"; }
b() { jq -r ".body$1" "$T/r.json"; }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$AGENT_PID/status"; }
# the agent cgroup's peak memory, bytes ("" where the kernel keeps none)
agent_peak() {
	if [ -n "$AG_MEM" ]; then cat "$AG_MEM/memory.max_usage_in_bytes"
	elif [ -f "$AG_CG2/memory.peak" ]; then cat "$AG_CG2/memory.peak"; fi
}
file_cgroups() { find $CG_ROOTS -path "*/kubepods/*pod$UID_POD/boxkite-file-*" -type d 2>/dev/null; }
any_file_cgroups() { find $CG_ROOTS -path "*/kubepods/*/boxkite-file-*" -type d 2>/dev/null; }

# --- the trees: a file to grep, a wide tree, a deep one ---------------------------
bk_exec fl1 --timeout 120 -- python3 -c '
import os, random
os.makedirs("/workspace/bomb", exist_ok=True)
open("/workspace/bomb/a.txt", "w").write(("a" * 60 + "\n") * 50)
random.seed(1)
open("/workspace/bomb/ab.txt", "w").write("".join(random.choice("ab") for _ in range(300000)) + "\n")
# (x+x+)+y backtracks on each line: ~2^16 steps here (under the match
# limit, so the helper keeps going line after line), past the limit there
open("/workspace/bomb/slow.txt", "w").write(("x" * 16 + "!y\n") * 4000)
open("/workspace/bomb/bt.txt", "w").write("x" * 30 + "!y\n")
for i in range(40):
    for j in range(40):
        d = "/workspace/wide/d%02d/e%02d" % (i, j)
        os.makedirs(d)
        for k in range(20):
            open("%s/f%02d.txt" % (d, k), "w").close()
os.chdir("/workspace")
os.mkdir("deep"); os.chdir("deep")
for _ in range(3000):
    os.mkdir("d"); os.chdir("d")
open("bottom.txt", "w").write("needle\n")
print("made")'
check "trees made in the sandbox (a wide one, one 3000 levels deep)" test "$(j .stdout)" = made

RSS0=$(rss_kib)
PEAK0=$(agent_peak)

# --- regex bombs: refused up front, fast -----------------------------------------
BOMB_MS=$(scaled_ms 3000)
for p in '(((a{1,255}){1,255}){1,255})' '((a{1,100}){1,100}){1,100}' '(a?){30000}' '(.{0,2000}){1,200}' \
	'((((a*)*)*)*)*b'; do
	t0=$(date +%s%N)
	req grep "$(jq -cn --arg p "$p" '{pattern: $p, path: "/workspace/bomb"}')"
	took=$(ms "$t0")
	check "grep $p: 422 pattern_too_complex within $BOMB_MS ms (took $took ms; got $(st) $(b .code))" \
		test "$(st) $(b .code)" = "422 pattern_too_complex" -a "$took" -le "$BOMB_MS"
done
req grep '{"pattern":"a{1,60}","path":"/workspace/bomb/a.txt","max_matches":3}'
check "an ordinary bounded pattern still matches" test "$(st) $(b '.matches | length')" = "200 3"
# Python's re allows backreferences; PCRE2's match limits bound them
t0=$(date +%s%N)
req grep '{"pattern":"(a*)*\\1b","path":"/workspace/bomb/a.txt"}'
took=$(ms "$t0")
check "grep (a*)*\\1b (a backreference): answered within $BOMB_MS ms (took $took ms; $(st))" \
	sh -c "test '$(st)' = 200 && test $took -le $BOMB_MS"
t0=$(date +%s%N)
req grep '{"pattern":"(x+x+)+y","path":"/workspace/bomb/bt.txt"}'
took=$(ms "$t0")
check "grep (x+x+)+y: stopped at PCRE2's match limit within $BOMB_MS ms (took $took ms; $(st) truncated $(b .truncated))" \
	sh -c "test '$(st) $(b .truncated)' = '200 true' && test $took -le $BOMB_MS && jq -e '.body.error | test(\"match limit\")' $T/r.json >/dev/null"

# --- a pattern within the bounds that burns CPU: stopped by the helper's limits ---
# (each line costs ~20 ms under the match limit, 4000 of them more than a
# minute: the helper's work budget stops the search at 4 s of CPU (200,
# truncated); its CPU limit is 5 s, the agent's wall deadline 10 s: on a
# loaded machine one of those may come first, all are answered and leave
# nothing behind)
CPU_MS=$(scaled_ms 14000)
t0=$(date +%s%N)
req grep '{"pattern":"(x+x+)+y","path":"/workspace/bomb/slow.txt"}' &
GREP_PID=$!
in_pod=no helper_cg=no
for _ in $(seq 1 40); do
	sleep 0.1
	cgs=$(file_cgroups)
	[ -n "$cgs" ] || continue
	helper_cg=yes
	for c in $cgs; do
		case $c in "$CG2"/*) for p in $(cat "$c/cgroup.procs" 2>/dev/null); do in_pod=yes; HELPER_PID=$p; done ;; esac
	done
	[ "$in_pod" = yes ] && break
done
check "the helper runs in its own cgroup below the pod's (v2)" test "$in_pod" = yes
if [ "$in_pod" = yes ]; then
	# the helper joins its v1 cgroups and sets its limits itself, first
	# thing after its exec (before it reads the request): seen born, it may
	# not be there yet (slow under the sanitizers)
	for _ in $(seq 1 40); do
		cgline=$(cat "/proc/$HELPER_PID/cgroup" 2>/dev/null)
		cpu=$(awk '/Max cpu time/ {print $4}' "/proc/$HELPER_PID/limits" 2>/dev/null)
		[ "$cpu" = 5 ] && { [ "$CG_LAYOUT" = v2 ] || grep -q ":pids:/kubepods/.*boxkite-file-" <<< "$cgline"; } && break
		sleep 0.05
	done
	check_on hybrid "the helper is in the pod's v1 memory and pids hierarchies" \
		sh -c "printf '%s\n' '$cgline' | grep -Eq ':memory:/kubepods/.*pod$UID_POD/boxkite-file-' &&
		       printf '%s\n' '$cgline' | grep -Eq ':pids:/kubepods/.*pod$UID_POD/boxkite-file-'"
	lim=$(awk '/Max address space/ {print $5}' "/proc/$HELPER_PID/limits" 2>/dev/null)
	cpu=$(awk '/Max cpu time/ {print $4}' "/proc/$HELPER_PID/limits" 2>/dev/null)
	check "the helper has an address-space limit (RLIMIT_AS $lim) and a CPU limit (RLIMIT_CPU $cpu s)" \
		test -n "$lim" -a "$lim" != unlimited -a "$cpu" = 5
else
	skip "helper limits (no helper seen)"
fi
wait "$GREP_PID"
took=$(ms "$t0")
got="$(st) $(b .code) $(b .truncated)"
check "CPU-burning pattern stopped by the helper's limits within $CPU_MS ms (took $took ms; got $got)" \
	sh -c "test '$got' = '200 null true' -o '$got' = '422 resource_limit null' -o '$got' = '504 timeout null' && test $took -le $CPU_MS"
[ "$got" = "200 null true" ] && echo "# stopped by the helper's work budget: $(b '.matches | length') matches, truncated"
[ "$got" = "422 resource_limit" ] && echo "# stopped by RLIMIT_CPU: $(b .detail)"
[ "$got" = "504 timeout" ] && echo "# stopped by the wall deadline (a loaded machine): $(b .detail)"

# --- a huge glob, and walks thousands of levels deep -----------------------------
WALK_MS=$(scaled_ms 14000)
for g in '**/**/**/*' '**/**/**/**/**/**/**/**/*' '**/*a*a*a*a*a*a*a*a*a*a*b'; do
	t0=$(date +%s%N)
	req glob "$(jq -cn --arg g "$g" '{pattern: $g, path: "/workspace/wide"}')"
	took=$(ms "$t0")
	check "glob $g over 34k entries: answered within $WALK_MS ms (took $took ms; $(st) $(b .code) matches $(b '.matches | length') truncated $(b .truncated))" \
		sh -c "test '$(st)' = 200 -o '$(st) $(b .code)' = '422 resource_limit' && test $took -le $WALK_MS"
done
for op in 'glob {"pattern":"**/*","path":"/workspace/deep"}' 'grep {"pattern":"needle","path":"/workspace/deep"}' \
	'glob {"pattern":"**/bottom.txt"}'; do
	t0=$(date +%s%N)
	req ${op%% *} "${op#* }"
	took=$(ms "$t0")
	check "${op%% *} ${op#* } 3000 levels deep: answered within $WALK_MS ms (took $took ms; $(st) truncated $(b .truncated))" \
		sh -c "test '$(st)' = 200 && test $took -le $WALK_MS"
done

# --- the agent's memory, and what is left ----------------------------------------
RSS1=$(rss_kib)
PEAK1=$(agent_peak)
# (the sanitizer build's allocator keeps freed memory in its quarantine, up
# to 256 MiB by default: its bound is looser; the 4 GiB of the regex bomb
# this guards against fails either)
case $BK_BIN in */san) RSS_BOUND=$((160 * 1024)) ;; *) RSS_BOUND=$((32 * 1024)) ;; esac
check "agent VmRSS before/after: $RSS0 kB -> $RSS1 kB (bound +$RSS_BOUND kB)" test $((RSS1 - RSS0)) -le "$RSS_BOUND"
if [ -n "$PEAK0" ] && [ -n "$PEAK1" ]; then
	check "agent cgroup peak memory: $((PEAK0 >> 20)) MiB -> $((PEAK1 >> 20)) MiB (bound +64 MiB)" \
		test $((PEAK1 - PEAK0)) -le $((64 << 20))
else
	skip "agent cgroup peak memory (no memory.peak on this kernel)"
fi
check "no helper cgroup left in any hierarchy" gone_within 2 any_file_cgroups
check "the agent is alive" kill -0 "$AGENT_PID"

# --- an agent killed mid-op: its helper dies, the next agent removes its cgroup --
req grep '{"pattern":"(x+x+)+y","path":"/workspace/bomb/slow.txt"}' &
GREP_PID=$!
for _ in $(seq 1 40); do sleep 0.1; [ -n "$(file_cgroups)" ] && break; done
kill -KILL "$AGENT_PID"; wait "$AGENT_PID" 2>/dev/null; AGENT_PID=
wait "$GREP_PID" 2>/dev/null
rm -f "$T/admin.sock" "$SOCK"
check "an agent killed mid-op leaves its helper's cgroup (what the sweep is for)" test -n "$(file_cgroups)"
bk_start_agent || { not_ok "agent restarts"; exit 1; }
req view '{"path":"bomb/a.txt"}'
swept() { test "$(st)" = 200 && test -z "$(file_cgroups)"; }
check "the next file op of the pod sweeps it (view $(st))" swept

# --- fail closed: no helper cgroup, no file op -----------------------------------
bk_stop_agent
bk_start_agent '{"testing":{"allow_unsafe":true,"fault":"file_cgroup"}}' || { not_ok "agent restarts with the fault"; exit 1; }
req file_create '{"path":"fault-made.txt","content":"x"}'
check "helper cgroup refused: file_create answers 503 isolation_failed, layer cgroup" \
	test "$(st) $(b .code) $(b .layer)" = "503 isolation_failed cgroup"
req view '{"path":"bomb/a.txt"}'
check "helper cgroup refused: view answers 503 isolation_failed" test "$(st) $(b .code)" = "503 isolation_failed"
bk_stop_agent
bk_start_agent || { not_ok "agent restarts"; exit 1; }
req view '{"path":"fault-made.txt"}'
check "nothing was written while the cgroup was refused" test "$(st)" = 404
check "no helper cgroup left after the faults" gone_within 2 any_file_cgroups
