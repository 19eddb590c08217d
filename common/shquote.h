/* Single-quoting for /bin/sh: the one place that turns bytes into a shell
 * word.  Whatever roombox writes into a shell script from a request (a
 * command, a working directory, a variable's value) passes through here,
 * so the boundary between data and script is drawn once.  Shared by
 * roombox-fcgi (glibc) and roombox-helper (musl): libc only. */
#ifndef ROOMBOX_SHQUOTE_H
#define ROOMBOX_SHQUOTE_H

#include <stddef.h>
#include <sys/types.h>

/* The bytes the quoted form of n bytes with q single quotes among them
 * takes, without the terminating NUL: 2 + n + 3q.  The worst case (all
 * quotes) is 4n + 2. */
size_t shquote_len(const char *s, size_t n);

/* s[0..n) as one /bin/sh word, 'like'\''this', into buf (size bytes, NUL
 * terminated).  Its length, or -1 with err set and buf left as "" (when
 * size > 0): s holds a NUL byte (no shell word can), or buf is too small.
 * Every byte but the single quote stands inside single quotes, where the
 * shell takes it as it is: no $, `, \, newline or glob is interpreted. */
ssize_t shquote(char *buf, size_t size, const char *s, size_t n, char *err, size_t errlen);

/* The same, malloc'd.  NULL with err set. */
char *shquote_alloc(const char *s, size_t n, char *err, size_t errlen);

#endif
