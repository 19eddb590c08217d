/* The preview relay: HTTP and WebSocket bytes between a web server and a
 * server listening inside a room (SPEC §8.5).
 *
 * Why it is built this way:
 *
 * - FastCGI cannot carry a WebSocket (it has no upgrade, and it buffers),
 *   so the web servers proxy /preview/ and preview_domain hosts as plain
 *   HTTP/1.1 to a unix socket of roombox-fcgi's own, preview.sock beside
 *   the FastCGI socket (nginx: proxy_pass http://unix:...; lighttpd:
 *   mod_proxy with upgrade enabled).  Below that socket everything is
 *   bytes, whatever the protocol after the head.
 * - One accepting thread; one detached thread per connection, at most
 *   PREVIEW_RELAYS_MAX (a connection past that gets 503 at once).  Each
 *   reads the request head (at most PREVIEW_HEAD_MAX bytes, within
 *   PREVIEW_HEAD_MS), finds the token (preview_head.c), looks the exposure
 *   up (preview.c), and asks the helper for a connection to the port inside
 *   the room (op port-connect: the helper joins the room's network
 *   namespace and sends the connected socket back over a socketpair).  No
 *   privilege or namespace is ever taken here.
 * - The head goes on with the request target rewritten (/preview/<token>
 *   taken off), then bytes are copied both ways until both sides are done;
 *   one side's end of stream is passed on as a half-close, and no byte
 *   either way for PREVIEW_IDLE_MS closes both.
 * - The web servers open one connection per proxied request (nginx's
 *   "Connection: close" unless upgrading, lighttpd likewise), so only the
 *   first head on a connection is read and rewritten.
 * - Unexposing or cleaning up a room revokes its tokens: running relays
 *   of the token are shut down (both sockets), so an open WebSocket ends
 *   with the exposure. */
#include "preview.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "helper_client.h"
#include "http.h"
#include "protocol.h"

#define RELAY_BUF (64u << 10)
#define PORT_CONNECT_DEADLINE_MS 30000

static struct app *relay_app;
static int relay_listen_fd = -1;
static char relay_path[108];
static bool relay_socket_created;

/* Running relays, for the bound and for revocation. */
struct relay_slot {
	bool used;
	char token[PREVIEW_TOKEN_LEN + 1];
	int client, room;          /* -1 when not (yet) open */
};
static struct relay_slot slots[PREVIEW_RELAYS_MAX];
static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;

int preview_socket_path(const struct config *cfg, char *out, size_t outlen)
{
	char dir[sizeof(cfg->socket)];
	snprintf(dir, sizeof(dir), "%s", cfg->socket);
	int n = snprintf(out, outlen, "%s/preview.sock", dirname(dir));
	return n > 0 && (size_t)n < outlen ? 0 : -1;
}

static int slot_take(int client)
{
	pthread_mutex_lock(&slots_lock);
	for (int i = 0; i < PREVIEW_RELAYS_MAX; i++)
		if (!slots[i].used) {
			slots[i] = (struct relay_slot){ .used = true, .client = client, .room = -1 };
			pthread_mutex_unlock(&slots_lock);
			return i;
		}
	pthread_mutex_unlock(&slots_lock);
	return -1;
}

/* The relay's token and room socket, once known (revocation sees them). */
static void slot_set(int i, const char *token, int room)
{
	pthread_mutex_lock(&slots_lock);
	snprintf(slots[i].token, sizeof(slots[i].token), "%s", token);
	slots[i].room = room;
	pthread_mutex_unlock(&slots_lock);
}

/* Closing stays with the relay's thread; shutdown only wakes it. */
static void slot_give(int i)
{
	pthread_mutex_lock(&slots_lock);
	int client = slots[i].client, room = slots[i].room;
	slots[i] = (struct relay_slot){ 0 };
	pthread_mutex_unlock(&slots_lock);
	close(client);
	if (room >= 0)
		close(room);
}

void preview_relay_revoke(const char *token)
{
	pthread_mutex_lock(&slots_lock);
	for (int i = 0; i < PREVIEW_RELAYS_MAX; i++)
		if (slots[i].used && strcmp(slots[i].token, token) == 0) {
			shutdown(slots[i].client, SHUT_RDWR);
			if (slots[i].room >= 0)
				shutdown(slots[i].room, SHUT_RDWR);
		}
	pthread_mutex_unlock(&slots_lock);
}

/* ---- answers of our own (the room's server answers everything else) ---- */

static void write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		buf += n;
		len -= (size_t)n;
	}
}

static void answer(int fd, int status, const char *error)
{
	char body[512], head[256];
	json_object *o = json_object_new_object();
	json_object_object_add(o, "error", json_object_new_string(error));
	int blen = snprintf(body, sizeof(body), "%s\n",
			    json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
							   JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(o);
	if (blen >= (int)sizeof(body))
		blen = (int)sizeof(body) - 1;
	int hlen = snprintf(head, sizeof(head), "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
			    "Content-Length: %d\r\nConnection: close\r\n%s\r\n", status,
			    http_reason(status), blen, status == 503 ? "Retry-After: 1\r\n" : "");
	write_all(fd, head, (size_t)hlen);
	write_all(fd, body, (size_t)blen);
}

/* ---- one connection ---- */

static long now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Read until the head is whole; its parse result, buf/len hold what came. */
static enum preview_head_result head_read(int fd, char *buf, size_t *len, struct preview_head *h)
{
	long deadline = now_ms() + PREVIEW_HEAD_MS;
	enum preview_head_result r = PREVIEW_HEAD_INCOMPLETE;
	while (*len < PREVIEW_HEAD_MAX) {
		struct pollfd p = { fd, POLLIN, 0 };
		long left = deadline - now_ms();
		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			break;
		ssize_t n = recv(fd, buf + *len, PREVIEW_HEAD_MAX - *len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		*len += (size_t)n;
		r = preview_head_parse(buf, *len, relay_app->cfg.preview_domain, h);
		if (r != PREVIEW_HEAD_INCOMPLETE)
			return r;
	}
	return r;
}

/* A socket connected to the room's 127.0.0.1:port, or -1 with *status and
 * msg saying what to answer. */
static int room_connect(const char *room, int port, int *status, char *msg, size_t msglen)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		*status = 500;
		snprintf(msg, msglen, "room %s: previews: socketpair: %s", room, strerror(errno));
		return -1;
	}
	struct helper_target target = app_helper(relay_app);
	struct helper_error err;
	json_object *req = json_object_new_object();
	json_object_object_add(req, HK_OP, json_object_new_string(HELPER_OP_PORT_CONNECT));
	json_object_object_add(req, HK_ROOM, json_object_new_string(room));
	json_object_object_add(req, HK_PORT, json_object_new_int(port));
	int pass[3] = { sv[1], -1, -1 };
	struct helper_run *run = helper_start(&target, req, PORT_CONNECT_DEADLINE_MS, pass, &err);
	json_object_put(req);
	close(sv[1]);
	json_object *reply = run ? helper_finish(run, NULL, &err) : NULL;
	int fd = -1;
	if (reply) {
		char byte, ctl[CMSG_SPACE(sizeof(int))];
		struct iovec iov = { &byte, 1 };
		struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
				    .msg_control = ctl, .msg_controllen = sizeof(ctl) };
		if (recvmsg(sv[0], &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) == 1) {
			struct cmsghdr *c = CMSG_FIRSTHDR(&m);
			if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
			    c->cmsg_len == CMSG_LEN(sizeof(int)))
				memcpy(&fd, CMSG_DATA(c), sizeof(int));
		}
		json_object_put(reply);
		if (fd < 0)
			snprintf(err.message, sizeof(err.message), "room %s: port %d: the helper sent no connection",
				 room, port);
	}
	close(sv[0]);
	if (fd >= 0)
		return fd;
	if (reply == NULL && strcmp(err.code, HELPER_ERR_REFUSED) == 0) {
		*status = 502;
		snprintf(msg, msglen, "nothing listens on port %d in the room", port);
	} else {
		fprintf(stderr, "roombox-fcgi: room %s: previews: connect port %d: %s\n", room, port, err.message);
		*status = 502;
		snprintf(msg, msglen, "room %s: could not reach port %d in the room", room, port);
	}
	return -1;
}

/* Copy bytes both ways until both directions have ended (or idle). */
static void relay_bytes(int a, int b)
{
	char *buf = malloc(RELAY_BUF);
	struct pollfd p[2] = { { a, POLLIN, 0 }, { b, POLLIN, 0 } };
	bool open_from[2] = { true, true };   /* a -> b, b -> a */
	if (!buf)
		return;
	while (open_from[0] || open_from[1]) {
		p[0].fd = open_from[0] ? a : -1;
		p[1].fd = open_from[1] ? b : -1;
		int n = poll(p, 2, PREVIEW_IDLE_MS);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		for (int i = 0; i < 2; i++) {
			if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			int from = i ? b : a, to = i ? a : b;
			ssize_t got = recv(from, buf, RELAY_BUF, 0);
			if (got < 0 && errno == EINTR)
				continue;
			if (got <= 0) {
				open_from[i] = false;
				shutdown(to, SHUT_WR);
				if (got < 0) {   /* reset: nothing more either way */
					open_from[0] = open_from[1] = false;
				}
				continue;
			}
			write_all(to, buf, (size_t)got);
		}
	}
	free(buf);
}

struct relay_job {
	int slot;
	int client;
};

static void relay_serve(int slot, int client)
{
	char *buf = malloc(PREVIEW_HEAD_MAX + 1), *head = malloc(PREVIEW_HEAD_MAX + 2);
	char room[ROOM_ID_MAX + 1], msg[256];
	size_t len = 0;
	int port, status;
	struct preview_head h;
	if (!buf || !head) {
		answer(client, 503, "out of memory");
		goto out;
	}
	enum preview_head_result r = head_read(client, buf, &len, &h);
	if (r == PREVIEW_HEAD_INCOMPLETE) {
		if (len >= PREVIEW_HEAD_MAX)
			answer(client, 431, "request head too large");
		else if (len > 0)
			answer(client, 408, "request head not complete in time");
		goto out;
	}
	if (r == PREVIEW_HEAD_BAD) {
		answer(client, 400, "bad request");
		goto out;
	}
	if (r == PREVIEW_HEAD_NO_TOKEN || preview_lookup(h.token, room, sizeof(room), &port) < 0 ||
	    (h.host_style && (h.port != port || strcasecmp(h.room, room) != 0))) {
		answer(client, 404, "not found");
		goto out;
	}
	slot_set(slot, h.token, -1);
	int fd = room_connect(room, port, &status, msg, sizeof(msg));
	if (fd < 0) {
		answer(client, status, msg);
		goto out;
	}
	slot_set(slot, h.token, fd);
	/* revoked while we connected: end here */
	if (preview_lookup(h.token, room, sizeof(room), &port) < 0) {
		answer(client, 404, "not found");
		goto out;
	}
	size_t hl = preview_head_rewrite(&h, buf, head, PREVIEW_HEAD_MAX + 2);
	write_all(fd, head, hl);
	if (len > h.head_len)   /* a body's first bytes came with the head */
		write_all(fd, buf + h.head_len, len - h.head_len);
	relay_bytes(client, fd);
out:
	free(buf);
	free(head);
}

static void *relay_main(void *arg)
{
	struct relay_job job = *(struct relay_job *)arg;
	free(arg);
	relay_serve(job.slot, job.client);
	slot_give(job.slot);   /* closes both sockets */
	return NULL;
}

static void relay_spawn(int client)
{
	int slot = slot_take(client);
	if (slot < 0) {
		answer(client, 503, "too many preview connections");
		close(client);
		return;
	}
	struct relay_job *job = malloc(sizeof(*job));
	pthread_attr_t attr;
	pthread_t t;
	int rc = -1;
	if (job) {
		*job = (struct relay_job){ slot, client };
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&attr, 256u << 10);
		rc = pthread_create(&t, &attr, relay_main, job);
		pthread_attr_destroy(&attr);
	}
	if (rc != 0) {
		free(job);
		answer(client, 503, "cannot start a preview relay");
		slot_give(slot);
	}
}

static void *accept_main(void *arg)
{
	for (;;) {
		int c = accept4(relay_listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE) {
				if (errno == EMFILE || errno == ENFILE)
					poll(NULL, 0, 100);   /* descriptors run out: let some close */
				continue;
			}
			return NULL;   /* shut down */
		}
		/* a send that stalls must not hold the accepting thread */
		struct timeval tv = { 5, 0 };
		setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		relay_spawn(c);
	}
}

int preview_relay_start(struct app *app)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	relay_app = app;
	if (preview_socket_path(&app->cfg, relay_path, sizeof(relay_path)) < 0 ||
	    strlen(relay_path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "roombox-fcgi: preview socket path too long (beside %s)\n", app->cfg.socket);
		return -1;
	}
	strcpy(sa.sun_path, relay_path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return fprintf(stderr, "roombox-fcgi: preview socket: %s\n", strerror(errno)), -1;
	/* a stale socket from a crash: nobody answers on it */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		close(fd);
		fprintf(stderr, "roombox-fcgi: %s: another process is listening there\n", relay_path);
		return -1;
	}
	struct stat st;
	if (lstat(relay_path, &st) == 0 && S_ISSOCK(st.st_mode))
		unlink(relay_path);
	mode_t old = umask(0117);
	int rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (rc < 0 || listen(fd, 128) < 0) {
		fprintf(stderr, "roombox-fcgi: preview socket %s: %s\n", relay_path, strerror(errno));
		close(fd);
		return -1;
	}
	relay_socket_created = true;
	chmod(relay_path, 0660);
	/* the socket's group follows the FastCGI socket's, which the web
	 * server can already reach (main.c's theory of operation) */
	if (stat(app->cfg.socket, &st) == 0 && chown(relay_path, (uid_t)-1, st.st_gid) < 0)
		fprintf(stderr, "roombox-fcgi: chgrp %s: %s\n", relay_path, strerror(errno));
	relay_listen_fd = fd;
	pthread_t t;
	if (pthread_create(&t, NULL, accept_main, NULL) != 0) {
		fprintf(stderr, "roombox-fcgi: cannot start the preview relay\n");
		return -1;
	}
	pthread_detach(t);
	return 0;
}

void preview_relay_stop(void)
{
	if (relay_listen_fd >= 0)
		shutdown(relay_listen_fd, SHUT_RDWR);
	if (relay_socket_created)
		unlink(relay_path);
}
