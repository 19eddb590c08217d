/* /api/rooms/{id}/sandbox/files/{path}: files in and out of a
 * room, streamed both ways.
 *
 * Every operation is one of the keeper's own tools (keeper/tools.c; the
 * operations and their answers in common/protocol.h), asked for like an
 * exec (exec_pump.c, passed I/O): done inside the room's mount
 * namespace, as the room's user, by the keeper's code -- never by a program
 * of the room, whose find or cat may be anything (a room must not make a
 * request wait on its own tools).  A symlink, `..`, a hard link or a path
 * swapped during the request resolves inside the room and never reaches
 * the host or another room: the kernel does the confining, not a path
 * check here.  A tool answers on its first stdout line ("F <size>", "D",
 * "ok created" ...) or with "E <kind>" for the errors a client is told
 * apart; a failure it did not foresee is read from its stderr (the C
 * library's words).
 *
 * Uploads go from the web server through a pipe straight into a nameless
 * file beside the target, named only when every byte came: roombox-fcgi
 * ends the body with an end mark, holding a random nonce of the request's
 * that the room never sees, once it has read all of it (as many bytes
 * as Content-Length says, or, without one, to the end of the request's
 * stream, counted against max_file as they come).  A full disk, a
 * departed client, a too large body or the death of roombox-fcgi leaves
 * nothing under the target name, nor beside it.  A download has the get
 * tool open the file in the room: a regular file comes back as its open
 * descriptor, and the kernel moves its pages to the web server's socket
 * (sendfile) with no copy in the room or here -- on this kind of host every
 * copy of 64 MiB costs ~20 ms.  Content-Length is the open file's size.
 * Neither an upload nor a download is ever held whole in memory here.
 *
 * Deadlines: a listing, a download's opening, a mkdir or a move runs the
 * keeper's code only, and gets FILES_QUICK_MS; a transfer and a recursive
 * delete take as long as their bytes or their tree (exec_timeout_max at
 * most; a client whose bytes stop is ended by the web server's own
 * timeouts).  A tool killed at its deadline answers 504; one the room
 * stopped (and the keeper so killed at once) or killed answers 503.  A request that only reads (GET) never creates the room: one
 * that does not exist is a 404. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/types.h>

#include "clock.h"
#include "exec_pump.h"
#include "http.h"
#include "protocol.h"
#include "timefmt.h"

#define LIST_MAX TOOL_LIST_MAX
#define FILES_QUICK_MS 30000

/* A transfer's deadline, or (quick) the keeper's own short work's. */
static uint64_t files_timeout(const struct app *app, bool quick)
{
	uint64_t max = app->cfg.exec_timeout_max_ms;

	return quick && FILES_QUICK_MS < max ? FILES_QUICK_MS : max;
}

/* ---- paths ---- */

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
		: c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* The room path of a {path} as sent: percent-decoded, absolute or relative
 * to /workspace.  malloc'd, or NULL (bad escape, NUL byte, too long). */
char *files_room_path(const char *raw)
{
	size_t n = strlen(raw);
	char *dec = malloc(n + 1), *out = NULL, *o = dec;

	if (!dec || n > 4096)
		goto bad;
	for (size_t i = 0; i < n; i++) {
		if (raw[i] != '%') {
			*o++ = raw[i];
			continue;
		}
		if (i + 2 >= n)
			goto bad;
		int hi = hexval(raw[i + 1]), lo = hexval(raw[i + 2]);
		if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
			goto bad;   /* not an escape, or a NUL byte */
		*o++ = (char)(hi * 16 + lo);
		i += 2;
	}
	*o = '\0';
	if (dec[0] == '/') {
		out = dec;
		dec = NULL;
	} else if (asprintf(&out, "/workspace/%s", dec) < 0) {
		out = NULL;
	}
bad:
	free(dec);
	return out;
}

static bool query_true(const struct request *rq, const char *name)
{
	char v[8] = "";

	return http_query_value(rq, name, v, sizeof(v)) && (strcmp(v, "1") == 0 || strcmp(v, "true") == 0);
}

/* ---- running a tool ---- */

struct run {
	struct request *rq;
	/* upload */
	bool known;               /* Content-Length was given */
	uint64_t left;            /* then: body bytes still to come */
	uint64_t got;             /* body bytes read */
	bool input_failed, too_big, body_done;
	char nonce[TOOL_NONCE_LEN + 1];    /* this upload's, in its end mark */
	char mark[TOOL_PUT_END_LEN + 1];   /* the end mark, once the body is in */
	size_t mark_off;
	/* download */
	struct response *rs;
	bool headers_sent, client_gone;
	char head[64];            /* the first line, while it comes */
	size_t head_len;
	uint64_t size, sent;
	long deadline_ms;         /* a download ends by then */
};

static int ignore_event(void *ctx, json_object *ev)
{
	(void)ctx;
	(void)ev;
	return 0;
}

/* ?user=root|user: who does it (the request's user, default
 * exec_user); NULL for the default, or "" for a bad value. */
static const char *files_user(const struct request *rq)
{
	char v[8] = "";

	if (!http_query_value(rq, "user", v, sizeof(v)))
		return NULL;
	return strcmp(v, HK_USER_ROOT) == 0 ? HK_USER_ROOT : strcmp(v, HK_USER_USER) == 0 ? HK_USER_USER : "";
}

/* The keeper's tool argv run in the room: its result (stdout and stderr as
 * text, output_limit each), or NULL with err set. */
static json_object *run_tool(struct request *rq, const char *const *argv, bool quick,
			     struct exec_sink *sink, struct helper_error *err)
{
	struct exec_request ex = { .cmd = argv[0], .cmd_len = strlen(argv[0]),
				   .timeout_ms = files_timeout(rq->app, quick), .user = files_user(rq) };

	if (ex.user && !*ex.user) {
		memset(err, 0, sizeof(*err));
		err->http_status = 400;
		snprintf(err->message, sizeof(err->message), "invalid user: expected \"root\" or \"user\"");
		return NULL;
	}
	if (!sink->event)
		sink->event = ignore_event;
	sink->tool = argv;
	return exec_pump_in_room(rq->app, rq->room, &ex, sink, err);
}

static const char *field(json_object *res, const char *key)
{
	json_object *v;

	return json_object_object_get_ex(res, key, &v) ? json_object_get_string(v) : "";
}

static int exit_code(json_object *res)
{
	json_object *v;

	return json_object_object_get_ex(res, "exitCode", &v) ? json_object_get_int(v) : -1;
}

/* A tool's failure as the client's answer: what it said on "E ..." or,
 * else, the C library's words on stderr. */
static void answer_failure(struct response *rs, const char *path, const char *said,
			   const char *stderr_text)
{
	const char *e = said && strncmp(said, "E ", 2) == 0 ? said + 2 : "";
	const char *why = stderr_text ? stderr_text : "";

	if (!strncmp(e, "notfound", 8) || (!*e && strstr(why, "No such file or directory")))
		response_error(rs, 404, "not found: %s", path);
	else if (!strncmp(e, "nospace", 7) || strstr(why, "No space left on device") ||
		 strstr(why, "Disk quota exceeded"))
		response_error(rs, 507, "no space left in the room");
	else if (!strncmp(e, "denied", 6) || strstr(why, "Permission denied") ||
		 strstr(why, "Operation not permitted") || strstr(why, "Read-only file system"))
		response_error(rs, 403, "permission denied: %s", path);
	else if (!strncmp(e, "isdir", 5) || strstr(why, "Is a directory"))
		response_error(rs, 409, "is a directory: %s", path);
	else if (!strncmp(e, "notfile", 7))   /* a FIFO or a device: nothing to download */
		response_error(rs, 409, "not a regular file: %s", path);
	else if (!strncmp(e, "notdir", 6) || strstr(why, "Not a directory"))
		response_error(rs, 409, "not a directory: %s", path);
	else if (!strncmp(e, "notempty", 8) || strstr(why, "Directory not empty"))
		response_error(rs, 409, "directory not empty: %s (DELETE with ?recursive=1)", path);
	else if (!strncmp(e, "exists", 6) || strstr(why, "File exists"))
		response_error(rs, 409, "already exists: %s", path);
	else if (!strncmp(e, TOOL_KIND_REFUSED, strlen(TOOL_KIND_REFUSED)))
		response_error(rs, 400, "invalid path: %s (the room's root and /workspace are never "
			       "deleted)", path);
	else if (!strncmp(e, TOOL_KIND_TOODEEP, strlen(TOOL_KIND_TOODEEP)))
		response_error(rs, 409, "too deep to delete whole: %s has directories more than %d "
			       "levels down", path, TOOL_DEPTH_MAX);
	else if (!strncmp(e, "short", 5))
		response_error(rs, 400, "the upload ended before Content-Length bytes came");
	else
		response_error(rs, 500, "file operation failed: %.*s", (int)strcspn(why, "\n"),
			       *why ? why : "unknown reason");
}

/* A tool that did not end by itself: killed at its deadline (504), or by
 * a signal before it (503: the room stopped it, and the keeper killed it
 * at once, or the room killed it).  true when answered so. */
static bool answer_cut_short(struct request *rq, struct response *rs, json_object *res,
			     const char *op, bool quick)
{
	json_object *v;

	if (json_object_object_get_ex(res, "timedOut", &v) && json_object_get_boolean(v)) {
		response_error(rs, 504, "room %s: the file operation (%s) ran past its deadline (%llu ms)",
			       rq->room, op, (unsigned long long)files_timeout(rq->app, quick));
		return true;
	}
	if (json_object_object_get_ex(res, "signal", &v) && json_object_get_string(v)) {
		response_error(rs, 503, "room %s: the room stopped the file operation (%s): try again",
			       rq->room, op);
		return true;
	}
	return false;
}

static void answer_exec_failure(struct request *rq, struct response *rs,
				const struct helper_error *err)
{
	if (err->http_status == 404)   /* a read of a room that does not exist */
		response_error(rs, 404, "room %s not found", rq->room);
	else
		exec_answer_error(rs, err);
}

/* ---- GET: a file's bytes, or a directory's entries ---- */

static const char *entry_type(char y)
{
	return y == 'f' ? "file" : y == 'd' ? "directory" : y == 'l' ? "symlink" : "other";
}

/* The get tool's records ("type\tsize\tmode\tmtime\trelative\0") as entries. */
static json_object *list_entries(const char *text, size_t len, bool recursive, bool *truncated)
{
	json_object *entries = json_object_new_array();
	const char *p = text, *end = text + len;
	size_t count = 0;

	*truncated = false;
	while (p < end) {
		const char *rec_end = memchr(p, '\0', (size_t)(end - p));
		char type, mode[16], rel[4097];
		unsigned long long size;
		double mtime;
		int used = 0;

		if (!rec_end) {   /* cut by output_limit */
			*truncated = true;
			break;
		}
		if (!strcmp(p, TOOL_LIST_CUT)) {   /* a directory too deep to enter */
			*truncated = true;
			p = rec_end + 1;
			continue;
		}
		if (count == LIST_MAX) {
			*truncated = true;
			break;
		}
		if (sscanf(p, "%c\t%llu\t%15[0-7]\t%lf\t%n", &type, &size, mode, &mtime, &used) >= 4 &&
		    used > 0 && (size_t)(rec_end - p - used) < sizeof(rel)) {
			json_object *e = json_object_new_object();
			char stamp[40], m[8];
			const char *name;

			memcpy(rel, p + used, (size_t)(rec_end - p - used));
			rel[rec_end - p - used] = '\0';
			name = strrchr(rel, '/') ? strrchr(rel, '/') + 1 : rel;
			iso8601_utc_ms((int64_t)(mtime * 1000.0), stamp, sizeof(stamp));
			snprintf(m, sizeof(m), "%04lo", strtoul(mode, NULL, 8) & 07777);
			json_object_object_add(e, "name", json_object_new_string(name));
			if (recursive)
				json_object_object_add(e, "relativePath", json_object_new_string(rel));
			json_object_object_add(e, "type", json_object_new_string(entry_type(type)));
			json_object_object_add(e, "size", json_object_new_int64((int64_t)size));
			json_object_object_add(e, "mode", json_object_new_string(m));
			json_object_object_add(e, "modifiedAt", json_object_new_string(stamp));
			json_object_array_add(entries, e);
			count++;
		}
		p = rec_end + 1;
	}
	return entries;
}

/* stdout of a GET: the first line says what it is; a file's bytes follow
 * and go to the client as they come, after the headers. */
static int get_stdout(void *ctx, const char *data, size_t n)
{
	struct run *r = ctx;
	const struct http_output *out = r->rq->in->out;

	while (!r->headers_sent && n) {
		char c = *data++;

		n--;
		if (c != '\n') {
			if (r->head_len + 1 < sizeof(r->head))
				r->head[r->head_len++] = c;
			continue;
		}
		r->head[r->head_len] = '\0';
		if (r->head[0] != 'F')
			return 1;   /* a directory or an error: kept in the result */
		char hdr[256];
		r->size = strtoull(r->head + 2, NULL, 10);
		int len = snprintf(hdr, sizeof(hdr), "Status: 200 OK\r\n"
				   "Content-Type: application/octet-stream\r\n"
				   "Content-Length: %llu\r\n%s%s%s%s\r\n", (unsigned long long)r->size,
				   r->rs->request_id[0] ? "X-Request-Id: " : "", r->rs->request_id,
				   r->rs->request_id[0] ? "\r\n" : "", http_host_header);
		r->headers_sent = true;
		if (out->write(out->ctx, hdr, (size_t)len) < 0)
			r->client_gone = true;
	}
	if (n && r->headers_sent && !r->client_gone) {
		/* never more than the size announced (the file grew meanwhile) */
		size_t k = r->size - r->sent < n ? (size_t)(r->size - r->sent) : n;

		if (k && out->write(out->ctx, data, k) < 0)
			r->client_gone = true;
		r->sent += k;
	}
	return 0;
}

/* The file itself, opened in the room: its bytes go to the client
 * without passing through this process. */
static void get_file(void *ctx, int fd)
{
	struct run *r = ctx;
	const struct http_output *out = r->rq->in->out;

	if (!r->headers_sent || r->client_gone || r->sent)
		return;
	if (out->sendfile(out->ctx, fd, r->size, r->deadline_ms) < 0)
		r->client_gone = true;
	r->sent = r->size;
}

void api_files_get(struct request *rq, struct response *rs)
{
	struct helper_error err;
	struct run r = { .rq = rq, .rs = rs,
			 .deadline_ms = (long)(monotonic_ms() + (int64_t)files_timeout(rq->app, false)) };
	struct exec_sink sink = { .ctx = &r };
	bool recursive = query_true(rq, "recursive");
	char *path = files_room_path(rq->rest ? rq->rest : "");
	json_object *res;

	if (!path) {
		response_error(rs, 400, "invalid path");
		return;
	}
	if (rq->in && rq->in->out)
		sink.stdout_raw = get_stdout;
	if (rq->in && rq->in->out && rq->in->out->sendfile)
		sink.stdout_file = get_file;
	sink.existing = true;
	const char *argv[] = { TOOL_GET, path, recursive ? "1" : "0", NULL };
	res = run_tool(rq, argv, true, &sink, &err);
	if (r.headers_sent) {   /* the file went out as it came */
		json_object_put(res);
		rs->status = 200;
		rs->streamed = true;
		rs->streamed_short = r.client_gone || r.sent < r.size;
		free(path);
		return;
	}
	if (!res) {
		answer_exec_failure(rq, rs, &err);
		free(path);
		return;
	}
	if (answer_cut_short(rq, rs, res, recursive ? "recursive listing" : "get", true)) {
		json_object_put(res);
		free(path);
		return;
	}
	/* not a file: a directory's listing or an error, in the result */
	json_object *v;
	const char *out = field(res, "stdout");
	size_t out_len = json_object_object_get_ex(res, "stdout", &v)
		? (size_t)json_object_get_string_len(v) : 0;
	const char *nl = memchr(out, '\n', out_len);
	if (out[0] == 'D' && nl) {
		bool truncated;
		json_object *answer = json_object_new_object();
		json_object *entries = list_entries(nl + 1, out_len - (size_t)(nl + 1 - out),
						    recursive, &truncated);

		json_object_object_add(answer, "path", json_object_new_string(path));
		json_object_object_add(answer, "entries", entries);
		if (truncated)
			json_object_object_add(answer, "truncated", json_object_new_boolean(1));
		response_json(rs, 200, answer);
	} else if (out[0] == 'F') {
		/* no connection to stream to (unit tests) */
		response_error(rs, 500, "file download needs a connection");
	} else {
		answer_failure(rs, path, out, field(res, "stderr"));
	}
	json_object_put(res);
	free(path);
}

/* ---- PUT: upload a file, or make a directory ---- */

/* The body from the web server, then the end mark once all of it came:
 * Content-Length bytes, or without one everything to the end of the
 * request's stream, never past max_file.  A body cut short or too large
 * closes the command's stdin without the mark, and nothing is named. */
static ssize_t put_input(void *ctx, char *buf, size_t n)
{
	struct run *r = ctx;
	int k;

	if (r->body_done) {
		size_t m = TOOL_PUT_END_LEN - r->mark_off < n ? TOOL_PUT_END_LEN - r->mark_off : n;

		memcpy(buf, r->mark + r->mark_off, m);
		r->mark_off += m;
		return (ssize_t)m;
	}
	if (r->known && r->left == 0) {
		k = 0;
	} else {
		if (r->known && n > r->left)
			n = (size_t)r->left;
		k = r->rq->in->read(r->rq->in->ctx, buf, n > INT32_MAX ? INT32_MAX : (int)n);
	}
	if (k < 0 || (k == 0 && r->known && r->left)) {
		r->input_failed = true;
		return -1;
	}
	if (k == 0) {
		r->body_done = true;
		tool_put_end(r->mark, r->nonce, r->got);
		return put_input(ctx, buf, n);
	}
	r->got += (uint64_t)k;
	if (r->known)
		r->left -= (uint64_t)k;
	if (r->got > r->rq->app->cfg.max_file) {
		r->too_big = true;
		return -1;
	}
	return k;
}

/* A random nonce for an upload's end mark, as hex: the room never sees
 * it, so no body it sends can end with a mark of its own. */
static int nonce_make(char *buf)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char b[TOOL_NONCE_LEN / 2];

	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
		return -1;
	for (size_t i = 0; i < sizeof(b); i++) {
		buf[2 * i] = hex[b[i] >> 4];
		buf[2 * i + 1] = hex[b[i] & 15];
	}
	buf[TOOL_NONCE_LEN] = '\0';
	return 0;
}

static bool mode_valid(const char *m)
{
	size_t n = strlen(m);

	return n >= 1 && n <= 4 && strspn(m, "01234567") == n;
}

void api_files_put(struct request *rq, struct response *rs)
{
	const char *cl = rq->in->param(rq->in->ctx, "CONTENT_LENGTH");
	char mode[8] = "";
	char *path = files_room_path(rq->rest ? rq->rest : "");
	/* without Content-Length (a chunked body): to the end of the stream */
	bool known = cl && *cl;
	uint64_t size = known ? strtoull(cl, NULL, 10) : 0;
	bool dir = rq->rest && *rq->rest && rq->rest[strlen(rq->rest) - 1] == '/';
	struct run r = { .rq = rq, .known = known, .left = size };
	struct exec_sink sink = { .ctx = &r };
	struct helper_error err;
	json_object *res;

	if (!path || (path[strlen(path) - 1] == '/' && !dir) || strcmp(path, "/") == 0) {
		response_error(rs, 400, "invalid path");
		goto out;
	}
	if (http_query_value(rq, "mode", mode, sizeof(mode)) && !mode_valid(mode)) {
		response_error(rs, 400, "invalid mode: octal, like 0755");
		goto out;
	}
	if (size > rq->app->cfg.max_file) {
		response_error(rs, 413, "file larger than max_file (%llu bytes)",
			       (unsigned long long)rq->app->cfg.max_file);
		goto out;
	}
	if (dir && size) {
		response_error(rs, 400, "a path ending in / makes a directory: send no body");
		goto out;
	}
	if (dir)
		path[strlen(path) - 1] = '\0';
	if (nonce_make(r.nonce) < 0) {
		response_error(rs, 500, "room %s: upload: getrandom: %s", rq->room, strerror(errno));
		goto out;
	}
	const char *argv[] = { dir ? TOOL_MKDIR : TOOL_PUT, path, mode, dir ? NULL : r.nonce, NULL };
	if (!dir)
		sink.input = put_input;
	res = run_tool(rq, argv, dir, &sink, &err);
	if (!res) {
		answer_exec_failure(rq, rs, &err);
		goto out;
	}
	const char *said = field(res, "stdout");
	/* what roombox-fcgi saw of the body first: an "ok" for a body that
	 * was cut or too large is not to be believed */
	if (r.too_big) {
		response_error(rs, 413, "file larger than max_file (%llu bytes)",
			       (unsigned long long)rq->app->cfg.max_file);
	} else if (r.input_failed) {
		response_error(rs, 400, "the upload ended before Content-Length bytes came");
	} else if (answer_cut_short(rq, rs, res, dir ? "mkdir" : "upload", dir)) {
		;
	} else if (strncmp(said, "ok ", 3) == 0 && exit_code(res) == 0) {
		json_object *answer = json_object_new_object();

		json_object_object_add(answer, "path", json_object_new_string(path));
		if (!dir)
			json_object_object_add(answer, "size", json_object_new_int64((int64_t)r.got));
		response_json(rs, strncmp(said, "ok created", 10) == 0 ? 201 : 200, answer);
	} else {
		answer_failure(rs, path, said, field(res, "stderr"));
	}
	json_object_put(res);
out:
	free(path);
}

/* ---- DELETE ---- */

/* A path to delete, in place: repeated and trailing slashes dropped;
 * false when a part of it is `.` or `..` (which could name the room's root,
 * /workspace or a directory above the one meant) or it is / or /workspace
 * itself.  (The delete tool checks the same again, on what the path
 * resolves to.) */
static bool delete_path_ok(char *path)
{
	char *o = path;

	for (const char *s = path; *s;) {
		if (*s == '/') {
			while (*s == '/')
				s++;
			if (*s)
				*o++ = '/';
			continue;
		}
		size_t n = strcspn(s, "/");
		if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
			return false;
		memmove(o, s, n);
		o += n;
		s += n;
	}
	*o = '\0';
	return *path && strcmp(path, "/workspace") != 0;
}

void api_files_delete(struct request *rq, struct response *rs)
{
	char *path = files_room_path(rq->rest ? rq->rest : "");
	struct exec_sink sink = { 0 };
	struct helper_error err;
	json_object *res;

	if (!path || !delete_path_ok(path)) {
		response_error(rs, 400, "invalid path: the room's root, /workspace, `.` and `..` are "
			       "never deleted");
		free(path);
		return;
	}
	bool recursive = query_true(rq, "recursive");
	const char *argv[] = { TOOL_DELETE, path, recursive ? "1" : "0", NULL };
	/* a recursive delete takes as long as its tree */
	res = run_tool(rq, argv, !recursive, &sink, &err);
	if (!res) {
		answer_exec_failure(rq, rs, &err);
	} else if (answer_cut_short(rq, rs, res, recursive ? "recursive delete" : "delete", !recursive)) {
		;
	} else if (strcmp(field(res, "stdout"), "ok\n") == 0 && exit_code(res) == 0) {
		json_object *answer = json_object_new_object();

		json_object_object_add(answer, "deleted", json_object_new_string(path));
		response_json(rs, 200, answer);
	} else {
		answer_failure(rs, path, field(res, "stdout"), field(res, "stderr"));
	}
	json_object_put(res);
	free(path);
}

/* ---- POST {"to"}: move or rename ---- */

void api_files_move(struct request *rq, struct response *rs)
{
	char *path = files_room_path(rq->rest ? rq->rest : "");
	json_object *to_v;
	struct exec_sink sink = { 0 };
	struct helper_error err;
	json_object *res;
	char *to = NULL;

	if (!path || strcmp(path, "/") == 0) {
		response_error(rs, 400, "invalid path");
		goto out;
	}
	if (!json_object_is_type(rq->body, json_type_object) ||
	    !json_object_object_get_ex(rq->body, "to", &to_v) ||
	    !json_object_is_type(to_v, json_type_string) || !json_object_get_string_len(to_v)) {
		json_object *details = json_object_new_object();
		json_object *msgs = json_object_new_array();

		json_object_array_add(msgs, json_object_new_string(
			"Invalid input: expected string, received undefined"));
		json_object_object_add(details, "to", msgs);
		response_invalid(rs, details);
		goto out;
	}
	const char *t = json_object_get_string(to_v);
	if (memchr(t, '\0', (size_t)json_object_get_string_len(to_v))) {
		response_error(rs, 400, "invalid path: to");
		goto out;
	}
	/* "to" is a path in the room as is (JSON, not a URL: no decoding) */
	if (t[0] == '/')
		to = strdup(t);
	else if (asprintf(&to, "/workspace/%s", t) < 0)
		to = NULL;
	if (!to) {
		response_error(rs, 500, "out of memory");
		goto out;
	}
	const char *argv[] = { TOOL_MOVE, path, to, NULL };
	res = run_tool(rq, argv, true, &sink, &err);
	if (!res) {
		answer_exec_failure(rq, rs, &err);
	} else if (answer_cut_short(rq, rs, res, "move", true)) {
		;
	} else if (strcmp(field(res, "stdout"), "ok\n") == 0 && exit_code(res) == 0) {
		json_object *answer = json_object_new_object();

		json_object_object_add(answer, "path", json_object_new_string(to));
		response_json(rs, 200, answer);
	} else {
		answer_failure(rs, path, field(res, "stdout"), field(res, "stderr"));
	}
	json_object_put(res);
out:
	free(to);
	free(path);
}
