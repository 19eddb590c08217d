/* GET /metrics (SPEC §8.7): the counters of metrics.c, with the rooms
 * gauge asked of the helper (op "list") at each scrape and the route
 * slots named by router.c.
 *
 * Why a file of its own: metrics.c holds the counters, which every part
 * of roombox-fcgi counts into, helper_client.c included (each helper call
 * is timed and counted); the scrape is a route like the others, which
 * calls the helper.  Kept apart, the counters stay below the helper client
 * and the route above both. */
#include <stdio.h>

#include "helper_client.h"
#include "http.h"
#include "metrics.h"
#include "protocol.h"
#include "router.h"

/* Count the rooms by state: one helper "list" per scrape. */
static struct metrics_rooms rooms_now(struct app *app)
{
	struct helper_target target = app_helper(app);
	struct metrics_rooms r = { 0 };
	struct helper_error err;
	json_object *req = json_object_new_object(), *reply, *list, *st;
	size_t i, n;

	json_object_object_add(req, HK_OP, json_object_new_string(HELPER_OP_LIST));
	reply = helper_call(&target, req, 30 * 1000, &err);
	json_object_put(req);
	if (!reply) {
		fprintf(stderr, "roombox-fcgi: metrics: list rooms: %s\n", err.message);
		return r;
	}
	if (json_object_object_get_ex(reply, HK_ROOMS, &list) &&
	    json_object_is_type(list, json_type_array)) {
		r.known = true;
		n = json_object_array_length(list);
		for (i = 0; i < n; i++) {
			json_object *room = json_object_array_get_idx(list, i);
			bool running = json_object_object_get_ex(room, HK_RUNNING, &st) &&
				       json_object_get_boolean(st);

			if (running)
				r.running++;
			else
				r.stopped++;
		}
	}
	json_object_put(reply);
	return r;
}

void api_metrics_get(struct request *rq, struct response *rs)
{
	struct metrics_rooms rooms = rooms_now(rq->app);
	size_t len = 0;
	char *text = metrics_render(&rooms, router_slot_name, &len);

	if (!text) {
		response_error(rs, 500, "out of memory");
		return;
	}
	rs->status = 200;
	rs->text = text;
	rs->text_len = len;
	rs->content_type = "text/plain; version=0.0.4; charset=utf-8";
}
