#!/usr/bin/env bash
# scripts/vm/probe.sh [BUILD]: what a VM (or this host) offers boxkite, and
# whether the kernel's verifier takes boxkite's BPF object. Meant to run
# inside the VM:  scripts/vm/run.sh --kernel 6.1 -- scripts/vm/probe.sh
# Prints the kernel, the cgroup layout and tools, then one line per program
# of BUILD/bpf/boxkite.bpf.o ("load ok" / "load REFUSED: <verifier line>"),
# then starts BUILD/boxkite-agent, shows its status and self-test, stops it.
# Exits 1 when the object does not load or the agent does not start.
set -u
B=${1:-build}
echo "kernel:       $(uname -r)"
echo "cgroup fs:    $(stat -f -c %T /sys/fs/cgroup)"
echo "controllers:  $(cat /sys/fs/cgroup/cgroup.controllers 2>/dev/null)"
echo "subtree:      $(cat /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null)"
echo "bpftool:      $(bpftool version 2>&1 | head -1)"
echo "runc:         $(runc --version 2>&1 | head -1)"
o=$B/bpf/boxkite.bpf.o
[ -f "$o" ] || { echo "no $o (make all)"; exit 1; }
pin=/sys/fs/bpf/bk-probe-$$
log=$(mktemp)
rc=0
if bpftool prog loadall "$o" "$pin" > "$log" 2>&1; then
	echo "bpf object:   load ok ($(ls "$pin" | tr '\n' ' '))"
else
	rc=1
	# libbpf names the program that failed; the verifier's reason is the
	# line before "processed N insns" (or the first unknown/cannot line)
	prog=$(sed -n "s/^libbpf: prog '\([^']*\)': BPF program load failed.*/\1/p" "$log" | head -1)
	why=$(grep -E 'unknown func|cannot use helper|cannot call|not supported|invalid|R[0-9]+ ' "$log" | head -1)
	echo "bpf object:   load REFUSED: program ${prog:-?}: ${why:-$(tail -1 "$log")}"
fi
rm -rf "$pin" "$log"

# the agent's start and self-test (test hosts only as probe targets)
[ -x "$B/boxkite-agent" ] || { echo "agent:        no $B/boxkite-agent"; exit 1; }
T=$(mktemp -d /run/bk-probe-XXXXXX)
cat > "$T/config.json" <<'CFG'
{"verify_targets":{"metadata":"169.254.169.254:80","kubernetes_api":"10.96.0.1:443",
 "pod":"10.244.1.5:8080","public":"203.0.113.10:443"}}
CFG
t0=$(date +%s%N)
"$B/boxkite-agent" --config "$T/config.json" --socket "$T/pods/agent.sock" --admin-socket "$T/admin.sock" \
	--state-dir "$T/state" --bpffs "/sys/fs/bpf/$(basename "$T")" --metrics 127.0.0.1:0 > "$T/agent.log" 2>&1 &
apid=$!
for _ in $(seq 1 600); do
	[ -S "$T/admin.sock" ] && break
	kill -0 $apid 2>/dev/null || break
	sleep 0.1
done
if [ -S "$T/admin.sock" ]; then
	echo "agent:        started in $(( ($(date +%s%N) - t0) / 1000000 )) ms; status: $("$B/boxkitectl" --admin-socket "$T/admin.sock" status 2>&1 | jq -c '{node_safe, kernel, features}' 2>/dev/null)"
	for _ in $(seq 1 300); do grep -q '"selftest"' "$T/agent.log" && break; sleep 0.1; done
	st=$(grep -m1 '"selftest"' "$T/agent.log")
	echo "agent:        ${st:-no self-test result within 30 s}"
	case $st in *passed*) ;; *) rc=1 ;; esac
	kill -TERM $apid; wait $apid; echo "agent:        stopped, exit $?"
else
	rc=1
	wait $apid; echo "agent:        FAILED to start (exit $?):"
	tail -5 "$T/agent.log" | sed 's/^/agent:          /'
fi
rm -rf "$T" "/sys/fs/bpf/$(basename "$T")"
rmdir "/sys/fs/cgroup/$(basename "$T")-keepalive" "/sys/fs/cgroup/unified/$(basename "$T")-keepalive" 2>/dev/null
exit $rc
