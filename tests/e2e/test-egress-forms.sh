#!/usr/bin/env bash
# Egress, issue 13 (low): what the BPF layer must see through.
# 1. IPv6 forms that embed an IPv4 address: the local-use NAT64 prefix
#    64:ff9b:1::/48, IPv4-compatible ::a.b.c.d, 6to4 2002::/16 and Teredo
#    2001::/32 (server, and client XOR 0xffffffff) are refused at connect
#    and sendmsg (EPERM, reported with the embedded address's reason) when
#    the embedded IPv4 is in the deny set; 6to4 and Teredo are refused
#    outright (ipv6_tunnel) unless a profile lifts them with deny_overrides.
# 2. Port 53: only well-formed DNS queries reach the resolver over UDP
#    (anything else is dropped by cgroup_skb/egress: EPERM for the sender,
#    reported as dns_malformed); TCP 53 is refused (dns_tcp) unless the
#    profile says "dns_tcp": true.
# Every host is a test host in a namespace this test made: the fake world
# answers on every address below (tests/e2e/world.py; UDP 53 answers DNS
# queries and echoes anything else).
. "$(dirname "$0")/lib.sh"
HERE=$(cd "$(dirname "$0")" && pwd)

# Part 1 uses only keys every version knows (so the old code runs it too).
CONFIG1='{"deny_cidrs":["10.96.0.0/12"],
 "profiles":{"wide":{"netns":"pod","dns":true,
   "allow":[{"cidr":"::/0","proto":"any","ports":"*"},{"cidr":"203.0.113.0/24","proto":"any","ports":"*"}]}}}'
# Part 2: a profile that lifts the tunnel prefixes and opts into TCP DNS.
CONFIG2='{"deny_cidrs":["10.96.0.0/12"],
 "profiles":{"tunnels":{"netns":"pod","dns":true,"dns_tcp":true,
   "allow":[{"cidr":"::/0","proto":"tcp","ports":"80"}],
   "deny_overrides":["2002::/16","2001::/32"]}}}'

MD6="64:ff9b:1::a9fe:a9fe 64:ff9b:1:a9fe:a9:fe00:: ::169.254.169.254 2002:a9fe:a9fe::1 2001:0:cb00:710a::5601:5601 2001:0:a9fe:a9fe::1"
PUB6="2002:cb00:710a::1 2001:0:cb00:710a::3400:8ef5"

world_for() { # NAME IDX: link a world namespace to the sandbox's pod netns
	bk_world "$1" "f$2" "203.0.113.10 169.254.169.254 10.96.0.10" "2001:db8::10 2001:db8::53 $MD6 $PUB6" \
		"203.0.113.0/24 169.254.169.254/32 10.96.0.0/12" \
		"2001:db8::10/128 2001:db8::53/128 64:ff9b:1::/48 ::169.254.169.254/128 2002::/16 2001::/32"
}

bk_start_agent "$CONFIG1" || { not_ok "agent starts"; exit 1; }
bk_sandbox_create ef-inet --policy internet && world_for ef-inet 1 || { not_ok "internet sandbox + world"; exit 1; }
bk_sandbox_create ef-wide --policy wide --dns 2001:db8::53 && world_for ef-wide 2 || { not_ok "wide sandbox + world"; exit 1; }
bk_sandbox_create ef-tun --policy tunnels && world_for ef-tun 3 || { not_ok "tunnels sandbox + world"; exit 1; }
ok "three sandboxes with their own test worlds"

probe() { # SANDBOX PROBE... -> $T/probe-SANDBOX.txt and $T/last.json
	local s=$1; shift
	bk_exec "$s" --timeout 60 -- python3 -c "$(cat "$HERE/probe.py")" "$@"
	j .stdout > "$T/probe-$s.txt"
}
result() { awk -v n="$2" '$1 == n { print $2 }' "$T/probe-$1.txt"; }
refused() { # SANDBOX PROBE ADDR REASON: EPERM at once and a denial with the reason
	local r; r=$(result "$1" "$2")
	check "$1: $2 ($3) refused with EPERM (got ${r:-nothing})" test "$r" = EPERM
	check "  ... reported as $4" test "$(j "[.denied[] | select(.dst == \"$3\" and .reason == \"$4\")] | length > 0")" = true
}

# --- 1. embedded IPv4 ---------------------------------------------------------------
# internet: TCP 80 to ::/0 is allowed, so only the decoding refuses these
args=(); for a in $MD6; do args+=("tcp-$a,tcp,$a,80"); done
probe ef-inet "${args[@]}" ctl-tcp,tcp,2001:db8::10,80 ctl-md,tcp,169.254.169.254,80
check "internet: the control (2001:db8::10:80) connects" test "$(result ef-inet ctl-tcp)" = ok
for a in $MD6; do refused ef-inet "tcp-$a" "$a" metadata; done
# wide: TCP and UDP anywhere on IPv6 allowed; connect6 and sendmsg6 both decide
args=(); for a in $MD6; do args+=("tcp-$a,tcp,$a,8080" "udp-$a,udp,$a,8080"); done
for a in $PUB6; do args+=("tcp-$a,tcp,$a,8080" "udp-$a,udp,$a,8080"); done
probe ef-wide "${args[@]}" ctl-udp,udp,2001:db8::10,8080
check "wide: the control (UDP 2001:db8::10:8080) gets its echo" test "$(result ef-wide ctl-udp)" = ok
for a in $MD6; do
	refused ef-wide "tcp-$a" "$a" metadata
	refused ef-wide "udp-$a" "$a" metadata
done
# a public embedded address: 6to4 and Teredo are refused outright by default
for a in $PUB6; do
	refused ef-wide "tcp-$a" "$a" ipv6_tunnel
	refused ef-wide "udp-$a" "$a" ipv6_tunnel
done
check "wide: the sendmsg6 hook refused a UDP form" \
	test "$(j '[.denied[] | select(.hook == "sendmsg6" and .reason == "metadata")] | length > 0')" = true

# --- 2. port 53: only well-formed DNS queries ----------------------------------------
DNS_PY='import os, socket, struct, sys
fam = socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET
R = (sys.argv[1], 53)
def q(flags=0x0100, qd=1, an=0, ns=0, ar=0, name=b"\x07example\x03com\0", tail=b""):
    return struct.pack("!HHHHHH", 0x4242, flags, qd, an, ns, ar) + name + b"\0\1\0\1" + tail
OPT = b"\0\0\x29\x04\xd0\0\0\0\0\0\0"                      # EDNS0, no options
cases = {
    "query": q(),
    "query-edns": q(ar=1, tail=OPT),
    "junk": os.urandom(64),
    "response": q(flags=0x8180),
    "opcode-update": q(flags=0x2800),
    "two-questions": q(qd=2),
    "answer-count": q(an=1),
    "trailing": q(tail=b"exfiltrated data"),
    "edns-trailing": q(ar=1, tail=OPT + b"x"),
    "label-64": q(name=b"\x40" + b"a" * 64 + b"\0"),
    "pointer": q(name=b"\x07example\xc0\x0c"),
    "name-256": q(name=b"\x3f" + b"a" * 63 + b"\x3f" + b"b" * 63 + b"\x3f" + b"c" * 63 + b"\x3f" + b"d" * 63 + b"\0"),
    "truncated": q()[:20],
}
for name, payload in cases.items():
    s = socket.socket(fam, socket.SOCK_DGRAM); s.settimeout(1)
    try:
        s.sendto(payload, R); s.recvfrom(512); r = "ok"
    except socket.timeout:
        r = "timeout"
    except OSError as e:
        r = {1: "EPERM"}.get(e.errno, str(e.errno))
    print(name, r, flush=True)
# a connected socket: send() passes no socket hook, only cgroup_skb/egress
s = socket.socket(fam, socket.SOCK_DGRAM); s.settimeout(1); s.connect(R)
try:
    s.send(os.urandom(64)); s.recv(512); r = "ok"
except socket.timeout:
    r = "timeout"
except OSError as e:
    r = {1: "EPERM"}.get(e.errno, str(e.errno))
print("junk-connected", r)'
GOOD="query query-edns"
BAD="junk response opcode-update two-questions answer-count trailing edns-trailing label-64 pointer name-256 truncated junk-connected"
dns_cases() { # SANDBOX RESOLVER
	bk_exec "$1" --timeout 60 -- python3 -c "$DNS_PY" "$2"
	j .stdout > "$T/dns-$1.txt"
	for c in $GOOD; do
		check "$1: UDP 53 to $2: $c gets its answer" test "$(awk -v n="$c" '$1 == n { print $2 }' "$T/dns-$1.txt")" = ok
	done
	for c in $BAD; do
		local r; r=$(awk -v n="$c" '$1 == n { print $2 }' "$T/dns-$1.txt")
		check "$1: UDP 53 to $2: $c dropped (EPERM; got ${r:-nothing})" test "$r" = EPERM
	done
	local n; n=$(j "[.denied[] | select(.dst == \"$2\" and .port == 53 and .reason == \"dns_malformed\" and .hook == \"egress\")] | length")
	check "$1: the drops are reported as dns_malformed by egress ($n)" test "${n:-0}" -ge 10
}
dns_cases ef-inet 10.96.0.10
dns_cases ef-wide 2001:db8::53
bk_exec ef-inet -- python3 -c 'import socket; print(socket.getaddrinfo("bk-test.example.", 80, socket.AF_INET)[0][4][0])'
check "internet: the C library's resolver still gets its answer ($(j .stdout | tr -d '\n'))" test "$(j .stdout | tr -d '\n')" = 192.0.2.77
# TCP 53: refused unless the profile opts in
probe ef-inet dns-tcp,tcp,10.96.0.10,53 dns-udp,udp,10.96.0.10,53
check "internet: a DNS query over UDP (probe) is answered" test "$(result ef-inet dns-udp)" = ok
refused ef-inet dns-tcp 10.96.0.10 dns_tcp

# --- 3. a profile may lift the tunnel prefixes and opt into TCP DNS ---------------------
bk_stop_agent
if bk_start_agent "$CONFIG2"; then
	ok "agent starts with a profile lifting 2002::/16 and 2001::/32, dns_tcp on"
	check "the tunnel overrides are logged at start" grep -q '"deny_override".*tunnels.*2002::/16' "$T/agent.log"
	args=(); for a in $PUB6 $MD6; do args+=("tcp-$a,tcp,$a,80"); done
	probe ef-tun "${args[@]}" dns-tcp,tcp,10.96.0.10,53
	for a in $PUB6; do check "tunnels: $a (public embedded address) connects" test "$(result ef-tun "tcp-$a")" = ok; done
	for a in $MD6; do refused ef-tun "tcp-$a" "$a" metadata; done
	check "tunnels: TCP 53 to the resolver connects (dns_tcp)" test "$(result ef-tun dns-tcp)" = ok
	check "tunnels: the receipt says dns_tcp on" sh -c "jq -e '.isolation.policy_rules | index(\"dns_tcp on\")' $T/last.json >/dev/null"
else
	not_ok "agent starts with a profile lifting 2002::/16 and 2001::/32, dns_tcp on"
fi

# --- with the BPF layer off, the refused probes get through: the tests test it -----------
bk_stop_agent
bk_start_agent "$(jq -c '. + {"layers":{"bpf":false},"testing":{"allow_unsafe":true}}' <<< "$CONFIG1")"
args=(); for a in $MD6 $PUB6; do args+=("udp-$a,udp,$a,8080"); done
probe ef-wide "${args[@]}" junk,junk,2001:db8::53,53
for a in $MD6 $PUB6; do check "BPF off: UDP to $a gets through" test "$(result ef-wide "udp-$a")" = ok; done
check "BPF off: random bytes to the resolver get through" test "$(result ef-wide junk)" = ok
