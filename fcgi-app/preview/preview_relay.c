/* The preview relay: HTTP and WebSocket bytes between a web server and a
 * server listening inside a room.
 *
 * Why it is built this way:
 *
 * - FastCGI cannot carry a WebSocket (it has no upgrade, and it buffers),
 *   so the web servers proxy /preview/ and preview_domain hosts as plain
 *   HTTP/1.1 to a unix socket of roombox-fcgi's own, preview.sock beside
 *   the FastCGI socket (nginx: proxy_pass http://unix:...; lighttpd:
 *   mod_proxy with upgrade enabled).  Below that socket everything is
 *   bytes, whatever the protocol after the head.
 * - One thread runs every relay, as one epoll loop over non-blocking
 *   sockets (the way the web servers themselves work).  A thread per
 *   connection cost more than the request: on this kind of host creating a
 *   thread and each wake-up between threads are the dear parts (a page's
 *   first touch ~20 µs, a reschedule an interrupt round trip), and the web
 *   servers open one connection per proxied request.  At most
 *   PREVIEW_RELAYS_MAX run at once; a connection past that gets 503.
 *   Each room has a fair share of them (fair_share.h): at most
 *   PREVIEW_ROOM_RELAYS relays of one room are under way (from its token's
 *   lookup to the end of its exchange), and a room that has some gets
 *   another only while enough stay free for rooms that have none; a room
 *   past its share gets 503 and other rooms' previews go on.
 * - A relay reads the request head (at most PREVIEW_HEAD_MAX bytes, within
 *   PREVIEW_HEAD_MS), finds the token (preview_head.c), looks the exposure
 *   up (preview_store.c), and connects to the port inside the room with a
 *   socket of the room's network namespace, from its connector's pool
 *   (op port-connect in serve mode, see "connectors" below: a helper that
 *   joined the room's namespace and sends sockets made there back over a
 *   socketpair).  No privilege or namespace is ever taken here.
 * - The head goes on with the request target rewritten (/preview/<token>
 *   taken off) and without the service's credentials: an Authorization
 *   whose Bearer token is an API token, and on path-style previews (the
 *   API's own origin) every Cookie.  Then bytes go both ways until both
 *   sides are done; one side's end of stream is passed on as a half-close,
 *   no byte either way for PREVIEW_IDLE_MS closes both, and a side that
 *   takes nothing for RELAY_STALL_S while bytes wait for it ends the relay.
 * - nginx keeps its connections to preview.sock (nginx.conf.example's
 *   upstream keepalive): a new connection per request cost more than the
 *   relay's own work.  So the relay finds where each exchange ends: a
 *   request that allows it (HTTP/1.1, a Content-Length or no body, no
 *   Upgrade, no Connection but keep-alive: preview_head.c) is a kept
 *   exchange — no byte of the client past the request's body is read
 *   until the answer has ended, the answer's head is read whole and its
 *   end found (preview_frame.c), and no byte of the room past that end
 *   goes on; then the room's socket is kept for its exposure's next
 *   request or closed ("kept connections" below), and the next request on
 *   the web server's connection is read like the first (another room's,
 *   maybe).
 *   An answer whose end the relay cannot find for sure goes on with
 *   "Connection: close" added to its head, so the web server never sends
 *   another request on that connection: one room's bytes never reach
 *   another room's client.  Every other exchange (lighttpd's, which
 *   closes after each; WebSockets) is passed on as before, its answer's
 *   head with "Connection: close" too (a 101 as it came).
 * - An answer of our own (400, 404, 408, 431, 502, 503) goes out before the
 *   request's body has been read: the connection then lingers, reading
 *   and dropping what still comes for up to LINGER_MS, before it closes
 *   (as web servers do).  Closed at once, the web server's write of the
 *   body would fail, and it would answer with an error of its own
 *   instead of ours (nginx: a 413 from its error page's location).
 * - Unexposing or cleaning up a room revokes its tokens: running relays
 *   of the token are shut down (both sockets), so an open WebSocket ends
 *   with the exposure. */
#include "preview_relay.h"
#include "unix_listen.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "fair_share.h"
#include "fdrecv.h"
#include "helper_client.h"
#include "http.h"
#include "http_lex.h"
#include "preview_frame.h"
#include "preview_head.h"
#include "preview_store.h"
#include "protocol.h"

#define RELAY_BUF (32u << 10)     /* per direction, while relaying */
#define RELAY_STALL_S 60
/* connections refused past the bound whose head is still being read */
#define REJECTS_MAX 64
#define REJECT_DRAIN_MS 500
#define REAP_EVERY_MS 5000
#define LINGER_MS 5000
/* bytes of an answer's head, interim (1xx) answers dropped before it included */
#define RESP_HEAD_READ_MAX (64u << 10)

static struct app *relay_app;
static int relay_listen_fd = -1, loop_fd = -1;
static char relay_path[108];
static bool relay_socket_created;

static long now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

int preview_socket_path(const struct config *cfg, char *out, size_t outlen)
{
	return unix_socket_beside(cfg, "preview.sock", out, outlen);
}

/* ---- running relays, for the bound and for revocation ----
 * Other threads revoke (shutdown only: closing stays with the loop, which
 * then sees the end of both streams). */
struct relay_slot {
	bool used;
	char token[PREVIEW_TOKEN_LEN + 1];
	int client, room;          /* -1 when not (yet) open */
};
static struct relay_slot slots[PREVIEW_RELAYS_MAX];
static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;

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

static void slot_set(int i, const char *token, int room)
{
	pthread_mutex_lock(&slots_lock);
	snprintf(slots[i].token, sizeof(slots[i].token), "%s", token);
	slots[i].room = room;
	pthread_mutex_unlock(&slots_lock);
}

/* Forget the slot before its descriptors are closed (their numbers may be
 * reused at once). */
static void slot_clear(int i)
{
	pthread_mutex_lock(&slots_lock);
	slots[i] = (struct relay_slot){ 0 };
	pthread_mutex_unlock(&slots_lock);
}

/* Each room's relays under way (the loop alone takes and gives). */
static struct fair_share room_relays;

/* Bumped by every revocation: a relay looks its token up again after its
 * connect only if one came meanwhile (the store's file is gone first). */
static atomic_uint revocations;

static void kept_revoke(const char *token);

void preview_relay_revoke(const char *token)
{
	atomic_fetch_add(&revocations, 1);
	pthread_mutex_lock(&slots_lock);
	for (int i = 0; i < PREVIEW_RELAYS_MAX; i++)
		if (slots[i].used && strcmp(slots[i].token, token) == 0) {
			shutdown(slots[i].client, SHUT_RDWR);
			if (slots[i].room >= 0)
				shutdown(slots[i].room, SHUT_RDWR);
		}
	pthread_mutex_unlock(&slots_lock);
	kept_revoke(token);
}

/* ---- one connection's state ---- */

enum relay_state {
	R_HEAD,         /* reading the request head */
	R_WAIT,         /* queued on the room's connector */
	R_CONNECTING,   /* the room's socket, its connect under way */
	R_RELAY,        /* bytes both ways */
	R_REJECT,       /* past the bound: reading the head, then 503 */
	R_LINGER,       /* answered: dropping what still comes, until its end */
};

/* what an epoll event points at */
enum ref_kind { REF_LISTEN, REF_CLIENT, REF_ROOM, REF_CONNECTOR, REF_KEPT };
struct ref {
	enum ref_kind kind;
	void *p;
};

struct flow {                    /* one direction */
	char *buf;
	size_t off, len;         /* bytes buf[off..len) wait to be sent */
	bool eof;                /* the sender has ended */
	bool shut;               /* ... and that went on as a half-close */
	long blocked_since;      /* bytes wait and the receiver took none; 0 = not */
};

struct connector;

struct relay {
	enum relay_state st;
	int slot;                /* -1 for a rejected connection */
	int client, room;
	struct ref rc, rr;
	uint32_t mask_c, mask_r; /* what epoll watches on each */
	char *head;              /* the head as it came (PREVIEW_HEAD_MAX + 1) */
	size_t head_len;
	struct preview_head h;
	char room_id[ROOM_ID_MAX + 1];
	int port;
	bool shared;             /* holds one of room_id's share of relays */
	bool retried;            /* a connector already failed under it */
	bool reused;             /* its room socket is a kept connection (see "kept") */
	bool fresh;              /* ... which failed: a new connection this time */
	bool room_extra;         /* the room sent bytes past its answer's end */
	bool client_early;       /* input came while the request was over */
	unsigned revocations;    /* the count when its token was looked up */
	long deadline;           /* head, connect or reject; 0 = none */
	long last_io;
	struct flow c2r, r2c;
	bool hup_c, hup_r;       /* the side hung up: only what is left to read */
	/* the answer's head is read whole (and rewritten) before it goes on;
	 * in a framed exchange (h.framed) bytes go on only up to each side's
	 * end: the request's body (req_left) and the answer (fr); bytes that
	 * came after the request's end, with its head, are the next request's
	 * (carried(), read once this exchange is over, if it is kept) */
	bool resp_head;
	size_t resp_read;        /* bytes read while resp_head: bounded */
	struct frame fr;
	unsigned long long req_left;
	struct relay *next;      /* in its connector's queue, or the dead */
	struct relay *all_next, *all_prev;
	bool dead;               /* ended: freed after the events at hand */
};
static struct relay *all_relays, *dead_relays;
static int rejects;

/* ---- answers of our own (the room's server answers everything else) ----
 * Small enough for any socket's buffer: sent once, without waiting. */
static void answer(int fd, int status, const char *error)
{
	char body[512], msg[1024];
	json_object *o = json_object_new_object();
	json_object_object_add(o, "error", json_object_new_string(error));
	int blen = snprintf(body, sizeof(body), "%s\n",
			    json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
							   JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(o);
	if (blen >= (int)sizeof(body))
		blen = (int)sizeof(body) - 1;
	int n = snprintf(msg, sizeof(msg), "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
			 "Content-Length: %d\r\nConnection: close\r\n%s\r\n%.*s", status,
			 http_reason(status), blen, status == 503 ? "Retry-After: 1\r\n" : "", blen, body);
	if (n > 0)
		send(fd, msg, (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1,
		     MSG_NOSIGNAL | MSG_DONTWAIT);
}

static void watch(int fd, struct ref *ref, uint32_t *mask, uint32_t want)
{
	if (fd < 0 || *mask == want)
		return;
	struct epoll_event ev = { .events = want, .data.ptr = ref };
	if (*mask == 0)
		epoll_ctl(loop_fd, EPOLL_CTL_ADD, fd, &ev);
	else if (want == 0)
		epoll_ctl(loop_fd, EPOLL_CTL_DEL, fd, NULL);
	else
		epoll_ctl(loop_fd, EPOLL_CTL_MOD, fd, &ev);
	*mask = want;
}

static struct relay *relay_new(int client, int slot)
{
	struct relay *r = calloc(1, sizeof(*r));
	if (!r || !(r->head = malloc(PREVIEW_HEAD_MAX + 1))) {
		free(r);
		return NULL;
	}
	r->slot = slot;
	r->client = client;
	r->room = -1;
	r->rc = (struct ref){ REF_CLIENT, r };
	r->rr = (struct ref){ REF_ROOM, r };
	r->st = slot < 0 ? R_REJECT : R_HEAD;
	r->deadline = now_ms() + (slot < 0 ? REJECT_DRAIN_MS : PREVIEW_HEAD_MS);
	r->all_next = all_relays;
	if (all_relays)
		all_relays->all_prev = r;
	all_relays = r;
	if (slot < 0)
		rejects++;
	watch(client, &r->rc, &r->mask_c, EPOLLIN);
	return r;
}

/* The exchange's room no longer holds one of its share. */
static void relay_share_give(struct relay *r)
{
	if (r->shared)
		fair_share_give(&room_relays, r->room_id);
	r->shared = false;
}

/* Close it (its connector's queue no longer holds it).  Events already
 * fetched may still point at it: it is freed after them (relays_free). */
static void relay_end(struct relay *r)
{
	relay_share_give(r);
	if (r->slot >= 0)
		slot_clear(r->slot);
	else
		rejects--;
	watch(r->client, &r->rc, &r->mask_c, 0);
	watch(r->room, &r->rr, &r->mask_r, 0);
	close(r->client);
	if (r->room >= 0)
		close(r->room);
	if (r->all_prev)
		r->all_prev->all_next = r->all_next;
	else
		all_relays = r->all_next;
	if (r->all_next)
		r->all_next->all_prev = r->all_prev;
	r->dead = true;
	r->next = dead_relays;
	dead_relays = r;
}

static void relays_free(void)
{
	while (dead_relays) {
		struct relay *r = dead_relays;
		dead_relays = r->next;
		free(r->head);
		free(r->c2r.buf);
		free(r->r2c.buf);
		free(r);
	}
}

static void relay_refuse(struct relay *r, int status, const char *error)
{
	relay_share_give(r);
	answer(r->client, status, error);
	shutdown(r->client, SHUT_WR);
	watch(r->room, &r->rr, &r->mask_r, 0);
	if (r->slot >= 0)   /* before the close: its number may be reused at once */
		slot_set(r->slot, r->h.token, -1);
	if (r->room >= 0)
		close(r->room);
	r->room = -1;
	r->st = R_LINGER;
	r->deadline = now_ms() + LINGER_MS;
	watch(r->client, &r->rc, &r->mask_c, EPOLLIN);
}

static void relay_linger(struct relay *r)
{
	static char drop[64 << 10];
	for (int round = 0; round < 4; round++) {   /* a fast sender must not hold the loop */
		ssize_t n = recv(r->client, drop, sizeof(drop), MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			relay_end(r);
			return;
		}
	}
}

/* ---- connectors: one port-connect helper per room, kept while used ----
 *
 * Spawning the setuid helper for every preview request would cost more
 * than the request itself, and so did a round trip to a helper per
 * request.  A connector is one helper in port-connect's serve mode, joined
 * to one room's network namespace, which sends batches of sockets made
 * there (not connected) over a socketpair: the loop keeps them in the
 * connector's pool and connects one per relay itself (a socket belongs to
 * the namespace it was made in, so its connect reaches the room's
 * loopback).  A batch is asked for when the pool runs low, when a relay
 * waits, and at least once a second while relays take sockets (each
 * request is the room's activity, for idle_timeout).  A connector ends by
 * itself when the room stops (a restarted room has a new namespace), after
 * PORT_SERVE_IDLE_MS unused, or when we close our end; relays that then
 * find it gone are retried once on a new one.  At most CONNECTORS_MAX
 * exist; the least recently used idle one makes room for a new room's.
 * The loop alone uses them; cleaning a room up (another thread) only
 * shuts the room's connector down, under table_lock. */

#define CONNECTORS_MAX 32
#define POOL_LOW 8
_Static_assert(PORT_SOCKETS_MAX <= FDRECV_MAX, "a batch fits one recv_with_fds");
#define ASK_EVERY_MS 1000

/* A kept connection into the room, waiting for its exposure's next
 * request (see "kept connections" below). */
struct kept {
	int fd;                   /* -1 = free */
	int port;
	char token[PREVIEW_TOKEN_LEN + 1];
	long since;
	struct ref ref;
};

struct connector {
	char room[ROOM_ID_MAX + 1];   /* "" = free */
	int sock;                 /* our end of the socketpair, -1 = none */
	struct helper_run *run;
	struct ref ref;
	uint32_t mask;
	struct relay *first, *last;   /* waiting for sockets, in order */
	long used_ms;
	int pool[PORT_SOCKETS_MAX];   /* the room's sockets, not connected */
	int pooled;
	bool asking;              /* a request for sockets is out */
	long asked_ms;
	struct kept kept[PREVIEW_ROOM_KEPT];   /* under table_lock (revocations) */
};
static struct connector connectors[CONNECTORS_MAX];
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

static void connectors_init(void)
{
	for (int i = 0; i < CONNECTORS_MAX; i++) {
		connectors[i].sock = -1;
		connectors[i].ref = (struct ref){ REF_CONNECTOR, &connectors[i] };
		for (int j = 0; j < PREVIEW_ROOM_KEPT; j++)
			connectors[i].kept[j] = (struct kept){ .fd = -1,
				.ref = { REF_KEPT, &connectors[i].kept[j] } };
	}
}

/* ---- kept connections into a room ----
 *
 * The room's server is asked to keep its connection (a kept exchange's
 * head goes without Connection, HTTP/1.1's default), and after an answer
 * whose end was found, with no byte past it and the server not closing,
 * the connection waits in its room's connector for the same exposure's
 * next request: a connect, the room's accept and both closes per request
 * were most of the relay's work (the way nginx's upstream keepalive
 * saves them).  Bytes are the room's own on both kinds of use, and a
 * connection serves one token only.  A waiting connection is watched: any
 * byte or its end (the server's own keep-alive timeout) closes it, so no
 * stray byte of the room's can be taken for the next answer.  Only a
 * request the relay can send again uses one (GET, HEAD or OPTIONS without
 * a body): should the server have closed it just then, the request goes
 * again on a new connection before any byte reached the client.  At most
 * PREVIEW_ROOM_KEPT wait per room, none longer than PREVIEW_ROOM_KEEP_MS;
 * they end with the room's connector (the room stopped or forgotten) and
 * with their token (a revocation shuts them down).  Stray bytes a server
 * sends after an answer that have not arrived yet (its kernel may hold a
 * small write back for the ACK the next request brings) can still be
 * taken for that request's answer, as through any proxy that keeps its
 * connections: they are the same exposure's own, never another's. */

static void kept_close(struct kept *k)
{
	pthread_mutex_lock(&table_lock);
	int fd = k->fd;
	k->fd = -1;
	pthread_mutex_unlock(&table_lock);
	if (fd >= 0)
		close(fd);   /* which takes it out of the loop's epoll too */
}

static void kept_close_all(struct connector *c, long older_than)
{
	for (int j = 0; j < PREVIEW_ROOM_KEPT; j++)
		if (c->kept[j].fd >= 0 && c->kept[j].since < older_than)
			kept_close(&c->kept[j]);
}

/* The most recently kept connection of token's exposure of port; -1 if none. */
static int kept_take(struct connector *c, int port, const char *token)
{
	struct kept *best = NULL;
	for (int j = 0; j < PREVIEW_ROOM_KEPT; j++) {
		struct kept *k = &c->kept[j];
		if (k->fd >= 0 && k->port == port && strcmp(k->token, token) == 0 &&
		    (!best || k->since > best->since))
			best = k;
	}
	if (!best)
		return -1;
	pthread_mutex_lock(&table_lock);
	int fd = best->fd;
	best->fd = -1;
	pthread_mutex_unlock(&table_lock);
	return fd;
}

/* Keep fd (watched as *mask) in c for token's port; the oldest kept
 * makes room when all are taken. */
static void kept_put(struct connector *c, int fd, uint32_t mask, int port, const char *token)
{
	struct kept *k = NULL;
	for (int j = 0; j < PREVIEW_ROOM_KEPT && (!k || k->fd >= 0); j++)
		if (!k || c->kept[j].fd < 0 || c->kept[j].since < k->since)
			k = &c->kept[j];
	if (k->fd >= 0)
		kept_close(k);
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &k->ref };
	if (epoll_ctl(loop_fd, mask ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &ev) < 0) {
		close(fd);
		return;
	}
	pthread_mutex_lock(&table_lock);
	k->fd = fd;
	k->port = port;
	snprintf(k->token, sizeof(k->token), "%s", token);
	k->since = now_ms();
	pthread_mutex_unlock(&table_lock);
}

/* A byte or the end on a waiting connection: it is not used again.  (An
 * event fetched before its connection was taken finds it taken: the
 * relay, level-triggered, gets it on the next round.) */
static void kept_event(struct kept *k)
{
	if (k->fd >= 0)
		kept_close(k);
}

/* A revocation (another thread): the token's waiting connections are shut
 * down; the loop then sees their end and closes them. */
static void kept_revoke(const char *token)
{
	pthread_mutex_lock(&table_lock);
	for (int i = 0; i < CONNECTORS_MAX; i++)
		for (int j = 0; j < PREVIEW_ROOM_KEPT; j++) {
			struct kept *k = &connectors[i].kept[j];
			if (k->fd >= 0 && strcmp(k->token, token) == 0)
				shutdown(k->fd, SHUT_RDWR);
		}
	pthread_mutex_unlock(&table_lock);
}

/* Close our end (the helper then exits) and reap it; why it ended, from
 * its answer, into code/msg ("" when it ended well).  Its queue is the
 * caller's to empty first. */
static void connector_end(struct connector *c, char *code, size_t codelen, char *msg, size_t msglen)
{
	struct helper_error err = { 0 };
	watch(c->sock, &c->ref, &c->mask, 0);
	while (c->pooled)
		close(c->pool[--c->pooled]);
	kept_close_all(c, LONG_MAX);
	c->asking = false;
	pthread_mutex_lock(&table_lock);
	if (c->sock >= 0)
		close(c->sock);
	c->sock = -1;
	c->room[0] = '\0';
	pthread_mutex_unlock(&table_lock);
	if (c->run) {
		if (helper_port_serve_finish(c->run, &err) < 0 && code) {
			snprintf(code, codelen, "%s", err.code);
			snprintf(msg, msglen, "%s", err.message);
		}
	}
	c->run = NULL;
}

/* Start a connector for room in the free c; 0 or -1 with msg. */
static int connector_start(struct connector *c, const char *room, char *msg, size_t msglen)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		snprintf(msg, msglen, "room %s: previews: socketpair: %s", room, strerror(errno));
		return -1;
	}
	struct helper_target target = app_helper(relay_app);
	struct helper_error err;
	/* its life is bounded by the helper itself (idle, keeper, our end);
	 * helper_port_serve_finish waits for it only after we have closed
	 * our end */
	c->run = helper_port_serve_start(&target, room, 24L * 3600 * 1000, sv[1], &err);
	close(sv[1]);
	if (!c->run) {
		close(sv[0]);
		snprintf(msg, msglen, "%s", err.message);
		return -1;
	}
	pthread_mutex_lock(&table_lock);
	snprintf(c->room, sizeof(c->room), "%s", room);
	c->sock = sv[0];
	pthread_mutex_unlock(&table_lock);
	watch(c->sock, &c->ref, &c->mask, EPOLLIN);
	return 0;
}

/* The room's connector (started when there is none); NULL with msg. */
static struct connector *connector_for(const char *room, char *msg, size_t msglen)
{
	struct connector *c = NULL, *lru = NULL;
	for (int i = 0; i < CONNECTORS_MAX && !c; i++)
		if (connectors[i].sock >= 0 && strcmp(connectors[i].room, room) == 0)
			c = &connectors[i];
	if (c)
		return c;
	for (int i = 0; i < CONNECTORS_MAX && !c; i++)
		if (connectors[i].sock < 0 && !connectors[i].first)
			c = &connectors[i];
	for (int i = 0; i < CONNECTORS_MAX && !c; i++)
		if (!connectors[i].first && (!lru || connectors[i].used_ms < lru->used_ms))
			lru = &connectors[i];
	if (!c && lru) {   /* evict: the new room takes its place */
		connector_end(lru, NULL, 0, NULL, 0);
		c = lru;
	}
	if (!c) {
		snprintf(msg, msglen, "room %s: previews: every connector is busy", room);
		return NULL;
	}
	return connector_start(c, room, msg, msglen) < 0 ? NULL : c;
}

static void room_unreachable(struct relay *r, const char *why)
{
	fprintf(stderr, "roombox-fcgi: room %s: previews: connect port %d: %s\n", r->room_id, r->port,
		why[0] ? why : "the connector ended");
	char msg[256];
	snprintf(msg, sizeof(msg), "room %s: could not reach port %d in the room", r->room_id, r->port);
	relay_refuse(r, 502, msg);
}

/* Ask c for a batch of sockets, when it is time to (see above). */
static void connector_refill(struct connector *c)
{
	long now = now_ms();
	if (c->asking || c->sock < 0 ||
	    (c->pooled >= POOL_LOW && !c->first && now - c->asked_ms < ASK_EVERY_MS))
		return;
	int want = PORT_SOCKETS_MAX - c->pooled;
	struct port_request q = { 0, (uint16_t)(want > 0 ? want : 1) };
	c->asking = true;
	c->asked_ms = now;
	if (send(c->sock, &q, sizeof(q), MSG_NOSIGNAL) != (ssize_t)sizeof(q))
		shutdown(c->sock, SHUT_RDWR);   /* seen as its end, queue retried */
}

static void relay_dial(struct relay *r, int fd);
static void relay_start(struct relay *r, bool connected);
static bool relay_retry(struct relay *r);

/* May r's request go on a kept connection: can it be sent again, should
 * the server have closed that connection just then? */
static bool relay_resendable(const struct relay *r)
{
	const char *m = r->head;
	size_t n = r->h.method_len;
	return r->h.keep && !r->fresh && r->h.body_len == 0 &&
	       ((n == 3 && memcmp(m, "GET", 3) == 0) || (n == 4 && memcmp(m, "HEAD", 4) == 0) ||
		(n == 7 && memcmp(m, "OPTIONS", 7) == 0));
}

/* A socket of r's room for r: a kept connection to its port, or one from
 * the pool, or once the next batch comes. */
static void relay_ask(struct relay *r)
{
	char why[256] = "";
	struct connector *c = connector_for(r->room_id, why, sizeof(why));
	if (!c) {
		room_unreachable(r, why);
		return;
	}
	c->used_ms = now_ms();
	int fd = relay_resendable(r) ? kept_take(c, r->port, r->h.token) : -1;
	if (fd >= 0) {
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &r->rr };
		epoll_ctl(loop_fd, EPOLL_CTL_MOD, fd, &ev);
		r->room = fd;
		r->mask_r = EPOLLIN;
		r->reused = true;
		slot_set(r->slot, r->h.token, fd);
		/* the room's activity (idle_timeout) is told by asking for
		 * sockets, at least once a second */
		connector_refill(c);
		relay_start(r, true);
		return;
	}
	if (c->pooled) {
		relay_dial(r, c->pool[--c->pooled]);
		connector_refill(c);
		return;
	}
	r->st = R_WAIT;
	r->deadline = 0;   /* the connector's own bound: it answers or ends */
	r->next = NULL;
	if (c->last)
		c->last->next = r;
	else
		c->first = r;
	c->last = r;
	/* the client's end of stream or a revocation waits for the socket */
	watch(r->client, &r->rc, &r->mask_c, 0);
	connector_refill(c);
}


/* The connector ended: every relay waiting on it tries a new one once. */
static void connector_gone(struct connector *c)
{
	char code[16] = "", why[256] = "";
	struct relay *q = c->first;
	c->first = c->last = NULL;
	connector_end(c, code, sizeof(code), why, sizeof(why));
	while (q) {
		struct relay *r = q;
		q = q->next;
		if (strcmp(code, HELPER_ERR_REFUSED) == 0) {
			char msg[128];
			snprintf(msg, sizeof(msg), "nothing listens on port %d in the room", r->port);
			relay_refuse(r, 502, msg);
		} else if (r->retried) {
			room_unreachable(r, why);
		} else {
			r->retried = true;
			relay_ask(r);
		}
	}
}

/* A batch of sockets on c: into the pool, and to the relays waiting. */
static void connector_readable(struct connector *c)
{
	for (;;) {
		char byte = 0;
		int fds[PORT_SOCKETS_MAX], got = 0;
		ssize_t n = recv_with_fds(c->sock, &byte, 1, MSG_DONTWAIT, fds, PORT_SOCKETS_MAX, &got);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		for (int i = 0; i < got; i++) {
			if (byte == PORT_REPLY_SOCKETS && c->pooled < PORT_SOCKETS_MAX)
				c->pool[c->pooled++] = fds[i];
			else
				close(fds[i]);
		}
		if (n != 1 || !c->asking) {
			connector_gone(c);
			return;
		}
		c->asking = false;
		if (byte != PORT_REPLY_SOCKETS || !got) {   /* the helper could not make them */
			char why[128];
			snprintf(why, sizeof(why), "room %s: the helper answered '%c'", c->room, byte);
			while (c->first) {
				struct relay *r = c->first;
				c->first = r->next;
				room_unreachable(r, why);
			}
			c->last = NULL;
			continue;
		}
		while (c->first && c->pooled) {
			struct relay *r = c->first;
			c->first = r->next;
			if (!c->first)
				c->last = NULL;
			relay_dial(r, c->pool[--c->pooled]);
		}
		connector_refill(c);
	}
}

/* Connectors whose helper has ended by itself (idle, room stopped) with
 * nothing queued: reaped, so no exited helper waits long for its parent. */
static void connectors_reap(void)
{
	long old = now_ms() - PREVIEW_ROOM_KEEP_MS;
	for (int i = 0; i < CONNECTORS_MAX; i++) {
		struct connector *c = &connectors[i];
		kept_close_all(c, old);
		if (!c->run || c->first)
			continue;
		struct pollfd p = { helper_run_pidfd(c->run), POLLIN, 0 };
		if (poll(&p, 1, 0) == 1)
			connector_end(c, NULL, 0, NULL, 0);
	}
}

void preview_connector_forget(const char *room)
{
	pthread_mutex_lock(&table_lock);
	for (int i = 0; i < CONNECTORS_MAX; i++)
		if (connectors[i].sock >= 0 && strcmp(connectors[i].room, room) == 0)
			shutdown(connectors[i].sock, SHUT_RDWR);   /* the loop ends it */
	pthread_mutex_unlock(&table_lock);
}

/* ---- the stages of a relay ---- */

static void relay_parse(struct relay *r);

static void relay_head(struct relay *r)
{
	ssize_t n = recv(r->client, r->head + r->head_len, PREVIEW_HEAD_MAX - r->head_len, 0);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {   /* gone before its head was whole */
		relay_end(r);
		return;
	}
	/* a kept connection's next request: its head's own bound from here */
	if (r->head_len == 0 && r->st == R_HEAD && r->deadline > now_ms() + PREVIEW_HEAD_MS)
		r->deadline = now_ms() + PREVIEW_HEAD_MS;
	size_t before = r->head_len;
	r->head_len += (size_t)n;
	if (r->st == R_REJECT) {   /* read (and drop) up to its head's end */
		r->head[r->head_len] = '\0';
		if (memmem(r->head, r->head_len, "\r\n\r\n", 4) || r->head_len >= PREVIEW_HEAD_MAX)
			relay_refuse(r, 503, "too many preview connections");
		else if (r->head_len > 4) {   /* keep the last bytes: the end may straddle */
			memmove(r->head, r->head + r->head_len - 3, 3);
			r->head_len = 3;
		}
		return;
	}
	/* no end in the new bytes: nothing to parse yet (the head so far had
	 * none; a head dribbled a byte a read must not cost its square) */
	if (!http_head_ended(r->head, before, r->head_len) && r->head_len < PREVIEW_HEAD_MAX)
		return;
	relay_parse(r);
}

/* One of the room's share of the relays for this exchange; false when it
 * has been refused (503). */
static bool relay_share_take(struct relay *r)
{
	char msg[256];
	enum fair_share_result res = fair_share_take(&room_relays, r->room_id, false);
	if (res == FAIR_SHARE_TAKEN) {
		r->shared = true;
		return true;
	}
	if (res == FAIR_SHARE_ROOM_FULL)
		snprintf(msg, sizeof(msg), "room %s: previews: %d connections of this room are open, "
			 "its share of the relay's", r->room_id, room_relays.share);
	else
		snprintf(msg, sizeof(msg), "room %s: previews: the relay's free connections are kept "
			 "for other rooms", r->room_id);
	relay_refuse(r, 503, msg);
	return false;
}

/* Is an Authorization value (a preview request's) an API token? */
static int api_credential(void *ctx, const char *value, size_t len)
{
	struct auth_tokens *tokens = ctx;
	char v[PREVIEW_HEAD_MAX + 1];
	if (!tokens || len > PREVIEW_HEAD_MAX)
		return 0;
	memcpy(v, value, len);
	v[len] = '\0';
	return auth_tokens_check(tokens, v);
}

/* The head so far: on to the room once it is whole and names an exposure. */
static void relay_parse(struct relay *r)
{
	enum preview_head_result res = preview_head_parse(r->head, r->head_len,
							  relay_app->cfg.preview_domain, &r->h);
	if (res == PREVIEW_HEAD_INCOMPLETE) {
		if (r->head_len >= PREVIEW_HEAD_MAX)
			relay_refuse(r, 431, "request head too large");
		return;
	}
	if (res == PREVIEW_HEAD_BAD) {
		relay_refuse(r, 400, "bad request");
		return;
	}
	r->revocations = atomic_load(&revocations);
	if (res == PREVIEW_HEAD_NO_TOKEN ||
	    preview_lookup(r->h.token, r->room_id, sizeof(r->room_id), &r->port) < 0 ||
	    (r->h.host_style && (r->h.port != r->port || strcasecmp(r->h.room, r->room_id) != 0))) {
		relay_refuse(r, 404, "not found");
		return;
	}
	if (!relay_share_take(r))
		return;
	slot_set(r->slot, r->h.token, -1);
	relay_ask(r);
}


/* The bytes read with a framed request's head past its body's end: the
 * start of the next request, at the end of head[0..head_len). */
static size_t carried(const struct relay *r)
{
	unsigned long long used = r->h.head_len + r->h.body_len;
	return r->h.framed && r->head_len > used ? r->head_len - (size_t)used : 0;
}

/* Connect fd, a socket of the room's namespace, to the room's loopback
 * port; the loop waits for it to be writable when it is under way. */
static void relay_dial(struct relay *r, int fd)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)r->port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	r->room = fd;
	slot_set(r->slot, r->h.token, fd);
	r->st = R_CONNECTING;
	r->deadline = now_ms() + PORT_CONNECT_TIMEOUT_MS;
	/* what the client sends next (a body, its end) waits for the relay;
	 * watched level-triggered meanwhile, it would wake the loop for ever:
	 * only its hang-up is (kept as it is once the room is there) */
	watch(r->client, &r->rc, &r->mask_c, EPOLLHUP);
	int rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	if (rc == 0) {
		relay_start(r, true);
		return;
	}
	if (errno == EINPROGRESS || errno == EINTR) {
		/* the room's loopback has mostly answered by now: no round
		 * through the loop for it then */
		struct tcp_info ti;
		socklen_t len = sizeof(ti);
		if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 && ti.tcpi_state == TCP_ESTABLISHED)
			relay_start(r, true);
		else
			watch(r->room, &r->rr, &r->mask_r, EPOLLOUT);
		return;
	}
	if (errno == ECONNREFUSED || errno == ENETUNREACH || errno == EADDRNOTAVAIL) {
		char msg[128];
		snprintf(msg, sizeof(msg), "nothing listens on port %d in the room", r->port);
		relay_refuse(r, 502, msg);
		return;
	}
	char why[128];
	snprintf(why, sizeof(why), "connect: %s", strerror(errno));
	room_unreachable(r, why);
}

static void relay_update(struct relay *r);

/* connected: known to be (else SO_ERROR says how the connect ended) */
static void relay_start(struct relay *r, bool connected)
{
	int soerr = 0;
	socklen_t len = sizeof(soerr);
	char room[ROOM_ID_MAX + 1];
	int port;
	if (!connected && (getsockopt(r->room, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0 || soerr != 0)) {
		char msg[128];
		snprintf(msg, sizeof(msg), "nothing listens on port %d in the room", r->port);
		relay_refuse(r, 502, msg);
		return;
	}
	/* revoked while we connected: end here */
	if (atomic_load(&revocations) != r->revocations &&
	    preview_lookup(r->h.token, room, sizeof(room), &port) < 0) {
		relay_refuse(r, 404, "not found");
		return;
	}
	_Static_assert(RELAY_BUF >= PREVIEW_HEAD_MAX + PREVIEW_HEAD_GROWTH, "a head fits");
	if (!r->c2r.buf)
		r->c2r.buf = malloc(RELAY_BUF);
	if (!r->r2c.buf)
		r->r2c.buf = malloc(RELAY_BUF);
	if (!r->c2r.buf || !r->r2c.buf) {
		relay_refuse(r, 503, "out of memory");
		return;
	}
	/* the rewritten head, then a body's first bytes if they came with it */
	/* path-style shares the API's origin: its cookies are not the room's */
	struct preview_strip strip = { !r->h.host_style, api_credential, relay_app->tokens };
	size_t hl = preview_head_rewrite(&r->h, r->head, &strip, r->c2r.buf, RELAY_BUF);
	size_t extra = r->head_len - r->h.head_len;
	if (hl && hl + extra <= RELAY_BUF) {
		memcpy(r->c2r.buf + hl, r->head + r->h.head_len, extra);
		r->c2r.len = hl + extra;
	} else {   /* cannot happen: the head with its tail is at most PREVIEW_HEAD_MAX */
		relay_refuse(r, 431, "request head too large");
		return;
	}
	/* more than the body: the next request (web servers do not send it
	 * before the answer, but a peer of preview.sock might), never for
	 * this room: kept back for its turn */
	r->c2r.len -= carried(r);
	r->req_left = r->h.framed && extra < r->h.body_len ? r->h.body_len - extra : 0;
	r->resp_head = true;
	r->resp_read = 0;
	r->st = R_RELAY;
	r->deadline = 0;
	r->last_io = now_ms();
	relay_update(r);
}

/* Send what waits in f to fd; false when the relay must end. */
static bool flow_send(struct flow *f, int fd, long now)
{
	while (f->off < f->len) {
		ssize_t n = send(fd, f->buf + f->off, f->len - f->off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			if (!f->blocked_since)
				f->blocked_since = now;
			return true;
		}
		if (n <= 0)
			return false;   /* a byte lost: end both */
		f->off += (size_t)n;
		f->blocked_since = 0;
	}
	f->off = f->len = 0;
	f->blocked_since = 0;
	if (f->eof && !f->shut) {
		shutdown(fd, SHUT_WR);
		f->shut = true;
	}
	return true;
}

/* Up to want bytes from fd into the empty f; its end of stream sets
 * f->eof.  The bytes read (0: none now, or the end), or -1 when the relay
 * must end (a reset: nothing more either way). */
static ssize_t flow_read(struct flow *f, int fd, size_t want)
{
	ssize_t n = recv(fd, f->buf, want, MSG_DONTWAIT);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -1;
	f->eof = n == 0;
	return n;
}

/* Read the client's bytes for the room (only when none wait); in a kept
 * exchange no byte past the request's body (the next request waits in
 * the socket for its turn).  false when the relay must end (a reset:
 * nothing more either way). */
static bool client_recv(struct relay *r)
{
	struct flow *f = &r->c2r;
	size_t want = RELAY_BUF;
	if (f->eof || f->len)
		return true;
	if (r->h.framed) {
		if (!r->req_left) {
			f->eof = r->hup_c;   /* gone: nothing more to read */
			return true;
		}
		if (r->req_left < want)
			want = (size_t)r->req_left;
	}
	ssize_t n = flow_read(f, r->client, want);
	if (n < 0)
		return false;
	f->len = (size_t)n;
	if (r->h.framed)
		r->req_left -= (size_t)n;
	return true;
}

enum { ROOM_OK, ROOM_END, ROOM_ANSWERED };

/* Read the room's bytes for the client: the answer's head whole first,
 * rewritten (preview_frame.c); then, in a kept exchange, only up to the
 * answer's end (what comes after it is dropped with the room's socket). */
static int room_recv(struct relay *r)
{
	struct flow *f = &r->r2c;
	if (f->eof || (!r->resp_head && f->len) || (r->h.framed && r->fr.done))
		return ROOM_OK;
	if (r->resp_head) {
		ssize_t n = recv(r->room, f->buf + f->len, RELAY_BUF - FRAME_SLACK - f->len, MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return ROOM_OK;
		if (n <= 0 && relay_retry(r))
			return ROOM_ANSWERED;
		if (n <= 0) {   /* nothing has gone on yet: the answer is ours */
			char msg[128];
			snprintf(msg, sizeof(msg), "the server on port %d in the room closed without an answer",
				 r->port);
			relay_refuse(r, 502, msg);
			return ROOM_ANSWERED;
		}
		size_t before = f->len;
		f->len += (size_t)n;
		r->resp_read += (size_t)n;
		/* the head so far had no end: look for it in the new bytes only
		 * (a head dribbled a byte a read must not cost its square) */
		if (!http_head_ended(f->buf, before, f->len) && f->len < RELAY_BUF - FRAME_SLACK &&
		    r->resp_read <= RESP_HEAD_READ_MAX)
			return ROOM_OK;
		size_t head;
		int rc = frame_head(f->buf, &f->len, RELAY_BUF, r->h.head_method, r->h.keep, &r->fr, &head);
		/* interim answers are dropped (frame_head): a stream of them
		 * must not hold the relay for ever, nothing reaching the client */
		if (rc == 0 && r->resp_read > RESP_HEAD_READ_MAX)
			rc = -1;
		if (rc == 0)
			return ROOM_OK;
		if (rc < 0) {
			relay_refuse(r, 502, "the answer's head from the room is too large");
			return ROOM_ANSWERED;
		}
		r->resp_head = false;
		if (r->h.framed) {
			size_t body = frame_body(&r->fr, f->buf + head, f->len - head);
			r->room_extra |= body < f->len - head;
			f->len = head + body;
		}
		return ROOM_OK;
	}
	size_t want = RELAY_BUF;
	if (r->h.framed && r->fr.end == FRAME_LENGTH && r->fr.left < want)
		want = (size_t)r->fr.left;
	ssize_t n = flow_read(f, r->room, want);
	if (n < 0)
		return ROOM_END;
	f->len = r->h.framed ? frame_body(&r->fr, f->buf, (size_t)n) : (size_t)n;
	r->room_extra |= f->len < (size_t)n;
	return ROOM_OK;
}

/* The kept connection r's request went on ended (or was reset) before
 * any byte of an answer: its server closed it just then.  The request
 * goes again on a new connection; false when it cannot. */
static bool relay_retry(struct relay *r)
{
	if (!r->reused || !r->resp_head || r->resp_read || r->c2r.shut)
		return false;
	watch(r->room, &r->rr, &r->mask_r, 0);
	slot_set(r->slot, r->h.token, -1);   /* before the close: its number may be reused at once */
	close(r->room);
	r->room = -1;
	r->hup_r = false;
	r->reused = false;
	r->fresh = true;
	char *cb = r->c2r.buf, *rb = r->r2c.buf;
	r->c2r = (struct flow){ .buf = cb };
	r->r2c = (struct flow){ .buf = rb };
	relay_ask(r);
	return true;
}

/* An exchange is over: its room socket kept for the exposure's next
 * request when the server keeps it and nothing else came on it, else
 * closed. */
static void relay_room_done(struct relay *r)
{
	if (r->room < 0)
		return;
	char byte;
	struct connector *c = NULL;
	bool clean = r->h.keep && r->fr.done && r->fr.reuse && !r->fr.broken && !r->room_extra &&
		     !r->r2c.eof && !r->hup_r && !r->c2r.shut && !r->c2r.len && !r->req_left &&
		     recv(r->room, &byte, 1, MSG_PEEK | MSG_DONTWAIT) < 0 && errno == EAGAIN;
	for (int i = 0; clean && i < CONNECTORS_MAX && !c; i++)
		if (connectors[i].sock >= 0 && strcmp(connectors[i].room, r->room_id) == 0)
			c = &connectors[i];
	slot_set(r->slot, "", -1);   /* before the close: its number may be reused at once */
	if (c) {
		kept_put(c, r->room, r->mask_r, r->port, r->h.token);
		r->mask_r = 0;
	} else {
		watch(r->room, &r->rr, &r->mask_r, 0);
		close(r->room);
	}
	r->room = -1;
}

/* A kept exchange is over: the connection waits for the web server's next
 * request; the room's socket is kept or closed (relay_room_done). */
static void relay_next(struct relay *r)
{
	relay_share_give(r);
	relay_room_done(r);
	char *cb = r->c2r.buf, *rb = r->r2c.buf;
	r->c2r = (struct flow){ .buf = cb };
	r->r2c = (struct flow){ .buf = rb };
	r->hup_r = false;
	size_t carry = carried(r);
	memmove(r->head, r->head + r->head_len - carry, carry);
	r->head_len = carry;
	r->h = (struct preview_head){ 0 };
	r->fr = (struct frame){ 0 };
	r->retried = r->reused = r->fresh = r->room_extra = r->client_early = false;
	r->st = R_HEAD;
	r->deadline = now_ms() + (r->head_len ? PREVIEW_HEAD_MS : PREVIEW_KEEP_MS);
	watch(r->client, &r->rc, &r->mask_c, EPOLLIN);
	if (r->head_len)   /* the next request came early: its turn now */
		relay_parse(r);
}

/* Watch what can move next, or end the relay when nothing can. */
static void relay_update(struct relay *r)
{
	long now = now_ms();
	if (!flow_send(&r->c2r, r->room, now)) {
		if (!relay_retry(r))
			relay_end(r);
		return;
	}
	if (!r->resp_head && !flow_send(&r->r2c, r->client, now)) {
		relay_end(r);
		return;
	}
	if (r->c2r.shut && r->r2c.shut) {
		relay_end(r);
		return;
	}
	/* a framed exchange ends with its answer; when kept, the next request
	 * may follow if the answer's end was found and the body all came */
	if (r->h.framed && !r->resp_head && !r->r2c.len && (r->fr.done || r->r2c.eof)) {
		if (r->fr.done && r->fr.keep && !r->fr.broken && !r->req_left && !r->c2r.eof && !r->hup_c) {
			relay_next(r);
		} else {
			relay_room_done(r);
			relay_end(r);
		}
		return;
	}
	/* a framed request is over and its client has gone (the web server
	 * gave up, or a revocation): nobody will read the answer */
	if (r->h.framed && !r->req_left && r->hup_c) {
		relay_end(r);
		return;
	}
	/* an exchange of its own (an upgrade: a WebSocket) whose client has
	 * gone, both ways: what it sent has gone on, with its end, and nobody
	 * can read what the room may still send (a server that ignores the
	 * end and says nothing would hold the relay until the idle timeout) */
	if (!r->h.framed && r->hup_c && r->c2r.shut) {
		relay_end(r);
		return;
	}
	/* a side that hung up is reported at once whatever is watched: it is
	 * watched only while there is room to read its rest into; a client
	 * whose framed request is over, for its hang-up alone (the next
	 * request waits in the socket) */
	bool read_c = !r->c2r.eof && !r->c2r.len && (!r->h.framed || r->req_left);
	bool hup_only_c = r->h.framed && !r->req_left;
	/* ... but left watched for input too until some comes while the
	 * request is over (a web server sends the next request only after
	 * the answer): two changes of the watch each exchange cost more than
	 * the rest of the loop's own bookkeeping */
	if (hup_only_c && !r->client_early && (r->mask_c & EPOLLIN)) {
		read_c = true;
		hup_only_c = false;
	}
	bool read_r = !r->r2c.eof && (r->resp_head || (!r->r2c.len && !(r->h.framed && r->fr.done)));
	watch(r->client, &r->rc, &r->mask_c,
	      (read_c ? EPOLLIN : 0) | (hup_only_c ? EPOLLHUP : 0) |
	      (r->r2c.len && !r->resp_head && !r->hup_c ? EPOLLOUT : 0));
	watch(r->room, &r->rr, &r->mask_r,
	      (read_r ? EPOLLIN : 0) | (r->c2r.len && !r->hup_r ? EPOLLOUT : 0));
}

static void relay_event(struct relay *r, bool room_side, uint32_t ev)
{
	switch (r->st) {
	case R_HEAD:
	case R_REJECT:
		relay_head(r);
		return;
	case R_WAIT:
		return;   /* not watched; the connector answers */
	case R_LINGER:
		relay_linger(r);
		return;
	case R_CONNECTING:
		if (room_side)
			relay_start(r, false);
		else   /* the client hung up: nobody to connect for */
			relay_end(r);
		return;
	case R_RELAY:
		break;
	}
	if (ev & EPOLLERR) {   /* reset: nothing more either way */
		if (!room_side || !relay_retry(r))
			relay_end(r);
		return;
	}
	/* EPOLLHUP: both directions are shut (the peer's end after our own
	 * half-close, or its close): what it sent is still there to read */
	if (ev & EPOLLHUP)
		*(room_side ? &r->hup_r : &r->hup_c) = true;
	else if (!room_side && (ev & EPOLLIN) && r->h.framed && !r->req_left)
		r->client_early = true;   /* not read now: watched for its end alone */
	if (ev & (EPOLLIN | EPOLLHUP)) {
		int rc = room_side ? room_recv(r) : client_recv(r) ? ROOM_OK : ROOM_END;
		if (rc == ROOM_ANSWERED)
			return;
		if (rc == ROOM_END) {
			relay_end(r);
			return;
		}
	}
	r->last_io = now_ms();
	relay_update(r);
}

/* Deadlines: a head not whole in time, a connect that does not finish, a
 * relay idle or stalled; and the next one to wake up for. */
static long relays_expire(long now)
{
	long next = now + REAP_EVERY_MS;
	for (struct relay *r = all_relays, *n; r; r = n) {
		n = r->all_next;
		if (r->st == R_RELAY) {
			long b1 = r->c2r.blocked_since, b2 = r->r2c.blocked_since;
			long stalled = b1 && (!b2 || b1 < b2) ? b1 : b2;
			long end = r->last_io + PREVIEW_IDLE_MS;
			if (stalled && stalled + RELAY_STALL_S * 1000L < end)
				end = stalled + RELAY_STALL_S * 1000L;
			if (now >= end) {
				relay_end(r);
				continue;
			}
			if (end < next)
				next = end;
			continue;
		}
		if (!r->deadline)
			continue;
		if (now < r->deadline) {
			if (r->deadline < next)
				next = r->deadline;
			continue;
		}
		if (r->st == R_LINGER)
			relay_end(r);
		else if (r->st == R_REJECT)
			relay_refuse(r, 503, "too many preview connections");
		else if (r->st == R_CONNECTING) {
			char msg[128];
			snprintf(msg, sizeof(msg), "nothing listens on port %d in the room", r->port);
			relay_refuse(r, 502, msg);
		} else if (r->head_len > 0)
			relay_refuse(r, 408, "request head not complete in time");
		else
			relay_end(r);
	}
	return next;
}

static long accept_paused_until;   /* descriptors ran out: not before then */

/* false once the socket has been shut down (the service stops) */
static bool accept_all(void)
{
	for (;;) {
		int c = accept4(relay_listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE)
				accept_paused_until = now_ms() + 100;   /* let some close */
			return errno != EINVAL;
		}
		int slot = slot_take(c);
		if (slot < 0 && rejects >= REJECTS_MAX) {
			close(c);
			continue;
		}
		if (!relay_new(c, slot)) {
			answer(c, 503, "out of memory");
			if (slot >= 0)
				slot_clear(slot);
			close(c);
		}
	}
}

static void *loop_main(void *arg)
{
	struct ref listen_ref = { REF_LISTEN, NULL };
	uint32_t listen_mask = 0;
	long next = now_ms() + REAP_EVERY_MS, reap_at = next;
	(void)arg;
	for (;;) {
		struct epoll_event evs[64];
		if (accept_paused_until && now_ms() >= accept_paused_until)
			accept_paused_until = 0;
		watch(relay_listen_fd, &listen_ref, &listen_mask, accept_paused_until ? 0 : EPOLLIN);
		if (accept_paused_until && accept_paused_until < next)
			next = accept_paused_until;
		long wait = next - now_ms();
		int n = epoll_wait(loop_fd, evs, 64, wait < 0 ? 0 : (int)wait);
		if (n < 0 && errno != EINTR)
			return NULL;
		/* waiting connections into rooms first: one that has ended or
		 * got a stray byte is gone before a request of this round can
		 * take it */
		for (int i = 0; i < n; i++) {
			struct ref *ref = evs[i].data.ptr;
			if (ref->kind == REF_KEPT)
				kept_event(ref->p);
		}
		for (int i = 0; i < n; i++) {
			struct ref *ref = evs[i].data.ptr;
			uint32_t e = evs[i].events;
			if (ref->kind == REF_LISTEN) {
				if (!accept_all())
					return NULL;   /* shut down */
			} else if (ref->kind == REF_CONNECTOR) {
				connector_readable(ref->p);
			} else if (ref->kind == REF_KEPT) {
				continue;
			} else if (!((struct relay *)ref->p)->dead) {
				relay_event(ref->p, ref->kind == REF_ROOM, e);
			}
		}
		relays_free();
		long now = now_ms();
		next = relays_expire(now);
		if (now >= reap_at) {
			connectors_reap();
			reap_at = now + REAP_EVERY_MS;
		}
		if (reap_at < next)
			next = reap_at;
	}
}

int preview_relay_start(struct app *app)
{
	relay_app = app;
	connectors_init();
	if (fair_share_init(&room_relays, PREVIEW_RELAYS_MAX, PREVIEW_ROOM_RELAYS) < 0)
		return fprintf(stderr, "roombox-fcgi: previews: out of memory\n"), -1;
	if (preview_socket_path(&app->cfg, relay_path, sizeof(relay_path)) < 0) {
		fprintf(stderr, "roombox-fcgi: preview socket path too long (beside %s)\n", app->cfg.socket);
		return -1;
	}
	int fd = unix_listen(&app->cfg, relay_path, "preview socket");
	if (fd < 0)
		return -1;
	relay_socket_created = true;
	if (fcntl(fd, F_SETFL, O_NONBLOCK) < 0) {
		fprintf(stderr, "roombox-fcgi: preview socket: %s\n", strerror(errno));
		return -1;
	}
	relay_listen_fd = fd;
	loop_fd = epoll_create1(EPOLL_CLOEXEC);
	pthread_t t;
	if (loop_fd < 0 || pthread_create(&t, NULL, loop_main, NULL) != 0) {
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

/* A room's cleanup: every exposure of it ended, their relays and its
 * connector with them.  Here, below the API modules, so that rooms.c
 * (cleanup) and preview.c (the ports API) both sit above it. */
int preview_room_forget(const char *room, char *err, size_t errlen)
{
	int found, rc = preview_unexpose(room, 0, preview_relay_revoke, &found, err, errlen);

	preview_connector_forget(room);
	return rc;
}
