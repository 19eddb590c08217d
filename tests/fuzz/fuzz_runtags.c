/* Fuzz target: run tags (runtags_process), the original service's executeCommands.
 *
 * Input: a message's content.  The product only sees valid UTF-8 there
 * (the JSON parser refuses anything else), so the bytes are first made
 * valid with utf8_sanitize.  The sandbox is this harness's stand-in: a
 * callback that answers at once with a canned result chosen from the
 * command (a failure with and without a message, long output with astral
 * characters and a <run> tag in it, stderr only, nothing at all).
 *
 * Invariants: the result is, byte for byte, what a second implementation
 * written here from the original JavaScript gives (its own trim, its own
 * UTF-16 slice, code point by code point); each command handed to the
 * callback is non-empty, NUL-terminated at its length, valid UTF-8 and
 * trimmed; the result is valid UTF-8, NUL-terminated at its length; a text
 * without "<run>" runs nothing; runtags_count says how many commands ran. */
#include <stdint.h>
#include <string.h>

#include "fuzz.h"
#include "runtags.h"
#include "textenc.h"

static char *dup_bytes(const char *s, size_t n)
{
	char *p = malloc(n + 1);

	FUZZ_ASSERT(p, "out of memory");
	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

/* Long output: the command again and again with a 4-byte character,
 * past the 500 UTF-16 units that are kept. */
static char *long_output(const char *cmd, size_t len, size_t *outlen)
{
	size_t cap = 2048, n = 0;
	char *p = malloc(cap + 1);

	FUZZ_ASSERT(p, "out of memory");
	while (n + len + 4 <= cap) {
		memcpy(p + n, cmd, len);
		n += len;
		memcpy(p + n, "\xF0\x9F\x98\x80", 4);	/* U+1F600 */
		n += 4;
	}
	p[n] = '\0';
	*outlen = n;
	return p;
}

static int canned_exec(void *ctx, const char *cmd, size_t len,
		       struct runtags_exec_result *res)
{
	static const char tag[] = "<run>never run</run> tagged output";
	unsigned *calls = ctx;

	(*calls)++;
	FUZZ_ASSERT(len > 0 && cmd[len] == '\0', "command empty or not terminated");
	FUZZ_ASSERT(fuzz_utf8_valid(cmd, len), "command not UTF-8");
	FUZZ_ASSERT(cmd[0] != ' ' && cmd[len - 1] != ' ' && cmd[0] != '\n' &&
		    cmd[len - 1] != '\n', "command not trimmed");
	switch ((unsigned char)cmd[0] % 6) {
	case 0:
		return -1;	/* no message: "unknown error" */
	case 1:
		res->error = dup_bytes(cmd, len);
		res->error_len = len;
		return -1;
	case 2:
		res->out = long_output(cmd, len, &res->out_len);
		return 0;
	case 3:
		res->err = dup_bytes(cmd, len);
		res->err_len = len;
		return 0;
	case 4:
		res->out = dup_bytes(tag, sizeof(tag) - 1);
		res->out_len = sizeof(tag) - 1;
		return 0;
	default:
		return 0;	/* "[no output]" */
	}
}

/* ---- the reference: the original executeCommands, read again ---- */

struct buf {
	char *p;
	size_t len, cap;
};

static void put(struct buf *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		b->cap = (b->len + n + 1) * 2;
		b->p = realloc(b->p, b->cap);
		FUZZ_ASSERT(b->p, "out of memory");
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void puts_(struct buf *b, const char *s)
{
	put(b, s, strlen(s));
}

/* The code point at s[i] (valid UTF-8) and its byte length. */
static unsigned decode(const char *str, size_t i, size_t *n)
{
	const unsigned char *s = (const unsigned char *)str + i;

	if (s[0] < 0x80) {
		*n = 1;
		return s[0];
	}
	if (s[0] < 0xe0) {
		*n = 2;
		return (s[0] & 0x1fu) << 6 | (s[1] & 0x3fu);
	}
	if (s[0] < 0xf0) {
		*n = 3;
		return (s[0] & 0x0fu) << 12 | (s[1] & 0x3fu) << 6 | (s[2] & 0x3fu);
	}
	*n = 4;
	return (s[0] & 0x07u) << 18 | (s[1] & 0x3fu) << 12 | (s[2] & 0x3fu) << 6 | (s[3] & 0x3fu);
}

/* ECMA-262 WhiteSpace and LineTerminator: what String.prototype.trim drops. */
static bool js_ws(unsigned cp)
{
	return cp == 0x09 || cp == 0x0b || cp == 0x0c || cp == 0x20 || cp == 0xa0 ||
	       cp == 0xfeff || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) ||
	       cp == 0x202f || cp == 0x205f || cp == 0x3000 ||	/* Zs */
	       cp == 0x0a || cp == 0x0d || cp == 0x2028 || cp == 0x2029;
}

/* trim(): [*a, *b) of s[0..len), decoding from the front only. */
static void ref_trim(const char *s, size_t len, size_t *a, size_t *b)
{
	size_t i = 0, n, first = len, last = len;

	while (i < len) {
		unsigned cp = decode(s, i, &n);

		if (!js_ws(cp)) {
			if (first == len)
				first = i;
			last = i + n;
		}
		i += n;
	}
	*a = first;
	*b = first == len ? len : last;
}

/* s.slice(0, 500) in UTF-16 units, a lone high surrogate written U+FFFD. */
static size_t ref_slice(struct buf *b, const char *s, size_t len)
{
	size_t i = 0, n, units = 0;

	while (i < len && units < 500) {
		unsigned cp = decode(s, i, &n);

		if (cp > 0xffff && units == 499) {
			puts_(b, "\xEF\xBF\xBD");
			return 1;
		}
		put(b, s + i, n);
		units += cp > 0xffff ? 2 : 1;
		i += n;
	}
	return units;
}

static bool find_tag(const char *s, size_t len, size_t from, size_t *start, size_t *end)
{
	const char *o = from <= len ? memmem(s + from, len - from, "<run>", 5) : NULL, *c;

	if (!o)
		return false;
	c = memmem(o + 5, len - (size_t)(o + 5 - s), "</run>", 6);
	if (!c)
		return false;
	*start = (size_t)(o - s);
	*end = (size_t)(c - s) + 6;
	return true;
}

static char *reference(const char *text, size_t len, size_t *outlen)
{
	struct buf r = { 0 }, kept = { 0 };
	size_t pos = 0, st, en, a, b;
	unsigned calls = 0;

	put(&r, text, len);
	while (find_tag(text, len, pos, &st, &en)) {
		struct runtags_exec_result res = { 0 };
		const char *inner = text + st + 5;
		char *cmd;
		int rc;

		ref_trim(inner, en - 6 - (st + 5), &a, &b);
		pos = en;
		if (a == b)
			continue;
		cmd = dup_bytes(inner + a, b - a);	/* it may hold U+0000 */
		rc = canned_exec(&calls, cmd, b - a, &res);
		puts_(&r, rc == 0 ? "\n\nOutput (" : "\n\nError (");
		put(&r, inner + a, b - a);
		puts_(&r, "):\n");
		if (rc != 0)
			res.error ? put(&r, res.error, res.error_len) : puts_(&r, "unknown error");
		else if (!ref_slice(&r, res.out ? res.out : "", res.out_len) &&
			 !ref_slice(&r, res.err ? res.err : "", res.err_len))
			puts_(&r, "[no output]");
		free(res.out);
		free(res.err);
		free(res.error);
		free(cmd);
	}
	put(&kept, "", 0);
	pos = 0;
	while (find_tag(r.p, r.len, pos, &st, &en)) {
		put(&kept, r.p + pos, st - pos);
		pos = en;
	}
	put(&kept, r.p + pos, r.len - pos);
	free(r.p);
	ref_trim(kept.p, kept.len, &a, &b);
	memmove(kept.p, kept.p + a, b - a);
	kept.p[b - a] = '\0';
	*outlen = b - a;
	return kept.p;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t len = 0, outlen = 0;
	unsigned calls = 0;
	char *text = utf8_sanitize((const char *)data, size, &len);
	char *out, *want;
	size_t wantlen;

	FUZZ_ASSERT(text, "out of memory");
	out = runtags_process(text, len, canned_exec, &calls, &outlen);
	FUZZ_ASSERT(out, "runtags_process failed");
	FUZZ_ASSERT(out[outlen] == '\0', "result not terminated at its length");
	FUZZ_ASSERT(fuzz_utf8_valid(out, outlen), "result not UTF-8");
	if (!memmem(text, len, "<run>", 5))
		FUZZ_ASSERT(calls == 0, "a command ran from a text without <run>");
	FUZZ_ASSERT(runtags_count(text, len) == calls, "runtags_count %zu, but %u commands ran",
		    runtags_count(text, len), calls);
	want = reference(text, len, &wantlen);
	FUZZ_ASSERT(outlen == wantlen && memcmp(out, want, wantlen) == 0,
		    "result differs from the reference:\n got: %s\nwant: %s", out, want);
	free(want);
	free(out);
	free(text);
	return 0;
}
