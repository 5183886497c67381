#!/usr/bin/env bash
# Terminals (issue 18): the shim's /pty WebSocket over pinned-cert HTTPS
# with auth, POST /pty-exec, boxkitectl exec -it. The shell is an exec with
# all its layers; its terminal is a pseudo-terminal of the exec's OWN
# devpts (a new instance in its own mount namespace: not the host's, not
# the container's), read back from the kernel inside the shell. Resize,
# Ctrl-C, exit, hang-up, the per-pod maximum, the idle timeout,
# /configure and an agent restart end them with nothing left behind.
. "$(dirname "$0")/lib.sh"
PY="python3 $(dirname "$0")/ptyscen.py"

bk_start_agent '{"pty":{"max_per_pod":2,"idle_timeout_s":4,"exec_enabled":true}}' || { not_ok "agent starts"; exit 1; }
bk_sandbox_create pty1 || { not_ok "sandbox created"; exit 1; }
UID1=$(sb pty1 pod_uid)
TOKEN=$(cat "$(sb pty1 token_file)")
URL=$(sb pty1 url)
CNS=/run/netns/$(sb pty1 client_netns)
in_client() { nsenter --net="$CNS" "$@"; }
printf 'X-Sidecar-Auth-Token: %s\n' "$TOKEN" > "$T/hdr"
shim() { # METHOD ROUTE [BODY] [curl options]: body in $T/last.json, status in $T/code
	local m=$1 r=$2 body=${3:-}; shift 3 2>/dev/null || shift $#
	local args=(-sk --max-time 60 --pinnedpubkey "$(sb pty1 pin)" -o "$T/last.json" -w '%{http_code}' -X "$m")
	[ -n "$body" ] && args+=(-H 'Content-Type: application/json' --data-binary "$body")
	in_client curl "${args[@]}" "$@" "$URL$r" > "$T/code"
}
code() { cat "$T/code"; }

# --- the WebSocket: auth, the terminal and what the kernel says about it ---------------
in_client $PY main "$URL" "$TOKEN" > "$T/main.json" 2> "$T/main.err"
m() { jq -r "$1" "$T/main.json"; }
echo "# main: $(cat "$T/main.json") $(head -c 300 "$T/main.err")"
check "/pty without the token: 401 before any upgrade" test "$(m .status_noauth)" = 401
check "/pty with a wrong token: 401" test "$(m .status_badauth)" = 401
check "/pty with the token: 101 Switching Protocols, Sec-WebSocket-Accept right" \
	test "$(m .status) $(m .accept_ok)" = "101 true"
check "the shell answers" test "$(m .ready)" = true
check "tty reports a pts device ($(m .tty))" grep -qxE '/dev/pts/[0-9]+' <<< "$(m .tty)"
# the exec's devpts: st_dev of its tty = st_dev of its /dev/pts/ptmx, only
# its own terminal in it, and neither the host's nor the container's devpts
read -r TTYDEV TTYUID PTMXDEV _ PTSLS <<< "$(m .pts)"
HOSTDEV=$(stat -c %d /dev/pts/ptmx)
CPID=$(runc --root /run/runc state "$(sb pty1 sandbox_container_id)" | jq -r .pid)
CONTDEV=$(nsenter -t "$CPID" -m stat -c %d /dev/pts/ptmx)
echo "# devpts st_dev: exec tty $TTYDEV, exec ptmx $PTMXDEV, host $HOSTDEV, container $CONTDEV; exec /dev/pts: $PTSLS"
differ() { [ -n "$1" ] && [ -n "$2" ] && [ "$1" != "$2" ]; }
check "the tty is on the exec's own devpts (its /dev/pts/ptmx's device)" bash -c "[ -n '$TTYDEV' ] && [ '$TTYDEV' = '$PTMXDEV' ]"
check "... not the host's /dev/pts" differ "$TTYDEV" "$HOSTDEV"
check "... not the sandbox container's /dev/pts" differ "$TTYDEV" "$CONTDEV"
check "... holding only this terminal ($PTSLS)" test "$PTSLS" = "0 ptmx"
SHUID=$(m .status_fields | grep -oP 'Uid:\s+\K[0-9]+')
check "the terminal belongs to the shell's user ($TTYUID, the shell's uid $SHUID), not root" \
	test -n "$SHUID" -a "$TTYUID" = "$SHUID" -a "$TTYUID" != 0
check "a devpts instance of its own on /dev/pts in the exec's mount table ($(m .mounts))" \
	grep -q '^devpts ' <<< "$(m .mounts)"
check "stty size: the size asked in the query (30 100)" test "$(m .size0)" = "30 100"
check "stty size follows a resize message (40 120)" test "$(m .size1)" = "40 120"
check "a resize reaches the foreground job as SIGWINCH" test "$(m .winch)" = true
check "the shell's netns has only lo ($(m .net))" test "$(m .net)" = lo
check "the shell is in an exec cgroup" grep -q 'boxkite-exec-' <<< "$(m .cgroup)"
check "the shell runs under the seccomp filter with no_new_privs ($(m .status_fields))" \
	bash -c "grep -q 'Seccomp: 2' <<< '$(m .status_fields)' && grep -q 'NoNewPrivs: 1' <<< '$(m .status_fields)'"
check "TIOCSTI is refused (EPERM) on the exec's own terminal ($(m .tiocsti))" test "$(m .tiocsti)" = "TIOCSTI EPERM"
check "Ctrl-C (0x03) interrupts sleep 30: the prompt is back in $(m .ctrlc_s) s" \
	bash -c "test $(m .ctrlc_back) = true && test $(m .ctrlc_interrupted) = true && awk 'BEGIN{exit !($(m .ctrlc_s) < 2)}'"
check "binary frames are input too (the reference's send_bytes)" test "$(m .binary_input)" = true
check "exit closes the socket: close 1000 in $(m .exit_close_s) s" \
	bash -c "test '$(m .exit_close)' = 1000 && awk 'BEGIN{exit !($(m .exit_close_s) < 3)}'"
check "no exec cgroup left after the shell's exit" gone_within 5 exec_cgroups_left "$UID1"

# --- the client hanging up kills the shell -----------------------------------------------
coproc DROP { in_client $PY drop "$URL" "$TOKEN"; }
DROP_P=$DROP_PID
read -r -t 20 line <&"${DROP[0]}"
echo "# drop: $line"
check "a terminal with sleep 1000 runs in an exec cgroup" test -n "$(exec_cgroups_left "$UID1")"
exec {DROP[1]}>&-
wait "$DROP_P" 2>/dev/null
check "the client hanging up (no close frame) kills the shell's cgroup" gone_within 5 exec_cgroups_left "$UID1"

# --- per-pod maximum (pty.max_per_pod 2): the third is closed 1013 -----------------------
coproc HOLD { in_client $PY hold "$URL" "$TOKEN" 3; }
HOLD_P=$HOLD_PID
read -r -t 30 line <&"${HOLD[0]}"
echo "# hold: $line"
check "two terminals open, the third closed 1013 (too many terminals)" \
	test "$(jq -c '[.codes[0], .codes[1], .codes[2][0]]' <<< "$line")" = "[null,null,1013]"
check "... with a reason naming pty.max_per_pod" grep -q 'max_per_pod' <<< "$(jq -r '.codes[2][1]' <<< "$line")"
check "the two live terminals are two exec cgroups" test "$(exec_cgroups_left "$UID1" | xargs -rn1 basename | sort -u | wc -l)" = 2
# /configure (a new session) kills them: both sockets close
shim POST /configure '{"session_id":"pty-session-2"}' -H @"$T/hdr"
check "/configure: 200" test "$(code)" = 200
check "/configure killed the terminals' cgroups" gone_within 5 exec_cgroups_left "$UID1"
exec {HOLD[1]}>&-
read -r -t 20 line <&"${HOLD[0]}"
echo "# hold after /configure: $line"
check "/configure: both terminals' sockets were closed by the server" \
	test "$(jq -c '[.after[0], .after[1]]' <<< "$line")" = "[1000,1000]"
wait "$HOLD_P" 2>/dev/null

# --- the idle timeout (pty.idle_timeout_s 4) ---------------------------------------------
in_client $PY idle "$URL" "$TOKEN" > "$T/idle.json"
echo "# idle: $(cat "$T/idle.json")"
check "an idle terminal is closed after pty.idle_timeout_s ($(jq -r .after_s "$T/idle.json") s)" \
	bash -c "test \"\$(jq -r .close $T/idle.json)\" = 1000 && awk 'BEGIN{x = $(jq -r .after_s "$T/idle.json"); exit !(x >= 3.5 && x < 8)}'"

# --- the agent restarting leaves no orphan -----------------------------------------------
coproc DROP2 { in_client $PY drop "$URL" "$TOKEN"; }
DROP2_P=$DROP2_PID
read -r -t 20 line <&"${DROP2[0]}"
check "a terminal runs before the agent is killed" test -n "$(exec_cgroups_left "$UID1")"
kill -KILL "$AGENT_PID"; wait "$AGENT_PID" 2>/dev/null; AGENT_PID=
bk_start_agent '{"pty":{"max_per_pod":2,"idle_timeout_s":4,"exec_enabled":true}}' || not_ok "agent restarts"
check "the restarted agent killed the terminal of the old one (no orphan)" gone_within 10 exec_cgroups_left "$UID1"
exec {DROP2[1]}>&-
wait "$DROP2_P" 2>/dev/null

# --- POST /pty-exec: the reference's shapes --------------------------------------------
for _ in $(seq 50); do in_client curl -sk --max-time 2 "$URL/health" | grep -q '"agent":"connected"' && break; sleep 0.1; done
shim POST /pty-exec '{"command":"tty"}' -H @"$T/hdr"
check "/pty-exec tty: 200, a pts device, exit 0, not timed out ($(code) $(head -c 200 "$T/last.json"))" \
	bash -c "test $(code) = 200 && jq -e '(.output | test(\"^/dev/pts/[0-9]+\")) and .exit_code == 0 and .timed_out == false' $T/last.json >/dev/null"
check "/pty-exec: exactly the reference's fields (output, exit_code, timed_out)" \
	test "$(jq -c 'keys' "$T/last.json")" = '["exit_code","output","timed_out"]'
shim POST /pty-exec "{\"command\":\"sed -n s/typed/READ-BY-SED/p\",\"input_bytes\":\"$(printf 'typed input\n\004' | base64)\",\"timeout_seconds\":10}" -H @"$T/hdr"
check "/pty-exec input_bytes reach the command's stdin ($(jq -c .output "$T/last.json"))" \
	jq -e '(.output | contains("READ-BY-SED input")) and .timed_out == false' "$T/last.json"
t0=$(date +%s%N)
shim POST /pty-exec '{"command":"sleep 30","timeout_seconds":0.5}' -H @"$T/hdr"
ms=$((($(date +%s%N) - t0) / 1000000))
check "/pty-exec timeout_seconds 0.5: timed_out, answered in $ms ms" \
	bash -c "jq -e '.timed_out == true' $T/last.json >/dev/null && test $ms -lt 3000"
shim POST /pty-exec '{"command":"echo one; echo two"}' -H @"$T/hdr"
check "/pty-exec is never shell-interpreted ($(jq -c .output "$T/last.json"))" jq -e '.output | contains("one; echo two")' "$T/last.json"
shim POST /pty-exec '{"command":"cat /proc/self/net/dev"}' -H @"$T/hdr"
check "/pty-exec: netns only lo" test "$(jq -r .output "$T/last.json" | tr -d '\r' | awk -F: 'NR > 2 {gsub(/ /, "", $1); print $1}' | xargs)" = lo
shim POST /pty-exec '{"command":"   "}' -H @"$T/hdr"
check "/pty-exec empty command: 400 command is required" test "$(code) $(jq -r .detail "$T/last.json")" = "400 command is required"
shim POST /pty-exec '{"command":"echo \"x"}' -H @"$T/hdr"
check "/pty-exec unparsable: 400 Could not parse command: No closing quotation" \
	test "$(code) $(jq -r .detail "$T/last.json")" = "400 Could not parse command: No closing quotation"
shim POST /pty-exec '{"command":"cat","input_bytes":"!!notbase64"}' -H @"$T/hdr"
check "/pty-exec bad base64: 400" test "$(code) $(jq -r .detail "$T/last.json")" = "400 input_bytes must be valid base64"
shim POST /pty-exec '{"command":"tty"}'
check "/pty-exec without the token: 401" test "$(code)" = 401

# --- boxkitectl exec -it over the admin socket --------------------------------------------
printf 'stty -echo; tty; awk -F: "NR > 2 {gsub(/ /, \\"\\", \\$1); print \\$1}" /proc/self/net/dev; exit 3\n' |
	timeout 20 "$CTL" --admin-socket "$T/admin.sock" exec -it pty1 | tr -d '\r' > "$T/it.out"
rc=${PIPESTATUS[1]}
echo "# exec -it: $(tr '\n' ' ' < "$T/it.out" | head -c 300) (exit $rc)"
check "exec -it: tty is a pts device, the shell's exit code comes back (3, got $rc)" \
	bash -c "grep -qE '/dev/pts/[0-9]+\$' $T/it.out && test $rc = 3"
check "exec -it: only lo" grep -qx lo "$T/it.out"
timeout 20 "$CTL" --admin-socket "$T/admin.sock" exec -it pty1 -- sh -c 'tty; exit 5' </dev/null > "$T/it2.out"; rc=$?
check "exec -it NAME -- CMD: the command on a terminal, its exit code (5, got $rc)" \
	bash -c "grep -qE '/dev/pts/[0-9]+' $T/it2.out && test $rc = 5"

# --- /pty-exec is off by default (404, as the reference's BOXKITE_AGENT_PTY_ENABLED) -------
bk_stop_agent; bk_start_agent || not_ok "agent restarts with the defaults"
for _ in $(seq 50); do in_client curl -sk --max-time 2 "$URL/health" | grep -q '"agent":"connected"' && break; sleep 0.1; done
shim POST /pty-exec '{"command":"tty"}' -H @"$T/hdr"
check "/pty-exec off by default: 404" test "$(code)" = 404
