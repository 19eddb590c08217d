/* POST …/sandbox/exec with Accept: text/event-stream: the
 * command's output as it comes.
 *
 * The command runs as every command does (exec_pump.c); this is the sink
 * that turns each piece into an event: the 200 and a start event once the
 * helper has the command (what fails before that is an ordinary JSON
 * error), stdout/stderr events, keep-alive comments through quiet spells,
 * and a complete (or error) event with the result at the end.  A client
 * that goes away leaves the command running to its end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec_pump.h"
#include "exec_stream.h"
#include "http.h"
#include "timefmt.h"

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
			 "%s%s%s%s\r\n", s->request_id[0] ? "X-Request-Id: " : "", s->request_id,
			 s->request_id[0] ? "\r\n" : "", http_host_header);

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

	result = exec_pump_in_room(rq->app, rq->room, ex, &sink, &err);
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
