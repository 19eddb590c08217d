/* /api/rooms/{id}/sandbox/terminals: a room's terminals.
 *
 * A terminal is the keeper's pty tool (keeper/pty.c) started detached in
 * the room by one short exec (passed I/O, as a managed process is): its
 * stdout is a unix socket of ours, on which it hands over the terminal's
 * master side with "ok <pid>", and later says "exit <code>".  From then on
 * roombox-fcgi alone holds the master: one reader thread per terminal
 * drains it into a byte ring (the scrollback, TERM_SCROLLBACK bytes), so a
 * program that writes gigabytes never blocks and never grows anything;
 * every WebSocket client (term_ws.c) reads the ring at its own offset and
 * writes keystrokes and resizes to the master.  A terminal outlives its
 * clients.  It ends when its shell does ("exit"), when DELETE hangs it up
 * (the master closed: SIGHUP to the shell's session, then SIGKILL to what
 * is left of the session by the keeper's signal tool), or with the room
 * (the tool killed: its socket ends without "exit", the record says
 * `lost`).  Ended terminals are listed until the room is cleaned up, at
 * most TERMS_PER_ROOM kept per room.
 *
 * Its processes are the room's: its cgroup's memory, pids and cpu limits
 * count them, as any exec's. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "byte_ring.h"
#include "clock.h"
#include "exec_pump.h"
#include "fdrecv.h"
#include "helper_client.h"
#include "http.h"
#include "protocol.h"
#include "terminals.h"
#include "timefmt.h"
#include "validate.h"

#define TERM_START_MS 15000
#define TERM_DEFAULT_COLS 80
#define TERM_DEFAULT_ROWS 24
#define TERM_CMD_MAX 8192

enum tstatus { T_RUNNING, T_EXITED, T_LOST };
static const char *const tstatus_name[] = { "running", "exited", "lost" };

struct terminal {
	struct terminal *next;
	char room[ROOM_ID_MAX + 1];
	char id[TERM_ID_LEN + 1];
	int pid;
	unsigned cols, rows;
	bool as_user;
	struct timespec started;
	enum tstatus status;
	int exit_code;            /* -1 until known */
	int master, ctl;          /* -1 once closed (by the reader alone) */
	int wake[2];              /* DELETE tells the reader to hang up */
	bool hung_up;             /* DELETE asked */
	struct byte_ring ring;
	int refs;                 /* the list's, the reader's, each client's */
	long told_active;         /* monotonic ms: its clients' input last told */
	pthread_cond_t cond;      /* new output, or the end */
};

struct ticket {
	char value[TERM_TICKET_LEN + 1];
	char room[ROOM_ID_MAX + 1];
	char id[TERM_ID_LEN + 1];
	long expires;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* the rooms of creations under way (one entry each): counted with the
 * running terminals, so that creations at once stay within the limits */
static char starting[TERMS_MAX][ROOM_ID_MAX + 1];
static struct terminal *terms;
static struct ticket tickets[256];

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static void unref(struct terminal *t)   /* under lock */
{
	if (--t->refs > 0)
		return;
	close_fd(&t->master);
	close_fd(&t->ctl);
	close_fd(&t->wake[0]);
	close_fd(&t->wake[1]);
	byte_ring_free(&t->ring);
	pthread_cond_destroy(&t->cond);
	free(t);
}

/* ---- the reader: the master into the ring, the tool's word on the end ---- */

static void *reader_main(void *arg)
{
	struct terminal *t = arg;
	char buf[65536], line[64];
	size_t line_len = 0;
	bool master_open = true, ctl_open = true;
	int code = -1;

	while (master_open || ctl_open) {
		struct pollfd pf[3] = { { master_open ? t->master : -1, POLLIN, 0 },
					{ ctl_open ? t->ctl : -1, POLLIN, 0 },
					{ master_open ? t->wake[0] : -1, POLLIN, 0 } };
		if (poll(pf, 3, -1) < 0 && errno != EINTR)
			break;
		if (pf[2].revents) {   /* DELETE: the hangup (SIGHUP to the shell's session) */
			pthread_mutex_lock(&lock);
			close_fd(&t->master);
			pthread_mutex_unlock(&lock);
			master_open = false;
			continue;
		}
		if (pf[0].revents) {
			ssize_t n = read(t->master, buf, sizeof(buf));
			if (n > 0) {
				pthread_mutex_lock(&lock);
				byte_ring_write(&t->ring, buf, (size_t)n);
				pthread_cond_broadcast(&t->cond);
				pthread_mutex_unlock(&lock);
			} else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
				master_open = false;   /* EIO: no slave side left open */
			}
		}
		if (pf[1].revents) {
			ssize_t n = read(t->ctl, line + line_len, sizeof(line) - 1 - line_len);
			if (n <= 0 && !(n < 0 && (errno == EINTR || errno == EAGAIN))) {
				ctl_open = false;
			} else if (n > 0) {
				line_len += (size_t)n;
				line[line_len] = '\0';
				int c;
				if (sscanf(line, "exit %d", &c) == 1 && strchr(line, '\n'))
					code = c;
				if (line_len == sizeof(line) - 1)
					line_len = 0;   /* not the tool's: it writes one short line */
			}
		}
		/* the tool has spoken and ended: what the master still holds is
		 * read, then done (a daemon of the shell may hold the slave) */
		if (!ctl_open && master_open) {
			int avail = 0;
			if (ioctl(t->master, FIONREAD, &avail) < 0 || avail == 0)
				master_open = false;
		}
	}
	pthread_mutex_lock(&lock);
	t->exit_code = code;
	t->status = code >= 0 ? T_EXITED : T_LOST;
	close_fd(&t->master);
	close_fd(&t->ctl);
	/* DELETE writes to it only while the terminal runs: an ended one,
	 * kept listed, holds no descriptor */
	close_fd(&t->wake[0]);
	close_fd(&t->wake[1]);
	pthread_cond_broadcast(&t->cond);
	unref(t);
	pthread_mutex_unlock(&lock);
	return NULL;
}

/* ---- the list ---- */

static struct terminal *find(const char *room, const char *id)   /* under lock */
{
	for (struct terminal *t = terms; t; t = t->next)
		if (!strcmp(t->room, room) && !strcmp(t->id, id))
			return t;
	return NULL;
}

static json_object *term_json(const struct terminal *t)   /* under lock */
{
	json_object *o = json_object_new_object();
	char stamp[40];
	iso8601_utc(&t->started, stamp, sizeof(stamp));
	json_object_object_add(o, "id", json_object_new_string(t->id));
	json_object_object_add(o, "pid", json_object_new_int(t->pid));
	json_object_object_add(o, "cols", json_object_new_int((int)t->cols));
	json_object_object_add(o, "rows", json_object_new_int((int)t->rows));
	json_object_object_add(o, "user", json_object_new_string(t->as_user ? HK_USER_USER : HK_USER_ROOT));
	json_object_object_add(o, "status", json_object_new_string(tstatus_name[t->status]));
	json_object_object_add(o, "exitCode", t->status == T_EXITED ? json_object_new_int(t->exit_code) : NULL);
	json_object_object_add(o, "startTime", json_object_new_string(stamp));
	return o;
}

/* Drops the oldest ended terminals of room beyond what a room keeps. */
static void prune(const char *room)   /* under lock */
{
	int n = 0;
	for (struct terminal *t = terms; t; t = t->next)
		n += !strcmp(t->room, room);
	while (n > TERMS_PER_ROOM) {
		struct terminal **oldest = NULL;
		for (struct terminal **p = &terms; *p; p = &(*p)->next)
			if (!strcmp((*p)->room, room) && (*p)->status != T_RUNNING)
				oldest = p;   /* the list is newest first: the last is the oldest */
		if (!oldest)
			return;
		struct terminal *t = *oldest;
		*oldest = t->next;
		unref(t);
		n--;
	}
}

/* ---- the body ---- */

static json_object *create_fields(json_object *body, unsigned *cols, unsigned *rows, const char **user,
				  const char **cmd)
{
	json_object *details = json_object_new_object(), *v;
	static const char *const known[] = { "cols", "rows", "user", "cmd" };
	if (!body || !json_object_is_type(body, json_type_object)) {
		zod_issue(details, "", "Invalid input: expected object");
		return details;
	}
	json_object_object_foreach(body, key, val) {
		(void)val;
		bool ok = false;
		for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
			ok |= !strcmp(key, known[i]);
		if (!ok)
			zod_issue(details, key, "Unrecognized key");
	}
	const char *sizes[] = { "cols", "rows" };
	unsigned *out[] = { cols, rows };
	for (int i = 0; i < 2; i++) {
		if (!json_object_object_get_ex(body, sizes[i], &v))
			continue;
		if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 1 ||
		    json_object_get_int64(v) > TERM_SIZE_MAX)
			zod_issue(details, sizes[i], "Invalid input: expected an integer from 1 to 1000");
		else
			*out[i] = (unsigned)json_object_get_int64(v);
	}
	if (json_object_object_get_ex(body, "user", &v)) {
		const char *u = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
		if (strcmp(u, HK_USER_ROOT) && strcmp(u, HK_USER_USER))
			zod_issue(details, "user", "Invalid input: expected \"root\" or \"user\"");
		else
			*user = u;
	}
	if (json_object_object_get_ex(body, "cmd", &v)) {
		const char *c = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
		size_t n = c ? (size_t)json_object_get_string_len(v) : 0;
		if (!c || !n || n > TERM_CMD_MAX || memchr(c, '\0', n))
			zod_issue(details, "cmd", "Invalid input: expected a command of 1-8192 bytes, no NUL");
		else
			*cmd = c;
	}
	if (json_object_object_length(details) > 0)
		return details;
	json_object_put(details);
	return NULL;
}

/* ---- starting one ---- */

/* The tool's first word on sock: "ok <pid>" with the master, or its
 * failure.  0, or -1 with why. */
static int take_master(int sock, int errfd, int *master, int *pid, char *why, size_t whylen)
{
	char buf[256];
	size_t len = 0;
	long until = monotonic_ms() + TERM_START_MS;
	*master = -1;
	while (len < sizeof(buf) - 1 && monotonic_ms() < until) {
		struct pollfd pf = { sock, POLLIN, 0 };
		if (poll(&pf, 1, (int)(until - monotonic_ms())) <= 0)
			continue;
		int fds[1], nfds = 0;
		ssize_t n = recv_with_fds(sock, buf + len, sizeof(buf) - 1 - len, 0, fds, 1, &nfds);
		if (nfds && *master < 0)
			*master = fds[0];
		else if (nfds)
			close(fds[0]);
		if (n <= 0)
			break;
		len += (size_t)n;
		buf[len] = '\0';
		if (strchr(buf, '\n'))
			break;
	}
	buf[len] = '\0';
	if (*master >= 0 && sscanf(buf, "ok %d", pid) == 1 && *pid > 0)
		return 0;
	close_fd(master);
	if (!strncmp(buf, "E ", 2)) {
		buf[strcspn(buf, "\n")] = '\0';
		snprintf(why, whylen, "%s", buf + 2);
		return -1;
	}
	ssize_t k = read(errfd, buf, sizeof(buf) - 1);
	buf[k > 0 ? k : 0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	snprintf(why, whylen, "%s", buf[0] ? buf : "the terminal did not start");
	return -1;
}

void api_terms_create(struct request *rq, struct response *rs)
{
	unsigned cols = TERM_DEFAULT_COLS, rows = TERM_DEFAULT_ROWS;
	const char *user = NULL, *cmd = NULL;
	json_object *details = create_fields(rq->body, &cols, &rows, &user, &cmd);
	if (details) {
		response_invalid(rs, details);
		return;
	}
	pthread_mutex_lock(&lock);
	int all = 0, running = 0, slot = -1;
	for (struct terminal *t = terms; t; t = t->next) {
		all += t->status == T_RUNNING;
		running += t->status == T_RUNNING && !strcmp(t->room, rq->room);
	}
	for (int i = 0; i < TERMS_MAX; i++) {
		if (!starting[i][0]) {
			slot = slot < 0 ? i : slot;
			continue;
		}
		all++;
		running += !strcmp(starting[i], rq->room);
	}
	bool room_full = running >= TERMS_PER_ROOM;
	if (!room_full && all < TERMS_MAX && slot >= 0)
		snprintf(starting[slot], sizeof(starting[slot]), "%s", rq->room);
	else
		slot = -1;
	pthread_mutex_unlock(&lock);
	if (slot < 0) {
		rs->retry_after = 5;
		response_error(rs, 503, "too many terminals%s", room_full ? " in this room" : "");
		return;
	}

	char size[32];
	snprintf(size, sizeof(size), "%ux%u", cols, rows);
	const char *argv[] = { TOOL_PTY, size, cmd ? "cmd" : "shell", cmd ? cmd : "", NULL };
	struct exec_request ex = { .cmd = argv[0], .cmd_len = strlen(argv[0]), .timeout_ms = TERM_START_MS,
				   .user = user };
	struct helper_exec x = exec_helper_exec(&ex);
	x.tool = argv;
	x.detach = true;
	struct helper_target target = app_helper(rq->app);
	struct helper_error err;
	struct helper_exec_ans ans;
	int in[2] = { -1, -1 }, out[2] = { -1, -1 }, errp[2] = { -1, -1 };
	memset(&err, 0, sizeof(err));
	if (pipe2(in, O_CLOEXEC) < 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, out) < 0 ||
	    pipe2(errp, O_CLOEXEC | O_NONBLOCK) < 0) {
		response_error(rs, 500, "pipes: %s", strerror(errno));
		goto out;
	}
	if (!exec_slot_take(rq->app)) {
		rs->retry_after = 1;
		response_error(rs, 503, "too many concurrent execs");
		goto out;
	}
	int pass[3] = { in[0], out[1], errp[1] };
	struct helper_run *run = helper_exec_start(&target, rq->room, &x, TERM_START_MS + HELPER_EXEC_GRACE_MS,
						   pass, &err);
	close_fd(&in[0]);
	close_fd(&out[1]);
	close_fd(&errp[1]);
	close_fd(&in[1]);   /* the tool reads nothing from its stdin */
	int rc = run ? helper_exec_finish(run, &ans, &err) : -1;
	exec_slot_give(rq->app);
	if (rc < 0) {
		exec_answer_error(rs, &err);
		goto out;
	}
	int master, pid;
	char why[256];
	if (take_master(out[0], errp[0], &master, &pid, why, sizeof(why)) < 0) {
		response_error(rs, 500, "room %s: the terminal did not start: %s", rq->room, why);
		goto out;
	}
	struct terminal *t = calloc(1, sizeof(*t));
	if (!t || byte_ring_init(&t->ring, TERM_SCROLLBACK) < 0) {
		free(t);
		close(master);
		response_error(rs, 500, "out of memory");
		goto out;
	}
	snprintf(t->room, sizeof(t->room), "%s", rq->room);
	unsigned char r[6];
	if (getrandom(r, sizeof(r), 0) != sizeof(r))
		memset(r, 0, sizeof(r));
	snprintf(t->id, sizeof(t->id), "t%02x%02x%02x%02x%02x%x", r[0], r[1], r[2], r[3], r[4], r[5] & 0xf);
	t->pid = pid;
	t->cols = cols;
	t->rows = rows;
	t->as_user = user ? !strcmp(user, HK_USER_USER) : rq->app->cfg.exec_user == EXEC_USER_USER;
	clock_gettime(CLOCK_REALTIME, &t->started);
	t->exit_code = -1;
	t->master = master;
	t->wake[0] = t->wake[1] = -1;
	if (pipe2(t->wake, O_CLOEXEC | O_NONBLOCK) < 0) {
		close(master);
		byte_ring_free(&t->ring);
		free(t);
		response_error(rs, 500, "pipes: %s", strerror(errno));
		goto out;
	}
	t->ctl = out[0];
	out[0] = -1;
	t->refs = 2;   /* the list's and the reader's */
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);   /* a clock step changes no wait */
	pthread_cond_init(&t->cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_t th;
	pthread_mutex_lock(&lock);
	if (pthread_create(&th, NULL, reader_main, t) != 0) {
		t->refs = 1;
		unref(t);
		pthread_mutex_unlock(&lock);
		response_error(rs, 500, "cannot follow the terminal");
		goto out;
	}
	pthread_detach(th);
	t->next = terms;
	terms = t;
	starting[slot][0] = '\0';   /* counted as running from here */
	slot = -1;
	prune(rq->room);
	json_object *o = json_object_new_object();
	json_object_object_add(o, "terminal", term_json(t));
	pthread_mutex_unlock(&lock);
	response_json(rs, 201, o);
out:
	if (slot >= 0) {
		pthread_mutex_lock(&lock);
		starting[slot][0] = '\0';
		pthread_mutex_unlock(&lock);
	}
	close_fd(&in[0]);
	close_fd(&in[1]);
	close_fd(&out[0]);
	close_fd(&out[1]);
	close_fd(&errp[0]);
	close_fd(&errp[1]);
}

/* ---- listing, one, ending ---- */

/* {tid} of …/terminals/{tid} (ticket false) or …/terminals/{tid}/ticket
 * (ticket true), the one wide route both share: false with rs set when it
 * is no terminal id (400), no such path (404), or the other form, whose
 * methods the route does not serve here (405 with its Allow). */
static bool term_id(struct request *rq, struct response *rs, char *id, bool ticket)
{
	const char *rest = rq->rest ? rq->rest : "";
	size_t n = strcspn(rest, "/");
	bool is_ticket = !strcmp(rest + n, "/ticket");
	if (n != TERM_ID_LEN || rest[0] != 't' || strspn(rest + 1, "0123456789abcdef") < TERM_ID_LEN - 1 ||
	    (rest[n] && !is_ticket)) {
		response_error(rs, rest[n] && !is_ticket ? 404 : 400, "invalid terminal id: expected t and 11 hex digits");
		return false;
	}
	if (is_ticket != ticket) {
		response_error(rs, 405, "method not allowed");
		snprintf(rs->allow, sizeof(rs->allow), "%s", is_ticket ? "POST" : "GET, DELETE");
		return false;
	}
	memcpy(id, rest, n);
	id[n] = '\0';
	return true;
}

void api_terms_list(struct request *rq, struct response *rs)
{
	if (!room_exists_or_answer(rq, rs))
		return;
	json_object *list = json_object_new_array();
	pthread_mutex_lock(&lock);
	for (struct terminal *t = terms; t; t = t->next)
		if (!strcmp(t->room, rq->room))
			json_object_array_add(list, term_json(t));
	pthread_mutex_unlock(&lock);
	json_object *o = json_object_new_object();
	json_object_object_add(o, "terminals", list);
	response_json(rs, 200, o);
}

void api_terms_get(struct request *rq, struct response *rs)
{
	char id[TERM_ID_LEN + 1];
	if (!term_id(rq, rs, id, false))
		return;
	pthread_mutex_lock(&lock);
	struct terminal *t = find(rq->room, id);
	json_object *o = t ? json_object_new_object() : NULL;
	if (t)
		json_object_object_add(o, "terminal", term_json(t));
	pthread_mutex_unlock(&lock);
	if (o)
		response_json(rs, 200, o);
	else
		response_error(rs, 404, "terminal not found: %s", id);
}

/* The keeper's signal tool: SIGKILL to what is left of the shell's session. */
static void kill_session(struct app *app, const char *room, int pid)
{
	char sid[16], sig[8];
	snprintf(sid, sizeof(sid), "%d", pid);
	snprintf(sig, sizeof(sig), "%d", SIGKILL);
	const char *argv[] = { TOOL_SIGNAL, sid, sig, NULL };
	struct exec_request ex = { .cmd = argv[0], .cmd_len = strlen(argv[0]), .timeout_ms = 10000,
				   .user = HK_USER_ROOT };
	/* a room stopped meanwhile took the session with it: not started
	 * again for this (its pids would be another room's life's) */
	struct exec_sink sink = { .tool = argv, .existing = true, .running_only = true };
	struct helper_error err;
	json_object_put(exec_pump_in_room(app, room, &ex, &sink, &err));
}

/* A running terminal's end asked for, once (under lock). */
static void hang_up(struct terminal *t)
{
	if (t->hung_up)
		return;
	t->hung_up = true;   /* the reader closes the master: the hangup */
	if (write(t->wake[1], "x", 1) < 0)
		fprintf(stderr, "roombox-fcgi: room %s: terminal %s: hang up: %m\n", t->room, t->id);
	/* and the pty tool hangs up the shell, killing it if it ignores that */
	if (t->ctl >= 0 && send(t->ctl, "k", 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		fprintf(stderr, "roombox-fcgi: room %s: terminal %s: end its shell: %m\n", t->room, t->id);
}

void api_terms_delete(struct request *rq, struct response *rs)
{
	char id[TERM_ID_LEN + 1];
	if (!term_id(rq, rs, id, false))
		return;
	pthread_mutex_lock(&lock);
	struct terminal *t = find(rq->room, id);
	int pid = t ? t->pid : 0;
	bool running = t && t->status == T_RUNNING;
	if (running)
		hang_up(t);
	pthread_mutex_unlock(&lock);
	if (!t) {
		response_error(rs, 404, "terminal not found: %s", id);
		return;
	}
	if (running)
		kill_session(rq->app, rq->room, pid);
	json_object *o = json_object_new_object();
	json_object_object_add(o, "deleted", json_object_new_string(id));
	response_json(rs, 200, o);
}

/* ---- tickets ---- */

void api_terms_ticket(struct request *rq, struct response *rs)
{
	char id[TERM_ID_LEN + 1];
	if (!term_id(rq, rs, id, true))
		return;
	unsigned char r[TERM_TICKET_LEN / 2];
	if (getrandom(r, sizeof(r), 0) != sizeof(r)) {
		response_error(rs, 500, "no randomness");
		return;
	}
	long now = monotonic_ms();
	pthread_mutex_lock(&lock);
	struct terminal *t = find(rq->room, id);
	struct ticket *slot = NULL;
	for (size_t i = 0; t && i < sizeof(tickets) / sizeof(tickets[0]); i++)
		if (!tickets[i].value[0] || tickets[i].expires <= now) {
			slot = &tickets[i];
			break;
		}
	if (slot) {
		for (size_t i = 0; i < sizeof(r); i++)
			snprintf(slot->value + 2 * i, 3, "%02x", r[i]);
		snprintf(slot->room, sizeof(slot->room), "%s", rq->room);
		snprintf(slot->id, sizeof(slot->id), "%s", id);
		slot->expires = now + TERM_TICKET_MS;
	}
	json_object *o = NULL;
	if (slot) {
		o = json_object_new_object();
		json_object_object_add(o, "ticket", json_object_new_string(slot->value));
	}
	pthread_mutex_unlock(&lock);
	if (!t)
		response_error(rs, 404, "terminal not found: %s", id);
	else if (!o)
		rs->retry_after = 5, response_error(rs, 503, "too many tickets; try again later");
	else
		response_json(rs, 201, o);
}

bool term_ticket_take(const char *ticket, const char *room, const char *id)
{
	bool ok = false;
	long now = monotonic_ms();
	if (strlen(ticket) != TERM_TICKET_LEN)
		return false;
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < sizeof(tickets) / sizeof(tickets[0]); i++) {
		struct ticket *k = &tickets[i];
		if (!k->value[0] || strcmp(k->value, ticket))
			continue;
		ok = k->expires > now && !strcmp(k->room, room) && !strcmp(k->id, id);
		memset(k, 0, sizeof(*k));   /* used up, whatever it was asked for */
		break;
	}
	pthread_mutex_unlock(&lock);
	return ok;
}

/* ---- the room's clean-up ---- */

void terms_room_forget(const char *room)
{
	pthread_mutex_lock(&lock);
	for (struct terminal **p = &terms; *p;) {
		struct terminal *t = *p;
		if (strcmp(t->room, room)) {
			p = &t->next;
			continue;
		}
		/* gone with the sandbox, most often; if the sandbox's removal
		 * failed, the room's destruction still ends its terminals */
		if (t->status == T_RUNNING)
			hang_up(t);
		*p = t->next;
		unref(t);   /* the list's: its reader and clients hold their own */
	}
	for (size_t i = 0; i < sizeof(tickets) / sizeof(tickets[0]); i++)
		if (tickets[i].value[0] && !strcmp(tickets[i].room, room))
			memset(&tickets[i], 0, sizeof(tickets[i]));
	pthread_mutex_unlock(&lock);
}

/* ---- what a client does ---- */

bool term_activity_due(struct terminal *t, long every_ms)
{
	long now = monotonic_ms();
	pthread_mutex_lock(&lock);
	bool due = t->status == T_RUNNING && (!t->told_active || now - t->told_active >= every_ms);
	if (due)
		t->told_active = now;
	pthread_mutex_unlock(&lock);
	return due;
}

struct terminal *term_attach(const char *room, const char *id)
{
	pthread_mutex_lock(&lock);
	struct terminal *t = find(room, id);
	if (t)
		t->refs++;
	pthread_mutex_unlock(&lock);
	return t;
}

void term_detach(struct terminal *t)
{
	pthread_mutex_lock(&lock);
	unref(t);
	pthread_mutex_unlock(&lock);
}

uint64_t term_start_offset(struct terminal *t)
{
	pthread_mutex_lock(&lock);
	uint64_t at = t->ring.start;
	pthread_mutex_unlock(&lock);
	return at;
}

int term_write(struct terminal *t, const void *data, size_t n)
{
	pthread_mutex_lock(&lock);
	int fd = t->master >= 0 ? dup(t->master) : -1;
	pthread_mutex_unlock(&lock);
	if (fd < 0)
		return -1;
	const char *p = data;
	int rc = 0;
	while (n > 0) {
		ssize_t k = write(fd, p, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			rc = -1;
			break;
		}
		p += k;
		n -= (size_t)k;
	}
	close(fd);
	return rc;
}

int term_resize(struct terminal *t, unsigned cols, unsigned rows)
{
	struct winsize ws = { .ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols };
	pthread_mutex_lock(&lock);
	int rc = t->master >= 0 ? ioctl(t->master, TIOCSWINSZ, &ws) : -1;
	if (rc == 0) {
		t->cols = cols;
		t->rows = rows;
	}
	pthread_mutex_unlock(&lock);
	return rc;
}

size_t term_read(struct terminal *t, uint64_t *at, void *out, size_t max, long ms, bool *ended, int *code)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&lock);
	while (*at >= t->ring.end && t->status == T_RUNNING)
		if (pthread_cond_timedwait(&t->cond, &lock, &ts) != 0)
			break;
	uint64_t lost;
	size_t n = byte_ring_read(&t->ring, at, out, max, &lost);
	*ended = n == 0 && t->status != T_RUNNING;
	*code = t->status == T_EXITED ? t->exit_code : -1;
	pthread_mutex_unlock(&lock);
	return n;
}
