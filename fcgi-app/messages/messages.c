/* GET and POST /api/rooms/{id}/messages.
 *
 * A user message is stored as it came (with a model configured, the agent
 * answers it: agent.c).  An assistant message first goes
 * through the original service's executeCommands (runtags.c), whose commands run in the
 * room's sandbox one after another like POST .../sandbox/exec with default
 * limits; then it is stored (store.c, fsync'd) and only then answered 201. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "exec.h"
#include "http.h"
#include "runtags.h"
#include "store.h"

/* One <run> command: the sandbox's stdout and stderr (already valid UTF-8),
 * or the bare reason it could not run, which the original service appends as is.  The
 * agent runs the model's commands through it too (handed to agent_post). */
static int run_tag(void *ctx, const char *cmd, size_t cmd_len, struct runtags_exec_result *res)
{
	struct request *rq = ctx;
	struct exec_request ex = { .cmd = cmd, .cmd_len = cmd_len };
	struct helper_error err;
	json_object *reply, *v;

	if (memchr(cmd, '\0', cmd_len)) {
		res->error = strdup("Command cannot contain NUL bytes");
		res->error_len = res->error ? strlen(res->error) : 0;
		return -1;
	}
	reply = exec_in_room(rq->app, rq->room, &ex, &err);
	if (!reply) {
		res->error = strdup(err.message);
		res->error_len = res->error ? strlen(res->error) : 0;
		return -1;
	}
	if (json_object_object_get_ex(reply, "stdout", &v)) {
		res->out_len = (size_t)json_object_get_string_len(v);
		res->out = malloc(res->out_len + 1);
		if (res->out)
			memcpy(res->out, json_object_get_string(v), res->out_len + 1);
	}
	if (json_object_object_get_ex(reply, "stderr", &v)) {
		res->err_len = (size_t)json_object_get_string_len(v);
		res->err = malloc(res->err_len + 1);
		if (res->err)
			memcpy(res->err, json_object_get_string(v), res->err_len + 1);
	}
	json_object_put(reply);
	return 0;
}

void api_messages_list(struct request *rq, struct response *rs)
{
	char err[512];
	json_object *list = store_list(rq->room, err, sizeof(err));
	if (!list) {
		fprintf(stderr, "roombox-fcgi: %s\n", err);
		response_error(rs, 500, "%s", err);
		return;
	}
	json_object *answer = json_object_new_object();
	json_object_object_add(answer, "messages", list);
	response_json(rs, 200, answer);
}

void api_messages_post(struct request *rq, struct response *rs)
{
	struct message_request m;
	json_object *details = validate_message_request(rq->body, &m);
	if (details) {
		response_invalid(rs, details);
		return;
	}
	if (strcmp(m.role, "user") == 0 && agent_enabled(rq->app)) {
		agent_post(rq, rs, m.content, m.content_len, run_tag);   /* the agent */
		return;
	}
	const char *content = m.content;
	size_t len = m.content_len;
	char *processed = NULL;
	if (strcmp(m.role, "assistant") == 0) {
		size_t tags = runtags_count(m.content, m.content_len);
		if (tags > RUNTAGS_MAX) {
			response_error(rs, 400, "too many <run> commands in one message: %zu (at most %d); "
				       "nothing was run or stored", tags, RUNTAGS_MAX);
			return;
		}
		/* full already: refused before any command runs (a message
		 * whose outputs take it past the bound is refused after them) */
		char why[512];
		if (store_room_for(rq->room, m.content_len, why, sizeof(why)) == STORE_FULL) {
			response_error(rs, 507, "%s", why);
			return;
		}
		processed = runtags_process(m.content, m.content_len, run_tag, rq, &len);
		if (!processed) {
			response_error(rs, 500, "out of memory");
			return;
		}
		content = processed;
	}
	char err[512];
	json_object *message = NULL;
	int rc = store_append(rq->room, m.role, content, len, &message, err, sizeof(err));
	free(processed);
	if (rc < 0) {
		fprintf(stderr, "roombox-fcgi: %s\n", err);
		response_error(rs, rc == STORE_FULL ? 507 : 500, "%s", err);
		return;
	}
	json_object *answer = json_object_new_object();
	json_object_object_add(answer, "message", message);
	response_json(rs, 201, answer);
}
