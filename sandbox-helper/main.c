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
 *   create / status / list / destroy / stop / stop-idle / stop-all / info;
 *   kill-all / restart (rooms that recover: see verb_exec too).
 *   port-connect  join the running room's network namespace, connect to
 *            127.0.0.1:<port> there and send the socket back over the
 *            caller's unix socket on fd 3 (portconn.c; preview ports).
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
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "config.h"
#include "exec.h"
#include "hostmask.h"
#include "jail.h"
#include "minijson.h"
#include "nsprocs.h"
#include "portconn.h"
#include "net.h"
#include "protocol.h"
#include "request.h"
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

/* fds 3, 4, 5 as the caller passed them for an exec's I/O (HK_IO): kept only
 * when each is a pipe open the right way (3 to read, 4 and 5 to write) or,
 * for stdout (4), a unix stream socket (a download's: HK_OPEN), and
 * close-on-exec, so no keeper or jail inherits them. */
#define PASSED_IO 3
static int passed_io[PASSED_IO] = { -1, -1, -1 };
/* fd 3 as a unix stream socket instead: where port-connect sends its
 * connection (the only op that uses it). */
static int passed_sock = -1;

static bool is_unix_stream(int fd)
{
	int v = 0;
	socklen_t len = sizeof(v);
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &len) < 0 || v != AF_UNIX)
		return false;
	len = sizeof(v);
	return getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &len) == 0 && v == SOCK_STREAM;
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
		if (fstat(fd, &st) == 0 &&
		    ((S_ISFIFO(st.st_mode) && (fl & O_ACCMODE) == (i == 0 ? O_RDONLY : O_WRONLY)) ||
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
	pid_t keeper = 0;
	if (!found) {
		/* finished by jail_start (room.h), given up here if it fails
		 * before */
		int rc = room_create(r, h->err, sizeof(h->err));
		if (rc < 0)
			return fail(h, rc == ROOM_ELIMIT ? HELPER_ERR_LIMIT
				    : rc == ROOM_ENOSPACE ? HELPER_ERR_NO_SPACE : HELPER_ERR_FAILED);
	} else {
		keeper = room_keeper_pid(r);
	}
	if (keeper > 0)
		return keeper;
	keeper = jail_start(r, cgroups(h), h->err, sizeof(h->err));
	room_create_abort(r);
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

static int stop_room(struct helper *h, struct room *r);

/* Every verb writes its answer object to out and returns 0, or returns -1
 * with h->err and h->code set (whatever it wrote is then dropped). */

/* A warm room is one whose keeper answers on its socket: then the exec
 * needs nothing else of the room's state (the keeper knows the room's uid),
 * so no meta, keeper record or /proc is read.  Otherwise the room is
 * loaded, created if new, and its keeper started.  0, -1 (error set) or
 * EXEC_AT_LIMIT (nothing written to out). */
/* The exec answer of common/protocol.h: the facts (the output went to the
 * caller's own pipes). */
static int answer_exec(struct mj_writer *out, const struct exec_outcome *o)
{
	mjw_object_begin(out);
	mjw_key(out, HK_WAIT_STATUS);
	mjw_int(out, o->wait_status);
	mjw_key(out, HK_TIMED_OUT);
	mjw_bool(out, o->timed_out);
	mjw_key(out, HK_DURATION_US);
	mjw_int(out, (int64_t)o->duration_us);
	mjw_key(out, HK_STARTED_MS);
	mjw_int(out, o->started_ms);
	mjw_object_end(out);
	return 0;
}

static int exec_attempts(struct helper *h, struct room *r, const struct exec_order *q,
			 struct exec_outcome *o)
{
	struct exec_job *job = exec_prepare(r, q, h->err, sizeof(h->err));
	if (!job)
		return fail(h, HELPER_ERR_FAILED);
	int rc = -1;
	for (int attempt = 0; attempt < 2 && rc != 0; attempt++) {
		if (room_lock(r, true, h->err, sizeof(h->err)) < 0)
			break;
		if (attempt == 0 && room_state_check(r, h->err, sizeof(h->err)) < 0) {
			room_unlock(r);
			break;
		}
		int conn = exec_connect(r);
		/* a second attempt: the keeper died or hung under the first one.
		 * If another exec has not replaced it meanwhile (it answers),
		 * make sure it is gone before starting another. */
		if (attempt > 0 && conn < 0)
			stop_room(h, r);
		if (conn < 0) {
			if (ensure_running(h, r, !q->existing) <= 0) {
				room_unlock(r);
				exec_job_free(job);
				return -1;
			}
			conn = exec_connect(r);
		}
		if (conn < 0) {
			/* alive but not answering: the next attempt replaces it */
			snprintf(h->err, sizeof(h->err), "room %s: its keeper does not answer", r->id);
			room_unlock(r);
			continue;
		}
		int busy = room_busy_enter(r);
		room_unlock(r);
		rc = exec_run(r, conn, job, q, o, h->err, sizeof(h->err));
		room_touch_active(r);
		if (busy >= 0)
			close(busy);
		if (rc != 0 && rc != EXEC_KEEPER_GONE)
			break;
	}
	exec_job_free(job);
	return rc == 0 || rc == EXEC_AT_LIMIT ? rc : fail(h, HELPER_ERR_FAILED);
}

static int kill_room_processes(struct helper *h, struct room *r, int *killed);

/* A room held at pids_limit by its own processes (a fork bomb) recovers
 * by itself (SPEC §8.3): when the exec could not start for the limit,
 * every process of the room but its keeper is killed, the service log
 * says so, and the command runs again -- once. */
static int verb_exec(struct helper *h, const struct mj_value *req, struct mj_writer *out)
{
	struct room r;
	struct exec_order q;
	if (open_room(h, req, &r) < 0)
		return -1;
	const char *code = request_exec_parse(req, &h->cfg, &q, h->err, sizeof(h->err));
	if (code)
		return fail(h, code);
	/* a request that only reads: a room that does not exist is not made,
	 * nor is anything of it (its run directory, its lock) */
	if (q.existing) {
		int found = room_load(&r, h->err, sizeof(h->err));
		if (found == 0)
			snprintf(h->err, sizeof(h->err), "room %s not found", r.id);
		if (found <= 0)
			return fail(h, found == 0 ? HELPER_ERR_NOT_FOUND : HELPER_ERR_FAILED);
	}
	/* the command's I/O is always the caller's own: its output never
	 * passes through this process */
	const struct mj_value *v = mj_get(req, HK_IO);
	if (!v || v->type != MJ_BOOL || !v->boolean || passed_io[0] < 0 || passed_io[1] < 0 ||
	    passed_io[2] < 0) {
		snprintf(h->err, sizeof(h->err), "io: true, and fds 3-5 the caller's stdin, stdout "
			 "and stderr pipes (stdout may be a unix socket)");
		return fail(h, HELPER_ERR_INVALID);
	}
	q.io = passed_io;
	/* The last line of defence against waiting forever (the exec's own
	 * deadline is the keeper's): roombox-fcgi cannot kill a setuid helper. */
	alarm((unsigned)(q.timeout_ms / 1000) + 120);
	q.limit_retry = h->cfg.pids_limit > 0;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	struct exec_outcome o;
	int rc = exec_attempts(h, &r, &q, &o);
	if (rc != EXEC_AT_LIMIT)
		return rc == 0 ? answer_exec(out, &o) : rc;
	/* the request's timeout is for the whole request: the second run gets
	 * what the first left of it (a second at least) */
	clock_gettime(CLOCK_MONOTONIC, &t1);
	uint64_t spent = (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
	q.timeout_ms = spent + 1000 < q.timeout_ms ? q.timeout_ms - spent : 1000;
	int killed = 0;
	char why[64];
	snprintf(why, sizeof(why), "%s", h->err);
	/* locked: a restart meanwhile would make another keeper, which this
	 * must not take for one of the room's processes */
	if (room_lock(&r, true, h->err, sizeof(h->err)) < 0)
		return fail(h, HELPER_ERR_FAILED);
	rc = kill_room_processes(h, &r, &killed);
	room_unlock(&r);
	if (rc < 0)
		return -1;
	fprintf(stderr, "roombox-helper: room %s: at its process limit (pids_limit %d, %s): "
		"killed %d processes, running the exec again\n", r.id, h->cfg.pids_limit, why, killed);
	q.limit_retry = false;
	rc = exec_attempts(h, &r, &q, &o);
	if (rc == EXEC_AT_LIMIT)
		return fail(h, HELPER_ERR_FAILED);
	return rc == 0 ? answer_exec(out, &o) : rc;
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
		rc = kill_room_ids(h, &r);
	/* Nothing of it runs any more: it stops being a room first, so a step
	 * that fails below leaves leftovers for the next destroy, not a room
	 * that is still listed. */
	if (rc == 0)
		rc = room_forget(&r, h->err, sizeof(h->err));
	if (rc == 0) {
		room_slot_release(&r);
		rc = cgroup_room_remove(cgroups(h), r.id, h->err, sizeof(h->err));
		int lock = room_state_lock(&h->cfg);
		if (rc == 0)
			cgroup_group_remove_if_empty(cgroups(h));
		if (room_foreach(&h->cfg, other_room, r.id) == 0)
			net_instance_remove(&h->cfg);
		if (lock >= 0)
			close(lock);
		/* the files go even when the cgroup stays; the first error is told */
		if (room_remove_files(&r, rc == 0 ? h->err : err, rc == 0 ? sizeof(h->err) : sizeof(err)) < 0)
			rc = -1;
	}
	room_unlock(&r);
	if (rc < 0)
		return fail(h, HELPER_ERR_FAILED);
	answer_flag(out, HK_DESTROYED);
	return 0;
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
			? fail(h, HELPER_ERR_FAILED) : 0;
	char err[256];
	if (nsprocs_kill_others(keeper, killed, err, sizeof(err)) < 0) {
		snprintf(h->err, sizeof(h->err), "room %s: kill its processes: %s", r->id, err);
		return fail(h, HELPER_ERR_FAILED);
	}
	return 0;
}

/* An existing room, locked: 0, or -1 with "not_found" (the room was never
 * made or was cleaned up) or another error. */
static int lock_existing_room(struct helper *h, const struct mj_value *req, struct room *r)
{
	if (open_room(h, req, r) < 0 || room_lock(r, true, h->err, sizeof(h->err)) < 0)
		return -1;
	int found = room_load(r, h->err, sizeof(h->err));
	if (found == 1)
		return 0;
	room_unlock(r);
	if (found == 0)
		snprintf(h->err, sizeof(h->err), "room not found");
	return fail(h, found == 0 ? HELPER_ERR_NOT_FOUND : HELPER_ERR_FAILED);
}

static int verb_kill_all(struct helper *h, const struct mj_value *req, struct mj_writer *out)
{
	struct room r;
	int killed;
	if (lock_existing_room(h, req, &r) < 0)
		return -1;
	int rc = kill_room_processes(h, &r, &killed);
	room_unlock(&r);
	if (rc < 0)
		return -1;
	mjw_object_begin(out);
	mjw_key(out, HK_KILLED);
	mjw_int(out, killed);
	mjw_object_end(out);
	return 0;
}

/* Stop the jail (every process, the keeper too) and start a new one: files
 * and session are on disk and stay. */
static int verb_restart(struct helper *h, const struct mj_value *req, struct mj_writer *out)
{
	struct room r;
	if (lock_existing_room(h, req, &r) < 0)
		return -1;
	int rc = stop_room(h, &r) < 0 ? fail(h, HELPER_ERR_FAILED) : 0;
	if (rc == 0 && ensure_running(h, &r, false) <= 0)
		rc = -1;
	room_unlock(&r);
	if (rc < 0)
		return -1;
	answer_flag(out, HK_RESTARTED);
	return 0;
}

struct stop_many {
	struct helper *h;
	struct mj_writer *out;
	bool idle_only;
	const struct mj_value *keep;   /* stop-idle: room ids left running, or NULL */
};

static bool in_keep(const struct mj_value *keep, const char *id)
{
	for (size_t i = 0; keep && keep->type == MJ_ARRAY && i < keep->len; i++) {
		const struct mj_value *v = &keep->members[i].value;
		if (v->type == MJ_STRING && strlen(id) == v->len && !memcmp(v->str, id, v->len))
			return true;
	}
	return false;
}

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
		if (now_ms - room_last_active_ms(&r) < (int64_t)s->h->cfg.idle_timeout_ms || room_is_busy(&r) ||
		    in_keep(s->keep, id))
			return 0;
	}
	if (room_lock(&r, true, err, sizeof(err)) < 0)
		return 0;
	if (room_load(&r, err, sizeof(err)) == 1 && stop_room(s->h, &r) == 0)
		mjw_cstring(s->out, id);
	room_unlock(&r);
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

static int verb_stop_many(struct helper *h, const struct mj_value *req, bool idle_only,
			  struct mj_writer *out)
{
	struct stop_many s = { h, out, idle_only, idle_only ? mj_get(req, HK_KEEP) : NULL };
	mjw_object_begin(out);
	mjw_key(out, HK_STOPPED);
	mjw_array_begin(out);
	if (!idle_only || h->cfg.idle_timeout_ms > 0)
		room_foreach(&h->cfg, stop_if_due, &s);
	if (idle_only)
		lower_prepare(h, "stop-idle");
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
	lower_prepare(h, "info");
	if (h->cfg.disk_limit)   /* for /api/health and creations, from the service's start */
		room_disk_commit_count(&h->cfg);
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

/* Preview ports (SPEC §8.5): a connection to the room's 127.0.0.1:port,
 * sent over the caller's unix socket on fd 3 (portconn.c).  A stopped room
 * is not started for it: nothing could be listening in a fresh one. */
static int verb_port_connect(struct helper *h, const struct mj_value *req, struct mj_writer *out)
{
	struct room r;
	if (open_room(h, req, &r) < 0)
		return -1;
	if (passed_sock < 0) {
		snprintf(h->err, sizeof(h->err), "room %s: port-connect: fd 3 must be a unix stream socket", r.id);
		return fail(h, HELPER_ERR_INVALID);
	}
	const struct mj_value *serve = mj_get(req, HK_SERVE);
	if (serve && serve->type == MJ_BOOL && serve->boolean) {
		/* bounded by its own idle time and the keeper's life, not alarm */
		int rc = portconn_serve(&r, passed_sock, h->err, sizeof(h->err));
		if (rc < 0)
			return fail(h, rc == PORTCONN_REFUSED ? HELPER_ERR_REFUSED : HELPER_ERR_FAILED);
		answer_flag(out, HK_CONNECTED);
		return 0;
	}
	const struct mj_value *v = mj_get(req, HK_PORT);
	if (!v || v->type != MJ_NUMBER || !v->is_int || v->integer < 1 || v->integer > 65535) {
		snprintf(h->err, sizeof(h->err), "room %s: port must be a whole number from 1 to 65535", r.id);
		return fail(h, HELPER_ERR_INVALID);
	}
	int port = (int)v->integer;
	alarm(30);   /* connect is bounded by itself; this bounds the rest */
	int fd = portconn_open(&r, port, h->err, sizeof(h->err));
	if (fd < 0)
		return fail(h, fd == PORTCONN_REFUSED ? HELPER_ERR_REFUSED : HELPER_ERR_FAILED);
	int rc = portconn_send(&r, passed_sock, fd, h->err, sizeof(h->err));
	close(fd);
	if (rc < 0)
		return fail(h, HELPER_ERR_FAILED);
	room_touch_active(&r);
	answer_flag(out, HK_CONNECTED);
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
		return verb_stop_many(h, req, true, out);
	if (!strcmp(op, HELPER_OP_STOP_ALL))
		return verb_stop_many(h, req, false, out);
	if (!strcmp(op, HELPER_OP_INFO))
		return verb_info(h, out);
	if (!strcmp(op, HELPER_OP_KILL_ALL))
		return verb_kill_all(h, req, out);
	if (!strcmp(op, HELPER_OP_RESTART))
		return verb_restart(h, req, out);
	if (!strcmp(op, HELPER_OP_PORT_CONNECT))
		return verb_port_connect(h, req, out);
	snprintf(h->err, sizeof(h->err), "unknown op '%.40s'", op);
	return fail(h, HELPER_ERR_INVALID);
}

/* The answer and its newline in one write where the pipe takes it: the
 * caller wakes once for the whole reply. */
static void emit(const char *s, size_t len)
{
	struct iovec iov[2] = { { (void *)s, len }, { "\n", 1 } };
	int i = 0;
	while (i < 2) {
		ssize_t n = writev(1, iov + i, 2 - i);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		for (; i < 2 && (size_t)n >= iov[i].iov_len; i++)
			n -= (ssize_t)iov[i].iov_len;
		if (i < 2) {
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
		emit(text, len);
	free(text);
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
	const struct mj_value *req = request_read_parse(0, h.cfg.max_body, &doc, h.err, sizeof(h.err));
	int rc = !req ? fail(&h, HELPER_ERR_INVALID)
		: room_dirs_prepare(&h.cfg, h.err, sizeof(h.err)) < 0 ? fail(&h, HELPER_ERR_FAILED)
		: dispatch(&h, req, &out);
	mj_free(doc);
	return finish(&h, &out, rc);
}
