#!/usr/bin/env bash
# Exec receipts that cannot lie (issue 14): every isolation field read back
# from the kernel objects the exec ran in — the command's own
# /proc/<pid>/status, its cgroup files, the BPF maps — and signed with the
# node's Ed25519 key, checkable with stock openssl. State changed behind the
# agent's back (a cap raised, a policy entry rewritten, a program detached)
# shows in the receipt; a receipt altered by one byte fails verification.
. "$(dirname "$0")/lib.sh"

bk_start_agent || { not_ok "agent starts"; exit 1; }
bk_sandbox_create rc1 || { not_ok "sandbox"; exit 1; }
PUID=$(sb rc1 pod_uid)
ok "agent and sandbox"

# --- the process fields: /proc/<pid>/status of the command, after execve ---------------
bk_exec rc1 -- sh -c 'id -u; grep -E "^(Uid|Gid|Groups|Cap...|NoNewPrivs|Seccomp|Seccomp_filters):" /proc/self/status'
cp "$T/last.json" "$T/r1.json"
U=$(j .stdout | head -1)
check "receipt: process fields come from /proc/<pid>/status after execve ($(j .isolation.process.source))" \
	test "$(j .isolation.process.source)" = proc_status_after_execve
check "receipt: uid (all four) is the command's own ($(jq -c .isolation.process.uid "$T/r1.json"))" \
	test "$(jq -c .isolation.process.uid "$T/r1.json")" = "[$U,$U,$U,$U]"
check "receipt: the uid the command printed is the receipt's" test "$(j .isolation.uid)" = "$U"
check "receipt: no supplementary groups" test "$(jq -c .isolation.process.groups "$T/r1.json")" = "[]"
check "receipt: every capability set empty, as the command's own status says" \
	test "$(jq -r '.isolation.process | [.cap_inh,.cap_prm,.cap_eff,.cap_bnd,.cap_amb] | unique | join(" ")' "$T/r1.json") $(j .isolation.capabilities)" = "0000000000000000 0"
check "receipt: the cap sets match the command's own /proc/self/status" \
	test "$(j .stdout | awk '/^CapEff/ {print $2}')" = "$(j .isolation.process.cap_eff)"
check "receipt: no_new_privs read as 1, seccomp mode 2" \
	test "$(j .isolation.process.no_new_privs) $(j .isolation.no_new_privs) $(j .isolation.process.seccomp)" = "1 true 2"

# --- caps read from the cgroup files ----------------------------------------------------
check "receipt: pids_max and memory_max as the cgroup files hold them (the defaults)" \
	test "$(j .isolation.pids_max) $(j .isolation.memory_max)" = "256 536870912"
# raised behind the agent's back during the exec: the receipt shows the kernel's value
ctl exec rc1 --json -- sleep "$(( 2 * TIME_SCALE ))" > "$T/t1.json" & ep=$!
cg=
for _ in $(seq 1 100); do cg=$(live_exec_cg "$PUID"); [ -n "$cg" ] && break; sleep 0.05; done
pf=$(find $CG_ROOTS -path "*pod$PUID/$(basename "${cg:-none}")/pids.max" 2>/dev/null | head -1)
[ -n "$pf" ] && echo 77 > "$pf"
wait $ep
check "receipt: a pids.max rewritten during the exec shows as the kernel's 77, not the configured 256 ($pf)" \
	test "$(jq -r .isolation.pids_max "$T/t1.json")" = 77

# --- the policy, read from the BPF maps ---------------------------------------------------
check "receipt: policy_rules rendered from the maps (profile, flags, deny entries)" \
	sh -c "jq -e '.isolation.policy_rules | index(\"profile isolated\") and index(\"icmp off\") and (map(select(startswith(\"deny 169.254.169.254/32 \"))) | length == 1)' $T/r1.json >/dev/null"
D1=$(jq -r .isolation.policy_digest "$T/r1.json")
bk_exec rc1 -- true
check "receipt: the same profile, the same digest of the map bytes" test "$(j .isolation.policy_digest)" = "$D1"
# the exec's policy entry rewritten during the exec (flags |= ICMP)
ctl exec rc1 --json -- sleep "$(( 2 * TIME_SCALE ))" > "$T/t2.json" & ep=$!
cg=
for _ in $(seq 1 100); do cg=$(live_exec_cg "$PUID"); [ -n "$cg" ] && break; sleep 0.05; done
cid=$(stat -c %i "${cg:-/nonexistent}" 2>/dev/null || echo 0)
key=$(printf '%016x' "$cid" | sed 's/../& /g' | awk '{for (i = 8; i >= 1; i--) printf "%s ", $i}')
val=$(bpftool -j map lookup pinned "$BPFFS/bk_policy" key hex $key 2>/dev/null | jq -r '.value | map(ltrimstr("0x")) | join(" ")')
if [ -n "$val" ]; then
	set -- $val; f0=$(printf '%02x' $(( 0x$1 | 2 ))); shift
	bpftool map update pinned "$BPFFS/bk_policy" key hex $key value hex "$f0" "$@"
fi
wait $ep
check "receipt: a policy entry rewritten during the exec shows (icmp on) ($val)" \
	sh -c "jq -e '.isolation.policy_rules | index(\"icmp on\")' $T/t2.json >/dev/null"
check "receipt: ... and its digest differs from the untouched entry's" test "$(jq -r .isolation.policy_digest "$T/t2.json")" != "$D1"

# a program detached during the exec (bpftool cgroup detach): the receipt says the layer did not hold
ctl exec rc1 --json -- sleep "$(( 2 * TIME_SCALE ))" > "$T/t3.json" & ep=$!
cg=
for _ in $(seq 1 100); do cg=$(live_exec_cg "$PUID"); [ -n "$cg" ] && break; sleep 0.05; done
n0=$(cg_progs "$cg")
bpftool cgroup detach "${cg:-/nonexistent}" cgroup_inet4_connect pinned "$BPFFS/bk_connect4"
n1=$(cg_progs "$cg")
wait $ep
check "receipt: a program detached during the exec ($n0 -> $n1 on its cgroup) shows as bpf_held_to_end false" \
	sh -c "test '$n0 $n1' = '8 7' && test \"\$(jq -r .isolation.bpf_held_to_end $T/t3.json)\" = false"
bk_exec rc1 -- true
check "receipt: an untouched exec held to the end" test "$(j .isolation.bpf_held_to_end)" = true

# --- signed: stock openssl verifies it; one byte changed fails ---------------------------------
ctl receipt pubkey > "$T/pub.pem"
check "boxkitectl receipt pubkey prints an Ed25519 public key" \
	sh -c "openssl pkey -pubin -in $T/pub.pem -noout -text 2>/dev/null | grep -q ED25519"
KID=$(openssl pkey -pubin -in "$T/pub.pem" -outform DER 2>/dev/null | sha256sum | cut -d' ' -f1)
check "receipt: key_id is the SHA-256 of the public key ($KID)" test "$(jq -r .receipt.key_id "$T/r1.json")" = "$KID"
check "status publishes the same key" test "$(ctl status | jq -r .receipt_key.key_id)" = "$KID"
jq -j .receipt.document "$T/r1.json" > "$T/doc"
jq -r .receipt.signature "$T/r1.json" | base64 -d > "$T/sig.bin"
check "openssl pkeyutl -verify -rawin accepts the receipt" \
	sh -c "openssl pkeyutl -verify -pubin -inkey $T/pub.pem -rawin -in $T/doc -sigfile $T/sig.bin 2>&1 | grep -q 'Signature Verified Successfully'"
check "the signed document holds the exec id, the pod, the command's digest and the read-back isolation" \
	sh -c "jq -e --arg id $(jq -r .exec_id "$T/r1.json") --arg uid $PUID '.exec_id == \$id and .pod.uid == \$uid and (.command_sha256 | length == 64) and .isolation.process.source == \"proc_status_after_execve\" and .kernel != null' $T/doc >/dev/null"
ctl receipt verify "$T/r1.json" > "$T/v.txt"; rc=$?
check "boxkitectl receipt verify: valid (exit $rc: $(cat "$T/v.txt"))" test "$rc" = 0
# one byte altered: the exit code 0 -> 1
jq --arg d "$(jq -j .receipt.document "$T/r1.json" | sed 's/"exit_code":0/"exit_code":1/')" '.receipt.document = $d' "$T/r1.json" > "$T/bad.json"
check "the altered document differs in one byte" \
	test "$(cmp -l <(jq -j .receipt.document "$T/r1.json") <(jq -j .receipt.document "$T/bad.json") | wc -l)" = 1
ctl receipt verify "$T/bad.json" > "$T/v.txt"; rc=$?
check "boxkitectl receipt verify: one byte changed is INVALID (exit $rc)" sh -c "test $rc = 1 && grep -q INVALID $T/v.txt"
jq -j .receipt.document "$T/bad.json" > "$T/doc2"
check "openssl refuses the altered document" \
	sh -c "! openssl pkeyutl -verify -pubin -inkey $T/pub.pem -rawin -in $T/doc2 -sigfile $T/sig.bin >/dev/null 2>&1"

# --- the key stays in the agent --------------------------------------------------------------
check "the node key is $T/state/node.key, mode 600, root's" test "$(stat -c '%a %u' "$T/state/node.key")" = "600 0"
check "no private key in the agent log" sh -c "! grep -q 'PRIVATE KEY' $T/agent.log"
check "the private key appears in no response" sh -c "! grep -q 'PRIVATE' $T/r1.json"
check "an unprivileged user cannot read the key" sh -c "! setpriv --reuid 65534 --regid 65534 --clear-groups cat $T/state/node.key >/dev/null 2>&1"
bk_stop_agent
bk_start_agent || not_ok "agent restarts"
check "the key survives a restart (same key id)" test "$(ctl status | jq -r .receipt_key.key_id)" = "$KID"
bk_stop_agent
chmod 644 "$T/state/node.key"
bk_start_agent >/dev/null 2>&1; rc=$?
check "a node key readable by others: the agent refuses to start, naming it" \
	sh -c "test $rc != 0 && grep -q 'node.key must be a regular file' $T/agent.log"
bk_stop_agent 2>/dev/null
chmod 600 "$T/state/node.key"
