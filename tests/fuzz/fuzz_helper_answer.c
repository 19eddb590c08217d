/* Fuzz target: roombox-fcgi's decoder of the helper's answers
 * (fcgi-app/helper_client.c, helper_answer_decode), on any bytes.
 *
 * Input: the first byte picks the op asked (and whether the helper exited
 * 0 or 1), the rest is what the helper wrote on its stdout.
 *
 * Invariants: an accepted answer's record lies inside the input, right
 * after the header, of the op's exact size (a list or a stop's count of
 * entries filling it exactly, an export's two session texts after its
 * record, without a NUL); nothing follows it; a refusal says why, with an
 * HTTP status. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "fuzz.h"
#include "helper_client.h"
#include "protocol.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct helper_error err;
	const char *rec;
	size_t rec_len;

	if (size < 1)
		return 0;
	uint32_t op = 1 + (data[0] & 0x7f) % (HOP_COUNT - 1);
	int status = (data[0] & 0x80) ? 1 << 8 : 0;   /* exit status 1 or 0 */
	size -= 1;
	char *buf = malloc(size ? size : 1);
	memcpy(buf, data + 1, size);
	int rc = helper_answer_decode(op, status, buf, size, &rec, &rec_len, &err);
	if (rc < 0) {
		FUZZ_ASSERT(rc == -1 && err.message[0] && err.http_status >= 400, "refused without a reason");
		free(buf);
		return 0;
	}
	FUZZ_ASSERT(status == 0, "accepted with exit status 1");
	FUZZ_ASSERT(rec == buf + sizeof(struct helper_ans) && rec + rec_len <= buf + size, "record outside");
	switch (op) {
	case HOP_EXEC:
		FUZZ_ASSERT(rec_len == sizeof(struct helper_exec_ans), "exec record %zu", rec_len);
		break;
	case HOP_LIST: case HOP_STOP_IDLE: case HOP_STOP_ALL: {
		uint32_t count;
		size_t each = op == HOP_LIST ? sizeof(struct helper_status) : HELPER_ROOM_LEN;
		memcpy(&count, rec, sizeof(count));
		FUZZ_ASSERT(rec_len == sizeof(struct helper_list_ans) + count * each, "count %u in %zu",
			    count, rec_len);
		break;
	}
	case HOP_STATUS: case HOP_CREATE: case HOP_SET_LIMITS:
		FUZZ_ASSERT(rec_len == sizeof(struct helper_status), "status %zu", rec_len);
		break;
	case HOP_INFO:
		FUZZ_ASSERT(rec_len == sizeof(struct helper_info_ans), "info %zu", rec_len);
		break;
	case HOP_KILL_ALL:
		FUZZ_ASSERT(rec_len == sizeof(struct helper_killed_ans), "kill-all %zu", rec_len);
		break;
	case HOP_SNAPSHOT: case HOP_SNAPSHOT_DELETE: case HOP_RESTORE: case HOP_FORK:
		FUZZ_ASSERT(rec_len == sizeof(struct helper_snapshot), "snapshot %zu", rec_len);
		break;
	case HOP_EXPORT: {
		/* the record, then the root's and the user's session texts */
		struct helper_export_ans x;
		FUZZ_ASSERT(rec_len >= sizeof(x), "export record %zu", rec_len);
		memcpy(&x, rec, sizeof(x));
		FUZZ_ASSERT(x.root_len <= HELPER_SESSION_MAX && x.user_len <= HELPER_SESSION_MAX &&
			    rec_len == sizeof(x) + (size_t)x.root_len + x.user_len,
			    "sessions of %u and %u in %zu", x.root_len, x.user_len, rec_len);
		FUZZ_ASSERT(!memchr(rec + sizeof(x), '\0', rec_len - sizeof(x)), "a NUL in a session");
		FUZZ_ASSERT(memchr(x.snapshot, '\0', sizeof(x.snapshot)), "an unended snapshot id");
		break;
	}
	case HOP_SNAPSHOTS: {
		uint32_t count;
		memcpy(&count, rec, sizeof(count));
		FUZZ_ASSERT(rec_len == sizeof(struct helper_snapshots_ans) +
			    (size_t)count * sizeof(struct helper_snapshot), "count %u in %zu", count, rec_len);
		break;
	}
	default:
		FUZZ_ASSERT(rec_len == 0, "empty answer %zu", rec_len);
	}
	FUZZ_ASSERT(rec + rec_len == buf + size, "bytes after the answer");
	free(buf);
	return 0;
}
