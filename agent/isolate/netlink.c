/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/isolate/netlink.h"
#include "lib/util.h"

#include <libmnl/libmnl.h>
#include <linux/if.h>
#include <linux/if_addr.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>
#include <time.h>

static int nl_open(void)
{
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0)
		return -errno;
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	return fd;
}

static int nl_send(int fd, struct nlmsghdr *nlh)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
	ssize_t r = sendto(fd, nlh, nlh->nlmsg_len, 0, (struct sockaddr *)&sa, sizeof(sa));
	if (r < 0)
		return -errno;
	return 0;
}

/* Send one request (nlmsg_seq set by the caller) and wait for its ack. */
static int nl_request(struct nlmsghdr *nlh)
{
	_cleanup_close_ int fd = nl_open();
	if (fd < 0)
		return fd;
	int r = nl_send(fd, nlh);
	if (r < 0)
		return r;
	char rbuf[1024] __attribute__((aligned(8)));
	ssize_t n = recv(fd, rbuf, sizeof(rbuf), 0);
	if (n < 0)
		return -errno;
	r = mnl_cb_run(rbuf, (size_t)n, nlh->nlmsg_seq, 0, NULL, NULL);
	return r < 0 ? -errno : 0;
}

int bk_netns_lo_up(void)
{
	char buf[512] __attribute__((aligned(8))) = { 0 }; /* libmnl 1.0.4 leaves attribute padding unset */
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = RTM_NEWLINK;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	uint32_t seq = (uint32_t)time(NULL);
	nlh->nlmsg_seq = seq;
	struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_family = AF_UNSPEC;
	ifm->ifi_change = IFF_UP;
	ifm->ifi_flags = IFF_UP;
	mnl_attr_put_strz(nlh, IFLA_IFNAME, "lo");
	return nl_request(nlh);
}

struct list_ctx {
	char (*names)[IFNAMSIZ];
	int max;
	int count;
};

static int attr_cb(const struct nlattr *a, void *data)
{
	const struct nlattr **tb = data;
	int type = mnl_attr_get_type(a);
	if (type == IFLA_IFNAME && mnl_attr_validate(a, MNL_TYPE_NUL_STRING) >= 0)
		tb[IFLA_IFNAME] = a;
	return MNL_CB_OK;
}

static int link_cb(const struct nlmsghdr *nlh, void *data)
{
	struct list_ctx *c = data;
	const struct nlattr *tb[IFLA_MAX + 1] = { 0 };
	mnl_attr_parse(nlh, sizeof(struct ifinfomsg), attr_cb, tb);
	if (c->count < c->max) {
		const char *name = tb[IFLA_IFNAME] ? mnl_attr_get_str(tb[IFLA_IFNAME]) : "?";
		size_t l = strnlen(name, IFNAMSIZ - 1);
		memcpy(c->names[c->count], name, l);
		c->names[c->count][l] = '\0';
	}
	c->count++;
	return MNL_CB_OK;
}

/* Send one dump request and run cb over every answer (stack buffers only). */
static int nl_dump(uint16_t type, uint8_t family, mnl_cb_t cb, void *data)
{
	_cleanup_close_ int fd = nl_open();
	if (fd < 0)
		return fd;
	char buf[512] __attribute__((aligned(8)));
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = type;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	uint32_t seq = (uint32_t)time(NULL) + type;
	nlh->nlmsg_seq = seq;
	struct rtgenmsg *rt = mnl_nlmsg_put_extra_header(nlh, sizeof(*rt));
	rt->rtgen_family = family;
	int r = nl_send(fd, nlh);
	if (r < 0)
		return r;
	char rbuf[16384] __attribute__((aligned(8)));
	for (;;) {
		ssize_t n = recv(fd, rbuf, sizeof(rbuf), 0);
		if (n < 0)
			return -errno;
		r = mnl_cb_run(rbuf, (size_t)n, seq, 0, cb, data);
		if (r < 0)
			return -errno;
		if (r == MNL_CB_STOP)
			return 0;
	}
}

int bk_netns_list(char names[][IFNAMSIZ], int max)
{
	struct list_ctx c = { .names = names, .max = max };
	int r = nl_dump(RTM_GETLINK, AF_PACKET, link_cb, &c);
	return r < 0 ? r : c.count;
}

struct addr_ctx {
	unsigned char (*addrs)[16];
	int max;
	int count;
};

static int addr_attr_cb(const struct nlattr *a, void *data)
{
	const struct nlattr **tb = data;
	int type = mnl_attr_get_type(a);
	if ((type == IFA_ADDRESS || type == IFA_LOCAL) && type <= IFA_MAX)
		tb[type] = a;
	return MNL_CB_OK;
}

static int addr_cb(const struct nlmsghdr *nlh, void *data)
{
	struct addr_ctx *c = data;
	const struct ifaddrmsg *ifa = mnl_nlmsg_get_payload(nlh);
	const struct nlattr *tb[IFA_MAX + 1] = { 0 };
	mnl_attr_parse(nlh, sizeof(*ifa), addr_attr_cb, tb);
	const struct nlattr *a = tb[IFA_LOCAL] ? tb[IFA_LOCAL] : tb[IFA_ADDRESS];
	if (!a || c->count >= c->max)
		return MNL_CB_OK;
	unsigned char *out = c->addrs[c->count];
	memset(out, 0, 16);
	if (ifa->ifa_family == AF_INET && mnl_attr_get_payload_len(a) == 4) {
		out[10] = out[11] = 0xff;
		memcpy(out + 12, mnl_attr_get_payload(a), 4);
		c->count++;
	} else if (ifa->ifa_family == AF_INET6 && mnl_attr_get_payload_len(a) == 16) {
		memcpy(out, mnl_attr_get_payload(a), 16);
		c->count++;
	}
	return MNL_CB_OK;
}

int bk_netns_addrs(unsigned char (*addrs)[16], int max)
{
	struct addr_ctx c = { .addrs = addrs, .max = max };
	int r = nl_dump(RTM_GETADDR, AF_UNSPEC, addr_cb, &c);
	return r < 0 ? r : c.count;
}

int bk_netns_lo_addr_add(int family, const unsigned char *addr)
{
	char buf[512] __attribute__((aligned(8))) = { 0 };
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = RTM_NEWADDR;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;
	uint32_t seq = (uint32_t)time(NULL) + 3;
	nlh->nlmsg_seq = seq;
	struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
	ifa->ifa_family = (unsigned char)family;
	ifa->ifa_prefixlen = family == AF_INET ? 32 : 128;
	ifa->ifa_flags = family == AF_INET6 ? IFA_F_NODAD : 0;
	ifa->ifa_scope = RT_SCOPE_UNIVERSE;
	ifa->ifa_index = 1; /* lo */
	size_t alen = family == AF_INET ? 4 : 16;
	mnl_attr_put(nlh, IFA_LOCAL, alen, addr);
	mnl_attr_put(nlh, IFA_ADDRESS, alen, addr);
	return nl_request(nlh);
}
