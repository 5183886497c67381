/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz the command allowlist's parser (agent/cmdparse.c) with the whole
 * input as the command string (NUL bytes included: bk_cmd_check_n).
 *
 * Invariants, checked without the code under test where possible:
 *  - the result is 0, -EPERM, -EINVAL or -E2BIG; a refusal has a code and a
 *    printable, NUL-terminated sentence and an offset inside the input;
 *    acceptance has code "ok" and at least one simple command;
 *  - the resolver only ever sees words that could be allowed: printable
 *    ASCII, no '=', no glob (but "["), none of the refused builtins and
 *    wrappers, at most one call per simple command, never for an input
 *    that is refused before the allowlist pass;
 *  - an accepted input, scanned here by an independent quote tracker, has
 *    no NUL, newline or control byte, no non-ASCII byte outside quotes, no
 *    '$' or '`' outside single quotes, and no unquoted ( ) { } # ~ at the
 *    start of a word, no lone '&' and no "<<";
 *  - a resolver that maps every word to a file nobody allowed accepts only
 *    inputs without a command word (it is never consulted then);
 *  - checking twice gives the same answer.
 */
#include "fuzz.h"
#include "agent/parse/cmdparse.h"

#include <errno.h>

static const char *const names[] = { "ls", "cat", "grep", "awk", "find", "echo", "test", "[", "printf", "sort", "env" };
static const char *real[sizeof(names) / sizeof(names[0])];
#define NNAMES (sizeof(names) / sizeof(names[0]))

static const char *const never[] = { "eval", "exec", "source", ".", "env", "command", "builtin", "nohup", "time",
				     "timeout", "nice", "xargs", "sudo", "su", "ssh", "export", "read", "cd",
				     "alias", "trap", "let", "set", "if", "while", "for", "!", "[[" };

struct rs {
	int calls;
	bool evil;
};

static const char *basename_of(const char *w)
{
	const char *s = strrchr(w, '/');
	return s ? s + 1 : w;
}

static int resolve(void *ud, const char *word, char *out, size_t outlen)
{
	struct rs *st = ud;
	st->calls++;
	CHECK(word[0], "the resolver got an empty word");
	for (const char *p = word; *p; p++)
		CHECK((unsigned char)*p >= 0x20 && (unsigned char)*p < 0x7f, "the resolver got a non-printable word");
	CHECK(!strchr(word, '='), "the resolver got an assignment \"%s\"", word);
	CHECK(!strpbrk(word, "*?[") || !strcmp(word, "["), "the resolver got a glob \"%s\"", word);
	for (size_t i = 0; i < sizeof(never) / sizeof(never[0]); i++)
		CHECK(strcmp(word, never[i]) && strcmp(basename_of(word), never[i]), "the resolver got \"%s\"", word);
	if (st->evil) {
		snprintf(out, outlen, "/evil");
		return 0;
	}
	if (!strncmp(word, "/tmp/", 5)) {
		snprintf(out, outlen, "/tmp/copy-of-sh");
		return 0;
	}
	if (!strcmp(basename_of(word), "ghost"))
		return -ENOENT;
	snprintf(out, outlen, "/usr/bin/%s", basename_of(word));
	return 0;
}

/* Independent scan of an accepted input. */
static void check_accepted_shape(const uint8_t *s, size_t n)
{
	enum { NONE, SQ, DQ } q = NONE;
	bool word_start = true, redir = false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = s[i];
		bool after_redir = redir; /* the byte before was an unescaped < or > */
		redir = false;
		CHECK(c != 0 && c != '\n' && c != '\r' && c != 0x7f && (c >= 0x20 || c == '\t'),
		      "accepted a control byte 0x%02x at %zu", c, i);
		if (q == SQ) {
			if (c == '\'')
				q = NONE;
			word_start = false;
			continue;
		}
		CHECK(c != '$' && c != '`', "accepted '%c' outside single quotes at %zu", c, i);
		if (q == DQ) {
			if (c == '\\' && i + 1 < n)
				i++;
			else if (c == '"')
				q = NONE;
			continue;
		}
		CHECK(c < 0x80, "accepted a non-ASCII byte outside quotes at %zu", i);
		if (c == '\\') {
			CHECK(i + 1 < n, "accepted a trailing backslash");
			i++;
			word_start = false;
			continue;
		}
		CHECK(c != '(' && c != ')' && c != '{' && c != '}', "accepted an unquoted '%c' at %zu", c, i);
		CHECK(!(word_start && (c == '#' || c == '~')), "accepted '%c' at the start of a word at %zu", c, i);
		if (c == '&' && after_redir) {
			word_start = true; /* >&1 <&0 */
			continue;
		}
		if (c == '&') {
			CHECK(i + 1 < n && s[i + 1] == '&', "accepted a lone '&' at %zu", i);
			i++;
			word_start = true;
			continue;
		}
		if (c == '<')
			CHECK(!(i + 1 < n && s[i + 1] == '<'), "accepted a here-document at %zu", i);
		if (c == '\'') {
			q = SQ;
			word_start = false;
		} else if (c == '"') {
			q = DQ;
			word_start = false;
		} else {
			word_start = c == ' ' || c == '\t' || c == ';' || c == '|' || c == '<' || c == '>';
			redir = c == '<' || c == '>';
		}
	}
	CHECK(q == NONE, "accepted an unterminated quote");
}

static int check(const uint8_t *data, size_t size, bool evil, struct bk_cmd_result *res, int *calls)
{
	for (size_t i = 0; i < NNAMES; i++) {
		static char keys[NNAMES][64];
		snprintf(keys[i], sizeof(keys[i]), "/usr/bin/%s", names[i]);
		real[i] = keys[i];
	}
	struct rs st = { .evil = evil };
	struct bk_cmd_policy pol = {
		.names = names, .real = real, .n = NNAMES, .resolve = resolve, .ud = &st, .cwd = "/workspace/sub",
	};
	int r = bk_cmd_check_n((const char *)data, size, &pol, res);
	CHECK(r == 0 || r == -EPERM || r == -EINVAL || r == -E2BIG, "unexpected return %d", r);
	CHECK(res->code != NULL, "no code");
	CHECK(fuzz_terminated(res->reason, sizeof(res->reason)), "reason not terminated");
	for (const char *p = res->reason; *p; p++)
		CHECK((unsigned char)*p >= 0x20 && (unsigned char)*p < 0x7f, "reason not printable ASCII");
	if (r == 0) {
		CHECK(!strcmp(res->code, BK_CMD_OK), "accepted with code %s", res->code);
		CHECK(res->n_commands >= 1, "accepted with no command");
		CHECK(st.calls <= (int)res->n_commands, "%d resolver calls for %u commands", st.calls, res->n_commands);
	} else {
		CHECK(strcmp(res->code, BK_CMD_OK), "refused with code ok");
		CHECK(res->reason[0], "refused (%s) without a sentence", res->code);
		CHECK(res->offset <= size || r == -E2BIG, "offset %zu beyond %zu bytes", res->offset, size);
		bool policy_pass = !strcmp(res->code, BK_CMD_R_NOT_ALLOWED) || !strcmp(res->code, BK_CMD_R_NOT_FOUND) ||
				   !strcmp(res->code, BK_CMD_R_RESOLVE);
		if (!policy_pass)
			CHECK(st.calls == 0, "refused for %s after %d resolver calls", res->code, st.calls);
	}
	*calls = st.calls;
	return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > BK_CMD_MAX_LEN + 16)
		return 0;
	struct bk_cmd_result a, b, e;
	int calls_a, calls_b, calls_e;
	int ra = check(data, size, false, &a, &calls_a);
	int rb = check(data, size, false, &b, &calls_b);
	CHECK(ra == rb && !strcmp(a.code, b.code) && !strcmp(a.reason, b.reason) && a.offset == b.offset,
	      "two checks disagree: %s / %s", a.code, b.code);
	if (ra == 0)
		check_accepted_shape(data, size);
	int re = check(data, size, true, &e, &calls_e);
	if (re == 0)
		CHECK(calls_e == 0, "accepted a command that resolves to a file nobody allowed");
	/* the evil resolver changes only the allowlist pass */
	if (ra < 0 && strcmp(a.code, BK_CMD_R_NOT_ALLOWED) && strcmp(a.code, BK_CMD_R_NOT_FOUND))
		CHECK(re == ra && !strcmp(e.code, a.code), "the resolver changed a %s refusal into %s", a.code, e.code);
	return 0;
}
