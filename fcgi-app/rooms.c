/* The room resource (SPEC §2.3, §2.4): create, list, status, clean up;
 * and rooms that recover (§8.3 DELETE …/sandbox/processes, §8.4 restart). */
#include <stdio.h>
#include <string.h>
#include <uuid/uuid.h>

#include "http.h"
#include "protocol.h"
#include "store.h"

/* Answer a helper failure: the helper's message names the room and step. */
static void helper_failure(struct response *rs, const char *room, const char *op,
			   const struct helper_error *err)
{
	fprintf(stderr, "roombox-fcgi: room %s: %s: %s\n", room ? room : "-", op, err->message);
	if (err->http_status == 429)
		response_error(rs, 429, "room limit reached");
	else
		response_error(rs, err->http_status, "%s", err->message);
}

static json_object *room_op(const char *op, const char *room)
{
	json_object *req = json_object_new_object();

	json_object_object_add(req, "op", json_object_new_string(op));
	if (room)
		json_object_object_add(req, "room", json_object_new_string(room));
	return req;
}

/* Run one helper op; the reply or NULL with err set. */
static json_object *room_call(struct app *app, const char *op, const char *room,
			      struct helper_error *err)
{
	struct helper_target target = app_helper(app);
	json_object *req = room_op(op, room), *reply;

	reply = helper_call(&target, req, HELPER_DEFAULT_DEADLINE_MS, err);
	json_object_put(req);
	return reply;
}

void api_rooms_create(struct request *rq, struct response *rs)
{
	struct helper_error err;
	json_object *reply, *answer;
	char id[37], name[sizeof("sandbox-") + 36];
	uuid_t uu;

	uuid_generate_random(uu);
	uuid_unparse_lower(uu, id);
	reply = room_call(rq->app, "create", id, &err);
	if (!reply) {
		helper_failure(rs, id, "create", &err);
		return;
	}
	json_object_put(reply);
	snprintf(name, sizeof(name), "sandbox-%s", id);
	answer = json_object_new_object();
	json_object_object_add(answer, "roomId", json_object_new_string(id));
	json_object_object_add(answer, "sandboxName", json_object_new_string(name));
	response_json(rs, 201, answer);
}

void api_rooms_list(struct request *rq, struct response *rs)
{
	struct helper_error err;
	json_object *reply, *rooms;

	reply = room_call(rq->app, "list", NULL, &err);
	if (!reply) {
		helper_failure(rs, NULL, "list", &err);
		return;
	}
	if (!json_object_object_get_ex(reply, "rooms", &rooms) ||
	    !json_object_is_type(rooms, json_type_array)) {
		json_object_put(reply);
		fprintf(stderr, "roombox-fcgi: list: helper reply lacks \"rooms\"\n");
		response_error(rs, 500, "roombox-helper: list reply lacks \"rooms\"");
		return;
	}
	response_json(rs, 200, reply);
}

void api_rooms_get(struct request *rq, struct response *rs)
{
	struct helper_error err;
	json_object *reply;

	reply = room_call(rq->app, "status", rq->room, &err);
	if (!reply && err.http_status == 404) {
		response_error(rs, 404, "room not found");
		return;
	}
	if (!reply) {
		helper_failure(rs, rq->room, "status", &err);
		return;
	}
	response_json(rs, 200, reply);
}

/* ---- cleanup ----
 * Cleanup is a list of independent parts; each that fails adds
 * "<part>: <reason>" to `errors` and the rest still run (the seed's
 * handleCleanup): the conversation first, then the sandbox. */

typedef int cleanup_part_fn(struct app *app, const char *room,
			    char *err, size_t errlen);

static int cleanup_sandbox(struct app *app, const char *room, char *errbuf, size_t errlen)
{
	struct helper_error err;
	json_object *reply = room_call(app, "destroy", room, &err);

	if (!reply) {
		fprintf(stderr, "roombox-fcgi: room %s: destroy: %s\n", room, err.message);
		snprintf(errbuf, errlen, "%s", err.message);
		return -1;
	}
	json_object_put(reply);
	return 0;
}

static int cleanup_messages(struct app *app, const char *room, char *errbuf, size_t errlen)
{
	return store_reset(room, errbuf, errlen);
}

static const struct cleanup_part {
	const char *name;
	cleanup_part_fn *run;
} cleanup_parts[] = {
	{ "messages", cleanup_messages },
	{ "sandbox", cleanup_sandbox },
};

void api_rooms_cleanup(struct request *rq, struct response *rs)
{
	json_object *errors = json_object_new_array(), *answer;
	char err[1024], line[1100];
	size_t i;

	for (i = 0; i < sizeof(cleanup_parts) / sizeof(cleanup_parts[0]); i++) {
		err[0] = '\0';
		if (cleanup_parts[i].run(rq->app, rq->room, err, sizeof(err)) == 0)
			continue;
		snprintf(line, sizeof(line), "%s: %s", cleanup_parts[i].name, err);
		json_object_array_add(errors, json_object_new_string(line));
	}
	answer = json_object_new_object();
	json_object_object_add(answer, "cleaned", json_object_new_boolean(1));
	if (json_object_array_length(errors) > 0) {
		json_object_object_add(answer, "errors", errors);
		response_json(rs, 207, answer);
		return;
	}
	json_object_put(errors);
	json_object_object_add(answer, "roomId", json_object_new_string(rq->room));
	response_json(rs, 200, answer);
}

/* ---- rooms that recover ----
 * Both act on a room that exists: one that was never made (or was cleaned
 * up) is a 404, not created for nothing. */

void api_processes_kill_all(struct request *rq, struct response *rs)
{
	struct helper_error err;
	json_object *reply = room_call(rq->app, HELPER_OP_KILL_ALL, rq->room, &err), *n;

	if (!reply && err.http_status == 404) {
		response_error(rs, 404, "room not found");
		return;
	}
	if (!reply) {
		helper_failure(rs, rq->room, HELPER_OP_KILL_ALL, &err);
		return;
	}
	if (!json_object_object_get_ex(reply, "killed", &n) || !json_object_is_type(n, json_type_int)) {
		json_object_put(reply);
		fprintf(stderr, "roombox-fcgi: room %s: kill-all: helper reply lacks \"killed\"\n", rq->room);
		response_error(rs, 500, "roombox-helper: kill-all reply lacks \"killed\"");
		return;
	}
	json_object *answer = json_object_new_object();
	json_object_object_add(answer, "killed", json_object_get(n));
	json_object_put(reply);
	response_json(rs, 200, answer);
}

void api_rooms_restart(struct request *rq, struct response *rs)
{
	struct helper_error err;
	json_object *reply = room_call(rq->app, HELPER_OP_RESTART, rq->room, &err);

	if (!reply && err.http_status == 404) {
		response_error(rs, 404, "room not found");
		return;
	}
	if (!reply) {
		helper_failure(rs, rq->room, HELPER_OP_RESTART, &err);
		return;
	}
	json_object_put(reply);
	json_object *answer = json_object_new_object();
	json_object_object_add(answer, "restarted", json_object_new_boolean(1));
	json_object_object_add(answer, "roomId", json_object_new_string(rq->room));
	response_json(rs, 200, answer);
}
