/* Spawn roombox-helper, a request record in, an answer record out: see
 * helper_client.h.
 *
 * Why vfork: the child borrows this thread's memory and stack until it
 * execs, so spawning from a process with many threads and a large heap
 * copies no page tables -- and, unlike glibc's posix_spawn, maps and unmaps
 * no stack for it (an unmap in a threaded process is a TLB shootdown, an
 * IPI to every CPU running one of our threads) and issues no 128 sigaction
 * calls.  The child makes system calls only: every signal back to its
 * default (it has its own copy of the dispositions; a signal arriving
 * before execve must not run one of our handlers on our stack), fds 0 and 1
 * from the pipes and 2 left as our stderr (the helper's own messages land
 * in the service log), every other descriptor closed (libfcgi opens its
 * sockets without O_CLOEXEC), the signal mask cleared (the service blocks
 * SIGTERM/SIGINT in its threads), and exec.  It reports an exec failure by
 * writing errno into this thread's frame, which vfork makes safe: we run
 * again only once it has exec'd or exited.
 *
 * The helper's stdout is a memfd, read once the helper has exited (seen
 * through a pidfd): the reply costs this thread one wake-up, not one per
 * write plus one for end-of-file, and a process the helper leaves behind
 * (a room's keeper) holding a copy of it cannot hold up the request. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "fdrecv.h"
#include "helper_client.h"
#include "helper_rec.h"
#include "metrics.h"
#include "protocol.h"
#include "roomid.h"

int helper_code_status(const char *code)
{
	if (!code)
		return 500;
	if (strcmp(code, HELPER_ERR_INVALID) == 0)
		return 400;
	if (strcmp(code, HELPER_ERR_NOT_FOUND) == 0)
		return 404;
	if (strcmp(code, HELPER_ERR_LIMIT) == 0)
		return 429;
	if (strcmp(code, HELPER_ERR_NO_SPACE) == 0)
		return 507;
	if (strcmp(code, HELPER_ERR_CONFLICT) == 0 || strcmp(code, HELPER_ERR_EXISTS) == 0)
		return 409;
	return 500;   /* denied, failed, anything new */
}

static void set_error(struct helper_error *err, int status, const char *code,
		      const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void set_error(struct helper_error *err, int status, const char *code,
		      const char *fmt, ...)
{
	va_list ap;

	err->http_status = status;
	snprintf(err->code, sizeof(err->code), "%s", code);
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
	va_end(ap);
}

/* Helper calls in progress in this process (see child_spawn). */
static atomic_int calls_running;

/* One child: its pid, a pidfd, our end of its stdin, its stdout. */
struct child {
	pid_t pid;
	int pidfd;
	int to_child;      /* -1 once closed */
	size_t sent;       /* of the request, into to_child */
	int reply;         /* the memfd it writes its answer into */
};

/* The descriptor limit the helper (and through it a room) starts with:
 * the one roombox-fcgi was started with, not the higher one it raised for
 * itself (see helper_child_nofile). */
static struct rlimit child_nofile;
static bool child_nofile_set;

void helper_child_nofile(const struct rlimit *lim)
{
	child_nofile = *lim;
	child_nofile_set = true;
}

static void __attribute__((noreturn)) child_exec(const struct helper_target *target,
						 int in, int out, const int *pass,
						 const cpu_set_t *affinity, volatile int *exec_errno)
{
	static char *const envp[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL };
	char *const argv[] = { (char *)target->helper, "-c", (char *)target->config_path, NULL };
	struct sigaction dfl;
	sigset_t none;

	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	for (int sig = 1; sig < SIGRTMIN; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			sigaction(sig, &dfl, NULL);
	/* every descriptor out of the way first (any may sit on 0-5), then
	 * into place: stdin, stdout, and the passed I/O on 3, 4, 5 */
	int src[5] = { in, out, pass ? pass[0] : -1, pass ? pass[1] : -1, pass ? pass[2] : -1 };
	for (int i = 0; i < 5; i++)
		if (src[i] >= 0 && (src[i] = fcntl(src[i], F_DUPFD_CLOEXEC, 10)) < 0) {
			*exec_errno = errno;
			_exit(127);
		}
	for (int i = 0; i < 5; i++)
		if (src[i] >= 0 && dup2(src[i], i < 2 ? i : i + 1) < 0) {
			*exec_errno = errno;
			_exit(127);
		}
	syscall(SYS_close_range, pass ? 6 : 3, ~0U, 0);
	/* the CPU pin was for where the child starts; the helper (and a room
	 * it starts) runs with the service's own affinity, never one we chose */
	if (affinity)
		sched_setaffinity(0, sizeof(*affinity), affinity);
	if (child_nofile_set)
		setrlimit(RLIMIT_NOFILE, &child_nofile);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	execve(target->helper, argv, envp);
	*exec_errno = errno;
	_exit(127);
}

/* Put what fits of the request into the child's stdin before it runs
 * (we hold the read end, so no EPIPE): the helper then never waits for it,
 * and a request the pipe holds whole costs us no poll round.  Returns the
 * bytes written; the pipe's write end is closed when that is all. */
static size_t request_prefill(int in[2], const char *req, size_t req_len)
{
	size_t sent = 0;

	fcntl(in[1], F_SETFL, O_NONBLOCK);
	while (sent < req_len) {
		ssize_t n = write(in[1], req + sent, req_len - sent);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		sent += (size_t)n;
	}
	if (sent == req_len) {
		close(in[1]);
		in[1] = -1;
	}
	return sent;
}

static int child_spawn(const struct helper_target *target, struct child *c,
		       const char *req, size_t req_len, bool alone, const int *pass,
		       struct helper_error *err)
{
	int in[2] = { -1, -1 }, out;
	volatile int exec_errno = 0;
	sigset_t all, old;
	int rc;

	out = memfd_create("roombox-reply", MFD_CLOEXEC);
	if (out < 0 || pipe2(in, O_CLOEXEC) < 0) {
		rc = errno;
		if (out >= 0)
			close(out);
		set_error(err, 500, "spawn", "roombox-helper: %s: %s",
			  out < 0 ? "memfd_create" : "pipe", strerror(rc));
		return -1;
	}
	c->sent = request_prefill(in, req, req_len);
	/* The child starts on this thread's CPU (we wait for it anyway)
	 * rather than on an idle one: on a VM, waking a halted vCPU costs more
	 * than the helper's whole start.  The child puts back our thread's own
	 * affinity before it execs (child_exec), so the setuid helper never
	 * has to change it.  Only when this is the one call running: under
	 * load there is no idle CPU to avoid, and the affinity changes are
	 * then pure cost. */
	cpu_set_t saved, here;
	int cpu = alone ? sched_getcpu() : -1;
	bool pinned = false;
	if (cpu >= 0 && cpu < CPU_SETSIZE && pthread_getaffinity_np(pthread_self(), sizeof(saved), &saved) == 0) {
		CPU_ZERO(&here);
		CPU_SET(cpu, &here);
		pinned = pthread_setaffinity_np(pthread_self(), sizeof(here), &here) == 0;
	}
	/* no signal handler may run in the child before it has reset them */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	c->pid = vfork();
	if (c->pid == 0)
		child_exec(target, in[0], out, pass, pinned ? &saved : NULL, &exec_errno);
	rc = c->pid < 0 ? errno : exec_errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (pinned)
		pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved);
	close(in[0]);
	if (c->pid > 0 && rc != 0) {
		waitpid(c->pid, NULL, 0);
		c->pid = -1;
	}
	if (rc == 0) {
		/* how the end of the call is seen: without it, no call */
		c->pidfd = (int)syscall(SYS_pidfd_open, c->pid, 0);  /* CLOEXEC */
		if (c->pidfd < 0) {
			rc = errno;
			kill(c->pid, SIGKILL);
			waitpid(c->pid, NULL, 0);
			c->pid = -1;
		}
	}
	if (rc != 0) {
		if (in[1] >= 0)
			close(in[1]);
		close(out);
		set_error(err, 500, "spawn", "roombox-helper: spawn %s: %s",
			  target->helper, strerror(rc));
		return -1;
	}
	c->to_child = in[1];
	c->reply = out;
	return 0;
}

/* write() that returns EPIPE instead of raising SIGPIPE, whatever the
 * process's disposition (unit tests do not ignore it). */
static ssize_t write_nosigpipe(int fd, const char *buf, size_t len)
{
	sigset_t pipe_set, old;
	struct timespec zero = { 0, 0 };
	ssize_t n;
	int saved;

	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	n = write(fd, buf, len);
	saved = errno;
	if (n < 0 && errno == EPIPE)
		while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR)
			;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = saved;
	return n;
}

/* The answer the helper left in its memfd, NUL-terminated; 0, or -1 with
 * err set. */
static int reply_read(int fd, char **reply, size_t *reply_len, struct helper_error *err)
{
	struct stat st;
	size_t len, got = 0;
	char *buf;

	if (fstat(fd, &st) < 0) {
		set_error(err, 500, "reply", "roombox-helper: fstat: %s", strerror(errno));
		return -1;
	}
	if (st.st_size > (off_t)HELPER_REPLY_MAX) {
		set_error(err, 500, "reply", "roombox-helper: reply larger than %u bytes",
			  HELPER_REPLY_MAX);
		return -1;
	}
	len = (size_t)st.st_size;
	buf = malloc(len + 1);
	if (!buf) {
		set_error(err, 500, "reply", "roombox-helper: out of memory");
		return -1;
	}
	while (got < len) {
		ssize_t n = pread(fd, buf + got, len - got, (off_t)got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	buf[got] = '\0';
	*reply = buf;
	*reply_len = got;
	return 0;
}

/* Feed the rest of the request (if the pipe did not take it all at once)
 * until the helper exits (or, with until_sent, until all of it is sent).
 * 0, or -1 with err set (the child is then killed). */
static int child_talk(struct child *c, const char *req, size_t req_len,
		      long deadline, bool until_sent, struct helper_error *err)
{
	for (;;) {
		struct pollfd pfd[2];
		int nfds = 0, rc, w = -1;
		long left = deadline - monotonic_ms();

		if (until_sent && c->to_child < 0)
			return 0;
		if (left <= 0) {
			set_error(err, 500, "timeout", "roombox-helper: timed out");
			goto fail;
		}
		pfd[nfds++] = (struct pollfd){ .fd = c->pidfd, .events = POLLIN };
		if (c->to_child >= 0) {
			w = nfds;
			pfd[nfds++] = (struct pollfd){ .fd = c->to_child, .events = POLLOUT };
		}
		rc = poll(pfd, (nfds_t)nfds, left > 1000000 ? 1000000 : (int)left);
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc < 0) {
			set_error(err, 500, "spawn", "roombox-helper: poll: %s", strerror(errno));
			goto fail;
		}
		if (pfd[0].revents)
			return 0;   /* exited: all it wrote is in the memfd */
		if (w >= 0 && pfd[w].revents) {
			ssize_t n = write_nosigpipe(c->to_child, req + c->sent, req_len - c->sent);

			if (n > 0)
				c->sent += (size_t)n;
			/* EPIPE: the helper stopped reading; its reply says why */
			if ((n < 0 && errno != EAGAIN && errno != EINTR) || c->sent == req_len) {
				close(c->to_child);
				c->to_child = -1;
			}
		}
	}
fail:
	kill(c->pid, SIGKILL);
	return -1;
}

static int child_wait(pid_t pid)
{
	int status;

	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return status;
}

static int fail_reply(struct helper_error *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int fail_reply(struct helper_error *err, const char *fmt, ...)
{
	va_list ap;

	err->http_status = 500;
	snprintf(err->code, sizeof(err->code), "reply");
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
	va_end(ap);
	return -1;
}

/* The op's record: its exact size, counts included. */
static int record_check(uint32_t op, const char *rec, size_t len, struct helper_error *err)
{
	const char *name = helper_op_name(op);
	size_t want = 0;
	uint64_t count, each;

	switch (op) {
	case HOP_EXEC:
		want = sizeof(struct helper_exec_ans);
		break;
	case HOP_CREATE: case HOP_STATUS: case HOP_SET_LIMITS:
		want = sizeof(struct helper_status);
		break;
	case HOP_LIST: case HOP_STOP_IDLE: case HOP_STOP_ALL:
		want = sizeof(struct helper_list_ans);
		if (len < want)
			break;
		count = ((const struct helper_list_ans *)rec)->count;   /* both: count first */
		each = op == HOP_LIST ? sizeof(struct helper_status) : HELPER_ROOM_LEN;
		if (count > (len - sizeof(struct helper_list_ans)) / each ||
		    len != sizeof(struct helper_list_ans) + count * each)
			return fail_reply(err, "roombox-helper: %s answer: %llu entries in %zu bytes",
					  name, (unsigned long long)count, len);
		return 0;
	case HOP_KILL_ALL:
		want = sizeof(struct helper_killed_ans);
		break;
	case HOP_SNAPSHOT: case HOP_SNAPSHOT_DELETE: case HOP_RESTORE: case HOP_FORK:
		want = sizeof(struct helper_snapshot);
		break;
	case HOP_SNAPSHOTS:
		want = sizeof(struct helper_snapshots_ans);
		if (len < want)
			break;
		count = ((const struct helper_snapshots_ans *)rec)->count;
		each = sizeof(struct helper_snapshot);
		if (count > (len - want) / each || len != want + count * each)
			return fail_reply(err, "roombox-helper: %s answer: %llu entries in %zu bytes",
					  name, (unsigned long long)count, len);
		return 0;
	case HOP_EXPORT: {
		want = sizeof(struct helper_export_ans);
		if (len < want)
			break;
		const struct helper_export_ans *x = (const void *)rec;
		size_t sl = strnlen(x->snapshot, HELPER_ROOM_LEN);
		if (sl == HELPER_ROOM_LEN || (sl && !room_id_valid(x->snapshot)))
			return fail_reply(err, "roombox-helper: export answer: a bad snapshot id");
		if (x->root_len > HELPER_SESSION_MAX || x->user_len > HELPER_SESSION_MAX ||
		    len != want + (size_t)x->root_len + x->user_len ||
		    memchr(rec + want, '\0', len - want))
			return fail_reply(err, "roombox-helper: export answer: sessions of %u and %u bytes "
					  "in %zu", x->root_len, x->user_len, len - want);
		return 0;
	}
	case HOP_INFO:
		want = sizeof(struct helper_info_ans);
		if (len == want && ((const struct helper_info_ans *)rec)->ndns > HELPER_DNS_MAX)
			return fail_reply(err, "roombox-helper: info answer: too many name servers");
		break;
	default:   /* destroy, stop, restart, port-connect: nothing */
		break;
	}
	if (len != want)
		return fail_reply(err, "roombox-helper: %s answer is %zu bytes, not %zu",
				  name ? name : "?", len, want);
	return 0;
}

int helper_answer_decode(uint32_t op, int exit_status, const char *buf, size_t len,
			 const char **rec, size_t *rec_len, struct helper_error *err)
{
	struct helper_ans h;

	memset(err, 0, sizeof(*err));
	*rec = NULL;
	*rec_len = 0;
	if (exit_status == -1) {
		set_error(err, 500, "spawn", "roombox-helper: waitpid: %s", strerror(errno));
		return -1;
	}
	if (WIFSIGNALED(exit_status)) {
		const char *name = sigdescr_np(WTERMSIG(exit_status));  /* thread-safe */

		return fail_reply(err, "roombox-helper: killed by signal %d (%s)",
				  WTERMSIG(exit_status), name ? name : "unknown");
	}
	if (len < sizeof(h)) {
		if (len == 0)
			return fail_reply(err, "roombox-helper: exited with status %d and no answer",
					  WEXITSTATUS(exit_status));
		return fail_reply(err, "roombox-helper: exited with status %d, answer truncated (%zu bytes)",
				  WEXITSTATUS(exit_status), len);
	}
	memcpy(&h, buf, sizeof(h));
	if (h.magic != HELPER_MAGIC || h.version != HELPER_VERSION)
		return fail_reply(err, "roombox-helper: exited with status %d, answer of another "
				  "magic or version (0x%08x, %u)", WEXITSTATUS(exit_status), h.magic, h.version);
	if (h.size < sizeof(h) || h.size > len)
		return fail_reply(err, "roombox-helper: answer size %u, %zu bytes came", h.size, len);
	if (h.status != HELPER_E_OK) {
		const char *text = buf + sizeof(h);
		size_t n = h.size - sizeof(h);
		const char *code = helper_err_name(h.status);

		if (h.size != len || n < 2 || text[n - 1] != '\0' || memchr(text, '\0', n) != text + n - 1)
			return fail_reply(err, "roombox-helper: error answer (%s) without its text", code);
		set_error(err, helper_code_status(code), code, "%s", text);
		return -1;
	}
	if (WEXITSTATUS(exit_status) != 0)
		return fail_reply(err, "roombox-helper: exited with status %d without an error",
				  WEXITSTATUS(exit_status));
	if (h.op != op)
		return fail_reply(err, "roombox-helper: answer to op %u, asked %u", h.op, op);
	if (h.size != len)
		return fail_reply(err, "roombox-helper: %zu bytes after the answer", len - h.size);
	if (record_check(op, buf + sizeof(h), len - sizeof(h), err) < 0)
		return -1;
	*rec = buf + sizeof(h);
	*rec_len = h.size - sizeof(h);
	return 0;
}

/* One call in flight: see helper_exec_start. */
struct helper_run {
	struct child c;
	uint32_t op;
	long deadline, deadline_ms;
	int talk;
	struct helper_error err;   /* a failure while sending, kept for finish */
	uint64_t start_ns;
};

/* Spawn the helper for the request (freed here) and send it. */
static struct helper_run *call_start(const struct helper_target *target, uint32_t op, char *req,
				     size_t req_len, long deadline_ms, const int *pass,
				     struct helper_error *err)
{
	struct helper_run *run;

	memset(err, 0, sizeof(*err));
	if (!req) {
		set_error(err, 500, "spawn", "roombox-helper: cannot build the %s request",
			  helper_op_name(op));
		return NULL;
	}
	if (req_len > helper_request_max(target->max_body)) {
		free(req);
		set_error(err, 413, HELPER_ERR_INVALID, "request body too large");
		return NULL;
	}
	run = calloc(1, sizeof(*run));
	if (!run) {
		free(req);
		set_error(err, 500, "spawn", "roombox-helper: out of memory");
		return NULL;
	}
	run->c = (struct child){ .pid = -1, .pidfd = -1, .to_child = -1, .reply = -1 };
	run->op = op;
	run->start_ns = metrics_now_ns();
	run->deadline_ms = deadline_ms;
	run->deadline = monotonic_ms() + deadline_ms;
	bool alone = atomic_fetch_add(&calls_running, 1) == 0;
	if (child_spawn(target, &run->c, req, req_len, alone, pass, err) < 0) {
		atomic_fetch_sub(&calls_running, 1);
		metrics_helper_call_done(op, false, NULL, err->http_status, metrics_now_ns() - run->start_ns);
		free(req);
		free(run);
		return NULL;
	}
	/* the request is whole before the caller's own loop starts: the
	 * helper reads all of it before it runs anything */
	run->talk = child_talk(&run->c, req, req_len, run->deadline, true, &run->err);
	free(req);
	return run;
}

int helper_run_pidfd(const struct helper_run *run)
{
	return run->c.pidfd;
}

/* Wait for the helper and decode its answer: 0 with the op's record copied
 * into rec (rec_size bytes; or, with rec_size 0, *heap: the malloc'd
 * answer and *rec_at into it), or -1. */
static int call_finish(struct helper_run *run, void *rec, size_t rec_size, char **heap,
		       const char **rec_at, size_t *rec_len, struct helper_error *err)
{
	struct child *c = &run->c;
	size_t reply_len = 0, n = 0;
	char *reply = NULL;
	const char *at = NULL;
	int talk = run->talk, status, rc = -1;

	*err = run->err;
	if (c->to_child >= 0) {   /* sent in call_start, or the helper left */
		close(c->to_child);
		c->to_child = -1;
	}
	if (talk == 0)
		talk = child_talk(c, NULL, 0, run->deadline, false, err);
	close(c->pidfd);
	status = child_wait(c->pid);
	atomic_fetch_sub(&calls_running, 1);
	if (talk == 0)
		talk = reply_read(c->reply, &reply, &reply_len, err);
	close(c->reply);
	if (talk < 0) {
		if (strcmp(err->code, "timeout") == 0)
			snprintf(err->message, sizeof(err->message),
				 "roombox-helper: no answer within %ld ms, killed", run->deadline_ms);
	} else {
		rc = helper_answer_decode(run->op, status, reply, reply_len, &at, &n, err);
		if (rc == 0 && rec_size && n != rec_size)
			rc = fail_reply(err, "roombox-helper: %s answer is %zu bytes, not %zu",
					helper_op_name(run->op), n, rec_size);
		if (rc == 0 && rec_size)
			memcpy(rec, at, rec_size);
	}
	/* every call is timed and counted (metrics.c): the request log's
	 * helper time, helper errors by op, an exec's outcome */
	metrics_helper_call_done(run->op, rc == 0, run->op == HOP_EXEC && rc == 0 ? rec : NULL,
				 err->http_status, metrics_now_ns() - run->start_ns);
	free(run);
	if (rc == 0 && heap) {
		*heap = reply;
		*rec_at = at;
		*rec_len = n;
		return 0;
	}
	free(reply);
	return rc;
}

/* A whole call of an op without passed descriptors. */
static int call(const struct helper_target *t, uint32_t op, struct helper_rec *b, long deadline_ms,
		void *rec, size_t rec_size, char **heap, const char **rec_at, size_t *rec_len,
		struct helper_error *err)
{
	size_t len = 0;
	char *req = helper_rec_end(b, &len);
	struct helper_run *run = call_start(t, op, req, len, deadline_ms, NULL, err);

	return run ? call_finish(run, rec, rec_size, heap, rec_at, rec_len, err) : -1;
}

/* An op on one room with no arguments, answering rec_size bytes. */
static int room_op_within(const struct helper_target *t, uint32_t op, const char *room, long deadline_ms,
			  void *rec, size_t rec_size, struct helper_error *err)
{
	struct helper_rec b;

	helper_rec_begin(&b, op, room, NULL, 0);
	return call(t, op, &b, deadline_ms, rec, rec_size, NULL, NULL, NULL, err);
}

static int room_op(const struct helper_target *t, uint32_t op, const char *room, void *rec,
		   size_t rec_size, struct helper_error *err)
{
	return room_op_within(t, op, room, HELPER_DEFAULT_DEADLINE_MS, rec, rec_size, err);
}

int helper_create(const struct helper_target *t, const char *room, struct helper_status *st,
		  struct helper_error *err)
{
	return room_op(t, HOP_CREATE, room, st, sizeof(*st), err);
}

int helper_status(const struct helper_target *t, const char *room, struct helper_status *st,
		  struct helper_error *err)
{
	return room_op(t, HOP_STATUS, room, st, sizeof(*st), err);
}

int helper_destroy(const struct helper_target *t, const char *room, struct helper_error *err)
{
	return room_op(t, HOP_DESTROY, room, NULL, 0, err);
}

int helper_stop(const struct helper_target *t, const char *room, struct helper_error *err)
{
	return room_op(t, HOP_STOP, room, NULL, 0, err);
}

int helper_touch(const struct helper_target *t, const char *room, struct helper_error *err)
{
	/* it takes no lock: seconds are plenty, and its caller (a terminal's
	 * reader) is not held longer */
	return room_op_within(t, HOP_TOUCH, room, 10 * 1000, NULL, 0, err);
}

int helper_restart(const struct helper_target *t, const char *room, struct helper_error *err)
{
	return room_op(t, HOP_RESTART, room, NULL, 0, err);
}

int helper_kill_all(const struct helper_target *t, const char *room, uint32_t flags,
		    uint32_t *killed, struct helper_error *err)
{
	struct helper_kill_args args = { .flags = flags };
	struct helper_killed_ans a;
	struct helper_rec b;

	helper_rec_begin(&b, HOP_KILL_ALL, room, &args, sizeof(args));
	int rc = call(t, HOP_KILL_ALL, &b, HELPER_DEFAULT_DEADLINE_MS, &a, sizeof(a), NULL, NULL, NULL,
		      err);
	*killed = rc == 0 ? a.killed : 0;
	return rc;
}

int helper_set_limits(const struct helper_target *t, const char *room,
		      const struct helper_limits_args *args, struct helper_status *st,
		      struct helper_error *err)
{
	struct helper_rec b;

	helper_rec_begin(&b, HOP_SET_LIMITS, room, args, sizeof(*args));
	return call(t, HOP_SET_LIMITS, &b, HELPER_DEFAULT_DEADLINE_MS, st, sizeof(*st), NULL, NULL, NULL,
		    err);
}

int helper_info(const struct helper_target *t, long deadline_ms, struct helper_info_ans *info,
		struct helper_error *err)
{
	struct helper_rec b;

	helper_rec_begin(&b, HOP_INFO, NULL, NULL, 0);
	if (call(t, HOP_INFO, &b, deadline_ms, info, sizeof(*info), NULL, NULL, NULL, err) < 0)
		return -1;
	/* the helper's strings, NUL-terminated whatever came */
	info->cgroup[sizeof(info->cgroup) - 1] = '\0';
	info->version[sizeof(info->version) - 1] = '\0';
	info->network[sizeof(info->network) - 1] = '\0';
	return 0;
}

int helper_list(const struct helper_target *t, long deadline_ms, struct helper_status **rooms,
		size_t *n, struct helper_error *err)
{
	struct helper_rec b;
	char *heap = NULL;
	const char *at;
	size_t len;
	struct helper_list_ans a;

	*rooms = NULL;
	*n = 0;
	helper_rec_begin(&b, HOP_LIST, NULL, NULL, 0);
	if (call(t, HOP_LIST, &b, deadline_ms, NULL, 0, &heap, &at, &len, err) < 0)
		return -1;
	memcpy(&a, at, sizeof(a));
	if (a.count) {
		*rooms = malloc(a.count * sizeof(**rooms));
		if (!*rooms) {
			free(heap);
			set_error(err, 500, "reply", "roombox-helper: list of %u rooms: out of memory", a.count);
			return -1;
		}
		memcpy(*rooms, at + sizeof(a), a.count * sizeof(**rooms));
		for (size_t i = 0; i < a.count; i++) {
			(*rooms)[i].room[sizeof((*rooms)[i].room) - 1] = '\0';
			(*rooms)[i].created_at[sizeof((*rooms)[i].created_at) - 1] = '\0';
		}
	}
	*n = a.count;
	free(heap);
	return 0;
}

static int stopped(const struct helper_target *t, uint32_t op, struct helper_rec *b, long deadline_ms,
		   struct helper_stopped *out, struct helper_error *err)
{
	char *heap = NULL;
	const char *at;
	size_t len;
	struct helper_stopped_ans a;

	*out = (struct helper_stopped){ 0 };
	if (call(t, op, b, deadline_ms, NULL, 0, &heap, &at, &len, err) < 0)
		return -1;
	memcpy(&a, at, sizeof(a));
	if (a.count && !(out->ids = malloc((size_t)a.count * HELPER_ROOM_LEN))) {
		free(heap);
		set_error(err, 500, "reply", "roombox-helper: out of memory");
		return -1;
	}
	if (a.count)
		memcpy(out->ids, at + sizeof(a), (size_t)a.count * HELPER_ROOM_LEN);
	for (size_t i = 0; i < a.count; i++)
		out->ids[i][HELPER_ROOM_LEN - 1] = '\0';
	out->count = a.count;
	free(heap);
	return 0;
}

int helper_stop_idle(const struct helper_target *t, long deadline_ms, const char *const *keep,
		     size_t nkeep, struct helper_stopped *out, struct helper_error *err)
{
	struct helper_rec b;
	struct helper_keep_args k = { .nkeep = (uint32_t)nkeep };

	helper_rec_begin(&b, HOP_STOP_IDLE, NULL, &k, sizeof(k));
	for (size_t i = 0; i < nkeep; i++)
		helper_rec_string(&b, keep[i], strlen(keep[i]));
	return stopped(t, HOP_STOP_IDLE, &b, deadline_ms, out, err);
}

int helper_stop_all(const struct helper_target *t, long deadline_ms, struct helper_stopped *out,
		    struct helper_error *err)
{
	struct helper_rec b;

	helper_rec_begin(&b, HOP_STOP_ALL, NULL, NULL, 0);
	return stopped(t, HOP_STOP_ALL, &b, deadline_ms, out, err);
}

/* The exec request: cmd (or the tool's arguments), cwd, env pairs. */
static char *exec_request(const char *room, const struct helper_exec *x, size_t *len)
{
	struct helper_exec_args a = { .timeout_ms = x->timeout_ms };
	struct helper_rec b;
	size_t ntool = 0;

	while (x->tool && x->tool[ntool])
		ntool++;
	if (ntool) {
		a.flags |= HX_TOOL;
		a.ntool = (uint32_t)ntool;
	}
	if (x->cwd)
		a.flags |= HX_CWD;
	if (x->user) {
		a.flags |= HX_USER_SET;
		if (strcmp(x->user, HK_USER_USER) == 0)
			a.flags |= HX_AS_USER;
	}
	if (x->existing)
		a.flags |= HX_EXISTING;
	if (x->running_only)
		a.flags |= HX_RUNNING;
	if (x->detach)
		a.flags |= HX_DETACH;
	if (x->timeout_cap)
		a.flags |= HX_TIMEOUT_CAP;
	/* names a shell cannot take are dropped (the helper would drop them) */
	if (x->env) {
		json_object_object_foreach(x->env, key, val) {
			(void)val;
			if (*key && !strchr(key, '='))
				a.nenv++;
		}
	}
	helper_rec_begin(&b, HOP_EXEC, room, &a, sizeof(a));
	if (ntool)
		for (size_t i = 0; i < ntool; i++)
			helper_rec_string(&b, x->tool[i], strlen(x->tool[i]));
	else
		helper_rec_string(&b, x->cmd, x->cmd_len);
	if (x->cwd)
		helper_rec_string(&b, x->cwd, strlen(x->cwd));
	if (x->env) {
		json_object_object_foreach(x->env, key2, val2) {
			const char *v = json_object_get_string(val2);
			size_t kl = strlen(key2), vl = v ? strlen(v) : 0;
			char *pair;

			if (!*key2 || strchr(key2, '='))
				continue;
			pair = malloc(kl + vl + 2);
			if (!pair) {
				b.failed = true;
				break;
			}
			memcpy(pair, key2, kl);
			pair[kl] = '=';
			memcpy(pair + kl + 1, v ? v : "", vl);
			helper_rec_string(&b, pair, kl + vl + 1);
			free(pair);
		}
	}
	return helper_rec_end(&b, len);
}

struct helper_run *helper_exec_start(const struct helper_target *t, const char *room,
				     const struct helper_exec *x, long deadline_ms, const int pass[3],
				     struct helper_error *err)
{
	size_t len = 0;
	char *req = exec_request(room, x, &len);

	return call_start(t, HOP_EXEC, req, len, deadline_ms, pass, err);
}

int helper_exec_finish(struct helper_run *run, struct helper_exec_ans *ans, struct helper_error *err)
{
	return call_finish(run, ans, sizeof(*ans), NULL, NULL, NULL, err);
}

static struct helper_run *port_start(const struct helper_target *t, const char *room, uint16_t port,
				     bool serve, long deadline_ms, int sock, struct helper_error *err)
{
	struct helper_port_args a = { .port = port, .serve = serve };
	struct helper_rec b;
	int pass[3] = { sock, -1, -1 };
	size_t len = 0;
	char *req;

	helper_rec_begin(&b, HOP_PORT_CONNECT, room, &a, sizeof(a));
	req = helper_rec_end(&b, &len);
	return call_start(t, HOP_PORT_CONNECT, req, len, deadline_ms, pass, err);
}

int helper_port_connect(const struct helper_target *t, const char *room, uint16_t port, int sock,
			struct helper_error *err)
{
	struct helper_run *run = port_start(t, room, port, false, HELPER_DEFAULT_DEADLINE_MS, sock, err);

	return run ? call_finish(run, NULL, 0, NULL, NULL, NULL, err) : -1;
}

struct helper_run *helper_port_serve_start(const struct helper_target *t, const char *room,
					   long deadline_ms, int sock, struct helper_error *err)
{
	return port_start(t, room, 0, true, deadline_ms, sock, err);
}

int helper_port_serve_finish(struct helper_run *run, struct helper_error *err)
{
	return call_finish(run, NULL, 0, NULL, NULL, NULL, err);
}

/* exec-channel: the helper sends the channel over a socketpair of ours
 * (its fd 3), then answers. */
int helper_exec_channel(const struct helper_target *t, const char *room, int *channel,
			struct helper_error *err)
{
	struct helper_rec b;
	size_t len = 0;
	int sp[2], nfds = 0;
	char byte;

	*channel = -1;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
		return fail_reply(err, "exec-channel: socketpair: %s", strerror(errno));
	int pass[3] = { sp[1], -1, -1 };
	helper_rec_begin(&b, HOP_EXEC_CHANNEL, room, NULL, 0);
	char *req = helper_rec_end(&b, &len);
	struct helper_run *run = call_start(t, HOP_EXEC_CHANNEL, req, len, HELPER_DEFAULT_DEADLINE_MS,
					    pass, err);
	close(sp[1]);
	int rc = run ? call_finish(run, NULL, 0, NULL, NULL, NULL, err) : -1;
	if (rc == 0 && (recv_with_fds(sp[0], &byte, 1, MSG_DONTWAIT, channel, 1, &nfds) != 1 ||
			byte != 'C' || nfds != 1)) {
		if (nfds == 1)
			close(*channel);
		*channel = -1;
		rc = fail_reply(err, "roombox-helper: exec-channel: no channel came");
	}
	close(sp[0]);
	return rc;
}

/* ---- snapshots ---- */

/* The helper's strings, NUL-terminated whatever came. */
static void snapshot_terminate(struct helper_snapshot *s)
{
	s->id[sizeof(s->id) - 1] = s->name[sizeof(s->name) - 1] = '\0';
	s->created_at[sizeof(s->created_at) - 1] = s->copy[sizeof(s->copy) - 1] = '\0';
}

static int snap_op(const struct helper_target *t, uint32_t op, const char *room, const char *ref,
		   const char *to, struct helper_snapshot *out, struct helper_error *err)
{
	struct helper_snap_args args;
	struct helper_rec b;

	memset(&args, 0, sizeof(args));
	snprintf(args.snapshot, sizeof(args.snapshot), "%s", ref ? ref : "");
	snprintf(args.to, sizeof(args.to), "%s", to ? to : "");
	helper_rec_begin(&b, op, room, &args, sizeof(args));
	long deadline = op == HOP_SNAPSHOT_DELETE ? HELPER_DEFAULT_DEADLINE_MS : HELPER_COPY_DEADLINE_MS;
	if (call(t, op, &b, deadline, out, sizeof(*out), NULL, NULL, NULL, err) < 0)
		return -1;
	snapshot_terminate(out);
	return 0;
}

int helper_snapshot(const struct helper_target *t, const char *room, const char *name,
		    struct helper_snapshot *out, struct helper_error *err)
{
	return snap_op(t, HOP_SNAPSHOT, room, name, NULL, out, err);
}

int helper_snapshot_delete(const struct helper_target *t, const char *room, const char *ref,
			   struct helper_snapshot *out, struct helper_error *err)
{
	return snap_op(t, HOP_SNAPSHOT_DELETE, room, ref, NULL, out, err);
}

int helper_restore(const struct helper_target *t, const char *room, const char *ref,
		   struct helper_snapshot *out, struct helper_error *err)
{
	return snap_op(t, HOP_RESTORE, room, ref, NULL, out, err);
}

int helper_fork(const struct helper_target *t, const char *room, const char *ref, const char *to,
		struct helper_snapshot *out, struct helper_error *err)
{
	return snap_op(t, HOP_FORK, room, ref, to, out, err);
}

int helper_snapshots(const struct helper_target *t, const char *room, struct helper_snapshot **list,
		     size_t *n, struct helper_error *err)
{
	struct helper_snap_args args;
	struct helper_snapshots_ans a;
	struct helper_rec b;
	char *heap = NULL;
	const char *at;
	size_t len;

	*list = NULL;
	*n = 0;
	memset(&args, 0, sizeof(args));
	helper_rec_begin(&b, HOP_SNAPSHOTS, room, &args, sizeof(args));
	if (call(t, HOP_SNAPSHOTS, &b, HELPER_DEFAULT_DEADLINE_MS, NULL, 0, &heap, &at, &len, err) < 0)
		return -1;
	memcpy(&a, at, sizeof(a));
	if (a.count) {
		*list = malloc(a.count * sizeof(**list));
		if (!*list) {
			free(heap);
			set_error(err, 500, "reply", "roombox-helper: %u snapshots: out of memory", a.count);
			return -1;
		}
		memcpy(*list, at + sizeof(a), a.count * sizeof(**list));
		for (size_t i = 0; i < a.count; i++)
			snapshot_terminate(&(*list)[i]);
	}
	*n = a.count;
	free(heap);
	return 0;
}

/* ---- export and import (fcgi-app/rooms/room_transfer.c) ---- */

struct helper_run *helper_export_start(const struct helper_target *t, const char *room,
				       const char *snapshot, int tree_fd, long deadline_ms,
				       struct helper_error *err)
{
	struct helper_snap_args a;
	struct helper_rec b;
	int pass[3] = { -1, tree_fd, -1 };
	size_t len = 0;

	memset(&a, 0, sizeof(a));
	snprintf(a.snapshot, sizeof(a.snapshot), "%s", snapshot ? snapshot : "");
	helper_rec_begin(&b, HOP_EXPORT, room, &a, sizeof(a));
	char *req = helper_rec_end(&b, &len);
	return call_start(t, HOP_EXPORT, req, len, deadline_ms, pass, err);
}

/* A transfer's stream lasts as long as its client sends or reads: its
 * deadline bounds what the helper does after the stream's end. */
static void transfer_streamed(struct helper_run *run)
{
	run->deadline = monotonic_ms() + run->deadline_ms;
}

int helper_export_finish(struct helper_run *run, char **root, char **user,
			 char sid[HELPER_ROOM_LEN], struct helper_error *err)
{
	char *heap = NULL;
	const char *rec = NULL;
	size_t n = 0;

	*root = *user = NULL;
	sid[0] = '\0';
	transfer_streamed(run);
	if (call_finish(run, NULL, 0, &heap, &rec, &n, err) < 0)
		return -1;
	const struct helper_export_ans *x = (const void *)rec;
	memcpy(sid, x->snapshot, HELPER_ROOM_LEN);
	sid[HELPER_ROOM_LEN - 1] = '\0';
	const char *p = rec + sizeof(*x);
	*root = strndup(p, x->root_len);
	*user = strndup(p + x->root_len, x->user_len);
	free(heap);
	if (!*root || !*user) {
		free(*root);
		free(*user);
		*root = *user = NULL;
		return fail_reply(err, "roombox-helper: export answer: out of memory");
	}
	return 0;
}

struct helper_run *helper_import_start(const struct helper_target *t, const char *room, int tree_fd,
				       int sessions_fd, long deadline_ms, struct helper_error *err)
{
	struct helper_import_args a = { 0 };
	struct helper_rec b;
	int pass[3] = { tree_fd, -1, sessions_fd };
	size_t len = 0;

	helper_rec_begin(&b, HOP_IMPORT, room, &a, sizeof(a));
	char *req = helper_rec_end(&b, &len);
	return call_start(t, HOP_IMPORT, req, len, deadline_ms, pass, err);
}

int helper_import_finish(struct helper_run *run, struct helper_error *err)
{
	transfer_streamed(run);
	return call_finish(run, NULL, 0, NULL, NULL, NULL, err);
}
