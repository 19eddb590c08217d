/* Unit tests for sandbox-helper/request.c: the setuid helper's request
 * reader (bounded read, parse, exec fields). */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include "config.h"
#include "protocol.h"
#include "request.h"

/* A descriptor that reads back n bytes of text (repeated). */
static int input_fd(const char *text, size_t n)
{
	int fd = memfd_create("request", 0);
	size_t tlen = strlen(text);
	assert_true(fd >= 0);
	for (size_t off = 0; off < n;) {
		size_t k = n - off < tlen ? n - off : tlen;
		assert_int_equal(write(fd, text, k), (ssize_t)k);
		off += k;
	}
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	return fd;
}

static void test_read_takes_up_to_the_limit_and_no_more(void **state)
{
	size_t limit = (size_t)helper_request_max(100);
	char err[256] = "", *buf;
	size_t len;
	int fd;

	(void)state;
	assert_int_equal(limit, 100 + 65536);
	fd = input_fd("abcdefg", limit);
	assert_int_equal(request_read(fd, 100, &buf, &len, err, sizeof(err)), 0);
	assert_int_equal(len, limit);
	assert_int_equal(buf[len], '\0');
	assert_memory_equal(buf + 7, "abcdefg", 7);
	free(buf);
	close(fd);

	fd = input_fd("abcdefg", limit + 1);
	assert_int_equal(request_read(fd, 100, &buf, &len, err, sizeof(err)), -1);
	assert_null(buf);
	assert_string_equal(err, "request larger than 65636 bytes");
	close(fd);

	/* far more: refused just the same, after reading only the limit */
	fd = input_fd("x", 4u << 20);
	assert_int_equal(request_read(fd, 100, &buf, &len, err, sizeof(err)), -1);
	assert_string_equal(err, "request larger than 65636 bytes");
	assert_true(lseek(fd, 0, SEEK_CUR) <= (off_t)limit + 1);
	close(fd);
}

static void test_read_of_empty_and_failing_input(void **state)
{
	char err[256] = "", *buf;
	size_t len;
	int fd = input_fd("", 0);

	(void)state;
	assert_int_equal(request_read(fd, 1 << 20, &buf, &len, err, sizeof(err)), 0);
	assert_int_equal(len, 0);
	assert_string_equal(buf, "");
	free(buf);
	close(fd);
	fd = open("/", O_RDONLY | O_DIRECTORY);
	assert_int_equal(request_read(fd, 1 << 20, &buf, &len, err, sizeof(err)), -1);
	assert_string_equal(err, "request could not be read: Is a directory");
	close(fd);
}

static void expect_parse_error(const char *text, const char *want)
{
	char err[256] = "";
	struct mj_doc *doc = (struct mj_doc *)1;
	assert_null(request_parse(text, strlen(text), &doc, err, sizeof(err)));
	assert_null(doc);
	assert_string_equal(err, want);
}

static void test_parse_wants_one_object(void **state)
{
	char err[256] = "";
	struct mj_doc *doc;
	const struct mj_value *req;

	(void)state;
	req = request_parse("{\"op\":\"info\"} ", 14, &doc, err, sizeof(err));
	assert_non_null(req);
	assert_string_equal(mj_get_str(req, "op"), "info");
	mj_free(doc);
	expect_parse_error("[1]", "request is not a JSON object");
	expect_parse_error("", "request is not a JSON object: at byte 0: expected a value");
	expect_parse_error("{\"op\":}", "request is not a JSON object: at byte 6: bad number");
	expect_parse_error("{} {}", "request is not a JSON object: at byte 3: text after the value");
}

static void test_parse_refuses_too_many_values(void **state)
{
	size_t n = MJ_MAX_VALUES + 10;
	char *text = malloc(3 * n + 16), *q = text;

	(void)state;
	q += sprintf(q, "{\"x\":[");
	for (size_t i = 0; i < n; i++)
		q += sprintf(q, "%s\"\"", i ? "," : "");
	strcpy(q, "]}");
	expect_parse_error(text, "request too complex: at byte 300000: more than 100000 values");
	free(text);
}

static const char *exec_parse(const char *text, struct exec_order *q, char *err, size_t errlen)
{
	static struct mj_doc *doc;
	struct config cfg;
	const struct mj_value *req;

	config_defaults(&cfg);
	mj_free(doc);
	req = request_parse(text, strlen(text), &doc, err, errlen);
	assert_non_null(req);
	return request_exec_parse(req, &cfg, q, err, errlen);
}

static void expect_exec_error(const char *text, const char *code, const char *want)
{
	struct exec_order q;
	char err[512] = "";
	const char *got = exec_parse(text, &q, err, sizeof(err));
	assert_non_null(got);
	assert_string_equal(got, code);
	assert_string_equal(err, want);
}

static void test_exec_fields(void **state)
{
	struct exec_order q;
	char err[256] = "";

	(void)state;
	assert_null(exec_parse("{\"cmd\":\"ls\"}", &q, err, sizeof(err)));
	assert_string_equal(q.cmd, "ls");
	assert_int_equal(q.timeout_ms, 30000);      /* exec_timeout's default */
	assert_null(q.env);
	assert_null(q.cwd);
	assert_false(q.is_tool || q.existing || q.detach);
	assert_null(exec_parse("{\"cmd\":\"ls\",\"existing\":true,\"detach\":true}", &q, err, sizeof(err)));
	assert_true(q.existing && q.detach);
	assert_null(exec_parse("{\"cmd\":\"cat\",\"timeout_ms\":600000,\"env\":{\"A\":\"1\"},"
			       "\"cwd\":\"/tmp\"}",
			       &q, err, sizeof(err)));
	assert_int_equal(q.timeout_ms, 600000);
	assert_int_equal(q.env->len, 1);
	assert_string_equal(q.cwd, "/tmp");

	expect_exec_error("{}", "invalid", "cmd missing");
	expect_exec_error("{\"cmd\":\"\"}", "invalid", "cmd missing");
	expect_exec_error("{\"cmd\":1}", "invalid", "cmd missing");
	expect_exec_error("{\"cmd\":\"ls\",\"timeout_ms\":600001}", "invalid", "timeout_ms out of range");
	expect_exec_error("{\"cmd\":\"ls\",\"timeout_ms\":0}", "invalid", "timeout_ms out of range");
	expect_exec_error("{\"cmd\":\"ls\",\"timeout_ms\":1.5}", "invalid", "timeout_ms out of range");
	expect_exec_error("{\"cmd\":\"ls\",\"env\":{\"A\":1}}", "invalid", "env values must be strings");
	expect_exec_error("{\"cmd\":\"ls\",\"env\":{\"\":\"x\"}}", "invalid", "env values must be strings");
	expect_exec_error("{\"cmd\":\"ls\",\"cwd\":\"tmp\"}", "invalid", "cwd must be absolute");
}

/* An env whose pairs alone are more than one environment string can hold
 * is refused before the helper quotes it (as exec.c would answer later). */
static void test_exec_env_no_shell_can_take(void **state)
{
	size_t n = 32 * 4096;
	char *text = malloc(n + 100), *q = text;
	struct exec_order r;
	char err[256];

	(void)state;
	q += sprintf(q, "{\"room\":\"r1\",\"cmd\":\"ls\",\"env\":{\"A\":\"");
	memset(q, 'y', n - 3);
	q += n - 3;
	strcpy(q, "\"}}");
	assert_null(exec_parse(text, &r, err, sizeof(err)));    /* 1 + (n - 3) + 1 fits */
	q[-1] = 'y';
	strcpy(q, "y\"}}");
	expect_exec_error(text, "failed", "room r1: the environment (session and env) is larger "
			  "than a shell can take (131071 bytes in one variable)");
	free(text);
}

/* tool: the keeper's operation in place of cmd, its strings checked */
static void test_exec_tool(void **state)
{
	struct exec_order q;
	char err[256] = "";

	(void)state;
	assert_null(exec_parse("{\"tool\":[\"get\",\"/workspace/a b\",\"1\"],\"existing\":true}",
			       &q, err, sizeof(err)));
	assert_true(q.is_tool && q.existing);
	assert_string_equal(q.cmd, "get");
	assert_string_equal(q.tool[0], "get");
	assert_string_equal(q.tool[1], "/workspace/a b");
	assert_string_equal(q.tool[2], "1");
	assert_null(q.tool[3]);
	expect_exec_error("{\"tool\":[]}", "invalid", "tool must be 1 to 4 strings");
	expect_exec_error("{\"tool\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}", "invalid",
			  "tool must be 1 to 4 strings");
	expect_exec_error("{\"tool\":\"get\"}", "invalid", "tool must be 1 to 4 strings");
	expect_exec_error("{\"tool\":[\"get\",1]}", "invalid",
			  "tool: argument 1 is not a path-sized string");
	expect_exec_error("{\"tool\":[\"get\",\"a\\u0000b\"]}", "invalid",
			  "tool: argument 1 is not a path-sized string");
	expect_exec_error("{\"tool\":[\"get\"],\"cwd\":\"/tmp\"}", "invalid",
			  "a tool takes no detach, env or cwd");
	expect_exec_error("{\"tool\":[\"get\"],\"detach\":true}", "invalid",
			  "a tool takes no detach, env or cwd");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_read_takes_up_to_the_limit_and_no_more),
		cmocka_unit_test(test_read_of_empty_and_failing_input),
		cmocka_unit_test(test_parse_wants_one_object),
		cmocka_unit_test(test_parse_refuses_too_many_values),
		cmocka_unit_test(test_exec_fields),
		cmocka_unit_test(test_exec_tool),
		cmocka_unit_test(test_exec_env_no_shell_can_take),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
