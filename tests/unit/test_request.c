/* Unit tests for sandbox-helper/request.c: the setuid helper's request
 * reader (bounded read, the record's shape, an exec's values), fed records
 * made by the client's encoder (common/helper_rec.c), so both sides of the
 * protocol are checked against each other. */
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
#include "helper_rec.h"
#include "protocol.h"
#include "request.h"

/* The shapes of sandbox-helper/main.c's table of operations. */
static struct request_shape shapes[HOP_COUNT];

static int setup(void **state)
{
	(void)state;
	for (uint32_t op = 1; op < HOP_COUNT; op++)
		shapes[op] = (struct request_shape){ 0, true, true };
	shapes[HOP_EXEC].args_size = sizeof(struct helper_exec_args);
	shapes[HOP_STOP_IDLE].args_size = sizeof(struct helper_keep_args);
	shapes[HOP_PORT_CONNECT].args_size = sizeof(struct helper_port_args);
	shapes[HOP_LIST].room = shapes[HOP_STOP_IDLE].room = shapes[HOP_STOP_ALL].room =
		shapes[HOP_INFO].room = false;
	return 0;
}

static char err[512];

static int decode(const char *buf, size_t len, struct request *rq)
{
	err[0] = '\0';
	return request_decode(buf, len, shapes, rq, err, sizeof(err));
}

/* A descriptor that reads back buf[0..n). */
static int input_fd(const void *buf, size_t n)
{
	int fd = memfd_create("request", 0);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, n), (ssize_t)n);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	return fd;
}

static char *room_req(uint32_t op, const char *room, size_t *len)
{
	struct helper_rec b;
	helper_rec_begin(&b, op, room, NULL, 0);
	return helper_rec_end(&b, len);
}

static void test_every_room_op_decodes(void **state)
{
	static const uint32_t ops[] = { HOP_CREATE, HOP_STATUS, HOP_DESTROY, HOP_STOP,
					HOP_KILL_ALL, HOP_RESTART };
	struct request rq;
	size_t len;
	(void)state;
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		char *b = room_req(ops[i], "room-1", &len);
		assert_int_equal(len, sizeof(struct helper_req));
		assert_int_equal(decode(b, len, &rq), 0);
		assert_int_equal(rq.op, ops[i]);
		assert_string_equal(rq.room, "room-1");
		assert_int_equal(rq.nstrings, 0);
		free(b);
	}
	char *b = room_req(HOP_LIST, NULL, &len);
	assert_int_equal(decode(b, len, &rq), 0);
	assert_null(rq.room);
	free(b);
}

static void test_read_exact_size(void **state)
{
	size_t len, got;
	char *b = room_req(HOP_STATUS, "r1", &len), *buf;
	(void)state;
	int fd = input_fd(b, len);
	assert_int_equal(request_read(fd, 100, &buf, &got, err, sizeof(err)), 0);
	assert_int_equal(got, len);
	assert_memory_equal(buf, b, len);
	free(buf);
	close(fd);
	/* truncated */
	fd = input_fd(b, len - 1);
	assert_int_equal(request_read(fd, 100, &buf, &got, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "truncated"));
	close(fd);
	/* longer than declared */
	char *more = calloc(1, len + 1);
	memcpy(more, b, len);
	fd = input_fd(more, len + 1);
	assert_int_equal(request_read(fd, 100, &buf, &got, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "longer than its declared"));
	close(fd);
	free(more);
	/* empty */
	fd = input_fd("", 0);
	assert_int_equal(request_read(fd, 100, &buf, &got, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "truncated"));
	close(fd);
	free(b);
}

/* The declared size is checked before anything is allocated for it. */
static void test_read_refuses_oversized_before_reading(void **state)
{
	struct helper_req h = { HELPER_MAGIC, HELPER_VERSION, HOP_EXEC, 0, 0, 0, "r" };
	char *buf;
	size_t got;
	(void)state;
	h.size = (uint32_t)helper_request_max(100) + 1;
	int fd = input_fd(&h, sizeof(h));
	assert_int_equal(request_read(fd, 100, &buf, &got, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "out of range"));
	close(fd);
	h.size = UINT32_MAX;
	fd = input_fd(&h, sizeof(h));
	assert_int_equal(request_read(fd, MAX_BODY_LIMIT, &buf, &got, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "out of range"));
	close(fd);
	h.size = 8;   /* smaller than its own header */
	fd = input_fd(&h, sizeof(h));
	assert_int_equal(request_read(fd, 100, &buf, &got, err, sizeof(err)), -1);
	close(fd);
}

static void test_header_checks(void **state)
{
	struct request rq;
	size_t len;
	(void)state;
	char *b = room_req(HOP_STATUS, "r1", &len);
	struct helper_req *h = (void *)b;

	h->magic ^= 1;
	assert_int_equal(decode(b, len, &rq), -1);
	assert_non_null(strstr(err, "magic"));
	h->magic ^= 1;
	h->version = 2;
	assert_int_equal(decode(b, len, &rq), -1);
	assert_non_null(strstr(err, "version"));
	h->version = HELPER_VERSION;
	h->op = 0;
	assert_int_equal(decode(b, len, &rq), -1);
	assert_string_equal(err, "unknown op 0");
	h->op = HOP_COUNT;
	assert_int_equal(decode(b, len, &rq), -1);
	h->op = 0xffffffffu;
	assert_int_equal(decode(b, len, &rq), -1);
	h->op = HOP_STATUS;
	h->size = (uint32_t)len + 1;
	assert_int_equal(decode(b, len, &rq), -1);
	h->size = (uint32_t)len;
	assert_int_equal(decode(b, len - 1, &rq), -1);
	h->reserved = 1;
	assert_int_equal(decode(b, len, &rq), -1);
	h->reserved = 0;
	assert_int_equal(decode(b, len, &rq), 0);
	free(b);
}

static void test_room_checks(void **state)
{
	struct request rq;
	size_t len;
	(void)state;
	char *b = room_req(HOP_STATUS, "../etc", &len);
	assert_int_equal(decode(b, len, &rq), -1);
	assert_string_equal(err, "status: invalid room id");
	free(b);
	b = room_req(HOP_STATUS, "", &len);
	assert_int_equal(decode(b, len, &rq), -1);
	free(b);
	b = room_req(HOP_STATUS, "r1", &len);
	struct helper_req *h = (void *)b;
	memset(h->room, 'a', sizeof(h->room));     /* unterminated */
	assert_int_equal(decode(b, len, &rq), -1);
	assert_non_null(strstr(err, "not NUL-terminated"));
	memset(h->room, 0, sizeof(h->room));
	strcpy(h->room, "r1");
	h->room[10] = 'x';                          /* garbage after the NUL */
	assert_int_equal(decode(b, len, &rq), -1);
	assert_non_null(strstr(err, "NUL-padded"));
	free(b);
	b = room_req(HOP_LIST, "r1", &len);          /* a room where none is taken */
	assert_int_equal(decode(b, len, &rq), -1);
	assert_string_equal(err, "list takes no room");
	free(b);
}

static char *exec_req(struct helper_exec_args a, const char *const *s, size_t n,
		      const char *input, size_t input_len, size_t *len)
{
	struct helper_rec b;
	helper_rec_begin(&b, HOP_EXEC, "r1", &a, sizeof(a));
	for (size_t i = 0; i < n; i++)
		helper_rec_string(&b, s[i], strlen(s[i]));
	if (input_len)
		helper_rec_bytes(&b, input, input_len);
	return helper_rec_end(&b, len);
}

static void test_exec_strings_and_counts(void **state)
{
	struct request rq;
	struct exec_order q;
	struct config cfg;
	size_t len;
	(void)state;
	config_defaults(&cfg);
	const char *s[] = { "echo hi", "/tmp", "A=1", "B=x y" };
	char *b = exec_req((struct helper_exec_args){ .flags = HX_CWD | HX_USER_SET | HX_AS_USER, .nenv = 2 },
			   s, 4, NULL, 0, &len);
	assert_int_equal(decode(b, len, &rq), 0);
	assert_int_equal(request_exec_order(&rq, &cfg, &q, err, sizeof(err)), 0);
	assert_string_equal(q.cmd, "echo hi");
	assert_string_equal(q.cwd, "/tmp");
	assert_int_equal(q.nenv, 2);
	assert_string_equal(q.env, "A=1");
	assert_string_equal(request_next(q.env), "B=x y");
	assert_true(q.as_user);
	assert_int_equal(q.timeout_ms, cfg.exec_timeout_ms);
	free(b);
	/* one string too many for the counts, one too few */
	b = exec_req((struct helper_exec_args){ .flags = HX_CWD, .nenv = 1 }, s, 4, NULL, 0, &len);
	assert_int_equal(decode(b, len, &rq), -1);
	assert_non_null(strstr(err, "strings expected"));
	free(b);
	b = exec_req((struct helper_exec_args){ .flags = HX_CWD, .nenv = 3 }, s, 4, NULL, 0, &len);
	assert_int_equal(decode(b, len, &rq), -1);
	free(b);
	/* a count that overflows: nstrings claims more than the bytes hold */
	b = exec_req((struct helper_exec_args){ .nenv = 0xffffffffu }, s, 1, NULL, 0, &len);
	assert_int_equal(decode(b, len, &rq), -1);
	free(b);
	b = exec_req((struct helper_exec_args){ .nenv = 2 }, s, 1, NULL, 0, &len);
	((struct helper_req *)b)->nstrings = 3;
	assert_int_equal(decode(b, len, &rq), -1);
	assert_non_null(strstr(err, "not NUL-terminated"));
	free(b);
	/* unterminated last string */
	b = exec_req((struct helper_exec_args){ 0 }, s, 1, NULL, 0, &len);
	b[len - 1] = 'x';
	assert_int_equal(decode(b, len, &rq), -1);
	assert_non_null(strstr(err, "not NUL-terminated"));
	free(b);
	/* bytes after the strings */
	b = exec_req((struct helper_exec_args){ 0 }, s, 2, NULL, 0, &len);
	((struct helper_req *)b)->nstrings = 1;
	assert_int_equal(decode(b, len, &rq), -1);
	assert_non_null(strstr(err, "bytes after"));
	free(b);
	/* unknown flags */
	b = exec_req((struct helper_exec_args){ .flags = 1u << 20 }, s, 1, NULL, 0, &len);
	assert_int_equal(decode(b, len, &rq), -1);
	assert_non_null(strstr(err, "unknown flags"));
	free(b);
	/* the reserved field */
	b = exec_req((struct helper_exec_args){ .reserved = 1 }, s, 1, NULL, 0, &len);
	assert_int_equal(decode(b, len, &rq), -1);
	free(b);
}

static void test_exec_values(void **state)
{
	struct request rq;
	struct exec_order q;
	struct config cfg;
	size_t len;
	(void)state;
	config_defaults(&cfg);
	const char *rel[] = { "true", "tmp" };
	char *b = exec_req((struct helper_exec_args){ .flags = HX_CWD }, rel, 2, NULL, 0, &len);
	assert_int_equal(decode(b, len, &rq), 0);
	assert_int_equal(request_exec_order(&rq, &cfg, &q, err, sizeof(err)), HELPER_E_INVALID);
	assert_string_equal(err, "cwd must be absolute");
	free(b);
	const char *one[] = { "true" };
	b = exec_req((struct helper_exec_args){ .timeout_ms = cfg.exec_timeout_max_ms + 1 }, one, 1, NULL, 0, &len);
	assert_int_equal(decode(b, len, &rq), 0);
	assert_int_equal(request_exec_order(&rq, &cfg, &q, err, sizeof(err)), HELPER_E_INVALID);
	free(b);
	const char *empty[] = { "" };
	b = exec_req((struct helper_exec_args){ 0 }, empty, 1, NULL, 0, &len);
	assert_int_equal(decode(b, len, &rq), 0);
	assert_int_equal(request_exec_order(&rq, &cfg, &q, err, sizeof(err)), HELPER_E_INVALID);
	free(b);
	const char *noeq[] = { "true", "NOEQUALS" };
	b = exec_req((struct helper_exec_args){ .nenv = 1 }, noeq, 2, NULL, 0, &len);
	assert_int_equal(decode(b, len, &rq), 0);
	assert_int_equal(request_exec_order(&rq, &cfg, &q, err, sizeof(err)), HELPER_E_INVALID);
	free(b);
	/* an environment no shell can take: the sandbox's failure */
	char *huge = malloc(200000);
	memset(huge, 'v', 199999);
	memcpy(huge, "X=", 2);
	huge[199999] = '\0';
	const char *big[] = { "true", huge };
	b = exec_req((struct helper_exec_args){ .nenv = 1 }, big, 2, NULL, 0, &len);
	assert_int_equal(decode(b, len, &rq), 0);
	assert_int_equal(request_exec_order(&rq, &cfg, &q, err, sizeof(err)), HELPER_E_FAILED);
	free(b);
	free(huge);
	/* a tool: 1..TOOL_ARGS_MAX arguments, no cwd or env */
	const char *tool[] = { "get", "/workspace/a", "0" };
	b = exec_req((struct helper_exec_args){ .flags = HX_TOOL, .ntool = 3 }, tool, 3, NULL, 0, &len);
	assert_int_equal(decode(b, len, &rq), 0);
	assert_int_equal(request_exec_order(&rq, &cfg, &q, err, sizeof(err)), 0);
	assert_true(q.is_tool);
	assert_string_equal(q.tool[1], "/workspace/a");
	assert_null(q.tool[3]);
	free(b);
	b = exec_req((struct helper_exec_args){ .flags = HX_TOOL, .ntool = TOOL_ARGS_MAX + 1 }, tool, 3,
		     NULL, 0, &len);
	assert_int_equal(decode(b, len, &rq), -1);
	free(b);
	b = exec_req((struct helper_exec_args){ .flags = HX_TOOL | HX_CWD, .ntool = 2 }, tool, 3, NULL, 0, &len);
	assert_int_equal(decode(b, len, &rq), -1);
	assert_string_equal(err, "exec: a tool takes no env or cwd");
	free(b);
	/* a tool may be started detached (the pty tool) */
	const char *pty[] = { "pty", "80x24", "shell", "" };
	b = exec_req((struct helper_exec_args){ .flags = HX_TOOL | HX_DETACH, .ntool = 4 }, pty, 4, NULL, 0, &len);
	assert_int_equal(decode(b, len, &rq), 0);
	assert_int_equal(request_exec_order(&rq, &cfg, &q, err, sizeof(err)), 0);
	assert_true(q.is_tool);
	assert_true(q.detach);
	free(b);
}

static void test_keep_list_and_port(void **state)
{
	struct request rq;
	struct helper_rec b;
	size_t len;
	char *buf;
	(void)state;
	struct helper_keep_args k = { .nkeep = 2 };
	helper_rec_begin(&b, HOP_STOP_IDLE, NULL, &k, sizeof(k));
	helper_rec_string(&b, "r1", 2);
	helper_rec_string(&b, "r2", 2);
	buf = helper_rec_end(&b, &len);
	assert_int_equal(decode(buf, len, &rq), 0);
	assert_int_equal(rq.nstrings, 2);
	((struct helper_keep_args *)(buf + sizeof(struct helper_req)))->nkeep = 3;
	assert_int_equal(decode(buf, len, &rq), -1);
	free(buf);
	helper_rec_begin(&b, HOP_STOP_IDLE, NULL, &k, sizeof(k));
	helper_rec_string(&b, "r1", 2);
	helper_rec_string(&b, "../x", 4);
	buf = helper_rec_end(&b, &len);
	assert_int_equal(decode(buf, len, &rq), -1);
	assert_non_null(strstr(err, "invalid room id in keep"));
	free(buf);
	/* strings where an op takes none */
	helper_rec_begin(&b, HOP_STATUS, "r1", NULL, 0);
	helper_rec_string(&b, "x", 1);
	buf = helper_rec_end(&b, &len);
	assert_int_equal(decode(buf, len, &rq), -1);
	assert_string_equal(err, "status takes no strings");
	free(buf);
	static const struct { uint32_t port, serve; int ok; } ports[] = {
		{ 1, 0, 0 }, { 65535, 0, 0 }, { 0, 1, 0 }, { 0, 0, -1 }, { 65536, 0, -1 },
		{ 80, 1, -1 }, { 0, 2, -1 },
	};
	for (size_t i = 0; i < sizeof(ports) / sizeof(ports[0]); i++) {
		struct helper_port_args pa = { ports[i].port, ports[i].serve };
		helper_rec_begin(&b, HOP_PORT_CONNECT, "r1", &pa, sizeof(pa));
		buf = helper_rec_end(&b, &len);
		assert_int_equal(decode(buf, len, &rq), ports[i].ok);
		free(buf);
	}
	/* an argument record cut short */
	helper_rec_begin(&b, HOP_PORT_CONNECT, "r1", &k, 4);
	buf = helper_rec_end(&b, &len);
	assert_int_equal(decode(buf, len, &rq), -1);
	assert_non_null(strstr(err, "truncated"));
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_room_op_decodes),
		cmocka_unit_test(test_read_exact_size),
		cmocka_unit_test(test_read_refuses_oversized_before_reading),
		cmocka_unit_test(test_header_checks),
		cmocka_unit_test(test_room_checks),
		cmocka_unit_test(test_exec_strings_and_counts),
		cmocka_unit_test(test_exec_values),
		cmocka_unit_test(test_keep_list_and_port),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
