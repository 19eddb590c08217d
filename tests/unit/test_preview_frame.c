/* Unit tests for fcgi-app/preview/preview_frame.c: where a room server's answer
 * ends, and the head the web server gets (a kept connection to nginx is
 * reused only after an answer whose end the relay found itself). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "http_lex.h"
#include "preview_frame.h"

#define CAP 4096
static char buf[CAP];
static size_t len, head;
static struct frame fr;

/* frame_head on text (a kept exchange unless may_keep is false). */
static int parse(const char *text, bool head_request, bool may_keep)
{
	len = strlen(text);
	memcpy(buf, text, len);
	memset(&fr, 0xab, sizeof(fr));   /* frame_head must set every field */
	int rc = frame_head(buf, &len, CAP, head_request, may_keep, &fr, &head);
	buf[len] = '\0';
	return rc;
}

static void test_content_length_kept_and_hop_fields_dropped(void **state)
{
	(void)state;
	assert_int_equal(parse("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 5\r\n"
			       "Keep-Alive: timeout=5\r\nX-A: 1\r\n\r\nhel", false, true), 1);
	assert_string_equal(buf, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: 1\r\n\r\nhel");
	assert_int_equal(head, strlen("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: 1\r\n\r\n"));
	assert_int_equal(fr.end, FRAME_LENGTH);
	assert_true(fr.keep);
	assert_false(fr.done);
	assert_int_equal(fr.status, 200);
	/* three bytes came with the head, two more end it, the rest is not its own */
	assert_int_equal(frame_body(&fr, buf + head, 3), 3);
	assert_false(fr.done);
	assert_int_equal(frame_body(&fr, "loHTTP/1.1 200 OK", 17), 2);
	assert_true(fr.done);
	assert_int_equal(frame_body(&fr, "more", 4), 0);
}

/* Whether the room's server keeps its connection after the answer, for
 * the relay to send the exposure's next request on it. */
static void test_room_connection_reuse(void **state)
{
	(void)state;
	assert_int_equal(parse("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", false, true), 1);
	assert_true(fr.reuse);
	assert_int_equal(parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", false, false), 1);
	assert_true(fr.reuse);   /* whatever the web server's side */
	assert_int_equal(parse("HTTP/1.1 204 No Content\r\nConnection: keep-alive\r\n\r\n", false, true), 1);
	assert_true(fr.reuse);
	static const char *const not_reused[] = {
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n",
		"HTTP/1.1 200 OK\r\nConnection: x, CLOSE\r\nContent-Length: 2\r\n\r\n",
		"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n",
		"HTTP/1.0 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\n",
		"HTTP/1.1 200 OK\r\n\r\n",   /* to its close */
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n",
		"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof(not_reused) / sizeof(*not_reused); i++) {
		assert_int_equal(parse(not_reused[i], false, true), 1);
		assert_false(fr.reuse);
	}
}

static void test_http10_with_length_becomes_11(void **state)
{
	(void)state;
	assert_int_equal(parse("HTTP/1.0 200 OK\nContent-Length: 0\n\n", false, true), 1);
	assert_string_equal(buf, "HTTP/1.1 200 OK\nContent-Length: 0\n\n");
	assert_true(fr.keep && fr.done);
}

static void test_no_body_answers(void **state)
{
	(void)state;
	assert_int_equal(parse("HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n", true, true), 1);
	assert_int_equal(fr.end, FRAME_NONE);
	assert_true(fr.keep && fr.done);
	assert_int_equal(frame_body(&fr, "x", 1), 0);
	assert_int_equal(parse("HTTP/1.1 204 No Content\r\n\r\n", false, true), 1);
	assert_true(fr.end == FRAME_NONE && fr.keep && fr.done);
	assert_int_equal(parse("HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n", false, true), 1);
	assert_true(fr.end == FRAME_NONE && fr.keep && fr.done);
}

/* Every answer whose end the relay cannot be sure of: Connection: close
 * put before the blank line, read to the close. */
static void test_unsure_answers_get_connection_close(void **state)
{
	(void)state;
	static const char *const unsure[] = {
		"HTTP/1.1 200 OK\r\nX: y\r\n\r\n",                            /* no length */
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 3, 3\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: +3\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1234567890123456789\r\n\r\n",
		/* nginx 1.22 takes only SP around a value: to it these have no
		 * length (read to the close), so the relay must not end them */
		"HTTP/1.1 200 OK\r\nContent-Length:\t3\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 3\t\r\n\r\n",
		"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
		"HTTP/1.1 200 OK\r\nX: a\r\n folded\r\nContent-Length: 1\r\n\r\n",  /* obs-fold */
		"HTTP/1.1 200 OK\r\nX : a\r\nContent-Length: 1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nX: a\rb\r\nContent-Length: 1\r\n\r\n",         /* bare CR */
		"HTTP/2 200 OK\r\nContent-Length: 1\r\n\r\n",
		"HTTP/1.1 20 OK\r\nContent-Length: 1\r\n\r\n",
		"HTTP/1.1 200OK\r\nContent-Length: 1\r\n\r\n",
		"garbage\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof(unsure) / sizeof(*unsure); i++) {
		assert_int_equal(parse(unsure[i], false, true), 1);
		assert_int_equal(fr.end, FRAME_CLOSE);
		assert_false(fr.keep);
		size_t n = strlen(unsure[i]);
		/* the original up to its blank line, then ours, then the blank line */
		assert_int_equal(len, n + strlen("Connection: close\r\n"));
		assert_memory_equal(buf, unsure[i], n - 2);
		assert_string_equal(buf + n - 2, "Connection: close\r\n\r\n");
		assert_int_equal(frame_body(&fr, "abc", 3), 3);   /* to the close */
		assert_false(fr.done);
	}
}

/* An interim answer (1xx but 101) is not passed on: nginx 1.22 would take
 * it for the answer, and nginx from 1.29 reads past a 103 and frames the
 * final answer by its own head alone (a close put in the 103's head is
 * not seen), so the final head is the one framed and rewritten. */
static void test_interim_answers_dropped(void **state)
{
	(void)state;
	/* the final answer's close must be in its own head */
	assert_int_equal(parse("HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
			       "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokMORE", false, false), 1);
	assert_string_equal(buf, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nokMORE");
	assert_int_equal(head, strlen("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n"));
	assert_int_equal(fr.status, 200);
	assert_false(fr.keep);
	/* ... and a kept exchange is framed by it */
	assert_int_equal(parse("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing\n\n"
			       "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", false, true), 1);
	assert_string_equal(buf, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
	assert_true(fr.end == FRAME_LENGTH && fr.keep);
	/* an interim answer alone: dropped, the final head still to come */
	assert_int_equal(parse("HTTP/1.1 103 Early Hints\r\n\r\nHTTP/1.1 2", false, true), 0);
	assert_string_equal(buf, "HTTP/1.1 2");
	assert_int_equal(len, 10);
}

static void test_not_kept_requests(void **state)
{
	(void)state;
	/* lighttpd's Connection: close, or an upgrade that was refused */
	assert_int_equal(parse("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nConnection: keep-alive\r\n\r\n",
			       false, false), 1);
	assert_string_equal(buf, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nConnection: close\r\n\r\n");
	assert_false(fr.keep);
	/* an upgrade's 101 goes on as it came */
	const char *ws = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n";
	assert_int_equal(parse(ws, false, false), 1);
	assert_string_equal(buf, ws);
	assert_int_equal(fr.end, FRAME_CLOSE);
	/* ... but not in a kept exchange (nobody asked for it) */
	assert_int_equal(parse(ws, false, true), 1);
	assert_non_null(strstr(buf, "Connection: close\r\n\r\n"));
	assert_false(fr.keep);
}

static void test_incomplete_and_too_large(void **state)
{
	(void)state;
	assert_int_equal(parse("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n", false, true), 0);
	assert_int_equal(parse("HTTP/1.1 200 OK\r\n\r", false, true), 0);
	/* no blank line within cap - FRAME_SLACK: too large */
	memset(buf, 'a', CAP);
	memcpy(buf, "HTTP/1.1 200 OK\r\nX: ", 20);
	len = CAP - FRAME_SLACK;
	assert_int_equal(frame_head(buf, &len, CAP, false, true, &fr, &head), -1);
	len = CAP - FRAME_SLACK - 1;
	assert_int_equal(frame_head(buf, &len, CAP, false, true, &fr, &head), 0);
	/* a blank line just past the bound does not count */
	memcpy(buf + CAP - FRAME_SLACK - 2, "\r\n\r\n", 4);
	len = CAP - FRAME_SLACK + 2;
	assert_int_equal(frame_head(buf, &len, CAP, false, true, &fr, &head), -1);
}

/* Feed s to a chunked answer's body in pieces of step bytes; how many
 * bytes were taken in all. */
static size_t chunked(const char *s, size_t step)
{
	assert_int_equal(parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n", false, true), 1);
	assert_int_equal(fr.end, FRAME_CHUNKED);
	assert_true(fr.keep);
	size_t n = strlen(s), taken = 0;
	for (size_t i = 0; i < n && !fr.done; i += step) {
		size_t k = n - i < step ? n - i : step;
		size_t t = frame_body(&fr, s + i, k);
		taken += t;
		if (t < k)
			break;
	}
	return taken;
}

static void test_chunked_end_found_in_any_pieces(void **state)
{
	(void)state;
	const char *body = "5;ext=1\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-T: 1\r\n\r\n";
	for (size_t step = 1; step <= strlen(body) + 1; step++) {
		char with_more[256];
		snprintf(with_more, sizeof(with_more), "%sHTTP/1.1 200 OK\r\n", body);
		assert_int_equal(chunked(with_more, step), strlen(body));
		assert_true(fr.done);
		assert_false(fr.broken);
	}
	/* LF alone as a line end, as nginx takes it too */
	assert_int_equal(chunked("3\nabc\n0\n\nZZ", 4), strlen("3\nabc\n0\n\n"));
	assert_true(fr.done && !fr.broken);
	/* not ended yet */
	assert_int_equal(chunked("3\r\nabc\r\n", 100), 8);
	assert_false(fr.done);
}

static void test_chunked_breaks(void **state)
{
	(void)state;
	static const struct { const char *s; size_t good; } bad[] = {
		{ "x\r\n", 0 },
		{ "\r\n", 0 },
		{ "3\r\nabcX\r\n", 6 },          /* data not followed by a line end */
		{ "3\rX", 2 },
		{ "fffffffffffffffff\r\n", 15 }, /* a size past any body */
		{ "0\r\n:x\r\n\r\n", 3 },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		assert_int_equal(chunked(bad[i].s, 100), bad[i].good);
		assert_true(fr.done && fr.broken);
		assert_int_equal(frame_body(&fr, "0\r\n\r\n", 5), 0);
	}
	/* an extension that never ends, a trailer section without end */
	static char big[20000];
	memset(big, 'e', sizeof(big) - 1);
	memcpy(big, "1;", 2);
	size_t n = chunked(big, 1000);
	assert_true(n > 4000 && n < 4200);
	assert_true(fr.broken);
	memset(big, 'a', sizeof(big) - 1);
	for (size_t i = 0; i + 8 < sizeof(big) - 1; i += 8)
		memcpy(big + i, i ? "X-T: a\r\n" : "0\r\nX-T: ", 8);
	n = chunked(big, 1000);   /* many short lines: the section's own bound */
	assert_true(n > (16u << 10) && n < (16u << 10) + 16);
	assert_true(fr.broken);
}

/* A head read in pieces of every size: its end is seen in the piece that
 * brings it, looking at the new bytes only. */
static void test_head_end_in_any_pieces(void **state)
{
	(void)state;
	static const char *const heads[] = { "HTTP/1.1 200 OK\r\nA: b\r\n\r\nbody",
					     "HTTP/1.1 200 OK\nA: b\n\nbody" };
	for (size_t k = 0; k < 2; k++) {
		const char *h = heads[k];
		size_t n = strlen(h), end = http_head_end(h, n);
		assert_true(end > 0);
		for (size_t step = 1; step <= n; step++) {
			size_t got = 0, seen = 0;
			while (got < n && !seen) {
				size_t before = got;
				got = got + step < n ? got + step : n;
				if (http_head_ended(h, before, got))
					seen = got;
			}
			assert_true(seen >= end && seen < end + step);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_head_end_in_any_pieces),
		cmocka_unit_test(test_content_length_kept_and_hop_fields_dropped),
		cmocka_unit_test(test_room_connection_reuse),
		cmocka_unit_test(test_http10_with_length_becomes_11),
		cmocka_unit_test(test_no_body_answers),
		cmocka_unit_test(test_unsure_answers_get_connection_close),
		cmocka_unit_test(test_interim_answers_dropped),
		cmocka_unit_test(test_not_kept_requests),
		cmocka_unit_test(test_incomplete_and_too_large),
		cmocka_unit_test(test_chunked_end_found_in_any_pieces),
		cmocka_unit_test(test_chunked_breaks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
