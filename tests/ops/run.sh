#!/usr/bin/env bash
# Lane `ops` of make check: what an operator is handed besides the binaries.
#   - deploy/monitoring: promtool check rules + test rules; the dashboard's and
#     the rules' PromQL names only metrics boxkite exports (metric_names.py)
#     and parses (each dashboard query checked by promtool as a rule)
#   - man pages (docs/man/*.scd): build with scdoc, and mention every flag,
#     command, variable and default the binaries' --help lists
#   - --help on every binary and every boxkitectl command, --version on each
#   - bash completion: loads, completes the commands --help lists, each
#     command's flags, and sandbox names
#   - deploy/systemd/boxkite-agent.service: systemd-analyze verify
#   - make install DESTDIR=... puts everything where it belongs
# Needs the built binaries (BK_BIN, default build/); no root, no agent.
# The files under test can be swapped (to see a check fail): OPS_RULES,
# OPS_RULES_TEST, OPS_DASHBOARD, OPS_MAN_DIR, OPS_COMPLETION, OPS_UNIT.
# Output: `ok -` / `not ok -` / `skip -` lines, then one count line; exit 1
# if any check failed.
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
BIN=${BK_BIN:-$ROOT/build}
RULES=${OPS_RULES:-deploy/monitoring/boxkite-rules.yaml}
RULES_TEST=${OPS_RULES_TEST:-deploy/monitoring/boxkite-rules.test.yaml}
DASH=${OPS_DASHBOARD:-deploy/monitoring/boxkite-dashboard.json}
MAN_DIR=${OPS_MAN_DIR:-docs/man}
COMPLETION=${OPS_COMPLETION:-scripts/completion/boxkitectl.bash}
UNIT=${OPS_UNIT:-deploy/systemd/boxkite-agent.service}
PY=/usr/bin/python3
T=$(mktemp -d /tmp/bk-ops.XXXXXX)
trap 'rm -rf "$T"' EXIT
PASS=0 FAIL=0 SKIP=0
ok() { PASS=$((PASS + 1)); echo "ok - $*"; }
not_ok() { FAIL=$((FAIL + 1)); echo "not ok - $*"; }
skip() { SKIP=$((SKIP + 1)); echo "skip - $*"; }
# check NAME CMD...: the command's output is shown (indented) when it fails
check() {
	local n=$1; shift
	if "$@" > "$T/out" 2>&1; then ok "$n"; else not_ok "$n"; sed 's/^/#   /' "$T/out" | head -20; fi
}
BINS="boxkite-agent boxkitectl boxkite-shim"

# ---- monitoring --------------------------------------------------------------
if command -v promtool >/dev/null; then
	check "promtool check rules $(basename "$RULES")" promtool check rules "$RULES"
	# test rules reads rule_files relative to its own directory
	mkdir -p "$T/mon"
	cp "$RULES" "$T/mon/boxkite-rules.yaml"
	cp "$RULES_TEST" "$T/mon/boxkite-rules.test.yaml"
	check "promtool test rules $(basename "$RULES_TEST") ($(grep -c 'alertname:' "$RULES_TEST") alert expectations)" \
		promtool test rules "$T/mon/boxkite-rules.test.yaml"
	# every dashboard query must parse: each becomes a recording rule
	$PY - "$DASH" > "$T/dash-rules.yaml" <<'PYEOF'
import json, re, sys
sys.path.insert(0, "tests/ops")
import metric_names
print("groups:\n  - name: dashboard\n    rules:")
for i, e in enumerate(metric_names.dashboard_exprs(sys.argv[1])):
    e = e.replace("$__rate_interval", "5m").replace("$__interval", "1m")
    e = re.sub(r"\$\{?[A-Za-z_]+\}?", ".*", e)
    # Grafana's label_values(metric, label) is not PromQL: its metric is
    e = re.sub(r"^\s*label_values\(\s*([^,()]+?)\s*,[^)]*\)\s*$", r"\1", e)
    print(f"      - record: dashboard:q{i}\n        expr: {json.dumps(e)}")
PYEOF
	check "every query of $(basename "$DASH") is valid PromQL (promtool, $(grep -c record: "$T/dash-rules.yaml") queries)" \
		promtool check rules "$T/dash-rules.yaml"
else
	skip "promtool check rules / test rules / dashboard PromQL: no promtool (Debian package prometheus; scripts/install-deps.sh)"
fi
check "$(basename "$RULES") and $(basename "$DASH") name only metrics boxkite exports ($($PY tests/ops/metric_names.py "$RULES" "$DASH" 2>&1 | tail -1))" \
	$PY tests/ops/metric_names.py "$RULES" "$DASH"

# ---- --help and --version --------------------------------------------------------
want_version=$(cat VERSION)
versions=
for b in $BINS; do
	v=$("$BIN/$b" --version 2>"$T/err"); rc=$?
	check "$b --version exits 0 and prints \"$b $want_version...\" ($v)" \
		sh -c "[ $rc -eq 0 ] && [ ! -s '$T/err' ] && printf '%s\n' '$v' | grep -qx '$b $want_version\(+g[0-9a-f.dirty]*\)\?'"
	versions="$versions ${v#* }"
	"$BIN/$b" --help > "$T/help-$b" 2>"$T/err"; rc=$?
	check "$b --help exits 0 with its usage on stdout" sh -c "[ $rc -eq 0 ] && head -1 '$T/help-$b' | grep -q '^usage: $b'"
	"$BIN/$b" --no-such-flag >/dev/null 2>"$T/err"; rc=$?
	check "$b --no-such-flag exits 2 with one line on stderr ($(head -1 "$T/err" | cut -c1-80))" \
		sh -c "[ $rc -eq 2 ] && [ -s '$T/err' ]"
done
check "the three binaries print one version ($versions)" test "$(echo $versions | tr ' ' '\n' | sort -u | wc -l)" -eq 1
# boxkitectl loads OpenSSL only when a command needs it (agent/ctl/ossl.c):
# not linked, so `boxkitectl exec` does not pay for loading it
check "boxkitectl is not linked against libssl or libcrypto (they are loaded on first use)" \
	sh -c "! ldd '$BIN/boxkitectl' | grep -E 'libssl|libcrypto'"

# boxkitectl's commands, from its --help: "  word [word] ..." lines
sed -n '/^commands:/,/^[a-z]/p' "$T/help-boxkitectl" | grep -E '^   *[^ ]' > "$T/synopsis"
grep -E '^  [a-z]' "$T/synopsis" | sed -E 's/^  ([a-z][a-z-]*)( [a-z][a-z-]*)?( .*)?$/\1\2/' > "$T/commands"
check "boxkitectl --help lists commands ($(paste -sd, "$T/commands"))" test "$(wc -l < "$T/commands")" -ge 10
while read -r c; do
	# shellcheck disable=SC2086
	"$BIN/boxkitectl" $c --help > "$T/h" 2>&1; rc=$?
	check "boxkitectl $c --help exits 0 and shows its usage" sh -c "[ $rc -eq 0 ] && grep -q '^usage: boxkitectl' '$T/h' && grep -q '^  $c' '$T/h'"
done < "$T/commands"
for c in $(cut -d' ' -f1 "$T/commands" | sort -u); do
	"$BIN/boxkitectl" help "$c" > "$T/h" 2>&1; rc=$?
	check "boxkitectl help $c exits 0" sh -c "[ $rc -eq 0 ] && grep -q '^  $c' '$T/h'"
done
"$BIN/boxkitectl" exec sb -- sh --help >/dev/null 2>&1; rc=$?
check "boxkitectl exec NAME -- CMD --help runs CMD (it is not boxkitectl's --help: exit $rc, not 0)" test "$rc" -ne 0

# every argument error: exit 2 and one line on stderr saying what to do
while IFS= read -r args; do
	# shellcheck disable=SC2086
	"$BIN/boxkitectl" $args > "$T/o" 2> "$T/e"; rc=$?
	check "boxkitectl $args: exit 2, one line on stderr, nothing on stdout ($(head -c 120 "$T/e"))" \
		sh -c "[ $rc -eq 2 ] && [ \$(wc -l < '$T/e') -eq 1 ] && [ ! -s '$T/o' ]"
done <<'EOF2'

--bogus
frobnicate
exec
exec sb
inspect
verify sb --bogus
sandbox
sandbox frob x
sandbox create
receipt
call
events --bogus
events --last 5000
top -n 0
top --bogus
EOF2

# ---- man pages -------------------------------------------------------------------
if command -v scdoc >/dev/null; then
	for b in $BINS; do
		src="$MAN_DIR/$b.8.scd"
		check "man page $b(8) builds with scdoc" sh -c "scdoc < '$src' > '$T/$b.8' && grep -q '^.TH \"$b\" \"8\"' '$T/$b.8'"
	done
else
	skip "man pages build: no scdoc (Debian package scdoc; scripts/install-deps.sh)"
fi
# what --help lists must be in the page: flags, commands, variables,
# defaults (scdoc markup and line breaks left out on both sides)
$PY - "$MAN_DIR" "$T" $BINS > "$T/man-check" 2>&1 <<'PYEOF'
import re, sys
man_dir, t, bins = sys.argv[1], sys.argv[2], sys.argv[3:]
def norm(s):
    return " ".join(re.sub(r"[*_\\]", "", s).split())
bad = 0
for b in bins:
    try:
        raw = open(f"{man_dir}/{b}.8.scd").read()
        page = norm(raw)
    except OSError as e:
        print(f"not ok - man page {b}(8): {e}"); bad += 1; continue
    help_ = open(f"{t}/help-{b}").read()
    want = {("flag", f) for f in re.findall(r"(?<![\w-])--[a-z][a-z-]*", help_)}
    want |= {("variable", v) for v in re.findall(r"\b(?:SIDECAR|BOXKITE|BACKEND|RUNTIME)_[A-Z_]+\b", help_)}
    want |= {("default", d) for d in re.findall(r"\(default ([^ ()]+)\)", help_)}
    if b == "boxkitectl":
        want |= {("command", c.strip()) for c in open(f"{t}/commands")}
    # a command must be an entry of the page's list (a line "*sandbox create* ...")
    missing = sorted(w for w in want if (w[0] != "command" and norm(w[1]) not in page) or
                     (w[0] == "command" and not re.search(r"^\*" + re.escape(w[1]) + r"\*", raw, re.M)))
    kinds = sorted({k for k, _ in want})
    if missing:
        bad += 1
        print(f"not ok - man page {b}(8) mentions everything {b} --help lists: missing " +
              ", ".join(f"{k} {v}" for k, v in missing))
    else:
        print(f"ok - man page {b}(8) mentions everything {b} --help lists ({len(want)}: " +
              ", ".join(f"{sum(1 for k, _ in want if k == kind)} {kind}s" for kind in kinds) + ")")
sys.exit(1 if bad else 0)
PYEOF
while IFS= read -r l; do
	case $l in
	"ok - "*) ok "${l#ok - }" ;;
	"not ok - "*) not_ok "${l#not ok - }" ;;
	*) echo "# $l" ;;
	esac
done < "$T/man-check"

# ---- bash completion ---------------------------------------------------------------
# a stub boxkitectl answers `sandbox list` (the real one needs root and runc
# sandboxes); every other call goes to the real binary
mkdir -p "$T/stub"
cat > "$T/stub/boxkitectl" <<STUB
#!/bin/sh
[ "\$1 \$2" = "sandbox list" ] && { printf 'alpha\tpod_uid=1\turl=x\nbeta\tpod_uid=2\turl=y\n'; exit 0; }
exec "$BIN/boxkitectl" "\$@"
STUB
chmod +x "$T/stub/boxkitectl"
comp() { # comp WORD... : what completing the last word offers, sorted, one line
	bash --norc --noprofile -c '. "$1" || exit 9; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _boxkitectl; printf "%s\n" "${COMPREPLY[@]}" | sort | paste -sd" " -' \
		sh "$COMPLETION" "$T/stub/boxkitectl" "$@"
}
check "the completion script loads in bash and registers boxkitectl" \
	bash --norc --noprofile -c '. "$1" && complete -p boxkitectl | grep -q -- "-F _boxkitectl"' sh "$COMPLETION"
got=$(comp ""); want=$(cut -d' ' -f1 "$T/commands" | sort -u | paste -sd' ' -)
check "completing a command offers exactly the commands --help lists ($got)" test "$got" = "$want"
got=$(comp sandbox ""); want=$(grep '^sandbox ' "$T/commands" | cut -d' ' -f2 | sort | paste -sd' ' -)
check "completing sandbox offers its subcommands ($got)" test "$got" = "$want"
got=$(comp sandbox delete "")
check "completing sandbox delete offers the names sandbox list prints ($got)" test "$got" = "alpha beta"
got=$(comp exec b)
check "completing exec's NAME offers matching sandboxes ($got)" test "$got" = "beta"
while IFS= read -r line; do
	# the words before the first option, NAME-like ones as a placeholder
	words=() flags=$(grep -oE '(^|[ [])--[a-z][a-z-]*' <<< "$line" | tr -d ' [' | sort -u | paste -sd' ' -)
	[ -n "$flags" ] || continue
	for w in $line; do
		case $w in "["* | --*) break ;; [a-z]*) words+=("$w") ;; *) words+=(x) ;; esac
	done
	got=$(comp "${words[@]}" --)
	miss=$(for f in $flags; do grep -qw -- "$f" <<< " $got " || echo "$f"; done | paste -sd' ' -)
	check "completing \"boxkitectl ${words[*]} --\" offers every flag --help lists ($flags)" test -z "$miss"
done < <(awk '/^  [a-z]/ { if (l) print l; l = $0; next } /^   / { l = l " " $0; next } END { if (l) print l }' "$T/synopsis")

# ---- systemd unit --------------------------------------------------------------------
if command -v systemd-analyze >/dev/null; then
	# as installed: ExecStart on the built binaries, the built man pages
	# found for Documentation=
	mkdir -p "$T/unit" "$T/man/man8"
	sed "s|/usr/local/bin/|$BIN/|g" "$UNIT" > "$T/unit/boxkite-agent.service"
	for b in $BINS; do
		[ -f "$T/$b.8" ] && cp "$T/$b.8" "$T/man/man8/"
	done
	MANPATH=$T/man systemd-analyze verify "$T/unit/boxkite-agent.service" > "$T/verify" 2>&1; rc=$?
	check "systemd-analyze verify $(basename "$UNIT"): exit 0, no warning" sh -c "[ $rc -eq 0 ] && [ ! -s '$T/verify' ]" || true
	[ -s "$T/verify" ] && sed 's/^/#   /' "$T/verify"
	exp=$(systemd-analyze security --offline=true "$T/unit/boxkite-agent.service" 2>/dev/null | grep -o 'Overall exposure level.*' | sed 's/ [^ ]*$//')
	echo "# systemd-analyze security: $exp"
else
	skip "systemd-analyze verify: no systemd-analyze here"
fi
check "the unit's ExecStartPre (boxkite-agent --check-config, no options) passes" "$BIN/boxkite-agent" --check-config

# ---- make install --------------------------------------------------------------------
if [ -z "${BK_BIN:-}" ] || [ "$BIN" = "$ROOT/build" ]; then
	make --no-print-directory -s install DESTDIR="$T/root" PREFIX=/usr > "$T/install.log" 2>&1; rc=$?
	check "make install DESTDIR=... PREFIX=/usr" test "$rc" -eq 0
	R=$T/root/usr
	check "  ... binaries in bin/, man pages in share/man/man8/, completion, unit" sh -c "
		for b in $BINS; do [ -x '$R/bin/'\$b ] && [ -s '$R/share/man/man8/'\$b.8 ] || exit 1; done
		[ -s '$R/share/bash-completion/completions/boxkitectl' ] && [ -s '$R/lib/systemd/system/boxkite-agent.service' ]"
	check "  ... the unit starts \$PREFIX/bin/boxkite-agent" grep -qx 'ExecStart=/usr/bin/boxkite-agent $BOXKITE_AGENT_OPTS' "$R/lib/systemd/system/boxkite-agent.service"
	check "  ... man finds the installed pages (man -M)" sh -c "MANWIDTH=80 man -M '$R/share/man' 8 boxkitectl 2>/dev/null | grep -q 'sandbox create'"
else
	skip "make install: BK_BIN is not this tree's build/"
fi

echo "$PASS passed, $FAIL failed, $SKIP skipped"
[ "$FAIL" -eq 0 ]
