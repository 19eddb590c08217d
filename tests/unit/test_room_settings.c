/* Unit tests for fcgi-app/rooms/room_settings.c (a PATCH's labels and limits,
 * checked) and room_limits_max in common/config.c (how far they may go). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "config.h"
#include "json_strict.h"
#include "room_settings.h"

static json_object *parse(const char *text)
{
	json_object *o = NULL;
	char err[128];
	assert_int_equal(json_parse_strict(text, strlen(text), &o, err, sizeof(err)), 0);
	return o;
}

/* room_settings_check's verdict on body: NULL when valid, else its words */
static const char *settings_error(const char *body, char *err, size_t errlen)
{
	json_object *o = parse(body), *labels, *limits;
	int rc = room_settings_check(o, &labels, &limits, err, errlen);
	json_object_put(o);
	return rc == 0 ? NULL : err;
}

static void test_labels_rules(void **state)
{
	char err[256], key[80], body[256];
	(void)state;
	assert_true(label_key_valid("app.kubernetes.io/name", 22));
	assert_true(label_key_valid("a_b-c", 5));
	assert_false(label_key_valid("", 0));
	assert_false(label_key_valid("a b", 3));
	assert_false(label_key_valid("a=b", 3));
	assert_false(label_key_valid("é", 2));
	memset(key, 'k', 64);
	assert_true(label_key_valid(key, 63));
	assert_false(label_key_valid(key, 64));
	assert_true(label_value_valid("", 0));
	assert_false(label_value_valid(key, 64));
	assert_false(label_value_valid("a,b", 3));

	assert_null(settings_error("{}", err, sizeof(err)));
	assert_null(settings_error("{\"labels\":{\"a\":\"b\",\"c\":null}}", err, sizeof(err)));
	assert_non_null(strstr(settings_error("{\"colour\":1}", err, sizeof(err)), "unknown field"));
	assert_non_null(strstr(settings_error("[]", err, sizeof(err)), "JSON object"));
	assert_non_null(strstr(settings_error("{\"labels\":5}", err, sizeof(err)), "labels must"));
	assert_non_null(strstr(settings_error("{\"labels\":{\"a b\":\"x\"}}", err, sizeof(err)),
			       "label name"));
	assert_non_null(strstr(settings_error("{\"labels\":{\"a\":1}}", err, sizeof(err)),
			       "must be a string"));
	snprintf(body, sizeof(body), "{\"labels\":{\"a\":\"%.64s\"}}", "vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv"
		 "vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv");
	assert_non_null(strstr(settings_error(body, err, sizeof(err)), "its value"));
	assert_non_null(strstr(settings_error("{\"limits\":[]}", err, sizeof(err)), "limits must"));
}

static void test_labels_merge_and_match(void **state)
{
	char err[128];
	(void)state;
	json_object *old = parse("{\"team\":\"blue\",\"tier\":\"dev\"}");
	json_object *patch = parse("{\"tier\":null,\"app\":\"web\",\"team\":\"red\"}");
	json_object *now = labels_patched(old, patch, err, sizeof(err));
	assert_non_null(now);
	assert_string_equal(json_object_to_json_string_ext(now, JSON_C_TO_STRING_PLAIN),
			    "{\"team\":\"red\",\"app\":\"web\"}");
	const char *yes[] = { "team=red", "app=web" }, *no[] = { "team=red", "app=db" };
	const char *bad[] = { "team" }, *empty[] = { "team=" };
	assert_true(labels_match(now, yes, 2));
	assert_true(labels_match(now, yes, 0));
	assert_false(labels_match(now, no, 2));
	assert_false(labels_match(now, bad, 1));
	assert_false(labels_match(now, empty, 1));
	json_object_put(now);
	json_object_put(patch);

	/* 64 at most, counted after the merge */
	json_object *many = json_object_new_object();
	for (int i = 0; i < 64; i++) {
		char k[8];
		snprintf(k, sizeof(k), "k%d", i);
		json_object_object_add(many, k, json_object_new_string("v"));
	}
	json_object *p1 = parse("{\"k1\":\"w\"}"), *p2 = parse("{\"k64\":\"w\"}");
	json_object *fits = labels_patched(many, p1, err, sizeof(err));
	assert_non_null(fits);
	json_object_put(fits);
	assert_null(labels_patched(many, p2, err, sizeof(err)));
	json_object_put(p1);
	json_object_put(p2);
	assert_non_null(strstr(err, "at most 64 labels"));
	json_object_put(many);
	json_object_put(old);
}

static struct config cfg_with(const char *text)
{
	struct config c;
	char err[256];
	config_defaults(&c);
	assert_int_equal(config_parse(&c, "t", text, err, sizeof(err)), 0);
	return c;
}

static int limits_of(const struct config *c, const char *json, struct helper_limits_args *out,
		     char *err, size_t errlen)
{
	struct config_room_limits max = config_room_limits_max(c);
	json_object *o = parse(json);
	int rc = room_limits_parse(o, &max, out, err, errlen);
	json_object_put(o);
	return rc;
}

static void test_limits(void **state)
{
	struct helper_limits_args a;
	char err[256];
	(void)state;
	/* no room_limits_max: the configuration's own are the maxima */
	struct config c = cfg_with("memory_limit = 512M\npids_limit = 256\ncpu_limit = 1\n");
	assert_int_equal(limits_of(&c, "{\"memory\":268435456,\"pids\":10,\"cpu\":0.5,"
				   "\"idleTimeout\":null}", &a, err, sizeof(err)), 0);
	assert_int_equal(a.set, HL_MEMORY | HL_PIDS | HL_CPU | HL_IDLE);
	assert_int_equal(a.limits.memory, 268435456);
	assert_int_equal(a.limits.pids, 10);
	assert_int_equal(a.limits.cpu_milli, 500);
	assert_int_equal(a.limits.idle_timeout_ms, 0);
	assert_int_equal(limits_of(&c, "{\"memory\":536870913}", &a, err, sizeof(err)), -1);
	assert_string_equal(err, "limit memory: at most 536870912 (room_limits_max)");
	assert_int_equal(limits_of(&c, "{\"cpu\":1.5}", &a, err, sizeof(err)), -1);
	assert_string_equal(err, "limit cpu: at most 1 (room_limits_max)");
	assert_int_equal(limits_of(&c, "{\"swap\":1}", &a, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "unknown limit \"swap\""));
	assert_int_equal(limits_of(&c, "{\"pids\":\"5\"}", &a, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "limit pids: expected a whole number"));
	assert_int_equal(limits_of(&c, "{\"pids\":2.5}", &a, err, sizeof(err)), -1);
	assert_int_equal(limits_of(&c, "{\"pids\":0}", &a, err, sizeof(err)), -1);
	assert_int_equal(limits_of(&c, "{\"memory\":-1}", &a, err, sizeof(err)), -1);

	/* room_limits_max raises what it names, only that */
	c = cfg_with("room_limits_max = memory=2G, cpu=2,exec_timeout_max=1h\n");
	assert_int_equal(c.room_limits_max.memory, 2ull << 30);
	assert_int_equal(limits_of(&c, "{\"memory\":2147483648,\"cpu\":2,\"execTimeoutMax\":3600000}",
				   &a, err, sizeof(err)), 0);
	assert_int_equal(limits_of(&c, "{\"pids\":257}", &a, err, sizeof(err)), -1);
	assert_string_equal(err, "limit pids: at most 256 (room_limits_max)");
	c = cfg_with("room_limits_max =\n");
	assert_int_equal(c.room_limits_max.memory, 0);

	/* its syntax */
	struct config d;
	config_defaults(&d);
	const char *bad[] = { "room_limits_max = memory\n", "room_limits_max = memory=lots\n",
			      "room_limits_max = swap=1G\n", "room_limits_max = pids=1,pids=2\n",
			      "room_limits_max = pids=0\n" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(config_parse(&d, "t", bad[i], err, sizeof(err)), -1);
	assert_non_null(strstr(err, "room_limits_max"));
}

static void test_limits_shown(void **state)
{
	struct config c = cfg_with("memory_limit = 512M\ncpu_limit = 1.5\n");
	struct helper_limits own = { .pids = 12 };
	(void)state;
	json_object *o = room_limits_json(&c, &own);
	assert_string_equal(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN),
			    "{\"memory\":536870912,\"pids\":12,\"cpu\":1.5,\"disk\":1073741824,"
			    "\"idleTimeout\":900000,\"execTimeoutMax\":600000}");
	json_object_put(o);
}

/* What a move carries: only the room's own limits, as a PATCH sets them;
 * and on a host that allows less, each set to its most (null where that
 * most is 0: the limit is off there), which the PATCH check then takes. */
static void test_own_limits_and_clamp(void **state)
{
	struct helper_limits own = { .pids = 300, .cpu_milli = 2500, .disk = 5ull << 30 };
	struct config_room_limits max = { .memory = 1ull << 30, .pids = 256, .cpu = 2.0,
					  .disk = 0, .idle_timeout_ms = 60000,
					  .exec_timeout_max_ms = 60000 };
	struct helper_limits_args args;
	char err[256];
	(void)state;
	json_object *o = room_own_limits_json(&own);
	assert_string_equal(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN),
			    "{\"pids\":300,\"cpu\":2.5,\"disk\":5368709120}");
	assert_int_equal(room_limits_parse(o, &max, &args, err, sizeof(err)), -1);
	assert_int_equal(room_limits_clamp(o, &max), 3);
	assert_string_equal(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN),
			    "{\"pids\":256,\"cpu\":2.0,\"disk\":null}");
	assert_int_equal(room_limits_parse(o, &max, &args, err, sizeof(err)), 0);
	assert_int_equal(args.set, HL_PIDS | HL_CPU | HL_DISK);
	assert_int_equal(args.limits.pids, 256);
	assert_int_equal(args.limits.cpu_milli, 2000);
	assert_int_equal(args.limits.disk, 0);
	assert_int_equal(room_limits_clamp(o, &max), 0);   /* within: unchanged */
	json_object_put(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_labels_rules),
		cmocka_unit_test(test_labels_merge_and_match),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_limits_shown),
		cmocka_unit_test(test_own_limits_and_clamp),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
