/* libFuzzer target: a room server's answer as the preview relay reads it
 * (fcgi-app/preview/preview_frame.c), in pieces, the way bytes come off a socket.
 *
 * Input: byte 0: bit 0 the request was HEAD, bit 1 the exchange may be
 * kept, bits 2-7 the piece size - 1 (1..64 bytes a read); the rest is what
 * the room's server sends.  Whatever it is, the parser must stay inside its
 * buffer; a head it rewrites keeps the body bytes after it unchanged; a
 * kept answer has no Connection field left and a known end; any other
 * (101 to an upgrade aside) has "Connection: close" right before its
 * blank line; an answer after which the room's connection may be used
 * again has a known end and came as HTTP/1.1; and the body never takes
 * more bytes than it is given, nor any once its end was found.  Interim answers (1xx but 101) are dropped. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "fuzz.h"
#include "preview_frame.h"

#define CAP 2048
static char buf[CAP], orig[CAP];

/* Does the head (up to hlen) have a line starting with name (any case)? */
static bool has_field(const char *h, size_t hlen, const char *name)
{
	size_t n = strlen(name);
	for (size_t i = 0; i + n <= hlen; i++)
		if ((i == 0 || h[i - 1] == '\n') && strncasecmp(h + i, name, n) == 0)
			return true;
	return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	bool head_request = data[0] & 1, may_keep = data[0] & 2;
	size_t piece = (size_t)(data[0] >> 2) + 1;
	const char *in = (const char *)data + 1;
	size_t n = size - 1, at = 0, len = 0, head = 0;
	struct frame f;
	int rc = 0;
	/* the head: read on until it is whole or too large */
	while (rc == 0 && at < n) {
		size_t room = CAP - FRAME_SLACK - len, k = n - at < piece ? n - at : piece;
		if (k > room)
			k = room;
		FUZZ_ASSERT(k > 0, "no room left but frame_head asked for more (len %zu)", len);
		memcpy(buf + len, in + at, k);
		len += k;
		at += k;
		memcpy(orig, buf, len);
		size_t before = len;
		rc = frame_head(buf, &len, CAP, head_request, may_keep, &f, &head);
		if (rc == 0) {
			/* unchanged, but for interim (1xx) answers dropped from its start */
			FUZZ_ASSERT(len <= before && len < CAP - FRAME_SLACK, "asked for more at %zu", len);
			FUZZ_ASSERT(memcmp(buf, orig + before - len, len) == 0,
				    "changed bytes before the head was whole");
		} else if (rc > 0) {
			FUZZ_ASSERT(head <= len && len <= CAP, "head %zu len %zu", head, len);
			/* the body bytes that came with the head follow it unchanged */
			size_t body = len - head;
			FUZZ_ASSERT(body <= before && memcmp(buf + head, orig + before - body, body) == 0,
				    "body bytes after the head changed");
			FUZZ_ASSERT(head >= 2 && buf[head - 1] == '\n', "the head does not end a line");
			FUZZ_ASSERT(f.status < 100 || f.status >= 200 || f.status == 101,
				    "an interim answer (%d) passed on", f.status);
			FUZZ_ASSERT(!f.reuse || (f.end != FRAME_CLOSE && memcmp(buf, "HTTP/1.1 ", 9) == 0),
				    "the room's connection reused after an answer with no end, or not HTTP/1.1");
			if (f.keep) {
				FUZZ_ASSERT(may_keep, "kept an exchange that may not be");
				FUZZ_ASSERT(f.end != FRAME_CLOSE, "kept with no end");
				FUZZ_ASSERT(!has_field(buf, head, "connection:") &&
					    !has_field(buf, head, "keep-alive:"), "a hop-by-hop field left");
				FUZZ_ASSERT(memcmp(buf, "HTTP/1.1 ", 9) == 0, "kept, not HTTP/1.1");
			} else if (!(f.status == 101 && !may_keep)) {
				static const char close_end[] = "Connection: close\r\n";
				size_t cl = sizeof(close_end) - 1, blank = buf[head - 2] == '\r' ? 2 : 1;
				FUZZ_ASSERT(head >= cl + blank &&
					    memcmp(buf + head - blank - cl, close_end, cl) == 0,
					    "not kept, and no Connection: close before the blank line");
			}
		}
	}
	if (rc <= 0)
		return 0;
	/* the body, in pieces: the bytes that came with the head first */
	size_t got = len - head;
	bool done = f.done;
	size_t taken = frame_body(&f, buf + head, got);
	FUZZ_ASSERT(taken <= got && (!done || taken == 0), "took %zu of %zu", taken, got);
	while (at < n) {
		size_t k = n - at < piece ? n - at : piece;
		done = f.done;
		size_t t = frame_body(&f, in + at, k);
		FUZZ_ASSERT(t <= k && (!done || t == 0), "took %zu of %zu", t, k);
		FUZZ_ASSERT(f.end == FRAME_CLOSE ? t == k && !f.done : true, "a close-ended answer ended");
		at += k;
		if (t < k)
			FUZZ_ASSERT(f.done, "took fewer bytes than given, and not at the end");
	}
	if (f.broken)
		FUZZ_ASSERT(f.done && f.end == FRAME_CHUNKED, "broken but not a chunked end");
	return 0;
}
