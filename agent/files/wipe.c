/* SPDX-License-Identifier: Apache-2.0 */
/* The session wipe: a new session (/configure) starts from empty
 * /workspace, /tmp and /mnt/user-data/outputs. The helper removes their
 * contents as the sandbox user, entering each directory by one name with
 * no symlink and no mount crossing (fs.c: bkf_beneath), so the wipe can
 * remove nothing the sandbox user could not remove itself and nothing
 * outside those roots. Bounded in depth, operations and time. */
#include "agent/files/internal.h"
#include "lib/missing.h"

#include <fcntl.h>
#include <sys/syscall.h>

/* ---- helper side -------------------------------------------------------------------------- */

struct wipe {
	uid_t uid;
	uint64_t removed, kept, ops;
};

static void wipe_dir(struct wipe *w, int dfd, int depth);

/* chmod 0700 of the directory dfd/name without following a link:
 * fchmodat2(AT_SYMLINK_NOFOLLOW) from 6.6; before that fchmodat, which
 * follows a link, after a check that name is still our directory. A link
 * swapped in between can only lead to a file the sandbox user owns (the
 * helper runs as that user, without capabilities), whose mode the user
 * could change itself; nothing else is written. */
static void give_back(int dfd, const char *name)
{
	if (syscall(SYS_fchmodat2, dfd, name, 0700, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOSYS)
		return;
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
		if (fchmodat(dfd, name, 0700, 0) < 0)
			return; /* the unlink below reports it as kept */
}

static void wipe_entry(struct wipe *w, int dfd, const char *name, const struct stat *st, int depth)
{
	w->ops++;
	if (S_ISDIR(st->st_mode)) {
		if (depth >= WIPE_DEPTH_MAX) {
			w->kept++;
			return;
		}
		/* a directory the user made unreadable or unwritable: its
		 * owner (us) may give the permission back */
		if (st->st_uid == w->uid && (st->st_mode & 0700) != 0700)
			give_back(dfd, name);
		int cfd = bkf_beneath(dfd, name, O_RDONLY | O_DIRECTORY);
		if (cfd >= 0) {
			wipe_dir(w, cfd, depth + 1);
			close(cfd);
		}
		if (unlinkat(dfd, name, AT_REMOVEDIR) == 0)
			w->removed++;
		else
			w->kept++;
		return;
	}
	if (unlinkat(dfd, name, 0) == 0)
		w->removed++;
	else
		w->kept++;
}

static void wipe_dir(struct wipe *w, int dfd, int depth)
{
	/* delete in batches until the directory is empty or nothing moves */
	for (int pass = 0; pass < 64 && w->ops < WIPE_OPS_MAX; pass++) {
		struct dent *v = NULL;
		size_t n = 0;
		bool more = false;
		if (bkf_read_dir(dfd, 10000, &v, &n, &more) < 0 || n == 0) {
			bkf_dents_free(v, n);
			return;
		}
		uint64_t before = w->removed;
		for (size_t i = 0; i < n && w->ops < WIPE_OPS_MAX; i++)
			if (v[i].stat_ok)
				wipe_entry(w, dfd, v[i].name, &v[i].st, depth);
		bkf_dents_free(v, n);
		if (!more || w->removed == before)
			return;
	}
}

void bkf_op_wipe(struct hctx *h, struct bk_file_result *r)
{
	static const enum bk_vroot roots[WIPE_ROOTS_N] = { BK_VROOT_WORKSPACE, BK_VROOT_TMP, BK_VROOT_OUTPUTS };
	struct wipe w = { .uid = h->uid };
	r->unavailable = bkf_calloc(h, WIPE_ROOTS_N, sizeof(*r->unavailable));
	for (size_t i = 0; i < WIPE_ROOTS_N; i++) {
		int fd = bkf_open_root(roots[i], O_RDONLY);
		if (fd < 0) {
			r->unavailable[r->nunavailable++] = bkf_strdup(h, bk_vroots[roots[i]].path);
			continue;
		}
		wipe_dir(&w, fd, 0);
		close(fd);
	}
	r->removed = w.removed;
	r->kept = w.kept;
}

/* ---- agent side --------------------------------------------------------------------------- */

