/* The keeper's exec channels: roombox-fcgi's way to run a warm exec
 * without a setuid process (protocol: common/exec_channel.h).
 *
 * The helper asks for a channel (KP_CHANNEL, keeper_proto.h) and hands
 * roombox-fcgi one end of a socketpair made here.  A channel is
 * restricted: a request on it can only be what roombox-fcgi could ask the
 * helper's exec for anyway (a shell command as the room's root or user,
 * its own stdin/stdout/stderr, a timeout within the room's
 * execTimeoutMax).  Its bytes are checked whole (kc_parse, fuzzed) before
 * anything is done, and a request that breaks the protocol closes the
 * channel.  No tool, no detached start, no KP_* request of the helper's is
 * reachable from it: those come only on the root-only socket.
 *
 * What the helper does around each exec happens here instead, on files
 * the helper opened for the keeper (it cannot reach the state directory
 * itself): the room's session is read before and written after, in place
 * (common/session_file.h), so helper execs and channel execs see one
 * session; the busy file is shared-locked while any channel exec runs
 * (idle stop looks at it); the active file is written after each exec (its
 * mtime is lastActiveAt).  The limits are the helper's word, sent with
 * each new channel: the latest serve them all. */
#include "channel.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "exec_channel.h"
#include "keeper_proto.h"
#include "session_file.h"

static struct {
	bool used;
	int fd;
	struct chan_job *job;     /* its running exec, or NULL */
} chans[MAX_CHANNELS];

/* the room's, from the latest KP_CHANNEL */
static int session_fd[2] = { -1, -1 }, busy_fd = -1, active_fd = -1;
static uint32_t room_pids;
static uint64_t room_timeout_max;
static int running;           /* channel execs whose shell runs: busy held */

static int64_t now_us(clockid_t clock)
{
	struct timespec t;
	clock_gettime(clock, &t);
	return (int64_t)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* ---- opening ---------------------------------------------------------- */

static void reply(int conn, uint32_t type, const char *text, int fd)
{
	struct kp_msg m = { type, 0, 0, "" };
	if (text)
		snprintf(m.text, sizeof(m.text), "%s", text);
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &m, sizeof(m) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	if (fd >= 0) {
		memset(cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf;
		mh.msg_controllen = sizeof(cbuf);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	sendmsg(conn, &mh, MSG_NOSIGNAL);
}

/* The room's files, replaced by the latest channel's: a busy lock held
 * for running execs moves to the new descriptor first. */
static void take_room_files(int *fds)
{
	if (running > 0)
		flock(fds[2], LOCK_SH);
	for (int i = 0; i < 2; i++) {
		close_fd(&session_fd[i]);
		session_fd[i] = fds[i];
	}
	close_fd(&busy_fd);
	busy_fd = fds[2];
	close_fd(&active_fd);
	active_fd = fds[3];
	for (int i = 0; i < KP_CHANNEL_FDS; i++)
		fds[i] = -1;
}

void channel_open(int conn, const void *msg, size_t len, int *fds, int nfds)
{
	struct kp_channel c;
	int k = 0, sp[2] = { -1, -1 };
	const char *why = NULL;
	while (k < MAX_CHANNELS && chans[k].used)
		k++;
	if (len != sizeof(c) || nfds != KP_CHANNEL_FDS)
		why = "bad channel request";
	else if (k == MAX_CHANNELS)
		why = "too many exec channels in this room";
	else if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
		why = "socketpair failed";
	if (why) {
		reply(conn, KP_FAILED, why, -1);
		close(conn);
		return;
	}
	memcpy(&c, msg, sizeof(c));
	room_pids = c.pids_limit;
	room_timeout_max = c.exec_timeout_max_ms;
	take_room_files(fds);
	fcntl(sp[0], F_SETFL, O_NONBLOCK);
	chans[k].used = true;
	chans[k].fd = sp[0];
	chans[k].job = NULL;
	reply(conn, KP_CHANNEL_OK, NULL, sp[1]);
	close(sp[1]);
	close(conn);
}

/* The descriptors a received record carried (SCM_RIGHTS), at most max
 * (the control buffer holds no more: the kernel closed the rest). */
static int rights_take(struct msghdr *mh, int *fds, int max)
{
	int n = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
			for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int) && n < max; i++)
				memcpy(&fds[n++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
	return n;
}

/* ---- answers ---------------------------------------------------------- */

static void answer(int fd, uint32_t type, int status, bool timed_out, const char *text,
		   const struct chan_job *job)
{
	struct kc_ans a = { .magic = KC_MAGIC, .version = KC_VERSION, .type = type,
			    .status = status, .timed_out = timed_out };
	if (job && type == KC_EXITED) {
		int64_t us = now_us(CLOCK_MONOTONIC) - job->t0_us;
		a.duration_us = us > 0 ? (uint64_t)us : 0;
		a.started_ms = job->started_ms;
	}
	if (text)
		snprintf(a.text, sizeof(a.text), "%s", text);
	send(fd, &a, sizeof(a), MSG_NOSIGNAL);
}

static void channel_close(int k)
{
	if (chans[k].job)
		chans[k].job->channel = -1;
	close(chans[k].fd);
	chans[k].used = false;
	chans[k].job = NULL;
}

static void job_free(struct chan_job *job)
{
	shell_env_free(&job->env);
	free(job->text);
	close_fd(&job->session_out);
	free(job);
}

/* What the shell wrote on fd 9, kept when it is a whole, new session. */
static void session_save(const struct chan_job *job)
{
	struct stat st;
	int fd = session_fd[job->as_user];
	if (fd < 0 || fstat(job->session_out, &st) < 0 || st.st_size <= 0 ||
	    st.st_size > SHELL_SESSION_MAX)
		return;
	size_t len = (size_t)st.st_size, n;
	char *buf = malloc(len + 1);
	if (buf && pread(job->session_out, buf, len, 0) == (ssize_t)len &&
	    shell_env_session_new(&job->env, buf, len, &n))
		session_file_write(fd, buf, n);
	free(buf);
}

/* Saved and marked before the answer: the caller's next exec, on any
 * channel or through the helper, finds the session this one left. */
void channel_exec_done(struct chan_job *job, int status, bool timed_out, bool failed, int err,
		       const char *text, int held[2])
{
	if (!failed && job->save && !timed_out && WIFEXITED(status))
		session_save(job);
	if (active_fd >= 0 && pwrite(active_fd, "\n", 1, 0) < 0) {
		/* lastActiveAt stays as it was: nothing more to do */
	}
	if (--running == 0 && busy_fd >= 0)
		flock(busy_fd, LOCK_UN);
	exec_held_close(held);
	if (job->channel >= 0) {
		chans[job->channel].job = NULL;
		answer(chans[job->channel].fd, failed ? KC_FAILED : KC_EXITED, failed ? err : status,
		       timed_out, text, job);
	}
	job_free(job);
}

/* ---- requests --------------------------------------------------------- */

/* The text descriptor's bytes when the record says how many and the
 * descriptor holds exactly that (a regular file: a memfd); else NULL. */
static char *text_read(const struct kc_req *q, size_t rec_len, int nfds, int fd, size_t *len)
{
	struct stat st;
	if (rec_len != sizeof(*q) || nfds != KC_REQ_FDS || q->text_size > KC_TEXT_MAX ||
	    fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size != (off_t)q->text_size)
		return NULL;
	char *t = malloc((size_t)q->text_size + 1);
	if (t && pread(fd, t, q->text_size, 0) != (ssize_t)q->text_size) {
		free(t);
		return NULL;
	}
	if (t)
		t[q->text_size] = '\0';
	*len = q->text_size;
	return t;
}

/* Start the shell of a checked request; false with the answer given
 * (nothing ran). */
static bool job_start(int k, struct chan_job *job, const struct kc_order *o, int *io)
{
	char why[160] = "";
	int fd = session_fd[o->as_user];
	char *old = fd >= 0 ? session_file_read(fd, SHELL_SESSION_MAX) : NULL;
	int rc = shell_env_build(&job->env, "", o->cmd, o->as_user, job->save, o->cwd, old ? old : "",
				 o->env, o->nenv, why, sizeof(why));
	free(old);
	job->session_out = rc < 0 ? -1 : memfd_create("roombox-session", MFD_CLOEXEC);
	if (rc == 0 && job->session_out < 0) {
		rc = -1;
		snprintf(why, sizeof(why), "memfd: %s", strerror(errno));
	}
	uint64_t timeout = o->timeout_cap && o->timeout_ms > room_timeout_max ? room_timeout_max
		: o->timeout_ms;
	job->t0_us = now_us(CLOCK_MONOTONIC);
	job->started_ms = now_us(CLOCK_REALTIME) / 1000;
	if (rc == 0)
		rc = exec_spawn_job(job, io[0], &io[1], &io[2], timeout, room_pids, why, sizeof(why));
	if (rc < 0) {
		answer(chans[k].fd, KC_FAILED, rc == -1 ? 0 : -rc, false, why, NULL);
		return false;
	}
	if (running++ == 0 && busy_fd >= 0)
		flock(busy_fd, LOCK_SH);
	chans[k].job = job;
	return true;
}

/* The text that followed the struct in the record (KC_INLINE), copied out
 * (the job keeps it until its shell has exec'd), NUL-terminated; NULL
 * when there is none. */
static char *text_inline(const char *rec, size_t n, size_t *len)
{
	char *t = malloc(n - sizeof(struct kc_req) + 1);
	if (!t)
		return NULL;
	*len = n - sizeof(struct kc_req);
	memcpy(t, rec + sizeof(struct kc_req), *len);
	t[*len] = '\0';
	return t;
}

/* One request on idle channel k: checked whole, then run; a bad one is
 * answered KC_BAD and the channel closed. */
static void channel_request(int k)
{
	struct kc_req q;
	/* one more byte than a request may be: a longer one is refused.  Not
	 * on the stack, which would push every deeper frame 16 KiB down into
	 * pages of their own: here only the pages a record fills are used */
	static char rec[sizeof(q) + KC_INLINE_MAX + 1];
	char cbuf[CMSG_SPACE(sizeof(int) * 8)];
	struct iovec iov = { rec, sizeof(rec) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	ssize_t n = recvmsg(chans[k].fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT | MSG_TRUNC);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	int fds[8], nfds = n > 0 ? rights_take(&mh, fds, 8) : 0;
	if (n <= 0) {   /* the end: roombox-fcgi let the channel go */
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		channel_close(k);
		return;
	}
	/* more descriptors than fit (the kernel closed the rest): refused */
	int counted = mh.msg_flags & MSG_CTRUNC ? 9 : nfds;
	size_t rec_len = (size_t)n, text_len = 0;
	memset(&q, 0, sizeof(q));
	memcpy(&q, rec, rec_len < sizeof(q) ? rec_len : sizeof(q));
	char *text = NULL;
	if ((q.flags & KC_INLINE) && rec_len > sizeof(q) && rec_len < sizeof(rec)) {
		text = text_inline(rec, rec_len, &text_len);
		rec_len = sizeof(q);   /* the struct, for kc_parse; the rest is the text */
	} else if (!(q.flags & KC_INLINE) && nfds >= 1) {
		text = text_read(&q, rec_len, counted, fds[0], &text_len);
	}
	struct kc_order o;
	char why[160];
	struct chan_job *job = NULL;
	if (kc_parse(rec, rec_len, counted, text, text_len, &o, why, sizeof(why)) < 0) {
		free(text);
		answer(chans[k].fd, KC_BAD, 0, false, why, NULL);
		channel_close(k);
	} else if (!o.timeout_cap && o.timeout_ms > room_timeout_max) {
		free(text);
		answer(chans[k].fd, KC_ELSEWHERE, 0, false, "timeout above the room's execTimeoutMax", NULL);
	} else if (!(job = calloc(1, sizeof(*job)))) {
		free(text);
		answer(chans[k].fd, KC_FAILED, ENOMEM, false, "out of memory", NULL);
	} else {
		*job = (struct chan_job){ .channel = k, .text = text, .session_out = -1,
					  .save = !o.cwd && o.nenv == 0, .as_user = o.as_user };
		/* [text,] stdin, stdout, stderr */
		if (!job_start(k, job, &o, fds + (counted - 3)))
			job_free(job);
	}
	for (int i = 0; i < nfds; i++)
		if (fds[i] >= 0)   /* the exec keeps its stdout and stderr */
			close(fds[i]);
}

/* ---- closing them all (the idle sweep) ---------------------------------- */

/* One request already sent on channel k, if there is one, answered
 * KC_ELSEWHERE unread (its descriptors closed); false when none is left. */
static bool send_back_one(int k)
{
	struct kc_req q;
	char cbuf[CMSG_SPACE(sizeof(int) * 8)];
	struct iovec iov = { &q, sizeof(q) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	ssize_t n = recvmsg(chans[k].fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT | MSG_TRUNC);
	if (n <= 0)
		return false;
	int fds[8], nfds = rights_take(&mh, fds, 8);
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	answer(chans[k].fd, KC_ELSEWHERE, 0, false, "the room is being stopped", NULL);
	return true;
}

/* Shut before it is read out: a request sent after this fails to send
 * (roombox-fcgi then asks the helper), so none is left unanswered in a
 * queue the stop would drop -- which roombox-fcgi could only report as
 * an exec that may have run. */
void channel_close_all(int conn)
{
	if (running > 0) {
		reply(conn, KP_FAILED, "an exec on a channel runs", -1);
		close(conn);
		return;
	}
	int32_t sent_back = 0;
	for (int k = 0; k < MAX_CHANNELS; k++) {
		if (!chans[k].used)
			continue;
		shutdown(chans[k].fd, SHUT_RD);
		while (send_back_one(k))
			sent_back++;
		channel_close(k);
	}
	struct kp_msg m = { KP_CLOSED, sent_back, 0, "" };
	send(conn, &m, sizeof(m), MSG_NOSIGNAL);
	close(conn);
}

/* ---- the loop's part -------------------------------------------------- */

int channel_poll_add(struct pollfd *p, int room)
{
	int n = 0;
	for (int k = 0; k < MAX_CHANNELS && n < room; k++)
		if (chans[k].used)
			p[n++] = (struct pollfd){ chans[k].fd, POLLIN, 0 };
	return n;
}

/* A channel with an exec running takes no request: anything on it is its
 * end (or a breach), and the exec dies with it. */
void channel_poll_check(const struct pollfd *p, int n)
{
	for (int i = 0; i < n; i++) {
		if (!p[i].revents)
			continue;
		for (int k = 0; k < MAX_CHANNELS; k++) {
			if (!chans[k].used || chans[k].fd != p[i].fd)
				continue;
			if (chans[k].job) {
				struct chan_job *job = chans[k].job;
				channel_close(k);
				exec_cancel_job(job);
			} else {
				channel_request(k);
			}
			break;
		}
	}
}
