/* Snapshots, restores and forks of rooms: /api/rooms/{id}/snapshots,
 * /snapshots/{sid}, /restore, /fork.
 *
 * The room's disk and sessions are root's: the helper copies them
 * (sandbox-helper/snapshot.c: the cut, its freeze, the copy method).  What
 * roombox-fcgi keeps of a room -- its managed processes' records and
 * their logs -- is kept here beside each snapshot, as of its 201
 * (process_store.h: procs_snapshot_*): a restore puts the snapshot's
 * records back in place of the room's, a fork gives them to the new room,
 * and a process that was running at the cut reads `lost` (no process is
 * carried).  Preview exposures are a room's addresses, not its disk: they
 * stay as they are across a restore, and a fork starts with none (a token
 * names one room).  Messages belong to the conversation and are never
 * touched.
 *
 * A snapshot's id (the helper's, 16 hex digits) and its name (the
 * client's) both follow the room-id rule; either names it.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "cluster.h"
#include "app.h"
#include "exec_channels.h"
#include "http.h"
#include "metrics.h"
#include "process_store.h"
#include "protocol.h"
#include "roomid.h"
#include "snapshots.h"
#include "validate.h"

/* S of the API from the helper's record. */
static json_object *snapshot_json(const char *room, const struct helper_snapshot *s)
{
	json_object *o = json_object_new_object();

	json_object_object_add(o, "id", json_object_new_string(s->id));
	json_object_object_add(o, "name", s->name[0] ? json_object_new_string(s->name) : NULL);
	json_object_object_add(o, "room", json_object_new_string(room));
	json_object_object_add(o, "createdAt", json_object_new_string(s->created_at));
	json_object_object_add(o, "size", json_object_new_int64((int64_t)s->size));
	return o;
}

/* An optional (or, required, a mandatory) string field of the body that
 * follows the room-id rule: its value in *out ("" when absent), or an
 * issue added to details. */
static void id_field(json_object *body, const char *key, bool required, const char **out,
		     json_object *details)
{
	json_object *v = NULL;
	bool present = json_object_object_get_ex(body, key, &v);
	char msg[128];

	*out = "";
	if (!present && !required)
		return;
	if (!json_object_is_type(v, json_type_string)) {
		snprintf(msg, sizeof(msg), "Invalid input: expected string, received %s",
			 zod_type_name(v, present));
		zod_issue(details, key, msg);
		return;
	}
	if (!room_id_valid(json_object_get_string(v))) {
		zod_issue(details, key, "Invalid string: must match pattern "
			  "/^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/");
		return;
	}
	*out = json_object_get_string(v);
}

/* The body checked: NULL, or the details of a 400 (answered). */
static bool body_invalid(struct response *rs, json_object *details)
{
	if (json_object_object_length(details) == 0) {
		json_object_put(details);
		return false;
	}
	response_invalid(rs, details);
	return true;
}

/* A helper failure: 404 for the room or the snapshot, 409 for a conflict,
 * the helper's words otherwise (host paths are never in them: the helper
 * names rooms and steps only). */
static void snap_failure(struct response *rs, const char *room, uint32_t op,
			 const struct helper_error *err)
{
	fprintf(stderr, "roombox-fcgi: room %s: %s: %s\n", room, helper_op_name(op), err->message);
	if (err->http_status == 429)
		response_error(rs, 429, "room limit reached");
	else if (err->http_status == 404 && strstr(err->message, ": snapshot "))   /* snapshot.c's words */
		response_error(rs, 404, "snapshot not found");
	else if (err->http_status == 404)
		response_error(rs, 404, "room not found");
	else
		response_error(rs, err->http_status, "%s", err->message);
}

/* The records' part of a snapshot is best effort: the room's disk and
 * sessions are what a snapshot promises; a failure here is logged. */
static void records_step(int rc, const char *why)
{
	if (rc < 0)
		fprintf(stderr, "roombox-fcgi: %s\n", why);
}

void api_snapshots_post(struct request *rq, struct response *rs)
{
	struct helper_target target = app_helper(rq->app);
	struct helper_snapshot s;
	struct helper_error err;
	json_object *details = json_object_new_object(), *answer;
	const char *name = "";
	char why[512];

	if (json_object_is_type(rq->body, json_type_object))
		id_field(rq->body, "name", false, &name, details);
	if (body_invalid(rs, details))
		return;
	if (helper_snapshot(&target, rq->room, name, &s, &err) < 0) {
		metrics_snapshot_op(SNAP_TAKE, false, 0);
		snap_failure(rs, rq->room, HOP_SNAPSHOT, &err);
		return;
	}
	metrics_snapshot_op(SNAP_TAKE, true, s.frozen_us);
	records_step(procs_snapshot_save(rq->room, s.id, why, sizeof(why)), why);
	answer = json_object_new_object();
	json_object_object_add(answer, "snapshot", snapshot_json(rq->room, &s));
	/* how long the room's processes stood still for it, in ms */
	json_object_object_add(answer, "frozenMs", json_object_new_double((double)s.frozen_us / 1000.0));
	response_json(rs, 201, answer);
}

void api_snapshots_list(struct request *rq, struct response *rs)
{
	struct helper_target target = app_helper(rq->app);
	struct helper_snapshot *list;
	struct helper_error err;
	size_t n;

	if (helper_snapshots(&target, rq->room, &list, &n, &err) < 0) {
		snap_failure(rs, rq->room, HOP_SNAPSHOTS, &err);
		return;
	}
	json_object *arr = json_object_new_array(), *answer = json_object_new_object();
	for (size_t i = 0; i < n; i++)
		json_object_array_add(arr, snapshot_json(rq->room, &list[i]));
	free(list);
	json_object_object_add(answer, "snapshots", arr);
	response_json(rs, 200, answer);
}

void api_snapshots_delete(struct request *rq, struct response *rs)
{
	struct helper_target target = app_helper(rq->app);
	struct helper_snapshot s;
	struct helper_error err;

	if (!rq->rest || !room_id_valid(rq->rest)) {
		response_error(rs, 400, "invalid snapshot id");
		return;
	}
	if (helper_snapshot_delete(&target, rq->room, rq->rest, &s, &err) < 0) {
		metrics_snapshot_op(SNAP_DELETE, false, 0);
		snap_failure(rs, rq->room, HOP_SNAPSHOT_DELETE, &err);
		return;
	}
	metrics_snapshot_op(SNAP_DELETE, true, 0);
	procs_snapshot_remove(rq->room, s.id);
	json_object *answer = json_object_new_object();
	json_object_object_add(answer, "deleted", json_object_new_string(s.id));
	response_json(rs, 200, answer);
}

void api_rooms_restore(struct request *rq, struct response *rs)
{
	struct helper_target target = app_helper(rq->app);
	struct helper_snapshot s;
	struct helper_error err;
	json_object *details = json_object_new_object();
	const char *ref = "";
	char why[512];

	if (json_object_is_type(rq->body, json_type_object))
		id_field(rq->body, "snapshot", true, &ref, details);
	else
		zod_issue(details, "snapshot", "Invalid input: expected string, received undefined");
	if (body_invalid(rs, details))
		return;
	procs_room_stopping(rq->room, true);   /* its managed processes are lost */
	if (helper_restore(&target, rq->room, ref, &s, &err) < 0) {
		procs_room_stopping(rq->room, false);
		metrics_snapshot_op(SNAP_RESTORE, false, 0);
		snap_failure(rs, rq->room, HOP_RESTORE, &err);
		return;
	}
	metrics_snapshot_op(SNAP_RESTORE, true, 0);
	exec_channel_forget(rq->room);
	records_step(procs_snapshot_restore(rq->room, s.id, rq->room, why, sizeof(why)), why);
	metrics_room_started(ROOM_START_RESTART);
	json_object *answer = json_object_new_object();
	json_object_object_add(answer, "restored", json_object_new_string(s.id));
	response_json(rs, 200, answer);
}

/* The new room's records: the snapshot's, or the room's now (kept for
 * the moment under a name no snapshot id takes). */
static void fork_records(const char *room, const char *sid, const char *to)
{
	char tmp[ROOM_ID_MAX + 8], why[512];

	if (sid[0]) {
		records_step(procs_snapshot_restore(room, sid, to, why, sizeof(why)), why);
		return;
	}
	snprintf(tmp, sizeof(tmp), "fork-%.*s", ROOM_ID_MAX, to);
	if (procs_snapshot_save(room, tmp, why, sizeof(why)) == 0)
		records_step(procs_snapshot_restore(room, tmp, to, why, sizeof(why)), why);
	else
		records_step(-1, why);
	procs_snapshot_remove(room, tmp);
}

void api_rooms_fork(struct request *rq, struct response *rs)
{
	struct helper_target target = app_helper(rq->app);
	struct helper_snapshot s;
	struct helper_error err;
	json_object *details = json_object_new_object();
	const char *to = "", *ref = "";

	if (json_object_is_type(rq->body, json_type_object)) {
		id_field(rq->body, "to", true, &to, details);
		id_field(rq->body, "snapshot", false, &ref, details);
	}
	if (!json_object_is_type(rq->body, json_type_object) ||
	    (to[0] && strcmp(to, rq->room) == 0))
		zod_issue(details, "to", "Invalid input: a new room, not this one");
	if (body_invalid(rs, details))
		return;
	if (!cluster_room_claim(to, rs))   /* cluster mode: the new room is this host's */
		return;
	int forked = helper_fork(&target, rq->room, ref, to, &s, &err);
	cluster_room_claim_end(to);
	if (forked < 0) {
		metrics_snapshot_op(SNAP_FORK, false, 0);
		size_t n = strlen(err.message);

		if (err.http_status == 409 && n > 7 && !strcmp(err.message + n - 7, " exists"))
			response_error(rs, 409, "room %s exists", to);
		else
			snap_failure(rs, rq->room, HOP_FORK, &err);
		cluster_room_unmade(rq->app, to, false);   /* no room made: no placement */
		return;
	}
	metrics_snapshot_op(SNAP_FORK, true, s.frozen_us);
	fork_records(rq->room, s.id, to);
	json_object *answer = json_object_new_object();
	json_object_object_add(answer, "roomId", json_object_new_string(to));
	response_json(rs, 201, answer);
}

/* ---- how the state directory copies (GET /api/health) ---- */

static pthread_once_t copy_once = PTHREAD_ONCE_INIT;
static const char *copy_method = SNAP_COPY_SPARSE;
static char copy_dir[4096];

/* One block cloned between two files of ours beside the helper's: where
 * FICLONE works there, it works for the rooms' images too (one file
 * system).  <state_dir>/messages is ours and on it. */
static void copy_probe(void)
{
	char a[4200], b[4200], block[4096];
	memset(block, 'x', sizeof(block));
	snprintf(a, sizeof(a), "%s/messages/.reflink-probe-a.%d", copy_dir, (int)getpid());
	snprintf(b, sizeof(b), "%s/messages/.reflink-probe-b.%d", copy_dir, (int)getpid());
	int fa = open(a, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	int fb = open(b, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fa >= 0 && fb >= 0 && write(fa, block, sizeof(block)) == (ssize_t)sizeof(block) &&
	    fsync(fa) == 0 && ioctl(fb, FICLONE, fa) == 0)
		copy_method = SNAP_COPY_REFLINK;
	if (fa >= 0)
		close(fa);
	if (fb >= 0)
		close(fb);
	unlink(a);
	unlink(b);
}

const char *snapshot_copy_method(const char *state_dir)
{
	if (!copy_dir[0])
		snprintf(copy_dir, sizeof(copy_dir), "%s", state_dir);
	pthread_once(&copy_once, copy_probe);
	return copy_method;
}
