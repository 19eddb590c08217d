/* HTTP/1.x head pieces: see http_lex.h. */
#include "http_lex.h"

#include <string.h>
#include <strings.h>

size_t http_head_end(const char *buf, size_t len)
{
	for (size_t i = 0; i + 1 < len; i++) {
		if (buf[i] != '\n')
			continue;
		if (buf[i + 1] == '\n')
			return i + 2;
		if (i + 2 < len && buf[i + 1] == '\r' && buf[i + 2] == '\n')
			return i + 3;
	}
	return 0;
}

bool http_head_ended(const char *buf, size_t before, size_t len)
{
	size_t from = before > 2 ? before - 2 : 0;
	return http_head_end(buf + from, len - from) != 0;
}

bool http_tchar(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

bool http_name_is(const char *s, size_t n, const char *name)
{
	return strlen(name) == n && strncasecmp(s, name, n) == 0;
}

static bool ows(char c)
{
	return c == ' ' || c == '\t';
}

bool http_field(const char *buf, size_t i, size_t le, size_t *name_len, size_t *va, size_t *vb)
{
	size_t c = i;
	while (c < le && http_tchar(buf[c]))
		c++;
	if (c == i || c >= le || buf[c] != ':')   /* obs-fold, no name, space before ':' */
		return false;
	size_t a = c + 1, b = le;
	while (a < b && ows(buf[a]))
		a++;
	while (b > a && ows(buf[b - 1]))
		b--;
	*name_len = c - i;
	*va = a;
	*vb = b;
	return true;
}

bool http_list_has(const char *v, size_t n, const char *token, size_t *others)
{
	bool found = false;
	size_t i = 0;
	*others = 0;
	while (i < n) {
		while (i < n && (ows(v[i]) || v[i] == ','))
			i++;
		size_t a = i;
		while (i < n && v[i] != ',')
			i++;
		size_t b = i;
		while (b > a && ows(v[b - 1]))
			b--;
		if (b > a && http_name_is(v + a, b - a, token))
			found = true;
		else if (b > a)
			(*others)++;
	}
	return found;
}
