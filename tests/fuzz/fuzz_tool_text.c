/* Fuzz target: the keeper's tools' readers of bytes a client controls
 * (sandbox-helper/keeper/tool_text.c).
 *
 * Input: the last bytes of an upload (its end mark, or whatever a client
 * sent there), a mode's text and a name to list.
 *
 * Invariants: tool_put_end_check accepts exactly the marks tool_put_end
 * writes with the request's nonce, for exactly the count of bytes before
 * them, and never one with another nonce; tool_mode_parse
 * accepts 1 to 4 octal digits and nothing else, giving at most 07777;
 * tool_entry_record never writes past its buffer and, when it answers,
 * answers one record ending with the name and its NUL.
 */
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"
#include "protocol.h"
#include "tool_text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char mark[TOOL_PUT_END_LEN + 1], again[TOOL_PUT_END_LEN + 1], text[64], rec[96];
	uint64_t stored = 0, len = 0;
	mode_t m = 0;

	if (size < TOOL_PUT_END_LEN + 8)
		return 0;
	memcpy(mark, data, TOOL_PUT_END_LEN);
	memcpy(&stored, data + TOOL_PUT_END_LEN, 8);
	/* the nonce: a fixed one, and a mark the fuzzer made may carry it */
	static const char nonce[] = "0123456789abcdef0123456789abcdef";
	if (tool_put_end_check(mark, nonce, stored, &len) == 0) {
		FUZZ_ASSERT(stored >= TOOL_PUT_END_LEN && len == stored - TOOL_PUT_END_LEN, "wrong length");
		tool_put_end(again, nonce, len);
		FUZZ_ASSERT(memcmp(again, mark, TOOL_PUT_END_LEN) == 0, "accepted a mark not written so");
	}
	/* the same bytes never pass for another request's mark */
	FUZZ_ASSERT(tool_put_end_check(mark, "fedcba9876543210fedcba9876543210", stored, &len) < 0 ||
		    memcmp(mark + 7, "fedcba9876543210fedcba9876543210", TOOL_NONCE_LEN) == 0,
		    "accepted a mark with another nonce");
	data += TOOL_PUT_END_LEN + 8;
	size -= TOOL_PUT_END_LEN + 8;
	size_t n = size < sizeof(text) - 1 ? size : sizeof(text) - 1;
	memcpy(text, data, n);
	text[n] = '\0';
	if (tool_mode_parse(text, &m) == 0)
		FUZZ_ASSERT(strlen(text) >= 1 && strlen(text) <= 4 && strspn(text, "01234567") == strlen(text) &&
			    m <= 07777, "accepted mode %s", text);
	struct stat st = { .st_mode = (mode_t)(S_IFREG | (n & 07777)), .st_size = (off_t)n };
	size_t cap = n % sizeof(rec);
	size_t got = tool_entry_record(rec, cap, &st, text);
	if (got) {
		size_t tl = strlen(text);
		FUZZ_ASSERT(got <= cap && rec[got - 1] == '\0' && got > tl &&
			    memcmp(rec + got - 1 - tl, text, tl) == 0, "bad record");
	}
	return 0;
}
