/* Run tags: the original service's executeCommands, in C.
 *
 * Why it is written this way:
 *
 * - The original service is JavaScript, so "the same answer" means JavaScript string
 *   semantics on our UTF-8 bytes.  The regex /<run>([\s\S]*?)<\/run>/g only
 *   contains ASCII and [\s\S] matches anything, so a byte search finds the
 *   same matches: at each "<run>", the nearest "</run>" after it (non-greedy,
 *   across lines); the next search starts after that "</run>".  A "<run>"
 *   with no "</run>" after it matches nothing, and neither can any later one.
 * - Every length is explicit (memmem, never strstr): content may hold U+0000.
 * - trim() is JavaScript's, whose whitespace set is wider than isspace().
 * - slice(0, 500) counts UTF-16 code units (textenc.h does the counting).
 *   When the 500th unit is the first half of a surrogate pair, JavaScript
 *   keeps a lone high surrogate, which the original service's JSON.stringify would send
 *   as "\ud83d".  UTF-8 (and so json-c, and our answer) cannot carry a lone
 *   surrogate; we write U+FFFD in its place, which is also what JavaScript
 *   itself produces when it encodes that string as UTF-8 (TextEncoder,
 *   Buffer.from).  The summary is then still 500 units long.
 * - The outputs are appended to a copy of the text and the tags are removed
 *   afterwards over the whole result, outputs included, exactly as the original service
 *   does: a command printing "<run>x</run>" has that stripped, but it is
 *   never run, because the commands were all taken from the original text.
 * - Commands run one after another, in order: a later one may depend on the
 *   files an earlier one wrote. */
#include "runtags.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "textenc.h"

#define TAG_OPEN "<run>"
#define TAG_CLOSE "</run>"
#define TAG_OPEN_LEN (sizeof(TAG_OPEN) - 1)
#define TAG_CLOSE_LEN (sizeof(TAG_CLOSE) - 1)

/* ---- a growable byte buffer; after one failed allocation it stays failed,
 * so callers check once at the end ---- */

struct textbuf {
	char *data;
	size_t len, cap;
	bool failed;
};

static void textbuf_add(struct textbuf *tb, const char *s, size_t n)
{
	if (tb->failed)
		return;
	if (n >= SIZE_MAX - tb->len) {
		tb->failed = true;
		return;
	}
	if (tb->len + n + 1 > tb->cap) {
		size_t cap = tb->cap ? tb->cap : 256;
		char *p;

		while (cap < tb->len + n + 1)
			cap = cap > SIZE_MAX / 2 ? tb->len + n + 1 : cap * 2;
		p = realloc(tb->data, cap);
		if (!p) {
			tb->failed = true;
			return;
		}
		tb->data = p;
		tb->cap = cap;
	}
	memcpy(tb->data + tb->len, s, n);
	tb->len += n;
	tb->data[tb->len] = '\0';
}

static void textbuf_adds(struct textbuf *tb, const char *s)
{
	textbuf_add(tb, s, strlen(s));
}

/* ---- matching ---- */

/* One <run>...</run>: [start, end) is the whole tag, inner the text between. */
struct run_tag {
	size_t start, end;
	size_t inner, inner_len;
};

/* The first tag at or after `from`, as the /g regex finds it. */
static bool run_tag_find(const char *s, size_t len, size_t from, struct run_tag *tag)
{
	const char *open, *close;
	size_t inner;

	if (from > len)
		return false;
	open = memmem(s + from, len - from, TAG_OPEN, TAG_OPEN_LEN);
	if (!open)
		return false;
	inner = (size_t)(open - s) + TAG_OPEN_LEN;
	close = memmem(s + inner, len - inner, TAG_CLOSE, TAG_CLOSE_LEN);
	if (!close)
		return false;
	tag->start = (size_t)(open - s);
	tag->inner = inner;
	tag->inner_len = (size_t)(close - s) - inner;
	tag->end = (size_t)(close - s) + TAG_CLOSE_LEN;
	return true;
}

/* ---- JavaScript's trim() ---- */

/* UTF-8 of the non-ASCII characters trim() removes (ECMA-262 WhiteSpace:
 * U+00A0, U+FEFF and category Zs; LineTerminator: U+2028, U+2029). */
static const char *const js_space_utf8[] = {
	"\xC2\xA0",					/* U+00A0 */
	"\xE1\x9A\x80",					/* U+1680 */
	"\xE2\x80\x80", "\xE2\x80\x81", "\xE2\x80\x82",	/* U+2000.. */
	"\xE2\x80\x83", "\xE2\x80\x84", "\xE2\x80\x85",
	"\xE2\x80\x86", "\xE2\x80\x87", "\xE2\x80\x88",
	"\xE2\x80\x89", "\xE2\x80\x8A",			/* ..U+200A */
	"\xE2\x80\xA8", "\xE2\x80\xA9",			/* U+2028, U+2029 */
	"\xE2\x80\xAF",					/* U+202F */
	"\xE2\x81\x9F",					/* U+205F */
	"\xE3\x80\x80",					/* U+3000 */
	"\xEF\xBB\xBF",					/* U+FEFF */
};

static bool js_space_ascii(unsigned char c)
{
	return c == ' ' || (c >= '\t' && c <= '\r');	/* TAB LF VT FF CR */
}

/* Bytes of the whitespace character that starts at s (0: none). */
static size_t js_space_at(const char *s, size_t avail)
{
	if (avail == 0)
		return 0;
	if (js_space_ascii((unsigned char)s[0]))
		return 1;
	for (size_t i = 0; i < sizeof(js_space_utf8) / sizeof(js_space_utf8[0]); i++) {
		size_t n = strlen(js_space_utf8[i]);

		if (n <= avail && memcmp(s, js_space_utf8[i], n) == 0)
			return n;
	}
	return 0;
}

/* Bytes of the whitespace character that ends at s + len (0: none).  Each
 * sequence above begins with a lead byte, so in valid UTF-8 a suffix equal
 * to one of them is that very character, not the tail of another. */
static size_t js_space_before(const char *s, size_t len)
{
	if (len == 0)
		return 0;
	if (js_space_ascii((unsigned char)s[len - 1]))
		return 1;
	for (size_t i = 0; i < sizeof(js_space_utf8) / sizeof(js_space_utf8[0]); i++) {
		size_t n = strlen(js_space_utf8[i]);

		if (n <= len && memcmp(s + len - n, js_space_utf8[i], n) == 0)
			return n;
	}
	return 0;
}

void runtags_js_trim(const char *s, size_t len, size_t *start, size_t *trimmed_len)
{
	size_t a = 0, b = len, n;

	while ((n = js_space_at(s + a, b - a)) > 0)
		a += n;
	while (b > a && (n = js_space_before(s + a, b - a)) > 0)
		b -= n;
	*start = a;
	*trimmed_len = b - a;
}

/* ---- one command ---- */

/* Append s.slice(0, RUNTAGS_SUMMARY_UNITS); false when that is empty. */
static bool summary_add(struct textbuf *tb, const char *s, size_t len)
{
	size_t n;
	bool split;

	if (!s || len == 0)
		return false;
	n = utf8_prefix_for_utf16_units(s, len, RUNTAGS_SUMMARY_UNITS);
	/* Stopped short of 500 units with text left: the next character is
	 * astral and JavaScript would keep its high surrogate alone. */
	split = n < len && utf16_length(s, n) < RUNTAGS_SUMMARY_UNITS;
	textbuf_add(tb, s, n);
	if (split)
		textbuf_adds(tb, "\xEF\xBF\xBD");	/* U+FFFD, see the top */
	return n > 0 || split;
}

static void exec_result_free(struct runtags_exec_result *res)
{
	free(res->out);
	free(res->err);
	free(res->error);
}

char *runtags_summary(int rc, const struct runtags_exec_result *res, size_t *outlen)
{
	struct textbuf tb = { 0 };

	textbuf_add(&tb, "", 0);	/* never NULL, even when empty */
	if (rc != 0) {
		if (res->error)
			textbuf_add(&tb, res->error, res->error_len);
		else
			textbuf_adds(&tb, "unknown error");
	} else if (!summary_add(&tb, res->out, res->out_len) &&
		   !summary_add(&tb, res->err, res->err_len)) {
		textbuf_adds(&tb, "[no output]");
	}
	if (tb.failed) {
		free(tb.data);
		return NULL;
	}
	if (outlen)
		*outlen = tb.len;
	return tb.data;
}

/* Run one trimmed command and append its "Output" or "Error" section. */
static void command_run(struct textbuf *tb, const char *cmd, size_t cmd_len,
			runtags_exec_fn *exec, void *ctx)
{
	struct runtags_exec_result res = { 0 };
	char *copy = malloc(cmd_len + 1), *summary;
	size_t summary_len = 0;
	int rc;

	if (!copy) {
		tb->failed = true;
		return;
	}
	memcpy(copy, cmd, cmd_len);
	copy[cmd_len] = '\0';
	rc = exec(ctx, copy, cmd_len, &res);
	free(copy);

	summary = runtags_summary(rc, &res, &summary_len);
	if (!summary)
		tb->failed = true;
	textbuf_adds(tb, rc == 0 ? "\n\nOutput (" : "\n\nError (");
	textbuf_add(tb, cmd, cmd_len);
	textbuf_adds(tb, "):\n");
	if (summary)
		textbuf_add(tb, summary, summary_len);
	free(summary);
	exec_result_free(&res);
}

/* ---- the whole text ---- */

/* result.replace(/<run>[\s\S]*?<\/run>/g, "").trim(), into a new buffer. */
static char *tags_remove_and_trim(const char *s, size_t len, size_t *outlen)
{
	struct textbuf kept = { 0 };
	struct run_tag tag;
	size_t pos = 0, start, n;
	char *out;

	textbuf_add(&kept, "", 0);	/* never NULL, even when empty */
	while (run_tag_find(s, len, pos, &tag)) {
		textbuf_add(&kept, s + pos, tag.start - pos);
		pos = tag.end;
	}
	textbuf_add(&kept, s + pos, len - pos);
	if (kept.failed) {
		free(kept.data);
		return NULL;
	}
	runtags_js_trim(kept.data, kept.len, &start, &n);
	memmove(kept.data, kept.data + start, n);
	kept.data[n] = '\0';
	out = kept.data;
	if (outlen)
		*outlen = n;
	return out;
}

char *runtags_process(const char *text, size_t len, runtags_exec_fn *exec,
		      void *ctx, size_t *outlen)
{
	struct textbuf result = { 0 };
	struct run_tag tag;
	size_t pos = 0;
	char *out;

	textbuf_add(&result, text, len);
	/* `text` is never modified, so walking it here finds exactly the
	 * matches the original service collects up front. */
	while (!result.failed && run_tag_find(text, len, pos, &tag)) {
		size_t start, n;

		runtags_js_trim(text + tag.inner, tag.inner_len, &start, &n);
		if (n > 0)
			command_run(&result, text + tag.inner + start, n, exec, ctx);
		pos = tag.end;
	}
	if (result.failed) {
		free(result.data);
		return NULL;
	}
	out = tags_remove_and_trim(result.data, result.len, outlen);
	free(result.data);
	return out;
}

size_t runtags_count(const char *text, size_t len)
{
	struct run_tag tag;
	size_t pos = 0, count = 0;

	while (run_tag_find(text, len, pos, &tag)) {
		size_t start, n;

		runtags_js_trim(text + tag.inner, tag.inner_len, &start, &n);
		count += n > 0;
		pos = tag.end;
	}
	return count;
}
