/* GET /api/rooms/{id}/sandbox/watch?path=P&recursive=1: a room's file
 * changes as an event stream.
 *
 * One watcher per (room, path, recursive), however many clients: a thread
 * that runs the keeper's watch tool in the room (keeper/watch.c, through
 * the one exec path, exec_pump.c) and turns its records into JSON events
 * kept in a byte ring (byte_ring.h).  An event's SSE id is
 * "<watcher epoch>-<offset of its end in the ring>", so a client that
 * comes back with Last-Event-ID resumes exactly where it stopped, or --
 * when the watcher is another one by now, or its events were pushed out of
 * the ring -- gets {"type":"overflow"} and lists the tree again.  Each
 * client reads at its own offset: one that never reads holds nothing back
 * and costs nothing but its position.
 *
 * A watcher outlives its last client by WATCH_LINGER_MS (a client that
 * reconnects at once misses nothing), then closes the tool's stdin, which
 * ends it.  It ends too with the room (the tool is killed with it) or at
 * exec_timeout_max; its clients then get {"type":"end"} and may come back.
 * Bounds: WATCHERS_MAX watchers (and a quarter of max_concurrent_execs, as
 * each holds an exec slot), WATCHERS_PER_ROOM per room (503 beyond, unless
 * a lingering watcher gives its place: the one whose last client left
 * first), WATCH_RING bytes of events each. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "byte_ring.h"
#include "clock.h"
#include "exec_pump.h"
#include "http.h"
#include "protocol.h"
#include "textenc.h"
#include "watch.h"
#include "watch_records.h"

#define WATCHERS_MAX      64
#define WATCHERS_PER_ROOM 8
#define WATCH_RING        (256u << 10)
#define WATCH_LINGER_MS   60000
#define WATCH_KEEPALIVE_MS 15000
#define WATCH_GONE_MS     1000   /* how often a quiet watch looks for its client */
#define WATCH_START_MS    30000

struct watcher {
	struct watcher *next;
	struct app *app;
	char room[ROOM_ID_MAX + 1];
	char *path;
	bool recursive;
	uint64_t epoch;
	struct byte_ring ring;
	int clients;
	long idle_since;          /* monotonic ms the last client left */
	bool evicted;             /* lingering, it gave its place to a new one */
	enum { W_STARTING, W_RUNNING, W_ENDED } state;
	struct helper_error err;  /* why it ended before running */
	struct watch_records parser;   /* the tool's output */
	pthread_cond_t cond;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct watcher *watchers;

/* ---- the watcher ---- */

/* Appends one event (a JSON line) to the ring; under lock. */
static void ring_event(void *ctx, json_object *ev)
{
	struct watcher *w = ctx;
	size_t len = 0;
	const char *json = json_write(ev, &len);
	if (!json)
		return;
	byte_ring_write(&w->ring, json, len);
	byte_ring_write(&w->ring, "\n", 1);
	pthread_cond_broadcast(&w->cond);
}

static void simple_event(struct watcher *w, const char *type)
{
	json_object *ev = json_object_new_object();
	json_object_object_add(ev, "type", json_object_new_string(type));
	ring_event(w, ev);
	json_object_put(ev);
}

/* The tool's stdout as it comes (watch_records.c makes the events). */
static int watch_stdout(void *ctx, const char *data, size_t n)
{
	struct watcher *w = ctx;
	pthread_mutex_lock(&lock);
	bool was = w->parser.started;
	watch_records_feed(&w->parser, data, n, ring_event, w);
	if (!was && w->parser.started) {
		w->state = W_RUNNING;
		pthread_cond_broadcast(&w->cond);
	}
	pthread_mutex_unlock(&lock);
	return 0;
}

/* Whether the tool is to end: nobody has watched for WATCH_LINGER_MS. */
static bool watch_done(void *ctx)
{
	struct watcher *w = ctx;
	pthread_mutex_lock(&lock);
	bool done = w->evicted || (w->clients == 0 && monotonic_ms() - w->idle_since >= WATCH_LINGER_MS);
	pthread_mutex_unlock(&lock);
	return done;
}

static void watcher_free(struct watcher *w)
{
	byte_ring_free(&w->ring);
	pthread_cond_destroy(&w->cond);
	free(w->path);
	free(w);
}

static void unlink_watcher(struct watcher *w)
{
	for (struct watcher **p = &watchers; *p; p = &(*p)->next)
		if (*p == w) {
			*p = w->next;
			return;
		}
}

/* A lingering watcher (no client, kept for one that comes back) gives
 * its place to a new watch instead of the new one being refused: it is
 * taken off the list (no client joins it again) and its tool ended.
 * Under lock. */
static void evict(struct watcher *w)
{
	w->evicted = true;
	unlink_watcher(w);
}

static void *watch_thread(void *arg)
{
	struct watcher *w = arg;
	const char *argv[] = { TOOL_WATCH, w->path, w->recursive ? "1" : "0", NULL };
	struct exec_request ex = { .cmd = argv[0], .cmd_len = strlen(argv[0]),
				   .timeout_ms = w->app->cfg.exec_timeout_max_ms };
	struct exec_sink sink = { .ctx = w, .stdout_raw = watch_stdout, .stdin_until = watch_done,
				  .tool = argv, .existing = true };
	struct helper_error err;

	memset(&err, 0, sizeof(err));
	json_object *res = exec_pump_in_room(w->app, w->room, &ex, &sink, &err);
	json_object_put(res);

	pthread_mutex_lock(&lock);
	if (!w->parser.started)
		w->err = err;
	else
		simple_event(w, "end");
	w->state = W_ENDED;
	unlink_watcher(w);   /* a new client starts a new watcher */
	pthread_cond_broadcast(&w->cond);
	bool last = w->clients == 0;
	pthread_mutex_unlock(&lock);
	if (last)
		watcher_free(w);
	return NULL;
}

/* The running watcher of (room, path, recursive), or a new one; one more
 * client on it.  NULL with rs set.  Under lock. */
static struct watcher *watcher_get(struct request *rq, struct response *rs, const char *path, bool recursive)
{
	int all = 0, room = 0;
	struct watcher *idle = NULL, *idle_here = NULL;   /* the longest lingering */
	for (struct watcher *w = watchers; w; w = w->next) {
		all++;
		bool lingers = w->clients == 0 && w->state != W_ENDED;
		if (lingers && (!idle || w->idle_since < idle->idle_since))
			idle = w;
		if (strcmp(w->room, rq->room))
			continue;
		room++;
		if (w->recursive == recursive && !strcmp(w->path, path)) {
			w->clients++;
			return w;
		}
		if (lingers && (!idle_here || w->idle_since < idle_here->idle_since))
			idle_here = w;
	}
	/* each holds an exec slot: a quarter of them at most, so watches
	 * never take every slot from commands */
	int slots = rq->app->cfg.max_concurrent_execs, max = WATCHERS_MAX;
	if (slots > 0 && slots / 4 < max)
		max = slots / 4 > 0 ? slots / 4 : 1;
	/* a watch nobody follows gives way (a console that shows one
	 * directory after another leaves one lingering for each) */
	if (room >= WATCHERS_PER_ROOM && idle_here) {
		if (idle == idle_here)
			idle = NULL;
		evict(idle_here);
		room--;
		all--;
	}
	if (all >= max && idle) {
		evict(idle);
		all--;
	}
	if (all >= max || room >= WATCHERS_PER_ROOM) {
		rs->retry_after = 5;
		response_error(rs, 503, "too many watches%s; try again later", room >= WATCHERS_PER_ROOM ? " of this room" : "");
		return NULL;
	}
	struct watcher *w = calloc(1, sizeof(*w));
	if (!w || !(w->path = strdup(path)) || byte_ring_init(&w->ring, WATCH_RING) < 0) {
		if (w)
			free(w->path);
		free(w);
		response_error(rs, 500, "out of memory");
		return NULL;
	}
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	w->epoch = (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000;
	w->app = rq->app;
	snprintf(w->room, sizeof(w->room), "%s", rq->room);
	w->recursive = recursive;
	w->clients = 1;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_t t;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, watch_thread, w) != 0) {
		pthread_attr_destroy(&attr);
		watcher_free(w);
		response_error(rs, 500, "cannot start a watch");
		return NULL;
	}
	pthread_attr_destroy(&attr);
	w->next = watchers;
	watchers = w;
	return w;
}

/* One client less; the last one of an ended watcher frees it. */
static void watcher_put(struct watcher *w)
{
	pthread_mutex_lock(&lock);
	bool free_it = --w->clients == 0 && w->state == W_ENDED;
	w->idle_since = monotonic_ms();
	pthread_mutex_unlock(&lock);
	if (free_it)
		watcher_free(w);
}

/* ---- a client ---- */

static int cond_wait_ms(pthread_cond_t *c, long ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	return pthread_cond_timedwait(c, &lock, &ts);
}

/* Where a client with this Last-Event-ID resumes: its offset, or
 * UINT64_MAX when the id is not this watcher's (overflow). */
static uint64_t resume_at(const struct watcher *w, const char *last_id)
{
	uint64_t epoch, off;
	char tail;
	if (sscanf(last_id, "%" SCNu64 "-%" SCNu64 "%c", &epoch, &off, &tail) != 2 || epoch != w->epoch)
		return UINT64_MAX;
	return off;
}

static int send_text(const struct http_output *out, const char *p, size_t n)
{
	return out->write(out->ctx, p, n) < 0 || out->flush(out->ctx) < 0 ? -1 : 0;
}

#define WATCH_CHUNK (128u << 10)   /* more than the longest event */

/* Sends buf[0..n), the ring's bytes from offset base on, as SSE events,
 * with no lock held: an overflow event first when lost (skipping what is
 * left of an event cut at the front) or *overflow; a cut event at the end
 * is left for the next read (*at moves back to its start).  -1 when the
 * client is gone. */
static int send_chunk(const struct http_output *out, uint64_t epoch, const char *buf, size_t n,
		      uint64_t base, uint64_t lost, bool *overflow, uint64_t *at)
{
	size_t i = 0;
	char f[WATCH_CHUNK / 2 + 128];

	if (lost) {
		while (i < n && buf[i] != '\n')
			i++;
		if (i < n)
			i++;
		*overflow = true;
	}
	if (*overflow) {
		int k = snprintf(f, sizeof(f), "id: %" PRIu64 "-%" PRIu64 "\ndata: {\"type\":\"overflow\"}\n\n",
				 epoch, base + i);
		*overflow = false;
		if (send_text(out, f, (size_t)k) < 0)
			return -1;
	}
	while (i < n) {
		const char *nl = memchr(buf + i, '\n', n - i);
		if (!nl) {
			if (i > 0 || n < WATCH_CHUNK)
				*at = base + i;   /* the rest comes with the next read */
			else
				*overflow = true; /* an event longer than a chunk: cannot be */
			return 0;
		}
		size_t len = (size_t)(nl - (buf + i));
		if (len + 96 > sizeof(f)) {   /* cannot be either: events are < 40 KiB */
			i += len + 1;
			continue;
		}
		int k = snprintf(f, sizeof(f), "id: %" PRIu64 "-%" PRIu64 "\ndata: ", epoch, base + i + len + 1);
		memcpy(f + k, buf + i, len);
		memcpy(f + k + len, "\n\n", 2);
		if (send_text(out, f, (size_t)k + len + 2) < 0)
			return -1;
		i += len + 1;
	}
	return 0;
}

void api_watch_get(struct request *rq, struct response *rs)
{
	char raw[4200] = "", flag[8] = "";
	const struct http_output *out = rq->in ? rq->in->out : NULL;

	if (!out) {
		response_error(rs, 500, "no connection to stream on");
		return;
	}
	if (!http_query_value(rq, "path", raw, sizeof(raw)))
		snprintf(raw, sizeof(raw), "/workspace");
	bool recursive = http_query_value(rq, "recursive", flag, sizeof(flag)) &&
			 (!strcmp(flag, "1") || !strcmp(flag, "true") || !flag[0]);
	char *path = files_room_path(raw);
	if (!path || strlen(path) > 4095) {
		free(path);
		response_error(rs, 400, "invalid path: percent-encoded, without NUL, at most 4096 bytes");
		return;
	}
	if (!room_exists_or_answer(rq, rs)) {
		free(path);
		return;
	}

	pthread_mutex_lock(&lock);
	struct watcher *w = watcher_get(rq, rs, path, recursive);
	free(path);
	if (!w) {
		pthread_mutex_unlock(&lock);
		return;
	}
	long until = monotonic_ms() + WATCH_START_MS;
	while (w->state == W_STARTING && monotonic_ms() < until)
		cond_wait_ms(&w->cond, until - monotonic_ms());
	if (w->state != W_RUNNING && !w->parser.started) {
		struct helper_error err = w->err;
		char kind[32];
		snprintf(kind, sizeof(kind), "%s", w->parser.kind);
		pthread_mutex_unlock(&lock);
		watcher_put(w);
		if (!strcmp(kind, TOOL_KIND_NOTFOUND))
			response_error(rs, 404, "no such directory in the room");
		else if (!strcmp(kind, TOOL_KIND_NOTDIR))
			response_error(rs, 400, "not a directory");
		else if (!strcmp(kind, TOOL_KIND_DENIED))
			response_error(rs, 403, "the room's user may not read that directory");
		else if (kind[0])
			response_error(rs, 400, "cannot watch that directory: %s", kind);
		else if (err.http_status)
			exec_answer_error(rs, &err);
		else
			response_error(rs, 503, "the watch did not start");
		return;
	}

	const char *last = rq->in->param(rq->in->ctx, "HTTP_LAST_EVENT_ID");
	uint64_t at = w->ring.end;
	bool overflow = false;
	if (last && *last) {
		uint64_t r = resume_at(w, last);
		if (r == UINT64_MAX || r > w->ring.end)
			overflow = true;
		else
			at = r;
	}
	char head[256];
	int k = snprintf(head, sizeof(head), "Status: 200 OK\r\nContent-Type: text/event-stream\r\n"
			 "Cache-Control: no-cache\r\nX-Accel-Buffering: no\r\n%s%s%s%s\r\n: watching\n\n",
			 rs->request_id[0] ? "X-Request-Id: " : "", rs->request_id,
			 rs->request_id[0] ? "\r\n" : "", http_host_header);
	uint64_t epoch = w->epoch;
	pthread_mutex_unlock(&lock);
	char *buf = malloc(WATCH_CHUNK);
	int rc = buf ? send_text(out, head, (size_t)k) : -1;
	long quiet = monotonic_ms();
	pthread_mutex_lock(&lock);
	while (rc == 0) {
		if (at < w->ring.end || overflow) {
			uint64_t lost;
			size_t n = byte_ring_read(&w->ring, &at, buf, WATCH_CHUNK, &lost);
			pthread_mutex_unlock(&lock);   /* never wait on a client holding it */
			rc = send_chunk(out, epoch, buf, n, at - n, lost, &overflow, &at);
			quiet = monotonic_ms();
			pthread_mutex_lock(&lock);
			continue;
		}
		if (w->state == W_ENDED)
			break;
		if (monotonic_ms() - quiet >= WATCH_KEEPALIVE_MS) {
			pthread_mutex_unlock(&lock);
			rc = send_text(out, ": keep-alive\n\n", 14);
			quiet = monotonic_ms();
			pthread_mutex_lock(&lock);
			continue;
		}
		/* a client that left is seen within WATCH_GONE_MS, not at the
		 * next keep-alive: its watch lingers from then, and gives its
		 * place to a new one */
		if (rq->in->gone && rq->in->gone(rq->in->ctx))
			break;
		cond_wait_ms(&w->cond, WATCH_GONE_MS);
	}
	pthread_mutex_unlock(&lock);
	free(buf);
	watcher_put(w);
	rs->status = 200;
	rs->streamed = true;
}
