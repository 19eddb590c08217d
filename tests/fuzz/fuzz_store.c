/* Fuzz target: the message store's recovery of a room's log from disk.
 *
 * Input: byte 0 says whether an append follows (bit 0); the rest is the
 * room's file, <dir>/<room>.jsonl, exactly as a crash or a bad disk could
 * leave it.  Each run writes the file into a private directory (on
 * /dev/shm when there is one, so fsync costs nothing), lists the room
 * (store_list), maybe appends (store_append, which cuts a torn tail) and
 * lists again, then removes the file (store_reset).
 *
 * Invariants: the list is an array of objects with string id, role,
 * content and createdAt, and it reaches the client as strict JSON in valid
 * UTF-8; what an export carries is whole lines the import takes, no more
 * than are listed; after an append the list is the old one plus the new message, last;
 * after the reset the room lists empty. */
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <json-c/json.h>

#include "fuzz.h"
#include "http.h"
#include "json_strict.h"
#include "store.h"

#define ROOM "fuzzroom"
static char base[256], dir[300], file[400];

static void cleanup(void)
{
	unlink(file);
	rmdir(dir);
	rmdir(base);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");
	char err[256];

	snprintf(base, sizeof(base), "%s/roombox-fuzz-store-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	FUZZ_ASSERT(mkdtemp(base), "mkdtemp %s", base);
	snprintf(dir, sizeof(dir), "%s/messages", base);
	snprintf(file, sizeof(file), "%s/" ROOM ".jsonl", dir);
	FUZZ_ASSERT(store_init(dir, err, sizeof(err)) == 0, "store_init: %s", err);
	atexit(cleanup);
	return 0;
}

static void write_file(const uint8_t *data, size_t size)
{
	int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	FUZZ_ASSERT(fd >= 0, "create %s", file);
	FUZZ_ASSERT(write(fd, data, size) == (ssize_t)size, "write %s", file);
	close(fd);
}

/* What GET .../messages would send: checked field by field and as text. */
static size_t check_list(json_object *list)
{
	static const char *const keys[] = { "id", "role", "content", "createdAt" };
	json_object *back = NULL;
	const char *text;
	size_t n, len = 0;
	char err[128];

	FUZZ_ASSERT(json_object_is_type(list, json_type_array), "list not an array");
	n = json_object_array_length(list);
	for (size_t i = 0; i < n; i++) {
		json_object *m = json_object_array_get_idx(list, i), *v;

		FUZZ_ASSERT(json_object_is_type(m, json_type_object), "message %zu not an object", i);
		for (size_t k = 0; k < 4; k++)
			FUZZ_ASSERT(json_object_object_get_ex(m, keys[k], &v) &&
				    json_object_is_type(v, json_type_string),
				    "message %zu: no string %s", i, keys[k]);
	}
	text = json_write(list, &len);
	FUZZ_ASSERT(text, "list not serialisable");
	FUZZ_ASSERT(fuzz_utf8_valid(text, len), "list not UTF-8: %s", text);
	FUZZ_ASSERT(json_parse_strict(text, len, &back, err, sizeof(err)) == 0,
		    "list not strict JSON (%s): %s", err, text);
	json_object_put(back);
	return n;
}

static bool same_message(json_object *a, json_object *b)
{
	return json_object_equal(a, b) == 1;
}

/* What an export carries (store_read_raw): whole lines, each a message
 * by the import's own check, and never more than the room lists. */
static void check_export(size_t listed)
{
	char err[256], *buf = NULL;
	size_t len = 0, lines = 0;

	FUZZ_ASSERT(store_read_raw(ROOM, STORE_MAX_BYTES, &buf, &len, err, sizeof(err)) == 0,
		    "store_read_raw: %s", err);
	for (size_t at = 0; at < len; lines++) {
		const char *nl = memchr(buf + at, '\n', len - at);
		FUZZ_ASSERT(nl, "an exported line without its newline");
		FUZZ_ASSERT(store_line_is_message(buf + at, (size_t)(nl - (buf + at))),
			    "an exported line the import refuses");
		at = (size_t)(nl - buf) + 1;
	}
	FUZZ_ASSERT(lines <= listed, "%zu lines exported, %zu messages listed", lines, listed);
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char content[] = "fuzz \"message\"\n\xE2\x82\xAC";
	json_object *before, *after, *msg = NULL;
	char err[256];
	size_t n;

	if (size < 1)
		return 0;
	write_file(data + 1, size - 1);
	before = store_list(ROOM, err, sizeof(err));
	FUZZ_ASSERT(before, "store_list: %s", err);
	n = check_list(before);
	check_export(n);
	if (data[0] & 1) {
		FUZZ_ASSERT(store_append(ROOM, "user", content, sizeof(content) - 1,
					 &msg, err, sizeof(err)) == 0,
			    "store_append: %s", err);
		after = store_list(ROOM, err, sizeof(err));
		FUZZ_ASSERT(after, "store_list after append: %s", err);
		FUZZ_ASSERT(check_list(after) == n + 1, "append did not add exactly one message");
		for (size_t i = 0; i < n; i++)
			FUZZ_ASSERT(same_message(json_object_array_get_idx(before, i),
						 json_object_array_get_idx(after, i)),
				    "message %zu changed by an append", i);
		FUZZ_ASSERT(same_message(json_object_array_get_idx(after, n), msg),
			    "the appended message is not listed last");
		json_object_put(after);
		json_object_put(msg);
	}
	json_object_put(before);
	FUZZ_ASSERT(store_reset(ROOM, err, sizeof(err)) == 0, "store_reset: %s", err);
	after = store_list(ROOM, err, sizeof(err));
	FUZZ_ASSERT(after && json_object_array_length(after) == 0, "room not empty after reset");
	json_object_put(after);
	return 0;
}
