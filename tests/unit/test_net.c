/* Unit tests for sandbox-helper/net.c's pure parts: instance names and the
 * name servers a room can use.  (The veth, rules and their cleanup need
 * root and a kernel: tests/security/test_egress.py.) */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "config.h"
#include "net.h"

static void test_table_name_per_instance(void **state)
{
	struct config a, b;
	char na[32], nb[32], again[32];

	(void)state;
	config_defaults(&a);
	config_defaults(&b);
	snprintf(b.state_dir, sizeof(b.state_dir), "/tmp/rbx-other/state");
	net_table_name(&a, na, sizeof(na));
	net_table_name(&b, nb, sizeof(nb));
	net_table_name(&a, again, sizeof(again));
	assert_int_equal(strlen(na), strlen("roombox_") + 8);
	assert_memory_equal(na, "roombox_", 8);
	assert_string_equal(na, again);
	assert_string_not_equal(na, nb);
}

static void test_dns_from_the_configuration(void **state)
{
	struct config c;
	uint32_t out[CONFIG_LIST_MAX];
	int unusable = -1;
	char err[256];

	(void)state;
	config_defaults(&c);
	assert_int_equal(config_parse(&c, "t.conf",
		"dns = 127.0.0.53 10.0.0.1 0.0.0.0 224.0.0.1 192.0.2.53 255.255.255.255\n",
		err, sizeof(err)), 0);
	/* the room's own loopback, "this network", multicast, broadcast: unusable */
	assert_int_equal(net_dns_servers(&c, out, CONFIG_LIST_MAX, &unusable), 2);
	assert_int_equal(unusable, 4);
	assert_int_equal(out[0], 0x0A000001u);
	assert_int_equal(out[1], 0xC0000235u);
	/* at most max are returned */
	assert_int_equal(net_dns_servers(&c, out, 1, &unusable), 1);
	assert_int_equal(out[0], 0x0A000001u);
	/* only loopback: none usable (the service warns) */
	assert_int_equal(config_parse(&c, "t2.conf", "dns = 127.0.0.1\n", err, sizeof(err)), 0);
	assert_int_equal(net_dns_servers(&c, out, CONFIG_LIST_MAX, &unusable), 0);
	assert_int_equal(unusable, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table_name_per_instance),
		cmocka_unit_test(test_dns_from_the_configuration),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
