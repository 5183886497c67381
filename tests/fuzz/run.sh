#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Build the libFuzzer targets of tests/fuzz/ into build/fuzz/ and run each:
# first its regression inputs (tests/fuzz/regressions/<target>/), then
# FUZZ_SECONDS (default 10) of fuzzing on a copy of its seed corpus
# (build/fuzz/corpus-<target>/, kept between runs; the git tree is never
# written). Crash inputs go to build/fuzz/artifacts/, logs to
# build/fuzz/logs/.
#
#   FUZZ_SECONDS=60 tests/fuzz/run.sh            # every target
#   FUZZ_TARGETS="text frame" tests/fuzz/run.sh  # some of them
#   FUZZ_OUT=/tmp/fz tests/fuzz/run.sh           # another output dir
#
# Needs clang with compiler-rt (Debian: clang, libclang-rt-14-dev) and
# libcjson-dev. Prints "ok - fuzz-<t>" / "not ok - fuzz-<t>: <why>" per
# target and, last, "N passed, M failed"; exits 1 on any failure.
set -u

cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
OUT=${FUZZ_OUT:-$ROOT/build/fuzz}
FUZZ_SECONDS=${FUZZ_SECONDS:-10}
ALL_TARGETS="frame cgroup state text config mountinfo cmdparse vpath api shimframe shimproc shimreply filewire rxbound dns wsframe shlex netdev"
TARGETS=${FUZZ_TARGETS:-$ALL_TARGETS}

CC=${FUZZ_CC:-}
if [ -z "$CC" ]; then
	for c in clang clang-14; do
		if command -v "$c" >/dev/null 2>&1; then
			CC=$c
			break
		fi
	done
fi
CFLAGS="-g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
	-std=gnu11 -Wall -Wextra -Wno-unused-parameter -D_GNU_SOURCE
	-I. -I/usr/include/cjson -Itests/fuzz"

# the code under test that each target compiles in, and its libraries
srcs_of() {
	case $1 in
	frame) echo lib/proto.c lib/util.c ;;
	cgroup | state) echo agent/caller/identity.c lib/util.c ;;
	text) echo agent/parse/text.c ;;
	dns) echo agent/parse/dns.c ;;
	cmdparse) echo agent/parse/cmdparse.c agent/parse/cmdlex.c agent/parse/vpath.c ;;
	vpath) echo agent/parse/vpath.c ;;
	rxbound) echo agent/parse/rxbound.c lib/err.c lib/util.c ;;
	# config.c hands the egress profiles to policy.c
	config) echo agent/parse/config.c agent/parse/policy.c lib/err.c lib/util.c ;;
	mountinfo) echo agent/isolate/cgroup.c agent/isolate/instances.c lib/err.c lib/util.c ;;
	shimframe) echo sidecar-shim/frame.c ;;
	# the /pty WebSocket's client frames, our resize message (issue 18)
	wsframe) echo sidecar-shim/ws.c agent/parse/text.c ;;
	# /pty-exec's command, shlex.split into single-quoted words
	shlex) echo agent/parse/shlex.c lib/err.c lib/util.c ;;
	# a network namespace's interfaces, from /proc/PID/net/dev (the exec receipt)
	netdev) echo agent/parse/netdev.c ;;
	# the /process routes: path -> route and id, body + id + query -> the agent's args
	shimproc) echo sidecar-shim/procroute.c sidecar-shim/frame.c ;;
	# an agent answer as the shim reads it (every event frame of a streamed /exec)
	shimreply) echo sidecar-shim/upstream.c lib/proto.c lib/util.c ;;
	# the file helper's wire, both directions (the typed result and its MIME table with it)
	filewire) echo agent/files/wire.c agent/parse/vpath.c agent/parse/text.c lib/util.c ;;
	# the whole agent but main(): request handling down to sandbox lookup
	api) ls agent/*/*.c lib/*.c | grep -v '^agent/ctl/' | tr '\n' ' ' ;;
	esac
}
# inputs must be able to cross the parsers' 4096/4200-byte line and path limits
max_len_of() {
	case $1 in
	cgroup | mountinfo | state) echo 16384 ;;
	config) echo 8192 ;;
	*) echo 4096 ;;
	esac
}
libs_of() {
	case $1 in
	cgroup | state | config) echo -lcjson ;;
	shimframe | shimproc) echo -Isidecar-shim -lcjson ;;
	wsframe) echo -Isidecar-shim -lcjson -lcrypto ;;
	shimreply) echo -Isidecar-shim $(pkg-config --cflags libmicrohttpd) -lcjson -lpthread ;;
	filewire) echo $(pkg-config --cflags libbpf libmnl libcjson) ;;
	api) echo -Ibuild -DBK_VERSION=\"fuzz\" $(pkg-config --cflags --libs libbpf libmnl libmicrohttpd libcjson openssl libpcre2-8) -lpthread ;;
	esac
}

mkdir -p "$OUT/artifacts" "$OUT/logs"
pass=0
fail=0
ok() {
	echo "ok - fuzz-$1"
	pass=$((pass + 1))
}
notok() {
	echo "not ok - fuzz-$1: $2"
	fail=$((fail + 1))
}

# The first line that says what went wrong in a libFuzzer log.
why() {
	local l
	l=$(grep -m1 -E '^INVARIANT VIOLATED|^==[0-9]+== ?ERROR: |runtime error: |^SUMMARY: ' "$1" 2>/dev/null)
	echo "${l:-exit status $2, see $1}" | sed -e 's/^[[:space:]]*//' | cut -c1-300
}

# Rebuild only when a source, header, this script or the flags changed.
needs_build() {
	local bin=$1 t=$2 f
	[ -x "$bin" ] || return 0
	[ "$(cat "$bin.flags" 2>/dev/null)" = "$CC $CFLAGS" ] || return 0
	for f in tests/fuzz/fuzz-$t.c tests/fuzz/fuzz.h tests/fuzz/run.sh $(srcs_of "$t") agent/*/*.h lib/*.h bpf/*.h; do
		[ "$f" -nt "$bin" ] && return 0
	done
	return 1
}

for t in $TARGETS; do
	if [ -z "$(srcs_of "$t")" ] || [ ! -f "tests/fuzz/fuzz-$t.c" ]; then
		notok "$t" "unknown target (known: $ALL_TARGETS)"
		continue
	fi
	if [ -z "$CC" ]; then
		notok "$t" "no clang found (apt-get install clang libclang-rt-14-dev)"
		continue
	fi
	bin=$OUT/fuzz-$t
	log=$OUT/logs/$t.log
	if needs_build "$bin" "$t"; then
		# shellcheck disable=SC2046,SC2086
		if ! $CC $CFLAGS "tests/fuzz/fuzz-$t.c" $(srcs_of "$t") -o "$bin.tmp" $(libs_of "$t") >"$OUT/logs/$t.build.log" 2>&1; then
			notok "$t" "build failed: $(grep -m1 -E 'error|undefined reference' "$OUT/logs/$t.build.log" | cut -c1-240)"
			rm -f "$bin.tmp"
			continue
		fi
		mv -f "$bin.tmp" "$bin"
		echo "$CC $CFLAGS" >"$bin.flags"
	fi

	: >"$log"
	# regression inputs: each must run clean
	reg=tests/fuzz/regressions/$t
	if [ -d "$reg" ] && [ -n "$(ls -A "$reg" 2>/dev/null)" ]; then
		"$bin" -rss_limit_mb=1024 -timeout=10 "$reg"/* >>"$log" 2>&1
		rc=$?
		if [ $rc -ne 0 ]; then
			notok "$t" "regression input fails: $(why "$log" $rc)"
			continue
		fi
	fi

	# fuzz a copy of the seed corpus
	corpus=$OUT/corpus-$t
	mkdir -p "$corpus"
	if [ -d "tests/fuzz/corpus/$t" ]; then
		cp -f tests/fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null
	fi
	dict=()
	[ -f "tests/fuzz/dict/$t.dict" ] && dict=(-dict="tests/fuzz/dict/$t.dict")
	"$bin" "${dict[@]}" -max_len="$(max_len_of "$t")" -max_total_time="$FUZZ_SECONDS" -rss_limit_mb=1024 -timeout=10 \
		-artifact_prefix="$OUT/artifacts/$t-" -print_final_stats=1 "$corpus" >>"$log" 2>&1
	rc=$?
	if [ $rc -ne 0 ]; then
		notok "$t" "$(why "$log" $rc) (input in $OUT/artifacts/, log $log)"
		continue
	fi
	ok "$t"
done

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
