#!/usr/bin/env bash
# Streamed /exec and a client that stops reading (issue 18): the shim
# reads the agent's events only as fast as its client takes them, so the
# agent's sends block; each waits at most until the exec's deadline plus
# 1 s, then the exec is killed. Here: a command that writes without end,
# "timeout": 2, a client over HTTPS that sends the request and never reads
# its answer; its exec cgroup and processes must be gone within the
# timeout + 1 s (+ 1 s for the teardown) of the exec's start.
. "$(dirname "$0")/lib.sh"

bk_start_agent || { not_ok "agent starts"; exit 1; }
bk_sandbox_create ss1 || { not_ok "sandbox created"; exit 1; }
URL=$(sb ss1 url); HOSTPORT=${URL#https://}; HOSTPORT=${HOSTPORT%%/*}
cat > "$T/slow.py" <<'PY'
import json, socket, ssl, sys, time
host, port = sys.argv[1].rsplit(":", 1)
body = json.dumps({"command": "yes slowreaderslowreaderslowreaderslowreaderslowreader", "timeout": 2,
                   "stream": True}).encode()
s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect((host.strip("[]"), int(port)))
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
t = ctx.wrap_socket(s)
t.sendall(b"POST /exec HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Sidecar-Auth-Token: " +
          open(sys.argv[2]).read().strip().encode() + b"\r\nContent-Length: " + str(len(body)).encode() +
          b"\r\n\r\n" + body)
print("sent", flush=True)
if len(sys.argv) > 3:  # "trickle": takes a little now and then, never enough
    t0 = time.time()
    while time.time() - t0 < 60:
        if not t.recv(65536):
            break
        time.sleep(0.4)
else:
    time.sleep(60)  # never reads
PY
# start_slow [trickle]: the client started (client=PID), its exec seen
# running (cg, pids), t0 then; watch_gone TICKS: gone=ms after t0, or empty
start_slow() {
	nsenter --net="/run/netns/$(sb ss1 client_netns)" python3 "$T/slow.py" "$HOSTPORT" "$(sb ss1 token_file)" "$@" > "$T/slow.out" 2>&1 &
	client=$!
	cg= pids=
	for _ in $(seq 1 100); do
		cg=$(live_exec_cg "$(sb ss1 pod_uid)")
		[ -n "$cg" ] && pids=$(cat "$cg/cgroup.procs" 2>/dev/null | tr '\n' ' ') && [ -n "${pids// /}" ] && break
		sleep 0.02
	done
	t0=$(date +%s%N)
}
watch_gone() {
	local alive p
	gone=
	for _ in $(seq 1 $(($1 * TIME_SCALE))); do
		alive=0
		[ -d "$cg" ] && alive=1
		for p in $pids; do [ -d "/proc/$p" ] && alive=1; done
		[ $alive = 0 ] && { gone=$((($(date +%s%N) - t0) / 1000000)); break; }
		sleep 0.05
	done
}
start_slow
check "the streamed exec runs (its cgroup: ${cg:-none})" test -n "$cg"
watch_gone 80
echo "# the exec (timeout 2 s) of a client that never reads: gone ${gone:-never (4 s)} ms after it started"
check "the client is still connected, not reading" kill -0 "$client"
check "its exec is killed at its timeout + 1 s: gone within $(scaled_ms 4000) ms (${gone:-not gone} ms)" \
	sh -c "test -n '$gone' && test '${gone:-0}' -le $(scaled_ms 4000)"
# which bound ended it: the send that waited past the deadline (+1 s) when
# the buffers between the agent and the client filled first, else the
# exec's own timeout (a slower agent, e.g. the sanitizer build)
how=$(grep -o '"event":"exec".*"outcome":"[a-z_]*"' "$T/agent.log" | grep -o '"outcome":"[a-z_]*"' | tail -1)
check "the agent logged it as the requester gone or its timeout (${how:-nothing})" \
	sh -c "echo '$how' | grep -Eq '\"(requester_gone|timeout)\"'"
kill "$client" 2>/dev/null; wait "$client" 2>/dev/null || true
ctl exec ss1 -- true > /dev/null
check "the agent runs execs afterwards" test $? = 0

# a client that reads a little (64 KiB every 0.4 s): each of the agent's
# sends then gets through after a wait, and the command never stops writing
# (the agent never idles): the exec's deadline holds all the same
start_slow trickle
check "a trickling client's streamed exec runs (${cg:-none})" test -n "$cg"
watch_gone 100
check "  ... is gone within its timeout + 1 s (+ 0.5 s teardown) all the same: $(scaled_ms 3500) ms (${gone:-not gone} ms)" \
	sh -c "test -n '$gone' && test '${gone:-0}' -le $(scaled_ms 3500)"
kill "$client" 2>/dev/null; wait "$client" 2>/dev/null || true
