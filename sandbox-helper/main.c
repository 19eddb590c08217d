/* roombox-helper — the only privileged part of roombox.
 *
 * Theory of operation.  roombox-fcgi (user roombox) runs this setuid-root
 * program once per operation and writes one JSON request on its stdin (see
 * common/protocol.h).  Before reading a byte of it, the helper records who
 * called it (real uid/gid, once), refuses callers that are neither root nor in
 * the service group, clears its environment, closes stray descriptors and
 * loads the configuration from the compiled-in path, refusing a file that is
 * not root's or is writable by others.  Then one verb runs:
 *
 *   exec     lock the room, create it if new, start its keeper if none runs
 *            (jail.c), unlock, and run the command (exec.c);
 *   create / status / list / destroy / stop / stop-idle / stop-all / info.
 *
 * A room's processes live in namespaces held by its keeper (PID 1 of the
 * room, keeper/keeper.c).  The helper enters none of them: it hands each
 * exec to the keeper over the room's root-only socket, and the keeper forks
 * the shell, already inside the room, which drops to the room's uid.  The
 * helper prints one JSON object and exits 0, or prints {"error","code"} and
 * exits 1.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "config.h"
#include "exec.h"
#include "jail.h"
#include "minijson.h"
#include "net.h"
#include "protocol.h"
#include "room.h"
#include "roomid.h"

struct caller {
	uid_t uid;
	gid_t gid;
};

struct helper {
	struct caller caller;
	struct config cfg;
	struct cgroup_sys cg;     /* use cgroups(h): detected on first use */
	bool cg_known;
	char err[1024];
	const char *code;        /* protocol error code */
	struct exec_outcome tail;  /* an exec's output, sent after the answer */
};

/* A warm exec never touches a cgroup (the keeper's children inherit the
 * room's), so the hierarchy is only looked at when a verb needs it. */
static const struct cgroup_sys *cgroups(struct helper *h)
{
	if (!h->cg_known) {
		cgroup_detect(&h->cg, "/sys/fs/cgroup");
		cgroup_set_instance(&h->cg, h->cfg.state_dir, "/var/lib/roombox");
		h->cg_known = true;
	}
	return &h->cg;
}

static int fail(struct helper *h, const char *code)
{
	h->code = code;
	return -1;
}

/* ---- start-up defences ------------------------------------------------- */

static void sanitize_process(void)
{
	/* nothing the caller blocked may stay blocked (SIGALRM bounds us) */
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	clearenv();
	setenv("PATH", "/usr/sbin:/usr/bin:/sbin:/bin", 1);
	umask(022);
	for (int fd = 0; fd < 3; fd++)
		if (fcntl(fd, F_GETFD) < 0) {
			int n = open("/dev/null", O_RDWR);
			if (n != fd)
				_exit(125);
		}
	syscall(SYS_close_range, 3, ~0U, 0);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGCHLD, SIG_DFL);
	signal(SIGALRM, SIG_DFL);
}

/* The service group is the group that owns this program (installed
 * root:roombox 4754): no name lookup, so no NSS code runs in a setuid
 * binary, and the binary can be static. */
static bool caller_in_service_group(const struct caller *c)
{
	struct stat st;
	if (c->uid == 0)
		return true;
	if (stat("/proc/self/exe", &st) < 0 || st.st_gid == 0)
		return false;
	if (c->gid == st.st_gid)
		return true;
	gid_t groups[256];
	int n = getgroups(256, groups);
	for (int i = 0; i < n; i++)
		if (groups[i] == st.st_gid)
			return true;
	return false;
}

static int load_config(struct helper *h, const char *path)
{
	int fd = openat(AT_FDCWD, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);  /* see open_in */
	struct stat st;
	if (fd < 0) {
		snprintf(h->err, sizeof(h->err), "configuration %s: %s", path, strerror(errno));
		return fail(h, HELPER_ERR_DENIED);
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022)) {
		close(fd);
		snprintf(h->err, sizeof(h->err),
			 "configuration %s: refusing a file that is not root's or is group/world-writable", path);
		return fail(h, HELPER_ERR_DENIED);
	}
	char *text = malloc((size_t)st.st_size + 1);
	ssize_t n = text ? read(fd, text, (size_t)st.st_size) : -1;
	close(fd);
	if (n < 0) {
		free(text);
		snprintf(h->err, sizeof(h->err), "configuration %s: read failed", path);
		return fail(h, HELPER_ERR_DENIED);
	}
	text[n] = '\0';
	config_defaults(&h->cfg);
	int rc = config_parse(&h->cfg, path, text, h->err, sizeof(h->err));
	free(text);
	return rc < 0 ? fail(h, HELPER_ERR_DENIED) : 0;
}

/* The request document; *doc owns it.  NULL (error set) unless it is one
 * JSON object of at most HELPER_REQUEST_MAX bytes. */
static const struct mj_value *read_request(struct helper *h, struct mj_doc **doc)
{
	size_t cap = 65536, len = 0;
	char *buf = malloc(cap);
	ssize_t n;
	*doc = NULL;
	while (buf && (n = read(0, buf + len, cap - len)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		len += (size_t)n;
		if (len == cap) {
			if (cap >= HELPER_REQUEST_MAX + 1)
				break;
			cap *= 2;
			char *b = realloc(buf, cap);
			if (!b)
				break;
			buf = b;
		}
	}
	if (!buf || len > HELPER_REQUEST_MAX) {
		free(buf);
		snprintf(h->err, sizeof(h->err), "request larger than %u bytes", HELPER_REQUEST_MAX);
		fail(h, HELPER_ERR_INVALID);
		return NULL;
	}
	char why[128];
	*doc = mj_parse(buf, len, why, sizeof(why));
	free(buf);
	if (!*doc || mj_root(*doc)->type != MJ_OBJECT) {
		snprintf(h->err, sizeof(h->err), "request is not a JSON object%s%s", *doc ? "" : ": ", *doc ? "" : why);
		fail(h, HELPER_ERR_INVALID);
		return NULL;
	}
	return mj_root(*doc);
}

/* ---- verbs ------------------------------------------------------------- */

static int open_room(struct helper *h, const struct mj_value *req, struct room *r)
{
	const char *id = mj_get_str(req, HK_ROOM);
	if (!id || !room_id_valid(id)) {
		snprintf(h->err, sizeof(h->err), "invalid room id");
		return fail(h, HELPER_ERR_INVALID);
	}
	if (room_init(r, &h->cfg, id) < 0) {
		snprintf(h->err, sizeof(h->err), "room %s: path too long", id);
		return fail(h, HELPER_ERR_INVALID);
	}
	return 0;
}

/* Room locked exclusively; make it exist and run.  Returns keeper pid. */
static pid_t ensure_running(struct helper *h, struct room *r, bool create)
{
	int found = room_load(r, h->err, sizeof(h->err));
	if (found < 0)
		return fail(h, HELPER_ERR_FAILED);
	if (!found && !create) {
		snprintf(h->err, sizeof(h->err), "room not found");
		return fail(h, HELPER_ERR_NOT_FOUND);
	}
	if (!found) {
		int rc = room_create(r, h->err, sizeof(h->err));
		if (rc < 0)
			return fail(h, rc == ROOM_ELIMIT ? HELPER_ERR_LIMIT : HELPER_ERR_FAILED);
	}
	pid_t keeper = room_keeper_pid(r);
	if (keeper > 0)
		return keeper;
	keeper = jail_start(r, cgroups(h), h->err, sizeof(h->err));
	return keeper < 0 ? fail(h, HELPER_ERR_FAILED) : keeper;
}

/* <status> of common/protocol.h: facts only (roombox-fcgi names the
 * sandbox, formats the times and nests the usage). */
static void room_status(struct helper *h, struct room *r, struct mj_writer *out)
{
	bool running = room_keeper_pid(r) > 0;
	uint64_t mem = 0, procs = 0;
	if (running)
		cgroup_room_usage(cgroups(h), r->id, &mem, &procs);
	mjw_object_begin(out);
	mjw_key(out, HK_ROOM);
	mjw_cstring(out, r->id);
	mjw_key(out, HK_RUNNING);
	mjw_bool(out, running);
	mjw_key(out, HK_CREATED_AT);
	mjw_cstring(out, r->created_at);
	mjw_key(out, HK_LAST_ACTIVE_MS);
	mjw_int(out, room_last_active_ms(r));
	mjw_key(out, HK_DISK_BYTES);
	mjw_int(out, (int64_t)room_disk_usage(r));
	mjw_key(out, HK_MEMORY_BYTES);
	mjw_int(out, (int64_t)mem);
	mjw_key(out, HK_PROCESSES);
	mjw_int(out, (int64_t)procs);
	mjw_object_end(out);
}

static int exec_request_parse(struct helper *h, const struct mj_value *req, struct exec_request *q)
{
	const struct mj_value *v;
	memset(q, 0, sizeof(*q));
	q->cmd = mj_get_str(req, HK_CMD);
	if (!q->cmd || !*q->cmd) {
		snprintf(h->err, sizeof(h->err), "cmd missing");
		return fail(h, HELPER_ERR_INVALID);
	}
	q->timeout_ms = h->cfg.exec_timeout_ms;
	if ((v = mj_get(req, HK_TIMEOUT_MS))) {
		if (v->type != MJ_NUMBER || !v->is_int || v->integer <= 0 ||
		    (uint64_t)v->integer > h->cfg.exec_timeout_max_ms) {
			snprintf(h->err, sizeof(h->err), "timeout_ms out of range");
			return fail(h, HELPER_ERR_INVALID);
		}
		q->timeout_ms = (uint64_t)v->integer;
	}
	if ((v = mj_get(req, HK_ENV)) && v->type == MJ_OBJECT) {
		for (size_t i = 0; i < v->len; i++)
			if (v->members[i].value.type != MJ_STRING || !v->members[i].key_len) {
				snprintf(h->err, sizeof(h->err), "env values must be strings");
				return fail(h, HELPER_ERR_INVALID);
			}
		q->env = v;
	}
	q->cwd = mj_get_str(req, HK_CWD);
	if (q->cwd && q->cwd[0] != '/') {
		snprintf(h->err, sizeof(h->err), "cwd must be absolute");
		return fail(h, HELPER_ERR_INVALID);
	}
	if ((v = mj_get(req, HK_STDIN)) && v->type == MJ_STRING) {
		q->stdin_data = v->str;
		q->stdin_len = v->len;
	}
	return 0;
}

static int stop_room(struct helper *h, struct room *r);

/* Every verb writes its answer object to out and returns 0, or returns -1
 * with h->err and h->code set (whatever it wrote is then dropped). */

/* A warm room is one whose keeper answers on its socket: then the exec
 * needs nothing else of the room's state (the keeper knows the room's uid),
 * so no meta, keeper record or /proc is read.  Otherwise the room is
 * loaded, created if new, and its keeper started. */
static int verb_exec(struct helper *h, const struct mj_value *req, struct mj_writer *out)
{
	struct room r;
	struct exec_request q;
	if (open_room(h, req, &r) < 0 || exec_request_parse(h, req, &q) < 0)
		return -1;
	/* The last line of defence against waiting forever (the exec's own
	 * deadline is the keeper's): roombox-fcgi cannot kill a setuid helper. */
	alarm((unsigned)(q.timeout_ms / 1000) + 120);
	struct exec_job *job = exec_prepare(&r, &q, h->err, sizeof(h->err));
	if (!job)
		return fail(h, HELPER_ERR_FAILED);
	int rc = -1;
	for (int attempt = 0; attempt < 2 && rc != 0; attempt++) {
		if (room_lock(&r, true, h->err, sizeof(h->err)) < 0)
			break;
		if (attempt == 0 && room_state_check(&r, h->err, sizeof(h->err)) < 0) {
			room_unlock(&r);
			break;
		}
		int conn = exec_connect(&r);
		/* a second attempt: the keeper died or hung under the first one.
		 * If another exec has not replaced it meanwhile (it answers),
		 * make sure it is gone before starting another. */
		if (attempt > 0 && conn < 0)
			stop_room(h, &r);
		if (conn < 0) {
			if (ensure_running(h, &r, true) <= 0) {
				room_unlock(&r);
				exec_job_free(job);
				return -1;
			}
			conn = exec_connect(&r);
		}
		if (conn < 0) {
			/* alive but not answering: the next attempt replaces it */
			snprintf(h->err, sizeof(h->err), "room %s: its keeper does not answer", r.id);
			room_unlock(&r);
			continue;
		}
		int busy = room_busy_enter(&r);
		room_unlock(&r);
		rc = exec_run(&r, conn, job, &q, &h->tail, h->err, sizeof(h->err));
		room_touch_active(&r);
		if (busy >= 0)
			close(busy);
		if (rc != 0 && rc != EXEC_KEEPER_GONE)
			break;
	}
	exec_job_free(job);
	if (rc != 0)
		return fail(h, HELPER_ERR_FAILED);
	const struct exec_outcome *o = &h->tail;
	mjw_object_begin(out);
	mjw_key(out, HK_WAIT_STATUS);
	mjw_int(out, o->wait_status);
	mjw_key(out, HK_TIMED_OUT);
	mjw_bool(out, o->timed_out);
	mjw_key(out, HK_STDOUT_BYTES);
	mjw_int(out, (int64_t)o->out_len);
	mjw_key(out, HK_STDERR_BYTES);
	mjw_int(out, (int64_t)o->err_len);
	mjw_key(out, HK_STDOUT_TRUNCATED);
	mjw_bool(out, o->out_truncated);
	mjw_key(out, HK_STDERR_TRUNCATED);
	mjw_bool(out, o->err_truncated);
	mjw_key(out, HK_DURATION_US);
	mjw_int(out, (int64_t)o->duration_us);
	mjw_key(out, HK_STARTED_MS);
	mjw_int(out, o->started_ms);
	mjw_object_end(out);
	return 0;
}

static int verb_create(struct helper *h, const struct mj_value *req, struct mj_writer *out)
{
	struct room r;
	if (open_room(h, req, &r) < 0 || room_lock(&r, true, h->err, sizeof(h->err)) < 0)
		return -1;
	int rc = ensure_running(h, &r, true) > 0 ? 0 : -1;
	if (rc == 0)
		room_status(h, &r, out);
	room_unlock(&r);
	return rc;
}

static int verb_status(struct helper *h, const struct mj_value *req, struct mj_writer *out)
{
	struct room r;
	if (open_room(h, req, &r) < 0)
		return -1;
	int found = room_load(&r, h->err, sizeof(h->err));
	if (found <= 0) {
		if (found == 0)
			snprintf(h->err, sizeof(h->err), "room not found");
		return fail(h, found == 0 ? HELPER_ERR_NOT_FOUND : HELPER_ERR_FAILED);
	}
	room_status(h, &r, out);
	return 0;
}

struct list_walk {
	struct helper *h;
	struct mj_writer *out;
};

static int add_status(const char *id, void *arg)
{
	struct list_walk *l = arg;
	struct room r;
	char err[256];
	if (room_init(&r, &l->h->cfg, id) == 0 && room_load(&r, err, sizeof(err)) == 1)
		room_status(l->h, &r, l->out);
	return 0;
}

static int verb_list(struct helper *h, const struct mj_value *req, struct mj_writer *out)
{
	struct list_walk l = { h, out };
	mjw_object_begin(out);
	mjw_key(out, HK_ROOMS);
	mjw_array_begin(out);
	room_foreach(&h->cfg, add_status, &l);
	mjw_array_end(out);
	mjw_object_end(out);
	return 0;
}

/* Stop one room (locked by the caller); files and session stay. */
static int stop_room(struct helper *h, struct room *r)
{
	pid_t keeper = room_keeper_pid(r);
	if (keeper <= 0)
		return 0;
	return jail_stop(r, cgroups(h), keeper, h->err, sizeof(h->err));
}

static void answer_flag(struct mj_writer *out, const char *key)
{
	mjw_object_begin(out);
	mjw_key(out, key);
	mjw_bool(out, true);
	mjw_object_end(out);
}

static int verb_stop(struct helper *h, const struct mj_value *req, struct mj_writer *out)
{
	struct room r;
	if (open_room(h, req, &r) < 0 || room_lock(&r, true, h->err, sizeof(h->err)) < 0)
		return -1;
	int rc = stop_room(h, &r);
	room_unlock(&r);
	if (rc < 0)
		return fail(h, HELPER_ERR_FAILED);
	answer_flag(out, HK_STOPPED);
	return 0;
}

/* room_foreach: stop at a room other than arg */
static int other_room(const char *id, void *arg)
{
	return strcmp(id, arg) != 0;
}

static int verb_destroy(struct helper *h, const struct mj_value *req, struct mj_writer *out)
{
	struct room r;
	if (open_room(h, req, &r) < 0 || room_lock(&r, true, h->err, sizeof(h->err)) < 0)
		return -1;
	char err[256];
	room_load(&r, err, sizeof(err));   /* for its slot; absent is fine */
	/* a keeper that died by itself left its network's firewall elements */
	bool net_left = r.slot >= 0 && room_keeper_pid(&r) <= 0;
	int rc = stop_room(h, &r);
	if (rc == 0 && net_left)
		rc = net_room_down(&r, h->err, sizeof(h->err));
	if (rc == 0)
		rc = cgroup_room_remove(cgroups(h), r.id, h->err, sizeof(h->err));
	if (rc == 0) {
		int lock = room_state_lock(&h->cfg);
		cgroup_group_remove_if_empty(cgroups(h));
		if (room_foreach(&h->cfg, other_room, r.id) == 0)
			net_instance_remove(&h->cfg);
		if (lock >= 0)
			close(lock);
	}
	if (rc == 0)
		rc = room_remove_files(&r, h->err, sizeof(h->err));
	if (rc == 0)
		room_slot_release(&r);
	room_unlock(&r);
	if (rc < 0)
		return fail(h, HELPER_ERR_FAILED);
	answer_flag(out, HK_DESTROYED);
	return 0;
}

struct stop_many {
	struct helper *h;
	struct mj_writer *out;
	bool idle_only;
};

static int stop_if_due(const char *id, void *arg)
{
	struct stop_many *s = arg;
	struct room r;
	char err[256];
	if (room_init(&r, &s->h->cfg, id) < 0 || room_keeper_pid(&r) <= 0)
		return 0;
	if (s->idle_only) {
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		int64_t now_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
		if (now_ms - room_last_active_ms(&r) < (int64_t)s->h->cfg.idle_timeout_ms || room_is_busy(&r))
			return 0;
	}
	if (room_lock(&r, true, err, sizeof(err)) < 0)
		return 0;
	if (room_load(&r, err, sizeof(err)) == 1 && stop_room(s->h, &r) == 0)
		mjw_cstring(s->out, id);
	room_unlock(&r);
	return 0;
}

static int verb_stop_many(struct helper *h, bool idle_only, struct mj_writer *out)
{
	struct stop_many s = { h, out, idle_only };
	mjw_object_begin(out);
	mjw_key(out, HK_STOPPED);
	mjw_array_begin(out);
	if (!idle_only || h->cfg.idle_timeout_ms > 0)
		room_foreach(&h->cfg, stop_if_due, &s);
	if (!idle_only) {
		/* the service stops: the instance's firewall table goes too */
		int lock = room_state_lock(&h->cfg);
		net_instance_remove(&h->cfg);
		if (lock >= 0)
			close(lock);
	}
	mjw_array_end(out);
	mjw_object_end(out);
	return 0;
}

static int verb_info(struct helper *h, struct mj_writer *out)
{
	mjw_object_begin(out);
	mjw_key(out, HK_CGROUP);
	mjw_cstring(out, cgroup_mode_name(cgroups(h)->mode));
	mjw_key(out, HK_VERSION);
	mjw_cstring(out, ROOMBOX_VERSION);
	mjw_key(out, HK_NETWORK);
	mjw_cstring(out, h->cfg.network == NETWORK_EGRESS ? "egress" : "none");
	if (h->cfg.network == NETWORK_EGRESS) {
		uint32_t dns[CONFIG_LIST_MAX];
		int unusable;
		int n = net_dns_servers(&h->cfg, dns, CONFIG_LIST_MAX, &unusable);
		mjw_key(out, HK_DNS);
		mjw_array_begin(out);
		for (int i = 0; i < n; i++) {
			char a[16];
			snprintf(a, sizeof(a), "%u.%u.%u.%u", dns[i] >> 24, (dns[i] >> 16) & 255,
				 (dns[i] >> 8) & 255, dns[i] & 255);
			mjw_cstring(out, a);
		}
		mjw_array_end(out);
	}
	mjw_object_end(out);
	return 0;
}

static int dispatch(struct helper *h, const struct mj_value *req, struct mj_writer *out)
{
	const char *op = mj_get_str(req, HK_OP);
	if (!op) {
		snprintf(h->err, sizeof(h->err), "request has no op");
		return fail(h, HELPER_ERR_INVALID);
	}
	if (!strcmp(op, HELPER_OP_EXEC))
		return verb_exec(h, req, out);
	if (!strcmp(op, HELPER_OP_CREATE))
		return verb_create(h, req, out);
	if (!strcmp(op, HELPER_OP_STATUS))
		return verb_status(h, req, out);
	if (!strcmp(op, HELPER_OP_LIST))
		return verb_list(h, req, out);
	if (!strcmp(op, HELPER_OP_DESTROY))
		return verb_destroy(h, req, out);
	if (!strcmp(op, HELPER_OP_STOP))
		return verb_stop(h, req, out);
	if (!strcmp(op, HELPER_OP_STOP_IDLE))
		return verb_stop_many(h, true, out);
	if (!strcmp(op, HELPER_OP_STOP_ALL))
		return verb_stop_many(h, false, out);
	if (!strcmp(op, HELPER_OP_INFO))
		return verb_info(h, out);
	snprintf(h->err, sizeof(h->err), "unknown op '%.40s'", op);
	return fail(h, HELPER_ERR_INVALID);
}

/* The answer, its newline and an exec's output in one write where the
 * pipe takes it: the caller wakes once for the whole reply. */
static void emit(const char *s, size_t len, const struct exec_outcome *tail)
{
	struct iovec iov[4] = { { (void *)s, len }, { "\n", 1 },
				{ tail->out, tail->out_len }, { tail->err, tail->err_len } };
	int i = 0;
	while (i < 4) {
		ssize_t n = writev(1, iov + i, 4 - i);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		for (; i < 4 && (size_t)n >= iov[i].iov_len; i++)
			n -= (ssize_t)iov[i].iov_len;
		if (i < 4) {
			iov[i].iov_base = (char *)iov[i].iov_base + n;
			iov[i].iov_len -= (size_t)n;
		}
	}
}

/* Print the answer (rc 0) or the error object; the exit status. */
static int finish(struct helper *h, struct mj_writer *out, int rc)
{
	size_t len = 0;
	char *text = rc == 0 ? mjw_finish(out, &len) : NULL;
	if (rc == 0 && !text) {
		snprintf(h->err, sizeof(h->err), "answer could not be built (out of memory)");
		fail(h, HELPER_ERR_FAILED);
	}
	mjw_free(out);
	if (!text) {
		exec_outcome_free(&h->tail);   /* an error has no tail */
		h->tail.out_len = h->tail.err_len = 0;
		mjw_object_begin(out);
		mjw_key(out, HK_ERROR);
		mjw_cstring(out, h->err[0] ? h->err : "unknown failure");
		mjw_key(out, HK_CODE);
		mjw_cstring(out, h->code ? h->code : HELPER_ERR_FAILED);
		mjw_object_end(out);
		text = mjw_finish(out, &len);
		rc = -1;
	}
	if (text)
		emit(text, len, &h->tail);
	free(text);
	exec_outcome_free(&h->tail);
	return rc == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	static struct helper h;
	static struct mj_writer out;
	mjw_init(&out);
	h.caller.uid = getuid();
	h.caller.gid = getgid();
	sanitize_process();

	if (geteuid() != 0) {
		snprintf(h.err, sizeof(h.err), "roombox-helper must be setuid root (effective uid is %u)",
			 (unsigned)geteuid());
		return finish(&h, &out, fail(&h, HELPER_ERR_DENIED));
	}
	if (!caller_in_service_group(&h.caller)) {
		snprintf(h.err, sizeof(h.err), "caller uid %u is neither root nor in the service group "
			 "(the group that owns roombox-helper)", (unsigned)h.caller.uid);
		return finish(&h, &out, fail(&h, HELPER_ERR_DENIED));
	}
	const char *conf = ROOMBOX_CONF;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-c") && i + 1 < argc) {
			conf = argv[++i];
			continue;
		}
		snprintf(h.err, sizeof(h.err), "usage: roombox-helper [-c CONFIG] < request.json");
		return finish(&h, &out, fail(&h, HELPER_ERR_INVALID));
	}
	if (strcmp(conf, ROOMBOX_CONF) != 0 && h.caller.uid != 0) {
		snprintf(h.err, sizeof(h.err), "-c %s: only root may name another configuration", conf);
		return finish(&h, &out, fail(&h, HELPER_ERR_DENIED));
	}
	/* Everything below runs with real uid 0 so the kernel treats the
	 * helper's children as root's, not the caller's. */
	/* raw calls: libc's wrappers would first synchronise threads we do
	 * not have (six extra system calls each) */
	if (syscall(SYS_setresgid, 0, 0, 0) < 0 || syscall(SYS_setresuid, 0, 0, 0) < 0) {
		snprintf(h.err, sizeof(h.err), "setresuid: %s", strerror(errno));
		return finish(&h, &out, fail(&h, HELPER_ERR_DENIED));
	}
	if (load_config(&h, conf) < 0)
		return finish(&h, &out, -1);
	struct mj_doc *doc;
	const struct mj_value *req = read_request(&h, &doc);
	int rc = !req ? -1
		: room_dirs_prepare(&h.cfg, h.err, sizeof(h.err)) < 0 ? fail(&h, HELPER_ERR_FAILED)
		: dispatch(&h, req, &out);
	mj_free(doc);
	return finish(&h, &out, rc);
}
