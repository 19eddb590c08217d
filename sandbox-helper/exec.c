/* One exec in a room: join, run, collect, time out.
 *
 * The helper joins only the room's pid namespace itself (so that its
 * children are born in it) and stays in the host's mount namespace, where the
 * cgroup tree and the state directory are.  The child enters the exec's
 * cgroup, joins the rest of the room's namespaces through the keeper's pidfd,
 * drops to the room's uid with no capabilities, no_new_privs and the seccomp
 * filter, and execs /bin/sh running WRAPPER.
 *
 * The session: the helper keeps the room's exported variables and working
 * directory as the text of `export -p` in the state directory, outside the
 * room's tree.  WRAPPER evaluates it, runs the command, and an EXIT trap
 * writes the new `export -p` on fd 9, ended by a marker line; the helper
 * saves it only when the marker came, i.e. only when the shell ended by
 * itself (not killed, not timed out), and only for execs without cwd or env.
 *
 * Output: stdout and stderr are pipes read up to output_limit each, the rest
 * read and dropped.  The exec ends when the shell exits, plus at most
 * drain_ms to collect what is already written.  If a background process
 * still holds a pipe, a small drainer process in the room takes over both
 * read ends and discards until they close, so that process never dies of
 * SIGPIPE.  On timeout every process of the exec's cgroup is killed
 * (daemonised ones too); without cgroups, the shell's session.
 */
#include "errbuf.h"
#include "exec.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <linux/capability.h>
#include <time.h>
#include <unistd.h>

#include "jail.h"
#include "seccomp_filter.h"
#include "textenc.h"

#define ERR(...) errorf(err, errlen, __VA_ARGS__)
#define SESSION_FD 9
#define SESSION_MAX (120 * 1024)   /* one environment string (MAX_ARG_STRLEN) */
#define SESSION_END "#roombox-session-end\n"

static const char WRAPPER[] =
	"__RB_WRAPPER=\n"
	"eval \"$__RB_SESSION\"; unset __RB_SESSION __RB_WRAPPER\n"
	"if [ -n \"$__RB_ONEOFF_CWD\" ]; then\n"
	"  cd -- \"$__RB_ONEOFF_CWD\" || exit 1\n"
	"else\n"
	"  cd -- \"${__RB_CWD:-/workspace}\" 2>/dev/null || cd /workspace 2>/dev/null || cd /\n"
	"fi\n"
	"unset __RB_CWD __RB_ONEOFF_CWD\n"
	"__rb_c=$1; shift\n"
	"if [ -n \"$__RB_SAVE\" ]; then\n"
	"  unset __RB_SAVE\n"
	"  trap '__RB_CWD=$PWD; export __RB_CWD; export -p >&9; echo \"#roombox-session-end\" >&9' EXIT\n"
	"fi\n"
	"eval \"$__rb_c\"\n";

static double ms_since(const struct timespec *a)
{
	struct timespec b;
	clock_gettime(CLOCK_MONOTONIC, &b);
	return (double)(b.tv_sec - a->tv_sec) * 1e3 + (double)(b.tv_nsec - a->tv_nsec) / 1e6;
}

int shell_quote_append(char **buf, size_t *len, size_t *cap, const char *s, size_t n)
{
	size_t need = *len + 4 * n + 3;
	if (need > *cap) {
		size_t c = need * 2;
		char *p = realloc(*buf, c);
		if (!p)
			return -1;
		*buf = p;
		*cap = c;
	}
	char *o = *buf + *len;
	*o++ = '\'';
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '\'') {
			memcpy(o, "'\\''", 4);
			o += 4;
		} else {
			*o++ = s[i];
		}
	}
	*o++ = '\'';
	*o = '\0';
	*len = (size_t)(o - *buf);
	return 0;
}

static int append(char **buf, size_t *len, size_t *cap, const char *s)
{
	size_t n = strlen(s);
	if (*len + n + 1 > *cap) {
		size_t c = (*len + n + 1) * 2;
		char *p = realloc(*buf, c);
		if (!p)
			return -1;
		*buf = p;
		*cap = c;
	}
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

/* The environment of the shell: fixed defaults, the session text and, for a
 * one-off scope, the request's variables appended as export lines (so they
 * win over the session's). */
struct child_env {
	char *session;           /* "__RB_SESSION=..." */
	char *envp[16];
	char **extra;            /* names the shell cannot export: passed as is */
	char cwdvar[PATH_MAX + 32];
};

static int build_env(const struct room *r, const struct exec_request *q, bool save,
		     struct child_env *ce, char *err, size_t errlen)
{
	size_t len = 0, cap = 256;
	char *s = malloc(cap);
	if (!s)
		return ERR("room %s: out of memory", r->id);
	s[0] = '\0';
	append(&s, &len, &cap, "__RB_SESSION=");
	char *old = room_session_read(r, SESSION_MAX);
	append(&s, &len, &cap, old ? old : "");
	free(old);
	size_t nextra = 0;
	if (q->env) {
		ce->extra = calloc((size_t)json_object_object_length(q->env) + 1, sizeof(char *));
		json_object_object_foreach(q->env, k, v) {
			const char *val = json_object_get_string(v);
			if (!shell_name(k)) {
				if (asprintf(&ce->extra[nextra], "%s=%s", k, val) > 0)
					nextra++;
				continue;
			}
			append(&s, &len, &cap, "\nexport ");
			append(&s, &len, &cap, k);
			append(&s, &len, &cap, "=");
			shell_quote_append(&s, &len, &cap, val, (size_t)json_object_get_string_len(v));
		}
	}
	append(&s, &len, &cap, "\n");
	ce->session = s;
	int i = 0;
	ce->envp[i++] = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
	ce->envp[i++] = "HOME=/home/user";
	ce->envp[i++] = "USER=user";
	ce->envp[i++] = "LOGNAME=user";
	ce->envp[i++] = "SHELL=/bin/sh";
	ce->envp[i++] = "LANG=C.UTF-8";
	ce->envp[i++] = "TERM=dumb";
	ce->envp[i++] = ce->session;
	ce->envp[i++] = (char *)WRAPPER;
	if (save)
		ce->envp[i++] = "__RB_SAVE=1";
	if (q->cwd) {
		snprintf(ce->cwdvar, sizeof(ce->cwdvar), "__RB_ONEOFF_CWD=%s", q->cwd);
		ce->envp[i++] = ce->cwdvar;
	}
	ce->envp[i] = NULL;
	return 0;
}

/* Everything the child needs, prepared before fork so the child only makes
 * system calls. */
struct child_plan {
	const struct room *r;
	const struct cgroup_sys *cg;
	const char *exec_id;
	int keeper_fd;
	int in_fd, out_fd, err_fd, sess_fd, report_fd;
	char *const *argv;
	char **envp;
};

static void __attribute__((noreturn)) child_fail(int fd, const char *step, int e)
{
	char msg[256];
	int n = snprintf(msg, sizeof(msg), "%s: %s", step, strerror(e));
	if (write(fd, msg, (size_t)n) < 0)
		_exit(126);
	_exit(126);
}

static void drop_privileges(const struct room *r, int report_fd)
{
	for (int cap = 0; cap <= 63; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
			child_fail(report_fd, "drop capability bounding set", errno);
	if (setgroups(0, NULL) < 0)
		child_fail(report_fd, "setgroups", errno);
	if (setresgid(r->gid, r->gid, r->gid) < 0)
		child_fail(report_fd, "setresgid", errno);
	if (setresuid(r->uid, r->uid, r->uid) < 0)
		child_fail(report_fd, "setresuid", errno);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		child_fail(report_fd, "no_new_privs", errno);
}

static void __attribute__((noreturn)) exec_child(const struct child_plan *p)
{
	char err[256];
	if (cgroup_enter(p->cg, p->r->id, p->exec_id, 0, err, sizeof(err)) < 0) {
		if (write(p->report_fd, err, strlen(err)) < 0)
			_exit(126);
		_exit(126);
	}
	if (setns(p->keeper_fd, JAIL_NS_FLAGS & ~CLONE_NEWPID) < 0)
		child_fail(p->report_fd, "join the room's namespaces", errno);
	setsid();
	int in = p->in_fd >= 0 ? p->in_fd : open("/dev/null", O_RDONLY);
	if (in < 0 || dup2(in, 0) < 0 || dup2(p->out_fd, 1) < 0 || dup2(p->err_fd, 2) < 0 ||
	    dup2(p->sess_fd, SESSION_FD) < 0)
		child_fail(p->report_fd, "set up descriptors", errno);
	drop_privileges(p->r, p->report_fd);
	if (chdir("/") < 0)
		child_fail(p->report_fd, "chdir /", errno);
	if (seccomp_load_room_filter(err, sizeof(err)) < 0) {
		if (write(p->report_fd, err, strlen(err)) < 0)
			_exit(126);
		_exit(126);
	}
	signal(SIGPIPE, SIG_DFL);
	execve("/bin/sh", p->argv, p->envp);
	child_fail(p->report_fd, "exec /bin/sh", errno);
}

struct stream {
	int fd;
	char *buf;
	size_t len, cap, limit;
	bool truncated;
};

/* Read what is there; returns false at EOF (or error). */
static bool stream_read(struct stream *s)
{
	char tmp[65536];
	for (;;) {
		ssize_t n = read(s->fd, tmp, sizeof(tmp));
		if (n == 0)
			return false;
		if (n < 0)
			return errno == EAGAIN || errno == EINTR;
		size_t keep = (size_t)n;
		if (s->len + keep > s->limit) {
			keep = s->limit - s->len;
			s->truncated = true;
		}
		if (keep && s->len + keep > s->cap) {
			size_t c = s->cap ? s->cap : 65536;
			while (c < s->len + keep)
				c *= 2;
			char *b = realloc(s->buf, c);
			if (!b)
				return false;
			s->buf = b;
			s->cap = c;
		}
		if (keep) {
			memcpy(s->buf + s->len, tmp, keep);
			s->len += keep;
		}
		if ((size_t)n < sizeof(tmp))
			return true;
	}
}

/* A background process still holds the output pipes: roombox-keeper in
 * drain mode keeps reading them, in the room, as the room's user, until they
 * close. */
static void spawn_drainer(const struct room *r, const struct cgroup_sys *cg, int out, int errfd)
{
	char err[256];
	int exe = jail_keeper_exe_open(err, sizeof(err));
	if (exe < 0)
		return;
	pid_t pid = fork();
	if (pid != 0) {
		close(exe);
		return;
	}
	cgroup_enter(cg, r->id, NULL, 0, err, sizeof(err));
	if (setgroups(0, NULL) < 0 || setresgid(r->gid, r->gid, r->gid) < 0 ||
	    setresuid(r->uid, r->uid, r->uid) < 0)
		_exit(1);
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0 ||
	    dup2(out, 3) < 0 || dup2(errfd, 4) < 0 || dup2(exe, 5) < 0)
		_exit(1);
	syscall(SYS_close_range, 6, ~0U, 0);
	fcntl(5, F_SETFD, FD_CLOEXEC);
	fcntl(3, F_SETFL, 0);
	fcntl(4, F_SETFL, 0);
	char *argv[] = { "roombox-drain", NULL };
	char *envp[] = { NULL };
	syscall(SYS_execveat, 5, "", argv, envp, AT_EMPTY_PATH);
	_exit(1);
}

static json_object *encode_stream(const struct stream *s, bool b64)
{
	const char *data = s->buf ? s->buf : "";
	if (b64) {
		char *e = base64_encode((const unsigned char *)data, s->len);
		json_object *o = json_object_new_string(e ? e : "");
		free(e);
		return o;
	}
	size_t n;
	char *t = utf8_sanitize(data, s->len, &n);
	json_object *o = json_object_new_string_len(t ? t : "", t ? (int)n : 0);
	free(t);
	return o;
}

static json_object *make_result(const struct stream *out, const struct stream *err_s, int status,
				bool timed_out, double duration, const char *stamp, bool b64)
{
	json_object *res = json_object_new_object();
	int code;
	const char *sig = NULL;
	char signame[32];
	if (timed_out) {
		code = 124;
		snprintf(signame, sizeof(signame), "SIGKILL");
		sig = signame;
	} else if (WIFSIGNALED(status)) {
		code = 128 + WTERMSIG(status);
		const char *ab = sigabbrev_np(WTERMSIG(status));
		snprintf(signame, sizeof(signame), "SIG%s", ab ? ab : "UNKNOWN");
		sig = signame;
	} else {
		code = WEXITSTATUS(status);
	}
	json_object_object_add(res, "stdout", encode_stream(out, b64));
	json_object_object_add(res, "stderr", encode_stream(err_s, b64));
	json_object_object_add(res, "exitCode", json_object_new_int(code));
	json_object_object_add(res, "success", json_object_new_boolean(code == 0));
	json_object_object_add(res, "signal", sig ? json_object_new_string(sig) : NULL);
	json_object_object_add(res, "timedOut", json_object_new_boolean(timed_out));
	json_object *tr = json_object_new_object();
	json_object_object_add(tr, "stdout", json_object_new_boolean(out->truncated));
	json_object_object_add(tr, "stderr", json_object_new_boolean(err_s->truncated));
	json_object_object_add(res, "truncated", tr);
	char dur[32];
	snprintf(dur, sizeof(dur), "%.3f", duration);
	json_object_object_add(res, "duration", json_object_new_double_s(duration, dur));
	json_object_object_add(res, "timestamp", json_object_new_string(stamp));
	return res;
}

struct pipes {
	int in[2], out[2], err[2], sess[2], report[2];
};

static void close_pair(int p[2])
{
	for (int i = 0; i < 2; i++)
		if (p[i] >= 0) {
			close(p[i]);
			p[i] = -1;
		}
}

static int open_pipes(struct pipes *p, bool with_stdin)
{
	int *all[] = { p->in, p->out, p->err, p->sess, p->report };
	for (size_t i = 0; i < 5; i++)
		all[i][0] = all[i][1] = -1;
	for (size_t i = with_stdin ? 0 : 1; i < 5; i++)
		if (pipe2(all[i], O_CLOEXEC) < 0)
			return -1;
	return 0;
}

static void close_pipes(struct pipes *p)
{
	close_pair(p->in);
	close_pair(p->out);
	close_pair(p->err);
	close_pair(p->sess);
	close_pair(p->report);
}

struct collect {
	struct stream out, err, sess;
	const char *in_data;
	size_t in_len, in_off;
	int in_fd;
	int status;
	bool exited, timed_out;
};

/* poll until the shell exits (or the deadline passes), then drain. */
static void collect(struct collect *c, int child_pidfd, pid_t child, const struct room *r,
		    const struct cgroup_sys *cg, const char *exec_id, uint64_t timeout_ms)
{
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	bool out_open = true, err_open = true, sess_open = true;
	double drain_until = -1;

	for (;;) {
		double now = ms_since(&t0);
		if (c->exited && ((!out_open && !err_open) || now >= drain_until))
			break;
		if (!c->exited && !c->timed_out && now >= (double)timeout_ms) {
			char e[256];
			c->timed_out = true;
			if (cg->mode == CG_NONE || cgroup_kill(cg, r->id, exec_id, e, sizeof(e)) < 0)
				kill(-child, SIGKILL);
			kill(child, SIGKILL);
		}
		struct pollfd p[5];
		int n = 0, i_out = -1, i_err = -1, i_sess = -1, i_in = -1, i_pid = -1;
		if (out_open)
			p[i_out = n++] = (struct pollfd){ c->out.fd, POLLIN, 0 };
		if (err_open)
			p[i_err = n++] = (struct pollfd){ c->err.fd, POLLIN, 0 };
		if (sess_open)
			p[i_sess = n++] = (struct pollfd){ c->sess.fd, POLLIN, 0 };
		if (c->in_fd >= 0)
			p[i_in = n++] = (struct pollfd){ c->in_fd, POLLOUT, 0 };
		if (!c->exited)
			p[i_pid = n++] = (struct pollfd){ child_pidfd, POLLIN, 0 };
		double limit = c->exited ? drain_until : (c->timed_out ? now + 1000 : (double)timeout_ms);
		int wait_ms = (int)(limit - now) + 1;
		if (poll(p, (nfds_t)n, wait_ms < 0 ? 0 : wait_ms) < 0 && errno != EINTR)
			break;
		if (i_out >= 0 && p[i_out].revents)
			out_open = stream_read(&c->out);
		if (i_err >= 0 && p[i_err].revents)
			err_open = stream_read(&c->err);
		if (i_sess >= 0 && p[i_sess].revents)
			sess_open = stream_read(&c->sess);
		if (i_in >= 0 && p[i_in].revents) {
			ssize_t k = p[i_in].revents & POLLOUT
				? write(c->in_fd, c->in_data + c->in_off, c->in_len - c->in_off) : -1;
			if (k > 0)
				c->in_off += (size_t)k;
			if (k < 0 || c->in_off == c->in_len) {
				close(c->in_fd);
				c->in_fd = -1;
			}
		}
		if (i_pid >= 0 && p[i_pid].revents) {
			waitpid(child, &c->status, 0);
			c->exited = true;
			drain_until = ms_since(&t0) + (double)r->cfg->drain_ms;
			/* the session record was written before the shell exited */
			if (sess_open)
				sess_open = stream_read(&c->sess);
		}
	}
	if (c->in_fd >= 0) {
		close(c->in_fd);
		c->in_fd = -1;
	}
	char e[256];
	if (out_open || err_open)
		spawn_drainer(r, cg, c->out.fd, c->err.fd);
	if (!c->timed_out)
		cgroup_exec_release(cg, r->id, exec_id, e, sizeof(e));
}

/* Keep the session only when the shell wrote it to the end. */
static void save_session(const struct room *r, const struct stream *s)
{
	size_t m = strlen(SESSION_END);
	if (s->truncated || s->len < m || memcmp(s->buf + s->len - m, SESSION_END, m) != 0)
		return;
	room_session_write(r, s->buf, s->len - m);
}

int exec_run(const struct room *r, const struct cgroup_sys *cg, pid_t keeper,
	     const struct exec_request *q, json_object **result, char *err, size_t errlen)
{
	struct timespec t0, wall;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	clock_gettime(CLOCK_REALTIME, &wall);
	char stamp[40];
	iso8601_utc(&wall, stamp, sizeof(stamp));

	bool save = !q->cwd && !q->env;
	struct child_env ce = { 0 };
	if (build_env(r, q, save, &ce, err, errlen) < 0)
		return -1;
	int rc = -1, keeper_fd = -1, child_fd = -1;
	struct pipes pp;
	char exec_id[32];
	snprintf(exec_id, sizeof(exec_id), "%d", (int)getpid());

	keeper_fd = (int)syscall(SYS_pidfd_open, keeper, 0);
	if (keeper_fd < 0 || room_keeper_pid(r) != keeper || setns(keeper_fd, CLONE_NEWPID) < 0) {
		/* killed between our check and now, or dying: the caller
		 * restarts the jail and tries again */
		ERR("room %s: keeper %d is gone", r->id, (int)keeper);
		rc = EXEC_KEEPER_GONE;
		goto out;
	}
	if (open_pipes(&pp, q->stdin_data != NULL) < 0) {
		ERR("room %s: pipe: %s", r->id, strerror(errno));
		goto out;
	}
	char *argv[] = { "sh", "-c", "eval \"$__RB_WRAPPER\"", "sh", (char *)q->cmd, NULL };
	char **envp = ce.envp;
	size_t next = 0;
	while (ce.extra && ce.extra[next])
		next++;
	char *allenv[16 + 64];
	if (next) {
		size_t i = 0, j = 0;
		while (ce.envp[i] && i < 16)
			allenv[j++] = ce.envp[i++];
		for (i = 0; i < next && j < sizeof(allenv) / sizeof(allenv[0]) - 1; i++)
			allenv[j++] = ce.extra[i];
		allenv[j] = NULL;
		envp = allenv;
	}
	struct child_plan plan = { r, cg, exec_id, keeper_fd, pp.in[0], pp.out[1], pp.err[1],
				   pp.sess[1], pp.report[1], argv, envp };
	pid_t child = fork();
	if (child < 0) {
		ERR("room %s: fork: %s", r->id, strerror(errno));
		goto out_pipes;
	}
	if (child == 0)
		exec_child(&plan);
	/* the child's ends: only the child may hold them, or EOF never comes */
	int *child_ends[] = { &pp.report[1], &pp.out[1], &pp.err[1], &pp.sess[1], &pp.in[0] };
	for (size_t i = 0; i < 5; i++)
		if (*child_ends[i] >= 0) {
			close(*child_ends[i]);
			*child_ends[i] = -1;
		}
	char msg[256];
	ssize_t n = read(pp.report[0], msg, sizeof(msg) - 1);
	if (n > 0) {
		msg[n] = '\0';
		waitpid(child, NULL, 0);
		ERR("room %s: %s", r->id, msg);
		goto out_pipes;
	}
	child_fd = (int)syscall(SYS_pidfd_open, child, 0);
	if (child_fd < 0) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
		ERR("room %s: pidfd_open: %s", r->id, strerror(errno));
		goto out_pipes;
	}
	struct collect c = { 0 };
	c.out = (struct stream){ pp.out[0], NULL, 0, 0, r->cfg->output_limit, false };
	c.err = (struct stream){ pp.err[0], NULL, 0, 0, r->cfg->output_limit, false };
	c.sess = (struct stream){ pp.sess[0], NULL, 0, 0, SESSION_MAX, false };
	c.in_fd = pp.in[1];
	c.in_data = q->stdin_data;
	c.in_len = q->stdin_len;
	pp.in[1] = -1;
	fcntl(pp.out[0], F_SETFL, O_NONBLOCK);
	fcntl(pp.err[0], F_SETFL, O_NONBLOCK);
	fcntl(pp.sess[0], F_SETFL, O_NONBLOCK);
	if (c.in_fd >= 0) {
		fcntl(c.in_fd, F_SETFL, O_NONBLOCK);
		if (c.in_len == 0) {
			close(c.in_fd);
			c.in_fd = -1;
		}
	}
	collect(&c, child_fd, child, r, cg, exec_id, q->timeout_ms);
	if (save && !c.timed_out && WIFEXITED(c.status))
		save_session(r, &c.sess);
	*result = make_result(&c.out, &c.err, c.status, c.timed_out, ms_since(&t0), stamp, q->base64);
	free(c.out.buf);
	free(c.err.buf);
	free(c.sess.buf);
	rc = 0;
out_pipes:
	close_pipes(&pp);
out:
	if (child_fd >= 0)
		close(child_fd);
	if (keeper_fd >= 0)
		close(keeper_fd);
	free(ce.session);
	if (ce.extra) {
		for (size_t i = 0; ce.extra[i]; i++)
			free(ce.extra[i]);
		free(ce.extra);
	}
	return rc;
}
