/* A terminal's WebSocket: GET /api/rooms/{id}/sandbox/terminals/{tid}/ws,
 * which FastCGI cannot carry, so the web server proxies it to term.sock
 * beside the FastCGI socket, where roombox-fcgi ends it itself.
 *
 * The request head is untrusted bytes (at most TERM_HEAD_MAX, whole within
 * TERM_HEAD_MS).  Who may attach: a client with a ticket of that terminal
 * (?ticket=, single use, terminals.c: browsers cannot put a token on a
 * WebSocket) or with the API token in Authorization.  Then, per client,
 * two threads: this one reads the client's frames (ws_frame.c: every
 * hostile frame gets its close code) and writes keystrokes (binary) and
 * resizes ({"type":"resize","cols","rows"}, text) to the terminal; a sender
 * sends the scrollback, then the output as it comes, each client at its
 * own offset in the terminal's ring (one that does not read loses the
 * oldest bytes, nobody else waits), and at the end {"type":"exit",
 * "exitCode"} (null when the room stopped it) and a close.  A client that
 * resizes more than TERM_RESIZES_PER_S times a second is closed (1008). */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <json-c/json.h>

#include "app.h"
#include "auth.h"
#include "clock.h"
#include "helper_client.h"
#include "http.h"
#include "roomid.h"
#include "term_head.h"
#include "term_ws.h"
#include "terminals.h"
#include "unix_listen.h"
#include "ws_frame.h"

#define TERM_HEAD_MAX      (16u << 10)
#define TERM_HEAD_MS       15000
#define TERM_MESSAGE_MAX   (64u << 10)
#define TERM_PING_MS       15000
#define TERM_RESIZES_PER_S 100
#define TERM_LINGER_MS     2000
#define TERM_ACTIVITY_MS   1000
#define TERM_SEND_S        60
#define TERM_CONNS_MAX     (TERMS_MAX * TERM_CLIENTS_MAX)

static struct app *ws_app;
static int listen_fd = -1;
static char sock_path[108];
static atomic_int conns;

struct conn {
	int fd;
	struct terminal *t;
	const char *room;
	pthread_mutex_t wlock;    /* both threads write frames */
	atomic_bool done;
};

static int send_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n > 0) {
		ssize_t k = send(fd, c, n, MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		c += k;
		n -= (size_t)k;
	}
	return 0;
}

static int send_frame(struct conn *c, enum ws_op op, const void *p, size_t n)
{
	unsigned char h[10];
	size_t hl = ws_header(h, op, n);
	pthread_mutex_lock(&c->wlock);
	int rc = send_all(c->fd, h, hl) < 0 || send_all(c->fd, p, n) < 0 ? -1 : 0;
	pthread_mutex_unlock(&c->wlock);
	return rc;
}

static void send_close(struct conn *c, uint16_t code, const char *why)
{
	unsigned char p[WS_CONTROL_MAX];
	size_t n = ws_close_payload(p, code, why);
	send_frame(c, WS_CLOSE, p, n);
}

/* ---- the sender ---- */

static void *sender_main(void *arg)
{
	struct conn *c = arg;
	uint64_t at = term_start_offset(c->t);
	char *buf = malloc(65536);
	long quiet = monotonic_ms();
	while (buf && !c->done) {
		bool ended;
		int code;
		size_t n = term_read(c->t, &at, buf, 65536, 1000, &ended, &code);
		if (n > 0) {
			if (send_frame(c, WS_BINARY, buf, n) < 0)
				break;
			quiet = monotonic_ms();
			continue;
		}
		if (ended) {
			char msg[64];
			if (code >= 0)
				snprintf(msg, sizeof(msg), "{\"type\":\"exit\",\"exitCode\":%d}", code);
			else
				snprintf(msg, sizeof(msg), "{\"type\":\"exit\",\"exitCode\":null}");
			send_frame(c, WS_TEXT, msg, strlen(msg));
			send_close(c, WS_CLOSE_NORMAL, code >= 0 ? "the terminal ended" : "the room stopped");
			break;
		}
		if (monotonic_ms() - quiet >= TERM_PING_MS) {   /* finds a client that is gone */
			if (send_frame(c, WS_PING, "", 0) < 0)
				break;
			quiet = monotonic_ms();
		}
	}
	free(buf);
	c->done = true;
	shutdown(c->fd, SHUT_RD);   /* the reader stops too */
	return NULL;
}

/* ---- the client's frames ---- */

/* After our close frame: what the client still sends is read and dropped
 * until it closes too (or TERM_LINGER_MS), so that no proxy on the way
 * resets the connection, losing the close frame, for unread bytes. */
static void linger(struct conn *c)
{
	char drop[4096];
	long until = monotonic_ms() + TERM_LINGER_MS;
	for (long left; (left = until - monotonic_ms()) > 0;) {
		struct pollfd pf = { c->fd, POLLIN, 0 };
		if (poll(&pf, 1, (int)left) <= 0 || recv(c->fd, drop, sizeof(drop), 0) <= 0)
			return;
	}
}

static int control_message(struct conn *c, const unsigned char *p, size_t n, long *window, int *count)
{
	struct json_tokener *tok = json_tokener_new();
	json_object *o = tok ? json_tokener_parse_ex(tok, (const char *)p, (int)n) : NULL;
	if (tok && json_tokener_get_error(tok) != json_tokener_success) {
		json_object_put(o);
		o = NULL;
	}
	if (tok)
		json_tokener_free(tok);
	json_object *type, *cols, *rows;
	int rc = -1;
	if (o && json_object_object_get_ex(o, "type", &type) && json_object_is_type(type, json_type_string) &&
	    !strcmp(json_object_get_string(type), "resize") && json_object_object_get_ex(o, "cols", &cols) &&
	    json_object_object_get_ex(o, "rows", &rows) && json_object_is_type(cols, json_type_int) &&
	    json_object_is_type(rows, json_type_int)) {
		int64_t cv = json_object_get_int64(cols), rv = json_object_get_int64(rows);
		long now = monotonic_ms();
		if (now - *window >= 1000) {
			*window = now;
			*count = 0;
		}
		if (++*count > TERM_RESIZES_PER_S) {
			send_close(c, WS_CLOSE_POLICY, "too many resizes");
		} else if (cv >= 1 && cv <= TERM_SIZE_MAX && rv >= 1 && rv <= TERM_SIZE_MAX) {
			term_resize(c->t, (unsigned)cv, (unsigned)rv);
			rc = 0;
		} else {
			send_close(c, WS_CLOSE_POLICY, "cols and rows: 1 to 1000");
		}
	} else {
		send_close(c, WS_CLOSE_POLICY, "expected {\"type\":\"resize\",\"cols\":N,\"rows\":N}");
	}
	json_object_put(o);
	return rc;
}

/* What clients send (keystrokes, resizes) is the room's activity, for
 * idle stop: a terminal reaches the room without a helper, so the helper
 * is told, at most once every TERM_ACTIVITY_MS for a terminal however
 * many type in it.  Output, and a client that only watches, are not: a
 * room whose only use is a terminal nobody types in stops when idle, as
 * one whose only use is a preview's open WebSocket does. */
static void activity(struct conn *c)
{
	if (!term_activity_due(c->t, TERM_ACTIVITY_MS))
		return;
	struct helper_target target = app_helper(ws_app);
	struct helper_error err;
	if (helper_touch(&target, c->room, &err) < 0 && err.http_status != 404)
		fprintf(stderr, "roombox-fcgi: room %s: terminal activity: %s\n", c->room, err.message);
}

static void read_frames(struct conn *c, unsigned char *rest, size_t rest_len)
{
	struct ws_reader r;
	ws_reader_init(&r, TERM_MESSAGE_MAX);
	size_t cap = ws_frame_max_wire(&r), have = 0;
	unsigned char *buf = malloc(cap);
	long window = 0;
	int count = 0;
	if (!buf)
		goto out;
	if (rest_len > cap)
		rest_len = cap;
	memcpy(buf, rest, rest_len);
	have = rest_len;
	while (!c->done) {
		struct ws_event ev;
		uint16_t code;
		const char *why;
		ssize_t used;
		while ((used = ws_reader_feed(&r, buf, have, &ev, &code, &why)) > 0) {
			int rc = 0;
			if (ev.op == WS_BINARY) {
				term_write(c->t, ev.data, ev.len);   /* to an ended terminal: dropped */
				activity(c);
			} else if (ev.op == WS_TEXT) {
				rc = control_message(c, ev.data, ev.len, &window, &count);
				if (rc == 0)
					activity(c);
			}
			else if (ev.op == WS_PING)
				rc = send_frame(c, WS_PONG, ev.data, ev.len);
			else if (ev.op == WS_CLOSE) {
				send_close(c, WS_CLOSE_NORMAL, "");
				rc = -1;
			}
			memmove(buf, buf + used, have - (size_t)used);
			have -= (size_t)used;
			if (rc < 0) {
				if (ev.op != WS_CLOSE)
					linger(c);
				goto out;
			}
		}
		if (used < 0) {
			send_close(c, code, why);
			linger(c);
			goto out;
		}
		ssize_t k = recv(c->fd, buf + have, cap - have, 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		have += (size_t)k;
	}
out:
	free(buf);
	ws_reader_free(&r);
}

/* ---- the handshake ---- */

static void answer(int fd, int status, const char *reason, const char *msg)
{
	char out[512];
	char body[256];
	int bl = snprintf(body, sizeof(body), "{\"error\":\"%s\"}\n", msg);
	int n = snprintf(out, sizeof(out), "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
			 "Content-Length: %d\r\nConnection: close\r\n%s\r\n%s", status, reason, bl,
			 http_host_header, body);
	send_all(fd, out, (size_t)n);
}

static void *conn_main(void *arg)
{
	int fd = (int)(intptr_t)arg;
	/* a client that stops reading fails the sender's next write after
	 * this, instead of holding it (and the reader's pongs) for ever */
	struct timeval send_limit = { TERM_SEND_S, 0 };
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &send_limit, sizeof(send_limit));
	char *head = malloc(TERM_HEAD_MAX + 1);
	size_t len = 0;
	if (head)
		head[0] = '\0';
	long until = monotonic_ms() + TERM_HEAD_MS;
	char *end = NULL;
	while (head && len < TERM_HEAD_MAX && !(end = strstr(head, "\r\n\r\n"))) {
		struct pollfd pf = { fd, POLLIN, 0 };
		long left = until - monotonic_ms();
		if (left <= 0 || poll(&pf, 1, (int)left) <= 0)
			break;
		ssize_t k = recv(fd, head + len, TERM_HEAD_MAX - len, 0);
		if (k <= 0)
			break;
		len += (size_t)k;
		head[len] = '\0';
		if (memchr(head, '\0', len))
			break;
	}
	struct terminal *t = NULL;
	if (!end) {
		answer(fd, len >= TERM_HEAD_MAX ? 431 : 400, len >= TERM_HEAD_MAX ? "Request Header Fields Too Large"
		       : "Bad Request", "bad request head");
		goto out;
	}
	end[2] = '\0';
	struct term_head h;
	if (term_head_parse(head, &h) < 0) {
		answer(fd, 400, "Bad Request", "expected GET ... HTTP/1.x");
		goto out;
	}
	if (h.shape == TERM_TARGET_NONE) {
		answer(fd, 404, "Not Found", "not found");
		goto out;
	}
	/* credentials first, as on every route: then what the path names */
	bool allowed = !ws_app->tokens;
	if (!allowed && h.ticket[0] && h.shape == TERM_TARGET_OK)
		allowed = term_ticket_take(h.ticket, h.room, h.tid);
	if (!allowed && h.auth[0])
		allowed = auth_tokens_check(ws_app->tokens, h.auth);
	if (!allowed) {
		answer(fd, 401, "Unauthorized", "a ticket of this terminal or the API token is needed");
		goto out;
	}
	if (h.shape == TERM_TARGET_BAD_ID) {
		answer(fd, 400, "Bad Request", "invalid room or terminal id");
		goto out;
	}
	if (!h.upgrade) {
		answer(fd, 426, "Upgrade Required", "a WebSocket upgrade is expected here");
		goto out;
	}
	if (!h.version13) {
		answer(fd, 426, "Upgrade Required", "Sec-WebSocket-Version 13 expected");
		goto out;
	}
	char accept[29];
	if (ws_accept_key(h.key, strlen(h.key), accept) < 0) {
		answer(fd, 400, "Bad Request", "bad Sec-WebSocket-Key");
		goto out;
	}
	t = term_attach(h.room, h.tid);
	if (!t) {
		answer(fd, 404, "Not Found", "terminal not found");
		goto out;
	}
	char ok[256];
	int n = snprintf(ok, sizeof(ok), "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
			 "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n%s\r\n", accept, http_host_header);
	if (send_all(fd, ok, (size_t)n) < 0)
		goto out;
	struct conn c = { .fd = fd, .t = t, .room = h.room };
	pthread_mutex_init(&c.wlock, NULL);
	pthread_t sender;
	if (pthread_create(&sender, NULL, sender_main, &c) == 0) {
		size_t rest = len - (size_t)(end + 4 - head);
		read_frames(&c, (unsigned char *)end + 4, rest);
		c.done = true;
		shutdown(fd, SHUT_RDWR);
		pthread_join(sender, NULL);
	}
	pthread_mutex_destroy(&c.wlock);
out:
	if (t)
		term_detach(t);
	free(head);
	close(fd);
	atomic_fetch_sub(&conns, 1);
	return NULL;
}

static void *accept_main(void *arg)
{
	(void)arg;
	for (;;) {
		int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE) {
				/* the connection stays queued: wait for a descriptor
				 * rather than spin on it */
				struct timespec pause = { 0, 100 * 1000 * 1000 };
				nanosleep(&pause, NULL);
				continue;
			}
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return NULL;   /* shut down */
		}
		if (atomic_fetch_add(&conns, 1) >= TERM_CONNS_MAX) {
			answer(fd, 503, "Service Unavailable", "too many terminal connections");
			close(fd);
			atomic_fetch_sub(&conns, 1);
			continue;
		}
		pthread_t th;
		pthread_attr_t attr;
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&attr, 256 << 10);
		if (pthread_create(&th, &attr, conn_main, (void *)(intptr_t)fd) != 0) {
			close(fd);
			atomic_fetch_sub(&conns, 1);
		}
		pthread_attr_destroy(&attr);
	}
}

int term_ws_start(struct app *app)
{
	ws_app = app;
	if (unix_socket_beside(&app->cfg, "term.sock", sock_path, sizeof(sock_path)) < 0) {
		fprintf(stderr, "roombox-fcgi: terminal socket path too long (beside %s)\n", app->cfg.socket);
		return -1;
	}
	listen_fd = unix_listen(&app->cfg, sock_path, "terminal socket");
	if (listen_fd < 0)
		return -1;
	pthread_t t;
	if (pthread_create(&t, NULL, accept_main, NULL) != 0) {
		fprintf(stderr, "roombox-fcgi: cannot start the terminal socket\n");
		return -1;
	}
	pthread_detach(t);
	return 0;
}

void term_ws_stop(void)
{
	if (listen_fd >= 0) {
		shutdown(listen_fd, SHUT_RDWR);
		unlink(sock_path);
	}
}
