#!/usr/bin/env bash
# Pod limits hold for execs (issue 13): an exec sits below its pod in every
# hierarchy the pod is in (the v2 one, and on a hybrid host every v1 one:
# cpu, cpuacct, cpuset, blkio, devices, freezer, pids, memory), so a CPU
# quota and a cpuset set on the pod hold for it as they do for `runc exec`
# into the sandbox container; its cgroups go in every hierarchy when it
# ends. Local pods (`boxkitectl sandbox create`) get pod-level caps like
# kubelet's pod cgroup: memory, pids, and a CPU quota with --cpus.
. "$(dirname "$0")/lib.sh"

bk_start_agent || { not_ok "agent starts"; exit 1; }
bk_sandbox_create pl1 || { not_ok "sandbox created"; exit 1; }
PUID=$(sb pl1 pod_uid)
SBX=$(sb pl1 sandbox_container_id)
SHIMC=$(sb pl1 shim_container_id)
POD=/kubepods/besteffort/pod$PUID
RUNC_ROOT=/run/runc

# the root of the hierarchy holding controller $1 (the v2 one on a pure v2 node)
ctrl_root() {
	if [ "$CG_LAYOUT" = v2 ]; then echo "$CG2"; return; fi
	findmnt -t cgroup -n -o TARGET,OPTIONS | awk -v c="$1" '{n = split($2, o, ","); for (i = 1; i <= n; i++) if (o[i] == c) { print $1; exit }}'
}

# --- every hierarchy -------------------------------------------------------
# v2, and on a hybrid host the v1 hierarchies holding the pids or memory
# cap: the exec's own cgroup; every other v1 hierarchy: the sandbox
# container's own, exactly as runc exec (its quota, cpuset, device rules)
bk_exec pl1 -- cat /proc/self/cgroup
id=$(j .exec_id)
j .stdout > "$T/cg.txt"
runc --root "$RUNC_ROOT" exec "$SBX" cat /proc/self/cgroup > "$T/cg-runc.txt"
n=$(grep -c . "$T/cg.txt"); bad=; own=0; shared=0
while IFS=: read -r _ ctrls path; do
	case ",$ctrls," in
	,,|*,pids,*|*,memory,*)
		own=$((own + 1)); [[ $path == */boxkite-exec-$id ]] || bad+="$ctrls:$path " ;;
	*)
		shared=$((shared + 1))
		[ "$path" = "$(awk -F: -v c="$ctrls" '$2 == c {print $3}' "$T/cg-runc.txt")" ] || bad+="$ctrls:$path " ;;
	esac
done < "$T/cg.txt"
check "the exec is in its own cgroup in $own and in the container's (as runc exec) in $shared of the $n hierarchies it sees${bad:+ (wrong: $bad)}" \
	test -z "$bad" -a "$own" -ge 1
check_on hybrid "receipt: the exec's cgroup in every v1 hierarchy (cgroups_v1: $(j '.isolation.cgroups_v1 // {} | keys | join(" ")'))" \
	test "$(j '.isolation.cgroups_v1 // {} | length')" -ge "$(findmnt -t cgroup -n | grep -vc 'name=')"

# --- a CPU quota on the pod: 0.1 CPU -------------------------------------------
# CPU seconds a busy loop gets in $1 s of wall time
BUSY='import sys, time
t = time.time()
while time.time() - t < float(sys.argv[1]):
    pass
print("%.2f" % time.process_time())'
D=2
if [ "$CG_LAYOUT" = hybrid ]; then
	CPUD=$(ctrl_root cpu)$POD
	echo 100000 > "$CPUD/cpu.cfs_period_us" && echo 10000 > "$CPUD/cpu.cfs_quota_us"
	quota_set=$?
else
	CPUD=$CG2$POD
	{ [ -f "$CPUD/cpu.max" ] && echo "10000 100000" > "$CPUD/cpu.max"; }
	quota_set=$?
fi
# evidence from the pod's own cgroups, whatever else loads the machine: how
# often the pod was throttled, and the CPU (µs) charged to it
throttled() { awk '$1 == "nr_throttled" { print $2 }' "$CPUD/cpu.stat"; }
charged_us() {
	if [ "$CG_LAYOUT" = hybrid ]; then echo $(($(cat "$(ctrl_root cpuacct)$POD/cpuacct.usage") / 1000))
	else awk '$1 == "usage_usec" { print $2 }' "$CG2$POD/cpu.stat"; fi
}
if [ "$quota_set" = 0 ]; then
	ref=$(runc --root "$RUNC_ROOT" exec "$SBX" python3 -c "$BUSY" "$D")
	t0=$(throttled); u0=$(charged_us)
	bk_exec pl1 -- python3 -c "$BUSY" "$D"
	t1=$(throttled); u1=$(charged_us)
	got=$(j .stdout)
	echo "# pod quota 0.1 CPU, busy loop for $D s: runc exec ${ref:-?} s of CPU, exec $got s;" \
		"during the exec the pod was throttled $((t1 - t0)) times and charged $(((u1 - u0) / 1000)) ms"
	# 0.1 CPU for D s is 0.1*D s; a loose bound (a quarter of a CPU) still
	# tells it from an unthrottled loop (~D s on an idle machine)
	limit=$(echo "$D" | awk '{print $1 / 4}')
	check "runc exec into the container is held to the pod's quota (${ref:-?} s <= $limit s)" \
		awk -v a="${ref:-9}" -v b="$limit" 'BEGIN { exit !(a <= b) }'
	check "an exec is held to the pod's CPU quota ($got s <= $limit s)" \
		awk -v a="${got:-9}" -v b="$limit" 'BEGIN { exit !(a <= b) }'
	check "the pod's quota throttled the exec's loop ($((t1 - t0)) times)" test "$((t1 - t0))" -gt 0
	# (the sandbox container idles: what the pod used meanwhile is the exec's)
	check "the exec's CPU ($got s) is charged to the pod ($(((u1 - u0) / 1000)) ms)" \
		awk -v c="${got:-9}" -v u="$((u1 - u0))" 'BEGIN { exit !(u >= c * 1e6 * 0.8) }'
else
	skip "CPU quota (no cpu controller on the pod's cgroup in this layout)"
fi

# --- a cpuset on the pod ----------------------------------------------------
ncpu=$(nproc --all)
if [ "$ncpu" -lt 2 ]; then
	skip "cpuset (one CPU: a restriction cannot be seen)"
else
	C=$((ncpu - 1))
	cs_set=1
	if [ "$CG_LAYOUT" = hybrid ]; then
		CSD=$(ctrl_root cpuset)$POD
		# v1: the containers first (children must stay a subset), then the pod
		echo "$C" > "$CSD/$SBX/cpuset.cpus" && echo "$C" > "$CSD/$SHIMC/cpuset.cpus" &&
			echo "$C" > "$CSD/cpuset.cpus" && cs_set=0
	elif [ -f "$CG2$POD/cpuset.cpus" ]; then
		echo "$C" > "$CG2$POD/cpuset.cpus" && cs_set=0
	fi
	if [ "$cs_set" = 0 ]; then
		ref=$(runc --root "$RUNC_ROOT" exec "$SBX" grep Cpus_allowed_list /proc/self/status | awk '{print $2}')
		bk_exec pl1 -- grep Cpus_allowed_list /proc/self/status
		got=$(j .stdout | awk '{print $2}')
		echo "# pod cpuset $C: runc exec Cpus_allowed_list ${ref:-?}, exec $got"
		check "runc exec into the container is held to the pod's cpuset ($ref)" test "$ref" = "$C"
		check "an exec is held to the pod's cpuset ($got)" test "$got" = "$C"
	else
		skip "cpuset (no cpuset controller on the pod's cgroup in this layout)"
	fi
fi

# --- teardown: every hierarchy ----------------------------------------------
left=$(exec_cgroups_left "$PUID")
check "no exec cgroup left in any hierarchy ${left:+($left)}" test -z "$left"

# --- the container's kept v1 cgroup.procs (hybrid hosts) ---------------------
# The agent keeps the sandbox container's own v1 cgroup.procs open between
# its execs (isolate/cgroup.c). A kept descriptor must never outlive what it
# names: the directory replaced under a live container (its processes moved
# out, the directory removed and made again, the processes moved back: the
# same path, another cgroup) fails the next exec closed and names the
# layer, and the exec after it joins the new directory; the descriptors go
# with the container.
kept() { ctl status | jq -r '.limits.kept_cgroup_fds'; }
# the container's freezer cgroup $KD made again under its live processes
remake_kd() {
	local p procs
	procs=$(cat "$KD/cgroup.procs")
	for p in $procs; do echo "$p" > "$(dirname "$KD")/cgroup.procs"; done
	rmdir "$KD" && mkdir "$KD"
	for p in $procs; do echo "$p" > "$KD/cgroup.procs"; done
}
if [ "$CG_LAYOUT" = hybrid ]; then
	k0=$(kept)
	kc0=$(ctl status | jq -r '.limits.kept_containers')
	bk_sandbox_create pk1 || not_ok "sandbox pk1 created"
	KPOD=/kubepods/besteffort/pod$(sb pk1 pod_uid)
	KD=$(ctrl_root freezer)$KPOD/$(sb pk1 sandbox_container_id)
	ctl exec pk1 -- true >/dev/null
	k1=$(kept)
	check "the container's v1 cgroup.procs are kept after its first exec ($k0 -> $k1 descriptors)" \
		test "${k1:-0}" -ge "$((${k0:-0} + 2))"
	# one entry per container instance, for its cgroup.procs and its
	# mount table both (isolate/instances.c): one pidfd of its init
	kc1=$(ctl status | jq -r '.limits.kept_containers')
	check "one kept entry for the container's cgroup.procs and its mount table ($kc0 -> $kc1 containers)" \
		test "${kc1:-x}" = "$((${kc0:-0} + 1))"
	remake_kd
	n_in=$(grep -c . "$KD/cgroup.procs")
	bk_exec pk1 -- cat /proc/self/cgroup
	echo "# after the container's freezer cgroup was made again ($n_in processes back in it): $(head -c 300 "$T/last.json")"
	check "the next exec fails closed, naming the layer ($(j .layer): $(j .detail | head -c 100)...)" \
		sh -c "[ '$(j .exit_code)' != 0 ] && grep -q 'v1 freezer cgroup' '$T/last.json'"
	bk_exec pk1 -- cat /proc/self/cgroup
	# (a write to the removed directory's descriptor fails: a success is
	# a join of the directory the path names now)
	got=$(j .stdout | grep ':freezer:')
	ref=$(runc --root "$RUNC_ROOT" exec "$(sb pk1 sandbox_container_id)" cat /proc/self/cgroup | grep ':freezer:')
	check "the exec after it joins the new directory, as runc exec does ($got)" \
		sh -c "[ '$(j .exit_code)' = 0 ] && [ -n '$got' ] && [ '$got' = '$ref' ]"
	# the same for the file helper, which joins them too
	fview() { "$CTL" call --socket "$T/admin.sock" view '{"sandbox":"pk1","path":"/workspace"}' > "$T/fv.json"; }
	fview
	remake_kd
	fview
	echo "# a file op after the directory was made again: $(head -c 300 "$T/fv.json")"
	check "the next file op fails closed, naming the layer ($(jq -r '.status, .body.code' "$T/fv.json" | tr '\n' ' '))" \
		sh -c "[ \"\$(jq -r .status '$T/fv.json')\" = 503 ] && grep -q 'could not join its cgroups' '$T/fv.json'"
	fview
	check "the file op after it works ($(jq -r .status "$T/fv.json"))" test "$(jq -r .status "$T/fv.json")" = 200
	k2=$(kept)
	fds_before=$(ls "/proc/$AGENT_PID/fd" | wc -l)
	bk_sandbox_delete pk1 >/dev/null
	sleep 0.5
	k3=$(kept)
	check "the kept descriptors go with the container ($k2 -> $k3 within 0.5 s of its delete; $k0 before it)" \
		test "${k3:-x}" = "${k0:-0}"
	check "and the agent's descriptors with them ($fds_before -> $(ls "/proc/$AGENT_PID/fd" | wc -l))" \
		test "$(ls "/proc/$AGENT_PID/fd" | wc -l)" -le "$((fds_before - ${k2:-0} + ${k0:-0}))"
else
	skip "kept v1 cgroup.procs (only on a hybrid cgroup layout; this one is $CG_LAYOUT)"
	check "no v1 cgroup.procs kept on this layout" test "$(kept)" = 0
fi

# --- local mode: pod-level caps ---------------------------------------------
# the pod's cap on $2 (a v2 file) or $3 (the v1 file) in the hierarchy of $1
pod_cap() {
	local d=$CG2$POD
	if [ -f "$d/$2" ]; then cat "$d/$2"; return; fi
	d=$(ctrl_root "$1")$POD
	[ -n "$3" ] && [ -f "$d/$3" ] && cat "$d/$3"
}
mem=$(pod_cap memory memory.max memory.limit_in_bytes)
pids=$(pod_cap pids pids.max pids.max)
check "local pod: a memory cap on the pod's cgroup (${mem:-none})" \
	sh -c "test -n '$mem' && test '$mem' != max && test '$mem' -lt 9000000000000000000"
check "local pod: a pids cap on the pod's cgroup (${pids:-none})" sh -c "test -n '$pids' && test '$pids' != max"
bk_sandbox_create pl2 --cpus 0.5 --memory 1G --pids 512
if [ $? = 0 ]; then
	POD=/kubepods/besteffort/pod$(sb pl2 pod_uid)
	if [ "$CG_LAYOUT" = hybrid ]; then
		q=$(cat "$(ctrl_root cpu)$POD/cpu.cfs_quota_us" 2>/dev/null)/$(cat "$(ctrl_root cpu)$POD/cpu.cfs_period_us" 2>/dev/null)
	else
		q=$(tr ' ' / < "$CG2$POD/cpu.max" 2>/dev/null)
	fi
	check "local pod --cpus 0.5: the pod's CPU quota ($q)" test "$q" = 50000/100000
	check "local pod --memory 1G: the pod's memory cap" test "$(pod_cap memory memory.max memory.limit_in_bytes)" = 1073741824
	check "local pod --pids 512: the pod's pids cap" test "$(pod_cap pids pids.max pids.max)" = 512
else
	not_ok "local pod with --cpus/--memory/--pids created"
fi
