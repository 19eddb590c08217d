/* Managed processes' records: the one list of this
 * roombox-fcgi's processes, and what of them is on disk.
 *
 * Every process (running ones and the records of ended ones, at most
 * PROCS_ENDED_MAX per room) is in one list behind procs_lock; the logger
 * finds a process by its serial, never by a pointer it kept, so forgetting
 * one (cleanup) is safe at any time.
 *
 * On disk, under <state_dir>/processes/<room>/: <id>.json, the record
 * (written whole to a temporary file, fsync'd, renamed, directory fsync'd),
 * beside the logs process_log.c keeps (<id>.stdout, <id>.stdout.1, ...).
 * At start the records are loaded; one that says `running` was running
 * when roombox-fcgi stopped, and its pipes ended with it: `lost`. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "exec_result.h"
#include "json_strict.h"
#include "metrics.h"
#include "process_store.h"
#include "timefmt.h"

const char *const proc_stream_name[2] = { "stdout", "stderr" };
const char *const proc_status_name[] = { "running", "exited", "killed", "lost" };

pthread_mutex_t procs_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t procs_changed;
static struct proc *procs;
static unsigned long next_serial = 1;
static char procs_dir[PATH_MAX];

/* ---- the list ---- */

struct proc *proc_find(const char *room, const char *id)
{
	for (struct proc *p = procs; p; p = p->next)
		if (!strcmp(p->room, room) && !strcmp(p->id, id))
			return p;
	return NULL;
}

struct proc *proc_find_serial(unsigned long serial)
{
	for (struct proc *p = procs; p; p = p->next)
		if (p->serial == serial)
			return p;
	return NULL;
}

void proc_add(struct proc *p)
{
	p->serial = next_serial++;
	p->next = procs;
	procs = p;
}

static int by_serial(const void *a, const void *b)
{
	unsigned long x = (*(struct proc *const *)a)->serial, y = (*(struct proc *const *)b)->serial;

	return x < y ? -1 : x > y;
}

struct proc **procs_of_room(const char *room, size_t *n)
{
	struct proc **v;

	*n = 0;
	for (struct proc *p = procs; p; p = p->next)
		*n += !strcmp(p->room, room);
	v = calloc(*n + 1, sizeof(*v));
	*n = 0;
	for (struct proc *p = procs; p && v; p = p->next)
		if (!strcmp(p->room, room))
			v[(*n)++] = p;
	if (v)
		qsort(v, *n, sizeof(*v), by_serial);
	return v;
}

json_object *proc_json(const struct proc *p)
{
	json_object *o = json_object_new_object();
	bool ended = p->status == P_EXITED || p->status == P_KILLED;

	json_object_object_add(o, "id", json_object_new_string(p->id));
	json_object_object_add(o, "pid", p->pid ? json_object_new_int64(p->pid) : NULL);
	json_object_object_add(o, "command", json_object_new_string(p->command));
	json_object_object_add(o, "status", json_object_new_string(proc_status_name[p->status]));
	json_object_object_add(o, "startTime", json_object_new_string(p->start));
	json_object_object_add(o, "endTime", p->end[0] ? json_object_new_string(p->end) : NULL);
	json_object_object_add(o, "exitCode", ended ? json_object_new_int(p->exit_code) : NULL);
	json_object_object_add(o, "signal", p->signal[0] ? json_object_new_string(p->signal) : NULL);
	return o;
}

void proc_set_exit(struct proc *p, int code)
{
	p->exit_code = code;
	p->signal[0] = '\0';
	if (code > 128 && code - 128 <= 64)
		signal_name(code - 128, p->signal, sizeof(p->signal));
	p->status = p->signal[0] ? P_KILLED : P_EXITED;
}

void proc_close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

void proc_now_iso(char *buf, size_t len)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	iso8601_utc(&ts, buf, len);
}

void procs_wait_changed(int ms)
{
	struct timespec at;

	clock_gettime(CLOCK_MONOTONIC, &at);
	at.tv_sec += ms / 1000;
	at.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (at.tv_nsec >= 1000000000L) {
		at.tv_sec++;
		at.tv_nsec -= 1000000000L;
	}
	pthread_cond_timedwait(&procs_changed, &procs_lock, &at);
}

/* ---- the record on disk ---- */

void proc_file_path(char *buf, size_t len, const char *room, const char *id, const char *suffix)
{
	snprintf(buf, len, "%s/%s/%s%s", procs_dir, room, id, suffix);
}

static int fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc = fd < 0 ? -1 : fsync(fd);

	if (fd >= 0)
		close(fd);
	return rc;
}

/* The room's directory, made when missing. */
static int room_dir(const char *room, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", procs_dir, room);
	if (mkdir(buf, 0700) < 0 && errno != EEXIST)
		return -1;
	return 0;
}

/* p's record into dir/<id>.json, durably.  0, or -1 with errno. */
static int record_write(const struct proc *p, const char *dir)
{
	char tmp[PATH_MAX + 64], final[PATH_MAX + 64];
	json_object *o = proc_json(p);
	const char *text;
	int fd, rc = -1;

	json_object_object_add(o, "serial", json_object_new_int64((int64_t)p->serial));
	json_object_object_add(o, "sid", json_object_new_int64(p->sid));
	json_object_object_add(o, "cutStdout", json_object_new_boolean(p->cut[PROC_OUT]));
	json_object_object_add(o, "cutStderr", json_object_new_boolean(p->cut[PROC_ERR]));
	text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
	snprintf(tmp, sizeof(tmp), "%s/%s.json.tmp", dir, p->id);
	snprintf(final, sizeof(final), "%s/%s.json", dir, p->id);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd >= 0) {
		if (write(fd, text, strlen(text)) == (ssize_t)strlen(text) && fsync(fd) == 0)
			rc = 0;
		close(fd);
	}
	if (rc == 0 && (rename(tmp, final) < 0 || fsync_dir(dir) < 0))
		rc = -1;
	json_object_put(o);
	return rc;
}

void proc_record_save(struct proc *p)
{
	char dir[PATH_MAX];

	if (room_dir(p->room, dir, sizeof(dir)) < 0 || record_write(p, dir) < 0)
		fprintf(stderr, "roombox-fcgi: room %s: process %s: save its record: %m\n", p->room, p->id);
}

static const char *const proc_suffixes[] = { ".json", ".json.tmp", ".stdout", ".stdout.1",
					      ".stderr", ".stderr.1" };

static void files_remove(const char *room, const char *id)
{
	const char *const *suffixes = proc_suffixes;
	char path[PATH_MAX + 64];

	for (size_t i = 0; i < sizeof(proc_suffixes) / sizeof(proc_suffixes[0]); i++) {
		proc_file_path(path, sizeof(path), room, id, suffixes[i]);
		unlink(path);
	}
}

static void proc_free(struct proc *p)
{
	proc_close_fd(&p->fd[PROC_OUT]);
	proc_close_fd(&p->fd[PROC_ERR]);
	proc_close_fd(&p->in_fd);
	files_remove(p->room, p->id);
	free(p->command);
	free(p);
}

void proc_drop(struct proc *p)
{
	for (struct proc **q = &procs; *q; q = &(*q)->next)
		if (*q == p) {
			*q = p->next;
			break;
		}
	proc_free(p);
}

void procs_prune_ended(const char *room)
{
	int n = 0;

	for (struct proc *q = procs; q; q = q->next)
		n += !strcmp(q->room, room) && q->status != P_RUNNING;
	while (n-- > PROCS_ENDED_MAX) {
		struct proc **oldest = NULL;

		for (struct proc **q = &procs; *q; q = &(*q)->next)
			if (!strcmp((*q)->room, room) && (*q)->status != P_RUNNING &&
			    (*q)->fd[PROC_OUT] < 0 && (*q)->fd[PROC_ERR] < 0 && !(*q)->readers &&
			    (!oldest || (*q)->serial < (*oldest)->serial))
				oldest = q;
		if (!oldest)
			break;
		struct proc *gone = *oldest;

		*oldest = gone->next;
		proc_free(gone);
	}
}

/* ---- start-up: the records on disk ---- */

static const char *jstr(json_object *o, const char *key)
{
	json_object *v;

	return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string)
		? json_object_get_string(v) : NULL;
}

static int64_t jint(json_object *o, const char *key)
{
	json_object *v;

	return json_object_object_get_ex(o, key, &v) ? json_object_get_int64(v) : 0;
}

static void load_record(const char *room, const char *file, bool fresh_serial)
{
	char path[PATH_MAX + 300];
	json_object *o, *v;
	struct proc *p;
	const char *id, *cmd, *status;

	snprintf(path, sizeof(path), "%s/%s/%s", procs_dir, room, file);
	o = json_object_from_file(path);
	id = o ? jstr(o, "id") : NULL;
	cmd = o ? jstr(o, "command") : NULL;
	status = o ? jstr(o, "status") : NULL;
	if (!id || !cmd || !status || !room_id_valid(id) || !(p = calloc(1, sizeof(*p)))) {
		json_object_put(o);
		return;
	}
	snprintf(p->room, sizeof(p->room), "%s", room);
	snprintf(p->id, sizeof(p->id), "%s", id);
	p->command = strdup(cmd);
	p->serial = (unsigned long)jint(o, "serial");
	p->pid = (long)jint(o, "pid");
	p->sid = (long)jint(o, "sid");
	p->exit_code = (int)jint(o, "exitCode");
	snprintf(p->signal, sizeof(p->signal), "%s", jstr(o, "signal") ?: "");
	snprintf(p->start, sizeof(p->start), "%s", jstr(o, "startTime") ?: "");
	snprintf(p->end, sizeof(p->end), "%s", jstr(o, "endTime") ?: "");
	p->cut[PROC_OUT] = json_object_object_get_ex(o, "cutStdout", &v) && json_object_get_boolean(v);
	p->cut[PROC_ERR] = json_object_object_get_ex(o, "cutStderr", &v) && json_object_get_boolean(v);
	p->status = !strcmp(status, "exited") ? P_EXITED : !strcmp(status, "killed") ? P_KILLED
		: P_LOST;
	p->fd[PROC_OUT] = p->fd[PROC_ERR] = p->in_fd = -1;
	if (fresh_serial)   /* a restored record: its old serial may be a logger's still */
		p->serial = next_serial++;
	if (p->serial >= next_serial)
		next_serial = p->serial + 1;
	p->next = procs;
	procs = p;
	if (!strcmp(status, "running")) {   /* its pipes ended with our last run */
		proc_now_iso(p->end, sizeof(p->end));
		proc_record_save(p);
	}
	json_object_put(o);
}

static void load_room(const char *room, bool fresh_serials)
{
	char dir[PATH_MAX];
	DIR *d;
	struct dirent *e;

	snprintf(dir, sizeof(dir), "%s/%s", procs_dir, room);
	d = opendir(dir);
	while (d && (e = readdir(d))) {
		size_t n = strlen(e->d_name);

		if (n > 5 && !strcmp(e->d_name + n - 5, ".json"))
			load_record(room, e->d_name, fresh_serials);
	}
	if (d)
		closedir(d);
}

int proc_store_load(const char *state_dir, char *err, size_t errlen)
{
	pthread_condattr_t ca;
	DIR *d;
	struct dirent *e;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&procs_changed, &ca);
	snprintf(procs_dir, sizeof(procs_dir), "%s/processes", state_dir);
	if (mkdir(procs_dir, 0700) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "processes: mkdir %s: %s", procs_dir, strerror(errno));
		return -1;
	}
	d = opendir(procs_dir);
	while (d && (e = readdir(d)))
		if (room_id_valid(e->d_name))
			load_room(e->d_name, false);
	if (d)
		closedir(d);
	return 0;
}

/* ---- what the rest of roombox-fcgi asks (processes.h) ---- */

json_object *procs_busy_rooms(void)
{
	json_object *a = json_object_new_array();

	pthread_mutex_lock(&procs_lock);
	for (struct proc *p = procs; p; p = p->next) {
		bool seen = false;

		if (p->status != P_RUNNING)
			continue;
		for (size_t i = 0; i < json_object_array_length(a) && !seen; i++)
			seen = !strcmp(json_object_get_string(json_object_array_get_idx(a, i)), p->room);
		if (!seen)
			json_object_array_add(a, json_object_new_string(p->room));
	}
	pthread_mutex_unlock(&procs_lock);
	return a;
}

void procs_room_stopping(const char *room, bool stopping)
{
	pthread_mutex_lock(&procs_lock);
	for (struct proc *p = procs; p; p = p->next)
		if (!strcmp(p->room, room) && p->status == P_RUNNING)
			p->room_stopping = stopping;
	pthread_mutex_unlock(&procs_lock);
}

/* Forget every record of room held in memory (under procs_lock).  A live
 * reader owns its queue: it finds the process gone and frees it (woken
 * here). */
static void drop_room_locked(const char *room)
{
	for (struct proc **q = &procs; *q;) {
		struct proc *p = *q;

		if (strcmp(p->room, room)) {
			q = &p->next;
			continue;
		}
		if (p->status == P_RUNNING)
			metrics_processes_running_add(-1);
		*q = p->next;
		proc_free(p);
	}
	pthread_cond_broadcast(&procs_changed);
}

int procs_room_reset(const char *room, char *err, size_t errlen)
{
	char dir[PATH_MAX];
	int rc = 0;

	pthread_mutex_lock(&procs_lock);
	drop_room_locked(room);
	snprintf(dir, sizeof(dir), "%s/%s", procs_dir, room);
	if (rmdir(dir) < 0 && errno != ENOENT && errno != ENOTEMPTY) {
		snprintf(err, errlen, "room %s: processes: remove %s: %s", room, dir, strerror(errno));
		rc = -1;
	}
	pthread_mutex_unlock(&procs_lock);
	return rc;
}

/* ---- snapshots (snapshots.c) ----
 *
 * A snapshot's records: <state_dir>/processes/.snapshots/<room>/<sid>/,
 * each record as it was at the cut (one that was running says so: loaded
 * back, it reads `lost`), its logs beside it -- hard links for an ended
 * process (its logs are never written again), copies for a running one.
 * The loader passes over the dot name. */

static void snap_dir(char *buf, size_t len, const char *room, const char *sid)
{
	if (sid)
		snprintf(buf, len, "%s/.snapshots/%s/%s", procs_dir, room, sid);
	else
		snprintf(buf, len, "%s/.snapshots/%s", procs_dir, room);
}

static int file_copy(const char *from, const char *to)
{
	char buf[65536];
	ssize_t n = 0;
	int in = open(from, O_RDONLY | O_CLOEXEC | O_NOFOLLOW), out;

	if (in < 0)
		return errno == ENOENT ? 0 : -1;
	out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	while (out >= 0 && (n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n) {
			n = -1;
			break;
		}
	close(in);
	if (out < 0)
		return -1;
	return close(out) < 0 || n < 0 ? -1 : 0;
}

/* Every file of directory from into directory to (made): logs linked, or
 * copied where link says no, records copied. */
static int dir_copy(const char *from, const char *to, bool link_logs)
{
	char a[PATH_MAX + 300], b[PATH_MAX + 300];
	DIR *d = opendir(from);
	struct dirent *e;
	int rc = 0;

	if (!d)
		return errno == ENOENT ? 0 : -1;
	if (mkdir(to, 0700) < 0 && errno != EEXIST)
		rc = -1;
	while (rc == 0 && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(a, sizeof(a), "%s/%s", from, e->d_name);
		snprintf(b, sizeof(b), "%s/%s", to, e->d_name);
		unlink(b);
		if (!strstr(e->d_name, ".json") && link_logs && link(a, b) == 0)
			continue;
		rc = file_copy(a, b);
	}
	closedir(d);
	return rc;
}

static int mkdirs_snap(const char *room, const char *sid, char *dir, size_t len)
{
	char top[PATH_MAX];

	snprintf(top, sizeof(top), "%s/.snapshots", procs_dir);
	if (mkdir(top, 0700) < 0 && errno != EEXIST)
		return -1;
	snap_dir(top, sizeof(top), room, NULL);
	if (mkdir(top, 0700) < 0 && errno != EEXIST)
		return -1;
	snap_dir(dir, len, room, sid);
	return mkdir(dir, 0700) < 0 && errno != EEXIST ? -1 : 0;
}

int procs_snapshot_save(const char *room, const char *sid, char *err, size_t errlen)
{
	char dir[PATH_MAX], from[PATH_MAX + 64], to[PATH_MAX + 64];
	int rc = 0;

	pthread_mutex_lock(&procs_lock);
	if (mkdirs_snap(room, sid, dir, sizeof(dir)) < 0)
		rc = -1;
	for (struct proc *p = procs; p && rc == 0; p = p->next) {
		if (strcmp(p->room, room))
			continue;
		rc = record_write(p, dir);
		for (size_t i = 2; rc == 0 && i < sizeof(proc_suffixes) / sizeof(proc_suffixes[0]); i++) {
			proc_file_path(from, sizeof(from), room, p->id, proc_suffixes[i]);
			snprintf(to, sizeof(to), "%s/%s%s", dir, p->id, proc_suffixes[i]);
			unlink(to);
			if (p->status == P_RUNNING || link(from, to) < 0)
				rc = errno == ENOENT && p->status != P_RUNNING ? 0 : file_copy(from, to);
		}
	}
	pthread_mutex_unlock(&procs_lock);
	if (rc < 0)
		snprintf(err, errlen, "room %s: snapshot %s: save its process records: %s", room, sid,
			 strerror(errno));
	return rc;
}

int procs_snapshot_restore(const char *room, const char *sid, const char *to_room,
			   char *err, size_t errlen)
{
	char from[PATH_MAX], dir[PATH_MAX];
	int rc = 0;

	snap_dir(from, sizeof(from), room, sid);
	pthread_mutex_lock(&procs_lock);
	/* what the room ran since goes, as a cleanup drops it */
	drop_room_locked(to_room);
	if (room_dir(to_room, dir, sizeof(dir)) < 0 || dir_copy(from, dir, true) < 0)
		rc = -1;
	load_room(to_room, true);
	pthread_mutex_unlock(&procs_lock);
	if (rc < 0)
		snprintf(err, errlen, "room %s: snapshot %s: restore its process records: %s", room, sid,
			 strerror(errno));
	return rc;
}

static void dir_remove(const char *dir)
{
	char p[PATH_MAX + 300];
	DIR *d = opendir(dir);
	struct dirent *e;

	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.' || (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))) {
			snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
			unlink(p);
		}
	if (d)
		closedir(d);
	rmdir(dir);
}

void procs_snapshot_remove(const char *room, const char *sid)
{
	char dir[PATH_MAX], sub[PATH_MAX + 300];
	DIR *d;
	struct dirent *e;

	pthread_mutex_lock(&procs_lock);
	snap_dir(dir, sizeof(dir), room, sid);
	if (sid) {
		dir_remove(dir);
	} else {
		d = opendir(dir);
		while (d && (e = readdir(d)))
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
				snprintf(sub, sizeof(sub), "%s/%s", dir, e->d_name);
				dir_remove(sub);
			}
		if (d)
			closedir(d);
		rmdir(dir);
	}
	pthread_mutex_unlock(&procs_lock);
}

/* ---- import (room_transfer.c) ----
 *
 * The files are written into <state_dir>/processes/.import-<room>/ (the
 * loader passes over dot names) without procs_lock, then moved into the
 * room's directory and loaded under it: a large log never holds the lock.
 * A record whose id a process of the room took meanwhile (a POST that
 * came before the import answered) stays out, with its logs. */

/* name as "<id><suffix>" of a kept file: the suffix, or NULL. */
static const char *import_suffix(const char *name, char *id, size_t idlen)
{
	static const char *const kinds[] = { ".json", ".stdout", ".stdout.1", ".stderr", ".stderr.1" };
	size_t n = strlen(name);

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		size_t k = strlen(kinds[i]);

		if (n <= k || strcmp(name + n - k, kinds[i]) || n - k >= idlen)
			continue;
		memcpy(id, name, n - k);
		id[n - k] = '\0';
		if (room_id_valid(id))
			return kinds[i];
	}
	return NULL;
}

static int import_write(const char *dir, const struct proc_file *f, char *err, size_t errlen)
{
	char id[ROOM_ID_MAX + 1], path[PATH_MAX + 300];
	const char *suffix = import_suffix(f->name, id, sizeof(id));

	if (!suffix)
		return snprintf(err, errlen, "import: processes/%.200s: not a process record or log",
				f->name), -1;
	if (!strcmp(suffix, ".json")) {
		json_object *o = NULL;
		char why[128];
		const char *rid = json_parse_strict(f->data, f->len, &o, why, sizeof(why)) == 0 && o &&
			json_object_is_type(o, json_type_object) ? jstr(o, "id") : NULL;
		bool ok = rid && !strcmp(rid, id) && jstr(o, "command") && jstr(o, "status");

		json_object_put(o);
		if (!ok)
			return snprintf(err, errlen, "import: processes/%s: not the record of process %s",
					f->name, id), -1;
	}
	snprintf(path, sizeof(path), "%s/%s", dir, f->name);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	const char *p = f->data;
	size_t left = f->len;

	errno = 0;
	while (fd >= 0 && left) {
		ssize_t w = write(fd, p, left);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		p += w;
		left -= (size_t)w;
	}
	/* a record durably, as record_write makes one; a log as the logger
	 * writes one */
	bool ok = fd >= 0 && !left && (strcmp(suffix, ".json") || fsync(fd) == 0);
	int e = left && errno == 0 ? EIO : errno;

	if (fd >= 0 && close(fd) < 0 && ok) {
		ok = false;
		e = errno;
	}
	if (!ok)
		return snprintf(err, errlen, "import: processes/%s: write: %s", f->name, strerror(e)), -1;
	return 0;
}

int procs_room_import(const char *room, const struct proc_file *files, size_t n,
		      char *err, size_t errlen)
{
	char stage[PATH_MAX], dir[PATH_MAX], a[PATH_MAX + 300], b[PATH_MAX + 300];
	int rc = 0;

	if (n == 0)
		return 0;
	snprintf(stage, sizeof(stage), "%s/.import-%s", procs_dir, room);
	dir_remove(stage);   /* a crash's leftover */
	if (mkdir(stage, 0700) < 0)
		return snprintf(err, errlen, "import: processes: mkdir: %s", strerror(errno)), -1;
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = import_write(stage, &files[i], err, errlen);
	pthread_mutex_lock(&procs_lock);
	if (rc == 0 && room_dir(room, dir, sizeof(dir)) < 0)
		rc = (snprintf(err, errlen, "import: processes: mkdir: %s", strerror(errno)), -1);
	for (size_t i = 0; i < n && rc == 0; i++) {
		char id[ROOM_ID_MAX + 1];

		import_suffix(files[i].name, id, sizeof(id));
		if (proc_find(room, id))
			continue;
		snprintf(a, sizeof(a), "%s/%s", stage, files[i].name);
		snprintf(b, sizeof(b), "%s/%s", dir, files[i].name);
		if (rename(a, b) < 0)
			rc = (snprintf(err, errlen, "import: processes/%s: %s", files[i].name,
				       strerror(errno)), -1);
	}
	if (rc == 0 && fsync_dir(dir) < 0)
		rc = (snprintf(err, errlen, "import: processes: sync: %s", strerror(errno)), -1);
	if (rc == 0)
		load_room(room, true);
	pthread_mutex_unlock(&procs_lock);
	dir_remove(stage);
	return rc;
}
