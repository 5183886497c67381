/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/session/livepolicy.h"
#include "lib/log.h"
#include "lib/util.h"

#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>

const char *const bk_profile_source_names[] = { "policy_set", "annotation", "selector", "default" };

struct pod_policy {
	char pod_uid[BK_UID_LEN + 1];
	char override[64];  /* "" none */
	char last[64];      /* the profile the pod's last exec/inspect/verify was given ("" not yet) */
	bool changed;
	struct bk_profile_change change;
	int64_t missing_since; /* monotonic s when a sweep first did not find the pod (0: found) */
};

static pthread_mutex_t lp_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pod_policy *tab;
static size_t n_tab, cap_tab;
static bool loaded;
static int64_t last_sweep; /* monotonic s */

/* Entries (and override files) of pods that are gone: a pod's uid is never
 * reused, so nothing of it can apply again. A pod counts as gone only when
 * two sweeps at least testing.policy_sweep_s (60 s) apart found none of
 * its containers (a state file read at the wrong moment must not drop a
 * live pod's override). */

static struct pod_policy *find(const char *pod_uid, bool add)
{
	for (size_t i = 0; i < n_tab; i++)
		if (streq(tab[i].pod_uid, pod_uid))
			return &tab[i];
	if (!add)
		return NULL;
	if (n_tab == cap_tab) {
		size_t nc = cap_tab ? cap_tab * 2 : 16;
		struct pod_policy *t = realloc(tab, nc * sizeof(*t));
		if (!t)
			return NULL;
		tab = t;
		cap_tab = nc;
	}
	struct pod_policy *p = &tab[n_tab++];
	memset(p, 0, sizeof(*p));
	snprintf(p->pod_uid, sizeof(p->pod_uid), "%s", pod_uid);
	return p;
}

static bool uid_ok(const char *s)
{
	size_t l = strlen(s);
	if (l == 0 || l > BK_UID_LEN)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '-' ||
		      *s == '_'))
			return false;
	return true;
}

/* The overrides an earlier agent recorded (<state_dir>/policy/<pod_uid>:
 * the profile's name). Under lp_lock. */
static void load(struct bk_agent *a)
{
	if (loaded)
		return;
	loaded = true;
	char dir[512];
	snprintf(dir, sizeof(dir), "%s/policy", a->cfg.state_dir);
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.' || !uid_ok(de->d_name))
			continue;
		char path[800], buf[80] = "";
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0)
			continue;
		ssize_t n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		buf[strcspn(buf, "\n")] = '\0';
		if (!bk_policy_find(&a->cfg.policy, buf)) {
			/* the config changed since: the pod's new execs are refused until an operator sets it again */
			log_warn("policy_override_unknown", LS("pod_uid", de->d_name), LS("profile", buf));
		}
		struct pod_policy *p = find(de->d_name, true);
		if (p)
			snprintf(p->override, sizeof(p->override), "%s", buf);
	}
	closedir(d);
}

static int persist(struct bk_agent *a, const char *pod_uid, const char *profile)
{
	char dir[512], path[800], tmp[820];
	snprintf(dir, sizeof(dir), "%s/policy", a->cfg.state_dir);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	snprintf(path, sizeof(path), "%s/%s", dir, pod_uid);
	if (!profile || !profile[0])
		return unlink(path) < 0 && errno != ENOENT ? -errno : 0;
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	size_t l = strlen(profile);
	int r = write(fd, profile, l) == (ssize_t)l && write(fd, "\n", 1) == 1 && fsync(fd) == 0 ? 0 : -EIO;
	close(fd);
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0)
		unlink(tmp);
	return r;
}

/* Without an override: bk_policy_select's answer, and which of its rules gave it. */
static const struct bk_profile *select_src(struct bk_agent *a, const struct bk_pod *pod, enum bk_profile_source *src,
					   char *err, size_t errlen)
{
	const struct bk_policy_set *ps = &a->cfg.policy;
	if (pod->policy_annotation[0])
		*src = BK_PSRC_ANNOTATION;
	else {
		*src = BK_PSRC_DEFAULT;
		for (int i = 0; i < ps->n_sel && *src == BK_PSRC_DEFAULT; i++)
			if (fnmatch(ps->sel[i].ns, pod->pod_namespace, 0) == 0 && fnmatch(ps->sel[i].pod, pod->pod_name, 0) == 0)
				*src = BK_PSRC_SELECTOR;
	}
	return bk_policy_select(ps, pod->pod_namespace, pod->pod_name, pod->policy_annotation, err, errlen);
}

/* Under lp_lock: the profile with its source. */
static const struct bk_profile *effective(struct bk_agent *a, const struct bk_pod *pod, struct pod_policy *pp,
					  enum bk_profile_source *src, char *err, size_t errlen)
{
	if (pp && pp->override[0]) {
		*src = BK_PSRC_OVERRIDE;
		const struct bk_profile *p = bk_policy_find(&a->cfg.policy, pp->override);
		if (!p)
			snprintf(err, errlen, "the profile \"%.64s\" set for this pod (boxkitectl policy set) is no profile of this node",
				 pp->override);
		return p;
	}
	return select_src(a, pod, src, err, errlen);
}

struct live_pods {
	char (*uid)[BK_UID_LEN + 1];
	size_t n, cap;
	bool oom;
};

static int note_pod(const struct bk_container_info *ci, void *ud)
{
	struct live_pods *lp = ud;
	/* any container of the pod (its pause container, its sandbox
	 * container): the pod is there */
	if (lp->n == lp->cap) {
		size_t nc = lp->cap ? lp->cap * 2 : 64;
		void *t = realloc(lp->uid, nc * sizeof(*lp->uid));
		if (!t) {
			lp->oom = true;
			return 1;
		}
		lp->uid = t;
		lp->cap = nc;
	}
	snprintf(lp->uid[lp->n++], BK_UID_LEN + 1, "%s", ci->pod_uid);
	return 0;
}

static void remove_override_file(struct bk_agent *a, const char *pod_uid)
{
	char path[800];
	snprintf(path, sizeof(path), "%s/policy/%s", a->cfg.state_dir, pod_uid);
	if (unlink(path) < 0 && errno != ENOENT)
		log_warn("policy_override_unlink", LS("path", path), LS("error", strerror(errno)));
}

/* At most once a policy_sweep_s: the runtime's pods, read without lp_lock held,
 * then every entry not among them marked, or dropped if it was marked a
 * sweep ago. */
static void sweep(struct bk_agent *a)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	int64_t now = (int64_t)ts.tv_sec;
	pthread_mutex_lock(&lp_lock);
	int64_t every = (int64_t)a->cfg.policy_sweep_s;
	bool due = n_tab > 0 && now - last_sweep >= every;
	if (due)
		last_sweep = now;
	pthread_mutex_unlock(&lp_lock);
	if (!due)
		return;
	struct live_pods lp = { 0 };
	if (bk_runtime_each(&a->cfg, note_pod, &lp) != 0 || lp.oom || lp.n == 0) {
		/* no answer worth acting on (no runtime state readable) */
		free(lp.uid);
		return;
	}
	pthread_mutex_lock(&lp_lock);
	size_t w = 0;
	for (size_t i = 0; i < n_tab; i++) {
		bool live = false;
		for (size_t k = 0; k < lp.n && !live; k++)
			live = streq(lp.uid[k], tab[i].pod_uid);
		if (live)
			tab[i].missing_since = 0;
		else if (!tab[i].missing_since)
			tab[i].missing_since = now ? now : 1;
		else if (now - tab[i].missing_since >= every) {
			if (tab[i].override[0]) {
				remove_override_file(a, tab[i].pod_uid);
				log_info("policy_override_dropped", LS("pod_uid", tab[i].pod_uid),
					 LS("profile", tab[i].override), LS("why", "the pod is gone"));
			}
			continue;
		}
		if (w != i)
			tab[w] = tab[i];
		w++;
	}
	n_tab = w;
	pthread_mutex_unlock(&lp_lock);
	free(lp.uid);
}

const struct bk_profile *bk_session_profile(struct bk_agent *a, const struct bk_pod *pod,
					    enum bk_profile_source *src, char *err, size_t errlen)
{
	enum bk_profile_source s = BK_PSRC_DEFAULT;
	sweep(a);
	pthread_mutex_lock(&lp_lock);
	load(a);
	struct pod_policy *pp = find(pod->pod_uid, false);
	const struct bk_profile *prof = effective(a, pod, pp, &s, err, errlen);
	if (prof) {
		if (!pp)
			pp = find(pod->pod_uid, true);
		if (pp && pp->last[0] && !streq(pp->last, prof->name)) {
			pp->changed = true;
			snprintf(pp->change.from, sizeof(pp->change.from), "%s", pp->last);
			snprintf(pp->change.to, sizeof(pp->change.to), "%s", prof->name);
			pp->change.by = bk_profile_source_names[s];
			pp->change.at = (int64_t)time(NULL);
			log_info("policy_changed", LS("pod", pod->pod_name), LS("namespace", pod->pod_namespace),
				 LS("pod_uid", pod->pod_uid), LS("old", pp->last), LS("new", prof->name),
				 LS("by", bk_profile_source_names[s]),
				 LS("running_execs", "keep the profile they started with"));
		}
		if (pp)
			snprintf(pp->last, sizeof(pp->last), "%s", prof->name);
	}
	pthread_mutex_unlock(&lp_lock);
	if (src)
		*src = s;
	return prof;
}

int bk_session_policy_set(struct bk_agent *a, const struct bk_pod *pod, const char *profile, char *old,
			  size_t oldlen, char *now, size_t nowlen, struct bk_error *err)
{
	if (profile && profile[0] && !bk_policy_find(&a->cfg.policy, profile))
		return bk_fail(err, -ENOENT, "", "\"%.64s\" is no profile of this node", profile);
	if (!uid_ok(pod->pod_uid))
		return bk_fail(err, -EINVAL, "", "the pod's uid cannot name a state file");
	pthread_mutex_lock(&lp_lock);
	load(a);
	struct pod_policy *pp = find(pod->pod_uid, true);
	if (!pp) {
		pthread_mutex_unlock(&lp_lock);
		return bk_fail(err, -ENOMEM, "", "no room to record the pod's profile");
	}
	char perr[256] = "";
	enum bk_profile_source s;
	const struct bk_profile *before = effective(a, pod, pp, &s, perr, sizeof(perr));
	snprintf(old, oldlen, "%s", before ? before->name : "");
	int r = persist(a, pod->pod_uid, profile);
	if (r < 0) {
		pthread_mutex_unlock(&lp_lock);
		return bk_fail(err, r, "", "cannot record the pod's profile in %s/policy: %s", a->cfg.state_dir,
			       strerror(-r));
	}
	snprintf(pp->override, sizeof(pp->override), "%s", profile ? profile : "");
	const struct bk_profile *after = effective(a, pod, pp, &s, perr, sizeof(perr));
	snprintf(now, nowlen, "%s", after ? after->name : "");
	if (after && (!before || !streq(before->name, after->name))) {
		pp->changed = true;
		snprintf(pp->change.from, sizeof(pp->change.from), "%s", old);
		snprintf(pp->change.to, sizeof(pp->change.to), "%s", after->name);
		pp->change.by = bk_profile_source_names[BK_PSRC_OVERRIDE];
		pp->change.at = (int64_t)time(NULL);
	}
	if (after)
		snprintf(pp->last, sizeof(pp->last), "%s", after->name);
	pthread_mutex_unlock(&lp_lock);
	log_info("policy_set", LS("pod", pod->pod_name), LS("namespace", pod->pod_namespace), LS("pod_uid", pod->pod_uid),
		 LS("old", old), LS("new", now), LS("source", bk_profile_source_names[s]),
		 LS("running_execs", "keep the profile they started with"));
	return 0;
}

bool bk_session_policy_change(const char *pod_uid, struct bk_profile_change *out)
{
	pthread_mutex_lock(&lp_lock);
	struct pod_policy *pp = find(pod_uid, false);
	bool have = pp && pp->changed;
	if (have)
		*out = pp->change;
	pthread_mutex_unlock(&lp_lock);
	return have;
}
