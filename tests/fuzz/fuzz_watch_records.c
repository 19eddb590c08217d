/* libFuzzer target: the watch tool's records (fcgi-app/files/watch_records.c),
 * bytes from a process in a room that its root may have taken over.
 *
 * Input: any bytes, fed in pieces whose size the first byte picks, after
 * the tool's "ok" line.  Every event is a JSON object whose type is one of
 * the six, whose paths are valid UTF-8 (with the exact bytes in base64
 * beside one that was not), whose isDir is a boolean; nothing is read
 * outside the input and the parser's buffer. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fuzz.h"
#include "watch_records.h"

static size_t events;

static void check(void *ctx, json_object *ev)
{
	(void)ctx;
	events++;
	FUZZ_ASSERT(json_object_is_type(ev, json_type_object), "not an object");
	json_object *t, *v;
	FUZZ_ASSERT(json_object_object_get_ex(ev, "type", &t), "no type");
	const char *type = json_object_get_string(t);
	bool known = false;
	for (const char *const *k = (const char *const[]){ "create", "modify", "delete", "move", "overflow", NULL }; *k; k++)
		known |= !strcmp(type, *k);
	FUZZ_ASSERT(known, "type %s", type);
	if (!strcmp(type, "overflow")) {
		FUZZ_ASSERT(json_object_object_length(ev) == 1, "overflow with more");
		return;
	}
	FUZZ_ASSERT(json_object_object_get_ex(ev, "isDir", &v) && json_object_is_type(v, json_type_boolean), "isDir");
	const char *keys[] = { "path", "to" };
	for (int i = 0; i < 2; i++) {
		if (!json_object_object_get_ex(ev, keys[i], &v)) {
			FUZZ_ASSERT(i == 1 && strcmp(type, "move"), "%s missing", keys[i]);
			continue;
		}
		FUZZ_ASSERT(fuzz_utf8_valid(json_object_get_string(v), (size_t)json_object_get_string_len(v)),
			    "%s not UTF-8", keys[i]);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct watch_records p;
	if (size < 1)
		return 0;
	size_t chunk = 1 + data[0] % 97;
	memset(&p, 0, sizeof(p));
	watch_records_feed(&p, "ok\n", 3, check, NULL);
	FUZZ_ASSERT(p.started, "ok not taken");
	for (size_t off = 1; off < size; off += chunk) {
		size_t n = size - off < chunk ? size - off : chunk;
		watch_records_feed(&p, (const char *)data + off, n, check, NULL);
		FUZZ_ASSERT(p.len <= sizeof(p.rec), "held %zu", p.len);
	}
	return 0;
}
