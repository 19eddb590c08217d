/* Unit tests for common/config.c: defaults, every key, value syntax, and the
 * "<file>:<line>: <reason>" shape of every error. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "config.h"
#include "protocol.h"

#define KiB 1024ull
#define MiB (1024ull * KiB)
#define GiB (1024ull * MiB)

/* Defaults + text parsed as file "t.conf"; err holds the message. */
static int parse(struct config *c, const char *text, char *err, size_t errlen)
{
	config_defaults(c);
	return config_parse(c, "t.conf", text, err, errlen);
}

/* The text must be rejected with exactly this message. */
static void expect_error(const char *text, const char *want)
{
	struct config c;
	char err[512];

	memset(err, 0, sizeof(err));
	assert_int_equal(parse(&c, text, err, sizeof(err)), -1);
	assert_string_equal(err, want);
}

/* The text must be accepted; returns the parsed configuration. */
static struct config expect_ok(const char *text)
{
	struct config c;
	char err[512] = "";

	if (parse(&c, text, err, sizeof(err)) != 0)
		fail_msg("rejected '%s': %s", text, err);
	assert_string_equal(err, "");
	return c;
}

/* ---- defaults ---- */

static void test_defaults(void **state)
{
	struct config c;

	(void)state;
	memset(&c, 0xa5, sizeof(c));
	config_defaults(&c);
	assert_string_equal(c.state_dir, "/var/lib/roombox");
	assert_string_equal(c.run_dir, "/run/roombox");
	assert_string_equal(c.socket, "/run/roombox/fcgi.sock");
	assert_string_equal(c.tokens_file, "/etc/roombox/tokens");
	assert_string_equal(c.rootfs, "host");
	assert_string_equal(c.helper, ROOMBOX_HELPER);
	assert_int_equal(c.workers, 32);
	assert_int_equal(c.auth, AUTH_TOKEN);
	assert_int_equal(c.network, NETWORK_NONE);
	assert_int_equal(c.uid_base, 200000);
	assert_int_equal(c.max_rooms, 1000);
	assert_int_equal(c.memory_limit, 512 * MiB);
	assert_int_equal(c.pids_limit, 256);
	assert_true(c.cpu_limit == 1.0);
	assert_int_equal(c.disk_limit, 1 * GiB);
	assert_int_equal(c.exec_timeout_ms, 30000);
	assert_int_equal(c.exec_timeout_max_ms, 600000);
	assert_int_equal(c.output_limit, 1 * MiB);
	assert_int_equal(c.drain_ms, 50);
	assert_int_equal(c.max_body, 1 * MiB);
	assert_int_equal(c.log_max, 1 * MiB);
	assert_int_equal(c.max_concurrent_execs, 64);
	assert_int_equal(c.idle_timeout_ms, 900000);
}

static void test_empty_and_comment_only_text_keeps_defaults(void **state)
{
	struct config d, c;

	(void)state;
	config_defaults(&d);
	c = expect_ok("");
	assert_memory_equal(&c, &d, sizeof(c));
	c = expect_ok("\n\n   \n\t\n# nothing here\n   # indented comment\n");
	assert_memory_equal(&c, &d, sizeof(c));
}

/* ---- every key ---- */

static void test_every_key(void **state)
{
	struct config c;

	(void)state;
	c = expect_ok(
		"state_dir = /srv/rb/state\n"
		"run_dir = /srv/rb/run\n"
		"socket = /srv/rb/run/f.sock\n"
		"workers = 4\n"
		"auth = none\n"
		"tokens_file = /srv/rb/tokens\n"
		"rootfs = /srv/rootfs\n"
		"network = none\n"
		"uid_base = 300000\n"
		"max_rooms = 10\n"
		"memory_limit = 256M\n"
		"pids_limit = 64\n"
		"cpu_limit = 0.5\n"
		"disk_limit = 2G\n"
		"exec_timeout = 5s\n"
		"exec_timeout_max = 2m\n"
		"output_limit = 64K\n"
		"drain_ms = 20\n"
		"max_body = 2M\n"
		"log_max = 64K\n"
		"max_concurrent_execs = 8\n"
		"idle_timeout = 1h\n"
		"helper = /opt/rb/roombox-helper\n");
	assert_string_equal(c.state_dir, "/srv/rb/state");
	assert_string_equal(c.run_dir, "/srv/rb/run");
	assert_string_equal(c.socket, "/srv/rb/run/f.sock");
	assert_int_equal(c.workers, 4);
	assert_int_equal(c.auth, AUTH_NONE);
	assert_string_equal(c.tokens_file, "/srv/rb/tokens");
	assert_string_equal(c.rootfs, "/srv/rootfs");
	assert_int_equal(c.network, NETWORK_NONE);
	assert_int_equal(c.uid_base, 300000);
	assert_int_equal(c.max_rooms, 10);
	assert_int_equal(c.memory_limit, 256 * MiB);
	assert_int_equal(c.pids_limit, 64);
	assert_true(c.cpu_limit == 0.5);
	assert_int_equal(c.disk_limit, 2 * GiB);
	assert_int_equal(c.exec_timeout_ms, 5000);
	assert_int_equal(c.exec_timeout_max_ms, 120000);
	assert_int_equal(c.output_limit, 64 * KiB);
	assert_int_equal(c.drain_ms, 20);
	assert_int_equal(c.max_body, 2 * MiB);
	assert_int_equal(c.log_max, 64 * KiB);
	assert_int_equal(c.max_concurrent_execs, 8);
	assert_int_equal(c.idle_timeout_ms, 3600000);
	assert_string_equal(c.helper, "/opt/rb/roombox-helper");
}

static void test_auth_token_and_rootfs_host(void **state)
{
	struct config c;
	char err[256];

	(void)state;
	config_defaults(&c);
	assert_int_equal(config_parse(&c, "a", "auth = none\nrootfs = /srv/r\n", err, sizeof(err)), 0);
	assert_int_equal(c.auth, AUTH_NONE);
	assert_string_equal(c.rootfs, "/srv/r");
	assert_int_equal(config_parse(&c, "b", "auth = token\nrootfs = host\n", err, sizeof(err)), 0);
	assert_int_equal(c.auth, AUTH_TOKEN);
	assert_string_equal(c.rootfs, "host");
}

static void test_zero_allowed_where_it_means_off(void **state)
{
	struct config c;

	(void)state;
	c = expect_ok("disk_limit = 0\nidle_timeout = 0\ndrain_ms = 0\n");
	assert_int_equal(c.disk_limit, 0);
	assert_int_equal(c.idle_timeout_ms, 0);
	assert_int_equal(c.drain_ms, 0);
}

static void test_drain_ms_bare_number_is_milliseconds(void **state)
{
	struct config c;

	(void)state;
	c = expect_ok("drain_ms = 250\n");
	assert_int_equal(c.drain_ms, 250);
	c = expect_ok("drain_ms = 250ms\n");
	assert_int_equal(c.drain_ms, 250);
	c = expect_ok("drain_ms = 1s\n");
	assert_int_equal(c.drain_ms, 1000);
}

static void test_parse_layers_on_current_values(void **state)
{
	struct config c;
	char err[256];

	(void)state;
	config_defaults(&c);
	assert_int_equal(config_parse(&c, "a.conf", "workers = 3\n", err, sizeof(err)), 0);
	assert_int_equal(config_parse(&c, "b.conf", "pids_limit = 7\n", err, sizeof(err)), 0);
	assert_int_equal(c.workers, 3);		/* kept from a.conf */
	assert_int_equal(c.pids_limit, 7);
	assert_int_equal(c.max_rooms, 1000);	/* still the default */
	/* Not a duplicate: the check is per text. */
	assert_int_equal(config_parse(&c, "c.conf", "workers = 5\n", err, sizeof(err)), 0);
	assert_int_equal(c.workers, 5);
}

/* ---- line syntax ---- */

static void test_whitespace_and_comments(void **state)
{
	struct config c;

	(void)state;
	c = expect_ok("  workers=7  \n"
		      "\tpids_limit\t=\t9\t\n"
		      "max_rooms = 11 # trailing comment\n"
		      "max_concurrent_execs = 12\t# tab before comment\n"
		      "# workers = 99\n");
	assert_int_equal(c.workers, 7);
	assert_int_equal(c.pids_limit, 9);
	assert_int_equal(c.max_rooms, 11);
	assert_int_equal(c.max_concurrent_execs, 12);
}

static void test_hash_inside_value_is_kept(void **state)
{
	struct config c;

	(void)state;
	c = expect_ok("rootfs = /srv/a#b # but this is a comment\n");
	assert_string_equal(c.rootfs, "/srv/a#b");
}

static void test_crlf_bom_and_no_final_newline(void **state)
{
	struct config c;

	(void)state;
	c = expect_ok("\xEF\xBB\xBFworkers = 5\r\nstate_dir = /x\r\nmax_rooms = 6");
	assert_int_equal(c.workers, 5);
	assert_string_equal(c.state_dir, "/x");
	assert_int_equal(c.max_rooms, 6);
}

static void test_value_with_inner_spaces(void **state)
{
	struct config c;

	(void)state;
	c = expect_ok("state_dir = /srv/my rooms\n");
	assert_string_equal(c.state_dir, "/srv/my rooms");
}

/* ---- error shapes ---- */

static void test_unknown_key(void **state)
{
	(void)state;
	expect_error("workers = 2\n\n# c\nfoo = 1\n", "t.conf:4: unknown key 'foo'");
	expect_error("Workers = 2\n", "t.conf:1: unknown key 'Workers'");
	expect_error("memory = 1G\n", "t.conf:1: unknown key 'memory'");
	expect_error("state dir = /x\n", "t.conf:1: unknown key 'state dir'");
}

static void test_line_without_equals(void **state)
{
	(void)state;
	expect_error("workers 5\n", "t.conf:1: expected 'key = value', got 'workers 5'");
	expect_error("\n\n  [section]  \n", "t.conf:3: expected 'key = value', got '[section]'");
	expect_error("= 5\n", "t.conf:1: expected 'key = value', got '= 5'");
	/* An '=' inside a comment does not make a key. */
	expect_error("workers 5 # = x\n", "t.conf:1: expected 'key = value', got 'workers 5'");
}

static void test_duplicate_key(void **state)
{
	(void)state;
	expect_error("workers = 2\nmax_rooms = 3\nworkers = 4\n",
		     "t.conf:3: duplicate key 'workers' (first set on line 1)");
}

static void test_error_stops_at_first_bad_line(void **state)
{
	(void)state;
	expect_error("workers = x\nfoo = 1\n",
		     "t.conf:1: bad value for workers: 'x' (expected a whole number from 1 to 2147483647)");
}

static void test_bad_size_values(void **state)
{
	(void)state;
	expect_error("memory_limit = x\n",
		     "t.conf:1: bad value for memory_limit: 'x' (expected a size like 512M, greater than 0)");
	expect_error("memory_limit = 0\n",
		     "t.conf:1: bad value for memory_limit: '0' (expected a size like 512M, greater than 0)");
	expect_error("memory_limit = 1.5G\n",
		     "t.conf:1: bad value for memory_limit: '1.5G' (expected a size like 512M, greater than 0)");
	expect_error("disk_limit = 1T\n",
		     "t.conf:1: bad value for disk_limit: '1T' (expected a size like 512M)");
	expect_error("output_limit = -1\n",
		     "t.conf:1: bad value for output_limit: '-1' (expected a size like 512M, greater than 0)");
	expect_error("log_max = 0\n",
		     "t.conf:1: bad value for log_max: '0' (expected a size like 512M, greater than 0)");
	expect_error("max_body = \n",
		     "t.conf:1: bad value for max_body: '' (expected a size like 512M, greater than 0)");
	expect_error("max_body = # only a comment\n",
		     "t.conf:1: bad value for max_body: '' (expected a size like 512M, greater than 0)");
}

static void test_bad_duration_values(void **state)
{
	(void)state;
	expect_error("exec_timeout = 1d\n",
		     "t.conf:1: bad value for exec_timeout: '1d' (expected a duration like 30s, greater than 0)");
	expect_error("exec_timeout = 0\n",
		     "t.conf:1: bad value for exec_timeout: '0' (expected a duration like 30s, greater than 0)");
	expect_error("exec_timeout_max = 0s\n",
		     "t.conf:1: bad value for exec_timeout_max: '0s' (expected a duration like 30s, greater than 0)");
	expect_error("idle_timeout = soon\n",
		     "t.conf:1: bad value for idle_timeout: 'soon' (expected a duration like 30s)");
	expect_error("drain_ms = 5x\n",
		     "t.conf:1: bad value for drain_ms: '5x' (expected milliseconds like 50, or a duration like 50ms)");
}

static void test_bad_integer_values(void **state)
{
	(void)state;
	expect_error("workers = 0\n",
		     "t.conf:1: bad value for workers: '0' (expected a whole number from 1 to 2147483647)");
	expect_error("pids_limit = -5\n",
		     "t.conf:1: bad value for pids_limit: '-5' (expected a whole number from 1 to 2147483647)");
	expect_error("max_rooms = 2147483648\n",
		     "t.conf:1: bad value for max_rooms: '2147483648' (expected a whole number from 1 to 2147483647)");
	expect_error("max_concurrent_execs = 1.0\n",
		     "t.conf:1: bad value for max_concurrent_execs: '1.0' (expected a whole number from 1 to 2147483647)");
	expect_error("workers = +3\n",
		     "t.conf:1: bad value for workers: '+3' (expected a whole number from 1 to 2147483647)");
	expect_error("workers = 0x10\n",
		     "t.conf:1: bad value for workers: '0x10' (expected a whole number from 1 to 2147483647)");
	expect_error("workers = 99999999999999999999999\n",
		     "t.conf:1: bad value for workers: '99999999999999999999999' (expected a whole number from 1 to 2147483647)");
	expect_error("uid_base = 999\n",
		     "t.conf:1: bad value for uid_base: '999' (expected a whole number from 1000 to 4294967295)");
	expect_error("uid_base = 4294967296\n",
		     "t.conf:1: bad value for uid_base: '4294967296' (expected a whole number from 1000 to 4294967295)");
}

static void test_integer_bounds_accepted(void **state)
{
	struct config c;

	(void)state;
	c = expect_ok("workers = 1\npids_limit = 1\nmax_rooms = 1\n"
		      "max_concurrent_execs = 1\nuid_base = 1000\n");
	assert_int_equal(c.workers, 1);
	assert_int_equal(c.pids_limit, 1);
	assert_int_equal(c.max_rooms, 1);
	assert_int_equal(c.max_concurrent_execs, 1);
	assert_int_equal(c.uid_base, 1000);
	c = expect_ok("workers = 007\n");
	assert_int_equal(c.workers, 7);
}

/* ---- log_format and metrics ---- */

static void test_log_format_and_metrics(void **state)
{
	struct config c;

	(void)state;
	config_defaults(&c);
	assert_int_equal(c.log_format, LOG_FORMAT_TEXT);
	assert_int_equal(c.metrics, METRICS_TOKEN);
	c = expect_ok("log_format = json\nmetrics = open\n");
	assert_int_equal(c.log_format, LOG_FORMAT_JSON);
	assert_int_equal(c.metrics, METRICS_OPEN);
	c = expect_ok("log_format = text\nmetrics = none\n");
	assert_int_equal(c.log_format, LOG_FORMAT_TEXT);
	assert_int_equal(c.metrics, METRICS_NONE);
	c = expect_ok("metrics = token  # the default\n");
	assert_int_equal(c.metrics, METRICS_TOKEN);
}

static void test_bad_log_format_and_metrics(void **state)
{
	(void)state;
	expect_error("log_format = JSON\n",
		     "t.conf:1: bad value for log_format: 'JSON' (expected 'text' or 'json')");
	expect_error("log_format =\n",
		     "t.conf:1: bad value for log_format: '' (expected 'text' or 'json')");
	expect_error("\nmetrics = public\n",
		     "t.conf:2: bad value for metrics: 'public' (expected 'token', 'open' or 'none')");
	expect_error("metrics = token open\n",
		     "t.conf:1: bad value for metrics: 'token open' (expected 'token', 'open' or 'none')");
	expect_error("metrics = none\nmetrics = open\n",
		     "t.conf:2: duplicate key 'metrics' (first set on line 1)");
}

static void test_bad_enum_values(void **state)
{
	(void)state;
	expect_error("auth = Token\n",
		     "t.conf:1: bad value for auth: 'Token' (expected 'token' or 'none')");
	expect_error("auth = \n",
		     "t.conf:1: bad value for auth: '' (expected 'token' or 'none')");
	expect_error("network = host\n",
		     "t.conf:1: bad value for network: 'host' (expected 'none' or 'egress')");
	expect_error("rootfs = srv/rootfs\n",
		     "t.conf:1: bad value for rootfs: 'srv/rootfs' (expected 'host' or an absolute path)");
	expect_error("rootfs = \n",
		     "t.conf:1: bad value for rootfs: '' (expected 'host' or an absolute path)");
}

/* ---- network keys ---- */

static void test_network_defaults_and_egress(void **state)
{
	(void)state;
	struct config c = expect_ok("");
	assert_int_equal(c.network, NETWORK_NONE);
	assert_int_equal(c.dns.count, 0);
	assert_int_equal(c.egress_allow.count, 0);
	assert_int_equal(c.egress_deny.count, 0);
	assert_int_equal(c.egress_conns, 256);
	c = expect_ok("network = egress\negress_conns = 3\n");
	assert_int_equal(c.network, NETWORK_EGRESS);
	assert_int_equal(c.egress_conns, 3);
	expect_error("egress_conns = 0\n",
		     "t.conf:1: bad value for egress_conns: '0' (expected a whole number from 1 to 2147483647)");
}

static void test_dns_list(void **state)
{
	(void)state;
	/* commas, spaces or both */
	struct config c = expect_ok("dns = 192.0.2.53, 10.0.0.1 ,198.51.100.7   1.1.1.1\n");
	assert_int_equal(c.dns.count, 4);
	assert_int_equal(c.dns.items[0], 0xC0000235u);
	assert_int_equal(c.dns.items[1], 0x0A000001u);
	assert_int_equal(c.dns.items[2], 0xC6336407u);
	assert_int_equal(c.dns.items[3], 0x01010101u);
	c = expect_ok("dns =\n");
	assert_int_equal(c.dns.count, 0);
	static const char *const bad[] = {
		"192.0.2", "192.0.2.256", "192.0.2.1.5", "::1", "192.0.2.1/32", "host",
		"0192.0.2.1", "192.0.2.1:53", "1..2.3",
	};
	char text[128], want[512];
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text), "dns = 10.0.0.1, %s\n", bad[i]);
		snprintf(want, sizeof(want), "t.conf:1: bad entry for dns: '%s' (expected IPv4 "
			 "addresses like 192.0.2.53, separated by commas or spaces)", bad[i]);
		expect_error(text, want);
	}
}

static void test_egress_cidr_lists(void **state)
{
	(void)state;
	struct config c = expect_ok("egress_allow = 10.0.0.0/8:3128, 192.168.1.7 0.0.0.0/0\n"
				    "egress_deny = 203.0.113.10/32,198.51.100.0/24:443\n");
	assert_int_equal(c.egress_allow.count, 3);
	assert_int_equal(c.egress_allow.items[0].addr, 0x0A000000u);
	assert_int_equal(c.egress_allow.items[0].prefix, 8);
	assert_int_equal(c.egress_allow.items[0].port, 3128);
	assert_int_equal(c.egress_allow.items[1].addr, 0xC0A80107u);
	assert_int_equal(c.egress_allow.items[1].prefix, 32);
	assert_int_equal(c.egress_allow.items[1].port, 0);
	assert_int_equal(c.egress_allow.items[2].prefix, 0);
	assert_int_equal(c.egress_deny.count, 2);
	assert_int_equal(c.egress_deny.items[0].addr, 0xCB00710Au);
	assert_int_equal(c.egress_deny.items[1].port, 443);
	static const char *const bad[] = {
		"10.1.2.3/8",      /* host bits */
		"10.0.0.0/33", "10.0.0.0/", "10.0.0.0/8:", "10.0.0.0/8:0", "10.0.0.0/8:65536",
		"10.0.0.0:http", "10.0.0.0/-1", "fc00::/7", "10.0.0.0/8:1:2",
		"10.0.0.0/8:123456",
	};
	char text[128], want[512];
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text), "egress_deny = %s\n", bad[i]);
		snprintf(want, sizeof(want), "t.conf:1: bad entry for egress_deny: '%s' (expected IPv4 "
			 "networks CIDR[:port] like 10.0.0.0/8 or 10.1.2.3:3128, without host bits, "
			 "separated by commas or spaces)", bad[i]);
		expect_error(text, want);
	}
}

static void test_list_length_limit(void **state)
{
	(void)state;
	char text[2048] = "egress_allow =";
	for (int i = 0; i < CONFIG_LIST_MAX; i++)
		snprintf(text + strlen(text), sizeof(text) - strlen(text), " 10.0.0.%d", i);
	struct config c = expect_ok(text);
	assert_int_equal(c.egress_allow.count, CONFIG_LIST_MAX);
	strcat(text, " 10.0.1.0\n");
	expect_error(text, "t.conf:1: too many entries for egress_allow (at most 32)");
}

static void test_bad_cpu_values(void **state)
{
	static const char *const bad[] = {
		"0", "0.0", "-1", "", ".", "inf", "nan", "1e3", "0x10", "1.2.3", "abc",
		"1,5", "65537", "1 CPU",
	};
	char text[64], want[256];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text), "cpu_limit = %s\n", bad[i]);
		snprintf(want, sizeof(want),
			 "t.conf:1: bad value for cpu_limit: '%s' (expected a positive number of CPUs like 1.5)",
			 bad[i]);
		expect_error(text, want);
	}
}

static void test_good_cpu_values(void **state)
{
	struct config c;

	(void)state;
	c = expect_ok("cpu_limit = 2\n");
	assert_true(c.cpu_limit == 2.0);
	c = expect_ok("cpu_limit = 0.25\n");
	assert_true(c.cpu_limit == 0.25);
	c = expect_ok("cpu_limit = .5\n");
	assert_true(c.cpu_limit == 0.5);
	c = expect_ok("cpu_limit = 1.\n");
	assert_true(c.cpu_limit == 1.0);
	c = expect_ok("cpu_limit = 65536\n");
	assert_true(c.cpu_limit == 65536.0);
}

static void test_paths_must_be_absolute(void **state)
{
	static const char *const keys[] = {
		"state_dir", "run_dir", "socket", "tokens_file", "helper",
	};
	char text[128], want[256];

	(void)state;
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		snprintf(text, sizeof(text), "%s = relative/path\n", keys[i]);
		snprintf(want, sizeof(want),
			 "t.conf:1: bad value for %s: 'relative/path' (expected an absolute path)",
			 keys[i]);
		expect_error(text, want);
		snprintf(text, sizeof(text), "%s = \n", keys[i]);
		snprintf(want, sizeof(want),
			 "t.conf:1: bad value for %s: '' (expected an absolute path)", keys[i]);
		expect_error(text, want);
	}
}

static void test_string_length_limits(void **state)
{
	char text[600], want[256], path[300];
	struct config c;

	(void)state;
	/* 255 bytes fit a 256-byte field; 256 do not. */
	memset(path, 'p', sizeof(path));
	path[0] = '/';
	path[255] = '\0';
	snprintf(text, sizeof(text), "state_dir = %s\n", path);
	c = expect_ok(text);
	assert_string_equal(c.state_dir, path);

	path[255] = 'p';
	path[256] = '\0';
	snprintf(text, sizeof(text), "workers = 2\nstate_dir = %s\n", path);
	expect_error(text, "t.conf:2: value for state_dir is too long (256 bytes, at most 255)");
	snprintf(text, sizeof(text), "rootfs = %s\n", path);
	expect_error(text, "t.conf:1: value for rootfs is too long (256 bytes, at most 255)");
	snprintf(text, sizeof(text), "helper = %s\n", path);
	expect_error(text, "t.conf:1: value for helper is too long (256 bytes, at most 255)");

	/* socket must also fit sockaddr_un.sun_path (108 bytes with its NUL). */
	path[107] = '\0';
	snprintf(text, sizeof(text), "socket = %s\n", path);
	c = expect_ok(text);
	assert_string_equal(c.socket, path);
	path[107] = 'p';
	path[108] = '\0';
	snprintf(text, sizeof(text), "socket = %s\n", path);
	snprintf(want, sizeof(want),
		 "t.conf:1: value for socket is too long (108 bytes, at most 107)");
	expect_error(text, want);
}

static void test_exec_timeout_above_max(void **state)
{
	struct config c;

	(void)state;
	expect_error("exec_timeout = 11m\n",
		     "t.conf:1: exec_timeout (660000ms) is greater than exec_timeout_max (600000ms)");
	expect_error("exec_timeout = 5s\n\nexec_timeout_max = 4s\n",
		     "t.conf:3: exec_timeout (5000ms) is greater than exec_timeout_max (4000ms)");
	expect_error("exec_timeout_max = 10s\n",
		     "t.conf:1: exec_timeout (30000ms) is greater than exec_timeout_max (10000ms)");
	c = expect_ok("exec_timeout = 10m\n");	/* equal to the max is fine */
	assert_int_equal(c.exec_timeout_ms, 600000);
}

static void test_uid_range(void **state)
{
	struct config c;

	(void)state;
	/* uid_base + max_rooms * 65536 <= 2^31: each room owns 65536 host ids */
	c = expect_ok("uid_base = 2081947648\n");	/* + 1000 * 65536 = 2^31 */
	assert_int_equal(c.uid_base, 2081947648u);
	expect_error("uid_base = 2081947649\n",
		     "t.conf:1: uid_base + max_rooms * 65536 must be at most 2147483648: each room owns "
		     "65536 host ids (uid_base 2081947649, max_rooms 1000)");
	/* Checked after the last line: the error names the later of the two. */
	expect_error("uid_base = 2000000000\nworkers = 2\nmax_rooms = 2251\n",
		     "t.conf:3: uid_base + max_rooms * 65536 must be at most 2147483648: each room owns "
		     "65536 host ids (uid_base 2000000000, max_rooms 2251)");
	c = expect_ok("uid_base = 2000000000\nmax_rooms = 2250\n");
	assert_int_equal(c.max_rooms, 2250);
	/* the old rule (one id per room) would have let this through */
	expect_error("max_rooms = 40000\n",
		     "t.conf:1: uid_base + max_rooms * 65536 must be at most 2147483648: each room owns "
		     "65536 host ids (uid_base 200000, max_rooms 40000)");
	expect_error("max_rooms = 2147283648\n",
		     "t.conf:1: uid_base + max_rooms * 65536 must be at most 2147483648: each room owns "
		     "65536 host ids (uid_base 200000, max_rooms 2147283648)");
	expect_error("uid_base = 4294967295\n",
		     "t.conf:1: uid_base + max_rooms * 65536 must be at most 2147483648: each room owns "
		     "65536 host ids (uid_base 4294967295, max_rooms 1000)");
}

static void test_exec_user(void **state)
{
	struct config c;

	(void)state;
	c = expect_ok("workers = 1\n");
	assert_int_equal(c.exec_user, EXEC_USER_ROOT);
	c = expect_ok("exec_user = user\n");
	assert_int_equal(c.exec_user, EXEC_USER_USER);
	c = expect_ok("exec_user = root\n");
	assert_int_equal(c.exec_user, EXEC_USER_ROOT);
	expect_error("exec_user = admin\n",
		     "t.conf:1: bad value for exec_user: 'admin' (expected 'root' or 'user')");
	expect_error("exec_user = 1000\n",
		     "t.conf:1: bad value for exec_user: '1000' (expected 'root' or 'user')");
}

static void test_small_and_null_error_buffer(void **state)
{
	struct config c;
	char err[8];

	(void)state;
	memset(err, 'x', sizeof(err));
	assert_int_equal(parse(&c, "foo = 1\n", err, sizeof(err)), -1);
	assert_string_equal(err, "t.conf:");	/* truncated, still terminated */
	assert_int_equal(parse(&c, "foo = 1\n", NULL, 0), -1);
	assert_int_equal(parse(&c, "workers = 3\n", NULL, 0), 0);
	assert_int_equal(c.workers, 3);
}

/* ---- value parsers ---- */

static void test_parse_size(void **state)
{
	static const struct { const char *in; uint64_t want; } good[] = {
		{ "0", 0 }, { "1", 1 }, { "1023", 1023 }, { "1K", KiB }, { "1k", KiB },
		{ "512M", 512 * MiB }, { "512m", 512 * MiB }, { "1G", GiB }, { "1g", GiB },
		{ "16G", 16 * GiB }, { "0K", 0 }, { "0010", 10 },
		{ "18446744073709551615", UINT64_MAX },
		{ "17179869183G", 17179869183ull * GiB },
	};
	static const char *const bad[] = {
		"", "K", "M", "-1", "+1", "1.5G", " 1", "1 ", "1 K", "1KB", "1KiB", "1T",
		"1b", "0x10", "1e3", "abc", "18446744073709551616", "17179869184G",
		"99999999999999999999999",
	};
	uint64_t v;

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		v = 12345;
		if (config_parse_size(good[i].in, &v) != 0)
			fail_msg("size '%s' rejected", good[i].in);
		assert_int_equal(v, good[i].want);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		v = 12345;
		if (config_parse_size(bad[i], &v) != -1)
			fail_msg("size '%s' accepted", bad[i]);
		assert_int_equal(v, 12345);	/* untouched on error */
	}
}

static void test_parse_duration(void **state)
{
	static const struct { const char *in; uint64_t want; } good[] = {
		{ "0", 0 }, { "30", 30000 }, { "30s", 30000 }, { "500ms", 500 },
		{ "0ms", 0 }, { "1ms", 1 }, { "10m", 600000 }, { "2h", 7200000 },
		{ "15m", 900000 }, { "86400", 86400000 },
		{ "18446744073709551615ms", UINT64_MAX },
	};
	static const char *const bad[] = {
		"", "s", "ms", "-1", "+1", "1.5s", "1d", "1M", "1H", "1S", "1 s", " 1",
		"1sec", "1min", "1mss", "1hm", "0x10",
		"18446744073709552s", "18446744073709552", "5124095576030432h",
	};
	uint64_t v;

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		v = 12345;
		if (config_parse_duration_ms(good[i].in, &v) != 0)
			fail_msg("duration '%s' rejected", good[i].in);
		assert_int_equal(v, good[i].want);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		v = 12345;
		if (config_parse_duration_ms(bad[i], &v) != -1)
			fail_msg("duration '%s' accepted", bad[i]);
		assert_int_equal(v, 12345);
	}
}

/* ---- files ---- */

/* Write text to a fresh temporary file; returns its malloc'd path. */
static char *write_temp(const char *text, size_t len)
{
	char *path = strdup("/tmp/roombox-test-config-XXXXXX");
	int fd;

	assert_non_null(path);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, len), (ssize_t)len);
	close(fd);
	return path;
}

static void test_load_file(void **state)
{
	const char text[] = "# roombox\nworkers = 9\nmemory_limit = 1G\n";
	char *path = write_temp(text, sizeof(text) - 1);
	struct config c;
	char err[512] = "";

	(void)state;
	memset(&c, 0, sizeof(c));
	assert_int_equal(config_load(&c, path, err, sizeof(err)), 0);
	assert_int_equal(c.workers, 9);
	assert_int_equal(c.memory_limit, GiB);
	assert_int_equal(c.pids_limit, 256);			/* defaults filled */
	assert_string_equal(c.state_dir, "/var/lib/roombox");
	unlink(path);
	free(path);
}

static void test_load_error_names_file_and_line(void **state)
{
	const char text[] = "workers = 9\n\nmemory_limit = lots\n";
	char *path = write_temp(text, sizeof(text) - 1);
	struct config c;
	char err[512], want[512];

	(void)state;
	assert_int_equal(config_load(&c, path, err, sizeof(err)), -1);
	snprintf(want, sizeof(want),
		 "%s:3: bad value for memory_limit: 'lots' (expected a size like 512M, greater than 0)",
		 path);
	assert_string_equal(err, want);
	unlink(path);
	free(path);
}

static void test_load_missing_file(void **state)
{
	struct config c;
	char err[512];

	(void)state;
	assert_int_equal(config_load(&c, "/nonexistent/roombox.conf", err, sizeof(err)), -1);
	assert_string_equal(err, "/nonexistent/roombox.conf: No such file or directory");
}

static void test_load_directory(void **state)
{
	struct config c;
	char err[512];

	(void)state;
	assert_int_equal(config_load(&c, "/tmp", err, sizeof(err)), -1);
	assert_string_equal(err, "/tmp: not a regular file");
}

static void test_load_rejects_nul_byte(void **state)
{
	/* Without the check, "foo = 1" after the NUL would be silently ignored. */
	const char text[] = "workers = 9\n\0foo = 1\n";
	char *path = write_temp(text, sizeof(text) - 1);
	struct config c;
	char err[512], want[512];

	(void)state;
	assert_int_equal(config_load(&c, path, err, sizeof(err)), -1);
	snprintf(want, sizeof(want), "%s: contains a NUL byte", path);
	assert_string_equal(err, want);
	unlink(path);
	free(path);
}

static void test_load_rejects_huge_file(void **state)
{
	size_t len = (1u << 20) + 1;
	char *text = malloc(len);
	char *path;
	struct config c;
	char err[512], want[512];

	(void)state;
	assert_non_null(text);
	memset(text, '\n', len);
	path = write_temp(text, len);
	assert_int_equal(config_load(&c, path, err, sizeof(err)), -1);
	snprintf(want, sizeof(want), "%s: file too large", path);
	assert_string_equal(err, want);
	unlink(path);
	free(path);
	free(text);
}

/* The setuid helper reads up to max_body + 64 KiB within 64 MiB: a
 * larger max_body is an error naming the line, not a helper that fails on
 * big requests later. */
static void test_max_body_is_bounded_by_the_helpers_budget(void **state)
{
	(void)state;
	assert_int_equal(expect_ok("max_body = 8M\n").max_body, MAX_BODY_LIMIT);
	assert_int_equal(expect_ok("max_body = 8388608\n").max_body, 8u << 20);
	expect_error("workers = 2\nmax_body = 8388609\n",
		     "t.conf:2: max_body (8388609 bytes) is above 8M: roombox-helper reads a "
		     "request within a 64 MiB memory budget");
	expect_error("max_body = 1G\n",
		     "t.conf:1: max_body (1073741824 bytes) is above 8M: roombox-helper reads a "
		     "request within a 64 MiB memory budget");
}

/* Both streams of an exec are held by the helper within the same budget: an
 * output_limit that would not fit is an error naming the line, not execs
 * with big outputs failing with "answer could not be built" later. */
static void test_output_limit_is_bounded_by_the_helpers_budget(void **state)
{
	(void)state;
	assert_int_equal(expect_ok("output_limit = 16M\n").output_limit, OUTPUT_LIMIT_MAX);
	expect_error("output_limit = 16777217\n",
		     "t.conf:1: output_limit (16777217 bytes) is above 16M: roombox-fcgi holds "
		     "both streams of every running exec");
	expect_error("workers = 2\noutput_limit = 1G\n",
		     "t.conf:2: output_limit (1073741824 bytes) is above 16M: roombox-fcgi holds "
		     "both streams of every running exec");
}

/* ---- the agent's keys ---- */

static void test_llm_defaults(void **state)
{
	struct config c;

	(void)state;
	config_defaults(&c);
	assert_string_equal(c.llm_url, "");
	assert_string_equal(c.llm_model, "");
	assert_string_equal(c.llm_key_file, "");
	assert_string_equal(c.llm_system_prompt_file, "");
	assert_int_equal(c.llm_timeout_ms, 120000);
	assert_int_equal(c.llm_rounds, 1);
	assert_int_equal(c.llm_history, 20);
}

static void test_llm_every_key(void **state)
{
	struct config c;

	(void)state;
	c = expect_ok("llm_url = http://127.0.0.1:11434/v1\n"
		      "llm_model = llama3.1:8b\n"
		      "llm_key_file = /etc/roombox/llm-key\n"
		      "llm_system_prompt_file = /etc/roombox/prompt.txt\n"
		      "llm_timeout = 90s\n"
		      "llm_rounds = 3\n"
		      "llm_history = 0\n");
	assert_string_equal(c.llm_url, "http://127.0.0.1:11434/v1");
	assert_string_equal(c.llm_model, "llama3.1:8b");
	assert_string_equal(c.llm_key_file, "/etc/roombox/llm-key");
	assert_string_equal(c.llm_system_prompt_file, "/etc/roombox/prompt.txt");
	assert_int_equal(c.llm_timeout_ms, 90000);
	assert_int_equal(c.llm_rounds, 3);
	assert_int_equal(c.llm_history, 0);
	c = expect_ok("llm_model = gpt-4o-mini\nllm_url = https://api.openai.com/v1\n");
	assert_string_equal(c.llm_url, "https://api.openai.com/v1");
}

static void test_llm_bad_values(void **state)
{
	(void)state;
	expect_error("llm_url = ftp://host/v1\n",
		     "t.conf:1: bad value for llm_url: 'ftp://host/v1' (expected an "
		     "http:// or https:// URL like http://127.0.0.1:11434/v1)");
	expect_error("llm_url = http:///v1\n",
		     "t.conf:1: bad value for llm_url: 'http:///v1' (expected an "
		     "http:// or https:// URL like http://127.0.0.1:11434/v1)");
	expect_error("llm_url = http://\n",
		     "t.conf:1: bad value for llm_url: 'http://' (expected an "
		     "http:// or https:// URL like http://127.0.0.1:11434/v1)");
	expect_error("llm_url = localhost:8080/v1\n",
		     "t.conf:1: bad value for llm_url: 'localhost:8080/v1' (expected an "
		     "http:// or https:// URL like http://127.0.0.1:11434/v1)");
	expect_error("llm_model = my model\n",
		     "t.conf:1: bad value for llm_model: 'my model' (expected a name "
		     "without blanks, like llama3.1:8b)");
	expect_error("llm_model =\n",
		     "t.conf:1: bad value for llm_model: '' (expected a name "
		     "without blanks, like llama3.1:8b)");
	expect_error("llm_key_file = key\n",
		     "t.conf:1: bad value for llm_key_file: 'key' (expected an absolute path)");
	expect_error("llm_system_prompt_file = p.txt\n",
		     "t.conf:1: bad value for llm_system_prompt_file: 'p.txt' (expected an absolute path)");
	expect_error("llm_timeout = 0\n",
		     "t.conf:1: bad value for llm_timeout: '0' (expected a duration like 30s, greater than 0)");
	expect_error("llm_rounds = 0\n",
		     "t.conf:1: bad value for llm_rounds: '0' (expected a whole number from 1 to 2147483647)");
	expect_error("llm_history = -1\n",
		     "t.conf:1: bad value for llm_history: '-1' (expected a whole number from 0 to 2147483647)");
}

static void test_llm_url_and_model_go_together(void **state)
{
	(void)state;
	expect_error("llm_url = http://127.0.0.1:8080/v1\nworkers = 2\n",
		     "t.conf:1: llm_url and llm_model go together: set both (the agent) or neither");
	expect_error("workers = 2\nllm_model = m\n",
		     "t.conf:2: llm_url and llm_model go together: set both (the agent) or neither");
	/* the key file alone turns nothing on */
	expect_ok("llm_key_file = /etc/roombox/llm-key\n");
}

static void test_llm_url_length_limit(void **state)
{
	char text[700], url[600];

	(void)state;
	memset(url, 'h', sizeof(url));
	memcpy(url, "http://", 7);
	url[511] = '\0';
	snprintf(text, sizeof(text), "llm_model = m\nllm_url = %s\n", url);
	expect_ok(text);
	url[511] = 'h';
	url[512] = '\0';
	snprintf(text, sizeof(text), "llm_model = m\nllm_url = %s\n", url);
	expect_error(text, "t.conf:2: value for llm_url is too long (512 bytes, at most 511)");
}

/* ---- preview_domain ---- */

static void test_preview_domain(void **state)
{
	(void)state;
	struct config c;
	config_defaults(&c);
	assert_string_equal(c.preview_domain, "");
	c = expect_ok("preview_domain = preview.example.com\n");
	assert_string_equal(c.preview_domain, "preview.example.com");
	c = expect_ok("preview_domain = localhost\n");
	assert_string_equal(c.preview_domain, "localhost");
	c = expect_ok("preview_domain = a-1.b2.test\n");
	assert_string_equal(c.preview_domain, "a-1.b2.test");
	static const char *const bad[] = {
		"Preview.example.com", "preview..example", ".example.com", "example.com.",
		"-a.example", "a-.example", "ex_ample.com", "http://example.com", "example.com/x",
		"example.com:8080", "*.example.com",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char text[128], want[256];
		snprintf(text, sizeof(text), "preview_domain = %s\n", bad[i]);
		snprintf(want, sizeof(want), "t.conf:1: bad value for preview_domain: '%s' "
			 "(expected a lower-case DNS name like preview.example.com)", bad[i]);
		expect_error(text, want);
	}
	/* a label is at most 63 bytes */
	char text[128];
	snprintf(text, sizeof(text), "preview_domain = %064d.test\n", 0);
	struct config d;
	char err[512];
	assert_int_equal(parse(&d, text, err, sizeof(err)), -1);
}

static void test_cluster_keys(void **state)
{
	struct config c;

	(void)state;
	config_defaults(&c);
	assert_string_equal(c.cluster_etcd, "");   /* single host */
	c = expect_ok("cluster_etcd = http://10.0.0.1:2379, http://10.0.0.2:2379 http://10.0.0.3:2379\n"
		      "cluster_host = h1-a\n"
		      "cluster_url = http://10.0.0.1:8080\n"
		      "cluster_key_file = /etc/roombox/cluster-key\n");
	assert_string_equal(c.cluster_etcd, "http://10.0.0.1:2379, http://10.0.0.2:2379 http://10.0.0.3:2379");
	assert_string_equal(c.cluster_host, "h1-a");
	assert_string_equal(c.cluster_url, "http://10.0.0.1:8080");
	assert_string_equal(c.cluster_key_file, "/etc/roombox/cluster-key");
	expect_error("cluster_etcd = https://e:2379\n",
		     "t.conf:1: bad value for cluster_etcd: 'https://e:2379' (expected http:// URLs "
		     "like http://10.0.0.1:2379, separated by commas or spaces)");
	expect_error("cluster_etcd = http://a:1,,ftp://b\n",
		     "t.conf:1: bad value for cluster_etcd: 'http://a:1,,ftp://b' (expected http:// URLs "
		     "like http://10.0.0.1:2379, separated by commas or spaces)");
	expect_error("cluster_host = H1\n",
		     "t.conf:1: bad value for cluster_host: 'H1' (expected a host name of 1 to 32 "
		     "characters a-z, 0-9 and -, like h1)");
	expect_error("cluster_host = aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n",
		     "t.conf:1: bad value for cluster_host: 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa' (expected "
		     "a host name of 1 to 32 characters a-z, 0-9 and -, like h1)");
	expect_error("cluster_etcd = http://a:1\ncluster_host = h1\n",
		     "t.conf:2: cluster_etcd needs cluster_host and cluster_url: the name this host "
		     "has in etcd and the URL peers and the router reach it at");
	c = expect_ok("cluster_host = h1\n");   /* named, but single host */
	assert_string_equal(c.cluster_etcd, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_empty_and_comment_only_text_keeps_defaults),
		cmocka_unit_test(test_every_key),
		cmocka_unit_test(test_auth_token_and_rootfs_host),
		cmocka_unit_test(test_zero_allowed_where_it_means_off),
		cmocka_unit_test(test_drain_ms_bare_number_is_milliseconds),
		cmocka_unit_test(test_parse_layers_on_current_values),
		cmocka_unit_test(test_whitespace_and_comments),
		cmocka_unit_test(test_hash_inside_value_is_kept),
		cmocka_unit_test(test_crlf_bom_and_no_final_newline),
		cmocka_unit_test(test_value_with_inner_spaces),
		cmocka_unit_test(test_unknown_key),
		cmocka_unit_test(test_line_without_equals),
		cmocka_unit_test(test_duplicate_key),
		cmocka_unit_test(test_error_stops_at_first_bad_line),
		cmocka_unit_test(test_bad_size_values),
		cmocka_unit_test(test_bad_duration_values),
		cmocka_unit_test(test_bad_integer_values),
		cmocka_unit_test(test_integer_bounds_accepted),
		cmocka_unit_test(test_log_format_and_metrics),
		cmocka_unit_test(test_bad_log_format_and_metrics),
		cmocka_unit_test(test_bad_enum_values),
		cmocka_unit_test(test_network_defaults_and_egress),
		cmocka_unit_test(test_dns_list),
		cmocka_unit_test(test_egress_cidr_lists),
		cmocka_unit_test(test_list_length_limit),
		cmocka_unit_test(test_bad_cpu_values),
		cmocka_unit_test(test_good_cpu_values),
		cmocka_unit_test(test_paths_must_be_absolute),
		cmocka_unit_test(test_string_length_limits),
		cmocka_unit_test(test_exec_timeout_above_max),
		cmocka_unit_test(test_uid_range),
		cmocka_unit_test(test_exec_user),
		cmocka_unit_test(test_small_and_null_error_buffer),
		cmocka_unit_test(test_parse_size),
		cmocka_unit_test(test_parse_duration),
		cmocka_unit_test(test_load_file),
		cmocka_unit_test(test_load_error_names_file_and_line),
		cmocka_unit_test(test_load_missing_file),
		cmocka_unit_test(test_load_directory),
		cmocka_unit_test(test_load_rejects_nul_byte),
		cmocka_unit_test(test_load_rejects_huge_file),
		cmocka_unit_test(test_max_body_is_bounded_by_the_helpers_budget),
		cmocka_unit_test(test_output_limit_is_bounded_by_the_helpers_budget),
		cmocka_unit_test(test_llm_defaults),
		cmocka_unit_test(test_llm_every_key),
		cmocka_unit_test(test_llm_bad_values),
		cmocka_unit_test(test_llm_url_and_model_go_together),
		cmocka_unit_test(test_llm_url_length_limit),
		cmocka_unit_test(test_preview_domain),
		cmocka_unit_test(test_cluster_keys),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
