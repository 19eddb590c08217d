/* Fuzz target: a request body's way from the FastCGI stream to a validated
 * request, as router.c takes it: http_read_body (chunked reads, with or
 * without CONTENT_LENGTH), the strict JSON pre-lexer and parser
 * (json_parse_strict), then the exec and the messages schemas
 * (validate_exec_request, validate_message_request).
 *
 * Input: byte 0 picks the reader's chunk size (low 4 bits + 1) and whether
 * CONTENT_LENGTH is given (bit 4); the rest is the body.
 *
 * Invariants: json_parse_strict accepts exactly the texts an independent
 * RFC 8259 recogniser (json_oracle.h) accepts, nesting deeper than json-c's
 * limit aside; every answer (error or `details`) is strict JSON in valid
 * UTF-8; every string of a parsed body is valid UTF-8 (keys may carry
 * JSON_KEY_NUL_MARK and nothing else that is not); an accepted request
 * holds what validate.h promises (cmd non-empty and NUL-free, cwd absolute,
 * env strings NUL-free, timeout within its maximum, role a known one). */
#include <stdint.h>
#include <string.h>
#include <json-c/json.h>

#include "fuzz.h"
#include "http.h"
#include "json_strict.h"
#include "json_oracle.h"
#include "validate.h"

#define FUZZ_MAX_BODY (1u << 20)
#define FUZZ_TIMEOUT_MAX 600000
/* json_parse_strict's tokener stops at 512 levels; compare below that. */
#define ORACLE_DEPTH 500

struct body_stream {
	const uint8_t *data;
	size_t len, pos, chunk;
	char content_length[32];
	int with_length;
};

static const char *stream_param(void *ctx, const char *name)
{
	struct body_stream *s = ctx;

	if (s->with_length && strcmp(name, "CONTENT_LENGTH") == 0)
		return s->content_length;
	return NULL;
}

static int stream_read(void *ctx, char *buf, int n)
{
	struct body_stream *s = ctx;
	size_t k = s->len - s->pos;

	if (k > s->chunk)
		k = s->chunk;
	if (k > (size_t)n)
		k = (size_t)n;
	memcpy(buf, s->data + s->pos, k);
	s->pos += k;
	return (int)k;
}

/* What a client would receive: strict JSON, valid UTF-8. */
static void check_answer(json_object *obj, const char *what)
{
	size_t len = 0;
	const char *text = json_write(obj, &len);
	json_object *back = NULL;
	char err[128];

	FUZZ_ASSERT(text, "%s: not serialisable", what);
	FUZZ_ASSERT(fuzz_utf8_valid(text, len), "%s: not UTF-8: %s", what, text);
	FUZZ_ASSERT(json_parse_strict(text, len, &back, err, sizeof(err)) == 0,
		    "%s: not strict JSON (%s): %s", what, err, text);
	json_object_put(back);
}

/* Every string of a parsed body, keys included, is valid UTF-8. */
static void check_strings(json_object *v)
{
	switch (json_object_get_type(v)) {
	case json_type_string:
		FUZZ_ASSERT(fuzz_utf8_valid(json_object_get_string(v),
					    (size_t)json_object_get_string_len(v)),
			    "a parsed string is not UTF-8");
		break;
	case json_type_array:
		for (size_t i = 0; i < json_object_array_length(v); i++)
			check_strings(json_object_array_get_idx(v, i));
		break;
	case json_type_object: {
		json_object_object_foreach(v, key, val) {
			char copy[4096];
			size_t n = strlen(key), k = 0;

			for (size_t i = 0; i < n && k < sizeof(copy); i++)
				if (key[i] != JSON_KEY_NUL_MARK)
					copy[k++] = key[i];
			FUZZ_ASSERT(n >= sizeof(copy) || fuzz_utf8_valid(copy, k),
				    "a parsed key is not UTF-8");
			check_strings(val);
		}
		break;
	}
	default:
		break;
	}
}

static void check_details(json_object *details)
{
	FUZZ_ASSERT(json_object_is_type(details, json_type_object), "details not an object");
	json_object_object_foreach(details, field, list) {
		FUZZ_ASSERT(json_object_is_type(list, json_type_array) &&
			    json_object_array_length(list) > 0,
			    "details.%s is not a non-empty array", field);
		for (size_t i = 0; i < json_object_array_length(list); i++)
			FUZZ_ASSERT(json_object_is_type(json_object_array_get_idx(list, i),
							json_type_string),
				    "details.%s holds a non-string", field);
	}
	check_answer(details, "details");
}

static void check_exec(json_object *body)
{
	struct exec_request ex;
	json_object *details = validate_exec_request(body, FUZZ_TIMEOUT_MAX, &ex);

	if (details) {
		check_details(details);
		json_object_put(details);
		return;
	}
	FUZZ_ASSERT(ex.cmd && ex.cmd_len >= 1 && !memchr(ex.cmd, '\0', ex.cmd_len),
		    "accepted cmd empty or with NUL");
	FUZZ_ASSERT(fuzz_utf8_valid(ex.cmd, ex.cmd_len), "accepted cmd not UTF-8");
	FUZZ_ASSERT(ex.timeout_ms <= FUZZ_TIMEOUT_MAX, "timeout %llu past the maximum",
		    (unsigned long long)ex.timeout_ms);
	FUZZ_ASSERT(!ex.cwd || (ex.cwd[0] == '/'), "accepted cwd not absolute");
	FUZZ_ASSERT(!ex.stdin_data || fuzz_utf8_valid(ex.stdin_data, ex.stdin_len),
		    "accepted stdin not UTF-8");
	if (ex.env) {
		json_object_object_foreach(ex.env, key, val) {
			FUZZ_ASSERT(!strchr(key, JSON_KEY_NUL_MARK), "env key with NUL accepted");
			FUZZ_ASSERT(json_object_is_type(val, json_type_string) &&
				    !memchr(json_object_get_string(val), '\0',
					    (size_t)json_object_get_string_len(val)),
				    "env value not a NUL-free string");
		}
	}
}

static void check_message(json_object *body)
{
	struct message_request m;
	json_object *details = validate_message_request(body, &m);

	if (details) {
		check_details(details);
		json_object_put(details);
		return;
	}
	FUZZ_ASSERT(m.role && (!strcmp(m.role, "user") || !strcmp(m.role, "assistant")),
		    "accepted role %s", m.role ? m.role : "(null)");
	FUZZ_ASSERT(m.content && m.content_len >= 1, "accepted empty content");
	FUZZ_ASSERT(fuzz_utf8_valid(m.content, m.content_len), "accepted content not UTF-8");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct body_stream s = { 0 };
	struct http_input in = { stream_param, stream_read, &s };
	struct response rs = { 0 };
	json_object *body = NULL;
	char *buf = NULL, err[128];
	bool valid, deep;
	size_t len = 0;
	int rc;

	if (size < 1)
		return 0;
	s.chunk = (data[0] & 0x0f) + 1u;
	s.with_length = (data[0] & 0x10) != 0;
	s.data = data + 1;
	s.len = size - 1;
	snprintf(s.content_length, sizeof(s.content_length), "%zu", s.len);

	if (http_read_body(&in, FUZZ_MAX_BODY, &buf, &len, &rs) < 0) {
		check_answer(rs.body, "read error");
		json_object_put(rs.body);
		return 0;
	}
	FUZZ_ASSERT(len == s.len && memcmp(buf, s.data, len) == 0 && buf[len] == '\0',
		    "the body read is not the body sent");
	rc = json_parse_strict(buf, len, &body, err, sizeof(err));
	valid = json_oracle_valid(buf, len, ORACLE_DEPTH, &deep);
	FUZZ_ASSERT(deep || valid == (rc == 0),
		    "json_parse_strict says %s (%s), RFC 8259 says %s", rc == 0 ? "valid" : "invalid",
		    rc == 0 ? "-" : err, valid ? "valid" : "invalid");
	if (rc < 0) {
		response_error(&rs, 400, "invalid JSON: %s", err);
		check_answer(rs.body, "parse error");
		json_object_put(rs.body);
		free(buf);
		return 0;
	}
	free(buf);
	check_strings(body);
	check_exec(body);
	check_message(body);
	json_object_put(body);
	return 0;
}
