/* A saved session read as variables (see session_vars.h). */
#include "session_vars.h"
#include "shell_env.h"

#include <stdlib.h>
#include <string.h>

/* a character that may stand in a name after its first */
static bool name_char(char c)
{
	return shell_var_name(&c, 1) || (c >= '0' && c <= '9');
}

/* One WORD from *p (up to the line's end, exclusive) decoded into *o: the
 * end of the word, or NULL when a byte stands outside the three forms. */
static const char *word(const char *p, const char *end, char **o)
{
	while (p < end && *p != '\n') {
		if (*p == '\'') {
			const char *q = memchr(p + 1, '\'', (size_t)(end - p - 1));
			if (!q || memchr(p + 1, '\0', (size_t)(q - p - 1)))
				return NULL;
			memcpy(*o, p + 1, (size_t)(q - p - 1));
			*o += q - p - 1;
			p = q + 1;
		} else if (*p == '"') {
			const char *q = p + 1;
			while (q < end && *q == '\'')
				q++;
			if (q == p + 1 || q == end || *q != '"')
				return NULL;
			memcpy(*o, p + 1, (size_t)(q - p - 1));
			*o += q - p - 1;
			p = q + 1;
		} else if (*p == '\\' && end - p >= 2 && p[1] == '\'') {
			*(*o)++ = '\'';
			p += 2;
		} else {
			return NULL;
		}
	}
	return p;
}

/* By name, then by place: the last of each name is the one kept. */
static int by_name(const void *a, const void *b)
{
	const struct session_var *x = a, *y = b;
	int c = strcmp(x->name, y->name);
	return c ? c : (x->line > y->line) - (x->line < y->line);
}

static int fail(struct session_vars *sv)
{
	session_vars_free(sv);
	return -1;
}

int session_vars_parse(const char *s, size_t len, struct session_vars *out)
{
	static const char EXPORT[] = "export ";
	const size_t elen = sizeof(EXPORT) - 1;
	const char *p = s, *end = s + len;
	*out = (struct session_vars){ 0 };
	/* every variable ends a line (or the text): no more of them than
	 * lines, so a usual session takes a few hundred bytes here, not the
	 * 32 KiB of SESSION_VARS_MAX entries (musl maps and unmaps a block
	 * that large on each exec, a TLB flush each time) */
	size_t lines = 1;
	for (const char *q = s; q < end && (q = memchr(q, '\n', (size_t)(end - q))); q++)
		lines++;
	size_t cap = lines < SESSION_VARS_MAX ? lines : SESSION_VARS_MAX;
	out->buf = malloc(len + 1);
	out->v = malloc(cap * sizeof(*out->v));
	if (!out->buf || !out->v)
		return fail(out);
	char *o = out->buf;
	while (p < end) {
		if (*p == '\n') {
			p++;
			continue;
		}
		if ((size_t)(end - p) <= elen || memcmp(p, EXPORT, elen) != 0 ||
		    out->n == cap)
			return fail(out);
		p += elen;
		const char *n0 = p;
		while (p < end && name_char(*p))
			p++;
		if (!shell_var_name(n0, (size_t)(p - n0)))
			return fail(out);
		struct session_var *v = &out->v[out->n];
		v->line = out->n++;
		memcpy(o, n0, (size_t)(p - n0));
		o[p - n0] = '\0';
		v->name = o;
		o += p - n0 + 1;
		v->value = NULL;
		v->value_len = 0;
		if (p < end && *p == '=') {
			char *v0 = o;
			if (!(p = word(p + 1, end, &o)))
				return fail(out);
			*o++ = '\0';
			v->value = v0;
			v->value_len = (size_t)(o - v0 - 1);
		}
		if (p < end && *p++ != '\n')
			return fail(out);
	}
	/* dash evaluates the lines in order: a later export of a name wins
	 * (an `export NAME` without value keeps the value it had) */
	qsort(out->v, out->n, sizeof(*out->v), by_name);
	size_t k = 0;
	for (size_t i = 0; i < out->n; i++) {
		if (k > 0 && strcmp(out->v[k - 1].name, out->v[i].name) == 0) {
			if (out->v[i].value)
				out->v[k - 1] = out->v[i];
			continue;
		}
		out->v[k++] = out->v[i];
	}
	out->n = k;
	return 0;
}

void session_vars_free(struct session_vars *sv)
{
	free(sv->buf);
	free(sv->v);
	*sv = (struct session_vars){ 0 };
}
