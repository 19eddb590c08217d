/* roombox-helper — the only privileged part of roombox.
 *
 * Theory of operation.  roombox-fcgi (user roombox) runs this setuid-root
 * program once per operation and writes one request record on its stdin
 * (common/protocol.h).  Before reading a byte of it, the helper records who
 * called it (real uid/gid, once), refuses callers that are neither root nor in
 * the service group, clears its environment, closes stray descriptors and
 * loads the configuration from the compiled-in path, refusing a file that is
 * not root's or is writable by others.  Then the request is read, bounded,
 * and checked whole (request.c) before anything is done, and one operation
 * of the table below (OPS) runs: the dispatcher opens, locks, creates the
 * room as the table says, drops what root does not need for it, runs it, and
 * unlocks.  No general parser and no allocator of its own run here: a
 * request is fixed records and counted strings, used where they lie.
 *
 * A room's processes live in namespaces held by its keeper (PID 1 of the
 * room, keeper/keeper.c).  The helper enters none of them: it hands each
 * exec to the keeper over the room's root-only socket, and the keeper forks
 * the shell, already inside the room, which drops to the room's uid.  The
 * helper writes one answer record and exits 0, or an error record and exits
 * 1.  With an operation on its command line (for scripts) it answers in
 * text instead.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <linux/capability.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "config.h"
#include "exec.h"
#include "fdpass.h"
#include "hostmask.h"
#include "jail.h"
#include "helper_rec.h"
#include "nsprocs.h"
#include "portconn.h"
#include "net.h"
#include "protocol.h"
#include "request.h"
#include "room.h"
#include "roomid.h"
#include "snapshot.h"
#include "transfer.h"

struct caller {
	uid_t uid;
	gid_t gid;
};

struct helper {
	struct caller caller;
	struct config cfg;
	struct cgroup_sys cg;     /* use cgroups(h): detected on first use */
	bool cg_known;
	char err[HELPER_ERROR_MAX];
	uint32_t code;           /* protocol error code, HELPER_E_* */
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

static int fail(struct helper *h, uint32_t code)
{
	h->code = code;
	return -1;
}

/* ---- start-up defences ------------------------------------------------- */

/* fds 3, 4, 5 as the caller passed them for an exec's I/O (passed I/O): kept only
 * when each is a pipe open the right way (3 to read, 4 and 5 to write) or,
 * for stdout (4), a unix stream socket (a download's), and
 * close-on-exec, so no keeper or jail inherits them. */
#define PASSED_IO 3
static int passed_io[PASSED_IO] = { -1, -1, -1 };
/* fd 3 as a unix stream socket instead: where port-connect sends its
 * connection (the only op that uses it). */
static int passed_sock = -1;
/* fd 5 as a pipe's read end instead: import's sessions (the only op that
 * uses it; an exec's stderr is a write end) */
static int passed_in2 = -1;

static bool is_unix_stream(int fd)
{
	int v = 0;
	socklen_t len = sizeof(v);
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &len) < 0 || v != AF_UNIX)
		return false;
	len = sizeof(v);
	return getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &len) == 0 && v == SOCK_STREAM;
}

/* /dev/null, as the stdin of a command given no input */
static bool is_dev_null(const struct stat *st)
{
	return S_ISCHR(st->st_mode) && major(st->st_rdev) == 1 && minor(st->st_rdev) == 3;
}

static void keep_passed_io(void)
{
	for (int i = 0; i < PASSED_IO; i++) {
		int fd = 3 + i, fl = fcntl(fd, F_GETFL);
		struct stat st;
		if (fl < 0)
			continue;
		if (i == 0 && fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode) && is_unix_stream(fd) &&
		    fcntl(fd, F_SETFD, FD_CLOEXEC) == 0) {
			passed_sock = fd;
			continue;
		}
		if (i == 2 && fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode) && (fl & O_ACCMODE) == O_RDONLY &&
		    fcntl(fd, F_SETFD, FD_CLOEXEC) == 0) {
			passed_in2 = fd;
			continue;
		}
		if (fstat(fd, &st) == 0 &&
		    ((S_ISFIFO(st.st_mode) && (fl & O_ACCMODE) == (i == 0 ? O_RDONLY : O_WRONLY)) ||
		     (i == 0 && is_dev_null(&st) && (fl & O_ACCMODE) == O_RDONLY) ||
		     (i == 1 && S_ISSOCK(st.st_mode) && is_unix_stream(fd))) &&
		    fcntl(fd, F_SETFD, FD_CLOEXEC) == 0)
			passed_io[i] = fd;
		else
			close(fd);
	}
}

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
	syscall(SYS_close_range, 3 + PASSED_IO, ~0U, 0);
	keep_passed_io();
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
		return fail(h, HELPER_E_DENIED);
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022)) {
		close(fd);
		snprintf(h->err, sizeof(h->err),
			 "configuration %s: refusing a file that is not root's or is group/world-writable", path);
		return fail(h, HELPER_E_DENIED);
	}
	char *text = malloc((size_t)st.st_size + 1);
	ssize_t n = text ? read(fd, text, (size_t)st.st_size) : -1;
	close(fd);
	if (n < 0) {
		free(text);
		snprintf(h->err, sizeof(h->err), "configuration %s: read failed", path);
		return fail(h, HELPER_E_DENIED);
	}
	text[n] = '\0';
	config_defaults(&h->cfg);
	int rc = config_parse(&h->cfg, path, text, h->err, sizeof(h->err));
	free(text);
	return rc < 0 ? fail(h, HELPER_E_DENIED) : 0;
}

/* ---- answers ------------------------------------------------------------- */

/* The answer record being built: struct helper_ans, then the op's record
 * (and, for list and the stops, its entries).  Its header is filled in by
 * finish. */
struct answer {
	char *buf;
	size_t len, cap;
	bool failed;
};

static void *answer_put(struct answer *a, const void *p, size_t len)
{
	if (a->failed)
		return NULL;
	if (a->len + len > a->cap) {
		size_t cap = a->cap ? a->cap : 4096;
		while (cap < a->len + len)
			cap *= 2;
		char *n = realloc(a->buf, cap);
		if (!n) {
			a->failed = true;
			return NULL;
		}
		a->buf = n;
		a->cap = cap;
	}
	void *at = a->buf + a->len;
	if (p)
		memcpy(at, p, len);
	else
		memset(at, 0, len);
	a->len += len;
	return at;
}

/* ---- privilege ----------------------------------------------------------- */

/* Only the capabilities in keep (a mask of CAP_*), from the effective,
 * permitted and inheritable sets and the bounding set: for good, nothing
 * this process runs can raise them again.  0, or -1 with err. */
static int caps_keep_only(uint64_t keep, char *err, size_t errlen)
{
	for (int cap = 0; cap <= CAP_LAST_CAP; cap++)
		if (!(keep & (1ull << cap)) && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL) {
			snprintf(err, errlen, "drop capability %d: %s", cap, strerror(errno));
			return -1;
		}
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2] = { { 0 } };
	data[0].effective = data[0].permitted = (uint32_t)keep;
	data[1].effective = data[1].permitted = (uint32_t)(keep >> 32);
	if (syscall(SYS_capset, &hdr, data) < 0) {
		snprintf(err, errlen, "capset: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* ---- rooms --------------------------------------------------------------- */

/* One call: the decoded request, its room (opened, maybe locked, by the
 * dispatcher), the answer. */
struct call {
	const struct request *rq;
	struct room r;
	bool locked;
	struct answer *out;
	struct exec_order exec;   /* exec: its values, checked before the room is touched */
};

static int call_lock(struct helper *h, struct call *c)
{
	if (room_lock(&c->r, true, h->err, sizeof(h->err)) < 0)
		return fail(h, HELPER_E_FAILED);
	c->locked = true;
	return 0;
}

static void call_unlock(struct call *c)
{
	if (c->locked)
		room_unlock(&c->r);
	c->locked = false;
}

/* Room locked exclusively; make it exist and run.  Returns keeper pid. */
static pid_t ensure_running(struct helper *h, struct room *r, bool create)
{
	int found = room_load(r, h->err, sizeof(h->err));
	if (found < 0)
		return fail(h, HELPER_E_FAILED);
	if (!found && !create) {
		snprintf(h->err, sizeof(h->err), "room not found");
		return fail(h, HELPER_E_NOT_FOUND);
	}
	pid_t keeper = 0;
	if (!found) {
		/* finished by jail_start (room.h), given up here if it fails
		 * before */
		int rc = room_create(r, h->err, sizeof(h->err));
		if (rc < 0)
			return fail(h, rc == ROOM_ELIMIT ? HELPER_E_LIMIT
				    : rc == ROOM_ENOSPACE ? HELPER_E_NO_SPACE : HELPER_E_FAILED);
	} else {
		keeper = room_keeper_pid(r);
	}
	if (keeper > 0)
		return keeper;
	/* a keeper that died with its file system left frozen by a cut: that
	 * one goes first, or the image would be mounted twice */
	snap_thaw_left(r, cgroups(h));
	bool creating = r->create_lock >= 0;
	keeper = jail_start(r, cgroups(h), h->err, sizeof(h->err));
	room_create_abort(r);
	char ignored[256];
	/* failed before its meta was written (or in writing it) */
	if (keeper < 0 && creating && room_load(r, ignored, sizeof(ignored)) == 0) {
		/* nothing of a creation given up stays: not its image (nor the
		 * disk it promised, which later creations would be refused
		 * for), its cgroup or its directories -- no meta, so no room
		 * would ever list or destroy them */
		cgroup_room_remove(cgroups(h), r->id, ignored, sizeof(ignored));
		if (room_remove_files(r, ignored, sizeof(ignored)) < 0)
			fprintf(stderr, "roombox-helper: room %s: remove what its failed creation left: %s\n",
				r->id, ignored);
	}
	return keeper < 0 ? fail(h, HELPER_E_FAILED) : keeper;
}

/* <status> of common/protocol.h: facts only. */
static void room_status(struct helper *h, struct room *r, struct helper_status *st)
{
	bool running = room_keeper_pid(r) > 0;
	uint64_t mem = 0, procs = 0;
	if (running)
		cgroup_room_usage(cgroups(h), r->id, &mem, &procs);
	memset(st, 0, sizeof(*st));
	snprintf(st->room, sizeof(st->room), "%s", r->id);
	snprintf(st->created_at, sizeof(st->created_at), "%s", r->created_at);
	st->running = running;
	st->last_active_ms = room_last_active_ms(r);
	st->disk_bytes = room_disk_usage(r);
	st->memory_bytes = mem;
	st->processes = procs;
	room_limits_read(r, &st->limits);
}

static int answer_status(struct helper *h, struct call *c)
{
	struct helper_status *st = answer_put(c->out, NULL, sizeof(*st));
	if (st)
		room_status(h, &c->r, st);
	return 0;
}

/* Stop one room (locked by the caller); files and session stay. */
static int stop_room(struct helper *h, struct room *r)
{
	/* its writers would wait through the kill, its disk outlive it */
	snap_thaw_left(r, cgroups(h));
	snap_leftovers_sweep(r);
	pid_t keeper = room_keeper_pid(r);
	if (keeper <= 0)
		return 0;
	return jail_stop(r, cgroups(h), keeper, h->err, sizeof(h->err));
}

/* Every process of the room but its keeper killed (the room locked by the
 * caller, so the keeper is the one recorded); a stopped room has none.
 * Frozen through its cgroup while they are signalled, so a fork bomb cannot
 * outrun it, and the keeper (the room's PID 1) is spared; without cgroups,
 * found by the keeper's pid namespace (nsprocs.c). */
static int kill_room_processes(struct helper *h, struct room *r, int *killed)
{
	*killed = 0;
	pid_t keeper = room_keeper_pid(r);
	if (keeper <= 0)
		return 0;
	if (cgroups(h)->mode != CG_NONE)
		return cgroup_kill_others(cgroups(h), r->id, keeper, killed, h->err, sizeof(h->err)) < 0
			? fail(h, HELPER_E_FAILED) : 0;
	char err[256];
	if (nsprocs_kill_others(keeper, killed, err, sizeof(err)) < 0) {
		snprintf(h->err, sizeof(h->err), "room %s: kill its processes: %s", r->id, err);
		return fail(h, HELPER_E_FAILED);
	}
	return 0;
}

/* ---- operations ------------------------------------------------------------
 * Each is called by dispatch with the request checked (request.c) and its
 * room as the table says; it adds its answer record to c->out and returns
 * 0, or returns -1 with h->err and h->code set (its record is then
 * dropped). */

/* The one place an operation unlocks its room in the middle: entered with
 * the room locked, it unlocks once the keeper is reached and the room
 * marked busy, waits for the command unlocked, and locks again only for
 * another attempt or, returning EXEC_AT_LIMIT, for the caller's kill.
 *
 * A warm room is one whose keeper answers on its socket: then the exec
 * needs nothing else of the room's state (the keeper knows the room's uid),
 * so no meta, keeper record or /proc is read.  Otherwise the room is
 * loaded, created if new, and its keeper started.  0, -1 (error set) or
 * EXEC_AT_LIMIT. */
static int exec_attempts(struct helper *h, struct call *c, const struct exec_order *q,
			 struct exec_outcome *o)
{
	struct room *r = &c->r;
	struct exec_job *job = exec_prepare(r, q, h->err, sizeof(h->err));
	if (!job)
		return fail(h, HELPER_E_FAILED);
	int rc = -1;
	for (int attempt = 0; attempt < 2 && rc != 0; attempt++) {
		if (!c->locked && call_lock(h, c) < 0)
			break;
		if (attempt == 0 && room_state_check(r, h->err, sizeof(h->err)) < 0)
			break;
		int conn = exec_connect(r);
		/* a second attempt: the keeper died or hung under the first one.
		 * If another exec has not replaced it meanwhile (it answers),
		 * make sure it is gone before starting another. */
		if (attempt > 0 && conn < 0)
			stop_room(h, r);
		if (conn < 0 && q->running_only) {
			snprintf(h->err, sizeof(h->err), "room %s: not running", r->id);
			exec_job_free(job);
			return fail(h, HELPER_E_CONFLICT);
		}
		if (conn < 0) {
			if (ensure_running(h, r, !q->existing) <= 0) {
				exec_job_free(job);
				return -1;
			}
			conn = exec_connect(r);
		}
		if (conn < 0) {
			/* alive but not answering: the next attempt replaces it */
			snprintf(h->err, sizeof(h->err), "room %s: its keeper does not answer", r->id);
			continue;
		}
		int busy = room_busy_enter(r);
		call_unlock(c);
		rc = exec_run(r, conn, job, q, o, h->err, sizeof(h->err));
		room_touch_active(r);
		if (busy >= 0)
			close(busy);
		if (rc != 0 && rc != EXEC_KEEPER_GONE)
			break;
	}
	exec_job_free(job);
	/* locked: a restart meanwhile would make another keeper, which the
	 * caller's kill must not take for one of the room's processes */
	if (rc == EXEC_AT_LIMIT && call_lock(h, c) < 0)
		return -1;
	return rc == 0 || rc == EXEC_AT_LIMIT ? rc : fail(h, HELPER_E_FAILED);
}

/* The exec answer: the facts (the output went to the caller's own pipes). */
static int answer_exec(struct call *c, const struct exec_outcome *o)
{
	struct helper_exec_ans a = {
		.wait_status = o->wait_status, .timed_out = o->timed_out,
		.duration_us = o->duration_us, .started_ms = o->started_ms,
	};
	answer_put(c->out, &a, sizeof(a));
	return 0;
}

/* The table's check of exec: its values against the configuration, and
 * its descriptors, before anything of the room is made. */
static int check_exec(struct helper *h, struct call *c)
{
	struct exec_order *q = &c->exec;
	int code = request_exec_order(c->rq, &h->cfg, q, h->err, sizeof(h->err));
	if (code)
		return fail(h, (uint32_t)code);
	/* the command's I/O is always the caller's own: its output never
	 * passes through this process */
	if (passed_io[0] < 0 || passed_io[1] < 0 || passed_io[2] < 0) {
		snprintf(h->err, sizeof(h->err), "exec: fds 3-5 must be the caller's stdin, stdout "
			 "and stderr pipes (stdout may be a unix socket)");
		return fail(h, HELPER_E_INVALID);
	}
	q->io = passed_io;
	return 0;
}

/* A room held at pids_limit by its own processes (a fork bomb) recovers
 * by itself: when the exec could not start for the limit, every process
 * of the room but its keeper is killed, the service log says so, and the
 * command runs again -- once. */
static int op_exec(struct helper *h, struct call *c)
{
	struct exec_order q = c->exec;
	struct room *r = &c->r;
	struct config_room_limits lim = room_limits_effective(r);
	q.pids_limit = lim.pids;
	q.limit_retry = lim.pids > 0;
	/* a command's timeout and the room's execTimeoutMax (its own, or the
	 * configuration's): the default (exec_timeout) is cut down to it, a
	 * timeout asked for above it refused.  Not the keeper's tools (files)
	 * nor a managed process's start: their deadlines are the service's. */
	uint64_t max = q.is_tool || q.detach ? UINT64_MAX : lim.exec_timeout_max_ms;
	const struct helper_exec_args *args = c->rq->args;
	bool asked = args->timeout_ms != 0 && !(args->flags & HX_TIMEOUT_CAP);
	if (q.timeout_ms > max && !asked)
		q.timeout_ms = max;
	/* The last line of defence against waiting forever (the exec's own
	 * deadline is the keeper's): roombox-fcgi cannot kill a setuid helper. */
	alarm((unsigned)(q.timeout_ms / 1000) + 120);
	if (q.timeout_ms > max) {
		snprintf(h->err, sizeof(h->err), "room %s: timeout %llu ms is above the room's "
			 "execTimeoutMax (%llu ms)", r->id, (unsigned long long)q.timeout_ms,
			 (unsigned long long)max);
		return fail(h, HELPER_E_INVALID);
	}
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	struct exec_outcome o;
	int rc = exec_attempts(h, c, &q, &o);
	if (rc != EXEC_AT_LIMIT)
		return rc == 0 ? answer_exec(c, &o) : rc;
	/* the request's timeout is for the whole request: the second run gets
	 * what the first left of it (a second at least) */
	clock_gettime(CLOCK_MONOTONIC, &t1);
	uint64_t spent = (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
	q.timeout_ms = spent + 1000 < q.timeout_ms ? q.timeout_ms - spent : 1000;
	int killed = 0;
	char why[64];
	snprintf(why, sizeof(why), "%s", h->err);
	if (kill_room_processes(h, r, &killed) < 0)
		return -1;
	fprintf(stderr, "roombox-helper: room %s: at its process limit (%d, %s): "
		"killed %d processes, running the exec again\n", r->id, lim.pids, why, killed);
	q.limit_retry = false;
	rc = exec_attempts(h, c, &q, &o);
	if (rc == EXEC_AT_LIMIT)
		return fail(h, HELPER_E_FAILED);
	return rc == 0 ? answer_exec(c, &o) : rc;
}

/* The unlocked room's records loaded: 0, or -1 with not_found (never
 * made) or failed. */
static int room_found(struct helper *h, struct call *c)
{
	int found = room_load(&c->r, h->err, sizeof(h->err));
	if (found <= 0) {
		if (found == 0)
			snprintf(h->err, sizeof(h->err), "room not found");
		return fail(h, found == 0 ? HELPER_E_NOT_FOUND : HELPER_E_FAILED);
	}
	return 0;
}

static int op_status(struct helper *h, struct call *c)
{
	return room_found(h, c) < 0 ? -1 : answer_status(h, c);
}

struct list_walk {
	struct helper *h;
	struct answer *out;
	uint32_t count;
};

/* Every room the state directory holds: no cap on their number (each
 * record is ~150 bytes, and nothing is kept per room but its record). */
static int add_status(const char *id, void *arg)
{
	struct list_walk *l = arg;
	struct room r;
	char err[256];
	if (room_init(&r, &l->h->cfg, id) == 0 && room_load(&r, err, sizeof(err)) == 1) {
		struct helper_status *st = answer_put(l->out, NULL, sizeof(*st));
		if (st) {
			room_status(l->h, &r, st);
			l->count++;
		}
	}
	return 0;
}

static int op_list(struct helper *h, struct call *c)
{
	size_t at = c->out->len;
	struct list_walk l = { h, c->out, 0 };
	answer_put(c->out, NULL, sizeof(struct helper_list_ans));
	room_foreach(&h->cfg, add_status, &l);
	if (c->out->failed) {
		snprintf(h->err, sizeof(h->err), "list: out of memory after %u rooms", l.count);
		return fail(h, HELPER_E_FAILED);
	}
	((struct helper_list_ans *)(c->out->buf + at))->count = l.count;
	return 0;
}

static int op_create(struct helper *h, struct call *c)
{
	return answer_status(h, c);   /* the dispatcher made it run */
}

static int op_stop(struct helper *h, struct call *c)
{
	return stop_room(h, &c->r) < 0 ? fail(h, HELPER_E_FAILED) : 0;
}

/* Whatever still runs under the room's host ids once its keeper and cgroup
 * are gone: a keeper of a start the room never recorded, or anything else
 * that got out of both.  Killed while the room still holds its slot, so
 * that no other room has those ids yet; what cannot be killed keeps the
 * room (the destroy fails and says so, and the next one tries again).  A
 * room without meta has no slot known here, and nothing is looked for. */
static int kill_room_ids(struct helper *h, const struct room *r)
{
	int killed = 0;
	char err[256];
	if (r->slot < 0)
		return 0;
	int rc = nsprocs_kill_uids(room_host_id(r, 0), ROOM_ID_COUNT, &killed, err, sizeof(err));
	if (killed > 0)
		fprintf(stderr, "roombox-helper: room %s: destroy: killed %d processes under its host ids "
			"that neither its keeper nor its cgroup held\n", r->id, killed);
	if (rc < 0)
		snprintf(h->err, sizeof(h->err), "room %s: destroy: kill what runs under its host ids: %s",
			 r->id, err);
	return rc;
}

/* room_foreach: stop at a room other than arg */
static int other_room(const char *id, void *arg)
{
	return strcmp(id, arg) != 0;
}

static int op_destroy(struct helper *h, struct call *c)
{
	struct room *r = &c->r;
	char err[256];
	room_load(r, err, sizeof(err));   /* for its slot; absent is fine */
	/* a keeper that died by itself left its network's firewall elements */
	bool net_left = r->slot >= 0 && room_keeper_pid(r) <= 0;
	int rc = stop_room(h, r);
	if (rc == 0 && net_left)
		rc = net_room_down(r, h->err, sizeof(h->err));
	if (rc == 0)
		rc = kill_room_ids(h, r);
	/* Nothing of it runs any more: it stops being a room first, so a step
	 * that fails below leaves leftovers for the next destroy, not a room
	 * that is still listed. */
	if (rc == 0)
		rc = room_forget(r, h->err, sizeof(h->err));
	if (rc == 0) {
		room_slot_release(r);
		rc = cgroup_room_remove(cgroups(h), r->id, h->err, sizeof(h->err));
		int lock = room_state_lock(&h->cfg);
		if (rc == 0)
			cgroup_group_remove_if_empty(cgroups(h));
		if (room_foreach(&h->cfg, other_room, r->id) == 0)
			net_instance_remove(&h->cfg);
		if (lock >= 0)
			close(lock);
		/* the files go even when the cgroup stays; the first error is told */
		if (room_remove_files(r, rc == 0 ? h->err : err, rc == 0 ? sizeof(h->err) : sizeof(err)) < 0)
			rc = -1;
	}
	return rc < 0 ? fail(h, HELPER_E_FAILED) : 0;
}

static int check_kill_all(struct helper *h, struct call *c)
{
	const struct helper_kill_args *a = c->rq->args;
	if ((a->flags & ~HELPER_KILL_AT_LIMIT) || a->reserved) {
		snprintf(h->err, sizeof(h->err), "kill-all: unknown flags %#x", (unsigned)a->flags);
		return fail(h, HELPER_E_INVALID);
	}
	return 0;
}

static int op_kill_all(struct helper *h, struct call *c)
{
	const struct helper_kill_args *args = c->rq->args;
	int killed = 0;
	/* the caller's evidence is a room's output, which the room writes:
	 * only the room's own cgroup can say the limit was hit */
	if (!(args->flags & HELPER_KILL_AT_LIMIT) ||
	    cgroup_room_pids_exhausted(cgroups(h), c->r.id, room_limits_effective(&c->r).pids, true)) {
		if (kill_room_processes(h, &c->r, &killed) < 0)
			return -1;
	}
	struct helper_killed_ans a = { .killed = (uint32_t)killed };
	answer_put(c->out, &a, sizeof(a));
	return 0;
}

/* The table's check of set-limits: known fields only, each at most
 * room_limits_max's (config.h), before the room is touched. */
static int check_set_limits(struct helper *h, struct call *c)
{
	const struct helper_limits_args *a = c->rq->args;
	const struct helper_limits *l = &a->limits;
	struct config_room_limits max = config_room_limits_max(&h->cfg);
	if ((a->set & ~HL_ALL) || a->reserved) {
		snprintf(h->err, sizeof(h->err), "set-limits: unknown fields %#x", (unsigned)a->set);
		return fail(h, HELPER_E_INVALID);
	}
	const char *over = (a->set & HL_MEMORY) && l->memory > max.memory ? "memory"
		: (a->set & HL_PIDS) && l->pids > (uint64_t)max.pids ? "pids"
		: (a->set & HL_CPU) && (double)l->cpu_milli > max.cpu * 1000.0 + 0.5 ? "cpu"
		: (a->set & HL_DISK) && l->disk > max.disk ? "disk"
		: (a->set & HL_IDLE) && l->idle_timeout_ms > max.idle_timeout_ms ? "idleTimeout"
		: (a->set & HL_EXECMAX) && l->exec_timeout_max_ms > max.exec_timeout_max_ms
			? "execTimeoutMax" : NULL;
	if (over) {
		snprintf(h->err, sizeof(h->err), "set-limits: %s above the most a room may have", over);
		return fail(h, HELPER_E_INVALID);
	}
	return 0;
}

/* The room's own limits: kept, then given to its cgroup if it runs (the
 * kernel applies memory, pids and cpu at once; a memory limit below what
 * the room holds makes the kernel reclaim, then kill in the room). */
/* The room's effective memory, pids and cpu limits written to its cgroup
 * (under the state lock, as a start's): 0, or -1 with errno and h->err. */
static int cgroup_limits_apply(struct helper *h, struct room *r)
{
	struct config_room_limits e = room_limits_effective(r);
	struct cgroup_limits lim = { e.memory, e.pids, e.cpu };
	int lock = room_state_lock(&h->cfg);
	int rc = cgroup_room_setup(cgroups(h), r->id, &lim, h->err, sizeof(h->err));
	int saved = errno;
	if (lock >= 0)
		close(lock);
	errno = saved;
	return rc;
}

static int op_set_limits(struct helper *h, struct call *c)
{
	const struct helper_limits_args *a = c->rq->args;
	struct helper_limits l, old;
	room_limits_read(&c->r, &old);
	l = old;
	if (a->set & HL_MEMORY) l.memory = a->limits.memory;
	if (a->set & HL_PIDS) l.pids = a->limits.pids;
	if (a->set & HL_CPU) l.cpu_milli = a->limits.cpu_milli;
	if (a->set & HL_DISK) l.disk = a->limits.disk;
	if (a->set & HL_IDLE) l.idle_timeout_ms = a->limits.idle_timeout_ms;
	if (a->set & HL_EXECMAX) l.exec_timeout_max_ms = a->limits.exec_timeout_max_ms;
	if (room_limits_write(&c->r, &l, h->err, sizeof(h->err)) < 0)
		return fail(h, HELPER_E_FAILED);
	if (room_keeper_pid(&c->r) > 0 && (a->set & (HL_MEMORY | HL_PIDS | HL_CPU)) &&
	    cgroup_limits_apply(h, &c->r) < 0) {
		/* cgroup v1 refuses a memory limit below what the room holds
		 * and cannot give back (v2 reclaims, then kills in the room):
		 * the room's client is told, and nothing changes */
		bool busy = errno == EBUSY;
		char why[512];
		snprintf(why, sizeof(why), "%s", h->err);
		if (room_limits_write(&c->r, &old, h->err, sizeof(h->err)) < 0 ||
		    cgroup_limits_apply(h, &c->r) < 0)
			fprintf(stderr, "roombox-helper: room %s: set-limits: the old limits back: %s\n",
				c->r.id, h->err);
		if (!busy) {
			snprintf(h->err, sizeof(h->err), "%s", why);
			return fail(h, HELPER_E_FAILED);
		}
		/* the limit asked for, not the old one the room has again */
		snprintf(h->err, sizeof(h->err), "room %s: memory: the room holds more than %llu bytes "
			 "now and the kernel cannot take it back; nothing changed (free some, or "
			 "restart the room, and try again)", c->r.id,
			 (unsigned long long)(l.memory ? l.memory : h->cfg.memory_limit));
		return fail(h, HELPER_E_INVALID);
	}
	return answer_status(h, c);
}

/* Stop the jail (every process, the keeper too) and start a new one: files
 * and session are on disk and stay. */
static int op_restart(struct helper *h, struct call *c)
{
	if (stop_room(h, &c->r) < 0)
		return fail(h, HELPER_E_FAILED);
	return ensure_running(h, &c->r, false) > 0 ? 0 : -1;
}

struct stop_many {
	struct helper *h;
	struct answer *out;
	uint32_t count;
	bool idle_only;
	const struct request *rq;   /* stop-idle: its keep list */
};

static bool in_keep(const struct request *rq, const char *id)
{
	const char *k = rq->strings;
	for (uint32_t i = 0; i < rq->nstrings; i++, k = request_next(k))
		if (!strcmp(k, id))
			return true;
	return false;
}

/* Idle long enough by its own idleTimeout (0: never), no exec running
 * (each holds busy), and not one roombox-fcgi keeps. */
static bool idle_due(const struct room *r, const struct request *rq)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	int64_t now_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
	uint64_t idle = room_limits_effective(r).idle_timeout_ms;
	return idle && now_ms - room_last_active_ms(r) >= (int64_t)idle && !room_is_busy(r) &&
		!in_keep(rq, r->id);
}

/* The one place an operation over many rooms locks each: the dispatcher's
 * lock, taken and given back around one room's stop. */
static int stop_if_due(const char *id, void *arg)
{
	struct stop_many *s = arg;
	struct call one = { .rq = s->rq };
	char err[256];
	if (room_init(&one.r, &s->h->cfg, id) < 0 || room_keeper_pid(&one.r) <= 0)
		return 0;
	/* a running room whose file system a killed cut left frozen: thawed
	 * at this sweep, not at its stop, which its writers would wait for;
	 * under its lock, and only if that is free (a cut under way holds it,
	 * and its own mark) */
	if (s->idle_only && snap_freeze_marked(&one.r) && room_lock_if_free(&one.r)) {
		snap_thaw_left(&one.r, cgroups(s->h));
		room_unlock(&one.r);
	}
	if (s->idle_only && !idle_due(&one.r, s->rq))
		return 0;
	if (call_lock(s->h, &one) < 0)
		return 0;
	/* A channel exec (roombox-fcgi straight to the keeper) takes no room
	 * lock: one could start between the look above and the stop, and die
	 * in it.  So the keeper closes its channels first -- or refuses, one
	 * of their execs running -- and sends back what came on them unrun
	 * (roombox-fcgi gives it to the helper, which waits for this lock);
	 * a room something was sent back from is not idle, and is left
	 * running for it.  Then the room is looked at again, an exec having
	 * perhaps ended meanwhile.  A keeper that does not answer is stopped
	 * as before. */
	if (s->idle_only && (exec_channels_close(&one.r) == 0 || !idle_due(&one.r, s->rq))) {
		call_unlock(&one);
		return 0;
	}
	if (room_load(&one.r, err, sizeof(err)) == 1 && stop_room(s->h, &one.r) == 0) {
		char *slot = answer_put(s->out, NULL, HELPER_ROOM_LEN);
		if (slot) {
			snprintf(slot, HELPER_ROOM_LEN, "%s", id);
			s->count++;
		}
	}
	call_unlock(&one);
	return 0;
}

/* The lower trees as the service starts (info) and on each idle sweep: a
 * mask made stale by a change to the host's trees is rebuilt here, off
 * any room's start, and here the trees are walked in full every few
 * minutes for a change below their top two levels (hostmask.h; best
 * effort: a room's start makes them, or says why it cannot). */
static void lower_prepare(struct helper *h, const char *verb)
{
	struct jail_lower lower;
	char err[512];
	hostmask_sweeping();
	if (room_dirs_prepare(&h->cfg, err, sizeof(err)) < 0 ||
	    jail_lower_prepare(&h->cfg, &lower, err, sizeof(err)) < 0)
		fprintf(stderr, "roombox-helper: %s: %s\n", verb, err);
}

static int stop_many(struct helper *h, struct call *c, bool idle_only)
{
	size_t at = c->out->len;
	struct stop_many s = { h, c->out, 0, idle_only, c->rq };
	answer_put(c->out, NULL, sizeof(struct helper_stopped_ans));
	room_foreach(&h->cfg, stop_if_due, &s);   /* a room may have an idle timeout of its own */
	if (idle_only)
		lower_prepare(h, "stop-idle");
	if (!idle_only) {
		/* the service stops: the instance's firewall table goes too */
		int lock = room_state_lock(&h->cfg);
		net_instance_remove(&h->cfg);
		if (lock >= 0)
			close(lock);
	}
	if (c->out->failed)
		return fail(h, HELPER_E_FAILED);
	((struct helper_stopped_ans *)(c->out->buf + at))->count = s.count;
	return 0;
}

static int op_stop_idle(struct helper *h, struct call *c)
{
	return stop_many(h, c, true);
}

static int op_stop_all(struct helper *h, struct call *c)
{
	return stop_many(h, c, false);
}

/* A room never made: a helper killed while it created one, after its
 * files and before its meta (room.h), left its directories and image,
 * which nothing lists or destroys and every count of the disk promise
 * counts again.  Removed as a failed creation removes its own (see
 * ensure_running), with whatever of it runs.  Every creation holds the
 * room's lock until its meta is written, as every removal does until it
 * is done: a room without meta whose lock is free is neither. */
static int unmade_remove(const char *id, void *arg)
{
	struct helper *h = arg;
	struct room r;
	char err[256];
	if (room_init(&r, &h->cfg, id) < 0 || !room_lock_if_free(&r))
		return 0;
	if (room_load(&r, err, sizeof(err)) == 0) {
		cgroup_kill(cgroups(h), r.id, err, sizeof(err));
		cgroup_room_remove(cgroups(h), r.id, err, sizeof(err));
		if (room_remove_files(&r, err, sizeof(err)) < 0)
			fprintf(stderr, "roombox-helper: room %s: remove what a killed creation left: %s\n",
				r.id, err);
		else
			fprintf(stderr, "roombox-helper: room %s: removed what a killed creation left\n", r.id);
	}
	room_unlock(&r);
	return 0;
}

static int op_info(struct helper *h, struct call *c)
{
	struct helper_info_ans a = { 0 };
	lower_prepare(h, "info");
	room_foreach(&h->cfg, unmade_remove, h);   /* the service's start: before the count */
	if (h->cfg.disk_limit)   /* for /api/health and creations, from the service's start */
		room_disk_commit_count(&h->cfg);
	snprintf(a.cgroup, sizeof(a.cgroup), "%s", cgroup_mode_name(cgroups(h)->mode));
	snprintf(a.version, sizeof(a.version), "%s", ROOMBOX_VERSION);
	snprintf(a.network, sizeof(a.network), "%s", h->cfg.network == NETWORK_EGRESS ? "egress" : "none");
	if (h->cfg.network == NETWORK_EGRESS) {
		int unusable;
		int n = net_dns_servers(&h->cfg, a.dns, HELPER_DNS_MAX, &unusable);
		a.ndns = n > 0 ? (uint32_t)n : 0;
	}
	answer_put(c->out, &a, sizeof(a));
	return 0;
}

/* Every capability gone, for good (a long port-connect serve, once it has
 * joined the room's network namespace). */
static int drop_every_capability(char *err, size_t errlen)
{
	return caps_keep_only(0, err, errlen);
}

/* Preview ports: a connection to the room's 127.0.0.1:port, sent over the
 * caller's unix socket on fd 3 (portconn.c).  A stopped room is not
 * started for it: nothing could be listening in a fresh one. */
static int op_port_connect(struct helper *h, struct call *c)
{
	const struct helper_port_args *a = c->rq->args;
	struct room *r = &c->r;
	if (passed_sock < 0) {
		snprintf(h->err, sizeof(h->err), "room %s: port-connect: fd 3 must be a unix stream socket", r->id);
		return fail(h, HELPER_E_INVALID);
	}
	if (a->serve) {
		/* bounded by its own idle time and the keeper's life, not alarm */
		int rc = portconn_serve(r, passed_sock, drop_every_capability, h->err, sizeof(h->err));
		if (rc < 0)
			return fail(h, rc == PORTCONN_REFUSED ? HELPER_E_REFUSED : HELPER_E_FAILED);
		return 0;
	}
	alarm(30);   /* connect is bounded by itself; this bounds the rest */
	int fd = portconn_open(r, (int)a->port, h->err, sizeof(h->err));
	if (fd < 0)
		return fail(h, fd == PORTCONN_REFUSED ? HELPER_E_REFUSED : HELPER_E_FAILED);
	int rc = portconn_send(r, passed_sock, fd, h->err, sizeof(h->err));
	close(fd);
	if (rc < 0)
		return fail(h, HELPER_E_FAILED);
	room_touch_active(r);
	return 0;
}

/* The room's activity, told by roombox-fcgi for what reaches the room
 * without a helper (a terminal's keystrokes): its active mark's mtime,
 * and nothing else. */
static int op_touch(struct helper *h, struct call *c)
{
	if (room_found(h, c) < 0)
		return -1;
	/* unlocked: a destroy may be emptying the room's directory, into
	 * which nothing is made here (its creation made the file) */
	room_touch_active_existing(&c->r);
	return 0;
}

/* A warm room's exec channel for the caller (exec.c, keeper/channel.c),
 * sent over its unix socket on fd 3.  A stopped room is not started: the
 * caller's first exec, through exec, starts it. */
static int op_exec_channel(struct helper *h, struct call *c)
{
	struct room *r = &c->r;
	if (passed_sock < 0) {
		snprintf(h->err, sizeof(h->err), "room %s: exec-channel: fd 3 must be a unix stream socket", r->id);
		return fail(h, HELPER_E_INVALID);
	}
	alarm(30);   /* the keeper answers at once; this bounds a hung one */
	struct config_room_limits lim = room_limits_effective(r);
	int ch = exec_channel_open(r, lim.pids > 0 ? (uint32_t)lim.pids : 0, lim.exec_timeout_max_ms,
				   h->err, sizeof(h->err));
	if (ch < 0)
		return fail(h, HELPER_E_FAILED);
	ssize_t n = fds_send(passed_sock, "C", 1, &ch, 1);
	close(ch);
	if (n != 1) {
		snprintf(h->err, sizeof(h->err), "room %s: exec-channel: send it: %s", r->id, strerror(errno));
		return fail(h, HELPER_E_FAILED);
	}
	return 0;
}

/* ---- snapshots (snapshot.c) ------------------------------------------------ */

/* A field of helper_snap_args: NUL-terminated, NUL-padded, "" or an id. */
static bool snap_field_ok(const char *f, bool empty_ok)
{
	size_t n = strnlen(f, HELPER_ROOM_LEN);
	if (n == HELPER_ROOM_LEN)
		return false;
	for (size_t i = n; i < HELPER_ROOM_LEN; i++)
		if (f[i])
			return false;
	return n ? room_id_valid(f) : empty_ok;
}

/* The table's check of the snapshot ops: which fields each takes. */
static int check_snap(struct helper *h, struct call *c)
{
	const struct helper_snap_args *a = c->rq->args;
	uint32_t op = c->rq->op;
	bool ref_ok = snap_field_ok(a->snapshot, op == HOP_SNAPSHOT || op == HOP_SNAPSHOTS || op == HOP_FORK ||
				    op == HOP_EXPORT);
	bool to_ok = op == HOP_FORK ? snap_field_ok(a->to, false) && strcmp(a->to, c->rq->room) != 0
		: snap_field_ok(a->to, true) && !a->to[0];
	if (op == HOP_SNAPSHOTS && a->snapshot[0])
		ref_ok = false;
	if (!ref_ok || !to_ok) {
		snprintf(h->err, sizeof(h->err), "%s: %s", helper_op_name(op),
			 !ref_ok ? "invalid snapshot id or name" : "invalid new room id");
		return fail(h, HELPER_E_INVALID);
	}
	return 0;
}

static int snap_answer(struct helper *h, struct call *c, int code, const struct helper_snapshot *s)
{
	if (code != HELPER_E_OK)
		return fail(h, (uint32_t)code);
	answer_put(c->out, s, sizeof(*s));
	return 0;
}

static int op_snapshot(struct helper *h, struct call *c)
{
	const struct helper_snap_args *a = c->rq->args;
	struct helper_snapshot s;
	return snap_answer(h, c, snap_take(&c->r, cgroups(h), a->snapshot, &s, h->err, sizeof(h->err)), &s);
}

static void snap_emit(const struct helper_snapshot *s, void *ctx)
{
	answer_put(ctx, s, sizeof(*s));
}

static int op_snapshots(struct helper *h, struct call *c)
{
	int found = room_load(&c->r, h->err, sizeof(h->err));
	if (found <= 0) {
		if (found == 0)
			snprintf(h->err, sizeof(h->err), "room not found");
		return fail(h, found == 0 ? HELPER_E_NOT_FOUND : HELPER_E_FAILED);
	}
	size_t at = c->out->len;
	answer_put(c->out, NULL, sizeof(struct helper_snapshots_ans));
	int n = snap_list(&c->r, snap_emit, c->out, h->err, sizeof(h->err));
	if (n < 0 || c->out->failed)
		return fail(h, HELPER_E_FAILED);
	((struct helper_snapshots_ans *)(c->out->buf + at))->count = (uint32_t)n;
	return 0;
}

static int op_snapshot_delete(struct helper *h, struct call *c)
{
	const struct helper_snap_args *a = c->rq->args;
	struct helper_snapshot s;
	return snap_answer(h, c, snap_delete(&c->r, a->snapshot, &s, h->err, sizeof(h->err)), &s);
}

static int op_restore(struct helper *h, struct call *c)
{
	const struct helper_snap_args *a = c->rq->args;
	struct helper_snapshot s;
	return snap_answer(h, c, snap_restore(&c->r, cgroups(h), a->snapshot, &s, h->err, sizeof(h->err)), &s);
}

static int op_fork(struct helper *h, struct call *c)
{
	const struct helper_snap_args *a = c->rq->args;
	struct helper_snapshot s;
	return snap_answer(h, c, snap_fork(&c->r, cgroups(h), a->snapshot, a->to, &s, h->err,
					   sizeof(h->err)), &s);
}

/* ---- export and import (transfer.c) ------------------------------------ */

/* The room's files to fd 4 as a tree stream, its sessions in the answer:
 * a snapshot's, or the room's now -- a running one cut as a snapshot is
 * (snap_export_source), into a copy walked while the room runs on: the
 * room's lock goes once the copy is mounted (its name removed), so an
 * exec does not wait for the walk, nor for a client that reads slowly.
 * Only a running room without a disk image (a plain directory cannot be
 * cut) is stopped for the walk (its lock is held throughout: nothing
 * starts it meanwhile) and started again. */
static int op_export(struct helper *h, struct call *c)
{
	const struct helper_snap_args *a = c->rq->args;
	struct room *r = &c->r;
	struct snap_source src;
	if (passed_io[1] < 0) {
		snprintf(h->err, sizeof(h->err), "export: no pipe for the stream on fd 4");
		return fail(h, HELPER_E_INVALID);
	}
	int code = snap_export_source(r, cgroups(h), a->snapshot, &src, h->err, sizeof(h->err));
	alarm(0);   /* the cut is made: the walk lasts as long as the client reads */
	if (code != HELPER_E_OK)
		return fail(h, (uint32_t)code);
	bool stopped = !src.temporary && src.was_running;
	if (stopped && stop_room(h, r) < 0)
		return fail(h, HELPER_E_FAILED);
	/* the sessions as they were at the cut: read before the lock goes */
	struct room from = *r;   /* the sessions' directory: the room's or the snapshot's */
	snprintf(from.state, sizeof(from.state), "%s", src.sessions);
	char *root = room_session_read(&from, false, HELPER_SESSION_MAX);
	char *user = room_session_read(&from, true, HELPER_SESSION_MAX);
	struct transfer_disk disk;
	int rc = transfer_export_open(r, src.img, src.img_fd, &disk, h->err, sizeof(h->err));
	if (src.temporary) {
		/* the cut is the mount's alone now: its name (or descriptor)
		 * goes, and the room is free for its execs while the copy is
		 * walked */
		if (src.img_fd >= 0)
			close(src.img_fd);
		else
			unlink(src.img);
		call_unlock(c);
	}
	if (rc == 0)
		rc = transfer_export_walk(r, &disk, passed_io[1], caps_keep_only, h->err, sizeof(h->err));
	close(passed_io[1]);   /* the reader sees the stream's end now */
	passed_io[1] = -1;
	if (stopped && ensure_running(h, r, false) <= 0 && rc == 0)
		rc = -1;
	if (rc < 0) {
		free(root);
		free(user);
		return h->code ? -1 : fail(h, HELPER_E_FAILED);
	}
	struct helper_export_ans x = { .root_len = root ? (uint32_t)strlen(root) : 0,
				       .user_len = user ? (uint32_t)strlen(user) : 0,
				       .was_running = src.was_running };
	snprintf(x.snapshot, sizeof(x.snapshot), "%s", src.id);
	answer_put(c->out, &x, sizeof(x));
	answer_put(c->out, root ? root : "", x.root_len);
	answer_put(c->out, user ? user : "", x.user_len);
	free(root);
	free(user);
	return 0;
}

/* import's sessions from fd: "<root len> <user len>\n", the texts, its
 * end; each at most HELPER_SESSION_MAX and NUL-free.  0 with sess[0] and
 * sess[1] malloc'd, or -1 with err. */
static int sessions_read(int fd, char *sess[2], char *err, size_t errlen)
{
	size_t cap = 2 * HELPER_SESSION_MAX + 64, n = 0;
	char *buf = malloc(cap + 1);
	ssize_t k;
	if (!buf)
		return snprintf(err, errlen, "import: sessions: out of memory"), -1;
	while (n < cap && ((k = read(fd, buf + n, cap - n)) > 0 || (k < 0 && errno == EINTR)))
		if (k > 0)
			n += (size_t)k;
	buf[n] = '\0';
	unsigned long a, b;
	int at = -1;
	if (n == cap || sscanf(buf, "%lu %lu\n%n", &a, &b, &at) != 2 || at < 0 ||
	    a > HELPER_SESSION_MAX || b > HELPER_SESSION_MAX || (size_t)at + a + b != n ||
	    memchr(buf + at, '\0', n - (size_t)at)) {
		free(buf);
		return snprintf(err, errlen, "import: the sessions did not come whole"), -1;
	}
	sess[0] = strndup(buf + at, a);
	sess[1] = strndup(buf + at + a, b);
	free(buf);
	if (!sess[0] || !sess[1])
		return snprintf(err, errlen, "import: sessions: out of memory"), -1;
	return 0;
}

/* A new room from the tree stream on fd 3: created as a room is (slot,
 * the disk's promise, a fresh image from the template), the stream
 * written into it, its sessions saved, and only then made a room (meta).
 * Any failure removes all of it. */
static int op_import(struct helper *h, struct call *c)
{
	struct room *r = &c->r;
	char *sess[2] = { NULL, NULL };
	if (passed_io[0] < 0 || passed_in2 < 0) {
		snprintf(h->err, sizeof(h->err), "import: no pipes for the stream and sessions on fd 3 and 5");
		return fail(h, HELPER_E_INVALID);
	}
	int found = room_load(r, h->err, sizeof(h->err));
	if (found != 0) {
		if (found > 0)
			snprintf(h->err, sizeof(h->err), "room %s exists already", r->id);
		return fail(h, found > 0 ? HELPER_E_EXISTS : HELPER_E_FAILED);
	}
	int rc = room_create(r, h->err, sizeof(h->err));
	if (rc < 0)
		return fail(h, rc == ROOM_ELIMIT ? HELPER_E_LIMIT
			    : rc == ROOM_ENOSPACE ? HELPER_E_NO_SPACE : HELPER_E_FAILED);
	uint32_t code = HELPER_E_FAILED;
	rc = room_create_files(r, h->err, sizeof(h->err));
	if (rc == 0) {
		rc = transfer_import(r, passed_io[0], h->cfg.disk_limit, caps_keep_only, h->err,
				     sizeof(h->err));
		/* what the disk could not hold, or the budget refused */
		if (rc < 0 && (strstr(h->err, strerror(ENOSPC)) || strstr(h->err, "budget") ||
			       strstr(h->err, "entries")))
			code = HELPER_E_NO_SPACE;
		else if (rc < 0)
			code = HELPER_E_INVALID;
	}
	if (rc == 0 && sessions_read(passed_in2, sess, h->err, sizeof(h->err)) < 0) {
		code = HELPER_E_INVALID;
		rc = -1;
	}
	if (rc == 0 && (room_session_write(r, false, sess[0], strlen(sess[0])) < 0 ||
			room_session_write(r, true, sess[1], strlen(sess[1])) < 0)) {
		snprintf(h->err, sizeof(h->err), "room %s: import: save its sessions: %s", r->id,
			 strerror(errno));
		rc = -1;
	}
	if (rc == 0 && room_create_finish(r, h->err, sizeof(h->err)) < 0)
		rc = -1;
	free(sess[0]);
	free(sess[1]);
	if (rc < 0) {
		/* the state lock first (removing the image takes it again); the
		 * room's own lock, still held, keeps its id ours meanwhile */
		char err[256];
		room_create_abort(r);
		if (room_remove_files(r, err, sizeof(err)) < 0)
			fprintf(stderr, "roombox-helper: room %s: import: remove what it made: %s\n", r->id, err);
		room_disk_commit_count(&h->cfg);
		return fail(h, code);
	}
	room_disk_commit_count(&h->cfg);
	return 0;
}

/* ---- the table of operations ---------------------------------------------
 *
 * What the dispatcher does for an op's room before calling it:
 *   ROOM_NONE      the op names no room
 *   ROOM_OPEN      the id checked and its paths made; no lock
 *   ROOM_LOCK      locked exclusively (created nowhere)
 *   ROOM_EXISTING  locked, and loaded: not_found if it was never made
 *   ROOM_RUNNING   locked, created if new, its jail started
 *   ROOM_EXEC      locked; with HX_EXISTING first loaded unlocked, so that
 *                  a room that does not exist gets not_found and nothing
 *                  of it is made (not even its lock): a request that only
 *                  reads a room
 * and unlocks after it (whatever it returns).
 *
 * What root keeps while it runs (drop_privileges, after the configuration
 * and the request are read):
 *   PRIV_ROOT      every capability: namespaces, mounts, cgroups, loop
 *                  devices, firewall, signals to any room's processes
 *   PRIV_READ      only what reading rooms' records, /proc and cgroup
 *                  counters takes (CAP_DAC_READ_SEARCH, CAP_DAC_OVERRIDE
 *                  for root-only state files under a non-root umask of
 *                  the past, CAP_SYS_PTRACE for a keeper's /proc entries);
 *                  nothing that creates, mounts, kills or changes ids
 *   PRIV_JOIN      every capability until it has joined the room's network
 *                  namespace, none after (a serving port-connect lasts as
 *                  long as a preview is used: hours, with nothing of root)
 */
enum room_mode { ROOM_NONE, ROOM_OPEN, ROOM_LOCK, ROOM_EXISTING, ROOM_RUNNING, ROOM_EXEC };
enum priv { PRIV_ROOT, PRIV_READ, PRIV_JOIN };

struct op {
	uint32_t op;
	uint32_t args_size;
	enum room_mode room;
	enum priv priv;
	int (*run)(struct helper *h, struct call *c);
	/* the op's own checks of its values, before its room is touched */
	int (*check)(struct helper *h, struct call *c);
	/* the helper's own bound on the whole call, its wait for the room's
	 * lock included (alarm: roombox-fcgi waits longer, and a file system
	 * frozen for a copy is thawed on it); 0: none here */
	unsigned alarm_s;
};

static const struct op OPS[] = {
	/* runs the command through the room's keeper, which drops to the
	 * room's ids inside its namespaces; unlocks (exec_attempts, the one
	 * place) once the keeper has the job, so a long command holds no
	 * lock; argv and env are strings the keeper passes, never parsed */
	{ HOP_EXEC, sizeof(struct helper_exec_args), ROOM_EXEC, PRIV_ROOT, op_exec, check_exec, 0 },
	/* makes the room from configuration only: nothing of the request
	 * but its checked id reaches a path */
	{ HOP_CREATE, 0, ROOM_RUNNING, PRIV_ROOT, op_create, NULL, 0 },
	/* reads the room's records, opened without following symlinks */
	{ HOP_STATUS, 0, ROOM_OPEN, PRIV_READ, op_status, NULL, 0 },
	/* the same for every room of the state directory; no input */
	{ HOP_LIST, 0, ROOM_NONE, PRIV_READ, op_list, NULL, 0 },
	/* stops and removes one room under its lock, by its checked id */
	{ HOP_DESTROY, 0, ROOM_LOCK, PRIV_ROOT, op_destroy, NULL, 0 },
	/* stops one room's jail under its lock; files stay */
	{ HOP_STOP, 0, ROOM_LOCK, PRIV_ROOT, op_stop, NULL, 0 },
	/* stops rooms by the configuration's idle_timeout, each under its
	 * lock; the request can only spare rooms (its keep list) */
	{ HOP_STOP_IDLE, sizeof(struct helper_keep_args), ROOM_NONE, PRIV_ROOT, op_stop_idle,
	  NULL, 0 },
	/* stops every room, each under its lock; no input */
	{ HOP_STOP_ALL, 0, ROOM_NONE, PRIV_ROOT, op_stop_all, NULL, 0 },
	/* prepares the lower trees, removes what creations killed before
	 * their meta left (each room locked: never one being made), and
	 * reports fixed facts; no input */
	{ HOP_INFO, 0, ROOM_NONE, PRIV_ROOT, op_info, NULL, 0 },
	/* signals only processes in the room's own cgroup or pid namespace,
	 * never its keeper; at-limit only on the room's cgroup's word */
	{ HOP_KILL_ALL, sizeof(struct helper_kill_args), ROOM_EXISTING, PRIV_ROOT, op_kill_all,
	  check_kill_all, 0 },
	/* stops and starts an existing room's jail under its lock */
	{ HOP_RESTART, 0, ROOM_EXISTING, PRIV_ROOT, op_restart, NULL, 0 },
	/* joins only the room's network namespace (setns), connects to its
	 * loopback and hands the socket to the caller, who can reach the
	 * room anyway; never starts a room; serving, it drops every
	 * capability once joined (op_port_connect) */
	{ HOP_PORT_CONNECT, sizeof(struct helper_port_args), ROOM_OPEN, PRIV_JOIN, op_port_connect,
	  NULL, 0 },
	/* writes fixed numbers, each checked against the configuration's
	 * maxima, into the room's own state file and its own cgroup's limit
	 * files, under its lock; never creates a room */
	{ HOP_SET_LIMITS, sizeof(struct helper_limits_args), ROOM_EXISTING, PRIV_ROOT, op_set_limits,
	  check_set_limits, 0 },
	/* copies the room's own image and sessions into its own state
	 * directory under its lock; freezes only its own cgroup and its own
	 * file system (found by its image's device and inode), and thaws
	 * both whatever happens; names are checked ids, never paths */
	{ HOP_SNAPSHOT, sizeof(struct helper_snap_args), ROOM_EXISTING, PRIV_ROOT, op_snapshot,
	  check_snap, HELPER_COPY_ALARM_S },
	/* reads the room's snapshot records, as status reads its own */
	{ HOP_SNAPSHOTS, sizeof(struct helper_snap_args), ROOM_OPEN, PRIV_READ, op_snapshots,
	  check_snap, 0 },
	/* removes one of the room's snapshot directories, by a checked id,
	 * under its lock */
	{ HOP_SNAPSHOT_DELETE, sizeof(struct helper_snap_args), ROOM_EXISTING, PRIV_ROOT,
	  op_snapshot_delete, check_snap, 0 },
	/* stops and starts the room as restart does, swapping in a copy of
	 * one of its own snapshots: nothing of another room or the caller */
	{ HOP_RESTORE, sizeof(struct helper_snap_args), ROOM_EXISTING, PRIV_ROOT, op_restore,
	  check_snap, HELPER_COPY_ALARM_S },
	/* makes a new room as create does (slot, max_rooms, disk promise)
	 * with a copy of this room's image (room-relative ids: any slot);
	 * locks both rooms itself, in id order */
	{ HOP_FORK, sizeof(struct helper_snap_args), ROOM_OPEN, PRIV_ROOT, op_fork,
	  check_snap, HELPER_COPY_ALARM_S },
	/* under the room's lock: its image cut as snapshot cuts it (its own
	 * cgroup and file system frozen and thawed) into its own state
	 * directory, or one of its own snapshots by a checked id; a child
	 * keeping only the reading capabilities walks a read-only, detached
	 * mount of that copy (never following a symlink) into the caller's
	 * pipe */
	{ HOP_EXPORT, sizeof(struct helper_snap_args), ROOM_EXISTING, PRIV_ROOT, op_export,
	  check_snap, HELPER_COPY_ALARM_S },
	/* a new room made as creation makes it (never an image from the
	 * caller); a confined child writes the stream, checked again, beneath
	 * the fresh disk's upper/ (openat2 RESOLVE_BENEATH); no room is left
	 * unless all of it came and was written */
	{ HOP_IMPORT, sizeof(struct helper_import_args), ROOM_LOCK, PRIV_ROOT, op_import, NULL, 0 },
	/* asks the running room's keeper for a restricted channel and hands
	 * it to the caller: over it only plain execs as the room's root or
	 * user, checked by the keeper as untrusted, within the room's
	 * limits as this op reads them -- what exec already gives the
	 * caller.  Opens (creating when missing) only the room's own
	 * session and mark files, by its checked id, as root's owner: no
	 * capability needed; never starts a room */
	{ HOP_EXEC_CHANNEL, 0, ROOM_EXISTING, PRIV_READ, op_exec_channel, NULL, 0 },
	/* sets the mtime of the room's own active mark, by its checked id,
	 * never following a symlink, as root's owner (no capability); reads
	 * its records as status does; starts nothing, takes no lock */
	{ HOP_TOUCH, 0, ROOM_OPEN, PRIV_READ, op_touch, NULL, 0 },
};

static const struct op *op_find(uint32_t op)
{
	for (size_t i = 0; i < sizeof(OPS) / sizeof(OPS[0]); i++)
		if (OPS[i].op == op)
			return &OPS[i];
	return NULL;
}

/* The decoder's view of the table: each op's record size and room. */
static void request_shapes(struct request_shape shapes[HOP_COUNT])
{
	memset(shapes, 0, sizeof(struct request_shape) * HOP_COUNT);
	for (size_t i = 0; i < sizeof(OPS) / sizeof(OPS[0]); i++)
		shapes[OPS[i].op] = (struct request_shape){ OPS[i].args_size, OPS[i].room != ROOM_NONE, true };
}

/* Root as PRIV_READ: every capability but the reading ones gone, before
 * the op sees a room.  The ids stay 0 (the state files are root's). */
static int drop_privileges(struct helper *h, enum priv priv)
{
	if (priv != PRIV_READ)
		return 0;   /* PRIV_JOIN: the op drops them itself, once joined */
	uint64_t keep = (1ull << CAP_DAC_READ_SEARCH) | (1ull << CAP_DAC_OVERRIDE) |
		(1ull << CAP_SYS_PTRACE);
	return caps_keep_only(keep, h->err, sizeof(h->err)) < 0 ? fail(h, HELPER_E_DENIED) : 0;
}

static volatile sig_atomic_t alarm_rang;

static void alarm_rang_on(int sig)
{
	(void)sig;
	alarm_rang = 1;
}

/* One request: checked, its room made ready as the table says, the op run,
 * the room unlocked. */
static int dispatch(struct helper *h, const struct request *rq, struct answer *out)
{
	const struct op *op = op_find(rq->op);
	struct call c = { .rq = rq, .out = out };
	if (!op)   /* request_decode knows only the table's ops */
		return fail(h, HELPER_E_INVALID);
	if (op->room != ROOM_NONE && room_init(&c.r, &h->cfg, rq->room) < 0) {
		snprintf(h->err, sizeof(h->err), "room %s: path too long", rq->room);
		return fail(h, HELPER_E_INVALID);
	}
	if (op->check && op->check(h, &c) < 0)
		return -1;
	if (drop_privileges(h, op->priv) < 0)
		return -1;
	if (op->alarm_s) {
		/* the bound counts the wait for the room's lock too: an alarm
		 * there interrupts the wait (no SA_RESTART) and the call fails,
		 * nothing done; once locked, the alarm ends the helper as before
		 * (a cut's freeze thawed by its own handler) */
		struct sigaction sa = { .sa_handler = alarm_rang_on };
		sigaction(SIGALRM, &sa, NULL);
		alarm(op->alarm_s);
	}
	int rc = 0;
	if (op->room == ROOM_EXEC && (((const struct helper_exec_args *)rq->args)->flags & HX_EXISTING)) {
		int found = room_load(&c.r, h->err, sizeof(h->err));
		if (found == 0)
			snprintf(h->err, sizeof(h->err), "room %s not found", c.r.id);
		if (found <= 0)
			rc = fail(h, found == 0 ? HELPER_E_NOT_FOUND : HELPER_E_FAILED);
	}
	if (rc == 0 && op->room >= ROOM_LOCK)
		rc = call_lock(h, &c);
	if (op->alarm_s) {
		struct sigaction dfl = { .sa_handler = SIG_DFL };
		sigaction(SIGALRM, &dfl, NULL);
		if (alarm_rang) {
			snprintf(h->err, sizeof(h->err), "room %s: its lock was not free within %u s "
				 "(another operation holds it): nothing done", c.r.id, op->alarm_s);
			rc = fail(h, HELPER_E_FAILED);
		}
	}
	if (rc == 0 && op->room == ROOM_EXISTING) {
		int found = room_load(&c.r, h->err, sizeof(h->err));
		if (found == 0)
			snprintf(h->err, sizeof(h->err), "room not found");
		if (found <= 0)
			rc = fail(h, found == 0 ? HELPER_E_NOT_FOUND : HELPER_E_FAILED);
	}
	if (rc == 0 && op->room == ROOM_RUNNING && ensure_running(h, &c.r, true) <= 0)
		rc = -1;
	if (rc == 0)
		rc = op->run(h, &c);
	call_unlock(&c);
	jail_spare_wait();
	return rc;
}

/* ---- the answer ------------------------------------------------------------ */

static void write_all(int fd, const struct iovec *iov_in, int n)
{
	struct iovec iov[2];
	memcpy(iov, iov_in, sizeof(*iov) * (size_t)n);
	int i = 0;
	while (i < n) {
		ssize_t k = writev(fd, iov + i, n - i);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		for (; i < n && (size_t)k >= iov[i].iov_len; i++)
			k -= (ssize_t)iov[i].iov_len;
		if (i < n) {
			iov[i].iov_base = (char *)iov[i].iov_base + k;
			iov[i].iov_len -= (size_t)k;
		}
	}
}

/* The answer record (rc 0) or the error record on stdout, in one write
 * where the pipe takes it; the exit status. */
static int finish(struct helper *h, uint32_t op, struct answer *out, int rc)
{
	if (rc == 0 && out->failed) {
		snprintf(h->err, sizeof(h->err), "answer could not be built (out of memory)");
		rc = fail(h, HELPER_E_FAILED);
	}
	struct helper_ans ans = { .magic = HELPER_MAGIC, .version = HELPER_VERSION, .op = op };
	struct iovec iov[2];
	int n = 0;
	if (rc == 0) {
		ans.size = (uint32_t)(sizeof(ans) + out->len);
		iov[n++] = (struct iovec){ &ans, sizeof(ans) };
		iov[n++] = (struct iovec){ out->buf, out->len };
	} else {
		if (!h->err[0])
			snprintf(h->err, sizeof(h->err), "unknown failure");
		size_t len = strlen(h->err) + 1;
		ans.status = h->code ? h->code : HELPER_E_FAILED;
		ans.size = (uint32_t)(sizeof(ans) + len);
		iov[n++] = (struct iovec){ &ans, sizeof(ans) };
		iov[n++] = (struct iovec){ h->err, len };
	}
	write_all(1, iov, n);
	free(out->buf);
	return rc == 0 ? 0 : 1;
}

/* ---- the command line ------------------------------------------------------
 *
 * `roombox-helper [-c CONFIG] OP [ROOM | CMD...]`: the operations scripts
 * need (service stop, package removal, benchmarks), with the same caller
 * checks as a request on stdin.  The request is made with the client's
 * encoder and read back by the same decoder as any other; the answer is
 * printed as text. */
static char *cli_request(int argc, char **argv, size_t *len, bool *is_exec)
{
	struct helper_rec b;
	const char *name = argv[0];
	*is_exec = false;
	for (uint32_t op = 1; op < HOP_COUNT; op++) {
		if (strcmp(name, helper_op_name(op)) != 0)
			continue;
		const struct op *o = op_find(op);
		if (op == HOP_PORT_CONNECT || op == HOP_SET_LIMITS || op == HOP_EXPORT || op == HOP_IMPORT ||
		    op == HOP_EXEC_CHANNEL)
			return NULL;
		if (op == HOP_EXEC) {
			/* exec ROOM CMD: the command's stdin, stdout and stderr
			 * are the helper's own */
			if (argc != 3)
				return NULL;
			struct helper_exec_args a = { 0 };
			helper_rec_begin(&b, op, argv[1], &a, sizeof(a));
			helper_rec_string(&b, argv[2], strlen(argv[2]));
			*is_exec = true;
			return helper_rec_end(&b, len);
		}
		/* ops with arguments of their own (snapshots) are the API's */
		if (argc != (o->room != ROOM_NONE ? 2 : 1) || o->args_size > sizeof(struct helper_keep_args))
			return NULL;
		struct helper_keep_args k = { 0 };
		helper_rec_begin(&b, op, o->room != ROOM_NONE ? argv[1] : NULL, &k, o->args_size);
		return helper_rec_end(&b, len);
	}
	return NULL;
}

/* The answer on stdout as text: the op's facts, one room per line. */
static void cli_print(uint32_t op, const char *rec, size_t len)
{
	const struct helper_status *st;
	switch (op) {
	case HOP_STATUS: case HOP_CREATE: case HOP_LIST: {
		uint32_t n = 1;
		st = (const void *)rec;
		if (op == HOP_LIST) {
			n = ((const struct helper_list_ans *)rec)->count;
			st = (const void *)(rec + sizeof(struct helper_list_ans));
		}
		for (uint32_t i = 0; i < n; i++, st++)
			printf("%s running=%u created_at=%s last_active_ms=%lld disk_bytes=%llu "
			       "memory_bytes=%llu processes=%llu\n", st->room, st->running, st->created_at,
			       (long long)st->last_active_ms, (unsigned long long)st->disk_bytes,
			       (unsigned long long)st->memory_bytes, (unsigned long long)st->processes);
		break;
	}
	case HOP_STOP_IDLE: case HOP_STOP_ALL: {
		uint32_t n = ((const struct helper_stopped_ans *)rec)->count;
		for (uint32_t i = 0; i < n; i++)
			printf("stopped %s\n", rec + sizeof(struct helper_stopped_ans) + i * HELPER_ROOM_LEN);
		break;
	}
	case HOP_KILL_ALL:
		printf("killed %u\n", ((const struct helper_killed_ans *)rec)->killed);
		break;
	case HOP_INFO: {
		const struct helper_info_ans *a = (const void *)rec;
		printf("cgroup=%s version=%s network=%s\n", a->cgroup, a->version, a->network);
		break;
	}
	default:
		printf("ok\n");
	}
	(void)len;
}

/* The command line's errors: words on stderr. */
static bool cli_mode;

static void usage(FILE *f)
{
	fprintf(f, "usage: roombox-helper [-c CONFIG] [OP [ROOM] | exec ROOM CMD]\n"
		"roombox's privileged helper (setuid root): run by roombox-fcgi once per operation,\n"
		"with one request record on stdin when no OP is given (see roombox-helper(8)).\n"
		"  OP      stop-all, stop-idle, list, info (no ROOM); create, status, destroy, stop,\n"
		"          kill-all, restart ROOM; exec ROOM CMD\n"
		"  -c CONFIG  configuration file (root only; default %s)\n"
		"  -h, --help this text\n", ROOMBOX_CONF);
}

int main(int argc, char **argv)
{
	static struct helper h;
	static struct answer out;
	h.caller.uid = getuid();
	h.caller.gid = getgid();
	sanitize_process();

	/* what is asked: nothing is acted on before the caller checks */
	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		usage(stdout);
		return 0;
	}
	const char *conf = ROOMBOX_CONF;
	int i = 1;
	if (i + 1 < argc && !strcmp(argv[i], "-c")) {
		conf = argv[i + 1];
		i += 2;
	}
	char *buf = NULL;
	size_t len = 0;
	bool cli_exec = false;
	cli_mode = i < argc;
	if (cli_mode && (argv[i][0] == '-' || !(buf = cli_request(argc - i, argv + i, &len, &cli_exec)))) {
		usage(stderr);
		return 2;
	}
	int rc = 0;
	if (geteuid() != 0) {
		snprintf(h.err, sizeof(h.err), "roombox-helper must be setuid root (effective uid is %u)",
			 (unsigned)geteuid());
		rc = fail(&h, HELPER_E_DENIED);
	} else if (!caller_in_service_group(&h.caller)) {
		snprintf(h.err, sizeof(h.err), "caller uid %u is neither root nor in the service group "
			 "(the group that owns roombox-helper)", (unsigned)h.caller.uid);
		rc = fail(&h, HELPER_E_DENIED);
	} else if (strcmp(conf, ROOMBOX_CONF) != 0 && h.caller.uid != 0) {
		snprintf(h.err, sizeof(h.err), "-c %s: only root may name another configuration", conf);
		rc = fail(&h, HELPER_E_DENIED);
	}
	/* Everything below runs with real uid 0 so the kernel treats the
	 * helper's children as root's, not the caller's. */
	/* raw calls: libc's wrappers would first synchronise threads we do
	 * not have (six extra system calls each) */
	else if (syscall(SYS_setresgid, 0, 0, 0) < 0 || syscall(SYS_setresuid, 0, 0, 0) < 0) {
		snprintf(h.err, sizeof(h.err), "setresuid: %s", strerror(errno));
		rc = fail(&h, HELPER_E_DENIED);
	} else if (load_config(&h, conf) < 0) {
		rc = -1;
	}
	struct request_shape shapes[HOP_COUNT];
	struct request rq = { 0 };
	request_shapes(shapes);
	if (rc == 0 && !cli_mode && request_read(0, h.cfg.max_body, &buf, &len, h.err, sizeof(h.err)) < 0)
		rc = fail(&h, HELPER_E_INVALID);
	if (rc == 0 && request_decode(buf, len, shapes, &rq, h.err, sizeof(h.err)) < 0)
		rc = fail(&h, HELPER_E_INVALID);
	if (rc == 0 && cli_exec)
		for (int fd = 0; fd < 3; fd++)
			passed_io[fd] = fd;   /* the command's I/O is the helper's own */
	if (rc == 0)
		rc = room_dirs_prepare(&h.cfg, h.err, sizeof(h.err)) < 0 ? fail(&h, HELPER_E_FAILED)
			: dispatch(&h, &rq, &out);
	if (!cli_mode) {
		rc = finish(&h, rq.op, &out, rc);
		free(buf);
		return rc;
	}
	/* the command line: text, and an exec's own exit status */
	free(buf);
	if (rc < 0) {
		fprintf(stderr, "roombox-helper: %s: %s\n", helper_err_name(h.code ? h.code : HELPER_E_FAILED),
			h.err[0] ? h.err : "unknown failure");
		return 1;
	}
	if (cli_exec) {
		const struct helper_exec_ans *a = (const void *)out.buf;
		int st = a->wait_status;
		rc = a->timed_out ? 124 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	} else {
		cli_print(rq.op, out.buf, out.len);
	}
	free(out.buf);
	return rc;
}
