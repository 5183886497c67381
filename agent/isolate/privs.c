/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/isolate/privs.h"
#include "agent/isolate/step.h"
#include "agent/parse/procstatus.h"
#include "lib/err.h"
#include "lib/util.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/magic.h>
#include <sys/prctl.h>
#include <sys/statfs.h>
#include <sys/syscall.h>

int bk_proc_read(const char *path, char *buf, size_t cap, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;
	struct statfs sf;
	size_t n = 0;
	int r = 0;
	if (fstatfs(fd, &sf) < 0)
		r = -errno;
	else if (sf.f_type != PROC_SUPER_MAGIC)
		r = -EXDEV; /* not the kernel's word (something mounted over /proc) */
	while (r == 0) {
		if (n == cap) {
			r = -EFBIG;
			break;
		}
		ssize_t k = read(fd, buf + n, cap - n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			r = -errno;
		else if (k == 0)
			break;
		else
			n += (size_t)k;
	}
	close(fd);
	*len = n;
	return r;
}

int bk_self_status(char *buf, size_t cap, size_t *len) { return bk_proc_read("/proc/thread-self/status", buf, cap, len); }

/* This thread's status, parsed (no allocation): 0 or -errno. */
static int self_status_parsed(struct bk_proc_status *ps)
{
	char buf[8192];
	size_t len;
	int r = bk_self_status(buf, sizeof(buf), &len);
	return r < 0 ? r : bk_proc_status_parse(buf, len, ps);
}

/* One read costs ~11 us on this machine type; the 82 prctl calls it
 * replaces ~80 us. */
int bk_privs_readback(uid_t uid, gid_t gid)
{
	struct bk_proc_status ps;
	if (self_status_parsed(&ps) < 0)
		return 0;
	for (int i = 0; i < 4; i++)
		if (ps.uid[i] != (int64_t)uid || ps.gid[i] != (int64_t)gid)
			return -EPERM;
	if (ps.n_groups != 0 || ps.no_new_privs != 1 ||
	    (ps.cap_inh | ps.cap_prm | ps.cap_eff | ps.cap_bnd | ps.cap_amb) != 0)
		return -EPERM;
	return 1;
}

bool bk_privs_bset_empty;

/* Threads of this process (the entries of /proc/self/task), or -errno. */
static int thread_count(void)
{
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return -errno;
	int n = 0;
	for (struct dirent *de; (de = readdir(d));)
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

int bk_privs_hand_over(void)
{
	int nt = thread_count();
	if (nt != 1)
		return nt < 0 ? nt : -EBUSY;
	/* the sets as the kernel holds them; inheritable: what is permitted
	 * and bounded now (capset refuses more), which the helper's root
	 * execve gets back as permitted */
	struct bk_proc_status ps;
	if (self_status_parsed(&ps) < 0)
		return -EIO;
	uint64_t inh = ps.cap_prm & ps.cap_bnd;
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct d[2];
	for (int i = 0; i < 2; i++)
		d[i] = (struct __user_cap_data_struct){ .effective = (uint32_t)(ps.cap_eff >> (32 * i)),
							.permitted = (uint32_t)(ps.cap_prm >> (32 * i)),
							.inheritable = (uint32_t)(inh >> (32 * i)) };
	if (syscall(SYS_capset, &hdr, d) < 0)
		return -errno;
	for (int cap = 0; cap <= 63; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
			return -errno;
	/* the kernel's word, for this thread, which every later one copies */
	if (self_status_parsed(&ps) < 0)
		return -EIO;
	if (ps.cap_bnd != 0 || ps.cap_inh != inh)
		return -EPERM;
	bk_privs_bset_empty = true;
	return 0;
}

int bk_privs_drop(uid_t uid, gid_t gid, int cap_last)
{
	if (uid == 0 || gid == 0)
		return -EPERM;
	if (cap_last < 0 || cap_last > 63)
		cap_last = 63;
	if (!bk_privs_bset_empty)
		for (int cap = 0; cap <= cap_last; cap++)
			if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
				return -errno;
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
		return -errno;
	if (syscall(SYS_setgroups, 0, NULL) < 0 || syscall(SYS_setresgid, gid, gid, gid) < 0 ||
	    syscall(SYS_setresuid, uid, uid, uid) < 0)
		return -errno;
	/* the uid change cleared the permitted and effective sets; the
	 * inheritable one stays, and the agent's threads hold theirs there
	 * (bk_privs_hand_over): a file's inheritable capabilities would
	 * give them back at execve */
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct none[2] = { { 0 } };
	if (syscall(SYS_capset, &hdr, none) < 0)
		return -errno;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		return -errno;
	int v = bk_privs_readback(uid, gid);
	if (v != 0)
		return v < 0 ? v : 0;
	uid_t ru, eu, su;
	gid_t rg, eg, sg;
	if (syscall(SYS_getresuid, &ru, &eu, &su) < 0 || syscall(SYS_getresgid, &rg, &eg, &sg) < 0)
		return -errno;
	if (ru != uid || eu != uid || su != uid || rg != gid || eg != gid || sg != gid)
		return -EPERM;
	long ng = syscall(SYS_getgroups, 0, NULL);
	if (ng != 0)
		return ng < 0 ? -errno : -EPERM;
	if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
		return -EPERM;
	struct __user_cap_data_struct data[2];
	if (syscall(SYS_capget, &hdr, data) < 0)
		return -errno;
	for (int i = 0; i < 2; i++)
		if (data[i].effective || data[i].permitted || data[i].inheritable)
			return -EPERM;
	for (int cap = 0; cap <= cap_last; cap++) {
		if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) > 0)
			return -EPERM;
		if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, cap, 0, 0) > 0)
			return -EPERM;
	}
	return 0;
}

int bk_step_sandbox_user(struct exec_ctx *x)
{
	if (x->pod->uid == 0)
		return bk_fail(&x->err, -EPERM, NULL,
			       "the sandbox container runs as root; boxkite only runs commands as a non-root sandbox user");
	return 0;
}
