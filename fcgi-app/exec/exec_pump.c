/* The one way roombox-fcgi runs something in a room: with its own pipes.
 *
 * roombox-fcgi makes three pipes (two when the command has no input: it
 * reads /dev/null, no_input) and passes the command's ends to the helper
 * as its fds 3, 4 and 5 (common/protocol.h, "passed I/O"); the helper
 * hands them to the room's keeper, which gives them to the shell.  So the
 * bytes go from the command to this process with no one in between -- a
 * room's output never passes through the setuid helper -- and the helper
 * only waits for the shell to end and answers with the facts.
 *
 * Once a room runs, its plain commands (not a tool, streamed input or a
 * file on stdout) go the same way over the room's exec channel instead of
 * through a helper (exec_channels.c): the keeper gets the same pipes, and
 * its answer takes the helper's exit's place.  What the channel could not
 * run goes to the helper, on fresh pipes, as the same attempt.
 *
 * An exec is three steps: setup (the pipes, the helper started), the pump
 * (one poll loop that writes the input, reads both streams -- each kept up
 * to output_limit for the result, past it read and dropped -- and tells
 * the sink about each piece), and finish (the helper reaped, the result
 * made).  The pump ends when the helper has exited and the pipes are
 * drained for at most drain_ms; pipes that background processes still
 * hold then go to the drainer (drain.c), so those processes never die of
 * SIGPIPE and the answer never waits for them.  The plain exec's sink
 * takes nothing but the result; the event stream's (exec_stream.c) shows
 * each piece live.
 *
 * A shell that could not fork at the room's process limit says so in its
 * output (dash: "sh: <line>: Cannot fork") and exits 2.  Only this process
 * sees that output, so it is the one that frees the room (kill-all, as
 * DELETE …/processes) and runs the command again, once, on fresh pipes: the
 * result holds the second run's output alone.  (A shell the keeper could
 * not even fork is the helper's to retry: nothing was written then.)
 *
 * A download (files.c) has the keeper's get tool open the file in the
 * room: the file's descriptor then comes on the stdout socket with the
 * first bytes, and only there (nothing sent later is looked at).
 *
 * Text events never split a UTF-8 character: an incomplete sequence at the
 * end of a read waits for the next one (or the end). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "drain.h"
#include "exec_channels.h"
#include "exec_pump.h"
#include "fdrecv.h"
#include "http.h"
#include "protocol.h"

#define KEEPALIVE_MS 15000
#define FEED_MAX 65536
#define READ_MAX 65536

/* ---- slots and the helper's request ------------------------------------- */

/* max_concurrent_execs: a slot is taken before the helper is spawned and
 * given back when it has answered.  <= 0 means no limit. */
bool exec_slot_take(struct app *app)
{
	int max = app->cfg.max_concurrent_execs;

	if (max <= 0)
		return true;
	if (atomic_fetch_add(&app->execs_running, 1) < max)
		return true;
	atomic_fetch_sub(&app->execs_running, 1);
	return false;
}

void exec_slot_give(struct app *app)
{
	if (app->cfg.max_concurrent_execs > 0)
		atomic_fetch_sub(&app->execs_running, 1);
}

struct helper_exec exec_helper_exec(const struct exec_request *ex)
{
	return (struct helper_exec){
		.cmd = ex->cmd, .cmd_len = ex->cmd_len, .cwd = ex->cwd, .env = ex->env,
		.timeout_ms = ex->timeout_ms, .user = ex->user,   /* NULL: exec_user */
		.timeout_cap = ex->timeout_cap,
	};
}

void exec_answer_error(struct response *rs, const struct helper_error *err)
{
	switch (err->http_status) {
	case 400:
		response_error(rs, 400, "%s", err->message);
		break;
	case 503:
		rs->retry_after = 1;
		response_error(rs, 503, "too many concurrent execs");
		break;
	case 429:
		response_error(rs, 429, "room limit reached");
		break;
	case 413:
		response_error(rs, 413, "request body too large");
		break;
	case 507:   /* the message names the room and the figures */
		response_error(rs, 507, "%s", err->message);
		break;
	default:
		response_error(rs, 500, "sandbox execution failed: %s", err->message);
	}
}

/* ---- the output's two streams ------------------------------------------- */

struct out_stream {
	int fd;                  /* our read end, -1 once at its end */
	const char *name;        /* "stdout" / "stderr" */
	char *buf;               /* what the result keeps, up to the limit */
	size_t len, cap, limit;
	bool cut;
	char pending[4];         /* an incomplete UTF-8 sequence */
	size_t npending;
	int (*raw)(void *ctx, const char *data, size_t n);   /* see exec_sink */
	bool want_fd;            /* a socket whose first bytes may carry a file */
};

/* Bytes at the end of p[0..n) that begin a UTF-8 character not complete
 * yet (0 to 3). */
size_t utf8_incomplete_tail(const unsigned char *p, size_t n)
{
	for (size_t back = 1; back <= 3 && back <= n; back++) {
		unsigned char c = p[n - back];
		size_t need;

		if ((c & 0xc0) == 0x80)
			continue;            /* a continuation byte: look further */
		need = c >= 0xf0 && c < 0xf8 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
		return need > back ? back : 0;
	}
	return 0;
}

static int emit(const struct exec_sink *sink, const struct out_stream *s, const char *data,
		size_t len, bool base64)
{
	json_object *ev, *v;
	int rc;

	if (!len)
		return 0;
	v = exec_stream(data, len, base64);
	if (!v)
		return -1;
	ev = json_object_new_object();
	json_object_object_add(ev, "type", json_object_new_string(s->name));
	json_object_object_add(ev, "data", v);
	rc = sink->event(sink->ctx, ev);
	json_object_put(ev);
	return rc;
}

/* Keep what the result may hold; give the sink what it may show. */
static void take(struct out_stream *s, const struct exec_sink *sink, bool base64,
		 const char *data, size_t n)
{
	if (s->raw) {   /* all of it, as it is, kept nowhere */
		if (s->raw(sink->ctx, data, n) == 0)
			return;
		s->raw = NULL;   /* not the sink's: this and the rest are kept */
	}
	size_t keep = n;
	char joined[READ_MAX + 4];
	size_t jn = 0, tail;

	if (s->len + keep > s->limit) {
		keep = s->limit - s->len;
		s->cut = true;
	}
	if (keep) {
		if (s->len + keep > s->cap) {
			size_t cap = s->cap ? s->cap : 65536;
			char *b;

			while (cap < s->len + keep)
				cap *= 2;
			b = realloc(s->buf, cap);
			if (!b)
				return;
			s->buf = b;
			s->cap = cap;
		}
		memcpy(s->buf + s->len, data, keep);
		s->len += keep;
	}
	if (!sink->event)
		return;
	if (base64) {
		emit(sink, s, data, keep, true);
		return;
	}
	memcpy(joined, s->pending, s->npending);
	jn = s->npending;
	memcpy(joined + jn, data, keep);
	jn += keep;
	tail = utf8_incomplete_tail((const unsigned char *)joined, jn);
	emit(sink, s, joined, jn - tail, false);
	memcpy(s->pending, joined + jn - tail, tail);
	s->npending = tail;
}

/* Read what is there; false at end of file. */
static bool pull(struct out_stream *s, const struct exec_sink *sink, bool base64)
{
	char buf[READ_MAX];

	for (;;) {
		int file = -1, nfile = 0;
		ssize_t n = s->want_fd ? recv_with_fds(s->fd, buf, sizeof(buf), 0, &file, 1, &nfile)
				       : read(s->fd, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EAGAIN;
		s->want_fd = false;
		if (n == 0) {
			if (file >= 0)
				close(file);
			return false;
		}
		take(s, sink, base64, buf, (size_t)n);
		if (file >= 0) {
			sink->stdout_file(sink->ctx, file);
			close(file);
		}
		if ((size_t)n < sizeof(buf))
			return true;
	}
}

static void stream_end(struct out_stream *s, const struct exec_sink *sink, bool base64)
{
	if (s->npending && sink->event) {   /* what never completed: U+FFFD, as in 2.1 */
		char rest[4];
		size_t n = s->npending;

		memcpy(rest, s->pending, n);
		s->npending = 0;
		emit(sink, s, rest, n, base64);
	}
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* ---- one run: setup, pump, finish ----------------------------------------- */

struct pump {
	struct app *app;
	const struct exec_request *ex;
	struct exec_sink *sink;
	bool base64;
	struct helper_run *run;
	struct chan_run *chan;   /* instead of run: over the room's exec channel */
	bool elsewhere;          /* the channel did not run it: the helper will */
	int in;                  /* our end of the command's stdin, -1 once closed */
	struct out_stream so, se;
	char *feed;              /* a piece of sink->input on its way to the pipe */
	size_t in_off, feed_len;
};

static void pump_free(struct pump *p)
{
	close_fd(&p->in);
	close_fd(&p->so.fd);
	close_fd(&p->se.fd);
	free(p->so.buf);
	free(p->se.buf);
	free(p->feed);
	p->so.buf = p->se.buf = p->feed = NULL;
}

/* A command given no input reads /dev/null: one descriptor for every
 * such exec, opened at the first.  An empty pipe whose write end is closed
 * at once reads the same end of file, but costs a pipe made, passed and
 * closed on every exec.  (Never a shared pipe: a room can reopen a pipe
 * for writing through /proc/self/fd, and so write into another exec's
 * stdin.) */
static int no_input(void)
{
	static _Atomic int fd = -1;
	int f = atomic_load(&fd);

	if (f >= 0)
		return f;
	f = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (f < 0)
		return -1;
	int none = -1;
	if (!atomic_compare_exchange_strong(&fd, &none, f)) {
		close(f);       /* another thread's came first */
		return none;
	}
	return f;
}

/* The pipes, and the helper started with their far ends; false with err
 * set (nothing started). */
static bool pump_setup(struct pump *p, const char *room, bool via_channel, struct helper_error *err)
{
	struct helper_target target = app_helper(p->app);
	const struct exec_request *ex = p->ex;
	struct exec_sink *sink = p->sink;
	uint64_t timeout = ex->timeout_ms ? ex->timeout_ms : p->app->cfg.exec_timeout_ms;
	int in[2] = { -1, -1 }, out[2] = { -1, -1 }, errp[2] = { -1, -1 };
	bool file_socket = sink->stdout_file != NULL;
	struct helper_exec x = exec_helper_exec(ex);

	p->in = p->so.fd = p->se.fd = -1;
	p->so = (struct out_stream){ .fd = -1, .name = "stdout", .limit = p->app->cfg.output_limit };
	p->se = (struct out_stream){ .fd = -1, .name = "stderr", .limit = p->app->cfg.output_limit };
	/* the command's stdin: what the request or the sink gives, else
	 * nothing at all */
	bool input = sink->input || sink->stdin_until || (ex->stdin_data && ex->stdin_len);
	int null_in = input ? -1 : no_input();

	if ((null_in < 0 && pipe2(in, O_CLOEXEC) < 0) || pipe2(errp, O_CLOEXEC) < 0 ||
	    (file_socket ? socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, out)
	     : pipe2(out, O_CLOEXEC)) < 0) {
		err->http_status = 500;
		snprintf(err->message, sizeof(err->message), "pipe: %s", strerror(errno));
		for (int i = 0; i < 2; i++) {
			close_fd(&in[i]);
			close_fd(&out[i]);
			close_fd(&errp[i]);
		}
		return false;
	}
	if (file_socket)   /* the room writes into it, roombox-fcgi only reads */
		shutdown(out[0], SHUT_WR);
	int pass[3] = { null_in >= 0 ? null_in : in[0], out[1], errp[1] };
	x.tool = sink->tool;   /* a tool in place of the command */
	x.existing = sink->existing;
	x.running_only = sink->running_only;
	if (via_channel)
		p->chan = exec_channel_start(p->app, room, ex, pass);
	if (!p->chan)
		p->run = helper_exec_start(&target, room, &x,
					   (long)(timeout + p->app->cfg.drain_ms) + HELPER_EXEC_GRACE_MS, pass, err);
	close_fd(&in[0]);
	close_fd(&out[1]);
	close_fd(&errp[1]);
	p->in = in[1];
	p->so.fd = out[0];
	p->se.fd = errp[0];
	if (!p->run && !p->chan) {
		pump_free(p);
		return false;
	}
	p->so.raw = sink->stdout_raw;
	p->so.want_fd = file_socket;
	fcntl(p->so.fd, F_SETFL, O_NONBLOCK);
	fcntl(p->se.fd, F_SETFL, O_NONBLOCK);
	if (sink->input) {   /* the input comes from the sink, in pieces */
		p->feed = malloc(FEED_MAX);
		if (!p->feed)
			close_fd(&p->in);
	} else if (sink->stdin_until) {
		/* kept open, nothing written, until the sink says */
	} else if (!input) {
		close_fd(&p->in);   /* the command reads end of file */
	}
	if (p->in >= 0)
		fcntl(p->in, F_SETFL, O_NONBLOCK);
	return true;
}

/* The command's stdin can take more: the next bytes of the request's
 * stdin, or of the sink's input. */
static void pump_feed(struct pump *p)
{
	if (p->feed) {
		if (p->in_off == p->feed_len) {
			ssize_t got = p->sink->input(p->sink->ctx, p->feed, FEED_MAX);

			p->in_off = 0;
			p->feed_len = got > 0 ? (size_t)got : 0;
			if (got <= 0) {
				close_fd(&p->in);   /* the end, or the client's failure */
				return;
			}
		}
		ssize_t k = write(p->in, p->feed + p->in_off, p->feed_len - p->in_off);

		if (k > 0)
			p->in_off += (size_t)k;
		else if (errno != EAGAIN && errno != EINTR)
			close_fd(&p->in);
		return;
	}
	ssize_t k = write(p->in, p->ex->stdin_data + p->in_off, p->ex->stdin_len - p->in_off);

	if (k > 0)
		p->in_off += (size_t)k;
	if ((k < 0 && errno != EAGAIN && errno != EINTR) || p->in_off == p->ex->stdin_len)
		close_fd(&p->in);
}

/* Until the helper exits, then drain_ms for what is already written. */
static void pump_run(struct pump *p)
{
	long quiet_since = monotonic_ms(), drain_until = -1;

	for (;;) {
		struct pollfd pf[4];
		int n = 0, i_out = -1, i_err = -1, i_in = -1, i_run = -1;
		long now = monotonic_ms(), wait;

		if (drain_until >= 0 && (now >= drain_until || (p->so.fd < 0 && p->se.fd < 0)))
			break;
		if (p->so.fd >= 0)
			pf[i_out = n++] = (struct pollfd){ p->so.fd, POLLIN, 0 };
		if (p->se.fd >= 0)
			pf[i_err = n++] = (struct pollfd){ p->se.fd, POLLIN, 0 };
		if (p->in >= 0 && drain_until < 0 && p->sink->stdin_until && p->sink->stdin_until(p->sink->ctx))
			close_fd(&p->in);
		if (p->in >= 0 && drain_until < 0 && !p->sink->stdin_until)
			pf[i_in = n++] = (struct pollfd){ p->in, POLLOUT, 0 };
		if (drain_until < 0)
			pf[i_run = n++] = (struct pollfd){ p->chan ? exec_channel_fd(p->chan)
							   : helper_run_pidfd(p->run), POLLIN, 0 };
		wait = drain_until >= 0 ? drain_until - now : quiet_since + KEEPALIVE_MS - now;
		if (p->sink->stdin_until && p->in >= 0 && wait > STDIN_UNTIL_POLL_MS)
			wait = STDIN_UNTIL_POLL_MS;
		if (p->chan && drain_until < 0) {   /* a hung keeper: given up at its deadline */
			long left = exec_channel_deadline(p->chan) - now;
			if (left <= 0) {
				close_fd(&p->in);
				drain_until = now + (long)p->app->cfg.drain_ms;
				continue;
			}
			if (left < wait)
				wait = left;
		}
		if (poll(pf, (nfds_t)n, wait < 0 ? 0 : (int)wait) < 0 && errno != EINTR)
			break;
		now = monotonic_ms();
		if (i_out >= 0 && pf[i_out].revents && !pull(&p->so, p->sink, p->base64))
			close_fd(&p->so.fd);
		if (i_err >= 0 && pf[i_err].revents && !pull(&p->se, p->sink, p->base64))
			close_fd(&p->se.fd);
		if ((i_out >= 0 && pf[i_out].revents) || (i_err >= 0 && pf[i_err].revents))
			quiet_since = now;
		if (i_in >= 0 && pf[i_in].revents)
			pump_feed(p);
		if (i_run >= 0 && pf[i_run].revents) {
			close_fd(&p->in);
			drain_until = now + (long)p->app->cfg.drain_ms;
		}
		if (drain_until < 0 && now - quiet_since >= KEEPALIVE_MS) {
			if (p->sink->keepalive)
				p->sink->keepalive(p->sink->ctx);
			quiet_since = now;
		}
	}
	stream_end(&p->so, p->sink, p->base64);
	stream_end(&p->se, p->sink, p->base64);
	/* background processes still hold the output: keep it flowing, and
	 * answer now */
	if (p->so.fd >= 0)
		drain_add(p->so.fd);
	if (p->se.fd >= 0)
		drain_add(p->se.fd);
	p->so.fd = p->se.fd = -1;
	close_fd(&p->in);
}

/* The helper reaped (or the channel's answer read) and the answer made
 * the result; NULL with err set, or with p->elsewhere (the helper is to
 * run it). */
static json_object *pump_finish(struct pump *p, const char *room, struct helper_error *err)
{
	struct helper_exec_ans ans;
	json_object *result = NULL;
	int rc;

	if (p->chan) {
		rc = exec_channel_finish(p->chan, &ans, err);
		p->chan = NULL;
		p->elsewhere = rc == EXEC_CHANNEL_ELSEWHERE;
		if (p->elsewhere)
			return NULL;
	} else {
		rc = helper_exec_finish(p->run, &ans, err);
		p->run = NULL;
		if (rc == 0)
			exec_channel_warm(room);   /* it runs: the next exec may take a channel */
	}
	if (rc == 0) {
		struct exec_output o = { p->so.buf, p->se.buf, p->so.len, p->se.len,
					 p->so.cut, p->se.cut };

		result = exec_result_make(&ans, &o, p->ex, err->message, sizeof(err->message));
		if (!result) {
			err->http_status = 500;
			snprintf(err->code, sizeof(err->code), "reply");
		}
	}
	return result;
}

/* ---- a room at its process limit ------------------------------------------ */

/* dash's words when fork() fails: "sh: <line>: [<cmd>: ]Cannot fork" */
static bool said_cannot_fork(const struct out_stream *s)
{
	static const char msg[] = ": Cannot fork\n";

	return s->buf && memmem(s->buf, s->len, msg, sizeof(msg) - 1);
}

/* The shell exited 2 and said it could not fork: free the room as
 * DELETE …/processes does.  True when the command is to run again. */
static bool free_room_at_limit(struct pump *p, const char *room, json_object *result)
{
	json_object *code, *timed_out;
	struct helper_error err;

	if (p->app->cfg.pids_limit <= 0 || p->sink->tool || p->sink->input ||
	    !json_object_object_get_ex(result, "exitCode", &code) || json_object_get_int(code) != 2 ||
	    !json_object_object_get_ex(result, "timedOut", &timed_out) ||
	    json_object_get_boolean(timed_out) || !(said_cannot_fork(&p->so) || said_cannot_fork(&p->se)))
		return false;

	struct helper_target target = app_helper(p->app);
	uint32_t killed;

	/* the words are the room's own output: the helper kills only if the
	 * room's pids cgroup agrees it hit its limit */
	if (helper_kill_all(&target, room, HELPER_KILL_AT_LIMIT, &killed, &err) < 0) {
		fprintf(stderr, "roombox-fcgi: room %s: at its process limit (the shell could not fork), "
			"kill-all failed: %s\n", room, err.message);
		return false;
	}
	if (killed == 0)
		return false;     /* not the limit (or nothing left to kill): the answer stands */
	fprintf(stderr, "roombox-fcgi: room %s: at its process limit (pids_limit %d, the shell could "
		"not fork): killed %d processes, running the exec again\n", room,
		p->app->cfg.pids_limit, (int)killed);
	return true;
}

json_object *exec_pump_in_room(struct app *app, const char *room, const struct exec_request *ex,
			       struct exec_sink *sink, struct helper_error *err)
{
	bool base64 = ex->has_encoding && ex->encoding == EXEC_ENCODING_BASE64;
	struct exec_request again;
	json_object *result = NULL;
	long t0 = monotonic_ms();

	memset(err, 0, sizeof(*err));
	if (!exec_slot_take(app)) {
		err->http_status = 503;
		snprintf(err->code, sizeof(err->code), "busy");
		snprintf(err->message, sizeof(err->message), "too many concurrent execs");
		return NULL;
	}
	/* a channel takes a plain command; a tool, streamed input or a file
	 * on stdout is the helper's */
	bool via_channel = !sink->tool && !sink->input && !sink->stdin_until && !sink->stdout_file;

	for (int attempt = 0; attempt < 2; attempt++) {
		struct pump p = { .app = app, .ex = ex, .sink = sink, .base64 = base64 };

		if (!pump_setup(&p, room, via_channel, err))
			break;
		if (!sink->started) {
			sink->started = true;
			if (sink->start)
				sink->start(sink->ctx, ex);
		}
		pump_run(&p);
		result = pump_finish(&p, room, err);
		if (p.elsewhere) {   /* nothing ran: the same attempt, through the helper */
			pump_free(&p);
			via_channel = false;
			attempt--;
			continue;
		}
		bool rerun = attempt == 0 && result && free_room_at_limit(&p, room, result);

		pump_free(&p);
		if (!rerun)
			break;
		json_object_put(result);
		result = NULL;
		/* the request's timeout is for the whole request: the second run
		 * gets what the first left of it (a second at least) */
		uint64_t timeout = ex->timeout_ms ? ex->timeout_ms : app->cfg.exec_timeout_ms;
		uint64_t spent = (uint64_t)(monotonic_ms() - t0);

		again = *ex;
		again.timeout_ms = spent + 1000 < timeout ? timeout - spent : 1000;
		/* no timeout asked: the default was cut to the room's own
		 * execTimeoutMax, and so must what is left of it be */
		again.timeout_cap = ex->timeout_ms == 0;
		ex = &again;
	}
	exec_slot_give(app);
	if (!result && err->http_status != 404)   /* not a 404: no room is not a fault */
		fprintf(stderr, "roombox-fcgi: room %s: exec: %s\n", room, err->message);
	return result;
}
