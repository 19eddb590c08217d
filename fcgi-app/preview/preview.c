/* Preview ports, the API: expose, list, unexpose.  The exposures are kept
 * by preview_store.c; the relays that carry a browser's bytes through them
 * run in preview_relay.c, and ending an exposure closes its relays (a
 * room's cleanup ends them all: preview_room_forget, preview_relay.c). */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "preview_relay.h"
#include "preview_store.h"
#include "protocol.h"
#include "validate.h"

/* ---- the API ---- */

/* The Host the client used, when it is a plausible host[:port]. */
static const char *request_host(const struct request *rq)
{
	const char *h = rq->in ? rq->in->param(rq->in->ctx, "HTTP_HOST") : NULL;
	if (!h || !*h || strlen(h) > 255)
		h = rq->in ? rq->in->param(rq->in->ctx, "SERVER_NAME") : NULL;
	if (!h || !*h || strlen(h) > 255 || strspn(h, "abcdefghijklmnopqrstuvwxyz"
		"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:[]") != strlen(h))
		return "localhost";
	return h;
}

static json_object *exposure_json(const struct request *rq, const struct preview_exposure *e)
{
	char url[600];
	const char *domain = rq->app->cfg.preview_domain;
	if (domain[0])
		snprintf(url, sizeof(url), "http://%d-%s-%s.%s/", e->port, rq->room, e->token, domain);
	else
		snprintf(url, sizeof(url), "http://%s/preview/%s/", request_host(rq), e->token);
	json_object *o = json_object_new_object();
	json_object_object_add(o, "port", json_object_new_int(e->port));
	json_object_object_add(o, "url", json_object_new_string(url));
	json_object_object_add(o, "token", json_object_new_string(e->token));
	return o;
}

/* {"port": 1..65535} in zod's words (z.number().int().min(1).max(65535)):
 * NULL and the port, or the details object. */
static json_object *port_field(json_object *body, int *port)
{
	json_object *details = json_object_new_object(), *v = NULL;
	char msg[96];
	if (!json_object_is_type(body, json_type_object))
		return details;   /* zod's formErrors, which the original service drops */
	bool present = json_object_object_get_ex(body, "port", &v);
	if (!present || !(json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double))) {
		snprintf(msg, sizeof(msg), "Invalid input: expected number, received %s",
			 zod_type_name(v, present));
		zod_issue(details, "port", msg);
		return details;
	}
	double d = json_object_get_double(v);
	if (!isfinite(d)) {   /* 1e400: zod sees Infinity, which is no number */
		zod_issue(details, "port", "Invalid input: expected number, received number");
		return details;
	}
	/* .int() is Number.isInteger (which stops there), then isSafeInteger,
	 * then .min and .max, which all report (validate.c's zod_timeout) */
	if (d != trunc(d)) {
		zod_issue(details, "port", "Invalid input: expected int, received number");
		return details;
	}
	if (d > 9007199254740991.0 || d < -9007199254740991.0)
		zod_issue(details, "port", d > 0 ? "Too big: expected int to be <=9007199254740991"
			  : "Too small: expected int to be >=-9007199254740991");
	if (d < 1)
		zod_issue(details, "port", "Too small: expected number to be >=1");
	if (d > 65535)
		zod_issue(details, "port", "Too big: expected number to be <=65535");
	if (json_object_object_length(details) > 0)
		return details;
	json_object_put(details);
	*port = (int)d;
	return NULL;
}

/* Answer a helper failure while making the room run (exec's words). */
static void room_start_failure(struct response *rs, const char *room, const struct helper_error *err)
{
	fprintf(stderr, "roombox-fcgi: room %s: previews: start: %s\n", room, err->message);
	if (err->http_status == 429)
		response_error(rs, 429, "room limit reached");
	else
		response_error(rs, 500, "sandbox execution failed: %s", err->message);
}

/* POST …/sandbox/ports {"port":N}: the room is created (or started) as an
 * exec would, then the exposure made; a port already exposed keeps its
 * token (200 with the same answer). */
void api_ports_post(struct request *rq, struct response *rs)
{
	int port = 0;
	json_object *details = port_field(rq->body, &port);
	if (details) {
		response_invalid(rs, details);
		return;
	}
	struct helper_target target = app_helper(rq->app);
	struct helper_error err;
	struct helper_status st;
	if (helper_create(&target, rq->room, &st, &err) < 0) {
		room_start_failure(rs, rq->room, &err);
		return;
	}

	struct preview_exposure e;
	char why[128];
	int made = preview_expose(rq->room, port, &e, why, sizeof(why));
	if (made < 0) {
		fprintf(stderr, "roombox-fcgi: room %s: previews: expose port %d: %s\n", rq->room, port, why);
		response_error(rs, 500, "room %s: previews: could not expose port %d", rq->room, port);
		return;
	}
	response_json(rs, made ? 201 : 200, exposure_json(rq, &e));
}

struct ports_list {
	const struct request *rq;
	json_object *ports;
};

static void ports_list_add(const struct preview_exposure *e, void *ctx)
{
	struct ports_list *l = ctx;

	json_object_array_add(l->ports, exposure_json(l->rq, e));
}

void api_ports_list(struct request *rq, struct response *rs)
{
	json_object *ports = json_object_new_array(), *answer = json_object_new_object();
	struct ports_list l = { rq, ports };
	int n = preview_exposures(rq->room, ports_list_add, &l);
	json_object_object_add(answer, "ports", ports);
	if (n < 0) {
		json_object_put(answer);
		response_error(rs, 500, "room %s: previews: could not list the exposures", rq->room);
		return;
	}
	/* none: a room that does not exist is a 404, and is not created */
	if (n == 0 && !room_exists_or_answer(rq, rs)) {
		json_object_put(answer);
		return;
	}
	response_json(rs, 200, answer);
}

/* DELETE …/sandbox/ports/{port}: the URL answers 404 from now on, and
 * relays already running through it are closed. */
void api_ports_delete(struct request *rq, struct response *rs)
{
	const char *p = rq->rest ? rq->rest : "";
	size_t len = strlen(p);
	if (len == 0 || len > 5 || strspn(p, "0123456789") != len || p[0] == '0' || atoi(p) > 65535) {
		response_error(rs, 400, "invalid port: expected a whole number from 1 to 65535");
		return;
	}
	int port = atoi(p), found = 0;
	char err[256];
	/* found says whether the port was exposed; its relays end even when
	 * its file could not be removed, but its URL would work again: said */
	if (preview_unexpose(rq->room, port, preview_relay_revoke, &found, err, sizeof(err)) < 0) {
		fprintf(stderr, "roombox-fcgi: %s\n", err);
		response_error(rs, 500, "%s", err);
		return;
	}
	if (!found) {
		response_error(rs, 404, "port %d is not exposed", port);
		return;
	}
	json_object *answer = json_object_new_object();
	json_object_object_add(answer, "port", json_object_new_int(port));
	response_json(rs, 200, answer);
}
