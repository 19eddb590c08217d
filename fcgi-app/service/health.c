/* GET /api/health: no authentication, no helper call (the cgroup mode was
 * asked once at start), so it answers even when the sandbox side is down. */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>

#include "http.h"
#include "snapshots.h"

/* How far the rooms' disk images commit the host: their number and total
 * size as the helper records them (exactly, at each creation and removal),
 * the bytes they held when last counted (fewer than they hold now), the
 * state directory's free space now, and committed: what the images may
 * still grow by, as a share of that free space -- an upper bound, which a
 * new room keeps at most disk_overcommit. */
static json_object *health_disk(const struct app *app)
{
	static const char *const keys[] = { "rooms", "promisedBytes", "usedBytes", "countedAt" };
	char path[PATH_MAX];
	struct statvfs vfs;
	json_object *d = json_object_new_object(), *rec = NULL;

	json_object_object_add(d, "limitBytes", json_object_new_int64((int64_t)app->cfg.disk_limit));
	json_object_object_add(d, "overcommit", json_object_new_double(app->cfg.disk_overcommit));
	if (snprintf(path, sizeof(path), "%s/disk-commit.json", app->cfg.state_dir) < (int)sizeof(path))
		rec = json_object_from_file(path);
	for (size_t i = 0; rec && i < sizeof(keys) / sizeof(keys[0]); i++) {
		json_object *v = json_object_object_get(rec, keys[i]);
		if (json_object_is_type(v, i < 3 ? json_type_int : json_type_string))
			json_object_object_add(d, keys[i], json_object_get(v));
	}
	json_object_put(rec);
	if (statvfs(app->cfg.state_dir, &vfs) < 0)
		return d;
	int64_t free_bytes = (int64_t)((uint64_t)vfs.f_bavail * vfs.f_frsize);
	int64_t growth = json_object_get_int64(json_object_object_get(d, "promisedBytes")) -
			 json_object_get_int64(json_object_object_get(d, "usedBytes"));
	json_object_object_add(d, "freeBytes", json_object_new_int64(free_bytes));
	if (free_bytes > 0 && json_object_object_get(d, "rooms"))
		json_object_object_add(d, "committed", json_object_new_double(
			(double)(growth > 0 ? growth : 0) / (double)free_bytes));
	return d;
}

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
	if (app->cfg.disk_limit)
		json_object_object_add(o, "disk", health_disk(app));
	/* how snapshots and forks copy a disk image here; none without images */
	json_object_object_add(o, "snapshotCopy", json_object_new_string(
		app->cfg.disk_limit ? snapshot_copy_method(app->cfg.state_dir) : "none"));
	response_json(rs, 200, o);
}
