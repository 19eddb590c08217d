/* GET /metrics: the counters of metrics.c, with the rooms
 * gauge asked of the helper (op "list") at each scrape and the route
 * slots named by router.c.
 *
 * Why a file of its own: metrics.c holds the counters, which every part
 * of roombox-fcgi counts into, helper_client.c included (each helper call
 * is timed and counted); the scrape is a route like the others, which
 * calls the helper.  Kept apart, the counters stay below the helper client
 * and the route above both. */
#include <stdio.h>
#include <stdlib.h>

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
	struct helper_status *rooms;
	size_t n;

	if (helper_list(&target, 30 * 1000, &rooms, &n, &err) < 0) {
		fprintf(stderr, "roombox-fcgi: metrics: list rooms: %s\n", err.message);
		return r;
	}
	r.known = true;
	for (size_t i = 0; i < n; i++) {
		if (rooms[i].running)
			r.running++;
		else
			r.stopped++;
	}
	free(rooms);
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
