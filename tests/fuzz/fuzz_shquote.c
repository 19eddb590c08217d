/* Fuzz target: single-quoting for /bin/sh (common/shquote.c).
 *
 * Input: any bytes, quoted whole (refused if they hold a NUL byte) and up
 * to their first NUL (always quotable).
 *
 * Invariants: a refusal comes exactly when there is a NUL byte, with a
 * message, and leaves the buffer "".  A quoted word has the length
 * shquote_len announced, ends at its NUL, is the same from shquote and
 * shquote_alloc, and a buffer one byte short is refused without a write
 * past it (ASan).  Read back by a second reader of sh's quoting, written
 * here from the shell's token rules rather than taken from the product,
 * the word gives the input again, and no byte of it stands where the
 * shell would interpret it: outside '...' only a backslash escape may
 * appear (never of a newline, which the shell would drop), and the word
 * ends outside any quote. */
#include <stdint.h>
#include <string.h>

#include "fuzz.h"
#include "shquote.h"

/* The bytes the shell makes of word (one word, as `sh -c 'cmd WORD'`
 * would see it) into out (at least strlen(word) bytes); their number, or
 * -1 when some byte would be interpreted or a quote is left open. */
static long sh_unquote(const char *word, char *out)
{
	long n = 0;
	bool quoted = false;

	for (const char *p = word; *p; p++) {
		if (quoted) {
			if (*p == '\'')
				quoted = false;
			else
				out[n++] = *p;
		} else if (*p == '\'') {
			quoted = true;
		} else if (*p == '\\' && p[1] && p[1] != '\n') {
			out[n++] = *++p;
		} else {
			return -1;   /* $ ` " space glob, a bare letter: all the shell's */
		}
	}
	return quoted ? -1 : n;
}

static void check_word(const char *s, size_t n)
{
	char err[160] = "", *q, *back, *shortbuf;
	size_t len = shquote_len(s, n);
	ssize_t r;
	long m;

	q = shquote_alloc(s, n, err, sizeof(err));
	FUZZ_ASSERT(q, "%zu NUL-free bytes refused: %s", n, err);
	FUZZ_ASSERT(strlen(q) == len, "length %zu, announced %zu", strlen(q), len);
	back = malloc(len + 1);
	FUZZ_ASSERT(back, "out of memory");
	m = sh_unquote(q, back);
	FUZZ_ASSERT(m >= 0, "the shell would interpret a byte of %s", q);
	FUZZ_ASSERT((size_t)m == n && !memcmp(back, s, n),
		    "the shell reads %ld bytes back from %zu", m, n);

	/* the exact size and one byte short, each its own allocation */
	r = shquote(back, len + 1, s, n, err, sizeof(err));
	FUZZ_ASSERT(r == (ssize_t)len && !strcmp(back, q), "shquote differs from shquote_alloc");
	free(back);
	shortbuf = malloc(len);
	FUZZ_ASSERT(shortbuf, "out of memory");
	err[0] = '\0';
	r = shquote(shortbuf, len, s, n, err, sizeof(err));
	FUZZ_ASSERT(r == -1 && err[0] && shortbuf[0] == '\0', "a short buffer taken");
	free(shortbuf);
	free(q);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data;
	const char *nul = memchr(s, '\0', size);
	char err[160] = "", buf[8] = "x";

	if (nul) {
		FUZZ_ASSERT(!shquote_alloc(s, size, err, sizeof(err)) && err[0],
			    "a NUL byte taken into a word");
		FUZZ_ASSERT(shquote(buf, sizeof(buf), s, size, err, sizeof(err)) == -1 &&
			    buf[0] == '\0', "a NUL byte taken into a word");
		check_word(s, (size_t)(nul - s));
	} else {
		check_word(s, size);
	}
	return 0;
}
