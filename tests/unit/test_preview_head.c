/* Unit tests for fcgi-app/preview/preview_head.c: which exposure a preview
 * request names, and the head sent on into the room. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <cmocka.h>

#include "preview_head.h"

#define TOK "abcdefghij012345"

static enum preview_head_result parse(const char *text, const char *domain, struct preview_head *h)
{
	return preview_head_parse(text, strlen(text), domain, h);
}

/* The head as rewritten for the room. */
static const char *rewritten(const char *text, const char *domain)
{
	static char out[PREVIEW_HEAD_MAX + 2];
	struct preview_head h;
	assert_int_equal(parse(text, domain, &h), PREVIEW_HEAD_OK);
	size_t n = preview_head_rewrite(&h, text, NULL, out, sizeof(out));
	assert_true(n > 0);
	out[n] = '\0';
	return out;
}

static void test_path_style(void **state)
{
	(void)state;
	struct preview_head h;
	const char *req = "GET /preview/" TOK "/a/b.js?x=1 HTTP/1.1\r\nHost: h:80\r\n\r\nBODY";
	assert_int_equal(parse(req, NULL, &h), PREVIEW_HEAD_OK);
	assert_string_equal(h.token, TOK);
	assert_int_equal(h.host_style, 0);
	assert_int_equal(h.head_len, strlen(req) - 4);
	assert_string_equal(rewritten(req, NULL),   /* kept: no Connection, the room's keeps too */
			    "GET /a/b.js?x=1 HTTP/1.1\r\nHost: h:80\r\n\r\n");
	assert_string_equal(rewritten("GET /preview/" TOK " HTTP/1.0\r\n\r\n", NULL),
			    "GET / HTTP/1.0\r\n\r\n");
	assert_string_equal(rewritten("GET /preview/" TOK "?q HTTP/1.1\n\n", NULL),
			    "GET /?q HTTP/1.1\n\n");
	assert_string_equal(rewritten("POST /preview/" TOK "/ HTTP/1.1\r\n\r\n", "d.test"),
			    "POST / HTTP/1.1\r\n\r\n");
}

static void test_no_token(void **state)
{
	(void)state;
	struct preview_head h;
	assert_int_equal(parse("GET /preview/ HTTP/1.1\r\n\r\n", NULL, &h), PREVIEW_HEAD_NO_TOKEN);
	assert_int_equal(parse("GET /preview/ABCDEFGHIJ012345/ HTTP/1.1\r\n\r\n", NULL, &h),
			 PREVIEW_HEAD_NO_TOKEN);
	assert_int_equal(parse("GET /preview/" TOK "x/ HTTP/1.1\r\n\r\n", NULL, &h),
			 PREVIEW_HEAD_NO_TOKEN);
	assert_int_equal(parse("GET /other/" TOK "/ HTTP/1.1\r\n\r\n", NULL, &h), PREVIEW_HEAD_NO_TOKEN);
	/* a preview host without a preview_domain configured */
	assert_int_equal(parse("GET / HTTP/1.1\r\nHost: 80-r-" TOK ".d.test\r\n\r\n", NULL, &h),
			 PREVIEW_HEAD_NO_TOKEN);
}

static void test_bad_and_incomplete(void **state)
{
	(void)state;
	struct preview_head h;
	assert_int_equal(parse("GET /preview/" TOK "/ HTTP/1.1\r\nHost: x\r\n", NULL, &h),
			 PREVIEW_HEAD_INCOMPLETE);
	assert_int_equal(parse("", NULL, &h), PREVIEW_HEAD_INCOMPLETE);
	assert_int_equal(parse("GET /x HTTP/2.0\r\n\r\n", NULL, &h), PREVIEW_HEAD_BAD);
	assert_int_equal(parse("GET  /x HTTP/1.1\r\n\r\n", NULL, &h), PREVIEW_HEAD_BAD);
	assert_int_equal(parse("GET /x\r\n\r\n", NULL, &h), PREVIEW_HEAD_BAD);
	assert_int_equal(parse("G(T /x HTTP/1.1\r\n\r\n", NULL, &h), PREVIEW_HEAD_BAD);
	const char nul[] = "GET /x HTTP/1.1\r\nA: \0\r\n\r\n";
	assert_int_equal(preview_head_parse(nul, sizeof(nul) - 1, NULL, &h), PREVIEW_HEAD_BAD);
	/* a bare CR: a line end to some servers (Python's http.server), so a
	 * line hidden behind it would pass unseen */
	assert_int_equal(parse("GET /preview/" TOK "/ HTTP/1.1\r\nX: y\rAuthorization: Bearer api-token\r\n\r\n",
			       NULL, &h), PREVIEW_HEAD_BAD);
	assert_int_equal(parse("GET /preview/" TOK "/\r HTTP/1.1\r\n\r\n", NULL, &h), PREVIEW_HEAD_BAD);
}

static void test_host_style(void **state)
{
	(void)state;
	struct preview_head h;
	const char *req = "GET /app?x HTTP/1.1\r\nUser-Agent: t\r\nhOST:  8000-Room_1-x-" TOK
			  ".Preview.Test:8080 \r\n\r\n";
	assert_int_equal(parse(req, "preview.test", &h), PREVIEW_HEAD_OK);
	assert_int_equal(h.host_style, 1);
	assert_int_equal(h.port, 8000);
	assert_string_equal(h.room, "Room_1-x");
	assert_string_equal(h.token, TOK);
	assert_string_equal(rewritten(req, "preview.test"), req);
	static const char *const bad[] = {
		"0-r-" TOK ".preview.test", "65536-r-" TOK ".preview.test", "080-r-" TOK ".preview.test",
		"80-" TOK ".preview.test", "80--" TOK ".preview.test", "80-r-" TOK "preview.test",
		"80-r-" TOK ".other.test", "80-r-" TOK ".x.preview.test", "a.80-r-" TOK ".preview.test",
		"80-r-ABCDEFGHIJ012345.preview.test", "preview.test", "",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char text[256];
		snprintf(text, sizeof(text), "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", bad[i]);
		assert_int_equal(parse(text, "preview.test", &h), PREVIEW_HEAD_NO_TOKEN);
	}
}

static void test_head_bound(void **state)
{
	(void)state;
	static char big[PREVIEW_HEAD_MAX + 64];
	struct preview_head h;
	memset(big, 'a', sizeof(big));
	memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
	memcpy(big + PREVIEW_HEAD_MAX, "\r\n\r\n", 4);   /* just past the bound */
	assert_int_equal(preview_head_parse(big, sizeof(big), NULL, &h), PREVIEW_HEAD_INCOMPLETE);
	char out[8];
	assert_int_equal(parse("GET /preview/" TOK "/ HTTP/1.1\r\n\r\n", NULL, &h), PREVIEW_HEAD_OK);
	assert_int_equal(preview_head_rewrite(&h, "GET /preview/" TOK "/ HTTP/1.1\r\n\r\n", NULL, out,
					      sizeof(out)), 0);
}

/* Which requests a kept connection may carry, and their head for the room. */
static void test_keep(void **state)
{
	(void)state;
	struct preview_head h;
	assert_int_equal(parse("POST /preview/" TOK "/a HTTP/1.1\r\nHost: h\r\nContent-Length: 12\r\n"
			       "Connection: keep-alive\r\nKeep-Alive: 5\r\nX: y\r\n\r\n", NULL, &h),
			 PREVIEW_HEAD_OK);
	assert_true(h.keep);
	assert_int_equal(h.body_len, 12);
	assert_false(h.head_method);
	assert_string_equal(rewritten("POST /preview/" TOK "/a HTTP/1.1\r\nHost: h\r\nContent-Length: 12\r\n"
				      "Connection: keep-alive\r\nKeep-Alive: 5\r\nX: y\r\n\r\n", NULL),
			    "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 12\r\nX: y\r\n\r\n");
	/* nginx's kept request: no Connection at all; LF alone as line ends */
	assert_string_equal(rewritten("HEAD /preview/" TOK " HTTP/1.1\nHost: h\n\n", NULL),
			    "HEAD / HTTP/1.1\nHost: h\n\n");
	assert_int_equal(parse("HEAD /preview/" TOK " HTTP/1.1\r\n\r\n", NULL, &h), PREVIEW_HEAD_OK);
	assert_true(h.keep && h.head_method);
	assert_int_equal(h.body_len, 0);
	/* passed on as they came, to their close */
	static const char *const not_kept[] = {
		"GET /preview/" TOK "/ HTTP/1.0\r\n\r\n",
		"GET /preview/" TOK "/ HTTP/1.1\r\nConnection: close\r\n\r\n",
		"GET /preview/" TOK "/ HTTP/1.1\r\nConnection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n\r\n",
		"GET /preview/" TOK "/ HTTP/1.1\r\nUpgrade: h2c\r\n\r\n",
		"POST /preview/" TOK "/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
		"POST /preview/" TOK "/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
		"POST /preview/" TOK "/ HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
		"POST /preview/" TOK "/ HTTP/1.1\r\nContent-Length: 1234567890123456789\r\n\r\n",
		"GET /preview/" TOK "/ HTTP/1.1\r\nX: a\r\n folded\r\n\r\n",
		"GET /preview/" TOK "/ HTTP/1.1\r\nX : a\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof(not_kept) / sizeof(*not_kept); i++) {
		assert_int_equal(parse(not_kept[i], NULL, &h), PREVIEW_HEAD_OK);
		assert_false(h.keep);
		assert_int_equal(h.framed, i < 2);   /* the first two: their end is known */
		assert_int_equal(h.body_len, 0);
		/* only the target changed */
		const char *out = rewritten(not_kept[i], NULL);
		size_t m = h.method_len + 1;
		assert_memory_equal(out, not_kept[i], m);
		assert_string_equal(out + m, not_kept[i] + m + strlen("/preview/" TOK));
	}
	/* a kept head at the bound still fits the room's buffer with its line */
	static char big[PREVIEW_HEAD_MAX + 1], out[PREVIEW_HEAD_MAX + PREVIEW_HEAD_GROWTH];
	memset(big, 'a', PREVIEW_HEAD_MAX);
	const char *start = "GET /preview/" TOK " HTTP/1.1\r\nX: ";
	memcpy(big, start, strlen(start));
	memcpy(big + PREVIEW_HEAD_MAX - 4, "\r\n\r\n", 4);
	assert_int_equal(preview_head_parse(big, PREVIEW_HEAD_MAX, NULL, &h), PREVIEW_HEAD_OK);
	assert_true(h.keep);
	size_t n = preview_head_rewrite(&h, big, NULL, out, sizeof(out));
	assert_int_equal(n, PREVIEW_HEAD_MAX + 1 - strlen("/preview/" TOK));
}

/* The API's credential in these tests: "Bearer api-token", the scheme in
 * any case (as auth.c reads it). */
static int is_api_token(void *ctx, const char *value, size_t len)
{
	(void)ctx;
	return len == strlen("Bearer api-token") && strncasecmp(value, "bearer ", 7) == 0 &&
	       memcmp(value + 7, "api-token", 9) == 0;
}

/* The head for the room with the service's credentials left out, as the
 * relay asks: every Cookie for path-style, Authorization when an API token. */
static const char *stripped(const char *text, const char *domain)
{
	static char out[PREVIEW_HEAD_MAX + PREVIEW_HEAD_GROWTH + 1];
	struct preview_head h;
	assert_int_equal(parse(text, domain, &h), PREVIEW_HEAD_OK);
	struct preview_strip strip = { !h.host_style, is_api_token, NULL };
	size_t n = preview_head_rewrite(&h, text, &strip, out, sizeof(out) - 1);
	assert_true(n > 0);
	out[n] = '\0';
	return out;
}

static void test_credentials_stripped(void **state)
{
	(void)state;
	/* a token anywhere in the value: the line goes */
	assert_string_equal(stripped("GET /preview/" TOK "/ HTTP/1.1\r\n"
				     "Authorization: Bearer api-token, Bearer other\r\nX: y\r\n\r\n", NULL),
			    "GET / HTTP/1.1\r\nX: y\r\n\r\n");
	assert_string_equal(stripped("GET /preview/" TOK "/ HTTP/1.1\r\n"
				     "Authorization: Basic eA==,bearer  api-token\r\nX: y\r\n\r\n", NULL),
			    "GET / HTTP/1.1\r\nX: y\r\n\r\n");
	/* path-style: the API token and every cookie go (a "Cookie :" too,
	 * which leaves the head unframed); the app's own Authorization and the
	 * rest stay */
	assert_string_equal(stripped("GET /preview/" TOK "/ HTTP/1.1\r\nHost: h\r\n"
				     "Authorization: Bearer api-token\r\nCookie: a=1\r\nX: y\r\n"
				     "cookie : b=2\r\nAUTHORIZATION:bearer api-token  \r\n\r\n", NULL),
			    "GET / HTTP/1.1\r\nHost: h\r\nX: y\r\n\r\n");
	assert_string_equal(stripped("GET /preview/" TOK "/ HTTP/1.1\r\nCookie: a=1\r\n"
				     "authorization:  bearer api-token\r\nX: y\r\n\r\n", NULL),
			    "GET / HTTP/1.1\r\nX: y\r\n\r\n");
	assert_string_equal(stripped("GET /preview/" TOK "/ HTTP/1.0\r\n"
				     "Authorization: Bearer app-token\r\n"
				     "Authorization: Basic dXNlcjpwYXNz\r\n\r\n", NULL),
			    "GET / HTTP/1.0\r\nAuthorization: Bearer app-token\r\n"
			    "Authorization: Basic dXNlcjpwYXNz\r\n\r\n");
	/* not kept (an upgrade) is stripped all the same, LF line ends too */
	assert_string_equal(stripped("GET /preview/" TOK "/ws HTTP/1.1\nUpgrade: websocket\n"
				     "Connection: Upgrade\nCookie: s=1\nAuthorization: Bearer api-token\n\n",
				     NULL),
			    "GET /ws HTTP/1.1\nUpgrade: websocket\nConnection: Upgrade\n\n");
	/* a field folded over lines goes whole with its continuation; a
	 * folded Authorization goes whatever it holds */
	assert_string_equal(stripped("GET /preview/" TOK "/ HTTP/1.1\r\nCookie: a=1\r\n b=2\r\n"
				     "Authorization: Bearer\r\n api-token\r\nX: y\r\n\r\n", NULL),
			    "GET / HTTP/1.1\r\nX: y\r\n\r\n");
	/* host-style: the room's own origin keeps its cookies, never the token */
	assert_string_equal(stripped("GET /x HTTP/1.1\r\nHost: 8000-r1-" TOK ".preview.test\r\n"
				     "Cookie: a=1\r\nAuthorization: Bearer api-token\r\n\r\n",
				     "preview.test"),
			    "GET /x HTTP/1.1\r\nHost: 8000-r1-" TOK ".preview.test\r\nCookie: a=1\r\n\r\n");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_path_style),
		cmocka_unit_test(test_no_token),
		cmocka_unit_test(test_bad_and_incomplete),
		cmocka_unit_test(test_host_style),
		cmocka_unit_test(test_head_bound),
		cmocka_unit_test(test_keep),
		cmocka_unit_test(test_credentials_stripped),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
