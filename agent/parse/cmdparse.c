/* SPDX-License-Identifier: Apache-2.0 */
/* Strict checker for `/bin/sh -c` command strings (see cmdparse.h).
 *
 * Three passes over a bounded input, none recursive:
 *   1. lex: bytes -> words (after quote removal) and operators; every
 *      construct outside the accepted subset is refused here, where its
 *      byte offset is known;
 *   2. structure: simple commands, empty commands, redirection targets,
 *      the command words' shape (assignment, glob, builtins and wrappers
 *      refused by name) and find's actions — still no resolver call;
 *   3. policy: each command word resolved once and compared, as a
 *      (name, file) pair, with allowed_commands.
 * Order matters for the caller: a string with a refused construct never
 * reaches the resolver (which enters the sandbox's mount namespace). */
#include "agent/parse/cmdlex.h"
#include "lib/util.h"
#include "agent/parse/vpath.h"

#include <stdarg.h>

/* ---- pass 2: structure -------------------------------------------------- */

struct denied {
	const char *name;
	const char *code;
};

/* Refused in command position whatever allowed_commands says: they run
 * other commands or shell code, change how later words resolve, or
 * change the shell state the checks assume. */
static const struct denied denied_names[] = {
	/* reserved words: compound commands */
	{ "if", BK_CMD_R_RESERVED }, { "then", BK_CMD_R_RESERVED }, { "else", BK_CMD_R_RESERVED },
	{ "elif", BK_CMD_R_RESERVED }, { "fi", BK_CMD_R_RESERVED }, { "do", BK_CMD_R_RESERVED },
	{ "done", BK_CMD_R_RESERVED }, { "case", BK_CMD_R_RESERVED }, { "esac", BK_CMD_R_RESERVED },
	{ "while", BK_CMD_R_RESERVED }, { "until", BK_CMD_R_RESERVED }, { "for", BK_CMD_R_RESERVED },
	{ "in", BK_CMD_R_RESERVED }, { "!", BK_CMD_R_RESERVED }, { "[[", BK_CMD_R_RESERVED },
	{ "]]", BK_CMD_R_RESERVED }, { "function", BK_CMD_R_RESERVED }, { "select", BK_CMD_R_RESERVED },
	{ "coproc", BK_CMD_R_RESERVED },
	/* evaluate a string as shell code (let: bash arithmetic runs $(...)
	 * in array subscripts, even from single-quoted text) */
	{ "eval", BK_CMD_R_EVAL }, { "trap", BK_CMD_R_EVAL }, { "fc", BK_CMD_R_EVAL }, { "let", BK_CMD_R_EVAL },
	{ "exec", BK_CMD_R_EXEC },
	{ "source", BK_CMD_R_SOURCE }, { ".", BK_CMD_R_SOURCE },
	{ "command", BK_CMD_R_BUILTIN_PREFIX }, { "builtin", BK_CMD_R_BUILTIN_PREFIX },
	/* run their arguments as a command */
	{ "env", BK_CMD_R_WRAPPER }, { "nohup", BK_CMD_R_WRAPPER }, { "time", BK_CMD_R_WRAPPER },
	{ "timeout", BK_CMD_R_WRAPPER }, { "nice", BK_CMD_R_WRAPPER }, { "renice", BK_CMD_R_WRAPPER },
	{ "ionice", BK_CMD_R_WRAPPER }, { "chrt", BK_CMD_R_WRAPPER }, { "taskset", BK_CMD_R_WRAPPER },
	{ "xargs", BK_CMD_R_WRAPPER }, { "parallel", BK_CMD_R_WRAPPER }, { "sudo", BK_CMD_R_WRAPPER },
	{ "su", BK_CMD_R_WRAPPER }, { "doas", BK_CMD_R_WRAPPER }, { "pkexec", BK_CMD_R_WRAPPER },
	{ "runuser", BK_CMD_R_WRAPPER }, { "setpriv", BK_CMD_R_WRAPPER }, { "setsid", BK_CMD_R_WRAPPER },
	{ "ssh", BK_CMD_R_WRAPPER }, { "chroot", BK_CMD_R_WRAPPER }, { "unshare", BK_CMD_R_WRAPPER },
	{ "nsenter", BK_CMD_R_WRAPPER }, { "stdbuf", BK_CMD_R_WRAPPER }, { "flock", BK_CMD_R_WRAPPER },
	{ "watch", BK_CMD_R_WRAPPER }, { "script", BK_CMD_R_WRAPPER }, { "strace", BK_CMD_R_WRAPPER },
	{ "ltrace", BK_CMD_R_WRAPPER }, { "gdb", BK_CMD_R_WRAPPER }, { "busybox", BK_CMD_R_WRAPPER },
	{ "toybox", BK_CMD_R_WRAPPER }, { "run-parts", BK_CMD_R_WRAPPER }, { "setarch", BK_CMD_R_WRAPPER },
	{ "sg", BK_CMD_R_WRAPPER }, { "newgrp", BK_CMD_R_WRAPPER }, { "systemd-run", BK_CMD_R_WRAPPER },
	{ "start-stop-daemon", BK_CMD_R_WRAPPER }, { "fakeroot", BK_CMD_R_WRAPPER }, { "proot", BK_CMD_R_WRAPPER },
	{ "bwrap", BK_CMD_R_WRAPPER }, { "firejail", BK_CMD_R_WRAPPER }, { "capsh", BK_CMD_R_WRAPPER },
	{ "ld.so", BK_CMD_R_WRAPPER }, { "ld-linux-x86-64.so.2", BK_CMD_R_WRAPPER },
	{ "ld-linux-aarch64.so.1", BK_CMD_R_WRAPPER }, { "ld-linux.so.2", BK_CMD_R_WRAPPER },
	/* change variables (PATH, IFS), the directory or name lookup for
	 * the commands after them */
	{ "export", BK_CMD_R_SHELL_STATE }, { "readonly", BK_CMD_R_SHELL_STATE }, { "local", BK_CMD_R_SHELL_STATE },
	{ "unset", BK_CMD_R_SHELL_STATE }, { "declare", BK_CMD_R_SHELL_STATE }, { "typeset", BK_CMD_R_SHELL_STATE },
	{ "read", BK_CMD_R_SHELL_STATE }, { "getopts", BK_CMD_R_SHELL_STATE }, { "mapfile", BK_CMD_R_SHELL_STATE },
	{ "readarray", BK_CMD_R_SHELL_STATE }, { "set", BK_CMD_R_SHELL_STATE }, { "shopt", BK_CMD_R_SHELL_STATE },
	{ "cd", BK_CMD_R_SHELL_STATE }, { "pushd", BK_CMD_R_SHELL_STATE }, { "popd", BK_CMD_R_SHELL_STATE },
	{ "alias", BK_CMD_R_SHELL_STATE }, { "unalias", BK_CMD_R_SHELL_STATE }, { "hash", BK_CMD_R_SHELL_STATE },
	{ "enable", BK_CMD_R_SHELL_STATE }, { "bind", BK_CMD_R_SHELL_STATE }, { "complete", BK_CMD_R_SHELL_STATE },
	{ "compgen", BK_CMD_R_SHELL_STATE },
};

static const char *denied_code(const char *w)
{
	for (size_t k = 0; k < ARRAY_SIZE(denied_names); k++)
		if (streq(w, denied_names[k].name))
			return denied_names[k].code;
	return NULL;
}

static const char *base_name(const char *w)
{
	const char *s = strrchr(w, '/');
	return s ? s + 1 : w;
}

static bool has_dotdot(const char *p)
{
	for (const char *c = p; *c;) {
		const char *e = strchr(c, '/');
		size_t n = e ? (size_t)(e - c) : strlen(c);
		if (n == 2 && c[0] == '.' && c[1] == '.')
			return true;
		if (!e)
			break;
		c = e + 1;
	}
	return false;
}

static int check_target(const struct tok *r, const struct tok *w, const char *v, const struct bk_cmd_policy *pol,
			struct bk_cmd_result *res)
{
	char sh[64];
	if (r->redir == R_DUP_OUT || r->redir == R_DUP_IN) {
		if (w->vlen == 1 && (v[0] == '0' || v[0] == '1' || v[0] == '2' || v[0] == '-'))
			return 0;
		return bk_cmd_refuse(res, -EPERM, BK_CMD_R_REDIR_FD, w->off,
			      "'%s&%s' at offset %u: only 0, 1, 2 or '-' may follow '%s&'", r->redir == R_DUP_OUT ? ">" : "<",
			      bk_cmd_shown(v, sh, sizeof(sh)), r->off, r->redir == R_DUP_OUT ? ">" : "<");
	}
	bool write = r->redir != R_READ;
	if (w->flags & W_GLOB)
		return bk_cmd_refuse(res, -EPERM, BK_CMD_R_REDIR_GLOB, w->off, "redirection target '%s' at offset %u has a glob",
			      bk_cmd_shown(v, sh, sizeof(sh)), w->off);
	if (!v[0])
		return bk_cmd_refuse(res, -EPERM, BK_CMD_R_REDIR_TARGET, w->off, "empty redirection target at offset %u", w->off);
	static const char *const dev_w[] = { "/dev/null", "/dev/stdout", "/dev/stderr" };
	static const char *const dev_r[] = { "/dev/null", "/dev/zero", "/dev/urandom", "/dev/random", "/dev/stdin" };
	for (size_t k = 0; write && k < ARRAY_SIZE(dev_w); k++)
		if (streq(v, dev_w[k]))
			return 0;
	for (size_t k = 0; !write && k < ARRAY_SIZE(dev_r); k++)
		if (streq(v, dev_r[k]))
			return 0;
	if (has_dotdot(v))
		return bk_cmd_refuse(res, -EPERM, BK_CMD_R_DOTDOT, w->off, "redirection target '%s' at offset %u has a '..'",
			      bk_cmd_shown(v, sh, sizeof(sh)), w->off);
	char path[BK_VPATH_MAX + 1];
	const char *cwd = pol && pol->cwd ? pol->cwd : "/workspace";
	int n = v[0] == '/' ? snprintf(path, sizeof(path), "%s", v) : snprintf(path, sizeof(path), "%s/%s", cwd, v);
	struct bk_vpath vp;
	if (n < 0 || (size_t)n >= sizeof(path) || has_dotdot(path) || bk_vpath_parse_abs(path, (size_t)n, false, &vp) < 0)
		return bk_cmd_refuse(res, -EPERM, BK_CMD_R_REDIR_TARGET, w->off,
			      "redirection %s '%s' at offset %u is outside %s", write ? "to" : "from",
			      bk_cmd_shown(v, sh, sizeof(sh)), w->off,
			      write ? "/workspace, /tmp and /mnt/user-data/outputs"
				    : "/workspace, /tmp, /mnt/user-data and /mnt/skills");
	if (write && !vp.writable)
		return bk_cmd_refuse(res, -EPERM, BK_CMD_R_REDIR_READONLY, w->off, "redirection to '%s' at offset %u: %s is read-only",
			      bk_cmd_shown(v, sh, sizeof(sh)), w->off, bk_vroots[vp.root].path);
	return 0;
}

struct cmd {
	size_t first, end;  /* token range */
	int word0;          /* token index of the command word, -1 when none */
};

static int check_command_word(const struct tok *t, const char *v, struct bk_cmd_result *res)
{
	char sh[64];
	if (!v[0])
		return bk_cmd_refuse(res, -EPERM, BK_CMD_R_EMPTY_COMMAND, t->off, "empty command word at offset %u", t->off);
	if (t->flags & W_NONASCII)
		return bk_cmd_refuse(res, -EPERM, BK_CMD_R_NON_ASCII, t->off,
			      "command word at offset %u has non-ASCII characters (look-alikes are refused)", t->off);
	if (strchr(v, '\t'))
		return bk_cmd_refuse(res, -EPERM, BK_CMD_R_CONTROL_CHAR, t->off, "command word at offset %u has a tab", t->off);
	if (strchr(v, '='))
		return bk_cmd_refuse(res, -EPERM, BK_CMD_R_ASSIGNMENT, t->off,
			      "'%s' at offset %u: no variable assignments (NAME=value) in command position",
			      bk_cmd_shown(v, sh, sizeof(sh)), t->off);
	const char *code = denied_code(v);
	if (!code)
		code = denied_code(base_name(v));
	if (code)
		return bk_cmd_refuse(res, -EPERM, code, t->off, "'%s' at offset %u is refused in command position (%s)",
			      bk_cmd_shown(v, sh, sizeof(sh)), t->off, code);
	if (strpbrk(v, "*?[") && !streq(v, "["))
		return bk_cmd_refuse(res, -EPERM, BK_CMD_R_GLOB_COMMAND, t->off, "glob characters in the command word '%s' at offset %u",
			      bk_cmd_shown(v, sh, sizeof(sh)), t->off);
	return 0;
}

/* Arguments that turn an allowed command into a way to run, write or
 * evaluate something else the other checks cannot see. */
static int check_args(const struct lexer *lx, const struct cmd *c, struct bk_cmd_result *res)
{
	const char *name = base_name(lx->buf + lx->toks[c->word0].voff);
	bool find = streq(name, "find");
	bool test = streq(name, "test") || streq(name, "[");
	bool printf_ = streq(name, "printf");
	if (!find && !test && !printf_)
		return 0;
	static const char *const find_actions[] = { "-exec",   "-execdir", "-ok",      "-okdir", "-delete",
						    "-fprint", "-fprint0", "-fprintf", "-fls" };
	char sh[64];
	for (size_t k = (size_t)c->word0 + 1; k < c->end; k++) {
		const struct tok *t = &lx->toks[k];
		if (t->kind != T_WORD || (t->flags & W_TARGET))
			continue;
		const char *v = lx->buf + t->voff;
		if (find) {
			for (size_t a = 0; a < ARRAY_SIZE(find_actions); a++)
				if (streq(v, find_actions[a]))
					return bk_cmd_refuse(res, -EPERM, BK_CMD_R_FIND_ACTION, t->off,
						      "find action '%s' at offset %u runs, deletes or writes outside the checks",
						      v, t->off);
			/* a file named "-exec" in the directory would become an action */
			if (t->flags & W_GLOB)
				return bk_cmd_refuse(res, -EPERM, BK_CMD_R_FIND_GLOB, t->off,
					      "unquoted glob '%s' at offset %u in find's arguments (quote the pattern)",
					      bk_cmd_shown(v, sh, sizeof(sh)), t->off);
		} else if (streq(v, "-v") || streq(v, "-R")) {
			/* bash as /bin/sh: test -v 'a[$(cmd)]' and printf -v evaluate an
			 * array subscript, command substitution included */
			return bk_cmd_refuse(res, -EPERM, BK_CMD_R_EVAL, t->off,
				      "'%s %s' at offset %u: bash evaluates the variable name as code", name, v, t->off);
		}
	}
	return 0;
}

/* Split the tokens into simple commands and check them, without the
 * resolver. cmds must have room for ntok + 1 entries. */
static int structure(struct lexer *lx, const struct bk_cmd_policy *pol, struct cmd *cmds, size_t *ncmds)
{
	struct bk_cmd_result *res = lx->res;
	size_t n = 0, start = 0;
	int r;
	if (lx->ntok == 0)
		return bk_cmd_refuse(res, -EINVAL, BK_CMD_R_EMPTY, 0, "the command is empty");
	for (size_t k = 0; k <= lx->ntok; k++) {
		bool end = k == lx->ntok;
		if (!end && lx->toks[k].kind != T_SEP && lx->toks[k].kind != T_PIPE && lx->toks[k].kind != T_AND &&
		    lx->toks[k].kind != T_OR)
			continue;
		struct cmd c = { .first = start, .end = k, .word0 = -1 };
		bool has_redir = false;
		for (size_t j = start; j < k; j++) {
			const struct tok *t = &lx->toks[j];
			if (t->kind == T_REDIR) {
				has_redir = true;
				/* the lexer guarantees a target word follows */
				if ((r = check_target(t, &lx->toks[j + 1], lx->buf + lx->toks[j + 1].voff, pol, res)) < 0)
					return r;
				j++;
			} else if (c.word0 < 0) {
				c.word0 = (int)j;
			}
		}
		if (c.word0 < 0 && !has_redir) {
			/* only "cmd;" at the very end may leave an empty command */
			bool trailing_sep = end && k > 0 && lx->toks[k - 1].kind == T_SEP && n > 0;
			if (!trailing_sep) {
				size_t off = end ? lx->len : lx->toks[k].off;
				return bk_cmd_refuse(res, -EPERM, BK_CMD_R_EMPTY_COMMAND, off, "empty command at offset %zu", off);
			}
		} else {
			if (c.word0 >= 0) {
				const struct tok *w = &lx->toks[c.word0];
				if ((r = check_command_word(w, lx->buf + w->voff, res)) < 0)
					return r;
				if ((r = check_args(lx, &c, res)) < 0)
					return r;
			}
			cmds[n++] = c;
		}
		start = k + 1;
	}
	*ncmds = n;
	return 0;
}

/* ---- pass 3: allowed_commands ------------------------------------------ */

static int check_allowed(const struct lexer *lx, const struct cmd *c, const struct bk_cmd_policy *pol,
			 struct bk_cmd_result *res)
{
	const struct tok *w = &lx->toks[c->word0];
	const char *v = lx->buf + w->voff;
	const char *name = base_name(v);
	char sh[64], sh2[64];
	bool named = false;
	for (size_t k = 0; pol && k < pol->n; k++)
		if (pol->names[k] && streq(pol->names[k], name))
			named = true;
	if (!named)
		return bk_cmd_refuse(res, -EPERM, BK_CMD_R_NOT_ALLOWED, w->off, "'%s' at offset %u is not in allowed_commands",
			      bk_cmd_shown(v, sh, sizeof(sh)), w->off);
	if (!pol->resolve)
		return bk_cmd_refuse(res, -EPERM, BK_CMD_R_RESOLVE, w->off, "no resolver to check '%s'", bk_cmd_shown(v, sh, sizeof(sh)));
	char key[BK_CMD_KEY_MAX];
	key[0] = '\0';
	int r = pol->resolve(pol->ud, v, key, sizeof(key));
	key[sizeof(key) - 1] = '\0';
	if (r == -ENOENT)
		return bk_cmd_refuse(res, -EPERM, BK_CMD_R_NOT_FOUND, w->off, "'%s' at offset %u: command not found",
			      bk_cmd_shown(v, sh, sizeof(sh)), w->off);
	if (r < 0 || !key[0])
		return bk_cmd_refuse(res, -EPERM, BK_CMD_R_RESOLVE, w->off, "cannot resolve '%s' at offset %u: %s",
			      bk_cmd_shown(v, sh, sizeof(sh)), w->off, strerror(r < 0 ? -r : EINVAL));
	for (size_t k = 0; k < pol->n; k++)
		if (pol->names[k] && pol->real && pol->real[k] && streq(pol->names[k], name) && streq(pol->real[k], key))
			return 0;
	return bk_cmd_refuse(res, -EPERM, BK_CMD_R_NOT_ALLOWED, w->off,
		      "'%s' at offset %u resolves to %s, not to the allowed '%s'", bk_cmd_shown(v, sh, sizeof(sh)), w->off,
		      bk_cmd_shown(key, sh2, sizeof(sh2)), name);
}

/* ---- entry points -------------------------------------------------------- */

int bk_cmd_check_n(const char *cmd, size_t len, const struct bk_cmd_policy *pol, struct bk_cmd_result *res)
{
	memset(res, 0, sizeof(*res));
	if (!cmd)
		return bk_cmd_refuse(res, -EINVAL, BK_CMD_R_EMPTY, 0, "no command");
	if (len > BK_CMD_MAX_LEN)
		return bk_cmd_refuse(res, -E2BIG, BK_CMD_R_TOO_LONG, BK_CMD_MAX_LEN, "the command is longer than %d bytes",
			      BK_CMD_MAX_LEN);
	/* values never outgrow their source; one NUL per word */
	_cleanup_free_ char *buf = malloc(len + BK_CMD_MAX_WORDS + 1);
	_cleanup_free_ struct tok *toks = malloc(sizeof(struct tok) * BK_CMD_MAX_TOKENS);
	_cleanup_free_ struct cmd *cmds = malloc(sizeof(struct cmd) * (BK_CMD_MAX_TOKENS + 1));
	if (!buf || !toks || !cmds)
		return bk_cmd_refuse(res, -ENOMEM, BK_CMD_R_NOMEM, 0, "out of memory");
	struct lexer lx = { .s = cmd, .len = len, .toks = toks, .buf = buf, .res = res };
	int r = bk_cmd_lex(&lx);
	if (r < 0)
		return r;
	size_t ncmds = 0;
	if ((r = structure(&lx, pol, cmds, &ncmds)) < 0)
		return r;
	for (size_t k = 0; k < ncmds; k++)
		if (cmds[k].word0 >= 0 && (r = check_allowed(&lx, &cmds[k], pol, res)) < 0)
			return r;
	res->code = BK_CMD_OK;
	res->reason[0] = '\0';
	res->offset = 0;
	res->n_commands = (unsigned)ncmds;
	return 0;
}

int bk_cmd_check(const char *cmd, const struct bk_cmd_policy *pol, struct bk_cmd_result *res)
{
	if (!cmd) {
		memset(res, 0, sizeof(*res));
		return bk_cmd_refuse(res, -EINVAL, BK_CMD_R_EMPTY, 0, "no command");
	}
	/* strnlen: never scan far past the limit */
	size_t len = strnlen(cmd, BK_CMD_MAX_LEN + 1);
	return bk_cmd_check_n(cmd, len, pol, res);
}
