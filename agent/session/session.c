/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/session/session.h"
#include "agent/isolate/warm.h"
#include "agent/files/files.h"
#include "lib/err.h"
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
	struct bk_session_record rec; /* id, allowed_commands, generation, configured_at */
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

/* ---- persistence (the format is agent/parse/session_record.c) ---------------------------- */

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
	_cleanup_free_ char *txt = bk_session_record_encode(s->pod_uid, &s->rec);
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
	struct bk_session_record rec;
	if (bk_session_record_parse(txt, len, pod_uid, &rec) < 0) {
		log_warnf("session_state", "ignoring the malformed session state file %s", path);
		return -EINVAL;
	}
	memset(s, 0, sizeof(*s));
	snprintf(s->pod_uid, sizeof(s->pod_uid), "%s", pod_uid);
	s->rec = rec;
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
				    (old == SIZE_MAX || tab[i].rec.configured_at < tab[old].rec.configured_at))
					old = i;
			if (old == SIZE_MAX) {
				if (have)
					bk_session_record_clear(&loaded.rec);
				return NULL;
			}
			bk_session_record_clear(&tab[old].rec);
			tab[old] = tab[--ntab];
		} else {
			size_t nc = captab ? captab * 2 : 16;
			struct session *nt = realloc(tab, nc * sizeof(*tab));
			if (!nt) {
				if (have)
					bk_session_record_clear(&loaded.rec);
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
	if (s && s->rec.allowed)
		*out = strv_copy(s->rec.allowed, &err);
	pthread_mutex_unlock(&lock);
	return err;
}

void bk_session_current(struct bk_agent *a, const char *pod_uid, char *out, size_t outlen, uint64_t *gen)
{
	pthread_mutex_lock(&lock);
	struct session *s = find_locked(a, pod_uid, false);
	snprintf(out, outlen, "%s", s ? s->rec.session_id : "");
	if (gen)
		*gen = s ? s->rec.generation : 0;
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
		return bk_fail_buf(err, errlen, -EINVAL, "the pod has no cgroup v2 path");
	}
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		int e = errno;
		return bk_fail_buf(err, errlen, -e, "cannot open the pod's cgroup %s: %s", dir, strerror(e));
	}
	DIR *d = fdopendir(dfd);
	if (!d) {
		int e = errno;
		close(dfd);
		return bk_fail_buf(err, errlen, -e, "cannot read the pod's cgroup: %s", strerror(e));
	}
	char (*names)[64] = calloc(KILL_MAX, sizeof(*names));
	if (!names) {
		closedir(d);
		return bk_fail_buf(err, errlen, -ENOMEM, "out of memory");
	}
	int n = 0, failed = 0;
	struct dirent *de;
	while ((de = readdir(d)) && n < KILL_MAX) {
		if (!startswith(de->d_name, EXEC_CG_PREFIX) || strlen(de->d_name) >= sizeof(names[0]))
			continue;
		/* a warm slot ran nothing of any session: it stays */
		if (bk_warm_has(&a->engine, de->d_name + strlen(EXEC_CG_PREFIX)))
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
	if (failed || alive)
		return bk_fail_buf(err, errlen, -EBUSY, "%d exec cgroup(s) of the previous session could not be killed",
				   failed + alive);
	return n;
}

/* ---- /configure ------------------------------------------------------------------------------ */


int bk_session_configure(struct bk_agent *a, const struct bk_pod *pod, const char *session_id, char **allowed,
			 struct bk_configure_result *res)
{
	memset(res, 0, sizeof(*res));
	/* the API edge validated the request already; checked again because
	 * the id is written to disk and read back by the next agent */
	if (session_id && !bk_session_text_ok(session_id, BK_SESSION_ID_MAX, true)) {
		bk_strv_free(allowed);
		res->error = BK_CONFIGURE_BAD_REQUEST;
		return bk_fail(&res->err, -EINVAL, "",
			       "\"session_id\" must be a string of 1 to %d bytes without control characters",
			       BK_SESSION_ID_MAX);
	}
	if (!uid_ok(pod->pod_uid)) {
		bk_strv_free(allowed);
		res->error = BK_CONFIGURE_SANDBOX_UNAVAILABLE;
		return bk_fail(&res->err, -ENXIO, "", "the pod has no usable UID");
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
		res->error = BK_CONFIGURE_OUT_OF_MEMORY;
		return bk_fail(&res->err, -ENOMEM, "", "no room for another session");
	}
	s->busy = true;
	/* an exec that passed its session check before this /configure began
	 * must have its process in its cgroup before the kill below looks:
	 * otherwise it could start after the kill and outlive its session */
	while ((s = find_locked(a, pod->pod_uid, true)) && s->setting_up)
		pthread_cond_wait(&idle, &lock);
	pthread_mutex_unlock(&lock);

	char err[512] = "";
	int failed = 0;
	uint64_t removed = 0, kept = 0;
	int killed = kill_execs(a, pod, err, sizeof(err));
	if (killed < 0) {
		res->error = BK_CONFIGURE_RESET_FAILED;
		failed = bk_fail(&res->err, killed, "", "the previous session could not be stopped: %s", err);
	} else if ((failed = bk_files_wipe(a, pod, &removed, &kept, err, sizeof(err))) < 0) {
		res->error = BK_CONFIGURE_RESET_FAILED;
		bk_fail(&res->err, failed, "", "the previous session's data could not be wiped: %s", err);
	}

	pthread_mutex_lock(&lock);
	/* the entry may have moved (the table grows): look it up again */
	s = find_locked(a, pod->pod_uid, true);
	uint64_t gen = 0;
	int pr = 0;
	if (s && !failed) {
		bk_strv_free(s->rec.allowed);
		s->rec.allowed = allowed;
		allowed = NULL;
		snprintf(s->rec.session_id, sizeof(s->rec.session_id), "%s", session_id ? session_id : "");
		s->rec.generation++;
		s->rec.configured_at = (int64_t)time(NULL);
		gen = s->rec.generation;
		pr = persist(a, s);
	}
	if (s)
		s->busy = false;
	pthread_cond_broadcast(&idle);
	pthread_mutex_unlock(&lock);
	bk_strv_free(allowed);

	/* the audit line */
	const struct log_field f[] = {
		LS("pod", pod->pod_name),
		LS("namespace", pod->pod_namespace),
		LS("pod_uid", pod->pod_uid),
		LI("generation", gen),
		LI("killed_execs", killed > 0 ? killed : 0),
		LI("wiped", removed),
		LI("kept", kept),
		LD("duration_ms", (double)(now_ns() - t0) / 1e6),
		failed ? LS("error", err) : LEND,
		LEND,
	};
	log_emit(failed ? LOG_WARN : LOG_INFO, "session_configured", f);
	if (pr < 0)
		log_warnf("session_state", "cannot persist the session of pod %s: %s", pod->pod_uid, strerror(-pr));
	if (failed)
		return failed;
	if (!s) {
		res->error = BK_CONFIGURE_OUT_OF_MEMORY;
		return bk_fail(&res->err, -ENOMEM, "", "no room for another session");
	}
	res->generation = gen;
	res->killed_execs = killed;
	res->removed = removed;
	res->kept = kept;
	return 0;
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
