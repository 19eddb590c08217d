/* roomboxctl's cluster verbs (see cluster.h).
 *
 * etcd is the truth: /roombox/hosts/<host> = {"url","state"} (under the
 * host's lease, so a host that stopped is absent) and /roombox/rooms/<id> =
 * {"host","epoch"}.  The router only follows it:
 *
 *   route-sync   makes the router's map (hosts.map: room -> server) equal
 *                to /roombox/rooms/ with the fewest set/add/del map
 *                commands on its runtime socket, drops from previews.map
 *                (token -> room, which the router fills itself) the tokens
 *                of rooms that are gone, and gives each server the
 *                weight of its host's state (maint: 0, so the consistent
 *                hash sends no new room there; rooms in the map still go
 *                to it).  The maps' files are rewritten too, so a restarted
 *                HAProxy starts from the last sync.  Run it after anything
 *                moves or is created; running it again changes nothing.
 *   move         one room to another host (move.c), the router's map
 *                flipped to it just before the commit; move --abort ROOM
 *                ends a move whose mover died (its moving key deleted).
 *   drain/undrain  set the host's state in etcd (a txn on the key's
 *                mod_revision, keeping its lease), then route-sync's
 *                weights; drain then moves the host's rooms, one at a
 *                time, each to the ready host with the fewest rooms (the
 *                map flipped as for move).
 *
 * The backend's name, roombox_hosts, is conf/haproxy-cluster.cfg.example's;
 * its servers are named as the hosts' cluster_host. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <json-c/json.h>

#include "cluster.h"
#include "etcd.h"
#include "haproxy.h"
#include "move.h"
#include "roomid.h"

#define HOSTS_PREFIX "/roombox/hosts/"
#define MOVING_PREFIX "/roombox/moving/"
#define ROOMS_PREFIX "/roombox/rooms/"
#define BACKEND "roombox_hosts"
#define MAP_SUFFIX "/hosts.map"
#define BATCH_CHARS 8000
/* an operator can wait for a slow member: each is given this long (one
 * that lost its quorum says so at once: require_leader below) */
#define ETCD_MEMBER_MS 5000L

bool cluster_is_verb(const char *verb)
{
	static const char *const verbs[] = { "hosts", "where", "route-sync", "move", "drain", "undrain",
					     NULL };

	for (int i = 0; verbs[i]; i++)
		if (strcmp(verb, verbs[i]) == 0)
			return true;
	return false;
}

static const char *field(json_object *o, const char *key)
{
	json_object *v;

	return o && json_object_object_get_ex(o, key, &v) ? json_object_get_string(v) : NULL;
}

static bool host_name_ok(const char *h)
{
	size_t n = strlen(h);

	if (n < 1 || n > 32)
		return false;
	return strspn(h, "abcdefghijklmnopqrstuvwxyz0123456789-") == n;
}

/* The rooms and hosts as etcd has them. */
struct placement {
	struct etcd_kv *rooms, *hosts;
	int nrooms, nhosts;
	json_object **room_json;     /* parsed values, per room */
	bool stale;                  /* one member's copy: why says why */
	char why[512];               /* and why a load failed */
};

static void placement_free(struct placement *p)
{
	for (int i = 0; p->room_json && i < p->nrooms; i++)
		json_object_put(p->room_json[i]);
	free(p->room_json);
	etcd_kvs_free(p->rooms, p->nrooms);
	etcd_kvs_free(p->hosts, p->nhosts);
}

/* Every key under prefix (a stale copy allowed: see placement). */
static int load_prefix(struct etcd *e, struct placement *p, const char *prefix,
		       struct etcd_kv **kvs, int *n)
{
	char end[64], why[sizeof(p->why)];
	size_t got;
	int64_t rev;
	bool stale;

	etcd_prefix_end(prefix, end, sizeof(end));
	if (etcd_range(e, prefix, end, kvs, &got, &rev, &stale, why, sizeof(why)) < 0) {
		snprintf(p->why, sizeof(p->why), "%s", why);
		return -1;
	}
	*n = (int)got;
	if (stale) {
		p->stale = true;
		snprintf(p->why, sizeof(p->why), "%s", why);
	}
	return 0;
}

static int placement_load(struct etcd *e, struct placement *p, bool rooms_too)
{
	memset(p, 0, sizeof(*p));
	if (load_prefix(e, p, HOSTS_PREFIX, &p->hosts, &p->nhosts) < 0)
		return -1;
	if (!rooms_too)
		return 0;
	if (load_prefix(e, p, ROOMS_PREFIX, &p->rooms, &p->nrooms) < 0)
		return -1;
	p->room_json = calloc((size_t)p->nrooms + 1, sizeof(*p->room_json));
	for (int i = 0; p->room_json && i < p->nrooms; i++)
		p->room_json[i] = json_tokener_parse(p->rooms[i].value);
	return p->room_json ? 0 : -1;
}

static const char *room_host(const struct placement *p, int i)
{
	return field(p->room_json[i], "host");
}

static int rooms_on(const struct placement *p, const char *host)
{
	int n = 0;

	for (int i = 0; i < p->nrooms; i++) {
		const char *h = room_host(p, i);

		n += h && strcmp(h, host) == 0;
	}
	return n;
}

static void warn_stale(const struct placement *p)
{
	if (p->stale)
		fprintf(stderr, "roomboxctl: %s\n", p->why);
}

/* ---- hosts, where ---- */

static int verb_hosts(struct etcd *e)
{
	struct placement p;

	if (placement_load(e, &p, true) < 0) {
		fprintf(stderr, "roomboxctl: %s\n", p.why);
		return 1;
	}
	warn_stale(&p);
	printf("%-20s %-6s %6s  %s\n", "HOST", "STATE", "ROOMS", "URL");
	for (int i = 0; i < p.nhosts; i++) {
		json_object *v = json_tokener_parse(p.hosts[i].value);
		const char *name = p.hosts[i].key + strlen(HOSTS_PREFIX);

		printf("%-20s %-6s %6d  %s\n", name, field(v, "state") ?: "?", rooms_on(&p, name),
		       field(v, "url") ?: "?");
		json_object_put(v);
	}
	/* Hosts that hold rooms but have no live key: down (their lease ran out). */
	for (int i = 0; i < p.nrooms; i++) {
		const char *h = room_host(&p, i);
		char key[128];
		bool seen = false;

		if (!h)
			continue;
		snprintf(key, sizeof(key), HOSTS_PREFIX "%s", h);
		for (int k = 0; k < p.nhosts && !seen; k++)
			seen = strcmp(p.hosts[k].key, key) == 0;
		for (int j = 0; j < i && !seen; j++)
			seen = room_host(&p, j) && strcmp(room_host(&p, j), h) == 0;
		if (!seen)
			printf("%-20s %-6s %6d  %s\n", h, "down", rooms_on(&p, h), "-");
	}
	placement_free(&p);
	return 0;
}

static int verb_where(const struct cluster_ctl *c, struct etcd *e, const char *room)
{
	struct etcd_kv kv = { 0 }, hk = { 0 };
	char key[160], err[512], *map, *ans = NULL, cmd[600];
	json_object *v;
	const char *host;
	bool stale;
	int rc;

	if (!room_id_valid(room)) {
		fprintf(stderr, "roomboxctl: invalid room id '%s'\n", room);
		return 2;
	}
	snprintf(key, sizeof(key), ROOMS_PREFIX "%s", room);
	rc = etcd_get(e, key, &kv, &stale, err, sizeof(err));
	if (rc < 0 || stale)
		fprintf(stderr, "roomboxctl: %s\n", err);
	if (rc < 0)
		return 1;
	if (rc == 0) {
		printf("room %s: not placed (no record in etcd): the next request that creates it "
		       "places it\n", room);
		return 1;
	}
	v = json_tokener_parse(kv.value);
	host = field(v, "host") ?: "?";
	snprintf(key, sizeof(key), HOSTS_PREFIX "%s", host);
	rc = etcd_get(e, key, &hk, &stale, err, sizeof(err));
	if (rc == 1) {
		json_object *hv = json_tokener_parse(hk.value);

		printf("room %s: host %s (epoch %s), %s at %s\n", room, host, field(v, "epoch") ?: "?",
		       field(hv, "state") ?: "?", field(hv, "url") ?: "?");
		json_object_put(hv);
	} else {
		printf("room %s: host %s (epoch %s), down (no live record of it)\n", room, host,
		       field(v, "epoch") ?: "?");
	}
	etcd_kv_clear(&hk);
	/* a move in flight (or left by a mover that died: move --abort) */
	snprintf(key, sizeof(key), MOVING_PREFIX "%s", room);
	if (etcd_get(e, key, &hk, &stale, err, sizeof(err)) == 1)
		printf("moving: %s (the room answers 503 until the move ends; a mover that died "
		       "leaves this: roomboxctl move --abort %s)\n", hk.value, room);
	etcd_kv_clear(&hk);
	/* What the router would do: its map's entry. */
	map = haproxy_find_map(c->haproxy_socket, MAP_SUFFIX, err, sizeof(err));
	if (map) {
		snprintf(cmd, sizeof(cmd), "get map %s %s", map, room);
		if (haproxy_cmd(c->haproxy_socket, cmd, &ans, err, sizeof(err)) == 0) {
			char *val = strstr(ans, "value=\"");

			if (strstr(ans, "found=yes") && val)
				printf("router: %.*s\n", (int)strcspn(val + 7, "\""), val + 7);
			else
				printf("router: not in its map (placed by the hash; route-sync adds it)\n");
		}
		free(ans);
		free(map);
	}
	json_object_put(v);
	etcd_kv_clear(&kv);
	return 0;
}

/* ---- route-sync ---- */

struct entry {
	char *room, *host;
};

static int by_room(const void *a, const void *b)
{
	return strcmp(((const struct entry *)a)->room, ((const struct entry *)b)->room);
}

/* `show map FILE`: "0x... key value" lines. */
static int map_read(const char *sock, const char *map, struct entry **out, int *n,
		    char *err, size_t errlen)
{
	char cmd[600], *ans, *line, *save = NULL;
	int cap = 0;

	snprintf(cmd, sizeof(cmd), "show map %s", map);
	if (haproxy_cmd(sock, cmd, &ans, err, errlen) < 0)
		return -1;
	*out = NULL;
	*n = 0;
	for (line = strtok_r(ans, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char id[64], room[128], host[128];

		if (sscanf(line, "%63s %127s %127s", id, room, host) != 3 || strncmp(id, "0x", 2) != 0)
			continue;
		if (*n == cap) {
			cap = cap ? cap * 2 : 256;
			*out = realloc(*out, (size_t)cap * sizeof(**out));
		}
		(*out)[*n].room = strdup(room);
		(*out)[*n].host = strdup(host);
		(*n)++;
	}
	free(ans);
	if (*n)
		qsort(*out, (size_t)*n, sizeof(**out), by_room);
	return 0;
}

static void entries_free(struct entry *e, int n)
{
	for (int i = 0; i < n; i++) {
		free(e[i].room);
		free(e[i].host);
	}
	free(e);
}

/* Commands gathered into ';'-joined lines of at most BATCH_CHARS. */
struct batch {
	const char *sock;
	char buf[BATCH_CHARS + 700];
	size_t len;
	int failed;
	char err[512];
};

static void batch_flush(struct batch *b)
{
	char *ans = NULL;

	if (!b->len)
		return;
	if (haproxy_cmd(b->sock, b->buf, &ans, b->err, sizeof(b->err)) < 0)
		b->failed++;
	else if (ans && strspn(ans, "\n") != strlen(ans)) {
		/* set/add/del map answer nothing when they succeed */
		snprintf(b->err, sizeof(b->err), "haproxy: %.*s", (int)strcspn(ans, "\n"), ans);
		b->failed++;
	}
	free(ans);
	b->len = 0;
}

static void batch_add(struct batch *b, const char *cmd)
{
	size_t n = strlen(cmd);

	if (b->len && b->len + n + 1 > BATCH_CHARS)
		batch_flush(b);
	if (b->len)
		b->buf[b->len++] = ';';
	memcpy(b->buf + b->len, cmd, n + 1);
	b->len += n;
}

/* The map's file as the runtime map now is, so a restarted router starts
 * from here: written beside it and renamed over it. */
static int map_file_write(const char *path, const struct entry *want, int n, const char *what)
{
	char tmp[4200];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f)
		return -1;
	fprintf(f, "# %s\n", what);
	for (int i = 0; i < n; i++)
		fprintf(f, "%s %s\n", want[i].room, want[i].host);
	if (fclose(f) != 0 || rename(tmp, path) != 0) {
		unlink(tmp);
		return -1;
	}
	return 0;
}

/* Each server's weight from its host's state: maint 0, anything else 1.
 * One command each (a handful of hosts), so that a host the router has no
 * server for is named. */
static int sync_weights(const char *sock, const struct placement *p)
{
	char cmd[256], err[512], *ans;
	int failed = 0;

	for (int i = 0; i < p->nhosts; i++) {
		json_object *v = json_tokener_parse(p->hosts[i].value);
		const char *name = p->hosts[i].key + strlen(HOSTS_PREFIX), *st = field(v, "state");

		if (host_name_ok(name)) {
			snprintf(cmd, sizeof(cmd), "set server " BACKEND "/%s weight %d", name,
				 st && strcmp(st, "maint") == 0 ? 0 : 1);
			if (haproxy_cmd(sock, cmd, &ans, err, sizeof(err)) < 0) {
				fprintf(stderr, "roomboxctl: route-sync: %s\n", err);
				failed++;
			} else if (strstr(ans, "No such")) {
				fprintf(stderr, "roomboxctl: route-sync: the router has no server %s in "
					"backend " BACKEND ": add one for host %s\n", name, name);
				failed++;
			}
			free(ans);
		}
		json_object_put(v);
	}
	return failed;
}

/* previews.map (preview token -> room id), filled by the router itself
 * from the answers that expose ports: tokens of rooms etcd no longer has
 * are deleted, and the map is written to its file, so a restarted router
 * still knows the tokens of the last sync.  A router without it: 0. */
static int sync_previews(const char *sock, struct entry *rooms, int nrooms, int *pruned)
{
	struct entry *have = NULL, key;
	struct batch b = { .sock = sock };
	char err[512], cmd[700], *map;
	int n = 0, keep = 0;

	*pruned = 0;
	map = haproxy_find_map(sock, "/previews.map", err, sizeof(err));
	if (!map)
		return 0;
	if (map_read(sock, map, &have, &n, err, sizeof(err)) < 0) {
		fprintf(stderr, "roomboxctl: route-sync: %s\n", err);
		free(map);
		return 1;
	}
	for (int i = 0; i < n; i++) {
		key.room = have[i].host;     /* the value: a room id */
		if (bsearch(&key, rooms, (size_t)nrooms, sizeof(*rooms), by_room)) {
			have[keep++] = have[i];
			continue;
		}
		snprintf(cmd, sizeof(cmd), "del map %s %s", map, have[i].room);
		batch_add(&b, cmd);
		(*pruned)++;
		free(have[i].room);
		free(have[i].host);
	}
	batch_flush(&b);
	if (b.failed)
		fprintf(stderr, "roomboxctl: route-sync: %s\n", b.err);
	qsort(have, (size_t)keep, sizeof(*have), by_room);
	if (map_file_write(map, have, keep, "preview token -> room: the router's own, "
			   "written by roomboxctl route-sync") < 0)
		fprintf(stderr, "roomboxctl: route-sync: could not rewrite %s: %s\n", map,
			strerror(errno));
	entries_free(have, keep);
	free(map);
	return b.failed ? 1 : 0;
}

static int route_sync(const struct cluster_ctl *c, struct etcd *e, bool quiet)
{
	struct placement p;
	struct entry *have = NULL, *want;
	struct batch b = { .sock = c->haproxy_socket };
	char err[512], cmd[700], *map;
	int nhave = 0, nwant = 0, added = 0, changed = 0, removed = 0, pruned = 0, i, j;

	if (placement_load(e, &p, true) < 0) {
		fprintf(stderr, "roomboxctl: %s\n", p.why);
		return 1;
	}
	if (p.stale) {
		/* a stale copy could take rooms off the map that etcd still has */
		fprintf(stderr, "roomboxctl: route-sync: %s: the map is left as it is\n", p.why);
		placement_free(&p);
		return 1;
	}
	map = haproxy_find_map(c->haproxy_socket, MAP_SUFFIX, err, sizeof(err));
	if (!map || map_read(c->haproxy_socket, map, &have, &nhave, err, sizeof(err)) < 0) {
		fprintf(stderr, "roomboxctl: route-sync: %s\n", err);
		free(map);
		placement_free(&p);
		return 1;
	}
	want = calloc((size_t)p.nrooms + 1, sizeof(*want));
	for (i = 0; i < p.nrooms; i++) {
		const char *room = p.rooms[i].key + strlen(ROOMS_PREFIX), *h = room_host(&p, i);

		if (room_id_valid(room) && h && host_name_ok(h)) {
			want[nwant].room = strdup(room);
			want[nwant].host = strdup(h);
			nwant++;
		}
	}
	qsort(want, (size_t)nwant, sizeof(*want), by_room);
	/* A merge of the two sorted lists. */
	for (i = 0, j = 0; i < nwant || j < nhave;) {
		int d = i == nwant ? 1 : j == nhave ? -1 : strcmp(want[i].room, have[j].room);

		if (d < 0) {
			snprintf(cmd, sizeof(cmd), "add map %s %s %s", map, want[i].room, want[i].host);
			added++;
			i++;
		} else if (d > 0) {
			snprintf(cmd, sizeof(cmd), "del map %s %s", map, have[j].room);
			removed++;
			j++;
		} else {
			cmd[0] = '\0';
			if (strcmp(want[i].host, have[j].host) != 0) {
				snprintf(cmd, sizeof(cmd), "set map %s %s %s", map, want[i].room,
					 want[i].host);
				changed++;
			}
			i++;
			j++;
		}
		if (cmd[0])
			batch_add(&b, cmd);
	}
	batch_flush(&b);
	b.failed += sync_weights(c->haproxy_socket, &p);
	b.failed += sync_previews(c->haproxy_socket, want, nwant, &pruned);
	if (map_file_write(map, want, nwant, "room -> host: written by roomboxctl route-sync "
			   "from etcd's /roombox/rooms/") < 0)
		fprintf(stderr, "roomboxctl: route-sync: could not rewrite %s: %s (the router's "
			"map itself is synced)\n", map, strerror(errno));
	if (b.failed)
		fprintf(stderr, "roomboxctl: route-sync: %s\n", b.err);
	else if (!quiet)
		printf("route-sync: %d rooms; %d added, %d changed, %d removed (map %s); "
		       "%d preview tokens of deleted rooms dropped\n", nwant, added, changed, removed,
		       map, pruned);
	entries_free(want, nwant);
	entries_free(have, nhave);
	free(map);
	placement_free(&p);
	return b.failed ? 1 : 0;
}

/* ---- drain, undrain ---- */

/* move_flip for move_room: the room's entry in the router's map. */
static void flip_map(void *ctx, const char *room, const char *host)
{
	const struct cluster_ctl *c = ctx;
	char err[512], cmd[700], *map, *ans = NULL;

	if (access(c->haproxy_socket, F_OK) != 0)
		return;
	map = haproxy_find_map(c->haproxy_socket, MAP_SUFFIX, err, sizeof(err));
	if (!map)
		return;
	/* set for an entry that is there, add for one that is not */
	snprintf(cmd, sizeof(cmd), "del map %s %s;add map %s %s %s", map, room, map, room, host);
	if (haproxy_cmd(c->haproxy_socket, cmd, &ans, err, sizeof(err)) < 0)
		fprintf(stderr, "roomboxctl: %s (route-sync will set it)\n", err);
	free(ans);
	free(map);
}

/* Every room of host, each to the ready host with the fewest rooms; the
 * number that failed. */
static int drain_moves(const struct cluster_ctl *c, struct etcd *e, const char *host, bool router)
{
	struct placement p;
	int failed = 0, moved = 0;

	if (placement_load(e, &p, true) < 0 || p.stale) {
		fprintf(stderr, "roomboxctl: drain %s: %s\n", host, p.why);
		if (!p.stale)
			return 1;
		placement_free(&p);
		return 1;
	}
	int *count = calloc((size_t)p.nhosts + 1, sizeof(*count));
	bool *ready = calloc((size_t)p.nhosts + 1, sizeof(*ready));

	for (int k = 0; k < p.nhosts; k++) {
		json_object *v = json_tokener_parse(p.hosts[k].value);
		const char *name = p.hosts[k].key + strlen(HOSTS_PREFIX), *st = field(v, "state");

		ready[k] = st && strcmp(st, "ready") == 0 && strcmp(name, host) != 0;
		count[k] = rooms_on(&p, name);
		json_object_put(v);
	}
	for (int i = 0; i < p.nrooms; i++) {
		const char *h = room_host(&p, i), *room = p.rooms[i].key + strlen(ROOMS_PREFIX);
		int best = -1;

		if (!h || strcmp(h, host) != 0 || !room_id_valid(room))
			continue;
		for (int k = 0; k < p.nhosts; k++)
			if (ready[k] && (best < 0 || count[k] < count[best]))
				best = k;
		if (best < 0) {
			fprintf(stderr, "roomboxctl: drain %s: no other host is ready to take its rooms\n",
				host);
			failed++;
			break;
		}
		if (move_room(e, c->key_file, room, p.hosts[best].key + strlen(HOSTS_PREFIX),
			      router ? flip_map : NULL, (void *)c) == 0) {
			count[best]++;
			moved++;
		} else {
			failed++;
		}
	}
	if (moved || failed)
		printf("host %s: %d room%s moved, %d not\n", host, moved, moved == 1 ? "" : "s", failed);
	free(count);
	free(ready);
	placement_free(&p);
	return failed;
}

static int set_state(const struct cluster_ctl *c, struct etcd *e, const char *host, const char *state)
{
	char key[128], err[512];
	struct etcd_kv kv = { 0 };
	struct placement p;
	bool stale, done = false;
	int rc, left;

	if (!host_name_ok(host)) {
		fprintf(stderr, "roomboxctl: invalid host name '%s'\n", host);
		return 2;
	}
	snprintf(key, sizeof(key), HOSTS_PREFIX "%s", host);
	for (int tries = 0; tries < 10; tries++) {
		json_object *v;

		rc = etcd_get(e, key, &kv, &stale, err, sizeof(err));
		if (rc < 0 || stale) {
			fprintf(stderr, "roomboxctl: %s\n", err);
			etcd_kv_clear(&kv);
			return 1;
		}
		if (rc == 0) {
			fprintf(stderr, "roomboxctl: host %s is not up (no %s in etcd)\n", host, key);
			return 1;
		}
		v = json_tokener_parse(kv.value);
		if (!v || !json_object_is_type(v, json_type_object)) {
			fprintf(stderr, "roomboxctl: %s holds no JSON object\n", key);
			json_object_put(v);
			etcd_kv_clear(&kv);
			return 1;
		}
		json_object_object_add(v, "state", json_object_new_string(state));
		rc = etcd_put_if_unchanged(e, key, json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN),
					   kv.mod_rev, &done, err, sizeof(err));
		json_object_put(v);
		etcd_kv_clear(&kv);
		if (rc < 0) {
			fprintf(stderr, "roomboxctl: %s\n", err);
			return 1;
		}
		if (done)
			break;
	}
	if (!done) {
		fprintf(stderr, "roomboxctl: %s kept changing; try again\n", key);
		return 1;
	}
	/* The router's weights follow (a router that is not there is not an error). */
	bool router = access(c->haproxy_socket, F_OK) == 0;
	int failed = router ? route_sync(c, e, true) : 0;

	if (strcmp(state, "maint") == 0)
		failed += drain_moves(c, e, host, router);
	if (placement_load(e, &p, true) < 0) {
		fprintf(stderr, "roomboxctl: %s\n", p.why);
		return 1;
	}
	left = rooms_on(&p, host);
	placement_free(&p);
	if (strcmp(state, "maint") == 0)
		printf("host %s: maint (no new rooms go to it); %d room%s still on it\n", host, left,
		       left == 1 ? "" : "s");
	else
		printf("host %s: ready (%d room%s on it)\n", host, left, left == 1 ? "" : "s");
	return failed || (strcmp(state, "maint") == 0 && left) ? 1 : 0;
}

static int verb_move(const struct cluster_ctl *c, struct etcd *e, const char *room, const char *to)
{
	int rc;

	if (strcmp(room, "--abort") == 0) {
		/* move --abort ROOM */
		if (!room_id_valid(to)) {
			fprintf(stderr, "roomboxctl: invalid room id '%s'\n", to);
			return 2;
		}
		return move_abort(e, to, flip_map, (void *)c) ? 1 : 0;
	}
	if (!room_id_valid(room) || !host_name_ok(to)) {
		fprintf(stderr, "roomboxctl: invalid %s '%s'\n", room_id_valid(room) ? "host name" : "room id",
			room_id_valid(room) ? to : room);
		return 2;
	}
	rc = move_room(e, c->key_file, room, to, flip_map, (void *)c);
	return rc ? 1 : 0;
}

/* restore ROOM --to HOST --from FILE [--force]: the room's host lost for
 * good, the room brought back from its backup; then route-sync. */
static int verb_restore(const struct cluster_ctl *c, struct etcd *e, int argc, char **argv)
{
	const char *room = argv[1], *to = NULL, *file = NULL;
	bool force = false;
	int rc;

	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--force") == 0)
			force = true;
		else if (strcmp(argv[i], "--to") == 0 && i + 1 < argc)
			to = argv[++i];
		else if (strcmp(argv[i], "--from") == 0 && i + 1 < argc)
			file = argv[++i];
		else
			to = file = NULL, i = argc;
	}
	if (!to || !file) {
		fprintf(stderr, "roomboxctl: usage: restore ROOM --to HOST --from FILE [--force]\n");
		return 2;
	}
	if (!room_id_valid(room) || !host_name_ok(to)) {
		fprintf(stderr, "roomboxctl: invalid %s '%s'\n", room_id_valid(room) ? "host name" : "room id",
			room_id_valid(room) ? to : room);
		return 2;
	}
	rc = restore_room(e, c->key_file, room, to, file, force, flip_map, (void *)c);
	if (rc == 0)
		rc = route_sync(c, e, true);
	return rc ? 1 : 0;
}

int cluster_verb(const struct cluster_ctl *c, int argc, char **argv)
{
	const char *verb = argv[0];
	struct etcd e;
	char err[512];
	int rc;

	if (!((strcmp(verb, "hosts") == 0 || strcmp(verb, "route-sync") == 0) && argc == 1) &&
	    !((strcmp(verb, "where") == 0 || strcmp(verb, "drain") == 0 ||
	       strcmp(verb, "undrain") == 0) && argc == 2) &&
	    !(strcmp(verb, "move") == 0 && argc == 3) &&
	    !(strcmp(verb, "restore") == 0 && argc >= 2))
		return -1;
	if (etcd_init(&e, c->etcd, err, sizeof(err)) < 0) {
		fprintf(stderr, "roomboxctl: %s (cluster_etcd, or -e URLS)\n", err);
		return 1;
	}
	e.timeout_ms = ETCD_MEMBER_MS * e.n;
	/* with its quorum lost a member would hold each call for all of that:
	 * it says "no leader" at once instead (etcd.h) */
	e.require_leader = true;
	if (strcmp(verb, "hosts") == 0)
		rc = verb_hosts(&e);
	else if (strcmp(verb, "where") == 0)
		rc = verb_where(c, &e, argv[1]);
	else if (strcmp(verb, "route-sync") == 0)
		rc = route_sync(c, &e, false);
	else if (strcmp(verb, "move") == 0)
		rc = verb_move(c, &e, argv[1], argv[2]);
	else if (strcmp(verb, "restore") == 0)
		rc = verb_restore(c, &e, argc, argv);
	else
		rc = set_state(c, &e, argv[1], strcmp(verb, "drain") == 0 ? "maint" : "ready");
	return rc;
}
