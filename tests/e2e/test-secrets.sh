#!/usr/bin/env bash
# Secret leaks. Sentinels (random strings made here) in the agent's
# environment, plus the pod's real secrets (the shim's token and TLS key),
# must appear in no exec's environment, in no file an exec can reach, in no
# response (exec, /isolation, /health, /metrics, every kind of error, the
# admin socket's status/inspect) and in no log (agent, shim, sandbox).
# Granted secrets (docs/api.md, /exec): files in the pod's granted-secrets
# directory (<secret dir>/granted, mounted into the shim only), granted by
# /configure's secret_names, named by /exec's secret_env {ENV: secret name}.
# Their values reach that exec's environment (that variable only) and are
# [REDACTED_SECRET:<name>] in stdout/stderr, also when written in pieces,
# byte by byte, or cut by an output cap in the middle; they are in no log,
# no other exec can read them, the sandbox cannot see the directory. A name
# not granted (or no longer), a dangerous ENV name (LD_PRELOAD, PATH, ...)
# and a client's literal value are dropped silently.
# Everything goes through the shim over HTTPS, as a manager would.
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
SU="Ysu$(rnd 21)"    # in the directory, never granted
SD="Wsd$(rnd 21)"    # granted, named under dangerous ENV names
SR="Vsr$(rnd 21)"    # granted, then no longer
SLIT="Ulit$(rnd 20)" # a client's literal value (never a file)

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

# every secret that must appear nowhere; the granted secrets' values are
# added below for the places where even the requester's own must not show
NEVER=("$SENT_AGENT" "$TOKEN" "${KEYLINES[@]}" "$KEYHEX" "$WRONG_TOKEN" "$SLIT")
SECRETS=("$S1" "$S2" "$SX" "$SP1" "$SP2" "$SU" "$SD" "$SR")

# The granted-secrets directory, as a Secret volume mounted into the shim
# only: <secret dir>/granted (the local shim's SIDECAR_SECRETS_DIR), one
# file per secret, readable by the shim's user alone.
GDIR=$SECDIR/granted
mkdir -m 0500 "$GDIR" && chown 65532:65532 "$GDIR"
put_secret() { # NAME VALUE
	printf %s "$2" > "$GDIR/$1" && chmod 0400 "$GDIR/$1" && chown 65532:65532 "$GDIR/$1"
}
put_secret bk-one "$S1"; put_secret bk-two "$S2"; put_secret bk-other "$SX"
put_secret bk-short "$SP1"; put_secret bk-long "$SP2"; put_secret bk-ungranted "$SU"
put_secret bk-danger "$SD"; put_secret bk-revoked "$SR"
check "the granted-secrets directory holds 8 files, readable by the shim's user only" \
	test "$(ls "$GDIR" | wc -l) $(stat -c '%a %u' "$GDIR") $(stat -c '%a %u' "$GDIR"/* | sort -u | tr '\n' ' ')" = "8 500 65532 400 65532 "
GRANTED='["bk-one","bk-two","bk-other","bk-short","bk-long","bk-danger","bk-revoked","bk-nofile"]'

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

# /configure SESSION SECRET_NAMES-JSON
configure() {
	shim POST /configure "$(jq -cn --arg s "$1" --argjson n "$2" '{session_id: $s, secret_names: $n}')" -H @"$T/hdr"
}
configure sec-1 "$GRANTED"
check "/configure with secret_names: 200 configured" test "$(code) $(jq -r .status "$T/last.json")" = "200 configured"

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

# --- granted secrets through secret_env ------------------------------------------------------------
SE='{"BK_SECRET_ONE":"bk-one","BK_SECRET_TWO":"bk-two"}'
M1='[REDACTED_SECRET:bk-one]'; M2='[REDACTED_SECRET:bk-two]'
want_sum=$(printf '%s\n' "$S1" | sha256sum | cut -d' ' -f1)
xc 'printenv BK_SECRET_ONE | sha256sum | cut -d" " -f1; printenv BK_SECRET_TWO | wc -c' "$SE"
check "secret_env names a granted secret: its value reaches the exec's environment (sha256 matches)" \
	test "$(j .stdout)" = "$want_sum
$((${#S2} + 1))"
xc 'env | grep -E "^[A-Za-z_][A-Za-z0-9_]*=" | cut -d= -f1 | sort -u | tr "\n" " "' "$SE"
check "the exec's environment is the clean one plus exactly the two secret_env names ($(j .stdout))" \
	test "$(j .stdout)" = "BK_SECRET_ONE BK_SECRET_TWO HOME LANG PATH PWD TERM "
xc 'echo "$BK_SECRET_ONE"; echo "$BK_SECRET_TWO" >&2' "$SE"
check "secret on stdout: $M1" test "$(j .stdout)" = "$M1"
check "secret on stderr: $M2" test "$(j .stderr)" = "$M2"
xc 'echo "before-$BK_SECRET_ONE-after"; echo "x${BK_SECRET_ONE}y${BK_SECRET_TWO}z"' "$SE"
check "secrets inside other output: only they are replaced, each under its name" \
	test "$(j .stdout)" = "before-$M1-after
x${M1}y${M2}z"
xc 's=$BK_SECRET_ONE; n=${#s}; h=$((n / 2)); a=$(printf %s "$s" | cut -c1-$h); b=$(printf %s "$s" | cut -c$((h + 1))-);
    printf %s "$a"; sleep 0.3; printf "%s\n" "$b"; printf %s "$a" >&2; sleep 0.3; printf "%s\n" "$b" >&2' "$SE"
check "secret written in two halves 300 ms apart: $M1 (stdout)" test "$(j .stdout)" = "$M1"
check "  ... and on stderr" test "$(j .stderr)" = "$M1"
xc 's=$BK_SECRET_ONE; while [ -n "$s" ]; do r=${s#?}; printf %s "${s%"$r"}"; s=$r; sleep 0.02; done; echo' "$SE"
check "secret written byte by byte (20 ms apart): $M1" test "$(j .stdout)" = "$M1"
SEP='{"BK_LONG":"bk-long","BK_SHORT":"bk-short"}'
xc 'echo "$BK_LONG"; echo "$BK_SHORT"; echo "$BK_SHORT$BK_LONG"' "$SEP"
# (a run of hidden bytes is one marker, named after the secret that hid
# its first byte: "short" + "long" starts with the short one)
check "a secret that is a prefix of another: neither leaks a byte ($(j .stdout | tr '\n' ' '))" \
	test "$(j .stdout)" = "[REDACTED_SECRET:bk-long]
[REDACTED_SECRET:bk-short]
[REDACTED_SECRET:bk-short]"

# the output caps (stdout: exec.output_cap, 1 MiB here; stderr: 256 KiB)
# cutting through the secret: the truncated output must not end with a
# prefix of it
OUTCAP=1048576 ERRCAP=262144
capcase() { # K STREAM: K bytes of the secret fit under the stream's cap
	local k=$1 fd=${2:-1} cap=$OUTCAP f=stdout
	[ "$fd" = 2 ] && cap=$ERRCAP f=stderr
	xc "{ head -c $((cap - k)) /dev/zero | tr '\\0' a; printf %s \"\$BK_SECRET_ONE\"; head -c 4096 /dev/zero | tr '\\0' b; } >&$fd" "$SE"
	/usr/bin/python3 - "$T/last.json" "$S1" "$k" "$cap" "$f" "$M1" <<'PYEOF'
import json, sys
r = json.load(open(sys.argv[1])); s = sys.argv[2]; k = int(sys.argv[3]); cap = int(sys.argv[4])
out = r[sys.argv[5]]; mk = sys.argv[6]
assert r["truncated"] is True, "not truncated"
bad = [i for i in range(1, len(s) + 1) if out.endswith(s[:i])]
assert not bad, "ends with a %d-byte prefix of the secret" % max(bad)
assert s[:4] not in out, "a piece of the secret is in the output"
assert out.endswith(mk), "does not end with %s: ...%r" % (mk, out[-30:])
assert out.count("a") == cap - k, "filler changed: %d" % out.count("a")
PYEOF
}
for k in 1 5 $((${#S1} - 1)) ${#S1}; do
	check "output cap cuts the secret after $k of ${#S1} bytes: no prefix of it kept (stdout)" capcase "$k" 1
done
check "stderr's 256 KiB cap cuts the secret after 7 bytes: no prefix of it kept (stderr)" capcase 7 2

# another request's secret: not readable from a concurrent exec (the holder
# shows it had the value while the scan ran)
nsenter --net="$CNS" curl -sk --max-time 30 --pinnedpubkey "$(sb "$SB" pin)" -H @"$T/hdr" -o "$T/resp/holder" \
	-H 'Content-Type: application/json' "$URL/exec" \
	--data-binary '{"command":"sleep 4.321; printenv BK_OTHER_SECRET | sha256sum | cut -c1-64","secret_env":{"BK_OTHER_SECRET":"bk-other"}}' &
holder=$!
for _ in $(seq 1 50); do pgrep -fx 'sleep 4.321' > /dev/null && break; sleep 0.1; done
xc "timeout 20 python3 -c '$SCAN' $(scan_args "$SX")"
wait "$holder"
check "the holder exec had the secret while the scan ran" \
	test "$(jq -r .stdout "$T/resp/holder")" = "$(printf '%s\n' "$SX" | sha256sum | cut -c1-64)"
check "a concurrent exec sees no other request's secret in /proc/*/environ or any file ($(j .stdout | tr '\n' ' '))" \
	grep -qx 'HITS none' <<< "$(j .stdout)"

# the sandbox never sees the granted-secrets directory or a value in it
xc 'ls -A /run/secrets/boxkite; ls /run/secrets/boxkite/granted 2>&1; env | grep -c SECRETS'
check "the sandbox has no granted-secrets directory, no SIDECAR_SECRETS_DIR ($(j .stdout | tr '\n' ' '))" \
	sh -c "! jq -r .stdout $T/last.json | grep -q bk- && test \"\$(jq -j .stdout $T/last.json | tail -1)\" = 0 && grep -q 'No such file' $T/last.json"
xc "timeout 25 python3 -c '$SCAN' $(scan_args "${SECRETS[@]}")"
check "no granted secret's value in any file or environ the sandbox can reach, after the execs that used them ($(j .stdout | tr '\n' ' '))" \
	grep -qx 'HITS none' <<< "$(j .stdout)"

# --- what is dropped silently ----------------------------------------------------------------------
PROBE='for v in BK_VAL BK_UNG BK_NOFILE BK_LIT BK_LIT2 BK_TOK BK_DOT BK_SMUG; do eval "printf \"%s=%s \" $v \"\${$v-unset}\""; done'
xc "$PROBE" '{"BK_VAL":"bk-one","BK_UNG":"bk-ungranted","BK_NOFILE":"bk-nofile"}'
check "a name not granted (its file exists) and a granted name without a file: dropped, 200; the granted one set ($(j .stdout))" \
	test "$(code) $(j .stdout)" = "200 BK_VAL=$M1 BK_UNG=unset BK_NOFILE=unset BK_LIT=unset BK_LIT2=unset BK_TOK=unset BK_DOT=unset BK_SMUG=unset "
# the client cannot pass a value: what it puts in secret_env is a name (one
# not granted, or not a name at all: dropped), and a "secrets" list of its
# own never reaches the agent
b=$(jq -cn --arg c "$PROBE" --arg v "$SLIT" '{command: $c,
	secret_env: {BK_LIT: $v, BK_LIT2: ("value " + $v), BK_TOK: "../token", BK_DOT: ".."},
	secrets: [{env: "BK_SMUG", name: "bk-one", value: $v}, {env: "BK_VAL", name: "x", value: $v}]}')
shim POST /exec "$b" -H @"$T/hdr"
check "a client's literal values, a path as a name, its own \"secrets\" list: all dropped, 200 ($(j .stdout))" \
	test "$(code) $(j .stdout)" = "200 BK_VAL=unset BK_UNG=unset BK_NOFILE=unset BK_LIT=unset BK_LIT2=unset BK_TOK=unset BK_DOT=unset BK_SMUG=unset "
xc 'printf %s "$PATH"'
CLEANPATH=$(j .stdout)
DANGER='{"LD_PRELOAD":"bk-danger","PATH":"bk-danger","ld_library_path":"bk-danger","BASH_ENV":"bk-danger","Bash_Env":"bk-danger","DYLD_INSERT_LIBRARIES":"bk-danger","PYTHONSTARTUP":"bk-danger","NODE_OPTIONS":"bk-danger","BAD-NAME":"bk-danger","1ST":"bk-danger","BK_OK":"bk-danger"}'
xc 'printf "%s|%s|%s|%s|%s|%s|%s|%s|%s\n" "$PATH" "${LD_PRELOAD-unset}" "${ld_library_path-unset}" "${BASH_ENV-unset}" "${Bash_Env-unset}" "${DYLD_INSERT_LIBRARIES-unset}" "${PYTHONSTARTUP-unset}" "${NODE_OPTIONS-unset}" "$BK_OK"; env | grep -c -e "^BAD-NAME=" -e "^1ST="' "$DANGER"
check "dangerous ENV names (LD_*, PATH, BASH_ENV in any case, DYLD_*, PYTHONSTARTUP, NODE_OPTIONS, not identifiers): dropped, 200; the safe one set ($(j .stdout | tr '\n' ' '))" \
	test "$(code) $(j .stdout)" = "200 $CLEANPATH|unset|unset|unset|unset|unset|unset|unset|[REDACTED_SECRET:bk-danger]
0"
xc 'printf %s "$IFS" | od -An -c | tr -d " \n"' '{"IFS":"bk-danger"}'
check "IFS as a secret_env name: dropped, the shell's default stays ($(j .stdout))" test "$(code) $(j .stdout)" = '200 \t\n'

# revoked: a later /configure without the name, and the manager's recycle
# (session_id null), take the grant back
xc 'printf %s "${BK_R-unset}"' '{"BK_R":"bk-revoked"}'
check "granted: bk-revoked resolves" test "$(j .stdout)" = "[REDACTED_SECRET:bk-revoked]"
configure sec-2 '["bk-one"]'
check "/configure sec-2 with secret_names [bk-one]: 200" test "$(code)" = 200
xc 'printf "%s %s" "${BK_R-unset}" "${BK_1-unset}"' '{"BK_R":"bk-revoked","BK_1":"bk-one"}'
check "after a /configure without it, bk-revoked is dropped, bk-one still resolves ($(j .stdout))" \
	test "$(j .stdout)" = "unset $M1"
shim POST /configure '{"session_id":null}' -H @"$T/hdr"
check "/configure with session_id null (the recycle): 200, session_id null" test "$(code) $(jq -r .session_id "$T/last.json")" = "200 null"
xc 'printf %s "${BK_1-unset}"' '{"BK_1":"bk-one"}'
check "after the recycle nothing is granted ($(j .stdout))" test "$(j .stdout)" = unset
configure sec-3 "$GRANTED"
check "/configure sec-3 grants them again: 200" test "$(code)" = 200

# --- every kind of response -------------------------------------------------------------------------
shim GET /health ''
check "/health: 200 healthy" test "$(code) $(jq -r .status "$T/last.json")" = "200 healthy"
shim GET /isolation '' -H @"$T/hdr"
check "/isolation: 200" test "$(code)" = 200
shim GET /metrics '' -H @"$T/hdr"
check "/metrics: 200" test "$(code)" = 200
shim GET /isolation '' -H @"$T/hdr-wrong"
check "a wrong token: 401 auth_invalid" test "$(code) $(jq -r .code "$T/last.json")" = "401 auth_invalid"
shim POST /exec '{"command":"true"}'
check "no token: 401 auth_missing" test "$(code) $(jq -r .code "$T/last.json")" = "401 auth_missing"
shim POST /exec '{"command":' -H @"$T/hdr"
check "malformed JSON: 422 validation_error (a list detail)" \
	test "$(code) $(jq -r '.code + " " + (.detail | type)' "$T/last.json")" = "422 validation_error array"
shim GET /no-such-route '' -H @"$T/hdr"
check "unknown route: 404" test "$(code)" = 404
shim GET /no-such-route '' -H @"$T/hdr-wrong"
check "unknown route with a wrong token: 401 (auth before routing)" test "$(code)" = 401
shim POST /interpreter/run '{}' -H @"$T/hdr"
check "a route not served: 501 not_implemented" test "$(code) $(jq -r .code "$T/last.json")" = "501 not_implemented"
shim POST /flush '{}' -H @"$T/hdr"
check "/flush: 200 flushed" test "$(code) $(jq -r .status "$T/last.json")" = "200 flushed"
shim DELETE /exec '' -H @"$T/hdr"
check "wrong method: 405" test "$(code)" = 405
shim POST /exec '{"command":"echo $PATH","secret_env":{"PATH":"bk-one"}}' -H @"$T/hdr"
check "a reserved secret_env name: 200, dropped, without the value" \
	sh -c "test $(code) = 200 && test \"\$(jq -r .stdout $T/last.json)\" = '$CLEANPATH' && ! grep -qF '$S1' $T/last.json"
shim POST /exec '{"command":"true","timeout":0,"secret_env":{"OK_NAME":"bk-one"}}' -H @"$T/hdr"
check "a bad timeout with a granted secret_env: 422, without the value" \
	sh -c "test $(code) = 422 && grep -q timeout $T/last.json && ! grep -qF '$S1' $T/last.json"
shim POST /exec "$(jq -cn --arg v "$S1" '{command: "true", secret_env: {OK_NAME: [$v]}}')" -H @"$T/hdr"
check "a non-string secret_env value: 422, without the value" sh -c "test $(code) = 422 && ! grep -qF '$S1' $T/last.json"
shim POST /exec "$(jq -cn --arg v "$S1" '{command: "true", secret_env: [$v]}')" -H @"$T/hdr"
check "secret_env not an object: 422, without the value" sh -c "test $(code) = 422 && ! grep -qF '$S1' $T/last.json"
# over the 32 MiB body limit (docs/api.md): read, discarded, answered
head -c $((33 * 1024 * 1024)) /dev/zero | tr '\0' x > "$T/big"
shim POST /exec "@$T/big" -H @"$T/hdr"
check "an oversized body (33 MiB): 413 body_too_large" test "$(code) $(jq -r .code "$T/last.json")" = "413 body_too_large"
rm -f "$T/big"
# File routes aimed outside the roots, at paths that EXIST in the sandbox
# and that the sandbox user can read (so only the roots check can refuse
# them, and a 404 would prove nothing): the shim's token path, which the
# sandbox does not mount, gets a file with a sentinel in the sandbox's root
# (as on a node where it is there); /proc/1/environ is the container init's.
FILESENT="bkFileSent$(rnd)"
SBROOT=/run/boxkite/local/$SB/sandbox/rootfs
printf '%s\n' "$FILESENT" > "$SBROOT/run/secrets/boxkite/token" && chmod 644 "$SBROOT/run/secrets/boxkite/token"
mkdir -p "$SBROOT/run/secrets/boxkite/granted" && printf '%s\n' "$FILESENT" > "$SBROOT/run/secrets/boxkite/granted/bk-one" &&
	chmod 644 "$SBROOT/run/secrets/boxkite/granted/bk-one"
xc 'cat /run/secrets/boxkite/token /run/secrets/boxkite/granted/bk-one; ln -s /run/secrets/boxkite/token /workspace/tok-link; cp /run/secrets/boxkite/token /workspace/tok-copy; test -r /proc/1/environ && echo environ-readable'
check "control: the sandbox user reads the planted token and granted-secret files and /proc/1/environ (the paths exist)" \
	test "$(j .stdout | tr '\n' ' ')" = "$FILESENT $FILESENT environ-readable "
shim POST /view '{"path":"tok-copy"}' -H @"$T/hdr"
check "control: /view of the copy inside /workspace serves it ($(code))" \
	sh -c "test $(code) = 200 && grep -qF '$FILESENT' $T/last.json"
refused_outside() { # ROUTE-BODY: 400 path_outside_roots (the reference's status), and not a byte of the file
	shim POST /view "$1" -H @"$T/hdr"
	test "$(code) $(jq -r .code "$T/last.json")" = "400 path_outside_roots" && ! grep -qF "$FILESENT" "$T/last.json"
}
for p in /run/secrets/boxkite/token /etc/../../run/secrets/boxkite/token /workspace/../run/secrets/boxkite/token \
	/run/secrets/boxkite/granted/bk-one /proc/1/environ; do
	refused_outside "{\"path\":\"$p\"}"; r=$?
	check "a file route aimed at $p: 400 path_outside_roots, none of its bytes ($(code) $(jq -r .code "$T/last.json"))" test "$r" = 0
done
# a symlink in /workspace to the token's absolute path resolves inside the
# root (RESOLVE_IN_ROOT): to /workspace/run/secrets/boxkite/token. With a
# decoy there, the link serves the decoy, never the file outside
xc 'mkdir -p /workspace/run/secrets/boxkite && echo in-root-decoy > /workspace/run/secrets/boxkite/token'
shim POST /view '{"path":"tok-link"}' -H @"$T/hdr"
check "a symlink in /workspace to the token path resolves inside /workspace: the decoy, none of the outside file ($(code) $(jq -r '.code // .content' "$T/last.json" | head -c 60))" \
	sh -c "test $(code) = 200 && grep -qF in-root-decoy $T/last.json && ! grep -qF '$FILESENT' $T/last.json"
rm -rf "$SBROOT/run/secrets/boxkite/token" "$SBROOT/run/secrets/boxkite/granted"
ctl status > "$T/resp/status.json"; ctl inspect "$SB" > "$T/resp/inspect.json"
MPORT=$(grep -o 'http://127.0.0.1:[0-9]*/metrics' "$T/agent.log" | head -1 | sed 's/.*:\([0-9]*\)\/metrics/\1/')
curl -s --max-time 5 "http://127.0.0.1:$MPORT/metrics" > "$T/resp/agent-metrics.txt"
check "the admin and metrics answers were collected" sh -c "test -s $T/resp/status.json && test -s $T/resp/inspect.json && test -s $T/resp/agent-metrics.txt"
pats "${NEVER[@]}" "${SECRETS[@]}"
found=$(grep -lF -f "$T/pats" "$T"/resp/* 2>/dev/null | xargs -r -n1 basename | tr '\n' ' ')
check "no sentinel, token, key or granted secret's value in any of $(ls "$T/resp" | wc -l) responses ${found:+(in: $found)}" test -z "$found"

# --- logs ---------------------------------------------------------------------------------------------
LOGS=("$T/agent.log" "/run/boxkite/local/$SB/shim.log" "/run/boxkite/local/$SB/sandbox.log")
check "the logs exist and the agent logged the execs (audit)" \
	sh -c "test -f /run/boxkite/local/$SB/shim.log && grep -q '\"event\":\"exec\"' $T/agent.log"
check "the shim logged the wrong token's 401 (so its log is in use)" grep -q '401' "/run/boxkite/local/$SB/shim.log"
found=$(grep -lF -f "$T/pats" "${LOGS[@]}" 2>/dev/null | tr '\n' ' ')
check "no sentinel, token, key or granted secret's value in the agent, shim or sandbox log ${found:+(in: $found)}" test -z "$found"

# --- the run itself was clean (also what the sanitizer build reports) --------------------------------
bk_stop_agent; rc=$?
check "the agent stops cleanly on SIGTERM (exit $rc)" test "$rc" = 0
check "no sanitizer report in the agent or shim log" \
	sh -c "! grep -qE 'ERROR: (Address|Leak|Undefined)Sanitizer|runtime error:' $T/agent.log /run/boxkite/local/$SB/shim.log"
