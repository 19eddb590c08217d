/* Unit tests for fcgi-app/http/router.c and http.c: the route table, the request
 * pipeline (404/405/401/400/413 before any handler), request bodies and the
 * rendered answer.  Requests are fed through a fake struct http_input, so no
 * web server is needed; nothing here reaches a sandbox (the one exec that
 * gets past validation points at a helper that does not exist). */
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "auth.h"
#include "fair_share.h"
#include "router.h"
#include "label_store.h"
#include "store.h"

/* ---- a fake request ---- */

struct fake {
	const char *params[16][2];
	const char *body;
	size_t body_len;
	size_t pos;          /* bytes handed out so far */
	size_t max_chunk;    /* at most this many per read (0: any) */
};

static const char *fake_param(void *ctx, const char *name)
{
	struct fake *f = ctx;
	int i;

	for (i = 0; i < 16 && f->params[i][0]; i++)
		if (strcmp(f->params[i][0], name) == 0)
			return f->params[i][1];
	return NULL;
}

static int fake_read(void *ctx, char *buf, int n)
{
	struct fake *f = ctx;
	size_t left = f->body_len - f->pos, k = (size_t)n;

	if (k > left)
		k = left;
	if (f->max_chunk && k > f->max_chunk)
		k = f->max_chunk;
	if (f->body)
		memcpy(buf, f->body + f->pos, k);
	else
		memset(buf, 'x', k);
	f->pos += k;
	return (int)k;
}

static struct app app;
static char tokens_dir[64], tokens_path[96], messages_dir[128], labels_dir[128];

static int group_setup(void **state)
{
	FILE *f;

	(void)state;
	config_defaults(&app.cfg);
	snprintf(app.cfg.helper, sizeof(app.cfg.helper), "/nonexistent/roombox-helper");
	snprintf(app.config_path, sizeof(app.config_path), "/nonexistent/roombox.conf");
	snprintf(app.cgroup_mode, sizeof(app.cgroup_mode), "v2");
	app.cfg.max_body = 1024;
	snprintf(tokens_dir, sizeof(tokens_dir), "/tmp/roombox-test-router-XXXXXX");
	if (!mkdtemp(tokens_dir))
		return -1;
	snprintf(tokens_path, sizeof(tokens_path), "%s/tokens", tokens_dir);
	f = fopen(tokens_path, "w");
	if (!f)
		return -1;
	fputs("good-token\n", f);
	fclose(f);
	app.tokens = auth_tokens_new(tokens_path);
	/* a working message store, so cleanup's only failing part is the
	 * sandbox (whose helper does not exist) */
	char err[256];
	snprintf(messages_dir, sizeof(messages_dir), "%s/messages", tokens_dir);
	snprintf(labels_dir, sizeof(labels_dir), "%s/labels", tokens_dir);
	if (label_store_init(labels_dir, err, sizeof(err)) < 0)
		return -1;
	return store_init(messages_dir, err, sizeof(err));
}

static int group_teardown(void **state)
{
	(void)state;
	auth_tokens_free(app.tokens);
	unlink(tokens_path);
	rmdir(messages_dir);
	rmdir(labels_dir);
	rmdir(tokens_dir);
	return 0;
}

/* Serve one request; returns the status, *body gets the JSON text. */
static int serve(struct fake *f, struct response *rs, char *body, size_t bodylen)
{
	struct http_input in = { fake_param, fake_read, f };

	memset(rs, 0, sizeof(*rs));
	router_serve(&app, &in, rs);
	assert_non_null(rs->body);
	snprintf(body, bodylen, "%s", json_write(rs->body, NULL));
	return rs->status;
}

#define REQ(method, uri) { .params = { { "REQUEST_METHOD", method }, { "REQUEST_URI", uri }, \
				      { "HTTP_AUTHORIZATION", "Bearer good-token" } } }


/* ---- the route table ---- */

static void test_match(void **state)
{
	static const struct {
		const char *method, *path;
		int status;                  /* 0: matched */
		const char *room, *allow;
	} cases[] = {
		{ "GET", "/api/health", 0, "", NULL },
		{ "GET", "/api/rooms", 0, "", NULL },
		{ "POST", "/api/rooms", 0, "", NULL },
		{ "GET", "/api/rooms/r1", 0, "r1", NULL },
		{ "DELETE", "/api/rooms/r1", 0, "r1", NULL },
		{ "POST", "/api/rooms/r1/cleanup", 0, "r1", NULL },
		{ "POST", "/api/rooms/r1/sandbox/exec", 0, "r1", NULL },
		{ "DELETE", "/api/rooms/r1/sandbox/processes", 0, "r1", NULL },
		{ "POST", "/api/rooms/r1/sandbox/restart", 0, "r1", NULL },
		{ "POST", "/api/health", 405, NULL, "GET" },
		{ "HEAD", "/api/health", 405, NULL, "GET" },
		{ "DELETE", "/api/rooms", 405, NULL, "GET, POST" },
		{ "POST", "/api/rooms/r1", 405, NULL, "GET, PATCH, DELETE" },
		{ "GET", "/api/rooms/r1/cleanup", 405, NULL, "POST" },
		{ "GET", "/api/rooms/r1/sandbox/exec", 405, NULL, "POST" },
		{ "GET", "/api/rooms/r1/sandbox/restart", 405, NULL, "POST" },
		{ "get", "/api/health", 405, NULL, "GET" },      /* methods are case-sensitive */
		{ "GET", "/", 404, NULL, NULL },
		{ "GET", "", 404, NULL, NULL },
		{ "GET", "/api", 404, NULL, NULL },
		{ "GET", "/api/", 404, NULL, NULL },
		{ "GET", "/api/health/", 404, NULL, NULL },
		{ "GET", "/api//health", 404, NULL, NULL },
		{ "GET", "/API/health", 404, NULL, NULL },
		{ "GET", "api/health", 404, NULL, NULL },
		{ "POST", "/api/rooms/r1/sandbox", 404, NULL, NULL },
		{ "POST", "/api/rooms/r1/sandbox/exec/", 404, NULL, NULL },
		{ "POST", "/api/rooms/r1/sandbox/exec2", 404, NULL, NULL },
		{ "GET", "/api/rooms/r1/messages", 0, "r1", NULL },
		{ "PUT", "/api/rooms/r1/messages", 405, NULL, "GET, POST" },
		{ "GET", "/api/rooms/a/b", 404, NULL, NULL },
		{ "GET", "/api/rooms/", 0, "", NULL },            /* empty id: 400 later */
		{ "GET", "/api/rooms/%41", 0, "%41", NULL },      /* not decoded: 400 later */
		/* managed processes: the list, then {id}[/logs|/stdin] as the rest */
		{ "GET", "/api/rooms/r1/sandbox/processes", 0, "r1", NULL },
		{ "POST", "/api/rooms/r1/sandbox/processes", 0, "r1", NULL },
		{ "PUT", "/api/rooms/r1/sandbox/processes", 405, NULL, "GET, POST, DELETE" },
		{ "GET", "/api/rooms/r1/sandbox/processes/web", 0, "r1", NULL },
		{ "GET", "/api/rooms/r1/sandbox/processes/web/logs", 0, "r1", NULL },
		{ "POST", "/api/rooms/r1/sandbox/processes/web/stdin", 0, "r1", NULL },
		{ "DELETE", "/api/rooms/r1/sandbox/processes/web", 0, "r1", NULL },
		{ "PUT", "/api/rooms/r1/sandbox/processes/web", 405, NULL, "GET, POST, DELETE" },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct response rs = { 0 };
		struct route_match m;

		router_match(cases[i].method, cases[i].path, &m, &rs);
		if (cases[i].status == 0) {
			if (!m.m)
				fail_msg("%s %s: no match", cases[i].method, cases[i].path);
			assert_string_equal(m.room, cases[i].room);
			if (strstr(cases[i].path, "/processes"))   /* the list is its own route */
				assert_true(strstr(m.route->pattern, "{path*}") ? m.rest && *m.rest
					    : !m.rest);
			assert_null(rs.body);
			assert_string_equal(rs.allow, "");   /* no Allow on a match */
		} else {
			if (m.m || rs.status != cases[i].status)
				fail_msg("%s %s: status %d, want %d", cases[i].method,
					 cases[i].path, rs.status, cases[i].status);
			assert_string_equal(rs.allow, cases[i].allow ? cases[i].allow : "");
		}
		json_object_put(rs.body);
	}
}

static void test_long_room_segment_stays_invalid(void **state)
{
	char path[200];
	struct response rs = { 0 };
	struct route_match m;

	(void)state;
	memset(path, 0, sizeof(path));
	strcpy(path, "/api/rooms/");
	memset(path + strlen(path), 'a', 100);
	router_match("GET", path, &m, &rs);
	assert_non_null(m.m);
	assert_int_equal(strlen(m.room), ROOM_ID_MAX + 1);
	assert_false(room_id_valid(m.room));
}

static void test_request_path(void **state)
{
	struct fake f1 = { .params = { { "REQUEST_URI", "/api/rooms?x=1&y=/z" } } };
	struct fake f2 = { .params = { { "SCRIPT_NAME", "/api" }, { "PATH_INFO", "/health" } } };
	struct fake f3 = { .params = { { "REQUEST_URI", "" }, { "SCRIPT_NAME", "/api/rooms" } } };
	struct fake f4 = { 0 };
	struct http_input in = { fake_param, fake_read, NULL };
	char *p;

	(void)state;
	in.ctx = &f1;
	p = router_request_path(&in);
	assert_string_equal(p, "/api/rooms");
	free(p);
	in.ctx = &f2;
	p = router_request_path(&in);
	assert_string_equal(p, "/api/health");
	free(p);
	in.ctx = &f3;
	p = router_request_path(&in);
	assert_string_equal(p, "/api/rooms");
	free(p);
	in.ctx = &f4;
	p = router_request_path(&in);
	assert_string_equal(p, "");
	free(p);
}

/* ---- the pipeline ---- */

static void test_health_is_public(void **state)
{
	struct fake f = { .params = { { "REQUEST_METHOD", "GET" }, { "REQUEST_URI", "/api/health?probe=1" } } };
	struct response rs;
	char body[512];
	json_object *v;

	(void)state;
	app.cfg.disk_limit = 0;   /* no images: nothing said of them (below) */
	assert_int_equal(serve(&f, &rs, body, sizeof(body)), 200);
	/* the version is whatever debian/changelog said when health.o was built */
	assert_true(json_object_object_get_ex(rs.body, "version", &v));
	assert_true(json_object_is_type(v, json_type_string));
	json_object_object_del(rs.body, "version");
	assert_string_equal(json_write(rs.body, NULL),
			    "{\"ok\":true,\"cgroup\":\"v2\",\"auth\":\"token\",\"network\":\"none\",\"snapshotCopy\":\"none\"}");
	json_object_put(rs.body);

	/* egress: the name servers a room can use, and a warning when none is */
	app.cfg.network = NETWORK_EGRESS;
	snprintf(app.dns[0], sizeof(app.dns[0]), "192.0.2.53");
	app.dns_count = 1;
	assert_int_equal(serve(&f, &rs, body, sizeof(body)), 200);
	json_object_object_del(rs.body, "version");
	assert_string_equal(json_write(rs.body, NULL),
			    "{\"ok\":true,\"cgroup\":\"v2\",\"auth\":\"token\",\"network\":\"egress\","
			    "\"dns\":[\"192.0.2.53\"],\"snapshotCopy\":\"none\"}");
	json_object_put(rs.body);
	app.dns_count = 0;
	assert_int_equal(serve(&f, &rs, body, sizeof(body)), 200);
	json_object_object_del(rs.body, "version");
	assert_string_equal(json_write(rs.body, NULL),
			    "{\"ok\":true,\"cgroup\":\"v2\",\"auth\":\"token\",\"network\":\"egress\","
			    "\"dns\":[],\"dnsWarning\":\"no name server is usable from a room\","
			    "\"snapshotCopy\":\"none\"}");
	json_object_put(rs.body);
	app.cfg.network = NETWORK_NONE;
	app.cfg.disk_limit = 1 << 30;
}

/* the API's OpenAPI document: public like /api/health, served whole as
 * JSON (the bytes of docs/openapi.json, built in) */
static void test_openapi_document_is_public(void **state)
{
	struct fake f = { .params = { { "REQUEST_METHOD", "GET" }, { "REQUEST_URI", "/api/openapi.json" } } };
	struct http_input in = { .param = fake_param, .read = fake_read, .ctx = &f };
	struct response rs = { 0 };
	json_object *doc, *v;

	(void)state;
	router_serve(&app, &in, &rs);
	assert_int_equal(rs.status, 200);
	assert_non_null(rs.text);
	assert_string_equal(rs.content_type, "application/json");
	assert_int_equal(strlen(rs.text), rs.text_len);   /* no NUL inside, none cut */
	doc = json_tokener_parse(rs.text);
	assert_non_null(doc);
	assert_true(json_object_object_get_ex(doc, "openapi", &v));
	assert_memory_equal(json_object_get_string(v), "3.1.", 4);
	assert_true(json_object_object_get_ex(doc, "paths", &v));
	json_object_put(doc);
	free(rs.text);
}

/* disk: the helper's record of the rooms' images, the free space now, and
 * what the images may still grow by as a share of it */
static void test_health_says_how_far_disk_is_committed(void **state)
{
	struct fake f = { .params = { { "REQUEST_METHOD", "GET" }, { "REQUEST_URI", "/api/health" } } };
	struct response rs;
	char body[1024], path[PATH_MAX], state_dir[sizeof(app.cfg.state_dir)];
	json_object *d;
	FILE *rec;

	(void)state;
	memcpy(state_dir, app.cfg.state_dir, sizeof(state_dir));
	snprintf(app.cfg.state_dir, sizeof(app.cfg.state_dir), "%s", tokens_dir);
	assert_int_equal(serve(&f, &rs, body, sizeof(body)), 200);
	/* no record yet (no helper has run): the configuration and the free space */
	assert_true(json_object_object_get_ex(rs.body, "disk", &d));
	assert_int_equal(json_object_get_int64(json_object_object_get(d, "limitBytes")), 1 << 30);
	assert_true(json_object_get_double(json_object_object_get(d, "overcommit")) == 1.0);
	assert_true(json_object_get_int64(json_object_object_get(d, "freeBytes")) > 0);
	assert_null(json_object_object_get(d, "committed"));
	json_object_put(rs.body);

	snprintf(path, sizeof(path), "%s/disk-commit.json", tokens_dir);
	rec = fopen(path, "w");
	assert_non_null(rec);
	fputs("{\"rooms\":2,\"promisedBytes\":3000,\"usedBytes\":1000,"
	      "\"countedAt\":\"2026-12-03T10:00:00.000Z\"}\n", rec);
	fclose(rec);
	assert_int_equal(serve(&f, &rs, body, sizeof(body)), 200);
	assert_true(json_object_object_get_ex(rs.body, "disk", &d));
	assert_int_equal(json_object_get_int64(json_object_object_get(d, "rooms")), 2);
	assert_int_equal(json_object_get_int64(json_object_object_get(d, "promisedBytes")), 3000);
	assert_int_equal(json_object_get_int64(json_object_object_get(d, "usedBytes")), 1000);
	assert_string_equal(json_object_get_string(json_object_object_get(d, "countedAt")),
			    "2026-12-03T10:00:00.000Z");
	double committed = json_object_get_double(json_object_object_get(d, "committed"));
	int64_t free_bytes = json_object_get_int64(json_object_object_get(d, "freeBytes"));
	assert_true(committed > 0 && committed * (double)free_bytes > 1999 && committed * (double)free_bytes < 2001);
	json_object_put(rs.body);
	unlink(path);
	memcpy(app.cfg.state_dir, state_dir, sizeof(state_dir));
}

static void test_unauthorized(void **state)
{
	static const char *const headers[] = {
		NULL, "", "Bearer", "Bearer wrong", "Bearer good-token2", "Bearer good",
		"Basic Z29vZC10b2tlbg==", "good-token", "Bearer good-token extra",
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(headers) / sizeof(headers[0]); i++) {
		struct fake f = { .params = { { "REQUEST_METHOD", "GET" }, { "REQUEST_URI", "/api/rooms/bad id" },
					      { "HTTP_AUTHORIZATION", headers[i] } } };
		struct response rs;
		char body[256];

		if (!headers[i])
			f.params[2][0] = NULL;
		assert_int_equal(serve(&f, &rs, body, sizeof(body)), 401);
		assert_string_equal(body, "{\"error\":\"unauthorized\"}");
		assert_true(rs.www_authenticate);
		json_object_put(rs.body);
	}
}

static void test_not_found_and_method(void **state)
{
	struct fake f1 = REQ("GET", "/nope");
	struct fake f2 = REQ("PUT", "/api/rooms/r1");
	struct fake f3 = { .params = { { "REQUEST_METHOD", "PATCH" }, { "REQUEST_URI", "/api/rooms" } } };
	struct response rs;
	char body[256];

	(void)state;
	assert_int_equal(serve(&f1, &rs, body, sizeof(body)), 404);
	assert_string_equal(body, "{\"error\":\"not found\"}");
	json_object_put(rs.body);
	assert_int_equal(serve(&f2, &rs, body, sizeof(body)), 405);
	assert_string_equal(body, "{\"error\":\"method not allowed\"}");
	assert_string_equal(rs.allow, "GET, PATCH, DELETE");
	json_object_put(rs.body);
	/* no token needed to learn the table */
	assert_int_equal(serve(&f3, &rs, body, sizeof(body)), 405);
	assert_string_equal(rs.allow, "GET, POST");
	json_object_put(rs.body);
}

static void test_invalid_room_id(void **state)
{
	static const char *const uris[] = {
		"/api/rooms/", "/api/rooms/-a", "/api/rooms/_a", "/api/rooms/a.b",
		"/api/rooms/a%20b", "/api/rooms/%41", "/api/rooms/a b/cleanup",
		"/api/rooms/\xc3\xa9/sandbox/exec", "/api/rooms/..",
		"/api/rooms/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(uris) / sizeof(uris[0]); i++) {
		struct fake f = REQ(strstr(uris[i], "/cleanup") || strstr(uris[i], "/exec") ? "POST" : "GET",
				    uris[i]);
		struct response rs;
		char body[256];

		if (serve(&f, &rs, body, sizeof(body)) != 400)
			fail_msg("%s: status %d", uris[i], rs.status);
		assert_string_equal(body, "{\"error\":\"invalid room id\"}");
		json_object_put(rs.body);
	}
}

static int exec_request(const char *content_length, const char *text, size_t len,
			struct response *rs, char *body, size_t bodylen, size_t *consumed)
{
	struct fake f = { .params = { { "REQUEST_METHOD", "POST" },
				      { "REQUEST_URI", "/api/rooms/room-1/sandbox/exec" },
				      { "HTTP_AUTHORIZATION", "Bearer good-token" },
				      { content_length ? "CONTENT_LENGTH" : NULL, content_length } },
			  .body = text, .body_len = len, .max_chunk = 7 };
	int status = serve(&f, rs, body, bodylen);

	if (consumed)
		*consumed = f.pos;
	return status;
}

static void test_body_json_errors(void **state)
{
	struct response rs;
	char body[512];

	(void)state;
	assert_int_equal(exec_request("0", "", 0, &rs, body, sizeof(body), NULL), 400);
	assert_string_equal(body, "{\"error\":\"invalid JSON: unexpected end of data\"}");
	json_object_put(rs.body);
	assert_int_equal(exec_request("10", "{\"cmd\":\"x\"", 10, &rs, body, sizeof(body), NULL), 400);
	assert_string_equal(body, "{\"error\":\"invalid JSON: unexpected end of data\"}");
	json_object_put(rs.body);
	assert_int_equal(exec_request("13", "{\"cmd\":\"x\"} x", 13, &rs, body, sizeof(body), NULL), 400);
	assert_string_equal(body, "{\"error\":\"invalid JSON: unexpected character\"}");
	json_object_put(rs.body);
	assert_int_equal(exec_request("11", "{'cmd':'x'}", 11, &rs, body, sizeof(body), NULL), 400);
	assert_string_equal(body, "{\"error\":\"invalid JSON: unexpected character\"}");
	json_object_put(rs.body);
	assert_int_equal(exec_request("13", "{\"cmd\":\"a\0b\"}", 13, &rs, body, sizeof(body), NULL), 400);
	assert_string_equal(body, "{\"error\":\"invalid JSON: invalid string sequence\"}");
	json_object_put(rs.body);
}

static void test_body_validation(void **state)
{
	struct response rs;
	char body[512];

	(void)state;
	assert_int_equal(exec_request("2", "{}", 2, &rs, body, sizeof(body), NULL), 400);
	assert_string_equal(body, "{\"error\":\"invalid request\",\"details\":"
			    "{\"cmd\":[\"Invalid input: expected string, received undefined\"]}}");
	json_object_put(rs.body);
	assert_int_equal(exec_request("4", "null", 4, &rs, body, sizeof(body), NULL), 400);
	assert_string_equal(body, "{\"error\":\"invalid request\",\"details\":{}}");
	json_object_put(rs.body);
	assert_int_equal(exec_request("18", "{\"cmd\":\"a\\u0000b\"}", 18, &rs, body, sizeof(body), NULL), 400);
	assert_string_equal(body, "{\"error\":\"invalid request\",\"details\":"
			    "{\"cmd\":[\"Command cannot contain NUL bytes\"]}}");
	json_object_put(rs.body);
}

static void test_body_too_large(void **state)
{
	struct response rs;
	char body[256];
	size_t consumed = 0;

	(void)state;
	/* announced too large: refused before reading, the rest thrown away */
	assert_int_equal(exec_request("5000", NULL, 5000, &rs, body, sizeof(body), &consumed), 413);
	assert_string_equal(body, "{\"error\":\"request body too large\"}");
	assert_int_equal(consumed, 5000);
	json_object_put(rs.body);
	/* huge: what is discarded is bounded */
	assert_int_equal(exec_request("10000000000", NULL, (size_t)HTTP_DISCARD_MAX * 2,
				      &rs, body, sizeof(body), &consumed), 413);
	assert_true(consumed <= HTTP_DISCARD_MAX);
	json_object_put(rs.body);
	/* no Content-Length: read to the end, stop past max_body */
	assert_int_equal(exec_request(NULL, NULL, 3000, &rs, body, sizeof(body), &consumed), 413);
	assert_string_equal(body, "{\"error\":\"request body too large\"}");
	json_object_put(rs.body);
	/* exactly max_body is fine (then it is just not JSON) */
	assert_int_equal(exec_request("1024", NULL, 1024, &rs, body, sizeof(body), NULL), 400);
	assert_string_equal(body, "{\"error\":\"invalid JSON: unexpected character\"}");
	json_object_put(rs.body);
}

static void test_content_length(void **state)
{
	struct response rs;
	char body[512];

	(void)state;
	static const char *const bad[] = { "abc", "-1", "+5", " 5", "5 ", "1e3", "99999999999999999999999" };
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(exec_request(bad[i], "{}", 2, &rs, body, sizeof(body), NULL), 400);
		assert_string_equal(body, "{\"error\":\"invalid Content-Length\"}");
		json_object_put(rs.body);
	}
	/* shorter than announced */
	assert_int_equal(exec_request("20", "{\"cmd\":\"x\"}", 11, &rs, body, sizeof(body), NULL), 400);
	assert_string_equal(body, "{\"error\":\"request body shorter than its Content-Length (11 of 20 bytes)\"}");
	json_object_put(rs.body);
	/* missing Content-Length: the stream's end is the body's end */
	assert_int_equal(exec_request(NULL, "{}", 2, &rs, body, sizeof(body), NULL), 400);
	assert_string_equal(body, "{\"error\":\"invalid request\",\"details\":"
			    "{\"cmd\":[\"Invalid input: expected string, received undefined\"]}}");
	json_object_put(rs.body);
	/* empty Content-Length is the same as none */
	assert_int_equal(exec_request("", "{}", 2, &rs, body, sizeof(body), NULL), 400);
	assert_string_equal(body, "{\"error\":\"invalid request\",\"details\":"
			    "{\"cmd\":[\"Invalid input: expected string, received undefined\"]}}");
	json_object_put(rs.body);
}

/* Past validation the helper is run; here it does not exist. */
static void test_exec_helper_missing(void **state)
{
	struct response rs;
	char body[512];

	(void)state;
	assert_int_equal(exec_request("12", "{\"cmd\":\"ls\"}", 12, &rs, body, sizeof(body), NULL), 500);
	assert_string_equal(body, "{\"error\":\"sandbox execution failed: roombox-helper: "
			    "spawn /nonexistent/roombox-helper: No such file or directory\"}");
	json_object_put(rs.body);
	assert_int_equal(atomic_load(&app.execs_running), 0);   /* slot given back */
}

static void test_exec_concurrency_limit(void **state)
{
	struct response rs;
	char body[512];

	(void)state;
	atomic_store(&app.execs_running, app.cfg.max_concurrent_execs);
	assert_int_equal(exec_request("12", "{\"cmd\":\"ls\"}", 12, &rs, body, sizeof(body), NULL), 503);
	assert_string_equal(body, "{\"error\":\"too many concurrent execs\"}");
	assert_int_equal(rs.retry_after, 1);
	json_object_put(rs.body);
	assert_int_equal(atomic_load(&app.execs_running), app.cfg.max_concurrent_execs);
	atomic_store(&app.execs_running, 0);
}

static void test_room_routes_helper_missing(void **state)
{
	struct fake f1 = REQ("DELETE", "/api/rooms/r1");
	struct fake f2 = REQ("POST", "/api/rooms/r1/cleanup");
	struct fake f3 = REQ("GET", "/api/rooms/r1");
	struct fake f4 = REQ("POST", "/api/rooms");
	struct fake f5 = REQ("DELETE", "/api/rooms/r1/sandbox/processes");
	struct fake f6 = REQ("POST", "/api/rooms/r1/sandbox/restart");
	struct response rs;
	char body[512];

	(void)state;
	assert_int_equal(serve(&f1, &rs, body, sizeof(body)), 207);
	/* the helper's path is the service log's business, not the client's */
	assert_string_equal(body, "{\"cleaned\":true,\"errors\":[\"sandbox: roombox-helper: "
			    "spawn roombox-helper: No such file or directory\"]}");
	json_object_put(rs.body);
	assert_int_equal(serve(&f2, &rs, body, sizeof(body)), 207);
	json_object_put(rs.body);
	assert_int_equal(serve(&f3, &rs, body, sizeof(body)), 500);
	assert_string_equal(body, "{\"error\":\"roombox-helper: "
			    "spawn roombox-helper: No such file or directory\"}");
	json_object_put(rs.body);
	assert_int_equal(serve(&f4, &rs, body, sizeof(body)), 500);
	json_object_put(rs.body);
	/* the helper's failure, not a 404: nothing says the room is missing */
	assert_int_equal(serve(&f5, &rs, body, sizeof(body)), 500);
	assert_string_equal(body, "{\"error\":\"roombox-helper: "
			    "spawn roombox-helper: No such file or directory\"}");
	json_object_put(rs.body);
	assert_int_equal(serve(&f6, &rs, body, sizeof(body)), 500);
	json_object_put(rs.body);
}

static void test_auth_none(void **state)
{
	struct auth_tokens *saved = app.tokens;
	struct fake f = { .params = { { "REQUEST_METHOD", "GET" }, { "REQUEST_URI", "/api/rooms/-bad" } } };
	struct fake h = { .params = { { "REQUEST_METHOD", "GET" }, { "REQUEST_URI", "/api/health" } } };
	struct response rs;
	char body[256];

	(void)state;
	app.tokens = NULL;
	app.cfg.auth = AUTH_NONE;
	assert_int_equal(serve(&f, &rs, body, sizeof(body)), 400);   /* not 401 */
	json_object_put(rs.body);
	assert_int_equal(serve(&h, &rs, body, sizeof(body)), 200);
	assert_non_null(strstr(body, "\"auth\":\"none\""));
	json_object_put(rs.body);
	app.cfg.auth = AUTH_TOKEN;
	app.tokens = saved;
}

/* ---- the answer on the wire ---- */

static void test_render(void **state)
{
	struct response rs = { 0 };
	size_t len = 0;
	char *out;

	(void)state;
	snprintf(rs.allow, sizeof(rs.allow), "GET, POST");
	response_error(&rs, 405, "method not allowed");
	out = http_render(&rs, &len);
	assert_string_equal(out, "Status: 405 Method Not Allowed\r\n"
			    "Content-Type: application/json\r\n"
			    "Content-Length: 31\r\n"
			    "Allow: GET, POST\r\n"
			    "\r\n"
			    "{\"error\":\"method not allowed\"}\n");
	assert_int_equal(len, strlen(out));
	free(out);
	json_object_put(rs.body);

	memset(&rs, 0, sizeof(rs));
	rs.www_authenticate = true;
	response_error(&rs, 401, "unauthorized");
	out = http_render(&rs, &len);
	assert_non_null(strstr(out, "Status: 401 Unauthorized\r\n"));
	assert_non_null(strstr(out, "WWW-Authenticate: Bearer\r\n"));
	free(out);
	json_object_put(rs.body);

	memset(&rs, 0, sizeof(rs));
	rs.retry_after = 1;
	response_error(&rs, 503, "too many concurrent execs");
	out = http_render(&rs, &len);
	assert_non_null(strstr(out, "Status: 503 Service Unavailable\r\n"));
	assert_non_null(strstr(out, "Retry-After: 1\r\n"));
	free(out);
	json_object_put(rs.body);

	/* "/" unescaped, NUL escaped, output one line */
	memset(&rs, 0, sizeof(rs));
	{
		json_object *o = json_object_new_object();

		json_object_object_add(o, "s", json_object_new_string_len("/a\0\n", 4));
		response_json(&rs, 200, o);
	}
	out = http_render(&rs, &len);
	assert_non_null(strstr(out, "\r\n\r\n{\"s\":\"/a\\u0000\\n\"}\n"));
	free(out);
	json_object_put(rs.body);

	/* no body at all is a 500, never an empty answer */
	memset(&rs, 0, sizeof(rs));
	rs.status = 200;
	out = http_render(&rs, &len);
	assert_non_null(strstr(out, "Status: 500 "));
	free(out);
}

/* A parked request is released holding its room's share: whatever ends
 * it (here its token, rotated while it waited) gives the share back. */
static void test_released_request_gives_share_back(void **state)
{
	struct fake f = { .params = { { "REQUEST_METHOD", "GET" }, { "REQUEST_URI", "/api/rooms/r1" },
				      { "HTTP_AUTHORIZATION", "Bearer rotated-away" } } };
	struct http_input in = { fake_param, fake_read, &f };
	struct fair_share fs;
	struct response rs = { .room_worker = ROOM_WORKER_HELD };

	(void)state;
	assert_int_equal(fair_share_init(&fs, 4, 1), 0);
	app.room_workers = &fs;
	assert_int_equal(fair_share_take(&fs, "r1", false), FAIR_SHARE_TAKEN);   /* by the park thread */
	router_serve(&app, &in, &rs);
	assert_int_equal(rs.status, 401);
	assert_int_equal(fs.held, 0);
	assert_int_equal(fair_share_take(&fs, "r1", false), FAIR_SHARE_TAKEN);
	app.room_workers = NULL;
	json_object_put(rs.body);
	free(fs.rooms);
}

/* A room request the pool has no free worker for waits (parked) as one
 * past its room's share does; so does a fresh one of a room whose
 * requests already wait (first come, first served). */
static bool r2_waits(const char *room)
{
	return strcmp(room, "r2") == 0;
}

static void test_pool_full_and_queued_park(void **state)
{
	struct fake f = REQ("GET", "/api/rooms/r1");
	struct fake f2 = REQ("GET", "/api/rooms/r2");
	struct http_input in = { fake_param, fake_read, &f }, in2 = { fake_param, fake_read, &f2 };
	struct fair_share fs;
	struct response rs = { .room_worker = ROOM_WORKER_TAKE };

	(void)state;
	assert_int_equal(fair_share_init(&fs, 4, 1), 0);
	app.room_workers = &fs;
	app.room_workers_park = true;
	for (const char *const *r = (const char *const[]){ "a", "b", "c", NULL }; *r; r++)
		assert_int_equal(fair_share_take(&fs, *r, false), FAIR_SHARE_TAKEN);
	router_serve(&app, &in, &rs);
	assert_string_equal(rs.park, "r1");
	assert_null(rs.body);
	fair_share_give(&fs, "a");
	fs.waiting = r2_waits;
	memset(&rs, 0, sizeof(rs));
	router_serve(&app, &in2, &rs);
	assert_string_equal(rs.park, "r2");
	assert_int_equal(fs.held, 2);
	app.room_workers = NULL;
	app.room_workers_park = false;
	free(fs.rooms);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_match),
		cmocka_unit_test(test_long_room_segment_stays_invalid),
		cmocka_unit_test(test_request_path),
		cmocka_unit_test(test_health_is_public),
		cmocka_unit_test(test_health_says_how_far_disk_is_committed),
		cmocka_unit_test(test_openapi_document_is_public),
		cmocka_unit_test(test_unauthorized),
		cmocka_unit_test(test_not_found_and_method),
		cmocka_unit_test(test_invalid_room_id),
		cmocka_unit_test(test_body_json_errors),
		cmocka_unit_test(test_body_validation),
		cmocka_unit_test(test_body_too_large),
		cmocka_unit_test(test_content_length),
		cmocka_unit_test(test_exec_helper_missing),
		cmocka_unit_test(test_exec_concurrency_limit),
		cmocka_unit_test(test_room_routes_helper_missing),
		cmocka_unit_test(test_auth_none),
		cmocka_unit_test(test_released_request_gives_share_back),
		cmocka_unit_test(test_pool_full_and_queued_park),
		cmocka_unit_test(test_render),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
