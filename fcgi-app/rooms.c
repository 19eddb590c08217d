/* The room resource (SPEC §2.3, §2.4): create, list, status, clean up;
 * and rooms that recover (§8.3 DELETE …/sandbox/processes, §8.4 restart). */
#include <stdio.h>
#include <string.h>
#include <uuid/uuid.h>

#include "http.h"
#include "preview.h"
#include "protocol.h"
#include "roomid.h"
#include "process_store.h"
#include "store.h"
#include "timefmt.h"

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
#include "metrics.h"

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

	json_object_object_add(req, HK_OP, json_object_new_string(op));
	if (room)
		json_object_object_add(req, HK_ROOM, json_object_new_string(room));
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
	char id[37], name[SANDBOX_NAME_MAX + 1];
	uuid_t uu;

	uuid_generate_random(uu);
	uuid_unparse_lower(uu, id);
	reply = room_call(rq->app, HELPER_OP_CREATE, id, &err);
	if (!reply) {
		helper_failure(rs, id, HELPER_OP_CREATE, &err);
		return;
	}
	json_object_put(reply);
	room_sandbox_name(id, name, sizeof(name));
	answer = json_object_new_object();
	json_object_object_add(answer, "roomId", json_object_new_string(id));
	json_object_object_add(answer, "sandboxName", json_object_new_string(name));
	metrics_room_started(ROOM_START_NEW);
	response_json(rs, 201, answer);
}

/* SPEC §2.4's <status> from the helper's (common/protocol.h); NULL when
 * the helper's lacks a field. */
static json_object *room_status_answer(json_object *facts)
{
	json_object *id, *running, *created, *v, *usage, *st;
	char name[SANDBOX_NAME_MAX + 1], stamp[40];
	static const char *const counts[][2] = {
		{ HK_DISK_BYTES, "diskBytes" }, { HK_MEMORY_BYTES, "memoryBytes" },
		{ HK_PROCESSES, "processes" },
	};

	if (!json_object_object_get_ex(facts, HK_ROOM, &id) || !json_object_is_type(id, json_type_string) ||
	    !json_object_object_get_ex(facts, HK_RUNNING, &running) ||
	    !json_object_object_get_ex(facts, HK_CREATED_AT, &created) ||
	    !json_object_object_get_ex(facts, HK_LAST_ACTIVE_MS, &v) || !json_object_is_type(v, json_type_int))
		return NULL;
	room_sandbox_name(json_object_get_string(id), name, sizeof(name));
	iso8601_utc_ms(json_object_get_int64(v), stamp, sizeof(stamp));
	st = json_object_new_object();
	json_object_object_add(st, "roomId", json_object_get(id));
	json_object_object_add(st, "sandboxName", json_object_new_string(name));
	json_object_object_add(st, "state", json_object_new_string(
		json_object_get_boolean(running) ? "running" : "stopped"));
	json_object_object_add(st, "createdAt", json_object_get(created));
	json_object_object_add(st, "lastActiveAt", json_object_new_string(stamp));
	usage = json_object_new_object();
	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
		int64_t n = json_object_object_get_ex(facts, counts[i][0], &v) ? json_object_get_int64(v) : 0;

		json_object_object_add(usage, counts[i][1], json_object_new_int64(n));
	}
	json_object_object_add(st, "usage", usage);
	return st;
}

void api_rooms_list(struct request *rq, struct response *rs)
{
	struct helper_error err;
	json_object *reply, *rooms, *list, *answer;

	reply = room_call(rq->app, HELPER_OP_LIST, NULL, &err);
	if (!reply) {
		helper_failure(rs, NULL, HELPER_OP_LIST, &err);
		return;
	}
	if (!json_object_object_get_ex(reply, HK_ROOMS, &rooms) ||
	    !json_object_is_type(rooms, json_type_array)) {
		json_object_put(reply);
		fprintf(stderr, "roombox-fcgi: list: helper reply lacks \"%s\"\n", HK_ROOMS);
		response_error(rs, 500, "roombox-helper: list reply lacks \"%s\"", HK_ROOMS);
		return;
	}
	list = json_object_new_array();
	for (size_t i = 0; i < json_object_array_length(rooms); i++) {
		json_object *st = room_status_answer(json_object_array_get_idx(rooms, i));

		if (st)
			json_object_array_add(list, st);
	}
	json_object_put(reply);
	answer = json_object_new_object();
	json_object_object_add(answer, "rooms", list);
	response_json(rs, 200, answer);
}

/* The helper's <status> of an existing room, or NULL with rs answered
 * (404 for a room that does not exist: never created by asking). */
static json_object *room_status_or_answer(struct request *rq, struct response *rs)
{
	struct helper_error err;
	json_object *reply = room_call(rq->app, HELPER_OP_STATUS, rq->room, &err);

	if (!reply && err.http_status == 404)
		response_error(rs, 404, "room not found");
	else if (!reply)
		helper_failure(rs, rq->room, HELPER_OP_STATUS, &err);
	return reply;
}

bool room_exists_or_answer(struct request *rq, struct response *rs)
{
	json_object *reply = room_status_or_answer(rq, rs);

	json_object_put(reply);
	return reply != NULL;
}

void api_rooms_get(struct request *rq, struct response *rs)
{
	json_object *reply, *st;

	if (!(reply = room_status_or_answer(rq, rs)))
		return;
	st = room_status_answer(reply);
	json_object_put(reply);
	if (!st) {
		fprintf(stderr, "roombox-fcgi: room %s: status: helper reply lacks a field\n", rq->room);
		response_error(rs, 500, "roombox-helper: status reply lacks a field");
		return;
	}
	response_json(rs, 200, st);
}

/* POST /api/rooms/{id}/sandbox/stop (roombox's own, for roomboxctl): the
 * room's processes end and its namespaces and mounts are released, files
 * and session stay -- what idle_timeout does, now.  The next exec starts it
 * again.  A room that does not exist is a 404, not created. */
void api_rooms_stop(struct request *rq, struct response *rs)
{
	struct helper_error err;
	json_object *reply, *answer;

	if (!(reply = room_status_or_answer(rq, rs)))
		return;
	json_object_put(reply);
	procs_room_stopping(rq->room, true);
	reply = room_call(rq->app, HELPER_OP_STOP, rq->room, &err);
	if (!reply) {
		procs_room_stopping(rq->room, false);
		helper_failure(rs, rq->room, HELPER_OP_STOP, &err);
		return;
	}
	json_object_put(reply);
	fprintf(stderr, "roombox-fcgi: room %s: stopped (asked)\n", rq->room);
	answer = json_object_new_object();
	json_object_object_add(answer, "stopped", json_object_new_boolean(1));
	json_object_object_add(answer, "roomId", json_object_new_string(rq->room));
	response_json(rs, 200, answer);
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
	json_object *reply = room_call(app, HELPER_OP_DESTROY, room, &err);

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

/* Managed processes: our pipe ends closed, records and logs deleted (the
 * sandbox part then ends the processes themselves). */
static int cleanup_processes(struct app *app, const char *room, char *errbuf, size_t errlen)
{
	(void)app;
	return procs_room_reset(room, errbuf, errlen);
}

/* Preview exposures end with the room (their relays are closed too). */
static int cleanup_previews(struct app *app, const char *room, char *errbuf, size_t errlen)
{
	if (preview_room_forget(room, errbuf, errlen) == 0)
		return 0;
	fprintf(stderr, "roombox-fcgi: %s\n", errbuf);
	return -1;
}

static const struct cleanup_part {
	const char *name;
	cleanup_part_fn *run;
} cleanup_parts[] = {
	{ "messages", cleanup_messages },
	{ "processes", cleanup_processes },
	{ "sandbox", cleanup_sandbox },
	{ "previews", cleanup_previews },
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
	if (!json_object_object_get_ex(reply, HK_KILLED, &n) || !json_object_is_type(n, json_type_int)) {
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
	json_object *reply;

	procs_room_stopping(rq->room, true);   /* its managed processes are lost */
	reply = room_call(rq->app, HELPER_OP_RESTART, rq->room, &err);
	if (!reply)
		procs_room_stopping(rq->room, false);
	if (!reply && err.http_status == 404) {
		response_error(rs, 404, "room not found");
		return;
	}
	if (!reply) {
		helper_failure(rs, rq->room, HELPER_OP_RESTART, &err);
		return;
	}
	json_object_put(reply);
	metrics_room_started(ROOM_START_RESTART);
	json_object *answer = json_object_new_object();
	json_object_object_add(answer, "restarted", json_object_new_boolean(1));
	json_object_object_add(answer, "roomId", json_object_new_string(rq->room));
	response_json(rs, 200, answer);
}
