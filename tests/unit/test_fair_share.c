/* Unit tests for fcgi-app/fair_share.c: a room's share of a pool, and
 * what is kept back for rooms that hold none and for uses that name no
 * room. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "fair_share.h"

static void test_one_room_holds_its_share(void **state)
{
	(void)state;
	struct fair_share fs;
	assert_int_equal(fair_share_init(&fs, 32, 8), 0);
	for (int i = 0; i < 8; i++)
		assert_int_equal(fair_share_take(&fs, "a", false), FAIR_SHARE_TAKEN);
	assert_int_equal(fair_share_take(&fs, "a", false), FAIR_SHARE_ROOM_FULL);
	assert_int_equal(fair_share_take(&fs, "b", false), FAIR_SHARE_TAKEN);
	/* its own cleanup is counted, never refused */
	assert_int_equal(fair_share_take(&fs, "a", true), FAIR_SHARE_TAKEN);
	fair_share_give(&fs, "a");
	fair_share_give(&fs, "a");
	assert_int_equal(fair_share_take(&fs, "a", false), FAIR_SHARE_TAKEN);
	assert_int_equal(fair_share_take(&fs, "a", false), FAIR_SHARE_ROOM_FULL);
	/* a room given back all it held leaves no trace */
	fair_share_give(&fs, "b");
	assert_int_equal(fs.held, 8);
}

/* Many busy rooms: each room holding none still gets one, until only the
 * one kept for uses that name no room is left. */
static void test_kept_back(void **state)
{
	(void)state;
	struct fair_share fs;
	char room[8];
	assert_int_equal(fair_share_init(&fs, 8, 2), 0);
	for (int r = 0; r < 4; r++)
		for (int i = 0; i < 8; i++) {
			snprintf(room, sizeof(room), "busy%d", r);
			fair_share_take(&fs, room, false);
		}
	/* a room that holds one gets another only while 2 (+1) stay free */
	assert_true(fs.held <= 8 - 1);
	assert_int_equal(fair_share_take(&fs, "busy0", false) != FAIR_SHARE_TAKEN, 1);
	int fresh = 0;
	for (;; fresh++) {
		snprintf(room, sizeof(room), "new%d", fresh);
		if (fair_share_take(&fs, room, false) != FAIR_SHARE_TAKEN)
			break;
	}
	assert_true(fresh >= 1);
	assert_int_equal(fs.held, 7);   /* one kept for the service's own */
	assert_int_equal(fair_share_take(&fs, "another", false), FAIR_SHARE_POOL_FULL);
}

static void test_small_pools(void **state)
{
	(void)state;
	struct fair_share fs;
	/* one worker: nothing to keep back, one room at a time */
	assert_int_equal(fair_share_init(&fs, 1, 0), 0);
	assert_int_equal(fs.share, 1);
	assert_int_equal(fair_share_take(&fs, "a", false), FAIR_SHARE_TAKEN);
	assert_int_equal(fair_share_take(&fs, "b", false), FAIR_SHARE_POOL_FULL);
	fair_share_give(&fs, "a");
	assert_int_equal(fair_share_take(&fs, "b", false), FAIR_SHARE_TAKEN);
	/* a share as large as the pool: one room may take all but the one
	 * kept for the service's own */
	assert_int_equal(fair_share_init(&fs, 4, 9), 0);
	assert_int_equal(fs.share, 4);
	for (int i = 0; i < 3; i++)
		assert_int_equal(fair_share_take(&fs, "a", false), FAIR_SHARE_TAKEN);
	assert_int_equal(fair_share_take(&fs, "a", false), FAIR_SHARE_POOL_FULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_room_holds_its_share),
		cmocka_unit_test(test_kept_back),
		cmocka_unit_test(test_small_pools),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
