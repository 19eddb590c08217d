/* The room resource: create, list, status, clean up;
 * and rooms that recover (§8.3 DELETE …/sandbox/processes, §8.4 restart). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uuid/uuid.h>

#include "agent.h"
#include "exec_channels.h"
#include "cluster.h"
#include "http.h"
#include "label_store.h"
#include "preview_relay.h"
#include "protocol.h"
#include "room_settings.h"
#include "roomid.h"
#include "process_store.h"
#include "store.h"
#include "terminals.h"
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

void api_rooms_create(struct request *rq, struct response *rs)
{
	struct helper_target target = app_helper(rq->app);
	struct helper_error err;
	struct helper_status st;
	json_object *answer;
	char id[37], name[SANDBOX_NAME_MAX + 1];
	uuid_t uu;

	uuid_generate_random(uu);
	uuid_unparse_lower(uu, id);
	if (!cluster_room_claim(id, rs))
		return;
	int made = helper_create(&target, id, &st, &err);
	cluster_room_claim_end(id);
	if (made < 0) {
		helper_failure(rs, id, HELPER_OP_CREATE, &err);
		cluster_room_unmade(rq->app, id, false);   /* no room made: no placement */
		return;
	}
	room_sandbox_name(id, name, sizeof(name));
	answer = json_object_new_object();
	json_object_object_add(answer, "roomId", json_object_new_string(id));
	json_object_object_add(answer, "sandboxName", json_object_new_string(name));
	metrics_room_started(ROOM_START_NEW);
	response_json(rs, 201, answer);
}

/* <status> of the HTTP API from the helper's (common/protocol.h), with
 * the room's labels (labels: taken; NULL: read from the store) and limits. */
static json_object *room_status_answer(const struct app *app, const struct helper_status *f,
				       json_object *labels)
{
	json_object *usage, *st;
	char name[SANDBOX_NAME_MAX + 1], stamp[40];

	room_sandbox_name(f->room, name, sizeof(name));
	iso8601_utc_ms(f->last_active_ms, stamp, sizeof(stamp));
	st = json_object_new_object();
	json_object_object_add(st, "roomId", json_object_new_string(f->room));
	json_object_object_add(st, "sandboxName", json_object_new_string(name));
	json_object_object_add(st, "state", json_object_new_string(f->running ? "running" : "stopped"));
	json_object_object_add(st, "createdAt", json_object_new_string(f->created_at));
	json_object_object_add(st, "lastActiveAt", json_object_new_string(stamp));
	usage = json_object_new_object();
	json_object_object_add(usage, "diskBytes", json_object_new_int64((int64_t)f->disk_bytes));
	json_object_object_add(usage, "memoryBytes", json_object_new_int64((int64_t)f->memory_bytes));
	json_object_object_add(usage, "processes", json_object_new_int64((int64_t)f->processes));
	json_object_object_add(st, "usage", usage);
	if (!labels) {
		char err[256];
		labels = labels_get(f->room, err, sizeof(err));
		if (!labels) {
			fprintf(stderr, "roombox-fcgi: %s\n", err);
			labels = json_object_new_object();
		}
	}
	json_object_object_add(st, "labels", labels);
	json_object_object_add(st, "limits", room_limits_json(&app->cfg, &f->limits));
	if (cluster_host_name())
		json_object_object_add(st, "host", json_object_new_string(cluster_host_name()));
	return st;
}

/* "%XX" and '+' of a query's value decoded in place (a label's "k=v" comes
 * as "k%3Dv" from most clients). */
static void query_decode(char *s)
{
	static const char hex[] = "0123456789abcdef0123456789ABCDEF";
	char *o = s;
	for (; *s; s++) {
		const char *hi, *lo;
		if (*s == '%' && s[1] && s[2] && (hi = strchr(hex, s[1])) && (lo = strchr(hex, s[2]))) {
			*o++ = (char)(((hi - hex) % 16) << 4 | (lo - hex) % 16);
			s += 2;
		} else {
			*o++ = *s == '+' ? ' ' : *s;
		}
	}
	*o = '\0';
}

#define LABEL_FILTERS_MAX 16
#define LABEL_FILTER_LEN (2 * LABEL_KEY_MAX + 2)
struct label_filters {
	char text[LABEL_FILTERS_MAX][LABEL_FILTER_LEN * 3 + 1];
	const char *want[LABEL_FILTERS_MAX];
	size_t n;
};

/* Every label=k=v of the query: -1 with rs answered for too many. */
static int label_filters(struct request *rq, struct response *rs, struct label_filters *f)
{
	const char *q = rq->in ? rq->in->param(rq->in->ctx, "QUERY_STRING") : NULL;
	f->n = 0;
	for (; q && *q; q += strcspn(q, "&"), q += *q == '&') {
		if (strncmp(q, "label=", 6) != 0)
			continue;
		if (f->n == LABEL_FILTERS_MAX) {
			response_error(rs, 400, "at most %d label= filters", LABEL_FILTERS_MAX);
			return -1;
		}
		size_t len = strcspn(q + 6, "&");
		snprintf(f->text[f->n], sizeof(f->text[0]), "%.*s",
			 (int)(len < sizeof(f->text[0]) ? len : sizeof(f->text[0]) - 1), q + 6);
		query_decode(f->text[f->n]);
		if (!strchr(f->text[f->n], '=')) {
			response_error(rs, 400, "label filter \"%.80s\": expected label=NAME=VALUE",
				       f->text[f->n]);
			return -1;
		}
		f->want[f->n] = f->text[f->n];
		f->n++;
	}
	return 0;
}

/* Every room the helper lists, however many; with label=k=v (any number,
 * all must match), those whose labels match. */
void api_rooms_list(struct request *rq, struct response *rs)
{
	struct helper_target target = app_helper(rq->app);
	struct helper_error err;
	struct helper_status *rooms;
	json_object *list, *answer;
	struct label_filters *f = malloc(sizeof(*f));
	size_t n;

	if (!f || label_filters(rq, rs, f) < 0) {
		if (!f)
			response_error(rs, 500, "out of memory");
		free(f);
		return;
	}

	if (helper_list(&target, HELPER_DEFAULT_DEADLINE_MS, &rooms, &n, &err) < 0) {
		free(f);
		helper_failure(rs, NULL, HELPER_OP_LIST, &err);
		return;
	}
	list = json_object_new_array_ext((int)n);
	for (size_t i = 0; i < n; i++) {
		char why[256];
		if (!cluster_room_listed_here(rooms[i].room))
			continue;   /* a copy of a room another host serves */
		json_object *labels = labels_get(rooms[i].room, why, sizeof(why));
		if (!labels) {
			fprintf(stderr, "roombox-fcgi: %s\n", why);
			labels = json_object_new_object();
		}
		if (labels_match(labels, f->want, f->n))
			json_object_array_add(list, room_status_answer(rq->app, &rooms[i], labels));
		else
			json_object_put(labels);
	}
	free(rooms);
	/* cluster mode: the rooms of the other hosts, by their records (their
	 * labels live there: a filtered list is this host's alone) */
	if (f->n == 0)
		cluster_rooms_add_remote(list);
	free(f);
	answer = json_object_new_object();
	json_object_object_add(answer, "rooms", list);
	response_json(rs, 200, answer);
}

/* The helper's <status> of an existing room into *st: true, or false with
 * rs answered (404 for a room that does not exist: never created by
 * asking). */
static bool room_status_or_answer(struct request *rq, struct response *rs, struct helper_status *st)
{
	struct helper_target target = app_helper(rq->app);
	struct helper_error err;

	if (helper_status(&target, rq->room, st, &err) == 0)
		return true;
	if (err.http_status == 404)
		response_error(rs, 404, "room not found");
	else
		helper_failure(rs, rq->room, HELPER_OP_STATUS, &err);
	return false;
}

bool room_exists_or_answer(struct request *rq, struct response *rs)
{
	struct helper_status st;

	return room_status_or_answer(rq, rs, &st);
}

void api_rooms_get(struct request *rq, struct response *rs)
{
	struct helper_status st;

	if (room_status_or_answer(rq, rs, &st))
		response_json(rs, 200, room_status_answer(rq->app, &st, NULL));
}

/* PATCH /api/rooms/{id}: the room's labels (no privilege: the store is
 * ours) and limits (room_limits.c, through the helper).  The whole body is
 * checked before anything changes; a room that does not exist is a 404,
 * not created. */
void api_rooms_patch(struct request *rq, struct response *rs)
{
	struct helper_status st;
	struct helper_limits_args limits;
	struct config_room_limits max = config_room_limits_max(&rq->app->cfg);
	json_object *labels_in, *limits_in, *labels = NULL;
	char err[512];

	if (room_settings_check(rq->body, &labels_in, &limits_in, err, sizeof(err)) < 0 ||
	    (limits_in && room_limits_parse(limits_in, &max, &limits, err, sizeof(err)) < 0)) {
		response_error(rs, 400, "%s", err);
		return;
	}
	if (!room_status_or_answer(rq, rs, &st))
		return;
	/* labels first: their count (at most LABELS_MAX after the merge) is
	 * the one check left, and a refusal must change nothing */
	if (labels_in) {
		bool too_many;
		labels = labels_patch(rq->room, labels_in, &too_many, err, sizeof(err));
		if (!labels) {
			if (!too_many)
				fprintf(stderr, "roombox-fcgi: %s\n", err);
			response_error(rs, too_many ? 400 : 500, "%s", err);
			return;
		}
	}
	if (limits_in && limits.set) {
		struct helper_target target = app_helper(rq->app);
		struct helper_error herr;
		int set = helper_set_limits(&target, rq->room, &limits, &st, &herr);
		exec_channel_forget(rq->room);   /* its channels hold the old limits */
		if (set < 0) {
			json_object_put(labels);
			if (herr.http_status == 404) {
				/* cleaned up meanwhile: no labels for a room made
				 * again under its id */
				if (labels_in && labels_forget(rq->room, err, sizeof(err)) < 0)
					fprintf(stderr, "roombox-fcgi: %s\n", err);
				response_error(rs, 404, "room not found");
			} else {
				helper_failure(rs, rq->room, HELPER_OP_SET_LIMITS, &herr);
			}
			return;
		}
	}
	response_json(rs, 200, room_status_answer(rq->app, &st, labels));
}

/* POST /api/rooms/{id}/sandbox/stop (roombox's own, for roomboxctl): the
 * room's processes end and its namespaces and mounts are released, files
 * and session stay -- what idle_timeout does, now.  The next exec starts it
 * again.  A room that does not exist is a 404, not created. */
void api_rooms_stop(struct request *rq, struct response *rs)
{
	struct helper_target target = app_helper(rq->app);
	struct helper_error err;
	struct helper_status st;
	json_object *answer;

	if (!room_status_or_answer(rq, rs, &st))
		return;
	procs_room_stopping(rq->room, true);
	if (helper_stop(&target, rq->room, &err) < 0) {
		procs_room_stopping(rq->room, false);
		helper_failure(rs, rq->room, HELPER_OP_STOP, &err);
		return;
	}
	exec_channel_forget(rq->room);
	fprintf(stderr, "roombox-fcgi: room %s: stopped (asked)\n", rq->room);
	answer = json_object_new_object();
	json_object_object_add(answer, "stopped", json_object_new_boolean(1));
	json_object_object_add(answer, "roomId", json_object_new_string(rq->room));
	response_json(rs, 200, answer);
}

/* ---- cleanup ----
 * Cleanup is a list of independent parts; each that fails adds
 * "<part>: <reason>" to `errors` and the rest still run (the original service's
 * handleCleanup): the conversation first, then the sandbox. */

typedef int cleanup_part_fn(struct app *app, const char *room,
			    char *err, size_t errlen);

static int cleanup_sandbox(struct app *app, const char *room, char *errbuf, size_t errlen)
{
	struct helper_target target = app_helper(app);
	struct helper_error err;

	exec_channel_forget(room);
	if (helper_destroy(&target, room, &err) < 0) {
		fprintf(stderr, "roombox-fcgi: room %s: destroy: %s\n", room, err.message);
		strip_host_paths(errbuf, errlen, err.message);
		return -1;
	}
	return 0;
}

/* The store says "room R: messages: <step>: <cause>"; in the answer the
 * part already says "messages: ", so the client reads
 * "messages: room R: <step>: <cause>", not the part twice. */
static int cleanup_messages(struct app *app, const char *room, char *errbuf, size_t errlen)
{
	char prefix[ROOM_ID_MAX + 32];
	(void)app;
	/* before the reset (agent.h), and after it for a call that came
	 * between the two: its reply would be stored alone */
	agent_room_gone(room, "was cleaned up");
	int rc = store_reset(room, errbuf, errlen);
	agent_room_gone(room, "was cleaned up");
	if (rc == 0)
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
/* The room's labels: the client's names for it end with it. */
static int cleanup_labels(struct app *app, const char *room, char *errbuf, size_t errlen)
{
	(void)app;
	if (labels_forget(room, errbuf, errlen) == 0)
		return 0;
	fprintf(stderr, "roombox-fcgi: %s\n", errbuf);
	return -1;
}

static int cleanup_processes(struct app *app, const char *room, char *errbuf, size_t errlen)
{
	(void)app;
	procs_snapshot_remove(room, NULL);   /* what its snapshots kept of them */
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

/* Its terminals' records go (their processes went with the sandbox). */
static int cleanup_terminals(struct app *app, const char *room, char *errbuf, size_t errlen)
{
	(void)app, (void)errbuf, (void)errlen;
	terms_room_forget(room);
	return 0;
}

static const struct cleanup_part {
	const char *name;
	cleanup_part_fn *run;
} cleanup_parts[] = {
	{ "messages", cleanup_messages },
	{ "processes", cleanup_processes },
	{ "sandbox", cleanup_sandbox },
	{ "previews", cleanup_previews },
	{ "terminals", cleanup_terminals },
	{ "labels", cleanup_labels },
};

int rooms_remove_local(struct app *app, const char *room, char *errbuf, size_t errlen)
{
	char err[1024];
	size_t used = 0;

	errbuf[0] = '\0';
	for (size_t i = 0; i < sizeof(cleanup_parts) / sizeof(cleanup_parts[0]); i++) {
		err[0] = '\0';
		if (cleanup_parts[i].run(app, room, err, sizeof(err)) == 0)
			continue;
		used += (size_t)snprintf(errbuf + used, errlen - used, "%s%s: %s", used ? "; " : "",
					 cleanup_parts[i].name, err);
		if (used >= errlen)
			used = errlen - 1;
	}
	return errbuf[0] ? -1 : 0;
}

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
	if (!cluster_room_ended(rq->room, rs)) {   /* its placement goes with it */
		json_object_put(answer);
		return;
	}
	json_object_object_add(answer, "roomId", json_object_new_string(rq->room));
	response_json(rs, 200, answer);
}

/* ---- rooms that recover ----
 * Both act on a room that exists: one that was never made (or was cleaned
 * up) is a 404, not created for nothing. */

void api_processes_kill_all(struct request *rq, struct response *rs)
{
	struct helper_target target = app_helper(rq->app);
	struct helper_error err;
	uint32_t killed;

	if (helper_kill_all(&target, rq->room, 0, &killed, &err) < 0) {
		if (err.http_status == 404)
			response_error(rs, 404, "room not found");
		else
			helper_failure(rs, rq->room, HELPER_OP_KILL_ALL, &err);
		return;
	}
	json_object *answer = json_object_new_object();
	json_object_object_add(answer, "killed", json_object_new_int64(killed));
	response_json(rs, 200, answer);
}

void api_rooms_restart(struct request *rq, struct response *rs)
{
	struct helper_target target = app_helper(rq->app);
	struct helper_error err;

	procs_room_stopping(rq->room, true);   /* its managed processes are lost */
	if (helper_restart(&target, rq->room, &err) < 0) {
		procs_room_stopping(rq->room, false);
		if (err.http_status == 404)
			response_error(rs, 404, "room not found");
		else
			helper_failure(rs, rq->room, HELPER_OP_RESTART, &err);
		return;
	}
	exec_channel_forget(rq->room);
	metrics_room_started(ROOM_START_RESTART);
	json_object *answer = json_object_new_object();
	json_object_object_add(answer, "restarted", json_object_new_boolean(1));
	json_object_object_add(answer, "roomId", json_object_new_string(rq->room));
	response_json(rs, 200, answer);
}
