#!/usr/bin/env bash
# File routes, sessions and tool calls end to end against real runc
# sandboxes: round trips, path traversal (lexical, encoded, symlinks made by
# the sandbox, symlinks swapped during requests, /proc magic links, huge
# paths), read-only roots, ENOSPC atomicity, /configure killing and wiping
# the previous session, and /tool-call ignoring a foreign session_id.
# Everything outside the roots is checked afterwards from the host.
. "$(dirname "$0")/lib.sh"

bk_start_agent || { not_ok "agent starts"; exit 1; }
bk_sandbox_create fs1 || { not_ok "sandbox fs1 created"; exit 1; }
bk_sandbox_create fs2 || { not_ok "sandbox fs2 created"; exit 1; }
SB=fs1
ROOTFS=/run/boxkite/local/fs1/sandbox/rootfs
TOKEN_FILE=$(sb fs1 token_file)
TOKEN=$(cat "$TOKEN_FILE")
SHIM_PID=$(runc --root /run/runc state "$(sb fs1 shim_container_id)" | jq -r .pid)
SANDBOX_PID=$(runc --root /run/runc state "$(sb fs1 sandbox_container_id)" | jq -r .pid)
# A pod's /tmp is usually world-writable (emptyDir or image); runc gives a
# local sandbox's tmpfs the 0755 of the image's directory: make it 1777.
chmod 1777 "/proc/$SANDBOX_PID/root/tmp"

# A file outside every root that the sandbox user could read (so a
# resolution that escaped would really leak it), planted from the host in
# the sandbox's image.
MARKER="bk-secret-marker-$$-$RANDOM"
echo "$MARKER" > "$ROOTFS/opt/secret-marker.txt"
chmod 644 "$ROOTFS/opt/secret-marker.txt"
hash_outside() { sha256sum /etc/passwd /etc/shadow /etc/hostname "$TOKEN_FILE" "$ROOTFS/opt/secret-marker.txt" | sha256sum; }
HOST_BEFORE=$(hash_outside)

# req OP ARGS-JSON: OP on the admin socket for sandbox $SB -> $T/r.json
req() {
	local a
	a=$(jq -c --arg sb "$SB" '. + {sandbox: $sb}' <<< "$2") || return 1
	"$CTL" call --socket "$T/admin.sock" "$1" "$a" > "$T/r.json"
}
# shim OP ARGS-JSON: OP through the shim identity of $SB (agent socket)
shim() { in_cgroup_of "$(container_cg "$SB" shim_container_id)" "$CTL" call --socket "$SOCK" "$1" "$2" > "$T/r.json"; }
st() { jq -r .status "$T/r.json"; }
b() { jq -r ".body$1" "$T/r.json"; }
P() { jq -cn --arg p "$1" '{path: $p}'; }
# x CMD: run CMD in the sandbox, print its stdout
x() { bk_exec "$SB" -- sh -c "$1"; j .stdout; }
# a raw command string, as a session with an allowlist needs it (no sh -c)
xr() { "$CTL" call --socket "$T/admin.sock" exec "$(jq -nc --arg s "$SB" --arg c "$1" '{sandbox:$s,command:$c}')" | jq -j .body.stdout; }
noleak() { ! grep -q -e "$MARKER" -e "$TOKEN" -e 'root:x:0:0' "$T/r.json"; }

# --- round trip (admin socket) ----------------------------------------------------
req file_create '{"path":"notes/hello.txt","content":"alpha\nbeta\ngamma beta\n"}'
check "file_create: 200, created, size" test "$(st) $(b .created) $(b .size) $(b .path)" = "200 true 22 /workspace/notes/hello.txt"
check "file_create made the parent directory, owned by the sandbox user" \
	test "$(x 'stat -c "%u %U" /workspace/notes /workspace/notes/hello.txt | sort -u')" = "1000 sandbox"
req file_create '{"path":"/workspace/notes/hello.txt","content":"alpha\nbeta\ngamma beta\n"}'
check "file_create over an existing file: created (as the reference), overwritten" test "$(st) $(b .created) $(b .overwritten)" = "200 true true"
req view "$(P notes/hello.txt)"
check "view: content" test "$(jq -c .body.content "$T/r.json")" = '"alpha\nbeta\ngamma beta\n"'
check "view: lines as split(\"\\n\") counts them (4)" test "$(b .lines)" = 4
req view '{"path":"notes/hello.txt","view_range":[2,3]}'
check "view_range [2,3]" test "$(b .content)" = "$(printf 'beta\ngamma beta')"
req view '{"path":"notes/hello.txt","view_range":[3,-1]}'
check "view_range [3,-1] (a Python slice: the last line is left out)" test "$(b .content) $(b .lines) $(b .total_lines)" = "gamma beta 4 4"
req view '{"path":"notes/hello.txt","view_range":[9,10]}'
check "view_range past the end: 200, empty" test "$(st) $(jq -c .body.content "$T/r.json")" = '200 ""'
req view '{"path":"notes/hello.txt","view_range":[3,2]}'
check "view_range end < start: 200, empty" test "$(st) $(jq -c .body.content "$T/r.json")" = '200 ""'
req str_replace '{"path":"notes/hello.txt","old_str":"delta","new_str":"x"}'
check "str_replace absent: 200, replaced false" test "$(st) $(b .replaced) $(b .occurrences)" = "200 false 0"
req str_replace '{"path":"notes/hello.txt","old_str":"beta","new_str":"x"}'
check "str_replace not unique: 400" test "$(st) $(b .code)" = "400 not_unique"
req str_replace '{"path":"notes/hello.txt","old_str":"alpha","new_str":"ALPHA"}'
check "str_replace unique: replaced, 1 occurrence" test "$(st) $(b .replaced) $(b .occurrences)" = "200 true 1"
req str_replace '{"path":"notes/hello.txt","old_str":"beta","new_str":"BETA","replace_all":true}'
check "str_replace replace_all: 2 occurrences" test "$(st) $(b .occurrences)" = "200 2"
check "str_replace result on disk" test "$(x 'cat /workspace/notes/hello.txt' | tr '\n' '|')" = "ALPHA|BETA|gamma BETA|"
x 'chmod 640 /workspace/notes/hello.txt' >/dev/null
req str_replace '{"path":"notes/hello.txt","old_str":"ALPHA","new_str":"alpha"}'
check "str_replace keeps the file mode and owner" test "$(x 'stat -c "%a %u" /workspace/notes/hello.txt')" = "640 1000"
check "no temp files left behind" test "$(x 'ls -A /workspace/notes | grep -c bk-tmp')" = 0

x 'mkdir -p /workspace/src/lib /workspace/.git; printf "int main(void) { return 0; }\n// TODO one\n" > /workspace/src/main.c;
   printf "// TODO two\nstatic int x;\n" > /workspace/src/lib/util.c; echo "TODO hidden" > /workspace/.git/config;
   printf "a\0b TODO\n" > /workspace/src/blob.bin; mkfifo /workspace/src/fifo' >/dev/null
req ls "$(P src)"
check "ls: sorted entries with types and sizes" \
	test "$(b '.entries | map("\(.name):\(.type)") | join(",")')" = "blob.bin:file,fifo:other,lib:directory,main.c:file"
check "ls: size" test "$(b '.entries[] | select(.name == "main.c") | .size')" = 41
req ls '{}'
check "ls without path lists /workspace" test "$(b '| [.entries[].name] | index("src") != null')" = true
req view "$(P src)"
check "view of a directory: is_directory, entries" test "$(b .is_directory) $(b .lines) $(b '.entries | length')" = "true 0 4"
req glob '{"pattern":"**/*.c"}'
check "glob **/*.c" test "$(b '.matches | map(.path) | join(",")')" = "/workspace/src/lib/util.c,/workspace/src/main.c"
req glob '{"pattern":"*.c","path":"/workspace/src"}'
check "glob with path: recursive (rglob)" test "$(b '.matches | map(.path) | join(",")')" = "/workspace/src/lib/util.c,/workspace/src/main.c"
req glob '{"pattern":"/workspace/src/*/*.c"}'
check "glob with an absolute pattern: relative to path, as the reference (no match)" test "$(st) $(b '.matches | length')" = "200 0"
req glob '{"pattern":"*"}'
check "glob * matches hidden files too (pathlib)" test "$(b '.matches | map(.path) | index("/workspace/.git/config") != null')" = true
req grep '{"pattern":"TODO (one|two)","path":"/workspace"}'
check "grep: matches with path and line" \
	test "$(b '.matches | map("\(.path):\(.line):\(.text)") | join(",")')" = "/workspace/src/lib/util.c:1:// TODO two,/workspace/src/main.c:2:// TODO one"
check "grep skips binary files" test "$(b '| [.matches[].path] | index("/workspace/src/blob.bin")')" = null
req grep '{"pattern":"TODO","path":"/workspace","glob":"main.*"}'
check "grep glob filter" test "$(b '.matches | length') $(b '.matches[0].path')" = "1 /workspace/src/main.c"
req grep '{"pattern":"TODO","path":"/workspace","max_matches":1}'
check "grep max_matches: truncated" test "$(b '.matches | length') $(b .truncated)" = "1 true"
req grep '{"pattern":"(unclosed","path":"/workspace"}'
check "grep invalid regex: 200 with an error field" test "$(st) $(b '.matches | length')" = "200 0"
check "grep invalid regex: error names it" grep -q 'Invalid regex pattern' <<< "$(b .error)"
req grep '{"pattern":"return","path":"/workspace/src/main.c"}'
check "grep on one file" test "$(b '.matches | length') $(b '.matches[0].line')" = "1 1"
req view "$(P src/fifo)"
check "view of a FIFO: 422 at once (no hang)" test "$(st) $(b .code)" = "422 unviewable"
req view "$(P src/blob.bin)"
check "view of a binary file: 422 unviewable" test "$(st) $(b .code)" = "422 unviewable"
x 'head -c 27000000 /dev/zero | tr "\0" a > /workspace/big.txt' >/dev/null
req view "$(P big.txt)"
check "view of a 27 MB file: 422 unviewable" test "$(st) $(b .code)" = "422 unviewable"
x 'rm -f /workspace/big.txt; printf "ok \377\376 end\n" > /workspace/latin.txt' >/dev/null
req view "$(P latin.txt)"
check "view of invalid UTF-8: 422 (the reference's binary sentence)" test "$(st) $(b .code)" = "422 unviewable"
# many helpers at once (fork from several agent threads)
pids=()
for i in $(seq 1 16); do
	"$CTL" call --socket "$T/admin.sock" view '{"sandbox":"fs1","path":"notes/hello.txt"}' > "$T/par-$i.json" &
	pids+=($!)
done
wait "${pids[@]}"
par=$(cat "$T"/par-*.json | jq -c '[.status, .body.code]' | sort | uniq -c | awk '{print $1":"$2}' | tr '\n' ' ')
check "16 concurrent views all answered 200 ($par)" test "$par" = '16:[200,null] '
req view "$(P nothing/here.txt)"
check "missing file: 404 not_found" test "$(st) $(b .code)" = "404 not_found"
req str_replace '{"path":"missing.txt","old_str":"a","new_str":"b"}'
check "str_replace of a missing file: 404" test "$(st)" = 404

# directory where a file is expected
req file_create '{"path":"src","content":"x"}'
check "file_create over a directory: 400 is_directory" test "$(st) $(b .code)" = "400 is_directory"
req file_create '{"path":"newdir/","content":"x"}'
check "file_create with a trailing slash: 400" test "$(st) $(b .code)" = "400 is_directory"
req str_replace '{"path":"src","old_str":"a","new_str":"b"}'
check "str_replace on a directory: 400 is_directory" test "$(st) $(b .code)" = "400 is_directory"
req present_files '{"filepaths":["src"]}'
check "present_files of a directory: skipped" test "$(st) $(b '.files | length')" = "200 0"
req ls "$(P src/main.c)"
check "ls of a file: 200, no entries" test "$(st) $(b '.entries | length')" = "200 0"
req view "$(P src/main.c/x)"
check "a file used as a directory: 404 not_found" test "$(st) $(b .code)" = "404 not_found"

# present_files
x 'printf "report\n" > /workspace/report.md; printf "%%PDF-1.4 x" > /mnt/user-data/outputs/already.pdf' >/dev/null
req present_files '{"filepaths":["report.md","/mnt/user-data/outputs/already.pdf"]}'
check "present_files: 200, two files" test "$(st) $(b '.files | length')" = "200 2"
check "present_files: the workspace file was copied into outputs" \
	test "$(b '.copy_operations | join(",")')" = "Copied /workspace/report.md to /mnt/user-data/outputs/report.md"
check "present_files: a file already in outputs is not copied" test "$(b '.files[1].file_path')" = "/mnt/user-data/outputs/already.pdf"
want=$(x 'sha256sum /mnt/user-data/outputs/report.md /mnt/user-data/outputs/already.pdf | cut -d" " -f1 | tr "\n" " "')
check "present_files: sha256 of both files" test "$(b '.files | map(.sha256) | join(" ")') " = "$want"
check "present_files: content_type and size" test "$(b '.files | map("\(.content_type):\(.size)") | join(",")')" = "text/markdown:7,application/pdf:10"
check "present_files: the copy exists, owned by the sandbox user" \
	test "$(x 'cat /mnt/user-data/outputs/report.md; stat -c %u /mnt/user-data/outputs/report.md' | tr '\n' ' ')" = "report 1000 "
req present_files '{"filepaths":["report.md","nope.txt"]}'
check "present_files with a missing file: skipped" test "$(st) $(b '.files | length')" = "200 1"

# --- the shim identity (agent socket) ---------------------------------------------------
shim file_create '{"path":"via-shim.txt","content":"from the shim\n"}'
check "shim: file_create" test "$(st) $(b .created)" = "200 true"
shim view '{"path":"via-shim.txt","sandbox":"fs2"}'
check "shim: view reads its own pod's file (a \"sandbox\" field is ignored)" test "$(b .content)" = "from the shim"
check "shim: the file is not in the other sandbox" test "$(SB=fs2 x 'ls /workspace/via-shim.txt 2>/dev/null | wc -l')" = 0
shim str_replace '{"path":"via-shim.txt","old_str":"shim","new_str":"SHIM"}'
check "shim: str_replace" test "$(st) $(b .occurrences)" = "200 1"
shim ls '{"path":"/workspace"}'
check "shim: ls" test "$(b '| [.entries[].name] | index("via-shim.txt") != null')" = true
shim glob '{"pattern":"via-*"}'
check "shim: glob" test "$(b '.matches | map(.path) | join(",")')" = "/workspace/via-shim.txt"
shim grep '{"pattern":"SHIM","path":"/workspace"}'
check "shim: grep" test "$(b '.matches[0].path')" = "/workspace/via-shim.txt"
shim present_files '{"filepaths":["via-shim.txt"]}'
check "shim: present_files" test "$(st) $(b '.copy_operations | length')" = "200 1"
shim view '{"path":"../etc/passwd"}'
check "shim: traversal refused with 400" test "$(st) $(b .code)" = "400 path_outside_roots"
shim view '{"path":"/run/secrets/boxkite/token"}'
check "shim: its own token path is refused" sh -c "test \"$(st)\" = 400 && ! grep -q '$TOKEN' $T/r.json"

# --- read-only roots --------------------------------------------------------------------
req file_create '{"path":"/mnt/user-data/uploads/x.txt","content":"x"}'
check "write to uploads: 403 read_only_root" test "$(st) $(b .code)" = "403 read_only_root"
req file_create '{"path":"/mnt/skills/x.txt","content":"x"}'
check "write to skills: 403 read_only_root" test "$(st) $(b .code)" = "403 read_only_root"
req str_replace '{"path":"/mnt/skills/SKILL.md","old_str":"a","new_str":"b"}'
check "str_replace in skills: 403 read_only_root" test "$(st) $(b .code)" = "403 read_only_root"
req ls "$(P /mnt/user-data/uploads)"
check "read-only roots can be read (ls uploads)" test "$(st)" = 200
# /tmp follows what the sandbox user may do there (local sandboxes mount
# it 0755 root; a pod's emptyDir is usually 1777)
if x 'touch /tmp/probe 2>/dev/null && echo yes' | grep -q yes; then want_tmp=200; else want_tmp=403; fi
req file_create '{"path":"/tmp/t.txt","content":"tmp"}'
check "/tmp: file_create answers like the sandbox user's own rights ($want_tmp)" test "$(st)" = "$want_tmp"

# --- path traversal -------------------------------------------------------------------------
# trav NAME OP ARGS EXPECTED-STATUSES: refused (status in the set), nothing leaked
trav() {
	req "$2" "$3"
	local s
	s=$(st)
	if [[ $s =~ ^($4)$ ]] && noleak; then ok "traversal refused: $1 ($s)"; else not_ok "traversal refused: $1 (got $s, want $4)"; fi
}
x "cd /workspace && mkdir -p deep/a/b && echo inside > inside.txt &&
   ln -s /opt/secret-marker.txt abs-link &&
   ln -s ../../../../../../opt/secret-marker.txt rel-link &&
   ln -s /proc/self/root/opt/secret-marker.txt proc-self-link &&
   ln -s /proc/1/root/opt/secret-marker.txt proc-1-link &&
   ln -s /proc/$SHIM_PID/root/run/secrets/boxkite/token shim-proc-link &&
   ln -s /run/secrets/boxkite/token token-link &&
   ln -s $TOKEN_FILE host-token-link &&
   ln -s /opt opt-dir-link &&
   ln -s /dev/shm shm-dir-link &&
   ln -s /tmp tmp-dir-link &&
   ln -s .. up && ln -s ../../.. deep/a/b/up3 &&
   ln -s /etc/passwd passwd-link &&
   ln -s /mnt/user-data/outputs/x outputs-link &&
   ln -s /opt/secret-marker.txt /mnt/user-data/outputs/out-abs-link &&
   echo ok" > /dev/null
check "the marker outside the roots is readable by the sandbox user (a leak would show)" \
	test "$(x 'cat /opt/secret-marker.txt')" = "$MARKER"
check "the sandbox made its symlinks" test "$(x 'ls /workspace | grep -c link')" -ge 10
BIG=$(head -c 65536 /dev/zero | tr '\0' a | sed 's/a\{200\}/&\//g')
P4097=/workspace/$(head -c 4086 /dev/zero | tr '\0' b | sed 's/b\{200\}/&\//g')
trav "../etc/passwd" view "$(P ../etc/passwd)" 400
trav "../../../../opt/secret-marker.txt" view "$(P ../../../../opt/secret-marker.txt)" 400
trav "/workspace/../opt/secret-marker.txt" view "$(P /workspace/../opt/secret-marker.txt)" 400
trav "/workspace/deep/../../opt" ls "$(P /workspace/deep/../../opt)" 400
trav "/workspace/../workspace/inside.txt (leaves, comes back)" view "$(P /workspace/../workspace/inside.txt)" 400
trav "/opt/secret-marker.txt" view "$(P /opt/secret-marker.txt)" 400
trav "/etc/shadow" view "$(P /etc/shadow)" 400
trav "/ (the workspace, as the reference)" ls "$(P /)" 200
trav "/mnt/user-data (ls lists /mnt, as the reference)" ls "$(P /mnt/user-data)" 200
trav "/mnt/user-data/../../opt" ls "$(P /mnt/user-data/../../opt)" 400
trav "/tmp/../opt/secret-marker.txt" view "$(P /tmp/../opt/secret-marker.txt)" 400
trav "/workspacex/a" view "$(P /workspacex/a)" 400
trav "/proc/self/root/opt/secret-marker.txt" view "$(P /proc/self/root/opt/secret-marker.txt)" 400
trav "/proc/1/root/opt/secret-marker.txt" view "$(P /proc/1/root/opt/secret-marker.txt)" 400
trav "/proc/SHIMPID/root/run/secrets/boxkite/token" view "$(P /proc/$SHIM_PID/root/run/secrets/boxkite/token)" 400
trav "/run/secrets/boxkite/token" view "$(P /run/secrets/boxkite/token)" 400
trav "the host token path" view "$(P "$TOKEN_FILE")" 400
trav "JSON-escaped \\u002e\\u002e/" view '{"path":"\u002e\u002e/opt/secret-marker.txt"}' 400
trav "%2e%2e/%2e%2e/opt (taken literally)" view "$(P %2e%2e/%2e%2e/opt/secret-marker.txt)" 404
trav "..%2f..%2fopt (taken literally)" view "$(P ..%2f..%2fopt%2fsecret-marker.txt)" 404
trav "%252e%252e (taken literally)" view "$(P %252e%252e/opt/secret-marker.txt)" 404
trav "backslashes (read as /, as the reference)" view "$(P '..\..\opt\secret-marker.txt')" 400
trav "overlong UTF-8 dots %c0%ae (literal)" view "$(P '%c0%ae%c0%ae/opt/secret-marker.txt')" 404
trav "NUL byte" view '{"path":"inside.txt\u0000/../../opt/secret-marker.txt"}' 400
trav "64 KB path" view "$(P "$BIG")" 400
trav "4097-byte path" view "$(P "$P4097")" 400
trav "absolute symlink to /opt/secret-marker.txt" view "$(P abs-link)" "400|404"
trav "relative symlink ../../../opt/secret-marker.txt" view "$(P rel-link)" "400|404"
trav "symlink to /proc/self/root/..." view "$(P proc-self-link)" "400|404"
trav "symlink to /proc/1/root/..." view "$(P proc-1-link)" "400|404"
trav "symlink to the shim's /proc/PID/root token" view "$(P shim-proc-link)" "400|404"
trav "symlink to /run/secrets/boxkite/token" view "$(P token-link)" "400|404"
trav "symlink to the host token path" view "$(P host-token-link)" "400|404"
trav "symlinked directory to /opt" view "$(P opt-dir-link/secret-marker.txt)" "400|404"
trav "symlink chain up/up/up/opt" view "$(P up/up/up/opt/secret-marker.txt)" "400|404"
trav "symlink ../../.. in a subdirectory" view "$(P deep/a/b/up3/up3/opt/secret-marker.txt)" "400|404"
trav "symlink in outputs to /opt" view "$(P /mnt/user-data/outputs/out-abs-link)" "400|404"
trav "str_replace through a symlink to /etc/passwd" str_replace '{"path":"passwd-link","old_str":"root","new_str":"toor"}' "400|404"
trav "file_create into a symlinked /dev/shm" file_create '{"path":"shm-dir-link/evil.txt","content":"evil"}' "400|404"
trav "file_create through a symlink to /tmp (other root)" file_create '{"path":"tmp-dir-link/evil.txt","content":"evil"}' "400|404"
trav "file_create through a symlinked file to /etc/passwd" file_create '{"path":"passwd-link","content":"evil"}' "400|404"
trav "ls of a symlinked /opt (resolved in the root: nothing there)" ls "$(P opt-dir-link)" "200|400|404"
trav "ls /proc/self/root" ls "$(P /proc/self/root)" 400
trav "grep in a symlinked /opt (resolved in the root: nothing there)" grep '{"pattern":"marker","path":"opt-dir-link"}' "200|400|404"
trav "grep /workspace does not follow links out" grep "$(jq -cn --arg m "$MARKER" '{pattern: $m, path: "/workspace"}')" 200
trav "glob ../*" glob '{"pattern":"../*"}' 400
trav "glob /opt/* (relative to the workspace, as the reference)" glob '{"pattern":"/opt/*"}' 200
trav "grep glob ../../opt/* (only a filter)" grep '{"pattern":"x","glob":"../../opt/*"}' 200
trav "present_files /opt/secret-marker.txt" present_files '{"filepaths":["/opt/secret-marker.txt"]}' 400
trav "present_files of a symlink to /opt (resolved in the root: skipped)" present_files '{"filepaths":["abs-link"]}' "200|400"
trav "present_files of a link in outputs (skipped)" present_files '{"filepaths":["/mnt/user-data/outputs/out-abs-link"]}' "200|400"
# absolute links are resolved from the root of their own root: with an
# /workspace/opt/secret-marker.txt in place, the same link reads that one
x 'mkdir -p /workspace/opt && echo inside-copy > /workspace/opt/secret-marker.txt' >/dev/null
req view "$(P abs-link)"
check "an absolute symlink resolves inside its root (RESOLVE_IN_ROOT)" test "$(st) $(b .content)" = "200 inside-copy"
req view "$(P proc-self-link)"
check "a /proc/self/root link resolves inside the root too" test "$(st)" = 404
x 'rm -rf /workspace/opt' >/dev/null
req glob '{"pattern":"**/*marker*"}'
check "glob never descends through links" sh -c "noleak() { ! grep -q '$MARKER' $T/r.json; }; noleak && test \"\$(jq -r '.body.matches | length' $T/r.json)\" = 0"
check "nothing was written into /dev/shm or /tmp through links" test "$(x 'ls -A /dev/shm /tmp | grep -c evil')" = 0
check "present_files copied nothing from outside" test "$(x 'ls -A /mnt/user-data/outputs | grep -c secret')" = 0

# a symlink swapped in a loop by the sandbox during requests
x 'cd /workspace && echo fake-file > okfile && mkdir -p realdir && echo fake-dir > realdir/secret-marker.txt &&
   ln -s okfile race && ln -s realdir racedir && ln -s realdir racew' >/dev/null
ctl exec fs1 --json --timeout $((30 * TIME_SCALE)) -- sh -c 'cd /workspace; end=$(($(date +%s) + 6)); while [ $(date +%s) -lt $end ]; do
	for i in 1 2 3 4 5 6 7 8 9 10; do
	ln -s /opt/secret-marker.txt l.tmp; mv -T l.tmp race; ln -s okfile m.tmp; mv -T m.tmp race
	ln -s ../../../opt n.tmp; mv -T n.tmp racedir; ln -s realdir o.tmp; mv -T o.tmp racedir
	ln -s /dev/shm p.tmp; mv -T p.tmp racew; ln -s realdir q.tmp; mv -T q.tmp racew
	done; done; echo swapped' > "$T/race.json" &
RACER=$!
sleep 0.3
seen_ok=0; seen_refused=0; leaked=0; bad=0
for i in $(seq 1 40); do
	for p in race racedir/secret-marker.txt; do
		req view "$(P $p)"
		noleak || leaked=$((leaked + 1))
		case $(st) in 200) seen_ok=$((seen_ok + 1));; 400|403|404) seen_refused=$((seen_refused + 1));; *) bad=$((bad + 1));; esac
	done
	req file_create "$(jq -cn --arg p "racew/w$i.txt" '{path: $p, content: "w"}')"
	case $(st) in 200|400|403|404) ;; *) bad=$((bad + 1));; esac
	req grep '{"pattern":"marker","path":"racedir"}'
	noleak || leaked=$((leaked + 1))
done
wait $RACER
check "racing symlinks: the swapper ran during the requests" test "$(jq -r .stdout "$T/race.json")" = swapped
check "racing symlinks: nothing outside the root was ever read ($seen_ok served, $seen_refused refused)" test "$leaked" = 0
check "racing symlinks: only 200/400/403/404 answers" test "$bad" = 0
check "racing symlinks: nothing was written into /dev/shm" test "$(x 'ls -A /dev/shm | wc -l')" = 0

# --- ENOSPC: the previous content survives -------------------------------------------------------
req file_create '{"path":"keep.txt","content":"original content\n"}'
for i in 1 2 3; do x "fallocate -l 160M /workspace/fill$i" >/dev/null; done
x 'dd if=/dev/zero of=/workspace/fill4 bs=64k 2>/dev/null; sync; df -k /workspace | tail -1' >/dev/null
free_kb=$(x 'df -k /workspace | tail -1' | awk '{print $4}')
check "the workspace is full (${free_kb} KB free)" test "${free_kb:-999}" -le 64
req file_create "$(jq -cn --arg c "$(head -c 100000 /dev/zero | tr '\0' z)" '{path: "keep.txt", content: $c}')"
check "file_create on a full workspace: 507 no_space" test "$(st) $(b .code)" = "507 no_space"
check "the error says nothing was changed" grep -q 'nothing was changed' <<< "$(b .detail)"
req view "$(P keep.txt)"
check "the previous content is intact" test "$(b .content)" = "original content"
check "no temp file left on the full workspace" test "$(x 'ls -A /workspace | grep -c bk-tmp')" = 0
req str_replace '{"path":"keep.txt","old_str":"original","new_str":"replaced"}'
check "str_replace on a full workspace: refused or done, never half-done" \
	sh -c "case \$(jq -r .status $T/r.json) in 200|507) exit 0;; *) exit 1;; esac"
req view "$(P keep.txt)"
check "str_replace left whole content" sh -c "grep -Eq '\"content\":\"(original|replaced) content' $T/r.json"
x 'rm -f /workspace/fill*' >/dev/null

# --- /configure: kill the previous session, wipe its data --------------------------------------------
x 'echo old > /workspace/old-session.txt; echo old > /tmp/old-tmp.txt; echo old > /mnt/user-data/outputs/old-out.txt;
   mkdir -p /workspace/locked/inner && echo x > /workspace/locked/inner/f && chmod 000 /workspace/locked/inner /workspace/locked' >/dev/null
# what else a session can leave: /dev/shm, a SysV shm segment, a POSIX
# message queue, files 300 (in /workspace) and 3000 (in /tmp) directories
# deep; each exec below ends before /configure
x 'echo alice > /dev/shm/alice-shm.txt' >/dev/null
x 'ipcmk -M 4096' >/dev/null
check "a SysV shm segment of the old session exists (seen by its exec)" \
	test "$(x 'ipcmk -M 4096 >/dev/null; tail -n +2 /proc/sysvipc/shm | wc -l')" -ge 1
# one line: a session's allowlist refuses newlines in a command
MQ='import ctypes, os, sys; rt = ctypes.CDLL("librt.so.1", use_errno=True); rt.mq_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]; q = rt.mq_open(b"/bk-alice", os.O_RDWR | (os.O_CREAT if sys.argv[1] == "make" else 0), 0o600, None); print("present" if q >= 0 else "absent:" + os.strerror(ctypes.get_errno()))'
check "a POSIX mqueue of the old session exists (seen by its exec)" \
	test "$(x "python3 -c '$MQ' make; python3 -c '$MQ' look")" = "$(printf 'present\npresent')"
x 'python3 -c '"'"'import os
for root, n in (("/workspace", 300), ("/tmp", 3000)):
    os.chdir(root)
    for i in range(n):
        os.mkdir("d"); os.chdir("d")
    open("deep.txt", "w").write("alice")'"'" >/dev/null
check "the deep files exist" test "$(x 'ls /workspace/d/d/d/d >/dev/null && find /workspace /tmp -name deep.txt | wc -l')" = 2
SB=fs2 x 'echo keep > /workspace/fs2-keep.txt' >/dev/null
ctl exec fs1 --json --timeout 300 -- sleep 300.4242 > "$T/sleeper.json" &
SLEEPER=$!
ctl exec fs2 --json --timeout 300 -- sleep 300.4343 > "$T/sleeper2.json" &
SLEEPER2=$!
for _ in $(seq 1 50); do pgrep -f 'sleep 300[.]4242' >/dev/null && pgrep -f 'sleep 300[.]4343' >/dev/null && break; sleep 0.1; done
check "a sleep 300 of the old session runs" sh -c "pgrep -f 'sleep 300[.]4242' >/dev/null"
req configure '{"session_id":"sess-A","allowed_commands":["ls","python3","wc","stat","sort"]}'
check "configure: 200 configured" test "$(st) $(b .status) $(b .session_id)" = "200 configured sess-A"
check "configure: prefetched_files is []" test "$(b '.prefetched_files | length')" = 0
check "configure: nothing kept" test "$(b .wiped.kept)" = 0
check "configure killed one exec" test "$(b .killed_execs)" = 1
check "the old session's sleep is gone" sh -c "! pgrep -f 'sleep 300[.]4242' >/dev/null"
rc=0; timeout 10 tail --pid=$SLEEPER -f /dev/null || rc=$?
check "the old session's exec returned" test "$rc" = 0
wait $SLEEPER 2>/dev/null
check "the killed exec reported a signal exit" test "$(jq -r .exit_code "$T/sleeper.json")" -ge 128
left=$(xr 'ls -A /workspace' | tr '\n' ' ')
check "/workspace wiped (also directories made unreadable)${left:+; left: $left}" test -z "$left"
check "/tmp wiped" test "$(xr 'ls -A /tmp | wc -l')" = 0
check "outputs wiped" test "$(xr 'ls -A /mnt/user-data/outputs | wc -l')" = 0
check "/dev/shm wiped" test "$(xr 'ls -A /dev/shm | wc -l')" = 0
check "no SysV shm segment of the old session" \
	test "$(xr "python3 -c 'print(len(open(\"/proc/sysvipc/shm\").read().splitlines()) - 1)'")" = 0
check "no POSIX mqueue of the old session" test "$(xr "python3 -c '$MQ' look")" = "absent:No such file or directory"
check "the wipe left the roots in place" test "$(xr 'stat -c %F /workspace /tmp /mnt/user-data/outputs | sort -u')" = directory
check "the session is persisted in the state dir" \
	test "$(jq -c '[.session_id, .allowed_commands]' "$T/state/sessions/$(sb fs1 pod_uid).json")" = '["sess-A",["ls","python3","wc","stat","sort"]]'
check "the other sandbox's exec survives" sh -c "pgrep -f 'sleep 300[.]4343' >/dev/null"
check "the other sandbox's files survive" test "$(SB=fs2 x 'cat /workspace/fs2-keep.txt')" = keep
SB=fs2 req configure '{"session_id":"fs2-session"}'
check "configure of the other sandbox kills its exec" sh -c "! pgrep -f 'sleep 300[.]4343' >/dev/null"
wait $SLEEPER2 2>/dev/null
check "sessions are per pod (two state files)" test "$(ls "$T/state/sessions" | wc -l)" = 2
# validation failures are the reference framework's: 422, a list detail
req configure '{"session_id":"sess-B","allowed_commands":["a/b"]}'
check "configure: allowed_commands with '/' refused (422 validation_error)" \
	test "$(st) $(b .code) $(b '.detail[0].loc | join(".")')" = "422 validation_error body.allowed_commands"
req configure "$(jq -cn '{session_id: "s", allowed_commands: [range(0; 257) | "c\(.)"]}')"
check "configure: more than 256 allowed_commands refused (422 validation_error)" test "$(st) $(b .code)" = "422 validation_error"
check "  ... neither refused configure changed the session" \
	test "$(jq -r .session_id "$T/state/sessions/$(sb fs1 pod_uid).json")" = sess-A
req configure '{"session_id":5}'
check "configure: a session_id that is not a string refused (422 validation_error)" test "$(st) $(b .code)" = "422 validation_error"
# without session_id: the manager's pod recycle, a reset to no session
xr "python3 -c 'open(\"/workspace/before-recycle.txt\", \"w\").write(\"keep\")'" >/dev/null
check "  ... (a file of sess-A's in /workspace before the recycle)" test "$(xr 'ls -A /workspace')" = before-recycle.txt
req configure '{"allowed_commands":["ls"]}'
check "configure without session_id: the recycle (200, session_id null, recorded as none)" \
	test "$(st) $(b .session_id) $(jq -c .session_id "$T/state/sessions/$(sb fs1 pod_uid).json")" = '200 null ""'
check "  ... and it wiped /workspace" test "$(xr 'ls -A /workspace')" = ""
shim configure '{"session_id":"sess-B"}'
check "configure through the shim identity" test "$(st) $(b .session_id)" = "200 sess-B"

# anything the wipe cannot remove fails the reset: a directory of root's
# (made from the host) holding a file the sandbox user cannot unlink
mkdir -p "/proc/$SANDBOX_PID/root/workspace/roots/inner" && echo r > "/proc/$SANDBOX_PID/root/workspace/roots/inner/f"
req configure '{"session_id":"sess-C"}'
check "configure with something kept: 503 session_reset_failed" test "$(st) $(b .code)" = "503 session_reset_failed"
check "the error names what was kept" grep -q 'kept' <<< "$(b .detail)"
check "the failed reset did not record the new session" \
	test "$(jq -r .session_id "$T/state/sessions/$(sb fs1 pod_uid).json")" = sess-B
rm -rf "/proc/$SANDBOX_PID/root/workspace/roots"
req configure '{"session_id":"sess-B"}'
check "configure once the host removed it: 200" test "$(st) $(b .wiped.kept)" = "200 0"

# --- tool_call: the session_id in the request has no effect ------------------------------------------
req tool_call '{"tool_name":"file_create","arguments":{"path":"tc.txt","content":"tool\n"}}'
check "tool_call file_create" test "$(st) $(b .created)" = "200 true"
for sid in sess-B foreign-session "" ; do
	if [ -n "$sid" ]; then a=$(jq -cn --arg s "$sid" '{tool_name: "view", arguments: {path: "tc.txt"}, session_id: $s}')
	else a='{"tool_name":"view","arguments":{"path":"tc.txt"}}'; fi
	shim tool_call "$a"; cp "$T/r.json" "$T/tc-view-${sid:-none}.json"
	a=$(jq -cn --arg s "$sid" '{tool_name: "bash_tool", arguments: {command: "cat /workspace/tc.txt; id -u"}, session_id: $s}')
	shim tool_call "$a"; jq -c '[.status, .body.stdout, .body.exit_code]' "$T/r.json" > "$T/tc-bash-${sid:-none}.json"
done
check "tool_call view: foreign session_id answers exactly like the current one" cmp -s "$T/tc-view-sess-B.json" "$T/tc-view-foreign-session.json"
check "tool_call view: and like no session_id" cmp -s "$T/tc-view-sess-B.json" "$T/tc-view-none.json"
check "tool_call view: the content" test "$(jq -r .body.content "$T/tc-view-foreign-session.json")" = tool
check "tool_call bash_tool: foreign session_id runs exactly like the current one" cmp -s "$T/tc-bash-sess-B.json" "$T/tc-bash-foreign-session.json"
check "tool_call bash_tool: output" test "$(cat "$T/tc-bash-foreign-session.json")" = '[200,"tool\n1000\n",0]'
shim tool_call "$(jq -cn --arg u "$(sb fs2 pod_uid)" '{tool_name: "file_create", arguments: {path: "from-foreign.txt", content: "x"}, session_id: "sess-of-fs2", pod_uid: $u, sandbox: "fs2"}')"
check "tool_call with another pod's session lands in its own pod" \
	test "$(x 'ls /workspace/from-foreign.txt 2>/dev/null | wc -l') $(SB=fs2 x 'ls /workspace/from-foreign.txt 2>/dev/null | wc -l')" = "1 0"
check "the current session did not change" \
	test "$(jq -r .session_id "$T/state/sessions/$(sb fs1 pod_uid).json")" = sess-B
for t in str_replace ls glob grep present_files; do
	case $t in
	str_replace) a='{"path":"tc.txt","old_str":"tool","new_str":"TOOL"}';;
	ls) a='{"path":"/workspace"}';;
	glob) a='{"pattern":"tc.*"}';;
	grep) a='{"pattern":"TOOL","path":"/workspace"}';;
	present_files) a='{"filepaths":["tc.txt"]}';;
	esac
	shim tool_call "$(jq -cn --arg t "$t" --argjson a "$a" '{tool_name: $t, arguments: $a, session_id: "nope"}')"
	check "tool_call dispatches $t" test "$(st)" = 200
done
shim tool_call '{"tool_name":"rm_rf","arguments":{}}'
check "tool_call with an unknown tool: 400" test "$(st) $(b .code)" = "400 unknown_tool"
shim tool_call '{"tool_name":"view","arguments":{"path":"../etc/passwd"}}'
check "tool_call keeps the path rules" test "$(st)" = 400

# --- the host afterwards ---------------------------------------------------------------------------------
check "nothing outside the roots changed on the host" test "$(hash_outside)" = "$HOST_BEFORE"
check "the shim's token never appeared in the agent log" sh -c "! grep -q '$TOKEN' $T/agent.log"
check "file contents are never logged" sh -c "! grep -q -e 'gamma BETA' -e 'from the shim' $T/agent.log"
# (a warm slot's monitor, boxkite-slotmon, waits for its exec by design)
check "no file helper is left running" sh -c "test \$(ps -o comm= --ppid $AGENT_PID | grep -vcx boxkite-slotmon) -eq 0"
fds=$(ls /proc/$AGENT_PID/fd | wc -l)
for i in $(seq 1 50); do req view "$(P tc.txt)"; done
check "agent fds stable over 50 file ops ($fds -> $(ls /proc/$AGENT_PID/fd | wc -l))" test "$(ls /proc/$AGENT_PID/fd | wc -l)" -le "$fds"
rm -f "$ROOTFS/opt/secret-marker.txt"
bk_stop_agent
check "no sanitizer report in the agent's output" \
	sh -c "! grep -E -q 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' $T/agent.log"
