/* /api/rooms/{id}/sandbox/processes: managed processes -- the
 * routes, and starting and signalling them.
 *
 * Theory of operation
 * -------------------
 * A managed process is started by one short exec in the room (passed I/O,
 * common/protocol.h): roombox-fcgi makes three pipes (stdin, stdout,
 * stderr), the helper hands their room ends to the keeper, and the keeper
 * starts the exec detached (common/protocol.h): its shell in a session of
 * its own, the exec answered at once.  So the exec answers in milliseconds,
 * its deadline never reaches the process, and nothing of the room (its
 * setsid, say) is waited on.  The shell runs the fixed starter below,
 * which execs the wrapper:
 *
 *   wrapper W  (sh, leader of a new session and process group; not told of
 *               any signal we send, and it outlives any the room sends it
 *               but KILL, so it lives to report the end)
 *     └ C      (sh -c CMD: says "pid" on stderr, then execs CMD itself, so
 *               C's pid is the command's)
 *
 * C's stdin, stdout and stderr are the pipes; roombox-fcgi keeps its ends
 * for as long as they are open: one logger thread (epoll) appends what comes
 * to the process's logs on disk and hands it to live log readers.  W and C
 * tell roombox-fcgi their pid and the end (`$?` of C: 128+signo when a
 * signal ended it) on stderr as lines "\036rbx:<nonce> pid P S" and
 * "\036rbx:<nonce> exit N", the nonce being 32 random hex digits known to
 * this process and to the room only; the logger takes those lines out of the
 * stream.  Pipes that end with no exit line mean W was KILLed with C: by
 * the room's kill-all (`killed`, SIGKILL: the room ran on) or by the room
 * stopping under them (`lost`; so too across a restart of roombox-fcgi).
 *
 * Signals go by another short exec, the keeper's signal tool, which
 * signals every process of W's session but W (its tree: what a process
 * starts stays in its session unless it makes one of its own with
 * setsid), no program of the room's; after TERM (or
 * any signal but KILL) a timer sends KILL 5 s later if the process still
 * runs.  The idle stop leaves a room with a running managed process alone
 * (stop-idle's keep list).
 *
 * The parts, one job a file:
 *   processes.c      this file: the routes, the request's checks, starting
 *                    a process (the starter exec) and signalling its tree;
 *   process_store.c  the one list of processes behind procs_lock, and the
 *                    records on disk (<state_dir>/processes/<room>/<id>.json),
 *                    the last PROCS_ENDED_MAX ended ones of a room kept;
 *   process_log.c    the logger thread: logs on disk (the last log_max
 *                    bytes of each stream), live log readers, the end;
 *   process_scan.c   the control lines taken out of the stderr stream.
 * `procs_changed` is broadcast whenever a process gets output, its pid or
 * its end: live log readers and requests waiting for a pid or an end wait
 * on it. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "exec_pump.h"
#include "http.h"
#include "metrics.h"
#include "process_log.h"
#include "process_store.h"
#include "processes.h"
#include "protocol.h"
#include "roomid.h"
#include "shquote.h"
#include "validate.h"

#define KILL_GRACE_S 5
#define START_TIMEOUT_MS 10000     /* the starter's exec: it ends at once */
#define PID_WAIT_MS 5000           /* POST waits this long for the pid */
#define STDIN_WAIT_MS 30000

int procs_init(struct app *app, char *err, size_t errlen)
{
	if (proc_store_load(app->cfg.state_dir, err, errlen) < 0)
		return -1;
	return proc_logger_start(app, err, errlen);
}

static int ignore_event(void *ctx, json_object *ev)
{
	(void)ctx;
	(void)ev;
	return 0;
}

/* The signals a DELETE may send, by name. */
static const struct { const char *name; int sig; } signals[] = {
	{ "TERM", SIGTERM }, { "KILL", SIGKILL }, { "INT", SIGINT }, { "HUP", SIGHUP },
	{ "QUIT", SIGQUIT }, { "USR1", SIGUSR1 }, { "USR2", SIGUSR2 }, { "STOP", SIGSTOP },
	{ "CONT", SIGCONT },
};

static int signal_number(const char *name)
{
	for (size_t i = 0; i < sizeof(signals) / sizeof(signals[0]); i++)
		if (!strcmp(signals[i].name, name))
			return signals[i].sig;
	return 0;
}

/* Signal every process of session sid but sid itself (the wrapper, which
 * then reports the end): the keeper's signal tool, so nothing of the
 * room's (its shell, its kill) is waited on.  A room that no longer
 * exists is not made again for it. */
static int signal_session(struct app *app, const char *room, long sid, const char *sig,
			  struct helper_error *err)
{
	char sid_text[24], sig_text[8];
	const char *argv[] = { TOOL_SIGNAL, sid_text, sig_text, NULL };
	struct exec_request ex = { .cmd = TOOL_SIGNAL, .cmd_len = strlen(TOOL_SIGNAL),
				   .timeout_ms = START_TIMEOUT_MS,
				   /* the room's root may signal both its users' processes */
				   .user = HK_USER_ROOT };
	struct exec_sink sink = { .event = ignore_event, .tool = argv, .existing = true };
	json_object *res;

	snprintf(sid_text, sizeof(sid_text), "%ld", sid);
	snprintf(sig_text, sizeof(sig_text), "%d", signal_number(sig));
	res = exec_pump_in_room(app, room, &ex, &sink, err);
	json_object_put(res);
	return res ? 0 : -1;
}

/* ---- POST …/processes ---- */

/* W and C (see the top of this file); $1 nonce, $2 the command, $3 C's
 * script.  W outlives any signal but KILL (and STOP) sent to it from
 * inside the room: caught, so C starts with them at their defaults, and
 * taken after C's end.  So a wrapper that dies without a word was KILLed
 * (process_log.c's pipes_ended counts on it). */
static const char WRAPPER[] =
	"trap : HUP INT QUIT ALRM TERM USR1 USR2\n"
	"/bin/sh -c \"$3\" roombox-process \"$1\" \"$2\"; s=$?\n"
	"printf '\\036rbx:%s exit %d\\n' \"$1\" \"$s\" >&2\n";
static const char INNER[] =
	"printf '\\036rbx:%s pid %d %d\\n' \"$1\" \"$$\" \"$PPID\" >&2; exec /bin/sh -c \"$2\"";

/* The detached exec's command (the keeper has put its shell in a session
 * of its own, common/protocol.h's detach): no session to save, fd 9
 * closed, the request's cwd (a cd that fails ends the process with 1, as
 * an exec with that cwd would), then W.  NULL with errbuf set. */
static char *starter(const char *nonce, const char *cmd, size_t cmd_len, const char *cwd,
		     char *errbuf, size_t errlen)
{
	char *w = shquote_alloc(WRAPPER, strlen(WRAPPER), errbuf, errlen);
	char *c = w ? shquote_alloc(cmd, cmd_len, errbuf, errlen) : NULL;
	char *i = c ? shquote_alloc(INNER, strlen(INNER), errbuf, errlen) : NULL;
	char *d = i && cwd ? shquote_alloc(cwd, strlen(cwd), errbuf, errlen) : NULL, *s = NULL;

	if (i && (!cwd || d) &&
	    asprintf(&s, "trap - EXIT; exec 9>&-\n%s%s%s%s%s"
		     "exec /bin/sh -c %s roombox-process %s %s %s", d ? "cd -- " : "", d ? d : "",
		     d ? " || { printf '\\036rbx:%s exit 1\\n' " : "", d ? nonce : "",
		     d ? " >&2; exit 1; }\n" : "", w, nonce, c, i) < 0) {
		snprintf(errbuf, errlen, "%s", strerror(errno));
		s = NULL;
	}
	free(w);
	free(c);
	free(i);
	free(d);
	return s;
}

static void make_nonce(char *buf)
{
	unsigned char r[16];
	static const char hex[] = "0123456789abcdef";

	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		for (size_t k = 0; k < sizeof(r); k++)
			r[k] = (unsigned char)(rand() ^ (int)time(NULL));
	for (size_t k = 0; k < sizeof(r); k++) {
		buf[2 * k] = hex[r[k] >> 4];
		buf[2 * k + 1] = hex[r[k] & 15];
	}
	buf[32] = '\0';
}

/* The body's name, user and the fields an exec has; NULL, or the 400
 * answer's details. */
static json_object *validate_start(json_object *body, struct app *app, struct exec_request *ex,
				   const char **name)
{
	static const struct zod_string_rules name_rules = { .min_len = 1,
		.min_msg = "Name cannot be empty", .nul_msg = "Name cannot contain NUL bytes" };
	static const char *const users[] = { "root", "user", NULL };
	json_object *details = validate_exec_request(body, app->cfg.exec_timeout_max_ms, ex);
	const char *user = NULL;

	*name = NULL;
	if (!details)
		details = json_object_new_object();
	if (!json_object_is_type(body, json_type_object))
		return details;
	if (zod_string(details, body, "name", true, &name_rules, name, NULL) && *name &&
	    !room_id_valid(*name))
		zod_issue(details, "name", "Invalid name: letters, digits, '_' and '-', at most 64");
	/* once exec requests carry a user, validate_exec_request checks it */
	if (!json_object_object_get_ex(details, "user", NULL))
		zod_enum(details, body, "user", true, users, &user);
	if (json_object_object_length(details) > 0)
		return details;
	json_object_put(details);
	return NULL;
}

static struct proc *proc_new(const char *room, const char *id, const char *cmd)
{
	struct proc *p = calloc(1, sizeof(*p));

	if (!p || !(p->command = strdup(cmd))) {
		free(p);
		return NULL;
	}
	snprintf(p->room, sizeof(p->room), "%s", room);
	snprintf(p->id, sizeof(p->id), "%s", id);
	p->fd[PROC_OUT] = p->fd[PROC_ERR] = p->in_fd = -1;
	p->status = P_RUNNING;
	proc_now_iso(p->start, sizeof(p->start));
	make_nonce(p->nonce);
	return p;
}

/* Start p's command in the room: the starter exec, then p's pipes go to
 * the logger.  0 with *wait_status the starter's (not 0: its shell failed
 * before the wrapper ran, e.g. no such cwd), or -1 with err set. */
static int launch(struct app *app, const char *room, struct proc *p, const struct exec_request *req,
		  int *wait_status, struct helper_error *err)
{
	struct helper_target target = app_helper(app);
	int in[2] = { -1, -1 }, out[2] = { -1, -1 }, errp[2] = { -1, -1 };
	char cmd_err[160];
	char *cmd = starter(p->nonce, req->cmd, req->cmd_len, req->cwd, cmd_err, sizeof(cmd_err));
	/* the request's env, cwd and user; the starter as its command */
	struct exec_request start = *req;
	struct helper_exec x;
	struct helper_exec_ans ans;
	struct helper_run *run = NULL;
	bool answered = false;
	int status = -1;

	memset(err, 0, sizeof(*err));
	err->http_status = 500;
	if (!cmd) {
		snprintf(err->message, sizeof(err->message), "room %s: process %s: starter: %s", room,
			 p->id, cmd_err);
		goto out;
	}
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0) {
		snprintf(err->message, sizeof(err->message), "room %s: process %s: pipes: %s", room,
			 p->id, strerror(errno));
		goto out;
	}
	start.cmd = cmd;
	start.cmd_len = strlen(cmd);
	start.cwd = NULL;   /* the starter's own cd */
	start.timeout_ms = START_TIMEOUT_MS;
	x = exec_helper_exec(&start);
	x.detach = true;
	int pass[3] = { in[0], out[1], errp[1] };
	if (!exec_slot_take(app)) {
		err->http_status = 503;
		snprintf(err->code, sizeof(err->code), "busy");
		snprintf(err->message, sizeof(err->message), "too many concurrent execs");
		goto out;
	}
	run = helper_exec_start(&target, room, &x, START_TIMEOUT_MS + HELPER_EXEC_GRACE_MS, pass, err);
	proc_close_fd(&in[0]);
	proc_close_fd(&out[1]);
	proc_close_fd(&errp[1]);
	if (run) {
		pthread_mutex_lock(&procs_lock);
		p->fd[PROC_OUT] = out[0];
		p->fd[PROC_ERR] = errp[0];
		p->in_fd = in[1];
		out[0] = errp[0] = in[1] = -1;
		if (proc_logger_watch(p) < 0)
			fprintf(stderr, "roombox-fcgi: room %s: process %s: follow its output: %m\n",
				room, p->id);
		pthread_mutex_unlock(&procs_lock);
		answered = helper_exec_finish(run, &ans, err) == 0;
	}
	exec_slot_give(app);
	if (answered)
		status = ans.wait_status;
	*wait_status = status;
out:
	free(cmd);
	proc_close_fd(&in[0]);
	proc_close_fd(&in[1]);
	proc_close_fd(&out[0]);
	proc_close_fd(&out[1]);
	proc_close_fd(&errp[0]);
	proc_close_fd(&errp[1]);
	return status == -1 ? -1 : 0;
}

/* The starter's shell failed before the wrapper ran (a cwd that does not
 * exist, no setsid in the room): that is the process's end, as an exec
 * with that cwd ends with the shell's status and its message on stderr. */
static void starter_failed(unsigned long serial, int wait_status)
{
	struct proc *p;
	int64_t until = monotonic_ms() + PID_WAIT_MS;

	pthread_mutex_lock(&procs_lock);
	/* its stderr first: the pipes end with the starter */
	while ((p = proc_find_serial(serial)) && (p->fd[PROC_OUT] >= 0 || p->fd[PROC_ERR] >= 0) &&
	       monotonic_ms() < until)
		procs_wait_changed((int)(until - monotonic_ms()));
	if (p && !p->pid) {
		bool was_running = p->status == P_RUNNING;

		proc_set_exit(p, WIFEXITED(wait_status) ? WEXITSTATUS(wait_status)
			 : 128 + WTERMSIG(wait_status));
		if (was_running)
			proc_end(p);
		else
			proc_record_save(p);
	}
	pthread_mutex_unlock(&procs_lock);
}

static void random_id(char *buf, size_t len)
{
	char nonce[33];

	make_nonce(nonce);
	snprintf(buf, len, "proc-%.12s", nonce);
}

void api_procs_start(struct request *rq, struct response *rs)
{
	struct exec_request ex;
	struct helper_error err;
	const char *name;
	char id[ROOM_ID_MAX + 1];
	json_object *details = validate_start(rq->body, rq->app, &ex, &name);
	struct proc *p, *old;
	unsigned long serial;
	int64_t until;
	int wait_status = 0;

	if (details) {
		response_invalid(rs, details);
		return;
	}
	if (name)
		snprintf(id, sizeof(id), "%s", name);
	else
		random_id(id, sizeof(id));
	pthread_mutex_lock(&procs_lock);
	old = proc_find(rq->room, id);
	if (old && old->status == P_RUNNING) {
		pthread_mutex_unlock(&procs_lock);
		response_error(rs, 409, "a process named %s is running in the room", id);
		return;
	}
	if (old && !old->readers && old->fd[PROC_OUT] < 0 && old->fd[PROC_ERR] < 0)
		proc_drop(old);   /* a name used again: the new one replaces the record */
	else if (old) {
		pthread_mutex_unlock(&procs_lock);
		response_error(rs, 409, "process %s has ended but is still followed; try again", id);
		return;
	}
	p = proc_new(rq->room, id, ex.cmd);
	if (!p) {
		pthread_mutex_unlock(&procs_lock);
		response_error(rs, 500, "out of memory");
		return;
	}
	proc_add(p);
	serial = p->serial;
	metrics_processes_running_add(1);
	proc_record_save(p);
	pthread_mutex_unlock(&procs_lock);

	if (launch(rq->app, rq->room, p, &ex, &wait_status, &err) < 0) {
		pthread_mutex_lock(&procs_lock);
		if ((p = proc_find_serial(serial))) {
			if (p->status == P_RUNNING)
				metrics_processes_running_add(-1);
			proc_drop(p);
		}
		pthread_mutex_unlock(&procs_lock);
		exec_answer_error(rs, &err);
		return;
	}
	if (wait_status != 0)
		starter_failed(serial, wait_status);
	/* the 201 carries the pid: C says it within milliseconds */
	pthread_mutex_lock(&procs_lock);
	until = monotonic_ms() + PID_WAIT_MS;
	while ((p = proc_find_serial(serial)) && !p->pid && p->status == P_RUNNING && monotonic_ms() < until)
		procs_wait_changed((int)(until - monotonic_ms()));
	rs->status = 201;
	rs->body = json_object_new_object();
	json_object_object_add(rs->body, "process", p ? proc_json(p) : NULL);
	pthread_mutex_unlock(&procs_lock);
}

/* ---- GET …/processes, GET/DELETE/POST …/processes/{id}[/logs|/stdin] ---- */

void api_procs_list(struct request *rq, struct response *rs)
{
	json_object *list = json_object_new_array();
	size_t n = 0;
	struct proc **v;

	pthread_mutex_lock(&procs_lock);
	v = procs_of_room(rq->room, &n);
	for (size_t i = 0; v && i < n; i++)   /* oldest first */
		json_object_array_add(list, proc_json(v[i]));
	pthread_mutex_unlock(&procs_lock);
	free(v);
	/* none: a room that does not exist is a 404, and is not created */
	if (n == 0 && !room_exists_or_answer(rq, rs)) {
		json_object_put(list);
		return;
	}
	rs->status = 200;
	rs->body = json_object_new_object();
	json_object_object_add(rs->body, "processes", list);
}

/* The {id} of …/processes/{id}[/what]: false (rs set) when none. */
static bool proc_path(struct request *rq, struct response *rs, char *id, size_t idlen,
		      const char **what)
{
	const char *rest = rq->rest ? rq->rest : "";
	size_t n = strcspn(rest, "/");

	*what = rest[n] == '/' ? rest + n + 1 : "";
	if (n == 0 || n >= idlen) {
		response_error(rs, 404, "not found");
		return false;
	}
	memcpy(id, rest, n);
	id[n] = '\0';
	if (!room_id_valid(id)) {
		response_error(rs, 404, "process not found: %s", id);
		return false;
	}
	return true;
}

static void answer_proc(struct response *rs, const struct proc *p)
{
	rs->status = 200;
	rs->body = json_object_new_object();
	json_object_object_add(rs->body, "process", proc_json(p));
}

void api_procs_get(struct request *rq, struct response *rs)
{
	char id[ROOM_ID_MAX + 1];
	const char *what;
	struct proc *p;

	if (!proc_path(rq, rs, id, sizeof(id), &what))
		return;
	if (!strcmp(what, "logs")) {
		proc_logs_answer(rq, rs, id);
		return;
	}
	if (*what) {
		response_error(rs, 404, "not found");
		return;
	}
	pthread_mutex_lock(&procs_lock);
	p = proc_find(rq->room, id);
	if (p)
		answer_proc(rs, p);
	else
		response_error(rs, 404, "process not found: %s", id);
	pthread_mutex_unlock(&procs_lock);
}

/* ---- stdin ---- */

/* Write all of data to fd (non-blocking), waiting for the reader at most
 * STDIN_WAIT_MS in all.  Bytes written; *gone when the reader has closed
 * its end. */
static size_t write_bounded(int fd, const char *data, size_t len, bool *gone)
{
	size_t off = 0;
	int64_t until = monotonic_ms() + STDIN_WAIT_MS;

	while (off < len && monotonic_ms() < until) {
		struct pollfd pf = { fd, POLLOUT, 0 };
		ssize_t k = write(fd, data + off, len - off);

		if (k > 0) {
			off += (size_t)k;
			continue;
		}
		if (k < 0 && errno != EAGAIN && errno != EINTR) {
			*gone = errno == EPIPE;
			break;
		}
		poll(&pf, 1, (int)(until - monotonic_ms() > 0 ? until - monotonic_ms() : 0));
	}
	return off;
}

void api_procs_stdin(struct request *rq, struct response *rs)
{
	char id[ROOM_ID_MAX + 1], flag[8] = "";
	const char *what;
	char *body = NULL;
	size_t len = 0, written = 0;
	bool gone = false, close_it = http_query_value(rq, "close", flag, sizeof(flag)) &&
		(!strcmp(flag, "1") || !strcmp(flag, "true"));
	struct proc *p;
	int fd = -1;

	if (!proc_path(rq, rs, id, sizeof(id), &what))
		return;
	if (strcmp(what, "stdin")) {
		response_error(rs, 404, "not found");
		return;
	}
	if (http_read_body(rq->in, rq->app->cfg.max_body, &body, &len, rs) < 0)
		return;
	pthread_mutex_lock(&procs_lock);
	p = proc_find(rq->room, id);
	if (p && p->in_fd >= 0)
		fd = fcntl(p->in_fd, F_DUPFD_CLOEXEC, 3);
	pthread_mutex_unlock(&procs_lock);
	if (!p) {
		free(body);
		response_error(rs, 404, "process not found: %s", id);
		return;
	}
	if (fd < 0 && (len || !close_it)) {
		free(body);
		response_error(rs, 409, "the stdin of process %s is closed", id);
		return;
	}
	if (fd >= 0) {
		fcntl(fd, F_SETFL, O_NONBLOCK);
		written = write_bounded(fd, body, len, &gone);
		close(fd);
	}
	free(body);
	pthread_mutex_lock(&procs_lock);
	if (close_it && (p = proc_find(rq->room, id)))
		proc_close_fd(&p->in_fd);
	pthread_mutex_unlock(&procs_lock);
	if (gone) {
		response_error(rs, 409, "process %s no longer reads its stdin (took %zu of %zu bytes)",
			       id, written, len);
		return;
	}
	if (written < len) {
		response_error(rs, 504, "process %s took %zu of %zu bytes on its stdin", id, written, len);
		return;
	}
	rs->status = 200;
	rs->body = json_object_new_object();
	json_object_object_add(rs->body, "written", json_object_new_int64((int64_t)written));
	json_object_object_add(rs->body, "closed", json_object_new_boolean(close_it));
}

/* ---- DELETE: signal the tree, KILL 5 s later ---- */

struct later_kill {
	struct app *app;
	char room[ROOM_ID_MAX + 1];
	unsigned long serial;
	long sid;
};

static void *kill_later(void *arg)
{
	struct later_kill *k = arg;
	struct timespec d = { KILL_GRACE_S, 0 };
	struct helper_error err;
	struct proc *p;
	bool due;

	while (nanosleep(&d, &d) < 0 && errno == EINTR)
		;
	pthread_mutex_lock(&procs_lock);
	p = proc_find_serial(k->serial);
	due = p && p->status == P_RUNNING && !p->ending;
	pthread_mutex_unlock(&procs_lock);
	if (due && signal_session(k->app, k->room, k->sid, "KILL", &err) < 0)
		fprintf(stderr, "roombox-fcgi: room %s: process kill: %s\n", k->room, err.message);
	free(k);
	return NULL;
}

/* sig to the tree of the process (serial, its session sid); KILL follows
 * KILL_GRACE_S later after any signal but KILL, STOP and CONT.  0, or -1
 * with err set. */
static int signal_tree(struct app *app, const char *room, unsigned long serial, long sid,
		       const char *sig, struct helper_error *err)
{
	struct later_kill *k;
	pthread_t t;
	pthread_attr_t a;

	if (signal_session(app, room, sid, sig, err) < 0)
		return -1;
	if (!strcmp(sig, "KILL") || !strcmp(sig, "STOP") || !strcmp(sig, "CONT") ||
	    !(k = calloc(1, sizeof(*k))))
		return 0;
	*k = (struct later_kill){ app, "", serial, sid };
	snprintf(k->room, sizeof(k->room), "%s", room);
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &a, kill_later, k) != 0)
		free(k);
	pthread_attr_destroy(&a);
	return 0;
}

void api_procs_delete(struct request *rq, struct response *rs)
{
	char id[ROOM_ID_MAX + 1], sig[16] = "TERM";
	const char *what, *name;
	struct helper_error err;
	struct proc *p;
	unsigned long serial = 0;
	long sid = 0;
	bool ending = false;
	int64_t until;

	if (!proc_path(rq, rs, id, sizeof(id), &what))
		return;
	if (*what) {
		response_error(rs, 404, "not found");
		return;
	}
	http_query_value(rq, "signal", sig, sizeof(sig));
	name = strncmp(sig, "SIG", 3) == 0 ? sig + 3 : sig;
	if (!signal_number(name)) {
		response_error(rs, 400, "invalid signal: %s (one of TERM, KILL, INT, HUP, QUIT, "
			       "USR1, USR2, STOP, CONT)", sig);
		return;
	}
	pthread_mutex_lock(&procs_lock);
	p = proc_find(rq->room, id);
	if (p && p->status == P_RUNNING && p->sid > 0) {
		serial = p->serial;
		sid = p->sid;
		ending = p->ending;   /* its end is being told: nothing to signal */
	}
	if (!p)
		response_error(rs, 404, "process not found: %s", id);
	else if (!serial)
		answer_proc(rs, p);   /* ended already: nothing to signal */
	pthread_mutex_unlock(&procs_lock);
	if (!serial)
		return;
	if (!ending && signal_tree(rq->app, rq->room, serial, sid, name, &err) < 0) {
		exec_answer_error(rs, &err);
		return;
	}
	/* answer with the end when it comes soon (a second at most) */
	pthread_mutex_lock(&procs_lock);
	until = monotonic_ms() + 1000;
	while ((p = proc_find_serial(serial)) && p->status == P_RUNNING && monotonic_ms() < until &&
	       strcmp(name, "STOP") && strcmp(name, "CONT"))
		procs_wait_changed((int)(until - monotonic_ms()));
	if (p)
		answer_proc(rs, p);
	else
		response_error(rs, 404, "process not found: %s", id);
	pthread_mutex_unlock(&procs_lock);
}
