/* SPDX-License-Identifier: Apache-2.0 */
/* Exec records in the state directory (see records.h). */
#include "agent/isolate/records.h"
#include "agent/isolate/step.h"
#include "agent/parse/records.h"
#include "lib/err.h"
#include "lib/util.h"

#include <endian.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>

struct rec_slot {
	uint32_t state;
	uint32_t len;
	char text[BK_RECORD_SLOT_SIZE - 8];
};
_Static_assert(sizeof(struct rec_slot) == BK_RECORD_SLOT_SIZE, "a slot is BK_RECORD_SLOT_SIZE bytes");

struct bk_records {
	pthread_mutex_t lock;
	struct rec_slot *slots; /* BK_RECORD_SLOTS, after the header page (mapped until the agent ends) */
	bool used[BK_RECORD_SLOTS];
	unsigned low; /* no free slot below it */
};

int bk_records_open(const struct bk_config *c, struct bk_records **out)
{
	*out = NULL;
	char path[sizeof(c->state_dir) + 16], tmp[sizeof(c->state_dir) + 24];
	snprintf(path, sizeof(path), "%s/execs.table", c->state_dir);
	snprintf(tmp, sizeof(tmp), "%s/execs.table.new", c->state_dir);
	_cleanup_free_ struct bk_records *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	const size_t maplen = (size_t)BK_RECORD_SLOT_SIZE * (BK_RECORD_SLOTS + 1);
	_cleanup_close_ int fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	/* the blocks reserved now: a write into a page that a full tmpfs
	 * could not provide would be a SIGBUS, where a file's write fails */
	int fr = posix_fallocate(fd, 0, (off_t)maplen);
	if (fr != 0) {
		unlink(tmp);
		return -fr;
	}
	char *h = mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (h == MAP_FAILED) {
		int r = -errno;
		unlink(tmp);
		return r;
	}
	uint32_t sz = htole32(BK_RECORD_SLOT_SIZE), n = htole32(BK_RECORD_SLOTS);
	memcpy(h, BK_RECORD_TABLE_MAGIC, 8);
	memcpy(h + 8, &sz, 4);
	memcpy(h + 12, &n, 4);
	if (rename(tmp, path) < 0) {
		int r = -errno;
		munmap(h, maplen);
		unlink(tmp);
		return r;
	}
	t->slots = (struct rec_slot *)(h + BK_RECORD_SLOT_SIZE);
	pthread_mutex_init(&t->lock, NULL);
	*out = steal_ptr(&t);
	return 0;
}

/* The record in a free slot of the table: its index, or -1 (no table, no
 * free slot, or it does not fit). */
static int table_put(struct bk_records *t, const char *txt, size_t n)
{
	if (!t || n > sizeof(t->slots[0].text))
		return -1;
	pthread_mutex_lock(&t->lock);
	unsigned i = t->low;
	while (i < BK_RECORD_SLOTS && t->used[i])
		i++;
	if (i < BK_RECORD_SLOTS) {
		t->used[i] = true;
		t->low = i + 1;
	}
	pthread_mutex_unlock(&t->lock);
	if (i == BK_RECORD_SLOTS)
		return -1;
	struct rec_slot *s = &t->slots[i];
	memcpy(s->text, txt, n);
	s->len = htole32((uint32_t)n);
	/* in use only once whole (records.h) */
	__atomic_store_n(&s->state, htole32(BK_RECORD_SLOT_USED), __ATOMIC_RELEASE);
	return (int)i;
}

static void table_clear(struct bk_records *t, int i)
{
	struct rec_slot *s = &t->slots[i];
	__atomic_store_n(&s->state, 0, __ATOMIC_RELEASE);
	/* no stale paths left for whoever reads the file */
	uint32_t n = le32toh(s->len);
	memset(s->text, 0, n < sizeof(s->text) ? n : sizeof(s->text));
	s->len = 0;
	pthread_mutex_lock(&t->lock);
	t->used[i] = false;
	if ((unsigned)i < t->low)
		t->low = (unsigned)i;
	pthread_mutex_unlock(&t->lock);
}

static void record_path(const struct bk_config *c, const char *id, char *buf, size_t len)
{
	snprintf(buf, len, "%s/execs/%s.json", c->state_dir, id);
}

static int file_write(const struct bk_config *c, const char *id, const char *txt, size_t n)
{
	char p[512];
	record_path(c, id, p, sizeof(p));
	_cleanup_close_ int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 && errno == ENOENT) {
		char d[400];
		snprintf(d, sizeof(d), "%s/execs", c->state_dir);
		mkdir_p(d, 0700);
		fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	}
	if (fd < 0)
		return -errno;
	if (write(fd, txt, n) != (ssize_t)n)
		return -EIO;
	return 0;
}

int bk_step_record(struct exec_ctx *x)
{
	/* recorded before anything can run in it: a new agent finds it */
	_cleanup_free_ struct bk_exec_record *rec = calloc(1, sizeof(*rec));
	if (!rec)
		return bk_fail(&x->err, -ENOMEM, NULL, "cannot record the exec in the state directory %s: %s",
			       x->cfg->state_dir, strerror(ENOMEM));
	snprintf(rec->exec_id, sizeof(rec->exec_id), "%s", x->res->exec_id);
	snprintf(rec->cgroup, sizeof(rec->cgroup), "%s", x->cg.v2);
	snprintf(rec->cgroup_pids_v1, sizeof(rec->cgroup_pids_v1), "%s", x->cg.pids);
	snprintf(rec->cgroup_memory_v1, sizeof(rec->cgroup_memory_v1), "%s", x->cg.memory);
	/* the exec's own v1 cgroups only: a shared one is the container's */
	for (int i = 0; i < x->cg.n_v1 && rec->n_v1 < BK_RECORD_V1_MAX; i++)
		if (!x->cg.v1[i].shared)
			snprintf(rec->v1[rec->n_v1++], sizeof(rec->v1[0]), "%s", x->cg.v1[i].path);
	snprintf(rec->pod, sizeof(rec->pod), "%s", x->pod->pod_name);
	snprintf(rec->namespace, sizeof(rec->namespace), "%s", x->pod->pod_namespace);
	snprintf(rec->pod_uid, sizeof(rec->pod_uid), "%s", x->pod->pod_uid);
	_cleanup_free_ char *txt = bk_exec_record_format(rec);
	int r = txt ? 0 : -ENOMEM;
	size_t n = txt ? strlen(txt) : 0;
	x->record_slot = txt ? table_put(x->e->records, txt, n) : -1;
	if (txt && x->record_slot < 0)
		r = file_write(x->cfg, rec->exec_id, txt, n);
	if (r < 0)
		return bk_fail(&x->err, r, NULL, "cannot record the exec in the state directory %s: %s",
			       x->cfg->state_dir, strerror(-r));
	x->recorded = true;
	return 0;
}

void bk_exec_record_remove(const struct bk_config *c, struct bk_records *t, const char *exec_id, int slot)
{
	if (t && slot >= 0 && (unsigned)slot < BK_RECORD_SLOTS) {
		table_clear(t, slot);
		return;
	}
	char p[512];
	record_path(c, exec_id, p, sizeof(p));
	unlink(p);
}
