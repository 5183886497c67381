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
# refused for what is wrong with the entry (not as an unknown key)
bad_says() { echo "$2" > "$T/bad.json"; out=$("$AGENT" --config "$T/bad.json" --check-config 2>&1); rc=$?
	check "refused: $1" sh -c 'test "$1" -ne 0 && test $(printf "%s\n" "$2" | wc -l) -eq 1 &&
		printf "%s\n" "$2" | grep -qF -- "$3"' _ "$rc" "$out" "$3"; }
bad_says "a wildcard in the middle of an allow_domains name" \
	'{"profiles":{"pkgs":{"allow_domains":[{"name":"files.*.org","ports":"443"}]}}}' 'a wildcard only as the whole first label'
l63() { printf "$1%.0s" $(seq 63); }
bad_says "an allow_domains name over 253 bytes" \
	"{\"profiles\":{\"pkgs\":{\"allow_domains\":[{\"name\":\"$(l63 a).$(l63 b).$(l63 c).$(l63 d)\",\"ports\":\"443\"}]}}}" \
	'longer than 253 bytes'
bad_says "an allow_domains wildcard under one label" \
	'{"profiles":{"pkgs":{"allow_domains":[{"name":"*.org","ports":"443"}]}}}' 'too broad'
bad_says "allow_domains with raw DNS to the pod's resolvers" \
	'{"profiles":{"pkgs":{"dns":true,"allow_domains":[{"name":"pypi.org","ports":"443"}]}}}' 'leave out "dns"'
# the message names the profile and the offending entry
echo '{"profiles":{"pkgs":{"allow_domains":[{"name":"pypi.org","ports":"443"},{"name":"a..org","ports":"443"}]}}}' > "$T/bad.json"
check "an allow_domains error names the entry" sh -c \
	"$AGENT --config $T/bad.json --check-config 2>&1 | grep -q 'profile pkgs: allow_domains entry \"a..org\": an empty label'"
# A valid allow_domains profile is accepted (the DNS proxy enforces it: test-dns)
echo '{"profiles":{"pkgs":{"allow_domains":[{"name":"pypi.org","ports":"443"},{"name":"*.pythonhosted.org","ports":"443"}]}}}' > "$T/dom.json"
check "a valid allow_domains profile is accepted" sh -c "$AGENT --config $T/dom.json --check-config | grep -q 'config ok: 3 profile'"
