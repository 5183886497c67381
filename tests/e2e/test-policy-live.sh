#!/usr/bin/env bash
# Live policy change (issue 17): `boxkitectl policy set NAME PROFILE` and a
# changed boxkite.dev/egress-policy annotation in the runtime's state apply
# to the pod's NEW execs at once; an exec already running keeps the profile
# it started with (its policy entry in the kernel says so); the change is
# logged (pod, old, new) and shown by inspect; the override survives an
# agent restart. Every host is a test host in a namespace this test made.
. "$(dirname "$0")/lib.sh"

CONFIG='{"profiles":{"web":{"netns":"pod","allow":[{"cidr":"203.0.113.0/24","proto":"tcp","ports":"443"}]}}}'
bk_start_agent "$CONFIG" || { not_ok "agent starts"; exit 1; }
bk_sandbox_create pl1 --policy web && bk_world pl1 1 "203.0.113.10" "" "203.0.113.0/24" "" ||
	{ not_ok "sandbox (web) and its world"; exit 1; }
ok "a sandbox under profile web, with a test-made world"

CONNECT='import socket, sys, time
def c():
    s = socket.socket(); s.settimeout(3)
    try:
        s.connect(("203.0.113.10", 443)); return "ok"
    except OSError as e:
        import errno; return errno.errorcode.get(e.errno, "timeout")
print("first", c(), flush=True)
time.sleep(float(sys.argv[1]))
print("second", c(), flush=True)'
# run_connect NAME HOLD OUT: the exec's response in OUT
run_connect() { ctl exec "$1" --json --timeout 30 -- python3 -c "$CONNECT" "$2" > "$3"; }
field() { jq -r .stdout "$1" | awk -v n="$2" '$1 == n { print $2 }'; }
logged() { # EVENT OLD NEW [BY]: the agent logged the change for pl1
	jq -c "select(.event == \"$1\" and .pod == \"pl1\" and .old == \"$2\" and .new == \"$3\"${4:+ and .by == \"$4\"})" \
		"$T/agent.log" 2>/dev/null | grep -q .
}

run_connect pl1 0 "$T/e0.json"
check "before: an exec under web connects ($(jq -r .isolation.policy "$T/e0.json") $(field "$T/e0.json" first))" \
	test "$(jq -r .isolation.policy "$T/e0.json")/$(field "$T/e0.json" first)" = web/ok

# a long exec starts under web, the policy changes while it runs
run_connect pl1 5 "$T/long.json" &
long=$!
sleep 2
ctl policy set pl1 isolated > "$T/set.json"; rc=$?
check "policy set pl1 isolated: exit 0, old web, new isolated ($rc $(jq -c . "$T/set.json"))" \
	test "$rc/$(jq -r '.old + "/" + .new' "$T/set.json")" = 0/web/isolated
check "  ... logged as policy_set with pod, old and new" logged policy_set web isolated
# new execs: at once
bk_exec pl1 --timeout 30 -- python3 -c "$CONNECT" 0
check "a new exec right after gets isolated ($(j .isolation.policy))" \
	test "$(j .isolation.policy)" = isolated
check "  ... and cannot connect ($(j .stdout | awk '$1 == "first" {print $2}'))" \
	sh -c "test \"\$(jq -r .stdout $T/last.json | awk '\$1 == \"first\" {print \$2}')\" != ok"
# inspect while the long exec still runs
ctl inspect pl1 > "$T/inspect.json"
ij() { jq -r "$1" "$T/inspect.json"; }
check "inspect: policy isolated, source policy_set ($(ij '.policy + " " + .policy_source'))" \
	test "$(ij '.policy + " " + .policy_source')" = "isolated policy_set"
check "inspect: the change web -> isolated by policy_set ($(ij '.policy_change | "\(.from) \(.to) \(.by)"'))" \
	test "$(ij '.policy_change | "\(.from) \(.to) \(.by)"')" = "web isolated policy_set"
check "inspect: the running exec's kernel policy entry still says web ($(ij '[.live_execs[].policy_entry.profile] | join(",")'))" \
	sh -c "jq -e '[.live_execs[].policy_entry.profile] | index(\"web\") != null' $T/inspect.json > /dev/null"
wait $long
check "the exec that was running keeps web: it connects after the change too ($(field "$T/long.json" first) $(field "$T/long.json" second))" \
	test "$(field "$T/long.json" first)/$(field "$T/long.json" second)" = ok/ok
check "  ... and its receipt says web ($(jq -r .isolation.policy "$T/long.json"))" test "$(jq -r .isolation.policy "$T/long.json")" = web

check "policy set to a profile the node does not have is refused" sh -c "! ctl policy set pl1 nosuch > /dev/null 2>&1"
bk_exec pl1 --timeout 30 -- true
check "  ... and changes nothing ($(j .isolation.policy))" test "$(j .isolation.policy)" = isolated

# the override survives an agent restart
bk_stop_agent
bk_start_agent "$CONFIG" || { not_ok "agent restarts"; exit 1; }
for _ in $(seq 1 100); do ctl exec pl1 --json -- true > "$T/last.json" 2>/dev/null && [ "$(j .isolation.policy)" != null ] && break; sleep 0.1; done
check "after an agent restart new execs still get isolated ($(j .isolation.policy))" test "$(j .isolation.policy)" = isolated

ctl policy unset pl1 > "$T/unset.json"
check "policy unset: back to the annotation's web ($(jq -c . "$T/unset.json"))" test "$(jq -r '.old + "/" + .new' "$T/unset.json")" = isolated/web
run_connect pl1 0 "$T/e1.json"
check "  ... new execs connect again ($(jq -r .isolation.policy "$T/e1.json") $(field "$T/e1.json" first))" \
	test "$(jq -r .isolation.policy "$T/e1.json")/$(field "$T/e1.json" first)" = web/ok

# the annotation changes in the runtime's state (what a runtime that passes
# a changed pod annotation to the OCI state shows the agent)
uid=$(sb pl1 pod_uid)
n=0
for f in /run/runc/*/state.json; do # local mode: runc --root /run/runc
	jq -e --arg u "io.kubernetes.pod.uid=$uid" '.config.labels | index($u) != null' "$f" > /dev/null 2>&1 || continue
	jq -c '.config.labels |= map(if startswith("boxkite.dev/egress-policy=") then "boxkite.dev/egress-policy=isolated" else . end)' \
		"$f" > "$T/state.tmp" && cat "$T/state.tmp" > "$f" && n=$((n + 1))
done
check "the pod's annotation now says isolated in its $n containers' state" test "$n" = 2
bk_exec pl1 --timeout 30 -- true
check "the next exec gets isolated at once ($(j .isolation.policy))" test "$(j .isolation.policy)" = isolated
check "  ... logged as policy_changed web -> isolated by annotation" logged policy_changed web isolated annotation
ctl inspect pl1 > "$T/inspect.json"
check "inspect: source annotation, change by annotation ($(ij '.policy_source + " " + (.policy_change | "\(.from) \(.to) \(.by)")'))" \
	test "$(ij '.policy_source + " " + (.policy_change | "\(.from) \(.to) \(.by)")')" = "annotation web isolated annotation"

# ... and back to web in place, the file's size and mtime kept as they
# were: only its ctime says it changed (the agent keeps what it parsed of a
# state.json while the file is the same one, and must not take this one
# for the same)
n=0; same=0
for f in /run/runc/*/state.json; do
	jq -e --arg u "io.kubernetes.pod.uid=$uid" '.config.labels | index($u) != null' "$f" > /dev/null 2>&1 || continue
	touch -r "$f" "$T/mtime.ref"
	sz=$(stat -c %s "$f")
	jq -c '.config.labels |= map(if startswith("boxkite.dev/egress-policy=") then "boxkite.dev/egress-policy=web" else . end)' \
		"$f" > "$T/state.tmp" || continue
	# (JSON may end in blanks: padded to the old size)
	printf '%*s' $((sz - $(stat -c %s "$T/state.tmp"))) '' >> "$T/state.tmp"
	cat "$T/state.tmp" > "$f" && touch -r "$T/mtime.ref" "$f" && n=$((n + 1))
	[ "$(stat -c %s "$f")" = "$sz" ] && [ "$(stat -c %y "$f")" = "$(stat -c %y "$T/mtime.ref")" ] && same=$((same + 1))
done
check "the annotation says web again in its $n containers' state, $same of them with the same size and mtime" \
	test "$n/$same" = 2/2
bk_exec pl1 --timeout 30 -- true
check "the next exec gets web at once ($(j .isolation.policy))" test "$(j .isolation.policy)" = web

# overrides of pods that are gone are dropped: a pod's uid never comes
# back (testing.policy_sweep_s 1: the agent looks for gone pods every
# second instead of every minute, and drops what two looks missed)
bk_stop_agent
bk_start_agent "${CONFIG%\}},\"testing\":{\"policy_sweep_s\":1}}" || { not_ok "agent starts (policy_sweep_s 1)"; exit 1; }
bk_sandbox_create pl2 || { not_ok "a second sandbox"; exit 1; }
uid1=$(sb pl1 pod_uid); uid2=$(sb pl2 pod_uid)
ctl policy set pl1 isolated > /dev/null && ctl policy set pl2 web > /dev/null
check "overrides recorded for both pods" test -f "$T/state/policy/$uid1" -a -f "$T/state/policy/$uid2"
bk_sandbox_delete pl2 > /dev/null
# execs of pl1 drive the sweeps (an exec asks for its pod's profile)
for _ in $(seq 1 100); do
	bk_exec pl1 --timeout 10 -- true
	[ -f "$T/state/policy/$uid2" ] || break
	sleep 0.1
done
check "the gone pod's override file is dropped" test ! -f "$T/state/policy/$uid2"
check "  ... and logged as policy_override_dropped naming its uid" \
	sh -c "jq -c 'select(.event == \"policy_override_dropped\" and .pod_uid == \"$uid2\")' $T/agent.log 2>/dev/null | grep -q ."
check "the live pod's override is kept ($(j .isolation.policy))" \
	test -f "$T/state/policy/$uid1" -a "$(j .isolation.policy)" = isolated
