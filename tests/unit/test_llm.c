/* Unit tests for fcgi-app/messages/llm_stream.c: the model's answer, streamed
 * (server-sent events) or whole (one JSON object), read as untrusted
 * bytes, in pieces of any size. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "llm.h"
#include "llm_stream.h"

/* What the token callback saw, joined, and how many calls. */
struct seen {
	char text[4096];
	size_t len;
	int calls;
};

static void on_token(void *ctx, const char *s, size_t n)
{
	struct seen *seen = ctx;

	assert_true(seen->len + n < sizeof(seen->text));
	memcpy(seen->text + seen->len, s, n);
	seen->len += n;
	seen->text[seen->len] = '\0';
	seen->calls++;
}

/* Feed `s` in pieces of `step` bytes (0: all at once), then finish. */
static int parse(enum llm_format f, const char *s, size_t len, size_t step,
		 struct llm_parser *p, struct seen *seen)
{
	size_t i;

	memset(seen, 0, sizeof(*seen));
	llm_parser_init(p, f, on_token, seen);
	if (step == 0)
		step = len ? len : 1;
	for (i = 0; i < len; i += step)
		if (llm_parser_feed(p, s + i, len - i < step ? len - i : step) < 0)
			return -1;
	return llm_parser_finish(p);
}

#define CHUNK(c) "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" c "\"}}]}\n\n"
#define ROLE "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\n\n"
#define FINISH "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
#define DONE "data: [DONE]\n\n"

static const char seed_stream[] =
	ROLE CHUNK("I'll create the file for you.\\n") CHUNK("<run>echo 'Hello World'")
	CHUNK(" > hello.txt</run>") FINISH DONE;
static const char seed_reply[] =
	"I'll create the file for you.\n<run>echo 'Hello World' > hello.txt</run>";

static void expect_ok(enum llm_format f, const char *s, size_t step, const char *want)
{
	struct llm_parser p;
	struct seen seen;

	if (parse(f, s, strlen(s), step, &p, &seen) != 0)
		fail_msg("refused (step %zu): %s", step, p.error);
	assert_string_equal(p.text, want);
	assert_int_equal(p.text_len, strlen(want));
	assert_string_equal(seen.text, want);
	llm_parser_free(&p);
}

static void expect_refused(enum llm_format f, const char *s, size_t len, const char *why)
{
	struct llm_parser p;
	struct seen seen;

	assert_int_equal(parse(f, s, len, 0, &p, &seen), -1);
	assert_string_equal(p.error, why);
	/* once refused, always refused */
	assert_int_equal(llm_parser_feed(&p, "x", 1), -1);
	assert_int_equal(llm_parser_finish(&p), -1);
	llm_parser_free(&p);
}

/* ---- streamed ---- */

static void test_stream_gives_tokens_as_they_come(void **state)
{
	struct llm_parser p;
	struct seen seen = { 0 };

	(void)state;
	llm_parser_init(&p, LLM_SSE, on_token, &seen);
	assert_int_equal(llm_parser_feed(&p, ROLE CHUNK("Hel"), strlen(ROLE CHUNK("Hel"))), 0);
	assert_string_equal(seen.text, "Hel");
	assert_int_equal(seen.calls, 1);
	/* half an event: nothing yet */
	assert_int_equal(llm_parser_feed(&p, "data: {\"choices\":[{\"delta\":{\"content\":\"lo\"}}]}\n", 47), 0);
	assert_int_equal(seen.calls, 1);
	assert_int_equal(llm_parser_feed(&p, "\n", 1), 0);
	assert_string_equal(seen.text, "Hello");
	assert_int_equal(llm_parser_feed(&p, DONE, strlen(DONE)), 0);
	assert_int_equal(llm_parser_finish(&p), 0);
	assert_string_equal(p.text, "Hello");
	llm_parser_free(&p);
}

static void test_stream_in_pieces_of_every_size(void **state)
{
	(void)state;
	for (size_t step = 1; step <= 64; step++)
		expect_ok(LLM_SSE, seed_stream, step, seed_reply);
	expect_ok(LLM_SSE, seed_stream, 0, seed_reply);
}

static void test_stream_line_endings(void **state)
{
	static const char crlf[] =
		"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\r\n\r\n"
		"data: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\r\r"
		"data: [DONE]\r\n\r\n";

	(void)state;
	for (size_t step = 1; step < sizeof(crlf); step++)
		expect_ok(LLM_SSE, crlf, step, "ab");
}

static void test_stream_comments_fields_and_multiline_data(void **state)
{
	(void)state;
	expect_ok(LLM_SSE,
		  ": keep-alive\n\n"
		  "event: message\nid: 7\nretry: 100\n"
		  "data:{\"choices\":[{\"delta\":\n"
		  "data: {\"content\":\"x\\ny\"}}]}\n\n"
		  "data: [DONE]\n\n", 0, "x\ny");
}

static void test_stream_end_without_done(void **state)
{
	static const char cut[] = ROLE CHUNK("half a comm");

	(void)state;
	/* a finish_reason is enough: not every server sends [DONE] */
	expect_ok(LLM_SSE, CHUNK("ok") FINISH, 0, "ok");
	/* the last event may lack its blank line */
	expect_ok(LLM_SSE, CHUNK("ok") "data: [DONE]", 0, "ok");
	expect_refused(LLM_SSE, cut, strlen(cut), "the stream ended before [DONE]");
	expect_refused(LLM_SSE, "", 0, "the stream ended before [DONE]");
}

static void test_stream_after_done_is_ignored(void **state)
{
	(void)state;
	expect_ok(LLM_SSE, CHUNK("a") DONE CHUNK("b") "data: not json\n\n", 0, "a");
}

static void test_stream_usage_chunk_and_null_content(void **state)
{
	(void)state;
	expect_ok(LLM_SSE,
		  "data: {\"choices\":[{\"delta\":{\"content\":null}}]}\n\n"
		  CHUNK("z")
		  "data: {\"choices\":[],\"usage\":{\"total_tokens\":3}}\n\n" DONE, 0, "z");
	/* a reply of no text at all is a reply */
	expect_ok(LLM_SSE, ROLE FINISH DONE, 0, "");
}

static void test_stream_nonsense_is_refused(void **state)
{
	static const char *const bad[][2] = {
		{ "data: hello\n\n", "answer is not JSON: unexpected character" },
		{ "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]} x\n\n",
		  "answer is not JSON: unexpected character" },
		{ "data: {\"choices\":\n\n", "answer is not JSON: unexpected end of data" },
		{ "data: [1,2]\n\n", "answer is not a JSON object" },
		{ "data: {\"id\":1}\n\n", "answer is malformed: no \"choices\" array" },
		{ "data: {\"choices\":{}}\n\n", "answer is malformed: no \"choices\" array" },
		{ "data: {\"choices\":[7]}\n\n", "answer is malformed: choices[0] is not an object" },
		{ "data: {\"choices\":[{\"delta\":5}]}\n\n",
		  "answer is malformed: choices[0].delta is not an object" },
		{ "data: {\"choices\":[{\"delta\":{\"content\":5}}]}\n\n",
		  "answer is malformed: choices[0].delta.content is not a string" },
		{ "data: {\"error\":{\"message\":\"model not found\"}}\n\n",
		  "the model answered an error: model not found" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_refused(LLM_SSE, bad[i][0], strlen(bad[i][0]), bad[i][1]);
}

static void test_stream_bounds(void **state)
{
	size_t big = 2 * LLM_LINE_MAX;
	char *s = malloc(big);
	struct llm_parser p;
	struct seen seen;

	(void)state;
	assert_non_null(s);
	/* one endless line */
	memset(s, 'a', big);
	memcpy(s, "data: ", 6);
	expect_refused(LLM_SSE, s, big, "stream line longer than 256 KiB");
	/* many data lines of 1000 bytes making one endless event */
	for (size_t i = 0; i + 1007 <= big; i += 1007) {
		memcpy(s + i, "data: ", 6);
		memset(s + i + 6, 'b', 1000);
		s[i + 1006] = '\n';
	}
	expect_refused(LLM_SSE, s, big - big % 1007, "stream event larger than 256 KiB");
	free(s);

	/* a reply that grows past LLM_REPLY_MAX, chunk by chunk */
	{
		char chunk[8300];
		char text[8193];
		size_t i, fed = 0;
		int rc = 0;

		memset(text, 'x', 8192);
		text[8192] = '\0';
		snprintf(chunk, sizeof(chunk), CHUNK("%s"), text);
		memset(&seen, 0, sizeof(seen));
		llm_parser_init(&p, LLM_SSE, NULL, NULL);
		for (i = 0; rc == 0 && i < LLM_REPLY_MAX / 8192 + 2; i++) {
			rc = llm_parser_feed(&p, chunk, strlen(chunk));
			fed += rc == 0 ? 8192 : 0;
		}
		assert_int_equal(rc, -1);
		assert_int_equal(fed, LLM_REPLY_MAX);
		assert_string_equal(p.error, "reply longer than 1 MiB, or out of memory");
		llm_parser_free(&p);
	}
}

static void test_stream_keeps_nul_and_utf8_bytes(void **state)
{
	static const char s[] = CHUNK("a\\u0000b \\u00e9 \xf0\x9f\x98\x80") DONE;
	struct llm_parser p;
	struct seen seen;

	(void)state;
	assert_int_equal(parse(LLM_SSE, s, strlen(s), 0, &p, &seen), 0);
	assert_int_equal(p.text_len, 11);
	assert_memory_equal(p.text, "a\0b \xc3\xa9 \xf0\x9f\x98\x80", 11);
	llm_parser_free(&p);
}

/* ---- whole ---- */

static void test_json_answer(void **state)
{
	static const char s[] =
		"{\"id\":\"c1\",\"object\":\"chat.completion\",\"choices\":[{\"index\":0,"
		"\"message\":{\"role\":\"assistant\",\"content\":\"I'll create the file for you.\\n"
		"<run>echo 'Hello World' > hello.txt</run>\"},\"finish_reason\":\"stop\"}]}\n";

	(void)state;
	for (size_t step = 1; step < 40; step += 7)
		expect_ok(LLM_JSON, s, step, seed_reply);
	expect_ok(LLM_JSON, "{\"choices\":[{\"message\":{\"content\":\"\"}}]}", 0, "");
}

static void test_json_nonsense_is_refused(void **state)
{
	static const char *const bad[][2] = {
		{ "", "answer is not JSON: unexpected end of data" },
		{ "<html>502 Bad Gateway</html>", "answer is not JSON: unexpected character" },
		{ "{\"choices\":[]} trailing", "answer is not JSON: unexpected character" },
		{ "\"text\"", "answer is not a JSON object" },
		{ "{}", "answer is malformed: no \"choices\" array" },
		{ "{\"choices\":[]}", "answer is malformed: \"choices\" is empty" },
		{ "{\"choices\":[{}]}", "answer is malformed: no choices[0].message" },
		{ "{\"choices\":[{\"message\":{\"content\":null}}]}",
		  "answer is malformed: choices[0].message has no content" },
		{ "{\"choices\":[{\"message\":{\"content\":[1]}}]}",
		  "answer is malformed: choices[0].message.content is not a string" },
		{ "{\"error\":\"overloaded\"}", "the model answered an error: overloaded" },
		{ "data: {\"choices\":[]}\n\n", "answer is not JSON: unexpected character" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_refused(LLM_JSON, bad[i][0], strlen(bad[i][0]), bad[i][1]);
}

static void test_json_bounds(void **state)
{
	size_t big = LLM_BODY_MAX + 1;
	char *s = malloc(big);
	char *deep = malloc(2 * LLM_JSON_DEPTH + 64);
	size_t n = 0;

	(void)state;
	assert_non_null(s);
	memset(s, ' ', big);
	expect_refused(LLM_JSON, s, big, "answer larger than 4 MiB");
	free(s);
	/* nesting past the tokener's depth */
	assert_non_null(deep);
	for (int i = 0; i < LLM_JSON_DEPTH + 2; i++)
		deep[n++] = '[';
	expect_refused(LLM_JSON, deep, n, "answer is not JSON: nesting too deep");
	free(deep);
}

/* ---- error answers ---- */

static void test_error_text(void **state)
{
	char out[64];

	(void)state;
	llm_error_text("{\"error\":{\"message\":\"Incorrect API key\",\"type\":\"x\"}}", 52, out, sizeof(out));
	assert_string_equal(out, "Incorrect API key");
	llm_error_text("{\"error\":\"model 'x' not found\"}", 31, out, sizeof(out));
	assert_string_equal(out, "model 'x' not found");
	llm_error_text("Bad\tGateway\n\x01\xc3\xa9", 15, out, sizeof(out));
	assert_string_equal(out, "Bad Gateway ???");
	llm_error_text("", 0, out, sizeof(out));
	assert_string_equal(out, "");
	llm_error_text("0123456789", 10, out, 5);
	assert_string_equal(out, "0123");
}

/* The key never leaves in an error, whatever its length and whatever it
 * looks like, and the text never grows (it is the caller's buffer). */
static void test_key_scrubbed(void **state)
{
	static const struct { const char *text, *key, *want; } cases[] = {
		{ "bad key sk-secret-1 (sk-secret-1)", "sk-secret-1", "bad key [key] ([key])" },
		{ "abcd abcdabcd!", "abcd", "**** ********!" },
		/* keys the replacement itself holds: replaced once, no endless loop */
		{ "x [key] y", "[key]", "x [key] y" },
		{ "k key] k", "key]", "k **** k" },
		{ "kkkkk", "k", "*****" },
		{ "nothing here", "", "nothing here" },
		{ "nothing here", NULL, "nothing here" },
	};
	char s[64];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(s, sizeof(s), "%s", cases[i].text);
		llm_scrub_key(s, cases[i].key);
		assert_string_equal(s, cases[i].want);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stream_gives_tokens_as_they_come),
		cmocka_unit_test(test_stream_in_pieces_of_every_size),
		cmocka_unit_test(test_stream_line_endings),
		cmocka_unit_test(test_stream_comments_fields_and_multiline_data),
		cmocka_unit_test(test_stream_end_without_done),
		cmocka_unit_test(test_stream_after_done_is_ignored),
		cmocka_unit_test(test_stream_usage_chunk_and_null_content),
		cmocka_unit_test(test_stream_nonsense_is_refused),
		cmocka_unit_test(test_stream_bounds),
		cmocka_unit_test(test_stream_keeps_nul_and_utf8_bytes),
		cmocka_unit_test(test_json_answer),
		cmocka_unit_test(test_json_nonsense_is_refused),
		cmocka_unit_test(test_json_bounds),
		cmocka_unit_test(test_error_text),
		cmocka_unit_test(test_key_scrubbed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
