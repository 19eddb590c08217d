/* Netlink requests: see netlink.h. */
#include "netlink.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter/nfnetlink.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <unistd.h>

int nl_open(int protocol)
{
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, protocol);
	if (fd >= 0) {
		struct timeval tv = { 5, 0 };
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	}
	return fd;
}

void nl_init(struct nlreq *q, uint16_t type, uint16_t flags)
{
	memset(q, 0, sizeof(*q));
	q->h.nlmsg_len = NLMSG_LENGTH(0);
	q->h.nlmsg_type = type;
	q->h.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | flags;
	q->h.nlmsg_seq = 1;
}

void *nl_tail(struct nlreq *q, size_t len)
{
	void *p = (char *)&q->h + NLMSG_ALIGN(q->h.nlmsg_len);
	memset(p, 0, len);
	q->h.nlmsg_len = NLMSG_ALIGN(q->h.nlmsg_len) + (uint32_t)NLMSG_ALIGN(len);
	return p;
}

struct rtattr *nl_attr(struct nlreq *q, unsigned short type, const void *data, size_t len)
{
	struct rtattr *a = (struct rtattr *)((char *)&q->h + NLMSG_ALIGN(q->h.nlmsg_len));
	a->rta_type = type;
	a->rta_len = (unsigned short)RTA_LENGTH(len);
	if (len)
		memcpy(RTA_DATA(a), data, len);
	q->h.nlmsg_len = NLMSG_ALIGN(q->h.nlmsg_len) + RTA_ALIGN(a->rta_len);
	return a;
}

void nl_nest_end(struct nlreq *q, struct rtattr *a)
{
	a->rta_len = (unsigned short)((char *)&q->h + q->h.nlmsg_len - (char *)a);
}

/* Read until the acknowledgement (or error) of our request: 0 or -errno.
 * Other messages before it (a GET's answer) are skipped. */
static int nl_ack(int fd)
{
	char buf[4096];
	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n))
			if (h->nlmsg_type == NLMSG_ERROR) {
				struct nlmsgerr *e = NLMSG_DATA(h);
				return e->error;
			}
	}
}

int nl_talk(int fd, struct nlreq *q)
{
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	if (sendto(fd, &q->h, q->h.nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0)
		return -errno;
	return nl_ack(fd);
}

int nl_talk_batch(int fd, struct nlreq *q, uint16_t subsys)
{
	struct {
		struct nlmsghdr h;
		struct nfgenmsg g;
	} begin = { { NLMSG_LENGTH(sizeof(struct nfgenmsg)), NFNL_MSG_BATCH_BEGIN, NLM_F_REQUEST, 0, 0 },
		    { AF_UNSPEC, NFNETLINK_V0, 0 } }, end;
	begin.g.res_id = htons(subsys);
	end = begin;
	end.h.nlmsg_type = NFNL_MSG_BATCH_END;
	end.h.nlmsg_seq = 2;
	q->h.nlmsg_seq = 1;
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	struct iovec iov[3] = { { &begin, sizeof(begin) }, { &q->h, q->h.nlmsg_len }, { &end, sizeof(end) } };
	struct msghdr m = { .msg_name = &kernel, .msg_namelen = sizeof(kernel), .msg_iov = iov, .msg_iovlen = 3 };
	if (sendmsg(fd, &m, 0) < 0)
		return -errno;
	return nl_ack(fd);
}
