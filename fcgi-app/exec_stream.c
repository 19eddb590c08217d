/* An exec whose output roombox-fcgi reads as the command writes it
 * (SPEC §8.1's live output; files and processes build on it).
 *
 * roombox-fcgi makes three pipes and passes the command's ends to the
 * helper as its fds 3, 4 and 5 (common/protocol.h, "passed I/O"); the helper
 * hands them to the room's keeper, which gives them to the shell.  So the
 * bytes go from the command to this process with no one in between, and
 * the helper only waits for the shell to end.  Here one poll loop writes the
 * input, reads both streams (each kept up to output_limit for the final
 * result; past it read and dropped), tells the sink about each piece, and
 * ends when the helper has exited and the pipes are drained for at most
 * drain_ms.  Pipes that background processes still hold then go to the
 * drainer (drain.c), so those processes never die of SIGPIPE.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "drain.h"
#include "exec_stream.h"
#include "fdrecv.h"
#include "http.h"
#include "protocol.h"
#include "textenc.h"
#include "timefmt.h"

#define KEEPALIVE_MS 15000
#define FEED_MAX 65536

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
		 const char *data, size_t n, bool last)
{
	if (s->raw) {   /* all of it, as it is, kept nowhere */
		if (s->raw(sink->ctx, data, n) == 0)
			return;
		s->raw = NULL;   /* not the sink's: this and the rest are kept */
	}
	size_t keep = n;
	char joined[65536 + 4];
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
	if (base64) {
		emit(sink, s, data, keep, true);
		return;
	}
	memcpy(joined, s->pending, s->npending);
	jn = s->npending;
	memcpy(joined + jn, data, keep);
	jn += keep;
	tail = last ? 0 : utf8_incomplete_tail((const unsigned char *)joined, jn);
	emit(sink, s, joined, jn - tail, false);
	memcpy(s->pending, joined + jn - tail, tail);
	s->npending = tail;
}

/* Read what is there; false at end of file. */
static bool pull(struct out_stream *s, const struct exec_sink *sink, bool base64)
{
	char buf[65536];

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
		take(s, sink, base64, buf, (size_t)n, false);
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
	if (s->npending) {   /* what never completed: U+FFFD, as in 2.1 */
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

json_object *exec_stream_in_room(struct app *app, const char *room, const struct exec_request *ex,
				 struct exec_sink *sink, struct helper_error *err)
{
	struct helper_target target = app_helper(app);
	uint64_t timeout = ex->timeout_ms ? ex->timeout_ms : app->cfg.exec_timeout_ms;
	bool base64 = ex->has_encoding && ex->encoding == EXEC_ENCODING_BASE64;
	int in[2] = { -1, -1 }, out[2] = { -1, -1 }, errp[2] = { -1, -1 };
	struct out_stream so = { .fd = -1, .name = "stdout", .limit = app->cfg.output_limit };
	struct out_stream se = { .fd = -1, .name = "stderr", .limit = app->cfg.output_limit };
	struct helper_run *run;
	struct helper_exec x = exec_helper_exec(ex);   /* we write stdin into the pipe */
	struct helper_exec_ans ans;
	json_object *result = NULL;
	size_t in_off = 0, feed_len = 0;
	char *feed = NULL;   /* a piece of sink->input on its way to the pipe */

	memset(err, 0, sizeof(*err));
	if (!exec_slot_take(app)) {
		err->http_status = 503;
		snprintf(err->code, sizeof(err->code), "busy");
		snprintf(err->message, sizeof(err->message), "too many concurrent execs");
		return NULL;
	}
	bool file_socket = sink->stdout_file != NULL;

	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0 ||
	    (file_socket ? socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, out)
	     : pipe2(out, O_CLOEXEC)) < 0) {
		err->http_status = 500;
		snprintf(err->message, sizeof(err->message), "pipe: %s", strerror(errno));
		goto out;
	}
	if (file_socket)   /* the room writes into it, roombox-fcgi only reads */
		shutdown(out[0], SHUT_WR);
	int pass[3] = { in[0], out[1], errp[1] };
	x.tool = sink->tool;   /* a tool in place of the command */
	x.existing = sink->existing;
	run = helper_exec_start(&target, room, &x, (long)(timeout + app->cfg.drain_ms) + HELPER_EXEC_GRACE_MS,
				pass, err);
	close_fd(&in[0]);
	close_fd(&out[1]);
	close_fd(&errp[1]);
	if (!run)
		goto out;
	sink->started = true;
	if (sink->start)
		sink->start(sink->ctx, ex);
	so.fd = out[0];
	so.raw = sink->stdout_raw;
	so.want_fd = file_socket;
	se.fd = errp[0];
	out[0] = errp[0] = -1;
	fcntl(so.fd, F_SETFL, O_NONBLOCK);
	fcntl(se.fd, F_SETFL, O_NONBLOCK);
	fcntl(in[1], F_SETFL, O_NONBLOCK);
	if (sink->input) {   /* the input comes from the sink, in pieces */
		feed = malloc(FEED_MAX);
		if (!feed)
			close_fd(&in[1]);
	} else if (!ex->stdin_data || !ex->stdin_len) {
		close_fd(&in[1]);
	}

	/* until the helper exits, then drain_ms for what is already written */
	long quiet_since = monotonic_ms(), drain_until = -1;
	for (;;) {
		struct pollfd p[4];
		int n = 0, i_out = -1, i_err = -1, i_in = -1, i_run = -1;
		long now = monotonic_ms(), wait;

		if (drain_until >= 0 && (now >= drain_until || (so.fd < 0 && se.fd < 0)))
			break;
		if (so.fd >= 0)
			p[i_out = n++] = (struct pollfd){ so.fd, POLLIN, 0 };
		if (se.fd >= 0)
			p[i_err = n++] = (struct pollfd){ se.fd, POLLIN, 0 };
		if (in[1] >= 0 && drain_until < 0)
			p[i_in = n++] = (struct pollfd){ in[1], POLLOUT, 0 };
		if (drain_until < 0)
			p[i_run = n++] = (struct pollfd){ helper_run_pidfd(run), POLLIN, 0 };
		wait = drain_until >= 0 ? drain_until - now : quiet_since + KEEPALIVE_MS - now;
		if (poll(p, (nfds_t)n, wait < 0 ? 0 : (int)wait) < 0 && errno != EINTR)
			break;
		now = monotonic_ms();
		if (i_out >= 0 && p[i_out].revents && !pull(&so, sink, base64))
			close_fd(&so.fd);
		if (i_err >= 0 && p[i_err].revents && !pull(&se, sink, base64))
			close_fd(&se.fd);
		if ((i_out >= 0 && p[i_out].revents) || (i_err >= 0 && p[i_err].revents))
			quiet_since = now;
		if (i_in >= 0 && p[i_in].revents && feed) {
			if (in_off == feed_len) {
				ssize_t got = sink->input(sink->ctx, feed, FEED_MAX);

				in_off = 0;
				feed_len = got > 0 ? (size_t)got : 0;
				if (got <= 0)
					close_fd(&in[1]);   /* the end, or the client's failure */
			}
			if (in[1] >= 0) {
				ssize_t k = write(in[1], feed + in_off, feed_len - in_off);

				if (k > 0)
					in_off += (size_t)k;
				else if (errno != EAGAIN && errno != EINTR)
					close_fd(&in[1]);
			}
		} else if (i_in >= 0 && p[i_in].revents) {
			ssize_t k = write(in[1], ex->stdin_data + in_off, ex->stdin_len - in_off);

			if (k > 0)
				in_off += (size_t)k;
			if ((k < 0 && errno != EAGAIN && errno != EINTR) || in_off == ex->stdin_len)
				close_fd(&in[1]);
		}
		if (i_run >= 0 && p[i_run].revents) {
			close_fd(&in[1]);
			drain_until = now + (long)app->cfg.drain_ms;
		}
		if (drain_until < 0 && now - quiet_since >= KEEPALIVE_MS) {
			if (sink->keepalive)
				sink->keepalive(sink->ctx);
			quiet_since = now;
		}
	}
	stream_end(&so, sink, base64);
	stream_end(&se, sink, base64);
	/* background processes still hold the output: keep it flowing */
	if (so.fd >= 0)
		drain_add(so.fd);
	if (se.fd >= 0)
		drain_add(se.fd);
	so.fd = se.fd = -1;
	close_fd(&in[1]);
	if (helper_exec_finish(run, &ans, err) == 0) {
		struct exec_output o = { true, so.buf, se.buf, so.len, se.len, so.cut, se.cut };

		result = exec_result_make(&ans, &o, 0, ex, err->message, sizeof(err->message));
		if (!result)
			err->http_status = 500;
	}
out:
	close_fd(&in[0]);
	close_fd(&in[1]);
	close_fd(&out[0]);
	close_fd(&out[1]);
	close_fd(&errp[0]);
	close_fd(&errp[1]);
	close_fd(&so.fd);
	close_fd(&se.fd);
	free(so.buf);
	free(se.buf);
	free(feed);
	exec_slot_give(app);
	if (!result && err->http_status != 404)   /* not a 404: no room is not a fault */
		fprintf(stderr, "roombox-fcgi: room %s: exec (streamed): %s\n", room, err->message);
	return result;
}

/* ---- POST …/sandbox/exec with Accept: text/event-stream (SPEC §8.1) ---- */

struct sse {
	const struct http_output *out;
	bool gone;                /* the client went away: the command runs on */
	const char *request_id;
};

static void sse_write(struct sse *s, const char *text, size_t n)
{
	if (!s->gone && (s->out->write(s->out->ctx, text, n) < 0 || s->out->flush(s->out->ctx) < 0))
		s->gone = true;
}

static int sse_event(void *ctx, json_object *ev)
{
	struct sse *s = ctx;
	size_t len = 0;
	const char *json = json_write(ev, &len);
	char *frame = json ? malloc(len + 8) : NULL;

	if (!frame)
		return -1;
	memcpy(frame, "data: ", 6);
	memcpy(frame + 6, json, len);
	memcpy(frame + 6 + len, "\n\n", 2);
	sse_write(s, frame, len + 8);
	free(frame);
	return s->gone ? -1 : 0;
}

static void sse_keepalive(void *ctx)
{
	sse_write(ctx, ": keep-alive\n\n", 14);
}

/* The 200 and the start event, once the helper runs the command: what
 * fails before that is an ordinary JSON error. */
static void sse_start(void *ctx, const struct exec_request *ex)
{
	struct sse *s = ctx;
	struct timespec now;
	char stamp[40], head[256];
	json_object *ev = json_object_new_object();
	int n = snprintf(head, sizeof(head), "Status: 200 OK\r\n"
			 "Content-Type: text/event-stream\r\n"
			 "Cache-Control: no-cache\r\n"
			 "X-Accel-Buffering: no\r\n"
			 "%s%s%s\r\n", s->request_id[0] ? "X-Request-Id: " : "", s->request_id,
			 s->request_id[0] ? "\r\n" : "");

	sse_write(ctx, head, (size_t)n);
	clock_gettime(CLOCK_REALTIME, &now);
	iso8601_utc(&now, stamp, sizeof(stamp));
	json_object_object_add(ev, "type", json_object_new_string("start"));
	json_object_object_add(ev, "command", json_object_new_string_len(ex->cmd, (int)ex->cmd_len));
	json_object_object_add(ev, "timestamp", json_object_new_string(stamp));
	sse_event(ctx, ev);
	json_object_put(ev);
}

bool exec_wants_stream(const struct request *rq)
{
	const char *accept = rq->in ? rq->in->param(rq->in->ctx, "HTTP_ACCEPT") : NULL;

	return accept && rq->in->out && strstr(accept, "text/event-stream");
}

void exec_sse(struct request *rq, struct response *rs, const struct exec_request *ex)
{
	struct sse s = { rq->in->out, false, rs->request_id };
	struct exec_sink sink = { .ctx = &s, .event = sse_event, .keepalive = sse_keepalive,
				  .start = sse_start };
	struct helper_error err;
	json_object *result, *ev;

	result = exec_stream_in_room(rq->app, rq->room, ex, &sink, &err);
	if (!sink.started) {   /* nothing sent yet: the usual JSON error */
		exec_answer_error(rs, &err);
		json_object_put(result);
		return;
	}
	ev = json_object_new_object();
	if (result) {
		json_object_object_add(ev, "type", json_object_new_string("complete"));
		json_object_object_add(ev, "result", result);
	} else {
		char msg[1200];

		snprintf(msg, sizeof(msg), "sandbox execution failed: %s", err.message);
		json_object_object_add(ev, "type", json_object_new_string("error"));
		json_object_object_add(ev, "error", json_object_new_string(msg));
	}
	sse_event(&s, ev);
	json_object_put(ev);
	rs->status = 200;
	rs->streamed = true;
}
