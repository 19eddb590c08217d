/* Unit tests for fcgi-app/messages/store.c, on a real file system (fsync included):
 * each test gets a fresh directory under $TMPDIR (or /tmp).
 *
 * Worker threads and child processes never call cmocka's assertions (they
 * are not thread-safe and would jump to the wrong stack); they count their
 * failures and the main thread checks the counts. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "store.h"

static char base[256];	/* the test's own temporary directory */
static char dir[512];	/* base/messages, what store_init gets */

/* ---- fixtures ---- */

static int setup(void **state)
{
	const char *tmp = getenv("TMPDIR");
	char err[256];

	(void)state;
	snprintf(base, sizeof(base), "%s/roombox-store-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(base))
		return -1;
	snprintf(dir, sizeof(dir), "%s/messages", base);
	/* messages/ does not exist yet: store_init creates it. */
	if (store_init(dir, err, sizeof(err)) < 0) {
		fprintf(stderr, "store_init: %s\n", err);
		return -1;
	}
	return 0;
}

/* Remove base/messages/<files>, base/messages and base (one level of
 * subdirectories, enough for what the tests make). */
static void remove_dir(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (unlinkat(dirfd(d), e->d_name, 0) < 0)
			unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR);
	}
	closedir(d);
	rmdir(path);
}

static int teardown(void **state)
{
	(void)state;
	remove_dir(dir);
	remove_dir(base);
	return 0;
}

/* ---- helpers ---- */

static void room_path(const char *room, char *path, size_t size)
{
	snprintf(path, size, "%s/%s.jsonl", dir, room);
}

static json_object *append_ok(const char *room, const char *role,
			      const char *content, size_t len)
{
	json_object *msg = NULL;
	char err[256] = "";

	if (store_append(room, role, content, len, &msg, err, sizeof(err)) < 0)
		fail_msg("store_append %s: %s", room, err);
	assert_non_null(msg);
	return msg;
}

static json_object *list_ok(const char *room)
{
	char err[256] = "";
	json_object *list = store_list(room, err, sizeof(err));

	if (!list)
		fail_msg("store_list %s: %s", room, err);
	assert_true(json_object_is_type(list, json_type_array));
	return list;
}

static const char *field(json_object *msg, const char *key, size_t *len)
{
	json_object *v;

	assert_true(json_object_object_get_ex(msg, key, &v));
	assert_true(json_object_is_type(v, json_type_string));
	if (len)
		*len = (size_t)json_object_get_string_len(v);
	return json_object_get_string(v);
}

static void assert_message(json_object *msg, const char *role,
			   const char *content, size_t len)
{
	size_t n;
	const char *c = field(msg, "content", &n);

	assert_string_equal(field(msg, "role", NULL), role);
	assert_int_equal(n, len);
	assert_memory_equal(c, content, len);
}

/* Append raw bytes to the room's file, as a crash or a bad disk might. */
static void file_add_raw(const char *room, const char *bytes)
{
	char path[PATH_MAX];
	int fd;

	room_path(room, path, sizeof(path));
	fd = open(path, O_WRONLY | O_APPEND);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, bytes, strlen(bytes)), (ssize_t)strlen(bytes));
	close(fd);
}

/* The room's file, whole (NUL-terminated; files here hold no raw NUL). */
static char *file_slurp(const char *room)
{
	char path[PATH_MAX];
	char *buf;
	FILE *f;
	long n;

	room_path(room, path, sizeof(path));
	f = fopen(path, "r");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = calloc(1, (size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	return buf;
}

static size_t count_lines(const char *s)
{
	size_t n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

/* ---- round trip ---- */

static void assert_uuid_v4(const char *id)
{
	assert_int_equal(strlen(id), 36);
	for (int i = 0; i < 36; i++) {
		if (i == 8 || i == 13 || i == 18 || i == 23)
			assert_int_equal(id[i], '-');
		else
			assert_non_null(strchr("0123456789abcdef", id[i]));
	}
	assert_int_equal(id[14], '4');
	assert_non_null(strchr("89ab", id[19]));
}

static void test_append_list_round_trip(void **state)
{
	static const char tricky[] = "line1\nline2 \"quoted\" \\ / \xC3\xA9 \xF0\x9F\x98\x80 \t\x01";
	static const char with_nul[] = "a\0b";
	json_object *m[3], *list;
	struct stat st;
	char path[PATH_MAX], *text;

	(void)state;
	m[0] = append_ok("r1", "user", "hello", 5);
	m[1] = append_ok("r1", "assistant", tricky, sizeof(tricky) - 1);
	m[2] = append_ok("r1", "user", with_nul, sizeof(with_nul) - 1);

	assert_message(m[0], "user", "hello", 5);
	assert_uuid_v4(field(m[0], "id", NULL));
	/* "2026-11-29T17:00:00.000Z" */
	assert_int_equal(strlen(field(m[0], "createdAt", NULL)), 24);
	assert_int_equal(field(m[0], "createdAt", NULL)[23], 'Z');
	assert_string_not_equal(field(m[0], "id", NULL), field(m[1], "id", NULL));

	list = list_ok("r1");
	assert_int_equal(json_object_array_length(list), 3);
	for (size_t i = 0; i < 3; i++)
		assert_true(json_object_equal(json_object_array_get_idx(list, i), m[i]));
	assert_message(json_object_array_get_idx(list, 1), "assistant", tricky, sizeof(tricky) - 1);
	assert_message(json_object_array_get_idx(list, 2), "user", with_nul, sizeof(with_nul) - 1);

	/* One record per line, each ended by "\n"; the file is private. */
	text = file_slurp("r1");
	assert_int_equal(count_lines(text), 3);
	assert_int_equal(text[strlen(text) - 1], '\n');
	free(text);
	room_path("r1", path, sizeof(path));
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);

	for (size_t i = 0; i < 3; i++)
		json_object_put(m[i]);
	json_object_put(list);
}

static void test_list_of_unknown_room_is_empty(void **state)
{
	json_object *list;

	(void)state;
	list = list_ok("never-used");
	assert_int_equal(json_object_array_length(list), 0);
	json_object_put(list);
}

/* The append that creates a room's file takes the directory fsync path too;
 * all we can check without mocks is that it succeeds and the file is there. */
static void test_first_append_syncs_new_file(void **state)
{
	char path[PATH_MAX];
	struct stat st;

	(void)state;
	room_path("fresh", path, sizeof(path));
	assert_int_equal(stat(path, &st), -1);
	json_object_put(append_ok("fresh", "user", "x", 1));
	assert_int_equal(stat(path, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_true(st.st_size > 0);
}

/* ---- torn records ---- */

struct torn_case {
	const char *name;
	const char *tail;	/* written after two good records */
};

static const struct torn_case torn_cases[] = {
	{ "half a record", "{\"id\":\"torn\",\"role\":\"user\",\"cont" },
	{ "a whole record without its newline",
	  "{\"id\":\"torn\",\"role\":\"user\",\"content\":\"x\",\"createdAt\":\"t\"}" },
	{ "one byte", "{" },
	{ "a long garbage tail", "torn torn torn torn torn torn torn torn torn torn torn "
			       "torn torn torn torn torn torn torn torn torn torn torn" },
};

static void check_torn_tail(const struct torn_case *c)
{
	json_object *list;
	char *text;

	json_object_put(append_ok("torn", "user", "one", 3));
	json_object_put(append_ok("torn", "assistant", "two", 3));
	file_add_raw("torn", c->tail);

	list = list_ok("torn");
	if (json_object_array_length(list) != 2)
		fail_msg("%s: %zu messages listed", c->name, json_object_array_length(list));
	json_object_put(list);

	json_object_put(append_ok("torn", "user", "three", 5));
	list = list_ok("torn");
	assert_int_equal(json_object_array_length(list), 3);
	assert_message(json_object_array_get_idx(list, 0), "user", "one", 3);
	assert_message(json_object_array_get_idx(list, 1), "assistant", "two", 3);
	assert_message(json_object_array_get_idx(list, 2), "user", "three", 5);
	json_object_put(list);

	/* The torn tail was cut, not glued onto: three clean lines. */
	text = file_slurp("torn");
	assert_int_equal(count_lines(text), 3);
	assert_null(strstr(text, "torn"));
	free(text);

	assert_int_equal(store_reset("torn", NULL, 0), 0);
}

static void test_torn_tail_is_ignored_then_cut(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(torn_cases) / sizeof(torn_cases[0]); i++)
		check_torn_tail(&torn_cases[i]);
}

/* Only a torn record and nothing before it: the file is cut to empty. */
static void test_torn_tail_alone(void **state)
{
	json_object *list;
	char path[PATH_MAX];
	int fd;

	(void)state;
	room_path("alone", path, sizeof(path));
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "{\"id\":", 6), 6);
	close(fd);

	list = list_ok("alone");
	assert_int_equal(json_object_array_length(list), 0);
	json_object_put(list);
	json_object_put(append_ok("alone", "user", "first", 5));
	list = list_ok("alone");
	assert_int_equal(json_object_array_length(list), 1);
	assert_message(json_object_array_get_idx(list, 0), "user", "first", 5);
	json_object_put(list);
}

/* A complete line that is not a message (disk corruption) is skipped; the
 * records around it are still listed. */
static void test_bad_line_is_skipped(void **state)
{
	json_object *list;

	(void)state;
	json_object_put(append_ok("bad", "user", "before", 6));
	file_add_raw("bad", "not json\n{\"id\":1}\n[]\n\n");
	json_object_put(append_ok("bad", "user", "after", 5));
	list = list_ok("bad");
	assert_int_equal(json_object_array_length(list), 2);
	assert_message(json_object_array_get_idx(list, 0), "user", "before", 6);
	assert_message(json_object_array_get_idx(list, 1), "user", "after", 5);
	json_object_put(list);
}

/* A corrupt line that json-c would take (it is lenient) but that is not
 * a message in valid UTF-8 is skipped; one that only has more than the four
 * fields is listed as the four, so nothing but strict JSON in valid UTF-8
 * reaches a client (both found by tests/fuzz/fuzz_store.c). */
static void test_corrupt_text_never_listed(void **state)
{
	json_object *list;
	const char *text;

	(void)state;
	json_object_put(append_ok("corrupt", "user", "before", 6));
	file_add_raw("corrupt",
		"{\"id\":\"\xAF\xAF\",\"role\":\"user\",\"content\":\"a\",\"createdAt\":\"t\"}\n"
		"{\"id\":\"i\",\"role\":\"user\",\"content\":\"\xED\xA0\x80\",\"createdAt\":\"t\"}\n"
		"{\"id\":\"i\",\"role\":\"user\",\"content\":\"extra\",\"createdAt\":\"t\",\"x\":NaN}\n");
	json_object_put(append_ok("corrupt", "user", "after", 5));
	list = list_ok("corrupt");
	assert_int_equal(json_object_array_length(list), 3);
	assert_message(json_object_array_get_idx(list, 0), "user", "before", 6);
	assert_int_equal(json_object_object_length(json_object_array_get_idx(list, 1)), 4);
	text = json_object_to_json_string_ext(json_object_array_get_idx(list, 1),
					      JSON_C_TO_STRING_PLAIN);
	assert_string_equal(text, "{\"id\":\"i\",\"role\":\"user\",\"content\":\"extra\",\"createdAt\":\"t\"}");
	assert_message(json_object_array_get_idx(list, 2), "user", "after", 5);
	json_object_put(list);
}

/* A writer killed with SIGKILL mid-append (a fatal signal can cut a large
 * write short): whatever it left, the store lists only whole messages and
 * the next append lands cleanly after them. */
static void test_killed_writer_leaves_store_usable(void **state)
{
	enum { BIG = 512 * 1024, ROUNDS = 10 };
	json_object *list;
	size_t n;
	char *text;

	(void)state;
	for (int round = 0; round < ROUNDS; round++) {
		pid_t pid = fork();
		int status;

		assert_true(pid >= 0);
		if (pid == 0) {
			char *big = malloc(BIG);

			if (!big)
				_exit(1);
			memset(big, 'x', BIG);
			for (;;)
				store_append("killed", "user", big, BIG, NULL, NULL, 0);
		}
		usleep(2000 + 1000 * round);
		kill(pid, SIGKILL);
		assert_int_equal(waitpid(pid, &status, 0), pid);
	}
	json_object_put(append_ok("killed", "user", "after", 5));

	list = list_ok("killed");
	n = json_object_array_length(list);
	for (size_t i = 0; i + 1 < n; i++) {
		size_t len;

		field(json_object_array_get_idx(list, i), "content", &len);
		assert_int_equal(len, BIG);
	}
	assert_message(json_object_array_get_idx(list, n - 1), "user", "after", 5);
	text = file_slurp("killed");
	assert_int_equal(count_lines(text), n);
	free(text);
	json_object_put(list);
}

/* ---- concurrency ---- */

struct writer {
	pthread_t thread;
	const char *room;
	int id, count, failures;
};

static void *writer_run(void *arg)
{
	struct writer *w = arg;
	char content[64], err[256];

	for (int i = 0; i < w->count; i++) {
		int n = snprintf(content, sizeof(content), "w%d-%d", w->id, i);

		if (store_append(w->room, "user", content, (size_t)n, NULL, err, sizeof(err)) < 0) {
			fprintf(stderr, "writer %d: %s\n", w->id, err);
			w->failures++;
		}
	}
	return NULL;
}

/* Start `nthreads` writers numbered from first_id; 0 or the failures. */
static int writers_run(const char *room, int first_id, int nthreads, int count)
{
	struct writer w[64];
	int failures = 0;

	if (nthreads > 64)
		return -1;
	for (int t = 0; t < nthreads; t++) {
		w[t] = (struct writer){ .room = room, .id = first_id + t, .count = count };
		if (pthread_create(&w[t].thread, NULL, writer_run, &w[t]) != 0)
			return -1;
	}
	for (int t = 0; t < nthreads; t++) {
		pthread_join(w[t].thread, NULL);
		failures += w[t].failures;
	}
	return failures;
}

/* Every writer's messages are there, whole, in the order it wrote them,
 * and every id is different. */
static void check_writers(const char *room, int nwriters, int count)
{
	json_object *list = list_ok(room);
	size_t total = json_object_array_length(list);
	int next[256] = { 0 };

	assert_true(nwriters <= 256);
	assert_int_equal(total, (size_t)nwriters * (size_t)count);
	for (size_t i = 0; i < total; i++) {
		json_object *m = json_object_array_get_idx(list, i);
		const char *c = field(m, "content", NULL);
		int w, k, used = 0;

		if (sscanf(c, "w%d-%d%n", &w, &k, &used) != 2 || c[used] != '\0')
			fail_msg("message %zu is not whole: \"%s\"", i, c);
		assert_in_range(w, 0, nwriters - 1);
		if (k != next[w])
			fail_msg("writer %d: message %d where %d was due", w, k, next[w]);
		next[w]++;
		for (size_t j = 0; j < i; j++)
			assert_string_not_equal(field(m, "id", NULL),
						field(json_object_array_get_idx(list, j), "id", NULL));
	}
	json_object_put(list);
}

static void test_threads_append_to_one_room(void **state)
{
	(void)state;
	assert_int_equal(writers_run("busy", 0, 8, 50), 0);
	check_writers("busy", 8, 50);
}

static void test_fifty_threads_one_append_each(void **state)
{
	(void)state;
	assert_int_equal(writers_run("crowd", 0, 50, 1), 0);
	check_writers("crowd", 50, 1);
}

/* Four processes with two threads each: flock orders processes as well. */
static void test_processes_append_to_one_room(void **state)
{
	enum { PROCS = 4, THREADS = 2, EACH = 20 };
	pid_t pids[PROCS];

	(void)state;
	for (int p = 0; p < PROCS; p++) {
		pids[p] = fork();
		assert_true(pids[p] >= 0);
		if (pids[p] == 0)
			_exit(writers_run("shared", p * THREADS, THREADS, EACH) == 0 ? 0 : 1);
	}
	for (int p = 0; p < PROCS; p++) {
		int status;

		assert_int_equal(waitpid(pids[p], &status, 0), pids[p]);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
	}
	check_writers("shared", PROCS * THREADS, EACH);
}

struct resetter {
	pthread_t thread;
	int count, failures;
};

static void *resetter_run(void *arg)
{
	struct resetter *r = arg;
	char err[256];

	for (int i = 0; i < r->count; i++) {
		if (store_reset("race", err, sizeof(err)) < 0) {
			fprintf(stderr, "resetter: %s\n", err);
			r->failures++;
		}
		usleep(500);
	}
	return NULL;
}

/* Resets racing appends: no call fails, no record is torn or glued, and an
 * append after the last reset is listed. */
static void test_reset_races_appends(void **state)
{
	struct resetter r = { .count = 20 };
	json_object *list;
	char *text;

	(void)state;
	assert_int_equal(pthread_create(&r.thread, NULL, resetter_run, &r), 0);
	assert_int_equal(writers_run("race", 0, 4, 25), 0);
	pthread_join(r.thread, NULL);
	assert_int_equal(r.failures, 0);

	json_object_put(append_ok("race", "user", "last", 4));
	list = list_ok("race");
	assert_true(json_object_array_length(list) >= 1);
	assert_message(json_object_array_get_idx(list, json_object_array_length(list) - 1),
		       "user", "last", 4);
	text = file_slurp("race");
	assert_int_equal(count_lines(text), json_object_array_length(list));
	free(text);
	json_object_put(list);
}

/* ---- reset and rooms ---- */

static void test_reset(void **state)
{
	char path[PATH_MAX], err[256] = "";
	json_object *list;
	struct stat st;

	(void)state;
	assert_int_equal(store_reset("gone", err, sizeof(err)), 0);	/* nothing there */
	json_object_put(append_ok("gone", "user", "a", 1));
	json_object_put(append_ok("gone", "assistant", "b", 1));
	assert_int_equal(store_reset("gone", err, sizeof(err)), 0);
	assert_string_equal(err, "");

	room_path("gone", path, sizeof(path));
	assert_int_equal(stat(path, &st), -1);		/* nothing left behind */
	list = list_ok("gone");
	assert_int_equal(json_object_array_length(list), 0);
	json_object_put(list);
	assert_int_equal(store_reset("gone", err, sizeof(err)), 0);	/* again: fine */

	json_object_put(append_ok("gone", "user", "again", 5));
	list = list_ok("gone");
	assert_int_equal(json_object_array_length(list), 1);
	assert_message(json_object_array_get_idx(list, 0), "user", "again", 5);
	json_object_put(list);
}

static void test_rooms_are_separate(void **state)
{
	json_object *list;

	(void)state;
	json_object_put(append_ok("room-a", "user", "a1", 2));
	json_object_put(append_ok("room-b", "user", "b1", 2));
	json_object_put(append_ok("room-a", "assistant", "a2", 2));

	list = list_ok("room-a");
	assert_int_equal(json_object_array_length(list), 2);
	assert_message(json_object_array_get_idx(list, 0), "user", "a1", 2);
	assert_message(json_object_array_get_idx(list, 1), "assistant", "a2", 2);
	json_object_put(list);

	assert_int_equal(store_reset("room-a", NULL, 0), 0);
	list = list_ok("room-b");
	assert_int_equal(json_object_array_length(list), 1);
	assert_message(json_object_array_get_idx(list, 0), "user", "b1", 2);
	json_object_put(list);
}

/* ---- errors name the room and the step ---- */

static void test_errors_name_room_and_step(void **state)
{
	char path[PATH_MAX], err[256];
	json_object *msg = (json_object *)1;

	(void)state;
	/* A directory where the room's file should be. */
	room_path("blocked", path, sizeof(path));
	assert_int_equal(mkdir(path, 0700), 0);

	assert_int_equal(store_append("blocked", "user", "x", 1, &msg, err, sizeof(err)), -1);
	assert_string_equal(err, "room blocked: messages: open: Is a directory");
	assert_null(msg);
	assert_null(store_list("blocked", err, sizeof(err)));
	assert_string_equal(err, "room blocked: messages: open: Is a directory");
	assert_int_equal(store_reset("blocked", err, sizeof(err)), -1);
	assert_string_equal(err, "room blocked: messages: open: Is a directory");

	/* Room ids become file names: the store checks them again. */
	assert_int_equal(store_append("../x", "user", "x", 1, NULL, err, sizeof(err)), -1);
	assert_string_equal(err, "messages: invalid room id");
	assert_null(store_list("", err, sizeof(err)));
	assert_string_equal(err, "messages: invalid room id");
	assert_int_equal(store_reset(".hidden", err, sizeof(err)), -1);
}

static void test_init_errors(void **state)
{
	char bad[PATH_MAX + 32], err[512];

	(void)state;
	snprintf(bad, sizeof(bad), "%s/no/such/parent", base);
	assert_int_equal(store_init(bad, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "create: No such file or directory"));
	assert_non_null(strstr(err, bad));
	/* The previous directory stays in use after a failed init. */
	json_object_put(append_ok("still", "user", "ok", 2));
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_append_list_round_trip),
		T(test_list_of_unknown_room_is_empty),
		T(test_first_append_syncs_new_file),
		T(test_torn_tail_is_ignored_then_cut),
		T(test_torn_tail_alone),
		T(test_bad_line_is_skipped),
		T(test_corrupt_text_never_listed),
		T(test_killed_writer_leaves_store_usable),
		T(test_threads_append_to_one_room),
		T(test_fifty_threads_one_append_each),
		T(test_processes_append_to_one_room),
		T(test_reset_races_appends),
		T(test_reset),
		T(test_rooms_are_separate),
		T(test_errors_name_room_and_step),
		T(test_init_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
