#!/usr/bin/env bash
# Secret leaks. Sentinels (random strings made here) in the agent's
# environment, plus the pod's real secrets (the shim's token and TLS key),
# must appear in no exec's environment, in no file an exec can reach, in no
# response (exec, /isolation, /health, /metrics, every kind of error, the
# admin socket's status/inspect) and in no log (agent, shim, sandbox).
# secret_env values reach the exec's environment and are [REDACTED] in
# stdout/stderr, also when written in pieces, byte by byte, or cut by the
# output cap in the middle; they are in no log, and no other exec can read
# them. Everything goes through the shim over HTTPS, as a manager would.
. "$(dirname "$0")/lib.sh"

rnd() { head -c 48 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c "${1:-24}"; }
SENT_AGENT="bkSentAgent$(rnd)"
WRONG_TOKEN="bkWrongTok$(rnd)"
# secrets never start with 'a' or 'b' (the fillers of the cap tests)
S1="Qs1$(rnd 29)"
S2="Xs2$(rnd 21)"
SX="Zsx$(rnd 21)"
# two secrets where one is a prefix of the other (text.c's comment)
SP1="Hp$(rnd 8)"
SP2="${SP1}2password$(rnd 6)"

export BK_SENTINEL_AGENT=$SENT_AGENT
bk_start_agent || { not_ok "agent starts"; exit 1; }
unset BK_SENTINEL_AGENT
check "the agent's environment holds the sentinel" grep -qz "^BK_SENTINEL_AGENT=$SENT_AGENT\$" "/proc/$AGENT_PID/environ"
SB=bksec-$$
bk_sandbox_create "$SB" || { not_ok "sandbox created"; exit 1; }
SECDIR=$(dirname "$(sb "$SB" token_file)")
TOKEN=$(cat "$SECDIR/token")
# the TLS key: its base64 lines, and the private value in hex
mapfile -t KEYLINES < <(grep -v '^-----' "$SECDIR/tls.key" | awk 'length($0) >= 16')
KEYHEX=$(openssl pkey -in "$SECDIR/tls.key" -text -noout 2>/dev/null |
	awk '/^priv:/ {f = 1; next} /^[a-zA-Z]/ {f = 0} f' | tr -d ' :\n')
check "the token and the key were read (${#TOKEN} chars, ${#KEYLINES[@]} key lines, ${#KEYHEX} hex digits)" \
	sh -c "test ${#TOKEN} -ge 32 && test ${#KEYLINES[@]} -ge 1 && test ${#KEYHEX} -ge 32"
SHIM_PID=$(runc --root /run/runc state "$(sb "$SB" shim_container_id)" | jq -r .pid)
check "the shim's own environment names the files only, not the secrets" \
	sh -c "! grep -qaF -e '$TOKEN' -e '${KEYLINES[0]}' /proc/$SHIM_PID/environ"

# every secret that must appear nowhere; secret_env values are added below
# for the places where even the requester's own secret must not show
NEVER=("$SENT_AGENT" "$TOKEN" "${KEYLINES[@]}" "$KEYHEX" "$WRONG_TOKEN")
SECRETS=("$S1" "$S2" "$SX" "$SP1" "$SP2")

printf 'X-Sidecar-Auth-Token: %s\n' "$TOKEN" > "$T/hdr"
printf 'X-Sidecar-Auth-Token: %s\n' "$WRONG_TOKEN" > "$T/hdr-wrong"
CNS=/run/netns/$(sb "$SB" client_netns)
URL=$(sb "$SB" url)
NRESP=0
# shim METHOD ROUTE [BODY] [curl options...]: the body of the answer in
# $T/resp/N (all kept for the final scan), the status in $T/code
mkdir -p "$T/resp"
shim() {
	local m=$1 r=$2 body=${3:-}; shift 3 2>/dev/null || shift $#
	NRESP=$((NRESP + 1))
	local args=(-sk --max-time 60 --pinnedpubkey "$(sb "$SB" pin)" -o "$T/resp/$NRESP" -w '%{http_code}' -X "$m")
	[ -n "$body" ] && args+=(-H 'Content-Type: application/json' --data-binary "$body")
	nsenter --net="$CNS" curl "${args[@]}" "$@" "$URL$r" > "$T/code"
	cp "$T/resp/$NRESP" "$T/last.json"
}
code() { cat "$T/code"; }
# exec CMD [SECRET_ENV-JSON] [timeout]: POST /exec with the real token
xc() {
	local b
	b=$(jq -cn --arg c "$1" --argjson se "${2:-null}" --argjson to "${3:-30}" \
		'{command: $c, timeout: $to} + (if $se then {secret_env: $se} else {} end)')
	shim POST /exec "$b" -H @"$T/hdr"
}
# the fixed strings of a list in a file, for grep -F -f
pats() { printf '%s\n' "$@" > "$T/pats"; }

# --- the exec's view --------------------------------------------------------------------------
xc 'env; echo ===; cat /proc/*/environ 2>/dev/null | tr "\0" "\n"; echo ===; cat /proc/*/cmdline 2>/dev/null | tr "\0" " "'
check "env/environ exec: 200" test "$(code)" = 200
check "the exec's own environment is the clean one" \
	test "$(j .stdout | sed '/^===$/q' | grep -E '^[A-Z_]+=' | cut -d= -f1 | sort -u | tr '\n' ' ')" = "HOME LANG PATH PWD TERM "
pats "${NEVER[@]}"
check "no sentinel, token or key in any environ/cmdline the exec can read" sh -c "! grep -qF -f $T/pats $T/last.json"

# Scan every file an exec can reach for the secrets. The patterns travel
# reversed (the scanner's own command line must not hold them) and the
# scanner prints only which pattern matched where, never the pattern.
SCAN='import os, sys
pats = [p[::-1].encode() for p in sys.argv[1:]]
hits, files = [], 0
def scan(path):
    global files
    try:
        with open(path, "rb") as f:
            data = f.read(16 << 20)
    except OSError:
        return
    files += 1
    for i, p in enumerate(pats):
        if p in data:
            hits.append("%s#%d" % (path, i))
for root in ("/workspace", "/tmp", "/etc", "/run", "/mnt", "/opt", "/var", "/root", "/home", "/dev/shm"):
    for d, dirs, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            if os.path.isfile(p) and not os.path.islink(p):
                scan(p)
for pid in os.listdir("/proc"):
    if pid.isdigit() or pid == "self":
        for f in ("environ", "cmdline"):
            scan("/proc/%s/%s" % (pid, f))
print("scanned", files)
print("HITS", " ".join(hits) if hits else "none")'
rev() { local s=$1 o='' i; for ((i = ${#s} - 1; i >= 0; i--)); do o+=${s:i:1}; done; printf '%s' "$o"; }
scan_args() { local a=() p; for p in "$@"; do a+=("'$(rev "$p")'"); done; echo "${a[*]}"; }
# something for the scanner to find, so a scanner that reads nothing fails
xc "echo 'canary-$S1-canary' > /workspace/canary.txt"
xc "timeout 25 python3 -c '$SCAN' $(scan_args "${NEVER[@]}" "$S1")"
nscanned=$(j .stdout | awk '/^scanned/ {print $2}')
check "the file scan ran (${nscanned:-0} files read)" test "${nscanned:-0}" -gt 100
idx_s1=${#NEVER[@]}
check "the scanner finds a planted string (/workspace/canary.txt#$idx_s1)" grep -q "/workspace/canary.txt#$idx_s1" <<< "$(j .stdout)"
hits=$(j .stdout | sed -n 's/^HITS //p' | tr ' ' '\n' | grep -v "^/workspace/canary.txt#$idx_s1\$" | grep -v '^none$' | tr '\n' ' ')
check "no sentinel, token or key in any file under /workspace /tmp /etc /run /mnt /opt /proc/*/environ|cmdline ${hits:+(found: $hits)}" test -z "$hits"
xc 'rm -f /workspace/canary.txt'

# --- secret_env ----------------------------------------------------------------------------------
SE=$(jq -cn --arg a "$S1" --arg b "$S2" '{BK_SECRET_ONE: $a, BK_SECRET_TWO: $b}')
want_sum=$(printf '%s\n' "$S1" | sha256sum | cut -d' ' -f1)
xc 'printenv BK_SECRET_ONE | sha256sum | cut -d" " -f1; printenv BK_SECRET_TWO | wc -c' "$SE"
check "secret_env reaches the exec's environment (sha256 of the value matches)" \
	test "$(j .stdout)" = "$want_sum
$((${#S2} + 1))"
xc 'echo "$BK_SECRET_ONE"; echo "$BK_SECRET_TWO" >&2' "$SE"
check "secret on stdout: [REDACTED]" test "$(j .stdout)" = "[REDACTED]"
check "secret on stderr: [REDACTED]" test "$(j .stderr)" = "[REDACTED]"
xc 'echo "before-$BK_SECRET_ONE-after"; echo "x${BK_SECRET_ONE}y${BK_SECRET_TWO}z"' "$SE"
check "secrets inside other output: only they are replaced" \
	test "$(j .stdout)" = "before-[REDACTED]-after
x[REDACTED]y[REDACTED]z"
xc 's=$BK_SECRET_ONE; n=${#s}; h=$((n / 2)); a=$(printf %s "$s" | cut -c1-$h); b=$(printf %s "$s" | cut -c$((h + 1))-);
    printf %s "$a"; sleep 0.3; printf "%s\n" "$b"; printf %s "$a" >&2; sleep 0.3; printf "%s\n" "$b" >&2' "$SE"
check "secret written in two halves 300 ms apart: [REDACTED] (stdout)" test "$(j .stdout)" = "[REDACTED]"
check "  ... and on stderr" test "$(j .stderr)" = "[REDACTED]"
xc 's=$BK_SECRET_ONE; while [ -n "$s" ]; do r=${s#?}; printf %s "${s%"$r"}"; s=$r; sleep 0.02; done; echo' "$SE"
check "secret written byte by byte (20 ms apart): [REDACTED]" test "$(j .stdout)" = "[REDACTED]"
SEP=$(jq -cn --arg a "$SP1" --arg b "$SP2" '{BK_SHORT: $a, BK_LONG: $b}')
xc 'echo "$BK_LONG"; echo "$BK_SHORT"' "$SEP"
check "a secret that is a prefix of another: neither leaks a byte" test "$(j .stdout)" = "[REDACTED]
[REDACTED]"

# the 1 MiB output cap cutting through the secret: the truncated output must
# not end with a prefix of it
CAP=1048576
capcase() { # K STREAM: K bytes of the secret fit under the cap
	local k=$1 fd=${2:-1}
	xc "{ head -c $((CAP - k)) /dev/zero | tr '\\0' a; printf %s \"\$BK_SECRET_ONE\"; head -c 4096 /dev/zero | tr '\\0' b; } >&$fd" "$SE"
	local f=stdout; [ "$fd" = 2 ] && f=stderr
	/usr/bin/python3 - "$T/last.json" "$S1" "$k" "$CAP" "$f" <<'PYEOF'
import json, sys
r = json.load(open(sys.argv[1])); s = sys.argv[2]; k = int(sys.argv[3]); cap = int(sys.argv[4])
out = r[sys.argv[5]]
assert r["truncated"] is True, "not truncated"
bad = [i for i in range(1, len(s) + 1) if out.endswith(s[:i])]
assert not bad, "ends with a %d-byte prefix of the secret" % max(bad)
assert s[:4] not in out, "a piece of the secret is in the output"
assert out.endswith("[REDACTED]"), "does not end with [REDACTED]: ...%r" % out[-20:]
assert out.count("a") == cap - k, "filler changed: %d" % out.count("a")
PYEOF
}
for k in 1 5 $((${#S1} - 1)) ${#S1}; do
	check "output cap cuts the secret after $k of ${#S1} bytes: no prefix of it kept (stdout)" capcase "$k" 1
done
check "output cap cuts the secret after 7 bytes: no prefix of it kept (stderr)" capcase 7 2

# another request's secret_env: not readable from a concurrent exec
SEX=$(jq -cn --arg a "$SX" '{BK_OTHER_SECRET: $a}')
nsenter --net="$CNS" curl -sk --max-time 30 --pinnedpubkey "$(sb "$SB" pin)" -H @"$T/hdr" -o "$T/resp/holder" \
	-H 'Content-Type: application/json' "$URL/exec" \
	--data-binary "$(jq -cn --argjson se "$SEX" '{command: "sleep 4.321", secret_env: $se}')" &
holder=$!
for _ in $(seq 1 50); do pgrep -fx 'sleep 4.321' > /dev/null && break; sleep 0.1; done
xc "timeout 20 python3 -c '$SCAN' $(scan_args "$SX")"
wait "$holder"
check "a concurrent exec sees no other request's secret_env in /proc/*/environ or any file ($(j .stdout | tr '\n' ' '))" \
	grep -qx 'HITS none' <<< "$(j .stdout)"

# --- every kind of response -------------------------------------------------------------------------
shim GET /health ''
check "/health: 200" test "$(code)" = 200
shim GET /isolation '' -H @"$T/hdr"
check "/isolation: 200" test "$(code)" = 200
shim GET /metrics '' -H @"$T/hdr"
check "/metrics: 200" test "$(code)" = 200
shim GET /isolation '' -H @"$T/hdr-wrong"
check "a wrong token: 401, JSON" sh -c "test $(code) = 401 && jq -e .code $T/last.json >/dev/null"
shim POST /exec '{"command":"true"}'
check "no token: 401" test "$(code)" = 401
shim POST /exec '{"command":' -H @"$T/hdr"
check "malformed JSON: 400" test "$(code)" = 400
shim GET /no-such-route '' -H @"$T/hdr"
check "unknown route: 404" test "$(code)" = 404
shim DELETE /exec '' -H @"$T/hdr"
check "wrong method: 405" test "$(code)" = 405
shim POST /exec "$(jq -cn --arg v "$S1" '{command: "true", secret_env: {PATH: $v}}')" -H @"$T/hdr"
check "a reserved secret_env name: 400, without the value" sh -c "test $(code) = 400 && ! grep -qF '$S1' $T/last.json"
shim POST /exec "$(jq -cn --arg v "$S1" '{command: "true", timeout: 0, secret_env: {OK_NAME: $v}}')" -H @"$T/hdr"
check "a bad timeout with a secret_env: 400, without the value" sh -c "test $(code) = 400 && ! grep -qF '$S1' $T/last.json"
shim POST /exec "$(jq -cn --arg v "$S1" '{command: "true", secret_env: {OK_NAME: [$v]}}')" -H @"$T/hdr"
check "a non-string secret_env value: 400, without the value" sh -c "test $(code) = 400 && ! grep -qF '$S1' $T/last.json"
head -c $((9 * 1024 * 1024)) /dev/zero | tr '\0' x > "$T/big"
shim POST /exec "@$T/big" -H @"$T/hdr"
check "an oversized body: 413" test "$(code)" = 413
# File routes aimed outside the roots, at paths that EXIST in the sandbox
# and that the sandbox user can read (so only the roots check can refuse
# them, and a 404 would prove nothing): the shim's token path, which the
# sandbox does not mount, gets a file with a sentinel in the sandbox's root
# (as on a node where it is there); /proc/1/environ is the container init's.
FILESENT="bkFileSent$(rnd)"
SBROOT=/run/boxkite/local/$SB/sandbox/rootfs
printf '%s\n' "$FILESENT" > "$SBROOT/run/secrets/boxkite/token" && chmod 644 "$SBROOT/run/secrets/boxkite/token"
xc 'cat /run/secrets/boxkite/token; ln -s /run/secrets/boxkite/token /workspace/tok-link; cp /run/secrets/boxkite/token /workspace/tok-copy; test -r /proc/1/environ && echo environ-readable'
check "control: the sandbox user reads the planted token file and /proc/1/environ (the paths exist)" \
	test "$(j .stdout | tr '\n' ' ')" = "$FILESENT environ-readable "
shim POST /view '{"path":"tok-copy"}' -H @"$T/hdr"
check "control: /view of the copy inside /workspace serves it ($(code))" \
	sh -c "test $(code) = 200 && grep -qF '$FILESENT' $T/last.json"
refused_outside() { # ROUTE-BODY: 403 path_outside_roots, and not a byte of the file
	shim POST /view "$1" -H @"$T/hdr"
	test "$(code) $(jq -r .code "$T/last.json")" = "403 path_outside_roots" && ! grep -qF "$FILESENT" "$T/last.json"
}
for p in /run/secrets/boxkite/token /etc/../../run/secrets/boxkite/token /workspace/../run/secrets/boxkite/token \
	/proc/1/environ; do
	refused_outside "{\"path\":\"$p\"}"; r=$?
	check "a file route aimed at $p: 403 path_outside_roots, none of its bytes ($(code) $(jq -r .code "$T/last.json"))" test "$r" = 0
done
# a symlink in /workspace to the token's absolute path resolves inside the
# root (RESOLVE_IN_ROOT): to /workspace/run/secrets/boxkite/token. With a
# decoy there, the link serves the decoy, never the file outside
xc 'mkdir -p /workspace/run/secrets/boxkite && echo in-root-decoy > /workspace/run/secrets/boxkite/token'
shim POST /view '{"path":"tok-link"}' -H @"$T/hdr"
check "a symlink in /workspace to the token path resolves inside /workspace: the decoy, none of the outside file ($(code) $(jq -r '.code // .content' "$T/last.json" | head -c 60))" \
	sh -c "test $(code) = 200 && grep -qF in-root-decoy $T/last.json && ! grep -qF '$FILESENT' $T/last.json"
rm -f "$SBROOT/run/secrets/boxkite/token"
ctl status > "$T/resp/status.json"; ctl inspect "$SB" > "$T/resp/inspect.json"
MPORT=$(grep -o 'http://127.0.0.1:[0-9]*/metrics' "$T/agent.log" | head -1 | sed 's/.*:\([0-9]*\)\/metrics/\1/')
curl -s --max-time 5 "http://127.0.0.1:$MPORT/metrics" > "$T/resp/agent-metrics.txt"
check "the admin and metrics answers were collected" sh -c "test -s $T/resp/status.json && test -s $T/resp/inspect.json && test -s $T/resp/agent-metrics.txt"
pats "${NEVER[@]}" "${SECRETS[@]}"
found=$(grep -lF -f "$T/pats" "$T"/resp/* 2>/dev/null | xargs -r -n1 basename | tr '\n' ' ')
check "no sentinel, token, key or secret_env value in any of $(ls "$T/resp" | wc -l) responses ${found:+(in: $found)}" test -z "$found"

# --- logs ---------------------------------------------------------------------------------------------
LOGS=("$T/agent.log" "/run/boxkite/local/$SB/shim.log" "/run/boxkite/local/$SB/sandbox.log")
check "the logs exist and the agent logged the execs (audit)" \
	sh -c "test -f /run/boxkite/local/$SB/shim.log && grep -q '\"event\":\"exec\"' $T/agent.log"
check "the shim logged the wrong token's 401 (so its log is in use)" grep -q '401' "/run/boxkite/local/$SB/shim.log"
found=$(grep -lF -f "$T/pats" "${LOGS[@]}" 2>/dev/null | tr '\n' ' ')
check "no sentinel, token, key or secret_env value in the agent, shim or sandbox log ${found:+(in: $found)}" test -z "$found"

# --- the run itself was clean (also what the sanitizer build reports) --------------------------------
bk_stop_agent; rc=$?
check "the agent stops cleanly on SIGTERM (exit $rc)" test "$rc" = 0
check "no sanitizer report in the agent or shim log" \
	sh -c "! grep -qE 'ERROR: (Address|Leak|Undefined)Sanitizer|runtime error:' $T/agent.log /run/boxkite/local/$SB/shim.log"
