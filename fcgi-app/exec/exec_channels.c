/* Warm execs without the setuid helper.
 *
 * A helper exec costs a setuid process: its exec, its start-up defences,
 * its configuration, and one more hop -- about a third of a warm exec of
 * `true`.  So once a room runs, roombox-fcgi asks the helper once
 * (exec-channel) for a channel to the room's keeper and sends the room's
 * plain execs over it: the keeper runs the shell with our pipes as the
 * helper would have had it do, reads and saves the session, and marks the
 * room busy and active (keeper/channel.c).
 *
 * Channels are held per room, at most CHANNELS_PER_ROOM (one exec at a
 * time each) and CHANNELS_MAX in all; one is asked for only for a room a
 * helper exec or a channel has shown running (the warm list), so a first
 * exec in a new room costs nothing more.  Whatever the channel cannot do
 * goes to the helper, which answers it as it always has: a room not
 * running (no channel, or the channel's end: the keeper is gone), a
 * shell the keeper could not fork (the room at its process limit: the
 * helper frees it), a timeout above the room's execTimeoutMax.  A room's
 * channels are let go when its limits change (exec_channel_forget), and
 * die with its keeper (stop, restart, idle stop, destroy). */
#include "exec_channels.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "exec_channel.h"
#include "metrics.h"
#include "protocol.h"

#define CHANNELS_PER_ROOM 4
#define CHANNELS_MAX 1024
#define WARM_MAX 1024

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct slot {
	char room[HELPER_ROOM_LEN];
	int fd;                   /* -1 while it is being asked for */
	bool used, busy, stale;   /* stale: closed when its exec ends */
} slots[CHANNELS_MAX];
/* rooms known running (a ring: the oldest forgotten first) */
static char warm[WARM_MAX][HELPER_ROOM_LEN];
static unsigned warm_next;

struct chan_run {
	struct app *app;
	int slot, fd;
	uint64_t t0_ns;
	long deadline;            /* monotonic ms: past it, the keeper is hung */
};

/* ---- the pool (under lock) ----------------------------------------------- */

static int warm_find(const char *room)
{
	for (int i = 0; i < WARM_MAX; i++)
		if (warm[i][0] && strcmp(warm[i], room) == 0)
			return i;
	return -1;
}

void exec_channel_warm(const char *room)
{
	pthread_mutex_lock(&lock);
	if (warm_find(room) < 0) {
		snprintf(warm[warm_next], HELPER_ROOM_LEN, "%s", room);
		warm_next = (warm_next + 1) % WARM_MAX;
	}
	pthread_mutex_unlock(&lock);
}

static void cold_locked(const char *room)
{
	int i = warm_find(room);
	if (i >= 0)
		warm[i][0] = '\0';
}

void exec_channel_forget(const char *room)
{
	pthread_mutex_lock(&lock);
	cold_locked(room);
	for (int i = 0; i < CHANNELS_MAX; i++) {
		struct slot *s = &slots[i];
		if (!s->used || strcmp(s->room, room) != 0)
			continue;
		if (s->busy) {
			s->stale = true;
		} else {
			close(s->fd);
			s->used = false;
		}
	}
	pthread_mutex_unlock(&lock);
}

/* An idle channel of room taken (busy), or a slot reserved for a new one
 * (fd -1) when the room is warm and has room for one more; -1 otherwise. */
static int slot_take(const char *room)
{
	int n = 0, free_slot = -1, got = -1;
	pthread_mutex_lock(&lock);
	for (int i = 0; i < CHANNELS_MAX && got < 0; i++) {
		struct slot *s = &slots[i];
		if (!s->used) {
			if (free_slot < 0)
				free_slot = i;
			continue;
		}
		if (strcmp(s->room, room) != 0)
			continue;
		n++;
		if (!s->busy && !s->stale)
			got = i;
	}
	if (got < 0 && n < CHANNELS_PER_ROOM && free_slot >= 0 && warm_find(room) >= 0) {
		got = free_slot;
		slots[got] = (struct slot){ .used = true, .fd = -1 };
		snprintf(slots[got].room, HELPER_ROOM_LEN, "%s", room);
	}
	if (got >= 0)
		slots[got].busy = true;
	pthread_mutex_unlock(&lock);
	return got;
}

/* Back to the pool, or closed (broken: the room goes cold too; stale). */
static void slot_give(int i, bool broken)
{
	pthread_mutex_lock(&lock);
	struct slot *s = &slots[i];
	if (broken)
		cold_locked(s->room);
	if (broken || s->stale || s->fd < 0) {
		if (s->fd >= 0)
			close(s->fd);
		s->used = false;
	} else {
		s->busy = false;
	}
	pthread_mutex_unlock(&lock);
}

/* ---- one exec ------------------------------------------------------------ */

/* The request's text (exec_channel.h) in one buffer; NULL when it is
 * larger than a request may carry, or no memory. */
static char *text_make(const struct exec_request *ex, uint32_t *nenv, size_t *size)
{
	size_t len = ex->cmd_len + 1 + (ex->cwd ? strlen(ex->cwd) + 1 : 0);
	*nenv = 0;
	if (ex->env) {
		/* names a shell cannot take are dropped (the keeper would) */
		json_object_object_foreach(ex->env, key, val) {
			const char *v = json_object_get_string(val);
			if (*key && !strchr(key, '='))
				len += strlen(key) + 1 + (v ? strlen(v) : 0) + 1;
		}
	}
	if (len > KC_TEXT_MAX)
		return NULL;
	char *t = malloc(len), *at = t;
	if (!t)
		return NULL;
	memcpy(at, ex->cmd, ex->cmd_len);
	at += ex->cmd_len;
	*at++ = '\0';
	if (ex->cwd)
		at = stpcpy(at, ex->cwd) + 1;
	if (ex->env) {
		json_object_object_foreach(ex->env, key, val) {
			const char *v = json_object_get_string(val);
			if (!*key || strchr(key, '='))
				continue;
			at = stpcpy(at, key);
			*at++ = '=';
			at = stpcpy(at, v ? v : "") + 1;
			(*nenv)++;
		}
	}
	*size = len;
	return t;
}

/* A text too large for the record itself goes in a memfd; -1 on failure. */
static int text_memfd(const char *t, size_t len)
{
	int fd = memfd_create("roombox-exec", MFD_CLOEXEC);
	if (fd >= 0 && write(fd, t, len) != (ssize_t)len) {
		close(fd);
		fd = -1;
	}
	return fd;
}

static bool as_user(const struct app *app, const struct exec_request *ex)
{
	if (ex->user)
		return strcmp(ex->user, HK_USER_USER) == 0;
	return app->cfg.exec_user == EXEC_USER_USER;
}

/* The request sent on the channel: 0; 1 when it is not one for a channel
 * (its text too large, or no memory: the helper answers it); -1 when the
 * channel is broken (the keeper is gone).  Nothing ran either way. */
static int request_send(struct app *app, int ch, const struct exec_request *ex, const int pass[3])
{
	struct kc_req q = { .magic = KC_MAGIC, .version = KC_VERSION, .op = KC_EXEC };
	size_t len;
	char *t = text_make(ex, &q.nenv, &len);
	if (!t)
		return 1;
	/* a small text rides in the record itself: no memfd on either side */
	bool inl = len <= KC_INLINE_MAX;
	int text = inl ? -1 : text_memfd(t, len);
	if (!inl && text < 0) {
		free(t);
		return 1;
	}
	q.text_size = (uint32_t)len;
	q.timeout_ms = ex->timeout_ms ? ex->timeout_ms : app->cfg.exec_timeout_ms;
	q.flags = (as_user(app, ex) ? KC_AS_USER : 0) | (ex->cwd ? KC_CWD : 0) |
		(ex->timeout_ms == 0 || ex->timeout_cap ? KC_TIMEOUT_CAP : 0) | (inl ? KC_INLINE : 0);
	int fds[KC_REQ_FDS] = { text, pass[0], pass[1], pass[2] };
	size_t nfds = inl ? KC_REQ_FDS - 1 : KC_REQ_FDS;
	char cbuf[CMSG_SPACE(sizeof(fds))];
	struct iovec iov[2] = { { &q, sizeof(q) }, { t, len } };
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = inl ? 2 : 1,
			     .msg_control = cbuf, .msg_controllen = CMSG_SPACE(sizeof(int) * nfds) };
	memset(cbuf, 0, sizeof(cbuf));
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
	memcpy(CMSG_DATA(c), fds + (inl ? 1 : 0), sizeof(int) * nfds);
	ssize_t n = sendmsg(ch, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (text >= 0)
		close(text);
	free(t);
	return n == (ssize_t)(sizeof(q) + (inl ? len : 0)) ? 0 : -1;
}

struct chan_run *exec_channel_start(struct app *app, const char *room, const struct exec_request *ex,
				    const int pass[3])
{
	int i = slot_take(room);
	if (i < 0)
		return NULL;
	if (slots[i].fd < 0) {   /* reserved: ask the helper for the channel */
		struct helper_target t = app_helper(app);
		struct helper_error err;
		int fd;
		if (helper_exec_channel(&t, room, &fd, &err) < 0) {
			slot_give(i, true);
			return NULL;
		}
		pthread_mutex_lock(&lock);
		slots[i].fd = fd;
		pthread_mutex_unlock(&lock);
	}
	struct chan_run *run = malloc(sizeof(*run));
	if (!run) {
		slot_give(i, false);
		return NULL;
	}
	uint64_t timeout = ex->timeout_ms ? ex->timeout_ms : app->cfg.exec_timeout_ms;
	*run = (struct chan_run){ app, i, slots[i].fd, metrics_now_ns(),
				  monotonic_ms() + (long)timeout + HELPER_EXEC_GRACE_MS };
	int sent = request_send(app, run->fd, ex, pass);
	if (sent != 0) {
		slot_give(i, sent < 0);
		free(run);
		return NULL;
	}
	return run;
}

int exec_channel_fd(const struct chan_run *run)
{
	return run->fd;
}

long exec_channel_deadline(const struct chan_run *run)
{
	return run->deadline;
}

int exec_channel_finish(struct chan_run *run, struct helper_exec_ans *ans, struct helper_error *err)
{
	struct kc_ans a;
	struct pollfd p = { run->fd, POLLIN, 0 };
	ssize_t n = -1;
	/* the pump has seen it readable, or the deadline pass (a hung keeper:
	 * letting the channel go kills the exec) */
	n = recv(run->fd, &a, sizeof(a), MSG_DONTWAIT);   /* it is there, most often */
	long left = run->deadline - monotonic_ms();
	if (n < 0 && errno == EAGAIN && poll(&p, 1, left > 0 ? (int)left : 0) == 1)
		n = recv(run->fd, &a, sizeof(a), 0);
	bool whole = n == (ssize_t)sizeof(a) && a.magic == KC_MAGIC && a.version == KC_VERSION;
	char room[HELPER_ROOM_LEN];
	snprintf(room, sizeof(room), "%s", slots[run->slot].room);
	uint64_t ns = metrics_now_ns() - run->t0_ns;
	int rc;
	if (whole && a.type == KC_EXITED) {
		*ans = (struct helper_exec_ans){ a.status, a.timed_out, a.duration_us, a.started_ms };
		metrics_helper_call_done(HOP_EXEC, true, ans, 0, ns);
		slot_give(run->slot, false);
		rc = 0;
	} else if (whole && (a.type == KC_FAILED || a.type == KC_ELSEWHERE)) {
		/* sent back by an idle sweep, the channel is shut behind it:
		 * let go now rather than at the next send */
		char byte;
		slot_give(run->slot, a.type == KC_ELSEWHERE &&
			  recv(run->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0);
		rc = EXEC_CHANNEL_ELSEWHERE;
	} else if (whole) {   /* KC_BAD: a fault of ours; the helper takes it */
		a.text[sizeof(a.text) - 1] = '\0';
		fprintf(stderr, "roombox-fcgi: room %s: exec channel refused a request: %s\n", room, a.text);
		slot_give(run->slot, true);
		rc = EXEC_CHANNEL_ELSEWHERE;
	} else {   /* the keeper went away under the exec: it may have run */
		slot_give(run->slot, true);
		memset(err, 0, sizeof(*err));
		err->http_status = 500;
		snprintf(err->code, sizeof(err->code), "failed");
		snprintf(err->message, sizeof(err->message), "room %s: the room stopped while the command ran",
			 room);
		metrics_helper_call_done(HOP_EXEC, false, NULL, 500, ns);
		rc = -1;
	}
	free(run);
	return rc;
}
