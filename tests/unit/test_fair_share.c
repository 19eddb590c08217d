/* Unit tests for fcgi-app/http/fair_share.c: a room's share of a pool, and
 * what is kept back for rooms that hold none and for uses that name no
 * room. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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

/* A request that ends the room's activity (cleanup, stop, a process
 * killed) gets one more than the share, never more, and never the unit
 * kept for uses that name no room: a hostile room and a client retrying
 * its DELETEs cannot fill the pool. */
static void test_ends_room_bounded(void **state)
{
	(void)state;
	struct fair_share fs;
	char room[8];
	assert_int_equal(fair_share_init(&fs, 8, 2), 0);
	assert_int_equal(fair_share_take(&fs, "a", false), FAIR_SHARE_TAKEN);
	assert_int_equal(fair_share_take(&fs, "a", false), FAIR_SHARE_TAKEN);
	assert_int_equal(fair_share_take(&fs, "a", true), FAIR_SHARE_TAKEN);
	assert_int_equal(fair_share_take(&fs, "a", true), FAIR_SHARE_ROOM_FULL);
	for (int r = 0; r < 8; r++)
		for (int i = 0; i < 4; i++) {
			snprintf(room, sizeof(room), "end%d", r);
			fair_share_take(&fs, room, true);
		}
	assert_int_equal(fs.held, 7);   /* one kept for the service's own */
	assert_int_equal(fair_share_take(&fs, "z", true), FAIR_SHARE_POOL_FULL);
}

/* Every pool size from 1 to 8 with every room_workers (0: the default, a
 * quarter): a room alone gets fair_share_room_max() (at least one, at most
 * its share); with 2 workers or more, two rooms work at once; with 3 or
 * more, one unit stays for uses that name no room; never more held than
 * there are. */
static void test_small_pool_table(void **state)
{
	(void)state;
	char room[8];
	for (int total = 1; total <= 8; total++)
		for (int rw = 0; rw <= 9; rw++) {
			struct fair_share fs;
			int share = rw ? rw : total / 4, max, n;
			assert_int_equal(fair_share_init(&fs, total, share), 0);
			max = fair_share_room_max(&fs);
			assert_true(max >= 1 && max <= fs.share);
			for (n = 0; fair_share_take(&fs, "a", false) == FAIR_SHARE_TAKEN; n++)
				;
			assert_int_equal(n, max);
			free(fs.rooms);

			assert_int_equal(fair_share_init(&fs, total, share), 0);
			assert_int_equal(fair_share_take(&fs, "a", false), FAIR_SHARE_TAKEN);
			if (total >= 2)
				assert_int_equal(fair_share_take(&fs, "b", false), FAIR_SHARE_TAKEN);
			for (int r = 0; r < 16; r++)
				for (int i = 0; i < 8; i++) {
					snprintf(room, sizeof(room), "r%d", r);
					fair_share_take(&fs, room, i & 1);
				}
			assert_true(fs.held <= (total >= 3 ? total - 1 : total));
			free(fs.rooms);
		}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_room_holds_its_share),
		cmocka_unit_test(test_kept_back),
		cmocka_unit_test(test_small_pools),
		cmocka_unit_test(test_ends_room_bounded),
		cmocka_unit_test(test_small_pool_table),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
