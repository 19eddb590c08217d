/* libFuzzer target: the head of a preview request (fcgi-app/preview_head.c),
 * the first bytes a browser's connection sends through the web server.
 *
 * Input: byte 0 bit 0 says whether a preview_domain ("preview.test") is
 * configured; the rest is the head.  Whatever it is given, the parser must
 * stay inside the buffer and PREVIEW_HEAD_MAX, hand out only well-formed
 * tokens, rooms and ports, and rewrite to a head that is the original's
 * request line with only its target changed, never longer than
 * head_len + PREVIEW_HEAD_GROWTH: the header lines as they came, or (a kept
 * exchange) without Connection and Keep-Alive, "Connection: close" last. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "fuzz.h"
#include "preview_head.h"
#include "roomid.h"

static char out[PREVIEW_HEAD_MAX + PREVIEW_HEAD_GROWTH];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct preview_head h;
	if (size < 1)
		return 0;
	const char *domain = (data[0] & 1) ? "preview.test" : NULL;
	const char *buf = (const char *)data + 1;
	size_t len = size - 1;
	enum preview_head_result r = preview_head_parse(buf, len, domain, &h);
	if (r != PREVIEW_HEAD_OK)
		return 0;
	FUZZ_ASSERT(h.head_len <= len && h.head_len <= PREVIEW_HEAD_MAX, "head_len %zu of %zu", h.head_len, len);
	FUZZ_ASSERT(preview_token_valid(h.token, strlen(h.token)), "token '%s'", h.token);
	FUZZ_ASSERT(h.target_off + h.target_len <= h.rest_off && h.rest_off < h.head_len,
		    "target %zu+%zu, rest %zu, head %zu", h.target_off, h.target_len, h.rest_off, h.head_len);
	if (h.host_style) {
		FUZZ_ASSERT(domain != NULL, "host-style without a domain");
		FUZZ_ASSERT(h.port >= 1 && h.port <= 65535, "port %d", h.port);
		FUZZ_ASSERT(room_id_valid(h.room), "room '%s'", h.room);
	}
	size_t n = preview_head_rewrite(&h, buf, out, sizeof(out));
	FUZZ_ASSERT(n > 0 && n <= h.head_len + PREVIEW_HEAD_GROWTH, "rewritten %zu of %zu", n, h.head_len);
	FUZZ_ASSERT(memcmp(out, buf, h.method_len + 1) == 0, "method changed");
	FUZZ_ASSERT(out[h.method_len + 1] == '/', "target does not start with /");
	size_t tail = h.head_len - h.rest_off;
	if (!h.keep) {
		FUZZ_ASSERT(h.framed || h.body_len == 0, "a length for a request not framed");
		FUZZ_ASSERT(memcmp(out + n - tail, buf + h.rest_off, tail) == 0, "header lines changed");
		return 0;
	}
	FUZZ_ASSERT(h.framed && memcmp(buf + h.rest_off, " HTTP/1.1", 9) == 0, "kept, not framed HTTP/1.1");
	size_t blank = out[n - 2] == '\r' ? 2 : 1;
	static const char close_line[] = "Connection: close\r\n";
	size_t cl = sizeof(close_line) - 1;
	FUZZ_ASSERT(n >= cl + blank && memcmp(out + n - blank - cl, close_line, cl) == 0,
		    "kept, no Connection: close last");
	for (size_t i = 1; i < n - blank - cl; i++)
		if (out[i - 1] == '\n')
			FUZZ_ASSERT(strncasecmp(out + i, "connection:", 11) != 0 &&
				    strncasecmp(out + i, "keep-alive:", 11) != 0 &&
				    strncasecmp(out + i, "transfer-encoding:", 18) != 0 &&
				    strncasecmp(out + i, "upgrade:", 8) != 0, "kept with a field it cannot keep");
	return 0;
}
