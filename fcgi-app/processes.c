/* /api/rooms/{id}/sandbox/processes (SPEC §8.3): managed processes.
 *
 * Theory of operation
 * -------------------
 * A managed process is started by one short exec in the room (passed I/O,
 * common/protocol.h): roombox-fcgi makes three pipes (stdin, stdout,
 * stderr), the helper hands their room ends to the keeper, and the exec's
 * shell runs the fixed starter below, which `exec setsid -f`s a wrapper
 * and ends at once.  So the exec answers in milliseconds and its deadline
 * never reaches the process (the keeper's deadline kills an exec's shell
 * tree while the shell runs; the starter's shell is long gone by then):
 *
 *   wrapper W  (sh, leader of a new session and process group; not told of
 *               any signal we send, so it always lives to report the end)
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
 * stream.  Pipes that end with no exit line mean the room stopped under the
 * process (or roombox-fcgi restarted): `lost`.
 *
 * Signals go by another short exec, a fixed script that signals every
 * process of W's session but W (its tree: what a process starts stays in
 * its session unless it makes one of its own with setsid); after TERM (or
 * any signal but KILL) a timer sends KILL 5 s later if the process still
 * runs.  The idle stop leaves a room with a running managed process alone
 * (stop-idle's keep list).
 *
 * On disk, under <state_dir>/processes/<room>/: <id>.json, the record
 * (written whole to a temporary file, fsync'd, renamed, directory fsync'd),
 * and per stream <id>.stdout / <id>.stdout.1 (and stderr): the log in two
 * halves of log_max/2 bytes; when the newer reaches that size it becomes
 * the older one, so the last log_max bytes are always there, and the files
 * never hold much more.  Logs are written, not fsync'd: they outlive a
 * restart of roombox-fcgi, a crash of the machine may lose their tail.
 *
 * Shared state: every process (running ones and the records of ended ones,
 * at most PROCS_ENDED_MAX per room) in one list behind `lock`; the logger
 * finds a process by its serial, never by a pointer it kept, so forgetting
 * one (cleanup) is safe at any time.  `changed` is broadcast whenever a
 * process gets output, its pid or its end: live log readers and requests
 * waiting for a pid wait on it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "exec.h"
#include "exec_stream.h"
#include "http.h"
#include "metrics.h"
#include "processes.h"
#include "protocol.h"
#include "roomid.h"
#include "timefmt.h"
#include "validate.h"

#define PROCS_ENDED_MAX 100
/* The logs of a room's ended processes take at most this many log_max of
 * the host's disk (they are not on the room's disk quota) */
#define PROCS_LOG_BUDGET 32
#define KILL_GRACE_S 5
#define START_TIMEOUT_MS 10000     /* the starter's exec: it ends at once */
#define PID_WAIT_MS 5000           /* POST waits this long for the pid */
#define SUB_QUEUE_MAX (8u << 20)   /* a live reader this far behind is cut off */
#define STDIN_WAIT_MS 30000
#define KEEPALIVE_S 15

enum { OUT, ERR };
static const char *const stream_name[2] = { "stdout", "stderr" };

enum pstatus { P_RUNNING, P_EXITED, P_KILLED, P_LOST };
static const char *const status_name[] = { "running", "exited", "killed", "lost" };

struct chunk {                 /* one piece for a live reader */
	struct chunk *next;
	int type;                  /* OUT, ERR, or -1: the end */
	size_t len;
	char data[];
};

struct sub {                   /* a live log reader (GET …/logs as a stream) */
	struct sub *next;
	struct chunk *head, *tail;
	size_t queued;
	bool cut;                  /* fell too far behind */
};

struct proc {
	struct proc *next;
	unsigned long serial;      /* creation order; the logger's handle */
	char room[ROOM_ID_MAX + 1];
	char id[ROOM_ID_MAX + 1];
	char *command;
	long pid, sid;             /* 0 until known */
	enum pstatus status;
	int exit_code;             /* when exited or killed */
	char signal[24];           /* "" = none */
	char start[40], end[40];   /* ISO-8601; end "" while running */
	bool cut[2];               /* a log lost bytes (its older half was replaced) */
	/* live only */
	int fd[2], in_fd;          /* our pipe ends, -1 once closed */
	uint64_t log_size[2];      /* of the newer half */
	char nonce[33];
	struct proc_scan scan;     /* of stderr */
	struct sub *subs;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed;
static struct proc *procs;
static unsigned long next_serial = 1;
static char procs_dir[PATH_MAX];
static int epfd = -1;
static uint64_t log_half, room_log_budget;

/* ---- the record ---- */

static struct proc *find(const char *room, const char *id)
{
	for (struct proc *p = procs; p; p = p->next)
		if (!strcmp(p->room, room) && !strcmp(p->id, id))
			return p;
	return NULL;
}

static struct proc *find_serial(unsigned long serial)
{
	for (struct proc *p = procs; p; p = p->next)
		if (p->serial == serial)
			return p;
	return NULL;
}

static json_object *proc_json(const struct proc *p)
{
	json_object *o = json_object_new_object();
	bool ended = p->status == P_EXITED || p->status == P_KILLED;

	json_object_object_add(o, "id", json_object_new_string(p->id));
	json_object_object_add(o, "pid", p->pid ? json_object_new_int64(p->pid) : NULL);
	json_object_object_add(o, "command", json_object_new_string(p->command));
	json_object_object_add(o, "status", json_object_new_string(status_name[p->status]));
	json_object_object_add(o, "startTime", json_object_new_string(p->start));
	json_object_object_add(o, "endTime", p->end[0] ? json_object_new_string(p->end) : NULL);
	json_object_object_add(o, "exitCode", ended ? json_object_new_int(p->exit_code) : NULL);
	json_object_object_add(o, "signal", p->signal[0] ? json_object_new_string(p->signal) : NULL);
	return o;
}

static void path_of(char *buf, size_t len, const char *room, const char *id, const char *suffix)
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

/* Write the record durably (temporary file, fsync, rename, directory
 * fsync).  Under lock. */
static void record_save(struct proc *p)
{
	char dir[PATH_MAX], tmp[PATH_MAX + 64], final[PATH_MAX + 64];
	json_object *o = proc_json(p);
	const char *text;
	int fd;

	json_object_object_add(o, "serial", json_object_new_int64((int64_t)p->serial));
	json_object_object_add(o, "sid", json_object_new_int64(p->sid));
	json_object_object_add(o, "cutStdout", json_object_new_boolean(p->cut[OUT]));
	json_object_object_add(o, "cutStderr", json_object_new_boolean(p->cut[ERR]));
	text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
	if (room_dir(p->room, dir, sizeof(dir)) < 0)
		goto fail;
	path_of(tmp, sizeof(tmp), p->room, p->id, ".json.tmp");
	path_of(final, sizeof(final), p->room, p->id, ".json");
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		goto fail;
	if (write(fd, text, strlen(text)) != (ssize_t)strlen(text) || fsync(fd) < 0) {
		close(fd);
		goto fail;
	}
	close(fd);
	if (rename(tmp, final) < 0 || fsync_dir(dir) < 0)
		goto fail;
	json_object_put(o);
	return;
fail:
	fprintf(stderr, "roombox-fcgi: room %s: process %s: save its record: %m\n", p->room, p->id);
	json_object_put(o);
}

static void files_remove(const char *room, const char *id)
{
	static const char *const suffixes[] = { ".json", ".json.tmp", ".stdout", ".stdout.1",
						".stderr", ".stderr.1" };
	char path[PATH_MAX + 64];

	for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
		path_of(path, sizeof(path), room, id, suffixes[i]);
		unlink(path);
	}
}

static void now_iso(char *buf, size_t len)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	iso8601_utc(&ts, buf, len);
}

/* ---- logs on disk ---- */

/* Append to a stream's newer half; past log_half it becomes the older
 * half.  Under lock. */
static void log_append(struct proc *p, int s, const char *data, size_t n)
{
	char path[PATH_MAX + 64], old[PATH_MAX + 64];
	char suffix[16];
	int fd;

	if (!n)
		return;
	snprintf(suffix, sizeof(suffix), ".%s", stream_name[s]);
	path_of(path, sizeof(path), p->room, p->id, suffix);
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 || write(fd, data, n) != (ssize_t)n)
		fprintf(stderr, "roombox-fcgi: room %s: process %s: write its %s log: %m\n",
			p->room, p->id, stream_name[s]);
	if (fd >= 0)
		close(fd);
	p->log_size[s] += n;
	if (p->log_size[s] < log_half)
		return;
	snprintf(old, sizeof(old), "%s.1", path);
	if (access(old, F_OK) == 0 && !p->cut[s]) {
		p->cut[s] = true;   /* the older half's bytes are gone from now on */
		record_save(p);
	}
	rename(path, old);
	p->log_size[s] = 0;
}

/* Read all of a file into *buf (appending at *len), up to max bytes from
 * its end.  True when bytes before those were left out. */
static bool read_tail_of(const char *path, uint64_t max, char **buf, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;
	bool cut = false;

	if (fd < 0)
		return false;
	if (fstat(fd, &st) == 0 && st.st_size > 0) {
		uint64_t size = (uint64_t)st.st_size, want = size > max ? max : size;
		char *b = realloc(*buf, *len + want + 1);

		if (b) {
			ssize_t got = pread(fd, b + *len, want, (off_t)(size - want));

			*buf = b;
			*len += got > 0 ? (size_t)got : 0;
			cut = size > want;
		}
	}
	close(fd);
	return cut;
}

/* The last log_max bytes of a stream (older half, then newer), malloc'd. */
static char *log_read(const struct proc *p, int s, uint64_t log_max, size_t *len, bool *cut)
{
	char path[PATH_MAX + 64], old[PATH_MAX + 64], suffix[16];
	char *a = NULL, *b = NULL;
	size_t na = 0, nb = 0;

	snprintf(suffix, sizeof(suffix), ".%s", stream_name[s]);
	path_of(path, sizeof(path), p->room, p->id, suffix);
	snprintf(old, sizeof(old), "%s.1", path);
	*cut = p->cut[s] | read_tail_of(path, log_max, &b, &nb);
	if (nb < log_max)
		*cut |= read_tail_of(old, log_max - nb, &a, &na);
	else if (access(old, F_OK) == 0)
		*cut = true;
	if (!a)
		a = malloc(nb + 1);
	if (a && nb) {
		char *m = realloc(a, na + nb + 1);

		if (m) {
			a = m;
			memcpy(a + na, b, nb);
			na += nb;
		}
	}
	free(b);
	*len = na;
	return a;
}

/* ---- live readers ---- */

static void sub_push(struct sub *s, int type, const char *data, size_t n)
{
	struct chunk *c;

	if (s->cut || (s->queued += n) > SUB_QUEUE_MAX) {
		s->cut = true;
		return;
	}
	c = malloc(sizeof(*c) + n);
	if (!c) {
		s->cut = true;
		return;
	}
	c->next = NULL;
	c->type = type;
	c->len = n;
	memcpy(c->data, data, n);
	if (s->tail)
		s->tail->next = c;
	else
		s->head = c;
	s->tail = c;
}

/* Output of a stream: to the log and to every live reader.  Under lock. */
static void take_output(struct proc *p, int s, const char *data, size_t n)
{
	if (!n)
		return;
	log_append(p, s, data, n);
	for (struct sub *r = p->subs; r; r = r->next)
		sub_push(r, s, data, n);
	pthread_cond_broadcast(&changed);
}

/* ---- the end ---- */

static void set_exit(struct proc *p, int code)
{
	p->exit_code = code;
	p->signal[0] = '\0';
	if (code > 128 && code - 128 <= 64)
		signal_name(code - 128, p->signal, sizeof(p->signal));
	p->status = p->signal[0] ? P_KILLED : P_EXITED;
}

static uint64_t logs_size(const struct proc *p)
{
	static const char *const suffixes[] = { ".stdout", ".stdout.1", ".stderr", ".stderr.1" };
	char path[PATH_MAX + 64];
	uint64_t total = 0;
	struct stat st;

	for (size_t i = 0; i < 4; i++) {
		path_of(path, sizeof(path), p->room, p->id, suffixes[i]);
		if (stat(path, &st) == 0)
			total += (uint64_t)st.st_size;
	}
	return total;
}

/* Past PROCS_LOG_BUDGET x log_max for the logs of the room's ended
 * processes, the oldest ones' logs go (their records stay, truncated). */
static void room_logs_trim(const char *room)
{
	struct { struct proc *p; uint64_t size; } v[PROCS_ENDED_MAX + 1];
	uint64_t total = 0;
	size_t n = 0;

	for (struct proc *q = procs; q && n < PROCS_ENDED_MAX + 1; q = q->next)
		if (!strcmp(q->room, room) && q->status != P_RUNNING && q->fd[OUT] < 0 &&
		    q->fd[ERR] < 0) {
			v[n].p = q;
			total += v[n++].size = logs_size(q);
		}
	while (total > room_log_budget) {
		size_t oldest = n;
		char path[PATH_MAX + 64];
		static const char *const suffixes[] = { ".stdout", ".stdout.1", ".stderr", ".stderr.1" };

		for (size_t i = 0; i < n; i++)
			if (v[i].size && (oldest == n || v[i].p->serial < v[oldest].p->serial))
				oldest = i;
		if (oldest == n)
			return;
		for (size_t i = 0; i < 4; i++) {
			path_of(path, sizeof(path), room, v[oldest].p->id, suffixes[i]);
			unlink(path);
		}
		v[oldest].p->cut[OUT] = v[oldest].p->cut[ERR] = true;
		record_save(v[oldest].p);
		total -= v[oldest].size;
		v[oldest].size = 0;
	}
}

/* The process ended (status set): its readers hear the end, the record is
 * saved, and the oldest ended records past PROCS_ENDED_MAX go. */
static void ended(struct proc *p)
{
	int n = 0;

	now_iso(p->end, sizeof(p->end));
	metrics_processes_running_add(-1);
	for (struct sub *r = p->subs; r; r = r->next)
		sub_push(r, -1, NULL, 0);
	record_save(p);
	pthread_cond_broadcast(&changed);
	for (struct proc *q = procs; q; q = q->next)
		n += !strcmp(q->room, p->room) && q->status != P_RUNNING;
	while (n-- > PROCS_ENDED_MAX) {
		struct proc **oldest = NULL;

		for (struct proc **q = &procs; *q; q = &(*q)->next)
			if (!strcmp((*q)->room, p->room) && (*q)->status != P_RUNNING &&
			    (*q)->fd[OUT] < 0 && (*q)->fd[ERR] < 0 && !(*q)->subs &&
			    (!oldest || (*q)->serial < (*oldest)->serial))
				oldest = q;
		if (!oldest)
			break;
		struct proc *gone = *oldest;

		*oldest = gone->next;
		files_remove(gone->room, gone->id);
		free(gone->command);
		free(gone);
	}
}


static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* What stdout holds now.  At the exit line the command has ended, so
 * everything it wrote is in the pipe: its log is whole before its end is
 * told. */
static void drain_stdout(struct proc *p)
{
	char buf[65536];
	ssize_t n;

	while (p->fd[OUT] >= 0 && (n = read(p->fd[OUT], buf, sizeof(buf))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return;   /* EAGAIN: all of it read; what comes later is its children's */
		take_output(p, OUT, buf, (size_t)n);
	}
	close_fd(&p->fd[OUT]);   /* end of file */
}

/* A control line from W or C (without its "\036rbx:<nonce> "). */
static void control(struct proc *p, const char *line, size_t n)
{
	char text[PROC_MARK_MAX + 1];
	long a = 0, b = 0;
	int code;

	snprintf(text, sizeof(text), "%.*s", (int)n, line);
	if (sscanf(text, "pid %ld %ld", &a, &b) == 2 && a > 0 && !p->pid) {
		p->pid = a;
		p->sid = b;
		record_save(p);
		pthread_cond_broadcast(&changed);
	} else if (sscanf(text, "exit %d", &code) == 1 && p->status == P_RUNNING) {
		drain_stdout(p);
		set_exit(p, code);
		ended(p);
	}
}

/* One slice (at most 64 KiB) of proc_stderr_scan's input. */
static void scan_slice(struct proc_scan *st, const char *prefix, const char *data, size_t n,
		       bool eof, void (*out)(void *, const char *, size_t),
		       void (*ctl)(void *, const char *, size_t), void *ctx)
{
	static _Thread_local char buf[PROC_MARK_MAX + 65536];
	size_t len, i = 0, plen = strlen(prefix);

	memcpy(buf, st->hold, st->nhold);
	len = st->nhold;
	memcpy(buf + len, data, n);
	len += n;
	st->nhold = 0;
	while (i < len) {
		char *mark = memchr(buf + i, '\036', len - i);
		size_t at = mark ? (size_t)(mark - buf) : len, room_left;
		char *nl;

		if (at > i)
			out(ctx, buf + i, at - i);
		i = at;
		if (!mark)
			break;
		room_left = len - at < PROC_MARK_MAX ? len - at : PROC_MARK_MAX;
		nl = memchr(buf + at, '\n', room_left);
		if (!nl && room_left < PROC_MARK_MAX && !eof) {   /* may be ours: wait */
			memcpy(st->hold, buf + at, len - at);
			st->nhold = len - at;
			return;
		}
		if (nl && (size_t)(nl - (buf + at)) >= plen && !memcmp(buf + at, prefix, plen)) {
			ctl(ctx, buf + at + plen, (size_t)(nl - (buf + at)) - plen);
			i = (size_t)(nl - buf) + 1;
			continue;
		}
		out(ctx, buf + at, 1);   /* not ours */
		i = at + 1;
	}
}

void proc_stderr_scan(struct proc_scan *st, const char *prefix, const char *data, size_t n,
		      bool eof, void (*out)(void *ctx, const char *d, size_t n),
		      void (*ctl)(void *ctx, const char *line, size_t n), void *ctx)
{
	do {
		size_t k = n > 65536 ? 65536 : n;

		scan_slice(st, prefix, data, k, eof && k == n, out, ctl, ctx);
		data += k;
		n -= k;
	} while (n);
}

static void stderr_out(void *ctx, const char *d, size_t n)
{
	take_output(ctx, ERR, d, n);
}

static void stderr_ctl(void *ctx, const char *line, size_t n)
{
	control(ctx, line, n);
}

/* stderr: everything but our control lines is output. */
static void take_stderr(struct proc *p, const char *data, size_t n, bool eof)
{
	char prefix[48];

	snprintf(prefix, sizeof(prefix), "\036rbx:%s ", p->nonce);
	proc_stderr_scan(&p->scan, prefix, data, n, eof, stderr_out, stderr_ctl, p);
}

/* Both pipes ended: the process is done with us. */
static void pipes_ended(struct proc *p)
{
	close_fd(&p->in_fd);
	if (p->status == P_RUNNING) {   /* no exit line: the room stopped under it */
		p->status = P_LOST;
		ended(p);
	}
	room_logs_trim(p->room);   /* its logs are whole now */
}

/* ---- the logger thread ---- */

static void logger_event(uint64_t key)
{
	char buf[65536];
	struct proc *p = find_serial((unsigned long)(key >> 1));
	int s = (int)(key & 1);
	ssize_t n;

	if (!p || p->fd[s] < 0)
		return;
	n = read(p->fd[s], buf, sizeof(buf));
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n > 0) {
		if (s == ERR)
			take_stderr(p, buf, (size_t)n, false);
		else
			take_output(p, OUT, buf, (size_t)n);
		return;
	}
	if (s == ERR)
		take_stderr(p, "", 0, true);
	close_fd(&p->fd[s]);   /* also leaves the epoll set */
	if (p->fd[OUT] < 0 && p->fd[ERR] < 0)
		pipes_ended(p);
}

static void *logger(void *arg)
{
	struct epoll_event ev[64];

	(void)arg;
	for (;;) {
		int n = epoll_wait(epfd, ev, 64, -1);

		pthread_mutex_lock(&lock);
		for (int i = 0; i < n; i++)
			logger_event(ev[i].data.u64);
		pthread_mutex_unlock(&lock);
	}
	return NULL;
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

static void load_record(const char *room, const char *file)
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
	p->cut[OUT] = json_object_object_get_ex(o, "cutStdout", &v) && json_object_get_boolean(v);
	p->cut[ERR] = json_object_object_get_ex(o, "cutStderr", &v) && json_object_get_boolean(v);
	p->status = !strcmp(status, "exited") ? P_EXITED : !strcmp(status, "killed") ? P_KILLED
		: P_LOST;
	p->fd[OUT] = p->fd[ERR] = p->in_fd = -1;
	if (p->serial >= next_serial)
		next_serial = p->serial + 1;
	p->next = procs;
	procs = p;
	if (!strcmp(status, "running")) {   /* its pipes ended with our last run */
		now_iso(p->end, sizeof(p->end));
		record_save(p);
	}
	json_object_put(o);
}

static void load_room(const char *room)
{
	char dir[PATH_MAX];
	DIR *d;
	struct dirent *e;

	snprintf(dir, sizeof(dir), "%s/%s", procs_dir, room);
	d = opendir(dir);
	while (d && (e = readdir(d))) {
		size_t n = strlen(e->d_name);

		if (n > 5 && !strcmp(e->d_name + n - 5, ".json"))
			load_record(room, e->d_name);
	}
	if (d)
		closedir(d);
}

int procs_init(struct app *app, char *err, size_t errlen)
{
	pthread_condattr_t ca;
	pthread_t t;
	DIR *d;
	struct dirent *e;

	log_half = app->cfg.log_max / 2 ? app->cfg.log_max / 2 : 1;
	room_log_budget = PROCS_LOG_BUDGET * app->cfg.log_max;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&changed, &ca);
	snprintf(procs_dir, sizeof(procs_dir), "%s/processes", app->cfg.state_dir);
	if (mkdir(procs_dir, 0700) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "processes: mkdir %s: %s", procs_dir, strerror(errno));
		return -1;
	}
	d = opendir(procs_dir);
	while (d && (e = readdir(d)))
		if (room_id_valid(e->d_name))
			load_room(e->d_name);
	if (d)
		closedir(d);
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (epfd < 0 || pthread_create(&t, NULL, logger, NULL) != 0) {
		snprintf(err, errlen, "processes: start the logger: %s", strerror(errno));
		return -1;
	}
	pthread_detach(t);
	return 0;
}

json_object *procs_busy_rooms(void)
{
	json_object *a = json_object_new_array();

	pthread_mutex_lock(&lock);
	for (struct proc *p = procs; p; p = p->next) {
		bool seen = false;

		if (p->status != P_RUNNING)
			continue;
		for (size_t i = 0; i < json_object_array_length(a) && !seen; i++)
			seen = !strcmp(json_object_get_string(json_object_array_get_idx(a, i)), p->room);
		if (!seen)
			json_object_array_add(a, json_object_new_string(p->room));
	}
	pthread_mutex_unlock(&lock);
	return a;
}

int procs_room_reset(const char *room, char *err, size_t errlen)
{
	char dir[PATH_MAX];
	int rc = 0;

	pthread_mutex_lock(&lock);
	for (struct proc **q = &procs; *q;) {
		struct proc *p = *q;

		if (strcmp(p->room, room)) {
			q = &p->next;
			continue;
		}
		/* a live reader owns its queue: it finds the process gone and
		 * frees it (woken below) */
		if (p->status == P_RUNNING)
			metrics_processes_running_add(-1);
		close_fd(&p->fd[OUT]);
		close_fd(&p->fd[ERR]);
		close_fd(&p->in_fd);
		files_remove(p->room, p->id);
		*q = p->next;
		free(p->command);
		free(p);
	}
	pthread_cond_broadcast(&changed);
	snprintf(dir, sizeof(dir), "%s/%s", procs_dir, room);
	if (rmdir(dir) < 0 && errno != ENOENT && errno != ENOTEMPTY) {
		snprintf(err, errlen, "room %s: processes: remove %s: %s", room, dir, strerror(errno));
		rc = -1;
	}
	pthread_mutex_unlock(&lock);
	return rc;
}

/* ---- running fixed scripts in the room ---- */

static char *sh_quoted(const char *s)
{
	size_t n = 3;
	char *q, *o;

	for (const char *t = s; *t; t++)
		n += *t == '\'' ? 4 : 1;
	q = o = malloc(n);
	if (!q)
		return NULL;
	*o++ = '\'';
	for (; *s; s++) {
		if (*s == '\'') {
			memcpy(o, "'\\''", 4);
			o += 4;
		} else {
			*o++ = *s;
		}
	}
	*o++ = '\'';
	*o = '\0';
	return q;
}

static int ignore_event(void *ctx, json_object *ev)
{
	(void)ctx;
	(void)ev;
	return 0;
}

/* Signal every process of session sid but sid itself (the wrapper, which
 * then reports the end).  KILL stops them first, round after round, so
 * nothing forks away while they die. */
static const char KILL_SCRIPT[] =
	"l() { for f in /proc/[0-9]*; do p=${f#/proc/}; [ \"$p\" = \"$S\" ] && continue\n"
	"  read -r t 2>/dev/null < \"$f/stat\" || continue; set -- ${t##*) }\n"
	"  [ \"$4\" = \"$S\" ] && echo \"$p\"; done; }\n"
	"if [ \"$G\" = KILL ]; then i=0\n"
	"  while [ $i -lt 50 ]; do v=$(l); [ -z \"$v\" ] && break\n"
	"    kill -STOP $v 2>/dev/null; kill -KILL $v 2>/dev/null; i=$((i+1)); done\n"
	"else v=$(l); [ -n \"$v\" ] && { kill -$G $v 2>/dev/null; kill -CONT $v 2>/dev/null; }; fi\n"
	"true\n";

static int signal_session(struct app *app, const char *room, long sid, const char *sig,
			  struct helper_error *err)
{
	char *cmd = NULL;
	struct exec_request ex = { .cwd = "/", .timeout_ms = START_TIMEOUT_MS };
	struct exec_sink sink = { .event = ignore_event };
	json_object *res;

	if (asprintf(&cmd, "S=%ld; G=%s\n%s", sid, sig, KILL_SCRIPT) < 0) {
		snprintf(err->message, sizeof(err->message), "out of memory");
		err->http_status = 500;
		return -1;
	}
	ex.cmd = cmd;
	ex.cmd_len = strlen(cmd);
	ex.user = HK_USER_ROOT;   /* the room's root may signal both its users' processes */
	res = exec_stream_in_room(app, room, &ex, &sink, err);
	free(cmd);
	json_object_put(res);
	return res ? 0 : -1;
}

/* ---- POST …/processes ---- */

/* W and C (see the top of this file); $1 nonce, $2 the command, $3 C's
 * script. */
static const char WRAPPER[] =
	"/bin/sh -c \"$3\" roombox-process \"$1\" \"$2\"; s=$?\n"
	"printf '\\036rbx:%s exit %d\\n' \"$1\" \"$s\" >&2\n";
static const char INNER[] =
	"printf '\\036rbx:%s pid %d %d\\n' \"$1\" \"$$\" \"$PPID\" >&2; exec /bin/sh -c \"$2\"";

static char *starter(const char *nonce, const char *cmd)
{
	char *w = sh_quoted(WRAPPER), *c = sh_quoted(cmd), *i = sh_quoted(INNER), *s = NULL;

	if (!w || !c || !i || asprintf(&s, "exec 9>&-; exec setsid -f /bin/sh -c %s roombox-process "
				       "%s %s %s", w, nonce, c, i) < 0)
		s = NULL;
	free(w);
	free(c);
	free(i);
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
	p->fd[OUT] = p->fd[ERR] = p->in_fd = -1;
	p->status = P_RUNNING;
	now_iso(p->start, sizeof(p->start));
	make_nonce(p->nonce);
	return p;
}

/* Forget p (under lock): it never started. */
static void proc_drop(struct proc *p)
{
	for (struct proc **q = &procs; *q; q = &(*q)->next)
		if (*q == p) {
			*q = p->next;
			break;
		}
	close_fd(&p->fd[OUT]);
	close_fd(&p->fd[ERR]);
	close_fd(&p->in_fd);
	files_remove(p->room, p->id);
	free(p->command);
	free(p);
}

static void wait_changed(int ms)
{
	struct timespec at;

	clock_gettime(CLOCK_MONOTONIC, &at);
	at.tv_sec += ms / 1000;
	at.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (at.tv_nsec >= 1000000000L) {
		at.tv_sec++;
		at.tv_nsec -= 1000000000L;
	}
	pthread_cond_timedwait(&changed, &lock, &at);
}

static long mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* Register p's pipes with the logger (under lock). */
static int watch(struct proc *p)
{
	for (int s = 0; s < 2; s++) {
		struct epoll_event ev = { .events = EPOLLIN,
					  .data.u64 = ((uint64_t)p->serial << 1) | (uint64_t)s };

		fcntl(p->fd[s], F_SETFL, O_NONBLOCK);
		if (epoll_ctl(epfd, EPOLL_CTL_ADD, p->fd[s], &ev) < 0)
			return -1;
	}
	return 0;
}

/* Start p's command in the room: the starter exec, then p's pipes go to
 * the logger.  0 with *wait_status the starter's (not 0: its shell failed
 * before the wrapper ran, e.g. no such cwd), or -1 with err set. */
static int launch(struct app *app, const char *room, struct proc *p, const struct exec_request *req,
		  int *wait_status, struct helper_error *err)
{
	struct helper_target target = app_helper(app);
	int in[2] = { -1, -1 }, out[2] = { -1, -1 }, errp[2] = { -1, -1 };
	char *cmd = starter(p->nonce, req->cmd);
	json_object *hreq, *reply = NULL, *v;
	struct helper_run *run = NULL;
	int status = -1;

	memset(err, 0, sizeof(*err));
	err->http_status = 500;
	if (!cmd || pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0) {
		snprintf(err->message, sizeof(err->message), "room %s: process %s: pipes: %s", room,
			 p->id, strerror(errno));
		goto out;
	}
	hreq = json_object_new_object();
	json_object_object_add(hreq, HK_OP, json_object_new_string(HELPER_OP_EXEC));
	json_object_object_add(hreq, HK_ROOM, json_object_new_string(room));
	json_object_object_add(hreq, HK_CMD, json_object_new_string(cmd));
	json_object_object_add(hreq, HK_TIMEOUT_MS, json_object_new_int64(START_TIMEOUT_MS));
	if (req->env)
		json_object_object_add(hreq, HK_ENV, json_object_get(req->env));
	if (req->cwd)
		json_object_object_add(hreq, HK_CWD, json_object_new_string(req->cwd));
	if (req->user)
		json_object_object_add(hreq, HK_USER, json_object_new_string(req->user));
	json_object_object_add(hreq, HK_IO, json_object_new_boolean(1));
	int pass[3] = { in[0], out[1], errp[1] };
	if (!exec_slot_take(app)) {
		err->http_status = 503;
		snprintf(err->code, sizeof(err->code), "busy");
		snprintf(err->message, sizeof(err->message), "too many concurrent execs");
		json_object_put(hreq);
		goto out;
	}
	run = helper_start(&target, hreq, START_TIMEOUT_MS + HELPER_EXEC_GRACE_MS, pass, err);
	json_object_put(hreq);
	close_fd(&in[0]);
	close_fd(&out[1]);
	close_fd(&errp[1]);
	if (run) {
		pthread_mutex_lock(&lock);
		p->fd[OUT] = out[0];
		p->fd[ERR] = errp[0];
		p->in_fd = in[1];
		out[0] = errp[0] = in[1] = -1;
		if (watch(p) < 0)
			fprintf(stderr, "roombox-fcgi: room %s: process %s: follow its output: %m\n",
				room, p->id);
		pthread_mutex_unlock(&lock);
		reply = helper_finish(run, NULL, err);
	}
	exec_slot_give(app);
	if (reply && json_object_object_get_ex(reply, HK_WAIT_STATUS, &v))
		status = json_object_get_int(v);
	else if (reply)
		snprintf(err->message, sizeof(err->message), "room %s: process %s: the helper's "
			 "answer has no wait status", room, p->id);
	*wait_status = status;
	json_object_put(reply);
out:
	free(cmd);
	close_fd(&in[0]);
	close_fd(&in[1]);
	close_fd(&out[0]);
	close_fd(&out[1]);
	close_fd(&errp[0]);
	close_fd(&errp[1]);
	return status == -1 ? -1 : 0;
}

/* The starter's shell failed before the wrapper ran (a cwd that does not
 * exist, no setsid in the room): that is the process's end, as an exec
 * with that cwd ends with the shell's status and its message on stderr. */
static void starter_failed(unsigned long serial, int wait_status)
{
	struct proc *p;
	long until = mono_ms() + PID_WAIT_MS;

	pthread_mutex_lock(&lock);
	/* its stderr first: the pipes end with the starter */
	while ((p = find_serial(serial)) && (p->fd[OUT] >= 0 || p->fd[ERR] >= 0) &&
	       mono_ms() < until)
		wait_changed((int)(until - mono_ms()));
	if (p && !p->pid) {
		bool was_running = p->status == P_RUNNING;

		set_exit(p, WIFEXITED(wait_status) ? WEXITSTATUS(wait_status)
			 : 128 + WTERMSIG(wait_status));
		if (was_running)
			ended(p);
		else
			record_save(p);
	}
	pthread_mutex_unlock(&lock);
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
	long until;
	int wait_status = 0;

	if (details) {
		json_object *answer = json_object_new_object();

		json_object_object_add(answer, "error", json_object_new_string("invalid request"));
		json_object_object_add(answer, "details", details);
		response_json(rs, 400, answer);
		return;
	}
	if (name)
		snprintf(id, sizeof(id), "%s", name);
	else
		random_id(id, sizeof(id));
	pthread_mutex_lock(&lock);
	old = find(rq->room, id);
	if (old && old->status == P_RUNNING) {
		pthread_mutex_unlock(&lock);
		response_error(rs, 409, "a process named %s is running in the room", id);
		return;
	}
	if (old && !old->subs && old->fd[OUT] < 0 && old->fd[ERR] < 0)
		proc_drop(old);   /* a name used again: the new one replaces the record */
	else if (old) {
		pthread_mutex_unlock(&lock);
		response_error(rs, 409, "process %s has ended but is still followed; try again", id);
		return;
	}
	p = proc_new(rq->room, id, ex.cmd);
	if (!p) {
		pthread_mutex_unlock(&lock);
		response_error(rs, 500, "out of memory");
		return;
	}
	p->serial = serial = next_serial++;
	p->next = procs;
	procs = p;
	metrics_processes_running_add(1);
	record_save(p);
	pthread_mutex_unlock(&lock);

	if (launch(rq->app, rq->room, p, &ex, &wait_status, &err) < 0) {
		pthread_mutex_lock(&lock);
		if ((p = find_serial(serial))) {
			if (p->status == P_RUNNING)
				metrics_processes_running_add(-1);
			proc_drop(p);
		}
		pthread_mutex_unlock(&lock);
		exec_answer_error(rs, &err);
		return;
	}
	if (wait_status != 0)
		starter_failed(serial, wait_status);
	/* the 201 carries the pid: C says it within milliseconds */
	pthread_mutex_lock(&lock);
	until = mono_ms() + PID_WAIT_MS;
	while ((p = find_serial(serial)) && !p->pid && p->status == P_RUNNING && mono_ms() < until)
		wait_changed((int)(until - mono_ms()));
	rs->status = 201;
	rs->body = json_object_new_object();
	json_object_object_add(rs->body, "process", p ? proc_json(p) : NULL);
	pthread_mutex_unlock(&lock);
}

/* ---- GET …/processes, GET/DELETE/POST …/processes/{id}[/logs|/stdin] ---- */

static int by_serial(const void *a, const void *b)
{
	unsigned long x = (*(struct proc *const *)a)->serial, y = (*(struct proc *const *)b)->serial;

	return x < y ? -1 : x > y;
}

void api_procs_list(struct request *rq, struct response *rs)
{
	json_object *list = json_object_new_array();
	size_t n = 0;
	struct proc **v;

	pthread_mutex_lock(&lock);
	for (struct proc *p = procs; p; p = p->next)
		n += !strcmp(p->room, rq->room);
	v = calloc(n + 1, sizeof(*v));
	n = 0;
	for (struct proc *p = procs; p && v; p = p->next)
		if (!strcmp(p->room, rq->room))
			v[n++] = p;
	if (v)
		qsort(v, n, sizeof(*v), by_serial);
	for (size_t i = 0; i < n; i++)   /* oldest first */
		json_object_array_add(list, proc_json(v[i]));
	pthread_mutex_unlock(&lock);
	free(v);
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

/* ---- logs ---- */

struct sse {
	const struct http_output *out;
	bool gone;
	char pending[2][4];        /* an incomplete UTF-8 sequence per stream */
	size_t npending[2];
};

static void sse_write(struct sse *s, const char *text, size_t n)
{
	if (!s->gone && (s->out->write(s->out->ctx, text, n) < 0 || s->out->flush(s->out->ctx) < 0))
		s->gone = true;
}

static void sse_json(struct sse *s, json_object *ev)
{
	size_t len = 0;
	const char *json = json_write(ev, &len);

	if (json) {
		sse_write(s, "data: ", 6);
		sse_write(s, json, len);
		sse_write(s, "\n\n", 2);
	}
	json_object_put(ev);
}

/* Output as text events that never split a UTF-8 character. */
static void sse_output(struct sse *s, int stream, const char *data, size_t n, bool last)
{
	char *joined = malloc(n + 4);
	size_t jn, tail;

	if (!joined)
		return;
	memcpy(joined, s->pending[stream], s->npending[stream]);
	memcpy(joined + s->npending[stream], data, n);
	jn = s->npending[stream] + n;
	tail = last ? 0 : utf8_incomplete_tail((const unsigned char *)joined, jn);
	if (jn - tail) {
		json_object *ev = json_object_new_object();

		json_object_object_add(ev, "type", json_object_new_string(stream_name[stream]));
		json_object_object_add(ev, "data", exec_stream(joined, jn - tail, false));
		sse_json(s, ev);
	}
	memcpy(s->pending[stream], joined + jn - tail, tail);
	s->npending[stream] = tail;
	free(joined);
}

/* The exit event (built under lock; written after, by sse_exit). */
static json_object *exit_event(const struct proc *p)
{
	json_object *ev = json_object_new_object();
	bool ended = p->status == P_EXITED || p->status == P_KILLED;

	json_object_object_add(ev, "type", json_object_new_string("exit"));
	json_object_object_add(ev, "exitCode", ended ? json_object_new_int(p->exit_code) : NULL);
	json_object_object_add(ev, "signal", p->signal[0] ? json_object_new_string(p->signal) : NULL);
	json_object_object_add(ev, "status", json_object_new_string(status_name[p->status]));
	return ev;
}

/* What never completed of a UTF-8 character, then the exit event (NULL:
 * none, the process was forgotten). */
static void sse_exit(struct sse *s, json_object *ev)
{
	sse_output(s, OUT, "", 0, true);
	sse_output(s, ERR, "", 0, true);
	if (ev)
		sse_json(s, ev);
}

static void sub_remove(struct proc *p, struct sub *r)
{
	for (struct sub **q = p ? &p->subs : NULL; q && *q; q = &(*q)->next)
		if (*q == r) {
			*q = r->next;
			break;
		}
	while (r->head) {
		struct chunk *c = r->head;

		r->head = c->next;
		free(c);
	}
	free(r);
}

/* The live part: what the logger queues for us, until the end; returns
 * the exit event (NULL when cut off).  Under lock (released while
 * writing). */
static json_object *sse_follow(struct sse *s, unsigned long serial, struct sub *r)
{
	json_object *ev = NULL;
	struct proc *p;
	long quiet = mono_ms();

	while ((p = find_serial(serial))) {
		struct chunk *c = r->head;
		bool end = false;

		if (r->cut || s->gone)
			break;
		if (!c) {
			if (mono_ms() - quiet >= KEEPALIVE_S * 1000) {
				pthread_mutex_unlock(&lock);
				sse_write(s, ": keep-alive\n\n", 14);
				pthread_mutex_lock(&lock);
				quiet = mono_ms();
				continue;
			}
			wait_changed(KEEPALIVE_S * 1000);
			continue;
		}
		r->head = NULL;
		r->tail = NULL;
		r->queued = 0;
		pthread_mutex_unlock(&lock);
		while (c) {
			struct chunk *next = c->next;

			if (c->type < 0)
				end = true;
			else
				sse_output(s, c->type, c->data, c->len, false);
			free(c);
			c = next;
		}
		quiet = mono_ms();
		pthread_mutex_lock(&lock);
		if (end && (p = find_serial(serial))) {
			ev = exit_event(p);
			break;
		}
	}
	sub_remove(find_serial(serial), r);   /* forgotten meanwhile: only we hold r */
	return ev;
}

static void logs_sse(struct request *rq, struct response *rs, const char *id)
{
	struct sse s = { .out = rq->in->out };
	struct proc *p;
	struct sub *r = calloc(1, sizeof(*r));
	char *data[2] = { NULL, NULL };
	size_t len[2] = { 0, 0 };
	json_object *ev;
	bool cut, running;
	unsigned long serial;
	char head[256];
	int n;

	pthread_mutex_lock(&lock);
	p = find(rq->room, id);
	if (!p || !r) {
		pthread_mutex_unlock(&lock);
		free(r);
		response_error(rs, 404, "process not found: %s", id);
		return;
	}
	for (int k = 0; k < 2; k++)
		data[k] = log_read(p, k, rq->app->cfg.log_max, &len[k], &cut);
	serial = p->serial;
	running = p->status == P_RUNNING;
	if (running) {   /* from here on the logger queues for us: no gap */
		r->next = p->subs;
		p->subs = r;
	}
	pthread_mutex_unlock(&lock);

	n = snprintf(head, sizeof(head), "Status: 200 OK\r\nContent-Type: text/event-stream\r\n"
		     "Cache-Control: no-cache\r\nX-Accel-Buffering: no\r\n%s%s%s\r\n",
		     rs->request_id[0] ? "X-Request-Id: " : "", rs->request_id,
		     rs->request_id[0] ? "\r\n" : "");
	sse_write(&s, head, (size_t)n);
	for (int k = 0; k < 2; k++) {
		if (data[k])
			sse_output(&s, k, data[k], len[k], false);
		free(data[k]);
	}
	pthread_mutex_lock(&lock);
	if (running) {
		ev = sse_follow(&s, serial, r);
	} else {
		p = find_serial(serial);
		ev = p ? exit_event(p) : NULL;
		free(r);
	}
	pthread_mutex_unlock(&lock);
	sse_exit(&s, ev);   /* a slow client never holds the lock */
	rs->status = 200;
	rs->streamed = true;
}

static void logs_json(struct request *rq, struct response *rs, const char *id)
{
	char enc[16] = "";
	bool base64 = http_query_value(rq, "encoding", enc, sizeof(enc)) && !strcmp(enc, "base64");
	json_object *truncated = json_object_new_object();
	struct proc *p;

	pthread_mutex_lock(&lock);
	p = find(rq->room, id);
	if (!p) {
		pthread_mutex_unlock(&lock);
		json_object_put(truncated);
		response_error(rs, 404, "process not found: %s", id);
		return;
	}
	rs->body = json_object_new_object();
	for (int k = 0; k < 2; k++) {
		size_t len = 0;
		bool cut = false;
		char *data = log_read(p, k, rq->app->cfg.log_max, &len, &cut);

		json_object_object_add(rs->body, stream_name[k], exec_stream(data ? data : "", len, base64));
		json_object_object_add(truncated, stream_name[k], json_object_new_boolean(cut));
		free(data);
	}
	pthread_mutex_unlock(&lock);
	json_object_object_add(rs->body, "truncated", truncated);
	rs->status = 200;
}

void api_procs_get(struct request *rq, struct response *rs)
{
	char id[ROOM_ID_MAX + 1];
	const char *what;
	struct proc *p;

	if (!proc_path(rq, rs, id, sizeof(id), &what))
		return;
	if (!strcmp(what, "logs")) {
		if (exec_wants_stream(rq))
			logs_sse(rq, rs, id);
		else
			logs_json(rq, rs, id);
		return;
	}
	if (*what) {
		response_error(rs, 404, "not found");
		return;
	}
	pthread_mutex_lock(&lock);
	p = find(rq->room, id);
	if (p)
		answer_proc(rs, p);
	else
		response_error(rs, 404, "process not found: %s", id);
	pthread_mutex_unlock(&lock);
}

/* ---- stdin ---- */

/* Write all of data to fd (non-blocking), waiting for the reader at most
 * STDIN_WAIT_MS in all.  Bytes written; *gone when the reader has closed
 * its end. */
static size_t write_bounded(int fd, const char *data, size_t len, bool *gone)
{
	size_t off = 0;
	long until = mono_ms() + STDIN_WAIT_MS;

	while (off < len && mono_ms() < until) {
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
		poll(&pf, 1, (int)(until - mono_ms() > 0 ? until - mono_ms() : 0));
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
	pthread_mutex_lock(&lock);
	p = find(rq->room, id);
	if (p && p->in_fd >= 0)
		fd = fcntl(p->in_fd, F_DUPFD_CLOEXEC, 3);
	pthread_mutex_unlock(&lock);
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
	pthread_mutex_lock(&lock);
	if (close_it && (p = find(rq->room, id)))
		close_fd(&p->in_fd);
	pthread_mutex_unlock(&lock);
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

static const char *const signals[] = { "TERM", "KILL", "INT", "HUP", "QUIT", "USR1", "USR2",
				       "STOP", "CONT", NULL };

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
	pthread_mutex_lock(&lock);
	p = find_serial(k->serial);
	due = p && p->status == P_RUNNING;
	pthread_mutex_unlock(&lock);
	if (due && signal_session(k->app, k->room, k->sid, "KILL", &err) < 0)
		fprintf(stderr, "roombox-fcgi: room %s: process kill: %s\n", k->room, err.message);
	free(k);
	return NULL;
}

void api_procs_delete(struct request *rq, struct response *rs)
{
	char id[ROOM_ID_MAX + 1], sig[16] = "TERM";
	const char *what, *name;
	struct helper_error err;
	struct proc *p;
	unsigned long serial = 0;
	long sid = 0, until;
	size_t i;

	if (!proc_path(rq, rs, id, sizeof(id), &what))
		return;
	if (*what) {
		response_error(rs, 404, "not found");
		return;
	}
	http_query_value(rq, "signal", sig, sizeof(sig));
	name = strncmp(sig, "SIG", 3) == 0 ? sig + 3 : sig;
	for (i = 0; signals[i] && strcmp(signals[i], name); i++)
		;
	if (!signals[i]) {
		response_error(rs, 400, "invalid signal: %s (one of TERM, KILL, INT, HUP, QUIT, "
			       "USR1, USR2, STOP, CONT)", sig);
		return;
	}
	pthread_mutex_lock(&lock);
	p = find(rq->room, id);
	if (p && p->status == P_RUNNING && p->sid > 0) {
		serial = p->serial;
		sid = p->sid;
	}
	if (!p)
		response_error(rs, 404, "process not found: %s", id);
	else if (!serial)
		answer_proc(rs, p);   /* ended already: nothing to signal */
	pthread_mutex_unlock(&lock);
	if (!serial)
		return;
	if (signal_session(rq->app, rq->room, sid, signals[i], &err) < 0) {
		exec_answer_error(rs, &err);
		return;
	}
	if (strcmp(signals[i], "KILL") && strcmp(signals[i], "STOP") && strcmp(signals[i], "CONT")) {
		struct later_kill *k = calloc(1, sizeof(*k));
		pthread_t t;
		pthread_attr_t a;

		if (k) {
			*k = (struct later_kill){ rq->app, "", serial, sid };
			snprintf(k->room, sizeof(k->room), "%s", rq->room);
			pthread_attr_init(&a);
			pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
			if (pthread_create(&t, &a, kill_later, k) != 0)
				free(k);
			pthread_attr_destroy(&a);
		}
	}
	/* answer with the end when it comes soon (a second at most) */
	pthread_mutex_lock(&lock);
	until = mono_ms() + 1000;
	while ((p = find_serial(serial)) && p->status == P_RUNNING && mono_ms() < until &&
	       strcmp(signals[i], "STOP") && strcmp(signals[i], "CONT"))
		wait_changed((int)(until - mono_ms()));
	if (p)
		answer_proc(rs, p);
	else
		response_error(rs, 404, "process not found: %s", id);
	pthread_mutex_unlock(&lock);
}
