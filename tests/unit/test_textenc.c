/* Unit tests for common/textenc.c.
 *
 * Expected UTF-8 results were produced with Node 20's
 * Buffer.from(hex, 'hex').toString('utf8'), which follows the WHATWG
 * decoder: one U+FFFD per maximal subpart. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "textenc.h"
#include "timefmt.h"

#define FFFD "\xEF\xBF\xBD"

/* Sanitize `in` (length given, may hold NULs) and compare with `want`. */
static void check_sanitize(const char *in, size_t inlen, const char *want, size_t wantlen)
{
	size_t outlen = (size_t)-1;
	char *out = utf8_sanitize(in, inlen, &outlen);

	assert_non_null(out);
	assert_int_equal(outlen, wantlen);
	assert_memory_equal(out, want, wantlen);
	assert_int_equal(out[outlen], '\0');
	free(out);
}

#define SANITIZE(in, want) check_sanitize(in, sizeof(in) - 1, want, sizeof(want) - 1)

static void test_utf8_valid_passes_unchanged(void **state)
{
	(void)state;
	SANITIZE("", "");
	SANITIZE("hello, world\n", "hello, world\n");
	SANITIZE("\x7f", "\x7f");
	SANITIZE("\xc3\xa9", "\xc3\xa9");			/* é, 2 bytes */
	SANITIZE("\xe2\x82\xac", "\xe2\x82\xac");		/* €, 3 bytes */
	SANITIZE("\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80");	/* 😀, 4 bytes */
	SANITIZE("\xc2\x80", "\xc2\x80");			/* lowest 2-byte */
	SANITIZE("\xe0\xa0\x80", "\xe0\xa0\x80");		/* lowest 3-byte */
	SANITIZE("\xed\x9f\xbf", "\xed\x9f\xbf");		/* U+D7FF, below surrogates */
	SANITIZE("\xee\x80\x80", "\xee\x80\x80");		/* U+E000, above surrogates */
	SANITIZE("\xef\xbf\xbf", "\xef\xbf\xbf");		/* U+FFFF */
	SANITIZE("\xf0\x90\x80\x80", "\xf0\x90\x80\x80");	/* U+10000 */
	SANITIZE("\xf4\x8f\xbf\xbf", "\xf4\x8f\xbf\xbf");	/* U+10FFFF */
}

static void test_utf8_nul_and_bom_are_kept(void **state)
{
	(void)state;
	SANITIZE("a\0b", "a\0b");
	SANITIZE("\0", "\0");
	/* Buffer.toString keeps a BOM; it is the command's output. */
	SANITIZE("\xef\xbb\xbfx", "\xef\xbb\xbfx");
}

static void test_utf8_single_invalid_bytes(void **state)
{
	(void)state;
	SANITIZE("\xff", FFFD);
	SANITIZE("\xfe", FFFD);
	SANITIZE("\xf5", FFFD);
	SANITIZE("\x80", FFFD);			/* lone continuation */
	SANITIZE("\xbf\xbf", FFFD FFFD);	/* each stray continuation */
	SANITIZE("a\xff" "b", "a" FFFD "b");
}

static void test_utf8_overlongs(void **state)
{
	(void)state;
	SANITIZE("\xc0\xaf", FFFD FFFD);		/* overlong '/' */
	SANITIZE("\xc1\xbf", FFFD FFFD);
	SANITIZE("\xe0\x80\x80", FFFD FFFD FFFD);
	SANITIZE("\xf0\x80\x80\x80", FFFD FFFD FFFD FFFD);
	SANITIZE("\xf8\x88\x80\x80\x80", FFFD FFFD FFFD FFFD FFFD);
}

static void test_utf8_surrogates_and_beyond_max(void **state)
{
	(void)state;
	SANITIZE("\xed\xa0\x80", FFFD FFFD FFFD);	/* U+D800 */
	SANITIZE("\xed\xbf\xbf", FFFD FFFD FFFD);	/* U+DFFF */
	/* A CESU-8 pair is two surrogates, six replacements. */
	SANITIZE("\xed\xa0\xbd\xed\xb8\x80", FFFD FFFD FFFD FFFD FFFD FFFD);
	SANITIZE("\xf4\x90\x80\x80", FFFD FFFD FFFD FFFD);	/* U+110000 */
}

static void test_utf8_truncated_sequences(void **state)
{
	(void)state;
	SANITIZE("\xe2\x82", FFFD);		/* one subpart, one U+FFFD */
	SANITIZE("a\xe2\x82", "a" FFFD);
	SANITIZE("\xe2\x82" "a", FFFD "a");	/* the breaking byte is kept */
	SANITIZE("\xf0\x9f\x98", FFFD);
	SANITIZE("\xf0\x9f\x98" "\xf0\x9f\x98\x80", FFFD "\xf0\x9f\x98\x80");
	SANITIZE("\xc3", FFFD);
	SANITIZE("\xe0\xa0", FFFD);
	SANITIZE("\xf4", FFFD);
	SANITIZE("\xe2\x82\xe2\x82\xac", FFFD "\xe2\x82\xac");
}

static void test_utf8_mixed(void **state)
{
	(void)state;
	/* The example of Unicode §3.9 (U+FFFD substitution of maximal subparts). */
	SANITIZE("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64",
		 "a" FFFD FFFD FFFD "b" FFFD "c" FFFD FFFD "d");
	SANITIZE("ok \xc3\xa9\xff\xe2\x82\xac\xed\xa0\x80!\xf0\x9f\x98",
		 "ok \xc3\xa9" FFFD "\xe2\x82\xac" FFFD FFFD FFFD "!" FFFD);
}

static void test_utf8_outlen_may_be_null(void **state)
{
	char *out = utf8_sanitize("\xff", 1, NULL);

	(void)state;
	assert_non_null(out);
	assert_string_equal(out, FFFD);
	free(out);
}

/* Validity check independent of the code under test (Unicode table 3-7). */
static int valid_utf8(const unsigned char *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		unsigned c = s[i];
		size_t need;
		unsigned lo = 0x80, hi = 0xBF;

		if (c < 0x80) { i++; continue; }
		if (c >= 0xC2 && c <= 0xDF) need = 1;
		else if (c == 0xE0) { need = 2; lo = 0xA0; }
		else if (c == 0xED) { need = 2; hi = 0x9F; }
		else if (c >= 0xE1 && c <= 0xEF) need = 2;
		else if (c == 0xF0) { need = 3; lo = 0x90; }
		else if (c == 0xF4) { need = 3; hi = 0x8F; }
		else if (c >= 0xF1 && c <= 0xF3) need = 3;
		else return 0;
		if (i + need >= n)
			return 0;
		for (size_t k = 1; k <= need; k++) {
			if (s[i + k] < lo || s[i + k] > hi)
				return 0;
			lo = 0x80;
			hi = 0xBF;
		}
		i += need + 1;
	}
	return 1;
}

/* Every 3-byte input: the output is valid UTF-8, valid input is unchanged,
 * and sanitizing twice changes nothing. */
static void test_utf8_exhaustive_three_bytes_is_valid(void **state)
{
	(void)state;
	for (unsigned a = 0; a < 0x100; a++) {
		for (unsigned b = 0; b < 0x100; b++) {
			for (unsigned c = 0x70; c < 0xC4; c += 3) {
				unsigned char in[3] = { (unsigned char)a, (unsigned char)b,
							(unsigned char)c };
				size_t n1, n2;
				char *o1 = utf8_sanitize((char *)in, 3, &n1);
				char *o2 = utf8_sanitize(o1, n1, &n2);

				assert_true(valid_utf8((unsigned char *)o1, n1));
				if (valid_utf8(in, 3)) {
					assert_int_equal(n1, 3);
					assert_memory_equal(o1, in, 3);
				}
				assert_int_equal(n1, n2);
				assert_memory_equal(o1, o2, n1);
				free(o1);
				free(o2);
			}
		}
	}
}

/* utf8_valid says yes exactly when the oracle above does: every 3-byte
 * input, and the 4-byte edges (U+10000, U+10FFFF, past it, cut short). */
static void test_utf8_valid_agrees(void **state)
{
	static const char *const four[] = {
		"\xF0\x90\x80\x80", "\xF4\x8F\xBF\xBF", "\xF4\x90\x80\x80",
		"\xF0\x8F\xBF\xBF", "\xF0\x9F\x98", "\xF5\x80\x80\x80",
	};

	(void)state;
	for (unsigned a = 0; a < 0x100; a++) {
		for (unsigned b = 0; b < 0x100; b++) {
			for (unsigned c = 0x70; c < 0xC4; c += 3) {
				unsigned char in[3] = { (unsigned char)a, (unsigned char)b,
							(unsigned char)c };

				assert_int_equal(utf8_valid((char *)in, 3), valid_utf8(in, 3));
			}
		}
	}
	for (size_t i = 0; i < sizeof(four) / sizeof(four[0]); i++)
		assert_int_equal(utf8_valid(four[i], strlen(four[i])),
				 valid_utf8((const unsigned char *)four[i], strlen(four[i])));
	assert_true(utf8_valid("", 0));
	assert_true(utf8_valid("a\0b", 3));
}

static void check_base64(const char *in, size_t len, const char *want)
{
	char *out = base64_encode((const unsigned char *)in, len);
	unsigned char *back;
	size_t back_len = 99;

	assert_non_null(out);
	assert_string_equal(out, want);
	free(out);
	/* and back */
	back = base64_decode(want, strlen(want), &back_len);
	assert_non_null(back);
	assert_int_equal(back_len, len);
	assert_memory_equal(back, in, len);
	free(back);
}

static void test_base64_decode_refuses_what_is_not_base64(void **state)
{
	static const char *const bad[] = {
		"Zg=", "Zg", "Z", "Zm9v=", "===", "Z===", "=Zm9", "Zm=v", "Zm 9", "Zm9\n",
		"Zm9-", "Zm9_", "Zg==Zg==",
	};
	size_t n;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (base64_decode(bad[i], strlen(bad[i]), &n))
			fail_msg("'%s' was decoded", bad[i]);
}

static void test_base64_rfc4648_vectors(void **state)
{
	(void)state;
	check_base64("", 0, "");
	check_base64("f", 1, "Zg==");
	check_base64("fo", 2, "Zm8=");
	check_base64("foo", 3, "Zm9v");
	check_base64("foob", 4, "Zm9vYg==");
	check_base64("fooba", 5, "Zm9vYmE=");
	check_base64("foobar", 6, "Zm9vYmFy");
}

static void test_base64_binary(void **state)
{
	(void)state;
	check_base64("\x00", 1, "AA==");
	check_base64("\x00\x00\x00", 3, "AAAA");
	check_base64("\xfb\xff", 2, "+/8=");	/* the two non-alphanumeric digits */
	check_base64("\xff\xff\xff", 3, "////");
	check_base64("\x00\xff\xfe\x80\x7f", 5, "AP/+gH8=");
	check_base64("hi\n", 3, "aGkK");
}

static void test_utf16_length(void **state)
{
	(void)state;
	assert_int_equal(utf16_length("", 0), 0);
	assert_int_equal(utf16_length("abc", 3), 3);
	assert_int_equal(utf16_length("\xc3\xa9", 2), 1);
	assert_int_equal(utf16_length("\xe2\x82\xac", 3), 1);
	assert_int_equal(utf16_length("\xf0\x9f\x98\x80", 4), 2);
	assert_int_equal(utf16_length("a\xf0\x9f\x98\x80\xc3\xa9", 7), 4);
	assert_int_equal(utf16_length("a\0b", 3), 3);
	assert_int_equal(utf16_length(FFFD, 3), 1);
	/* len is honoured: only "ab" of "abc" */
	assert_int_equal(utf16_length("abc", 2), 2);
}

static void test_utf16_prefix_ascii_and_bmp(void **state)
{
	const char *s = "\xc3\xa9\xc3\xa9\xc3\xa9";	/* "ééé" */

	(void)state;
	assert_int_equal(utf8_prefix_for_utf16_units("hello", 5, 0), 0);
	assert_int_equal(utf8_prefix_for_utf16_units("hello", 5, 3), 3);
	assert_int_equal(utf8_prefix_for_utf16_units("hello", 5, 5), 5);
	assert_int_equal(utf8_prefix_for_utf16_units("hello", 5, 500), 5);
	assert_int_equal(utf8_prefix_for_utf16_units(s, 6, 2), 4);
	assert_int_equal(utf8_prefix_for_utf16_units("\xe2\x82\xac" "x", 4, 1), 3);
	assert_int_equal(utf8_prefix_for_utf16_units("", 0, 10), 0);
}

static void test_utf16_prefix_never_splits_pair(void **state)
{
	const char *s = "a\xf0\x9f\x98\x80" "b";	/* "a😀b": units 1 + 2 + 1 */

	(void)state;
	assert_int_equal(utf8_prefix_for_utf16_units(s, 6, 1), 1);
	assert_int_equal(utf8_prefix_for_utf16_units(s, 6, 2), 1);	/* pair not split */
	assert_int_equal(utf8_prefix_for_utf16_units(s, 6, 3), 5);
	assert_int_equal(utf8_prefix_for_utf16_units(s, 6, 4), 6);
	assert_int_equal(utf8_prefix_for_utf16_units("\xf0\x9f\x98\x80", 4, 1), 0);
	assert_int_equal(utf8_prefix_for_utf16_units("\xf0\x9f\x98\x80", 4, 2), 4);
}

static void test_utf16_prefix_of_500(void **state)
{
	/* The run-tag summary case: 600 × "é" cut at 500 units = 1000 bytes. */
	char buf[1200];

	(void)state;
	for (int i = 0; i < 600; i++)
		memcpy(buf + 2 * i, "\xc3\xa9", 2);
	assert_int_equal(utf8_prefix_for_utf16_units(buf, sizeof(buf), 500), 1000);
	assert_int_equal(utf16_length(buf, 1000), 500);
}

static void check_iso(time_t sec, long nsec, const char *want)
{
	struct timespec ts = { .tv_sec = sec, .tv_nsec = nsec };
	char buf[32];

	memset(buf, 'x', sizeof(buf));
	iso8601_utc(&ts, buf, sizeof(buf));
	assert_string_equal(buf, want);
}

static void test_iso8601_utc(void **state)
{
	(void)state;
	check_iso(0, 0, "1970-01-01T00:00:00.000Z");
	check_iso(1795971600, 0, "2026-11-29T17:00:00.000Z");
	check_iso(1709251199, 999999999, "2024-02-29T23:59:59.999Z");	/* leap day */
	check_iso(1795971600, 1500000, "2026-11-29T17:00:00.001Z");	/* truncated, as JS */
	check_iso(1795971600, 123456789, "2026-11-29T17:00:00.123Z");
	check_iso(-1, 0, "1969-12-31T23:59:59.000Z");
	/* JavaScript's expanded years (Date.prototype.toISOString). */
	check_iso(253402300800, 0, "+010000-01-01T00:00:00.000Z");
	check_iso(-62198755200, 0, "-000001-01-01T00:00:00.000Z");
}

static void test_iso8601_small_buffer_is_terminated(void **state)
{
	struct timespec ts = { .tv_sec = 0, .tv_nsec = 0 };
	char buf[8];

	(void)state;
	iso8601_utc(&ts, buf, sizeof(buf));
	assert_string_equal(buf, "1970-01");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_utf8_valid_passes_unchanged),
		cmocka_unit_test(test_utf8_nul_and_bom_are_kept),
		cmocka_unit_test(test_utf8_single_invalid_bytes),
		cmocka_unit_test(test_utf8_overlongs),
		cmocka_unit_test(test_utf8_surrogates_and_beyond_max),
		cmocka_unit_test(test_utf8_truncated_sequences),
		cmocka_unit_test(test_utf8_mixed),
		cmocka_unit_test(test_utf8_outlen_may_be_null),
		cmocka_unit_test(test_utf8_exhaustive_three_bytes_is_valid),
		cmocka_unit_test(test_utf8_valid_agrees),
		cmocka_unit_test(test_base64_rfc4648_vectors),
		cmocka_unit_test(test_base64_binary),
		cmocka_unit_test(test_base64_decode_refuses_what_is_not_base64),
		cmocka_unit_test(test_utf16_length),
		cmocka_unit_test(test_utf16_prefix_ascii_and_bmp),
		cmocka_unit_test(test_utf16_prefix_never_splits_pair),
		cmocka_unit_test(test_utf16_prefix_of_500),
		cmocka_unit_test(test_iso8601_utc),
		cmocka_unit_test(test_iso8601_small_buffer_is_terminated),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
