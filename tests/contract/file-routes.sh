#!/usr/bin/env bash
# The file routes' wire contract, as the reference sidecar answers it
# (EvAlssment/boxkite cac4559: sidecar/sidecar_files.py, sidecar_paths.py,
# the models of sidecar/main.py) and as the reference manager and tools
# read it: paths ("/" is /workspace, the /outputs /uploads /skills aliases,
# "workspace/x", /ls /mnt, 400 outside the roots), /view (names, lines,
# view_range, the 25 MiB limit, the 100 KiB cut, non-UTF-8), /read-image,
# /str-replace, /ls, /glob, /grep (Python's re syntax, bounded),
# /present-files and a 10 MiB /file-create. Everything goes through the
# shim over pinned HTTPS, with the request bodies the reference's clients
# send; one check per behaviour.
. "$(dirname "$0")/../e2e/lib.sh"

bk_start_agent || { not_ok "agent starts"; exit 1; }
SB=bkfc-$$
bk_sandbox_create "$SB" || { not_ok "sandbox created"; exit 1; }
TOKEN=$(cat "$(sb "$SB" token_file)")
printf 'X-Sidecar-Auth-Token: %s\n' "$TOKEN" > "$T/hdr"
CNS=/run/netns/$(sb "$SB" client_netns)
URL=$(sb "$SB" url)

# post ROUTE BODY [curl options]: the answer's body in $T/r.json, its status in $T/code
post() {
	local r=$1 body=$2; shift 2
	nsenter --net="$CNS" curl -sk --max-time 60 --pinnedpubkey "$(sb "$SB" pin)" -H @"$T/hdr" \
		-H 'Content-Type: application/json' --data-binary "$body" -o "$T/r.json" -w '%{http_code}' "$@" \
		"$URL$r" > "$T/code"
}
# post_file ROUTE FILE: the body from a file (large bodies)
post_file() {
	nsenter --net="$CNS" curl -sk --max-time 120 --pinnedpubkey "$(sb "$SB" pin)" -H @"$T/hdr" \
		-H 'Content-Type: application/json' --data-binary @"$2" -o "$T/r.json" -w '%{http_code}' "$URL$1" > "$T/code"
}
code() { cat "$T/code"; }
b() { jq -r "$1" "$T/r.json" 2>/dev/null; }
bc() { jq -c "$1" "$T/r.json" 2>/dev/null; }
# sx CMD: run CMD in the sandbox (as /exec does)
sx() { post /exec "$(jq -cn --arg c "$1" '{command: $c, timeout: 60}')"; b .stdout; }
got() { echo "got $(code) $(head -c 300 "$T/r.json")"; }

sx 'mkdir -p /workspace/src/lib /workspace/.hidden /workspace/empty &&
    printf "int main(void) { return 0; }\n// TODO one 555-1234\n" > /workspace/src/main.c &&
    printf "// todo two\n" > /workspace/src/lib/util.c && printf "x\n" > /workspace/.hidden/h.c &&
    printf "a\nb\nc" > /workspace/abc.txt && printf "a\n" > /workspace/a-nl.txt &&
    printf "one two one\n" > /workspace/rep.txt && printf "ok \377\376 end\n" > /workspace/latin.txt &&
    echo made' > /dev/null
check "fixtures made in the sandbox" test "$(sx 'ls /workspace/src/main.c /workspace/abc.txt | wc -l')" = 2

# --- paths -----------------------------------------------------------------------------------------
post /ls '{"path":"/"}'
check "paths: /ls \"/\" is /workspace ($(got))" test "$(code) $(b '[.entries[].path] | index("/workspace/src/") != null')" = "200 true"
post /file-create '{"path":"/outputs/alias.txt","content":"via alias\n"}'
check "paths: /outputs/x is /mnt/user-data/outputs/x ($(got))" \
	test "$(code) $(b .path) $(sx 'cat /mnt/user-data/outputs/alias.txt')" = "200 /mnt/user-data/outputs/alias.txt via alias"
post /ls '{"path":"/uploads"}'
check "paths: /uploads is /mnt/user-data/uploads ($(got))" test "$(code) $(b .path)" = "200 /mnt/user-data/uploads"
post /ls '{"path":"/skills"}'
check "paths: /skills is /mnt/skills ($(got))" test "$(code) $(b .path)" = "200 /mnt/skills"
post /file-create '{"path":"workspace/rel.txt","content":"r"}'
check "paths: workspace/x is /workspace/x ($(got))" test "$(code) $(b .path)" = "200 /workspace/rel.txt"
post /ls '{"path":"/mnt"}'
check "paths: /ls /mnt lists the mounts ($(got))" \
	test "$(code) $(b '[.entries[].path] | index("/mnt/user-data/") != null')" = "200 true"
post /view '{"path":"/etc/passwd"}'
check "paths: outside the roots is 400 with the reference's sentence ($(got))" \
	test "$(code) $(b .detail)" = "400 Invalid path outside allowed roots: /etc/passwd"
post /view '{"path":"../../opt/x"}'
check "paths: traversal is 400 ($(got))" test "$(code)" = 400
post /file-create '{"path":"/skills/x.txt","content":"x"}'
check "paths: a write to a read-only root stays 403 ($(got))" test "$(code)" = 403

# --- /view -------------------------------------------------------------------------------------------
post /view '{"path":"src"}'
check "view: a directory's entries are name strings ($(got))" \
	test "$(code) $(b .is_directory) $(bc '.entries | sort')" = '200 true ["lib","main.c"]'
post /view '{"path":"abc.txt","view_range":[2,2]}'
check "view: [2,2] is \"b\", lines is the file's count ($(got))" test "$(code) $(bc '[.content, .lines]')" = '200 ["b",3]'
post /view '{"path":"a-nl.txt"}'
check "view: lines counts as split(\"\\n\") (\"a\\n\" is 2) ($(got))" test "$(code) $(b .lines)" = "200 2"
post /view '{"path":"abc.txt","view_range":[9,10]}'
check "view: a range past the end is 200 and empty ($(got))" test "$(code) $(bc .content)" = '200 ""'
post /view '{"path":"abc.txt","view_range":[0,1]}'
check "view: [0,1] is the first line ($(got))" test "$(code) $(bc .content)" = '200 "a"'
post /view '{"path":"abc.txt","view_range":[3,2]}'
check "view: [3,2] is 200 and empty ($(got))" test "$(code) $(bc .content)" = '200 ""'
post /view '{"path":"abc.txt","view_range":[1]}'
check "view: [1] is the whole file ($(got))" test "$(code) $(bc .content)" = '200 "a\nb\nc"'
post /view '{"path":"abc.txt"}'
check "view: a file has is_directory false and entries null ($(got))" test "$(code) $(bc '[.is_directory, .entries]')" = '200 [false,null]'
sx 'head -c 150000 /dev/zero | tr "\0" x > /workspace/150k.txt' > /dev/null
post /view '{"path":"150k.txt"}'
check "view: over 100 KiB is cut to 102400 characters + \"\\n... (truncated)\" ($(code))" \
	test "$(code) $(b '.content | length') $(b '.content | endswith("x\n... (truncated)")')" = "200 102416 true"
sx 'printf "%s" "$(head -c 60000 /dev/zero | tr "\0" x)" | sed "s/x/é/g" > /workspace/accents.txt' > /dev/null
post /view '{"path":"accents.txt"}'
check "view: the cut counts characters, not bytes (120000-byte file of é: whole) ($(code))" \
	test "$(code) $(b '.content | length')" = "200 60000"
sx 'head -c 12000000 /dev/zero | tr "\0" a > /workspace/12m.txt' > /dev/null
post /view '{"path":"12m.txt"}'
check "view: a 12 MB file is viewable (the limit is 25 MiB) ($(code))" test "$(code) $(b '.content | length')" = "200 102416"
sx 'head -c 27000000 /dev/zero | tr "\0" a > /workspace/27m.txt' > /dev/null
post /view '{"path":"27m.txt"}'
check "view: a 27 MB file is 422, \"over the 26214400 byte limit\" ($(got))" \
	sh -c "test '$(code)' = 422 && grep -q 'over the 26214400 byte limit for /view' $T/r.json"
post /view '{"path":"latin.txt"}'
check "view: non-UTF-8 is 422 with the reference's sentence ($(got))" \
	sh -c "test '$(code)' = 422 && grep -q 'appears to be a binary file and cannot be viewed as text' $T/r.json"
sx 'rm -f /workspace/12m.txt /workspace/27m.txt' > /dev/null

# --- /read-image ------------------------------------------------------------------------------------
PNG_B64='iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC'
sx "echo $PNG_B64 | base64 -d > /workspace/dot.png" > /dev/null
post /read-image '{"path":"dot.png","description":"Read image for view tool multimodal output"}'
check "read-image: {path, mime_type, size_bytes, base64_data} ($(got))" \
	test "$(code) $(bc '[.path, .mime_type, .size_bytes, .base64_data]')" = "200 [\"dot.png\",\"image/png\",69,\"$PNG_B64\"]"
post /read-image '{"path":"abc.txt"}'
check "read-image: not an image is 400 ($(got))" test "$(code) $(b .detail)" = "400 File is not an image: text/plain"

# --- /str-replace -------------------------------------------------------------------------------------
post /str-replace '{"path":"rep.txt","old_str":"absent","new_str":"x","replace_all":false}'
check "str-replace: not found is 200 {replaced: false, occurrences: 0} ($(got))" \
	test "$(code) $(bc '[.replaced, .occurrences]')" = "200 [false,0]"
post /str-replace '{"path":"rep.txt","old_str":"one","new_str":"1","replace_all":false}'
check "str-replace: several without replace_all is 400 ($(got))" \
	test "$(code) $(b .detail)" = "400 old_str appears 2 times. Must appear exactly once."

# --- /ls ------------------------------------------------------------------------------------------
post /ls '{"path":"/workspace/src"}'
check "ls: entries {path, is_dir, size, modified_at}, directories end in / ($(got))" \
	test "$(code) $(bc '[.entries[] | [.path, .is_dir, .size, (.modified_at | test("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}(\\.[0-9]{6})?$"))]]')" = \
	'200 [["/workspace/src/lib/",true,0,true],["/workspace/src/main.c",false,50,true]]'
post /ls '{"path":"/workspace/nothing-here"}'
check "ls: a missing directory is 200 [] ($(got))" test "$(code) $(bc .entries)" = "200 []"

# --- /glob ----------------------------------------------------------------------------------------
post /glob '{"pattern":"*.c","path":"/"}'
check "glob: recursive like rglob, files as {path, is_dir, size, modified_at} ($(got))" \
	test "$(code) $(bc '[.matches[] | [.path, .is_dir, .size, (.modified_at | length > 0)]]')" = \
	'200 [["/workspace/.hidden/h.c",false,2,true],["/workspace/src/lib/util.c",false,12,true],["/workspace/src/main.c",false,50,true]]'
post /glob '{"pattern":"*.c","path":"/workspace/nope"}'
check "glob: a missing base is 200 [] ($(got))" test "$(code) $(bc .matches)" = "200 []"

# --- /grep ----------------------------------------------------------------------------------------
post /grep '{"pattern":"\\d{3}-\\d{4}","path":"/","max_matches":500}'
check "grep: Python syntax \\d{3} ($(got))" test "$(code) $(bc '[.matches[] | [.path, .line, .text]]')" = \
	'200 [["/workspace/src/main.c",2,"// TODO one 555-1234"]]'
post /grep '{"pattern":"(?i)todo","path":"/workspace/src"}'
check "grep: inline flags (?i) ($(got))" test "$(code) $(b '.matches | length') $(bc .error)" = "200 2 null"
post /grep '{"pattern":"x","path":"/workspace/nope"}'
check "grep: a missing path is 200 [] ($(got))" test "$(code) $(bc .matches)" = "200 []"
post /grep '{"pattern":"(unclosed","path":"/"}'
check "grep: an invalid pattern is 200 with \"Invalid regex pattern: ...\" ($(got))" \
	sh -c "test '$(code)' = 200 && jq -e '.error | startswith(\"Invalid regex pattern: \")' $T/r.json >/dev/null"
post /grep '{"pattern":"(((a{1,255}){1,255}){1,255})","path":"/"}'
check "grep: a regex bomb is still refused ($(got))" test "$(code) $(b .code)" = "422 pattern_too_complex"
sx 'printf "%s!y\n" xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx > /workspace/bt.txt' > /dev/null
t0=$(date +%s%N)
post /grep '{"pattern":"(x+x+)+y","path":"/workspace/bt.txt"}'
took=$((($(date +%s%N) - t0) / 1000000))
check "grep: exponential backtracking stops at the match limit within $(scaled_ms 3000) ms (took $took ms; $(got))" \
	sh -c "test '$(code) $(b .truncated)' = '200 true' && test $took -le $(scaled_ms 3000) &&
	       jq -e '.error | test(\"match limit\")' $T/r.json >/dev/null"

# --- /present-files -------------------------------------------------------------------------------
sx 'printf "report\n" > /workspace/report.md' > /dev/null
post /present-files '{"filepaths":["report.md","/workspace/missing.txt"]}'
check "present-files: {file_path, storage_key, size, content_type}, copy_operations strings, a missing file skipped ($(got))" \
	test "$(code) $(bc '[.files[] | [.file_path, .storage_key, .size, .content_type]], .copy_operations' | tr '\n' ' ')" = \
	'200 [["/mnt/user-data/outputs/report.md","outputs/report.md",7,"text/markdown"]] ["Copied /workspace/report.md to /mnt/user-data/outputs/report.md"] '

# --- /file-create: 10 MiB of content ----------------------------------------------------------------
python3 -c 'import json; print(json.dumps({"path": "big.txt", "content": "y" * (10 * 1024 * 1024)}))' > "$T/big.json"
post_file /file-create "$T/big.json"
check "file-create: 10 MiB of content is accepted ($(got))" test "$(code) $(b .size)" = "200 10485760"
python3 -c 'import json; print(json.dumps({"path": "big.txt", "content": "y" * (10 * 1024 * 1024 + 1)}))' > "$T/big.json"
post_file /file-create "$T/big.json"
check "file-create: one character more is 422 with a list detail ($(got))" \
	test "$(code) $(b '.detail[0].loc | join(".")')" = "422 body.content"

bk_stop_agent
check "no sanitizer report in the agent's output" \
	sh -c "! grep -E -q 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' $T/agent.log"
