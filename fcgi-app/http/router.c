/* The route table and the request pipeline: see router.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent.h"
#include "auth.h"
#include "cluster.h"
#include "fair_share.h"
#include "metrics.h"
#include "reqlog.h"
#include "room_transfer.h"
#include "json_strict.h"
#include "router.h"
#include "terminals.h"
#include "watch.h"
#include "snapshots.h"

/* Path pattern -> method -> handler.  A path that matches no pattern is a
 * 404, a method not listed for its pattern a 405 with Allow.
 */
static const struct route routes[] = {
	{ "/api/health",                 { { "GET", api_health_get, ROUTE_PUBLIC } } },
	{ "/api/openapi.json",           { { "GET", api_openapi_get, ROUTE_PUBLIC } } },
	{ "/api/rooms",                  { { "GET", api_rooms_list, 0 },
					   { "POST", api_rooms_create, 0 } } },
	{ "/api/rooms/{id}",             { { "GET", api_rooms_get, 0 },
					   { "PATCH", api_rooms_patch, ROUTE_BODY },
					   { "DELETE", api_rooms_cleanup, ROUTE_ENDS_ROOM } } },
	{ "/api/rooms/{id}/cleanup",     { { "POST", api_rooms_cleanup, ROUTE_ENDS_ROOM } } },
	{ "/api/rooms/{id}/sandbox/exec", { { "POST", api_exec_post, ROUTE_BODY } } },
	{ "/api/rooms/{id}/sandbox/restart", { { "POST", api_rooms_restart, 0 } } },
	{ "/api/rooms/{id}/messages",    { { "GET", api_messages_list, 0 },
					   { "POST", api_messages_post, ROUTE_BODY } } },
	{ "/api/rooms/{id}/sandbox/stop", { { "POST", api_rooms_stop, ROUTE_ENDS_ROOM } } },
	{ "/metrics",                    { { "GET", api_metrics_get, ROUTE_METRICS } } },
	{ "/api/rooms/{id}/sandbox/files/{path*}", { { "GET", api_files_get, 0 },
					   { "PUT", api_files_put, 0 },
					   { "DELETE", api_files_delete, 0 },
					   { "POST", api_files_move, ROUTE_BODY } } },
	/* before its {path*} sibling, which would also match ".../processes" */
	{ "/api/rooms/{id}/sandbox/processes", { { "GET", api_procs_list, 0 },
					   { "POST", api_procs_start, ROUTE_BODY },
					   { "DELETE", api_processes_kill_all, ROUTE_ENDS_ROOM } } },
	{ "/api/rooms/{id}/sandbox/processes/{path*}", { { "GET", api_procs_get, 0 },
					   { "POST", api_procs_stdin, 0 },
					   { "DELETE", api_procs_delete, ROUTE_ENDS_ROOM } } },
	{ "/api/rooms/{id}/sandbox/ports", { { "GET", api_ports_list, 0 },
					   { "POST", api_ports_post, ROUTE_BODY } } },
	{ "/api/rooms/{id}/sandbox/ports/{path*}", { { "DELETE", api_ports_delete, 0 } } },
	{ "/api/rooms/{id}/sandbox/watch", { { "GET", api_watch_get, 0 } } },
	{ "/api/rooms/{id}/sandbox/terminals", { { "GET", api_terms_list, 0 },
					   { "POST", api_terms_create, ROUTE_BODY } } },
	{ "/api/rooms/{id}/sandbox/terminals/{path*}", { { "GET", api_terms_get, 0 },
					   { "POST", api_terms_ticket, 0 },
					   { "DELETE", api_terms_delete, 0 } } },
	{ "/api/rooms/{id}/snapshots",   { { "GET", api_snapshots_list, 0 },
					   { "POST", api_snapshots_post, ROUTE_BODY } } },
	{ "/api/rooms/{id}/snapshots/{path*}", { { "DELETE", api_snapshots_delete, 0 } } },
	{ "/api/rooms/{id}/restore",     { { "POST", api_rooms_restore, ROUTE_BODY | ROUTE_ENDS_ROOM } } },
	{ "/api/rooms/{id}/fork",        { { "POST", api_rooms_fork, ROUTE_BODY } } },
	{ "/api/rooms/{id}/export",      { { "GET", api_rooms_export, 0 } } },
	{ "/api/rooms/{id}/import",      { { "PUT", api_rooms_import, 0 } } },
};

#define NROUTES (sizeof(routes) / sizeof(routes[0]))
#define NMETHODS(r) (sizeof((r)->methods) / sizeof((r)->methods[0]))
/* slots: NMETHODS + 1 per route (the last: a method it does not serve),
 * then one for "no route" */
#define SLOT_STRIDE (NMETHODS(&routes[0]) + 1)
#define SLOT_UNMATCHED ((int)(NROUTES * SLOT_STRIDE))
_Static_assert(NROUTES * (sizeof(routes[0].methods) / sizeof(routes[0].methods[0]) + 1) + 1
	       <= METRICS_ROUTE_SLOTS, "raise METRICS_ROUTE_SLOTS (metrics.h)");

/* Does path match pattern?  Fills room from the {id} segment. */
static bool pattern_match(const char *pattern, const char *path,
			  struct route_match *match)
{
	const char *p = pattern, *s = path;

	match->has_room = false;
	match->room[0] = '\0';
	match->rest = NULL;
	for (;;) {
		size_t plen = strcspn(p, "/"), slen = strcspn(s, "/");

		if (strcmp(p, "{path*}") == 0) {   /* the rest, slashes and all */
			match->rest = s;
			return true;
		}
		if (plen == 4 && memcmp(p, "{id}", 4) == 0) {
			size_t n = slen < ROOM_ID_MAX + 1 ? slen : ROOM_ID_MAX + 1;

			memcpy(match->room, s, n);
			match->room[n] = '\0';
			match->has_room = true;
		} else if (plen != slen || memcmp(p, s, plen) != 0) {
			return false;
		}
		p += plen;
		s += slen;
		if (!*s && strcmp(p, "/{path*}") == 0) {   /* .../files: the rest is "" */
			match->rest = s;
			return true;
		}
		if (!*p || !*s)
			return !*p && !*s;
		p++;   /* both at '/' */
		s++;
	}
}

void router_match(const char *method, const char *path,
		  struct route_match *match, struct response *rs)
{
	size_t i, j, used = 0;

	match->m = NULL;
	match->route = NULL;
	for (i = 0; i < NROUTES; i++)
		if (pattern_match(routes[i].pattern, path, match))
			break;
	if (i == NROUTES) {
		response_error(rs, 404, "not found");
		return;
	}
	match->route = &routes[i];
	for (j = 0; j < NMETHODS(&routes[i]) && routes[i].methods[j].method; j++) {
		if (strcmp(routes[i].methods[j].method, method) == 0) {
			match->m = &routes[i].methods[j];
			return;
		}
	}
	for (j = 0; j < NMETHODS(&routes[i]) && routes[i].methods[j].method; j++) {
		used += (size_t)snprintf(rs->allow + used, sizeof(rs->allow) - used,
					 "%s%s", used ? ", " : "", routes[i].methods[j].method);
		if (used >= sizeof(rs->allow))
			used = sizeof(rs->allow) - 1;
	}
	response_error(rs, 405, "method not allowed");
}

char *router_request_path(const struct http_input *in)
{
	const char *uri = in->param(in->ctx, "REQUEST_URI");
	char *path;

	if (uri && *uri)
		return strndup(uri, strcspn(uri, "?"));
	if (asprintf(&path, "%s%s", in->param(in->ctx, "SCRIPT_NAME") ?: "",
		     in->param(in->ctx, "PATH_INFO") ?: "") < 0)
		return NULL;
	return path;
}

int router_slot(const struct route_match *match)
{
	size_t r;

	if (!match->route)
		return SLOT_UNMATCHED;
	r = (size_t)(match->route - routes);
	if (!match->m)
		return (int)(r * SLOT_STRIDE + SLOT_STRIDE - 1);
	return (int)(r * SLOT_STRIDE + (size_t)(match->m - match->route->methods));
}

bool router_slot_name(int slot, const char **route, const char **method)
{
	size_t r = (size_t)slot / SLOT_STRIDE, j = (size_t)slot % SLOT_STRIDE;

	if (slot == SLOT_UNMATCHED) {
		*route = "unmatched";
		*method = "other";
		return true;
	}
	if (slot < 0 || r >= NROUTES)
		return false;
	*route = routes[r].pattern;
	if (j == SLOT_STRIDE - 1) {
		*method = "other";
		return true;
	}
	*method = routes[r].methods[j].method;
	return *method != NULL;
}

/* Does this route want a token?  `metrics` decides for /metrics: token
 * follows `auth` like the API, open never asks (none never routes here). */
static bool route_needs_token(const struct app *app, const struct route_method *m)
{
	if (!app->tokens || (m->flags & ROUTE_PUBLIC))
		return false;
	if (m->flags & ROUTE_METRICS)
		return app->cfg.metrics == METRICS_TOKEN;
	return true;
}

void router_request_end(struct app *app, const struct request *rq,
			const struct route_match *match, int status, const char *request_id,
			uint64_t start_ns, uint64_t helper_ns)
{
	uint64_t ns = metrics_now_ns() - start_ns;
	struct reqlog line = {
		.id = request_id, .method = rq->method,
		.route = match->route ? match->route->pattern : NULL,
		.room = rq->room, .path = rq->path, .status = status, .duration_ns = ns,
		.helper_ns = helper_ns,
	};

	metrics_http_request(router_slot(match), status, ns);
	if (app->log_requests)
		reqlog_write(app->cfg.log_format, &line);
}

/* Read and parse the body; 0, or -1 with rs set. */
static int request_body(struct request *rq, const struct http_input *in,
			struct response *rs)
{
	char *buf = NULL, err[128];
	size_t len = 0;

	if (http_read_body(in, rq->app->cfg.max_body, &buf, &len, rs) < 0)
		return -1;
	if (json_parse_strict(buf, len, &rq->body, err, sizeof(err)) < 0) {
		free(buf);
		response_error(rs, 400, "invalid JSON: %s", err);
		return -1;
	}
	free(buf);
	return 0;
}

/* One of the room's share of the workers for this request (fair_share.h);
 * false with rs set when the room, or the pool, has none to give.  A fresh
 * request of a room whose requests wait parks behind them; a refused one
 * parks (rs->park) when it may, except one that ends the room's activity,
 * which has its one unit past the share and is answered at once. */
static bool room_worker_take(struct app *app, const struct request *rq, unsigned flags,
			     struct response *rs)
{
	struct fair_share *fs = app->room_workers;
	bool ends_room = flags & ROUTE_ENDS_ROOM;
	bool may_park = rs->room_worker == ROOM_WORKER_TAKE && app->room_workers_park && !ends_room;
	enum fair_share_result res = FAIR_SHARE_ROOM_FULL;

	if (may_park && fs->waiting && fs->waiting(rq->room))
		res = FAIR_SHARE_ROOM_FULL;   /* first come, first served */
	else if (rs->room_worker == ROOM_WORKER_TAKE)
		res = fair_share_take(fs, rq->room, ends_room);
	if (res == FAIR_SHARE_TAKEN)
		return true;
	if (may_park) {
		snprintf(rs->park, sizeof(rs->park), "%s", rq->room);
		return false;
	}
	rs->retry_after = 1;
	if (res == FAIR_SHARE_ROOM_FULL)
		response_error(rs, 503, "room %s: busy: %d requests of this room are running, "
			       "its share of the service's workers; retry when one has ended",
			       rq->room, fs->share);
	else
		response_error(rs, 503, "room %s: busy: the service's free workers are kept for "
			       "other rooms and the service's own requests; retry shortly", rq->room);
	return false;
}

/* Does this request make its room when the room does not exist (as an
 * exec does)?  Then, in cluster mode, a room nobody placed is placed on
 * this host first.  Reads, the requests that end a room's activity and
 * those that answer 404 for a missing room place nothing. */
static bool request_creates_room(const struct request *rq, const struct route_method *m)
{
	if (strcmp(rq->method, "GET") == 0 || strcmp(rq->method, "HEAD") == 0 ||
	    (m->flags & ROUTE_ENDS_ROOM))
		return false;
	return m->handler != api_rooms_patch && m->handler != api_rooms_restart &&
	       m->handler != api_rooms_fork;
}

void router_serve(struct app *app, const struct http_input *in,
		  struct response *rs)
{
	const char *method = in->param(in->ctx, "REQUEST_METHOD");
	struct request rq = { .app = app, .method = method ? method : "", .in = in };
	struct route_match match;
	uint64_t start = metrics_now_ns();
	/* a parked request released holds its share already: whatever ends
	 * it from here (its token rotated while it waited) gives it back */
	bool body_read = false, worker_taken = app->room_workers && rs->room_worker == ROOM_WORKER_HELD;
	bool placed = rs->placed;   /* this request placed its room here (cluster mode) */
	char *path, share_room[ROOM_ID_MAX + 1] = "";   /* whose share worker_taken is */

	metrics_helper_time_take();   /* this request's helper time starts at 0 */
	reqlog_new_id(rs->request_id);
	path = router_request_path(in);
	rq.path = path ? path : "";
	router_match(rq.method, rq.path, &match, rs);
	if (worker_taken)   /* the room it was parked for, checked then */
		snprintf(share_room, sizeof(share_room), "%.*s", ROOM_ID_MAX, match.room);
	if (match.m && (match.m->flags & ROUTE_METRICS) && app->cfg.metrics == METRICS_NONE) {
		match.m = NULL;   /* `metrics = none`: no such path */
		match.route = NULL;
		response_error(rs, 404, "not found");
	}
	if (!match.m)
		goto done;
	/* cluster mode: a room's export or import signed as part of a move
	 * (move.c) stands on its signature instead of a token, and on etcd's
	 * move records instead of the room's placement */
	const char *move = cluster_enabled() ? in->param(in->ctx, "HTTP_X_ROOMBOX_MOVE") : NULL;
	bool move_import = match.m->handler == api_rooms_import;
	uint64_t move_epoch = 0;
	if (move) {
		if (!match.has_room || !room_id_valid(match.room) ||
		    (match.m->handler != api_rooms_export && !move_import)) {
			response_error(rs, 403, "X-Roombox-Move is for a room's export and import only");
			goto done;
		}
		if (!cluster_move_admit(app, match.room, !move_import, move, &move_epoch, rs))
			goto done;
	}
	if (!move && route_needs_token(app, match.m) &&
	    !auth_tokens_check(app->tokens, in->param(in->ctx, "HTTP_AUTHORIZATION"))) {
		rs->www_authenticate = true;
		response_error(rs, 401, "unauthorized");
		goto done;
	}
	if (match.has_room) {
		if (!room_id_valid(match.room)) {
			response_error(rs, 400, "invalid room id");
			goto done;
		}
		memcpy(rq.room, match.room, sizeof(rq.room) - 1);
		rq.room[sizeof(rq.room) - 1] = '\0';
		/* cluster mode: is the room this host's?  (a cached answer:
		 * no etcd call for a room the cache knows) */
		bool placed_now = false;
		if (!move && !cluster_room_admit(app, rq.room, request_creates_room(&rq, match.m),
						 &placed_now, rs))
			goto done;
		placed = placed || placed_now;
		if (app->room_workers && !worker_taken && !room_worker_take(app, &rq, match.m->flags, rs))
			goto done;
		worker_taken = app->room_workers != NULL;
		memcpy(share_room, rq.room, sizeof(share_room));
		if (!move && !cluster_room_still_admitted(rq.room, rs))
			goto done;
		if (move && !move_import && !cluster_move_quiesce(app, rq.room, rs))
			goto done;
		/* a move's export takes the messages: replies on their way
		 * (their requests, quiesced, have handed them to threads of
		 * their own) would be stored behind it, and removed with what
		 * it left */
		if (move && !move_import)
			agent_room_gone(rq.room, "moved to another host");
	}
	rq.rest = match.rest;
	rq.move = move != NULL;
	if (match.m->flags & ROUTE_BODY) {
		body_read = true;
		if (request_body(&rq, in, rs) < 0)
			goto done;
	}
	match.m->handler(&rq, rs);
	if (move && move_import && rs->status == 201)
		cluster_move_imported(rq.room, move_epoch);
done:
	if (rs->park[0]) {   /* parked as it came: main.c serves it again */
		rs->placed = placed;
		free(path);
		return;
	}
	/* a room this request placed and did not make (a body refused, no
	 * worker, no room left): its placement goes again.  (An answer sent
	 * later, the agent's, stored its message: made.) */
	if (placed && rs->status >= 400 && !rs->later)
		cluster_room_unmade(app, rq.room, worker_taken);
	/* whatever the web server still sends is read, so it is never cut
	 * off mid-write (nginx answers 502 to that) */
	if (!body_read)
		http_discard_body(in);
	/* the worker is free again (an answer sent later has its own thread) */
	if (worker_taken)
		fair_share_give(app->room_workers, share_room);
	if (!rs->body && !rs->text && !rs->later && !rs->streamed)
		response_error(rs, 500, "internal error: no answer");
	if (!rs->later)   /* an answer sent later logs and counts itself */
		router_request_end(app, &rq, &match, rs->status, rs->request_id, start,
				   metrics_helper_time_take());
	json_object_put(rq.body);
	free(path);
}
