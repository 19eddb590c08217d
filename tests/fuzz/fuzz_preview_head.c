/* libFuzzer target: the head of a preview request (fcgi-app/preview/preview_head.c),
 * the first bytes a browser's connection sends through the web server.
 *
 * Input: byte 0 bit 0 says whether a preview_domain ("preview.test") is
 * configured, bit 1 whether the service's credentials are stripped (an
 * Authorization of "Bearer secret"; with bit 2, every Cookie too); the rest
 * is the head.  Whatever it is given, the parser must
 * stay inside the buffer and PREVIEW_HEAD_MAX, hand out only well-formed
 * tokens, rooms and ports, and rewrite to a head that is the original's
 * request line with only its target changed, never longer than
 * head_len + PREVIEW_HEAD_GROWTH: the header lines as they came, or (a kept
 * exchange) without Connection and Keep-Alive, nothing added.
 * Stripped, the head is the same but for whole lines left out, none of
 * them a Cookie or an Authorization with the API's token anywhere in it.
 * A head with a CR not before an LF is never OK. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "fuzz.h"
#include "preview_head.h"
#include "roomid.h"

static char out[PREVIEW_HEAD_MAX + PREVIEW_HEAD_GROWTH];
static char strip_out[PREVIEW_HEAD_MAX + PREVIEW_HEAD_GROWTH];

static int is_secret(void *ctx, const char *v, size_t len)
{
	(void)ctx;
	return len == 13 && strncasecmp(v, "bearer secret", 13) == 0;
}

/* Does an Authorization value hold the API's token anywhere: a word
 * (between spaces, tabs and commas) "secret" in any case? */
static int has_secret_word(const char *v, size_t n)
{
	for (size_t i = 0; i < n;) {
		size_t w = 0;
		while (i + w < n && v[i + w] != ' ' && v[i + w] != '\t' && v[i + w] != ',')
			w++;
		if (w == 6 && strncasecmp(v + i, "secret", 6) == 0)
			return 1;
		i += w ? w : 1;
	}
	return 0;
}

/* The line o[0..len) is a field called name (spaces before ':' allowed);
 * its value, trimmed, in *v and *vlen. */
static int field_named(const char *o, size_t len, const char *name, const char **v, size_t *vlen)
{
	size_t n = strlen(name), i, e = len;
	if (len < n || strncasecmp(o, name, n) != 0)
		return 0;
	for (i = n; i < len && (o[i] == ' ' || o[i] == '\t'); i++)
		;
	if (i >= len || o[i] != ':')
		return 0;
	for (i++; i < e && (o[i] == ' ' || o[i] == '\t'); i++)
		;
	while (e > i && (o[e - 1] == '\n' || o[e - 1] == '\r' || o[e - 1] == ' ' || o[e - 1] == '\t'))
		e--;
	*v = o + i;
	*vlen = e - i;
	return 1;
}

/* o[0..n) is full[0..nfull) with whole lines left out, and what is left
 * has no Cookie (with cookies) and no Authorization of the API's. */
static void check_stripped(const char *o, size_t n, const char *full, size_t nfull, int cookies)
{
	size_t j = 0;
	FUZZ_ASSERT(n <= nfull, "stripped %zu, longer than %zu", n, nfull);
	for (size_t i = 0; i < n;) {
		const char *nl = memchr(o + i, '\n', n - i), *v;
		size_t len = nl ? (size_t)(nl - (o + i)) + 1 : n - i, vlen;
		for (;;) {   /* the same line, further on in the full head */
			FUZZ_ASSERT(j < nfull, "a line of the stripped head is not in the full one");
			const char *fl = memchr(full + j, '\n', nfull - j);
			size_t flen = fl ? (size_t)(fl - (full + j)) + 1 : nfull - j;
			int same = flen == len && memcmp(full + j, o + i, len) == 0;
			j += flen;
			if (same)
				break;
		}
		if (i > 0) {
			FUZZ_ASSERT(!cookies || !field_named(o + i, len, "cookie", &v, &vlen), "a Cookie went on");
			FUZZ_ASSERT(!field_named(o + i, len, "authorization", &v, &vlen) ||
				    !has_secret_word(v, vlen), "the API's Authorization went on");
		}
		i += len;
	}
}

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
	for (size_t i = 0; i < h.head_len; i++)   /* a line end to some servers */
		FUZZ_ASSERT(buf[i] != '\r' || (i + 1 < h.head_len && buf[i + 1] == '\n'), "a bare CR at %zu", i);
	FUZZ_ASSERT(preview_token_valid(h.token, strlen(h.token)), "token '%s'", h.token);
	FUZZ_ASSERT(h.target_off + h.target_len <= h.rest_off && h.rest_off < h.head_len,
		    "target %zu+%zu, rest %zu, head %zu", h.target_off, h.target_len, h.rest_off, h.head_len);
	if (h.host_style) {
		FUZZ_ASSERT(domain != NULL, "host-style without a domain");
		FUZZ_ASSERT(h.port >= 1 && h.port <= 65535, "port %d", h.port);
		FUZZ_ASSERT(room_id_valid(h.room), "room '%s'", h.room);
	}
	size_t n = preview_head_rewrite(&h, buf, NULL, out, sizeof(out));
	struct preview_strip strip = { !!(data[0] & 4), is_secret, NULL };
	if (data[0] & 2) {
		size_t n2 = preview_head_rewrite(&h, buf, &strip, strip_out, sizeof(strip_out));
		FUZZ_ASSERT(n2 > 0 || n == 0, "stripped head does not fit");
		check_stripped(strip_out, n2, out, n, strip.cookies);
	}
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
	FUZZ_ASSERT(n <= h.head_len + 1, "kept, and something added");
	for (size_t i = 1; i < n; i++)
		if (out[i - 1] == '\n')
			FUZZ_ASSERT(strncasecmp(out + i, "connection:", 11) != 0 &&
				    strncasecmp(out + i, "keep-alive:", 11) != 0 &&
				    strncasecmp(out + i, "transfer-encoding:", 18) != 0 &&
				    strncasecmp(out + i, "upgrade:", 8) != 0, "kept with a field it cannot keep");
	return 0;
}
