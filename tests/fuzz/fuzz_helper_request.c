/* Fuzz target: the setuid helper's request reader (sandbox-helper/request.c
 * and the minijson reader under it), on any bytes.
 *
 * Input: what a caller writes on the helper's stdin.
 *
 * Invariants:
 *   - request_read from a descriptor holding the input takes it whole when
 *     it is at most helper_request_max(max_body) bytes (NUL-terminated
 *     after it), and refuses it with "request larger than N bytes" when
 *     it is longer;
 *   - request_parse answers a root object or NULL with a message that says
 *     why ("request is not a JSON object...", "request too complex: ...");
 *   - a parsed request written back with the minijson writer parses again
 *     to the same document (types, strings byte for byte with their
 *     lengths, integers, member order), so what the helper acts on is what
 *     the caller sent;
 *   - request_exec_parse answers NULL or "invalid"/"failed" with a message;
 *     when it accepts, every field it hands on is what the document holds
 *     and within its bounds (cmd non-empty, timeout in 1..exec_timeout_max,
 *     env all strings with non-empty names, cwd absolute).
 */
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "config.h"
#include "fuzz.h"
#include "protocol.h"
#include "request.h"
#include "roomid.h"

#define FUZZ_MAX_BODY 4096   /* small, so that inputs cross the limit */

static void check_read(const uint8_t *data, size_t size)
{
	static int fd = -1;
	char err[256] = "", *buf;
	size_t len, limit = (size_t)helper_request_max(FUZZ_MAX_BODY);

	if (fd < 0)
		fd = memfd_create("fuzz-request", 0);
	FUZZ_ASSERT(fd >= 0, "memfd_create");
	FUZZ_ASSERT(ftruncate(fd, 0) == 0 && pwrite(fd, data, size, 0) == (ssize_t)size, "memfd write");
	FUZZ_ASSERT(lseek(fd, 0, SEEK_SET) == 0, "lseek");
	int rc = request_read(fd, FUZZ_MAX_BODY, &buf, &len, err, sizeof(err));
	if (size > limit) {
		char want[64];
		snprintf(want, sizeof(want), "request larger than %zu bytes", limit);
		FUZZ_ASSERT(rc == -1 && strcmp(err, want) == 0, "%zu bytes: rc %d, '%s'", size, rc, err);
		return;
	}
	FUZZ_ASSERT(rc == 0, "%zu bytes refused: %s", size, err);
	FUZZ_ASSERT(len == size && memcmp(buf, data, size) == 0 && buf[len] == '\0',
		    "read back %zu of %zu bytes", len, size);
	free(buf);
}

/* The writer's view of a parsed value (numbers that are not exact
 * integers are left out: their text is not kept). */
static void write_value(struct mj_writer *w, const struct mj_value *v)
{
	switch (v->type) {
	case MJ_NULL: mjw_null(w); break;
	case MJ_BOOL: mjw_bool(w, v->boolean); break;
	case MJ_NUMBER:
		if (v->is_int)
			mjw_int(w, v->integer);
		else
			mjw_null(w);
		break;
	case MJ_STRING: mjw_string(w, v->str, v->len); break;
	case MJ_ARRAY:
	case MJ_OBJECT:
		v->type == MJ_ARRAY ? mjw_array_begin(w) : mjw_object_begin(w);
		for (size_t i = 0; i < v->len; i++) {
			if (v->type == MJ_OBJECT)
				mjw_key(w, v->members[i].key);
			write_value(w, &v->members[i].value);
		}
		v->type == MJ_ARRAY ? mjw_array_end(w) : mjw_object_end(w);
		break;
	}
}

/* Keys are written as C strings (mjw_key): compare up to a NUL in them. */
static void same_value(const struct mj_value *a, const struct mj_value *b)
{
	if (a->type == MJ_NUMBER && !a->is_int) {
		FUZZ_ASSERT(b->type == MJ_NULL, "number became %d", b->type);
		return;
	}
	FUZZ_ASSERT(a->type == b->type, "type %d became %d", a->type, b->type);
	switch (a->type) {
	case MJ_BOOL: FUZZ_ASSERT(a->boolean == b->boolean, "bool"); break;
	case MJ_NUMBER: FUZZ_ASSERT(b->is_int && a->integer == b->integer, "integer"); break;
	case MJ_STRING:
		FUZZ_ASSERT(a->len == b->len && memcmp(a->str, b->str, a->len) == 0 &&
			    a->str[a->len] == '\0', "string of %zu bytes", a->len);
		break;
	case MJ_ARRAY:
	case MJ_OBJECT:
		FUZZ_ASSERT(a->len == b->len, "%zu members became %zu", a->len, b->len);
		for (size_t i = 0; i < a->len; i++) {
			if (a->type == MJ_OBJECT)
				FUZZ_ASSERT(strcmp(a->members[i].key, b->members[i].key) == 0 &&
					    strlen(a->members[i].key) <= a->members[i].key_len,
					    "key %zu", i);
			else
				FUZZ_ASSERT(!a->members[i].key && !b->members[i].key, "array key");
			same_value(&a->members[i].value, &b->members[i].value);
		}
		break;
	default:
		break;
	}
}

static void check_round_trip(const struct mj_value *req)
{
	struct mj_writer w;
	struct mj_doc *again;
	char err[256];
	size_t len;

	mjw_init(&w);
	write_value(&w, req);
	char *text = mjw_finish(&w, &len);
	FUZZ_ASSERT(text, "a parsed request could not be written back");
	const struct mj_value *back = request_parse(text, len, &again, err, sizeof(err));
	FUZZ_ASSERT(back, "written back, it does not parse: %s: %.200s", err, text);
	same_value(req, back);
	mj_free(again);
	free(text);
	mjw_free(&w);
}

static void check_exec(const struct mj_value *req)
{
	struct config cfg;
	struct exec_order q;
	char err[512] = "";

	config_defaults(&cfg);
	const char *code = request_exec_parse(req, &cfg, &q, err, sizeof(err));
	if (code) {
		FUZZ_ASSERT((!strcmp(code, "invalid") || !strcmp(code, "failed")) && err[0],
			    "refused with code '%s', message '%s'", code, err);
		return;
	}
	FUZZ_ASSERT(q.cmd && *q.cmd && q.cmd == mj_get_str(req, "cmd"), "cmd");
	FUZZ_ASSERT(q.timeout_ms >= 1 && q.timeout_ms <= cfg.exec_timeout_max_ms,
		    "timeout %llu", (unsigned long long)q.timeout_ms);
	FUZZ_ASSERT(!q.cwd || q.cwd[0] == '/', "cwd '%s'", q.cwd);
	if (q.env) {
		FUZZ_ASSERT(q.env->type == MJ_OBJECT, "env type");
		for (size_t i = 0; i < q.env->len; i++)
			FUZZ_ASSERT(q.env->members[i].value.type == MJ_STRING &&
				    q.env->members[i].key_len > 0, "env member %zu", i);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[256];
	struct mj_doc *doc;

	check_read(data, size);
	memset(err, 'x', sizeof(err));
	const struct mj_value *req = request_parse((const char *)data, size, &doc, err, sizeof(err));
	if (!req) {
		FUZZ_ASSERT(!doc, "a document with no request");
		FUZZ_ASSERT(memchr(err, '\0', sizeof(err)), "error text not terminated");
		FUZZ_ASSERT(!strncmp(err, "request is not a JSON object", 28) ||
			    !strncmp(err, "request too complex: ", 21), "refused with '%s'", err);
		return 0;
	}
	FUZZ_ASSERT(req->type == MJ_OBJECT, "root of type %d", req->type);
	check_round_trip(req);
	/* what main.c looks at before a verb runs; an exec's fields are
	 * checked whatever "op" says (they are read the same way) */
	const char *room = mj_get_str(req, "room");
	if (room)
		FUZZ_ASSERT(!room_id_valid(room) || (strlen(room) <= ROOM_ID_MAX && room[0] != '.'),
			    "room id '%s' accepted", room);
	check_exec(req);
	mj_free(doc);
	return 0;
}
