/* Spawn roombox-helper, talk JSON over two pipes: see helper_client.h.
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
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "helper_client.h"
#include "http.h"
#include "metrics.h"
#include "protocol.h"

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

/* Turn exit status + stdout into the reply or an error.  The answer is the
 * first line (common/protocol.h). */
static json_object *reply_decode(int status, const char *text, size_t len, size_t *header_len,
				 struct helper_error *err)
{
	json_object *reply = NULL, *msg, *code;
	char perr[128];
	const char *nl = memchr(text, '\n', len);

	*header_len = nl ? (size_t)(nl - text) + 1 : len;
	if (status == -1) {
		set_error(err, 500, "spawn", "roombox-helper: waitpid: %s", strerror(errno));
		return NULL;
	}
	if (WIFSIGNALED(status)) {
		const char *name = sigdescr_np(WTERMSIG(status));  /* thread-safe */

		set_error(err, 500, "reply", "roombox-helper: killed by signal %d (%s)",
			  WTERMSIG(status), name ? name : "unknown");
		return NULL;
	}
	if (json_parse_strict(text, *header_len, &reply, perr, sizeof(perr)) < 0 ||
	    !json_object_is_type(reply, json_type_object)) {
		json_object_put(reply);
		if (len == 0)
			set_error(err, 500, "reply", "roombox-helper: exited with status %d and no reply",
				  WEXITSTATUS(status));
		else
			set_error(err, 500, "reply", "roombox-helper: exited with status %d, reply is not a JSON object%s%s",
				  WEXITSTATUS(status), reply ? "" : ": ", reply ? "" : perr);
		return NULL;
	}
	if (WEXITSTATUS(status) == 0 && !json_object_object_get_ex(reply, HK_ERROR, NULL))
		return reply;
	if (json_object_object_get_ex(reply, HK_ERROR, &msg) &&
	    json_object_is_type(msg, json_type_string)) {
		const char *c = NULL;

		if (json_object_object_get_ex(reply, HK_CODE, &code) &&
		    json_object_is_type(code, json_type_string))
			c = json_object_get_string(code);
		set_error(err, helper_code_status(c), c ? c : HELPER_ERR_FAILED, "%s",
			  json_object_get_string(msg));
	} else {
		set_error(err, 500, "reply", "roombox-helper: exited with status %d without an \"error\"",
			  WEXITSTATUS(status));
	}
	json_object_put(reply);
	return NULL;
}

/* One call in flight: see helper_start. */
struct helper_run {
	struct child c;
	long deadline, deadline_ms;
	int talk;
	struct helper_error err;   /* a failure while sending, kept for finish */
	json_object *request;      /* for the metrics: its op */
	uint64_t start_ns;
};

struct helper_run *helper_start(const struct helper_target *target, json_object *request,
				long deadline_ms, const int *pass, struct helper_error *err)
{
	struct helper_run *run;
	const char *req;
	size_t req_len = 0;

	memset(err, 0, sizeof(*err));
	req = json_write(request, &req_len);
	if (!req) {
		set_error(err, 500, "spawn", "roombox-helper: cannot serialise the request");
		return NULL;
	}
	if (req_len > helper_request_max(target->max_body)) {
		set_error(err, 413, HELPER_ERR_INVALID, "request body too large");
		return NULL;
	}
	run = calloc(1, sizeof(*run));
	if (!run) {
		set_error(err, 500, "spawn", "roombox-helper: out of memory");
		return NULL;
	}
	run->c = (struct child){ .pid = -1, .pidfd = -1, .to_child = -1, .reply = -1 };
	run->request = json_object_get(request);
	run->start_ns = metrics_now_ns();
	run->deadline_ms = deadline_ms;
	run->deadline = monotonic_ms() + deadline_ms;
	bool alone = atomic_fetch_add(&calls_running, 1) == 0;
	if (child_spawn(target, &run->c, req, req_len, alone, pass, err) < 0) {
		atomic_fetch_sub(&calls_running, 1);
		metrics_helper_call_done(request, NULL, err->http_status,
					 metrics_now_ns() - run->start_ns);
		json_object_put(run->request);
		free(run);
		return NULL;
	}
	/* the request is whole before the caller's own loop starts: the
	 * helper reads all of it before it runs anything */
	run->talk = child_talk(&run->c, req, req_len, run->deadline, true, &run->err);
	return run;
}

int helper_run_pidfd(const struct helper_run *run)
{
	return run->c.pidfd;
}

json_object *helper_finish(struct helper_run *run, struct helper_error *err)
{
	struct child *c = &run->c;
	size_t reply_len = 0, header_len = 0;
	char *reply = NULL;
	int talk = run->talk, status;
	json_object *out;

	*err = run->err;
	if (c->to_child >= 0) {   /* sent in helper_start, or the helper left */
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
	long deadline_ms = run->deadline_ms;
	if (talk < 0) {
		if (strcmp(err->code, "timeout") == 0)
			snprintf(err->message, sizeof(err->message),
				 "roombox-helper: no answer within %ld ms, killed", deadline_ms);
		out = NULL;
	} else {
		out = reply_decode(status, reply, reply_len, &header_len, err);
	}
	/* every call is timed and counted (metrics.c): the request log's
	 * helper time, helper errors by op, an exec's outcome */
	metrics_helper_call_done(run->request, out, err->http_status,
				 metrics_now_ns() - run->start_ns);
	json_object_put(run->request);
	free(run);
	free(reply);
	return out;
}

json_object *helper_call(const struct helper_target *target, json_object *request,
			 long deadline_ms, struct helper_error *err)
{
	struct helper_run *run = helper_start(target, request, deadline_ms, NULL, err);

	return run ? helper_finish(run, err) : NULL;
}
