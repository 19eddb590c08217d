/* POST /api/rooms/{id}/sandbox/exec (SPEC §2.1). */
#include <stdio.h>
#include <string.h>

#include "exec.h"
#include "http.h"

/* max_concurrent_execs: a slot is taken before the helper is spawned and
 * given back when it has answered.  <= 0 means no limit. */
static bool exec_slot_take(struct app *app)
{
	int max = app->cfg.max_concurrent_execs;

	if (max <= 0)
		return true;
	if (atomic_fetch_add(&app->execs_running, 1) < max)
		return true;
	atomic_fetch_sub(&app->execs_running, 1);
	return false;
}

static void exec_slot_give(struct app *app)
{
	if (app->cfg.max_concurrent_execs > 0)
		atomic_fetch_sub(&app->execs_running, 1);
}

static json_object *exec_helper_request(const char *room, const struct exec_request *ex)
{
	json_object *req = json_object_new_object();

	json_object_object_add(req, "op", json_object_new_string("exec"));
	json_object_object_add(req, "room", json_object_new_string(room));
	json_object_object_add(req, "cmd", json_object_new_string_len(ex->cmd, (int)ex->cmd_len));
	if (ex->timeout_ms)
		json_object_object_add(req, "timeout_ms", json_object_new_int64((int64_t)ex->timeout_ms));
	if (ex->env)
		json_object_object_add(req, "env", json_object_get(ex->env));
	if (ex->cwd)
		json_object_object_add(req, "cwd", json_object_new_string(ex->cwd));
	if (ex->stdin_data)
		json_object_object_add(req, "stdin",
				       json_object_new_string_len(ex->stdin_data, (int)ex->stdin_len));
	if (ex->has_encoding)
		json_object_object_add(req, "encoding", json_object_new_string(
			ex->encoding == EXEC_ENCODING_BASE64 ? "base64" : "utf8"));
	return req;
}

json_object *exec_in_room(struct app *app, const char *room,
			  const struct exec_request *ex, struct helper_error *err)
{
	struct helper_target target = app_helper(app);
	uint64_t timeout = ex->timeout_ms ? ex->timeout_ms : app->cfg.exec_timeout_ms;
	json_object *req, *reply;

	if (!exec_slot_take(app)) {
		memset(err, 0, sizeof(*err));
		err->http_status = 503;
		snprintf(err->code, sizeof(err->code), "busy");
		snprintf(err->message, sizeof(err->message), "too many concurrent execs");
		return NULL;
	}
	req = exec_helper_request(room, ex);
	reply = helper_call(&target, req,
			    (long)(timeout + app->cfg.drain_ms) + HELPER_EXEC_GRACE_MS, err);
	json_object_put(req);
	exec_slot_give(app);
	if (!reply)
		fprintf(stderr, "roombox-fcgi: room %s: exec: %s\n", room, err->message);
	return reply;
}

/* The seed's `result`, key order as in SPEC §2.1, `command` (from the
 * request) between truncated and duration. */
static json_object *exec_result(json_object *reply, const struct exec_request *ex,
				char *missing, size_t missing_len)
{
	static const char *const keys[] = { "stdout", "stderr", "exitCode", "success",
					    "signal", "timedOut", "truncated", "command",
					    "duration", "timestamp" };
	json_object *result = json_object_new_object(), *v;

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		if (strcmp(keys[i], "command") == 0) {
			v = json_object_new_string_len(ex->cmd, (int)ex->cmd_len);
		} else if (json_object_object_get_ex(reply, keys[i], &v)) {
			json_object_get(v);
		} else {
			snprintf(missing, missing_len, "roombox-helper: exec reply lacks \"%s\"", keys[i]);
			json_object_put(result);
			return NULL;
		}
		json_object_object_add(result, keys[i], v);
	}
	return result;
}

void api_exec_post(struct request *rq, struct response *rs)
{
	struct exec_request ex;
	struct helper_error err;
	json_object *details, *reply, *result, *answer;
	char name[sizeof("sandbox-") + ROOM_ID_MAX];

	details = validate_exec_request(rq->body, rq->app->cfg.exec_timeout_max_ms, &ex);
	if (details) {
		answer = json_object_new_object();
		json_object_object_add(answer, "error", json_object_new_string("invalid request"));
		json_object_object_add(answer, "details", details);
		response_json(rs, 400, answer);
		return;
	}
	reply = exec_in_room(rq->app, rq->room, &ex, &err);
	if (!reply) {
		switch (err.http_status) {
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
		default:
			response_error(rs, 500, "sandbox execution failed: %s", err.message);
		}
		return;
	}
	result = exec_result(reply, &ex, err.message, sizeof(err.message));
	json_object_put(reply);
	if (!result) {
		fprintf(stderr, "roombox-fcgi: room %s: exec: %s\n", rq->room, err.message);
		response_error(rs, 500, "sandbox execution failed: %s", err.message);
		return;
	}
	snprintf(name, sizeof(name), "sandbox-%s", rq->room);
	answer = json_object_new_object();
	json_object_object_add(answer, "result", result);
	json_object_object_add(answer, "sandboxName", json_object_new_string(name));
	response_json(rs, 200, answer);
}
