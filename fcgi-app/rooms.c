/* The room resource (SPEC §2.3, §2.4): create, list, status, clean up. */
#include <stdio.h>
#include <string.h>
#include <uuid/uuid.h>

#include "http.h"
#include "roomid.h"
#include "store.h"

/* A host path in a helper's error is for the service log only: the client's
 * copy keeps each absolute path's last component ("rmdir R"), which names
 * what failed without telling where the host keeps it. */
static void strip_host_paths(char *out, size_t outlen, const char *text)
{
	size_t o = 0;
	for (const char *p = text; *p && o + 1 < outlen; ) {
		if (*p == '/' && (p == text || p[-1] == ' ')) {
			const char *last = p + strcspn(p, " :,");
			while (last[-1] != '/')	/* stops at p + 1 at the latest */
				last--;
			p = last;
			continue;
		}
		out[o++] = *p++;
	}
	out[o] = '\0';
}

/* Answer a helper failure: the helper's message names the room and step. */
static void helper_failure(struct response *rs, const char *room, const char *op,
			   const struct helper_error *err)
{
	char text[sizeof(err->message)];

	fprintf(stderr, "roombox-fcgi: room %s: %s: %s\n", room ? room : "-", op, err->message);
	strip_host_paths(text, sizeof(text), err->message);
	if (err->http_status == 429)
		response_error(rs, 429, "room limit reached");
	else
		response_error(rs, err->http_status, "%s", text);
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
		strip_host_paths(errbuf, errlen, err.message);
		return -1;
	}
	json_object_put(reply);
	return 0;
}

/* The store says "room R: messages: <step>: <cause>"; in the answer the
 * part already says "messages: ", so the client reads
 * "messages: room R: <step>: <cause>", not the part twice. */
static int cleanup_messages(struct app *app, const char *room, char *errbuf, size_t errlen)
{
	char prefix[ROOM_ID_MAX + 32];
	if (store_reset(room, errbuf, errlen) == 0)
		return 0;
	fprintf(stderr, "roombox-fcgi: %s\n", errbuf);
	int keep = snprintf(prefix, sizeof(prefix), "room %s: ", room);
	size_t n = (size_t)snprintf(prefix, sizeof(prefix), "room %s: messages: ", room);
	if (n < sizeof(prefix) && strncmp(errbuf, prefix, n) == 0)
		memmove(errbuf + keep, errbuf + n, strlen(errbuf + n) + 1);
	return -1;
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
