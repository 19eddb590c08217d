/* What the fuzz targets share: a failed invariant is a crash libFuzzer
 * reports (with the input), and an independent UTF-8 check to hold the
 * product's output against.  Header-only, so a target is one .c file. */
#ifndef ROOMBOX_FUZZ_H
#define ROOMBOX_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

/* An invariant: report what broke and abort, so libFuzzer saves the input. */
#define FUZZ_ASSERT(cond, ...)                                              \
	do {                                                                \
		if (!(cond)) {                                              \
			fprintf(stderr, "fuzz: %s:%d: invariant `%s` broken: ", \
				__FILE__, __LINE__, #cond);                 \
			fprintf(stderr, __VA_ARGS__);                       \
			fputc('\n', stderr);                                \
			abort();                                            \
		}                                                           \
	} while (0)

/* RFC 3629 UTF-8: no overlong forms, no surrogates, nothing past U+10FFFF.
 * Written out again here rather than taken from the product, so a bug
 * there cannot hide itself. */
static inline bool fuzz_utf8_valid(const char *str, size_t len)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0;

	while (i < len) {
		unsigned c = s[i], need, cp, min;

		if (c < 0x80) {
			i++;
			continue;
		}
		if ((c & 0xe0) == 0xc0) {
			need = 1; cp = c & 0x1f; min = 0x80;
		} else if ((c & 0xf0) == 0xe0) {
			need = 2; cp = c & 0x0f; min = 0x800;
		} else if ((c & 0xf8) == 0xf0) {
			need = 3; cp = c & 0x07; min = 0x10000;
		} else {
			return false;
		}
		if (len - i <= need)
			return false;
		for (unsigned k = 1; k <= need; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return false;
			cp = (cp << 6) | (s[i + k] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += need + 1;
	}
	return true;
}

#endif
