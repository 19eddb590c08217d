/* roomboxctl: the operator's command line for a roombox service.
 *
 * Theory of operation
 * -------------------
 * roomboxctl reads the service's configuration (/etc/roombox/roombox.conf,
 * or -c FILE, e.g. .run/roombox.conf of `make run`) and then does one of two
 * things:
 *
 *   room and status verbs  ask roombox-fcgi itself, as a web server would:
 *                          one FastCGI request on the configuration's
 *                          `socket` (or -s SOCKET), with the first token of
 *                          `tokens_file` as its bearer token.  So every
 *                          rule of the API (authentication, room ids, the
 *                          helper's checks) holds for the operator too, the
 *                          request shows in the service's log and metrics
 *                          like any other, and no web server, port or URL
 *                          has to be known: the socket is in the file
 *                          roomboxctl already reads.
 *   token verbs            edit tokens_file (tokens.c); the service notices
 *                          the change on its next request.
 *   cluster verbs          read and write etcd and the router's runtime API
 *                          (cluster.c): hosts, where, route-sync, move, restore,
 *                          drain, undrain.  No token needed: moves are
 *                          signed with cluster_key_file.
 *
 * It never runs the setuid helper nor touches a room directly.  Reading the
 * tokens and connecting to the socket need what the service's own users
 * have: root, in practice.
 *
 * Exit status: 0 done; 1 the service or the file said no (the reason is
 * printed); 2 bad usage.  `exec` exits with the command's own status, and
 * with 125 when roomboxctl itself could not run it (as `docker run` does).
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <json-c/json.h>

#include "cluster.h"
#include "config.h"
#include "fcgi_client.h"
#include "room_io.h"
#include "roomid.h"
#include "textenc.h"
#include "tokens.h"

#define EXIT_EXEC_FAILED 125
#define REQUEST_TIMEOUT_S (11 * 60)   /* above exec_timeout_max's default */
/* conf/haproxy-cluster.cfg.example's stats socket */
#define HAPROXY_ADMIN "/run/roombox/haproxy-admin.sock"

struct ctl {
	struct config cfg;
	const char *config_path;
	const char *socket;        /* -s, else cfg.socket */
	struct cluster_ctl cluster;
	char *token;               /* NULL under auth = none */
};

struct answer {
	int status;
	json_object *json;         /* NULL if the body is not JSON */
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: roomboxctl [-c CONFIG] [-s SOCKET] [-e ETCD] [-a ADMIN] COMMAND [ARGS]\n"
		"  status              the service's version, cgroup mode and rooms\n"
		"  rooms               every room: state, processes, memory, disk, last activity\n"
		"  exec ROOM CMD...    run CMD in ROOM; prints its stdout and stderr, exits with its status\n"
		"  stop ROOM           stop the room's processes (files and session kept)\n"
		"  restart ROOM        stop and start the room again\n"
		"  destroy ROOM        delete the room: processes, files, messages\n"
		"  snapshot ROOM [NAME]   take a snapshot of the room (disk and sessions)\n"
		"  snapshots ROOM      the room's snapshots: id, name, size, when\n"
		"  restore ROOM SNAP   put the room back as snapshot SNAP (id or name) holds it\n"
		"  fork ROOM NEWROOM [SNAP]  a new room from ROOM now, or from its snapshot SNAP\n"
		"  export ROOM         the room as one archive, to stdout (cut as for a snapshot: it runs on)\n"
		"  import ROOM         a new room ROOM from an archive on stdin\n"
		"  backup DIR          every room exported to DIR/ROOM.roombox (each complete or absent)\n"
		"  token new           add a token to tokens_file and print it (once)\n"
		"  token list          the tokens' fingerprints (SHA-256, 12 hex digits)\n"
		"  token revoke FP     remove the token with that fingerprint\n"
		"cluster (etcd and the router, no token needed):\n"
		"  hosts               the cluster's hosts: state, rooms, URL (down: rooms but no live record)\n"
		"  where ROOM          the room's host and epoch, and the router's map entry\n"
		"  route-sync          make the router's map (room -> host) and weights match etcd\n"
		"  move ROOM HOST      move the room to HOST (signed with cluster_key_file); the router's map entry follows\n"
		"  move --abort ROOM   end a move whose mover died before its commit: the room serves from its host again\n"
		"  restore ROOM --to HOST --from FILE [--force]\n"
		"                      ROOM's host lost: import FILE (a backup) on HOST, then route-sync\n"
		"  drain HOST          put HOST in maint (no new rooms) and move its rooms to the ready hosts\n"
		"  undrain HOST        put HOST back in ready\n"
		"  -c CONFIG  configuration (default %s)\n"
		"  -s SOCKET  roombox-fcgi's FastCGI socket (default: `socket` of CONFIG)\n"
		"  -e ETCD    etcd client URLs, comma-separated (default: `cluster_etcd` of CONFIG)\n"
		"  -a ADMIN   HAProxy's admin socket (default %s)\n"
		"  -h, --help this text\n",
		ROOMBOX_CONF, HAPROXY_ADMIN);
}

/* ---- talking to roombox-fcgi ---- */

static int api(struct ctl *c, const char *method, const char *uri, json_object *body,
	       struct answer *ans)
{
	char auth[600] = "", length[24], err[512];
	const char *text = body ? json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN) : "";
	size_t len = strlen(text);
	struct fcgi_answer raw;

	if (c->token)
		snprintf(auth, sizeof(auth), "Bearer %s", c->token);
	snprintf(length, sizeof(length), "%zu", len);
	const char *params[] = {
		"REQUEST_METHOD", method, "REQUEST_URI", uri, "SCRIPT_NAME", uri,
		"CONTENT_TYPE", "application/json", "CONTENT_LENGTH", length,
		"SERVER_PROTOCOL", "HTTP/1.1", "GATEWAY_INTERFACE", "CGI/1.1",
		"SERVER_SOFTWARE", "roomboxctl", "REMOTE_ADDR", "127.0.0.1",
		c->token ? "HTTP_AUTHORIZATION" : NULL, auth, NULL, NULL,
	};

	memset(ans, 0, sizeof(*ans));
	if (fcgi_request(c->socket, params, text, len, REQUEST_TIMEOUT_S, &raw, err, sizeof(err)) < 0) {
		fprintf(stderr, "roomboxctl: %s %s: %s\n", method, uri, err);
		return -1;
	}
	ans->status = raw.status;
	ans->json = json_tokener_parse(raw.body);
	fcgi_answer_free(&raw);
	return 0;
}

static const char *str(json_object *o, const char *key)
{
	json_object *v;

	if (!json_object_object_get_ex(o, key, &v) || json_object_is_type(v, json_type_null))
		return NULL;
	return json_object_get_string(v);
}

static int64_t num(json_object *o, const char *key)
{
	json_object *v;

	return json_object_object_get_ex(o, key, &v) ? json_object_get_int64(v) : 0;
}

/* Print the service's refusal; always 1. */
static int refused(const char *what, const struct answer *ans)
{
	const char *e = ans->json ? str(ans->json, "error") : NULL;

	fprintf(stderr, "roomboxctl: %s: %d %s\n", what, ans->status, e ? e : "(no JSON answer)");
	if (ans->status == 401)
		fprintf(stderr, "roomboxctl: the token roomboxctl uses (the first of tokens_file) "
			"was refused\n");
	return 1;
}

static void answer_free(struct answer *ans)
{
	json_object_put(ans->json);
	ans->json = NULL;
}

static bool room_ok(const char *room)
{
	if (room_id_valid(room))
		return true;
	fprintf(stderr, "roomboxctl: invalid room id '%s'\n", room);
	return false;
}

/* ---- verbs ---- */

static void human_bytes(char *buf, size_t len, int64_t n)
{
	static const char *const units[] = { "B", "K", "M", "G", "T" };
	double v = (double)n;
	int u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	snprintf(buf, len, u ? "%.1f%s" : "%.0f%s", v, units[u]);
}

static int verb_status(struct ctl *c)
{
	struct answer h, r;
	json_object *rooms;
	long running = 0, total = 0;
	int rc = 1;

	if (api(c, "GET", "/api/health", NULL, &h) < 0)
		return 1;
	if (h.status != 200 || !h.json) {
		rc = refused("health", &h);
		answer_free(&h);
		return rc;
	}
	printf("roombox %s: ok (cgroup %s, auth %s, socket %s)\n", str(h.json, "version") ?: "?",
	       str(h.json, "cgroup") ?: "?", str(h.json, "auth") ?: "?", c->socket);
	answer_free(&h);
	if (api(c, "GET", "/api/rooms", NULL, &r) < 0)
		return 1;
	if (r.status == 200 && json_object_object_get_ex(r.json, "rooms", &rooms)) {
		total = (long)json_object_array_length(rooms);
		for (long i = 0; i < total; i++) {
			const char *st = str(json_object_array_get_idx(rooms, (size_t)i), "state");

			running += st && strcmp(st, "running") == 0;
		}
		printf("rooms: %ld (%ld running, %ld stopped)\n", total, running, total - running);
		rc = 0;
	} else {
		rc = refused("rooms", &r);
	}
	answer_free(&r);
	return rc;
}

static int verb_rooms(struct ctl *c)
{
	struct answer r;
	json_object *rooms;
	size_t i, n;

	if (api(c, "GET", "/api/rooms", NULL, &r) < 0)
		return 1;
	if (r.status != 200 || !json_object_object_get_ex(r.json, "rooms", &rooms)) {
		int rc = refused("rooms", &r);

		answer_free(&r);
		return rc;
	}
	n = json_object_array_length(rooms);
	printf("%-40s %-8s %5s %8s %8s  %s\n", "ROOM", "STATE", "PROCS", "MEMORY", "DISK",
	       "LAST ACTIVE");
	for (i = 0; i < n; i++) {
		json_object *st = json_object_array_get_idx(rooms, i), *usage = NULL;
		char mem[16], disk[16];

		json_object_object_get_ex(st, "usage", &usage);
		human_bytes(mem, sizeof(mem), num(usage, "memoryBytes"));
		human_bytes(disk, sizeof(disk), num(usage, "diskBytes"));
		printf("%-40s %-8s %5lld %8s %8s  %s\n", str(st, "roomId") ?: "?",
		       str(st, "state") ?: "?", (long long)num(usage, "processes"), mem, disk,
		       str(st, "lastActiveAt") ?: "-");
	}
	answer_free(&r);
	return 0;
}

static char *join_args(int argc, char **argv)
{
	size_t len = 1;
	char *cmd;

	for (int i = 0; i < argc; i++)
		len += strlen(argv[i]) + 1;
	cmd = calloc(1, len);
	for (int i = 0; cmd && i < argc; i++) {
		if (i)
			strcat(cmd, " ");
		strcat(cmd, argv[i]);
	}
	return cmd;
}

/* The command's output, its exact bytes: asked for in base64, so bytes
 * that are not UTF-8 come through as they were written.  0, or -1 when the
 * answer's field is not base64. */
static int put_stream(json_object *result, const char *key, FILE *f)
{
	json_object *v;
	unsigned char *bytes;
	size_t len = 0;

	if (!json_object_object_get_ex(result, key, &v))
		return -1;
	bytes = base64_decode(json_object_get_string(v), (size_t)json_object_get_string_len(v), &len);
	if (!bytes)
		return -1;
	fwrite(bytes, 1, len, f);
	fflush(f);
	free(bytes);
	return 0;
}

static int verb_exec(struct ctl *c, const char *room, int argc, char **argv)
{
	char uri[128], *cmd;
	json_object *body, *result;
	struct answer r;
	int code;

	if (!room_ok(room))
		return EXIT_EXEC_FAILED;
	cmd = join_args(argc, argv);
	if (!cmd) {
		fprintf(stderr, "roomboxctl: out of memory\n");
		return EXIT_EXEC_FAILED;
	}
	body = json_object_new_object();
	json_object_object_add(body, "cmd", json_object_new_string(cmd));
	json_object_object_add(body, "encoding", json_object_new_string("base64"));
	free(cmd);
	snprintf(uri, sizeof(uri), "/api/rooms/%s/sandbox/exec", room);
	code = api(c, "POST", uri, body, &r);
	json_object_put(body);
	if (code < 0)
		return EXIT_EXEC_FAILED;
	if (r.status != 200 || !json_object_object_get_ex(r.json, "result", &result)) {
		refused(uri, &r);
		answer_free(&r);
		return EXIT_EXEC_FAILED;
	}
	if (put_stream(result, "stdout", stdout) < 0 || put_stream(result, "stderr", stderr) < 0) {
		fprintf(stderr, "roomboxctl: %s: the answer's output is not base64\n", uri);
		answer_free(&r);
		return EXIT_EXEC_FAILED;
	}
	code = (int)num(result, "exitCode");
	if (json_object_get_boolean(json_object_object_get(result, "timedOut")))
		fprintf(stderr, "roomboxctl: room %s: the command timed out\n", room);
	answer_free(&r);
	return code & 0xff;
}

/* stop, restart, destroy: one request, a one-line report. */
static int verb_room_op(struct ctl *c, const char *verb, const char *room)
{
	char uri[128], what[160];
	const char *method = "POST", *done;
	struct answer r;
	json_object *errors;
	int rc = 0;

	if (!room_ok(room))
		return 1;
	if (strcmp(verb, "destroy") == 0) {
		method = "DELETE";
		snprintf(uri, sizeof(uri), "/api/rooms/%s", room);
		done = "destroyed";
	} else {
		snprintf(uri, sizeof(uri), "/api/rooms/%s/sandbox/%s", room, verb);
		done = strcmp(verb, "stop") == 0 ? "stopped" : "restarted";
	}
	if (api(c, method, uri, NULL, &r) < 0)
		return 1;
	snprintf(what, sizeof(what), "%s %s", verb, room);
	if (r.status == 207 && json_object_object_get_ex(r.json, "errors", &errors)) {
		for (size_t i = 0; i < json_object_array_length(errors); i++)
			fprintf(stderr, "roomboxctl: room %s: %s\n", room,
				json_object_get_string(json_object_array_get_idx(errors, i)));
		rc = 1;
	} else if (r.status != 200) {
		rc = refused(what, &r);
	} else {
		printf("room %s: %s\n", room, done);
	}
	answer_free(&r);
	return rc;
}

/* snapshot, snapshots, restore, fork: argv[0] the room, then the verb's
 * own arguments (checked by the service: its answer says what is wrong). */
static int verb_snapshot(struct ctl *c, const char *verb, int argc, char **argv)
{
	const char *room = argv[0], *method = "POST", *sub = "snapshots";
	json_object *body = json_object_new_object(), *list, *s;
	char uri[160], size[16];
	struct answer r;
	int want = 201, rc = 0;

	if (!room_ok(room)) {
		json_object_put(body);
		return 1;
	}
	if (strcmp(verb, "snapshot") == 0 && argc == 2) {
		json_object_object_add(body, "name", json_object_new_string(argv[1]));
	} else if (strcmp(verb, "snapshots") == 0) {
		method = "GET";
		want = 200;
		json_object_put(body);
		body = NULL;
	} else if (strcmp(verb, "restore") == 0) {
		sub = "restore";
		want = 200;
		json_object_object_add(body, "snapshot", json_object_new_string(argv[1]));
	} else if (strcmp(verb, "fork") == 0) {
		sub = "fork";
		json_object_object_add(body, "to", json_object_new_string(argv[1]));
		if (argc == 3)
			json_object_object_add(body, "snapshot", json_object_new_string(argv[2]));
	}
	snprintf(uri, sizeof(uri), "/api/rooms/%s/%s", room, sub);
	rc = api(c, method, uri, body, &r);
	json_object_put(body);
	if (rc < 0)
		return 1;
	if (r.status != want) {
		rc = refused(uri, &r);
	} else if (strcmp(verb, "snapshots") == 0 && json_object_object_get_ex(r.json, "snapshots", &list)) {
		printf("%-16s %-24s %8s  %s\n", "ID", "NAME", "SIZE", "CREATED");
		for (size_t i = 0; i < json_object_array_length(list); i++) {
			s = json_object_array_get_idx(list, i);
			human_bytes(size, sizeof(size), num(s, "size"));
			printf("%-16s %-24s %8s  %s\n", str(s, "id") ?: "?", str(s, "name") ?: "-", size,
			       str(s, "createdAt") ?: "?");
		}
	} else if (strcmp(verb, "snapshot") == 0 && json_object_object_get_ex(r.json, "snapshot", &s)) {
		printf("room %s: snapshot %s taken\n", room, str(s, "id") ?: "?");
	} else if (strcmp(verb, "restore") == 0) {
		printf("room %s: restored snapshot %s\n", room, str(r.json, "restored") ?: "?");
	} else {
		printf("room %s: forked to %s\n", room, str(r.json, "roomId") ?: "?");
	}
	answer_free(&r);
	return rc;
}

static int verb_token(struct ctl *c, int argc, char **argv)
{
	if (argc == 1 && strcmp(argv[0], "new") == 0)
		return tokens_new(c->cfg.tokens_file);
	if (argc == 1 && strcmp(argv[0], "list") == 0)
		return tokens_list(c->cfg.tokens_file);
	if (argc == 2 && strcmp(argv[0], "revoke") == 0)
		return tokens_revoke(c->cfg.tokens_file, argv[1]);
	usage(stderr);
	return 2;
}

/* ---- start ---- */

/* The service verbs need a token unless auth = none. */
static int load_token(struct ctl *c)
{
	char err[512];

	if (c->cfg.auth == AUTH_NONE)
		return 0;
	c->token = tokens_first(c->cfg.tokens_file, err, sizeof(err));
	if (!c->token) {
		fprintf(stderr, "roomboxctl: %s\n", err);
		return -1;
	}
	return 0;
}

/* Every room's id, from the service's list, then room_io_backup. */
static int verb_backup(struct ctl *c, const struct room_io *io, const char *dir)
{
	struct answer r;
	json_object *rooms = NULL;
	int n, rc;

	if (api(c, "GET", "/api/rooms", NULL, &r) < 0)
		return 1;
	if (r.status != 200 || !json_object_object_get_ex(r.json, "rooms", &rooms)) {
		rc = refused("rooms", &r);
		answer_free(&r);
		return rc;
	}
	n = (int)json_object_array_length(rooms);
	char **ids = calloc((size_t)n + 1, sizeof(*ids));
	for (int i = 0; ids && i < n; i++)
		ids[i] = (char *)str(json_object_array_get_idx(rooms, (size_t)i), "roomId");
	rc = ids ? room_io_backup(io, dir, ids, n) : 1;
	free(ids);
	answer_free(&r);
	return rc;
}

/* export, import, backup: streamed (room_io.c) */
static int verb_room_io(struct ctl *c, const char *verb, const char *arg)
{
	struct room_io io = { .socket = c->socket, .token = c->token };

	if (strcmp(verb, "backup") == 0)
		return verb_backup(c, &io, arg);
	if (!room_ok(arg))
		return 2;
	return strcmp(verb, "export") == 0 ? room_io_export(&io, arg, 1) : room_io_import(&io, arg, 0);
}

static int dispatch(struct ctl *c, int argc, char **argv)
{
	const char *verb = argv[0];
	bool io = strcmp(verb, "export") == 0 || strcmp(verb, "import") == 0 || strcmp(verb, "backup") == 0;

	if (strcmp(verb, "token") == 0)
		return verb_token(c, argc - 1, argv + 1);
	/* restore ROOM SNAPSHOT is a room's own; restore ROOM --to HOST
	 * --from FILE brings a lost host's room back (cluster.c) */
	bool cluster_restore = strcmp(verb, "restore") == 0 && argc > 2 && strncmp(argv[2], "--", 2) == 0;

	if (cluster_is_verb(verb) || cluster_restore) {
		int rc = cluster_verb(&c->cluster, argc, argv);

		if (rc < 0)
			usage(stderr);
		return rc < 0 ? 2 : rc;
	}
	if (!((strcmp(verb, "status") == 0 || strcmp(verb, "rooms") == 0) && argc == 1) &&
	    !(strcmp(verb, "exec") == 0 && argc >= 3) &&
	    !((strcmp(verb, "stop") == 0 || strcmp(verb, "restart") == 0 ||
	       strcmp(verb, "destroy") == 0 || strcmp(verb, "snapshots") == 0 || io) && argc == 2) &&
	    !(strcmp(verb, "snapshot") == 0 && (argc == 2 || argc == 3)) &&
	    !(strcmp(verb, "restore") == 0 && argc == 3) &&
	    !(strcmp(verb, "fork") == 0 && (argc == 3 || argc == 4))) {
		usage(stderr);
		return 2;
	}
	if (load_token(c) < 0)
		return strcmp(verb, "exec") == 0 ? EXIT_EXEC_FAILED : 1;
	if (strcmp(verb, "status") == 0)
		return verb_status(c);
	if (strcmp(verb, "rooms") == 0)
		return verb_rooms(c);
	if (strcmp(verb, "exec") == 0)
		return verb_exec(c, argv[1], argc - 2, argv + 2);
	if (strncmp(verb, "snapshot", 8) == 0 || strcmp(verb, "restore") == 0 || strcmp(verb, "fork") == 0)
		return verb_snapshot(c, verb, argc - 1, argv + 1);
	if (io)
		return verb_room_io(c, verb, argv[1]);
	return verb_room_op(c, verb, argv[1]);
}

int main(int argc, char **argv)
{
	struct ctl c = { .config_path = ROOMBOX_CONF };
	char err[512];
	int opt, rc;

	static const struct option longs[] = {
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};

	/* "+": options stop at the verb, so `exec ROOM ls -l` keeps its -l */
	while ((opt = getopt_long(argc, argv, "+c:s:e:a:h", longs, NULL)) != -1) {
		switch (opt) {
		case 'c': c.config_path = optarg; break;
		case 's': c.socket = optarg; break;
		case 'e': c.cluster.etcd = optarg; break;
		case 'a': c.cluster.haproxy_socket = optarg; break;
		case 'h': usage(stdout); return 0;
		default:  usage(stderr); return 2;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return 2;
	}
	if (config_load(&c.cfg, c.config_path, err, sizeof(err)) < 0) {
		fprintf(stderr, "roomboxctl: %s\n", err);
		return strcmp(argv[optind], "exec") == 0 ? EXIT_EXEC_FAILED : 1;
	}
	if (!c.socket)
		c.socket = c.cfg.socket;
	if (!c.cluster.etcd)
		c.cluster.etcd = c.cfg.cluster_etcd;
	c.cluster.key_file = c.cfg.cluster_key_file;
	if (!c.cluster.haproxy_socket)
		c.cluster.haproxy_socket = HAPROXY_ADMIN;
	rc = dispatch(&c, argc - optind, argv + optind);
	free(c.token);
	return rc;
}
