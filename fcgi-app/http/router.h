/* The route table (path pattern -> method -> handler) and the pipeline every
 * request goes through:
 *
 *   match path (404) -> match method (405 + Allow) -> authenticate (401,
 *   except public routes) -> check the {roomId} segment (400) -> take one
 *   of the room's share of the workers (or wait for it, parked: main.c;
 *   503 + Retry-After: fair_share.h)
 *   -> read and parse the body for routes that take one (413, 400) ->
 *   handler.
 *
 * 404/405 come first because the table is public knowledge;
 * authentication comes before anything that looks at client input. */
#ifndef ROOMBOX_FCGI_ROUTER_H
#define ROOMBOX_FCGI_ROUTER_H

#include <stdint.h>

#include "app.h"
#include "http.h"

enum {
	ROUTE_PUBLIC = 1 << 0,   /* no Authorization needed */
	ROUTE_BODY   = 1 << 1,   /* the handler gets the parsed JSON body */
	ROUTE_METRICS = 1 << 2,  /* auth per the `metrics` key, not `auth` */
	ROUTE_ENDS_ROOM = 1 << 3, /* ends the room's activity: may take one
				   * worker past the room's share, never waits */
};

struct route_method {
	const char *method;
	route_handler *handler;
	unsigned flags;
};

struct route {
	const char *pattern;     /* segments; "{id}" is the room id, a last
				  * "{path*}" the rest of the path (maybe "") */
	struct route_method methods[4];
};

struct route_match {
	const struct route_method *m;  /* NULL: rs holds the 404/405 */
	const struct route *route;     /* the pattern matched (also for a 405), or NULL */
	bool has_room;                 /* the pattern has {id} */
	const char *rest;              /* what {path*} matched (into the path), or NULL */
	char room[ROOM_ID_MAX + 2];    /* the {id} segment as sent, unchecked;
					* cut at ROOM_ID_MAX + 1 bytes, which
					* keeps an overlong one invalid */
};

/* Find the route and method for a request (first matching pattern in table
 * order).  Without a match, rs gets 404, or 405 with rs->allow. */
void router_match(const char *method, const char *path,
		  struct route_match *match, struct response *rs);

/* The request path: REQUEST_URI without its query string, or SCRIPT_NAME +
 * PATH_INFO when the web server sends no REQUEST_URI.  malloc'd. */
char *router_request_path(const struct http_input *in);

/* Metrics and the request log name a request by its slot: one per
 * (pattern, method) of the table, one per pattern for a method it does not
 * serve (method "other"), one for a path no pattern matches (route
 * "unmatched"): a bounded set, never the client's path. */
int router_slot(const struct route_match *match);
/* The route pattern and method of a slot; false if the slot is not used. */
bool router_slot_name(int slot, const char **route, const char **method);

/* Count a request in the metrics and write its one log line (reqlog.h).
 * router_serve does it for every request as it answers; a handler that
 * answers later, from a thread of its own, calls it once when that answer is
 * sent, with what it kept of the request (rq, match, rs->request_id, the
 * start time) and the helper time of its own thread
 * (metrics_helper_time_take()). */
void router_request_end(struct app *app, const struct request *rq,
			const struct route_match *match, int status, const char *request_id,
			uint64_t start_ns, uint64_t helper_ns);

/* Run one request from start to finish; rs gets the answer. */
void router_serve(struct app *app, const struct http_input *in,
		  struct response *rs);

#endif
