#!/usr/bin/env bash
# Per-exec isolation, end to end against the real kernel: fresh netns,
# exec cgroup with pids/memory caps (v2 controllers where the node has them,
# the v1 hierarchies on a hybrid host: detected, see lib.sh),
# BPF egress filters, container entry, timeouts, output caps, fail closed.
. "$(dirname "$0")/lib.sh"

bk_start_agent || { not_ok "agent starts"; exit 1; }
bk_sandbox_create ex1 || { not_ok "sandbox created"; exit 1; }
PODNS=$(sb ex1 pod_netns)

# --- the network namespace -------------------------------------------------
bk_exec ex1 -- ip -o link
check "exec sees only lo" test "$(j .stdout | awk -F': ' '{print $2}' | tr '\n' ' ')" = "lo "
check "receipt lists only lo" test "$(j '.isolation.interfaces | join(",")')" = "lo"
# two execs alive at the same time (a freed namespace's inode number can be
# reused by a later one, so compare concurrent execs)
ctl exec ex1 --json -- sleep 0.5 > "$T/c1.json" & p1=$!
ctl exec ex1 --json -- sleep 0.5 > "$T/c2.json" & p2=$!
wait $p1 $p2
i1=$(jq .isolation.netns_inode "$T/c1.json"); i2=$(jq .isolation.netns_inode "$T/c2.json")
podino=$(stat -L -c %i "/run/netns/$PODNS")
check "netns inode differs per exec" test "$i1" != "$i2"
check "netns inode differs from the pod's" sh -c "test $i1 != $podino && test $i2 != $podino"
check "receipt names the 8 attached BPF programs" test "$(j '.isolation.bpf | length')" = 8
check "receipt: pids and memory caps" test "$(j '.isolation.pids_max') $(j '.isolation.memory_max')" = "256 536870912"
check_on hybrid "receipt: v1 pids and memory cgroups used on this hybrid host" \
	sh -c "jq -e '.isolation.cgroup_pids_v1 and .isolation.cgroup_memory_v1' $T/last.json >/dev/null"
check_on v2 "receipt: the caps are in the v2 exec cgroup (no v1 hierarchy on this node)" \
	sh -c "jq -e '(.isolation.cgroup_pids_v1 | not) and (.isolation.cgroup_memory_v1 | not)' $T/last.json >/dev/null"

# --- a fake metadata server reachable from the pod (test namespaces only) ---
fake_metadata "$PODNS"
check "the fake metadata server is reachable from the pod network" \
	sh -c "nsenter --net=/run/netns/$PODNS curl -s --max-time 2 http://169.254.169.254/latest/meta-data | grep -q metadata-secret"

PROBE='curl -sS --max-time 3 -o /dev/null -w "%{time_total}" http://169.254.169.254/latest/meta-data; echo " rc=$?"; python3 -c "
import socket, errno
s = socket.socket(); s.settimeout(3)
try:
    s.connect((\"169.254.169.254\", 80)); print(\"errno=0\")
except OSError as e:
    print(\"errno=\" + errno.errorcode.get(e.errno, str(e.errno)))
"'
probe() { bk_exec ex1 -- sh -c "$PROBE"; }
fast() { awk -v lim="$(scaled_ms 100)" '{ if ($1 * 1000 < lim) exit 0; exit 1 }' <<< "$(j .stdout | head -1)"; }

probe
check "both layers: metadata connect fails (curl exit 7)" grep -q 'rc=7' <<< "$(j .stdout)"
check "both layers: fails in under 100 ms" fast
check "both layers: BPF reported the denial" test "$(j '[.denied[] | select(.dst == "169.254.169.254" and .port == 80)] | length > 0')" = true

bk_stop_agent; bk_start_agent '{"layers":{"netns":false}}'
probe
check "BPF alone: connect refused with EPERM" grep -q 'errno=EPERM' <<< "$(j .stdout)"
check "BPF alone: curl fails fast (exit 7, < 100 ms)" sh -c "grep -q 'rc=7' $T/last.json" && fast && ok "BPF alone: under 100 ms" || not_ok "BPF alone: under 100 ms"
check "BPF alone: receipt says pod netns" test "$(j .isolation.netns)" = pod
check "BPF alone: denial reported" test "$(j '.denied | length > 0')" = true

bk_stop_agent; bk_start_agent '{"layers":{"bpf":false},"testing":{"allow_unsafe":true}}'
probe
check "netns alone: connect fails with ENETUNREACH" grep -q 'errno=ENETUNREACH' <<< "$(j .stdout)"
check "netns alone: fails in under 100 ms" fast
check "netns alone: receipt lists no BPF program" test "$(j '.isolation.bpf | length')" = 0

bk_stop_agent; bk_start_agent '{"layers":{"bpf":false,"netns":false},"testing":{"allow_unsafe":true}}'
bk_exec ex1 -- curl -sS --max-time 3 http://169.254.169.254/latest/meta-data
check "both layers off: the probe reaches the fake server (so these tests can fail)" test "$(j .stdout)" = "metadata-secret"
bk_stop_agent; bk_start_agent

# --- processes -----------------------------------------------------------------
# (no wait at the end: the exec ends when its 400 attempts are made, however
# slow forks are on this machine; its pid namespace takes the sleeps along)
bk_exec ex1 --timeout $((5 * TIME_SCALE)) -- sh -c 'i=0; while [ $i -lt 400 ]; do sleep 60 & i=$((i+1)); done; echo tried'
check "fork flood hits the pids cap" grep -qi 'fork' <<< "$(j .stderr)"
bk_exec ex1 -- echo alive
check "node and sandbox responsive after the fork flood" test "$(j .stdout)" = alive
bk_exec ex1 --timeout $(( 5 * TIME_SCALE )) -- sh -c 'b() { b | b & }; b; sleep 3'
# a result, not a refusal or an error: an exit code (a number), the exec's
# receipt, back within the timeout plus a margin; the bomb hit the pids cap
# (the timeout is scaled: a timed-out exec answers the reference's
# "Command timed out" instead of its stderr)
check "fork bomb contained, exec returns a result (exit $(j .exit_code), $(j .duration_ms) ms)" \
	jq -e "(.exit_code | type) == \"number\" and (.exec_id | type) == \"string\" and .isolation.pids_max == 256
		and .duration_ms < $(scaled_ms 8000)" "$T/last.json"
check "fork bomb: forks failed at the pids cap ($(j .stderr | grep -ci fork) fork errors in stderr)" \
	grep -qi 'fork' <<< "$(j .stderr)"
bk_exec ex1 -- echo alive
check "responsive after the fork bomb" test "$(j .stdout)" = alive

bk_exec ex1 -- sh -c 'setsid sh -c "sleep 1234.5" </dev/null >/dev/null 2>&1 & (sh -c "sleep 1234.6 &" &); echo started'
sleep 0.3
check "setsid / double-forked children do not survive the exec" sh -c "! pgrep -f 'sleep 1234[.][56]' >/dev/null"

bk_exec ex1 --timeout 1 -- sh -c 'sleep 1234.7 & sleep 30'
check "timeout: exit_code 124" test "$(j .exit_code)" = 124
check "timeout: timed_out true" test "$(j .timed_out)" = true
check "timeout: returned within 3 s" test "$(j '.duration_ms < 3000')" = true
check "timeout: nothing of it survives" sh -c "! pgrep -f 'sleep 1234[.]7' >/dev/null"

# the command proves it started (a marker in the workspace, then the sleep
# under a name of its own); only then the requester hangs up
bk_exec ex1 -- rm -f /workspace/hup-started
gone_before=$(grep -c '"outcome":"requester_gone"' "$T/agent.log")
"$CTL" --admin-socket "$T/admin.sock" exec ex1 --timeout 60 -- sh -c 'echo $$ > /workspace/hup-started; exec sleep 1234.8' >/dev/null 2>&1 & cp=$!
hpid=
for _ in $(seq 1 $((100 * TIME_SCALE))); do hpid=$(pgrep -f '^sleep 1234[.]8') && break; sleep 0.05; done
bk_exec ex1 -- cat /workspace/hup-started
check "hang-up: the command had started (marker written, sleep running as pid ${hpid:-none})" \
	sh -c "test -n '$hpid' && test -n '$(j .stdout)' && kill -0 $hpid"
kill -9 $cp; wait $cp 2>/dev/null
for _ in $(seq 1 $((40 * TIME_SCALE))); do [ -n "$hpid" ] && kill -0 "$hpid" 2>/dev/null || break; sleep 0.05; done
check "a requester that hangs up takes its exec with it (pid ${hpid:-none} killed)" \
	sh -c "test -n '$hpid' && ! kill -0 $hpid 2>/dev/null && ! pgrep -f '^sleep 1234[.]8' >/dev/null"
check "  ... the agent says why (requester_gone)" \
	test "$(grep -c '"outcome":"requester_gone"' "$T/agent.log")" -gt "$gone_before"

bk_exec ex1 -- python3 -c 'b = bytearray(900 * 1024 * 1024); print("survived")'
check "memory hog killed by the memory cap" sh -c "test \"$(j .exit_code)\" = 137 && ! grep -q survived $T/last.json"

bk_exec ex1 -- sh -c 'head -c 3000000 /dev/zero | tr "\0" a'
check "output cap: truncated" test "$(j .truncated)" = true
check "output cap: exactly 1 MiB kept" test "$(j '.stdout | length')" = 1048576

# --- the container and the user ----------------------------------------------------
TOKEN=$(cat "$(sb ex1 token_file)")
bk_exec ex1 -- sh -c 'id -u; cat /proc/self/status | grep ^Cap; grep NoNewPrivs /proc/self/status; pwd; env; ls -la /run/secrets /opt/boxkite /run/boxkite 2>&1; cat /proc/*/environ 2>/dev/null | tr "\0" "\n"; ls /proc | grep -c "^[0-9]"'
check "runs as the sandbox user" test "$(j .stdout | head -1)" = 1000
check "no capabilities at all" test "$(j .stdout | grep -c '^Cap...:.0000000000000000')" = 5
check "no_new_privs set" grep -q 'NoNewPrivs:.1' <<< "$(j .stdout)"
check "cwd is /workspace" grep -qx '/workspace' <<< "$(j .stdout)"
check "clean environment (only PATH HOME LANG TERM, PWD by the shell)" \
	test "$(j .stdout | grep -E '^[A-Z_]+=' | cut -d= -f1 | sort -u | tr '\n' ' ')" = "HOME LANG PATH PWD TERM "
check "the shim's files are not visible" sh -c "! grep -q 'boxkite-shim\|tls.key' $T/last.json"
check "the token appears nowhere in the exec's view" sh -c "! grep -q '$TOKEN' $T/last.json"
check "no shim environment visible" sh -c "! grep -q SIDECAR_ $T/last.json"
bk_exec ex1 -- sh -c 'grep -E "^Sig(Blk|Ign):" /proc/self/status'
j .stdout > "$T/sig"
# (the agent blocks SIGTERM/SIGINT for its signalfd and ignores SIGPIPE;
# none of that may reach a command: `yes | head -1` must end by SIGPIPE)
check "signals: nothing blocked, SIGPIPE not ignored ($(tr '\n\t' '  ' < "$T/sig"))" \
	test "$(grep -c '^SigBlk:.0000000000000000' "$T/sig") $(( 0x$(awk '/^SigIgn/{print $2}' "$T/sig") & 0x1000 ))" = "1 0"

# --- the exec's own /proc keeps the container's OCI masks --------------------------------------
# For every path of the runtime's maskedPaths/readonlyPaths: masked (another
# filesystem over it), read-only, how many bytes a read gives. The exec
# must show what the runtime's own `runc exec` shows.
PROCPROBE='import os
proc = os.stat("/proc").st_dev
for p in ["/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
          "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/proc/asound", "/proc/bus",
          "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"]:
    if not os.path.lexists(p):
        print(p, "absent"); continue
    masked = "masked" if os.stat(p).st_dev != proc else "proc"
    ro = "ro" if os.statvfs(p).f_flag & os.ST_RDONLY else "rw"
    n = "-"
    if not os.path.isdir(p):
        try:
            with open(p, "rb") as f: n = str(len(f.read(64)))
        except OSError as e: n = "E" + str(e.errno)
    print(p, masked, ro, n)'
runc --root /run/runc exec --user 1000:1000 "$(sb ex1 sandbox_container_id)" python3 -c "$PROCPROBE" > "$T/masks-runc.txt" 2>&1
bk_exec ex1 -- python3 -c "$PROCPROBE"; j .stdout > "$T/masks-exec.txt"
check "runc exec shows the masks (the reference: /proc/timer_list masked, /proc/sys ro)" \
	sh -c "grep -qx '/proc/timer_list masked rw 0' $T/masks-runc.txt && grep -qx '/proc/sys proc ro -' $T/masks-runc.txt"
check "/proc/timer_list masked in the exec (reads empty)" grep -qx '/proc/timer_list masked rw 0' "$T/masks-exec.txt"
check "/proc/keys masked in the exec (reads empty)" grep -qx '/proc/keys masked rw 0' "$T/masks-exec.txt"
check "/proc/acpi masked in the exec (an empty read-only tmpfs)" grep -qx '/proc/acpi masked ro -' "$T/masks-exec.txt"
check "/proc/sys read-only in the exec" grep -qx '/proc/sys proc ro -' "$T/masks-exec.txt"
for p in /proc/kcore /proc/sysrq-trigger; do
	if grep -qx "$p absent" "$T/masks-runc.txt"; then skip "$p: this kernel has none"
	elif [ $p = /proc/kcore ]; then check "$p masked in the exec (reads empty)" grep -qx "$p masked rw 0" "$T/masks-exec.txt"
	else check "$p read-only in the exec" grep -q "^$p proc ro " "$T/masks-exec.txt"; fi
done
check "the exec's /proc masks are the runtime's$(diff "$T/masks-runc.txt" "$T/masks-exec.txt" | grep '^[<>]' | tr '\n' ' ' | sed 's/^./: &/')" \
	cmp -s "$T/masks-runc.txt" "$T/masks-exec.txt"

# The agent keeps the masks per container instance between execs
# (isolate/masks.c): a change of the container's mount table must reach
# the next exec, as it reaches the next `runc exec`. Each step changes the
# table in the container's own mount namespace, then compares both.
INIT=$(runc --root /run/runc state "$(sb ex1 sandbox_container_id)" | jq .pid)
kept_mi() { find "/proc/$AGENT_PID/fd" -mindepth 1 -maxdepth 1 -lname "/proc/$INIT/mountinfo" | wc -l; }
check "the container's mount table is kept open after its exec ($(kept_mi) descriptor, status kept_mask_fds $(ctl status | jq .limits.kept_mask_fds))" \
	test "$(kept_mi)" = 1
masks_as_runc() { # $1: what changed
	runc --root /run/runc exec --user 1000:1000 "$(sb ex1 sandbox_container_id)" python3 -c "$PROCPROBE" > "$T/masks-runc.txt" 2>&1
	bk_exec ex1 -- python3 -c "$PROCPROBE"; j .stdout > "$T/masks-exec.txt"
	check "$1: the next exec's /proc masks are the next runc exec's$(diff "$T/masks-runc.txt" "$T/masks-exec.txt" | grep '^[<>]' | tr '\n' ' ' | sed 's/^./: &/')" \
		sh -c "cmp -s '$T/masks-runc.txt' '$T/masks-exec.txt' && grep -qx '$2' '$T/masks-exec.txt'"
}
nsenter -t "$INIT" -m mount -t tmpfs -o ro,size=0 tmpfs /proc/fs
masks_as_runc "a tmpfs mounted over /proc/fs in the container" "/proc/fs masked ro -"
nsenter -t "$INIT" -m mount -o remount,bind,rw /proc/sys
masks_as_runc "/proc/sys remounted read-write in the container" "/proc/sys proc rw -"
nsenter -t "$INIT" -m mount -o remount,bind,ro /proc/sys
nsenter -t "$INIT" -m umount /proc/fs
masks_as_runc "both undone" "/proc/fs proc ro -"

bk_exec ex1 -- sh -c 'echo persisted > /workspace/keep.txt'
bk_exec ex1 -- sh -c 'cat /workspace/keep.txt; stat -c %u /workspace/keep.txt'
check "workspace files persist across execs, owned by the sandbox user" test "$(j .stdout | tr '\n' ' ')" = "persisted 1000 "

check "boxkitectl exec without --json relays stdout and the exit code" \
	sh -c "test \"\$($CTL --admin-socket $T/admin.sock exec ex1 -- sh -c 'echo out; exit 3'; echo rc=\$?)\" = \"out
rc=3\""

# --- no leaks over 1000 execs (100 in a slow VM: a leak per exec still shows) ----------
NLEAK=$(( 1000 / TIME_SCALE )); [ "$NLEAK" -ge 100 ] || NLEAK=100
fds_before=$(ls /proc/$AGENT_PID/fd | wc -l)
nets_before=$(lsns -t net -n | wc -l)
fails=0
for i in $(seq 1 "$NLEAK"); do ctl exec ex1 -- true || fails=$((fails + 1)); done
check "$NLEAK sequential execs succeed" test "$fails" = 0
sleep 0.5
fds_after=$(ls /proc/$AGENT_PID/fd | wc -l)
# (up to 8 of them are the pool of prepared network namespaces, refilled
# in the background; a leak would be one or more per exec)
check "agent fds stable after $NLEAK execs ($fds_before -> $fds_after)" test "$fds_after" -le "$((fds_before + 8))"
check "no exec cgroup left in any hierarchy" test -z "$(exec_cgroups_left)"
check "no per-exec pins in the bpffs directory ($(exec_pins | head -3 | xargs))" test -z "$(exec_pins)"
# (a leak would be one per exec; a small margin absorbs other activity on the host)
check "netns count back to baseline ($nets_before -> $(lsns -t net -n | wc -l))" test "$(lsns -t net -n | wc -l)" -le "$((nets_before + 3))"

# --- fail closed -----------------------------------------------------------------------
for fault in cgroup bpf netns setns pidns seccomp; do
	bk_stop_agent; bk_start_agent "{\"testing\":{\"allow_unsafe\":true,\"fault\":\"$fault\"}}"
	ctl exec ex1 --json -- touch "/workspace/ran-$fault" > "$T/last.json"
	case $fault in cgroup) want=cgroup;; bpf) want=bpf;; netns) want=netns;; seccomp) want=seccomp;; *) want=container;; esac
	check "fault $fault: refused, names layer $want" test "$(j .code) $(j .layer)" = "isolation_failed $want"
done
bk_stop_agent; bk_start_agent
bk_exec ex1 -- sh -c 'ls /workspace/ran-* 2>/dev/null | wc -l'
check "no command ran under any injected fault" test "$(j .stdout)" = 0
# after execve the agent reads the command's /proc/<pid>/status: a filter
# missing there kills the command and refuses the exec (its output is not
# returned)
bk_stop_agent; bk_start_agent '{"testing":{"allow_unsafe":true,"fault":"seccomp_readback"}}'
ctl exec ex1 --json -- sh -c 'echo out; sleep 5' > "$T/last.json"
check "fault seccomp_readback: refused, names layer seccomp, no output returned ($(j .layer): $(j .detail))" \
	test "$(j .code) $(j .layer) $(j '.stdout // "none"')" = "isolation_failed seccomp none"
check "fault seccomp_readback: the command was killed (no process left)" test -z "$(exec_cgroups_left)"
bk_stop_agent; bk_start_agent
check "nothing left after the faults" test -z "$(exec_cgroups_left)"

# --- the exec child runs beside the agent's thread (child.c, spawn_direct) ---------------
# on the thread-local storage of a donor thread (boxkite-tls) that does
# not run meanwhile: parked in a futex wait, every signal it can block
# blocked
tls_threads() { for t in /proc/"$AGENT_PID"/task/*; do [ "$(cat "$t/comm" 2>/dev/null)" = boxkite-tls ] && echo "${t##*/}"; done; }
bk_exec ex1 -- sh -c 'echo beside'
donor=$(tls_threads | head -1)
check "an exec's child took a donor's thread-local storage: a boxkite-tls thread (${donor:-none})" test -n "$donor"
check "the donor is parked in futex (syscall $(cut -d' ' -f1 /proc/$AGENT_PID/task/${donor:-0}/syscall 2>/dev/null)), every signal blocked but SIGKILL, SIGSTOP and glibc's two" \
	sh -c "test \"\$(cut -d' ' -f1 /proc/$AGENT_PID/task/${donor:-0}/syscall)\" = 202 && grep -q '^SigBlk:[[:space:]]*fffffffe7ffbfeff\$' /proc/$AGENT_PID/task/${donor:-0}/status"
check "the exec beside the agent: its output exact" test "$(j .exit_code) $(j .stdout)" = "0 beside"
# without a donor the child holds the spawning thread (CLONE_VFORK) as before
bk_stop_agent; bk_start_agent '{"testing":{"allow_unsafe":true,"fault":"tls_donor"}}'
bk_exec ex1 -- sh -c 'echo held; echo err >&2; exit 4'
check "fault tls_donor: the exec runs held by CLONE_VFORK, output and exit code exact" \
	test "$(j .exit_code) $(j .stdout) $(j .stderr)" = "4 held err"
check "fault tls_donor: no donor thread was made ($(tls_threads | wc -l))" test -z "$(tls_threads)"
# six children held at once (their reports read only when the command
# ends or writes): as many take donors as the machine has CPUs, the
# others hold their threads (CLONE_VFORK); the donors stay for the next
ncpu=$(getconf _NPROCESSORS_ONLN); ndon=$(( ncpu < 6 ? ncpu : 6 ))
bk_stop_agent; bk_start_agent '{"testing":{"allow_unsafe":true,"fault":"report_late"}}'
dpids=()
for i in 1 2 3 4 5 6; do ctl exec ex1 --json -- sh -c "sleep 59.0613; echo d$i" > "$T/d$i.json" & dpids+=($!); done
six_running() { test "$(pgrep -c -x -f 'sleep 59.0613')" -ge 6; }
wait_for $((5 * TIME_SCALE)) six_running
held=$(tls_threads | wc -l)
pkill -x -f 'sleep 59.0613'
wait "${dpids[@]}"
outs=$(for i in 1 2 3 4 5 6; do jq -j .stdout "$T/d$i.json"; done | tr -d '\n')
check "six execs at once: $ndon took donors (one a CPU: $held made), the others held their threads; all six ran ($outs)" \
	test "$held $outs" = "$ndon d1d2d3d4d5d6"
bk_exec ex1 -- sh -c 'echo after'
check "  ... the donors stay for the next execs (output $(j .stdout), $(tls_threads | wc -l) donors)" \
	test "$(j .stdout) $(tls_threads | wc -l)" = "after $ndon"
bk_stop_agent; bk_start_agent

# --- boxkitectl exec --stream (issue 18): output as written, bytes exact, exit code ----------
ctl exec ex1 --stream -- sh -c 'echo out1; echo err1 >&2; printf "\\377\\000x"; exit 3' >"$T/so" 2>"$T/se"; rc=$?
check "exec --stream: stdout bytes exact, stderr apart, exit code relayed ($rc)" \
	sh -c "test $rc = 3 && test \"\$(od -An -tx1 $T/so | tr -d ' \n')\" = 6f7574310aff0078 && test \"\$(cat $T/se)\" = err1"
ctl exec ex1 --stream --json -- sh -c 'echo a; sleep 0.3; echo b' > "$T/sj"
check "exec --stream --json: start, two stdout events, exit last" \
	test "$(jq -r .type "$T/sj" | tr '\n' ' ')" = "start stdout stdout exit "

# --- the kernel in every receipt (issue 20) --------------------------------------------
bk_exec ex1 -- true
check "receipt: isolation.kernel is this machine's release" test "$(j .isolation.kernel)" = "$(uname -r)"
check "receipt: isolation.features as status reports them" \
	test "$(jq -cS .isolation.features "$T/last.json")" = "$(ctl status | jq -cS .features)"

# --- the container's kept entry (isolate/instances.c) goes with the container ----------
kept_now() { ctl status | jq -r '.limits | "\(.kept_containers) \(.kept_mask_fds)"'; }
read -r c0 m0 <<<"$(kept_now)"
bk_sandbox_delete ex1 >/dev/null
sleep 0.5
read -r c1 m1 <<<"$(kept_now)"
check "the kept container and its mount table go within 0.5 s of its delete (kept_containers $c0 -> $c1, kept_mask_fds $m0 -> $m1; descriptors on its mountinfo: $(kept_mi))" \
	sh -c "test '$c1' = $((c0 - 1)) && test '$m1' = $((m0 - 1)) && test $(kept_mi) = 0"
