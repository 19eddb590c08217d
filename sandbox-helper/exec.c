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
 * shell, never a root one, and root's variables never reach the user's.  WRAPPER evaluates it, runs the command, and an EXIT trap
 * writes the new `export -p` on fd 9, ended by a marker line; the helper
 * saves it only when the marker came, i.e. only when the shell ended by
 * itself (not killed, not timed out), and only for execs without cwd or env.
 * Fd 9 is the memfd that carried argv and environment to the keeper (the
 * session lands after them), read once the keeper says the shell ended:
 * the shell's writes wake no one, and the helper sleeps through the whole
 * exec until that one answer comes.
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
#include "shquote.h"

#define ERR(...) errorf(err, errlen, __VA_ARGS__)
#define SESSION_MAX (120 * 1024)   /* one environment string (MAX_ARG_STRLEN) */
#define SESSION_END "#roombox-session-end\n"

/* Every redirection costs dash about seven system calls (save, dup2,
 * restore), so the usual path has none: the saved directory is tested
 * before cd (2>/dev/null only on the way to a fallback), and the EXIT trap
 * moves stdout to fd 9 once for both of its writes (the shell is ending:
 * nothing else is written to stdout).  `command exec`: a command that
 * closed fd 9 gets dash's complaint on stderr and keeps its own exit status
 * (a plain special builtin's failure would end the shell with 2), and no
 * session is written to its stdout. */
static const char WRAPPER[] =
	"__RB_WRAPPER=\n"
	"__rb_h=$HOME __rb_u=$USER\n"
	"eval \"$__RB_SESSION\"; unset __RB_SESSION __RB_WRAPPER\n"
	"HOME=$__rb_h USER=$__rb_u LOGNAME=$__rb_u; unset __rb_h __rb_u\n"
	"if [ -n \"$__RB_ONEOFF_CWD\" ]; then\n"
	"  cd -- \"$__RB_ONEOFF_CWD\" || exit 1\n"
	"else\n"
	"  __rb_d=${__RB_CWD:-/workspace}\n"
	"  if ! { [ -d \"$__rb_d\" ] && [ -x \"$__rb_d\" ] && cd -- \"$__rb_d\"; }; then\n"
	"    cd /workspace 2>/dev/null || cd /\n"
	"  fi\n"
	"  unset __rb_d\n"
	"fi\n"
	"unset __RB_CWD __RB_ONEOFF_CWD\n"
	"__rb_c=$1; shift\n"
	"if [ -n \"$__RB_SAVE\" ]; then\n"
	"  unset __RB_SAVE\n"
	"  trap '__RB_CWD=$PWD; export __RB_CWD; if command exec >&9; then export -p; echo \"#roombox-session-end\"; fi' EXIT\n"
	"fi\n"
	"eval \"$__rb_c\"\n";

static double ms_since(const struct timespec *a)
{
	struct timespec b;
	clock_gettime(CLOCK_MONOTONIC, &b);
	return (double)(b.tv_sec - a->tv_sec) * 1e3 + (double)(b.tv_nsec - a->tv_nsec) / 1e6;
}

/* Room for `need` bytes in the growing buffer *buf (capacity *cap). */
static int reserve(char **buf, size_t *cap, size_t need)
{
	if (need <= *cap)
		return 0;
	char *p = realloc(*buf, need * 2);
	if (!p)
		return -1;
	*buf = p;
	*cap = need * 2;
	return 0;
}

static int append(char **buf, size_t *len, size_t *cap, const char *s)
{
	size_t n = strlen(s);
	if (reserve(buf, cap, *len + n + 1) < 0)
		return -1;
	memcpy(*buf + *len, s, n + 1);
	*len += n;
	return 0;
}

static bool shell_name(const char *s)
{
	if (!(*s == '_' || (*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z')))
		return false;
	for (s++; *s; s++)
		if (!(*s == '_' || (*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9')))
			return false;
	return true;
}

/* execve takes no single argument or environment string longer than this
 * (MAX_ARG_STRLEN, 32 pages): the command and the session travel as one. */
#define ARG_STRLEN_MAX (32 * 4096 - 1)

/* The environment of the shell: fixed defaults, the session text and, for a
 * one-off scope, the request's variables appended as export lines (so they
 * win over the session's).  Every string is owned by envp (freed by
 * child_env_free). */
struct child_env {
	char **envp;
	size_t n;
	size_t old_len;          /* the saved session: envp[session] + 13, old_len bytes */
	const char *session;     /* "__RB_SESSION=..." */
};

static const char *const ENV_FIXED[] = {
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"SHELL=/bin/sh", "LANG=C.UTF-8", "TERM=dumb",
};
#define N_ENV_FIXED (sizeof(ENV_FIXED) / sizeof(ENV_FIXED[0]))
/* who the shell is: the room's root or its user */
static const char *const ENV_ROOT[] = { "HOME=/root", "USER=root", "LOGNAME=root" };
static const char *const ENV_USER[] = { "HOME=/home/user", "USER=user", "LOGNAME=user" };
#define N_ENV_WHO 3

static void child_env_add(struct child_env *ce, char *s)
{
	if (s)
		ce->envp[ce->n++] = s;
}

static void child_env_free(struct child_env *ce)
{
	for (size_t i = 0; ce->envp && i < ce->n; i++)
		free(ce->envp[i]);
	free(ce->envp);
}

static int build_env(const struct room *r, const struct exec_order *q, bool save,
		     struct child_env *ce, char *err, size_t errlen)
{
	ce->envp = calloc(N_ENV_FIXED + N_ENV_WHO + 5, sizeof(char *));
	size_t len = 0, cap = 256;
	char *s = malloc(cap);
	if (!ce->envp || !s) {
		free(s);
		return ERR("room %s: out of memory", r->id);
	}
	for (size_t i = 0; i < N_ENV_FIXED; i++)
		child_env_add(ce, strdup(ENV_FIXED[i]));
	for (size_t i = 0; i < N_ENV_WHO; i++)
		child_env_add(ce, strdup(q->as_user ? ENV_USER[i] : ENV_ROOT[i]));
	child_env_add(ce, strdup(WRAPPER));
	if (save)
		child_env_add(ce, strdup("__RB_SAVE=1"));
	if (q->cwd && asprintf(&ce->envp[ce->n], "__RB_ONEOFF_CWD=%s", q->cwd) > 0)
		ce->n++;

	s[0] = '\0';
	append(&s, &len, &cap, "__RB_SESSION=");
	char *old = room_session_read(r, q->as_user, SESSION_MAX);
	append(&s, &len, &cap, old ? old : "");
	ce->old_len = len - strlen("__RB_SESSION=");
	free(old);
	const char *e = q->env;
	for (uint32_t i = 0; i < q->nenv; i++, e += strlen(e) + 1) {
		const char *eq = strchr(e, '=');
		char name[256];
		/* /bin/sh (dash) drops such names from the environment of
		 * everything it runs, so they cannot be passed on */
		if (!eq || (size_t)(eq - e) >= sizeof(name))
			continue;
		memcpy(name, e, (size_t)(eq - e));
		name[eq - e] = '\0';
		if (!shell_name(name))
			continue;
		append(&s, &len, &cap, "\nexport ");
		append(&s, &len, &cap, name);
		append(&s, &len, &cap, "=");
		char qerr[128], *v = shquote_alloc(eq + 1, strlen(eq + 1), qerr, sizeof(qerr));
		if (!v) {
			free(s);
			return ERR("room %s: env %s: %s", r->id, name, qerr);
		}
		append(&s, &len, &cap, v);
		free(v);
	}
	append(&s, &len, &cap, "\n");
	ce->session = s;
	child_env_add(ce, s);
	for (size_t i = 0; i < ce->n; i++)
		if (strlen(ce->envp[i]) > ARG_STRLEN_MAX)
			return ERR("room %s: the environment (session and env) is larger than "
				   "a shell can take (%d bytes in one variable)", r->id, ARG_STRLEN_MAX);
	if (strlen(q->cmd) > ARG_STRLEN_MAX)
		return ERR("room %s: the command is %zu bytes; a shell takes at most %d",
			   r->id, strlen(q->cmd), ARG_STRLEN_MAX);
	return 0;
}

/* Keep the session only when the shell wrote it to the end, and write it
 * only when it changed (most commands change nothing).  It follows the
 * blob in the memfd (from off); more than SESSION_MAX is not a session a
 * shell could take back. */
static void save_session(const struct room *r, bool as_user, int fd, off_t off,
			 const struct child_env *ce)
{
	struct stat st;
	size_t m = strlen(SESSION_END);
	if (fstat(fd, &st) < 0 || st.st_size - off < (off_t)m || st.st_size - off > SESSION_MAX)
		return;
	size_t len = (size_t)(st.st_size - off);
	char *buf = malloc(len);
	if (!buf)
		return;
	if (pread(fd, buf, len, off) == (ssize_t)len && memcmp(buf + len - m, SESSION_END, m) == 0) {
		size_t n = len - m;
		if (n != ce->old_len || memcmp(buf, ce->session + strlen("__RB_SESSION="), n) != 0)
			room_session_write(r, as_user, buf, n);
	}
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
	struct child_env ce;
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
	child_env_free(&j->ce);
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
		char *argv[] = { "/bin/sh", "-c", "eval \"$__RB_WRAPPER\"", "sh", (char *)q->cmd, NULL };
		j->blob = blob_make(r, argv, j->ce.envp, q, &j->blob_len);
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
