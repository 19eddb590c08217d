/* Unit tests for common/etcd_json.c: etcd's answers as etcd
 * 3.4's JSON gateway writes them (the samples below were taken from one),
 * and the answers no etcd should send, which must be refused whole. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "etcd_json.h"
#include "json_strict.h"
#include "move.h"

/* {"host":"h1","epoch":1} */
#define REC_H1 "eyJob3N0IjoiaDEiLCJlcG9jaCI6MX0="
/* /roombox/rooms/x */
#define KEY_X "L3Jvb21ib3gvcm9vbXMveA=="

static int watch(const char *text, struct etcd_watch_msg *m)
{
	char err[256];
	return etcd_watch_parse(text, strlen(text), m, err, sizeof(err));
}

static void test_watch_created_then_events(void **state)
{
	struct etcd_watch_msg m;

	(void)state;
	assert_int_equal(watch("{\"result\":{\"header\":{\"cluster_id\":\"1\",\"revision\":\"3\"},"
			       "\"created\":true}}", &m), 0);
	assert_true(m.created);
	assert_int_equal(m.revision, 3);
	assert_int_equal(m.n_events, 0);
	etcd_watch_msg_free(&m);

	assert_int_equal(watch("{\"result\":{\"header\":{\"revision\":\"5\"},\"events\":["
			       "{\"kv\":{\"key\":\"" KEY_X "\",\"create_revision\":\"3\",\"mod_revision\":\"4\","
			       "\"version\":\"1\",\"value\":\"" REC_H1 "\"}},"
			       "{\"type\":\"DELETE\",\"kv\":{\"key\":\"" KEY_X "\",\"mod_revision\":\"5\"}}]}}", &m), 0);
	assert_int_equal(m.n_events, 2);
	assert_false(m.events[0].deleted);
	assert_string_equal(m.events[0].kv.key, "/roombox/rooms/x");
	assert_string_equal(m.events[0].kv.value, "{\"host\":\"h1\",\"epoch\":1}");
	assert_int_equal(m.events[0].kv.mod_rev, 4);
	assert_true(m.events[1].deleted);
	assert_string_equal(m.events[1].kv.value, "");
	assert_int_equal(m.events[1].kv.mod_rev, 5);
	etcd_watch_msg_free(&m);
}

static void test_watch_refusals(void **state)
{
	struct etcd_watch_msg m;

	(void)state;
	/* an error, a cancel with compaction, garbage */
	assert_int_equal(watch("{\"error\":{\"grpc_code\":1,\"message\":\"context canceled\"}}", &m), -1);
	assert_int_equal(watch("{\"result\":{\"header\":{\"revision\":\"5\"},\"canceled\":true,"
			       "\"compact_revision\":\"2\"}}", &m), 0);
	assert_true(m.canceled);
	assert_int_equal(m.compact_revision, 2);
	etcd_watch_msg_free(&m);
	assert_int_equal(watch("[]", &m), -1);
	assert_int_equal(watch("{\"result\":{}}", &m), -1);                        /* no revision */
	assert_int_equal(watch("{\"result\":{\"header\":{\"revision\":\"-1\"}}}", &m), -1);
	assert_int_equal(watch("{\"result\":{\"header\":{\"revision\":\"99999999999999999999\"}}}", &m), -1);
	/* a key holding a NUL ("a\0b"), a key that is not base64, an unknown type */
	assert_int_equal(watch("{\"result\":{\"header\":{\"revision\":\"5\"},\"events\":"
			       "[{\"kv\":{\"key\":\"YQBi\"}}]}}", &m), -1);
	assert_null(m.events);
	assert_int_equal(watch("{\"result\":{\"header\":{\"revision\":\"5\"},\"events\":"
			       "[{\"kv\":{\"key\":\"!!\"}}]}}", &m), -1);
	assert_int_equal(watch("{\"result\":{\"header\":{\"revision\":\"5\"},\"events\":"
			       "[{\"type\":\"MOVE\",\"kv\":{\"key\":\"" KEY_X "\"}}]}}", &m), -1);
}

static void test_range_kvs(void **state)
{
	json_object *o;
	struct etcd_kv *kvs;
	size_t n;
	int64_t rev;
	char err[256];
	const char *text = "{\"header\":{\"revision\":\"9\"},\"kvs\":[{\"key\":\"" KEY_X "\","
			   "\"create_revision\":\"2\",\"mod_revision\":\"7\",\"value\":\"" REC_H1 "\"}],\"count\":\"1\"}";

	(void)state;
	assert_int_equal(json_parse_strict(text, strlen(text), &o, err, sizeof(err)), 0);
	assert_int_equal(etcd_header_revision(o, &rev, err, sizeof(err)), 0);
	assert_int_equal(rev, 9);
	assert_int_equal(etcd_kvs_parse(json_object_object_get(o, "kvs"), &kvs, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 1);
	assert_int_equal(kvs[0].create_rev, 2);
	assert_int_equal(kvs[0].mod_rev, 7);
	etcd_kvs_free(kvs, n);
	/* none: the gateway leaves "kvs" out */
	assert_int_equal(etcd_kvs_parse(NULL, &kvs, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 0);
	json_object_put(o);
}

static int lines_seen;
static int count_line(void *ctx, const char *line, size_t len)
{
	(void)ctx;
	assert_int_equal(strlen(line), len);
	lines_seen++;
	return 0;
}

static void test_lines_in_pieces(void **state)
{
	struct etcd_lines l = { 0 };
	const char *s = "{\"a\":1}\n{\"b\"";

	(void)state;
	lines_seen = 0;
	assert_int_equal(etcd_lines_feed(&l, s, strlen(s), count_line, NULL), 0);
	assert_int_equal(lines_seen, 1);
	assert_int_equal(etcd_lines_feed(&l, ":2}\n\n", 5, count_line, NULL), 0);
	assert_int_equal(lines_seen, 2);   /* the empty line is no message */
	etcd_lines_free(&l);
}

static void test_room_record(void **state)
{
	struct room_record r;
	const char *ok = "{\"host\":\"h-2\",\"epoch\":7}";

	(void)state;
	assert_int_equal(room_record_parse(ok, strlen(ok), &r), 0);
	assert_string_equal(r.host, "h-2");
	assert_int_equal(r.epoch, 7);
	char *back = room_record_json(&r);
	assert_string_equal(back, ok);
	free(back);
	const char *bad[] = {
		"{\"host\":\"h1\",\"epoch\":0}", "{\"host\":\"H1\",\"epoch\":1}", "{\"host\":\"\",\"epoch\":1}",
		"{\"host\":\"h1\"}", "{\"host\":\"h1/../x\",\"epoch\":1}", "{\"host\":1,\"epoch\":1}",
		"{\"host\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\",\"epoch\":1}", "[]", "x",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(room_record_parse(bad[i], strlen(bad[i]), &r), -1);
}

static void test_host_record(void **state)
{
	struct host_record h;
	const char *ok = "{\"url\":\"http://10.0.0.1:80\",\"state\":\"maint\"}";
	const char *bad = "{\"url\":\"file:///etc/passwd\",\"state\":\"ready\"}";

	(void)state;
	assert_int_equal(host_record_parse(ok, strlen(ok), &h), 0);
	assert_string_equal(h.url, "http://10.0.0.1:80");
	assert_true(h.maint);
	assert_int_equal(host_record_parse(bad, strlen(bad), &h), -1);
}

static void test_move_header(void **state)
{
	struct move_header h;
	char sig[65];

	(void)state;
	assert_int_equal(move_signature((const unsigned char *)"k", 1, "r1", "h1", "h2", 2, 1700000000, sig), 0);
	char text[200];
	snprintf(text, sizeof(text), "h1 h2 2 1700000000 %s", sig);
	assert_int_equal(move_header_parse(text, &h), 0);
	assert_string_equal(h.from, "h1");
	assert_string_equal(h.to, "h2");
	assert_int_equal(h.epoch, 2);
	assert_int_equal(h.when, 1700000000);
	assert_string_equal(h.sig, sig);
	/* epoch 1 is no move's, a host moves nothing to itself, and the
	 * signature is 64 lower-case hex digits */
	snprintf(text, sizeof(text), "h1 h2 1 1700000000 %s", sig);
	assert_int_equal(move_header_parse(text, &h), -1);
	snprintf(text, sizeof(text), "h1 h1 2 1700000000 %s", sig);
	assert_int_equal(move_header_parse(text, &h), -1);
	assert_int_equal(move_header_parse("h1 h2 2 1700000000 ABCD", &h), -1);
	snprintf(text, sizeof(text), "h1 h2 2 1700000000 %s extra", sig);
	assert_int_equal(move_header_parse(text, &h), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_watch_created_then_events),
		cmocka_unit_test(test_watch_refusals),
		cmocka_unit_test(test_range_kvs),
		cmocka_unit_test(test_lines_in_pieces),
		cmocka_unit_test(test_room_record),
		cmocka_unit_test(test_host_record),
		cmocka_unit_test(test_move_header),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
