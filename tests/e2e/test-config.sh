#!/usr/bin/env bash
# The node config the manifests ship is one the agent accepts; bad configs
# are refused with one clear line.
. "$(dirname "$0")/lib.sh"
# the JSON block of deploy/configmap.yaml (indented under "config.json: |")
awk '/config.json: \|/ {on=1; next} on && /^    / {print substr($0, 5); next} on && NF {exit}' \
	"$(dirname "$0")/../../deploy/configmap.yaml" > "$T/cm.json"
check "the ConfigMap holds JSON" jq -e . "$T/cm.json"
check "the agent accepts the shipped config" sh -c "$AGENT --config $T/cm.json --check-config | grep -q 'config ok'"
bad() { echo "$2" > "$T/bad.json"; out=$("$AGENT" --config "$T/bad.json" --check-config 2>&1); rc=$?
	check "refused: $1" sh -c "test $rc -ne 0 && test \$(printf '%s\n' \"$out\" | wc -l) -eq 1"; }
bad "unknown key" '{"sokcet":"/x"}'
bad "BPF off without allow_unsafe" '{"layers":{"bpf":false}}'
bad "seccomp off without allow_unsafe" '{"layers":{"seccomp":false}}'
bad "trailing text" '{"socket":"/x"} {"layers":{"bpf":false}}'
bad "fault without allow_unsafe" '{"testing":{"fault":"bpf"}}'
bad "pids_max out of range" '{"exec":{"pids_max":1}}'
bad "unknown default profile" '{"default_profile":"everything"}'
bad "override outside the deny set" '{"profiles":{"x":{"deny_overrides":["0.0.0.0/0"]}}}'
bad "not JSON" 'socket: /x'
