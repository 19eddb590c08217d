/* The agent: a user message answered by the model.
 *
 * The flow of one user message:
 *
 *   worker thread   validate (messages.c) -> take a call slot (503 past
 *                   AGENT_CALLS_MAX) -> store the user message (fsync'd,
 *                   before the model is asked) -> rs->later: main.c hands
 *                   the FastCGI request over and the worker goes back to
 *                   accepting;
 *   agent thread    (one per call, detached) system prompt + the last
 *                   llm_history messages + the new one -> the model
 *                   (llm.c) -> its reply through executeCommands
 *                   (runtags.c, commands run by the runner messages.c
 *                   passed in, as an assistant message's are) -> with llm_rounds > 1 and
 *                   commands run, the outputs go back to the model for
 *                   another reply -> the replies, joined by a blank line,
 *                   stored as one assistant message -> 201
 *                   {"message","reply"}, or the stream's last event.
 *
 * Why a thread of its own: a model call may take minutes (llm_timeout), and
 * the workers are a fixed number; if model calls held workers, a few slow
 * ones would hold up every exec of every room.  The threads are bounded
 * (AGENT_CALLS_MAX) and each holds little (its stack, one curl handle).
 *
 * Streaming (Accept: text/event-stream): the 200 and its headers go out
 * with the first piece of the reply, so a model that cannot be reached, is
 * slow, errs or answers nonsense before saying anything still gets the
 * JSON 502.  After that a failure is the stream's last event,
 * {"type":"error","error":"model request failed: ..."}.  Every event is
 * flushed as it is written; X-Accel-Buffering tells nginx not to hold it.
 *
 * The user message stays stored whatever happens after it was stored; the
 * reply is stored only when every round came back. */
#include "agent.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "http.h"
#include "llm.h"
#include "runtags.h"
#include "store.h"
#include "textenc.h"

#define KEY_FILE_MAX 4096
#define PROMPT_FILE_MAX (256u << 10)
#define AGENT_THREAD_STACK (1u << 20)

const char agent_builtin_prompt[] =
	"You are a helpful assistant with a Linux room of your own: a persistent "
	"Debian sandbox that everyone in this conversation shares. To run a shell "
	"command in it, write the command between <run> and </run>, for example "
	"<run>ls -la</run>. Each command runs with /bin/sh -c as the room's root "
	"user, starting in /workspace; files and the shell's directory and "
	"variables are kept between commands. After your reply, the first 500 "
	"characters of each command's output are added to it as \"Output "
	"(command):\". Run commands when they help; keep each one short, and say "
	"in a sentence what you are doing.";

/* ---- configuration, read once at start ---- */

bool agent_enabled(const struct app *app)
{
	return app->cfg.llm_url[0] && app->cfg.llm_model[0];
}

/* A small file read whole, bounded; NULL with err set. */
static char *read_small_file(const char *what, const char *path, size_t max,
			     char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	struct stat st;
	char *buf = NULL;
	size_t got = 0;
	ssize_t n;

	if (fd < 0 || fstat(fd, &st) < 0) {
		snprintf(err, errlen, "%s %s: %s", what, path, strerror(errno));
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s %s: not a regular file", what, path);
		goto fail;
	}
	buf = malloc(max + 1);
	if (!buf) {
		snprintf(err, errlen, "%s %s: out of memory", what, path);
		goto fail;
	}
	while (got <= max && (n = read(fd, buf + got, max + 1 - got)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			snprintf(err, errlen, "%s %s: %s", what, path, strerror(errno));
			goto fail;
		}
		got += (size_t)n;
	}
	if (got > max) {
		snprintf(err, errlen, "%s %s: larger than %zu bytes", what, path, max);
		goto fail;
	}
	buf[got] = '\0';
	close(fd);
	return buf;
fail:
	if (buf)
		explicit_bzero(buf, max + 1);
	free(buf);
	if (fd >= 0)
		close(fd);
	return NULL;
}

/* The key: one line of printable ASCII (it goes into a header). */
static int load_key(struct app *app, char *err, size_t errlen)
{
	const char *path = app->cfg.llm_key_file;
	char *key = read_small_file("llm_key_file", path, KEY_FILE_MAX, err, errlen);
	size_t n;

	if (!key)
		return -1;
	n = strlen(key);
	while (n && (key[n - 1] == '\n' || key[n - 1] == '\r' || key[n - 1] == ' ' || key[n - 1] == '\t'))
		key[--n] = '\0';
	for (size_t i = 0; i < n; i++) {
		if ((unsigned char)key[i] <= ' ' || (unsigned char)key[i] >= 0x7f) {
			/* never quote the key, not even a piece of it */
			snprintf(err, errlen, "llm_key_file %s: the key must be one line "
				 "of printable characters without blanks", path);
			explicit_bzero(key, n);
			free(key);
			return -1;
		}
	}
	if (n == 0) {
		snprintf(err, errlen, "llm_key_file %s: empty", path);
		free(key);
		return -1;
	}
	app->llm_key = key;
	return 0;
}

int agent_init(struct app *app, char *err, size_t errlen)
{
	struct stat st;

	if (!agent_enabled(app))
		return 0;
	if (llm_init(err, errlen) < 0)
		return -1;
	if (app->cfg.llm_key_file[0]) {
		if (load_key(app, err, errlen) < 0)
			return -1;
		if (stat(app->cfg.llm_key_file, &st) == 0 && (st.st_mode & 0004))
			fprintf(stderr, "roombox-fcgi: warning: llm_key_file %s is world-readable "
				"(make it 0640 root:roombox)\n", app->cfg.llm_key_file);
	}
	if (app->cfg.llm_system_prompt_file[0]) {
		size_t len;
		char *p = read_small_file("llm_system_prompt_file", app->cfg.llm_system_prompt_file,
					  PROMPT_FILE_MAX, err, errlen);

		if (!p)
			return -1;
		/* the prompt goes into JSON: make it valid UTF-8 */
		app->llm_prompt = utf8_sanitize(p, strlen(p), &len);
		free(p);
	} else {
		app->llm_prompt = strdup(agent_builtin_prompt);
	}
	if (!app->llm_prompt) {
		snprintf(err, errlen, "agent: out of memory");
		return -1;
	}
	fprintf(stderr, "roombox-fcgi: agent: model %s at %s, %s, %s system prompt\n",
		app->cfg.llm_model, app->cfg.llm_url, app->llm_key ? "with a key" : "no key",
		app->cfg.llm_system_prompt_file[0] ? "own" : "built-in");
	return 0;
}

/* ---- one call, from the worker to its own thread ---- */

struct agent_job {
	struct app *app;
	struct request rq;            /* app and room, for run */
	runtags_exec_fn *run;         /* runs one command in the room (messages.c's) */
	json_object *message;         /* the stored user message */
	bool stream;                  /* Accept: text/event-stream */
	struct http_output out;
	bool headers_sent;            /* streaming: the 200 is out */
	bool client_gone;             /* a write failed: keep working, stop writing */
	struct timespec start;
	int rounds;
	char *outputs;                /* this round's sections, for the next round */
	size_t outputs_len;
	bool ran;                     /* a command ran in this round */
	int status;                   /* for the log */
	size_t commands;              /* this round's commands run (RUNTAGS_MAX) */
	const char *gone;             /* the room's reason, once given up (calls_lock) */
	bool storing;                 /* a message of it is being stored (calls_lock) */
	struct agent_job *next;       /* in calls (calls_lock) */
};

/* ---- calls in flight, by room ----
 *
 * A cleanup resets a room's messages, a move takes them to another host.
 * A reply still to come must then neither run its commands here (they
 * would make the room again) nor be stored here (a message in a room that
 * was cleaned up, or one the move left behind, removed with what it left,
 * after its 201).  So every call is listed from before its user message
 * is stored until it ends, and agent_room_gone() gives up the room's: it
 * marks them, then waits for any of their messages being stored to be
 * stored.  A message is stored only by a call not given up (checked under
 * calls_lock as it begins), so a reply is stored before the reset or the
 * export, or not at all.  The stores themselves run without the lock:
 * rooms never wait on one another's fsyncs. */
static pthread_mutex_t calls_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t calls_stored = PTHREAD_COND_INITIALIZER;
static struct agent_job *calls;

static void calls_add(struct agent_job *job)
{
	job->next = calls;
	calls = job;
}

static void calls_remove(struct agent_job *job)
{
	pthread_mutex_lock(&calls_lock);
	for (struct agent_job **at = &calls; *at; at = &(*at)->next)
		if (*at == job) {
			*at = job->next;
			break;
		}
	pthread_mutex_unlock(&calls_lock);
}

/* Is a message of a call of room given up still being stored (begun
 * before the give-up)?  Calls listed since are not waited for: a steady
 * stream of them must not hold a cleanup.  Under calls_lock. */
static bool room_storing(const char *room)
{
	for (struct agent_job *j = calls; j; j = j->next)
		if (j->gone && j->storing && strcmp(j->rq.room, room) == 0)
			return true;
	return false;
}

int agent_room_gone(const char *room, const char *why)
{
	int n = 0;
	pthread_mutex_lock(&calls_lock);
	for (struct agent_job *j = calls; j; j = j->next)
		if (!j->gone && strcmp(j->rq.room, room) == 0) {
			j->gone = why;
			n++;
		}
	while (room_storing(room))
		pthread_cond_wait(&calls_stored, &calls_lock);
	pthread_mutex_unlock(&calls_lock);
	if (n)
		fprintf(stderr, "roombox-fcgi: room %s: %s: %d model call%s given up\n", room, why, n,
			n == 1 ? "" : "s");
	return n;
}

int agent_room_calls(const char *room)
{
	int n = 0;
	pthread_mutex_lock(&calls_lock);
	for (struct agent_job *j = calls; j; j = j->next)
		n += strcmp(j->rq.room, room) == 0;
	pthread_mutex_unlock(&calls_lock);
	return n;
}

/* A message of job is to be stored: true, or false when its room was
 * given up (*gone says why). */
static bool store_begin(struct agent_job *job, const char **gone)
{
	pthread_mutex_lock(&calls_lock);
	*gone = job->gone;
	job->storing = !*gone;
	pthread_mutex_unlock(&calls_lock);
	return !*gone;
}

static void store_end(struct agent_job *job)
{
	pthread_mutex_lock(&calls_lock);
	job->storing = false;
	pthread_cond_broadcast(&calls_stored);
	pthread_mutex_unlock(&calls_lock);
}

static const char *job_gone(struct agent_job *job)
{
	pthread_mutex_lock(&calls_lock);
	const char *why = job->gone;
	pthread_mutex_unlock(&calls_lock);
	return why;
}

static bool slot_take(struct app *app)
{
	if (atomic_fetch_add(&app->agent_calls, 1) < AGENT_CALLS_MAX)
		return true;
	atomic_fetch_sub(&app->agent_calls, 1);
	return false;
}

static void job_free(struct agent_job *job)
{
	calls_remove(job);
	atomic_fetch_sub(&job->app->agent_calls, 1);
	json_object_put(job->message);
	free(job->outputs);
	free(job);
}

/* ---- writing the answer ---- */

static void out_write(struct agent_job *job, const char *s, size_t n)
{
	if (job->client_gone)
		return;
	if (job->out.write(job->out.ctx, s, n) < 0 || job->out.flush(job->out.ctx) < 0)
		job->client_gone = true;
}

static void answer_json(struct agent_job *job, struct response *rs)
{
	size_t len = 0;
	char *text = http_render(rs, &len);

	job->status = rs->status;
	if (text)
		out_write(job, text, len);
	free(text);
	json_object_put(rs->body);
	rs->body = NULL;
}

static void stream_start(struct agent_job *job)
{
	char head[192];
	int n = snprintf(head, sizeof(head), "Status: 200 OK\r\n"
			 "Content-Type: text/event-stream\r\n"
			 "Cache-Control: no-cache\r\n"
			 "X-Accel-Buffering: no\r\n"
			 "%s\r\n", http_host_header);

	if (job->headers_sent)
		return;
	job->headers_sent = true;
	job->status = 200;
	out_write(job, head, (size_t)n);
}

/* One "data: <json>\n\n" event; takes ev. */
static void stream_event(struct agent_job *job, json_object *ev)
{
	size_t len = 0;
	const char *json;
	char *frame;

	stream_start(job);
	json = json_write(ev, &len);
	if (json && asprintf(&frame, "data: %.*s\n\n", (int)len, json) >= 0) {
		out_write(job, frame, strlen(frame));
		free(frame);
	}
	json_object_put(ev);
}

static json_object *event_new(const char *type)
{
	json_object *ev = json_object_new_object();

	json_object_object_add(ev, "type", json_object_new_string(type));
	return ev;
}

/* A string field from bytes that must be valid UTF-8 in JSON. */
static void add_text(json_object *obj, const char *key, const char *s, size_t n)
{
	size_t len = 0;
	char *clean = utf8_sanitize(s, n, &len);

	json_object_object_add(obj, key, clean ? json_object_new_string_len(clean, (int)len)
					       : json_object_new_string(""));
	free(clean);
}

static void on_token(void *ctx, const char *s, size_t n)
{
	struct agent_job *job = ctx;
	json_object *ev;

	if (!job->stream)
		return;
	ev = event_new("token");
	add_text(ev, "data", s, n);
	stream_event(job, ev);
}

/* The model failed: 502 while nothing was streamed, else the last event. */
static void answer_model_failed(struct agent_job *job, const char *why)
{
	struct response rs = { .status = 502 };

	fprintf(stderr, "roombox-fcgi: room %s: agent: model request failed: %s\n",
		job->rq.room, why);
	if (job->headers_sent) {
		json_object *ev = event_new("error");
		char *msg;

		if (asprintf(&msg, "model request failed: %s", why) >= 0) {
			add_text(ev, "error", msg, strlen(msg));
			free(msg);
		}
		stream_event(job, ev);
		job->status = 502;
		return;
	}
	response_error(&rs, 502, "model request failed: %s", why);
	answer_json(job, &rs);
}

static void answer_failed(struct agent_job *job, int status, const char *why)
{
	struct response rs = { .status = status };

	fprintf(stderr, "roombox-fcgi: room %s: agent: %s\n", job->rq.room, why);
	if (job->headers_sent) {
		json_object *ev = event_new("error");

		json_object_object_add(ev, "error", json_object_new_string(why));
		stream_event(job, ev);
		job->status = status;
		return;
	}
	response_error(&rs, status, "%s", why);
	answer_json(job, &rs);
}

/* The room was cleaned up or moved while the model answered. */
static void answer_gone(struct agent_job *job, const char *why)
{
	char text[256];
	snprintf(text, sizeof(text), "room %s %s while the model answered: its reply is not kept",
		 job->rq.room, why);
	answer_failed(job, 409, text);
}

/* ---- the conversation sent to the model ---- */

static void add_message(json_object *list, const char *role, const char *content, size_t n)
{
	json_object *m = json_object_new_object();

	json_object_object_add(m, "role", json_object_new_string(role));
	json_object_object_add(m, "content", json_object_new_string_len(content, (int)n));
	json_object_array_add(list, m);
}

/* system, the last llm_history messages before ours, ours. */
static json_object *conversation(struct agent_job *job, char *err, size_t errlen)
{
	json_object *all = store_list(job->rq.room, err, errlen), *list, *v;
	const char *id = json_object_get_string(json_object_object_get(job->message, "id"));
	size_t n, mine, from;

	if (!all)
		return NULL;
	n = json_object_array_length(all);
	for (mine = n; mine > 0; mine--) {
		v = json_object_object_get(json_object_array_get_idx(all, mine - 1), "id");
		if (v && id && strcmp(json_object_get_string(v), id) == 0)
			break;
	}
	mine = mine ? mine - 1 : 0;   /* reset under us: no history */
	from = mine > (size_t)job->app->cfg.llm_history ? mine - (size_t)job->app->cfg.llm_history : 0;
	list = json_object_new_array();
	add_message(list, "system", job->app->llm_prompt, strlen(job->app->llm_prompt));
	for (size_t i = from; i < mine; i++) {
		json_object *m = json_object_array_get_idx(all, i), *role, *content;

		if (json_object_object_get_ex(m, "role", &role) &&
		    json_object_object_get_ex(m, "content", &content))
			add_message(list, json_object_get_string(role), json_object_get_string(content),
				    (size_t)json_object_get_string_len(content));
	}
	v = json_object_object_get(job->message, "content");
	add_message(list, "user", json_object_get_string(v), (size_t)json_object_get_string_len(v));
	json_object_put(all);
	return list;
}

/* ---- the reply's commands ---- */

static void outputs_add(struct agent_job *job, const char *s, size_t n)
{
	char *nb = realloc(job->outputs, job->outputs_len + n + 1);

	if (!nb)
		return;
	memcpy(nb + job->outputs_len, s, n);
	job->outputs_len += n;
	nb[job->outputs_len] = '\0';
	job->outputs = nb;
}

/* executeCommands' callback: run the command exactly as for an assistant
 * message, and show it (streaming) and keep its section (next round). */
static int run_tag(void *ctx, const char *cmd, size_t cmd_len, struct runtags_exec_result *res)
{
	struct agent_job *job = ctx;
	size_t summary_len = 0;
	char *summary;
	int rc;

	if (job->stream) {
		json_object *ev = event_new("run");

		add_text(ev, "cmd", cmd, cmd_len);
		stream_event(job, ev);
	}
	const char *gone = job_gone(job);
	if (gone || job->commands >= RUNTAGS_MAX) {
		/* not run: it would make the room again; or one too many */
		char text[160];
		if (gone)
			snprintf(text, sizeof(text), "room %s %s", job->rq.room, gone);
		else
			snprintf(text, sizeof(text), "not run: at most %d commands in one message",
				 RUNTAGS_MAX);
		res->error = strdup(text);
		res->error_len = res->error ? strlen(res->error) : 0;
		rc = -1;
	} else {
		job->commands++;
		rc = job->run(&job->rq, cmd, cmd_len, res);
		job->ran = true;   /* (a reply of a room given up asks for no next round) */
	}
	summary = runtags_summary(rc, res, &summary_len);
	if (!summary)
		return rc;
	if (job->stream) {
		json_object *ev = event_new("output");

		add_text(ev, "cmd", cmd, cmd_len);
		add_text(ev, "summary", summary, summary_len);
		stream_event(job, ev);
	}
	if (job->outputs_len)
		outputs_add(job, "\n\n", 2);
	outputs_add(job, rc == 0 ? "Output (" : "Error (", rc == 0 ? 8 : 7);
	outputs_add(job, cmd, cmd_len);
	outputs_add(job, "):\n", 3);
	outputs_add(job, summary, summary_len);
	free(summary);
	return rc;
}

/* ---- rounds ---- */

/* One round: the model's reply through executeCommands.  Returns the
 * processed text (malloc'd) and the model's own words in *raw, or NULL
 * after answering the failure. */
static char *round_run(struct agent_job *job, json_object *messages, char **raw, size_t *raw_len,
		       size_t *len)
{
	struct llm_call call = {
		.cfg = &job->app->cfg, .key = job->app->llm_key, .messages = messages,
		.stream = job->stream, .on_token = on_token, .ctx = job,
	};
	char err[1024];
	size_t n = 0;
	char *reply = llm_complete(&call, &n, err, sizeof(err)), *text;

	if (!reply) {
		answer_model_failed(job, err);
		return NULL;
	}
	/* the model's bytes become a message: valid UTF-8 from here on */
	*raw = utf8_sanitize(reply, n, raw_len);
	free(reply);
	if (!*raw) {
		answer_failed(job, 500, "out of memory");
		return NULL;
	}
	free(job->outputs);
	job->outputs = NULL;
	job->outputs_len = 0;
	job->ran = false;
	job->commands = 0;
	text = runtags_process(*raw, *raw_len, run_tag, job, len);
	if (!text) {
		free(*raw);
		*raw = NULL;
		answer_failed(job, 500, "out of memory");
	}
	return text;
}

/* Every round; the replies joined by a blank line.  NULL once answered. */
static char *rounds_run(struct agent_job *job, size_t *total)
{
	char err[512], *all = NULL;
	json_object *messages = conversation(job, err, sizeof(err));
	size_t len = 0;

	if (!messages) {
		answer_failed(job, 500, err);
		return NULL;
	}
	for (int round = 1;; round++) {
		size_t raw_len = 0, n = 0;
		char *raw = NULL, *text, *nb;
		const char *gone = job_gone(job);

		if (gone) {   /* not asked again for a reply that is not kept */
			free(all);
			all = NULL;
			answer_gone(job, gone);
			break;
		}

		job->rounds = round;
		text = round_run(job, messages, &raw, &raw_len, &n);
		if (!text) {
			free(all);
			all = NULL;
			break;
		}
		nb = realloc(all, len + 2 + n + 1);
		if (!nb) {
			free(text);
			free(raw);
			free(all);
			all = NULL;
			answer_failed(job, 500, "out of memory");
			break;
		}
		if (len && n) {
			memcpy(nb + len, "\n\n", 2);
			len += 2;
		}
		memcpy(nb + len, text, n);
		len += n;
		nb[len] = '\0';
		all = nb;
		free(text);
		if (!job->ran || round >= job->app->cfg.llm_rounds) {
			free(raw);
			break;
		}
		/* the model sees what it wrote and, as the next user turn, what
		 * its commands gave */
		add_message(messages, "assistant", raw, raw_len);
		add_message(messages, "user", job->outputs ? job->outputs : "", job->outputs_len);
		free(raw);
	}
	json_object_put(messages);
	*total = len;
	return all;
}

static void answer_reply(struct agent_job *job, json_object *reply)
{
	json_object *answer;

	if (job->stream) {
		answer = event_new("complete");
		json_object_object_add(answer, "message", json_object_get(job->message));
		json_object_object_add(answer, "reply", reply);
		stream_event(job, answer);
		return;
	}
	struct response rs = { .status = 201 };

	answer = json_object_new_object();
	json_object_object_add(answer, "message", json_object_get(job->message));
	json_object_object_add(answer, "reply", reply);
	response_json(&rs, 201, answer);
	answer_json(job, &rs);
}

static void log_done(struct agent_job *job)
{
	struct timespec end;

	clock_gettime(CLOCK_MONOTONIC, &end);
	if (job->app->log_requests)
		fprintf(stderr, "roombox-fcgi: POST /api/rooms/%s/messages %d %.1f ms "
			"(agent, %d round%s%s)\n", job->rq.room, job->status,
			(double)(end.tv_sec - job->start.tv_sec) * 1e3 +
			(double)(end.tv_nsec - job->start.tv_nsec) / 1e6,
			job->rounds, job->rounds == 1 ? "" : "s",
			job->client_gone ? ", client gone" : "");
}

static void *agent_main(void *arg)
{
	struct agent_job *job = arg;
	json_object *reply = NULL;
	char err[512];
	size_t len = 0;
	char *text = rounds_run(job, &len);
	const char *gone = NULL;
	int stored = 0;

	if (text && store_begin(job, &gone)) {
		stored = store_append(job->rq.room, "assistant", text, len, &reply, err, sizeof(err));
		store_end(job);
	}
	if (text && gone)
		answer_gone(job, gone);
	else if (text && stored < 0)
		answer_failed(job, stored == STORE_FULL ? 507 : 500, err);
	else if (text)
		answer_reply(job, reply);
	free(text);
	job->out.end(job->out.ctx);
	log_done(job);
	job_free(job);
	return NULL;
}

static void agent_later(void *arg, const struct http_output *out)
{
	struct agent_job *job = arg;
	pthread_attr_t attr;
	pthread_t t;
	int rc;

	if (!out) {
		job_free(job);
		return;
	}
	job->out = *out;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, AGENT_THREAD_STACK);
	rc = pthread_create(&t, &attr, agent_main, job);
	pthread_attr_destroy(&attr);
	if (rc != 0) {
		char why[192];
		struct response rs = { 0 };

		/* the message is stored: a 503's "retry" would store it twice */
		snprintf(why, sizeof(why), "agent: cannot start a thread: %s; the message is kept, "
			 "without a reply", strerror(rc));
		fprintf(stderr, "roombox-fcgi: room %s: %s\n", job->rq.room, why);
		response_error(&rs, 500, "%s", why);
		answer_json(job, &rs);
		job->out.end(job->out.ctx);
		job_free(job);
	}
}

static bool wants_event_stream(const struct request *rq)
{
	const char *accept = rq->in ? rq->in->param(rq->in->ctx, "HTTP_ACCEPT") : NULL;

	return accept && strstr(accept, "text/event-stream");
}

void agent_post(struct request *rq, struct response *rs, const char *content, size_t len,
		runtags_exec_fn *run)
{
	struct agent_job *job;
	json_object *message = NULL;
	char err[512];

	if (!slot_take(rq->app)) {
		rs->retry_after = 1;
		response_error(rs, 503, "too many model calls in flight (%d); try again",
			       AGENT_CALLS_MAX);
		return;
	}
	job = calloc(1, sizeof(*job));
	if (!job) {
		atomic_fetch_sub(&rq->app->agent_calls, 1);
		response_error(rs, 500, "out of memory");
		return;
	}
	job->app = rq->app;
	job->rq.app = rq->app;
	memcpy(job->rq.room, rq->room, sizeof(job->rq.room));
	job->run = run;
	job->stream = wants_event_stream(rq);
	clock_gettime(CLOCK_MONOTONIC, &job->start);
	pthread_mutex_lock(&calls_lock);
	calls_add(job);
	job->storing = true;   /* listed this moment: not given up yet */
	pthread_mutex_unlock(&calls_lock);
	int stored = store_append(rq->room, "user", content, len, &message, err, sizeof(err));
	store_end(job);
	if (stored < 0) {
		fprintf(stderr, "roombox-fcgi: %s\n", err);
		response_error(rs, stored == STORE_FULL ? 507 : 500, "%s", err);
		job_free(job);
		return;
	}
	job->message = message;
	rs->later = agent_later;
	rs->later_job = job;
}
