/* One exec in a room: ask the keeper, wait for it, save the session.
 *
 * The helper does not fork or join anything per exec.  It writes the shell's
 * argv and environment into a memfd and hands it, with the caller's own
 * stdin, stdout and stderr pipes (passed I/O: the helper's fds 3-5), to the
 * room's keeper over its exec socket (keeper/keeper_proto.h).  The keeper,
 * already inside the room's namespaces and cgroup, runs the shell as the
 * room's user and enforces the deadline by killing the whole process tree it
 * started.  The command's input and output go between it and roombox-fcgi
 * directly: not a byte of a room's output passes through this process.
 *
 * The session: the helper keeps the room's exported variables and working
 * directory as the text of `export -p` in the state directory, outside the
 * room's tree, one for the room's root and one for its user (room.h): what
 * a user's command writes on fd 9 only ever reaches the user's own next
 * shell, never a root one, and root's variables never reach the user's.  The
 * wrapper (common/shell_env.c) evaluates it, runs the command, and an EXIT trap
 * writes the new `export -p` on fd 9, ended by a marker line; the helper
 * saves it only when the marker came, i.e. only when the shell ended by
 * itself (not killed, not timed out), and only for execs without cwd or env.
 * Fd 9 is the memfd that carried argv and environment to the keeper (the
 * session lands after them), read once the keeper says the shell ended:
 * the shell's writes wake no one, and the helper sleeps through the whole
 * exec until that one answer comes.
 *
 * A warm exec from roombox-fcgi may come over the room's exec channel
 * instead (exec_channel_open below, keeper/channel.c): the keeper then
 * reads and saves the same session files itself, in place
 * (common/session_file.h), so both ways see one session.
 *
 * Everything is prepared (exec_prepare) before the keeper is connected, so
 * the request follows the connection at once; the keeper then wakes the
 * helper once per exec, with its answer (keeper/keeper_proto.h).
 */
#include "exec.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "errbuf.h"
#include "fdpass.h"
#include "keeper/keeper_proto.h"
#include "shell_env.h"

#define ERR(...) errorf(err, errlen, __VA_ARGS__)

static double ms_since(const struct timespec *a)
{
	struct timespec b;
	clock_gettime(CLOCK_MONOTONIC, &b);
	return (double)(b.tv_sec - a->tv_sec) * 1e3 + (double)(b.tv_nsec - a->tv_nsec) / 1e6;
}

/* The shell's environment with the room's saved session (shell_env.c). */
static int build_env(const struct room *r, const struct exec_order *q, bool save,
		     struct shell_env *ce, char *err, size_t errlen)
{
	char *old = room_session_read(r, q->as_user, SHELL_SESSION_MAX);
	int rc = shell_env_build(ce, r->id, q->cmd, q->as_user, save, q->cwd, old ? old : "",
				 q->env, q->nenv, err, errlen);
	free(old);
	return rc;
}

/* Keep the session only when the shell wrote it to the end, and write it
 * only when it changed (most commands change nothing).  It follows the
 * blob in the memfd (from off); more than SHELL_SESSION_MAX is not a
 * session a shell could take back. */
static void save_session(const struct room *r, bool as_user, int fd, off_t off,
			 const struct shell_env *ce)
{
	struct stat st;
	if (fstat(fd, &st) < 0 || st.st_size - off < 0 || st.st_size - off > SHELL_SESSION_MAX)
		return;
	size_t len = (size_t)(st.st_size - off), n;
	char *buf = malloc(len + 1);
	if (!buf)
		return;
	if (pread(fd, buf, len, off) == (ssize_t)len && shell_env_session_new(ce, buf, len, &n))
		room_session_write(r, as_user, buf, n);
	free(buf);
}

/* ---- talking to the keeper ---------------------------------------------- */

/* argv and envp for the shell, in a memfd (a command may be megabytes),
 * written with one write; its size in *len.  The same memfd is the shell's
 * fd 9: the file offset, shared, is left at the end of the blob, so the
 * session the shell writes there follows it. */
static int blob_make(const struct room *r, char *const *argv, char *const *envp,
		     const struct exec_order *q, size_t *len)
{
	struct kp_blob h = { KP_MAGIC, 0, 0, (uint32_t)q->pids_limit, q->timeout_ms,
			     q->as_user ? KP_AS_USER : KP_AS_ROOT,
			     (q->is_tool ? KP_TOOL : 0) | (q->detach ? KP_DETACH : 0) };
	size_t size = sizeof(h);
	while (argv[h.argc])
		size += strlen(argv[h.argc++]) + 1;
	while (envp[h.envc])
		size += strlen(envp[h.envc++]) + 1;
	char *buf = malloc(size), *p = buf;
	int fd = buf ? memfd_create("roombox-exec", MFD_CLOEXEC) : -1;
	if (fd < 0) {
		free(buf);
		return -1;
	}
	memcpy(p, &h, sizeof(h));
	p += sizeof(h);
	for (uint32_t i = 0; i < h.argc; i++)
		p = stpcpy(p, argv[i]) + 1;
	for (uint32_t i = 0; i < h.envc; i++)
		p = stpcpy(p, envp[i]) + 1;
	size_t off = 0;
	while (off < size) {
		ssize_t k = write(fd, buf + off, size - off);
		if (k <= 0) {
			free(buf);
			close(fd);
			return -1;
		}
		off += (size_t)k;
	}
	free(buf);
	*len = size;
	return fd;
}

static int send_fds(int conn, uint32_t type, const int *fds, int n)
{
	struct kp_msg m = { .type = type };
	return fds_send(conn, &m, sizeof(m), fds, n) == sizeof(m) ? 0 : -1;
}

int exec_connect(const struct room *r)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/sock", r->run);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	/* bounded waits for connecting (a full backlog) and sending; a keeper
	 * that takes no connection in time is treated as gone (the exec stops
	 * and restarts it).  Its answer is waited for in wait_answer(). */
	struct timeval tv = { 10, 0 };
	if (fd >= 0 && (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0 ||
			connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* ---- waiting ------------------------------------------------------------ */

/* What came of the exec, from the keeper's one answer on conn. */
struct waited {
	int status;
	bool timed_out, lost, failed;
	char why[sizeof(((struct kp_msg *)0)->text)];   /* KP_FAILED's text */
};

/* Sleep until the keeper answers.  The keeper enforces the deadline; ours
 * is a second line, in case the room is frozen. */
static void wait_answer(struct waited *w, int conn, uint64_t timeout_ms)
{
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	double hard = (double)timeout_ms + 10000;

	for (;;) {
		double now = ms_since(&t0);
		if (now >= hard) {
			w->lost = w->timed_out = true;
			return;
		}
		struct pollfd p = { conn, POLLIN, 0 };
		int n = poll(&p, 1, (int)(hard - now) + 1);
		if (n < 0 && errno != EINTR)
			break;
		if (n <= 0)
			continue;
		struct kp_msg m;
		ssize_t k = recv(conn, &m, sizeof(m), 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k == (ssize_t)sizeof(m) && m.type == KP_EXITED) {
			w->status = m.status;
			w->timed_out = m.timed_out != 0;
			return;
		}
		if (k == (ssize_t)sizeof(m) && m.type == KP_FAILED) {
			w->failed = true;
			w->status = m.status;   /* the fork's errno, if that failed */
			memcpy(w->why, m.text, sizeof(w->why));
			w->why[sizeof(w->why) - 1] = '\0';
			return;
		}
		break;
	}
	w->lost = true;   /* keeper gone (room stopped or destroyed) */
	w->status = SIGKILL;
}

/* ---- the exec ------------------------------------------------------------ */

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* Everything an exec needs before it meets the keeper: made before the
 * helper connects, so that the keeper finds the request right behind the
 * connection (one wake-up, not two), and kept for a second attempt when
 * the first keeper turns out to be gone. */
struct exec_job {
	bool save;
	struct shell_env ce;
	int blob;                 /* argv and environment, then the session */
	size_t blob_len;
	int io[3];                /* the caller's stdin, stdout, stderr */
	bool io_own[3];           /* a copy of the job's own (closed with it) */
};

void exec_job_free(struct exec_job *j)
{
	if (!j)
		return;
	close_fd(&j->blob);
	for (int i = 0; i < 3; i++)
		if (j->io_own[i])
			close_fd(&j->io[i]);
	shell_env_free(&j->ce);
	free(j);
}

struct exec_job *exec_prepare(const struct room *r, const struct exec_order *q,
			      char *err, size_t errlen)
{
	struct exec_job *j = calloc(1, sizeof(*j));
	if (!j) {
		ERR("room %s: out of memory", r->id);
		return NULL;
	}
	j->blob = -1;
	for (int i = 0; i < 3; i++)
		j->io[i] = -1;
	/* a tool is the keeper's code: no shell, environment or session */
	j->save = !q->cwd && !q->env && !q->is_tool;
	if (q->is_tool) {
		char *none[] = { NULL };
		j->blob = blob_make(r, (char *const *)q->tool, none, q, &j->blob_len);
	} else if (build_env(r, q, j->save, &j->ce, err, errlen) < 0) {
		exec_job_free(j);
		return NULL;
	} else {
		j->blob = blob_make(r, (char *const *)j->ce.argv, j->ce.envp, q, &j->blob_len);
	}
	/* passed I/O (fds 3-5, close-on-exec already) is used as it is; the
	 * command line's own 0-2 are copied close-on-exec, so that no keeper
	 * this helper starts inherits them */
	for (int i = 0; i < 3; i++) {
		j->io_own[i] = q->io[i] < 3;
		j->io[i] = j->io_own[i] ? fcntl(q->io[i], F_DUPFD_CLOEXEC, 3) : q->io[i];
	}
	if (j->blob < 0 || j->io[0] < 0 || j->io[1] < 0 || j->io[2] < 0) {
		ERR("room %s: prepare exec: %s", r->id, strerror(errno));
		exec_job_free(j);
		return NULL;
	}
	return j;
}

int exec_run(const struct room *r, int conn, struct exec_job *j, const struct exec_order *q,
	     struct exec_outcome *o, char *err, size_t errlen)
{
	/* start time and duration are the command's: from here, not from the
	 * preparation (a first exec would count the room's creation) */
	struct timespec t0, wall;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	clock_gettime(CLOCK_REALTIME, &wall);
	/* A request that could not be sent never reached the keeper: it may
	 * be tried again. */
	int fds[5] = { j->blob, j->io[1], j->io[2], j->blob, j->io[0] };
	if (send_fds(conn, KP_EXEC, fds, 5) < 0) {
		close(conn);
		ERR("room %s: the room's keeper is gone", r->id);
		return EXEC_KEEPER_GONE;
	}
	struct waited w = { 0 };
	wait_answer(&w, conn, q->timeout_ms);
	close(conn);
	if (w.failed && w.status == EAGAIN && q->limit_retry) {
		ERR("the shell could not start");   /* what EXEC_AT_LIMIT was */
		return EXEC_AT_LIMIT;
	}
	if (w.failed || w.lost) {
		if (w.failed)
			ERR("room %s: start the shell: %s", r->id, w.why);
		else
			ERR("room %s: the room stopped while the command ran", r->id);
		return -1;
	}
	if (j->save && !w.timed_out && WIFEXITED(w.status))
		save_session(r, q->as_user, j->blob, (off_t)j->blob_len, &j->ce);
	double ms = ms_since(&t0);
	*o = (struct exec_outcome){
		.wait_status = w.status, .timed_out = w.timed_out,
		.duration_us = ms > 0 ? (uint64_t)(ms * 1000.0 + 0.5) : 0,
		.started_ms = (int64_t)wall.tv_sec * 1000 + wall.tv_nsec / 1000000,
	};
	return 0;
}

/* ---- exec channels ------------------------------------------------------- */

/* The keeper's one answer to KP_CHANNEL: the channel's descriptor, or -1
 * with why. */
static int channel_answer(const struct room *r, int conn, char *err, size_t errlen)
{
	struct kp_msg m;
	char cbuf[CMSG_SPACE(sizeof(int) * 2)];
	struct iovec iov = { &m, sizeof(m) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct pollfd p = { conn, POLLIN, 0 };
	ssize_t n = poll(&p, 1, 10000) == 1 ? recvmsg(conn, &mh, MSG_CMSG_CLOEXEC) : -1;
	int fd = -1;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); n > 0 && c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
			for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
				int got;
				memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
				if (fd < 0)
					fd = got;
				else
					close(got);
			}
	if (n == (ssize_t)sizeof(m) && m.type == KP_CHANNEL_OK && fd >= 0)
		return fd;
	if (fd >= 0)
		close(fd);
	m.text[sizeof(m.text) - 1] = '\0';
	return ERR("room %s: exec channel: %s", r->id,
		   n == (ssize_t)sizeof(m) && m.type == KP_FAILED ? m.text : "the room's keeper did not answer");
}

int exec_channel_open(const struct room *r, uint32_t pids_limit, uint64_t exec_timeout_max_ms,
		      char *err, size_t errlen)
{
	int conn = exec_connect(r);
	if (conn < 0)
		return ERR("room %s: not running (an exec channel is for a running room)", r->id);
	int fds[KP_CHANNEL_FDS] = { room_session_open(r, false, O_RDWR | O_CREAT),
				    room_session_open(r, true, O_RDWR | O_CREAT), -1, -1 };
	room_marks_open(r, &fds[2], &fds[3]);
	struct kp_channel c = { KP_CHANNEL, pids_limit, exec_timeout_max_ms };
	int ch = -1;
	if (fds[0] < 0 || fds[1] < 0 || fds[2] < 0 || fds[3] < 0)
		ERR("room %s: exec channel: open its session and marks: %s", r->id, strerror(errno));
	else if (fds_send(conn, &c, sizeof(c), fds, KP_CHANNEL_FDS) != (ssize_t)sizeof(c))
		ERR("room %s: exec channel: the room's keeper is gone", r->id);
	else
		ch = channel_answer(r, conn, err, errlen);
	for (int i = 0; i < KP_CHANNEL_FDS; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	close(conn);
	return ch;
}

int exec_channels_close(const struct room *r)
{
	int conn = exec_connect(r);
	if (conn < 0)
		return -1;
	struct kp_msg m = { .type = KP_CLOSE };
	struct pollfd p = { conn, POLLIN, 0 };
	int rc = -1;
	if (send(conn, &m, sizeof(m), MSG_NOSIGNAL) == (ssize_t)sizeof(m) && poll(&p, 1, 5000) == 1 &&
	    recv(conn, &m, sizeof(m), 0) == (ssize_t)sizeof(m))
		rc = m.type == KP_CLOSED ? m.status == 0 : m.type == KP_FAILED ? 0 : -1;
	close(conn);
	return rc;
}
