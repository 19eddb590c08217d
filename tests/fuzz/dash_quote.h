/* dash's single_quote() (its src/mystring.c), as `export -p` writes a
 * value: the bytes in '...', each run of ' in "...".  Written out here
 * from dash's code, not taken from the product, for the session parser's
 * unit test and fuzz target.  Header-only. */
#ifndef ROOMBOX_DASH_QUOTE_H
#define ROOMBOX_DASH_QUOTE_H

#include <string.h>

/* s quoted into o (room for 3 * strlen(s) + 2 bytes, no NUL written); the
 * bytes written. */
static inline size_t dash_quote(char *o, const char *s)
{
	size_t n = 0;
	do {
		size_t k = strcspn(s, "'");
		o[n++] = '\'';
		memcpy(o + n, s, k);
		n += k;
		o[n++] = '\'';
		s += k;
		if (*s != '\'')
			break;
		k = strspn(s, "'");
		o[n++] = '"';
		memcpy(o + n, s, k);
		n += k;
		o[n++] = '"';
		s += k;
	} while (*s);
	return n;
}

#endif
