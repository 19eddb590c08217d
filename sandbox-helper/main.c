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
#include <time.h>
#include <unistd.h>
#include <json-c/json.h>

#include "cgroup.h"
#include "config.h"
#include "exec.h"
#include "jail.h"
#include "protocol.h"
#include "room.h"
#include "roomid.h"
#include "textenc.h"

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

static void sanitize_process(void)
{
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
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (fd < 0) {
		snprintf(h->err, sizeof(h->err), "configuration %s: %s", path, strerror(errno));
		return fail(h, "denied");
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022)) {
		close(fd);
		snprintf(h->err, sizeof(h->err),
			 "configuration %s: refusing a file that is not root's or is group/world-writable", path);
		return fail(h, "denied");
	}
	char *text = malloc((size_t)st.st_size + 1);
	ssize_t n = text ? read(fd, text, (size_t)st.st_size) : -1;
	close(fd);
	if (n < 0) {
		free(text);
		snprintf(h->err, sizeof(h->err), "configuration %s: read failed", path);
		return fail(h, "denied");
	}
	text[n] = '\0';
	config_defaults(&h->cfg);
	int rc = config_parse(&h->cfg, path, text, h->err, sizeof(h->err));
	free(text);
	return rc < 0 ? fail(h, "denied") : 0;
}

static json_object *read_request(struct helper *h)
{
	size_t cap = 65536, len = 0;
	char *buf = malloc(cap);
	ssize_t n;
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
		fail(h, "invalid");
		return NULL;
	}
	json_tokener *tok = json_tokener_new();
	json_object *o = json_tokener_parse_ex(tok, buf, (int)len);
	if (!o || json_tokener_get_error(tok) != json_tokener_success || !json_object_is_type(o, json_type_object)) {
		json_object_put(o);
		o = NULL;
		snprintf(h->err, sizeof(h->err), "request is not a JSON object");
		fail(h, "invalid");
	}
	json_tokener_free(tok);
	free(buf);
	return o;
}

/* ---- verbs ------------------------------------------------------------- */

static const char *get_str(json_object *o, const char *key)
{
	json_object *v;
	return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string)
		? json_object_get_string(v) : NULL;
}

static int open_room(struct helper *h, json_object *req, struct room *r)
{
	const char *id = get_str(req, "room");
	if (!id || !room_id_valid(id)) {
		snprintf(h->err, sizeof(h->err), "invalid room id");
		return fail(h, "invalid");
	}
	if (room_init(r, &h->cfg, id) < 0) {
		snprintf(h->err, sizeof(h->err), "room %s: path too long", id);
		return fail(h, "invalid");
	}
	return 0;
}

/* Room locked exclusively; make it exist and run.  Returns keeper pid. */
static pid_t ensure_running(struct helper *h, struct room *r, bool create)
{
	int found = room_load(r, h->err, sizeof(h->err));
	if (found < 0)
		return fail(h, "failed");
	if (!found && !create) {
		snprintf(h->err, sizeof(h->err), "room not found");
		return fail(h, "not_found");
	}
	if (!found) {
		int rc = room_create(r, h->err, sizeof(h->err));
		if (rc < 0)
			return fail(h, rc == ROOM_ELIMIT ? "limit" : "failed");
	}
	pid_t keeper = room_keeper_pid(r);
	if (keeper > 0)
		return keeper;
	keeper = jail_start(r, cgroups(h), h->err, sizeof(h->err));
	return keeper < 0 ? fail(h, "failed") : keeper;
}

static json_object *room_status(struct helper *h, struct room *r)
{
	json_object *o = json_object_new_object();
	char sandbox[80], stamp[40];
	snprintf(sandbox, sizeof(sandbox), "sandbox-%s", r->id);
	json_object_object_add(o, "roomId", json_object_new_string(r->id));
	json_object_object_add(o, "sandboxName", json_object_new_string(sandbox));
	bool running = room_keeper_pid(r) > 0;
	json_object_object_add(o, "state", json_object_new_string(running ? "running" : "stopped"));
	json_object_object_add(o, "createdAt", json_object_new_string(r->created_at));
	int64_t ms = room_last_active_ms(r);
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
	iso8601_utc(&ts, stamp, sizeof(stamp));
	json_object_object_add(o, "lastActiveAt", json_object_new_string(stamp));
	uint64_t mem = 0, procs = 0;
	if (running)
		cgroup_room_usage(cgroups(h), r->id, &mem, &procs);
	json_object *u = json_object_new_object();
	json_object_object_add(u, "diskBytes", json_object_new_int64((int64_t)room_disk_usage(r)));
	json_object_object_add(u, "memoryBytes", json_object_new_int64((int64_t)mem));
	json_object_object_add(u, "processes", json_object_new_int64((int64_t)procs));
	json_object_object_add(o, "usage", u);
	return o;
}

static int exec_request_parse(struct helper *h, json_object *req, struct exec_request *q)
{
	json_object *v;
	memset(q, 0, sizeof(*q));
	q->cmd = get_str(req, "cmd");
	if (!q->cmd || !*q->cmd) {
		snprintf(h->err, sizeof(h->err), "cmd missing");
		return fail(h, "invalid");
	}
	q->timeout_ms = h->cfg.exec_timeout_ms;
	if (json_object_object_get_ex(req, "timeout_ms", &v)) {
		int64_t t = json_object_get_int64(v);
		if (t <= 0 || (uint64_t)t > h->cfg.exec_timeout_max_ms) {
			snprintf(h->err, sizeof(h->err), "timeout_ms out of range");
			return fail(h, "invalid");
		}
		q->timeout_ms = (uint64_t)t;
	}
	if (json_object_object_get_ex(req, "env", &v) && json_object_is_type(v, json_type_object)) {
		json_object_object_foreach(v, k, val) {
			if (!json_object_is_type(val, json_type_string) || !*k) {
				snprintf(h->err, sizeof(h->err), "env values must be strings");
				return fail(h, "invalid");
			}
		}
		q->env = v;
	}
	q->cwd = get_str(req, "cwd");
	if (q->cwd && q->cwd[0] != '/') {
		snprintf(h->err, sizeof(h->err), "cwd must be absolute");
		return fail(h, "invalid");
	}
	if (json_object_object_get_ex(req, "stdin", &v) && json_object_is_type(v, json_type_string)) {
		q->stdin_data = json_object_get_string(v);
		q->stdin_len = (size_t)json_object_get_string_len(v);
	}
	const char *enc = get_str(req, "encoding");
	q->base64 = enc && strcmp(enc, "base64") == 0;
	return 0;
}

static int stop_room(struct helper *h, struct room *r);

static json_object *verb_exec(struct helper *h, json_object *req)
{
	struct room r;
	struct exec_request q;
	if (open_room(h, req, &r) < 0 || exec_request_parse(h, req, &q) < 0)
		return NULL;
	json_object *res = NULL;
	for (int attempt = 0; attempt < 2; attempt++) {
		if (room_lock(&r, true, h->err, sizeof(h->err)) < 0) {
			fail(h, "failed");
			return NULL;
		}
		/* a second attempt: the keeper died under the first one;
		 * make sure it is gone before starting another */
		if (attempt > 0)
			stop_room(h, &r);
		pid_t keeper = ensure_running(h, &r, true);
		int busy = keeper > 0 ? room_busy_enter(&r) : -1;
		room_unlock(&r);
		if (keeper <= 0) {
			if (busy >= 0)
				close(busy);
			return NULL;
		}
		int rc = exec_run(&r, keeper, &q, &res, h->err, sizeof(h->err));
		room_touch_active(&r);
		if (busy >= 0)
			close(busy);
		if (rc == 0)
			return res;
		if (rc != EXEC_KEEPER_GONE)
			break;
	}
	fail(h, "failed");
	return NULL;
}

static json_object *verb_create(struct helper *h, json_object *req)
{
	struct room r;
	if (open_room(h, req, &r) < 0 || room_lock(&r, true, h->err, sizeof(h->err)) < 0)
		return NULL;
	json_object *o = ensure_running(h, &r, true) > 0 ? room_status(h, &r) : NULL;
	room_unlock(&r);
	return o;
}

static json_object *verb_status(struct helper *h, json_object *req)
{
	struct room r;
	if (open_room(h, req, &r) < 0)
		return NULL;
	int found = room_load(&r, h->err, sizeof(h->err));
	if (found <= 0) {
		if (found == 0)
			snprintf(h->err, sizeof(h->err), "room not found");
		fail(h, found == 0 ? "not_found" : "failed");
		return NULL;
	}
	return room_status(h, &r);
}

static int add_status(const char *id, void *arg)
{
	void **a = arg;
	struct helper *h = a[0];
	struct room r;
	char err[256];
	if (room_init(&r, &h->cfg, id) == 0 && room_load(&r, err, sizeof(err)) == 1)
		json_object_array_add(a[1], room_status(h, &r));
	return 0;
}

static json_object *verb_list(struct helper *h, json_object *req)
{
	json_object *arr = json_object_new_array();
	void *a[2] = { h, arr };
	room_foreach(&h->cfg, add_status, a);
	json_object *o = json_object_new_object();
	json_object_object_add(o, "rooms", arr);
	return o;
}

/* Stop one room (locked by the caller); files and session stay. */
static int stop_room(struct helper *h, struct room *r)
{
	pid_t keeper = room_keeper_pid(r);
	if (keeper <= 0)
		return 0;
	return jail_stop(r, cgroups(h), keeper, h->err, sizeof(h->err));
}

static json_object *verb_stop(struct helper *h, json_object *req)
{
	struct room r;
	if (open_room(h, req, &r) < 0 || room_lock(&r, true, h->err, sizeof(h->err)) < 0)
		return NULL;
	int rc = stop_room(h, &r);
	room_unlock(&r);
	if (rc < 0) {
		fail(h, "failed");
		return NULL;
	}
	json_object *o = json_object_new_object();
	json_object_object_add(o, "stopped", json_object_new_boolean(1));
	return o;
}

static json_object *verb_destroy(struct helper *h, json_object *req)
{
	struct room r;
	if (open_room(h, req, &r) < 0 || room_lock(&r, true, h->err, sizeof(h->err)) < 0)
		return NULL;
	char err[256];
	room_load(&r, err, sizeof(err));   /* for its slot; absent is fine */
	int rc = stop_room(h, &r);
	if (rc == 0)
		rc = cgroup_room_remove(cgroups(h), r.id, h->err, sizeof(h->err));
	if (rc == 0) {
		int lock = room_state_lock(&h->cfg);
		cgroup_group_remove_if_empty(cgroups(h));
		if (lock >= 0)
			close(lock);
	}
	if (rc == 0)
		rc = room_remove_files(&r, h->err, sizeof(h->err));
	if (rc == 0)
		room_slot_release(&r);
	room_unlock(&r);
	if (rc < 0) {
		fail(h, "failed");
		return NULL;
	}
	json_object *o = json_object_new_object();
	json_object_object_add(o, "destroyed", json_object_new_boolean(1));
	return o;
}

struct stop_many {
	struct helper *h;
	json_object *stopped;
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
		json_object_array_add(s->stopped, json_object_new_string(id));
	room_unlock(&r);
	return 0;
}

static json_object *verb_stop_many(struct helper *h, bool idle_only)
{
	struct stop_many s = { h, json_object_new_array(), idle_only };
	if (!idle_only || h->cfg.idle_timeout_ms > 0)
		room_foreach(&h->cfg, stop_if_due, &s);
	json_object *o = json_object_new_object();
	json_object_object_add(o, "stopped", s.stopped);
	return o;
}

static json_object *verb_info(struct helper *h, json_object *req)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "cgroup", json_object_new_string(cgroup_mode_name(cgroups(h)->mode)));
	json_object_object_add(o, "version", json_object_new_string(ROOMBOX_VERSION));
	return o;
}

static json_object *dispatch(struct helper *h, json_object *req)
{
	const char *op = get_str(req, "op");
	if (!op) {
		snprintf(h->err, sizeof(h->err), "request has no op");
		fail(h, "invalid");
		return NULL;
	}
	if (!strcmp(op, "exec"))
		return verb_exec(h, req);
	if (!strcmp(op, "create"))
		return verb_create(h, req);
	if (!strcmp(op, "status"))
		return verb_status(h, req);
	if (!strcmp(op, "list"))
		return verb_list(h, req);
	if (!strcmp(op, "destroy"))
		return verb_destroy(h, req);
	if (!strcmp(op, "stop"))
		return verb_stop(h, req);
	if (!strcmp(op, "stop-idle"))
		return verb_stop_many(h, true);
	if (!strcmp(op, "stop-all"))
		return verb_stop_many(h, false);
	if (!strcmp(op, "info"))
		return verb_info(h, req);
	snprintf(h->err, sizeof(h->err), "unknown op '%.40s'", op);
	fail(h, "invalid");
	return NULL;
}

static void emit(json_object *o)
{
	const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
	size_t len = strlen(s), off = 0;
	while (off < len) {
		ssize_t n = write(1, s + off, len - off);
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	if (write(1, "\n", 1) < 0)
		return;
}

static int finish(struct helper *h, json_object *out)
{
	if (out) {
		emit(out);
		json_object_put(out);
		return 0;
	}
	json_object *e = json_object_new_object();
	json_object_object_add(e, "error", json_object_new_string(h->err[0] ? h->err : "unknown failure"));
	json_object_object_add(e, "code", json_object_new_string(h->code ? h->code : "failed"));
	emit(e);
	json_object_put(e);
	return 1;
}

int main(int argc, char **argv)
{
	static struct helper h;
	h.caller.uid = getuid();
	h.caller.gid = getgid();
	sanitize_process();

	if (geteuid() != 0) {
		snprintf(h.err, sizeof(h.err), "roombox-helper must be setuid root (effective uid is %u)",
			 (unsigned)geteuid());
		return finish(&h, (fail(&h, "denied"), NULL));
	}
	if (!caller_in_service_group(&h.caller)) {
		snprintf(h.err, sizeof(h.err), "caller uid %u is neither root nor in the service group "
			 "(the group that owns roombox-helper)", (unsigned)h.caller.uid);
		return finish(&h, (fail(&h, "denied"), NULL));
	}
	const char *conf = ROOMBOX_CONF;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-c") && i + 1 < argc) {
			conf = argv[++i];
			continue;
		}
		snprintf(h.err, sizeof(h.err), "usage: roombox-helper [-c CONFIG] < request.json");
		return finish(&h, (fail(&h, "invalid"), NULL));
	}
	if (strcmp(conf, ROOMBOX_CONF) != 0 && h.caller.uid != 0) {
		snprintf(h.err, sizeof(h.err), "-c %s: only root may name another configuration", conf);
		return finish(&h, (fail(&h, "denied"), NULL));
	}
	/* Everything below runs with real uid 0 so the kernel treats the
	 * helper's children as root's, not the caller's. */
	if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0) {
		snprintf(h.err, sizeof(h.err), "setresuid: %s", strerror(errno));
		return finish(&h, (fail(&h, "denied"), NULL));
	}
	if (load_config(&h, conf) < 0)
		return finish(&h, NULL);
	json_object *req = read_request(&h);
	if (!req)
		return finish(&h, NULL);
	if (room_dirs_prepare(&h.cfg, h.err, sizeof(h.err)) < 0) {
		json_object_put(req);
		return finish(&h, (fail(&h, "failed"), NULL));
	}
	json_object *out = dispatch(&h, req);
	json_object_put(req);
	return finish(&h, out);
}
