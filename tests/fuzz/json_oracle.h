/* An RFC 8259 recogniser, written for the fuzz targets only: whether a
 * text is exactly one JSON value in valid UTF-8, so the product's strict
 * parser can be held against a second, independent reading of the RFC.
 * Depth is capped: *deep is set (and the answer is meaningless) when the
 * text nests deeper than max_depth. */
#ifndef ROOMBOX_JSON_ORACLE_H
#define ROOMBOX_JSON_ORACLE_H

#include <stdbool.h>
#include <stddef.h>

#include "fuzz.h"

struct jo {
	const unsigned char *s;
	size_t n, i;
	int depth, max_depth;
	bool deep;
};

static void jo_ws(struct jo *p)
{
	while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' ||
			       p->s[p->i] == '\n' || p->s[p->i] == '\r'))
		p->i++;
}

static bool jo_lit(struct jo *p, const char *w, size_t len)
{
	if (p->n - p->i < len || memcmp(p->s + p->i, w, len) != 0)
		return false;
	p->i += len;
	return true;
}

static bool jo_digits(struct jo *p)
{
	size_t start = p->i;

	while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9')
		p->i++;
	return p->i > start;
}

static bool jo_number(struct jo *p)
{
	if (p->i < p->n && p->s[p->i] == '-')
		p->i++;
	if (p->i < p->n && p->s[p->i] == '0')
		p->i++;
	else if (p->i < p->n && p->s[p->i] >= '1' && p->s[p->i] <= '9')
		jo_digits(p);
	else
		return false;
	if (p->i < p->n && p->s[p->i] == '.') {
		p->i++;
		if (!jo_digits(p))
			return false;
	}
	if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
		p->i++;
		if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-'))
			p->i++;
		if (!jo_digits(p))
			return false;
	}
	return true;
}

static bool jo_hex4(struct jo *p)
{
	for (int k = 0; k < 4; k++, p->i++)
		if (p->i >= p->n || !strchr("0123456789abcdefABCDEF", p->s[p->i]) || !p->s[p->i])
			return false;
	return true;
}

static bool jo_string(struct jo *p)
{
	p->i++;	/* the opening quote */
	while (p->i < p->n) {
		unsigned char c = p->s[p->i];
		size_t k;

		if (c == '"') {
			p->i++;
			return true;
		}
		if (c < 0x20)
			return false;
		if (c == '\\') {
			p->i++;
			if (p->i >= p->n)
				return false;
			c = p->s[p->i++];
			if (c == 'u') {
				if (!jo_hex4(p))
					return false;
			} else if (!strchr("\"\\/bfnrt", c) || !c) {
				return false;
			}
			continue;
		}
		/* one UTF-8 character: its length by the lead byte, then checked */
		k = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 :
		    (c & 0xf8) == 0xf0 ? 4 : 0;
		if (k == 0 || p->n - p->i < k ||
		    !fuzz_utf8_valid((const char *)p->s + p->i, k))
			return false;
		p->i += k;
	}
	return false;
}

static bool jo_value(struct jo *p);

static bool jo_container(struct jo *p, char close, bool object)
{
	if (++p->depth > p->max_depth) {
		p->deep = true;
		return false;
	}
	p->i++;
	jo_ws(p);
	if (p->i < p->n && p->s[p->i] == close) {
		p->i++;
		p->depth--;
		return true;
	}
	for (;;) {
		if (object) {
			if (p->i >= p->n || p->s[p->i] != '"' || !jo_string(p))
				return false;
			jo_ws(p);
			if (p->i >= p->n || p->s[p->i] != ':')
				return false;
			p->i++;
			jo_ws(p);
		}
		if (!jo_value(p))
			return false;
		jo_ws(p);
		if (p->i < p->n && p->s[p->i] == ',') {
			p->i++;
			jo_ws(p);
			continue;
		}
		if (p->i < p->n && p->s[p->i] == close) {
			p->i++;
			p->depth--;
			return true;
		}
		return false;
	}
}

static bool jo_value(struct jo *p)
{
	if (p->i >= p->n)
		return false;
	switch (p->s[p->i]) {
	case '{': return jo_container(p, '}', true);
	case '[': return jo_container(p, ']', false);
	case '"': return jo_string(p);
	case 't': return jo_lit(p, "true", 4);
	case 'f': return jo_lit(p, "false", 5);
	case 'n': return jo_lit(p, "null", 4);
	default:  return jo_number(p);
	}
}

/* True when text[0..len) is one JSON value with optional whitespace around. */
static bool json_oracle_valid(const char *text, size_t len, int max_depth, bool *deep)
{
	struct jo p = { (const unsigned char *)text, len, 0, 0, max_depth, false };
	bool ok;

	jo_ws(&p);
	ok = jo_value(&p);
	jo_ws(&p);
	*deep = p.deep;
	return ok && p.i == p.n;
}

#endif
