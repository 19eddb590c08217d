/* See fdpass.h. */
#include "fdpass.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "protocol.h"

/* the most one message carries: port-connect's batch of sockets */
#define FDS_MAX PORT_SOCKETS_MAX

ssize_t fds_send(int via, const void *buf, size_t len, const int *fds, int n)
{
	union { struct cmsghdr h; char buf[CMSG_SPACE(sizeof(int) * FDS_MAX)]; } u;
	struct iovec iov = { (void *)buf, len };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	if (n < 0 || n > FDS_MAX) {
		errno = EINVAL;
		return -1;
	}
	if (n > 0) {
		memset(&u, 0, sizeof(u));
		m.msg_control = u.buf;
		m.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n);
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)n);
	}
	ssize_t sent;
	while ((sent = sendmsg(via, &m, MSG_NOSIGNAL)) < 0 && errno == EINTR)
		;
	return sent;
}

char fd_recv_byte(int via, int *fd)
{
	char c = 0;
	union { struct cmsghdr h; char buf[CMSG_SPACE(sizeof(int))]; } u;
	struct iovec iov = { &c, 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			    .msg_controllen = sizeof(u.buf) };
	*fd = -1;
	ssize_t n;
	while ((n = recvmsg(via, &m, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
		;
	if (n <= 0)
		return 0;
	struct cmsghdr *h = CMSG_FIRSTHDR(&m);
	if (h && h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS &&
	    h->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(fd, CMSG_DATA(h), sizeof(int));
	return c;
}
