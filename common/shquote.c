/* Single-quoting for /bin/sh (see shquote.h).
 *
 * Inside '...' the shell interprets no byte but the closing quote, so a
 * word is the input between single quotes, each ' in it written '\''
 * (close, an escaped quote, open again).  A NUL byte is refused, never
 * dropped or cut at: the shell would see a shorter word than the caller
 * meant, and an execve string ends there anyway. */
#include "shquote.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "errbuf.h"

size_t shquote_len(const char *s, size_t n)
{
	size_t len = n + 2;

	for (size_t i = 0; i < n; i++)
		if (s[i] == '\'')
			len += 3;
	return len;
}

/* What is wrong with s as a word: a NUL byte, or a length no buffer holds. */
static int shquote_check(const char *s, size_t n, char *err, size_t errlen)
{
	const char *nul = memchr(s, '\0', n);

	if (nul)
		return errorf(err, errlen, "shell quoting: a NUL byte at offset %zu "
			      "(a shell word cannot hold one)", (size_t)(nul - s));
	if (n > (SIZE_MAX - 3) / 4)
		return errorf(err, errlen, "shell quoting: %zu bytes is too long", n);
	return 0;
}

ssize_t shquote(char *buf, size_t size, const char *s, size_t n, char *err, size_t errlen)
{
	size_t len;
	char *o = buf;

	if (size > 0)
		buf[0] = '\0';
	if (shquote_check(s, n, err, errlen) < 0)
		return -1;
	len = shquote_len(s, n);
	if (len >= size || len > SSIZE_MAX)
		return errorf(err, errlen, "shell quoting: %zu bytes need %zu, the buffer has %zu",
			      n, len + 1, size);
	*o++ = '\'';
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '\'') {
			memcpy(o, "'\\''", 4);
			o += 4;
		} else {
			*o++ = s[i];
		}
	}
	*o++ = '\'';
	*o = '\0';
	return (ssize_t)len;
}

char *shquote_alloc(const char *s, size_t n, char *err, size_t errlen)
{
	size_t size;
	char *buf;

	if (shquote_check(s, n, err, errlen) < 0)
		return NULL;
	size = shquote_len(s, n) + 1;
	buf = malloc(size);
	if (!buf) {
		errorf(err, errlen, "shell quoting: %zu bytes: %s", size, strerror(errno));
		return NULL;
	}
	if (shquote(buf, size, s, n, err, errlen) < 0) {
		free(buf);
		return NULL;
	}
	return buf;
}
