#!/usr/bin/env bash
# Creating and deleting 20 local sandboxes in a row leaves nothing behind in
# any cgroup hierarchy, the netns list, runc list or bpffs.
. "$(dirname "$0")/lib.sh"

snapshot() {
	{
		for h in /sys/fs/cgroup/*/; do find "$h" -maxdepth 4 -type d -path '*kubepods*' 2>/dev/null; done
		ip netns list 2>/dev/null | awk '{print "netns " $1}'
		runc list -q 2>/dev/null | sed 's/^/runc /'
		ls "$BPFFS" 2>/dev/null | sed 's/^/bpffs /'
		ls /run/boxkite/local 2>/dev/null | sed 's/^/local /'
	} | sort
}

bk_start_agent || { not_ok "agent starts"; exit 1; }
# one exec each, so every layer was built once
before=$(snapshot)
created=0 execd=0
for i in $(seq 1 20); do
	if bk_sandbox_create "lc$i"; then
		created=$((created + 1))
		bk_exec "lc$i" -- true && [ "$(j .exit_code)" = 0 ] && execd=$((execd + 1))
		bk_sandbox_delete "lc$i" >/dev/null 2>&1
	fi
done
check "20 sandboxes created" test "$created" = 20
check "20 execs ran" test "$execd" = 20
after=$(snapshot)
if [ "$before" = "$after" ]; then ok "nothing left behind (cgroups, netns, runc, bpffs)"; else
	not_ok "nothing left behind"; diff <(echo "$before") <(echo "$after") | sed 's/^/#   /' | head -20; fi
check "no kubepods cgroup in any hierarchy" sh -c '! ls -d /sys/fs/cgroup/*/kubepods/besteffort/pod* 2>/dev/null | grep -q .'
check "no boxkite netns left" sh -c '! ip netns list | grep -Eq "^boxkite-lc"'
bk_stop_agent
check "agent removed its pins and keepalive cgroup on stop" sh -c "! test -e $BPFFS && ! test -e /sys/fs/cgroup/unified/$(basename "$BPFFS")-keepalive"
check "no runc container left" test -z "$(runc list -q)"
