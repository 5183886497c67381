/* SPDX-License-Identifier: Apache-2.0 */
/* The JSON edge of the file operations, in the reference sidecar's shapes
 * (sidecar/main.py models, sidecar_files.py): arguments are checked and
 * turned into a struct bk_file_req (paths mapped and confined lexically
 * here, again in the helper, and resolved by openat2 there), agent/files/
 * runs it, and the struct bk_file_result it answers is turned into the
 * response. Every refusal, the API edge's own and the helper's, is a
 * status, a code and a detail; a request body the reference's models would
 * not accept is 422 with FastAPI's list detail. The audit line gets the
 * status. */
#include "agent/api/op_files.h"
#include "agent/files/files.h"
#include "agent/parse/rxbound.h"
#include "lib/util.h"

#include <limits.h>
#include <stdarg.h>
#include <time.h>

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

/* A body the reference's model refuses: 422, code validation_error; the
 * detail holds "field\ttype\tmessage" until respond() makes it FastAPI's
 * [{"type", "loc": ["body", field], "msg"}]. */
static bool invalid(struct bk_file_result *res, const char *field, const char *type, const char *msg)
{
	return refuse(res, 422, "validation_error", "%s\t%s\t%s", field, type, msg);
}

static bool path_error(struct bk_file_result *res, int r, const char *field, const char *given)
{
	switch (r) {
	case -EILSEQ:
		return refuse(res, 400, "bad_request", "\"%s\" contains a NUL byte", field);
	case -ENAMETOOLONG:
		return refuse(res, 400, "name_too_long", "\"%s\" is longer than %d bytes or has a name over %d bytes",
			      field, BK_VPATH_MAX, BK_NAME_MAX);
	case -EPERM:
		/* the reference's answer (400) and sentence */
		return refuse(res, 400, "path_outside_roots", "Invalid path outside allowed roots: %.900s", given);
	default:
		return refuse(res, 400, "bad_request", "Path is required");
	}
}

/* ---- arguments ------------------------------------------------------------------------------- */

/* A path field: required, or "/" (the workspace) when absent. */
static bool get_path_as(const cJSON *args, const char *field, bool required, bool ls, struct bk_vpath *vp,
			struct bk_file_result *res)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, field);
	if (!v || (cJSON_IsNull(v) && !required)) {
		if (required)
			return invalid(res, field, "missing", "Field required");
		bk_vpath_parse("/", 1, vp);
		return true;
	}
	if (!cJSON_IsString(v))
		return invalid(res, field, "string_type", "Input should be a valid string");
	size_t n = strlen(v->valuestring);
	int r = ls ? bk_vpath_parse_ls(v->valuestring, n, vp) : bk_vpath_parse(v->valuestring, n, vp);
	return r < 0 ? path_error(res, r, field, v->valuestring) : true;
}

static bool get_path(const cJSON *args, const char *field, bool required, struct bk_vpath *vp,
		     struct bk_file_result *res)
{
	return get_path_as(args, field, required, false, vp, res);
}

/* A required string field (NULL and the refusal in res when it is not). */
static const char *need_str(const cJSON *args, const char *field, struct bk_file_result *res)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, field);
	if (!v) {
		invalid(res, field, "missing", "Field required");
		return NULL;
	}
	if (!cJSON_IsString(v)) {
		invalid(res, field, "string_type", "Input should be a valid string");
		return NULL;
	}
	return v->valuestring;
}

/* An optional string field: *out NULL when absent or null. */
static bool opt_str(const cJSON *args, const char *field, const char **out, struct bk_file_result *res)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, field);
	*out = NULL;
	if (!v || cJSON_IsNull(v))
		return true;
	if (!cJSON_IsString(v))
		return invalid(res, field, "string_type", "Input should be a valid string");
	*out = v->valuestring;
	return true;
}

/* UTF-8 characters of s (Python's len of the str), stopping past max. */
static size_t chars(const char *s, size_t max)
{
	size_t c = 0;
	for (; *s && c <= max; s++)
		c += ((unsigned char)*s & 0xc0) != 0x80;
	return c;
}

static bool content_field(const cJSON *args, const char *field, const char **out, size_t *len,
			  struct bk_file_result *res)
{
	const char *s = need_str(args, field, res);
	if (!s)
		return false;
	if (chars(s, BK_FILE_CONTENT_MAX) > BK_FILE_CONTENT_MAX) {
		char msg[80];
		snprintf(msg, sizeof(msg), "String should have at most %u characters", BK_FILE_CONTENT_MAX);
		return invalid(res, field, "string_too_long", msg);
	}
	*out = s;
	*len = strlen(s);
	return true;
}

static bool get_int(const cJSON *v, long long lo, long long hi, long long *out)
{
	if (!cJSON_IsNumber(v) || v->valuedouble < (double)lo || v->valuedouble > (double)hi ||
	    v->valuedouble != (double)(long long)v->valuedouble)
		return false;
	*out = (long long)v->valuedouble;
	return true;
}

static bool writable(const struct bk_vpath *vp, const char *verb, struct bk_file_result *res)
{
	if (!vp->writable)
		return refuse(res, 403, "read_only_root", "Cannot %s read-only path: %s", verb, vp->abs);
	return true;
}

static bool parse_create(const cJSON *args, struct bk_file_req *q, struct bk_file_result *res)
{
	if (!get_path(args, "path", true, &q->vp, res))
		return false;
	if (!content_field(args, "content", &q->content, &q->content_len, res))
		return false;
	if (!writable(&q->vp, "write to", res))
		return false;
	if (bk_vpath_is_root(&q->vp) || q->vp.trailing_slash)
		return refuse(res, 400, "is_directory", "%s is a directory", q->vp.abs);
	return true;
}

static bool parse_view(const cJSON *args, struct bk_file_req *q, struct bk_file_result *res)
{
	if (!get_path(args, "path", true, &q->vp, res))
		return false;
	const cJSON *vr = cJSON_GetObjectItemCaseSensitive(args, "view_range");
	if (vr && !cJSON_IsNull(vr)) {
		/* Optional[list[int]]; only a pair is a range (the reference
		 * ignores any other length) */
		if (!cJSON_IsArray(vr))
			return invalid(res, "view_range", "list_type", "Input should be a valid list");
		long long v[2] = { 0, 0 };
		int i = 0;
		const cJSON *it;
		cJSON_ArrayForEach(it, vr)
		{
			long long x;
			if (!get_int(it, -(1LL << 40), 1LL << 40, &x))
				return invalid(res, "view_range", "int_type", "Input should be a valid integer");
			if (i < 2)
				v[i] = x;
			i++;
		}
		if (i == 2) {
			q->has_range = true;
			q->range_start = v[0];
			q->range_end = v[1];
		}
	}
	return true;
}

static bool parse_str_replace(const cJSON *args, struct bk_file_req *q, struct bk_file_result *res)
{
	if (!get_path(args, "path", true, &q->vp, res))
		return false;
	if (!content_field(args, "old_str", &q->old_str, &q->old_len, res) ||
	    !content_field(args, "new_str", &q->new_str, &q->new_len, res))
		return false;
	const cJSON *ra = cJSON_GetObjectItemCaseSensitive(args, "replace_all");
	if (ra && !cJSON_IsBool(ra))
		return invalid(res, "replace_all", "bool_type", "Input should be a valid boolean");
	q->replace_all = cJSON_IsTrue(ra);
	if (!writable(&q->vp, "edit", res))
		return false;
	if (bk_vpath_is_root(&q->vp))
		return refuse(res, 400, "is_directory", "%s is a directory", q->vp.abs);
	if (!q->old_str[0]) /* "".count() is len + 1: never a unique match */
		return refuse(res, 400, "not_unique", "old_str must not be empty");
	return true;
}

static bool parse_glob(const cJSON *args, struct bk_file_req *q, struct bk_file_result *res)
{
	const char *pat = need_str(args, "pattern", res);
	if (!pat || !get_path(args, "path", false, &q->vp, res))
		return false;
	/* the reference: pattern.lstrip("/"), then Path(base).rglob(pattern) */
	while (*pat == '/')
		pat++;
	q->pattern = pat;
	if (!pat[0])
		return true; /* no pattern: no matches (respond() answers []) */
	int r = bk_glob_check(pat);
	if (r == -EPERM)
		return refuse(res, 400, "bad_request", "\"pattern\" may not contain \"..\"");
	if (r < 0)
		return refuse(res, 400, "bad_request", "\"pattern\" must be a glob pattern of at most %d bytes",
			      BK_GLOB_MAX);
	return true;
}

static bool parse_grep(const cJSON *args, struct bk_file_req *q, struct bk_file_result *res)
{
	q->pattern = need_str(args, "pattern", res);
	if (!q->pattern || !get_path(args, "path", false, &q->vp, res))
		return false;
	if (!opt_str(args, "glob", &q->glob, res))
		return false;
	if (q->glob && !q->glob[0])
		q->glob = NULL; /* the reference: an empty glob filters nothing */
	if (q->glob && strlen(q->glob) > BK_GLOB_MAX)
		return refuse(res, 400, "bad_request", "\"glob\" is longer than %d bytes", BK_GLOB_MAX);
	q->max_matches = BK_FILE_GREP_MATCH_DEFAULT;
	const cJSON *mm = cJSON_GetObjectItemCaseSensitive(args, "max_matches");
	if (mm) {
		long long v;
		if (!get_int(mm, LLONG_MIN / 2, LLONG_MAX / 2, &v))
			return invalid(res, "max_matches", "int_type", "Input should be a valid integer");
		/* the reference: max(1, min(max_matches, 5000)) */
		q->max_matches = v < 1 ? 1 : v > BK_FILE_GREP_MATCH_MAX ? BK_FILE_GREP_MATCH_MAX : (long)v;
	}
	char why[256];
	if (bk_rx_check(q->pattern, why, sizeof(why)) < 0)
		return refuse(res, 422, "pattern_too_complex", "%s", why);
	return true;
}

/* q->paths is the caller's to free. */
static bool parse_present(const cJSON *args, struct bk_file_req *q, struct bk_file_result *res)
{
	const cJSON *fp = cJSON_GetObjectItemCaseSensitive(args, "filepaths");
	if (!fp)
		return invalid(res, "filepaths", "missing", "Field required");
	if (!cJSON_IsArray(fp))
		return invalid(res, "filepaths", "list_type", "Input should be a valid list");
	if (cJSON_GetArraySize(fp) > BK_FILE_PRESENT_MAX)
		return refuse(res, 400, "bad_request", "\"filepaths\" holds more than %d paths", BK_FILE_PRESENT_MAX);
	q->paths = calloc((size_t)cJSON_GetArraySize(fp) + 1, sizeof(*q->paths));
	if (!q->paths)
		return refuse(res, 503, "out_of_memory", "out of memory");
	const cJSON *it;
	cJSON_ArrayForEach(it, fp)
	{
		if (!cJSON_IsString(it))
			return invalid(res, "filepaths", "string_type", "Input should be a valid string");
		struct bk_vpath *vp = &q->paths[q->npaths];
		int r = bk_vpath_parse(it->valuestring, strlen(it->valuestring), vp);
		if (r < 0)
			return path_error(res, r, "filepaths", it->valuestring);
		if (bk_vpath_is_root(vp))
			continue; /* a directory: skipped, as the reference */
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
		return get_path_as(args, "path", false, true, &q->vp, res);
	case BK_FILE_GLOB:
		return parse_glob(args, q, res);
	case BK_FILE_GREP:
		return parse_grep(args, q, res);
	case BK_FILE_PRESENT:
		return parse_present(args, q, res);
	case BK_FILE_READ_IMAGE:
		return get_path(args, "path", true, &q->vp, res);
	default:
		return refuse(res, 404, "unknown_op", "unknown operation");
	}
}

/* ---- the response ---------------------------------------------------------------------------- */

/* Python's datetime.fromtimestamp(t).isoformat() (UTC: the container's
 * zone): "2026-12-01T22:31:41" or "...41.123456". */
static void iso_time(int64_t sec, uint32_t nsec, char out[40])
{
	uint32_t us = (nsec + 500) / 1000;
	if (us >= 1000000)
		sec++, us -= 1000000;
	time_t t = (time_t)sec;
	struct tm tm;
	if (!gmtime_r(&t, &tm)) {
		snprintf(out, 40, "1970-01-01T00:00:00");
		return;
	}
	size_t n = strftime(out, 40, "%Y-%m-%dT%H:%M:%S", &tm);
	if (us)
		snprintf(out + n, 40 - n, ".%06u", us);
}

/* /view of a directory: the names (os.listdir). */
static cJSON *names_json(const struct bk_file_result *r)
{
	cJSON *arr = cJSON_CreateArray();
	for (size_t i = 0; i < r->nentries; i++)
		cJSON_AddItemToArray(arr, cJSON_CreateString(r->entries[i].name));
	return arr;
}

/* One /ls or /glob entry: {path, is_dir, size, modified_at} (+ name, type). */
static cJSON *entry_json(const struct bk_file_entry *e, const char *path, bool with_name)
{
	cJSON *o = cJSON_CreateObject();
	bool dir = e->type == BK_FILE_T_DIRECTORY;
	char t[40];
	iso_time(e->mtime_sec, e->mtime_nsec, t);
	cJSON_AddStringToObject(o, "path", path);
	cJSON_AddBoolToObject(o, "is_dir", dir);
	cJSON_AddNumberToObject(o, "size", dir ? 0 : (double)e->size);
	cJSON_AddStringToObject(o, "modified_at", t);
	if (with_name)
		cJSON_AddStringToObject(o, "name", e->name);
	cJSON_AddStringToObject(o, "type", bk_file_type_name(e->type));
	return o;
}

static int entry_cmp(const void *a, const void *b)
{
	return strcmp(cJSON_GetObjectItemCaseSensitive(*(cJSON *const *)a, "path")->valuestring,
		      cJSON_GetObjectItemCaseSensitive(*(cJSON *const *)b, "path")->valuestring);
}

static void add_ls(cJSON *b, const struct bk_file_req *q, const struct bk_file_result *r)
{
	/* absolute paths, a directory's with a '/' at the end, sorted by it */
	cJSON **v = calloc(r->nentries + 1, sizeof(*v));
	size_t n = 0;
	for (size_t i = 0; v && i < r->nentries; i++) {
		const struct bk_file_entry *e = &r->entries[i];
		char p[BK_VPATH_MAX + 2 * BK_NAME_MAX + 8];
		snprintf(p, sizeof(p), "%s/%s%s", q->vp.abs, e->name, e->type == BK_FILE_T_DIRECTORY ? "/" : "");
		v[n++] = entry_json(e, p, true);
	}
	if (n)
		qsort(v, n, sizeof(*v), entry_cmp);
	cJSON *arr = cJSON_AddArrayToObject(b, "entries");
	for (size_t i = 0; i < n; i++)
		cJSON_AddItemToArray(arr, v[i]);
	free(v);
	cJSON_AddStringToObject(b, "path", q->vp.abs);
	cJSON_AddBoolToObject(b, "truncated", r->truncated);
}

static void add_view(cJSON *b, const struct bk_file_req *q, const struct bk_file_result *r)
{
	if (r->is_directory) {
		cJSON_AddStringToObject(b, "content", "");
		cJSON_AddNumberToObject(b, "lines", 0);
		cJSON_AddBoolToObject(b, "is_directory", true);
		cJSON_AddItemToObject(b, "entries", names_json(r));
		cJSON_AddStringToObject(b, "path", q->vp.abs);
		cJSON_AddBoolToObject(b, "truncated", r->truncated);
		return;
	}
	cJSON_AddStringToObject(b, "content", r->content ? r->content : "");
	cJSON_AddNumberToObject(b, "lines", (double)r->lines);
	cJSON_AddBoolToObject(b, "is_directory", false);
	cJSON_AddNullToObject(b, "entries");
	cJSON_AddStringToObject(b, "path", q->vp.abs);
	cJSON_AddNumberToObject(b, "total_lines", (double)r->lines);
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
	if (r->grep_error)
		cJSON_AddStringToObject(b, "error", r->grep_error);
	else
		cJSON_AddNullToObject(b, "error");
	cJSON_AddBoolToObject(b, "truncated", r->truncated);
}

static void add_present(cJSON *b, const struct bk_file_result *r)
{
	cJSON *files = cJSON_AddArrayToObject(b, "files");
	cJSON *copies = cJSON_AddArrayToObject(b, "copy_operations");
	for (size_t i = 0; i < r->ncopies; i++) {
		char *s = NULL;
		if (asprintf(&s, "Copied %s to %s", r->copies[i].source, r->copies[i].destination) >= 0) {
			cJSON_AddItemToArray(copies, cJSON_CreateString(s));
			free(s);
		}
	}
	const char *outputs = bk_vroots[BK_VROOT_OUTPUTS].path;
	size_t ol = strlen(outputs);
	for (size_t i = 0; i < r->nfiles; i++) {
		cJSON *f = cJSON_CreateObject();
		const char *p = r->files[i].path;
		/* no storage backend: the key is the namespace and the path in it
		 * (the reference prefixes its session's storage_prefix) */
		char key[BK_VPATH_MAX + 64];
		snprintf(key, sizeof(key), "outputs/%s", strncmp(p, outputs, ol) == 0 && p[ol] == '/' ? p + ol + 1 : p);
		cJSON_AddStringToObject(f, "file_path", p);
		cJSON_AddStringToObject(f, "storage_key", key);
		cJSON_AddNumberToObject(f, "size", (double)r->files[i].size);
		cJSON_AddStringToObject(f, "content_type", r->files[i].mime);
		/* the helper streamed each file; the agent hashed it */
		cJSON_AddStringToObject(f, "sha256", r->files[i].sha256);
		cJSON_AddItemToArray(files, f);
	}
}

/* The body of a 200 answer: the reference's keys, in its order, then ours. */
static cJSON *body_json(const struct bk_file_req *q, const struct bk_file_result *r, const char *given)
{
	cJSON *b = cJSON_CreateObject();
	switch (q->op) {
	case BK_FILE_CREATE:
		cJSON_AddStringToObject(b, "path", q->vp.abs);
		cJSON_AddNumberToObject(b, "size", (double)r->size);
		cJSON_AddBoolToObject(b, "created", true); /* the reference: always */
		cJSON_AddBoolToObject(b, "overwritten", !r->created);
		break;
	case BK_FILE_VIEW:
		add_view(b, q, r);
		break;
	case BK_FILE_STR_REPLACE:
		cJSON_AddStringToObject(b, "path", q->vp.abs);
		cJSON_AddBoolToObject(b, "replaced", r->occurrences > 0);
		cJSON_AddNumberToObject(b, "occurrences", (double)r->occurrences);
		break;
	case BK_FILE_LS:
		add_ls(b, q, r);
		break;
	case BK_FILE_GLOB: {
		cJSON *arr = cJSON_AddArrayToObject(b, "matches");
		for (size_t i = 0; i < r->nentries; i++)
			cJSON_AddItemToArray(arr, entry_json(&r->entries[i], r->entries[i].name, false));
		cJSON_AddBoolToObject(b, "truncated", r->truncated);
		break;
	}
	case BK_FILE_GREP:
		add_grep(b, r);
		break;
	case BK_FILE_PRESENT:
		add_present(b, r);
		break;
	case BK_FILE_READ_IMAGE:
		cJSON_AddStringToObject(b, "path", given ? given : q->vp.abs);
		cJSON_AddStringToObject(b, "mime_type", r->mime ? r->mime : "application/octet-stream");
		cJSON_AddNumberToObject(b, "size_bytes", (double)r->size);
		cJSON_AddStringToObject(b, "base64_data", r->content ? r->content : "");
		break;
	default: /* the wipe answers no request */
		break;
	}
	return b;
}

/* A refusal's response: FastAPI's list detail for a validation error. */
static char *refusal(const struct bk_file_result *res)
{
	if (streq(res->code, "validation_error")) {
		char buf[BK_FILE_DETAIL_MAX];
		snprintf(buf, sizeof(buf), "%s", res->detail);
		char *type = strchr(buf, '\t'), *msg = type ? strchr(type + 1, '\t') : NULL;
		if (type && msg) {
			*type++ = '\0';
			*msg++ = '\0';
			return bk_api_invalid(buf, type, "%s", msg);
		}
	}
	if (res->layer[0]) {
		/* the helper's isolation could not be made: which layer */
		cJSON *b = cJSON_CreateObject();
		cJSON_AddStringToObject(b, "detail", res->detail);
		cJSON_AddStringToObject(b, "code", res->code);
		cJSON_AddStringToObject(b, "layer", res->layer);
		return bk_api_respond(res->status, b);
	}
	return bk_api_error(res->status, res->code, "%s", res->detail);
}

/* The response for res; a body over BK_FILE_RESULT_MAX bytes is refused
 * (res->status then says so). */
static char *respond(const struct bk_file_req *q, struct bk_file_result *res, const char *given)
{
	if (res->status != 200)
		return refusal(res);
	char *out = bk_api_respond(200, body_json(q, res, given));
	/* {"status":200,"body":BODY} */
	static const size_t frame = sizeof("{\"status\":200,\"body\":}") - 1;
	if (out && strlen(out) - frame > BK_FILE_RESULT_MAX) {
		free(out);
		refuse(res, 422, "unviewable", "the response would be larger than %u bytes", BK_FILE_RESULT_MAX);
		return refusal(res);
	}
	return out;
}

/* ---- the routes ------------------------------------------------------------------------------ */

static int op_of(const char *op)
{
	for (int i = BK_FILE_CREATE; i <= BK_FILE_READ_IMAGE; i++)
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
	const cJSON *gp = cJSON_GetObjectItemCaseSensitive(args, "path");
	const char *given = cJSON_IsString(gp) ? gp->valuestring : NULL;
	char *out;
	if (parse_req((enum bk_file_op)o, args, q, &res)) {
		if (q->op == BK_FILE_GLOB && !q->pattern[0]) {
			res.status = 200; /* an empty pattern matches nothing */
		} else if (q->op == BK_FILE_PRESENT && !q->npaths) {
			res.status = 200; /* nothing to present */
		} else {
			bk_files_run(a, pod, q, &res);
		}
		out = respond(q, &res, given);
	} else {
		out = refusal(&res);
	}
	bk_files_audit(pod, (enum bk_file_op)o, &q->vp, res.status, t0);
	bk_file_result_free(&res);
	free(q->paths);
	return out;
}
