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
 *   up (preview_store.c), and asks the room's connector for a connection to the
 *   port inside the room (op port-connect in serve mode, see "connectors"
 *   below: a helper that joined the room's network namespace and sends
 *   sockets back over a socketpair).  No privilege or namespace is ever
 *   taken here.
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
#include "preview_relay.h"

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
#include "preview_head.h"
#include "preview_store.h"
#include "protocol.h"

#define RELAY_BUF (64u << 10)
#define RELAY_STALL_S 60
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

/* 0, or -1 when the peer is gone or stalled (SO_SNDTIMEO). */
static int write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
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

/* ---- connectors: one port-connect helper per room, kept while used ----
 *
 * Spawning the setuid helper for every preview request would cost more
 * than the request itself.  A connector is one helper in port-connect's
 * serve mode, joined to one room's network namespace, answering connect
 * requests over a socketpair; relay threads of that room take turns on it
 * (a loopback connect takes microseconds).  It ends by itself when the
 * room stops (a restarted room has a new namespace), after
 * PORT_SERVE_IDLE_MS unused, or when we close our end; a request that then
 * finds it gone is retried once on a new one.  At most CONNECTORS_MAX
 * exist; the least recently used idle one makes room for a new room's. */

#define CONNECTORS_MAX 32
#define REAP_EVERY_MS 5000
#define CONNECTOR_REPLY_MS (PORT_CONNECT_TIMEOUT_MS + 5000)

struct connector {
	pthread_mutex_t lock;     /* one request at a time; held while used */
	char room[ROOM_ID_MAX + 1];   /* "" = free (under table_lock) */
	int sock;                 /* our end of the socketpair, -1 = none */
	struct helper_run *run;
	long used_ms;
};
static struct connector connectors[CONNECTORS_MAX];
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

static void connectors_init(void)
{
	for (int i = 0; i < CONNECTORS_MAX; i++) {
		pthread_mutex_init(&connectors[i].lock, NULL);
		connectors[i].sock = -1;
	}
}

/* Close our end (the helper then exits) and reap it; its error code (""
 * when it ended well) into code.  c->lock held. */
static void connector_end(struct connector *c, char *code, size_t codelen, char *msg, size_t msglen)
{
	struct helper_error err = { 0 };
	if (code)
		code[0] = '\0';
	if (c->sock >= 0)
		close(c->sock);
	c->sock = -1;
	if (c->run) {
		json_object *reply = helper_finish(c->run, NULL, &err);
		if (!reply && code) {
			snprintf(code, codelen, "%s", err.code);
			snprintf(msg, msglen, "%s", err.message);
		}
		json_object_put(reply);
	}
	c->run = NULL;
}

/* Start a connector for room (c->lock held, c empty); 0 or -1 with msg. */
static int connector_start(struct connector *c, const char *room, char *msg, size_t msglen)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		snprintf(msg, msglen, "room %s: previews: socketpair: %s", room, strerror(errno));
		return -1;
	}
	struct helper_target target = app_helper(relay_app);
	struct helper_error err;
	json_object *req = json_object_new_object();
	json_object_object_add(req, HK_OP, json_object_new_string(HELPER_OP_PORT_CONNECT));
	json_object_object_add(req, HK_ROOM, json_object_new_string(room));
	json_object_object_add(req, HK_SERVE, json_object_new_boolean(1));
	int pass[3] = { sv[1], -1, -1 };
	/* its life is bounded by the helper itself (idle, keeper, our end);
	 * helper_finish waits for it only after we have closed our end */
	c->run = helper_start(&target, req, 24L * 3600 * 1000, pass, &err);
	json_object_put(req);
	close(sv[1]);
	if (!c->run) {
		close(sv[0]);
		snprintf(msg, msglen, "%s", err.message);
		return -1;
	}
	c->sock = sv[0];
	return 0;
}

/* The room's connector, locked; *fresh says whether it was just started.
 * NULL with msg when none can be had. */
static struct connector *connector_get(const char *room, bool *fresh, char *msg, size_t msglen)
{
	struct connector *c = NULL, *lru = NULL;
	pthread_mutex_lock(&table_lock);
	for (int i = 0; i < CONNECTORS_MAX && !c; i++)
		if (strcmp(connectors[i].room, room) == 0)
			c = &connectors[i];
	for (int i = 0; i < CONNECTORS_MAX && !c; i++)
		if (!connectors[i].room[0])
			c = &connectors[i];
	for (int i = 0; i < CONNECTORS_MAX && !c; i++)
		if ((!lru || connectors[i].used_ms < lru->used_ms) &&
		    pthread_mutex_trylock(&connectors[i].lock) == 0) {
			if (lru)
				pthread_mutex_unlock(&lru->lock);
			lru = &connectors[i];
		}
	if (!c && lru) {   /* evict: the new room takes its place */
		connector_end(lru, NULL, 0, NULL, 0);
		lru->room[0] = '\0';
		pthread_mutex_unlock(&lru->lock);
		c = lru;
	}
	if (!c) {
		pthread_mutex_unlock(&table_lock);
		snprintf(msg, msglen, "room %s: previews: every connector is busy", room);
		return NULL;
	}
	snprintf(c->room, sizeof(c->room), "%s", room);
	c->used_ms = now_ms();
	pthread_mutex_unlock(&table_lock);
	pthread_mutex_lock(&c->lock);
	if (strcmp(c->room, room) != 0) {   /* evicted while we waited */
		pthread_mutex_unlock(&c->lock);
		return connector_get(room, fresh, msg, msglen);
	}
	*fresh = c->sock < 0;
	if (*fresh && connector_start(c, room, msg, msglen) < 0) {
		pthread_mutex_unlock(&c->lock);
		return NULL;
	}
	return c;
}

/* Reap connectors whose helper has ended by itself (idle, room stopped),
 * so no exited helper waits long for its parent; busy ones are left. */
static void connectors_reap(void)
{
	pthread_mutex_lock(&table_lock);
	for (int i = 0; i < CONNECTORS_MAX; i++) {
		struct connector *c = &connectors[i];
		if (!c->run || pthread_mutex_trylock(&c->lock) != 0)
			continue;
		struct pollfd p = { c->run ? helper_run_pidfd(c->run) : -1, POLLIN, 0 };
		if (c->run && poll(&p, 1, 0) == 1) {
			connector_end(c, NULL, 0, NULL, 0);
			c->room[0] = '\0';
		}
		pthread_mutex_unlock(&c->lock);
	}
	pthread_mutex_unlock(&table_lock);
}

void preview_connector_forget(const char *room)
{
	pthread_mutex_lock(&table_lock);
	for (int i = 0; i < CONNECTORS_MAX; i++) {
		struct connector *c = &connectors[i];
		if (strcmp(c->room, room) != 0)
			continue;
		pthread_mutex_lock(&c->lock);
		connector_end(c, NULL, 0, NULL, 0);
		c->room[0] = '\0';
		pthread_mutex_unlock(&c->lock);
	}
	pthread_mutex_unlock(&table_lock);
}

/* One request on a connector: its reply byte (fd set for a connection),
 * or 0 when the connector is gone. */
static char connector_ask(struct connector *c, int port, int *fd)
{
	struct port_request q = { (uint16_t)port, 0 };
	char byte = 0, ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &byte, 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = ctl, .msg_controllen = sizeof(ctl) };
	struct pollfd p = { c->sock, POLLIN, 0 };
	*fd = -1;
	if (send(c->sock, &q, sizeof(q), MSG_NOSIGNAL) != (ssize_t)sizeof(q) ||
	    poll(&p, 1, CONNECTOR_REPLY_MS) != 1 ||
	    recvmsg(c->sock, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) != 1)
		return 0;
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
	if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
	    cm->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(fd, CMSG_DATA(cm), sizeof(int));
	if (byte == PORT_REPLY_CONNECTED && *fd < 0)
		return PORT_REPLY_FAILED;
	if (byte != PORT_REPLY_CONNECTED && *fd >= 0) {
		close(*fd);
		*fd = -1;
	}
	return byte;
}

/* Wait for the connect the helper started (serve mode) to end; the
 * socket, blocking, or -1 with *status and msg. */
static int connect_finish(int fd, int port, int *status, char *msg, size_t msglen)
{
	struct pollfd p = { fd, POLLOUT, 0 };
	int n, soerr = 0;
	socklen_t len = sizeof(soerr);
	while ((n = poll(&p, 1, PORT_CONNECT_TIMEOUT_MS)) < 0 && errno == EINTR)
		;
	if (n == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) == 0 && soerr == 0 &&
	    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) == 0)
		return fd;
	close(fd);
	*status = 502;
	snprintf(msg, msglen, "nothing listens on port %d in the room", port);
	return -1;
}

/* A socket connected to the room's 127.0.0.1:port, or -1 with *status and
 * msg saying what to answer. */
static int room_connect(const char *room, int port, int *status, char *msg, size_t msglen)
{
	char code[16] = "", why[256] = "";
	for (int attempt = 0; attempt < 2; attempt++) {
		bool fresh;
		int fd;
		struct connector *c = connector_get(room, &fresh, why, sizeof(why));
		if (!c)
			break;
		char reply = connector_ask(c, port, &fd);
		c->used_ms = now_ms();
		if (reply == 0)   /* gone: why, from its answer */
			connector_end(c, code, sizeof(code), why, sizeof(why));
		pthread_mutex_unlock(&c->lock);
		if (reply == PORT_REPLY_CONNECTED)
			return connect_finish(fd, port, status, msg, msglen);
		if (reply == PORT_REPLY_REFUSED || strcmp(code, HELPER_ERR_REFUSED) == 0) {
			*status = 502;
			snprintf(msg, msglen, "nothing listens on port %d in the room", port);
			return -1;
		}
		if (reply != 0) {
			snprintf(why, sizeof(why), "room %s: port %d: the helper answered '%c'", room, port, reply);
			break;
		}
		if (fresh)   /* a new one failed: a second would too */
			break;
	}
	fprintf(stderr, "roombox-fcgi: room %s: previews: connect port %d: %s\n", room, port,
		why[0] ? why : "the connector ended");
	*status = 502;
	snprintf(msg, msglen, "room %s: could not reach port %d in the room", room, port);
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
			if (write_all(to, buf, (size_t)got) < 0)   /* a byte lost: end both */
				open_from[0] = open_from[1] = false;
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
	/* a side that stops reading must not hold this thread in a write
	 * forever: no progress for RELAY_STALL_S ends the relay */
	struct timeval stall = { RELAY_STALL_S, 0 };
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &stall, sizeof(stall));
	setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &stall, sizeof(stall));
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

/* Read (and drop) what a refused connection sends, up to its head's end,
 * for at most REJECT_DRAIN_MS: only while past the bound, so the
 * accepting thread waits only when there is nothing else to accept. */
#define REJECT_DRAIN_MS 500
static void drain_head(int fd)
{
	char buf[4096];
	long deadline = now_ms() + REJECT_DRAIN_MS;
	size_t seen = 0;
	for (;;) {
		struct pollfd p = { fd, POLLIN, 0 };
		long left = deadline - now_ms();
		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			return;
		ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n <= 0)
			return;
		seen += (size_t)n;
		if (memmem(buf, (size_t)n, "\r\n\r\n", 4) || seen > PREVIEW_HEAD_MAX)
			return;
	}
}

static void relay_spawn(int client)
{
	int slot = slot_take(client);
	if (slot < 0) {
		/* the web server writes its request before it reads: an answer
		 * and close() before that would be a failed write (its own 502) */
		drain_head(client);
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
		/* between connections, now and then: reap ended connectors */
		struct pollfd p = { relay_listen_fd, POLLIN, 0 };
		if (poll(&p, 1, REAP_EVERY_MS) == 0) {
			connectors_reap();
			continue;
		}
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
	connectors_init();
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
