/* SPDX-License-Identifier: Apache-2.0 */
/* The command checker's first pass (cmdlex.c), shared with the later
 * passes (cmdparse.c): tokens, the lexer state, and how a refusal is
 * recorded. Internal to agent/parse/. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/parse/cmdparse.h"
#include "lib/util.h"

enum tok_kind { T_WORD, T_SEP, T_PIPE, T_AND, T_OR, T_REDIR };
enum redir_kind { R_WRITE, R_APPEND, R_READ, R_DUP_OUT, R_DUP_IN };

#define W_QUOTED 0x01  /* some part of the word was quoted or escaped */
#define W_GLOB 0x02    /* an unquoted * ? [ */
#define W_TARGET 0x04  /* the word is a redirection's target */
#define W_NONASCII 0x08

struct tok {
	uint8_t kind;
	uint8_t redir;
	uint8_t fd;
	uint8_t flags;
	uint32_t off;  /* source offset */
	uint32_t voff; /* value: buf + voff, NUL-terminated */
	uint32_t vlen;
};

struct lexer {
	const char *s;
	size_t len;
	struct tok *toks;
	size_t ntok, nwords;
	char *buf;
	size_t blen;
	/* the word being built */
	bool in_word;
	size_t wstart, wsrc;
	uint8_t wflags;
	bool digits_only;   /* every byte so far an unquoted digit */
	char prev_unq;      /* last byte appended unquoted, 0 after a quoted one */
	bool need_target;   /* the last token was a redirection operator */
	struct bk_cmd_result *res;
};

/* Record a refusal in res (code, offset, a printable sentence); returns err. */
int bk_cmd_refuse(struct bk_cmd_result *res, int err, const char *code, size_t off, const char *fmt, ...)
	_printf_(5, 6);
/* A short printable rendering of user text for a sentence. */
const char *bk_cmd_shown(const char *s, char *out, size_t outlen);
/* Pass 1: bytes -> words (after quote removal) and operators; every
 * construct outside the accepted subset is refused here. */
int bk_cmd_lex(struct lexer *lx);
