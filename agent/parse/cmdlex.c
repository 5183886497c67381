/* SPDX-License-Identifier: Apache-2.0 */
/* The command checker's pass 1, the lexer (see cmdparse.c for the three
 * passes and why their order matters). */
#include "agent/parse/cmdlex.h"

#include <stdarg.h>

/* ---- results ------------------------------------------------------------ */

int bk_cmd_refuse(struct bk_cmd_result *res, int err, const char *code, size_t off, const char *fmt,
				 ...)
{
	res->code = code;
	res->offset = off;
	res->n_commands = 0;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(res->reason, sizeof(res->reason), fmt, ap);
	va_end(ap);
	/* the sentence quotes user text: keep it printable ASCII */
	for (char *p = res->reason; *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
			*p = '?';
	return err;
}

/* A short printable rendering of user text for a sentence. */
const char *bk_cmd_shown(const char *s, char *out, size_t outlen)
{
	size_t o = 0, n = strlen(s);
	for (size_t i = 0; i < n && o + 4 < outlen; i++)
		out[o++] = (unsigned char)s[i] >= 0x20 && (unsigned char)s[i] < 0x7f ? s[i] : '?';
	if (o + 4 >= outlen && strlen(s) > o) {
		out[o++] = '.';
		out[o++] = '.';
		out[o++] = '.';
	}
	out[o] = '\0';
	return out;
}

/* ---- pass 1: lexer ------------------------------------------------------ */

static bool is_blank(char c) { return c == ' ' || c == '\t'; }
static bool is_op(char c) { return c == ';' || c == '|' || c == '&' || c == '<' || c == '>'; }

/* Validate one UTF-8 sequence at s[i] (inside quotes). Returns its length,
 * or 0 and fills res. Refused besides malformed sequences (overlong,
 * surrogates, > U+10FFFF): the invisible and reordering code points that
 * make a command read differently from what runs (Trojan Source,
 * CVE-2021-42574) and C1 controls. */
static size_t utf8_check(struct lexer *lx, size_t i)
{
	const unsigned char *s = (const unsigned char *)lx->s;
	unsigned char b = s[i];
	size_t need;
	uint32_t cp;
	unsigned char lo = 0x80, hi = 0xbf;
	if (b >= 0xc2 && b <= 0xdf) {
		need = 1;
		cp = b & 0x1f;
	} else if (b >= 0xe0 && b <= 0xef) {
		need = 2;
		cp = b & 0x0f;
		if (b == 0xe0)
			lo = 0xa0;
		if (b == 0xed)
			hi = 0x9f;
	} else if (b >= 0xf0 && b <= 0xf4) {
		need = 3;
		cp = b & 0x07;
		if (b == 0xf0)
			lo = 0x90;
		if (b == 0xf4)
			hi = 0x8f;
	} else {
		bk_cmd_refuse(lx->res, -EPERM, BK_CMD_R_INVALID_UTF8, i, "byte 0x%02x at offset %zu is not valid UTF-8", b, i);
		return 0;
	}
	if (lx->len - i - 1 < need || s[i + 1] < lo || s[i + 1] > hi) {
		bk_cmd_refuse(lx->res, -EPERM, BK_CMD_R_INVALID_UTF8, i, "malformed UTF-8 sequence at offset %zu", i);
		return 0;
	}
	for (size_t k = 1; k <= need; k++) {
		if (k > 1 && (s[i + k] < 0x80 || s[i + k] > 0xbf)) {
			bk_cmd_refuse(lx->res, -EPERM, BK_CMD_R_INVALID_UTF8, i, "malformed UTF-8 sequence at offset %zu", i);
			return 0;
		}
		cp = (cp << 6) | (s[i + k] & 0x3f);
	}
	if ((cp >= 0x80 && cp <= 0x9f) || (cp >= 0x200b && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202e) ||
	    (cp >= 0x2060 && cp <= 0x206f) || cp == 0xfeff || (cp >= 0xfff9 && cp <= 0xfffb) ||
	    (cp >= 0xe0000 && cp <= 0xe007f)) {
		bk_cmd_refuse(lx->res, -EPERM, BK_CMD_R_UNICODE_FORMAT, i,
		       "invisible or reordering character U+%04X at offset %zu (control, bidi or zero-width)", cp, i);
		return 0;
	}
	return need + 1;
}

/* The checks every byte gets, quoted or not: no NUL, newline or other
 * control character (tab is a blank). */
static int byte_check(struct lexer *lx, size_t i)
{
	unsigned char c = (unsigned char)lx->s[i];
	if (c == '\0')
		return bk_cmd_refuse(lx->res, -EPERM, BK_CMD_R_NUL, i, "NUL byte at offset %zu", i);
	if (c == '\n' || c == '\r')
		return bk_cmd_refuse(lx->res, -EPERM, BK_CMD_R_NEWLINE, i,
			      "newline at offset %zu: write one command line (use ';' or '&&')", i);
	if ((c < 0x20 && c != '\t') || c == 0x7f)
		return bk_cmd_refuse(lx->res, -EPERM, BK_CMD_R_CONTROL_CHAR, i, "control character 0x%02x at offset %zu", c, i);
	return 0;
}

static void put(struct lexer *lx, char c, bool quoted)
{
	if (!lx->in_word) {
		lx->in_word = true;
		lx->wstart = lx->blen;
		lx->wflags = 0;
		lx->digits_only = true;
	}
	lx->buf[lx->blen++] = c;
	if (quoted) {
		lx->wflags |= W_QUOTED;
		lx->digits_only = false;
		lx->prev_unq = 0;
	} else {
		if (c < '0' || c > '9')
			lx->digits_only = false;
		lx->prev_unq = c;
	}
}

/* An empty quoted word ('' or "") is still a word. */
static void start_word(struct lexer *lx, size_t src)
{
	if (!lx->in_word) {
		lx->in_word = true;
		lx->wstart = lx->blen;
		lx->wflags = 0;
		lx->digits_only = true;
		lx->wsrc = src;
		lx->prev_unq = 0;
	}
}

static int add_tok(struct lexer *lx, struct tok t)
{
	if (lx->ntok == BK_CMD_MAX_TOKENS)
		return bk_cmd_refuse(lx->res, -E2BIG, BK_CMD_R_TOO_MANY_WORDS, t.off, "more than %d words and operators",
			      BK_CMD_MAX_TOKENS);
	lx->toks[lx->ntok++] = t;
	return 0;
}

static int end_word(struct lexer *lx)
{
	if (!lx->in_word)
		return 0;
	lx->in_word = false;
	if (lx->nwords == BK_CMD_MAX_WORDS)
		return bk_cmd_refuse(lx->res, -E2BIG, BK_CMD_R_TOO_MANY_WORDS, lx->wsrc, "more than %d words",
			      BK_CMD_MAX_WORDS);
	lx->nwords++;
	struct tok t = {
		.kind = T_WORD,
		.flags = lx->wflags | (lx->need_target ? W_TARGET : 0),
		.off = (uint32_t)lx->wsrc,
		.voff = (uint32_t)lx->wstart,
		.vlen = (uint32_t)(lx->blen - lx->wstart),
	};
	lx->need_target = false;
	lx->buf[lx->blen++] = '\0';
	return add_tok(lx, t);
}

static int lex_single(struct lexer *lx, size_t *pi)
{
	size_t q = *pi, i = q + 1;
	start_word(lx, q);
	lx->wflags |= W_QUOTED;
	lx->digits_only = false;
	for (;;) {
		if (i >= lx->len)
			return bk_cmd_refuse(lx->res, -EINVAL, BK_CMD_R_UNTERMINATED_QUOTE, q,
				      "single quote at offset %zu is never closed", q);
		char c = lx->s[i];
		if (c == '\'')
			break;
		int r = byte_check(lx, i);
		if (r < 0)
			return r;
		if ((unsigned char)c >= 0x80) {
			size_t n = utf8_check(lx, i);
			if (!n)
				return -EPERM;
			for (size_t k = 0; k < n; k++)
				put(lx, lx->s[i + k], true);
			lx->wflags |= W_NONASCII;
			i += n;
			continue;
		}
		put(lx, c, true);
		i++;
	}
	lx->prev_unq = 0;
	*pi = i + 1;
	return 0;
}

static int lex_double(struct lexer *lx, size_t *pi)
{
	size_t q = *pi, i = q + 1;
	start_word(lx, q);
	lx->wflags |= W_QUOTED;
	lx->digits_only = false;
	for (;;) {
		if (i >= lx->len)
			return bk_cmd_refuse(lx->res, -EINVAL, BK_CMD_R_UNTERMINATED_QUOTE, q,
				      "double quote at offset %zu is never closed", q);
		char c = lx->s[i];
		if (c == '"')
			break;
		int r = byte_check(lx, i);
		if (r < 0)
			return r;
		if (c == '$')
			return i + 1 < lx->len && lx->s[i + 1] == '('
				       ? bk_cmd_refuse(lx->res, -EPERM, BK_CMD_R_COMMAND_SUBST, i,
						"command substitution '$(' at offset %zu", i)
				       : bk_cmd_refuse(lx->res, -EPERM, BK_CMD_R_PARAM_EXPANSION, i,
						"'$' at offset %zu: no expansion is allowed (put literal '$' in single quotes)",
						i);
		if (c == '`')
			return bk_cmd_refuse(lx->res, -EPERM, BK_CMD_R_COMMAND_SUBST, i, "command substitution '`' at offset %zu", i);
		if (c == '\\') {
			char n = i + 1 < lx->len ? lx->s[i + 1] : '\0';
			if (n == '"' || n == '\\') {
				put(lx, n, true);
				i += 2;
				continue;
			}
			if (n == '$')
				return bk_cmd_refuse(lx->res, -EPERM, BK_CMD_R_PARAM_EXPANSION, i + 1,
					      "'\\$' at offset %zu: no '$' outside single quotes", i);
			if (n == '`')
				return bk_cmd_refuse(lx->res, -EPERM, BK_CMD_R_COMMAND_SUBST, i + 1,
					      "'\\`' at offset %zu: no '`' outside single quotes", i);
			if (n == '\n')
				return bk_cmd_refuse(lx->res, -EPERM, BK_CMD_R_ESCAPED_NEWLINE, i, "escaped newline at offset %zu", i);
			/* POSIX: any other backslash in "..." is itself */
			put(lx, '\\', true);
			i++;
			continue;
		}
		if ((unsigned char)c >= 0x80) {
			size_t n = utf8_check(lx, i);
			if (!n)
				return -EPERM;
			for (size_t k = 0; k < n; k++)
				put(lx, lx->s[i + k], true);
			lx->wflags |= W_NONASCII;
			i += n;
			continue;
		}
		put(lx, c, true);
		i++;
	}
	lx->prev_unq = 0;
	*pi = i + 1;
	return 0;
}

/* An operator at s[*pi]; the word before it has been handled. */
static int lex_op(struct lexer *lx, size_t *pi, int io_fd)
{
	size_t i = *pi;
	char c = lx->s[i], n = i + 1 < lx->len ? lx->s[i + 1] : '\0';
	struct tok t = { .off = (uint32_t)i };
	size_t used = 1;

	if (lx->need_target)
		return bk_cmd_refuse(lx->res, -EPERM, BK_CMD_R_REDIR_TARGET, i, "redirection without a target before offset %zu", i);
	switch (c) {
	case ';':
		t.kind = T_SEP;
		break;
	case '|':
		if (n == '|') {
			t.kind = T_OR;
			used = 2;
		} else {
			t.kind = T_PIPE;
		}
		break;
	case '&':
		if (n == '&') {
			t.kind = T_AND;
			used = 2;
			break;
		}
		if (n == '>')
			return bk_cmd_refuse(lx->res, -EPERM, BK_CMD_R_BACKGROUND, i,
				      "'&>' at offset %zu: /bin/sh (dash) reads it as '&' (background) then '>'; "
				      "write '>file 2>&1'",
				      i);
		return bk_cmd_refuse(lx->res, -EPERM, BK_CMD_R_BACKGROUND, i, "background '&' at offset %zu", i);
	case '>':
	case '<':
		t.kind = T_REDIR;
		t.fd = (uint8_t)(io_fd >= 0 ? io_fd : c == '>' ? 1 : 0);
		if (n == '(')
			return bk_cmd_refuse(lx->res, -EPERM, BK_CMD_R_PROCESS_SUBST, i, "process substitution '%c(' at offset %zu",
				      c, i);
		if (c == '<' && n == '<')
			return bk_cmd_refuse(lx->res, -EPERM, BK_CMD_R_HEREDOC, i, "here-document '<<' at offset %zu", i);
		if (c == '<' && n == '>')
			return bk_cmd_refuse(lx->res, -EPERM, BK_CMD_R_REDIR_UNSUPPORTED, i, "'<>' at offset %zu is not supported", i);
		if (c == '>' && n == '|')
			return bk_cmd_refuse(lx->res, -EPERM, BK_CMD_R_REDIR_UNSUPPORTED, i, "'>|' at offset %zu is not supported", i);
		if (n == '&') {
			t.redir = c == '>' ? R_DUP_OUT : R_DUP_IN;
			used = 2;
		} else if (c == '>' && n == '>') {
			t.redir = R_APPEND;
			used = 2;
		} else {
			t.redir = c == '>' ? R_WRITE : R_READ;
		}
		break;
	}
	int r = add_tok(lx, t);
	if (r < 0)
		return r;
	if (t.kind == T_REDIR)
		lx->need_target = true;
	*pi = i + used;
	return 0;
}

int bk_cmd_lex(struct lexer *lx)
{
	size_t i = 0;
	int r;
	while (i < lx->len) {
		char c = lx->s[i];
		unsigned char uc = (unsigned char)c;
		if ((r = byte_check(lx, i)) < 0)
			return r;
		if (is_blank(c)) {
			if ((r = end_word(lx)) < 0)
				return r;
			i++;
			continue;
		}
		if (uc >= 0x80)
			return bk_cmd_refuse(lx->res, -EPERM, BK_CMD_R_NON_ASCII, i,
				      "non-ASCII byte 0x%02x at offset %zu outside quotes (look-alike characters are refused)",
				      uc, i);
		if (is_op(c)) {
			int io_fd = -1;
			if ((c == '<' || c == '>') && lx->in_word && lx->digits_only) {
				/* "2>": the digits are the redirection's fd, not a word */
				size_t dl = lx->blen - lx->wstart;
				if (dl != 1 || lx->buf[lx->wstart] > '2')
					return bk_cmd_refuse(lx->res, -EPERM, BK_CMD_R_REDIR_FD, lx->wsrc,
						      "redirection of fd %.*s at offset %zu: only 0, 1 and 2", (int)dl,
						      lx->buf + lx->wstart, lx->wsrc);
				io_fd = lx->buf[lx->wstart] - '0';
				lx->blen = lx->wstart;
				lx->in_word = false;
			} else if ((r = end_word(lx)) < 0) {
				return r;
			}
			if ((r = lex_op(lx, &i, io_fd)) < 0)
				return r;
			continue;
		}
		if (!lx->in_word)
			lx->wsrc = i;
		switch (c) {
		case '\'':
			if ((r = lex_single(lx, &i)) < 0)
				return r;
			continue;
		case '"':
			if ((r = lex_double(lx, &i)) < 0)
				return r;
			continue;
		case '\\': {
			if (i + 1 >= lx->len)
				return bk_cmd_refuse(lx->res, -EPERM, BK_CMD_R_BACKSLASH, i, "trailing backslash at offset %zu", i);
			char n = lx->s[i + 1];
			unsigned char un = (unsigned char)n;
			if (n == '\n')
				return bk_cmd_refuse(lx->res, -EPERM, BK_CMD_R_ESCAPED_NEWLINE, i, "escaped newline at offset %zu", i);
			if ((r = byte_check(lx, i + 1)) < 0)
				return r;
			if (un >= 0x80)
				return bk_cmd_refuse(lx->res, -EPERM, BK_CMD_R_NON_ASCII, i + 1,
					      "non-ASCII byte 0x%02x at offset %zu outside quotes", un, i + 1);
			if (n == '$')
				return bk_cmd_refuse(lx->res, -EPERM, BK_CMD_R_PARAM_EXPANSION, i + 1,
					      "'\\$' at offset %zu: no '$' outside single quotes", i);
			if (n == '`')
				return bk_cmd_refuse(lx->res, -EPERM, BK_CMD_R_COMMAND_SUBST, i + 1,
					      "'\\`' at offset %zu: no '`' outside single quotes", i);
			start_word(lx, i);
			put(lx, n, true);
			i += 2;
			continue;
		}
		case '$':
			if (i + 1 < lx->len && lx->s[i + 1] == '(')
				return bk_cmd_refuse(lx->res, -EPERM, BK_CMD_R_COMMAND_SUBST, i,
					      "command substitution '$(' at offset %zu", i);
			return bk_cmd_refuse(lx->res, -EPERM, BK_CMD_R_PARAM_EXPANSION, i,
				      "'$' at offset %zu: no parameter expansion (put a literal '$' in single quotes)", i);
		case '`':
			return bk_cmd_refuse(lx->res, -EPERM, BK_CMD_R_COMMAND_SUBST, i, "command substitution '`' at offset %zu", i);
		case '(':
		case ')':
			return bk_cmd_refuse(lx->res, -EPERM, BK_CMD_R_SUBSHELL, i, "'%c' at offset %zu: no subshells", c, i);
		case '{':
		case '}':
			return bk_cmd_refuse(lx->res, -EPERM, BK_CMD_R_BRACE, i,
				      "unquoted '%c' at offset %zu: no brace groups or brace expansion (quote it)", c, i);
		case '#':
			if (!lx->in_word)
				return bk_cmd_refuse(lx->res, -EPERM, BK_CMD_R_COMMENT, i, "comment '#' at offset %zu", i);
			break;
		case '~':
			if (!lx->in_word || lx->blen == lx->wstart || lx->prev_unq == '=' || lx->prev_unq == ':')
				return bk_cmd_refuse(lx->res, -EPERM, BK_CMD_R_TILDE, i,
					      "unquoted '~' at offset %zu: no tilde expansion (write the path)", i);
			break;
		case '*':
		case '?':
		case '[':
			put(lx, c, false);
			lx->wflags |= W_GLOB;
			i++;
			continue;
		default:
			break;
		}
		if (!lx->in_word)
			lx->wsrc = i;
		put(lx, c, false);
		i++;
	}
	if ((r = end_word(lx)) < 0)
		return r;
	if (lx->need_target)
		return bk_cmd_refuse(lx->res, -EPERM, BK_CMD_R_REDIR_TARGET, lx->len, "redirection without a target at the end");
	return 0;
}

