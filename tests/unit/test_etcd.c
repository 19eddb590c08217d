/* Unit tests for common/etcd.c's list of members: cluster_etcd and
 * roomboxctl's -e both go through etcd_init, so what one takes the other
 * takes.  The calls themselves meet a real etcd in
 * tests/integration/test_cluster_node.py and tests/cluster/. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "etcd.h"

static struct etcd e;
static char err[256];

static void test_members(void **state)
{
	(void)state;
	assert_int_equal(etcd_init(&e, "http://10.0.0.1:2379/, http://10.0.0.2:2379\thttp://h3:2379",
				   err, sizeof(err)), 0);
	assert_int_equal(e.n, 3);
	assert_string_equal(e.urls[0], "http://10.0.0.1:2379");   /* its '/' dropped */
	assert_string_equal(e.urls[1], "http://10.0.0.2:2379");
	assert_string_equal(e.urls[2], "http://h3:2379");
	assert_int_equal(e.timeout_ms, 2500);
}

static void test_refused(void **state)
{
	char nine[ETCD_MEMBERS_MAX * 20 + 20] = "";

	(void)state;
	assert_int_equal(etcd_init(&e, " , ", err, sizeof(err)), -1);
	assert_string_equal(err, "no etcd endpoints");
	assert_int_equal(etcd_init(&e, NULL, err, sizeof(err)), -1);
	assert_int_equal(etcd_init(&e, "http://a:1,https://b:2", err, sizeof(err)), -1);
	assert_string_equal(err, "etcd endpoint 'https://b:2' is not an http:// URL");
	assert_int_equal(etcd_init(&e, "a:2379", err, sizeof(err)), -1);
	for (int i = 0; i <= ETCD_MEMBERS_MAX; i++)
		snprintf(nine + strlen(nine), sizeof(nine) - strlen(nine), "http://m%d:1,", i);
	assert_int_equal(etcd_init(&e, nine, err, sizeof(err)), -1);
	assert_string_equal(err, "more than 9 etcd members");
}

static void test_prefix_end(void **state)
{
	char end[64];

	(void)state;
	etcd_prefix_end("/roombox/rooms/", end, sizeof(end));
	assert_string_equal(end, "/roombox/rooms0");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_members),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_prefix_end),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
