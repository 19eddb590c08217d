/* Unit tests for fcgi-app/helper_client.c: the one process spawner.
 *
 * The program spawned is /bin/sh: helper_client runs `<helper> -c <config>`,
 * so with helper = /bin/sh the "config" is a shell script, which lets each
 * test choose what the child does (echo the request, exit badly, hang, leave
 * a child behind, report its descriptors and signals).  These tests cover
 * the request pipe, the reply memfd, the deadline and the decoding of what
 * comes back; the real helper's protocol is covered by the integration
 * tests. */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "helper_client.h"
#include "http.h"
#include "protocol.h"

/* The largest max_body a configuration accepts: the 6 MiB round trip fits. */
#define TEST_MAX_BODY MAX_BODY_LIMIT

static json_object *run(const char *script, json_object *req, long deadline_ms,
			struct helper_error *err)
{
	struct helper_target t = { "/bin/sh", script, TEST_MAX_BODY };
	json_object *own = NULL, *reply;

	if (!req) {
		own = req = json_object_new_object();
		json_object_object_add(req, "op", json_object_new_string("info"));
	}
	reply = helper_call(&t, req, deadline_ms, err);
	json_object_put(own);
	return reply;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A request of several MiB comes back whole: writing and reading overlap,
 * or cat would block on a full pipe and so would we. */
static void test_round_trip_large(void **state)
{
	size_t n = 6u << 20;
	char *big = malloc(n);
	json_object *req = json_object_new_object(), *reply, *v;
	struct helper_error err;

	(void)state;
	memset(big, 'a', n);
	big[17] = '\0';                  /* NUL bytes travel as \u0000 */
	json_object_object_add(req, "op", json_object_new_string("exec"));
	json_object_object_add(req, "stdin", json_object_new_string_len(big, (int)n));
	reply = run("cat", req, 30000, &err);
	if (!reply)
		fail_msg("%s", err.message);
	assert_true(json_object_object_get_ex(reply, "stdin", &v));
	assert_int_equal(json_object_get_string_len(v), n);
	assert_memory_equal(json_object_get_string(v), big, n);
	json_object_put(reply);
	json_object_put(req);
	free(big);
}

static void test_request_too_large(void **state)
{
	size_t n = helper_request_max(TEST_MAX_BODY) + 1;
	char *big = malloc(n);
	json_object *req = json_object_new_object();
	struct helper_error err;

	(void)state;
	memset(big, 'a', n);
	json_object_object_add(req, "stdin", json_object_new_string_len(big, (int)n));
	assert_null(run("cat", req, 30000, &err));
	assert_int_equal(err.http_status, 413);
	json_object_put(req);
	free(big);
}

/* The bound is the configuration's max_body plus the protocol's slack,
 * the same the helper applies: a request of exactly that many bytes goes
 * through, one byte more is 413 and no helper runs. */
static void test_request_limit_follows_max_body(void **state)
{
	struct helper_target t = { "/bin/sh", "cat", 1000 };
	size_t limit = helper_request_max(1000);
	size_t n = limit - strlen("{\"stdin\":\"\"}");
	char *big = malloc(n + 1);
	struct helper_error err;
	json_object *req = json_object_new_object(), *reply;

	(void)state;
	memset(big, 'a', n + 1);
	json_object_object_add(req, "stdin", json_object_new_string_len(big, (int)n));
	reply = helper_call(&t, req, 30000, &err);
	assert_non_null(reply);
	json_object_put(reply);
	json_object_object_add(req, "stdin", json_object_new_string_len(big, (int)n + 1));
	assert_null(helper_call(&t, req, 30000, &err));
	assert_int_equal(err.http_status, 413);
	json_object_put(req);
	free(big);
}

static void test_error_codes(void **state)
{
	static const struct { const char *code; int status; } codes[] = {
		{ "invalid", 400 }, { "not_found", 404 }, { "limit", 429 },
		{ "denied", 500 }, { "failed", 500 }, { "something-new", 500 },
	};
	struct helper_error err;
	char script[256];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		snprintf(script, sizeof(script),
			 "cat >/dev/null; echo '{\"error\":\"room r1: step: reason\",\"code\":\"%s\"}'; exit 1",
			 codes[i].code);
		assert_null(run(script, NULL, 10000, &err));
		assert_int_equal(err.http_status, codes[i].status);
		assert_string_equal(err.code, codes[i].code);
		assert_string_equal(err.message, "room r1: step: reason");
	}
	/* no code: a failure */
	assert_null(run("echo '{\"error\":\"boom\"}'; exit 2", NULL, 10000, &err));
	assert_int_equal(err.http_status, 500);
	assert_string_equal(err.message, "boom");
	/* an "error" even with exit status 0 is an error */
	assert_null(run("echo '{\"error\":\"odd\",\"code\":\"not_found\"}'", NULL, 10000, &err));
	assert_int_equal(err.http_status, 404);
}

static void test_bad_replies(void **state)
{
	struct helper_error err;

	(void)state;
	assert_null(run("exit 0", NULL, 10000, &err));
	assert_int_equal(err.http_status, 500);
	assert_string_equal(err.message, "roombox-helper: exited with status 0 and no reply");
	assert_null(run("echo 'Segmentation fault'; exit 3", NULL, 10000, &err));
	assert_string_equal(err.message,
			    "roombox-helper: exited with status 3, reply is not a JSON object: unexpected character");
	assert_null(run("echo '[1,2]'", NULL, 10000, &err));
	assert_string_equal(err.message, "roombox-helper: exited with status 0, reply is not a JSON object");
	assert_null(run("echo '{\"a\":1} {\"b\":2}'", NULL, 10000, &err));
	assert_int_equal(err.http_status, 500);
	assert_null(run("echo '{}'; exit 1", NULL, 10000, &err));
	assert_string_equal(err.message, "roombox-helper: exited with status 1 without an \"error\"");
	assert_null(run("kill -SEGV $$", NULL, 10000, &err));
	assert_string_equal(err.message, "roombox-helper: killed by signal 11 (Segmentation fault)");
	assert_null(run("head -c 70000000 /dev/zero", NULL, 30000, &err));
	assert_string_equal(err.code, "reply");
}

static void test_spawn_failure(void **state)
{
	struct helper_target t = { "/nonexistent/helper", "/etc/roombox/roombox.conf" };
	json_object *req = json_object_new_object();
	struct helper_error err;

	(void)state;
	assert_null(helper_call(&t, req, 1000, &err));
	assert_int_equal(err.http_status, 500);
	assert_string_equal(err.message,
			    "roombox-helper: spawn /nonexistent/helper: No such file or directory");
	json_object_put(req);
}

static void test_deadline(void **state)
{
	struct helper_error err;
	double t0 = now_s();

	(void)state;
	assert_null(run("exec sleep 30", NULL, 300, &err));
	assert_true(now_s() - t0 < 5);
	assert_string_equal(err.code, "timeout");
	assert_string_equal(err.message, "roombox-helper: no answer within 300 ms, killed");
}

/* A process the helper leaves behind with its stdout does not hold up the
 * reply: the helper's exit ends the call. */
static void test_leftover_child_holding_stdout(void **state)
{
	struct helper_error err;
	json_object *reply;
	double t0 = now_s();

	(void)state;
	reply = run("sleep 3 & echo '{\"ok\":true}'", NULL, 20000, &err);
	if (!reply)
		fail_msg("%s", err.message);
	assert_true(now_s() - t0 < 2);
	json_object_put(reply);
}

/* Only fds 0, 1, 2 reach the helper; signals come back to their defaults,
 * unblocked; the environment is not passed on. */
static void test_child_environment(void **state)
{
	struct helper_error err;
	json_object *reply, *v;
	sigset_t block, old;
	char script[512];
	int leak;

	(void)state;
	leak = open("/dev/null", O_RDONLY);     /* no O_CLOEXEC on purpose */
	assert_true(leak > 2);
	setenv("ROOMBOX_TEST_SECRET", "1", 1);
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	pthread_sigmask(SIG_BLOCK, &block, &old);

	snprintf(script, sizeof(script),
		 "cat >/dev/null; "
		 "if [ -e /proc/$$/fd/%d ]; then l=true; else l=false; fi; "
		 "b=$(sed -n 's/^SigBlk:[[:space:]]*//p' /proc/$$/status); "
		 "i=$(sed -n 's/^SigIgn:[[:space:]]*//p' /proc/$$/status); "
		 "if [ -n \"${ROOMBOX_TEST_SECRET:-}\" ]; then e=true; else e=false; fi; "
		 "printf '{\"leak\":%%s,\"blk\":\"%%s\",\"ign\":\"%%s\",\"env\":%%s,\"path\":\"%%s\"}' "
		 "$l $b $i $e \"$PATH\"", leak);
	reply = run(script, NULL, 10000, &err);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	signal(SIGPIPE, SIG_DFL);
	unsetenv("ROOMBOX_TEST_SECRET");
	close(leak);
	if (!reply)
		fail_msg("%s", err.message);
	assert_true(json_object_object_get_ex(reply, "leak", &v));
	assert_false(json_object_get_boolean(v));
	assert_true(json_object_object_get_ex(reply, "blk", &v));
	assert_string_equal(json_object_get_string(v), "0000000000000000");
	/* glibc's posix_spawn leaves its two internal signals (32, 33: bits
	 * 0x180000000) ignored; every real signal is at its default */
	assert_true(json_object_object_get_ex(reply, "ign", &v));
	assert_int_equal(strtoull(json_object_get_string(v), NULL, 16) & ~0x180000000ull, 0);
	assert_true(json_object_object_get_ex(reply, "env", &v));
	assert_false(json_object_get_boolean(v));
	assert_true(json_object_object_get_ex(reply, "path", &v));
	assert_string_equal(json_object_get_string(v), "/usr/sbin:/usr/bin:/sbin:/bin");
	json_object_put(reply);
}

/* The helper's stdin is closed after the request: a helper that reads to
 * end-of-file gets exactly the request. */
static void test_request_on_stdin(void **state)
{
	struct helper_error err;
	json_object *req = json_object_new_object(), *reply, *v;

	(void)state;
	json_object_object_add(req, "op", json_object_new_string("status"));
	json_object_object_add(req, "room", json_object_new_string("a/b"));
	reply = run("printf '{\"got\":\"%s\"}' \"$(cat | sed 's/\"/_/g')\"", req, 10000, &err);
	if (!reply)
		fail_msg("%s", err.message);
	assert_true(json_object_object_get_ex(reply, "got", &v));
	/* compact, "/" not escaped */
	assert_string_equal(json_object_get_string(v), "{_op_:_status_,_room_:_a/b_}");
	json_object_put(reply);
	json_object_put(req);
}

static void *spawn_many(void *arg)
{
	long i, ok = 0;

	(void)arg;
	for (i = 0; i < 25; i++) {
		struct helper_error err;
		json_object *reply = run("cat", NULL, 20000, &err);

		ok += reply != NULL;
		json_object_put(reply);
	}
	return (void *)ok;
}

static void test_threads(void **state)
{
	pthread_t th[8];
	void *ok;
	int i;

	(void)state;
	for (i = 0; i < 8; i++)
		assert_int_equal(pthread_create(&th[i], NULL, spawn_many, NULL), 0);
	for (i = 0; i < 8; i++) {
		assert_int_equal(pthread_join(th[i], &ok), 0);
		assert_int_equal((long)ok, 25);
	}
}

static void test_code_status(void **state)
{
	(void)state;
	assert_int_equal(helper_code_status("invalid"), 400);
	assert_int_equal(helper_code_status("not_found"), 404);
	assert_int_equal(helper_code_status("limit"), 429);
	assert_int_equal(helper_code_status("denied"), 500);
	assert_int_equal(helper_code_status("failed"), 500);
	assert_int_equal(helper_code_status(NULL), 500);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip_large),
		cmocka_unit_test(test_request_too_large),
		cmocka_unit_test(test_request_limit_follows_max_body),
		cmocka_unit_test(test_error_codes),
		cmocka_unit_test(test_bad_replies),
		cmocka_unit_test(test_spawn_failure),
		cmocka_unit_test(test_deadline),
		cmocka_unit_test(test_leftover_child_holding_stdout),
		cmocka_unit_test(test_child_environment),
		cmocka_unit_test(test_request_on_stdin),
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_code_status),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
