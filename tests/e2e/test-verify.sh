#!/usr/bin/env bash
# verify with four outcomes (stopped / allowed / reached / skipped) under
# isolated, internet and custom profiles; a broken layer makes it fail and
# name the layer; a routing failure in the pod's network is not "stopped";
# the pod report's layers and inspect read back from the kernel.
# Every host is a test host in a namespace this test made (bk_world).
. "$(dirname "$0")/lib.sh"

CONFIG='{"deny_cidrs":["10.96.0.0/12"],
 "profiles":{"podweb":{"netns":"pod","allow":[{"cidr":"10.244.1.5/32","proto":"tcp","ports":"8080"}],
                       "deny_overrides":["10.0.0.0/8"]},
             "v6web":{"netns":"pod","allow":[{"cidr":"2001:db8::/32","proto":"tcp","ports":"8080"}]}}}'
UNSAFE=$(jq -c '. + {"layers":{"bpf":false},"testing":{"allow_unsafe":true}}' <<< "$CONFIG")

bk_start_agent "$CONFIG" || { not_ok "agent starts"; exit 1; }
world_for() { # NAME IDX: every verify target, and 2001:db8::1, served by a world namespace
	bk_world "$1" "v$2" "203.0.113.10 169.254.169.254 10.96.0.1 10.244.1.5" "2001:db8::1" \
		"203.0.113.0/24 169.254.169.254/32 10.96.0.0/12 10.244.0.0/16" "2001:db8::1/128"
}
bk_sandbox_create vf-iso --policy isolated || { not_ok "isolated sandbox"; exit 1; }
bk_sandbox_create vf-inet --policy internet && world_for vf-inet 1 || { not_ok "internet sandbox + world"; exit 1; }
bk_sandbox_create vf-cust --policy podweb && world_for vf-cust 2 || { not_ok "custom sandbox + world"; exit 1; }
bk_sandbox_create vf-v6 --policy v6web && world_for vf-v6 3 || { not_ok "v6 custom sandbox + world"; exit 1; }
# an internet sandbox whose pod network has no route to any target
bk_sandbox_create vf-noroute --policy internet || { not_ok "internet sandbox without routes"; exit 1; }

# verify NAME TAG: --json into $T/v-TAG.json, the human form into $T/v-TAG.txt, exit codes in RC_J / RC_H
verify() {
	ctl verify "$1" --json > "$T/v-$2.json"; RC_J=$?
	ctl verify "$1" > "$T/v-$2.txt"; RC_H=$?
}
vj() { jq -r "$2" "$T/v-$1.json"; }
# outcome[/layer[/reason]] of one probe
probe() { vj "$1" ".probes[] | select(.name == \"$2\") | [.outcome, .layer, .reason] | map(select(. != null)) | join(\"/\")"; }
shape_ok() { # exactly the documented probe shape, one of four outcomes, and a boolean passed
	jq -e '(.passed | type == "boolean") and (.probes | length >= 4) and (.probes | all(
		(keys - ["name", "address", "outcome", "layer", "reason", "ms"] | length == 0)
		and (.name | type == "string") and (.address | type == "string") and (.ms | type == "number")
		and (.outcome | IN("stopped", "allowed", "reached", "skipped"))
		and ((.outcome == "stopped") == (.layer != null))))' "$T/v-$1.json" > /dev/null
}
no_passed_unless_clean() { # the human form says PASSED only when every probe is stopped or allowed
	if grep -qE '^(\S+)\s+\S+\s+(reached|skipped) ' "$T/v-$1.txt"; then ! grep -q PASSED "$T/v-$1.txt"; else true; fi
}

# --- isolated: every target stopped by BPF ----------------------------------------
verify vf-iso iso
check "isolated: --json has the documented shape ($(vj iso '[.probes[].outcome] | join(",")'))" shape_ok iso
for p in metadata kubernetes_api pod public; do
	check "isolated: $p stopped by bpf ($(probe iso $p))" test "$(probe iso $p | cut -d/ -f1-2)" = stopped/bpf
done
check "isolated: passed, exit 0 (json $RC_J, human $RC_H)" test "$(vj iso .passed)/$RC_J/$RC_H" = true/0/0
check "isolated: one line per probe with its outcome" test "$(grep -cE '^(metadata|kubernetes_api|pod|public) .* stopped ' "$T/v-iso.txt")" = 4
check "isolated: PASSED printed" grep -q '^PASSED' "$T/v-iso.txt"

# --- internet: the deny set stopped, a public test address allowed -----------------
verify vf-inet inet
check "internet: --json has the documented shape" shape_ok inet
check "internet: metadata stopped by bpf, reason metadata ($(probe inet metadata))" test "$(probe inet metadata)" = stopped/bpf/metadata
check "internet: kubernetes_api stopped by bpf, reason cluster ($(probe inet kubernetes_api))" test "$(probe inet kubernetes_api)" = stopped/bpf/cluster
check "internet: pod stopped by bpf, reason private ($(probe inet pod))" test "$(probe inet pod)" = stopped/bpf/private
check "internet: public (a test-made address) allowed and probed ($(probe inet public))" test "$(probe inet public)" = allowed/connected
check "internet: passed, exit 0 (json $RC_J, human $RC_H)" test "$(vj inet .passed)/$RC_J/$RC_H" = true/0/0
check "internet: the human line says allowed" grep -qE '^public .* allowed ' "$T/v-inet.txt"

# --- custom: what an allow rule admits is allowed, the rest of the deny set stopped -
verify vf-cust cust
check "custom: --json has the documented shape" shape_ok cust
check "custom: pod (admitted by the allow rule, 10/8 overridden) allowed ($(probe cust pod))" test "$(probe cust pod)" = allowed/connected
check "custom: metadata stopped by bpf ($(probe cust metadata))" test "$(probe cust metadata)" = stopped/bpf/metadata
check "custom: kubernetes_api stays denied (cluster) under the override ($(probe cust kubernetes_api))" test "$(probe cust kubernetes_api)" = stopped/bpf/cluster
check "custom: public not admitted: stopped by bpf, not_allowed ($(probe cust public))" test "$(probe cust public)" = stopped/bpf/not_allowed
check "custom: passed, exit 0 (json $RC_J, human $RC_H)" test "$(vj cust .passed)/$RC_J/$RC_H" = true/0/0

# a profile whose rules admit none of the targets: its allowed class is probed at an address its rule admits
verify vf-v6 v6
check "custom v6: allow_rule probe at [2001:db8::1]:8080 allowed ($(vj v6 '.probes[] | select(.name == "allow_rule") | "\(.address) \(.outcome)"'))" \
	test "$(vj v6 '.probes[] | select(.name == "allow_rule") | "\(.address) \(.outcome)"')" = "[2001:db8::1]:8080 allowed"
check "custom v6: the four targets stopped by bpf ($(vj v6 '[.probes[] | select(.name != "allow_rule") | "\(.outcome)/\(.layer)"] | unique | join(",")'))" \
	test "$(vj v6 '[.probes[] | select(.name != "allow_rule") | "\(.outcome)/\(.layer)"] | unique | join(",")')" = stopped/bpf
check "custom v6: passed (json $RC_J)" test "$(vj v6 .passed)/$RC_J" = true/0

# --- a routing failure in the pod's network is not "stopped" ----------------------
verify vf-noroute noroute
check "no route: public is skipped, reason no_route ($(probe noroute public))" test "$(probe noroute public)" = skipped/no_route
check "no route: verify fails (json $RC_J, human $RC_H)" test "$(vj noroute .passed)/$RC_J/$RC_H" = false/1/1
check "no route: no PASSED in the human form" sh -c "! grep -q PASSED $T/v-noroute.txt"
check "no route: the line says skipped" grep -qE '^public .* skipped .*no_route' "$T/v-noroute.txt"

# --- the pod report's layers, read back from the kernel -----------------------------
ctl inspect vf-iso > "$T/insp.json"
POD_CG=$(find "$CG2" -maxdepth 4 -type d -name "pod$(sb vf-iso pod_uid)" | head -1)
check "report: layers.cgroup true, with the pod cgroup's id as the kernel has it" \
	test "$(jq -r '"\(.layers.cgroup) \(.layer_evidence.cgroup.cgroup_id)"' "$T/insp.json")" = "true $(stat -c %i "$POD_CG")"
check "report: layers.bpf true: eight programs pinned as loaded, the policy map open ($(jq -c .layer_evidence.bpf "$T/insp.json"))" \
	jq -e '.layers.bpf and .layer_evidence.bpf.programs_pinned == 8 and .layer_evidence.bpf.policy_map' "$T/insp.json" >/dev/null
check "report: layers.netns fresh, from the self-test's namespace ($(jq -c .layer_evidence.netns "$T/insp.json"))" \
	jq -e '.layers.netns == "fresh" and (.layer_evidence.netns.fresh_interfaces == ["lo"]) and .layer_evidence.netns.checked_unix > 0' "$T/insp.json" >/dev/null
# a pinned program removed behind the agent's back: the report says so
PID4=$(bpftool -j prog show pinned "$BPFFS/bk_connect4" | jq -r .id)
rm -f "$BPFFS/bk_connect4"
ctl inspect vf-iso > "$T/insp2.json"
bpftool prog pin id "$PID4" "$BPFFS/bk_connect4"
check "report: a program unpinned with rm: layers.bpf false ($(jq -c .layer_evidence.bpf "$T/insp2.json"))" \
	jq -e '(.layers.bpf | not) and .layer_evidence.bpf.programs_pinned == 7' "$T/insp2.json" >/dev/null
check "report: pinned again: layers.bpf true" sh -c "$CTL --admin-socket $T/admin.sock inspect vf-iso | jq -e .layers.bpf >/dev/null"

# --- inspect during a live exec: its limits and programs as the kernel holds them ---
"$CTL" --admin-socket "$T/admin.sock" exec vf-iso --timeout $((30 * TIME_SCALE)) -- sleep $((4 * TIME_SCALE)) > /dev/null &
ep=$!
for _ in $(seq 1 50); do ctl inspect vf-iso > "$T/li.json" && [ "$(jq '[.live_execs[] | select(.processes >= 2)] | length' "$T/li.json")" -ge 1 ] && break; sleep 0.1; done
XCG=$(basename "$(jq -r '.live_execs[0].cgroup' "$T/li.json")")
PMAX=$(find $CG_ROOTS -path "*/$XCG/pids.max" 2>/dev/null | head -1)
echo 77 > "$PMAX"
ctl inspect vf-iso > "$T/li2.json"
check "inspect: pids.max written behind the agent's back is what it shows ($(jq .live_execs[0].pids_max "$T/li2.json"))" \
	test "$(jq .live_execs[0].pids_max "$T/li2.json")" = 77
check "inspect: the exec's programs from a query on its cgroup, ids as bpftool lists them" \
	test "$(jq -r '[.live_execs[0].bpf[].id] | sort | join(",")' "$T/li2.json")" = \
	"$(bpftool -j cgroup show "$(jq -r '.live_execs[0].cgroup' "$T/li2.json")" | jq -r '[.[].id] | sort | join(",")')"
kill $ep 2>/dev/null; wait $ep 2>/dev/null

# --- a layer switched off: verify fails and names it -----------------------------------
bk_stop_agent; bk_start_agent "$UNSAFE" || { not_ok "agent starts with the BPF layer off"; exit 1; }
verify vf-iso iso-off
check "BPF off: isolated verify fails (json $RC_J, human $RC_H)" test "$(vj iso-off .passed)/$RC_J/$RC_H" = false/1/1
check "BPF off: names the bpf layer ($(jq -c .layers.bpf "$T/v-iso-off.json"))" test "$(vj iso-off .layers.bpf.held)" = false
check "BPF off: the human form says bpf DID NOT HOLD" grep -q 'bpf 0 programs DID NOT HOLD' "$T/v-iso-off.txt"
check "BPF off: the fresh netns still stops each probe, named netns ($(vj iso-off '[.probes[] | "\(.outcome)/\(.layer)/\(.reason)"] | unique | join(",")'))" \
	test "$(vj iso-off '[.probes[] | "\(.outcome)/\(.layer)/\(.reason)"] | unique | join(",")')" = stopped/netns/ENETUNREACH
check "BPF off: no PASSED" sh -c "! grep -q PASSED $T/v-iso-off.txt"
verify vf-inet inet-off
check "BPF off: internet metadata reached ($(probe inet-off metadata))" test "$(probe inet-off metadata | cut -d/ -f1)" = reached
check "BPF off: internet verify fails (json $RC_J, human $RC_H)" test "$(vj inet-off .passed)/$RC_J/$RC_H" = false/1/1
check "BPF off: the human form never says PASSED with a reached probe" no_passed_unless_clean inet-off
verify vf-noroute noroute-off
check "BPF off, no route in the pod network: metadata is skipped/no_route, not stopped ($(probe noroute-off metadata))" \
	test "$(probe noroute-off metadata)" = skipped/no_route
check "  ... every probe of it not stopped ($(vj noroute-off '[.probes[].outcome] | join(",")'))" \
	test "$(vj noroute-off '[.probes[] | select(.outcome == "stopped")] | length')" = 0
