/* Unit tests for fcgi-app/http/ws_frame.c: a client's frames, good and hostile,
 * as a terminal's WebSocket reader sees them; the server's headers; the
 * handshake key of RFC 6455's own example. */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ws_frame.h"

static const unsigned char MASK[4] = { 0x37, 0xfa, 0x21, 0x3d };

/* A client frame into out: first byte b0 (FIN, RSV, opcode), masked with
 * MASK unless !masked, the length as given in its form (7, 16 or 64 bits:
 * form 0 picks the shortest).  Its size. */
static size_t client_frame(unsigned char *out, uint8_t b0, const void *payload, size_t n, bool masked,
			   int form)
{
	size_t i = 0;
	out[i++] = b0;
	uint8_t m = masked ? 0x80 : 0;
	if (form == 0)
		form = n < 126 ? 7 : n <= 0xffff ? 16 : 64;
	if (form == 7) {
		out[i++] = m | (uint8_t)n;
	} else if (form == 16) {
		out[i++] = m | 126;
		out[i++] = (uint8_t)(n >> 8);
		out[i++] = (uint8_t)n;
	} else {
		out[i++] = m | 127;
		for (int k = 0; k < 8; k++)
			out[i++] = (uint8_t)((uint64_t)n >> (56 - 8 * k));
	}
	if (masked) {
		memcpy(out + i, MASK, 4);
		i += 4;
	}
	for (size_t k = 0; k < n; k++)
		out[i + k] = ((const unsigned char *)payload)[k] ^ (masked ? MASK[k & 3] : 0);
	return i + n;
}

struct fixture {
	struct ws_reader r;
	struct ws_event ev;
	uint16_t code;
	const char *why;
};

static ssize_t feed(struct fixture *f, unsigned char *buf, size_t len)
{
	f->code = 0;
	f->why = NULL;
	return ws_reader_feed(&f->r, buf, len, &f->ev, &f->code, &f->why);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	ws_reader_init(&f->r, 1024);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	ws_reader_free(&f->r);
	free(f);
	return 0;
}

static void test_binary_and_text_whole(void **state)
{
	struct fixture *f = *state;
	unsigned char buf[2048];
	size_t n = client_frame(buf, 0x82, "\x00\xff\x1b[A", 5, true, 0);
	assert_int_equal(feed(f, buf, n), n);
	assert_int_equal(f->ev.op, WS_BINARY);
	assert_int_equal(f->ev.len, 5);
	assert_memory_equal(f->ev.data, "\x00\xff\x1b[A", 5);

	n = client_frame(buf, 0x81, "h\xc3\xa9llo", 6, true, 0);
	assert_int_equal(feed(f, buf, n), n);
	assert_int_equal(f->ev.op, WS_TEXT);
	assert_memory_equal(f->ev.data, "h\xc3\xa9llo", 6);
}

/* A frame arriving a byte at a time is taken only once whole. */
static void test_partial_frames_wait(void **state)
{
	struct fixture *f = *state;
	unsigned char buf[2048], payload[300];
	memset(payload, 'x', sizeof(payload));
	size_t n = client_frame(buf, 0x82, payload, sizeof(payload), true, 0);
	for (size_t k = 0; k < n; k++)
		assert_int_equal(feed(f, buf, k), 0);
	assert_int_equal(feed(f, buf, n), n);
	assert_int_equal(f->ev.len, 300);
}

/* Fragments with pings between them make one message. */
static void test_fragments_and_control_between(void **state)
{
	struct fixture *f = *state;
	unsigned char buf[2048];
	size_t n = client_frame(buf, 0x02, "ab", 2, true, 0);
	assert_int_equal(feed(f, buf, n), n);
	assert_int_equal(f->ev.op, WS_CONT);
	n = client_frame(buf, 0x89, "p", 1, true, 0);
	assert_int_equal(feed(f, buf, n), n);
	assert_int_equal(f->ev.op, WS_PING);
	assert_memory_equal(f->ev.data, "p", 1);
	n = client_frame(buf, 0x00, "cd", 2, true, 0);
	assert_int_equal(feed(f, buf, n), n);
	assert_int_equal(f->ev.op, WS_CONT);
	n = client_frame(buf, 0x80, "e", 1, true, 0);
	assert_int_equal(feed(f, buf, n), n);
	assert_int_equal(f->ev.op, WS_BINARY);
	assert_int_equal(f->ev.len, 5);
	assert_memory_equal(f->ev.data, "abcde", 5);
	/* and a new message may begin */
	n = client_frame(buf, 0x81, "z", 1, true, 0);
	assert_int_equal(feed(f, buf, n), n);
	assert_int_equal(f->ev.op, WS_TEXT);
}

/* A character split between fragments is fine; the whole is checked. */
static void test_text_split_character(void **state)
{
	struct fixture *f = *state;
	unsigned char buf[64];
	size_t n = client_frame(buf, 0x01, "\xc3", 1, true, 0);
	assert_int_equal(feed(f, buf, n), n);
	n = client_frame(buf, 0x80, "\xa9", 1, true, 0);
	assert_int_equal(feed(f, buf, n), n);
	assert_int_equal(f->ev.op, WS_TEXT);
}

static void expect_refused(struct fixture *f, unsigned char *buf, size_t n, uint16_t code)
{
	assert_int_equal(feed(f, buf, n), -1);
	assert_int_equal(f->code, code);
	assert_non_null(f->why);
}

static void test_hostile_headers(void **state)
{
	struct fixture *f = *state;
	unsigned char buf[70000], big[70000] = { 0 };
	size_t n;

	n = client_frame(buf, 0x82, "a", 1, false, 0);
	expect_refused(f, buf, n, WS_CLOSE_PROTOCOL);           /* not masked */
	n = client_frame(buf, 0xC2, "a", 1, true, 0);
	expect_refused(f, buf, n, WS_CLOSE_PROTOCOL);           /* RSV1 */
	n = client_frame(buf, 0x83, "a", 1, true, 0);
	expect_refused(f, buf, n, WS_CLOSE_PROTOCOL);           /* opcode 3 */
	n = client_frame(buf, 0x8B, "a", 1, true, 0);
	expect_refused(f, buf, n, WS_CLOSE_PROTOCOL);           /* opcode 0xB */
	n = client_frame(buf, 0x82, "a", 1, true, 16);
	expect_refused(f, buf, n, WS_CLOSE_PROTOCOL);           /* 16-bit length for 1 */
	n = client_frame(buf, 0x82, big, 200, true, 64);
	expect_refused(f, buf, n, WS_CLOSE_PROTOCOL);           /* 64-bit length for 200 */
	n = client_frame(buf, 0x82, big, 2000, true, 0);
	expect_refused(f, buf, n, WS_CLOSE_TOO_BIG);            /* past the bound */
	/* the 64-bit length with its top bit set, judged from the header alone */
	unsigned char top[14] = { 0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 1, 1, 2, 3, 4 };
	expect_refused(f, top, sizeof(top), WS_CLOSE_PROTOCOL);
	/* 2^63-1 claimed: too big, refused before any byte of it is awaited */
	unsigned char huge[14] = { 0x82, 0xff, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4 };
	expect_refused(f, huge, sizeof(huge), WS_CLOSE_TOO_BIG);
}

static void test_hostile_control(void **state)
{
	struct fixture *f = *state;
	unsigned char buf[512], p[200] = { 0 };
	size_t n;

	n = client_frame(buf, 0x09, "a", 1, true, 0);
	expect_refused(f, buf, n, WS_CLOSE_PROTOCOL);           /* fragmented ping */
	n = client_frame(buf, 0x89, p, 126, true, 0);
	expect_refused(f, buf, n, WS_CLOSE_PROTOCOL);           /* ping of 126 */
	n = client_frame(buf, 0x88, "\x03", 1, true, 0);
	expect_refused(f, buf, n, WS_CLOSE_PROTOCOL);           /* close of one byte */
	n = client_frame(buf, 0x88, "\x03\xed", 2, true, 0);
	expect_refused(f, buf, n, WS_CLOSE_PROTOCOL);           /* 1005 may not be sent */
	n = client_frame(buf, 0x88, "\x03\xe8\xff", 3, true, 0);
	expect_refused(f, buf, n, WS_CLOSE_BAD_DATA);           /* reason not UTF-8 */
}

static void test_close_frames(void **state)
{
	struct fixture *f = *state;
	unsigned char buf[64];
	size_t n = client_frame(buf, 0x88, "", 0, true, 0);
	assert_int_equal(feed(f, buf, n), n);
	assert_int_equal(f->ev.op, WS_CLOSE);
	assert_int_equal(f->ev.code, WS_CLOSE_NO_STATUS);
	n = client_frame(buf, 0x88, "\x03\xe8" "bye", 5, true, 0);
	assert_int_equal(feed(f, buf, n), n);
	assert_int_equal(f->ev.code, 1000);
	assert_int_equal(f->ev.len, 3);
	assert_memory_equal(f->ev.data, "bye", 3);
	n = client_frame(buf, 0x88, "\x0f\xa0", 2, true, 0);   /* 4000: an application's */
	assert_int_equal(feed(f, buf, n), n);
	assert_int_equal(f->ev.code, 4000);
}

static void test_hostile_sequences(void **state)
{
	struct fixture *f = *state;
	unsigned char buf[2048], p[600] = { 0 };
	size_t n;

	n = client_frame(buf, 0x80, "a", 1, true, 0);
	expect_refused(f, buf, n, WS_CLOSE_PROTOCOL);           /* continuation first */
	n = client_frame(buf, 0x02, "a", 1, true, 0);
	assert_int_equal(feed(f, buf, n), n);
	n = client_frame(buf, 0x81, "b", 1, true, 0);
	expect_refused(f, buf, n, WS_CLOSE_PROTOCOL);           /* new message inside one */

	/* fragments adding up past the bound */
	ws_reader_free(&f->r);
	ws_reader_init(&f->r, 1024);
	n = client_frame(buf, 0x02, p, 600, true, 0);
	assert_int_equal(feed(f, buf, n), n);
	n = client_frame(buf, 0x80, p, 500, true, 0);
	expect_refused(f, buf, n, WS_CLOSE_TOO_BIG);

	ws_reader_free(&f->r);
	ws_reader_init(&f->r, 1024);
	n = client_frame(buf, 0x81, "\xff", 1, true, 0);
	expect_refused(f, buf, n, WS_CLOSE_BAD_DATA);           /* text not UTF-8 */
	ws_reader_free(&f->r);
	ws_reader_init(&f->r, 1024);
	n = client_frame(buf, 0x01, "\xc3", 1, true, 0);
	assert_int_equal(feed(f, buf, n), n);
	n = client_frame(buf, 0x80, "(", 1, true, 0);
	expect_refused(f, buf, n, WS_CLOSE_BAD_DATA);           /* bad across fragments */
}

/* A flood of tiny fragments stays within the bound: memory is the message's. */
static void test_many_fragments_bounded(void **state)
{
	struct fixture *f = *state;
	unsigned char buf[64];
	size_t n = client_frame(buf, 0x02, "", 0, true, 0);
	assert_int_equal(feed(f, buf, n), n);
	for (int i = 0; i < 100000; i++) {
		n = client_frame(buf, 0x00, "", 0, true, 0);
		assert_int_equal(feed(f, buf, n), n);
	}
	assert_true(f->r.msg_cap <= 1024);
	for (int i = 0; i < 1024; i++) {
		n = client_frame(buf, 0x00, "x", 1, true, 0);
		assert_int_equal(feed(f, buf, n), n);
	}
	n = client_frame(buf, 0x00, "x", 1, true, 0);
	expect_refused(f, buf, n, WS_CLOSE_TOO_BIG);
	assert_true(f->r.msg_cap <= 1024);
}

static void test_server_headers(void **state)
{
	unsigned char h[10];
	assert_int_equal(ws_header(h, WS_BINARY, 5), 2);
	assert_memory_equal(h, "\x82\x05", 2);
	assert_int_equal(ws_header(h, WS_TEXT, 126), 4);
	assert_memory_equal(h, "\x81\x7e\x00\x7e", 4);
	assert_int_equal(ws_header(h, WS_BINARY, 65536), 10);
	assert_memory_equal(h, "\x82\x7f\x00\x00\x00\x00\x00\x01\x00\x00", 10);
}

static void test_close_payload(void **state)
{
	unsigned char p[WS_CONTROL_MAX];
	assert_int_equal(ws_close_payload(p, 1000, "done"), 6);
	assert_memory_equal(p, "\x03\xe8" "done", 6);
	char reason[300];
	memset(reason, 'a', sizeof(reason));
	strcpy(reason + 122, "\xc3\xa9\xc3\xa9");          /* a character across byte 123 */
	size_t n = ws_close_payload(p, 1011, reason);
	assert_true(n <= WS_CONTROL_MAX);
	assert_int_equal(n, 2 + 122);                      /* 123 bytes would split the first é */
}

static void test_accept_key(void **state)
{
	char out[29];
	/* RFC 6455 section 1.3 */
	assert_int_equal(ws_accept_key("dGhlIHNhbXBsZSBub25jZQ==", 24, out), 0);
	assert_string_equal(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
	assert_int_equal(ws_accept_key("dGhlIHNhbXBsZSBub25jZQ", 22, out), -1);
	assert_int_equal(ws_accept_key("dGhlIHNhbXBsZSBub25jZXg=", 24, out), -1);  /* 17 bytes */
	assert_int_equal(ws_accept_key("!GhlIHNhbXBsZSBub25jZQ==", 24, out), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_binary_and_text_whole, setup, teardown),
		cmocka_unit_test_setup_teardown(test_partial_frames_wait, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fragments_and_control_between, setup, teardown),
		cmocka_unit_test_setup_teardown(test_text_split_character, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hostile_headers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hostile_control, setup, teardown),
		cmocka_unit_test_setup_teardown(test_close_frames, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hostile_sequences, setup, teardown),
		cmocka_unit_test_setup_teardown(test_many_fragments_bounded, setup, teardown),
		cmocka_unit_test(test_server_headers),
		cmocka_unit_test(test_close_payload),
		cmocka_unit_test(test_accept_key),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
