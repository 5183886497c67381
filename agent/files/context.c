/* SPDX-License-Identifier: Apache-2.0 */
/* The helper's working context (helper side): the replies that end it — a
 * result, or a refusal with its status, code and sentence — its time
 * budget, and allocation that answers 507 resource_limit instead of returning
 * NULL. The operations (ops.c, walk.c, wipe.c) use these; the process
 * itself (helper.c) dispatches to them. */
#include "agent/files/internal.h"
#include "agent/parse/text.h"

#include <stdarg.h>
#include <time.h>

/* ---- replies ------------------------------------------------------------------------------ */

_Noreturn void bkf_reply(struct hctx *h, const struct bk_file_result *r)
{
	if (bkf_result_bytes(r) > RESULT_MAX)
		bkf_fail(h, 422, "unviewable", "the response would be larger than %u bytes", RESULT_MAX);
	if (bkf_send_result(h->chan, r) < 0)
		_exit(4);
	_exit(0);
}

_Noreturn void bkf_fail(struct hctx *h, int status, const char *code, const char *fmt, ...)
{
	char detail[BK_FILE_DETAIL_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	if (bkf_send_error(h->chan, status, code, detail) < 0)
		_exit(4);
	_exit(0);
}

/* err is a positive errno; path the virtual path it concerns. */
_Noreturn void bkf_errno(struct hctx *h, int err, const char *path)
{
	switch (err) {
	case ENOENT:
		bkf_fail(h, 404, "not_found", "%s: no such file or directory", path);
	case ENOTDIR:
		bkf_fail(h, 400, "not_a_directory", "%s: a component of the path is not a directory", path);
	case EISDIR:
		bkf_fail(h, 400, "is_directory", "%s is a directory", path);
	case EXDEV: /* the reference's answer to a path outside the roots: 400 */
		bkf_fail(h, 400, "path_outside_roots", "Invalid path outside allowed roots: %s (it crosses a mount)", path);
	case ELOOP:
		bkf_fail(h, 400, "path_outside_roots",
			 "Invalid path outside allowed roots: %s (a /proc magic link, or too many levels of links)", path);
	case EACCES:
	case EPERM:
		bkf_fail(h, 403, "permission_denied", "%s: permission denied for the sandbox user", path);
	case EROFS:
		bkf_fail(h, 403, "read_only_root", "%s is on a read-only file system", path);
	case ENOSPC:
	case EDQUOT:
		bkf_fail(h, 507, "no_space", "%s: no space left on the device; nothing was changed", path);
	case ENAMETOOLONG:
		bkf_fail(h, 400, "name_too_long", "%s: a name is too long", path);
	case EFBIG:
		bkf_fail(h, 413, "too_large", "%s: the file is too large", path);
	case EAGAIN:
		bkf_fail(h, 503, "retry", "%s: the path changed during resolution; try again", path);
	case ENOMEM:
		bkf_out_of_memory(h);
	default:
		bkf_fail(h, 500, "io_error", "%s: %s", path, strerror(err));
	}
}

_Noreturn void bkf_out_of_memory(struct hctx *h)
{
	bkf_fail(h, 507, "resource_limit", "the file operation needs more than the file helper's memory limit (%llu MiB)",
		 HELPER_MEMORY_MAX >> 20);
}

/* Walks stop (truncated) at the wall budget or, well before RLIMIT_CPU
 * kills the helper, at the CPU budget. */
bool bkf_over_budget(const struct hctx *h)
{
	if (now_ns() > h->budget_end)
		return true;
	struct timespec ts;
	return clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) == 0 &&
	       (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u > WORK_CPU_BUDGET_MS;
}

char *bkf_sanitized(struct hctx *h, const char *s, size_t n)
{
	size_t l;
	char *c = bk_utf8_sanitize(s, n, &l);
	if (!c)
		bkf_out_of_memory(h);
	return c;
}

char *bkf_strdup(struct hctx *h, const char *s)
{
	char *c = strdup(s);
	if (!c)
		bkf_out_of_memory(h);
	return c;
}

void *bkf_calloc(struct hctx *h, size_t n, size_t sz)
{
	void *p = calloc(n ? n : 1, sz);
	if (!p)
		bkf_out_of_memory(h);
	return p;
}

