#!/usr/bin/env bash
# Names in policy (issue 17): a profile with allow_domains gets the agent's
# DNS proxy. Every exec's DNS (UDP and TCP port 53, to any address) goes to
# it (BPF connect/sendmsg rewrite, recvmsg gives the asked address back);
# it answers only A/AAAA/CNAME for allowed names, forwarding to the pod's
# resolver; everything else is refused and reported (dns_name, dns_rate).
# Test-made world only: the pod's resolver (10.96.0.10) is a fake
# (tests/e2e/dnsfake.py) in a namespace this test made, logging every
# question that reaches it; the "internet" (bk_world, world.py) answers DNS
# on every address too (A 192.0.2.77), so a query delivered past the proxy
# shows.
. "$(dirname "$0")/lib.sh"
HERE=$(cd "$(dirname "$0")" && pwd)

CONFIG='{"deny_cidrs":["10.96.0.0/12"],
 "profiles":{"pkgs":{"allow_domains":[{"name":"pypi.org","ports":"443"},{"name":"*.pythonhosted.org","ports":"443"}]},
             "docs":{"allow_domains":[{"name":"docs.example.org","ports":"443"}]}}}'

# resolver_world SANDBOX [TAG]: the fake upstream at 10.96.0.10, linked to the pod netns
# (its questions in $T/upstream[TAG].log)
resolver_world() {
	local P R a b t=${2:-}
	P=$(sb "$1" pod_netns); R=bk-t-dns$t$$; a=bkdr$t$$a; b=bkdr$t$$b
	bk_netns_add "$R" || return 1
	ip link add "$a" type veth peer name "$b" || return 1
	ip link set "$a" netns "$R"; ip link set "$b" netns "$P"
	ip -n "$R" addr add 198.18.0.1/24 dev "$a"; ip -n "$R" link set "$a" up
	ip -n "$R" addr add 10.96.0.10/32 dev lo
	ip -n "$P" addr add 198.18.0.2/24 dev "$b"; ip -n "$P" link set "$b" up
	ip -n "$P" route add 10.96.0.10/32 via 198.18.0.1
	: > "$T/upstream$t.log"
	nsenter --net="/run/netns/$R" python3 "$HERE/dnsfake.py" "$T/upstream$t.log" 10.96.0.10 > "$T/dnsfake$t.out" 2>&1 &
	for _ in $(seq 1 50); do grep -q ready "$T/dnsfake$t.out" && return 0; sleep 0.1; done
	return 1
}

bk_start_agent "$CONFIG" || { not_ok "agent starts"; exit 1; }
bk_sandbox_create dn1 --policy pkgs || { not_ok "sandbox"; exit 1; }
resolver_world dn1 || { not_ok "resolver world"; exit 1; }
bk_world dn1 d1 "203.0.113.10 203.0.113.11 203.0.113.13 203.0.113.14 203.0.113.53" "2001:db8::10 2001:db8::53" "203.0.113.0/24" "2001:db8::/64" ||
	{ not_ok "server world"; exit 1; }
ok "a sandbox under allow_domains, its fake resolver and world"

probe() { # PROBE...: results in $T/probe.txt, the response in $T/last.json
	bk_exec dn1 --timeout 60 -- python3 -c "$(cat "$HERE/dnsprobe.py")" "$@"
	j .stdout > "$T/probe.txt"
}
result() { awk -v n="$1" '$1 == n { $1 = ""; sub(/^ /, ""); print }' "$T/probe.txt"; }
denied_name() { # NAME REASON: the exec's denied list holds it
	test "$(j "[.denied[] | select(.name == \"$1\" and .reason == \"$2\" and .layer == \"dns_proxy\")] | length > 0")" = true
}
upstream_saw() { grep -q "^$1 " "$T/upstream.log"; }

probe g4,gai,pypi.org,4 g6,gai,pypi.org,6 gw,gai,files.pythonhosted.org,4 gx,gai,example.com,4 \
	txt,udp,10.96.0.10,pypi.org,16 cn,udp,10.96.0.10,evil.pythonhosted.org,1 \
	foreign,udp,203.0.113.53,pypi.org,1 foreign6,udp,2001:db8::53,pypi.org,1 \
	tcp,tcp,203.0.113.53,pypi.org,1 anyq,udp,10.96.0.10,pypi.org,255
check "an allowed name resolves through glibc (A: $(result g4))" test "$(result g4)" = 203.0.113.10
check "... and its AAAA ($(result g6))" test "$(result g6)" = 2001:db8::10
check "a wildcard name through a CNAME within the wildcard ($(result gw))" test "$(result gw)" = 203.0.113.11
check "another name does not resolve ($(result gx))" sh -c "case '$(result gx)' in gaierror:*) true;; *) false;; esac"
check "  ... reported: dns_name example.com" denied_name example.com dns_name
check "  ... and never reached the upstream" sh -c "! grep -q '^example.com ' $T/upstream.log"
check "TXT for an allowed name refused ($(result txt))" sh -c "case '$(result txt)' in 'rcode=5 '*) true;; *) false;; esac"
check "ANY for an allowed name refused ($(result anyq))" sh -c "case '$(result anyq)' in 'rcode=5 '*) true;; *) false;; esac"
check "  ... neither reached the upstream" sh -c "! grep -qE '^pypi.org (16|255)$' $T/upstream.log"
check "a CNAME to a name not allowed is refused ($(result cn))" sh -c "case '$(result cn)' in 'rcode=5 '*) true;; *) false;; esac"
check "  ... reported with the CNAME's target" denied_name exfil.example.com dns_name
check "a query to a foreign resolver (203.0.113.53) is answered by the proxy, not delivered ($(result foreign))" \
	test "$(result foreign)" = "rcode=0 from=203.0.113.53 a=203.0.113.10"
check "... over IPv6 too ($(result foreign6))" test "$(result foreign6)" = "rcode=0 from=2001:db8::53 a=203.0.113.10"
check "TCP DNS to a foreign address goes to the proxy ($(result tcp))" sh -c "case '$(result tcp)' in 'rcode=0 '*'a=203.0.113.10') true;; *) false;; esac"
check "the upstream saw the allowed names, from the proxy" sh -c "grep -q '^pypi.org 1$' $T/upstream.log && grep -q '^files.pythonhosted.org 1$' $T/upstream.log"
rules_has() { jq -r '.isolation.policy_rules[]' "$T/last.json" | grep -qE "$1"; } # a line of the receipt's rules matches ERE
domains_in_force() { rules_has '^domain pypi\.org tcp 443-443$' && rules_has '^domain \*\.pythonhosted\.org tcp 443-443$'; }
check "receipt: the allow_domains in force" domains_in_force
check "receipt: a resolved name with its address, read from bk_resolved" rules_has '^resolved pypi\.org 203\.0\.113\.10 tcp 443-443 ttl [0-9]+s$'
check "receipt: ... and the AAAA's" rules_has '^resolved pypi\.org 2001:db8::10 tcp 443-443 ttl [0-9]+s$'
check "receipt: a name no answer resolved is not listed" sh -c "! jq -r '.isolation.policy_rules[]' $T/last.json | grep -q '^resolved example.com'"

# an upstream answer truncated over UDP (TC): the proxy asks the same upstream over TCP
probe big,udp,10.96.0.10,big.pythonhosted.org,1
check "a truncated upstream answer is asked again over TCP and answered ($(result big))" \
	test "$(result big)" = "rcode=0 from=10.96.0.10 a=203.0.113.15"
check "  ... the upstream saw it over TCP" grep -q '^tcp big.pythonhosted.org 1$' "$T/upstream.log"
check "  ... and its address went into bk_resolved" rules_has '^resolved big\.pythonhosted\.org 203\.0\.113\.15 tcp 443-443 ttl [0-9]+s$'

# a burst of unique names under an allowed wildcard: the exec's query rate holds
probe burst,burst,10.96.0.10,200,pythonhosted.org
b=$(result burst)
check "a burst of 200 unique subdomains is rate-limited ($b)" sh -c "case '$b' in ok=*' refused='0) false;; ok=*' refused='*) true;; *) false;; esac"
ok_n=${b#ok=}; ok_n=${ok_n%% *}
check "  ... at most the burst (40) and the rate got through ($ok_n)" test "${ok_n:-999}" -le 60
check "  ... the refusals counted as dns_rate" test "$(j '[.denied[] | select(.reason == "dns_rate")] | length > 0')" = true
check "  ... and in denied_total ($(j .denied_total))" test "$(j .denied_total)" -ge 100
check "the receipt's policy shows the proxy" test "$(j '.isolation.policy_rules | map(select(startswith("dns_proxy 127.0.0.1:"))) | length')" = 1

# --- addresses from allowed answers, and only those, open on the name's ports -----------
probe r1,gai,pypi.org,4 c443,connect,203.0.113.10,443 c8080,connect,203.0.113.10,8080 \
	never,connect,203.0.113.14,443 r6,gai,pypi.org,6 c6,connect,2001:db8::10,443 \
	rb,gai,meta.pythonhosted.org,4 cmd,connect,169.254.169.254,443 \
	rs,gai,short.pythonhosted.org,4 cs1,connect,203.0.113.13,443 wait,sleep,3.5 cs2,connect,203.0.113.13,443
check "an allowed name's address connects on the allowed port ($(result c443))" test "$(result c443)" = ok
check "another port on the same address is refused ($(result c8080))" test "$(result c8080)" = EPERM
check "  ... as not_allowed" test "$(j '[.denied[] | select(.dst == "203.0.113.10" and .port == 8080 and .reason == "not_allowed")] | length > 0')" = true
check "an address no allowed name resolved to is refused ($(result never))" test "$(result never)" = EPERM
check "  ... as not_resolved" test "$(j '[.denied[] | select(.dst == "203.0.113.14" and .reason == "not_resolved")] | length > 0')" = true
check "IPv6: the AAAA's address connects ($(result r6) -> $(result c6))" test "$(result c6)" = ok
check "a name that resolves into the deny set (169.254.169.254) stays refused ($(result cmd))" test "$(result cmd)" = EPERM
check "  ... as metadata" test "$(j '[.denied[] | select(.dst == "169.254.169.254" and .reason == "metadata")] | length > 0')" = true
check "a 2 s TTL: connects at first ($(result cs1))" test "$(result cs1)" = ok
check "  ... and is refused once it expired ($(result cs2))" test "$(result cs2)" = EPERM
check "  ... as not_resolved" test "$(j '[.denied[] | select(.dst == "203.0.113.13" and .reason == "not_resolved")] | length > 0')" = true
check "  ... and the receipt says it expired" test "$(j '.isolation.policy_rules | index("resolved short.pythonhosted.org 203.0.113.13 expired") != null')" = true

# two execs at once: one resolved pypi.org, the other did not and may not reach it
ctl exec dn1 --json --timeout 60 -- python3 -c "$(cat "$HERE/dnsprobe.py")" a,gai,pypi.org,4 hold,sleep,4 a2,connect,203.0.113.10,443 > "$T/a.json" &
apid=$!
sleep 2
probe b,connect,203.0.113.10,443
wait $apid
check "two execs at once: the one that resolved connects" test "$(jq -r .stdout "$T/a.json" | awk '$1 == "a2" {print $2}')" = ok
check "  ... the other one does not see its addresses ($(result b))" test "$(result b)" = EPERM
resolved_left() { bpftool -j map dump pinned "$BPFFS/bk_resolved" | jq -c '.[]'; } # prints the entries
check "bk_resolved is pinned" bpftool map show pinned "$BPFFS/bk_resolved"
check "after the execs, none of their resolved addresses is left in bk_resolved" gone_within 3 resolved_left

# --- two execs at once under DIFFERENT profiles (another pod, allow_domains docs.example.org) ---
bk_sandbox_create dn2 --policy docs && resolver_world dn2 2 &&
	bk_world dn2 d2 "203.0.113.10 203.0.113.14" "" "203.0.113.0/24" "" || { not_ok "second sandbox (docs) and its world"; exit 1; }
# each resolves its own name, holds, then connects to its own and to the other's address
ctl exec dn1 --json --timeout 60 -- python3 -c "$(cat "$HERE/dnsprobe.py")" r,gai,pypi.org,4 hold,sleep,4 \
	own,connect,203.0.113.10,443 theirs,connect,203.0.113.14,443 > "$T/p1.json" &
p1=$!
ctl exec dn2 --json --timeout 60 -- python3 -c "$(cat "$HERE/dnsprobe.py")" r,gai,docs.example.org,4 hold,sleep,4 \
	own,connect,203.0.113.14,443 theirs,connect,203.0.113.10,443 > "$T/p2.json" &
p2=$!
sleep 2.5
# bk_resolved while both hold: cgroup id -> addresses (IPv4 as ::ffff:a.b.c.d)
bpftool -j map dump pinned "$BPFFS/bk_resolved" > "$T/resolved-both.json"
wait $p1 $p2
pr() { jq -r .stdout "$T/$1.json" | awk -v n="$2" '$1 == n { print $2 }'; }
pdenied() { test "$(jq "[.denied[] | select(.dst == \"$2\" and .port == 443 and .reason == \"not_resolved\")] | length > 0" "$T/$1.json")" = true; }
check "different profiles at once: pkgs resolved pypi.org ($(pr p1 r)), docs resolved docs.example.org ($(pr p2 r))" \
	test "$(pr p1 r)/$(pr p2 r)" = 203.0.113.10/203.0.113.14
check "  ... each connects to its own name's address ($(pr p1 own), $(pr p2 own))" test "$(pr p1 own)/$(pr p2 own)" = ok/ok
check "  ... pkgs cannot reach what docs resolved ($(pr p1 theirs))" test "$(pr p1 theirs)" = EPERM
check "  ... as not_resolved" pdenied p1 203.0.113.14
check "  ... docs cannot reach what pkgs resolved ($(pr p2 theirs))" test "$(pr p2 theirs)" = EPERM
check "  ... as not_resolved" pdenied p2 203.0.113.10
# the kernel's map while both held: two cgroups, each with only its own address
by_cgroup() {
	python3 - "$T/resolved-both.json" <<'PY'
import json, sys
seen = {}
for e in json.load(open(sys.argv[1])):
    k = e.get("formatted", {}).get("key")
    if k:
        cg, addr = k["cgroup_id"], bytes(k["addr"])
    else:
        raw = bytes(int(x, 16) for x in e["key"])
        cg, addr = int.from_bytes(raw[:8], "little"), raw[8:24]
    seen.setdefault(cg, set()).add(".".join(str(b) for b in addr[12:]) if addr[:12] == b"\0" * 10 + b"\xff\xff" else addr.hex())
print(" ".join(sorted(",".join(sorted(v)) for v in seen.values())))
PY
}
rb=$(by_cgroup)
check "  ... bk_resolved held two cgroups, each with its own address only ($rb)" test "$rb" = "203.0.113.10 203.0.113.14"
check "  ... the docs pod's upstream never saw pkgs' name" sh -c "! grep -q '^pypi.org ' $T/upstream2.log"

# --- verify under an allow_domains profile: an allowed and a disallowed name -----------
ctl verify dn1 --json > "$T/v.json"; vrc=$?
vp() { jq -r ".probes[] | select(.name == \"$1\") | [.address, .outcome, .layer, .reason] | map(select(. != null)) | join(\" \")" "$T/v.json"; }
check "verify: dns_allowed resolved, its address in the probe's bk_resolved entries ($(vp dns_allowed))" \
	sh -c "case '$(vp dns_allowed)' in 'pypi.org allowed bk_resolved 203.0.113.10') true;; *) false;; esac"
check "verify: dns_denied refused by the proxy with a dns_name denial ($(vp dns_denied))" \
	test "$(vp dns_denied)" = "boxkite-verify.invalid stopped dns_proxy dns_name"
check "verify: the connect probes ran first, public stopped ($(vp public))" test "$(vp public)" = "203.0.113.10:443 stopped bpf not_resolved"
check "verify: passed, exit 0 ($(jq .passed "$T/v.json")/$vrc)" test "$(jq .passed "$T/v.json")/$vrc" = true/0
check "verify: the disallowed name never reached the upstream" sh -c "! grep -q '^boxkite-verify.invalid ' $T/upstream.log"
ctl verify dn1 > "$T/v.txt"
check "verify (human): a line for each DNS probe" sh -c "grep -qE '^dns_allowed +pypi.org +allowed' $T/v.txt && grep -qE '^dns_denied +boxkite-verify.invalid +stopped' $T/v.txt"
