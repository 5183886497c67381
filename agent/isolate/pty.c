/* SPDX-License-Identifier: Apache-2.0 */
/* An exec's terminal in its own devpts (pty.h). */
#include "agent/isolate/pty.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

static int fail(const char **what, const char *w)
{
	int e = errno > 0 ? errno : EIO;
	*what = w;
	return -e;
}

int bk_pty_child(int sock, uint16_t rows, uint16_t cols, uid_t uid, gid_t gid, const char **what)
{
	struct stat st;
	errno = 0;
	if (stat("/dev/pts", &st) == 0 && !S_ISDIR(st.st_mode))
		errno = ENOTDIR;
	if (errno == ENOTDIR || stat("/dev/pts", &st) < 0)
		return fail(what, "the sandbox container has no /dev/pts directory for the exec's terminal");
	/* a new instance: its own numbering, its own ptmx; nothing of the
	 * container's or the host's terminals is visible through it */
	if (mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620") < 0)
		return fail(what, "cannot mount the exec's own devpts");
	/* /dev/ptmx is a symlink to pts/ptmx in an OCI container; a device
	 * node instead gets the new instance's ptmx bound over it */
	if (lstat("/dev/ptmx", &st) == 0 && !S_ISLNK(st.st_mode) &&
	    mount("/dev/pts/ptmx", "/dev/ptmx", NULL, MS_BIND, NULL) < 0)
		return fail(what, "cannot bind the exec's ptmx over /dev/ptmx");
	int m = open("/dev/pts/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (m < 0)
		return fail(what, "cannot open the exec's ptmx");
	int unlock = 0;
	if (ioctl(m, TIOCSPTLCK, &unlock) < 0)
		return fail(what, "cannot unlock the exec's terminal");
	int s = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY);
	if (s < 0)
		return fail(what, "cannot open the exec's terminal");
	if (fchown(s, uid, gid) < 0 || fchmod(s, 0620) < 0)
		return fail(what, "cannot give the exec's terminal to the sandbox user");
	struct winsize ws = { .ws_row = rows ? rows : 24, .ws_col = cols ? cols : 80 };
	if (ioctl(s, TIOCSWINSZ, &ws) < 0)
		return fail(what, "cannot set the exec's terminal size");
	if (setsid() < 0 || ioctl(s, TIOCSCTTY, 0) < 0)
		return fail(what, "cannot make the terminal the exec's controlling terminal");
	if (dup2(s, 0) < 0 || dup2(s, 1) < 0 || dup2(s, 2) < 0)
		return fail(what, "cannot set up the terminal as stdio");
	if (s > 2)
		close(s);
	char cbuf[CMSG_SPACE(sizeof(int))];
	memset(cbuf, 0, sizeof(cbuf));
	char b = 'm';
	struct iovec iov = { .iov_base = &b, .iov_len = 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &m, sizeof(int));
	ssize_t n;
	do
		n = sendmsg(sock, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n != 1)
		return fail(what, "cannot hand the terminal to the agent");
	close(m);
	close(sock);
	return 0;
}

int bk_pty_recv_master(int sock)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	char b;
	struct iovec iov = { .iov_base = &b, .iov_len = 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	ssize_t n;
	do
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if (n != 1)
		return -EPROTO;
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	if (!c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(sizeof(int)))
		return -EPROTO;
	int fd;
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	return fd;
}
