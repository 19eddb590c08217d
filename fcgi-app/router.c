/* The route table and the request pipeline: see router.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "auth.h"
#include "router.h"

/* Path pattern -> method -> handler.  A path that matches no pattern is a
 * 404, a method not listed for its pattern a 405 with Allow.
 */
static const struct route routes[] = {
	{ "/api/health",                 { { "GET", api_health_get, ROUTE_PUBLIC } } },
	{ "/api/rooms",                  { { "GET", api_rooms_list, 0 },
					   { "POST", api_rooms_create, 0 } } },
	{ "/api/rooms/{id}",             { { "GET", api_rooms_get, 0 },
					   { "DELETE", api_rooms_cleanup, 0 } } },
	{ "/api/rooms/{id}/cleanup",     { { "POST", api_rooms_cleanup, 0 } } },
	{ "/api/rooms/{id}/sandbox/exec", { { "POST", api_exec_post, ROUTE_BODY } } },
	{ "/api/rooms/{id}/sandbox/processes", { { "DELETE", api_processes_kill_all, 0 } } },
	{ "/api/rooms/{id}/sandbox/restart", { { "POST", api_rooms_restart, 0 } } },
	{ "/api/rooms/{id}/messages",    { { "GET", api_messages_list, 0 },
					   { "POST", api_messages_post, ROUTE_BODY } } },
};

#define NROUTES (sizeof(routes) / sizeof(routes[0]))
#define NMETHODS(r) (sizeof((r)->methods) / sizeof((r)->methods[0]))

/* Does path match pattern?  Fills room from the {id} segment. */
static bool pattern_match(const char *pattern, const char *path,
			  struct route_match *match)
{
	const char *p = pattern, *s = path;

	match->has_room = false;
	match->room[0] = '\0';
	for (;;) {
		size_t plen = strcspn(p, "/"), slen = strcspn(s, "/");

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
	for (i = 0; i < NROUTES; i++)
		if (pattern_match(routes[i].pattern, path, match))
			break;
	if (i == NROUTES) {
		response_error(rs, 404, "not found");
		return;
	}
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

/* For the log: the path with anything unprintable replaced, bounded. */
static void log_safe(char *dst, size_t dstlen, const char *src)
{
	size_t i;

	for (i = 0; src[i] && i + 1 < dstlen; i++)
		dst[i] = (src[i] >= 0x20 && src[i] < 0x7f) ? src[i] : '?';
	dst[i] = '\0';
}

static void log_request(const char *method, const char *path, int status,
			const struct timespec *start)
{
	struct timespec end;
	char m[16], p[256];
	double ms;

	clock_gettime(CLOCK_MONOTONIC, &end);
	ms = (double)(end.tv_sec - start->tv_sec) * 1e3 +
	     (double)(end.tv_nsec - start->tv_nsec) / 1e6;
	log_safe(m, sizeof(m), method);
	log_safe(p, sizeof(p), path);
	fprintf(stderr, "roombox-fcgi: %s %s %d %.1f ms\n", m, p, status, ms);
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

void router_serve(struct app *app, const struct http_input *in,
		  struct response *rs)
{
	const char *method = in->param(in->ctx, "REQUEST_METHOD");
	struct request rq = { .app = app, .method = method ? method : "" };
	struct route_match match;
	struct timespec start;
	bool body_read = false;
	char *path;

	clock_gettime(CLOCK_MONOTONIC, &start);
	path = router_request_path(in);
	rq.path = path ? path : "";
	router_match(rq.method, rq.path, &match, rs);
	if (!match.m)
		goto done;
	if (!(match.m->flags & ROUTE_PUBLIC) && app->tokens &&
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
	}
	if (match.m->flags & ROUTE_BODY) {
		body_read = true;
		if (request_body(&rq, in, rs) < 0)
			goto done;
	}
	match.m->handler(&rq, rs);
done:
	/* whatever the web server still sends is read, so it is never cut
	 * off mid-write (nginx answers 502 to that) */
	if (!body_read)
		http_discard_body(in);
	if (!rs->body)
		response_error(rs, 500, "internal error: no answer");
	if (app->log_requests)
		log_request(rq.method, rq.path, rs->status, &start);
	json_object_put(rq.body);
	free(path);
}
