/* Preview ports: why it is done this way.
 *
 * A room's network namespace has only its own interfaces (in the default
 * `network = none`, just lo), so nothing on the host can reach a server a
 * room runs on 127.0.0.1.  The keeper holds that namespace for the room's
 * whole life; the helper (root in the host's user namespace, which owns
 * every namespace) joins it for one connect(): a socket belongs to the
 * namespace it was created in, so the socket keeps talking to the room's
 * loopback after it is sent to roombox-fcgi, which never gains any
 * privilege or namespace itself.
 *
 * Only the network namespace is joined: no room process runs, no file of
 * the room is opened, and the helper exits right after.  The keeper is
 * named by its pid, whose reuse is excluded by opening a pidfd first and
 * then checking that the recorded keeper (pid + start time, room.c) is
 * still that process: setns() on the pidfd then enters exactly its
 * namespace, or fails if it has died meanwhile. */
#include "portconn.h"
#include "fdpass.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "protocol.h"

#define ERR(...) (snprintf(err, errlen, __VA_ARGS__), -1)
#define REFUSED(...) (snprintf(err, errlen, __VA_ARGS__), PORTCONN_REFUSED)

/* Enter the keeper's network namespace; 0, PORTCONN_REFUSED (not running)
 * or -1.  *keep (if not NULL) gets the keeper's pidfd, readable once it
 * has exited. */
static int join_room_net(const struct room *r, int port, int *keep, char *err, size_t errlen)
{
	pid_t keeper = room_keeper_pid(r);
	if (keeper <= 0)
		return REFUSED("room %s: port %d: the room is not running", r->id, port);
	int pidfd = (int)syscall(SYS_pidfd_open, keeper, 0);
	if (pidfd < 0)
		return errno == ESRCH ? REFUSED("room %s: port %d: the room is not running", r->id, port)
			: ERR("room %s: pidfd_open keeper: %s", r->id, strerror(errno));
	if (room_keeper_pid(r) != keeper) {   /* pid reused since we read it */
		close(pidfd);
		return REFUSED("room %s: port %d: the room is not running", r->id, port);
	}
	int rc = setns(pidfd, CLONE_NEWNET);
	int saved = errno;
	if (rc == 0 && keep)
		*keep = pidfd;
	else
		close(pidfd);
	if (rc < 0)
		return saved == ESRCH ? REFUSED("room %s: port %d: the room is not running", r->id, port)
			: ERR("room %s: join network namespace: %s", r->id, strerror(saved));
	return 0;
}

/* connect() bounded by PORT_CONNECT_TIMEOUT_MS; 0 or an errno. */
static int connect_bounded(int fd, const struct sockaddr_in *sa)
{
	if (connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0)
		return 0;
	if (errno != EINPROGRESS)
		return errno;
	struct pollfd p = { fd, POLLOUT, 0 };
	int n;
	while ((n = poll(&p, 1, PORT_CONNECT_TIMEOUT_MS)) < 0 && errno == EINTR)
		;
	if (n == 0)
		return ETIMEDOUT;
	int soerr = 0;
	socklen_t len = sizeof(soerr);
	if (n < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
		return errno;
	return soerr;
}

/* A socket to 127.0.0.1:port in the namespace we are in: connected, or
 * (wait false) with its connect under way, which its new holder finishes
 * (serve mode: one slow connect must not hold up the room's others). */
static int connect_port(const struct room *r, int port, bool wait, char *err, size_t errlen)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return ERR("room %s: port %d: socket: %s", r->id, port, strerror(errno));
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int e = 0;
	if (wait)
		e = connect_bounded(fd, &sa);
	else if (connect(fd, (const struct sockaddr *)&sa, sizeof(sa)) < 0 && errno != EINPROGRESS)
		e = errno;
	if (e == 0) {
		if (wait)   /* the caller relays with blocking I/O of its own choosing */
			fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
		return fd;
	}
	close(fd);
	if (e == ECONNREFUSED || e == ETIMEDOUT || e == ENETUNREACH || e == EADDRNOTAVAIL)
		return REFUSED("room %s: nothing listens on port %d (%s)", r->id, port, strerror(e));
	return ERR("room %s: port %d: connect: %s", r->id, port, strerror(e));
}

int portconn_open(const struct room *r, int port, char *err, size_t errlen)
{
	int rc = join_room_net(r, port, NULL, err, errlen);
	return rc < 0 ? rc : connect_port(r, port, true, err, errlen);
}

/* count TCP sockets of the namespace we are in, not connected, in one
 * reply; 0 to go on, 1 when the reply cannot be sent. */
static int send_sockets(const struct room *r, int via, int count)
{
	int fds[PORT_SOCKETS_MAX], n = 0;
	while (n < count && (fds[n] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) >= 0)
		n++;
	if (n < count)
		fprintf(stderr, "roombox-helper: room %s: previews: socket: %s\n", r->id, strerror(errno));
	char reply = n ? PORT_REPLY_SOCKETS : PORT_REPLY_FAILED;
	ssize_t sent = fds_send(via, &reply, 1, fds, n);
	for (int i = 0; i < n; i++)
		close(fds[i]);
	return sent == 1 ? 0 : 1;
}

/* One serve request: read it, connect (or make sockets), reply.  0 to go on, 1 at the end
 * of requests (or a reply that cannot be sent). */
static int serve_one(const struct room *r, int via)
{
	struct port_request q;
	char err[256];
	ssize_t n;
	while ((n = recv(via, &q, sizeof(q), MSG_WAITALL)) < 0 && errno == EINTR)
		;
	if (n != (ssize_t)sizeof(q))
		return 1;
	if (q.port == 0 && q.count >= 1 && q.count <= PORT_SOCKETS_MAX)
		return send_sockets(r, via, q.count);
	if (q.port == 0 || q.count != 0) {
		char reply = PORT_REPLY_INVALID;
		return send(via, &reply, 1, MSG_NOSIGNAL) == 1 ? 0 : 1;
	}
	int fd = connect_port(r, q.port, false, err, sizeof(err));
	if (fd < 0) {
		char reply = fd == PORTCONN_REFUSED ? PORT_REPLY_REFUSED : PORT_REPLY_FAILED;
		if (fd != PORTCONN_REFUSED)
			fprintf(stderr, "roombox-helper: %s\n", err);
		return send(via, &reply, 1, MSG_NOSIGNAL) == 1 ? 0 : 1;
	}
	int rc = portconn_send(r, via, fd, err, sizeof(err));
	close(fd);
	return rc < 0 ? 1 : 0;
}

int portconn_serve(const struct room *r, int via, int (*joined)(char *err, size_t errlen),
		   char *err, size_t errlen)
{
	int keeper = -1;
	int rc = join_room_net(r, 0, &keeper, err, errlen);
	if (rc < 0)
		return rc;
	/* what follows (sockets in the room's namespace, its loopback, our
	 * caller's socket, the room's activity stamp, root's own file) needs
	 * no capability */
	if (joined && joined(err, errlen) != 0) {
		close(keeper);
		return -1;
	}
	struct timespec last = { 0, 0 };
	for (;;) {
		struct pollfd p[2] = { { via, POLLIN, 0 }, { keeper, POLLIN, 0 } };
		int n = poll(p, 2, PORT_SERVE_IDLE_MS);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || (p[1].revents & POLLIN))
			break;   /* idle, or the room stopped: its namespace is gone */
		if (serve_one(r, via))
			break;
		/* activity for idle_timeout: one stamp a second is plenty */
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec != last.tv_sec) {
			room_touch_active(r);
			last = now;
		}
	}
	close(keeper);
	return 0;
}

int portconn_send(const struct room *r, int via, int fd, char *err, size_t errlen)
{
	char byte = PORT_REPLY_CONNECTED;
	ssize_t n = fds_send(via, &byte, 1, &fd, 1);
	if (n != 1)
		return ERR("room %s: hand over the connection: %s", r->id,
			   n < 0 ? strerror(errno) : "short write");
	return 0;
}
