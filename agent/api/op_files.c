/* SPDX-License-Identifier: Apache-2.0 */
/* The JSON edge of the file operations: arguments are checked and turned
 * into a struct bk_file_req (paths parsed and confined lexically here,
 * again in the helper, and resolved by openat2 there), agent/files/ runs
 * it, and the struct bk_file_result it answers is turned into the
 * response. Every refusal, the API edge's own and the helper's, is a
 * status, a code and a detail sentence; the audit line gets that status. */
#include "agent/api/op_files.h"
#include "agent/files/files.h"
#include "agent/parse/rxbound.h"
#include "lib/util.h"

#include <stdarg.h>

/* ---- refusals ------------------------------------------------------------------------------- */

_printf_(4, 5) static bool refuse(struct bk_file_result *res, int status, const char *code, const char *fmt, ...)
{
	res->status = status;
	snprintf(res->code, sizeof(res->code), "%s", code);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(res->detail, sizeof(res->detail), fmt, ap);
	va_end(ap);
	return false;
}

static bool path_error(struct bk_file_result *res, int r, const char *field)
{
	switch (r) {
	case -EILSEQ:
		return refuse(res, 400, "bad_request", "\"%s\" contains a NUL byte", field);
	case -ENAMETOOLONG:
		return refuse(res, 400, "name_too_long", "\"%s\" is longer than %d bytes or has a name over %d bytes",
			      field, BK_VPATH_MAX, BK_NAME_MAX);
	case -EPERM:
		return refuse(res, 403, "path_outside_roots",
			      "\"%s\" is outside the allowed roots (/workspace, /mnt/user-data/outputs, "
			      "/mnt/user-data/uploads, /mnt/skills, /tmp)",
			      field);
	default:
		return refuse(res, 400, "bad_request", "\"%s\" must be a non-empty path", field);
	}
}

/* ---- arguments ------------------------------------------------------------------------------- */

/* A path field: required, or the default (workspace) when absent. */
static bool get_path(const cJSON *args, const char *field, bool required, struct bk_vpath *vp,
		     struct bk_file_result *res)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, field);
	if (!v || cJSON_IsNull(v)) {
		if (required)
			return refuse(res, 400, "bad_request", "\"%s\" is required", field);
		bk_vpath_parse("/workspace", 10, vp);
		return true;
	}
	if (!cJSON_IsString(v))
		return refuse(res, 400, "bad_request", "\"%s\" must be a string", field);
	int r = bk_vpath_parse(v->valuestring, strlen(v->valuestring), vp);
	return r < 0 ? path_error(res, r, field) : true;
}

static const char *get_str(const cJSON *args, const char *field)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, field);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static bool absent(const cJSON *args, const char *field)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, field);
	return !v || cJSON_IsNull(v);
}

static bool get_int(const cJSON *v, long long lo, long long hi, long long *out)
{
	if (!cJSON_IsNumber(v) || v->valuedouble < (double)lo || v->valuedouble > (double)hi ||
	    v->valuedouble != (double)(long long)v->valuedouble)
		return false;
	*out = (long long)v->valuedouble;
	return true;
}

static bool writable(const struct bk_vpath *vp, struct bk_file_result *res)
{
	if (!vp->writable)
		return refuse(res, 403, "read_only_root", "%s is read-only", bk_vroots[vp->root].path);
	return true;
}

static bool parse_create(const cJSON *args, struct bk_file_req *q, struct bk_file_result *res)
{
	if (!get_path(args, "path", true, &q->vp, res) || !writable(&q->vp, res))
		return false;
	if (bk_vpath_is_root(&q->vp) || q->vp.trailing_slash)
		return refuse(res, 400, "is_directory", "%s is a directory", q->vp.abs);
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(args, "content");
	if (!cJSON_IsString(c))
		return refuse(res, 400, "bad_request", "\"content\" must be a string");
	q->content = c->valuestring;
	q->content_len = strlen(c->valuestring);
	return true;
}

static bool parse_view(const cJSON *args, struct bk_file_req *q, struct bk_file_result *res)
{
	if (!get_path(args, "path", true, &q->vp, res))
		return false;
	const cJSON *vr = cJSON_GetObjectItemCaseSensitive(args, "view_range");
	if (vr && !cJSON_IsNull(vr)) {
		long long s, en;
		if (!cJSON_IsArray(vr) || cJSON_GetArraySize(vr) != 2 ||
		    !get_int(cJSON_GetArrayItem(vr, 0), 1, 1LL << 40, &s) ||
		    !get_int(cJSON_GetArrayItem(vr, 1), -1, 1LL << 40, &en) || en == 0 || (en != -1 && en < s))
			return refuse(res, 400, "invalid_range",
				      "\"view_range\" must be [start, end]: 1-based, inclusive, end >= start "
				      "or -1 for the end of the file");
		q->has_range = true;
		q->range_start = s;
		q->range_end = en;
	}
	return true;
}

static bool parse_str_replace(const cJSON *args, struct bk_file_req *q, struct bk_file_result *res)
{
	if (!get_path(args, "path", true, &q->vp, res) || !writable(&q->vp, res))
		return false;
	if (bk_vpath_is_root(&q->vp))
		return refuse(res, 400, "is_directory", "%s is a directory", q->vp.abs);
	q->old_str = get_str(args, "old_str");
	if (!q->old_str || !q->old_str[0])
		return refuse(res, 400, "bad_request", "\"old_str\" must be a non-empty string");
	q->new_str = get_str(args, "new_str");
	if (!q->new_str) {
		if (!absent(args, "new_str"))
			return refuse(res, 400, "bad_request", "\"new_str\" must be a string");
		q->new_str = "";
	}
	q->old_len = strlen(q->old_str);
	q->new_len = strlen(q->new_str);
	const cJSON *ra = cJSON_GetObjectItemCaseSensitive(args, "replace_all");
	if (ra && !cJSON_IsNull(ra) && !cJSON_IsBool(ra))
		return refuse(res, 400, "bad_request", "\"replace_all\" must be a boolean");
	q->replace_all = cJSON_IsTrue(ra);
	return true;
}

static bool parse_glob(const cJSON *args, struct bk_file_req *q, struct bk_file_result *res)
{
	const char *pat = get_str(args, "pattern");
	if (!pat || !pat[0])
		return refuse(res, 400, "bad_request", "\"pattern\" must be a non-empty string");
	if (pat[0] == '/') {
		/* "/workspace/src/x*.c": the literal prefix is the base */
		char base[BK_GLOB_MAX + 1];
		const char *rest = bk_glob_split_abs(pat, base, sizeof(base));
		if (!rest)
			return refuse(res, 400, "bad_request", "\"pattern\" is too long");
		int r = bk_vpath_parse(base, strlen(base), &q->vp);
		if (r < 0)
			return path_error(res, r, "pattern");
		pat = rest;
	} else if (!get_path(args, "path", false, &q->vp, res)) {
		return false;
	}
	int r = bk_glob_check(pat);
	if (r == -EPERM)
		return refuse(res, 400, "bad_request", "\"pattern\" may not contain \"..\"");
	if (r < 0)
		return refuse(res, 400, "bad_request", "\"pattern\" must be a glob pattern of at most %d bytes",
			      BK_GLOB_MAX);
	q->pattern = pat;
	return true;
}

static bool parse_grep(const cJSON *args, struct bk_file_req *q, struct bk_file_result *res)
{
	q->pattern = get_str(args, "pattern");
	if (!q->pattern || !q->pattern[0] || strlen(q->pattern) > BK_FILE_GREP_PATTERN_MAX)
		return refuse(res, 400, "bad_request", "\"pattern\" must be a non-empty string of at most %d bytes",
			      BK_FILE_GREP_PATTERN_MAX);
	if (!get_path(args, "path", false, &q->vp, res))
		return false;
	char why[256];
	if (bk_rx_check(q->pattern, why, sizeof(why)) < 0)
		return refuse(res, 422, "pattern_too_complex", "%s", why);
	q->glob = get_str(args, "glob");
	if (!q->glob && !absent(args, "glob"))
		return refuse(res, 400, "bad_request", "\"glob\" must be a string");
	if (q->glob && bk_glob_check(q->glob) < 0)
		return refuse(res, 400, "bad_request",
			      "\"glob\" must be a relative glob pattern of at most %d bytes, without \"..\"", BK_GLOB_MAX);
	q->max_matches = BK_FILE_GREP_MATCH_DEFAULT;
	const cJSON *mm = cJSON_GetObjectItemCaseSensitive(args, "max_matches");
	if (mm && !cJSON_IsNull(mm)) {
		long long v;
		if (!get_int(mm, 1, BK_FILE_GREP_MATCH_MAX, &v))
			return refuse(res, 400, "bad_request", "\"max_matches\" must be an integer from 1 to %d",
				      BK_FILE_GREP_MATCH_MAX);
		q->max_matches = (long)v;
	}
	return true;
}

/* q->paths is the caller's to free. */
static bool parse_present(const cJSON *args, struct bk_file_req *q, struct bk_file_result *res)
{
	const cJSON *fp = cJSON_GetObjectItemCaseSensitive(args, "filepaths");
	if (!cJSON_IsArray(fp) || cJSON_GetArraySize(fp) < 1 || cJSON_GetArraySize(fp) > BK_FILE_PRESENT_MAX)
		return refuse(res, 400, "bad_request", "\"filepaths\" must be an array of 1 to %d paths",
			      BK_FILE_PRESENT_MAX);
	q->paths = calloc((size_t)cJSON_GetArraySize(fp), sizeof(*q->paths));
	if (!q->paths)
		return refuse(res, 503, "out_of_memory", "out of memory");
	const cJSON *it;
	cJSON_ArrayForEach(it, fp)
	{
		if (!cJSON_IsString(it))
			return refuse(res, 400, "bad_request", "\"filepaths\" must hold strings");
		struct bk_vpath *vp = &q->paths[q->npaths];
		int r = bk_vpath_parse(it->valuestring, strlen(it->valuestring), vp);
		if (r < 0)
			return path_error(res, r, "filepaths");
		if (bk_vpath_is_root(vp))
			return refuse(res, 400, "is_directory", "%s is a directory", vp->abs);
		q->npaths++;
	}
	return true;
}

/* The validated request, or false with the refusal in res. */
static bool parse_req(enum bk_file_op op, const cJSON *args, struct bk_file_req *q, struct bk_file_result *res)
{
	q->op = op;
	switch (op) {
	case BK_FILE_CREATE:
		return parse_create(args, q, res);
	case BK_FILE_VIEW:
		return parse_view(args, q, res);
	case BK_FILE_STR_REPLACE:
		return parse_str_replace(args, q, res);
	case BK_FILE_LS:
		return get_path(args, "path", false, &q->vp, res);
	case BK_FILE_GLOB:
		return parse_glob(args, q, res);
	case BK_FILE_GREP:
		return parse_grep(args, q, res);
	case BK_FILE_PRESENT:
		return parse_present(args, q, res);
	default:
		return refuse(res, 404, "unknown_op", "unknown operation");
	}
}

/* ---- the response ---------------------------------------------------------------------------- */

static cJSON *entries_json(const struct bk_file_result *r)
{
	cJSON *arr = cJSON_CreateArray();
	for (size_t i = 0; i < r->nentries; i++) {
		cJSON *e = cJSON_CreateObject();
		cJSON_AddStringToObject(e, "name", r->entries[i].name);
		cJSON_AddStringToObject(e, "type", bk_file_type_name(r->entries[i].type));
		cJSON_AddNumberToObject(e, "size", (double)r->entries[i].size);
		cJSON_AddItemToArray(arr, e);
	}
	return arr;
}

static void add_view(cJSON *b, const struct bk_file_req *q, const struct bk_file_result *r)
{
	cJSON_AddStringToObject(b, "path", q->vp.abs);
	if (r->is_directory) {
		cJSON_AddStringToObject(b, "content", "");
		cJSON_AddNumberToObject(b, "lines", 0);
		cJSON_AddBoolToObject(b, "is_directory", true);
		cJSON_AddItemToObject(b, "entries", entries_json(r));
		cJSON_AddBoolToObject(b, "truncated", r->truncated);
		return;
	}
	cJSON_AddStringToObject(b, "content", r->content ? r->content : "");
	cJSON_AddNumberToObject(b, "lines", (double)r->lines);
	cJSON_AddNumberToObject(b, "total_lines", (double)r->total_lines);
	cJSON_AddNumberToObject(b, "size", (double)r->size);
}

static void add_grep(cJSON *b, const struct bk_file_result *r)
{
	cJSON *arr = cJSON_AddArrayToObject(b, "matches");
	for (size_t i = 0; i < r->ngrep; i++) {
		cJSON *m = cJSON_CreateObject();
		cJSON_AddStringToObject(m, "path", r->grep[i].path);
		cJSON_AddNumberToObject(m, "line", (double)r->grep[i].line);
		cJSON_AddStringToObject(m, "text", r->grep[i].text);
		cJSON_AddItemToArray(arr, m);
	}
	cJSON_AddBoolToObject(b, "truncated", r->truncated);
	if (r->grep_error)
		cJSON_AddStringToObject(b, "error", r->grep_error);
}

static void add_present(cJSON *b, const struct bk_file_result *r)
{
	cJSON *files = cJSON_AddArrayToObject(b, "files");
	cJSON *copies = cJSON_AddArrayToObject(b, "copy_operations");
	for (size_t i = 0; i < r->ncopies; i++) {
		cJSON *c = cJSON_CreateObject();
		cJSON_AddStringToObject(c, "source", r->copies[i].source);
		cJSON_AddStringToObject(c, "destination", r->copies[i].destination);
		cJSON_AddItemToArray(copies, c);
	}
	for (size_t i = 0; i < r->nfiles; i++) {
		cJSON *f = cJSON_CreateObject();
		cJSON_AddStringToObject(f, "path", r->files[i].path);
		cJSON_AddNumberToObject(f, "size", (double)r->files[i].size);
		cJSON_AddStringToObject(f, "mime", r->files[i].mime);
		/* the helper streamed each file; the agent hashed it */
		cJSON_AddStringToObject(f, "sha256", r->files[i].sha256);
		cJSON_AddItemToArray(files, f);
	}
}

/* The body of a 200 answer: the same keys, in the same order, as API.md. */
static cJSON *body_json(const struct bk_file_req *q, const struct bk_file_result *r)
{
	cJSON *b = cJSON_CreateObject();
	switch (q->op) {
	case BK_FILE_CREATE:
		cJSON_AddStringToObject(b, "path", q->vp.abs);
		cJSON_AddNumberToObject(b, "size", (double)r->size);
		cJSON_AddBoolToObject(b, "created", r->created);
		break;
	case BK_FILE_VIEW:
		add_view(b, q, r);
		break;
	case BK_FILE_STR_REPLACE:
		cJSON_AddStringToObject(b, "path", q->vp.abs);
		cJSON_AddBoolToObject(b, "replaced", true);
		cJSON_AddNumberToObject(b, "occurrences", (double)r->occurrences);
		break;
	case BK_FILE_LS:
		cJSON_AddStringToObject(b, "path", q->vp.abs);
		cJSON_AddItemToObject(b, "entries", entries_json(r));
		cJSON_AddBoolToObject(b, "truncated", r->truncated);
		break;
	case BK_FILE_GLOB: {
		cJSON *arr = cJSON_AddArrayToObject(b, "matches");
		for (size_t i = 0; i < r->nmatches; i++)
			cJSON_AddItemToArray(arr, cJSON_CreateString(r->matches[i]));
		cJSON_AddBoolToObject(b, "truncated", r->truncated);
		break;
	}
	case BK_FILE_GREP:
		add_grep(b, r);
		break;
	case BK_FILE_PRESENT:
		add_present(b, r);
		break;
	default: /* the wipe answers no request */
		break;
	}
	return b;
}

/* The response for res; a body over BK_FILE_RESULT_MAX bytes is refused
 * (res->status then says so). */
static char *respond(const struct bk_file_req *q, struct bk_file_result *res)
{
	if (res->status != 200 && res->layer[0]) {
		/* the helper's isolation could not be made: which layer */
		cJSON *b = cJSON_CreateObject();
		cJSON_AddStringToObject(b, "detail", res->detail);
		cJSON_AddStringToObject(b, "code", res->code);
		cJSON_AddStringToObject(b, "layer", res->layer);
		return bk_api_respond(res->status, b);
	}
	if (res->status != 200)
		return bk_api_error(res->status, res->code, "%s", res->detail);
	char *out = bk_api_respond(200, body_json(q, res));
	/* {"status":200,"body":BODY} */
	static const size_t frame = sizeof("{\"status\":200,\"body\":}") - 1;
	if (out && strlen(out) - frame > BK_FILE_RESULT_MAX) {
		free(out);
		refuse(res, 422, "unviewable", "the response would be larger than %u bytes", BK_FILE_RESULT_MAX);
		return bk_api_error(res->status, res->code, "%s", res->detail);
	}
	return out;
}

/* ---- the routes ------------------------------------------------------------------------------ */

static int op_of(const char *op)
{
	for (int i = BK_FILE_CREATE; i <= BK_FILE_PRESENT; i++)
		if (streq(op, bk_file_op_name((enum bk_file_op)i)))
			return i;
	return -1;
}

bool bk_files_is_op(const char *op) { return op_of(op) >= 0; }

char *bk_files_op(struct bk_agent *a, const struct bk_pod *pod, const char *op, const cJSON *args)
{
	int o = op_of(op);
	if (o < 0)
		return bk_api_error(404, "unknown_op", "unknown operation");
	uint64_t t0 = now_ns();
	_cleanup_free_ struct bk_file_req *q = calloc(1, sizeof(*q));
	if (!q)
		return bk_api_error(503, "out_of_memory", "out of memory");
	struct bk_file_result res = { 0 };
	char *out;
	if (parse_req((enum bk_file_op)o, args, q, &res)) {
		bk_files_run(a, pod, q, &res);
		out = respond(q, &res);
	} else {
		out = bk_api_error(res.status, res.code, "%s", res.detail);
	}
	bk_files_audit(pod, (enum bk_file_op)o, &q->vp, res.status, t0);
	bk_file_result_free(&res);
	free(q->paths);
	return out;
}
