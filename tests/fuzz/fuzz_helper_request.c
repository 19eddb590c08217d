/* Fuzz target: the setuid helper's request reader (sandbox-helper/request.c)
 * on any bytes.
 *
 * Input: what a caller writes on the helper's stdin (a request record of
 * common/protocol.h, or anything else).
 *
 * Invariants:
 *   - request_read from a descriptor holding the input takes it whole only
 *     when its header's size is the input's exact length and at most
 *     helper_request_max(max_body); else it refuses with a message;
 *   - request_decode accepts only what holds together: a known op, a valid
 *     room exactly where the op takes one, and nstrings NUL-terminated
 *     strings inside the request; an accepted request built again with the
 *     client's encoder (common/helper_rec.c) from what was decoded is the
 *     input byte for byte, so what the helper acts on is what was sent;
 *   - request_exec_order answers 0, "invalid" or "failed" with a message;
 *     when it accepts, cmd is non-empty, cwd absolute, every env string
 *     "NAME=value" with a name, the timeout within exec_timeout_max, and a
 *     tool 1..TOOL_ARGS_MAX arguments.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "config.h"
#include "fuzz.h"
#include "helper_rec.h"
#include "protocol.h"
#include "request.h"
#include "roomid.h"

#define FUZZ_MAX_BODY 4096   /* small, so that inputs cross the limit */

static struct request_shape shapes[HOP_COUNT];

static void shapes_init(void)
{
	for (uint32_t op = 1; op < HOP_COUNT; op++)
		shapes[op] = (struct request_shape){ 0, true, true };
	shapes[HOP_EXEC].args_size = sizeof(struct helper_exec_args);
	shapes[HOP_STOP_IDLE].args_size = sizeof(struct helper_keep_args);
	shapes[HOP_PORT_CONNECT].args_size = sizeof(struct helper_port_args);
	shapes[HOP_SET_LIMITS].args_size = sizeof(struct helper_limits_args);
	for (uint32_t op = HOP_SNAPSHOT; op <= HOP_FORK; op++)
		shapes[op].args_size = sizeof(struct helper_snap_args);
	shapes[HOP_LIST].room = shapes[HOP_STOP_IDLE].room = shapes[HOP_STOP_ALL].room =
		shapes[HOP_INFO].room = false;
}

static void check_read(const uint8_t *data, size_t size)
{
	static int fd = -1;
	char err[256] = "", *buf = NULL;
	size_t len = 0;
	uint64_t limit = helper_request_max(FUZZ_MAX_BODY);

	if (fd < 0)
		fd = memfd_create("fuzz-request", 0);
	FUZZ_ASSERT(fd >= 0, "memfd_create");
	FUZZ_ASSERT(ftruncate(fd, 0) == 0 && pwrite(fd, data, size, 0) == (ssize_t)size, "memfd write");
	FUZZ_ASSERT(lseek(fd, 0, SEEK_SET) == 0, "lseek");
	int rc = request_read(fd, FUZZ_MAX_BODY, &buf, &len, err, sizeof(err));
	if (rc == 0) {
		const struct helper_req *h = (const void *)data;
		FUZZ_ASSERT(size >= sizeof(*h) && h->size == size && size <= limit &&
			    h->magic == HELPER_MAGIC && h->version == HELPER_VERSION,
			    "accepted %zu bytes", size);
		FUZZ_ASSERT(len == size && memcmp(buf, data, size) == 0, "read back differs");
	} else {
		FUZZ_ASSERT(rc == -1 && err[0] && !buf, "refused without a message");
	}
	free(buf);
}

static void check_exec(const struct request *rq)
{
	struct config cfg;
	struct exec_order q;
	char err[256] = "";

	config_defaults(&cfg);
	int code = request_exec_order(rq, &cfg, &q, err, sizeof(err));
	FUZZ_ASSERT(code == 0 || ((code == HELPER_E_INVALID || code == HELPER_E_FAILED) && err[0]),
		    "code %d '%s'", code, err);
	if (code)
		return;
	FUZZ_ASSERT(q.cmd && q.cmd[0], "empty cmd");
	FUZZ_ASSERT(!q.cwd || q.cwd[0] == '/', "relative cwd");
	FUZZ_ASSERT(q.timeout_ms > 0 && q.timeout_ms <= cfg.exec_timeout_max_ms, "timeout %llu",
		    (unsigned long long)q.timeout_ms);
	const char *e = q.env;
	for (uint32_t i = 0; i < q.nenv; i++, e = request_next(e))
		FUZZ_ASSERT(strchr(e, '=') && e[0] != '=', "env '%s'", e);
	if (q.is_tool) {
		size_t n = 0;
		while (n <= TOOL_ARGS_MAX && q.tool[n])
			n++;
		FUZZ_ASSERT(n >= 1 && n <= TOOL_ARGS_MAX && !q.env && !q.cwd, "tool");   /* detached or not: the pty tool is */
	}
}

/* Built again from what was decoded: the same bytes. */
static void check_round_trip(const struct request *rq, const uint8_t *data, size_t size)
{
	struct helper_rec b;
	size_t len = 0;
	const char *s = rq->strings;

	helper_rec_begin(&b, rq->op, rq->room, rq->args, shapes[rq->op].args_size);
	for (uint32_t i = 0; i < rq->nstrings; i++, s = request_next(s))
		helper_rec_string(&b, s, strlen(s));
	char *again = helper_rec_end(&b, &len);
	FUZZ_ASSERT(again && len == size && memcmp(again, data, size) == 0, "round trip differs");
	free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct request rq;
	char err[256] = "";

	if (!shapes[HOP_EXEC].known)
		shapes_init();
	check_read(data, size);
	/* a copy of its exact size, so ASan sees any read past it */
	char *buf = malloc(size ? size : 1);
	memcpy(buf, data, size);
	int rc = request_decode(buf, size, shapes, &rq, err, sizeof(err));
	if (rc < 0) {
		FUZZ_ASSERT(rc == -1 && err[0], "refused without a message");
		free(buf);
		return 0;
	}
	FUZZ_ASSERT(rq.op > 0 && rq.op < HOP_COUNT, "op %u", rq.op);
	FUZZ_ASSERT(shapes[rq.op].room ? rq.room && room_id_valid(rq.room) : !rq.room, "room");
	const char *s = rq.strings;
	for (uint32_t i = 0; i < rq.nstrings; i++)
		s = request_next(s);
	FUZZ_ASSERT(s == buf + size, "strings end %td before the request's end", buf + size - s);
	if (rq.op == HOP_EXEC)
		check_exec(&rq);
	check_round_trip(&rq, data, size);
	free(buf);
	return 0;
}
