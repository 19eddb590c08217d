/* Unit tests for fcgi-app/service/metrics.c (the counters and their Prometheus
 * text exposition), fcgi-app/http/reqlog.c (request ids and log lines) and the
 * route slots of fcgi-app/http/router.c that label them. */
#include <regex.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "http.h"
#include "metrics.h"
#include "protocol.h"
#include "reqlog.h"
#include "router.h"

#define MS 1000000ull
#define S 1000000000ull

/* Two fake routes for slots 0 and 1; slot 2 has a label to escape. */
static bool fake_slot_name(int slot, const char **route, const char **method)
{
	static const char *const routes[] = { "/api/a/{id}", "/api/b", "/x\"y\\z" };

	if (slot < 0 || slot > 2)
		return false;
	*route = routes[slot];
	*method = slot == 1 ? "POST" : "GET";
	return true;
}

static char *render(const struct metrics_rooms *rooms)
{
	size_t len = 0;
	char *text = metrics_render(rooms, fake_slot_name, &len);

	assert_non_null(text);
	assert_int_equal(strlen(text), len);
	return text;
}

/* The value of the sample line that starts with `series ` (exact match of
 * name and labels), or -1 when there is none. */
static double sample(const char *text, const char *series)
{
	size_t n = strlen(series);

	for (const char *p = text; *p; p = strchr(p, '\n') + 1) {
		if (strncmp(p, series, n) == 0 && p[n] == ' ')
			return strtod(p + n + 1, NULL);
		if (!strchr(p, '\n'))
			break;
	}
	return -1;
}

static int setup(void **state)
{
	(void)state;
	metrics_reset();
	return 0;
}

static void test_http_counters_by_route_and_code(void **state)
{
	char *t;

	(void)state;
	metrics_http_request(0, 200, 1 * MS);
	metrics_http_request(0, 200, 1 * MS);
	metrics_http_request(0, 404, 1 * MS);
	metrics_http_request(1, 201, 1 * MS);
	metrics_http_request(METRICS_ROUTE_SLOTS, 200, 1);   /* out of range: ignored */
	metrics_http_request(-1, 200, 1);
	t = render(NULL);
	assert_true(sample(t, "roombox_http_requests_total{route=\"/api/a/{id}\",method=\"GET\",code=\"200\"}") == 2);
	assert_true(sample(t, "roombox_http_requests_total{route=\"/api/a/{id}\",method=\"GET\",code=\"404\"}") == 1);
	assert_true(sample(t, "roombox_http_requests_total{route=\"/api/b\",method=\"POST\",code=\"201\"}") == 1);
	/* a slot nobody used has no series */
	assert_null(strstr(t, "/x\\\""));
	free(t);
}

static void test_histogram_buckets_are_cumulative(void **state)
{
	char *t;
	const char *h = "roombox_http_request_duration_seconds";
	char series[256];

	(void)state;
	metrics_http_request(1, 200, 500000);          /* 0.5 ms */
	metrics_http_request(1, 200, 1 * MS);          /* exactly on a bound: le="0.001" */
	metrics_http_request(1, 200, 3 * MS);
	metrics_http_request(1, 200, 2 * S);
	metrics_http_request(1, 200, 700 * S);         /* past 10 min: +Inf only */
	t = render(NULL);
#define BUCKET(le) (snprintf(series, sizeof(series), "%s_bucket{route=\"/api/b\",method=\"POST\",le=\"%s\"}", h, le), sample(t, series))
	assert_true(BUCKET("0.001") == 2);
	assert_true(BUCKET("0.0025") == 2);
	assert_true(BUCKET("0.005") == 3);
	assert_true(BUCKET("1") == 3);
	assert_true(BUCKET("2.5") == 4);
	assert_true(BUCKET("600") == 4);
	assert_true(BUCKET("+Inf") == 5);
#undef BUCKET
	snprintf(series, sizeof(series), "%s_count{route=\"/api/b\",method=\"POST\"}", h);
	assert_true(sample(t, series) == 5);
	snprintf(series, sizeof(series), "%s_sum{route=\"/api/b\",method=\"POST\"}", h);
	assert_true(sample(t, series) > 702.00449 && sample(t, series) < 702.00451);
	free(t);
}

static void test_label_values_are_escaped(void **state)
{
	char *t;

	(void)state;
	metrics_http_request(2, 200, 1);
	t = render(NULL);
	assert_non_null(strstr(t, "{route=\"/x\\\"y\\\\z\",method=\"GET\",code=\"200\"} 1\n"));
	free(t);
}

static void test_code_table_overflow_is_other(void **state)
{
	char *t;

	(void)state;
	for (int code = 200; code < 240; code++)
		metrics_http_request(0, code, 1);
	t = render(NULL);
	/* 15 codes of their own, the other 25 together */
	assert_true(sample(t, "roombox_http_requests_total{route=\"/api/a/{id}\",method=\"GET\",code=\"214\"}") == 1);
	assert_true(sample(t, "roombox_http_requests_total{route=\"/api/a/{id}\",method=\"GET\",code=\"215\"}") == -1);
	assert_true(sample(t, "roombox_http_requests_total{route=\"/api/a/{id}\",method=\"GET\",code=\"other\"}") == 25);
	free(t);
}

/* The helper's exec answer (common/protocol.h): a wait status, not an
 * exit code. */
static struct helper_exec_ans exec_answers[8];
static int exec_answer_n;

static const struct helper_exec_ans *exec_reply(int exit_code, bool timed_out)
{
	struct helper_exec_ans *a = &exec_answers[exec_answer_n++ % 8];

	*a = (struct helper_exec_ans){ .wait_status = timed_out ? SIGKILL : exit_code << 8,
				       .timed_out = timed_out };
	return a;
}

/* ok: an answer came (exec: a, else any) */
static const struct helper_exec_ans ANY;

static void call_done(const char *op, const struct helper_exec_ans *a, int status, uint64_t ns)
{
	uint32_t code = 0;

	for (uint32_t i = 1; i < HOP_COUNT; i++)
		if (!strcmp(helper_op_name(i), op))
			code = i;
	metrics_helper_call_done(code, a != NULL, a == &ANY ? NULL : a, status, ns);
}

static void test_exec_outcomes_from_helper_calls(void **state)
{
	char *t;

	(void)state;
	call_done("exec", exec_reply(0, false), 0, 2 * MS);
	call_done("exec", exec_reply(0, false), 0, 2 * MS);
	call_done("exec", exec_reply(3, false), 0, 2 * MS);
	call_done("exec", exec_reply(124, true), 0, 2 * S);
	call_done("exec", NULL, 500, 1 * MS);       /* the sandbox failed */
	call_done("exec", NULL, 429, 1 * MS);       /* refused: never ran */
	call_done("status", NULL, 404, 1 * MS);     /* an answer, not an error */
	call_done("destroy", NULL, 500, 1 * MS);
	t = render(NULL);
	assert_true(sample(t, "roombox_exec_total{outcome=\"ok\"}") == 2);
	assert_true(sample(t, "roombox_exec_total{outcome=\"nonzero\"}") == 1);
	assert_true(sample(t, "roombox_exec_total{outcome=\"timeout\"}") == 1);
	assert_true(sample(t, "roombox_exec_total{outcome=\"error\"}") == 1);
	assert_true(sample(t, "roombox_exec_duration_seconds_count") == 5);
	assert_true(sample(t, "roombox_exec_duration_seconds_bucket{le=\"0.001\"}") == 1);
	assert_true(sample(t, "roombox_exec_duration_seconds_bucket{le=\"0.0025\"}") == 4);
	assert_true(sample(t, "roombox_helper_errors_total{op=\"exec\"}") == 1);
	assert_true(sample(t, "roombox_helper_errors_total{op=\"destroy\"}") == 1);
	assert_true(sample(t, "roombox_helper_errors_total{op=\"status\"}") == -1);
	free(t);
}

static void test_helper_time_is_per_thread_and_taken(void **state)
{
	(void)state;
	metrics_helper_time_take();
	call_done("list", &ANY, 0, 5 * MS);
	call_done("status", &ANY, 0, 7 * MS);
	assert_int_equal(metrics_helper_time_take(), 12 * MS);
	assert_int_equal(metrics_helper_time_take(), 0);
}

static void test_other_families(void **state)
{
	struct metrics_rooms rooms = { .known = true, .running = 3, .stopped = 4 };
	char *t;

	(void)state;
	metrics_room_started(ROOM_START_NEW);
	metrics_room_started(ROOM_START_RESTART);
	metrics_room_started(ROOM_START_RESTART);
	metrics_idle_stops_add(5);
	metrics_processes_running_add(2);
	metrics_processes_running_add(-1);
	metrics_llm_request(LLM_ERROR);
	t = render(&rooms);
	assert_true(sample(t, "roombox_rooms{state=\"running\"}") == 3);
	assert_true(sample(t, "roombox_rooms{state=\"stopped\"}") == 4);
	assert_true(sample(t, "roombox_room_starts_total{kind=\"new\"}") == 1);
	assert_true(sample(t, "roombox_room_starts_total{kind=\"restart\"}") == 2);
	assert_true(sample(t, "roombox_idle_stops_total") == 5);
	assert_true(sample(t, "roombox_processes_running") == 1);
	assert_true(sample(t, "roombox_llm_requests_total{outcome=\"ok\"}") == 0);
	assert_true(sample(t, "roombox_llm_requests_total{outcome=\"error\"}") == 1);
	assert_true(sample(t, "roombox_build_info{version=\"" ROOMBOX_VERSION "\"}") == 1);
	free(t);
	/* the helper could not count the rooms: no made-up zeros */
	rooms.known = false;
	t = render(&rooms);
	assert_null(strstr(t, "roombox_rooms"));
	free(t);
}

/* Every line is a HELP, a TYPE or a sample; each family's TYPE comes once,
 * before its samples, and every sample belongs to the family last typed. */
static void test_exposition_shape(void **state)
{
	struct metrics_rooms rooms = { .known = true };
	regex_t sample_re;
	char *t, *save = NULL, family[128] = "", seen[4096] = " ";

	(void)state;
	metrics_http_request(0, 200, 1);
	call_done("exec", NULL, 500, 1);
	t = render(&rooms);
	assert_int_equal(t[strlen(t) - 1], '\n');
	assert_int_equal(regcomp(&sample_re, "^([a-z_]+)(\\{([a-z_]+=\"([^\"\\\\]|\\\\.)*\",?)*\\})? [0-9.e+-]+$",
				 REG_EXTENDED), 0);
	for (char *line = strtok_r(t, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char name[128], type[32], key[140];

		if (sscanf(line, "# TYPE %127s %31s", name, type) == 2) {
			snprintf(key, sizeof(key), " %s ", name);
			assert_null(strstr(seen, key));
			strcat(seen, name);
			strcat(seen, " ");
			snprintf(family, sizeof(family), "%s", name);
			continue;
		}
		if (strncmp(line, "# HELP ", 7) == 0)
			continue;
		if (regexec(&sample_re, line, 0, NULL, 0) != 0)
			fail_msg("not a sample line: %s", line);
		assert_int_equal(strncmp(line, family, strlen(family)), 0);
	}
	regfree(&sample_re);
	free(t);
}

/* ---- route slots (router.c) ---- */

static void test_router_slots_name_patterns_only(void **state)
{
	struct response rs = { 0 };
	struct route_match m;
	const char *route, *method;
	int slot;

	(void)state;
	router_match("POST", "/api/rooms/r1/sandbox/exec", &m, &rs);
	slot = router_slot(&m);
	assert_true(router_slot_name(slot, &route, &method));
	assert_string_equal(route, "/api/rooms/{id}/sandbox/exec");
	assert_string_equal(method, "POST");

	router_match("GET", "/metrics", &m, &rs);
	assert_true(router_slot_name(router_slot(&m), &route, &method));
	assert_string_equal(route, "/metrics");

	router_match("PATCH", "/api/rooms/r1/sandbox/exec", &m, &rs);   /* 405 */
	json_object_put(rs.body);
	rs.body = NULL;
	assert_true(router_slot_name(router_slot(&m), &route, &method));
	assert_string_equal(route, "/api/rooms/{id}/sandbox/exec");
	assert_string_equal(method, "other");

	router_match("GET", "/api/some/raw/path", &m, &rs);              /* 404 */
	json_object_put(rs.body);
	assert_true(router_slot_name(router_slot(&m), &route, &method));
	assert_string_equal(route, "unmatched");
	assert_string_equal(method, "other");

	for (slot = 0; slot < METRICS_ROUTE_SLOTS; slot++)
		if (router_slot_name(slot, &route, &method))
			assert_true(route[0] == '/' || strcmp(route, "unmatched") == 0);
	assert_false(router_slot_name(-1, &route, &method));
}

/* ---- the request log (reqlog.c) ---- */

static void test_request_ids_unique_hex(void **state)
{
	char a[REQUEST_ID_LEN + 1], b[REQUEST_ID_LEN + 1];

	(void)state;
	reqlog_new_id(a);
	reqlog_new_id(b);
	assert_int_equal(strlen(a), REQUEST_ID_LEN);
	assert_int_equal(strspn(a, "0123456789abcdef"), REQUEST_ID_LEN);
	assert_string_not_equal(a, b);
}

static void test_log_line_text(void **state)
{
	struct reqlog r = { .id = "00112233aabbccdd", .method = "POST",
			    .route = "/api/rooms/{id}/sandbox/exec", .room = "r1",
			    .path = "/api/rooms/r1/sandbox/exec", .status = 200,
			    .duration_ns = 12345678, .helper_ns = 10000000 };
	char line[1024];

	(void)state;
	reqlog_format(LOG_FORMAT_TEXT, &r, line, sizeof(line));
	assert_string_equal(line, "roombox-fcgi: request id=00112233aabbccdd method=POST "
			    "route=/api/rooms/{id}/sandbox/exec room=r1 status=200 "
			    "duration_ms=12.346 helper_ms=10.000 path=/api/rooms/r1/sandbox/exec\n");
	r.route = NULL;
	r.room = "";
	r.path = "/a b\"c\n\x01\xff";
	r.status = 404;
	reqlog_format(LOG_FORMAT_TEXT, &r, line, sizeof(line));
	assert_non_null(strstr(line, " route=- room=- status=404 "));
	assert_non_null(strstr(line, " path=/a?b?c???\n"));
	assert_true(strchr(line, '\n') == line + strlen(line) - 1);   /* one line */
}

static void test_log_line_json(void **state)
{
	struct reqlog r = { .id = "00112233aabbccdd", .method = "GE\"T", .route = NULL,
			    .room = NULL, .path = "/x\\\"}\x7f", .status = 404,
			    .duration_ns = 1500000, .helper_ns = 0 };
	char line[1024];
	json_object *o, *v;

	(void)state;
	reqlog_format(LOG_FORMAT_JSON, &r, line, sizeof(line));
	assert_int_equal(line[strlen(line) - 1], '\n');
	o = json_tokener_parse(line);
	assert_non_null(o);
	assert_true(json_object_object_get_ex(o, "id", &v));
	assert_string_equal(json_object_get_string(v), "00112233aabbccdd");
	assert_true(json_object_object_get_ex(o, "room", &v));
	assert_null(v);   /* JSON null */
	assert_true(json_object_object_get_ex(o, "status", &v));
	assert_int_equal(json_object_get_int(v), 404);
	assert_true(json_object_object_get_ex(o, "duration_ms", &v));
	assert_true(json_object_get_double(v) == 1.5);
	assert_true(json_object_object_get_ex(o, "route", &v));
	assert_string_equal(json_object_get_string(v), "-");
	assert_true(json_object_object_get_ex(o, "path", &v));
	assert_string_equal(json_object_get_string(v), "/x??}?");
	assert_true(json_object_object_get_ex(o, "method", &v));
	assert_string_equal(json_object_get_string(v), "GE?T");
	assert_true(json_object_object_get_ex(o, "time", &v));
	assert_int_equal(strlen(json_object_get_string(v)), strlen("2026-11-29T17:00:00.000Z"));
	json_object_put(o);
}

/* ---- the answer (http.c) ---- */

static void test_text_answer_and_request_id_header(void **state)
{
	struct response rs = { .status = 200 };
	size_t len = 0;
	char *out;

	(void)state;
	snprintf(rs.request_id, sizeof(rs.request_id), "0011223344556677");
	rs.text = strdup("a 1\n");
	rs.text_len = 4;
	rs.content_type = "text/plain; version=0.0.4; charset=utf-8";
	out = http_render(&rs, &len);
	assert_string_equal(out, "Status: 200 OK\r\n"
			    "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
			    "Content-Length: 4\r\n"
			    "X-Request-Id: 0011223344556677\r\n"
			    "\r\n"
			    "a 1\n");
	assert_int_equal(len, strlen(out));
	free(out);
	free(rs.text);
	/* a JSON answer keeps its type, its newline and gets the header too */
	rs = (struct response){ .status = 401, .www_authenticate = true };
	snprintf(rs.request_id, sizeof(rs.request_id), "8899aabbccddeeff");
	response_error(&rs, 401, "unauthorized");
	out = http_render(&rs, &len);
	assert_non_null(strstr(out, "Content-Type: application/json\r\n"));
	assert_non_null(strstr(out, "WWW-Authenticate: Bearer\r\nX-Request-Id: 8899aabbccddeeff\r\n\r\n"
			       "{\"error\":\"unauthorized\"}\n"));
	free(out);
	json_object_put(rs.body);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_http_counters_by_route_and_code, setup),
		cmocka_unit_test_setup(test_histogram_buckets_are_cumulative, setup),
		cmocka_unit_test_setup(test_label_values_are_escaped, setup),
		cmocka_unit_test_setup(test_code_table_overflow_is_other, setup),
		cmocka_unit_test_setup(test_exec_outcomes_from_helper_calls, setup),
		cmocka_unit_test_setup(test_helper_time_is_per_thread_and_taken, setup),
		cmocka_unit_test_setup(test_other_families, setup),
		cmocka_unit_test_setup(test_exposition_shape, setup),
		cmocka_unit_test(test_router_slots_name_patterns_only),
		cmocka_unit_test(test_request_ids_unique_hex),
		cmocka_unit_test(test_log_line_text),
		cmocka_unit_test(test_log_line_json),
		cmocka_unit_test(test_text_answer_and_request_id_header),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
