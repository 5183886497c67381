#!/usr/bin/env bash
# Command allowlist enforced twice: the strict parser refuses shell tricks
# with a reason, and the Landlock execute allowlist stops any other binary
# even where the parser let a command through (an allowed interpreter).
. "$(dirname "$0")/lib.sh"

bk_start_agent || { not_ok "agent starts"; exit 1; }
bk_sandbox_create al1 || { not_ok "sandbox created"; exit 1; }
call() { "$CTL" call --socket "$T/admin.sock" "$@"; }
run() { call exec "$(jq -nc --arg c "$1" '{sandbox:"al1",command:$c,timeout:10}')" > "$T/last.json"; }
jb() { jq -j "$1" "$T/last.json"; }

out=$(call configure '{"sandbox":"al1","session_id":"s1","allowed_commands":["ls","cat","echo","grep","wc","sort","awk","head"]}')
check "configure records allowed_commands" test "$(jq -r .body.status <<< "$out")" = configured

# --- the allowed corpus runs, with Landlock in force ---------------------------------
ALLOWED=(
	'echo hello'
	'ls /'
	'ls / | grep etc'
	'echo a b c | wc -w'
	"echo 'single quoted \$HOME'"
	'echo "double quoted"'
	'echo one > /workspace/f.txt && cat /workspace/f.txt'
	'echo two >> /workspace/f.txt; wc -l < /workspace/f.txt'
	'ls /nonexistent || echo fallback'
	'cat /workspace/f.txt | sort | head -1'
	'ls -la /tmp 2>/dev/null | wc -l'
	"awk 'BEGIN{print 1+1}'"
)
for c in "${ALLOWED[@]}"; do
	run "$c"
	check "allowed: $c (exit $(jb .body.exit_code), landlock $(jb .body.isolation.landlock))" \
		sh -c "test '$(jb .status)' = 200 && test '$(jb .body.exit_code)' = 0 && test '$(jb .body.isolation.landlock)' = true"
done

# --- the bypass corpus is refused by the parser, with a reason ------------------------
REFUSED=(
	'id' 'ls; id' 'ls && id' 'ls | id' 'ls || id' 'ls $(id)' 'ls `id`' 'cat <(id)' 'ls > >(id)' 'echo $HOME'
	'ls${IFS}-la' 'echo ${PATH}' 'PATH=/tmp ls' 'LD_PRELOAD=/tmp/x.so ls' 'BASH_ENV=/tmp/x ls' 'env ls' 'env sh'
	'command ls' 'builtin echo hi' 'exec ls' 'eval ls' '. /tmp/x' 'source /tmp/x' '(ls)' '{ ls; }' 'ls &'
	'cat <<EOF
x
EOF' "ls \\
id" 'ls
id' 'timeout 5 sh' 'nice sh' 'xargs sh' 'sudo ls' 'ssh host' 'find . -exec sh \;' 'ls | sh'
	'/tmp/ls' 'sh -c id' 'bash -c id' "python3 -c 'import os; os.system(\"id\")'" 'ⅼs' 'ｌｓ' 'echo x > /etc/passwd'
	'echo x > ../../etc/x' 'cat < /etc/shadow' 'l* /' 'ls ~root' 'ls &> /workspace/x' 'echo x > /mnt/skills/y'
)
n=0
for c in "${REFUSED[@]}"; do
	run "$c"
	n=$((n + 1))
	check "refused: $(printf '%q' "$c") -> $(jb .body.reason)" \
		sh -c "test '$(jb .status)' = 403 && test '$(jb .body.code)' = command_not_allowed && test -n '$(jb .body.reason)'"
done
check "the bypass corpus has at least 40 cases ($n)" test "$n" -ge 40
before=$(grep -c '"event":"exec"' "$T/agent.log")
run 'ls; id'
check "a refused command never reached the exec engine" test "$(grep -c '"event":"exec"' "$T/agent.log")" = "$before"
check "  ... and the refusal is logged with its reason" grep -q '"event":"exec_refused".*"pod":"al1".*"reason":"not_allowed"' "$T/agent.log"

# --- the kernel layer: an allowed interpreter cannot start anything else ------------
for target in id python3 sh\ -c\ id /bin/busybox; do
	run "awk 'BEGIN{r = system(\"$target\"); print \"rc=\" r}'"
	check "Landlock stops $target started by allowed awk" sh -c "grep -q 'Permission denied\|rc=126\|rc=127' $T/last.json && ! grep -q 'uid=' $T/last.json"
done
# a copy of an allowed binary under another name: the parser refuses it by
# path, and Landlock would too (rules follow the inode, not the name)
run "awk 'BEGIN{system(\"cat /usr/bin/ls > /workspace/myls\"); r = system(\"/workspace/myls /\"); print \"rc=\" r}'"
check "Landlock stops a binary written into /workspace" grep -q 'rc=126\|Permission denied' "$T/last.json"

# --- fail closed --------------------------------------------------------------------------
bk_stop_agent; bk_start_agent '{"testing":{"allow_unsafe":true,"fault":"landlock"}}'
call configure '{"sandbox":"al1","session_id":"s2","allowed_commands":["echo"]}' > /dev/null
run 'echo should-not-run'
check "Landlock failure refuses the exec (layer landlock)" test "$(jb .status) $(jb .body.layer)" = "503 landlock"
# no allowlist in the session: no Landlock, commands unrestricted
bk_stop_agent; bk_start_agent
call configure '{"sandbox":"al1","session_id":"s3"}' > /dev/null
run 'id -u'
check "a session without allowed_commands runs anything (landlock false)" \
	test "$(jb .body.stdout | tr -d '\n') $(jb .body.isolation.landlock)" = "1000 false"
