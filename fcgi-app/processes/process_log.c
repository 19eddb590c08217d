/* Following managed processes: what comes on their pipes,
 * and their end.
 *
 * One logger thread (epoll) reads the stdout and stderr pipes of every
 * running process; its key is the process's serial, never a pointer, so a
 * process forgotten meanwhile (cleanup) is simply not found.  Output is
 * appended to the process's logs on disk and queued for each live reader;
 * stderr first goes through the control-line scanner (process_scan.c),
 * which takes the wrapper's "pid" and "exit" lines out.  An exit line is
 * the end: exited, or killed (128+signo).  Both pipes ending with no exit
 * line mean the wrapper was KILLed with the command: `lost` when the room
 * stopped under them, `killed` (SIGKILL) when the room ran on (its
 * kill-all, pids_limit recovery); see pipes_ended.
 *
 * Logs, per stream: <id>.stdout / <id>.stdout.1 (and stderr) beside the
 * record, in two halves of log_max/2 bytes; when the newer reaches that
 * size it becomes the older one, so the last log_max bytes are always
 * there, and the files never hold much more.  Logs are written, not
 * fsync'd: they outlive a restart of roombox-fcgi, a crash of the machine
 * may lose their tail.  The logs of a room's ended processes take at most
 * PROCS_LOG_BUDGET x log_max of the host's disk.
 *
 * A room's output is read at most LOG_ROOM_RATE bytes a second: past it
 * in a second, its pipes leave the epoll set until the next second, and a
 * writer that goes on finds its pipe full and waits, in its own cgroup.
 * Read as fast as it came, one room's `yes` cost roombox-fcgi a third of
 * a core (open, write and close of a log for every 64 KiB), outside every
 * room's cgroup, and held the one logger thread every room's logs share.
 *
 * Live readers (GET …/logs as an event stream) get what is kept, then
 * what the logger queues for them, then the exit event; a reader that
 * falls SUB_QUEUE_MAX behind is cut off, and the lock is never held while
 * writing to a client. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "exec_pump.h"
#include "exec_stream.h"
#include "helper_client.h"
#include "http.h"
#include "metrics.h"
#include "process_log.h"
#include "process_store.h"
#include "protocol.h"

/* The logs of a room's ended processes take at most this many log_max of
 * the host's disk (they are not on the room's disk quota) */
#define PROCS_LOG_BUDGET 32
#define SUB_QUEUE_MAX (8u << 20)   /* a live reader this far behind is cut off */
#define KEEPALIVE_S 15
/* Output read of one room a second: far more than anyone reads of a log
 * (log_max keeps the last 1 MiB by default); the rest waits in its pipes */
#define LOG_ROOM_RATE (1u << 20)
#define LOG_ROOMS_MAX 256   /* rooms counted a second; more go uncounted */

struct chunk {                 /* one piece for a live reader */
	struct chunk *next;
	int type;                  /* PROC_OUT, PROC_ERR, or -1: the end */
	size_t len;
	char data[];
};

struct proc_reader {           /* a live log reader (GET …/logs as a stream) */
	struct proc_reader *next;
	struct chunk *head, *tail;
	size_t queued;
	bool cut;                  /* fell too far behind */
};

static int epfd = -1;
static uint64_t log_half, room_log_budget;
static struct app *helper_app;   /* the helper the room status asks */

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
	snprintf(suffix, sizeof(suffix), ".%s", proc_stream_name[s]);
	proc_file_path(path, sizeof(path), p->room, p->id, suffix);
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 || write(fd, data, n) != (ssize_t)n)
		fprintf(stderr, "roombox-fcgi: room %s: process %s: write its %s log: %m\n",
			p->room, p->id, proc_stream_name[s]);
	if (fd >= 0)
		close(fd);
	p->log_size[s] += n;
	if (p->log_size[s] < log_half)
		return;
	snprintf(old, sizeof(old), "%s.1", path);
	if (access(old, F_OK) == 0 && !p->cut[s]) {
		p->cut[s] = true;   /* the older half's bytes are gone from now on */
		proc_record_save(p);
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

	snprintf(suffix, sizeof(suffix), ".%s", proc_stream_name[s]);
	proc_file_path(path, sizeof(path), p->room, p->id, suffix);
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

static void sub_push(struct proc_reader *s, int type, const char *data, size_t n)
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
	for (struct proc_reader *r = p->readers; r; r = r->next)
		sub_push(r, s, data, n);
	pthread_cond_broadcast(&procs_changed);
}

/* ---- the end ---- */

static const char *const log_suffixes[4] = { ".stdout", ".stdout.1", ".stderr", ".stderr.1" };

static uint64_t logs_size(const struct proc *p)
{
	char path[PATH_MAX + 64];
	uint64_t total = 0;
	struct stat st;

	for (size_t i = 0; i < 4; i++) {
		proc_file_path(path, sizeof(path), p->room, p->id, log_suffixes[i]);
		if (stat(path, &st) == 0)
			total += (uint64_t)st.st_size;
	}
	return total;
}

/* Past PROCS_LOG_BUDGET x log_max for the logs of the room's ended
 * processes, the oldest ones' logs go (their records stay, truncated). */
static void room_logs_trim(const char *room)
{
	size_t n;
	struct proc **v = procs_of_room(room, &n);   /* oldest first */
	uint64_t total = 0, *size = v ? calloc(n + 1, sizeof(*size)) : NULL;

	for (size_t i = 0; size && i < n; i++)
		if (v[i]->status != P_RUNNING && v[i]->fd[PROC_OUT] < 0 && v[i]->fd[PROC_ERR] < 0)
			total += size[i] = logs_size(v[i]);
	for (size_t i = 0; size && i < n && total > room_log_budget; i++) {
		char path[PATH_MAX + 64];

		if (!size[i])
			continue;
		for (size_t k = 0; k < 4; k++) {
			proc_file_path(path, sizeof(path), room, v[i]->id, log_suffixes[k]);
			unlink(path);
		}
		v[i]->cut[PROC_OUT] = v[i]->cut[PROC_ERR] = true;
		proc_record_save(v[i]);
		total -= size[i];
	}
	free(size);
	free(v);
}

void proc_end(struct proc *p)
{
	proc_now_iso(p->end, sizeof(p->end));
	metrics_processes_running_add(-1);
	for (struct proc_reader *r = p->readers; r; r = r->next)
		sub_push(r, -1, NULL, 0);
	proc_record_save(p);
	pthread_cond_broadcast(&procs_changed);
	procs_prune_ended(p->room);
}

/* What stdout holds now.  At the exit line the command has ended, so
 * everything it wrote is in the pipe: its log is whole before its end is
 * told. */
static void drain_stdout(struct proc *p)
{
	char buf[65536];
	ssize_t n;

	while (p->fd[PROC_OUT] >= 0 && (n = read(p->fd[PROC_OUT], buf, sizeof(buf))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return;   /* EAGAIN: all of it read; what comes later is its children's */
		take_output(p, PROC_OUT, buf, (size_t)n);
	}
	proc_close_fd(&p->fd[PROC_OUT]);   /* end of file */
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
		proc_record_save(p);
		pthread_cond_broadcast(&procs_changed);
	} else if (sscanf(text, "exit %d", &code) == 1 && p->status == P_RUNNING) {
		drain_stdout(p);
		proc_set_exit(p, code);
		proc_end(p);
	}
}

static void stderr_out(void *ctx, const char *d, size_t n)
{
	take_output(ctx, PROC_ERR, d, n);
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

/* ---- an end nobody reported ---- */

/* Does the room's keeper run?  The helper's status: it starts nothing. */
static bool room_runs(const char *room)
{
	struct helper_target target = app_helper(helper_app);
	struct helper_error err;
	struct helper_status st;

	if (helper_status(&target, room, &st, &err) == 0)
		return st.running;
	if (err.http_status != 404)
		fprintf(stderr, "roombox-fcgi: room %s: processes: room status: %s\n", room,
			err.message);
	return false;
}

/* The end of p (under lock, still running, its pipes ended with no exit
 * line), room_runs told. */
static void end_unreported(struct proc *p, bool room_ran)
{
	if (room_ran && !p->room_stopping)
		proc_set_exit(p, 128 + SIGKILL);
	else
		p->status = P_LOST;
	proc_end(p);
	room_logs_trim(p->room);
}

struct unreported {
	unsigned long serial;
	char room[ROOM_ID_MAX + 1];
};

static void *decide_unreported(void *arg)
{
	struct unreported *u = arg;
	bool ran = room_runs(u->room);
	struct proc *p;

	pthread_mutex_lock(&procs_lock);
	p = proc_find_serial(u->serial);
	if (p && p->status == P_RUNNING)   /* else forgotten, or the starter's end */
		end_unreported(p, ran);
	pthread_mutex_unlock(&procs_lock);
	free(u);
	return NULL;
}

/* Both pipes ended: the process is done with us.  With no exit line, the
 * wrapper that reports the end died with the command; it outlives every
 * signal but KILL (processes.c), so either the room stopped under it
 * (`lost`) or something KILLed the room's processes while the room ran on:
 * DELETE …/sandbox/processes or the recovery at pids_limit (`killed`,
 * SIGKILL).  A stop or restart roombox-fcgi asked for is known
 * (room_stopping: the room may run again by the time we ask); anything
 * else the helper's status tells -- a helper call, so on a thread of its
 * own, never the logger's.  (What it cannot tell: a keeper that died by
 * itself and was started again by an exec before the helper is asked.) */
static void pipes_ended(struct proc *p)
{
	struct unreported *u;
	pthread_attr_t a;
	pthread_t t;

	proc_close_fd(&p->in_fd);
	if (p->status != P_RUNNING) {
		room_logs_trim(p->room);   /* its logs are whole now */
		return;
	}
	p->ending = true;
	pthread_cond_broadcast(&procs_changed);   /* a failed starter's end comes first */
	if (p->room_stopping || !(u = calloc(1, sizeof(*u)))) {
		end_unreported(p, false);
		return;
	}
	u->serial = p->serial;
	snprintf(u->room, sizeof(u->room), "%s", p->room);
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &a, decide_unreported, u) != 0) {
		free(u);
		end_unreported(p, false);
	}
	pthread_attr_destroy(&a);
}

/* ---- each room's rate ---- */

static struct {
	char room[ROOM_ID_MAX + 1];
	uint64_t bytes;            /* read this second */
} rates[LOG_ROOMS_MAX];
static int rates_used;
static int64_t second_ends;    /* monotonic ms */
static uint64_t *paused;       /* keys of pipes out of the epoll set */
static size_t npaused, paused_cap;

static uint64_t *room_bytes(const char *room)
{
	for (int i = 0; i < rates_used; i++)
		if (strcmp(rates[i].room, room) == 0)
			return &rates[i].bytes;
	if (rates_used == LOG_ROOMS_MAX)
		return NULL;
	snprintf(rates[rates_used].room, sizeof(rates[0].room), "%s", room);
	rates[rates_used].bytes = 0;
	return &rates[rates_used++].bytes;
}

/* The room has had its second's bytes: the pipe waits for the next
 * second out of the epoll set (its end of file too: a level-triggered
 * hang-up would wake the loop for ever).  False when it may be read. */
static bool pause_if_over(struct proc *p, uint64_t key)
{
	uint64_t *b = room_bytes(p->room);
	int s = (int)(key & 1);

	if (!b || *b < LOG_ROOM_RATE)
		return false;
	if (npaused == paused_cap) {
		size_t cap = paused_cap ? paused_cap * 2 : 64;
		uint64_t *n = realloc(paused, cap * sizeof(*n));

		if (!n)
			return false;
		paused = n;
		paused_cap = cap;
	}
	epoll_ctl(epfd, EPOLL_CTL_DEL, p->fd[s], NULL);
	paused[npaused++] = key;
	return true;
}

/* A new second: every room's count starts again, paused pipes are
 * watched again (those of processes still there); the ms until the next
 * second, or -1 when nothing waits for it. */
static int second_next(void)
{
	int64_t now = monotonic_ms();

	if (now >= second_ends) {
		second_ends = now + 1000;
		rates_used = 0;
		for (size_t i = 0; i < npaused; i++) {
			struct proc *p = proc_find_serial((unsigned long)(paused[i] >> 1));
			int s = (int)(paused[i] & 1);
			struct epoll_event ev = { .events = EPOLLIN, .data.u64 = paused[i] };

			if (p && p->fd[s] >= 0)
				epoll_ctl(epfd, EPOLL_CTL_ADD, p->fd[s], &ev);
		}
		npaused = 0;
	}
	return npaused ? (int)(second_ends - now) : -1;
}

/* ---- the logger thread ---- */

static void logger_event(uint64_t key)
{
	char buf[65536];
	struct proc *p = proc_find_serial((unsigned long)(key >> 1));
	int s = (int)(key & 1);
	ssize_t n;

	if (!p || p->fd[s] < 0 || pause_if_over(p, key))
		return;
	n = read(p->fd[s], buf, sizeof(buf));
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n > 0) {
		uint64_t *b = room_bytes(p->room);

		if (b)
			*b += (uint64_t)n;
		if (s == PROC_ERR)
			take_stderr(p, buf, (size_t)n, false);
		else
			take_output(p, PROC_OUT, buf, (size_t)n);
		return;
	}
	if (s == PROC_ERR)
		take_stderr(p, "", 0, true);
	proc_close_fd(&p->fd[s]);   /* also leaves the epoll set */
	if (p->fd[PROC_OUT] < 0 && p->fd[PROC_ERR] < 0)
		pipes_ended(p);
}

static void *logger(void *arg)
{
	struct epoll_event ev[64];

	(void)arg;
	int wait_ms = -1;

	for (;;) {
		int n = epoll_wait(epfd, ev, 64, wait_ms);

		pthread_mutex_lock(&procs_lock);
		second_next();   /* a count of a second gone by is not this one's */
		for (int i = 0; i < n; i++)
			logger_event(ev[i].data.u64);
		wait_ms = second_next();
		pthread_mutex_unlock(&procs_lock);
	}
	return NULL;
}

int proc_logger_start(struct app *app, char *err, size_t errlen)
{
	uint64_t log_max = app->cfg.log_max;
	pthread_t t;

	helper_app = app;
	log_half = log_max / 2 ? log_max / 2 : 1;
	room_log_budget = PROCS_LOG_BUDGET * log_max;
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (epfd < 0 || pthread_create(&t, NULL, logger, NULL) != 0) {
		snprintf(err, errlen, "processes: start the logger: %s", strerror(errno));
		return -1;
	}
	pthread_detach(t);
	return 0;
}

int proc_logger_watch(struct proc *p)
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

/* ---- GET …/processes/{id}/logs ---- */

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

		json_object_object_add(ev, "type", json_object_new_string(proc_stream_name[stream]));
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
	json_object_object_add(ev, "status", json_object_new_string(proc_status_name[p->status]));
	return ev;
}

/* What never completed of a UTF-8 character, then the exit event (NULL:
 * none, the process was forgotten). */
static void sse_exit(struct sse *s, json_object *ev)
{
	sse_output(s, PROC_OUT, "", 0, true);
	sse_output(s, PROC_ERR, "", 0, true);
	if (ev)
		sse_json(s, ev);
}

static void sub_remove(struct proc *p, struct proc_reader *r)
{
	for (struct proc_reader **q = p ? &p->readers : NULL; q && *q; q = &(*q)->next)
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
static json_object *sse_follow(struct sse *s, unsigned long serial, struct proc_reader *r)
{
	json_object *ev = NULL;
	struct proc *p;
	int64_t quiet = monotonic_ms();

	while ((p = proc_find_serial(serial))) {
		struct chunk *c = r->head;
		bool end = false;

		if (r->cut || s->gone)
			break;
		if (!c) {
			if (monotonic_ms() - quiet >= KEEPALIVE_S * 1000) {
				pthread_mutex_unlock(&procs_lock);
				sse_write(s, ": keep-alive\n\n", 14);
				pthread_mutex_lock(&procs_lock);
				quiet = monotonic_ms();
				continue;
			}
			procs_wait_changed(KEEPALIVE_S * 1000);
			continue;
		}
		r->head = NULL;
		r->tail = NULL;
		r->queued = 0;
		pthread_mutex_unlock(&procs_lock);
		while (c) {
			struct chunk *next = c->next;

			if (c->type < 0)
				end = true;
			else
				sse_output(s, c->type, c->data, c->len, false);
			free(c);
			c = next;
		}
		quiet = monotonic_ms();
		pthread_mutex_lock(&procs_lock);
		if (end && (p = proc_find_serial(serial))) {
			ev = exit_event(p);
			break;
		}
	}
	sub_remove(proc_find_serial(serial), r);   /* forgotten meanwhile: only we hold r */
	return ev;
}

static void logs_sse(struct request *rq, struct response *rs, const char *id)
{
	struct sse s = { .out = rq->in->out };
	struct proc *p;
	struct proc_reader *r = calloc(1, sizeof(*r));
	char *data[2] = { NULL, NULL };
	size_t len[2] = { 0, 0 };
	json_object *ev;
	bool cut, running;
	unsigned long serial;
	char head[256];
	int n;

	pthread_mutex_lock(&procs_lock);
	p = proc_find(rq->room, id);
	if (!p || !r) {
		pthread_mutex_unlock(&procs_lock);
		free(r);
		response_error(rs, 404, "process not found: %s", id);
		return;
	}
	for (int k = 0; k < 2; k++)
		data[k] = log_read(p, k, rq->app->cfg.log_max, &len[k], &cut);
	serial = p->serial;
	running = p->status == P_RUNNING;
	if (running) {   /* from here on the logger queues for us: no gap */
		r->next = p->readers;
		p->readers = r;
	}
	pthread_mutex_unlock(&procs_lock);

	n = snprintf(head, sizeof(head), "Status: 200 OK\r\nContent-Type: text/event-stream\r\n"
		     "Cache-Control: no-cache\r\nX-Accel-Buffering: no\r\n%s%s%s%s\r\n",
		     rs->request_id[0] ? "X-Request-Id: " : "", rs->request_id,
		     rs->request_id[0] ? "\r\n" : "", http_host_header);
	sse_write(&s, head, (size_t)n);
	for (int k = 0; k < 2; k++) {
		if (data[k])
			sse_output(&s, k, data[k], len[k], false);
		free(data[k]);
	}
	pthread_mutex_lock(&procs_lock);
	if (running) {
		ev = sse_follow(&s, serial, r);
	} else {
		p = proc_find_serial(serial);
		ev = p ? exit_event(p) : NULL;
		free(r);
	}
	pthread_mutex_unlock(&procs_lock);
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

	pthread_mutex_lock(&procs_lock);
	p = proc_find(rq->room, id);
	if (!p) {
		pthread_mutex_unlock(&procs_lock);
		json_object_put(truncated);
		response_error(rs, 404, "process not found: %s", id);
		return;
	}
	rs->body = json_object_new_object();
	for (int k = 0; k < 2; k++) {
		size_t len = 0;
		bool cut = false;
		char *data = log_read(p, k, rq->app->cfg.log_max, &len, &cut);

		json_object_object_add(rs->body, proc_stream_name[k], exec_stream(data ? data : "", len, base64));
		json_object_object_add(truncated, proc_stream_name[k], json_object_new_boolean(cut));
		free(data);
	}
	pthread_mutex_unlock(&procs_lock);
	json_object_object_add(rs->body, "truncated", truncated);
	rs->status = 200;
}

void proc_logs_answer(struct request *rq, struct response *rs, const char *id)
{
	if (exec_wants_stream(rq))
		logs_sse(rq, rs, id);
	else
		logs_json(rq, rs, id);
}
