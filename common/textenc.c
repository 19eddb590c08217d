/* Bytes to JSON-safe text.
 *
 * Command output is arbitrary bytes, but a JSON answer must be valid UTF-8.
 * The original service's clients decode output the way JavaScript does (TextDecoder,
 * Buffer.toString), so invalid input is replaced exactly as the WHATWG
 * decoder replaces it: one U+FFFD per "maximal subpart" (Unicode §3.9,
 * table 3-7). Clients comparing our text with theirs then see the same
 * string, including its length in UTF-16 units, which run tags slice by. */
#include "textenc.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char replacement[3] = { '\xEF', '\xBF', '\xBD' };	/* U+FFFD */

/* Length of the sequence a lead byte starts (0: never a lead byte) and the
 * range its second byte must fall in. Narrowing the second byte is what
 * rejects overlongs (E0 80..9F, F0 80..8F), surrogates (ED A0..BF) and
 * values above U+10FFFF (F4 90..BF) at the first byte that proves them bad. */
static size_t utf8_lead(unsigned char b, unsigned char *lo, unsigned char *hi)
{
	*lo = 0x80;
	*hi = 0xBF;
	if (b >= 0xC2 && b <= 0xDF)
		return 2;
	if (b >= 0xE0 && b <= 0xEF) {
		if (b == 0xE0)
			*lo = 0xA0;
		else if (b == 0xED)
			*hi = 0x9F;
		return 3;
	}
	if (b >= 0xF0 && b <= 0xF4) {
		if (b == 0xF0)
			*lo = 0x90;
		else if (b == 0xF4)
			*hi = 0x8F;
		return 4;
	}
	return 0;	/* 80..C1 (continuation, overlong lead), F5..FF */
}

/* Bytes of a valid sequence at in[0..avail), or 0 with *bad set to the
 * length of the maximal subpart to replace (at least 1). */
static size_t utf8_valid_prefix(const unsigned char *in, size_t avail, size_t *bad)
{
	unsigned char lo, hi;
	size_t need, got = 1;

	if (in[0] < 0x80)
		return 1;
	need = utf8_lead(in[0], &lo, &hi);
	if (need == 0) {
		*bad = 1;
		return 0;
	}
	while (got < need && got < avail && in[got] >= lo && in[got] <= hi) {
		lo = 0x80;
		hi = 0xBF;
		got++;
	}
	if (got == need)
		return need;
	/* The byte that broke the sequence starts the next decode. */
	*bad = got;
	return 0;
}

char *utf8_sanitize(const char *in, size_t len, size_t *outlen)
{
	const unsigned char *p = (const unsigned char *)in;
	size_t i = 0, o = 0;
	char *out;

	/* Worst case: every byte is a subpart of its own, 1 byte -> 3. */
	if (len > (SIZE_MAX - 1) / 3)
		return NULL;
	out = malloc(len * 3 + 1);
	if (!out)
		return NULL;
	while (i < len) {
		size_t bad = 0, n = utf8_valid_prefix(p + i, len - i, &bad);

		if (n) {
			memcpy(out + o, p + i, n);
			o += n;
			i += n;
		} else {
			memcpy(out + o, replacement, sizeof(replacement));
			o += sizeof(replacement);
			i += bad;
		}
	}
	out[o] = '\0';
	if (outlen)
		*outlen = o;
	return out;
}

bool utf8_valid(const char *in, size_t len)
{
	const unsigned char *p = (const unsigned char *)in;
	size_t i = 0, bad, n;

	while (i < len) {
		n = utf8_valid_prefix(p + i, len - i, &bad);
		if (n == 0)
			return false;
		i += n;
	}
	return true;
}

char *base64_encode(const unsigned char *in, size_t len)
{
	static const char alphabet[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t groups = len / 3 + (len % 3 != 0), o = 0;
	char *out;

	if (groups > (SIZE_MAX - 1) / 4)
		return NULL;
	out = malloc(groups * 4 + 1);
	if (!out)
		return NULL;
	for (size_t i = 0; i < len; i += 3) {
		size_t left = len - i;
		uint32_t v = (uint32_t)in[i] << 16;

		if (left > 1)
			v |= (uint32_t)in[i + 1] << 8;
		if (left > 2)
			v |= in[i + 2];
		out[o++] = alphabet[(v >> 18) & 63];
		out[o++] = alphabet[(v >> 12) & 63];
		out[o++] = left > 1 ? alphabet[(v >> 6) & 63] : '=';
		out[o++] = left > 2 ? alphabet[v & 63] : '=';
	}
	out[o] = '\0';
	return out;
}

static int base64_value(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

unsigned char *base64_decode(const char *in, size_t len, size_t *outlen)
{
	size_t pad = 0, o = 0;
	unsigned char *out;

	if (len % 4)
		return NULL;
	while (pad < 2 && pad < len && in[len - 1 - pad] == '=')
		pad++;
	out = malloc(len / 4 * 3 + 1);
	if (!out)
		return NULL;
	for (size_t i = 0; i < len; i += 4) {
		uint32_t v = 0;

		for (size_t j = 0; j < 4; j++) {
			bool padding = i + j >= len - pad;
			int d = padding ? 0 : base64_value(in[i + j]);

			if (d < 0) {
				free(out);
				return NULL;
			}
			v = v << 6 | (uint32_t)d;
		}
		out[o++] = (unsigned char)(v >> 16);
		if (i + 4 < len || pad < 2)
			out[o++] = (unsigned char)(v >> 8);
		if (i + 4 < len || pad < 1)
			out[o++] = (unsigned char)v;
	}
	out[o] = '\0';
	*outlen = o;
	return out;
}

/* Byte length and UTF-16 length of the character at s[0..avail). The input
 * should be valid UTF-8; for anything else this still steps forward and
 * counts one unit per stray byte, so callers cannot loop or overrun. */
static size_t utf8_step(const unsigned char *s, size_t avail, size_t *units)
{
	size_t need, n = 1;

	if (s[0] < 0xC0)
		need = 1;
	else if (s[0] < 0xE0)
		need = 2;
	else if (s[0] < 0xF0)
		need = 3;
	else
		need = 4;
	while (n < need && n < avail && (s[n] & 0xC0) == 0x80)
		n++;
	/* Only a full 4-byte sequence is outside the BMP: a surrogate pair. */
	*units = n == 4 ? 2 : 1;
	return n;
}

size_t utf16_length(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, total = 0, units;

	while (i < len) {
		i += utf8_step(p + i, len - i, &units);
		total += units;
	}
	return total;
}

size_t utf8_prefix_for_utf16_units(const char *s, size_t len, size_t units)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, used = 0;

	while (i < len) {
		size_t u, n = utf8_step(p + i, len - i, &u);

		if (u > units - used)
			break;
		used += u;
		i += n;
	}
	return i;
}
