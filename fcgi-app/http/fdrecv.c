/* See fdrecv.h. */
#include "fdrecv.h"

#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

ssize_t recv_with_fds(int sock, void *buf, size_t len, int flags, int *fds, int max, int *nfds)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(FDRECV_MAX * sizeof(int))];
	} c;
	struct iovec v = { buf, len };
	struct msghdr m = { .msg_iov = &v, .msg_iovlen = 1, .msg_control = c.b,
			    .msg_controllen = sizeof(c.b) };
	ssize_t n = recvmsg(sock, &m, flags | MSG_CMSG_CLOEXEC);

	*nfds = 0;
	for (struct cmsghdr *cm = n >= 0 ? CMSG_FIRSTHDR(&m) : NULL; cm; cm = CMSG_NXTHDR(&m, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		for (size_t i = 0; i < (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			if (*nfds < max)
				fds[(*nfds)++] = fd;
			else
				close(fd);
		}
	}
	return n;
}
