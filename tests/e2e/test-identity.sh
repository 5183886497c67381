#!/usr/bin/env bash
# Caller identity comes from the kernel: the shim container of a sandbox pod
# is identified as its pod; anything else is refused; two sandboxes never
# see each other's identity.
. "$(dirname "$0")/lib.sh"

bk_start_agent || { not_ok "agent starts"; exit 1; }
bk_sandbox_create ida || { not_ok "sandbox ida created"; exit 1; }
bk_sandbox_create idb || { not_ok "sandbox idb created"; exit 1; }
UA=$(sb ida pod_uid); UB=$(sb idb pod_uid)

# The shim container of ida, as the kernel sees it
call_as() { in_cgroup_of "$(container_cg "$1" "$2")" "$CTL" call --socket "$SOCK" "${@:3}"; }

out=$(call_as ida shim_container_id identity)
check "shim container identified as its pod (uid)" test "$(echo "$out" | jq -r .body.pod_uid)" = "$UA"
check "shim container identified as its pod (name)" test "$(echo "$out" | jq -r .body.pod_name)" = "ida"
check "the pod's sandbox container is the target" \
	test "$(echo "$out" | jq -r .body.sandbox_container_id)" = "$(sb ida sandbox_container_id)"
outb=$(call_as idb shim_container_id identity)
check "second sandbox identified as itself" test "$(echo "$outb" | jq -r .body.pod_uid)" = "$UB"
check "identities differ" test "$UA" != "$UB"

# A request cannot name another pod: a session_id / sandbox / pod field is ignored
out=$(call_as ida shim_container_id identity "{\"sandbox\":\"idb\",\"pod_uid\":\"$UB\",\"session_id\":\"x\"}")
check "request fields cannot redirect identity" test "$(echo "$out" | jq -r .body.pod_uid)" = "$UA"

# The sandbox container is refused
out=$(call_as ida sandbox_container_id identity)
check "sandbox container refused (403)" test "$(echo "$out" | jq -r .status)" = 403
check "refusal says why" grep -q 'only the \\"shim\\" container' <<< "$out"

# A host process outside any pod is refused
out=$("$CTL" call --socket "$SOCK" identity)
check "host process refused (403)" test "$(echo "$out" | jq -r .status)" = 403
check "host refusal names the reason" grep -q 'not a container of a Kubernetes pod' <<< "$out"

# A process in the pod cgroup but not in a container is refused
podcg=$(dirname "$(container_cg ida shim_container_id)")
mkdir "$podcg/intruder"
out=$(in_cgroup_of "$podcg/intruder" "$CTL" call --socket "$SOCK" identity)
check "process in a non-container cgroup of the pod refused" test "$(echo "$out" | jq -r .status)" = 403
rmdir "$podcg/intruder"

# Exec through ida's shim identity lands in ida's sandbox only
out=$(call_as ida shim_container_id exec '{"command":"echo from-a > /workspace/mark; cat /proc/sys/kernel/hostname"}')
check "exec via shim identity runs in its own pod" test "$(echo "$out" | jq -r .body.stdout)" = "ida"
out=$(call_as idb shim_container_id exec '{"command":"test -e /workspace/mark && echo present || echo absent"}')
check "other sandbox does not see it" test "$(jq -r .body.stdout <<< "$out")" = "absent"
out=$(call_as ida shim_container_id exec '{"command":"cat /workspace/mark"}')
check "same sandbox sees it" test "$(echo "$out" | jq -r .body.stdout)" = "from-a"

# The live shim (inside its container, through the bind-mounted socket)
# reaches the agent and is identified: the agent logged its pod.
for _ in $(seq 1 50); do grep -q "\"caller_identified\".*\"pod\":\"ida\"" "$T/agent.log" && break; sleep 0.1; done
check "the running shim of ida was identified by the agent" grep -q '"caller_identified".*"pod":"ida"' "$T/agent.log"

# The admin socket is root only
check "admin socket is mode 0600" test "$(stat -c %a "$T/admin.sock")" = 600
# (the refusal must be the socket's: boxkitectl itself ran as nobody and its
# connect got EACCES; a setpriv or exec failure would say something else)
setpriv --reuid=65534 --regid=65534 --clear-groups "$CTL" --admin-socket "$T/admin.sock" status > /dev/null 2> "$T/nobody.err"
rc=$?
check "non-root cannot use the admin socket (exit $rc: $(head -c 200 "$T/nobody.err"))" \
	sh -c "test $rc != 0 && grep -qx 'boxkitectl: cannot reach the agent at $T/admin.sock: Permission denied: the admin socket is root.s, run boxkitectl as root' '$T/nobody.err'"

# Malformed frames get a clear error and the agent survives
py() { in_cgroup_of "$(container_cg ida shim_container_id)" python3 - "$SOCK" "$@"; }
frame_test() {
	py "$1" <<'PYEOF'
import socket, struct, sys, json
path, kind = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(path)
def rec(payload, version=1, flags=0, magic=0x314b5442, ln=None):
    return struct.pack("<IHHII", magic, version, flags, len(payload) if ln is None else ln, 0) + payload
msgs = {
  "truncated": [b"abc"],
  "badmagic": [rec(b"{}", magic=0xdeadbeef)],
  "version": [rec(b'{"op":"ping"}', version=9)],
  "badlen": [rec(b'{"op":"ping"}', ln=3)],
  "nul": [rec(b'{"op":"pi\x00ng"}')],
  "json": [rec(b'{"op":')],
  "notobj": [rec(b'[1,2]')],
  "unknownop": [rec(b'{"op":"format_disk","args":{}}')],
  "oversized": [rec(b"x" * 65536, flags=1)] * 200,
}[kind]
try:
    for m in msgs:
        try:
            s.send(m)
        except (BrokenPipeError, ConnectionResetError):
            break  # the agent gave up on us: its answer is queued
    r = s.recv(1 << 20)
    body = json.loads(r[16:])
    print(body["status"], body["body"]["code"])
except (BrokenPipeError, ConnectionResetError):
    print("closed")
PYEOF
}
check "truncated frame -> 400 bad_frame" test "$(frame_test truncated)" = "400 bad_frame"
check "bad magic -> 400 bad_frame" test "$(frame_test badmagic)" = "400 bad_frame"
check "wrong version -> 400 bad_frame" test "$(frame_test version)" = "400 bad_frame"
check "length mismatch -> 400 bad_frame" test "$(frame_test badlen)" = "400 bad_frame"
check "NUL byte -> 400 bad_frame" test "$(frame_test nul)" = "400 bad_frame"
check "bad JSON -> 400 bad_json" test "$(frame_test json)" = "400 bad_json"
check "non-object JSON -> 400 bad_json" test "$(frame_test notobj)" = "400 bad_json"
check "unknown op -> 404 unknown_op" test "$(frame_test unknownop)" = "404 unknown_op"
check "oversized message -> 400 bad_frame" test "$(frame_test oversized)" = "400 bad_frame"
check "agent still alive after bad frames" kill -0 "$AGENT_PID"
out=$(call_as ida shim_container_id ping)
check "agent still answers" test "$(echo "$out" | jq -r .status)" = 200

# --- which path identified the caller; the SO_PEERCRED fallback on this kernel ---------------
# (issue 20: kernels before 6.5 have no SO_PEERPIDFD; testing.mask_features
# makes this kernel take the fallback: SO_PEERCRED + pidfd_open, re-checked
# by who holds the peer socket)
ctl status > "$T/status.json"
IDPATH=$(jq -r .features.identity "$T/status.json")
check "status names the identification path ($IDPATH)" sh -c "[ '$IDPATH' = so_peerpidfd ] || [ '$IDPATH' = so_peercred ]"
check "  ... the kernel's own SO_PEERPIDFD where it has one" \
	test "$IDPATH" = "$(jq -r 'if .features.so_peerpidfd then "so_peerpidfd" else "so_peercred" end' "$T/status.json")"
check "  ... and the log says that path identified the shim" \
	grep -q "\"caller_identified\".*\"pod\":\"ida\".*\"via\":\"$IDPATH\"" "$T/agent.log"

bk_stop_agent
FB_START=$(wc -l < "$T/agent.log")
fblog() { tail -n +"$((FB_START + 1))" "$T/agent.log"; }
bk_start_agent '{"testing":{"allow_unsafe":true,"mask_features":["so_peerpidfd"]}}' ||
	not_ok "agent starts with SO_PEERPIDFD masked"
ctl status > "$T/status.json"
check "fallback: status says SO_PEERCRED identifies callers" \
	test "$(jq -r '.features.identity + " " + (.features.so_peerpidfd | tostring)' "$T/status.json")" = "so_peercred false"
check "fallback: the agent logged the missing feature and its effect" \
	sh -c "tail -n +$((FB_START + 1)) '$T/agent.log' | grep '\"kernel_feature_missing\"' | grep -q '\"feature\":\"so_peerpidfd\"'"
out=$(call_as ida shim_container_id identity)
check "fallback: shim container of ida identified as its pod" test "$(jq -r .body.pod_uid <<< "$out")" = "$UA"
outb=$(call_as idb shim_container_id identity)
check "fallback: shim container of idb identified as its pod" test "$(jq -r .body.pod_uid <<< "$outb")" = "$UB"
check "fallback: the log says SO_PEERCRED identified both" \
	sh -c "n=\$(tail -n +$((FB_START + 1)) '$T/agent.log' | grep '\"caller_identified\"' | grep '\"via\":\"so_peercred\"' | grep -cE '\"pod\":\"id(a|b)\"'); [ \"\$n\" -ge 2 ]"
out=$(call_as ida sandbox_container_id identity)
check "fallback: sandbox container refused (403)" test "$(jq -r .status <<< "$out")" = 403
out=$("$CTL" call --socket "$SOCK" identity)
check "fallback: host process refused (403)" test "$(jq -r .status <<< "$out")" = 403
check "fallback: host refusal names the reason" grep -q 'not a container of a Kubernetes pod' <<< "$out"
out=$(call_as ida shim_container_id exec '{"command":"cat /workspace/mark"}')
check "fallback: exec through ida's shim identity lands in ida's sandbox" test "$(jq -r .body.stdout <<< "$out")" = "from-a"
# the running shim, over HTTPS from the client's side: its requests reach
# the agent through the fallback and are answered for its own pod
printf 'X-Sidecar-Auth-Token: %s\n' "$(cat "$(sb ida token_file)")" > "$T/hdr"
iso=$(nsenter --net="/run/netns/$(sb ida client_netns)" curl -sk --max-time 10 --pinnedpubkey "$(sb ida pin)" \
	-H @"$T/hdr" "$(sb ida url)/isolation")
check "fallback: the live shim's request is answered for its own pod" test "$(jq -r .pod <<< "$iso" 2>/dev/null)" = ida
check "fallback: every caller since the restart, the live shim's too, was identified by SO_PEERCRED" \
	sh -c "tail -n +$((FB_START + 1)) '$T/agent.log' | grep '\"caller_identified\"' | grep -q '\"via\":\"so_peercred\"' &&
	       ! tail -n +$((FB_START + 1)) '$T/agent.log' | grep '\"caller_identified\"' | grep -qv '\"via\":\"so_peercred\"'"
bk_stop_agent
echo '{"testing":{"allow_unsafe":true,"mask_features":["no_such"]}}' > "$T/bad-mask.json"
timeout 20 "$AGENT" --config "$T/bad-mask.json" --socket "$T/xp/x.sock" --admin-socket "$T/xa.sock" --state-dir "$T/xs" \
	--bpffs "$BPFFS-x" --metrics 127.0.0.1:0 > "$T/bad-mask.log" 2>&1
rc=$?
check "an unknown feature in testing.mask_features stops the start (exit $rc) with one line" \
	sh -c "[ $rc = 1 ] && [ \$(wc -l < '$T/bad-mask.log') = 1 ] && grep -q 'no kernel feature is named \"no_such\"' '$T/bad-mask.log'"
