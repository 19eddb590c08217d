/* Fuzz target: the keeper's reader of exec-channel requests
 * (common/exec_channel.c, kc_parse), on any record, descriptor count and
 * text: what roombox-fcgi (or whoever holds a channel) sends is untrusted.
 *
 * Input: one byte, the descriptor count (0-15: the request's must be
 * KC_REQ_FDS); one byte, the record's length (0-255: its must be
 * sizeof(struct kc_req)); that many bytes of record (zero-padded when the
 * input is shorter); the rest is the text, as read from its descriptor.
 *
 * Invariants: kc_parse accepts only a record of exactly its size, with
 * KC_MAGIC, KC_VERSION, KC_EXEC, known flags, KC_REQ_FDS descriptors
 * (one fewer with KC_INLINE, the text then being what followed the
 * struct), a timeout, at most KC_ENV_MAX env strings and a text_size
 * equal to the text's length (1..KC_TEXT_MAX; with KC_INLINE
 * 1..KC_INLINE_MAX).  When it accepts, the text is exactly
 * the command, the cwd (with KC_CWD; absolute) and nenv strings each
 * holding '=', back to back; every pointer it gives is inside the text;
 * the order's fields are the record's.  When it refuses, it says why.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "exec_channel.h"
#include "fuzz.h"

/* The record as the protocol says it must be, written out again here. */
static bool record_ok(const uint8_t *rec, size_t len, int nfds, size_t text_len)
{
	struct kc_req q;
	if (len != sizeof(q))
		return false;
	memcpy(&q, rec, sizeof(q));
	bool inl = (q.flags & KC_INLINE) != 0;
	return q.magic == KC_MAGIC && q.version == KC_VERSION && q.op == KC_EXEC &&
	       !(q.flags & ~KC_ALL) && nfds == (inl ? KC_REQ_FDS - 1 : KC_REQ_FDS) && q.timeout_ms > 0 &&
	       q.nenv <= KC_ENV_MAX && q.text_size >= 1 &&
	       q.text_size <= (inl ? KC_INLINE_MAX : KC_TEXT_MAX) && q.text_size == text_len;
}

static void check_accepted(const struct kc_order *o, const struct kc_req *q, const char *text,
			   size_t len)
{
	const char *end = text + len, *at = text;
	FUZZ_ASSERT(o->cmd == text, "cmd is not the text's start");
	FUZZ_ASSERT(o->as_user == !!(q->flags & KC_AS_USER) &&
		    o->timeout_cap == !!(q->flags & KC_TIMEOUT_CAP) && o->timeout_ms == q->timeout_ms &&
		    o->nenv == q->nenv, "order fields are not the record's");
	FUZZ_ASSERT(!!o->cwd == !!(q->flags & KC_CWD), "cwd without KC_CWD, or missing");
	uint32_t want = 1 + (o->cwd ? 1 : 0) + q->nenv;
	for (uint32_t i = 0; i < want; i++) {
		FUZZ_ASSERT(at < end, "string %u past the text", i);
		size_t n = strnlen(at, (size_t)(end - at));
		FUZZ_ASSERT(at + n < end, "string %u not NUL-terminated inside the text", i);
		if (i == 1 && o->cwd)
			FUZZ_ASSERT(o->cwd == at && at[0] == '/', "cwd not absolute or misplaced");
		if (i == want - q->nenv && q->nenv)
			FUZZ_ASSERT(o->env == at, "env misplaced");
		if (i >= want - q->nenv)
			FUZZ_ASSERT(memchr(at, '=', n), "env string %u without '='", i);
		at += n + 1;
	}
	FUZZ_ASSERT(at == end, "bytes after the last string accepted");
	FUZZ_ASSERT(q->nenv || !o->env, "env given without strings");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	int nfds = data[0] & 15;
	size_t rec_len = data[1];
	data += 2;
	size -= 2;
	uint8_t rec[256] = { 0 };
	memcpy(rec, data, rec_len < size ? rec_len : size);
	size_t skip = rec_len < size ? rec_len : size;
	size_t text_len = size - skip;
	char *text = malloc(text_len + 1);
	FUZZ_ASSERT(text, "malloc");
	memcpy(text, data + skip, text_len);
	text[text_len] = '\0';

	struct kc_order o;
	char why[160] = "";
	int rc = kc_parse(rec, rec_len, nfds, text, text_len, &o, why, sizeof(why));
	if (rc == 0) {
		struct kc_req q;
		FUZZ_ASSERT(record_ok(rec, rec_len, nfds, text_len), "a bad record accepted");
		memcpy(&q, rec, sizeof(q));
		check_accepted(&o, &q, text, text_len);
	} else {
		FUZZ_ASSERT(rc == -1 && why[0], "refused without a reason");
	}
	free(text);
	return 0;
}
