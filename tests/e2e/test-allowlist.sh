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
# Each command runs twice: under the allowlist (Landlock on), where the
# program awk starts must fail with EACCES (dash: "Permission denied",
# status 126; 127 would mean "not found", which proves nothing), and in a
# control session without allowed_commands (no Landlock), where the very
# same command must succeed: so the refusal is Landlock's, not a missing
# binary or a missing execute bit. awk's system() runs /bin/sh, which the
# ruleset allows. The last case is a copy of an allowed binary under another
# name, executable (planted by `runc exec` as the sandbox user: chmod is not
# an allowed command, and each configure wipes /workspace): the parser
# refuses it by path, Landlock too (rules follow the inode, not the name).
LANDLOCK_CASES=(
	"awk 'BEGIN{r = system(\"id\"); print \"rc=\" r}'"
	"awk 'BEGIN{r = system(\"python3 -c 1\"); print \"rc=\" r}'"
	"awk 'BEGIN{r = system(\"sh -c id\"); print \"rc=\" r}'"
	"awk 'BEGIN{r = system(\"/bin/busybox true\"); print \"rc=\" r}'"
	"awk 'BEGIN{r = system(\"/workspace/myls /workspace\"); print \"rc=\" r}'"
)
plant_myls() {
	runc --root /run/runc exec --user 1000:1000 "$(sb al1 sandbox_container_id)" \
		sh -c 'cp /usr/bin/ls /workspace/myls && chmod 755 /workspace/myls && test -x /workspace/myls'
}
check "an executable copy of ls planted in /workspace (Landlock session)" plant_myls
for c in "${LANDLOCK_CASES[@]}"; do
	run "$c"
	o="$(jb .status) $(jb .body.isolation.landlock) $(jb .body.stdout | tr '\n' ' ')$(jb .body.stderr | tr '\n' ' ')"
	check "Landlock stops what allowed awk starts: $c -> EACCES ($o)" \
		sh -c 'case "$1" in "200 true rc=126 "*"Permission denied"*) exit 0;; *) exit 1;; esac' _ "$o"
done
# the control: the same commands in a session without an allowlist
call configure '{"sandbox":"al1","session_id":"s1-control"}' > /dev/null
check "an executable copy of ls planted in /workspace (control session)" plant_myls
for c in "${LANDLOCK_CASES[@]}"; do
	run "$c"
	o="$(jb .status) $(jb .body.isolation.landlock) $(jb .body.stdout | tr '\n' ' ')"
	check "control without Landlock: $c runs ($o)" \
		sh -c 'case "$1" in "200 false "*"rc=0 ") exit 0;; *) exit 1;; esac' _ "$o"
done

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
