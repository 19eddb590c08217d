/* GET /api/health: no authentication, no helper call (the cgroup mode was
 * asked once at start), so it answers even when the sandbox side is down. */
#include "http.h"

void api_health_get(struct request *rq, struct response *rs)
{
	const struct app *app = rq->app;
	json_object *o = json_object_new_object();

	json_object_object_add(o, "ok", json_object_new_boolean(1));
	json_object_object_add(o, "version", json_object_new_string(ROOMBOX_VERSION));
	json_object_object_add(o, "cgroup", json_object_new_string(app->cgroup_mode));
	json_object_object_add(o, "auth", json_object_new_string(
		app->cfg.auth == AUTH_NONE ? "none" : "token"));
	json_object_object_add(o, "network", json_object_new_string(
		app->cfg.network == NETWORK_EGRESS ? "egress" : "none"));
	if (app->cfg.network == NETWORK_EGRESS) {
		/* the name servers a room can use; empty says none is */
		json_object *dns = json_object_new_array();
		for (int i = 0; i < app->dns_count; i++)
			json_object_array_add(dns, json_object_new_string(app->dns[i]));
		json_object_object_add(o, "dns", dns);
		if (app->dns_count == 0)
			json_object_object_add(o, "dnsWarning", json_object_new_string(
				"no name server is usable from a room"));
	}
	response_json(rs, 200, o);
}
