/* Preview ports (SPEC §8.5): expose, list, unexpose, and the exposures'
 * store.
 *
 * Why it is built this way:
 *
 * - One file per exposure, named by its token: "<state_dir>/previews/<t>"
 *   holding "<room> <port>\n".  A preview request carries only the token,
 *   so finding its exposure is one open() of a name that has been checked
 *   to be 16 of [a-z0-9] (no path can be smuggled in), with no index in
 *   memory to keep in step.  A room's list is a scan of the directory
 *   (exposures are few).
 * - The files belong to roombox-fcgi, beside the message store, outside
 *   every room and every room's run directory: a room's stop, restart or
 *   the service's restart leave them; only unexpose and cleanup remove them.
 * - A file is written whole under a temporary name, synced, then renamed,
 *   so a crash leaves an exposure either absent or complete.  Exposing and
 *   unexposing take one mutex, so one port of a room has one token.
 * - A token is 16 characters drawn with getrandom() (rejection sampling,
 *   no bias): 82 bits, and it is the URL's only secret. */
#include "preview.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errbuf.h"
#include "http.h"
#include "protocol.h"
#include "validate.h"

#define PREVIEW_FILE_MAX 128
#define PREVIEW_LIST_MAX 1024    /* exposures of one room */

static int preview_dirfd = -1;
static pthread_mutex_t preview_lock = PTHREAD_MUTEX_INITIALIZER;

int preview_store_init(const char *dir, char *err, size_t errlen)
{
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return errorf(err, errlen, "previews store %s: create: %m", dir);
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errorf(err, errlen, "previews store %s: open: %m", dir);
	if (faccessat(fd, ".", W_OK | X_OK, AT_EACCESS) < 0) {
		close(fd);
		return errorf(err, errlen, "previews store %s: not writable: %m", dir);
	}
	preview_dirfd = fd;
	return 0;
}

static int token_new(char *out)
{
	static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	size_t n = 0;
	while (n < PREVIEW_TOKEN_LEN) {
		unsigned char b[32];
		if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
			return -1;
		for (size_t i = 0; i < sizeof(b) && n < PREVIEW_TOKEN_LEN; i++)
			if (b[i] < 252)   /* 252 = 7 * 36 */
				out[n++] = alphabet[b[i] % 36];
	}
	out[n] = '\0';
	return 0;
}

/* Read an exposure file: 0 with room and port, -1 if none or malformed. */
static int exposure_read(const char *token, char *room, size_t roomlen, int *port)
{
	char text[PREVIEW_FILE_MAX + 1], id[PREVIEW_FILE_MAX + 1];
	int fd = openat(preview_dirfd, token, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, text, PREVIEW_FILE_MAX);
	close(fd);
	if (n <= 0)
		return -1;
	text[n] = '\0';
	if (sscanf(text, "%128s %d", id, port) != 2 || !room_id_valid(id) ||
	    *port < 1 || *port > 65535 || strlen(id) >= roomlen)
		return -1;
	strcpy(room, id);
	return 0;
}

int preview_lookup(const char *token, char *room, size_t roomlen, int *port)
{
	if (preview_dirfd < 0 || !preview_token_valid(token, strlen(token)))
		return -1;
	return exposure_read(token, room, roomlen, port);
}

static int exposure_write(const char *token, const char *room, int port)
{
	char tmp[PREVIEW_TOKEN_LEN + 8], text[PREVIEW_FILE_MAX];
	int len = snprintf(text, sizeof(text), "%s %d\n", room, port);
	snprintf(tmp, sizeof(tmp), ".%s.tmp", token);
	int fd = openat(preview_dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	int ok = write(fd, text, (size_t)len) == len && fsync(fd) == 0;
	close(fd);
	if (!ok || renameat(preview_dirfd, tmp, preview_dirfd, token) < 0) {
		unlinkat(preview_dirfd, tmp, 0);
		return -1;
	}
	fsync(preview_dirfd);
	return 0;
}

struct exposure {
	char token[PREVIEW_TOKEN_LEN + 1];
	int port;
};

static int exposure_cmp(const void *a, const void *b)
{
	return ((const struct exposure *)a)->port - ((const struct exposure *)b)->port;
}

/* The room's exposures, by port; their count (at most max), -1 on error. */
static int room_exposures(const char *room, struct exposure *out, int max)
{
	int fd = dup(preview_dirfd), n = 0;
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	rewinddir(d);
	struct dirent *e;
	while ((e = readdir(d)) && n < max) {
		char id[ROOM_ID_MAX + 1];
		int port;
		if (!preview_token_valid(e->d_name, strlen(e->d_name)) ||
		    exposure_read(e->d_name, id, sizeof(id), &port) < 0 || strcmp(id, room) != 0)
			continue;
		snprintf(out[n].token, sizeof(out[n].token), "%s", e->d_name);
		out[n++].port = port;
	}
	closedir(d);
	qsort(out, (size_t)n, sizeof(*out), exposure_cmp);
	return n;
}

int preview_room_forget(const char *room, char *err, size_t errlen)
{
	static struct exposure list[PREVIEW_LIST_MAX];   /* under preview_lock */
	int rc = 0;
	if (preview_dirfd < 0)
		return 0;
	pthread_mutex_lock(&preview_lock);
	int n = room_exposures(room, list, PREVIEW_LIST_MAX);
	if (n < 0)
		rc = errorf(err, errlen, "room %s: previews: list: %m", room);
	for (int i = 0; i < n; i++) {
		if (unlinkat(preview_dirfd, list[i].token, 0) < 0 && errno != ENOENT)
			rc = errorf(err, errlen, "room %s: previews: remove port %d: %m", room, list[i].port);
		preview_relay_revoke(list[i].token);
	}
	if (n > 0)
		fsync(preview_dirfd);
	pthread_mutex_unlock(&preview_lock);
	preview_connector_forget(room);
	return rc;
}

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

static json_object *exposure_json(const struct request *rq, const struct exposure *e)
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
		return details;   /* zod's formErrors, which the seed drops */
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
		json_object *answer = json_object_new_object();
		json_object_object_add(answer, "error", json_object_new_string("invalid request"));
		json_object_object_add(answer, "details", details);
		response_json(rs, 400, answer);
		return;
	}
	struct helper_target target = app_helper(rq->app);
	struct helper_error err;
	json_object *req = json_object_new_object();
	json_object_object_add(req, HK_OP, json_object_new_string(HELPER_OP_CREATE));
	json_object_object_add(req, HK_ROOM, json_object_new_string(rq->room));
	json_object *reply = helper_call(&target, req, HELPER_DEFAULT_DEADLINE_MS, &err);
	json_object_put(req);
	if (!reply) {
		room_start_failure(rs, rq->room, &err);
		return;
	}
	json_object_put(reply);

	static struct exposure list[PREVIEW_LIST_MAX];   /* under preview_lock */
	struct exposure e = { .port = port };
	int status = 201;
	pthread_mutex_lock(&preview_lock);
	int n = room_exposures(rq->room, list, PREVIEW_LIST_MAX);
	for (int i = 0; i < n; i++)
		if (list[i].port == port) {
			e = list[i];
			status = 200;
		}
	if (n < 0 || (status == 201 && (n >= PREVIEW_LIST_MAX || token_new(e.token) < 0 ||
					exposure_write(e.token, rq->room, port) < 0))) {
		pthread_mutex_unlock(&preview_lock);
		fprintf(stderr, "roombox-fcgi: room %s: previews: expose port %d: %s\n", rq->room, port,
			n >= PREVIEW_LIST_MAX ? "too many exposures" : strerror(errno));
		response_error(rs, 500, "room %s: previews: could not expose port %d", rq->room, port);
		return;
	}
	pthread_mutex_unlock(&preview_lock);
	response_json(rs, status, exposure_json(rq, &e));
}

void api_ports_list(struct request *rq, struct response *rs)
{
	static struct exposure list[PREVIEW_LIST_MAX];   /* under preview_lock */
	json_object *ports = json_object_new_array(), *answer = json_object_new_object();
	pthread_mutex_lock(&preview_lock);
	int n = room_exposures(rq->room, list, PREVIEW_LIST_MAX);
	for (int i = 0; i < n; i++)
		json_object_array_add(ports, exposure_json(rq, &list[i]));
	pthread_mutex_unlock(&preview_lock);
	json_object_object_add(answer, "ports", ports);
	if (n < 0) {
		json_object_put(answer);
		response_error(rs, 500, "room %s: previews: could not list the exposures", rq->room);
		return;
	}
	response_json(rs, 200, answer);
}

/* DELETE …/sandbox/ports/{port}: the URL answers 404 from now on, and
 * relays already running through it are closed. */
void api_ports_delete(struct request *rq, struct response *rs)
{
	static struct exposure list[PREVIEW_LIST_MAX];   /* under preview_lock */
	const char *p = rq->rest ? rq->rest : "";
	size_t len = strlen(p);
	if (len == 0 || len > 5 || strspn(p, "0123456789") != len || p[0] == '0' || atoi(p) > 65535) {
		response_error(rs, 400, "invalid port: expected a whole number from 1 to 65535");
		return;
	}
	int port = atoi(p), found = 0;
	pthread_mutex_lock(&preview_lock);
	int n = room_exposures(rq->room, list, PREVIEW_LIST_MAX);
	for (int i = 0; i < n; i++) {
		if (list[i].port != port)
			continue;
		found = 1;
		unlinkat(preview_dirfd, list[i].token, 0);
		fsync(preview_dirfd);
		preview_relay_revoke(list[i].token);
	}
	pthread_mutex_unlock(&preview_lock);
	if (!found) {
		response_error(rs, 404, "port %d is not exposed", port);
		return;
	}
	json_object *answer = json_object_new_object();
	json_object_object_add(answer, "port", json_object_new_int(port));
	response_json(rs, 200, answer);
}
