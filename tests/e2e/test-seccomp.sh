#!/usr/bin/env bash
# The seccomp layer (issue 13), end to end: socket families the cgroup
# sock_create hook never sees (AF_VSOCK, AF_PACKET) and kernel surfaces an
# exec never needs (io_uring, bpf, userfaultfd, user namespaces, mount)
# are refused with EPERM inside a real exec; ordinary programs still work;
# the receipt is what /proc says; the reports carry layers.seccomp; with
# the layer switched off (testing.allow_unsafe) the same probe gets through,
# which is what makes this test able to fail. The injected install failure
# is in test-exec.sh's fail-closed loop (fault "seccomp").
. "$(dirname "$0")/lib.sh"

# One line per call: "NAME ok" or "NAME ERRNONAME", from python3 in the exec
# (ctypes for the calls without a Python wrapper).
PROBE=$(cat <<'PYEOF'
import ctypes, errno, os, socket
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def res(name, fn):
    try:
        r = fn()
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, e.errno)); return
    print(name, "ok")
def sc(nr, *args):
    def f():
        r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
        if r < 0:
            e = ctypes.get_errno(); raise OSError(e, os.strerror(e))
        if r > 2:
            os.close(r)
        return r
    return f
buf = ctypes.create_string_buffer(120)   # struct io_uring_params, zeroed
res("vsock", lambda: socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM).close())
res("packet", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW).close())
res("netlink_audit", lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 9).close())
res("io_uring_setup", sc(425, 1, ctypes.addressof(buf)))
res("bpf", sc(321, 0, 0, 0))                          # BPF_MAP_CREATE, no attr
res("userfaultfd", sc(323, 1))                        # UFFD_USER_MODE_ONLY
res("unshare_user", lambda: os.unshare(os.CLONE_NEWUSER) if hasattr(os, "unshare") else sc(272, 0x10000000)())
res("mount", sc(165, 0, 0, 0, 0, 0))
res("keyctl", sc(250, 0, 0, 0, 0, 0))                 # KEYCTL_GET_KEYRING_ID
PYEOF
)
# probe SANDBOX: the probe's answers in $T/probe.out
probe() { bk_exec "$1" -- python3 -c "$PROBE"; j .stdout > "$T/probe.out"; }
said() { awk -v n="$1" '$1 == n {print $2}' "$T/probe.out"; }
# receipt vs /proc/<the exec's process>/status
PROC='awk '\''/^Seccomp:/ {m=$2} /^Seccomp_filters:/ {f=$2} END {print m, f}'\'' /proc/$$/status'
iso() { ctl inspect "$1" | jq -r '.layers.seccomp'; }
agent_filters() { awk '/^Seccomp_filters:/ {print $2}' "/proc/$AGENT_PID/status"; }

bk_start_agent || { not_ok "agent starts"; exit 1; }
bk_sandbox_create sc1 || { not_ok "sandbox created"; exit 1; }

# --- refused, with EPERM -------------------------------------------------------------------
probe sc1
echo "# layer on: $(tr '\n' ' ' < "$T/probe.out")"
for c in vsock packet netlink_audit io_uring_setup bpf userfaultfd unshare_user mount keyctl; do
	check "$c refused with EPERM ($(said $c))" test "$(said $c)" = EPERM
done

# --- ordinary programs ----------------------------------------------------------------------
bk_exec sc1 -- python3 -c 'import subprocess, threading, socket
t = threading.Thread(target=lambda: None); t.start(); t.join()
a, b = socket.socketpair(); a.send(b"x"); assert b.recv(1) == b"x"
print(subprocess.run(["echo", "sub"], capture_output=True, text=True).stdout.strip(), "ok")'
check "python3: threads, socketpair, subprocess (clone3 -> ENOSYS -> clone) ($(j .stdout | head -c 60) $(j .stderr | tail -1 | head -c 200))" \
	test "$(j .exit_code) $(j .stdout)" = "0 sub ok"
bk_exec sc1 -- sh -c 'cd /workspace && python3 -m http.server 18080 --bind 127.0.0.1 >/dev/null 2>&1 & 
for i in $(seq 1 50); do curl -s -o /dev/null --max-time 1 http://127.0.0.1:18080/ && break; sleep 0.1; done
curl -s --max-time 3 -o /dev/null -w "%{http_code}" http://127.0.0.1:18080/; kill $!'
check "curl to a server on the exec's loopback ($(j .stdout))" test "$(j .stdout)" = 200
bk_exec sc1 -- ip -o addr show lo
check "ip (rtnetlink) still works" grep -q 'inet 127.0.0.1' <<< "$(j .stdout)"
if command -v git >/dev/null; then
	bk_exec sc1 -- sh -c 'cd /workspace && rm -rf g && git init -q g && cd g && echo a > a &&
		git add a && git -c user.name=t -c user.email=t@t commit -qm one && git log --oneline | wc -l'
	check "git init/add/commit/log ($(j .stderr | tail -1 | head -c 200))" test "$(j .exit_code) $(j .stdout)" = "0 1"
else
	skip "git (not installed)"
fi
if command -v cc >/dev/null; then
	bk_exec sc1 -- sh -c 'cd /workspace && printf "#include <stdio.h>\nint main(void){puts(\"compiled\");return 0;}\n" > h.c &&
		cc -o h h.c && ./h'
	check "cc compiles and the program runs ($(j .stderr | tail -1 | head -c 200))" test "$(j .exit_code) $(j .stdout)" = "0 compiled"
else
	skip "cc (not installed)"
fi

# --- the receipt, against /proc --------------------------------------------------------------
bk_exec sc1 -- sh -c "$PROC"
read -r pm pf <<< "$(j .stdout)"
check "receipt seccomp.mode 2 (filter), as /proc/<exec>/status says ($(j .isolation.seccomp.mode) vs $pm)" \
	test "$(j .isolation.seccomp.mode) $pm" = "2 2"
check "receipt seccomp.filters as /proc says, the agent's own + 1 ($(j .isolation.seccomp.filters) vs $pf, agent $(agent_filters))" \
	test "$(j .isolation.seccomp.filters) $pf" = "$pf $(($(agent_filters) + 1))"
check "inspect: layers.seccomp true" test "$(iso sc1)" = true
check "status: layers.seccomp true" test "$(ctl status | jq -r .layers.seccomp)" = true
printf 'X-Sidecar-Auth-Token: %s\n' "$(cat "$(sb sc1 token_file)")" > "$T/hdr"
shim_iso() { nsenter --net="/run/netns/$(sb sc1 client_netns)" curl -sk --max-time 5 --pinnedpubkey "$(sb sc1 pin)" \
	-H @"$T/hdr" "$(sb sc1 url)/isolation" | jq -r .layers.seccomp; }
check "GET /isolation through the shim: layers.seccomp true" test "$(shim_iso)" = true
ctl verify sc1 --json > "$T/v.json"; rc=$?
check "verify: layers.seccomp held, mode 2, and it passes (exit $rc, $(jq -c .layers.seccomp "$T/v.json"))" \
	sh -c "test $rc = 0 && jq -e '.layers.seccomp | .held and .mode == 2 and .filters >= 1' $T/v.json >/dev/null"
bk_exec sc1 -- true
check "the audit line times the install and the read-back (phases_us.seccomp, seccomp_readback)" \
	sh -c "grep '\"exec_id\":\"$(j .exec_id)\"' $T/agent.log | jq -e '.phases_us.seccomp >= 0 and .phases_us.seccomp_readback >= 0' >/dev/null"

# --- switched off: needs testing.allow_unsafe -------------------------------------------------
bk_stop_agent
# try_start CONFIG: the agent's last line in $out, their number in $lines,
# its exit in $rc (a start
# that does not refuse is stopped after 10 s: rc 124)
try_start() {
	echo "$1" > "$T/x.json"
	out=$(timeout 10 "$AGENT" --config "$T/x.json" --socket "$T/xp/x.sock" --admin-socket "$T/xa.sock" \
		--state-dir "$T/xstate" --bpffs "$BPFFS-x" 2>&1); rc=$?
	lines=$(printf '%s\n' "$out" | wc -l); out=$(tail -1 <<< "$out")
}
try_start '{"layers":{"seccomp":false}}'
check "layers.seccomp false without testing.allow_unsafe: the agent refuses to start, one line (rc $rc: $out)" \
	sh -c "test $rc -ne 0 && test $rc -ne 124 && test $lines = 1 && echo '$out' | grep -q 'seccomp layer'"
try_start '{"testing":{"allow_unsafe":true,"mask_features":["seccomp_filter"]}}'
check "a kernel without seccomp filters (masked): the agent refuses to start, naming it (rc $rc: $out)" \
	sh -c "test $rc -ne 0 && test $rc -ne 124 && echo '$out' | grep -q seccomp_filter"
rm -rf "$BPFFS-x" "$T/xstate"; rmdir "$CG2/$(basename "$BPFFS")-x-keepalive" 2>/dev/null

bk_start_agent '{"testing":{"allow_unsafe":true},"layers":{"seccomp":false}}' || { not_ok "agent starts with the layer off"; exit 1; }
probe sc1
echo "# layer off: $(tr '\n' ' ' < "$T/probe.out")"
check "layer off: socket(AF_VSOCK) succeeds — the probe sees what the layer stops ($(said vsock))" test "$(said vsock)" = ok
for c in io_uring_setup unshare_user userfaultfd; do
	if [ "$(said $c)" = ok ]; then ok "layer off: $c succeeds (refused only by the seccomp layer)"
	else skip "layer off: $c also refused by this kernel's own settings ($(said $c))"; fi
done
bk_exec sc1 -- sh -c "$PROC"
check "layer off: the receipt says so, as /proc does ($(j .isolation.seccomp.mode)/$(j .isolation.seccomp.filters) vs $(j .stdout))" \
	test "$(j .isolation.seccomp.mode) $(j .isolation.seccomp.filters)" = "$(j .stdout)"
check "layer off: no filter of the agent's on the exec" test "$(j .isolation.seccomp.filters)" = "$(agent_filters)"
check "layer off: inspect says layers.seccomp false" test "$(iso sc1)" = false
check "layer off: status says layers.seccomp false" test "$(ctl status | jq -r .layers.seccomp)" = false
ctl verify sc1 --json > "$T/v.json"; rc=$?
check "layer off: verify fails on the seccomp layer alone (exit $rc, $(jq -c '[.layers[].held]' "$T/v.json"))" \
	sh -c "test $rc != 0 && test \"\$(jq -c '[.layers.netns.held, .layers.bpf.held, .layers.seccomp.held]' $T/v.json)\" = '[true,true,false]'"
check "layer off: the start logs it as unsafe" grep -q 'seccomp=off' "$T/agent.log"
bk_stop_agent
check "no exec cgroup left" test -z "$(exec_cgroups_left)"
check "no sanitizer report in the agent log" sh -c "! grep -qE 'ERROR: (Address|Leak|Undefined)Sanitizer|runtime error:' $T/agent.log"
