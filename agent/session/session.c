/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/session/session.h"
#include "agent/files/files.h"
#include "lib/log.h"
#include "lib/util.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>

#define SESSIONS_MAX 65536
#define STATE_FILE_MAX (256u * 1024u)
#define KILL_MAX 4096           /* exec cgroups of one pod */
#define KILL_WAIT_MS 5000
#define EXEC_CG_PREFIX "boxkite-exec-"

struct session {
	char pod_uid[BK_UID_LEN + 1];
	char id[BK_SESSION_ID_MAX + 1];
	char **allowed; /* NULL: unrestricted; else NULL-terminated */
	uint64_t generation;
	int64_t configured_at; /* unix seconds */
	bool busy;             /* a /configure is running for this pod */
	unsigned setting_up;   /* execs past the session check, not yet spawned */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle = PTHREAD_COND_INITIALIZER;
static struct session *tab;
static size_t ntab, captab;

void bk_strv_free(char **v)
{
	if (!v)
		return;
	for (char **p = v; *p; p++)
		free(*p);
	free(v);
}

static char **strv_copy(char *const *v, int *err)
{
	*err = 0;
	if (!v)
		return NULL;
	size_t n = 0;
	while (v[n])
		n++;
	char **c = calloc(n + 1, sizeof(char *));
	if (!c) {
		*err = -ENOMEM;
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		if (!(c[i] = strdup(v[i]))) {
			bk_strv_free(c);
			*err = -ENOMEM;
			return NULL;
		}
	return c;
}

/* ---- validation (requests and state files alike) ------------------------------------ */

static bool text_ok(const char *s, size_t max, bool allow_space)
{
	size_t l = strlen(s);
	if (l == 0 || l > max)
		return false;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*p < 0x20 || *p == 0x7f || (!allow_space && *p == ' '))
			return false;
	return true;
}

/* Fills *allowed (NULL when absent/null). Returns NULL or a sentence. */
static const char *parse_allowed(const cJSON *v, char ***allowed)
{
	*allowed = NULL;
	if (!v || cJSON_IsNull(v))
		return NULL;
	if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) > BK_ALLOWED_MAX)
		return "\"allowed_commands\" must be an array of at most 256 command names";
	size_t n = (size_t)cJSON_GetArraySize(v), i = 0;
	char **out = calloc(n + 1, sizeof(char *));
	if (!out)
		return "out of memory";
	const cJSON *it;
	cJSON_ArrayForEach(it, v)
	{
		/* command names, not paths: the enforcement matches names */
		if (!cJSON_IsString(it) || !text_ok(it->valuestring, BK_ALLOWED_LEN_MAX, false) ||
		    strchr(it->valuestring, '/')) {
			bk_strv_free(out);
			return "\"allowed_commands\" entries must be command names of 1 to 256 bytes, without '/', "
			       "spaces or control characters";
		}
		if (!(out[i++] = strdup(it->valuestring))) {
			bk_strv_free(out);
			return "out of memory";
		}
	}
	*allowed = out;
	return NULL;
}

static bool uid_ok(const char *u)
{
	size_t l = strlen(u);
	if (l == 0 || l > BK_UID_LEN)
		return false;
	for (const char *p = u; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') || *p == '-'))
			return false;
	return true;
}

/* ---- persistence ------------------------------------------------------------------------ */

static int state_path(const struct bk_agent *a, const char *pod_uid, char *out, size_t len)
{
	if (!uid_ok(pod_uid))
		return -EINVAL;
	int w = snprintf(out, len, "%s/sessions/%s.json", a->cfg.state_dir, pod_uid);
	return w < 0 || (size_t)w >= len ? -ENAMETOOLONG : 0;
}

static int persist(const struct bk_agent *a, const struct session *s)
{
	char dir[512], path[600], tmp[640];
	int w = snprintf(dir, sizeof(dir), "%s/sessions", a->cfg.state_dir);
	if (w < 0 || (size_t)w >= sizeof(dir))
		return -ENAMETOOLONG;
	int r = mkdir_p(dir, 0700);
	if (r < 0)
		return r;
	if ((r = state_path(a, s->pod_uid, path, sizeof(path))) < 0)
		return r;
	uint64_t rnd = 0;
	if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
		rnd = now_ns();
	snprintf(tmp, sizeof(tmp), "%s.%016llx.tmp", path, (unsigned long long)rnd);
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "pod_uid", s->pod_uid);
	cJSON_AddStringToObject(o, "session_id", s->id);
	if (s->allowed) {
		cJSON *arr = cJSON_AddArrayToObject(o, "allowed_commands");
		for (char **p = s->allowed; *p; p++)
			cJSON_AddItemToArray(arr, cJSON_CreateString(*p));
	} else {
		cJSON_AddNullToObject(o, "allowed_commands");
	}
	cJSON_AddNumberToObject(o, "generation", (double)s->generation);
	cJSON_AddNumberToObject(o, "configured_at", (double)s->configured_at);
	_cleanup_free_ char *txt = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	if (!txt)
		return -ENOMEM;
	_cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	size_t n = strlen(txt);
	if (write(fd, txt, n) != (ssize_t)n || fsync(fd) < 0) {
		r = errno ? -errno : -EIO;
		unlink(tmp);
		return r;
	}
	if (rename(tmp, path) < 0) {
		r = -errno;
		unlink(tmp);
		return r;
	}
	return 0;
}

/* Load a session written by an earlier agent. 0, or -errno (-ENOENT: none). */
static int load(const struct bk_agent *a, const char *pod_uid, struct session *s)
{
	char path[600];
	int r = state_path(a, pod_uid, path, sizeof(path));
	if (r < 0)
		return r;
	_cleanup_free_ char *txt = NULL;
	size_t len = 0;
	if ((r = read_file_at(AT_FDCWD, path, STATE_FILE_MAX, &txt, &len)) < 0)
		return r;
	cJSON *o = cJSON_ParseWithLength(txt, len);
	const cJSON *uid = cJSON_GetObjectItemCaseSensitive(o, "pod_uid");
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(o, "session_id");
	const cJSON *gen = cJSON_GetObjectItemCaseSensitive(o, "generation");
	const cJSON *at = cJSON_GetObjectItemCaseSensitive(o, "configured_at");
	char **allowed = NULL;
	if (!cJSON_IsString(uid) || !streq(uid->valuestring, pod_uid) || !cJSON_IsString(id) ||
	    !text_ok(id->valuestring, BK_SESSION_ID_MAX, true) || !cJSON_IsNumber(gen) ||
	    parse_allowed(cJSON_GetObjectItemCaseSensitive(o, "allowed_commands"), &allowed)) {
		cJSON_Delete(o);
		log_warnf("session_state", "ignoring the malformed session state file %s", path);
		return -EINVAL;
	}
	memset(s, 0, sizeof(*s));
	snprintf(s->pod_uid, sizeof(s->pod_uid), "%s", pod_uid);
	snprintf(s->id, sizeof(s->id), "%s", id->valuestring);
	s->allowed = allowed;
	s->generation = gen->valuedouble > 0 ? (uint64_t)gen->valuedouble : 0;
	s->configured_at = cJSON_IsNumber(at) ? (int64_t)at->valuedouble : 0;
	cJSON_Delete(o);
	return 0;
}

/* ---- the table (lock held) ----------------------------------------------------------------- */

static struct session *find_locked(struct bk_agent *a, const char *pod_uid, bool create)
{
	for (size_t i = 0; i < ntab; i++)
		if (streq(tab[i].pod_uid, pod_uid))
			return &tab[i];
	struct session loaded;
	bool have = load(a, pod_uid, &loaded) == 0;
	if (!have && !create)
		return NULL;
	if (ntab == captab) {
		if (captab == SESSIONS_MAX) {
			/* evict the longest-unconfigured idle session (its file stays) */
			size_t old = SIZE_MAX;
			for (size_t i = 0; i < ntab; i++)
				if (!tab[i].busy && !tab[i].setting_up &&
				    (old == SIZE_MAX || tab[i].configured_at < tab[old].configured_at))
					old = i;
			if (old == SIZE_MAX) {
				if (have)
					bk_strv_free(loaded.allowed);
				return NULL;
			}
			bk_strv_free(tab[old].allowed);
			tab[old] = tab[--ntab];
		} else {
			size_t nc = captab ? captab * 2 : 16;
			struct session *nt = realloc(tab, nc * sizeof(*tab));
			if (!nt) {
				if (have)
					bk_strv_free(loaded.allowed);
				return NULL;
			}
			tab = nt;
			captab = nc;
		}
	}
	struct session *s = &tab[ntab++];
	if (have) {
		*s = loaded;
	} else {
		memset(s, 0, sizeof(*s));
		snprintf(s->pod_uid, sizeof(s->pod_uid), "%s", pod_uid);
	}
	return s;
}

int bk_session_allowed(struct bk_agent *a, const char *pod_uid, char ***out)
{
	*out = NULL;
	pthread_mutex_lock(&lock);
	struct session *s = find_locked(a, pod_uid, false);
	int err = 0;
	if (s && s->allowed)
		*out = strv_copy(s->allowed, &err);
	pthread_mutex_unlock(&lock);
	return err;
}

void bk_session_current(struct bk_agent *a, const char *pod_uid, char *out, size_t outlen, uint64_t *gen)
{
	pthread_mutex_lock(&lock);
	struct session *s = find_locked(a, pod_uid, false);
	snprintf(out, outlen, "%s", s ? s->id : "");
	if (gen)
		*gen = s ? s->generation : 0;
	pthread_mutex_unlock(&lock);
}

/* ---- killing the previous session --------------------------------------------------------- */

/* cgroup.kill every exec cgroup of the pod and wait until they are empty.
 * Returns how many were killed, or -errno (err says why). */
static int kill_execs(struct bk_agent *a, const struct bk_pod *pod, char *err, size_t errlen)
{
	char dir[4700];
	int w = snprintf(dir, sizeof(dir), "%s%s%s", a->engine.mounts.v2, pod->pod_v2[0] == '/' ? "" : "/",
			 pod->pod_v2);
	if (w < 0 || (size_t)w >= sizeof(dir) || !pod->pod_v2[0]) {
		snprintf(err, errlen, "the pod has no cgroup v2 path");
		return -EINVAL;
	}
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		int e = errno;
		snprintf(err, errlen, "cannot open the pod's cgroup %s: %s", dir, strerror(e));
		return -e;
	}
	DIR *d = fdopendir(dfd);
	if (!d) {
		int e = errno;
		close(dfd);
		snprintf(err, errlen, "cannot read the pod's cgroup: %s", strerror(e));
		return -e;
	}
	char (*names)[64] = calloc(KILL_MAX, sizeof(*names));
	if (!names) {
		closedir(d);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	int n = 0, failed = 0;
	struct dirent *de;
	while ((de = readdir(d)) && n < KILL_MAX) {
		if (!startswith(de->d_name, EXEC_CG_PREFIX) || strlen(de->d_name) >= sizeof(names[0]))
			continue;
		_cleanup_close_ int cfd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (cfd < 0)
			continue; /* removed meanwhile: its exec ended */
		int r = write_file_at(cfd, "cgroup.kill", "1");
		if (r < 0 && r != -ENOENT) {
			failed++;
			continue;
		}
		snprintf(names[n++], sizeof(names[0]), "%s", de->d_name);
	}
	closedir(d);
	/* the exec threads remove their cgroups; wait until nothing runs */
	uint64_t deadline = now_ns() + (uint64_t)KILL_WAIT_MS * 1000000ull;
	int alive;
	do {
		alive = 0;
		for (int i = 0; i < n; i++) {
			char p[4800];
			snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
			if (bk_cgroup_populated(p))
				alive++;
		}
		if (alive)
			usleep(10000);
	} while (alive && now_ns() < deadline);
	free(names);
	if (failed || alive) {
		snprintf(err, errlen, "%d exec cgroup(s) of the previous session could not be killed",
			 failed + alive);
		return -EBUSY;
	}
	return n;
}

/* ---- /configure ------------------------------------------------------------------------------ */

char *bk_session_configure(struct bk_agent *a, const struct bk_pod *pod, const cJSON *args)
{
	const cJSON *sid = cJSON_GetObjectItemCaseSensitive(args, "session_id");
	if (!cJSON_IsString(sid) || !text_ok(sid->valuestring, BK_SESSION_ID_MAX, true))
		return bk_api_error(400, "bad_request",
				    "\"session_id\" must be a string of 1 to %d bytes without control characters",
				    BK_SESSION_ID_MAX);
	char **allowed = NULL;
	const char *bad = parse_allowed(cJSON_GetObjectItemCaseSensitive(args, "allowed_commands"), &allowed);
	if (bad)
		return bk_api_error(400, "bad_request", "%s", bad);
	if (!uid_ok(pod->pod_uid)) {
		bk_strv_free(allowed);
		return bk_api_error(503, "sandbox_unavailable", "the pod has no usable UID");
	}
	uint64_t t0 = now_ns();

	/* one /configure at a time per pod: kill, wipe and record must not
	 * interleave with another's */
	pthread_mutex_lock(&lock);
	struct session *s;
	while ((s = find_locked(a, pod->pod_uid, true)) && s->busy)
		pthread_cond_wait(&idle, &lock);
	if (!s) {
		pthread_mutex_unlock(&lock);
		bk_strv_free(allowed);
		return bk_api_error(503, "out_of_memory", "no room for another session");
	}
	s->busy = true;
	/* an exec that passed its session check before this /configure began
	 * must have its process in its cgroup before the kill below looks:
	 * otherwise it could start after the kill and outlive its session */
	while ((s = find_locked(a, pod->pod_uid, true)) && s->setting_up)
		pthread_cond_wait(&idle, &lock);
	pthread_mutex_unlock(&lock);

	char err[512] = "";
	char *out = NULL;
	uint64_t removed = 0, kept = 0;
	int killed = kill_execs(a, pod, err, sizeof(err));
	if (killed < 0) {
		out = bk_api_error(503, "session_reset_failed", "the previous session could not be stopped: %s", err);
	} else if (bk_files_wipe(a, pod, &removed, &kept, err, sizeof(err)) < 0) {
		out = bk_api_error(503, "session_reset_failed", "the previous session's data could not be wiped: %s",
				   err);
	}

	pthread_mutex_lock(&lock);
	/* the entry may have moved (the table grows): look it up again */
	s = find_locked(a, pod->pod_uid, true);
	uint64_t gen = 0;
	int pr = 0;
	if (s && !out) {
		bk_strv_free(s->allowed);
		s->allowed = allowed;
		allowed = NULL;
		snprintf(s->id, sizeof(s->id), "%s", sid->valuestring);
		s->generation++;
		s->configured_at = (int64_t)time(NULL);
		gen = s->generation;
		pr = persist(a, s);
	}
	if (s)
		s->busy = false;
	pthread_cond_broadcast(&idle);
	pthread_mutex_unlock(&lock);
	bk_strv_free(allowed);

	cJSON *f = cJSON_CreateObject();
	cJSON_AddStringToObject(f, "pod", pod->pod_name);
	cJSON_AddStringToObject(f, "namespace", pod->pod_namespace);
	cJSON_AddStringToObject(f, "pod_uid", pod->pod_uid);
	cJSON_AddNumberToObject(f, "generation", (double)gen);
	cJSON_AddNumberToObject(f, "killed_execs", killed > 0 ? killed : 0);
	cJSON_AddNumberToObject(f, "wiped", (double)removed);
	cJSON_AddNumberToObject(f, "kept", (double)kept);
	cJSON_AddNumberToObject(f, "duration_ms", (double)(now_ns() - t0) / 1e6);
	if (out)
		cJSON_AddStringToObject(f, "error", err);
	bk_log_obj(out ? "warn" : "info", "session_configured", f);
	if (pr < 0)
		log_warnf("session_state", "cannot persist the session of pod %s: %s", pod->pod_uid, strerror(-pr));
	if (out)
		return out;
	if (!s)
		return bk_api_error(503, "out_of_memory", "no room for another session");

	cJSON *b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "status", "configured");
	cJSON_AddStringToObject(b, "session_id", sid->valuestring);
	cJSON_AddItemToObject(b, "prefetched_files", cJSON_CreateArray());
	cJSON_AddNumberToObject(b, "generation", (double)gen);
	cJSON_AddNumberToObject(b, "killed_execs", killed);
	cJSON *wp = cJSON_AddObjectToObject(b, "wiped");
	cJSON_AddNumberToObject(wp, "removed", (double)removed);
	cJSON_AddNumberToObject(wp, "kept", (double)kept);
	return bk_api_respond(200, b);
}

/* ---- /tool-call -------------------------------------------------------------------------------- */

char *bk_tool_call(struct bk_agent *a, const struct bk_pod *pod, const cJSON *args)
{
	/* "session_id" is deliberately never read: the pod's current session
	 * is the only one a request can act in (SECURITY: a foreign session id
	 * must have no effect at all). */
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(args, "tool_name");
	if (!cJSON_IsString(name) || !name->valuestring[0])
		return bk_api_error(400, "bad_request", "\"tool_name\" must be a non-empty string");
	const cJSON *targs = cJSON_GetObjectItemCaseSensitive(args, "arguments");
	cJSON *empty = NULL;
	if (!targs || cJSON_IsNull(targs))
		targs = empty = cJSON_CreateObject();
	else if (!cJSON_IsObject(targs))
		return bk_api_error(400, "bad_request", "\"arguments\" must be an object");
	const char *t = name->valuestring;
	char *out;
	if (streq(t, "bash_tool") || streq(t, "bash"))
		out = bk_api_exec(a, pod, targs);
	else if (bk_files_is_op(t))
		out = bk_files_op(a, pod, t, targs);
	else
		out = bk_api_error(400, "unknown_tool", "unknown tool \"%.64s\"", t);
	cJSON_Delete(empty);
	return out;
}

int bk_session_exec_begin(struct bk_agent *a, const char *pod_uid)
{
	pthread_mutex_lock(&lock);
	struct session *s;
	/* while a /configure runs, a new exec belongs to the next session */
	while ((s = find_locked(a, pod_uid, true)) && s->busy)
		pthread_cond_wait(&idle, &lock);
	if (s)
		s->setting_up++;
	pthread_mutex_unlock(&lock);
	return s ? 0 : -ENOMEM;
}

void bk_session_exec_spawned(struct bk_agent *a, const char *pod_uid)
{
	pthread_mutex_lock(&lock);
	struct session *s = find_locked(a, pod_uid, false);
	if (s && s->setting_up)
		s->setting_up--;
	pthread_cond_broadcast(&idle);
	pthread_mutex_unlock(&lock);
}
