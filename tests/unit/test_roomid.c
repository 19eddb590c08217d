/* Unit tests for common/roomid.c: ^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$ */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "roomid.h"

static bool is_alnum(int ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	       (ch >= '0' && ch <= '9');
}

static void test_valid_ids(void **state)
{
	(void)state;
	assert_true(room_id_valid("a"));
	assert_true(room_id_valid("Z"));
	assert_true(room_id_valid("0"));
	assert_true(room_id_valid("room-123"));
	assert_true(room_id_valid("room_123"));
	assert_true(room_id_valid("a-"));
	assert_true(room_id_valid("a_"));
	assert_true(room_id_valid("9--__--9"));
	assert_true(room_id_valid("0b5e8d3c-1f2a-4c3b-9d8e-7f6a5b4c3d2e"));	/* uuid v4 */
}

static void test_length_limit(void **state)
{
	char id[ROOM_ID_MAX + 2];

	(void)state;
	assert_int_equal(ROOM_ID_MAX, 64);
	memset(id, 'a', sizeof(id));
	id[64] = '\0';
	assert_true(room_id_valid(id));		/* 64 characters */
	id[64] = 'a';
	id[65] = '\0';
	assert_false(room_id_valid(id));	/* 65 characters */
	id[63] = '\0';
	assert_true(room_id_valid(id));		/* 63 characters */
}

static void test_long_id_is_rejected_not_truncated(void **state)
{
	/* A 1000-byte id must be rejected, not read as its first 64 bytes. */
	char id[1001];

	(void)state;
	memset(id, 'x', 1000);
	id[1000] = '\0';
	assert_false(room_id_valid(id));
	assert_false(room_id_valid_n(id, 1000));
	assert_false(room_id_valid_n(id, 65));
	assert_true(room_id_valid_n(id, 64));
}

static void test_invalid_ids(void **state)
{
	(void)state;
	assert_false(room_id_valid(NULL));
	assert_false(room_id_valid(""));
	assert_false(room_id_valid("-a"));
	assert_false(room_id_valid("_a"));
	assert_false(room_id_valid("-"));
	assert_false(room_id_valid("_"));
	assert_false(room_id_valid("."));
	assert_false(room_id_valid(".."));
	assert_false(room_id_valid("a.b"));
	assert_false(room_id_valid("a/b"));
	assert_false(room_id_valid("../etc"));
	assert_false(room_id_valid("a b"));
	assert_false(room_id_valid(" a"));
	assert_false(room_id_valid("a\n"));
	assert_false(room_id_valid("a\t"));
	assert_false(room_id_valid("a:b"));
	assert_false(room_id_valid("a%2f"));
	assert_false(room_id_valid("\xc3\xa9"));		/* é */
	assert_false(room_id_valid("caf\xc3\xa9"));
	assert_false(room_id_valid("\xef\xbc\xa1"));		/* fullwidth A */
	assert_false(room_id_valid("a\xd9\xa0"));		/* Arabic-Indic digit zero */
}

static void test_embedded_nul(void **state)
{
	(void)state;
	assert_false(room_id_valid_n("ab\0c", 4));
	assert_false(room_id_valid_n("\0", 1));
	assert_false(room_id_valid_n("abc\0", 4));
	assert_true(room_id_valid_n("abc\0", 3));
	assert_true(room_id_valid_n("abc", 2));		/* only the given length counts */
	assert_false(room_id_valid_n("abc", 0));
	assert_false(room_id_valid_n(NULL, 0));
	assert_false(room_id_valid_n(NULL, 3));
}

/* Every byte value, as first and as later character. */
static void test_every_byte(void **state)
{
	(void)state;
	for (int b = 0; b < 256; b++) {
		char first[2] = { (char)b, 0 };
		char later[3] = { 'a', (char)b, 0 };
		bool later_ok = is_alnum(b) || b == '-' || b == '_';

		assert_int_equal(room_id_valid_n(first, 1), is_alnum(b));
		assert_int_equal(room_id_valid_n(later, 2), later_ok);
		if (b != 0) {
			assert_int_equal(room_id_valid(first), is_alnum(b));
			assert_int_equal(room_id_valid(later), later_ok);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid_ids),
		cmocka_unit_test(test_length_limit),
		cmocka_unit_test(test_long_id_is_rejected_not_truncated),
		cmocka_unit_test(test_invalid_ids),
		cmocka_unit_test(test_embedded_nul),
		cmocka_unit_test(test_every_byte),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
