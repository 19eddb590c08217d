/* POST /api/rooms/{id}/sandbox/exec.
 *
 * A command runs as every command does (exec_pump.c: roombox-fcgi's own
 * pipes, the helper only waits); the plain answer's sink keeps nothing but
 * the result, whose stdout and stderr are read up to output_limit each.
 * A client that asks for an event stream gets exec_stream.c's sink. */
#include <stdio.h>
#include <string.h>

#include "exec.h"
#include "exec_pump.h"
#include "exec_stream.h"
#include "http.h"

json_object *exec_in_room(struct app *app, const char *room,
			  const struct exec_request *ex, struct helper_error *err)
{
	struct exec_sink result_only = { 0 };

	return exec_pump_in_room(app, room, ex, &result_only, err);
}

void api_exec_post(struct request *rq, struct response *rs)
{
	struct exec_request ex;
	struct helper_error err;
	json_object *details, *result, *answer;
	char name[SANDBOX_NAME_MAX + 1];

	/* up to the most any room may have: the helper holds each room to
	 * its own execTimeoutMax */
	details = validate_exec_request(rq->body, config_room_limits_max(&rq->app->cfg).exec_timeout_max_ms,
					&ex);
	if (details) {
		response_invalid(rs, details);
		return;
	}
	if (exec_wants_stream(rq)) {
		exec_sse(rq, rs, &ex);
		return;
	}
	result = exec_in_room(rq->app, rq->room, &ex, &err);
	if (!result) {
		exec_answer_error(rs, &err);
		return;
	}
	room_sandbox_name(rq->room, name, sizeof(name));
	answer = json_object_new_object();
	json_object_object_add(answer, "result", result);
	json_object_object_add(answer, "sandboxName", json_object_new_string(name));
	response_json(rs, 200, answer);
}
