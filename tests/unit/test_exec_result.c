/* Unit tests for fcgi-app/exec/exec_result.c's exec_result_make: the client's
 * `result` made from the helper's raw facts (common/protocol.h)
 * and the output bytes roombox-fcgi read.  This is the code that moved out of the setuid
 * helper: exit codes, signal names, UTF-8 repair, base64, times. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "exec_result.h"
#include "protocol.h"

struct facts {
	int status;
	bool timed_out, out_cut, err_cut;
	const char *out, *err;
	size_t out_len, err_len;
	int64_t dur_us, started_ms;
};

static json_object *shape(const struct facts *f, bool base64, char *why, size_t whylen)
{
	struct helper_exec_ans a = { .wait_status = f->status, .timed_out = f->timed_out,
				     .duration_us = (uint64_t)f->dur_us, .started_ms = f->started_ms };
	json_object *res;
	struct exec_request ex = { .cmd = "echo hi", .cmd_len = 7 };
	struct exec_output o = { f->out, f->err, f->out_len, f->err_len, f->out_cut, f->err_cut };

	if (base64) {
		ex.has_encoding = true;
		ex.encoding = EXEC_ENCODING_BASE64;
	}
	res = exec_result_make(&a, &o, &ex, why, whylen);
	return res;
}

static const char *text(json_object *o)
{
	return json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
}

static void test_exit_status_and_exact_answer(void **state)
{
	struct facts f = { .status = 3 << 8, .out = "hi\n", .out_len = 3, .err = "", .dur_us = 2100,
			   .started_ms = 1795971600000 };
	char why[128];
	json_object *r = shape(&f, false, why, sizeof(why));

	(void)state;
	assert_non_null(r);
	assert_string_equal(text(r),
		"{\"stdout\":\"hi\\n\",\"stderr\":\"\",\"exitCode\":3,\"success\":false,\"signal\":null,"
		"\"timedOut\":false,\"truncated\":{\"stdout\":false,\"stderr\":false},"
		"\"command\":\"echo hi\",\"duration\":2.100,\"timestamp\":\"2026-11-29T17:00:00.000Z\"}");
	json_object_put(r);
}

static void test_signal_and_timeout(void **state)
{
	struct facts f = { .status = SIGKILL, .out = "", .err = "" };
	char why[128];
	json_object *r, *v;

	(void)state;
	r = shape(&f, false, why, sizeof(why));
	assert_true(json_object_object_get_ex(r, "exitCode", &v));
	assert_int_equal(json_object_get_int(v), 137);
	assert_true(json_object_object_get_ex(r, "signal", &v));
	assert_string_equal(json_object_get_string(v), "SIGKILL");
	json_object_put(r);

	f.status = SIGSYS;
	r = shape(&f, false, why, sizeof(why));
	assert_true(json_object_object_get_ex(r, "signal", &v));
	assert_string_equal(json_object_get_string(v), "SIGSYS");
	json_object_put(r);

	f.status = 40;   /* a real-time signal */
	r = shape(&f, false, why, sizeof(why));
	assert_true(json_object_object_get_ex(r, "signal", &v));
	assert_string_equal(json_object_get_string(v), "SIGRT8");
	json_object_put(r);

	f.status = 0;
	f.timed_out = true;
	r = shape(&f, false, why, sizeof(why));
	assert_true(json_object_object_get_ex(r, "exitCode", &v));
	assert_int_equal(json_object_get_int(v), 124);
	assert_true(json_object_object_get_ex(r, "timedOut", &v));
	assert_true(json_object_get_boolean(v));
	assert_true(json_object_object_get_ex(r, "signal", &v));
	assert_string_equal(json_object_get_string(v), "SIGKILL");
	json_object_put(r);
}

/* A room's hostile output: invalid UTF-8 and NUL bytes come out as valid
 * JSON text, or exactly as base64. */
static void test_hostile_bytes(void **state)
{
	static const char out[] = "a\xff" "b\0c\xe2\x82";
	struct facts f = { .out = out, .out_len = sizeof(out) - 1, .err = "\xc0", .err_len = 1,
			   .out_cut = true };
	char why[128];
	json_object *r, *v;

	(void)state;
	r = shape(&f, false, why, sizeof(why));
	assert_true(json_object_object_get_ex(r, "stdout", &v));
	assert_int_equal(json_object_get_string_len(v), 10);
	assert_memory_equal(json_object_get_string(v), "a\xef\xbf\xbd" "b\0c\xef\xbf\xbd", 10);
	assert_true(json_object_object_get_ex(r, "stderr", &v));
	assert_string_equal(json_object_get_string(v), "\xef\xbf\xbd");
	assert_non_null(strstr(text(r), "\"truncated\":{\"stdout\":true,\"stderr\":false}"));
	json_object_put(r);

	r = shape(&f, true, why, sizeof(why));
	assert_true(json_object_object_get_ex(r, "stdout", &v));
	assert_string_equal(json_object_get_string(v), "Yf9iAGPigg==");
	assert_true(json_object_object_get_ex(r, "stderr", &v));
	assert_string_equal(json_object_get_string(v), "wA==");
	json_object_put(r);
}

/* An answer whose duration does not fit a signed count (a record's
 * field is unsigned) is refused, never printed negative. */
static void test_answer_must_hold_together(void **state)
{
	struct helper_exec_ans a = { .duration_us = UINT64_MAX };
	struct exec_request ex = { .cmd = "x", .cmd_len = 1 };
	struct exec_output o = { "abc", "", 3, 0, false, false };
	char why[128];

	(void)state;
	assert_null(exec_result_make(&a, &o, &ex, why, sizeof(why)));
	assert_non_null(strstr(why, "duration"));
	a.duration_us = 1;
	json_object *res = exec_result_make(&a, &o, &ex, why, sizeof(why));
	assert_non_null(res);
	json_object_put(res);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exit_status_and_exact_answer),
		cmocka_unit_test(test_signal_and_timeout),
		cmocka_unit_test(test_hostile_bytes),
		cmocka_unit_test(test_answer_must_hold_together),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
