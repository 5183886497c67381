/* SPDX-License-Identifier: Apache-2.0 */
/* Session records: <state_dir>/sessions/<pod_uid>.json, written by one
 * agent and read back by the next so a session's allowed_commands survive
 * a restart. An external JSON format, encoded and parsed here only:
 *
 *   {"pod_uid":…,"session_id":…,"allowed_commands":[…]|null,
 *    "generation":N,"configured_at":UNIX}
 *
 * A file is untrusted input (a damaged disk, an older agent): the same
 * validation as a /configure request applies to its session_id and
 * allowed_commands, and the request parser uses the validators below. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BK_SESSION_ID_MAX 256
#define BK_ALLOWED_MAX 256     /* allowed_commands entries */
#define BK_ALLOWED_LEN_MAX 256 /* bytes of one entry */

struct cJSON;

struct bk_session_record {
	char session_id[BK_SESSION_ID_MAX + 1];
	char **allowed;        /* NULL: unrestricted; else NULL-terminated (owned) */
	uint64_t generation;
	int64_t configured_at; /* unix seconds */
};

/* 1 to max bytes, no control characters (nor spaces unless allowed). */
bool bk_session_text_ok(const char *s, size_t max, bool allow_space);
/* allowed_commands (absent or null: *allowed = NULL, unrestricted) into a
 * NULL-terminated list of command names. Returns NULL, or the sentence
 * that says what is wrong ("out of memory" included); nothing to free
 * then. */
const char *bk_session_allowed_parse(const struct cJSON *v, char ***allowed);

/* The file's text for the session of pod_uid (malloc'd), NULL on ENOMEM. */
char *bk_session_record_encode(const char *pod_uid, const struct bk_session_record *r);
/* Parse a file's text; it must name pod_uid. 0 (free out->allowed with
 * bk_session_record_clear), or -EINVAL when malformed. */
int bk_session_record_parse(const char *txt, size_t len, const char *pod_uid, struct bk_session_record *out);
void bk_session_record_clear(struct bk_session_record *r);
