/* Unit tests for fcgi-app/helper_client.c: the one process spawner, the
 * request encoder and the answer decoder.
 *
 * The program spawned is /bin/sh: helper_client runs `<helper> -c <config>`,
 * so with helper = /bin/sh the "config" is a shell script, which lets each
 * test choose what the child does (keep the request, answer with a record
 * the test wrote, exit badly, hang, leave a child behind, report its
 * descriptors and signals).  Requests a typed call sends are read back with
 * the helper's own decoder (sandbox-helper/request.c): both sides of the
 * protocol, checked against each other. */
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
#include "request.h"
#include "protocol.h"

/* The largest max_body a configuration accepts. */
#define TEST_MAX_BODY MAX_BODY_LIMIT

static char dir[] = "/tmp/test_helper_client.XXXXXX";
static char req_path[64], ans_path[64];

static int setup(void **state)
{
	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(req_path, sizeof(req_path), "%s/req", dir);
	snprintf(ans_path, sizeof(ans_path), "%s/ans", dir);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unlink(req_path);
	unlink(ans_path);
	rmdir(dir);
	return 0;
}

static void file_put(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(p, 1, n, f), n);
	fclose(f);
}

static char *file_get(const char *path, size_t *n)
{
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	*n = (size_t)ftell(f);
	fseek(f, 0, SEEK_SET);
	char *b = malloc(*n + 1);
	assert_int_equal(fread(b, 1, *n, f), *n);
	fclose(f);
	return b;
}

/* The answer the scripted helper gives: header, record, then extra bytes
 * (counted in size only when in_size). */
static void answer(uint32_t op, uint32_t status, const void *rec, size_t len, const void *extra,
		   size_t extra_len)
{
	struct helper_ans h = { HELPER_MAGIC, HELPER_VERSION, op, (uint32_t)(sizeof(h) + len), status, 0 };
	char *b = malloc(sizeof(h) + len + extra_len + 1);
	memcpy(b, &h, sizeof(h));
	memcpy(b + sizeof(h), rec, len);
	if (extra_len)
		memcpy(b + sizeof(h) + len, extra, extra_len);
	file_put(ans_path, b, sizeof(h) + len + extra_len);
	free(b);
}

static void error_answer(uint32_t op, uint32_t code, const char *text)
{
	answer(op, code, text, strlen(text) + 1, NULL, 0);
}

/* A helper that keeps its request and gives the prepared answer (exiting
 * with status). */
static struct helper_target scripted(int status)
{
	static char script[256];
	snprintf(script, sizeof(script), "cat > %s; cat %s; exit %d", req_path, ans_path, status);
	return (struct helper_target){ "/bin/sh", script, TEST_MAX_BODY };
}

static struct request_shape shapes[HOP_COUNT];

/* The request the scripted helper got, decoded as the helper does. */
static char *sent(struct request *rq)
{
	size_t n;
	char *b = file_get(req_path, &n), why[256];
	for (uint32_t op = 1; op < HOP_COUNT; op++)
		shapes[op] = (struct request_shape){ 0, true, true };
	shapes[HOP_EXEC].args_size = sizeof(struct helper_exec_args);
	shapes[HOP_STOP_IDLE].args_size = sizeof(struct helper_keep_args);
	shapes[HOP_PORT_CONNECT].args_size = sizeof(struct helper_port_args);
	shapes[HOP_LIST].room = shapes[HOP_STOP_IDLE].room = shapes[HOP_STOP_ALL].room =
		shapes[HOP_INFO].room = false;
	if (request_decode(b, n, shapes, rq, why, sizeof(why)) < 0)
		fail_msg("%s", why);
	return b;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_status_round_trip(void **state)
{
	struct helper_status st = { .room = "r1", .created_at = "2026-01-01T00:00:00.000Z",
				    .running = 1, .last_active_ms = 42, .disk_bytes = 7 }, got;
	struct helper_target t = scripted(0);
	struct helper_error err;
	struct request rq;

	(void)state;
	answer(HOP_STATUS, 0, &st, sizeof(st), NULL, 0);
	if (helper_status(&t, "r1", &got, &err) < 0)
		fail_msg("%s", err.message);
	assert_memory_equal(&got, &st, sizeof(st));
	char *b = sent(&rq);
	assert_int_equal(rq.op, HOP_STATUS);
	assert_string_equal(rq.room, "r1");
	free(b);
	/* the answer to another op is refused */
	answer(HOP_CREATE, 0, &st, sizeof(st), NULL, 0);
	assert_int_equal(helper_status(&t, "r1", &got, &err), -1);
	assert_string_equal(err.code, "reply");
}

/* An exec, as helper_exec_start and helper_exec_finish make it. */
static int exec_call(const struct helper_target *t, const struct helper_exec *x,
		     struct helper_exec_ans *got, struct helper_error *err)
{
	struct helper_run *run = helper_exec_start(t, "r1", x, 10000, NULL, err);

	return run ? helper_exec_finish(run, got, err) : -1;
}

/* An exec's request carries what was asked, in the helper's terms. */
static void test_exec_request_encoding(void **state)
{
	struct helper_exec_ans a = { .wait_status = 3 << 8, .duration_us = 5 };
	struct helper_target t = scripted(0);
	json_object *env = json_object_new_object();
	struct helper_exec x = { .cmd = "echo hi", .cmd_len = 7, .cwd = "/tmp", .env = env,
				 .timeout_ms = 5000, .user = HK_USER_USER };
	struct helper_exec_ans got;
	struct helper_error err;
	struct request rq;
	struct exec_order q;
	struct config cfg;

	(void)state;
	json_object_object_add(env, "A", json_object_new_string("1"));
	json_object_object_add(env, "B", json_object_new_string("x y"));
	json_object_object_add(env, "C=D", json_object_new_string("dropped"));
	answer(HOP_EXEC, 0, &a, sizeof(a), NULL, 0);
	if (exec_call(&t, &x, &got, &err) < 0)
		fail_msg("%s", err.message);
	assert_memory_equal(&got, &a, sizeof(a));
	char *b = sent(&rq);
	config_defaults(&cfg);
	cfg.exec_timeout_max_ms = 60000;
	char why[256];
	assert_int_equal(request_exec_order(&rq, &cfg, &q, why, sizeof(why)), 0);
	assert_string_equal(q.cmd, "echo hi");
	assert_string_equal(q.cwd, "/tmp");
	assert_int_equal(q.timeout_ms, 5000);
	assert_true(q.as_user);
	assert_int_equal(q.nenv, 2);
	assert_string_equal(q.env, "A=1");
	assert_string_equal(request_next(q.env), "B=x y");
	free(b);
	/* a tool, never creating the room */
	const char *tool[] = { "get", "/workspace", "1", NULL };
	x = (struct helper_exec){ .cmd = "get", .cmd_len = 3, .tool = tool, .existing = true };
	answer(HOP_EXEC, 0, &a, sizeof(a), NULL, 0);
	if (exec_call(&t, &x, &got, &err) < 0)
		fail_msg("%s", err.message);
	b = sent(&rq);
	assert_int_equal(request_exec_order(&rq, &cfg, &q, why, sizeof(why)), 0);
	assert_true(q.is_tool);
	assert_true(q.existing);
	assert_string_equal(q.tool[1], "/workspace");
	free(b);
	json_object_put(env);
}

/* Every room comes back, however many: far more than the 6,145 the old
 * helper's memory budget let a list hold. */
static void test_list_every_room(void **state)
{
	enum { N = 10000 };
	size_t len = sizeof(struct helper_list_ans) + N * sizeof(struct helper_status);
	char *rec = calloc(1, len);
	struct helper_status *rooms;
	struct helper_target t = scripted(0);
	struct helper_error err;
	size_t n;

	(void)state;
	((struct helper_list_ans *)rec)->count = N;
	for (int i = 0; i < N; i++) {
		struct helper_status *st = (void *)(rec + sizeof(struct helper_list_ans) + i * sizeof(*st));
		snprintf(st->room, sizeof(st->room), "room-%d", i);
		st->running = i % 2;
	}
	answer(HOP_LIST, 0, rec, len, NULL, 0);
	if (helper_list(&t, 30000, &rooms, &n, &err) < 0)
		fail_msg("%s", err.message);
	assert_int_equal(n, N);
	assert_string_equal(rooms[N - 1].room, "room-9999");
	assert_int_equal(rooms[N - 1].running, 1);
	free(rooms);
	/* a count the bytes do not hold, or one too small for them */
	((struct helper_list_ans *)rec)->count = N + 1;
	answer(HOP_LIST, 0, rec, len, NULL, 0);
	assert_int_equal(helper_list(&t, 30000, &rooms, &n, &err), -1);
	assert_string_equal(err.code, "reply");
	((struct helper_list_ans *)rec)->count = 0xffffffffu;
	answer(HOP_LIST, 0, rec, len, NULL, 0);
	assert_int_equal(helper_list(&t, 30000, &rooms, &n, &err), -1);
	((struct helper_list_ans *)rec)->count = N - 1;
	answer(HOP_LIST, 0, rec, len, NULL, 0);
	assert_int_equal(helper_list(&t, 30000, &rooms, &n, &err), -1);
	free(rec);
}

static void test_stop_idle_keep_list(void **state)
{
	char rec[sizeof(struct helper_stopped_ans) + 2 * HELPER_ROOM_LEN] = { 0 };
	const char *keep[] = { "busy-1", "busy-2" };
	struct helper_target t = scripted(0);
	struct helper_stopped st;
	struct helper_error err;
	struct request rq;

	(void)state;
	((struct helper_stopped_ans *)rec)->count = 2;
	strcpy(rec + sizeof(struct helper_stopped_ans), "idle-1");
	strcpy(rec + sizeof(struct helper_stopped_ans) + HELPER_ROOM_LEN, "idle-2");
	answer(HOP_STOP_IDLE, 0, rec, sizeof(rec), NULL, 0);
	if (helper_stop_idle(&t, 10000, keep, 2, &st, &err) < 0)
		fail_msg("%s", err.message);
	assert_int_equal(st.count, 2);
	assert_string_equal(st.ids[1], "idle-2");
	free(st.ids);
	char *b = sent(&rq);
	assert_int_equal(rq.nstrings, 2);
	assert_string_equal(rq.strings, "busy-1");
	free(b);
}

static void test_error_codes(void **state)
{
	static const struct { uint32_t code; const char *name; int status; } codes[] = {
		{ HELPER_E_INVALID, "invalid", 400 }, { HELPER_E_NOT_FOUND, "not_found", 404 },
		{ HELPER_E_LIMIT, "limit", 429 }, { HELPER_E_DENIED, "denied", 500 },
		{ HELPER_E_FAILED, "failed", 500 }, { HELPER_E_NO_SPACE, "no_space", 507 }, { HELPER_E_CONFLICT, "conflict", 409 },
		{ 999, "failed", 500 },
	};
	struct helper_target t = scripted(1);
	struct helper_error err;

	(void)state;
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		error_answer(HOP_DESTROY, codes[i].code, "room r1: step: reason");
		assert_int_equal(helper_destroy(&t, "r1", &err), -1);
		assert_int_equal(err.http_status, codes[i].status);
		assert_string_equal(err.code, codes[i].name);
		assert_string_equal(err.message, "room r1: step: reason");
	}
	/* an error even with exit status 0 is an error */
	t = scripted(0);
	error_answer(HOP_DESTROY, HELPER_E_NOT_FOUND, "odd");
	assert_int_equal(helper_destroy(&t, "r1", &err), -1);
	assert_int_equal(err.http_status, 404);
}

static void test_bad_answers(void **state)
{
	struct helper_target t;
	struct helper_error err;
	uint32_t killed;
	struct helper_killed_ans k = { 3, 0 };

	(void)state;
	t = (struct helper_target){ "/bin/sh", "exit 0", TEST_MAX_BODY };
	assert_int_equal(helper_destroy(&t, "r1", &err), -1);
	assert_string_equal(err.message, "roombox-helper: exited with status 0 and no answer");
	t = (struct helper_target){ "/bin/sh", "echo 'Segmentation fault'; exit 3", TEST_MAX_BODY };
	assert_int_equal(helper_destroy(&t, "r1", &err), -1);
	assert_non_null(strstr(err.message, "exited with status 3, answer truncated"));
	t = (struct helper_target){ "/bin/sh", "echo 'a line of text from a crashed helper'; exit 3", TEST_MAX_BODY };
	assert_int_equal(helper_destroy(&t, "r1", &err), -1);
	assert_non_null(strstr(err.message, "exited with status 3, answer of another magic"));
	t = (struct helper_target){ "/bin/sh", "kill -SEGV $$", TEST_MAX_BODY };
	assert_int_equal(helper_destroy(&t, "r1", &err), -1);
	assert_string_equal(err.message, "roombox-helper: killed by signal 11 (Segmentation fault)");
	t = (struct helper_target){ "/bin/sh", "head -c 70000000 /dev/zero", TEST_MAX_BODY };
	assert_int_equal(helper_destroy(&t, "r1", &err), -1);
	assert_string_equal(err.code, "reply");
	t = scripted(0);
	/* a record cut short, one too long, bytes after it */
	answer(HOP_KILL_ALL, 0, &k, sizeof(k) - 1, NULL, 0);
	assert_int_equal(helper_kill_all(&t, "r1", 0, &killed, &err), -1);
	assert_string_equal(err.code, "reply");
	answer(HOP_KILL_ALL, 0, &k, sizeof(k), "x", 1);
	assert_int_equal(helper_kill_all(&t, "r1", 0, &killed, &err), -1);
	assert_non_null(strstr(err.message, "after the answer"));
	answer(HOP_KILL_ALL, 0, &k, sizeof(k), NULL, 0);
	assert_int_equal(helper_kill_all(&t, "r1", 0, &killed, &err), 0);
	assert_int_equal(killed, 3);
	/* a list without even its count; an error without words */
	struct helper_status *rooms;
	size_t n;
	answer(HOP_LIST, 0, NULL, 0, NULL, 0);
	assert_int_equal(helper_list(&t, 10000, &rooms, &n, &err), -1);
	assert_string_equal(err.code, "reply");
	t = scripted(1);
	answer(HOP_LIST, HELPER_E_FAILED, "", 1, NULL, 0);
	assert_int_equal(helper_list(&t, 10000, &rooms, &n, &err), -1);
	assert_string_equal(err.code, "reply");
	/* success with a failing exit status */
	answer(HOP_KILL_ALL, 0, &k, sizeof(k), NULL, 0);
	t = scripted(1);
	assert_int_equal(helper_kill_all(&t, "r1", 0, &killed, &err), -1);
	assert_non_null(strstr(err.message, "without an error"));
	/* an error without its NUL-terminated text */
	t = scripted(1);
	answer(HOP_KILL_ALL, HELPER_E_FAILED, "abc", 3, NULL, 0);
	assert_int_equal(helper_kill_all(&t, "r1", 0, &killed, &err), -1);
	assert_string_equal(err.code, "reply");
	/* an exec answer followed by output: none may follow it */
	struct helper_exec_ans a = { 0 };
	struct helper_exec x = { .cmd = "x", .cmd_len = 1 };
	t = scripted(0);
	answer(HOP_EXEC, 0, &a, sizeof(a), "abc", 3);
	assert_int_equal(exec_call(&t, &x, &a, &err), -1);
	assert_non_null(strstr(err.message, "after the answer"));
}

/* The bound is the configuration's max_body plus the protocol's slack,
 * the same the helper applies: a request of exactly that many bytes goes
 * through, one byte more is 413 and no helper runs. */
static void test_request_limit_follows_max_body(void **state)
{
	struct helper_target t = scripted(0);
	struct helper_exec_ans a = { 0 }, got;
	struct helper_error err;
	size_t over = sizeof(struct helper_req) + sizeof(struct helper_exec_args) + 1;
	size_t n = helper_request_max(1000) - over;
	char *big = malloc(n + 2);

	(void)state;
	memset(big, 'x', n + 1);
	big[n] = '\0';
	struct helper_exec x = { .cmd = big, .cmd_len = n };
	t.max_body = 1000;
	answer(HOP_EXEC, 0, &a, sizeof(a), NULL, 0);
	if (exec_call(&t, &x, &got, &err) < 0)
		fail_msg("%s", err.message);
	unlink(req_path);
	big[n] = 'x';
	big[n + 1] = '\0';
	x.cmd_len = n + 1;
	assert_int_equal(exec_call(&t, &x, &got, &err), -1);
	assert_int_equal(err.http_status, 413);
	assert_int_equal(access(req_path, F_OK), -1);   /* no helper ran */
	free(big);
}

static void test_spawn_failure(void **state)
{
	struct helper_target t = { "/nonexistent/helper", "/etc/roombox/roombox.conf", TEST_MAX_BODY };
	struct helper_error err;

	(void)state;
	assert_int_equal(helper_destroy(&t, "r1", &err), -1);
	assert_int_equal(err.http_status, 500);
	assert_string_equal(err.message,
			    "roombox-helper: spawn /nonexistent/helper: No such file or directory");
}

static void test_deadline(void **state)
{
	struct helper_target t = { "/bin/sh", "exec sleep 30", TEST_MAX_BODY };
	struct helper_info_ans info;
	struct helper_error err;
	double t0 = now_s();

	(void)state;
	assert_int_equal(helper_info(&t, 300, &info, &err), -1);
	assert_true(now_s() - t0 < 5);
	assert_string_equal(err.code, "timeout");
	assert_string_equal(err.message, "roombox-helper: no answer within 300 ms, killed");
}

/* A transfer's stream lasts as long as its client reads or sends (an
 * export read for more than an hour): its deadline bounds only what the
 * helper does after the stream, so a helper that answered while the
 * stream outlasted the deadline is not killed for it. */
static void test_transfer_deadline_counts_from_the_stream_end(void **state)
{
	struct helper_target t = scripted(0);
	struct helper_error err;
	/* deadlines of a second: spawning the helper and sending it the
	 * request fit well within them on a slow machine too */
	struct timespec stream = { 1, 300 * 1000000L };   /* > the 1 s deadline */
	char rec[sizeof(struct helper_export_ans) + 3], *root, *user, sid[HELPER_ROOM_LEN];
	struct helper_export_ans x = { .root_len = 2, .user_len = 1, .snapshot = "s1" };
	int tree[2];

	(void)state;
	memcpy(rec, &x, sizeof(x));
	memcpy(rec + sizeof(x), "abc", 3);
	answer(HOP_EXPORT, 0, rec, sizeof(rec), NULL, 0);
	assert_int_equal(pipe(tree), 0);
	struct helper_run *run = helper_export_start(&t, "r1", NULL, tree[1], 1000, &err);
	assert_non_null(run);
	close(tree[1]);
	nanosleep(&stream, NULL);
	if (helper_export_finish(run, &root, &user, sid, &err) < 0)
		fail_msg("export: %s", err.message);
	assert_string_equal(root, "ab");
	assert_string_equal(user, "c");
	assert_string_equal(sid, "s1");
	free(root);
	free(user);
	close(tree[0]);

	answer(HOP_IMPORT, 0, NULL, 0, NULL, 0);
	assert_int_equal(pipe(tree), 0);
	run = helper_import_start(&t, "r1", tree[0], -1, 1000, &err);
	assert_non_null(run);
	close(tree[0]);
	close(tree[1]);
	nanosleep(&stream, NULL);
	if (helper_import_finish(run, &err) < 0)
		fail_msg("import: %s", err.message);

	/* still bounded: a helper that does not answer after the stream is
	 * killed at the deadline */
	struct helper_target slow = { "/bin/sh", "cat >/dev/null; exec sleep 30", TEST_MAX_BODY };
	run = helper_import_start(&slow, "r1", -1, -1, 1000, &err);
	assert_non_null(run);
	double t0 = now_s();
	assert_int_equal(helper_import_finish(run, &err), -1);
	assert_true(now_s() - t0 < 5);
	assert_string_equal(err.code, "timeout");
}

/* A process the helper leaves behind with its stdout does not hold up the
 * reply: the helper's exit ends the call. */
static void test_leftover_child_holding_stdout(void **state)
{
	struct helper_target t = { "/bin/sh", NULL, TEST_MAX_BODY };
	struct helper_error err;
	char script[256];
	double t0 = now_s();

	(void)state;
	snprintf(script, sizeof(script), "sleep 3 & cat %s", ans_path);
	t.config_path = script;
	answer(HOP_STOP, 0, NULL, 0, NULL, 0);
	if (helper_stop(&t, "r1", &err) < 0)
		fail_msg("%s", err.message);
	assert_true(now_s() - t0 < 2);
}

/* Only fds 0, 1, 2 reach the helper; signals come back to their defaults,
 * unblocked; the environment is not passed on. */
static void test_child_environment(void **state)
{
	struct helper_target t = { "/bin/sh", NULL, TEST_MAX_BODY };
	struct helper_error err;
	sigset_t block, old;
	char script[1024];
	int leak, rc;

	(void)state;
	leak = open("/dev/null", O_RDONLY);     /* no O_CLOEXEC on purpose */
	assert_true(leak > 2);
	setenv("ROOMBOX_TEST_SECRET", "1", 1);
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	pthread_sigmask(SIG_BLOCK, &block, &old);

	/* glibc's posix_spawn leaves its two internal signals (32, 33: bits
	 * 0x180000000) ignored; every real signal is at its default */
	snprintf(script, sizeof(script),
		 "cat >/dev/null; "
		 "if [ -e /proc/$$/fd/%d ]; then echo leak; exit 1; fi; "
		 "b=$(sed -n 's/^SigBlk:[[:space:]]*//p' /proc/$$/status); "
		 "[ \"$b\" = 0000000000000000 ] || { echo blocked $b; exit 1; }; "
		 "i=$(sed -n 's/^SigIgn:[[:space:]]*//p' /proc/$$/status); "
		 "[ $(( 0x$i & ~0x180000000 )) = 0 ] || { echo ignored $i; exit 1; }; "
		 "[ -z \"${ROOMBOX_TEST_SECRET:-}\" ] || { echo env; exit 1; }; "
		 "[ \"$PATH\" = /usr/sbin:/usr/bin:/sbin:/bin ] || { echo path; exit 1; }; "
		 "cat %s", leak, ans_path);
	t.config_path = script;
	answer(HOP_STOP, 0, NULL, 0, NULL, 0);
	rc = helper_stop(&t, "r1", &err);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	signal(SIGPIPE, SIG_DFL);
	unsetenv("ROOMBOX_TEST_SECRET");
	close(leak);
	if (rc < 0)
		fail_msg("%s", err.message);
}

static void *spawn_many(void *arg)
{
	long i, ok = 0;

	(void)arg;
	for (i = 0; i < 25; i++) {
		struct helper_target t = { "/bin/sh", NULL, TEST_MAX_BODY };
		struct helper_error err;
		char script[256];

		snprintf(script, sizeof(script), "cat >/dev/null; cat %s", ans_path);
		t.config_path = script;
		ok += helper_stop(&t, "r1", &err) == 0;
	}
	return (void *)ok;
}

static void test_threads(void **state)
{
	pthread_t th[8];
	void *ok;
	int i;

	(void)state;
	answer(HOP_STOP, 0, NULL, 0, NULL, 0);
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
		cmocka_unit_test(test_status_round_trip),
		cmocka_unit_test(test_exec_request_encoding),
		cmocka_unit_test(test_list_every_room),
		cmocka_unit_test(test_stop_idle_keep_list),
		cmocka_unit_test(test_error_codes),
		cmocka_unit_test(test_bad_answers),
		cmocka_unit_test(test_request_limit_follows_max_body),
		cmocka_unit_test(test_spawn_failure),
		cmocka_unit_test(test_deadline),
		cmocka_unit_test(test_transfer_deadline_counts_from_the_stream_end),
		cmocka_unit_test(test_leftover_child_holding_stdout),
		cmocka_unit_test(test_child_environment),
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_code_status),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
