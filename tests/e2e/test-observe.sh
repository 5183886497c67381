#!/usr/bin/env bash
# Observable isolation: inspect/status read back from the kernel, verify
# from a real exec context (and its failure when a layer is removed behind
# the agent's back), the node self-test, metrics, and stock bpftool.
. "$(dirname "$0")/lib.sh"

CONFIG='{"selftest_interval":1,"verify_targets":{"metadata":"169.254.169.254:80","kubernetes_api":"10.96.0.1:443","pod":"10.244.1.5:8080","public":"203.0.113.10:443"}}'
bk_start_agent "$CONFIG" || { not_ok "agent starts"; exit 1; }
bk_sandbox_create ob1 || { not_ok "sandbox created"; exit 1; }
MPORT=$(grep -o 'http://127.0.0.1:[0-9]*/metrics' "$T/agent.log" | head -1 | sed 's/.*:\([0-9]*\)\/metrics/\1/')
check "metrics endpoint announced" test -n "$MPORT"
check "self-test passed at start" grep -q '"event":"selftest".*passed' "$T/agent.log"
# the agent links libmicrohttpd without its GnuTLS backend (lib/mhd/notls.c):
# the privileged process maps none of GnuTLS's libraries (p11-kit among them,
# which loads the PKCS#11 modules its configuration names); libcrypto, which
# it does load, shows the maps were read
agent_maps_no_gnutls() {
	grep -q libcrypto "/proc/$AGENT_PID/maps" &&
		! grep -qE '/lib(gnutls|p11-kit|nettle|hogweed|gmp|tasn1|idn2|unistring)[^/]*\.so' "/proc/$AGENT_PID/maps"
}
check "the agent maps no GnuTLS, p11-kit, nettle, gmp... (libmicrohttpd linked without TLS)" agent_maps_no_gnutls

# --- inspect / status while an exec runs -----------------------------------------
# (long enough on a slow machine for the checks below; ended by hanging up)
"$CTL" --admin-socket "$T/admin.sock" exec ob1 --timeout $((30 * TIME_SCALE)) -- sleep $((4 * TIME_SCALE)) > /dev/null &
ep=$!
# (wait for the command itself: before it exists the exec is still being set up)
for _ in $(seq 1 50); do ctl inspect ob1 > "$T/inspect.json" && [ "$(jq '[.live_execs[] | select(.processes >= 2)] | length' "$T/inspect.json")" -ge 1 ] && break; sleep 0.1; done
cp "$T/inspect.json" "$T/last.json"
check "inspect: one live exec" test "$(j '.live_execs | length')" = 1
check "inspect: kernel says all eight programs are attached" test "$(j '.live_execs[0].bpf_complete')" = true
check "inspect: attached program names read from the kernel" \
	test "$(j '[.live_execs[0].bpf[].prog] | sort | join(",")')" = "bk_connect4,bk_connect6,bk_egress,bk_recvmsg4,bk_recvmsg6,bk_sendmsg4,bk_sendmsg6,bk_sock_create"
check "inspect: exec netns holds only lo (netlink)" test "$(j '.live_execs[0].interfaces | join(",")')" = lo
check "inspect: pids cap read back" test "$(j '.live_execs[0].pids_max')" = 256
check "inspect: memory cap read back" test "$(j '.live_execs[0].memory_max')" = 536870912
check "inspect: policy map entry for the exec cgroup" test "$(j '.live_execs[0].policy_entry.profile')" = isolated
check "inspect: map digests" test "$(j '[.bpf_maps[] | select(.digest | length == 64)] | length')" = 6
check "inspect: pinned program paths for bpftool" test "$(j '.bpf_programs[0].pinned')" = "$BPFFS/bk_sock_create"
CG=$(j '.live_execs[0].cgroup'); CGID=$(j '.live_execs[0].cgroup_id')

# --- stock bpftool sees the same -----------------------------------------------------
check "bpftool cgroup tree lists the exec cgroup with the bk_ programs" \
	sh -c "bpftool cgroup tree $CG2 | grep -A8 '$(basename "$CG")' | grep -q bk_connect4"
check "bpftool cgroup show: all eight on the exec cgroup" test "$(bpftool cgroup show "$CG" | grep -c ' bk_')" = 8
check "bpftool prog show names the programs" test "$(bpftool prog show | grep -cE 'name bk_(sock_create|connect4|connect6|sendmsg4|sendmsg6|egress|recvmsg4|recvmsg6)')" -ge 8
# the entry of this exec's cgroup id (u64 key), in either form bpftool
# prints: with BTF ("formatted": {"key": N}) or raw little-endian bytes
# (["0x..", ...])
CGID_LE=$(printf '%016x' "${CGID:-0}" | sed 's/../"0x&"\n/g' | tac | paste -sd, | sed 's/.*/[&]/')
bpftool -j map dump pinned "$BPFFS/bk_policy" > "$T/policy-dump.json"
check "bpftool map dump pinned bk_policy has an entry for the exec's cgroup id $CGID" \
	jq -e --argjson id "${CGID:-0}" --argjson le "$CGID_LE" \
	'[.[] | select(.formatted.key == $id or .key == $id or .key == $le)] | length == 1' "$T/policy-dump.json"
live_ok=1
for cg in $(find $CG2/kubepods -name 'boxkite-exec-*' -type d); do
	[ "$(bpftool cgroup show "$cg" | grep -c ' bk_')" = 8 ] || live_ok=0
done
check "every live exec cgroup carries the eight programs" test "$live_ok" = 1
kill $ep 2>/dev/null; wait $ep
for _ in $(seq 1 100); do [ -z "$(exec_cgroups_left "$(sb ob1 pod_uid)")" ] && break; sleep 0.05; done

ctl status > "$T/status.json"
check "status: node safe, sandbox listed with its layers" \
	sh -c "jq -e '.node_safe and (.sandboxes[] | select(.pod == \"ob1\") | .layers.bpf)' $T/status.json >/dev/null"

# --- verify ---------------------------------------------------------------------
ctl verify ob1 > "$T/verify.txt"; rc=$?
check "verify passes on a healthy sandbox (exit 0)" test "$rc" = 0
check "verify: four probes, each stopped" test "$(grep -cE '^(metadata|kubernetes_api|pod|public) .* stopped ' "$T/verify.txt")" = 4
check "verify: says which layer stopped each, and why" test "$(grep -cE ' stopped .* bpf \((metadata|private|not_allowed)\)$' "$T/verify.txt")" = 4

# a BPF program detached behind the agent's back, during the verify exec
ctl verify ob1 --hold 3 --json > "$T/v2.json" & vp=$!
for _ in $(seq 1 50); do cg=$(live_exec_cg "$(sb ob1 pod_uid)"); [ -n "$cg" ] && break; sleep 0.05; done
bpftool cgroup detach "${cg:-/nonexistent}" cgroup_inet4_connect pinned "$BPFFS/bk_connect4"
wait $vp; rc=$?
check "verify fails when a program is detached with bpftool (exit $rc)" test "$rc" != 0
check "  ... and names the bpf layer" test "$(jq -r '.layers.bpf.held' "$T/v2.json")" = false

# an interface added to the exec's network namespace
ctl verify ob1 --hold 3 --json > "$T/v3.json" & vp=$!
pid=
# (a process of the command: live_exec_cg waits for one)
for _ in $(seq 1 60); do cg=$(live_exec_cg "$(sb ob1 pod_uid)")
	[ -n "$cg" ] && pid=$(for p in $(cat "$cg/cgroup.procs" 2>/dev/null); do [ "$(cat /proc/$p/comm 2>/dev/null)" != boxkite-agent ] && echo "$p"; done | tail -1)
	[ -n "$pid" ] && break; sleep 0.05; done
ip link add bkx$$ type veth peer name bky$$ && ip link set bkx$$ netns "$pid"
wait $vp; rc=$?
ip link del bky$$ 2>/dev/null
check "verify fails when an interface is added to the exec netns (exit $rc)" test "$rc" != 0
check "  ... and names the netns layer" test "$(jq -r '.layers.netns.held' "$T/v3.json")" = false

# --- self-test: a tampered policy map makes the node unsafe -------------------------
# allow 0.0.0.0/0 tcp 1-65535 for profile 1 ("isolated") in the pinned allow map
KEY="20 00 00 00 01 00 00 00 00 00 00 00"
VAL="01 00 00 00 01 00 ff ff 01 00 00 00$(printf ' 00%.0s' $(seq 1 120))"
bpftool map update pinned "$BPFFS/bk_allow4" key hex $KEY value hex $VAL
for _ in $(seq 1 50); do ctl status | jq -e '.node_safe == false' >/dev/null && break; sleep 0.1; done
check "self-test marks the node unsafe after tampering" sh -c "ctl() { $CTL --admin-socket $T/admin.sock \"\$@\"; }; ctl status | jq -e '.node_safe == false' >/dev/null"
check "  ... and logs why" grep -q '"selftest".*FAILED.*public' "$T/agent.log"
bk_exec ob1 -- echo should-not-run
check "  ... the next exec is refused (node_unsafe)" test "$(j .code)" = node_unsafe
check "  ... readiness says not ready" test "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$MPORT/readyz")" = 503
check "  ... boxkitectl ready exits non-zero" sh -c "! $CTL --admin-socket $T/admin.sock ready >/dev/null"
check "  ... metrics say so" sh -c "curl -s http://127.0.0.1:$MPORT/metrics | grep -qx 'boxkite_selftest_ok 0'"
bpftool map delete pinned "$BPFFS/bk_allow4" key hex $KEY
for _ in $(seq 1 50); do ctl status | jq -e '.node_safe' >/dev/null && break; sleep 0.1; done
bk_exec ob1 -- echo runs-again
check "a later passing self-test serves execs again" test "$(j .stdout)" = runs-again
check "readiness back to 200" test "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$MPORT/readyz")" = 200

# --- metrics, checked by a real Prometheus text parser -----------------------------
bk_exec ob1 -- sh -c 'curl -s --max-time 2 http://169.254.169.254/ ; true'
curl -s "http://127.0.0.1:$MPORT/metrics" > "$T/metrics.txt"
# Debian's python3 (python3-prometheus-client), whatever python3 is first on PATH
/usr/bin/python3 - "$T/metrics.txt" > "$T/metrics.check" 2>&1 <<'PYEOF'
import sys
from prometheus_client.parser import text_string_to_metric_families
text = open(sys.argv[1]).read()
fams = {f.name: f for f in text_string_to_metric_families(text)}
# every sample line belongs to a family with HELP and TYPE
helps = {l.split()[2] for l in text.splitlines() if l.startswith("# HELP")}
types = {l.split()[2] for l in text.splitlines() if l.startswith("# TYPE")}
need = ["boxkite_build_info", "boxkite_execs", "boxkite_exec_duration_seconds", "boxkite_denials",
        "boxkite_layer_failures", "boxkite_live_execs", "boxkite_sandboxes", "boxkite_ringbuf_lost",
        "boxkite_selftest_ok", "boxkite_selftest_last_success_timestamp_seconds"]
missing = [n for n in need if n not in fams]
assert not missing, "missing families: %s" % missing
assert helps == types, "HELP/TYPE mismatch"
den = [s for s in fams["boxkite_denials"].samples if s.labels.get("pod") == "ob1"]
assert den and all("reason" in s.labels for s in den), "no per-sandbox/per-reason denials"
h = fams["boxkite_exec_duration_seconds"]
assert any(s.name.endswith("_bucket") for s in h.samples), "no histogram buckets"
print("metrics ok", len(fams), "families")
PYEOF
check "metrics parse and carry every required family ($(tail -1 "$T/metrics.check"))" grep -q 'metrics ok' "$T/metrics.check"

# --- GET /isolation through the shim ------------------------------------------------
printf 'X-Sidecar-Auth-Token: %s\n' "$(cat "$(sb ob1 token_file)")" > "$T/hdr"
iso=$(nsenter --net="/run/netns/$(sb ob1 client_netns)" curl -sk --max-time 5 --pinnedpubkey "$(sb ob1 pin)" -H @"$T/hdr" "$(sb ob1 url)/isolation")
check "GET /isolation through the shim reports the pod, from the kernel" \
	jq -e '.pod == "ob1" and .layers.bpf and (.bpf_programs | length == 8)' <<< "$iso" >/dev/null
check "GET /isolation publishes the receipt key (the node's Ed25519 public key)" \
	jq -e '(.receipt_key.key_id | length == 64) and (.receipt_key.public_key | startswith("-----BEGIN PUBLIC KEY-----"))' <<< "$iso" >/dev/null
met=$(nsenter --net="/run/netns/$(sb ob1 client_netns)" curl -sk --max-time 5 --pinnedpubkey "$(sb ob1 pin)" -H @"$T/hdr" "$(sb ob1 url)/metrics")
check "GET /metrics through the shim: Prometheus text" grep -q '^boxkite_execs_total{outcome="completed"}' <<< "$met"
check "  ... with this pod's denial series only" sh -c "echo '$met' | grep '^boxkite_denials_total' | grep -q 'pod=\"ob1\"' && ! echo '$met' | grep '^boxkite_denials_total' | grep -vq 'pod=\"ob1\"'"

# --- deploy/monitoring's rules and dashboard query only what these scrapes hold ------
printf '%s\n' "$met" > "$T/shim-metrics.txt"
st=$(sed -n 's/^boxkite_start_time_seconds //p' "$T/metrics.txt")
check "boxkite_start_time_seconds is the agent's start, a wall-clock time ($st, now $(date +%s))" \
	sh -c "[ -n '$st' ] && [ '$st' -le $(date +%s) ] && [ '$st' -ge $(( $(date +%s) - 3600 )) ]"
MON=$(cd "$(dirname "$0")/../.." && pwd)
/usr/bin/python3 "$MON/tests/ops/metric_names.py" --scrape "$T/metrics.txt" --scrape "$T/shim-metrics.txt" \
	"$MON/deploy/monitoring/boxkite-rules.yaml" "$MON/deploy/monitoring/boxkite-dashboard.json" > "$T/names.txt" 2>&1
names_rc=$?
check "alert rules and dashboard reference only metrics of the live scrapes ($(tr '\n' ';' < "$T/names.txt"))" \
	test "$names_rc" -eq 0

# --- a pod's /metrics holds only its own series (issue 13) ---------------------------
pod_metrics() {
	printf 'X-Sidecar-Auth-Token: %s\n' "$(cat "$(sb "$1" token_file)")" > "$T/hdr-$1"
	nsenter --net="/run/netns/$(sb "$1" client_netns)" curl -sk --max-time 5 --pinnedpubkey "$(sb "$1" pin)" \
		-H @"$T/hdr-$1" "$(sb "$1" url)/metrics"
}
val() { awk -v k="$1" '$1 == k { print $2 }'; }
DONE='boxkite_execs_total{outcome="completed"}'
if bk_sandbox_create ob2; then
	m1a=$(pod_metrics ob1)
	bk_exec ob2 -- sh -c 'curl -s --max-time 2 http://169.254.169.254/ ; true'
	bk_exec ob2 -- true
	"$CTL" --admin-socket "$T/admin.sock" exec ob2 --timeout $((30 * TIME_SCALE)) -- sleep $((4 * TIME_SCALE)) > /dev/null &
	lp=$!
	for _ in $(seq 1 100); do [ "$(pod_metrics ob2 | val boxkite_live_execs)" = 1 ] && break; sleep 0.1; done
	m1=$(pod_metrics ob1)
	m2=$(pod_metrics ob2)
	node=$(curl -s "http://127.0.0.1:$MPORT/metrics")
	kill $lp 2>/dev/null; wait $lp 2>/dev/null
	check "pod /metrics: ob2's execs leave ob1's exec counter alone ($(val "$DONE" <<< "$m1a") -> $(val "$DONE" <<< "$m1"))" \
		test "$(val "$DONE" <<< "$m1")" = "$(val "$DONE" <<< "$m1a")"
	check "  ... ob1 shows 0 live execs while ob2 runs one (ob1: $(val boxkite_live_execs <<< "$m1"))" \
		test "$(val boxkite_live_execs <<< "$m1")" = 0
	check "  ... ob2's denial is not in ob1's bpf_denied_total ($(val boxkite_bpf_denied_total <<< "$m1a") -> $(val boxkite_bpf_denied_total <<< "$m1"))" \
		test "$(val boxkite_bpf_denied_total <<< "$m1")" = "$(val boxkite_bpf_denied_total <<< "$m1a")"
	no_ob2() { ! grep -q 'pod="ob2"' <<< "$m1"; }
	no_node_wide() {
		! grep -qE '^boxkite_(sandboxes|refused_callers_total|ringbuf_lost_total|events_suppressed_total|selftest_runs_total)' <<< "$m1"
	}
	ob2_own() {
		[ "$(val boxkite_live_execs <<< "$m2")" = 1 ] && [ "$(val "$DONE" <<< "$m2")" = 2 ] &&
			[ "$(val boxkite_bpf_denied_total <<< "$m2")" -ge 1 ] &&
			grep -q '^boxkite_denials_total{namespace="[^"]*",pod="ob2"' <<< "$m2"
	}
	node_all() {
		grep -q 'pod="ob1"' <<< "$node" && grep -q 'pod="ob2"' <<< "$node" &&
			[ "$(val boxkite_sandboxes <<< "$node")" -ge 2 ] && [ "$(val boxkite_live_execs <<< "$node")" -ge 1 ]
	}
	check "  ... no series naming ob2 in ob1's view" no_ob2
	check "  ... no node-wide series in a pod's view (sandboxes, refused callers, lost events, self-test runs)" no_node_wide
	check "  ... ob2 sees its own: 1 live, 2 completed, its denial" ob2_own
	check "  ... the node endpoint (--metrics) keeps everything: both pods' denials, sandboxes, live execs" node_all
else not_ok "second sandbox created"; fi

# --- the kernel and what it offers (issue 20) -----------------------------------------
ctl status > "$T/status.json"
check "status: kernel is this machine's release" test "$(jq -r .kernel "$T/status.json")" = "$(uname -r)"
check "status: every required facility probed present, the optional ones listed" \
	jq -e '.features | .bpf_cgroup_programs and .bpf_link_cgroup and .bpf_ringbuf and .clone3_into_cgroup
	       and .pidfd_open and .openat2 and ([.bpf_task_info, .cgroup_kill, .so_peerpidfd, .unix_diag, .landlock,
	       .seccomp_filter] | all(type == "boolean")) and (.landlock_abi | type == "number")
	       and (.identity == "so_peerpidfd" or .identity == "so_peercred")' "$T/status.json"
check "status: landlock_abi is what the kernel says (0 without Landlock)" \
	test "$(jq '.features | if .landlock then .landlock_abi > 0 else .landlock_abi == 0 end' "$T/status.json")" = true
check "status: the start logged the same set" \
	grep -q "\"event\":\"kernel_features\",\"kernel\":\"$(uname -r)\"" "$T/agent.log"
