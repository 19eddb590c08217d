/* Fuzz target: the configuration parser (config_parse) on any text.
 *
 * Input: the file's contents (cut at a NUL, as config_load refuses those).
 *
 * Invariants: a refused text gets "fuzz.conf:<line>: <reason>"; an
 * accepted one leaves a configuration that holds what the parser checks:
 * NUL-terminated absolute paths, numbers at or above their minimum, the
 * socket path fitting sun_path, exec_timeout <= exec_timeout_max,
 * uid_base + max_rooms below 2^31, 0 < cpu_limit <= 65536; cluster_host
 * of [a-z0-9-]{0,32}, and cluster_etcd only with cluster_host and
 * cluster_url. */
#include <stdint.h>
#include <string.h>
#include <sys/un.h>

#include "config.h"
#include "fuzz.h"

static void check_path(const char *field, size_t size, const char *name, bool host_ok)
{
	size_t n = strnlen(field, size);

	FUZZ_ASSERT(n < size, "%s not NUL-terminated", name);
	FUZZ_ASSERT(field[0] == '/' || (host_ok && strcmp(field, "host") == 0),
		    "%s = '%s' accepted", name, field);
}

#define CHECK_PATH(c, f, host_ok) check_path((c)->f, sizeof((c)->f), #f, host_ok)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1), err[512];
	struct config c;
	int rc;

	FUZZ_ASSERT(text, "out of memory");
	memcpy(text, data, size);
	text[size] = '\0';
	config_defaults(&c);
	memset(err, 'x', sizeof(err));
	rc = config_parse(&c, "fuzz.conf", text, err, sizeof(err));
	free(text);
	FUZZ_ASSERT(memchr(err, '\0', sizeof(err)), "error text not terminated");
	if (rc < 0) {
		FUZZ_ASSERT(strncmp(err, "fuzz.conf:", 10) == 0 && strlen(err) > 12,
			    "refused without a located reason: '%s'", err);
		return 0;
	}
	FUZZ_ASSERT(rc == 0 && err[0] == '\0', "rc %d, err '%s'", rc, err);
	CHECK_PATH(&c, state_dir, false);
	CHECK_PATH(&c, run_dir, false);
	CHECK_PATH(&c, socket, false);
	CHECK_PATH(&c, tokens_file, false);
	CHECK_PATH(&c, rootfs, true);
	CHECK_PATH(&c, helper, false);
	FUZZ_ASSERT(strlen(c.socket) < sizeof(((struct sockaddr_un *)0)->sun_path),
		    "socket path does not fit sun_path");
	FUZZ_ASSERT(c.workers >= 1 && c.max_rooms >= 1 && c.pids_limit >= 1 &&
		    c.max_concurrent_execs >= 1, "a count below 1");
	FUZZ_ASSERT(c.uid_base >= 1000 &&
		    (uint64_t)c.uid_base + (uint64_t)c.max_rooms < (1ull << 31),
		    "uid range %u + %d", c.uid_base, c.max_rooms);
	FUZZ_ASSERT(c.memory_limit >= 1 && c.output_limit >= 1 && c.max_body >= 1 &&
		    c.exec_timeout_ms >= 1, "a size or duration below its minimum");
	FUZZ_ASSERT(c.exec_timeout_ms <= c.exec_timeout_max_ms, "exec_timeout > max");
	FUZZ_ASSERT(c.cpu_limit > 0 && c.cpu_limit <= 65536.0, "cpu_limit %g", c.cpu_limit);
	FUZZ_ASSERT(c.auth == AUTH_TOKEN || c.auth == AUTH_NONE, "auth %d", (int)c.auth);
	size_t hn = strnlen(c.cluster_host, sizeof(c.cluster_host));
	FUZZ_ASSERT(hn < sizeof(c.cluster_host) && hn <= 32 &&
		    strspn(c.cluster_host, "abcdefghijklmnopqrstuvwxyz0123456789-") == hn,
		    "cluster_host '%s' accepted", c.cluster_host);
	/* cluster mode needs its name and URL (fcgi-app/cluster/) */
	if (strspn(c.cluster_etcd, ", ") != strlen(c.cluster_etcd))
		FUZZ_ASSERT(c.cluster_host[0] && c.cluster_url[0], "cluster_etcd without host or url");
	return 0;
}
