/* libFuzzer target: the WebSocket frame reader (fcgi-app/http/ws_frame.c), the
 * first code a terminal client's bytes reach.
 *
 * Input: the bytes a client sends after the handshake, fed as a server
 * reads them (in chunks whose sizes the input's first byte picks).
 * Whatever they are, the reader stays in its buffers, uses no byte it was
 * not given, never holds more than its bound for a message, hands out
 * text and close reasons only when valid UTF-8, control payloads only up
 * to 125 bytes, and once it refuses, gives a close code a server may
 * send and a reason. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "ws_frame.h"

#define BOUND 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t chunk = 1 + data[0] % 64;
	data++;
	size--;

	struct ws_reader r;
	ws_reader_init(&r, BOUND);
	size_t cap = ws_frame_max_wire(&r);
	unsigned char *buf = malloc(cap);
	size_t have = 0, off = 0;
	FUZZ_ASSERT(buf, "malloc");

	for (;;) {
		size_t take = size - off < chunk ? size - off : chunk;
		if (take > cap - have)
			take = cap - have;
		memcpy(buf + have, data + off, take);
		have += take;
		off += take;
		struct ws_event ev;
		uint16_t code = 0;
		const char *why = NULL;
		ssize_t used;
		while ((used = ws_reader_feed(&r, buf, have, &ev, &code, &why)) > 0) {
			FUZZ_ASSERT((size_t)used <= have, "used %zd of %zu", used, have);
			if (ev.op == WS_TEXT)
				FUZZ_ASSERT(fuzz_utf8_valid((const char *)ev.data, ev.len), "text not UTF-8");
			if (ev.op == WS_TEXT || ev.op == WS_BINARY)
				FUZZ_ASSERT(ev.len <= BOUND, "message of %zu", ev.len);
			if (ev.op >= WS_CLOSE)
				FUZZ_ASSERT(ev.len <= WS_CONTROL_MAX, "control of %zu", ev.len);
			if (ev.op == WS_CLOSE)
				FUZZ_ASSERT(fuzz_utf8_valid((const char *)ev.data, ev.len), "reason not UTF-8");
			FUZZ_ASSERT(r.msg_cap <= BOUND, "held %zu", r.msg_cap);
			memmove(buf, buf + used, have - (size_t)used);
			have -= (size_t)used;
		}
		if (used < 0) {
			FUZZ_ASSERT(why && *why, "no reason");
			FUZZ_ASSERT(code == WS_CLOSE_PROTOCOL || code == WS_CLOSE_BAD_DATA ||
				    code == WS_CLOSE_TOO_BIG || code == WS_CLOSE_ERROR, "code %u", code);
			break;
		}
		/* a reader waiting for more with a full buffer would wait forever */
		FUZZ_ASSERT(have < cap, "buffer full and no frame");
		if (off == size)
			break;
	}
	free(buf);
	ws_reader_free(&r);
	return 0;
}
